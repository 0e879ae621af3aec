/* The learned order's test fixture, shared by test_prefetch_adopt.c and
 * test_prefetch_drop.c: a fake identify module behind struct
 * cfs_identify_ops that records what the prefetcher tells it, the trainer
 * that opens, and torch-ddp seed 7 of the data path's fixture (its
 * identification and rank 0's stream). */
#ifndef CLAIRFS_TEST_ADOPT_FIXTURE_H
#define CLAIRFS_TEST_ADOPT_FIXTURE_H

#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/identify.h"
#include "clairfs/prefetch.h"
#include "clairfs/sampler.h"
#include "prefetch_fixture.h"

#define FAKE_MAX 8192

struct fake_identify {
    uint32_t n, samples[FAKE_MAX];
    pid_t pids[FAKE_MAX], ppids[FAKE_MAX];
    unsigned restarts;
    uint32_t observed_at_restart;
    enum cfs_identify_state state;
    _Atomic bool scanning; /* what the search reports of its share of a core */
    _Atomic double share;
};

static inline void fake_observe(void *arg, uint32_t sample, pid_t pid, pid_t ppid)
{
    struct fake_identify *f = arg;
    ck_assert_uint_lt(f->n, FAKE_MAX);
    f->samples[f->n] = sample;
    f->pids[f->n] = pid;
    f->ppids[f->n++] = ppid;
}

static inline void fake_restart(void *arg)
{
    struct fake_identify *f = arg;
    f->restarts++;
    f->observed_at_restart = f->n;
    f->n = 0;
}

static inline enum cfs_identify_state fake_state(void *arg, struct cfs_identified *out)
{
    (void)out;
    return ((struct fake_identify *)arg)->state;
}

static const struct cfs_identify_ops fake_ops = {fake_observe, fake_restart, fake_state};

static const struct cfs_opener trainer = {.pid = 4242, .ppid = 4000};

/* torch-ddp seed 7 of the fixture's NFILES samples: world, this node's
 * ranks [0, count), the trainer in `epoch` after `opens` observed opens. */
static inline struct cfs_identified ddp7(uint32_t world, uint32_t epoch, uint64_t opens)
{
    struct cfs_identified id = {
        .sampler = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = 7, .n = NFILES, .world = world,
                    .batch = 1},
        .rank_first = 0, .rank_count = 1, .epoch = epoch, .opens = opens, .seconds = 1.5,
        .seed_high_known = true,
    };
    snprintf(id.text, sizeof(id.text), "torch-ddp seed=7 world=%u epoch %u after %llu opens",
             world, epoch, (unsigned long long)opens);
    return id;
}

/* Rank 0's stream of torch-ddp seed 7 in epoch e of world w (len entries). */
static inline uint32_t *ddp7_stream(uint32_t world, uint32_t epoch, uint64_t *len)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = 7, .n = NFILES,
                                    .world = world, .batch = 1};
    struct cfs_sampler *s = NULL;
    char err[128];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, epoch), 0);
    *len = cfs_sampler_rank_len(s, epoch, 0);
    uint32_t *out = malloc(*len * sizeof(*out));
    for (uint64_t i = 0; i < *len; i++)
        out[i] = cfs_sampler_rank_at(s, 0, i);
    cfs_sampler_destroy(s);
    return out;
}

static inline void order_text_starts(struct cfs_prefetch *pf, const char *want)
{
    char text[400];
    cfs_prefetch_order_text(pf, text, sizeof(text));
    ck_assert_msg(strncmp(text, want, strlen(want)) == 0, "order: \"%s\", want \"%s...\"", text,
                  want);
}

#endif
