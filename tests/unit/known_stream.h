/* What the sampler unit tests share: a sampler made or the test fails, and
 * the check of a stream's head against one printed by a transcription of a
 * library's code (tests/golden/): the frameworks' (test_sampler_framework.c)
 * and the training libraries' (test_sampler_library.c) known streams are
 * checked the same way. */
#ifndef CLAIRFS_TEST_KNOWN_STREAM_H
#define CLAIRFS_TEST_KNOWN_STREAM_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/sampler.h"

static inline struct cfs_sampler *make(const struct cfs_sampler_params *p)
{
    struct cfs_sampler *s;
    char err[256];
    int rc = cfs_sampler_create(p, &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "create: %s", err);
    return s;
}

#define KNOWN_HEAD 12

/* Rank `rank`'s stream of epoch `epoch` is `len` long and begins with
 * head[0 .. min(len, KNOWN_HEAD)). */
struct known_stream {
    struct cfs_sampler_params p;
    uint32_t epoch, rank;
    uint64_t len;
    uint32_t head[KNOWN_HEAD];
};

/* Case c of a table: the sampler of p (k's parameters as given, the batch
 * as the caller sets it) printing k's stream. */
static inline void check_known_stream(size_t c, const struct known_stream *k,
                                      const struct cfs_sampler_params *p)
{
    struct cfs_sampler *s = make(p);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, k->epoch), 0);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, k->epoch, k->rank), k->len);
    for (uint64_t i = 0; i < k->len && i < KNOWN_HEAD; i++)
        ck_assert_msg(cfs_sampler_rank_at(s, k->rank, i) == k->head[i],
                      "case %zu (%s) epoch %u rank %u index %llu: %u, want %u", c,
                      cfs_sampler_kind_name(k->p.kind), k->epoch, k->rank,
                      (unsigned long long)i, cfs_sampler_rank_at(s, k->rank, i), k->head[i]);
    cfs_sampler_destroy(s);
}

#endif
