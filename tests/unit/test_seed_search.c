/* Seed recovery: known seeds are found, alone, over sub-ranges around them
 * (the full 2^32 range is the benchmark's job); the vector filter and the
 * sparse replay agree with a brute-force count made with the real
 * randperm; degenerate sizes say what they can and cannot identify; a
 * permutation torch did not make names no seed; the inside-out shuffle of
 * torch >= 2.6 at a size just above its threshold. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"
#include "sanitized.h"
#include "src/seed_jump.h"   /* the far draw as a table lookup */
#include "src/seed_kernel.h" /* the vector kernels, both widths */

#define LARGE_N 214748365u /* just above the inside-out threshold */

/* randperm(n) of manual_seed(seed), first `count` positions as constraints. */
static size_t torch_prefix(uint64_t seed, uint32_t n, size_t count,
                           struct cfs_seed_constraint *out)
{
    struct cfs_mt19937 mt;
    uint32_t *perm = malloc((size_t)n * sizeof(*perm));
    ck_assert_ptr_nonnull(perm);
    cfs_mt19937_seed(&mt, seed);
    cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_CURRENT);
    if (count > n)
        count = n;
    for (size_t i = 0; i < count; i++)
        out[i] = (struct cfs_seed_constraint){.pos = (uint32_t)i, .value = perm[i]};
    free(perm);
    return count;
}

static struct cfs_seed_result search(uint64_t n, const struct cfs_seed_constraint *c, size_t nc,
                                     uint32_t first, uint64_t count)
{
    struct cfs_seed_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .c = c, .nc = nc};
    struct cfs_seed_result r;
    ck_assert_int_eq(cfs_seed_search(&p, first, count, &r), 0);
    ck_assert_uint_eq(r.searched, count);
    return r;
}

/* The true seed's low 32 bits, found over 2^20 seeds around it, alone. */
static void expect_unique(uint64_t seed, uint32_t n, size_t npos)
{
    struct cfs_seed_constraint c[16];
    size_t nc = torch_prefix(seed, n, npos, c);
    uint32_t low = (uint32_t)seed;
    struct cfs_seed_result r = search(n, c, nc, low - (1u << 19), 1u << 20);
    ck_assert_msg(r.verdict == CFS_SEED_UNIQUE, "seed %llu n %u: %s, %llu matches",
                  (unsigned long long)seed, n, cfs_seed_verdict_name(r.verdict),
                  (unsigned long long)r.matches);
    ck_assert_uint_eq(r.n_low32, 1);
    ck_assert_uint_eq(r.low32[0], low);
}

START_TEST(known_seeds_are_found_alone)
{
    expect_unique(0, 10000, 4);
    expect_unique(1, 100000, 3);
    expect_unique(2147483647u, 1281167, 2);
    expect_unique(42, 1281167, 1);
    expect_unique(4294967295u, 10000, 8);
}
END_TEST

START_TEST(a_seed_beyond_32_bits_recovers_its_low_half)
{
    uint64_t seed = (1ull << 32) + 5;
    expect_unique(seed, 100000, 3);
    uint64_t back;
    ck_assert_int_eq(cfs_seed_reconstruct(5, 0, true, 1, &back), 0);
    ck_assert_uint_eq(back, seed);
    ck_assert_int_eq(cfs_seed_reconstruct(5, 0, false, 0, &back), -ENODATA);
    ck_assert_uint_eq(back, 5);
}
END_TEST

/* torch-ddp, seed S large, epoch 3: the rank's first opened files give
 * (S + 3) mod 2^32, and S back from its known high half. */
START_TEST(a_ddp_rank_gives_the_epoch_seed)
{
    const uint64_t seed = 0x9e3779b97f4a7c15ull;
    const uint32_t n = 1281167, world = 8, rank = 5, epoch = 3;
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n,
                                    .world = world, .batch = 1};
    struct cfs_sampler *s;
    char err[128];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, epoch), 0);
    uint32_t opened[4];
    for (int i = 0; i < 4; i++)
        opened[i] = cfs_sampler_rank_at(s, rank, (uint64_t)i);
    cfs_sampler_destroy(s);

    struct cfs_seed_constraint c[4];
    int nc = cfs_seed_constraints_ddp(n, world, rank, false, opened, 4, c, 4);
    ck_assert_int_eq(nc, 4);
    ck_assert_uint_eq(c[0].pos, rank);
    ck_assert_uint_eq(c[3].pos, rank + 3 * world);
    uint32_t low = (uint32_t)(seed + epoch);
    struct cfs_seed_result r = search(n, c, (size_t)nc, low - 1000, 1u << 20);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], low);
    uint64_t back;
    ck_assert_int_eq(cfs_seed_reconstruct(r.low32[0], epoch, true, (uint32_t)(seed >> 32), &back),
                     0);
    ck_assert_uint_eq(back, seed);
}
END_TEST

/* A rank beyond 227 filters on a word of the first twist. */
START_TEST(a_far_rank_is_found_too)
{
    const uint32_t n = 1281167, world = 512, rank = 300;
    struct cfs_mt19937 mt;
    uint32_t *perm = malloc(n * sizeof(*perm));
    cfs_mt19937_seed(&mt, 2718281828u);
    cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_CURRENT);
    uint32_t opened[2] = {perm[rank], perm[rank + world]};
    free(perm);
    struct cfs_seed_constraint c[2];
    ck_assert_int_eq(cfs_seed_constraints_ddp(n, world, rank, false, opened, 2, c, 2), 2);
    struct cfs_seed_result r = search(n, c, 2, 2718281828u - 4000, 1u << 20);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], 2718281828u);
}
END_TEST

START_TEST(ddp_positions_follow_the_padding)
{
    /* n = 10, world 4: 3 samples a rank, padded list of 12; rank 2 reads
     * padded positions 2, 6, 10, and 10 is randperm position 0. */
    const uint32_t idx[3] = {7, 1, 4};
    struct cfs_seed_constraint c[3];
    ck_assert_int_eq(cfs_seed_constraints_ddp(10, 4, 2, false, idx, 3, c, 3), 3);
    ck_assert_uint_eq(c[0].pos, 2);
    ck_assert_uint_eq(c[1].pos, 6);
    ck_assert_uint_eq(c[2].pos, 0);
    /* drop_last: 2 samples a rank, no padding; a third index is beyond. */
    ck_assert_int_eq(cfs_seed_constraints_ddp(10, 4, 2, true, idx, 3, c, 3), -EINVAL);
    ck_assert_int_eq(cfs_seed_constraints_ddp(10, 4, 2, true, idx, 2, c, 3), 2);
    ck_assert_int_eq(cfs_seed_constraints_ddp(10, 4, 2, false, idx, 3, c, 2), -E2BIG);
    const uint32_t bad[1] = {10};
    ck_assert_int_eq(cfs_seed_constraints_ddp(10, 4, 2, false, bad, 1, c, 3), -EINVAL);
    /* world > n: the padding cycles; rank 4 of 5 over n = 3 reads padded
     * position 4, randperm position 1. */
    const uint32_t one[1] = {2};
    ck_assert_int_eq(cfs_seed_constraints_ddp(3, 5, 4, false, one, 1, c, 3), 1);
    ck_assert_uint_eq(c[0].pos, 1);
    ck_assert_int_eq(cfs_seed_constraints_ddp(3, 5, 5, false, one, 1, c, 3), -EINVAL);
}
END_TEST

START_TEST(one_sample_is_unidentifiable)
{
    struct cfs_seed_constraint c[1] = {{0, 0}};
    struct cfs_seed_result r = search(1, c, 1, 0, 1u << 20);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIDENTIFIABLE);
    ck_assert_uint_eq(r.matches, 1u << 20);
    r = search(1000, c, 0, 0, 1000);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIDENTIFIABLE);
}
END_TEST

/* The engine's count equals a brute-force count with the real randperm. */
static void expect_brute_force_count(uint32_t n, const struct cfs_seed_constraint *c, size_t nc,
                                     uint32_t first, uint32_t count)
{
    uint32_t *perm = malloc((size_t)n * sizeof(*perm));
    uint64_t matches = 0;
    uint32_t firsts[CFS_SEED_MAX_CANDIDATES];
    for (uint32_t i = 0; i < count; i++) {
        struct cfs_mt19937 mt;
        cfs_mt19937_seed(&mt, first + i);
        cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_CURRENT);
        bool ok = true;
        for (size_t k = 0; k < nc && ok; k++)
            ok = perm[c[k].pos] == c[k].value;
        if (ok && matches < CFS_SEED_MAX_CANDIDATES)
            firsts[matches] = first + i;
        matches += ok;
    }
    free(perm);
    struct cfs_seed_result r = search(n, c, nc, first, count);
    ck_assert_msg(r.matches == matches, "n %u: engine %llu, brute force %llu", n,
                  (unsigned long long)r.matches, (unsigned long long)matches);
    ck_assert_uint_eq(r.n_low32, matches < CFS_SEED_MAX_CANDIDATES ? matches
                                                                   : CFS_SEED_MAX_CANDIDATES);
    for (uint32_t k = 0; k < r.n_low32; k++)
        ck_assert_uint_eq(r.low32[k], firsts[k]);
    ck_assert_int_eq(r.verdict, matches == 0   ? CFS_SEED_NONE
                                : matches == 1 ? CFS_SEED_UNIQUE
                                               : CFS_SEED_AMBIGUOUS);
}

START_TEST(small_n_is_ambiguous_with_a_count)
{
    struct cfs_seed_constraint c[40];
    size_t nc = torch_prefix(1234, 2, 2, c);
    struct cfs_seed_result r = search(2, c, nc, 1234, 1u << 16);
    ck_assert_int_eq(r.verdict, CFS_SEED_AMBIGUOUS);
    ck_assert_uint_eq(r.low32[0], 1234);
    ck_assert_uint_gt(r.matches, (1u << 16) * 0.45);
    ck_assert_uint_lt(r.matches, (1u << 16) * 0.55);
    nc = torch_prefix(99, 3, 3, c);
    r = search(3, c, nc, 99, 1u << 16);
    ck_assert_int_eq(r.verdict, CFS_SEED_AMBIGUOUS);
    ck_assert_uint_eq(r.low32[0], 99);
    ck_assert_uint_gt(r.matches, (1u << 16) / 6 * 0.9);
    ck_assert_uint_lt(r.matches, (1u << 16) / 6 * 1.1);
    expect_brute_force_count(2, c, torch_prefix(5, 2, 1, c), 0, 4096);
    expect_brute_force_count(3, c, torch_prefix(5, 3, 3, c), 7, 4096);
    expect_brute_force_count(5, c, torch_prefix(5, 5, 5, c), 100, 8192);
}
END_TEST

START_TEST(engine_agrees_with_brute_force)
{
    struct cfs_seed_constraint c[40];
    /* positions beyond the vector window (32): the scalar replay */
    expect_brute_force_count(40, c, torch_prefix(11, 40, 40, c), 0, 8192);
    /* a value below its position cannot filter; a late position can */
    struct cfs_seed_constraint odd[2] = {{5, 1}, {3, 6}};
    expect_brute_force_count(7, odd, 2, 1000, 8192);
    struct cfs_seed_constraint late[1] = {{100, 0}};
    expect_brute_force_count(200, late, 1, 0, 4096);
    struct cfs_seed_constraint after[2] = {{3, 900}, {11, 17}};
    expect_brute_force_count(1000, after, 2, 0, 8192);
    /* filters on words of the first twist beyond 227 and 454: a chain of
     * two and three twisted terms */
    uint32_t *perm = malloc(1000 * sizeof(*perm));
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, 77);
    cfs_torch_randperm(&mt, perm, 1000, CFS_RANDPERM_CURRENT);
    const uint32_t from[3] = {300, 460, 600};
    for (int k = 0; k < 3; k++) {
        uint32_t p = from[k];
        while (perm[p] < p)
            p++;
        struct cfs_seed_constraint far[1] = {{p, perm[p]}};
        expect_brute_force_count(1000, far, 1, 0, 4096);
    }
    free(perm);
    /* one constraint at a DDP rank's position */
    size_t nc = torch_prefix(77, 1000, 8, c);
    expect_brute_force_count(1000, &c[3], 1, 0, 8192);
    expect_brute_force_count(1000, c, nc, 70, 64);
}
END_TEST

/* The set search at position 0 (randperm[0] in one set, randperm[1] in
 * another; where the CPU has AVX-512 the first test runs 16 lanes at once,
 * the remainder in doubles) finds exactly the seeds a replay of torch's
 * first two swaps says, in order: sets of about half of 0..n-1, so that a
 * quarter of the seeds pass, for n from 2 to above 2^27, over a range that
 * wraps past 2^32 - 1 and ends inside a block. */
struct set_hits {
    uint32_t seed[8192], skip[8192];
    size_t len;
};

static bool on_set_hit(void *arg, uint32_t seed, uint32_t skip)
{
    struct set_hits *h = arg;
    ck_assert_uint_lt(h->len, 8192);
    h->seed[h->len] = seed, h->skip[h->len] = skip, h->len++;
    return false;
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Bitsets over 0..n-1: each bit set with probability 1/2, or `k` random
 * values each where k > 0. */
static void random_sets(uint64_t n, unsigned k, uint64_t **first, uint64_t **second)
{
    uint64_t words = (n + 63) / 64;
    uint64_t x = 88172645463325252ull;
    *first = calloc(words, 8), *second = calloc(words, 8);
    ck_assert(*first && *second);
    for (uint64_t w = 0; w < words && !k; w++)
        (*first)[w] = xorshift(&x), (*second)[w] = xorshift(&x);
    for (unsigned i = 0; i < k; i++) {
        uint64_t a = xorshift(&x) % n, b = xorshift(&x) % n;
        (*first)[a / 64] |= 1ull << (a % 64), (*second)[b / 64] |= 1ull << (b % 64);
    }
    if (n % 64)
        (*first)[words - 1] &= (1ull << (n % 64)) - 1, (*second)[words - 1] &= (1ull << (n % 64)) - 1;
}

START_TEST(the_set_search_agrees_with_a_replay)
{
    static const uint64_t ns[] = {2, 3, 1000, 1281167, 200000003};
    const uint64_t n = ns[_i];
    uint64_t *first, *second;
    random_sets(n, 0, &first, &second);
    first[0] |= 1, second[0] |= 2; /* never empty, for n = 2 and 3 */
    static const uint32_t skips[] = {0, 2};
    struct cfs_seed_set_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .pos = 0,
                                     .skips = skips, .nskips = 2, .first = first, .second = second};
    const uint32_t from = UINT32_MAX - 1000;
    const uint64_t count = 4096 + 77;
    struct set_hits *got = calloc(1, sizeof(*got)), *want = calloc(1, sizeof(*want));
    uint64_t searched;
    ck_assert_int_eq(cfs_seed_search_set(&p, from, count, NULL, on_set_hit, got, &searched), 0);
    ck_assert_uint_eq(searched, count);
    for (uint64_t k = 0; k < count; k++) {
        uint32_t seed = from + (uint32_t)k;
        for (int i = 0; i < 2; i++) {
            struct cfs_mt19937 mt;
            cfs_mt19937_seed(&mt, seed);
            for (uint32_t d = 0; d < skips[i]; d++)
                (void)cfs_mt19937_next32(&mt);
            uint32_t b0 = cfs_mt19937_next32(&mt) % (uint32_t)n;
            bool ok = first[b0 / 64] >> (b0 % 64) & 1;
            if (n > 1) { /* randperm[1]: what sits at 1 + r1 % (n - 1) after swap(0, b0) */
                uint32_t b1 = 1 + cfs_mt19937_next32(&mt) % (uint32_t)(n - 1);
                uint32_t v1 = b1 == b0 ? 0 : b1;
                ok = ok && (second[v1 / 64] >> (v1 % 64) & 1);
            }
            if (ok)
                on_set_hit(want, seed, skips[i]);
        }
    }
    ck_assert_uint_gt(want->len, count / 8);
    ck_assert_uint_eq(got->len, want->len);
    for (size_t k = 0; k < want->len; k++) {
        ck_assert_uint_eq(got->seed[k], want->seed[k]);
        ck_assert_uint_eq(got->skip[k], want->skip[k]);
    }
    free(got);
    free(want);
    free(first);
    free(second);
}
END_TEST

/* One threaded set search: what found() saw, stopping after stop_after
 * seeds or cancelling after cancel_after (0: neither), and its pace. */
struct threaded_run {
    struct set_hits hits;
    size_t stop_after, cancel_after;
    atomic_bool cancel;
    unsigned paces, with_workers;
    double workers_cpu;
    _Atomic uint64_t progress;
    uint64_t searched;
};

static bool threaded_hit(void *arg, uint32_t seed, uint32_t skip)
{
    struct threaded_run *r = arg;
    on_set_hit(&r->hits, seed, skip);
    if (r->hits.len == r->cancel_after)
        atomic_store(&r->cancel, true);
    return r->hits.len == r->stop_after;
}

static void threaded_pace(void *arg, struct cfs_seed_workers *w)
{
    struct threaded_run *r = arg;
    r->paces++;
    r->with_workers += w != NULL;
    r->workers_cpu += cfs_seed_workers_cpu_take(w);
}

static struct threaded_run *run_threaded(const struct cfs_seed_set_problem *p, uint32_t from,
                                         uint64_t count, unsigned threads, size_t stop_after,
                                         size_t cancel_after)
{
    struct threaded_run *r = calloc(1, sizeof(*r));
    ck_assert_ptr_nonnull(r);
    r->stop_after = stop_after, r->cancel_after = cancel_after;
    struct cfs_seed_threads t = {.threads = threads, .every = 1u << 16, .pace = threaded_pace,
                                 .pace_arg = r, .progress = &r->progress};
    ck_assert_int_eq(cfs_seed_search_set_threads(p, from, count, &r->cancel, threaded_hit, r,
                                                 &r->searched, &t),
                     0);
    ck_assert_uint_eq(atomic_load(&r->progress), r->searched);
    ck_assert_uint_ge(r->paces, 2); /* before the first seed, after the last */
    ck_assert_uint_eq(r->with_workers, threads > 1 ? r->paces : 0);
    if (threads > 1 && r->searched > 0)
        ck_assert(r->workers_cpu > 0);
    return r;
}

static void same_hits(const struct threaded_run *a, const struct threaded_run *b)
{
    ck_assert_uint_eq(a->searched, b->searched);
    ck_assert_uint_eq(a->hits.len, b->hits.len);
    for (size_t k = 0; k < a->hits.len; k++) {
        ck_assert_uint_eq(a->hits.seed[k], b->hits.seed[k]);
        ck_assert_uint_eq(a->hits.skip[k], b->hits.skip[k]);
    }
}

/* The set search on 1, 2 and 8 threads over a range of 64 chunks and a
 * bit, across 2^32, where a known seed sits among hundreds of others that
 * pass: found() sees the same seeds with the same skips in the same
 * order, and as many seeds are searched, when it runs to the end, when
 * found() stops it half way, and when the search is cancelled a third of
 * the way in (_i: head position 0 with skips 0 and 2, or position 3). */
START_TEST(the_set_search_on_threads_finds_the_same_seeds)
{
    const uint32_t n = 1000, seed = 7, pos = _i ? 3 : 0;
    static const uint32_t both[] = {0, 2}, none[] = {0};
    uint64_t *first, *second;
    random_sets(n, 12, &first, &second);
    struct cfs_seed_constraint c[5];
    torch_prefix(seed, n, pos + 2, c); /* the known seed passes */
    first[c[pos].value / 64] |= 1ull << (c[pos].value % 64);
    second[c[pos + 1].value / 64] |= 1ull << (c[pos + 1].value % 64);
    struct cfs_seed_set_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .pos = pos,
                                     .skips = pos ? none : both, .nskips = pos ? 1 : 2,
                                     .first = first, .second = second};
    /* 64 chunks (SEED_CHUNK: 2^16 seeds) and a bit; under the sanitizers
     * 32 and a bit, still past what 8 threads may run ahead (4 chunks
     * each), with hundreds of seeds that pass (48 s there otherwise). */
    const uint64_t half = CFS_TEST_SANITIZED ? 1ull << 20 : 1ull << 21;
    const uint32_t from = UINT32_MAX - (uint32_t)half;
    const uint64_t count = 2 * half + 77;
    static const unsigned threads[] = {1, 2, 8};
    struct threaded_run *one = run_threaded(&p, from, count, 1, 0, 0);
    ck_assert_uint_eq(one->searched, count);
    ck_assert_uint_gt(one->hits.len, 64);
    bool known = false;
    for (size_t k = 0; k < one->hits.len; k++)
        known |= one->hits.seed[k] == seed && one->hits.skip[k] == 0;
    ck_assert(known);
    struct threaded_run *stop1 = run_threaded(&p, from, count, 1, one->hits.len / 2, 0);
    struct threaded_run *cancel1 = run_threaded(&p, from, count, 1, 0, one->hits.len / 3);
    ck_assert_uint_eq(stop1->hits.len, one->hits.len / 2);
    ck_assert_uint_lt(stop1->searched, count);
    ck_assert_uint_lt(cancel1->searched, count);
    for (size_t i = 1; i < 3; i++) {
        struct threaded_run *all = run_threaded(&p, from, count, threads[i], 0, 0);
        struct threaded_run *stop = run_threaded(&p, from, count, threads[i], one->hits.len / 2, 0);
        struct threaded_run *cancel =
            run_threaded(&p, from, count, threads[i], 0, one->hits.len / 3);
        same_hits(all, one);
        same_hits(stop, stop1);
        same_hits(cancel, cancel1);
        free(all), free(stop), free(cancel);
    }
    free(one), free(stop1), free(cancel1);
    free(first), free(second);
}
END_TEST

/* A problem the set search refuses is refused on threads too, before any
 * thread starts or pace() is called. */
START_TEST(the_set_search_on_threads_refuses_bad_input)
{
    uint64_t *first, *second, searched = 1;
    random_sets(1000, 12, &first, &second);
    static const uint32_t skips[] = {31};
    struct cfs_seed_set_problem p = {.n = 1000, .pos = 0, .skips = skips, .nskips = 1,
                                     .first = first, .second = second};
    struct threaded_run r = {0};
    struct cfs_seed_threads t = {.threads = 8, .pace = threaded_pace, .pace_arg = &r};
    ck_assert_int_eq(cfs_seed_search_set_threads(&p, 0, 1u << 20, NULL, threaded_hit, &r,
                                                 &searched, &t),
                     -EINVAL);
    ck_assert_uint_eq(searched, 0);
    ck_assert_uint_eq(r.paces, 0);
    ck_assert_uint_ge(cfs_seed_usable_cpus(), 1);
    free(first), free(second);
}
END_TEST

START_TEST(contradictions_and_bad_input)
{
    struct cfs_seed_constraint twice[2] = {{0, 3}, {0, 4}};
    ck_assert_int_eq(search(10, twice, 2, 0, 100).verdict, CFS_SEED_NONE);
    struct cfs_seed_constraint same[2] = {{0, 3}, {1, 3}};
    ck_assert_int_eq(search(10, same, 2, 0, 100).verdict, CFS_SEED_NONE);
    struct cfs_seed_constraint out[1] = {{10, 3}};
    struct cfs_seed_problem p = {.n = 10, .c = out, .nc = 1};
    struct cfs_seed_result r;
    ck_assert_int_eq(cfs_seed_search(&p, 0, 10, &r), -EINVAL);
    p.n = 0;
    ck_assert_int_eq(cfs_seed_search(&p, 0, 10, &r), -EINVAL);
    p.n = 100;
    p.skip_words = CFS_SEED_MAX_SKIP + 1;
    ck_assert_int_eq(cfs_seed_search(&p, 0, 10, &r), -EINVAL);
}
END_TEST

/* The torch model's epoch 0 draws the loader's base seed (2 words) first. */
START_TEST(words_drawn_before_the_randperm)
{
    const uint32_t n = 100000, seed = 31337;
    struct cfs_mt19937 mt;
    uint32_t *perm = malloc(n * sizeof(*perm));
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, 2);
    cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_CURRENT);
    struct cfs_seed_constraint c[3] = {{0, perm[0]}, {1, perm[1]}, {2, perm[2]}};
    free(perm);
    struct cfs_seed_problem p = {.n = n, .skip_words = 2, .c = c, .nc = 3};
    struct cfs_seed_result r;
    ck_assert_int_eq(cfs_seed_search(&p, seed - 5000, 1u << 18, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], seed);
}
END_TEST

/* xorshift Fisher-Yates: a permutation no torch seed drew. */
START_TEST(a_foreign_permutation_names_no_seed)
{
    const uint32_t n = 100000;
    uint32_t *perm = malloc(n * sizeof(*perm));
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t j = (uint32_t)(x % (i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    struct cfs_seed_constraint c[4];
    for (uint32_t i = 0; i < 4; i++)
        c[i] = (struct cfs_seed_constraint){i, perm[i]};
    free(perm);
    struct cfs_seed_result r = search(n, c, 4, 0, 1u << 22);
    ck_assert_int_eq(r.verdict, CFS_SEED_NONE);
    ck_assert_uint_eq(r.n_low32, 0);
}
END_TEST

START_TEST(the_background_search_matches_and_cancels)
{
    struct cfs_seed_constraint c[3];
    size_t nc = torch_prefix(123456, 100000, 3, c);
    struct cfs_seed_problem p = {.n = 100000, .c = c, .nc = nc};
    struct cfs_seed_search *s;
    ck_assert_int_eq(cfs_seed_search_start(&p, 0, 1u << 21, &s), 0);
    while (!cfs_seed_search_done(s))
        usleep(1000);
    ck_assert(cfs_seed_search_progress(s) == 1.0);
    const char *prio = cfs_seed_search_priority(s);
    ck_assert_msg(!strcmp(prio, "idle") || !strcmp(prio, "nice 19"), "priority %s", prio);
    struct cfs_seed_result r;
    ck_assert_int_eq(cfs_seed_search_finish(s, &r), 0);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], 123456);
    ck_assert(!r.cancelled);

    ck_assert_int_eq(cfs_seed_search_start(&p, 0, 1ull << 32, &s), 0);
    usleep(20000);
    double f = cfs_seed_search_progress(s);
    ck_assert(f >= 0.0 && f < 1.0);
    cfs_seed_search_cancel(s);
    ck_assert_int_eq(cfs_seed_search_finish(s, &r), 0);
    ck_assert(r.cancelled);
    ck_assert_uint_lt(r.searched, 1ull << 32);
}
END_TEST

/* The inside-out reference, as torch >= 2.6 writes it, for small n. */
static void inside_out_ref(uint32_t seed, uint32_t *perm, uint32_t n)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t z = cfs_mt19937_next64(&mt) % (i + 1);
        perm[i] = perm[z];
        perm[z] = (uint32_t)i;
    }
}

START_TEST(inside_out_values_without_the_array)
{
    uint32_t perm[300], pos[300], val[300];
    for (uint32_t seed = 0; seed < 50; seed++) {
        inside_out_ref(seed, perm, 300);
        for (uint32_t i = 0; i < 300; i++)
            pos[i] = 299 - i;
        ck_assert_int_eq(cfs_seed_inside_out_at(seed, 0, 300, pos, 300, val), 0);
        for (uint32_t i = 0; i < 300; i++)
            ck_assert_uint_eq(val[i], perm[pos[i]]);
    }
}
END_TEST

/* n just above 214748364: the first opened positions, 8 seeds around. */
START_TEST(inside_out_search_above_the_threshold)
{
    const uint32_t seed = 2024;
    uint32_t pos[3] = {0, 1, 2}, val[3];
    ck_assert_int_eq(cfs_seed_inside_out_at(seed, 0, LARGE_N, pos, 3, val), 0);
    struct cfs_seed_constraint c[3];
    for (int i = 0; i < 3; i++)
        c[i] = (struct cfs_seed_constraint){pos[i], val[i]};
    struct cfs_seed_result r = search(LARGE_N, c, 3, seed - 3, 6);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], seed);
    /* The legacy algorithm at the same n is the forward one: cheap. */
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    uint32_t z0 = cfs_mt19937_next32(&mt) % LARGE_N;
    struct cfs_seed_constraint f[1] = {{0, z0}};
    struct cfs_seed_problem p = {.n = LARGE_N, .algo = CFS_RANDPERM_LEGACY, .c = f, .nc = 1};
    ck_assert_int_eq(cfs_seed_search(&p, seed - 100, 1u << 20, &r), 0);
    ck_assert_uint_ge(r.matches, 1);
    bool found = false;
    for (uint32_t k = 0; k < r.n_low32; k++)
        found |= r.low32[k] == seed;
    ck_assert(found);
}
END_TEST

/* The jump tables give the draw a walk along the stream gives. */
/* Both kernels of the set search give MT19937's first tempered words of
 * every seed in the block, lanes wrapping past 2^32 - 1 too: the 8-lane
 * one, and the 16-lane one where this CPU has it. */
START_TEST(both_kernel_widths_draw_the_stream)
{
    static const uint32_t firsts[] = {0, 612, 4294967295u - 40};
    static uint32_t out[CFS_WINDOW][WIDE_BLOCK];
    const uint32_t nw = CFS_WINDOW - 1;
    for (int wide = 0; wide < 2; wide++) {
        if (wide && !seed_wide_supported())
            continue;
        for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++) {
            block_outputs_lanes(firsts[f], nw, wide, out);
            for (uint32_t l = 0; l < WIDE_BLOCK; l++) {
                struct cfs_mt19937 mt;
                cfs_mt19937_seed(&mt, (uint32_t)(firsts[f] + l));
                for (uint32_t k = 0; k < nw; k++)
                    ck_assert_msg(out[k][l] == cfs_mt19937_next32(&mt),
                                  "wide=%d seed %u word %u", wide, firsts[f] + l, k);
            }
        }
    }
}
END_TEST

START_TEST(a_far_draw_by_table_equals_the_stream)
{
    const uint64_t words[3] = {0, 19937, 2ull * LARGE_N - 2};
    uint32_t st[CFS_JUMP_LANES][CFS_JUMP_STATE_WORDS];
    cfs_seed_jump_states(4294967292u, st); /* the lanes wrap past 2^32 - 1 */
    for (int w = 0; w < 3; w++) {
        struct cfs_seed_jump *jt;
        ck_assert_int_eq(cfs_seed_jump_create(words[w], &jt), 0);
        for (uint32_t l = 0; l < CFS_JUMP_LANES; l += w == 2 ? 5 : 1) {
            struct cfs_mt19937 mt;
            cfs_mt19937_seed(&mt, (uint32_t)(4294967292u + l));
            ck_assert(memcmp(mt.state, st[l], sizeof(st[l])) == 0);
            cfs_mt19937_discard(&mt, words[w]);
            ck_assert_uint_eq(cfs_seed_jump_draw(jt, st[l]), cfs_mt19937_next64(&mt));
        }
        cfs_seed_jump_destroy(jt);
    }
}
END_TEST

/* A range long enough for the jump tables: 4096 seeds, the true one in. */
START_TEST(inside_out_search_through_the_tables)
{
    const uint32_t seed = 77777;
    uint32_t pos[2] = {0, 1}, val[2];
    ck_assert_int_eq(cfs_seed_inside_out_at(seed, 0, LARGE_N, pos, 2, val), 0);
    struct cfs_seed_constraint c[2] = {{pos[0], val[0]}, {pos[1], val[1]}};
    struct cfs_seed_result r = search(LARGE_N, c, 2, seed - 2000, 4096);
    ck_assert_int_eq(r.verdict, CFS_SEED_UNIQUE);
    ck_assert_uint_eq(r.low32[0], seed);
}
END_TEST

/* A second stride (alt_gap: one trainer rank a node, whose head reader
 * holds randperm[W] but not randperm[1]) passes a seed whose randperm[1]
 * or randperm[g] is in the second set, and no other: the filter against a
 * forward Fisher-Yates replayed for g + 1 steps.  Gaps within the vector
 * stage's 32 words, and past them (40, and 224: 224 nodes of one rank, the
 * most the head's 227 words hold), where the seeds whose randperm[0]
 * passes get their words one at a time. */
START_TEST(the_set_search_takes_a_second_stride)
{
    static const uint64_t ns[] = {1000, 1281167};
    static const uint32_t gaps[] = {8, 40, 224};
    const uint64_t n = ns[_i % 2];
    const uint32_t gap = gaps[_i / 2];
    uint64_t *first, *second;
    random_sets(n, 0, &first, &second);
    static const uint32_t skips[] = {0, 2};
    struct cfs_seed_set_problem p = {.n = n,
                                     .algo = CFS_RANDPERM_CURRENT,
                                     .pos = 0,
                                     .skips = skips,
                                     .nskips = 2,
                                     .first = first,
                                     .second = second,
                                     .alt_gap = gap};
    const uint32_t from = 12345;
    const uint64_t count = 4096;
    struct set_hits *got = calloc(1, sizeof(*got)), *want = calloc(1, sizeof(*want));
    uint32_t *perm = malloc(n * sizeof(*perm));
    ck_assert(got && want && perm);
    uint64_t searched, by_gap = 0;
    ck_assert_int_eq(cfs_seed_search_set(&p, from, count, NULL, on_set_hit, got, &searched), 0);
    for (uint32_t v = 0; v < n; v++)
        perm[v] = v;
    uint32_t touched[2 * 225];
    for (uint64_t k = 0; k < count; k++) {
        uint32_t seed = from + (uint32_t)k;
        for (int i = 0; i < 2; i++) {
            struct cfs_mt19937 mt;
            cfs_mt19937_seed(&mt, seed);
            for (uint32_t d = 0; d < skips[i]; d++)
                (void)cfs_mt19937_next32(&mt);
            size_t nt = 0;
            for (uint32_t q = 0; q <= gap; q++) {
                uint32_t z = q + cfs_mt19937_next32(&mt) % (uint32_t)(n - q), t = perm[q];
                perm[q] = perm[z], perm[z] = t;
                touched[nt++] = q, touched[nt++] = z;
            }
            bool head = first[perm[0] / 64] >> (perm[0] % 64) & 1;
            bool one = second[perm[1] / 64] >> (perm[1] % 64) & 1;
            bool far = second[perm[gap] / 64] >> (perm[gap] % 64) & 1;
            if (head && (one || far))
                on_set_hit(want, seed, skips[i]);
            by_gap += head && far && !one;
            for (size_t j = 0; j < nt; j++) /* back to the identity */
                perm[touched[j]] = touched[j];
        }
    }
    for (uint32_t v = 0; v < n; v++)
        ck_assert_uint_eq(perm[v], v); /* every replay undone */
    ck_assert_uint_gt(by_gap, count / 16);
    ck_assert_uint_eq(got->len, want->len);
    for (size_t k = 0; k < want->len; k++) {
        ck_assert_uint_eq(got->seed[k], want->seed[k]);
        ck_assert_uint_eq(got->skip[k], want->skip[k]);
    }
    p.alt_gap = 225; /* 2 + 225 + 1 words: beyond the filter's window */
    ck_assert_int_eq(cfs_seed_search_set(&p, from, 1, NULL, on_set_hit, got, &searched), -EINVAL);
    p.alt_gap = 30, p.pos = 1; /* past position 0: the vector stage's 32 words */
    ck_assert_int_eq(cfs_seed_search_set(&p, from, 1, NULL, on_set_hit, got, &searched), -EINVAL);
    free(perm);
    free(got);
    free(want);
    free(first);
    free(second);
}
END_TEST

static Suite *seed_suite(void)
{
    Suite *s = suite_create("seed_search");
    TCase *t = tcase_create("forward");
    tcase_add_test(t, known_seeds_are_found_alone);
    tcase_add_test(t, a_seed_beyond_32_bits_recovers_its_low_half);
    tcase_add_test(t, a_ddp_rank_gives_the_epoch_seed);
    tcase_add_test(t, a_far_rank_is_found_too);
    tcase_add_test(t, ddp_positions_follow_the_padding);
    tcase_add_test(t, one_sample_is_unidentifiable);
    tcase_add_test(t, small_n_is_ambiguous_with_a_count);
    tcase_add_test(t, engine_agrees_with_brute_force);
    tcase_add_loop_test(t, the_set_search_agrees_with_a_replay, 0, 5);
    tcase_add_loop_test(t, the_set_search_takes_a_second_stride, 0, 6);
    tcase_add_loop_test(t, the_set_search_on_threads_finds_the_same_seeds, 0, 2);
    tcase_add_test(t, the_set_search_on_threads_refuses_bad_input);
    tcase_add_test(t, contradictions_and_bad_input);
    tcase_add_test(t, words_drawn_before_the_randperm);
    tcase_add_test(t, a_foreign_permutation_names_no_seed);
    tcase_add_test(t, the_background_search_matches_and_cancels);
    suite_add_tcase(s, t);
    TCase *io = tcase_create("inside_out");
    tcase_add_test(io, inside_out_values_without_the_array);
    tcase_add_test(io, inside_out_search_above_the_threshold);
    tcase_add_test(io, both_kernel_widths_draw_the_stream);
    tcase_add_test(io, a_far_draw_by_table_equals_the_stream);
    tcase_add_test(io, inside_out_search_through_the_tables);
    suite_add_tcase(s, io);
    return s;
}

int main(void)
{
    return cfs_check_run(seed_suite());
}
