/* Private to the planner (plan.c, plan_query.c, plan_stream.c); the
 * simulator (sim.c) is a client and asks through clairfs/plan.h. */
#ifndef CLAIRFS_PLAN_I_H
#define CLAIRFS_PLAN_I_H

#include "clairfs/plan.h"

enum {
    PLAN_STATIC = 1,      /* in this node's NoPFS static set */
    PLAN_PEER_PINNED = 2, /* owned here and read by another node */
};

struct cfs_plan {
    struct cfs_plan_params params; /* sizes and ranks not kept */
    struct cfs_plan_source src_buf;
    const struct cfs_plan_source *src;
    uint64_t n;
    uint32_t world, nodes, node;
    uint32_t start_epoch, nepochs;
    uint64_t ram, ssd;
    struct cfs_rank_range *ranks;
    struct cfs_plan_node_summary *summary;
    uint64_t *epoch_start; /* nepochs + 1 */
    uint64_t dataset_bytes, owned_bytes;

    /* Per file. */
    uint64_t *sizes;
    uint32_t *count;       /* planned node's reads */
    uint64_t *first_use;   /* planned node's first position */
    uint8_t *epochs_read;  /* bm_bytes per file: bit rel set when read in epoch rel */
    uint32_t bm_bytes;
    uint8_t *tier;
    uint8_t *flags;
    uint32_t *owner;
    uint8_t *owner_tier;
    uint32_t *owner_epoch;  /* relative epoch of the cluster's first read */
    uint32_t *total_count;
    uint16_t *static_pinners;
    uint32_t *static_epoch; /* first epoch a static pinner reads it */

    uint32_t *order[CFS_TIER_COUNT];
    uint64_t order_len[CFS_TIER_COUNT];
};

const struct cfs_plan_source *plan_source(const struct cfs_plan_params *pp,
                                          struct cfs_plan_source *buf);

#endif
