/* The position tracker (src/prefetch_track.c) without the rest of the data
 * path: the trainer's position counted from opens under DataLoader
 * reordering (a real loader replaying the plan's stream with several
 * workers), misses that change nothing, and resynchronisation by epoch. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/loader.h"
#include "clairfs/sampler.h"
#include "src/prefetch_i.h"
#include "epoch_stream.h"

struct replay {
    struct pf_track *t;
    _Atomic uint64_t hits, misses;
};

static int replay_fetch(void *arg, uint32_t worker, uint64_t batch, uint32_t index)
{
    struct replay *r = arg;
    struct pf_obs o;
    (void)worker;
    (void)batch;
    pf_track_open(r->t, index, &o);
    if (o.hit)
        r->hits++;
    else
        r->misses++;
    return 0;
}

static struct pf_track *make_track(uint64_t n, uint32_t epochs, uint32_t batch, uint32_t window,
                                   uint64_t seed)
{
    /* The plan borrows the sizes for its life: the test's trackers' at most. */
    static uint64_t sizes[500];
    ck_assert_uint_le(n, sizeof(sizes) / sizeof(sizes[0]));
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = 1000 + i;
    struct pf_track_params p = {
        .plan = {.n = n, .sizes = sizes, .world = 1, .epochs = epochs, .nodes = 1, .ram = 1u << 30,
                 .sampler = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n, .world = 1,
                             .batch = batch}},
        .window = window,
    };
    struct pf_track *t = NULL;
    char err[256] = "";
    int rc = pf_track_create(&p, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "pf_track_create: %s", err);
    return t;
}


/* 4 workers x prefetch 2 x batch 8: opens up to 64 files out of order. */
START_TEST(track_loader_reordering)
{
    const uint64_t n = 500;
    const uint32_t epochs = 4;
    struct replay r = {.t = make_track(n, epochs, 8, 64, 7)};
    struct cfs_loader_params lp = {.batch = 8, .workers = 4, .prefetch = 2};
    struct cfs_loader *l = NULL;
    ck_assert_int_eq(cfs_loader_create(&lp, replay_fetch, NULL, &r, &l), 0);
    for (uint32_t e = 0; e < epochs; e++) {
        uint64_t pos;
        uint32_t ep;
        pf_track_position(r.t, &pos, &ep, NULL);
        ck_assert_uint_eq(ep, e);
        ck_assert_uint_eq(pos, e * n);
        uint32_t *stream = epoch_stream(n, 7, e);
        /* the tracker's view of the stream is the sampler's */
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s;
            bool consumed;
            ck_assert_int_eq(pf_track_sample_at(r.t, e * n + i, &s, &consumed), 1);
            ck_assert_uint_eq(s, stream[i]);
            ck_assert(!consumed);
        }
        ck_assert_int_eq(cfs_loader_start_epoch(l, stream, n), 0);
        uint64_t b;
        while (cfs_loader_next(l, &b) == 1)
            ;
        free(stream);
        ck_assert_uint_eq(r.hits, (e + 1) * n);
        ck_assert_uint_eq(r.misses, 0);
    }
    /* past the plan: everything is a miss */
    struct pf_obs o;
    pf_track_open(r.t, 3, &o);
    ck_assert(!o.hit);
    cfs_loader_destroy(l);
    pf_track_destroy(r.t);
}
END_TEST

/* Opens that are not expected change nothing; the epoch advances on its own
 * when the trainer is clearly in the next one; `epoch N` resynchronises. */
START_TEST(track_misses_and_resync)
{
    const uint64_t n = 300;
    struct pf_track *t = make_track(n, 5, 1, 20, 11);
    uint32_t *s0 = epoch_stream(n, 11, 0), *s1 = epoch_stream(n, 11, 1);
    struct pf_obs o;
    uint64_t pos, gen0, gen;
    uint32_t ep;

    for (int i = 0; i < 100; i++) {
        pf_track_open(t, s0[i], &o);
        ck_assert(o.hit);
    }
    /* a second open of a consumed file, and a file far ahead */
    pf_track_open(t, s0[5], &o);
    ck_assert(!o.hit);
    pf_track_position(t, &pos, &ep, &gen0);
    /* s0[5] may also sit early in epoch 1; it is only taken there near the
     * end of epoch 0, so the position must not move either way */
    ck_assert_uint_eq(pos, 100);
    pf_track_open(t, s0[250], &o); /* expected this epoch, outside the window */
    ck_assert(!o.hit);
    pf_track_position(t, &pos, &ep, NULL);
    ck_assert_uint_eq(pos, 101);
    /* next use: s0[101] is read at 101 (unless it is s0[250] itself) */
    ck_assert_uint_eq(pf_track_next_use(t, s0[101]), 101);
    /* s0[250] was consumed: its next use is in epoch 1 or later */
    ck_assert_uint_ge(pf_track_next_use(t, s0[250]), n);

    /* The trainer skips the rest of epoch 0 and starts epoch 1: after a
     * window's worth of its files the tracker follows. */
    uint32_t moved = 0;
    for (int i = 0; i < 40; i++) {
        pf_track_open(t, s1[i], &o);
        if (o.epoch_changed)
            moved++;
    }
    ck_assert_uint_eq(moved, 1);
    pf_track_position(t, &pos, &ep, NULL);
    ck_assert_uint_eq(ep, 1);
    ck_assert_uint_ge(pos, n + 21);

    /* epoch 3, then back to 0 */
    ck_assert_int_eq(pf_track_set_epoch(t, 3), 0);
    pf_track_position(t, &pos, &ep, &gen);
    ck_assert_uint_eq(ep, 3);
    ck_assert_uint_eq(pos, 3 * n);
    ck_assert_uint_ne(gen, gen0);
    uint32_t *s3 = epoch_stream(n, 11, 3);
    for (uint64_t i = 0; i < n; i++) {
        pf_track_open(t, s3[i], &o);
        ck_assert(o.hit);
    }
    pf_track_position(t, &pos, &ep, NULL);
    ck_assert_uint_eq(ep, 4);
    ck_assert_int_eq(pf_track_set_epoch(t, 0), 0);
    pf_track_position(t, &pos, &ep, NULL);
    ck_assert_uint_eq(ep, 0);
    ck_assert_uint_eq(pos, 0);
    ck_assert_uint_eq(pf_track_next_use(t, s0[0]), 0);
    ck_assert_int_eq(pf_track_set_epoch(t, 5), -ERANGE);
    free(s0);
    free(s1);
    free(s3);
    pf_track_destroy(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("prefetch_track");
    TCase *tc = tcase_create("track");
    tcase_add_test(tc, track_loader_reordering);
    tcase_add_test(tc, track_misses_and_resync);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return cfs_check_run(suite());
}
