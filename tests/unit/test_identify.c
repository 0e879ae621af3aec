/* Order identification: opens simulated from the exact sampler models
 * (clairfs/sampler.h) - every rank's DataLoader workers reading their
 * batches, the readers' opens interleaved one by one as processes race -
 * are identified with their kind, seed, world, batch and workers; orders
 * that are not torch shuffles (sequential, reversed, strided, a xorshift
 * permutation, a Python-style shuffle drawn from the same MT19937) are
 * refused, never misnamed.
 *
 * All offline (cfs_identify_offline); the module's thread is
 * test_identify_thread.c's.
 *
 * Cost (one core here, about 10 s in all): most cases search 4096 seeds
 * around the true one (milliseconds; the evidence demanded shrinks with
 * the range, see identify_walk.c); the false-identification cases search
 * 2^16 seeds each; the large-n case replays torch >= 2.6's 2n-word shuffle
 * for 4 seeds; ranges of all 2^32 seeds are searched from where their seed
 * is a few million seeds on. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"
#include "identify_fixture.h"

/* The trainer is identified exactly as simulated. */
static void expect_identified(const struct trainer *t, size_t max,
                              const struct cfs_sampler_params *hint, bool hint_seed)
{
    struct opens o = simulate(t, max);
    struct cfs_identify_params p = params(t->n, t->seed + t->first_epoch, 4096);
    p.hint = hint;
    p.hint_has_seed = hint_seed;
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == 0, "%s: %s", cfs_sampler_kind_name(t->kind), id.text);
    ck_assert_msg(id.sampler.kind == t->kind, "%s", id.text);
    if (hint_seed) {
        ck_assert(id.seed_high_known);
        ck_assert_uint_eq(id.sampler.seed, t->seed);
        ck_assert_uint_eq(id.epoch, t->first_epoch + t->epochs - 1);
    } else {
        /* torch-ddp resumed at epoch k: seed S + k at epoch 0 */
        ck_assert(!id.seed_high_known);
        ck_assert_uint_eq(id.sampler.seed, (uint32_t)(t->seed + t->first_epoch));
        ck_assert_uint_eq(id.epoch, t->epochs - 1);
    }
    ck_assert_uint_eq(id.sampler.world, t->world);
    ck_assert_uint_eq(id.workers, t->workers);
    if (t->workers)
        ck_assert_uint_eq(id.sampler.batch, t->batch);
    ck_assert_uint_eq(id.rank_first, t->rank_first);
    ck_assert_uint_eq(id.rank_count, t->ranks);
    ck_assert_uint_eq(id.opens, o.len);
    ck_assert_ptr_nonnull(strstr(id.text, cfs_sampler_kind_name(t->kind)));
    opens_free(&o);
}

static const uint64_t seeds[] = {0, 1, 2147483647u, (1ull << 32) + 5, 0x123456789abcdef0ull};

START_TEST(ddp_worlds_and_workers)
{
    uint64_t seed = seeds[_i];
    static const uint32_t worlds[] = {1, 2, 4};
    for (int w = 0; w < 3; w++)
        for (uint32_t workers = 0; workers <= 2; workers += 2) {
            struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                                .seed = seed,
                                .n = 10000,
                                .world = worlds[w],
                                .batch = 8,
                                .workers = workers,
                                .ranks = worlds[w],
                                .epochs = 1};
            expect_identified(&t, 600, NULL, false);
        }
}
END_TEST

/* 64 opens of 8 readers: no worker has finished a batch of 32 yet; the
 * batch and the workers come from where the workers started. */
START_TEST(before_the_first_batch_is_done)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = seeds[_i],
                        .n = 100000,
                        .world = 2,
                        .batch = 32,
                        .workers = 4,
                        .ranks = 2,
                        .epochs = 1};
    expect_identified(&t, 64, NULL, false);
    t.kind = CFS_SAMPLER_TORCH;
    t.world = 1, t.ranks = 1;
    expect_identified(&t, 40, NULL, false);
}
END_TEST

START_TEST(a_registered_seed_completes_the_high_bits)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = seeds[_i],
                        .n = 10000,
                        .world = 2,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct cfs_sampler_params hint = {
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = seeds[_i], .world = 2, .batch = 4};
    expect_identified(&t, 600, &hint, true);
}
END_TEST

START_TEST(torch_loader_with_and_without_persistent_workers)
{
    /* two epochs: they differ only from the second on (the _base_seed) */
    for (int pw = 0; pw < 2; pw++) {
        struct trainer t = {.kind = CFS_SAMPLER_TORCH,
                            .seed = seeds[_i],
                            .n = 300,
                            .world = 1,
                            .batch = 5,
                            .workers = 3,
                            .ranks = 1,
                            .persistent = pw,
                            .epochs = 2};
        struct opens o = simulate(&t, 100000);
        struct cfs_identify_params p = params(t.n, t.seed, 4096);
        struct cfs_identified id;
        ck_assert_msg(identify(&p, &o, &id) == 0, "%s", id.text);
        ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH);
        ck_assert_int_eq(id.sampler.persistent_workers, pw);
        ck_assert_uint_eq(id.sampler.seed, (uint32_t)t.seed);
        ck_assert_uint_eq(id.sampler.batch, 5);
        ck_assert_uint_eq(id.workers, 3);
        ck_assert_uint_eq(id.epoch, 1);
        opens_free(&o);
    }
    /* epoch 0 alone, two ranks reading the whole stream each, no workers */
    struct trainer t = {.kind = CFS_SAMPLER_TORCH,
                        .seed = seeds[_i],
                        .n = 10000,
                        .world = 2,
                        .batch = 16,
                        .ranks = 2,
                        .epochs = 1};
    expect_identified(&t, 400, NULL, false);
}
END_TEST

START_TEST(torch_sampler_is_told_from_ddp_by_its_second_epoch)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_SAMPLER,
                        .seed = seeds[_i],
                        .n = 200,
                        .world = 1,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 1,
                        .persistent = true,
                        .epochs = 2};
    expect_identified(&t, 100000, NULL, false);
}
END_TEST

START_TEST(small_datasets)
{
    /* n = 1: nothing to learn */
    struct opens o = {0};
    for (int i = 0; i < 5; i++)
        push(&o, 0, 1000, 999);
    struct cfs_identify_params p = params(1, 0, 4096);
    struct cfs_identified id;
    ck_assert_int_eq(identify(&p, &o, &id), 0);
    ck_assert_uint_eq(id.sampler.n, 1);
    opens_free(&o);
    /* n = 2: one bit an epoch, so many epochs are needed... */
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 12345,
                        .n = 2,
                        .world = 1,
                        .batch = 1,
                        .ranks = 1,
                        .epochs = 20};
    o = simulate(&t, 100000);
    p = params(2, t.seed, 4096);
    ck_assert_int_eq(identify(&p, &o, &id), -ENOENT);
    ck_assert_ptr_nonnull(strstr(id.text, "bits of evidence"));
    opens_free(&o);
    t.epochs = 90;
    expect_identified(&t, 100000, NULL, false);
    /* n = 10: a handful of epochs */
    t = (struct trainer){.kind = CFS_SAMPLER_TORCH_DDP,
                         .seed = 7,
                         .n = 10,
                         .world = 2,
                         .batch = 2,
                         .ranks = 2,
                         .epochs = 6};
    expect_identified(&t, 100000, NULL, false);
}
END_TEST

/* The snapshot a late rank 0 leaves: the scan restarts at each of its
 * readers' first opens, so the last restart sees its worker 0 - the head,
 * randperm[0] - with that one open, behind rank 1's workers' dozens.  The
 * world comes from another reader's first step then (its worker 0's second
 * open, randperm[2], is not there to give it). */
START_TEST(a_head_reader_with_one_open)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 4000000000u,
                        .n = 10000,
                        .world = 2,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens all = simulate(&t, 400), o = {0};
    for (size_t i = 0; i < all.len && o.len < 40; i++)
        if (all.ppid[i] == 1001) /* rank 1's workers */
            push(&o, all.s[i], all.pid[i], all.ppid[i]);
    for (pid_t worker = 2001; worker >= 2000; worker--) /* rank 0's, its worker 0 last */
        for (size_t i = 0; i < all.len; i++)
            if (all.pid[i] == worker) {
                push(&o, all.s[i], all.pid[i], all.ppid[i]);
                break;
            }
    ck_assert_uint_eq(o.len, 42);
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == 0, "%s", id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH_DDP);
    ck_assert_uint_eq(id.sampler.seed, (uint32_t)t.seed);
    ck_assert_uint_eq(id.sampler.world, 2);
    ck_assert_uint_eq(id.sampler.batch, 8);
    ck_assert_uint_eq(id.workers, 2);
    ck_assert_uint_eq(id.rank_count, 2);
    opens_free(&all);
    opens_free(&o);
}
END_TEST

START_TEST(a_resumed_ddp_run)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 77,
                        .n = 5000,
                        .world = 2,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 2,
                        .first_epoch = 3,
                        .epochs = 1};
    /* no hint: seed 80 at epoch 0, the same order */
    expect_identified(&t, 300, NULL, false);
    struct cfs_sampler_params hint = {
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = 77, .world = 2, .batch = 8};
    expect_identified(&t, 300, &hint, true);
}
END_TEST

/* Node 1 of two, ranks 2 and 3 of 4: the head of its ranks' streams is
 * randperm position 2, which the registered world says. */
START_TEST(the_second_node_of_a_ddp_run)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 555,
                        .n = 10000,
                        .world = 4,
                        .batch = 8,
                        .workers = 2,
                        .rank_first = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 200);
    struct cfs_sampler_params hint = {.kind = CFS_SAMPLER_TORCH_DDP, .world = 4, .batch = 8};
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    p.hint = &hint;
    p.node = 1, p.nodes = 2;
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == 0, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, 555);
    ck_assert_uint_eq(id.sampler.world, 4);
    ck_assert_uint_eq(id.rank_first, 2);
    ck_assert_uint_eq(id.rank_count, 2);
    ck_assert_uint_eq(id.workers, 2);
    /* without the world, the head is not among this node's readers */
    p.hint = NULL;
    ck_assert_int_eq(identify(&p, &o, &id), -ENOENT);
    opens_free(&o);
}
END_TEST

START_TEST(a_contradicted_hint_is_reported)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 4242,
                        .n = 10000,
                        .world = 2,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 300);
    struct cfs_sampler_params hint = {.kind = CFS_SAMPLER_TORCH_DDP, .world = 8, .batch = 8};
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    p.hint = &hint;
    struct cfs_identified id;
    ck_assert_int_eq(identify(&p, &o, &id), 0);
    ck_assert_uint_eq(id.sampler.world, 2);
    ck_assert_ptr_nonnull(strstr(id.text, "registered world=8 contradicted"));
    opens_free(&o);
}
END_TEST

/* --- Orders that are not torch shuffles. ------------------------------------ */

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void refused(const uint32_t *order, size_t len, uint32_t n, pid_t pid)
{
    struct opens o = {0};
    for (size_t i = 0; i < len; i++)
        push(&o, order[i], pid + (pid_t)((i / 4) % 2), 999);
    struct cfs_identify_params p = params(n, 0, 1u << 16);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == -ENOENT, "misidentified: %s", id.text);
    opens_free(&o);
}

START_TEST(orders_that_are_not_shuffles_are_refused)
{
    enum { N = 1000, LEN = 400 };
    uint32_t *order = malloc(N * sizeof(*order));
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    refused(order, LEN, N, 1000); /* sequential */
    for (uint32_t i = 0; i < N; i++)
        order[i] = N - 1 - i;
    refused(order, LEN, N, 1000); /* reversed */
    for (uint32_t i = 0; i < N; i++)
        order[i] = (uint32_t)((uint64_t)i * 7 % N);
    refused(order, LEN, N, 1000); /* strided */
    uint64_t x = 88172645463325252ull;
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    for (uint32_t i = N - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(xorshift(&x) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    refused(order, LEN, N, 1000);
    /* Python's random.shuffle: from the end, rejection-sampled draws of
     * the same generator torch uses, seeded like torch (seed 3) */
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, 3);
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    for (uint32_t i = N - 1; i > 0; i--) {
        uint32_t bits = 32 - (uint32_t)__builtin_clz(i + 1), j;
        do
            j = cfs_mt19937_next32(&mt) >> (32 - bits);
        while (j > i);
        uint32_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    refused(order, LEN, N, 1000);
    free(order);
    /* a small dataset read in order, epoch after epoch, by one process */
    uint32_t small[100];
    for (uint32_t i = 0; i < 100; i++)
        small[i] = i % 10;
    struct opens o = {0};
    for (uint32_t i = 0; i < 100; i++)
        push(&o, small[i], 1000, 999);
    struct cfs_identify_params p = params(10, 0, 1u << 16);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == -ENOENT, "misidentified: %s", id.text);
    opens_free(&o);
}
END_TEST

/* A prefix of a real shuffle with its head cut off is not identified as
 * another seed. */
START_TEST(a_shuffle_seen_from_its_middle_is_not_misnamed)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 99,
                        .n = 1000,
                        .world = 1,
                        .batch = 1,
                        .ranks = 1,
                        .epochs = 1};
    struct opens o = simulate(&t, 1000);
    struct opens cut = {0};
    for (size_t i = 10; i < o.len; i++)
        push(&cut, o.s[i], o.pid[i], o.ppid[i]);
    struct cfs_identify_params p = params(t.n, t.seed, 1u << 16);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &cut, &id) == -ENOENT, "%s", id.text);
    opens_free(&o);
    opens_free(&cut);
}
END_TEST

/* --- Large n, the full range, the thread. -------------------------------- */

START_TEST(torch_2_6_large_n_for_a_small_seed)
{
    const uint32_t n = 214748365u; /* torch >= 2.6's inside-out shuffle */
    uint32_t pos[48], val[48];
    for (int i = 0; i < 48; i++)
        pos[i] = (uint32_t)i;
    ck_assert_int_eq(cfs_seed_inside_out_at(2, 0, n, pos, 48, val), 0);
    struct opens o = {0};
    for (int i = 0; i < 48; i++)
        push(&o, val[i], 1000, 999);
    struct cfs_identify_params p = {.n = n, .nodes = 1, .seed_first = 0, .seed_count = 4};
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == 0, "%s", id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH_DDP);
    ck_assert_uint_eq(id.sampler.seed, 2);
    ck_assert_uint_eq(id.sampler.world, 1);
    opens_free(&o);
}
END_TEST

/* Ranges of all 2^32 seeds (seed_count 0: the evidence demanded of a
 * whole-range search), each begun where its seed is a few million seeds
 * on: in the lower half, in the upper half, and past 2^32 - 1, where the
 * range wraps to 0.  A scan of every seed is this loop run longer (about a
 * minute of a core; the mount tests and the ImageNet bench run it). */
static const struct {
    uint32_t first, seed;
} whole_ranges[] = {
    {0, 0x00c0ffeeu},
    {0xff000000u, 0xff80beefu},
    {0xff800000u, 0x00001234u},
};

START_TEST(a_whole_range_from_anywhere)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH,
                        .seed = whole_ranges[_i].seed,
                        .n = 100000,
                        .world = 1,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 1,
                        .epochs = 1};
    struct opens o = simulate(&t, 64);
    struct cfs_identify_params p = {.n = t.n, .nodes = 1, .seed_first = whole_ranges[_i].first};
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == 0, "%s", id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH);
    ck_assert_uint_eq(id.sampler.seed, t.seed);
    ck_assert_uint_eq(id.workers, 2);
    opens_free(&o);
}
END_TEST

START_TEST(bad_input)
{
    struct cfs_identify_params p = params(0, 0, 16);
    uint32_t s[1] = {5};
    struct cfs_identified id;
    char err[256] = "";
    ck_assert_int_eq(cfs_identify_offline(&p, s, NULL, NULL, 1, &id, err, sizeof(err)), -EINVAL);
    ck_assert(err[0]);
    p.n = 5;
    err[0] = '\0';
    ck_assert_int_eq(cfs_identify_offline(&p, s, NULL, NULL, 1, &id, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "sample 5"));
    ck_assert_int_eq(cfs_identify_offline(&p, s, NULL, NULL, 0, &id, err, sizeof(err)), -ENOENT);
    cfs_identify_destroy(NULL);
}
END_TEST

static Suite *identify_suite(void)
{
    Suite *s = suite_create("identify");
    TCase *t = tcase_create("patterns");
    tcase_add_loop_test(t, ddp_worlds_and_workers, 0, 5);
    tcase_add_loop_test(t, before_the_first_batch_is_done, 0, 5);
    tcase_add_loop_test(t, a_registered_seed_completes_the_high_bits, 0, 5);
    tcase_add_loop_test(t, torch_loader_with_and_without_persistent_workers, 0, 5);
    tcase_add_loop_test(t, torch_sampler_is_told_from_ddp_by_its_second_epoch, 0, 5);
    tcase_add_test(t, small_datasets);
    tcase_add_test(t, a_resumed_ddp_run);
    tcase_add_test(t, a_head_reader_with_one_open);
    tcase_add_test(t, the_second_node_of_a_ddp_run);
    tcase_add_test(t, a_contradicted_hint_is_reported);
    tcase_add_test(t, bad_input);
    suite_add_tcase(s, t);
    TCase *f = tcase_create("refusals");
    tcase_add_test(f, orders_that_are_not_shuffles_are_refused);
    tcase_add_test(f, a_shuffle_seen_from_its_middle_is_not_misnamed);
    suite_add_tcase(s, f);
    TCase *big = tcase_create("large");
    tcase_set_timeout(big, 600);
    tcase_add_test(big, torch_2_6_large_n_for_a_small_seed);
    tcase_add_loop_test(big, a_whole_range_from_anywhere, 0,
                        sizeof(whole_ranges) / sizeof(whole_ranges[0]));
    suite_add_tcase(s, big);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_suite());
}
