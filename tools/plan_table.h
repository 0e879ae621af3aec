/* clairfs-plan --env: the epoch table of a cluster we cannot run on
 * (tools/plan_table.c). */
#ifndef CLAIRFS_PLAN_TABLE_H
#define CLAIRFS_PLAN_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "clairfs/catalog.h"
#include "clairfs/cluster_env.h"
#include "clairfs/options.h"

struct plan_table_params {
    const struct cfs_options *opts; /* seed, sampler, epochs...; world, ram, ssd are set here */
    const struct cfs_cluster_env *env;
    const uint32_t *nodes; /* node counts, one row group each */
    uint32_t nnodes;
    /* The dataset: cat is simulated; it stands for `files` files (the
     * sampled model: every count and capacity scaled by files / cat's
     * samples). */
    const struct cfs_catalog *cat;
    uint64_t files;
    bool json;
};

/* Simulates and prints the table.  0, or -errno after one message on
 * stderr. */
int plan_table_run(const char *prog, const struct plan_table_params *p);

#endif
