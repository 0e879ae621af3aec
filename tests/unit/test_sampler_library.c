/* The training libraries' samplers (detectron2 and MMEngine's infinite
 * stream, mmengine-noround, torchdata[-workers], ultralytics[-ddp],
 * hf-trainer-global): known streams printed by tests/golden/library_samplers.py
 * (the libraries' code transcribed onto real torch 1.13), the relations that
 * tie each to the torch model it is built from, detectron2's passes and the
 * view the planner reads, and the planner's walk over a stream whose ranks'
 * lengths change from pass to pass. The full grid against the transcription
 * is the oracle test_sampler_libraries.py. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "known_stream.h"
#include "clairfs/plan.h"
#include "clairfs/sampler.h"

#define ULTRALYTICS_SEED 6148914691236517204ull /* 6148914691236517205 + RANK -1 */

/* library_samplers.py --kind K ... , rank r's line of epoch e. */
static const struct known_stream known[] = {
    {{.kind = CFS_SAMPLER_DETECTRON2, .seed = 4294967295u, .n = 10, .world = 3}, 0, 0, 4,
     {1, 2, 8, 3}},
    {{.kind = CFS_SAMPLER_DETECTRON2, .seed = 4294967295u, .n = 10, .world = 3}, 1, 1, 4,
     {2, 7, 8, 6}}, /* pass 1 starts at stream position 10: rank 1's */
    {{.kind = CFS_SAMPLER_DETECTRON2, .seed = 4294967295u, .n = 10, .world = 3}, 2, 2, 4,
     {0, 2, 5, 8}},
    {{.kind = CFS_SAMPLER_MMENGINE_NOROUND, .seed = 7, .n = 10, .world = 4}, 1, 3, 2, {1, 7}},
    {{.kind = CFS_SAMPLER_TORCHDATA, .seed = 1, .n = 10, .world = 1, .rng_offset = 2}, 1, 0, 10,
     {4, 0, 2, 8, 9, 6, 1, 7, 5, 3}},
    {{.kind = CFS_SAMPLER_TORCHDATA_WORKERS, .seed = 1, .n = 10, .world = 1,
      .persistent_workers = true}, 1, 0, 10, {1, 3, 2, 5, 0, 4, 8, 6, 7, 9}},
    {{.kind = CFS_SAMPLER_ULTRALYTICS, .seed = ULTRALYTICS_SEED, .n = 10, .world = 1}, 1, 0, 10,
     {7, 3, 9, 5, 2, 4, 8, 0, 1, 6}},
    {{.kind = CFS_SAMPLER_ULTRALYTICS_DDP, .seed = 0, .n = 10, .world = 2}, 1, 1, 5,
     {1, 5, 9, 8, 2}}, /* epoch 1 reads epoch 0's permutation */
    {{.kind = CFS_SAMPLER_ULTRALYTICS_DDP, .seed = 0, .n = 10, .world = 2}, 2, 0, 5,
     {5, 1, 0, 9, 7}},
    {{.kind = CFS_SAMPLER_HF_TRAINER_GLOBAL, .seed = 42, .n = 10, .world = 1}, 1, 0, 10,
     {6, 2, 3, 8, 5, 4, 7, 9, 1, 0}},
};

START_TEST(known_streams_match_the_libraries)
{
    for (size_t c = 0; c < sizeof(known) / sizeof(known[0]); c++) {
        struct cfs_sampler_params p = known[c].p;
        p.batch = 1;
        check_known_stream(c, &known[c], &p);
    }
}
END_TEST

/* Rank r's whole stream of epoch e, as rank_at reads it. */
static uint64_t stream(struct cfs_sampler *s, uint32_t e, uint32_t r, uint32_t *out)
{
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
    uint64_t len = cfs_sampler_rank_len(s, e, r);
    for (uint64_t i = 0; i < len; i++)
        out[i] = cfs_sampler_rank_at(s, r, i);
    return len;
}

static void same_streams(struct cfs_sampler_params a, uint32_t ea, struct cfs_sampler_params b,
                         uint32_t eb, uint32_t rank)
{
    uint32_t x[1100], y[1100];
    struct cfs_sampler *sa = make(&a), *sb = make(&b);
    uint64_t la = stream(sa, ea, rank, x), lb = stream(sb, eb, rank, y);
    ck_assert_uint_eq(la, lb);
    ck_assert_msg(memcmp(x, y, la * sizeof(*x)) == 0, "%s epoch %u differs from %s epoch %u",
                  cfs_sampler_kind_name(a.kind), ea, cfs_sampler_kind_name(b.kind), eb);
    cfs_sampler_destroy(sa);
    cfs_sampler_destroy(sb);
}

START_TEST(each_library_is_the_torch_model_it_is_built_from)
{
    struct cfs_sampler_params base = {.seed = 4294967301ull, .n = 1003, .world = 3, .batch = 4};
    struct cfs_sampler_params a = base, b = base;
    /* ultralytics-ddp reads torch-ddp one epoch late. */
    a.kind = CFS_SAMPLER_ULTRALYTICS_DDP, b.kind = CFS_SAMPLER_TORCH_DDP;
    for (uint32_t e = 0; e < 4; e++)
        same_streams(a, e, b, e ? e - 1 : 0, 2);
    /* ultralytics is torch with persistent workers: one iterator, one base seed. */
    a = b = base;
    a.kind = CFS_SAMPLER_ULTRALYTICS, b.kind = CFS_SAMPLER_TORCH, b.persistent_workers = true;
    for (uint32_t e = 0; e < 3; e++)
        same_streams(a, e, b, e, 0);
    /* mmengine-noround: torch-ddp's permutation, rank 0 reading the same
     * positions without the padding (1003 = 3*334 + 1: rank 0 gets 335). */
    a = b = base;
    a.kind = CFS_SAMPLER_MMENGINE_NOROUND, b.kind = CFS_SAMPLER_TORCH_DDP;
    same_streams(a, 2, b, 2, 0);
    struct cfs_sampler *s = make(&a);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 0), 335);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 1), 334);
    cfs_sampler_destroy(s);
    /* hf-trainer-global is torch-sampler seeded with the drawn seed, which
     * torchdata draws the same way: their epoch 0 agree. */
    a = b = base;
    a.kind = CFS_SAMPLER_HF_TRAINER_GLOBAL, b.kind = CFS_SAMPLER_TORCHDATA;
    a.rng_offset = b.rng_offset = 6;
    same_streams(a, 0, b, 0, 0);
    struct cfs_mt19937 g;
    cfs_mt19937_seed(&g, base.seed);
    cfs_mt19937_discard(&g, 6);
    b.kind = CFS_SAMPLER_TORCH_SAMPLER, b.rng_offset = 0;
    b.seed = cfs_mt19937_next64(&g) & INT64_MAX;
    for (uint32_t e = 0; e < 3; e++)
        same_streams(a, e, b, e, 0);
}
END_TEST

START_TEST(detectron2_passes_are_the_randperms_of_one_stream)
{
    /* n=7, W=3: the stream is randperm, randperm, ... of a generator seeded
     * once; rank r reads positions r, r+3, ...; pass p is positions 7p..7p+6. */
    const uint64_t n = 7;
    const uint32_t w = 3, passes = 4;
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_DETECTRON2, .seed = 11, .n = n,
                                   .world = w, .batch = 5, .drop_last_batch = true};
    struct cfs_mt19937 g;
    uint32_t all[4 * 7];
    cfs_mt19937_seed(&g, 11);
    for (uint32_t k = 0; k < passes; k++)
        cfs_torch_randperm(&g, all + k * n, (uint32_t)n, CFS_RANDPERM_CURRENT);
    struct cfs_sampler *s = make(&p);
    uint64_t seen[3] = {0};
    /* Downwards first: going back replays from the seed. */
    for (uint32_t k = passes; k-- > 0;) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, k), 0);
        const uint32_t *order;
        uint64_t len, step, stride, total = 0;
        ck_assert_int_eq(cfs_sampler_epoch_order(s, &order, &len, &step, &stride), 0);
        ck_assert_uint_eq(step, 1);
        ck_assert_uint_eq(stride, w);
        ck_assert_uint_eq(len, 9);
        for (uint32_t r = 0; r < w; r++) {
            uint64_t rl = cfs_sampler_rank_len(s, k, r);
            total += rl;
            for (uint64_t i = 0; i < rl; i++) {
                uint64_t q = (r + w - (k * n) % w) % w + i * w; /* within the pass */
                ck_assert_uint_eq(cfs_sampler_rank_at(s, r, i), all[k * n + q]);
                ck_assert_uint_eq(order[i * w + r], all[k * n + q]);
                ck_assert_uint_eq((k * n + q) % w, r);
            }
            seen[r] += rl;
        }
        ck_assert_uint_eq(total, n); /* batch, drop_last_batch: nothing */
    }
    /* Over the 28 positions rank r reads ceil((28 - r) / 3). */
    ck_assert_uint_eq(seen[0], 10);
    ck_assert_uint_eq(seen[1], 9);
    ck_assert_uint_eq(seen[2], 9);
    cfs_sampler_destroy(s);
}
END_TEST

START_TEST(planner_walks_detectron2_passes_in_lockstep)
{
    /* The ranks' lengths change from pass to pass; the walk is each node's
     * ranks in lockstep within a pass, while a rank still has indices. */
    const uint64_t n = 10;
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_DETECTRON2, .seed = 3, .n = n,
                                    .world = 4, .batch = 1};
    struct cfs_sampler *s = make(&sp);
    uint64_t sizes[10] = {0};
    char err[256] = "";
    const uint32_t epochs = 3, nodes = 2;
    for (uint32_t node = 0; node < nodes; node++) {
        struct cfs_plan_params pp = {.n = n, .sizes = sizes, .sampler = sp, .world = sp.world,
                                     .epochs = epochs, .nodes = nodes, .node = node};
        struct cfs_plan *p = NULL;
        ck_assert_msg(cfs_plan_create(&pp, &p, err, sizeof(err)) == 0, "%s", err);
        struct cfs_rank_range rr = cfs_plan_node_ranks(p, node);
        struct cfs_plan_walk *wk;
        ck_assert_int_eq(cfs_plan_walk_create(p, &wk, err, sizeof(err)), 0);
        struct cfs_plan_access a;
        uint32_t e = 0, l = 0;
        uint64_t step = 0, walked = 0, want = 0;
        for (uint32_t k = 0; k < epochs; k++)
            for (uint32_t r = rr.first; r < rr.first + rr.count; r++)
                want += cfs_sampler_rank_len(s, k, r);
        while (cfs_plan_walk_next(wk, &a) == 1) {
            /* the next (epoch, step, rank) that has an index */
            for (;;) {
                uint64_t maxlen = 0;
                for (uint32_t r = rr.first; r < rr.first + rr.count; r++)
                    if (cfs_sampler_rank_len(s, e, r) > maxlen)
                        maxlen = cfs_sampler_rank_len(s, e, r);
                if (step >= maxlen) {
                    e++, step = 0, l = 0;
                    continue;
                }
                if (step < cfs_sampler_rank_len(s, e, rr.first + l))
                    break;
                if (++l == rr.count)
                    l = 0, step++;
            }
            ck_assert_uint_eq(a.epoch, e);
            ck_assert_uint_eq(a.rank, rr.first + l);
            ck_assert_uint_eq(a.step, step);
            ck_assert_int_eq(cfs_sampler_compute_epoch(s, a.epoch), 0);
            ck_assert_uint_eq(a.sample, cfs_sampler_rank_at(s, a.rank, a.step));
            if (++l == rr.count)
                l = 0, step++;
            walked++;
        }
        ck_assert_uint_eq(walked, want);
        cfs_plan_walk_destroy(wk);
        cfs_plan_destroy(p);
    }
    cfs_sampler_destroy(s);
}
END_TEST

START_TEST(names_are_the_ones_sampler_takes)
{
    static const char *const names[] = {"detectron2", "mmengine-noround", "torchdata",
                                        "torchdata-workers", "ultralytics", "ultralytics-ddp",
                                        "hf-trainer-global"};
    for (int k = CFS_SAMPLER_DETECTRON2; k < CFS_SAMPLER_KINDS; k++)
        ck_assert_str_eq(cfs_sampler_kind_name((enum cfs_sampler_kind)k),
                         names[k - CFS_SAMPLER_DETECTRON2]);
    /* A kind past the last is refused in one line. */
    struct cfs_sampler_params p = {.kind = (enum cfs_sampler_kind)CFS_SAMPLER_KINDS, .n = 3,
                                   .world = 1, .batch = 1};
    struct cfs_sampler *s = NULL;
    char err[256] = "";
    ck_assert_int_lt(cfs_sampler_create(&p, &s, err, sizeof(err)), 0);
    ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sampler_library");
    TCase *tc = tcase_create("library");
    tcase_add_test(tc, known_streams_match_the_libraries);
    tcase_add_test(tc, each_library_is_the_torch_model_it_is_built_from);
    tcase_add_test(tc, detectron2_passes_are_the_randperms_of_one_stream);
    tcase_add_test(tc, planner_walks_detectron2_passes_in_lockstep);
    tcase_add_test(tc, names_are_the_ones_sampler_takes);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
