/* Order identification: opens simulated from the exact sampler models
 * (clairfs/sampler.h) - every rank's DataLoader workers reading their
 * batches, the readers' opens interleaved one by one as processes race -
 * are identified with their kind, seed, world, batch and workers; orders
 * that are not torch shuffles (sequential, reversed, strided, a xorshift
 * permutation, a Python-style shuffle drawn from the same MT19937) are
 * refused, never misnamed.
 *
 * Cost (one core here, about 30 s in all): most cases search 4096 seeds
 * around the true one (milliseconds; the evidence demanded shrinks with
 * the range, see identify_verify.c); the false-identification cases search
 * 2^16 seeds each; the large-n case replays torch >= 2.6's 2n-word shuffle
 * for 4 seeds (9 s); ranges of all 2^32 seeds are searched from where
 * their seed is a few million seeds on; the threads' cases wait for their
 * scans' timing (seconds). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/metrics.h"
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

struct seen {
    int calls;
    struct cfs_identified id;
};

static void on_identified(void *arg, const struct cfs_identified *id)
{
    struct seen *s = arg;
    s->id = *id;
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
}

static enum cfs_identify_state wait_state(struct cfs_identify *id, enum cfs_identify_state want)
{
    enum cfs_identify_state st = cfs_identify_state(id, NULL);
    for (int i = 0; i < 3000 && st != want; i++) {
        usleep(10000);
        st = cfs_identify_state(id, NULL);
    }
    return st;
}

START_TEST(the_thread_learns_and_restarts)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 31337,
                        .n = 10000,
                        .world = 2,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 200);
    struct seen seen = {0};
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    for (size_t i = 0; i < o.len; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_IDENTIFIED), CFS_IDENTIFY_IDENTIFIED);
    struct cfs_identified got;
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    /* the state turns before the callback runs (on the module's thread) */
    for (int i = 0; i < 3000 && __atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST) < 1; i++)
        usleep(10000);
    ck_assert_int_eq(__atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST), 1);
    ck_assert_uint_eq(got.sampler.seed, 31337);
    ck_assert_uint_eq(seen.id.sampler.world, 2);
    cfs_identify_restart(id);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    /* a sequential reader afterwards: not a shuffle */
    for (uint32_t i = 0; i < 64; i++)
        cfs_identify_observe(id, i, 5000, 999);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_NOT_A_SHUFFLE), CFS_IDENTIFY_NOT_A_SHUFFLE);
    ck_assert_int_eq(__atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST), 1);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* cfs_identify_scan_share: nothing before a scan; while one runs, its
 * thread's share of a core over its last second, within what one thread
 * can get (how much depends on the host's load: SCHED_IDLE). */
START_TEST(the_scans_share_of_a_core)
{
    struct cfs_identify_params p = params(100000, 0, 0);
    p.seed_first = 0, p.seed_count = 0; /* every seed: seconds at least */
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    double share = 0;
    ck_assert(!cfs_identify_scan_share(id, &share));
    ck_assert(share < 0);
    for (uint32_t i = 0; i < 64; i++) /* no shuffle, but a scan tries every seed */
        cfs_identify_observe(id, (i * 7919u + 13) % 100000, 5000, 999);
    bool scanning = false;
    for (int i = 0; i < 500 && !scanning; i++) {
        scanning = cfs_identify_scan_share(id, &share);
        usleep(10000);
    }
    ck_assert(scanning);
    usleep(1200000);
    ck_assert(cfs_identify_scan_share(id, &share));
    ck_assert_msg(share >= 0 && share <= 1.05, "share %.3f", share);
    cfs_identify_destroy(id);
}
END_TEST

/* The CPU seconds the scans may take at the normal priority: the budget's
 * share of the cores over the longer of the reading so far and one epoch
 * at its pace; nothing before a second of reading or without a budget. */
START_TEST(the_search_budget_counts_one_epoch_at_the_trainers_pace)
{
    /* ImageNet on 2 CPUs, 5000 opens in 4 s: an epoch of 1025 s */
    ck_assert_double_eq_tol(cfs_identify_search_allowance(0.03, 2, 1281167, 5000, 4.0),
                            0.03 * 2 * 1281167 * 4.0 / 5000, 1e-9);
    /* past the epoch, the reading itself */
    ck_assert_double_eq_tol(cfs_identify_search_allowance(0.03, 2, 1000, 5000, 100.0), 6.0, 1e-9);
    ck_assert(cfs_identify_search_allowance(0.03, 2, 1281167, 5000, 0.9) == 0);
    ck_assert(cfs_identify_search_allowance(0, 2, 1281167, 5000, 4.0) == 0);
    ck_assert(cfs_identify_search_allowance(0.03, 2, 1281167, 0, 4.0) == 0);
    /* raised within the allowance only where the cores are busy: at idle
     * priority the last probe got less than a quarter of a core; a raised
     * spell lasts seconds, then a probe */
    ck_assert(!cfs_identify_search_raise(0, 10, -1, -1));   /* no probe yet */
    ck_assert(cfs_identify_search_raise(0, 10, 0.08, -1));  /* busy cores */
    ck_assert(!cfs_identify_search_raise(0, 10, 0.38, -1)); /* idle time: the trainers wait */
    ck_assert(!cfs_identify_search_raise(10, 10, 0.08, -1)); /* spent */
    ck_assert(cfs_identify_search_raise(9, 10, -1, 5));     /* a spell */
    ck_assert(!cfs_identify_search_raise(9, 10, -1, 25));   /* then a probe */
    ck_assert(!cfs_identify_search_raise(10, 10, -1, 5));
}
END_TEST

static atomic_bool spinning;

static void *spin(void *arg)
{
    (void)arg;
    while (atomic_load_explicit(&spinning, memory_order_relaxed))
        ;
    return NULL;
}

/* A scan past its head runs at the normal priority while the budget lasts
 * (search_budget 1: all of two CPUs over the epoch's 100000 opens at 40
 * opens in 1.6 s, an hour; the first attempt, at 32 opens, already past
 * the second of reading that gives a pace) where the cores are busy (a
 * spinning thread a CPU: its probe at idle priority gets next to nothing),
 * at idle priority without one (only its head, 2^20 seeds at the normal
 * priority, is sure to run); the metrics count its CPU time by the
 * priority it ran at. */
START_TEST(the_search_runs_raised_within_its_budget)
{
    struct cfs_metrics m;
    cfs_metrics_init(&m);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pthread_t spinners[8];
    size_t nspin = cpus > 0 && cpus < 8 ? (size_t)cpus : 8;
    atomic_store(&spinning, true);
    for (size_t i = 0; i < nspin; i++)
        ck_assert_int_eq(pthread_create(&spinners[i], NULL, spin, NULL), 0);
    struct cfs_identify_params p = params(100000, 0, 0);
    p.seed_first = 0, p.seed_count = 0; /* every seed: a CPU minute */
    p.search_budget = _i == 0 ? 1.0 : 0;
    p.cores = 2;
    p.metrics = &m;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (uint32_t i = 0; i < 40; i++) { /* no shuffle: the scan tries every seed */
        usleep(40000);
        cfs_identify_observe(id, (i * 7919u + 13) % 100000, 5000, 999);
    }
    /* the probe's 2 s, then raised: up to 20 s for half a CPU second on
     * a host the other tests keep busy too; without a budget, 4 s */
    for (int t = 0; t < (_i == 0 ? 200 : 40); t++) {
        usleep(100000);
        if (_i == 0 && cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL) > 600000000u)
            break;
    }
    cfs_identify_destroy(id); /* the counts are final */
    atomic_store(&spinning, false);
    for (size_t i = 0; i < nspin; i++)
        pthread_join(spinners[i], NULL);
    double normal = (double)cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL) * 1e-9;
    double idle = (double)cfs_metrics_get(&m, CFS_M_SEARCH_NS_IDLE) * 1e-9;
    if (_i == 0)
        ck_assert_msg(normal > 0.5 && idle < 0.1, "normal %.3f s, idle %.3f s", normal, idle);
    else
        ck_assert_msg(normal > 0 && normal < 0.5, "normal %.3f s, idle %.3f s", normal, idle);
}
END_TEST

static int calls_of(struct seen *s)
{
    return __atomic_load_n(&s->calls, __ATOMIC_SEQ_CST);
}

/* The range of the scans that must outlast a few epochs' opens: 2^26
 * seeds (seconds), a quarter of that where the sanitizers slow the scan
 * some six times (the sanitizer stage: a minute a test otherwise). */
#if defined(__SANITIZE_ADDRESS__)
#define ACROSS_SEEDS (1u << 24)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ACROSS_SEEDS (1u << 24)
#endif
#endif
#ifndef ACROSS_SEEDS
#define ACROSS_SEEDS (1u << 26)
#endif

/* Three epochs of t, a node's epoch `per` opens: the first epoch's 32
 * opens start a scan of ACROSS_SEEDS seeds (t's seed at its end), the other
 * epochs' opens, each with new workers, come while it runs; what the scan
 * that began at 32 opens identified, not a restart's. */
static struct cfs_identified scan_across_epochs(const struct trainer *t, size_t per,
                                                double new_reader_seconds)
{
    struct opens o = simulate(t, 3 * per);
    ck_assert_uint_eq(o.len, 3 * per);
    ck_assert_int_ne(o.pid[per], o.pid[0]); /* new workers every epoch */
    struct seen seen = {0};
    struct cfs_identify_params p = {.n = t->n, .nodes = 1, .global_max_offset = 4096,
                                    .seed_first = 0, .seed_count = ACROSS_SEEDS,
                                    .new_reader_seconds = new_reader_seconds,
                                    .process_alive = no_process,
                                    .on_identified = on_identified, .cb_arg = &seen};
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (size_t i = 0; i < 32; i++) /* the first attempt's opens */
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    usleep(500000); /* its scan has started (seconds) */
    for (size_t i = 32; i < o.len; i++) /* the later epochs meanwhile */
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    for (int i = 0; i < 60000 && calls_of(&seen) < 1; i++)
        usleep(10000);
    ck_assert_int_ge(calls_of(&seen), 1);
    ck_assert_uint_eq(seen.id.sampler.seed, t->seed);
    ck_assert_int_eq(seen.id.sampler.kind, t->kind);
    ck_assert_uint_eq(seen.id.opens, 32); /* the scan that began at 32 opens, not a restart */
    cfs_identify_destroy(id);
    opens_free(&o);
    return seen.id;
}

/* A scan that outlasts an epoch: the next epoch's new workers (readers
 * first seen after n opens) do not cancel it, so it ends and identifies
 * from the opens it started with.  Before, every epoch's new workers
 * restarted it from its first seed: at ImageNet's size on busy cores (the
 * scan at idle priority, minutes) it never ended. */
START_TEST(a_later_epochs_workers_do_not_restart_the_scan)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH,
                        .seed = ACROSS_SEEDS - 3, /* the end of the range: the scan's last seeds */
                        .n = 64,
                        .world = 1,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 1,
                        .epochs = 3};
    (void)scan_across_epochs(&t, 64, 0);
}
END_TEST

/* DDP ranks list the dataset each on its own after init_process_group;
 * one rank's workers can read a few batches ahead before the other's
 * start, and through a busy mount at ImageNet's size that is long past
 * new_reader_seconds.  The scan over the first rank's opens alone cannot
 * find the order (the epoch's head, rank 0's worker 0's, is missing); the
 * late rank - a reader whose parent no reader had - cancels it and the
 * next scan, over both ranks' opens, finds the seed at once.  Case 1: the
 * late rank's worker 1 opens first, its worker 0 (the head) half a second
 * later: a sibling within new_reader_seconds of its parent's first reader
 * restarts the scan too (2.5 s of slack for the half-second sleep on a
 * loaded host).  Before, the first scan went on over all 2^32 seeds
 * (minutes; in the mount a whole scan's time wasted, once a second one).
 * Each restarting open leaves the module's thread at the normal priority
 * (observe_restarting). */
static const struct {
    double new_reader_seconds, wait;
    bool head_later;
} late_cases[] = {{0.2, 0.5, false}, {3.0, 3.5, true}};

/* Threads of this process at SCHED_IDLE (policy 5: field 41 of
 * /proc/self/task/TID/stat): the module's thread in a scan's idle part. */
static int idle_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int idle = 0;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d))) {
        char path[300], line[1024];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* a thread that ended */
        char *got = fgets(line, sizeof(line), f);
        fclose(f);
        char *p = got ? strrchr(line, ')') : NULL;
        int field = 2; /* ")" ends field 2 */
        for (char *tok = p ? strtok(p + 1, " ") : NULL; tok; tok = strtok(NULL, " "))
            if (++field == 41) {
                idle += atoi(tok) == SCHED_IDLE;
                break;
            }
    }
    closedir(d);
    return idle;
}

/* observe() for an open that restarts the running scan: the module's thread,
 * in the scan's idle part before it, is back at the normal priority when
 * observe returns (on busy cores it would not run to see the cancellation;
 * the next attempt's first part, 2^20 seeds, takes longer than this check). */
static void observe_restarting(struct cfs_identify *id, uint32_t s, pid_t pid, pid_t ppid)
{
    int before = idle_threads();
    cfs_identify_observe(id, s, pid, ppid);
    if (before == 0)
        return; /* SCHED_IDLE refused here: the module fell back to nice 19 */
    ck_assert_int_eq(before, 1);
    ck_assert_int_eq(idle_threads(), 0);
}

START_TEST(a_late_ranks_first_open_restarts_the_scan)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 1000, /* the head of the range: found as soon as scanned */
                        .n = 10000,
                        .world = 2,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 400);
    struct opens late = {0};
    struct seen seen = {0};
    struct cfs_identify_params p = {.n = t.n, .nodes = 1, .global_max_offset = 4096,
                                    .seed_first = 0, .seed_count = UINT32_MAX,
                                    .new_reader_seconds = late_cases[_i].new_reader_seconds,
                                    .process_alive = no_process,
                                    .on_identified = on_identified, .cb_arg = &seen};
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    size_t first = 0, other = SIZE_MAX;
    for (size_t i = 0; i < o.len; i++) { /* rank 1's workers first, 48 opens */
        if (o.ppid[i] == 1001 && first < 48) {
            cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
            first++;
        } else {
            if (other == SIZE_MAX && o.pid[i] == 2001)
                other = late.len; /* rank 0's worker 1's first open */
            push(&late, o.s[i], o.pid[i], o.ppid[i]);
        }
    }
    ck_assert_uint_eq(first, 48);
    ck_assert_uint_ne(other, SIZE_MAX);
    ck_assert_int_eq(late.pid[0], 2000); /* rank 0's worker 0: the head */
    usleep((useconds_t)(late_cases[_i].wait * 1e6)); /* the scan is in its idle part */
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    if (late_cases[_i].head_later) {
        observe_restarting(id, late.s[other], late.pid[other], late.ppid[other]);
        usleep(500000); /* that scan, without the head, has passed seed 1000 */
    }
    observe_restarting(id, late.s[0], late.pid[0], late.ppid[0]);
    for (size_t i = 1; i < late.len; i++)
        if (!late_cases[_i].head_later || i != other)
            cfs_identify_observe(id, late.s[i], late.pid[i], late.ppid[i]);
    for (int i = 0; i < 2000 && calls_of(&seen) < 1; i++)
        usleep(10000); /* 20 s: the first scan's 2^32 seeds take minutes */
    ck_assert_int_ge(calls_of(&seen), 1);
    ck_assert_uint_eq(seen.id.sampler.seed, t.seed);
    ck_assert_uint_eq(seen.id.sampler.world, 2);
    ck_assert_uint_eq(seen.id.rank_count, 2);
    cfs_identify_destroy(id);
    opens_free(&late);
    opens_free(&o);
}
END_TEST

/* DDP without DataLoader workers: the ranks read themselves, siblings under
 * one launcher (pids 1000 + r, parent 999).  Rank 0, with the head, starts
 * long after rank 1 (past new_reader_seconds, 0.2 s here; a minute in a
 * mount).  Case 0: rank 1 still runs, so rank 0 is a late rank: its first
 * open restarts the scan, which finds the seed at once (before, the scan
 * over rank 1's opens alone went on over 2^32 seeds, minutes).  Case 1:
 * its sibling ended (a process per file, a later epoch's workers): no
 * restart, the scan goes on. */
static bool ranks_run(void *arg, pid_t pid)
{
    return *(const bool *)arg && (pid == 1000 || pid == 1001);
}

START_TEST(a_late_rank_without_workers_restarts_the_scan_while_its_sibling_runs)
{
    bool running = _i == 0;
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 1000,
                        .n = 10000,
                        .world = 2,
                        .batch = 4,
                        .workers = 0,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 400);
    struct seen seen = {0};
    struct cfs_identify_params p = {.n = t.n, .nodes = 1, .global_max_offset = 4096,
                                    .seed_first = 0, .seed_count = UINT32_MAX,
                                    .new_reader_seconds = 0.2,
                                    .process_alive = ranks_run, .process_alive_arg = &running,
                                    .on_identified = on_identified, .cb_arg = &seen};
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    size_t rank1 = 0;
    for (size_t i = 0; i < o.len && rank1 < 48; i++)
        if (o.pid[i] == 1001) {
            cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
            rank1++;
        }
    ck_assert_uint_eq(rank1, 48);
    usleep(500000); /* past new_reader_seconds; the scan is in its idle part */
    for (size_t i = 0; i < o.len; i++)
        if (o.pid[i] == 1000)
            cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    /* running: 20 s at most (found at once); ended: 2 s, learning on */
    for (int i = 0; i < (running ? 2000 : 200) && calls_of(&seen) < 1; i++)
        usleep(10000);
    if (running) {
        ck_assert_int_ge(calls_of(&seen), 1);
        ck_assert_uint_eq(seen.id.sampler.seed, t.seed);
        ck_assert_uint_eq(seen.id.sampler.world, 2);
        ck_assert_uint_eq(seen.id.rank_count, 2);
    } else {
        ck_assert_int_eq(calls_of(&seen), 0);
        ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    }
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* A node that runs 2 of 4 ranks reads n/2 files an epoch: the next
 * epoch's new workers come before n opens, but long after the first open
 * (here new_reader_seconds = 0.2 s; a minute in a mount), and do not
 * restart the scan either. */
START_TEST(a_partial_nodes_later_workers_do_not_restart_the_scan)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = ACROSS_SEEDS - 3,
                        .n = 64,
                        .world = 4,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 3};
    struct cfs_identified id = scan_across_epochs(&t, 32, 0.2);
    ck_assert_uint_eq(id.sampler.world, 4);
    ck_assert_uint_eq(id.rank_count, 2);
}
END_TEST

/* Epoch 0 of torch-sampler reads as torch-ddp at world 1 (the likelier);
 * its epoch 1 tells them apart and the module says so again. */
START_TEST(the_thread_refines_with_the_next_epoch)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_SAMPLER,
                        .seed = 2024,
                        .n = 200,
                        .world = 1,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 1,
                        .persistent = true,
                        .epochs = 2};
    struct opens o = simulate(&t, 100000);
    ck_assert_uint_eq(o.len, 400);
    struct seen seen = {0};
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (size_t i = 0; i < 200; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_IDENTIFIED), CFS_IDENTIFY_IDENTIFIED);
    for (int i = 0; i < 3000 && calls_of(&seen) < 1; i++)
        usleep(10000);
    ck_assert_int_eq(calls_of(&seen), 1);
    ck_assert_int_eq(seen.id.sampler.kind, CFS_SAMPLER_TORCH_DDP);
    ck_assert(seen.id.epoch_seed_only); /* nothing yet says the next epoch */
    ck_assert(!seen.id.per_epoch_global);
    for (size_t i = 200; i < o.len; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    for (int i = 0; i < 3000 && calls_of(&seen) < 2; i++)
        usleep(10000);
    ck_assert_int_eq(calls_of(&seen), 2);
    struct cfs_identified got;
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    ck_assert_int_eq(got.sampler.kind, CFS_SAMPLER_TORCH_SAMPLER);
    ck_assert_int_eq(seen.id.sampler.kind, CFS_SAMPLER_TORCH_SAMPLER);
    ck_assert(got.sampler.persistent_workers);
    ck_assert_uint_eq(got.sampler.seed, 2024);
    ck_assert_uint_eq(got.epoch, 1);
    ck_assert(!got.epoch_seed_only && !got.per_epoch_global);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* torch-global without its seed: every epoch the first randperm of a
 * private generator seeded anew.  Epoch 0 reads as torch-ddp at world 1 and
 * says that epoch only; epoch 1 refutes it and fits a second fresh seed:
 * torch-global, learnt again from each epoch's first opens (DataLoader
 * workers, not persistent: new processes each epoch). */
START_TEST(torch_global_without_its_seed_epoch_by_epoch)
{
    const uint32_t center = 0x5eed0000u, n = 1500;
    const uint32_t seeds[] = {center - 20000, center + 7, center + 13000, center - 3};
    struct cfs_identify_params p = params(n, center, 1u << 16);
    struct seen seen = {0};
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    struct opens ep[4];
    for (uint32_t e = 0; e < 4; e++) {
        struct trainer t = {.kind = CFS_SAMPLER_TORCH_SAMPLER,
                            .seed = seeds[e],
                            .n = n,
                            .world = 1,
                            .batch = 8,
                            .workers = 2,
                            .ranks = 1,
                            .epochs = 1};
        ep[e] = simulate(&t, SIZE_MAX);
        ck_assert_uint_eq(ep[e].len, n);
        for (size_t i = 0; i < n; i++)
            ep[e].pid[i] += (pid_t)(100000 * e); /* this epoch's workers */
    }
    for (uint32_t e = 0; e < 4; e++) {
        /* the epoch's first batches, then the module's answer, then the rest */
        for (size_t i = 0; i < 96; i++)
            cfs_identify_observe(id, ep[e].s[i], ep[e].pid[i], ep[e].ppid[i]);
        for (int i = 0; i < 3000 && calls_of(&seen) < (int)e + 1; i++)
            usleep(10000);
        ck_assert_int_eq(calls_of(&seen), e + 1);
        struct cfs_identified got = seen.id;
        ck_assert_msg(got.epoch_seed_only, "epoch %u: %s", e, got.text);
        ck_assert_int_eq(got.sampler.kind, CFS_SAMPLER_TORCH_DDP);
        ck_assert_uint_eq(got.sampler.world, 1);
        ck_assert_uint_eq(got.epoch, e);
        /* torch-ddp reads seed + epoch: the epoch's private seed */
        ck_assert_uint_eq((uint32_t)(got.sampler.seed + e), seeds[e]);
        ck_assert_uint_eq(got.opens_before, (uint64_t)n * e);
        ck_assert_uint_eq(got.workers, 2);
        ck_assert(got.per_epoch_global == (e > 0));
        if (e > 0)
            ck_assert_msg(strstr(got.text, "torch-global (no seed registered) epoch") != NULL,
                          "%s", got.text);
        for (size_t i = 96; i < n; i++)
            cfs_identify_observe(id, ep[e].s[i], ep[e].pid[i], ep[e].ppid[i]);
    }
    /* a reader that is no shuffle afterwards: the window ends unidentified */
    for (uint32_t i = 0; i < 2 * n; i++)
        cfs_identify_observe(id, i % n, 7000, 999);
    usleep(100000);
    ck_assert_int_eq(calls_of(&seen), 4);
    ck_assert_int_ne(cfs_identify_state(id, NULL), CFS_IDENTIFY_IDENTIFIED);
    cfs_identify_destroy(id);
    for (uint32_t e = 0; e < 4; e++)
        opens_free(&ep[e]);
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
    tcase_add_test(big, the_thread_learns_and_restarts);
    tcase_add_test(big, the_scans_share_of_a_core);
    tcase_add_test(big, the_search_budget_counts_one_epoch_at_the_trainers_pace);
    tcase_add_loop_test(big, the_search_runs_raised_within_its_budget, 0, 2);
    tcase_add_test(big, the_thread_refines_with_the_next_epoch);
    tcase_add_test(big, a_later_epochs_workers_do_not_restart_the_scan);
    tcase_add_test(big, a_partial_nodes_later_workers_do_not_restart_the_scan);
    tcase_add_loop_test(big, a_late_ranks_first_open_restarts_the_scan, 0,
                        sizeof(late_cases) / sizeof(late_cases[0]));
    tcase_add_loop_test(big, a_late_rank_without_workers_restarts_the_scan_while_its_sibling_runs,
                        0, 2);
    tcase_add_test(big, torch_global_without_its_seed_epoch_by_epoch);
    tcase_add_loop_test(big, a_whole_range_from_anywhere, 0,
                        sizeof(whole_ranges) / sizeof(whole_ranges[0]));
    suite_add_tcase(s, big);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_suite());
}
