/* Claims for the order agreement's tests (test_order_decide.c,
 * test_order_agree.c): a node's torch-ddp identification as its claim
 * names it. */
#ifndef CLAIRFS_TEST_ORDER_FIXTURE_H
#define CLAIRFS_TEST_ORDER_FIXTURE_H

#include "clairfs/identify.h"

/* torch-ddp of n = 3000, batch 8: seed, world, this node's ranks first ..
 * first + count - 1 and its epoch. */
static inline struct cfs_identified ddp(uint64_t seed, uint32_t world, uint32_t first,
                                        uint32_t count, uint32_t epoch)
{
    struct cfs_identified id = {0};
    id.sampler = (struct cfs_sampler_params){
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = 3000, .world = world, .batch = 8};
    id.rank_first = first, id.rank_count = count, id.epoch = epoch;
    return id;
}

#endif
