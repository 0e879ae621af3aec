/* Private to the prefetcher (prefetch.c, prefetch_track.c,
 * prefetch_stage.c): the position tracker, which is the only part that sees
 * the planner, and the page-cache stager.
 *
 * plan.h and cache.h both name their tiers CFS_TIER_RAM/CFS_TIER_SSD (with
 * different values), so no file can include both: prefetch_track.c includes
 * plan.h and speaks to prefetch.c in the PF_TIER_* values below. */
#ifndef CLAIRFS_PREFETCH_I_H
#define CLAIRFS_PREFETCH_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "clairfs/sampler.h"

#define PF_NEVER UINT64_MAX

enum { PF_TIER_NONE = 0, PF_TIER_RAM = 1, PF_TIER_SSD = 2 };

/* What the planner needs, besides the sampler: the node's ranks, epochs
 * and tier capacities. */
struct cfs_rank_range;

struct pf_track_params {
    uint64_t n;                  /* samples */
    const uint64_t *sizes;       /* n sizes (copied by the planner) */
    struct cfs_sampler_params sampler;
    uint32_t world;
    uint32_t rank_first, rank_count; /* count 0: all ranks (one node) */
    /* Distributed (nodes > 1): every node's ranks (NULL: default blocks),
     * the plan assigns owners over all nodes and details `node`; the
     * rank_* fields are then ignored. */
    uint32_t nodes, node;
    const struct cfs_rank_range *ranks;
    uint32_t start_epoch, epochs;
    uint64_t ram, ssd;
    uint32_t window; /* reordering slack in files; 0: a default from batch and ranks */
};

struct pf_track;

/* Builds the plan and materialises the first two epochs. */
int pf_track_create(const struct pf_track_params *p, struct pf_track **out, char *err,
                    size_t errlen);
void pf_track_destroy(struct pf_track *t);

struct pf_obs {
    bool hit;           /* expected now (within the window around the position) */
    bool epoch_changed; /* the tracker moved to another epoch */
    uint32_t epoch;     /* absolute epoch after the observation */
};
/* An open of sample s (s >= n or CFS_NO_SAMPLE: unexpected). */
void pf_track_open(struct pf_track *t, uint32_t s, struct pf_obs *out);
/* Absolute stream position of the next read of s after the trainer's
 * position, PF_NEVER when there is none.  O(1) but for samples read several
 * times in one epoch; takes the tracker's leaf lock. */
uint64_t pf_track_next_use(struct pf_track *t, uint32_t s);
/* The trainer's position (first unconsumed slot of the current epoch, as a
 * count), the current absolute epoch, and a generation that changes when
 * the position jumps (set_epoch). */
void pf_track_position(struct pf_track *t, uint64_t *pos, uint32_t *epoch, uint64_t *gen);
/* Sample at absolute position pos when it lies in the materialised window
 * (current and next epoch): 1 and *s, *consumed (already opened); 0 beyond. */
int pf_track_sample_at(struct pf_track *t, uint64_t pos, uint32_t *s, bool *consumed);
/* Resynchronise to the start of absolute epoch e: 0, -ERANGE outside the
 * plan, -ENOMEM. */
int pf_track_set_epoch(struct pf_track *t, uint32_t e);
uint32_t pf_track_window(const struct pf_track *t);

/* Planner facts, by sample. */
int pf_track_tier(const struct pf_track *t, uint32_t s);
const uint32_t *pf_track_order(const struct pf_track *t, int tier, uint64_t *count);
uint64_t pf_track_tier_bytes(const struct pf_track *t, int tier);
uint64_t pf_track_stream_len(const struct pf_track *t);
/* The node that holds s for its peers (PF_NO_NODE: none, the PFS) and its
 * tier there (PF_TIER_*), and the relative epoch from which it holds it
 * (the cluster's first read of s: the owner stages it then). */
#define PF_NO_NODE UINT32_MAX
uint32_t pf_track_owner(const struct pf_track *t, uint32_t s, int *tier, uint32_t *from_epoch);
uint32_t pf_track_node(const struct pf_track *t);
uint32_t pf_track_start_epoch(const struct pf_track *t);

/* The CLOCK_REALTIME instant `ns` nanoseconds from now, for
 * pthread_cond_timedwait. */
static inline struct timespec pf_deadline(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t end = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(end / 1000000000u);
    ts.tv_nsec = (long)(end % 1000000000u);
    return ts;
}

/* ---- the page-cache stager (prefetch_stage.c; design in prefetch.h) */

struct cfs_cache;
struct cfs_metrics;
struct cfs_kernel_ops;
struct pf_stager;

struct pf_stager_params {
    struct cfs_cache *cache;
    struct cfs_metrics *metrics;
    uint32_t nentries; /* ids 0 .. nentries-1 */
    const struct cfs_kernel_ops *ops;
    void *ops_arg;
    /* May entry id be staged now (a plan exists, a regular file that is
     * not kept for peers)?  Called without any stager or cache lock. */
    bool (*eligible)(void *arg, uint32_t id);
    /* Zombies were invalidated: room is free in the RAM tier. */
    void (*freed)(void *arg);
    /* The tiers' bytes changed: refresh the gauges. */
    void (*gauges)(void *arg);
    void *arg;
};

/* Starts the stager thread. */
int pf_stager_create(const struct pf_stager_params *p, struct pf_stager **out);
/* Ask for entry id to be staged (deduplicated; cheap, any thread). */
void pf_stager_queue(struct pf_stager *s, uint32_t id);
/* Zombies wait (the cache's kernel_drop callback: only signals). */
void pf_stager_kick(struct pf_stager *s);
/* See cfs_prefetch_kernel_stop(): 0 once the thread is joined, -ETIMEDOUT. */
int pf_stager_stop(struct pf_stager *s, double timeout);
/* Joins the thread if needed (it must have been stopped or be stoppable). */
void pf_stager_destroy(struct pf_stager *s);

#endif
