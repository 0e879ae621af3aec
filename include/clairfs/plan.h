/* The planner (docs/design.md, "The facts the design rests on", facts 5
 * and 6): from the sampler's order, what each node will read, how often
 * and when; which files it keeps in which tier; and which node holds each
 * file for its peers.
 *
 * Files are named by their dataset index ("sample", 0..n-1); the catalog
 * maps a sample to its entry.  Everything here is pure computation: no FUSE,
 * no MPI, no I/O.
 *
 * The node's access stream.  Node j serves the trainer ranks
 * [first, first+count) (cfs_plan_default_ranks(): contiguous blocks, as
 * even as possible, lower nodes take the remainder).  Synchronous
 * data-parallel training advances its ranks in lockstep, so the stream of
 * epoch e is, for step s = 0, 1, ...: the s-th index of each local rank in
 * ascending rank order (a rank whose epoch is shorter than s+1 is skipped).
 * A *position* numbers the stream across epochs start_epoch..epochs-1 from 0;
 * cfs_plan_epoch_start() gives where each epoch begins.
 *
 * The global assignment (what every node holds, computed identically on
 * every node from the seed, no communication):
 *  1. Every node's read counts and first uses are derived in one sweep.
 *     A node's *preference* for a file: more reads first, then an earlier
 *     first epoch of use, then the lower index (counts and epochs saturate
 *     at 255 here, so that the sweep's random accesses stay in cache).
 *  2. Owners (de-duplication, so the aggregate cache holds as much distinct
 *     data as it can): files in order of total reads over all nodes (desc),
 *     then the best reader's preference, then index.  Each file goes to the
 *     node that prefers it most (ties: the lower node) if that node has room,
 *     else to the reader with room that prefers it most, else to the node
 *     with the most free room; when no node has room the file has no owner
 *     and is read from the PFS.  An owner keeps it for the run.  A window
 *     planned with its previous window (prev, below) first gives each file
 *     read in the epoch the two share the previous owner, or none (plan.c).
 *     The room is
 *     given in two passes: first each node's fair share (the dataset / nodes
 *     plus the largest file, at most ram+ssd), then the rest of ram+ssd for
 *     what is left: a node whose tiers are all owned files has no room for
 *     its own reads of the others' files, evicts owned ones to make it, and
 *     its peers then find them gone, to be read from the PFS again
 *     (test_mpi_mount.sh placement checks the PFS bytes per epoch).
 *  3. Each node then places, in its order of preference (owned files it
 *     never reads last, by index), its
 *     owned files and, in the room the owned ones leave, replicas of the
 *     files it reads most: RAM first, then SSD; a file that does not fit in
 *     the remaining room is passed over and smaller later files may fit.
 *  On one node this is plain frequency pinning: the most-read files, ties by
 *  first epoch of use, RAM first.  Peers fetch from the owner.  The
 *  prefetch order of a tier is by exact first use in cluster time (the
 *  nodes step in lockstep: a read's time is its epoch plus the fraction of
 *  its node's epoch stream before it), an owned file by the first read of
 *  ANY node, so that an owner stages what its peers read before they ask,
 *  not when its own trainer comes to it.
 *
 * Next use.  A walker (cfs_plan_walk) generates the stream epoch by epoch
 * and keeps two epochs materialised; together with a per-file bitmap of the
 * epochs in which the node reads the file, it answers "next access of f after
 * the current position" exactly when that access lies in the current or the
 * next epoch, and as the start of the right epoch beyond (exact = false).
 * A consumer that orders by next use (Belady) re-queries its entries when
 * the walk enters a new epoch (cfs_plan_walk_next() reports it).
 *
 * Memory: 27 + E/8 bytes per file (E/8: the epoch bitmap) for the planned
 * node and the owner map, besides the caller's sizes; while the plan is
 * built, another 22 bytes per file (26 beyond 255 epochs) and 1 per file and
 * node (2 when more than 8 epochs are planned).  The mount plans a window of
 * epochs (run_config.h): ImageNet-22k, 14.2 M files on 16 nodes, a window of
 * 4 epochs: 0.89 GiB at the peak of clairfs-plan, sizes and simulation
 * included.  The walker adds 12 bytes per file and two epochs of the node's
 * stream.  Time: one permutation
 * and one counted read per read of the run (every node's), then a few
 * sequential passes per node over the files. */
#ifndef CLAIRFS_PLAN_H
#define CLAIRFS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/sampler.h"
#include "clairfs/tier.h"

#define CFS_POS_NEVER UINT64_MAX
#define CFS_NODE_NONE UINT32_MAX

/* A node's trainer ranks: first, first + stride, ... (count of them).
 * Stride 0 or 1 is one block, as torchrun --nnodes and srun's default
 * distribution place them; srun --distribution=cyclic and mpirun --map-by
 * node deal the ranks round robin, node k of N serving k, k + N, ...
 * (stride N). */
struct cfs_rank_range {
    uint32_t first;
    uint32_t count;
    uint32_t stride;
};

/* The l-th rank of r. */
static inline uint32_t cfs_rank_at(struct cfs_rank_range r, uint32_t l)
{
    return r.first + l * (r.stride ? r.stride : 1);
}

/* Whether rank is one of r's. */
static inline bool cfs_rank_in(struct cfs_rank_range r, uint32_t rank)
{
    uint32_t step = r.stride ? r.stride : 1;
    return rank >= r.first && (rank - r.first) % step == 0 && (rank - r.first) / step < r.count;
}

/* r's last rank (first - 1 when r is empty, as a range A-B reads). */
static inline uint32_t cfs_rank_last(struct cfs_rank_range r)
{
    return r.first + (r.count ? (r.count - 1) * (r.stride ? r.stride : 1) : 0) - !r.count;
}

/* One past r's last rank (first when r is empty). */
static inline uint64_t cfs_rank_end(struct cfs_rank_range r)
{
    return r.count ? r.first + (uint64_t)(r.count - 1) * (r.stride ? r.stride : 1) + 1 : r.first;
}

/* Where the per-rank orders come from.  The default wraps cfs_sampler; tests
 * give hand-written streams.  create() makes an independent instance (the
 * walker needs its own, as stateful samplers must iterate epochs upwards). */
struct cfs_plan_source {
    int (*create)(const void *cfg, void **state, char *err, size_t errlen);
    void (*destroy)(void *state);
    uint64_t (*rank_len)(void *state, uint32_t epoch, uint32_t rank);
    int (*compute_epoch)(void *state, uint32_t epoch);
    uint32_t (*rank_at)(void *state, uint32_t rank, uint64_t i);
    const void *cfg;
};

struct cfs_plan_params {
    uint64_t n;                 /* samples */
    const uint64_t *sizes;      /* n file sizes in bytes; borrowed: they outlive the plan */
    struct cfs_sampler_params sampler; /* used when source is NULL */
    const struct cfs_plan_source *source;
    uint32_t world;             /* trainer ranks */
    uint32_t start_epoch, epochs; /* plan epochs [start_epoch, epochs) */
    uint32_t nodes;             /* >= 1 */
    uint32_t node;              /* the node planned in detail */
    const struct cfs_rank_range *ranks; /* per node, or NULL: default blocks */
    uint64_t ram, ssd;          /* tier capacities, the same on every node */
    /* The previous window's plan (every node's the same), or NULL; read
     * only while this one is built.  When it ends with this window's first
     * epoch, the files read in that epoch keep its owners (plan.c). */
    const struct cfs_plan *prev;
};

struct cfs_plan;

/* Node `node` of `nodes` serves ranks [first, first+count) of `world`. */
void cfs_plan_default_ranks(uint32_t world, uint32_t nodes, uint32_t node,
                            struct cfs_rank_range *out);
/* Node `node` of `nodes` serves ranks node, node + nodes, ... of `world`
 * (srun --distribution=cyclic). */
static inline void cfs_plan_cyclic_ranks(uint32_t world, uint32_t nodes, uint32_t node,
                                         struct cfs_rank_range *out)
{
    out->first = node;
    out->count = node < world ? (world - node + nodes - 1) / nodes : 0;
    out->stride = nodes;
}

/* Build the plan: one sweep over every epoch.  Returns 0 or -errno with a
 * one-line message in err. */
int cfs_plan_create(const struct cfs_plan_params *p, struct cfs_plan **out, char *err,
                    size_t errlen);
void cfs_plan_destroy(struct cfs_plan *p);

uint64_t cfs_plan_sample_count(const struct cfs_plan *p);
uint32_t cfs_plan_node(const struct cfs_plan *p); /* the node planned in detail */
struct cfs_rank_range cfs_plan_node_ranks(const struct cfs_plan *p, uint32_t node);
uint32_t cfs_plan_start_epoch(const struct cfs_plan *p);
uint32_t cfs_plan_epoch_count(const struct cfs_plan *p); /* epochs - start_epoch */
/* A node's cache, both tiers: ram + ssd. */
uint64_t cfs_plan_capacity(const struct cfs_plan *p);
/* Position of the first access of epoch start_epoch+rel; rel = epoch count
 * gives the stream length. */
uint64_t cfs_plan_epoch_start(const struct cfs_plan *p, uint32_t rel);

/* Per file, for the planned node. */
uint32_t cfs_plan_count(const struct cfs_plan *p, uint32_t sample);
uint64_t cfs_plan_first_use(const struct cfs_plan *p, uint32_t sample); /* or CFS_POS_NEVER */
enum cfs_tier cfs_plan_tier(const struct cfs_plan *p, uint32_t sample);
/* Total reads of the file by all nodes over the run. */
uint32_t cfs_plan_total_count(const struct cfs_plan *p, uint32_t sample);
/* The node that holds the file for its peers, or CFS_NODE_NONE (PFS); the
 * owner's tier in *tier when tier is not NULL. */
uint32_t cfs_plan_owner(const struct cfs_plan *p, uint32_t sample, enum cfs_tier *tier);
/* Files the planned node holds in `tier`, in order of first use in cluster
 * time (an owned file: the first use by any node; files nobody reads last,
 * by index): the order to stage them in. */
const uint32_t *cfs_plan_prefetch_order(const struct cfs_plan *p, enum cfs_tier tier,
                                        uint64_t *count);

/* Every node's share, from the same sweep. */
struct cfs_plan_node_summary {
    struct cfs_rank_range ranks;
    uint64_t reads;                /* accesses over the run */
    /* held, by enum cfs_tier; [CFS_TIER_NONE]: read, not held */
    uint64_t files[CFS_TIER_COUNT + 1], bytes[CFS_TIER_COUNT + 1];
    uint64_t owned_files, owned_bytes;
    uint64_t local_read_bytes;     /* bytes of reads served from the node's tiers */
    uint64_t peer_read_bytes;      /* from the owner on another node */
    uint64_t pfs_read_bytes;       /* from the PFS (no owner), after the first fetch */
    uint64_t read_bytes;           /* all bytes read over the run */
};
int cfs_plan_node_summary(const struct cfs_plan *p, uint32_t node,
                          struct cfs_plan_node_summary *out);
/* Distinct bytes held by some owner, and bytes of the dataset's files. */
uint64_t cfs_plan_owned_bytes(const struct cfs_plan *p);
uint64_t cfs_plan_dataset_bytes(const struct cfs_plan *p);

/* --- Walking the planned node's stream. --- */

struct cfs_plan_access {
    uint64_t pos;
    uint32_t epoch; /* absolute epoch */
    uint32_t rank;  /* trainer rank */
    uint64_t step;  /* index within the rank's epoch */
    uint32_t sample;
    bool new_epoch; /* first access of its epoch */
};

struct cfs_plan_walk;

int cfs_plan_walk_create(const struct cfs_plan *p, struct cfs_plan_walk **out, char *err,
                         size_t errlen);
void cfs_plan_walk_destroy(struct cfs_plan_walk *w);
/* The next access: 1 with *a filled, 0 at the end of the run, or -errno. */
int cfs_plan_walk_next(struct cfs_plan_walk *w, struct cfs_plan_access *a);
/* Position of the next access of `sample` after the last access returned
 * (before any: from position 0 on), or CFS_POS_NEVER.  *exact (optional) is
 * false when the access lies beyond the next epoch and the position given is
 * that epoch's start. */
uint64_t cfs_plan_walk_next_use(const struct cfs_plan_walk *w, uint32_t sample, bool *exact);

/* Simulation support (src/sim.c): per-file facts about the other nodes, at
 * epoch granularity (relative epochs, saturating at 255). */
/* The planned node owns the file and another node reads it: the node
 * keeps it for its peers for the whole run. */
bool cfs_plan_peer_pinned(const struct cfs_plan *p, uint32_t sample);
/* The file is in the node's own top-frequency set (NoPFS static pinning). */
bool cfs_plan_static_pinned(const struct cfs_plan *p, uint32_t sample);
/* Nodes that pin the file under static pinning, and the first epoch in which
 * one of them reads it (UINT32_MAX: none). */
uint32_t cfs_plan_static_pinners(const struct cfs_plan *p, uint32_t sample);
uint32_t cfs_plan_static_pinner_epoch(const struct cfs_plan *p, uint32_t sample);
/* The epoch of the cluster's first read of the file: its owner stages it
 * from the PFS then (the owner knows every node's plan). */
uint32_t cfs_plan_owner_epoch(const struct cfs_plan *p, uint32_t sample);
uint64_t cfs_plan_file_size(const struct cfs_plan *p, uint32_t sample);

#endif
