/* The offset finder: known offsets K (0 to near 2^24; 2^22 under the
 * sanitizers) and per-epoch words G are found alone from eight observed
 * entries; the matches over a range
 * equal a brute-force count made with the real randperm (small n, where
 * many offsets agree: ambiguous, with the count); contradictory or foreign
 * constraints name nothing; the path without a cheap constraint agrees; the
 * torch-global model's epochs are what the finder reads; without S, the
 * seed search recovers one epoch's private seed, and three epochs' private
 * seeds name the run's seed when it is in the table of seeds people use
 * (not one outside it). Ground truth here is the
 * definition (stream seeded S, random64 at word K + 2, its low half seeds
 * randperm), written out apart from the finder's code. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/rng_offset.h"
#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"
#include "sanitized.h"

#define N 1000u
#define SEED 20240601u

/* The private seed of the random64 drawn at word `draw` of the stream. */
static uint32_t private_seed_at(uint64_t seed, uint64_t draw)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, draw);
    return (uint32_t)(cfs_mt19937_next64(&mt) & INT64_MAX);
}

static void perm_of(uint32_t private_seed, uint32_t n, uint32_t *perm)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, private_seed);
    cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_LEGACY);
}

/* Positions 0..count-1 of the permutation drawn at `draw`. */
static size_t prefix_at(uint64_t draw, uint32_t n, size_t count, struct cfs_seed_constraint *c)
{
    uint32_t *perm = malloc(n * sizeof(*perm));
    ck_assert_ptr_nonnull(perm);
    perm_of(private_seed_at(SEED, draw), n, perm);
    for (size_t i = 0; i < count; i++)
        c[i] = (struct cfs_seed_constraint){.pos = (uint32_t)i, .value = perm[i]};
    free(perm);
    return count;
}

static struct cfs_rng_problem problem(uint32_t n, const struct cfs_seed_constraint *c, size_t nc)
{
    return (struct cfs_rng_problem){
        .seed = SEED, .n = n, .algo = CFS_RANDPERM_CURRENT, .c = c, .nc = nc};
}

static void expect_offset(uint64_t k, uint64_t max_offset)
{
    struct cfs_seed_constraint c[8];
    prefix_at(k + 2, N, 8, c);
    struct cfs_rng_problem p = problem(N, c, 8);
    struct cfs_rng_result r;
    ck_assert_int_eq(cfs_rng_offset_find(&p, max_offset, &r), 0);
    ck_assert_uint_eq(r.searched, max_offset + 1);
    ck_assert_msg(r.verdict == CFS_SEED_UNIQUE, "K=%llu: %s, %llu matches",
                  (unsigned long long)k, cfs_seed_verdict_name(r.verdict),
                  (unsigned long long)r.matches);
    ck_assert_uint_eq(r.n_found, 1);
    ck_assert_uint_eq(r.found[0], k);
}

START_TEST(known_offsets_are_found_alone)
{
    expect_offset(0, 200000);
    expect_offset(1, 200000);
    expect_offset(1000, 200000);
    expect_offset(123457, 200000);
    /* A K far along the stream, at the range's end: near 2^24, and under
     * the sanitizers near 2^22, the same walk a quarter as long (2^24
     * offsets took 55 s there, most of this test's time). */
    const uint64_t far = CFS_TEST_SANITIZED ? 1u << 22 : 1u << 24;
    expect_offset(far - 3, far + 100);
}
END_TEST

/* torch-global's epoch `epoch` from the sampler model, first count entries. */
static void model_prefix(uint64_t k, uint64_t g, bool pw, uint32_t epoch, size_t count,
                         struct cfs_seed_constraint *c)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_GLOBAL, .seed = SEED, .n = N,
                                    .world = 2, .batch = 4, .persistent_workers = pw,
                                    .rng_offset = k, .rng_epoch_words = g};
    struct cfs_sampler *s;
    char err[256];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, epoch), 0);
    for (size_t i = 0; i < count; i++)
        c[i] = (struct cfs_seed_constraint){.pos = (uint32_t)i,
                                            .value = cfs_sampler_rank_at(s, 1, i)};
    cfs_sampler_destroy(s);
}

START_TEST(epoch_words_are_found_from_the_next_epoch)
{
    const uint64_t gs[] = {0, 10, 800};
    for (int pw = 0; pw < 2; pw++)
        for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
            struct cfs_seed_constraint c0[8], c1[8], c2[8];
            model_prefix(1000, gs[i], pw, 0, 8, c0);
            model_prefix(1000, gs[i], pw, 1, 8, c1);
            model_prefix(1000, gs[i], pw, 2, 8, c2);
            struct cfs_rng_problem p0 = problem(N, c0, 8), p1 = problem(N, c1, 8),
                                   p2 = problem(N, c2, 8);
            struct cfs_rng_result r;
            /* The model's epoch 0 is the definition's draw at K + 2. */
            ck_assert_int_eq(cfs_rng_offset_find(&p0, 5000, &r), 0);
            ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
            ck_assert_uint_eq(r.found[0], 1000);
            ck_assert_int_eq(cfs_rng_epoch_words_find(&p1, 1000, pw, 1, 5000, &r), 0);
            ck_assert_msg(r.verdict == CFS_SEED_UNIQUE && r.found[0] == gs[i],
                          "G=%llu pw=%d: %s, found %llu", (unsigned long long)gs[i], pw,
                          cfs_seed_verdict_name(r.verdict), (unsigned long long)r.found[0]);
            /* Epoch 2 moves twice as far per word: the same G. */
            ck_assert_int_eq(cfs_rng_epoch_words_find(&p2, 1000, pw, 2, 5000, &r), 0);
            ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
            ck_assert_uint_eq(r.found[0], gs[i]);
            ck_assert_uint_eq(cfs_rng_epoch_draw(1000, gs[i], pw, 1),
                              1000 + 2 + (pw ? 2 : 4) + gs[i]);
        }
}
END_TEST

/* Small n: many offsets agree. The finder's count equals the definition's. */
START_TEST(matches_equal_a_brute_force_count)
{
    const uint32_t sizes[] = {3, 7, 50};
    for (size_t si = 0; si < 3; si++) {
        uint32_t n = sizes[si], perm[50];
        struct cfs_seed_constraint c[2];
        prefix_at(2 + 17, n, 2, c);
        /* Also a constraint the cheap test cannot use (value below pos). */
        c[1] = (struct cfs_seed_constraint){.pos = n - 1, .value = 0};
        for (size_t nc = 1; nc <= 2; nc++) {
            uint64_t expected = 0, first_k = UINT64_MAX;
            for (uint64_t k = 0; k < 3000; k++) {
                perm_of(private_seed_at(SEED, k + 2), n, perm);
                bool ok = perm[c[0].pos] == c[0].value && (nc < 2 || perm[n - 1] == 0);
                if (ok && first_k == UINT64_MAX)
                    first_k = k;
                expected += ok;
            }
            struct cfs_rng_problem p = problem(n, c, nc);
            struct cfs_rng_result r;
            ck_assert_int_eq(cfs_rng_offset_find(&p, 2999, &r), 0);
            ck_assert_uint_eq(r.matches, expected);
            ck_assert_int_eq(r.verdict, expected == 0   ? CFS_SEED_NONE
                                        : expected == 1 ? CFS_SEED_UNIQUE
                                                        : CFS_SEED_AMBIGUOUS);
            if (expected)
                ck_assert_uint_eq(r.found[0], first_k);
        }
    }
    /* n = 3: two offsets certainly agree on one entry. */
    struct cfs_seed_constraint one = {.pos = 0, .value = 1};
    struct cfs_rng_problem p = problem(3, &one, 1);
    struct cfs_rng_result r;
    ck_assert_int_eq(cfs_rng_offset_find(&p, 100, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_AMBIGUOUS);
    ck_assert_uint_eq(r.n_found, CFS_RNG_MAX_CANDIDATES);
    ck_assert_uint_gt(r.matches, 8);
}
END_TEST

/* Only value < pos constraints: every candidate replayed, same answer. */
START_TEST(without_a_cheap_constraint_every_candidate_is_replayed)
{
    uint32_t perm[N];
    struct cfs_seed_constraint c[8];
    size_t nc = 0;
    perm_of(private_seed_at(SEED, 4321 + 2), N, perm);
    for (uint32_t i = 0; i < N && nc < 8; i++)
        if (perm[i] < i)
            c[nc++] = (struct cfs_seed_constraint){.pos = i, .value = perm[i]};
    ck_assert_uint_eq(nc, 8);
    struct cfs_rng_problem p = problem(N, c, nc);
    struct cfs_rng_result r;
    ck_assert_int_eq(cfs_rng_offset_find(&p, 20000, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.found[0], 4321);
}
END_TEST

START_TEST(contradictions_foreign_orders_and_bad_input)
{
    struct cfs_seed_constraint c[8];
    struct cfs_rng_result r;
    prefix_at(1000 + 2, N, 8, c);
    /* one position, two values */
    struct cfs_seed_constraint two[2] = {{.pos = 0, .value = 5}, {.pos = 0, .value = 6}};
    struct cfs_rng_problem p = problem(N, two, 2);
    ck_assert_int_eq(cfs_rng_offset_find(&p, 1000, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_NONE);
    ck_assert_uint_eq(r.matches, 0);
    /* the true K's entries, one changed: consistent, but no offset */
    c[3].value = c[3].value == 0 ? 1 : 0;
    for (int i = 0; i < 8; i++)
        if (i != 3 && c[i].value == c[3].value)
            c[3].value = c[i].value + 1 < N ? c[i].value + 1 : 2;
    p = problem(N, c, 8);
    ck_assert_int_eq(cfs_rng_offset_find(&p, 5000, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_NONE);
    /* a different S: the real K is not found */
    prefix_at(1000 + 2, N, 8, c);
    p = problem(N, c, 8);
    p.seed = SEED + 1;
    ck_assert_int_eq(cfs_rng_offset_find(&p, 5000, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_NONE);
    /* no constraint: every offset agrees */
    p = problem(N, c, 0);
    ck_assert_int_eq(cfs_rng_offset_find(&p, 99, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIDENTIFIABLE);
    ck_assert_uint_eq(r.matches, 100);
    /* bad input */
    struct cfs_seed_constraint out_of_range = {.pos = N, .value = 0};
    p = problem(N, &out_of_range, 1);
    ck_assert_int_eq(cfs_rng_offset_find(&p, 10, &r), -EINVAL);
    struct cfs_seed_constraint far = {.pos = CFS_RNG_MAX_POS, .value = 0};
    p = problem(UINT32_MAX, &far, 1);
    p.algo = CFS_RANDPERM_LEGACY;
    ck_assert_int_eq(cfs_rng_offset_find(&p, 10, &r), -EINVAL);
    p = problem(UINT32_MAX, c, 1);
    ck_assert_int_eq(cfs_rng_offset_find(&p, 10, &r), -ENOTSUP);
    p = problem(N, c, 1);
    ck_assert_int_eq(cfs_rng_draw_search(&p, 0, 0, 10, &r), -EINVAL);
    ck_assert_int_eq(cfs_rng_epoch_words_find(&p, 0, false, 0, 10, &r), -EINVAL);
    ck_assert_int_eq(cfs_rng_offset_find(&p, UINT64_MAX, &r), -EINVAL);
}
END_TEST

/* Without S: one epoch's private seed is a 64-bit draw whose low half the
 * exhaustive seed search recovers (skip_words 0), and its randperm is that
 * epoch's order. */
START_TEST(without_the_seed_the_seed_search_finds_the_epoch)
{
    struct cfs_seed_constraint c[8];
    prefix_at(123457 + 2, N, 8, c);
    uint32_t priv = private_seed_at(SEED, 123457 + 2);
    struct cfs_seed_problem sp = {.n = N, .algo = CFS_RANDPERM_CURRENT, .c = c, .nc = 8};
    struct cfs_seed_result r;
    ck_assert_int_eq(cfs_seed_search(&sp, priv - (1u << 19), 1u << 20, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], priv);
}
END_TEST

/* The background walk gives the synchronous answer, and stops when asked. */
START_TEST(the_background_walk_matches_and_cancels)
{
    struct cfs_seed_constraint c[8];
    prefix_at(123457 + 2, N, 8, c);
    struct cfs_rng_problem p = problem(N, c, 8);
    struct cfs_rng_search *bg;
    struct cfs_rng_result r;
    ck_assert_int_eq(cfs_rng_search_start(&p, 2, 1, 200000, &bg), 0);
    c[0].value ^= 1; /* the problem was copied */
    int rc = cfs_rng_search_finish(bg, &r);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.found[0], 123457);
    ck_assert_uint_eq(r.searched, 200000);
    ck_assert(!r.cancelled);

    prefix_at(123457 + 2, N, 8, c);
    ck_assert_int_eq(cfs_rng_search_start(&p, 2, 1, 1ull << 40, &bg), 0);
    while (cfs_rng_search_progress(bg) == 0.0)
        usleep(1000);
    const char *prio = cfs_rng_search_priority(bg);
    ck_assert(!strcmp(prio, "idle") || !strcmp(prio, "nice 19") || !strcmp(prio, "normal"));
    ck_assert(!cfs_rng_search_done(bg));
    cfs_rng_search_cancel(bg);
    ck_assert_int_eq(cfs_rng_search_finish(bg, &r), 0);
    ck_assert(r.cancelled);
    ck_assert_uint_gt(r.searched, 0);
    ck_assert_uint_lt(r.searched, 1ull << 40);
    /* What was examined was examined whole: K = 123457 lies within it. */
    if (r.searched > 123457) {
        ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
        ck_assert_uint_eq(r.found[0], 123457);
    }
}
END_TEST

/* ---- the run's global seed from three epochs' private seeds (rng_table.c) */

/* Epochs first..first+2's private seeds of torch-global (S, K, G, L). */
static void private_seeds(uint64_t seed, uint64_t k, uint64_t g, bool pers, uint32_t first,
                          uint32_t out[3])
{
    for (uint32_t e = 0; e < 3; e++)
        out[e] = private_seed_at(seed, cfs_rng_epoch_draw(k, g, pers, first + e));
}

/* The torch-global model of what was found reads, in epochs first ..
 * first + 3, the permutations of those epochs' private seeds: the fourth,
 * never seen by the search, predicted. */
static void expect_model_reads(const struct cfs_rng_table_result *r, uint64_t seed, uint64_t k,
                               uint64_t g, bool pers, uint32_t first)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_GLOBAL,
                                    .seed = r->seed,
                                    .n = N,
                                    .world = 1,
                                    .batch = 1,
                                    .rng_offset = r->offset,
                                    .rng_epoch_words = r->words,
                                    .persistent_workers = r->persistent_workers,
                                    .randperm = CFS_RANDPERM_CURRENT};
    struct cfs_sampler *s = NULL;
    char err[128];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    uint32_t perm[N];
    for (uint32_t e = first; e < first + 4; e++) {
        perm_of(private_seed_at(seed, cfs_rng_epoch_draw(k, g, pers, e)), N, perm);
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(cfs_sampler_rank_at(s, 0, i), perm[i]);
    }
    cfs_sampler_destroy(s);
}

static const struct {
    uint64_t seed, k, g;
    bool pers;
    uint32_t first;
} table_cases[] = {
    {42, 1000003, 3000, false, 0},   /* timm's default, rank 0, a small model */
    {1234, 25600000, 0, true, 0},    /* ResNet-50's draws, persistent workers */
    {42 + 3, 500, 384000, false, 2}, /* 42 + rank, dropout, learnt from epoch 2 */
    {3407, 0, (1u << 24), false, 1}, /* K and G at their bounds */
};

START_TEST(a_table_seed_is_found)
{
    uint32_t ps[3];
    private_seeds(table_cases[_i].seed, table_cases[_i].k, table_cases[_i].g, table_cases[_i].pers,
                  table_cases[_i].first, ps);
    struct cfs_rng_table_problem p = {.private_seeds = ps,
                                      .first_epoch = table_cases[_i].first,
                                      .max_offset = 1u << 25,
                                      .max_words = 1u << 24};
    /* Case 2's seed, 45, is the table's 60th: the 59 before it each walk
     * the stream over K's range and twice G's (2^26 words).  Under the
     * sanitizers those ranges are 2^22 and 2^20, still above its K and G:
     * the same walks, a tenth as long (45 s there otherwise). */
    if (CFS_TEST_SANITIZED && _i == 2)
        p.max_offset = 1u << 22, p.max_words = 1u << 20;
    struct cfs_rng_table_result r;
    ck_assert_int_eq(cfs_rng_table_find(&p, NULL, &r), 0);
    ck_assert_msg(r.found, "seed %llu not found", (unsigned long long)table_cases[_i].seed);
    ck_assert_uint_eq(r.seed, table_cases[_i].seed);
    ck_assert_uint_eq(r.offset, table_cases[_i].k);
    ck_assert_uint_eq(r.words, table_cases[_i].g);
    ck_assert_int_eq(r.persistent_workers, table_cases[_i].pers);
    ck_assert(!r.cancelled);
    expect_model_reads(&r, table_cases[_i].seed, table_cases[_i].k, table_cases[_i].g,
                       table_cases[_i].pers, table_cases[_i].first);
}
END_TEST

/* A seed outside the table, or an epoch that is not the stream's next,
 * is not claimed: every seed of the table tried (K's range kept short
 * here: the whole table at 2^25 words a seed is a minute), nothing found.
 * Two epochs of a table seed with a third from elsewhere name nothing
 * either: the third epoch's word is the evidence. */
START_TEST(a_seed_outside_the_table_is_not_claimed)
{
    uint64_t table[2048];
    size_t ntable = cfs_rng_seed_table(table, 2048);
    uint32_t ps[3];
    private_seeds(5000, 7000, 100, false, 0, ps);
    struct cfs_rng_table_problem p = {
        .private_seeds = ps, .max_offset = 1u << 16, .max_words = 1u << 12};
    struct cfs_rng_table_result r;
    ck_assert_int_eq(cfs_rng_table_find(&p, NULL, &r), 0);
    ck_assert(!r.found);
    ck_assert_uint_eq(r.seeds_tried, ntable);
    p.seeds = (const uint64_t[]){5000};
    p.nseeds = 1;
    ck_assert_int_eq(cfs_rng_table_find(&p, NULL, &r), 0);
    ck_assert(r.found && r.seed == 5000 && r.offset == 7000 && r.words == 100);

    private_seeds(42, 7000, 100, false, 0, ps);
    ps[2] = private_seed_at(42, cfs_rng_epoch_draw(7000, 101, false, 2));
    p.seeds = NULL;
    p.nseeds = 0;
    ck_assert_int_eq(cfs_rng_table_find(&p, NULL, &r), 0);
    ck_assert(!r.found);
}
END_TEST

/* The table: the seeds people use first (42 leads), then 0..1023 without
 * repeats, then a few large ones; a cancelled search stops before a seed. */
START_TEST(the_table_and_cancel)
{
    uint64_t table[2048];
    size_t n = cfs_rng_seed_table(table, 2048);
    ck_assert_uint_eq(table[0], 42);
    ck_assert_uint_eq(n, 17 - 8 + 1024 + 3); /* 8 of the 17 are below 1024 */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ck_assert_uint_ne(table[i], table[j]);
    bool small[1024] = {false}, has3407 = false;
    for (size_t i = 0; i < n; i++) {
        if (table[i] < 1024)
            small[table[i]] = true;
        has3407 = has3407 || table[i] == 3407;
    }
    for (size_t i = 0; i < 1024; i++)
        ck_assert(small[i]);
    ck_assert(has3407);
    ck_assert_uint_eq(cfs_rng_seed_table(table, 5), 5);
    uint32_t ps[3] = {1, 2, 3};
    atomic_bool cancel = true;
    struct cfs_rng_table_problem p = {
        .private_seeds = ps, .max_offset = 1u << 25, .max_words = 1u << 24};
    struct cfs_rng_table_result r;
    ck_assert_int_eq(cfs_rng_table_find(&p, &cancel, &r), 0);
    ck_assert(r.cancelled && !r.found);
    ck_assert_uint_eq(r.seeds_tried, 0);
    p.private_seeds = NULL;
    ck_assert_int_eq(cfs_rng_table_find(&p, NULL, &r), -EINVAL);
}
END_TEST

/* The full range's search on a slice of it around the seed (the whole
 * 2^32 is minutes): threads of seeds, each thread count answering alike. */
static void range_find(const uint32_t ps[3], uint32_t first_epoch, uint32_t words, uint32_t from,
                       uint64_t count, unsigned threads, struct cfs_rng_table_result *r)
{
    struct cfs_rng_range_problem p = {.table = {.private_seeds = ps,
                                                .first_epoch = first_epoch,
                                                .max_offset = 1u << 25,
                                                .max_words = 1u << 24},
                                      .words = words,
                                      .seed_first = from,
                                      .seed_count = count};
    struct cfs_seed_threads t = {.threads = threads, .idle = true};
    ck_assert_int_eq(cfs_rng_range_find(&p, NULL, &t, r), 0);
    ck_assert(!r->cancelled);
}

static const struct {
    uint64_t seed, k, g;
    bool pers;
    uint32_t first, words;
} range_cases[] = {
    {3000000017u, 100, 50, false, 0, 0},     /* no model: K of a few draws */
    {2718281828u, 0, 30, true, 1, 0},        /* learnt from epoch 1, persistent workers */
    {4294967295u, 617, 0, false, 0, 0},      /* the last seed; K at the default bound */
    {123456789u, 1000, 12, false, 0, 1248},  /* the second twist */
};

/* A seed outside the table, found with its K and L + G in a range
 * of 2^20 seeds with 1, 2 and 8 threads: the same seed, the same seeds
 * tried (through the seed's step of 128), and the model then reads the
 * epochs' permutations. */
START_TEST(a_seed_outside_the_table_is_found_in_the_range)
{
    uint32_t ps[3];
    uint64_t seed = range_cases[_i].seed;
    private_seeds(seed, range_cases[_i].k, range_cases[_i].g, range_cases[_i].pers,
                  range_cases[_i].first, ps);
    uint64_t count = 1u << 20, from = seed - (count - 1 - 70000);
    if (from + count > (1ull << 32))
        from = (1ull << 32) - count;
    static const unsigned threads[] = {1, 2, 8};
    for (size_t i = 0; i < 3; i++) {
        struct cfs_rng_table_result r;
        range_find(ps, range_cases[_i].first, range_cases[_i].words, (uint32_t)from, count,
                   threads[i], &r);
        ck_assert_msg(r.found, "seed %llu not found on %u threads", (unsigned long long)seed,
                      threads[i]);
        ck_assert_uint_eq(r.seed, seed);
        ck_assert_uint_eq(r.offset, range_cases[_i].k);
        /* only L + G shows in the words (L = 4, or 2 with persistent
         * workers): either reading draws the same */
        ck_assert_uint_eq(r.words + (r.persistent_workers ? 2 : 4),
                          range_cases[_i].g + (range_cases[_i].pers ? 2 : 4));
        uint64_t at = seed - from;
        ck_assert_uint_eq(r.seeds_tried,
                          (at / 128 + 1) * 128 < count ? (at / 128 + 1) * 128 : count);
        if (i == 0)
            expect_model_reads(&r, seed, range_cases[_i].k, range_cases[_i].g,
                               range_cases[_i].pers, range_cases[_i].first);
    }
}
END_TEST

/* Not claimed: a third epoch that is not the stream's, K past the words
 * searched (620 is the last K of one twist at epoch 0), the seed outside
 * the range; every seed of the range tried, on any number of threads.  A
 * cancelled search stops at once and says so; bad problems are refused. */
START_TEST(the_range_claims_no_wrong_seed)
{
    uint32_t ps[3];
    uint64_t seed = 3000000017u, count = 1u << 18, from = seed - 1000;
    private_seeds(seed, 100, 50, false, 0, ps);
    ps[2] = private_seed_at(seed, cfs_rng_epoch_draw(100, 51, false, 2));
    static const unsigned threads[] = {1, 2, 8};
    for (size_t i = 0; i < 3; i++) {
        struct cfs_rng_table_result r;
        range_find(ps, 0, 0, (uint32_t)from, count, threads[i], &r);
        ck_assert(!r.found);
        ck_assert_uint_eq(r.seeds_tried, count);
    }
    struct cfs_rng_table_result r;
    private_seeds(seed, 621, 50, false, 0, ps);
    range_find(ps, 0, 0, (uint32_t)from, count, 2, &r);
    ck_assert(!r.found);
    range_find(ps, 0, 1248, (uint32_t)from, count, 2, &r);
    ck_assert(r.found && r.seed == seed && r.offset == 621);
    range_find(ps, 0, 0, (uint32_t)seed + 1, count, 2, &r);
    ck_assert(!r.found);

    atomic_bool cancel = true;
    struct cfs_rng_range_problem p = {
        .table = {.private_seeds = ps, .max_offset = 1u << 25, .max_words = 1u << 24},
        .seed_first = 0,
        .seed_count = 1ull << 32};
    for (unsigned t = 1; t <= 2; t++) {
        ck_assert_int_eq(cfs_rng_range_find(&p, &cancel, &(struct cfs_seed_threads){.threads = t},
                                            &r),
                         0);
        ck_assert(r.cancelled && !r.found);
        ck_assert_uint_eq(r.seeds_tried, 0);
    }
    struct cfs_seed_threads one = {.threads = 1};
    p.seed_first = 1;
    ck_assert_int_eq(cfs_rng_range_find(&p, NULL, &one, &r), -EINVAL); /* past 2^32 */
    p.seed_count = 0;
    ck_assert_int_eq(cfs_rng_range_find(&p, NULL, &one, &r), -EINVAL);
    p.seed_count = 10;
    p.words = 3;
    ck_assert_int_eq(cfs_rng_range_find(&p, NULL, &one, &r), -EINVAL);
    p.words = CFS_RNG_RANGE_WORDS_MAX + 1;
    ck_assert_int_eq(cfs_rng_range_find(&p, NULL, &one, &r), -EINVAL);
    p.words = 0;
    p.table.private_seeds = NULL;
    ck_assert_int_eq(cfs_rng_range_find(&p, NULL, &one, &r), -EINVAL);
}
END_TEST

static Suite *rng_offset_suite(void)
{
    Suite *s = suite_create("rng_offset");
    TCase *t = tcase_create("finder");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, known_offsets_are_found_alone);
    tcase_add_test(t, epoch_words_are_found_from_the_next_epoch);
    tcase_add_test(t, matches_equal_a_brute_force_count);
    tcase_add_test(t, without_a_cheap_constraint_every_candidate_is_replayed);
    tcase_add_test(t, contradictions_foreign_orders_and_bad_input);
    tcase_add_test(t, without_the_seed_the_seed_search_finds_the_epoch);
    tcase_add_test(t, the_background_walk_matches_and_cancels);
    tcase_add_loop_test(t, a_table_seed_is_found, 0, sizeof(table_cases) / sizeof(table_cases[0]));
    tcase_add_test(t, a_seed_outside_the_table_is_not_claimed);
    tcase_add_test(t, the_table_and_cancel);
    tcase_add_loop_test(t, a_seed_outside_the_table_is_found_in_the_range, 0,
                        sizeof(range_cases) / sizeof(range_cases[0]));
    tcase_add_test(t, the_range_claims_no_wrong_seed);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(rng_offset_suite());
}
