/* The run's configuration: what the options mean once the catalog and the
 * nodes are known.  One function, cfs_run_config_make(), turns the options,
 * the catalog's sample count and the node's place among the nodes into
 * everything the plan depends on (sampler parameters, epochs, every node's
 * trainer ranks, tier capacities, the tracker's reordering window), so that
 * the mount, clairfs-plan, clairfs-bench and the nodes' agreement check all
 * plan the same run from the same options.
 *
 * Defaults that need more than the options are settled here and only here:
 *  - ranks: ranks= gives this node's trainer ranks; without it node j of N
 *    serves the contiguous block cfs_plan_default_ranks(world, N, j).  Every
 *    node's ranks are those blocks unless the caller knows better (the
 *    mount's start-up meeting gathers each node's own).
 *  - RAM tier: ram= bytes, but never more than CFS_RAM_CAP_PCT % of the
 *    memory this process may still use (node_memory.h: MemAvailable, or
 *    the cgroup's room when smaller); a larger ram= is cut to that cap and
 *    flagged (ram_capped) for the caller to warn once.  Without ram=,
 *    CFS_RAM_SHARE_PCT % of that memory, never more than the dataset as
 *    the tier counts it (dataset_bytes).  On a distributed mount every node
 *    must plan with the same figure, and what a node has available differs
 *    from node to node by the minute: there the share is of the cgroup's
 *    memory.max (a Slurm job gets the same on every node), else of
 *    MemTotal, rounded down to a whole GiB.  A caller that gives no memory
 *    (clairfs-plan, clairfs-bench: they model a mount rather than run one)
 *    gets the options' ram (CFS_RAM_FALLBACK, options.h).  ram_note says, in words, what the figure came
 *    from, for the mount's log.
 *
 *    Why half is safe (docs/memory.md): staged RAM-tier files are clean
 *    page cache of the mount's inodes, which the kernel reclaims under
 *    pressure (within the cgroup too, before its OOM killer) and clairfs
 *    then reads again from the source; only files fetched but not yet
 *    staged are the daemon's own memory, and half leaves the other half to
 *    the trainer even if the whole tier were in that state.
 *  - SSD tier: none without ssd_dir; ssd= bytes; without ssd=, half the free
 *    space of the ssd_dir directory (statvfs), a node-local figure that the
 *    nodes therefore do not compare.
 *  - window: the reordering slack of the position tracker, default
 *    16 x batch x this node's rank count files, clamped to [1024, 2^24]
 *    (T workers x P batches of B per rank are commonly 4 x 2 x B; twice
 *    that per local rank).
 *  - distributed: more than one node and peers on (no_peers off): one plan
 *    over every node.  With no_peers each node plans alone, for its ranks.
 *
 * Pure but for the statvfs of ssd_dir: no FUSE, no MPI. */
#ifndef CLAIRFS_RUN_CONFIG_H
#define CLAIRFS_RUN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/catalog.h"
#include "clairfs/plan.h"
#include "clairfs/sampler.h"

struct cfs_options;
struct cfs_node_memory;

#define CFS_RAM_SHARE_PCT 50u              /* default RAM tier: this share of usable memory */
#define CFS_RAM_CAP_PCT 90u                /* ram= is cut to this share of usable memory */

#define CFS_WINDOW_MIN 1024u
#define CFS_WINDOW_MAX (1u << 24)

struct cfs_run_inputs {
    const struct cfs_options *opts; /* must outlive the configuration (paths are borrowed) */
    uint64_t nsamples;              /* cfs_catalog_sample_count() */
    uint32_t nodes, node;           /* MPI size and rank; 1 and 0 for a single node */
    const char *ssd_dir;            /* the SSD tier's directory, {rank} expanded; NULL: none */
    /* Every node's trainer ranks (nodes entries), or NULL: default blocks,
     * this node's from ranks=. */
    const struct cfs_rank_range *node_ranks;
    uint32_t window;                /* reordering slack in files; 0: the default */
    /* The node's memory, or NULL: the RAM default is CFS_RAM_FALLBACK and
     * ram= is taken as given. */
    const struct cfs_node_memory *memory;
    uint64_t dataset_bytes;         /* the dataset as the RAM tier charges it; 0: unknown */
};

struct cfs_run_config {
    bool seeded;                       /* seed= given: plan and prefetch; else reactive LRU */
    struct cfs_sampler_params sampler; /* list_path borrowed from the options */
    enum cfs_order order;
    uint32_t world;
    uint32_t start_epoch, epochs;      /* the plan covers epochs [start_epoch, epochs) */
    uint32_t nodes, node;
    bool distributed;                  /* nodes > 1 and !no_peers */
    bool no_peers;
    struct cfs_rank_range ranks;       /* this node's trainer ranks */
    struct cfs_rank_range *node_ranks; /* nodes entries, every node's (owned) */
    uint64_t ram, ssd;                 /* tier capacities in bytes */
    bool ram_derived;                  /* no ram=: derived from the node (ram_note says how) */
    bool ram_capped;                   /* ram= was above the cap and cut to it */
    char ram_note[640];               /* what ram came from, for the log */
    bool ssd_from_free_space;          /* ssd is half of ssd_dir's free space (no ssd=) */
    uint32_t window;                   /* reordering slack in files, never 0 */
};

/* Fills *out from in.  0, or -EINVAL (bad options or inputs) / -errno
 * (statvfs of ssd_dir) / -ENOMEM with a one-line message in err.  On
 * success free it with cfs_run_config_free(). */
int cfs_run_config_make(const struct cfs_run_inputs *in, struct cfs_run_config *out, char *err,
                        size_t errlen);
void cfs_run_config_free(struct cfs_run_config *c);

/* The planner's parameters for this node: the whole cluster when
 * distributed, else this node alone with its ranks.  sizes: the catalog's
 * nsamples sizes (borrowed).  The plan covers a window of the run's epochs,
 * [start_epoch, cfs_run_config_plan_end()): the next window is planned
 * from its own start_epoch when the data path comes to it. */
void cfs_run_config_plan_params(const struct cfs_run_config *c, const uint64_t *sizes,
                                struct cfs_plan_params *out);

/* The default reordering window for `batch` and a node of `rank_count`
 * trainer ranks (0 counts as 1). */
uint32_t cfs_run_default_window(uint32_t batch, uint32_t rank_count);

/* The end (exclusive) of the window of epochs planned from c->start_epoch:
 * the fewest epochs, at least CFS_PLAN_WINDOW_MIN, over which a node is
 * expected to read twice its tiers' capacity in distinct bytes (beyond
 * that, what the tiers hold and the order they are filled in are decided
 * by the reads inside the window: a file whose next read lies beyond it
 * is evicted first whatever its distance); the run's end when the window
 * would reach it, and with sizes NULL.  The same on every node. */
#define CFS_PLAN_WINDOW_MIN 4u
uint32_t cfs_run_config_plan_end(const struct cfs_run_config *c, const uint64_t *sizes);

#endif
