/* The frameworks' samplers (hf-accelerate, torchvision-ra, timm-ra): known
 * streams printed by tests/golden/framework_orders.py (the frameworks' code
 * transcribed onto real torch 1.13), each stream as the epoch's permutation
 * laid out the framework's way, the view the planner reads, the planner's
 * walk over them, and the cases the frameworks themselves refuse. The full
 * grid against the transcription is the oracle test_sampler_frameworks.py. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "known_stream.h"
#include "clairfs/plan.h"
#include "clairfs/sampler.h"

/* framework_orders.py --kind K ... --epochs E, rank r's line of epoch e. */
static const struct known_stream known[] = {
    {{.kind = CFS_SAMPLER_HF_ACCELERATE, .seed = 0, .n = 10, .world = 3, .batch = 2}, 0, 0, 4,
     {4, 1, 0, 8}},
    {{.kind = CFS_SAMPLER_HF_ACCELERATE, .seed = 0, .n = 10, .world = 3, .batch = 2}, 0, 2, 4,
     {3, 9, 4, 1}}, /* the last round completed from the head */
    {{.kind = CFS_SAMPLER_HF_ACCELERATE, .seed = 0, .n = 10, .world = 3, .batch = 2}, 1, 1, 4,
     {1, 2, 7, 4}},
    {{.kind = CFS_SAMPLER_HF_ACCELERATE, .seed = 4294967301ull, .n = 10, .world = 3, .batch = 4},
     0, 2, 4, {8, 7, 1, 4}},
    {{.kind = CFS_SAMPLER_TORCHVISION_RA, .seed = 5, .n = 260, .world = 2, .batch = 1,
      .repetitions = 3}, 1, 0, 128, {130, 130, 29, 245, 245, 150, 110, 110, 242, 159, 159, 191}},
    {{.kind = CFS_SAMPLER_TORCHVISION_RA, .seed = 5, .n = 260, .world = 2, .batch = 1,
      .repetitions = 3}, 1, 1, 128, {130, 29, 29, 245, 150, 150, 110, 242, 242, 159, 191, 191}},
    {{.kind = CFS_SAMPLER_TIMM_RA, .seed = 0, .n = 520, .world = 3, .batch = 1, .repetitions = 2},
     2, 1, 170, {408, 433, 178, 49, 402, 368, 244, 501, 339, 59, 353, 388}},
    {{.kind = CFS_SAMPLER_TIMM_RA, .seed = 0, .n = 520, .world = 3, .batch = 1, .repetitions = 2},
     2, 2, 170, {328, 433, 318, 49, 263, 368, 100, 501, 308, 59, 215, 388}},
};

START_TEST(known_streams_match_the_frameworks)
{
    for (size_t c = 0; c < sizeof(known) / sizeof(known[0]); c++) {
        check_known_stream(c, &known[c], &known[c].p);
    }
}
END_TEST

/* The epoch's randperm, taken from torch-ddp with one rank (whose stream is
 * exactly randperm(n) of a generator seeded seed + epoch). */
static void permutation(uint64_t n, uint64_t seed, uint32_t epoch, uint32_t *perm)
{
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n,
                                   .world = 1, .batch = 1};
    struct cfs_sampler *s = make(&p);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, epoch), 0);
    for (uint64_t i = 0; i < n; i++)
        perm[i] = cfs_sampler_rank_at(s, 0, i);
    cfs_sampler_destroy(s);
}

static const struct {
    enum cfs_sampler_kind kind;
    uint64_t n;
    uint32_t world, batch, repetitions;
    bool drop_last_batch;
} shapes[] = {
    {CFS_SAMPLER_HF_ACCELERATE, 1, 4, 3, 0, false},  /* one index fills every batch */
    {CFS_SAMPLER_HF_ACCELERATE, 7, 3, 32, 0, false}, /* n < W*B */
    {CFS_SAMPLER_HF_ACCELERATE, 1003, 4, 32, 0, false},
    {CFS_SAMPLER_HF_ACCELERATE, 1003, 4, 32, 0, true},
    {CFS_SAMPLER_HF_ACCELERATE, 7, 4, 3, 0, true}, /* no full round: nothing read */
    {CFS_SAMPLER_TORCHVISION_RA, 1003, 3, 1, 3, false},
    {CFS_SAMPLER_TORCHVISION_RA, 1000, 4, 32, 2, true},
    {CFS_SAMPLER_TIMM_RA, 256, 3, 3, 0, false}, /* repetitions 0: the default, 3 */
    {CFS_SAMPLER_TIMM_RA, 200, 2, 1, 3, false}, /* n < 256: nothing selected */
};

/* The length each framework gives a rank, from its own formulas. */
static uint64_t expected_len(size_t c)
{
    uint64_t n = shapes[c].n, w = shapes[c].world, b = shapes[c].batch;
    if (shapes[c].kind == CFS_SAMPLER_HF_ACCELERATE)
        return shapes[c].drop_last_batch ? n / b / w * b : ((n + b - 1) / b + w - 1) / w * b;
    uint64_t selected = n / 256 * 256 / w;
    return shapes[c].drop_last_batch ? selected / b * b : selected;
}

START_TEST(streams_are_the_permutation_laid_out_and_the_view_agrees)
{
    for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
        uint64_t seed = 4294967301ull + c, n = shapes[c].n;
        uint32_t w = shapes[c].world, b = shapes[c].batch;
        uint64_t reps = shapes[c].repetitions ? shapes[c].repetitions : 3;
        struct cfs_sampler_params p = {.kind = shapes[c].kind, .seed = seed, .n = n, .world = w,
                                       .batch = b, .drop_last_batch = shapes[c].drop_last_batch,
                                       .repetitions = shapes[c].repetitions};
        struct cfs_sampler *s = make(&p);
        uint32_t *perm = malloc(n * sizeof(*perm));
        for (uint32_t e = 0; e < 3; e++) {
            bool timm = shapes[c].kind == CFS_SAMPLER_TIMM_RA;
            permutation(n, timm ? 0 : seed, e, perm);
            ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
            const uint32_t *order;
            uint64_t len, rank_step, stride;
            ck_assert_int_eq(cfs_sampler_epoch_order(s, &order, &len, &rank_step, &stride), 0);
            ck_assert_uint_eq(rank_step, 1);
            ck_assert_uint_eq(stride, w);
            ck_assert_uint_eq(len, (uint64_t)w * expected_len(c));
            for (uint32_t r = 0; r < w; r++) {
                ck_assert_uint_eq(cfs_sampler_rank_len(s, e, r), expected_len(c));
                for (uint64_t i = 0; i < expected_len(c); i++) {
                    /* accelerate: batch j*W + r of the batches handed out,
                     * which past n wrap to the epoch's head; RA: entry
                     * r + i*W of the repeated permutation. */
                    uint64_t want = shapes[c].kind == CFS_SAMPLER_HF_ACCELERATE
                                        ? perm[((i / b * w + r) * b + i % b) % n]
                                        : perm[(r + i * w) / reps];
                    ck_assert_uint_eq(cfs_sampler_rank_at(s, r, i), want);
                    ck_assert_uint_eq(order[r + i * w], want);
                }
            }
        }
        free(perm);
        cfs_sampler_destroy(s);
    }
}
END_TEST

START_TEST(planner_walks_the_framework_streams_in_lockstep)
{
    /* The planner's sweep reads these kinds through the interleaved view;
     * its walk must be each node's ranks in lockstep, read by rank_at. */
    for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
        uint64_t n = shapes[c].n;
        struct cfs_sampler_params sp = {.kind = shapes[c].kind, .seed = 7, .n = n,
                                        .world = shapes[c].world, .batch = shapes[c].batch,
                                        .drop_last_batch = shapes[c].drop_last_batch,
                                        .repetitions = shapes[c].repetitions};
        struct cfs_sampler *s = make(&sp);
        uint64_t *sizes = calloc(n, sizeof(*sizes));
        char err[256] = "";
        const uint32_t epochs = 3, nodes = 2;
        uint64_t per_rank = expected_len(c);
        for (uint32_t node = 0; node < nodes; node++) {
            struct cfs_plan_params pp = {.n = n, .sizes = sizes, .sampler = sp,
                                         .world = sp.world, .epochs = epochs, .nodes = nodes,
                                         .node = node};
            struct cfs_plan *p = NULL;
            ck_assert_msg(cfs_plan_create(&pp, &p, err, sizeof(err)) == 0, "%s", err);
            struct cfs_rank_range rr = cfs_plan_node_ranks(p, node);
            struct cfs_plan_walk *wk;
            ck_assert_int_eq(cfs_plan_walk_create(p, &wk, err, sizeof(err)), 0);
            struct cfs_plan_access a;
            uint64_t i = 0;
            while (cfs_plan_walk_next(wk, &a) == 1) {
                uint64_t in = i % (per_rank * rr.count);
                ck_assert_uint_eq(a.epoch, i / (per_rank * rr.count));
                ck_assert_uint_eq(a.rank, rr.first + in % rr.count);
                ck_assert_uint_eq(a.step, in / rr.count);
                ck_assert_int_eq(cfs_sampler_compute_epoch(s, a.epoch), 0);
                ck_assert_uint_eq(a.sample, cfs_sampler_rank_at(s, a.rank, a.step));
                i++;
            }
            ck_assert_uint_eq(i, per_rank * rr.count * epochs);
            cfs_plan_walk_destroy(wk);
            cfs_plan_destroy(p);
        }
        free(sizes);
        cfs_sampler_destroy(s);
    }
}
END_TEST

START_TEST(seeds_and_refusals_follow_the_frameworks)
{
    char err[256];
    struct cfs_sampler *s = NULL;
    /* timm seeds with the epoch alone: the seed changes nothing. */
    struct cfs_sampler_params a = {.kind = CFS_SAMPLER_TIMM_RA, .seed = 0, .n = 600, .world = 2,
                                   .batch = 1};
    struct cfs_sampler_params b = a;
    b.seed = 99;
    struct cfs_sampler *sa = make(&a), *sb = make(&b);
    ck_assert_int_eq(cfs_sampler_compute_epoch(sa, 1), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(sb, 1), 0);
    for (uint64_t i = 0; i < cfs_sampler_rank_len(sa, 1, 1); i++)
        ck_assert_uint_eq(cfs_sampler_rank_at(sa, 1, i), cfs_sampler_rank_at(sb, 1, i));
    cfs_sampler_destroy(sa);
    cfs_sampler_destroy(sb);
    /* ... torchvision's does: seed + epoch, like DistributedSampler. */
    a.kind = b.kind = CFS_SAMPLER_TORCHVISION_RA;
    b.seed = 1;
    sa = make(&a);
    sb = make(&b);
    ck_assert_int_eq(cfs_sampler_compute_epoch(sa, 1), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(sb, 0), 0);
    for (uint64_t i = 0; i < cfs_sampler_rank_len(sa, 1, 0); i++)
        ck_assert_uint_eq(cfs_sampler_rank_at(sa, 0, i), cfs_sampler_rank_at(sb, 0, i));
    cfs_sampler_destroy(sa);
    cfs_sampler_destroy(sb);

    /* seed + epoch past 2^64-1: torch's manual_seed raises. */
    struct cfs_sampler_params hf = {.kind = CFS_SAMPLER_HF_ACCELERATE, .seed = UINT64_MAX,
                                    .n = 10, .world = 1, .batch = 1};
    s = make(&hf);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 0), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 1), -ERANGE);
    ck_assert_ptr_nonnull(strstr(cfs_sampler_error(s), "exceeds 2^64-1"));
    cfs_sampler_destroy(s);

    /* RA padding beyond the repeated list: the samplers' assertion fails. */
    struct cfs_sampler_params ra = {.kind = CFS_SAMPLER_TORCHVISION_RA, .n = 1, .world = 8,
                                    .batch = 1, .repetitions = 2};
    ck_assert_int_eq(cfs_sampler_create(&ra, &s, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(err, "sampler=torchvision-ra: world=8"));
    ra.world = 4; /* pads 2 from 2 repeated: allowed */
    s = make(&ra);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 0), 0);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 3), 0);
    cfs_sampler_destroy(s);

    /* accelerate's padded epoch must fit memory's arithmetic. */
    hf.seed = 0;
    hf.world = UINT32_MAX;
    hf.batch = UINT32_MAX;
    ck_assert_int_eq(cfs_sampler_create(&hf, &s, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "too large"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sampler_framework");
    TCase *tc = tcase_create("framework");
    tcase_add_test(tc, known_streams_match_the_frameworks);
    tcase_add_test(tc, streams_are_the_permutation_laid_out_and_the_view_agrees);
    tcase_add_test(tc, planner_walks_the_framework_streams_in_lockstep);
    tcase_add_test(tc, seeds_and_refusals_follow_the_frameworks);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
