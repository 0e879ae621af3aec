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
 * nsamples sizes (borrowed). */
void cfs_run_config_plan_params(const struct cfs_run_config *c, const uint64_t *sizes,
                                struct cfs_plan_params *out);

/* The default reordering window for `batch` and a node of `rank_count`
 * trainer ranks (0 counts as 1). */
uint32_t cfs_run_default_window(uint32_t batch, uint32_t rank_count);

#endif
