/* Rank 0's stream of one epoch of a one-rank DistributedSampler(seed):
 * what a trainer opens, for the data-path tests to replay.  malloc'd. */
#ifndef CLAIRFS_TEST_EPOCH_STREAM_H
#define CLAIRFS_TEST_EPOCH_STREAM_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "clairfs/sampler.h"

static inline uint32_t *epoch_stream(uint64_t n, uint64_t seed, uint32_t epoch)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n,
                                    .world = 1, .batch = 1};
    struct cfs_sampler *s = NULL;
    char err[128];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, epoch), 0);
    uint32_t *out = malloc(n * sizeof(*out));
    for (uint64_t i = 0; i < n; i++)
        out[i] = cfs_sampler_rank_at(s, 0, i);
    cfs_sampler_destroy(s);
    return out;
}

#endif
