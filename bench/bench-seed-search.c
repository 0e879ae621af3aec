/* How fast seed recovery runs on one core, and whether the whole 2^32
 * range fits the budget a mount can give it (minutes, not hours).
 *
 * For each dataset size and number of observed positions (a RandomSampler's
 * first opens: positions 0, 1, ...), it times a sub-range of seeds and
 * extrapolates to 2^32; a DistributedSampler rank's positions (rank 3 of
 * 8) are timed too, since their cheapest filter is not position 0. With
 * --full it then searches the whole range for ImageNet's n = 1 281 167 and
 * prints the time. The inside-out shuffle (n >= 214748364) is timed per
 * seed with --inside-out. Times are the thread's CPU time (the machine may
 * be shared), wall time beside them. --threads times identification's set
 * search on 1, 2, 4 ... threads instead (wall time, ratios against one
 * thread in the same run); --gap the set filter's second stride (alt_gap)
 * against none. --global-range times the run's global seed over seed
 * ranges (cfs_rng_range_find: rng_range.c) on 1, 2 ... threads: seeds a
 * second a thread, extrapolated to 2^32 seeds on 1, 32, 64 and 128 such
 * cores. Figures only: nothing is asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/rng_offset.h"
#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"
#include "src/seed_jump.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* The machine may be shared: CPU time says what one core would do alone. */
static double cpu_now(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* The first positions of randperm(n) for `seed`, as constraints. */
static uint32_t *torch_perm(uint32_t seed, uint32_t n)
{
    struct cfs_mt19937 mt;
    uint32_t *perm = malloc((size_t)n * sizeof(*perm));
    if (!perm) {
        perror("malloc");
        exit(1);
    }
    cfs_mt19937_seed(&mt, seed);
    cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_CURRENT);
    return perm;
}

static double last_wall;

/* CPU seconds of the search; its wall time in last_wall. */
static double timed_search(const struct cfs_seed_problem *p, uint32_t first, uint64_t count,
                           struct cfs_seed_result *r)
{
    double t0 = now(), c0 = cpu_now();
    if (cfs_seed_search(p, first, count, r) < 0) {
        fprintf(stderr, "search failed\n");
        exit(1);
    }
    last_wall = now() - t0;
    return cpu_now() - c0;
}

static void rate_row(const char *what, uint32_t n, const struct cfs_seed_constraint *c, size_t nc,
                     uint64_t count)
{
    struct cfs_seed_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .c = c, .nc = nc};
    struct cfs_seed_result r;
    double dt = timed_search(&p, 1u << 30, count, &r);
    double rate = (double)count / dt;
    printf("%-10s n=%-8u constraints=%zu  %6.1f Mseeds/s  2^32 in %6.1f s  (wall %.1f s; "
           "%llu matches)\n", what, n, nc, rate / 1e6, 4294967296.0 / rate,
           4294967296.0 / rate * last_wall / dt, (unsigned long long)r.matches);
}

static void full_range(uint32_t n, uint32_t seed)
{
    uint32_t *perm = torch_perm(seed, n);
    struct cfs_seed_constraint c[4];
    for (uint32_t i = 0; i < 4; i++)
        c[i] = (struct cfs_seed_constraint){i, perm[i]};
    free(perm);
    struct cfs_seed_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .c = c, .nc = 4};
    struct cfs_seed_result r;
    double dt = timed_search(&p, 0, 1ull << 32, &r);
    printf("full range n=%u, 4 constraints: %.1f CPU s (wall %.1f s), %s, %llu matches, "
           "first %u (true %u)\n", n, dt, last_wall, cfs_seed_verdict_name(r.verdict), (unsigned long long)r.matches,
           r.n_low32 ? r.low32[0] : 0, seed);
}

/* Inside-out: the walk along the stream per seed, the jump tables' build
 * and per-seed cost, and a real search over 2^16 seeds through them. */
static void inside_out_rate(void)
{
    const uint32_t n = 214748365u, seed = 7;
    uint32_t pos[2] = {0, 1}, val[2];
    double c0 = cpu_now();
    cfs_seed_inside_out_at(seed, 0, n, pos, 2, val);
    double replay = cpu_now() - c0;
    struct cfs_seed_constraint c[2] = {{0, val[0]}, {1, val[1]}};
    struct cfs_seed_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .c = c, .nc = 2};
    struct cfs_seed_result r;
    double walk = timed_search(&p, seed + 1, 4, &r) / 4;
    uint32_t vmin = val[0] < val[1] ? val[0] : val[1];
    c0 = cpu_now();
    struct cfs_seed_jump *jt;
    if (cfs_seed_jump_create(2ull * vmin, &jt) < 0)
        exit(1);
    double build = cpu_now() - c0;
    static uint32_t st[CFS_JUMP_LANES][CFS_JUMP_STATE_WORDS];
    uint64_t acc = 0;
    c0 = cpu_now();
    for (uint32_t s0 = 0; s0 < (1u << 16); s0 += CFS_JUMP_LANES) {
        cfs_seed_jump_states(s0, st);
        for (int l = 0; l < CFS_JUMP_LANES; l++)
            acc ^= cfs_seed_jump_draw(jt, st[l]);
    }
    double per = (cpu_now() - c0) / 65536;
    cfs_seed_jump_destroy(jt);
    double whole = timed_search(&p, seed - 1000, 1u << 16, &r);
    printf("inside-out n=%u: full replay %.2f s; walk to word 2*%u %.3f s/seed (2^32: %.1f "
           "years); jump tables %.2f s to build, %.2f us/seed (2^32: %.1f h); 2^16 seeds "
           "searched in %.1f s, %s (%llx)\n", n, replay, vmin, walk,
           walk * 4294967296.0 / (365.25 * 86400), build, per * 1e6,
           per * 4294967296.0 / 3600, whole, cfs_seed_verdict_name(r.verdict),
           (unsigned long long)(acc & 0xf));
}

static bool count_hit(void *arg, uint32_t seed, uint32_t skip)
{
    (void)seed, (void)skip;
    ++*(uint64_t *)arg;
    return false;
}

/* Identification's set search (cfs_seed_search_set_threads) over 2^28
 * seeds at ImageNet's n, 8 readers' first opens and first two (skips 0
 * and 2, as identify_scan.c scans), on 1, 2, 4 ... threads up to the
 * usable CPUs (and 8): wall time, and the speed-up against one thread
 * measured in this run.  The workers run at the normal priority, as
 * offline (clairfs-plan --identify). */
static void threads_rows(void)
{
    const uint32_t n = 1281167;
    const uint64_t count = 1ull << 28;
    uint64_t *first = calloc((n + 63) / 64, 8), *second = calloc((n + 63) / 64, 8);
    if (!first || !second)
        exit(1);
    uint32_t *perm = torch_perm(2718281828u, n);
    for (uint32_t r = 0; r < 8; r++) { /* reader r's first two opens */
        first[perm[2 * r] / 64] |= 1ull << (perm[2 * r] % 64);
        second[perm[2 * r] / 64] |= 1ull << (perm[2 * r] % 64);
        second[perm[2 * r + 1] / 64] |= 1ull << (perm[2 * r + 1] % 64);
    }
    free(perm);
    static const uint32_t skips[] = {0, 2};
    struct cfs_seed_set_problem p = {.n = n, .algo = CFS_RANDPERM_CURRENT, .pos = 0,
                                     .skips = skips, .nskips = 2, .first = first, .second = second};
    unsigned cpus = cfs_seed_usable_cpus();
    double base = 0, base_cpu = 0;
    for (unsigned t = 1; t <= (cpus > 8 ? cpus : 8); t = t * 2 > cpus && t < cpus ? cpus : t * 2) {
        struct cfs_seed_threads th = {.threads = t};
        uint64_t hits = 0, searched;
        double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (cfs_seed_search_set_threads(&p, 1u << 30, count, NULL, count_hit, &hits, &searched,
                                        &th) < 0)
            exit(1);
        double wall = now() - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (t == 1)
            base = wall, base_cpu = cpu;
        /* CPU against one thread's: what the split costs, on a shared host too */
        printf("set search n=%u 2^28 seeds, %3u threads (%u usable CPUs): %6.2f s wall, "
               "x%.2f faster than 1 thread, CPU x%.2f of its; 2^32 in %5.1f s; %llu passed\n",
               n, t, cpus, wall, base / wall, cpu / base_cpu, wall * 16,
               (unsigned long long)hits);
    }
    free(first);
    free(second);
}

/* The set filter's second stride (alt_gap: a distributed mount of one
 * trainer rank a node, identify_scan.c) at ImageNet's n on one thread:
 * 2^26 seeds with and without it, 8 readers' opens as threads_rows's; the
 * cost against no stride measured in this run, in the thread's CPU time
 * (the host may be shared).  Gaps 30 and up reach past the vector stage's
 * 32 words (more than 29 nodes of one rank: seed_set.c). */
static void gap_rows(void)
{
    const uint32_t n = 1281167;
    const uint64_t count = 1ull << 26;
    uint64_t *first = calloc((n + 63) / 64, 8), *second = calloc((n + 63) / 64, 8);
    if (!first || !second)
        exit(1);
    uint32_t *perm = torch_perm(2718281828u, n);
    for (uint32_t r = 0; r < 8; r++) {
        first[perm[2 * r] / 64] |= 1ull << (perm[2 * r] % 64);
        second[perm[2 * r] / 64] |= 1ull << (perm[2 * r] % 64);
        second[perm[2 * r + 1] / 64] |= 1ull << (perm[2 * r + 1] % 64);
    }
    free(perm);
    static const uint32_t skips[] = {0, 2}, gaps[] = {0, 2, 4, 8, 16, 29, 30, 61, 125, 224};
    double base = 0;
    for (size_t g = 0; g < sizeof(gaps) / sizeof(*gaps); g++) {
        struct cfs_seed_set_problem p = {.n = n,
                                         .algo = CFS_RANDPERM_CURRENT,
                                         .pos = 0,
                                         .skips = skips,
                                         .nskips = 2,
                                         .first = first,
                                         .second = second,
                                         .alt_gap = gaps[g]};
        struct cfs_seed_threads th = {.threads = 1};
        uint64_t hits = 0, searched;
        double t0 = now(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        if (cfs_seed_search_set_threads(&p, 1u << 30, count, NULL, count_hit, &hits, &searched,
                                        &th) < 0)
            exit(1);
        double wall = now() - t0, cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        if (g == 0)
            base = cpu;
        printf("set search n=%u 2^26 seeds, alt_gap %3u: %6.2f s CPU (%6.2f s wall), x%.2f the "
               "CPU without; 2^32 in %5.1f CPU s; %llu passed\n",
               n, gaps[g], cpu, wall, cpu / base, cpu * 64, (unsigned long long)hits);
    }
    free(first);
    free(second);
}

/* The full range's global-seed search over 2^24 seeds that hold no fit
 * (three private seeds no stream of the range puts at their words), the
 * first epoch's draw among the first 624 and 1 248 words: wall and CPU
 * seconds, seeds a second a thread, and 2^32 seeds extrapolated. */
static void global_range_rows(void)
{
    const uint64_t count = 1ull << 24;
    const uint32_t ps[3] = {0x9e3779b9u, 0x7f4a7c15u, 0x85ebca6bu};
    unsigned cpus = cfs_seed_usable_cpus();
    static const uint32_t words[] = {624, 1248};
    for (int w = 0; w < 2; w++)
        for (unsigned t = 1; t <= cpus; t *= 2) {
            struct cfs_rng_range_problem p = {
                .table = {.private_seeds = ps, .max_offset = 1u << 25, .max_words = 1u << 24},
                .words = words[w],
                .seed_first = 1u << 31,
                .seed_count = count};
            struct cfs_seed_threads th = {.threads = t};
            struct cfs_rng_table_result r;
            double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            if (cfs_rng_range_find(&p, NULL, &th, &r) < 0)
                exit(1);
            double wall = now() - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            double per_thread = (double)count / cpu, all = 4294967296.0 / per_thread;
            printf("global range words=%4u 2^24 seeds, %u threads (%u usable CPUs): %6.2f s wall, "
                   "%6.2f s CPU, %.2f M seeds/s a thread (CPU time); 2^32 in %.0f s on 1 core, "
                   "%.1f / %.1f / %.1f s on 32 / 64 / 128 (extrapolated)%s\n",
                   words[w], t, cpus, wall, cpu, per_thread * 1e-6, all, all / 32, all / 64,
                   all / 128, r.found ? " FOUND" : "");
        }
}

int main(int argc, char **argv)
{
    bool full = false, io = false, threads = false, gap = false;
    for (int i = 1; i < argc; i++) {
        full |= !strcmp(argv[i], "--full");
        io |= !strcmp(argv[i], "--inside-out");
        threads |= !strcmp(argv[i], "--threads");
        gap |= !strcmp(argv[i], "--gap");
        if (!strcmp(argv[i], "--global-range")) {
            global_range_rows();
            return 0;
        }
    }
    if (gap) {
        gap_rows();
        return 0;
    }
    if (threads) {
        threads_rows();
        return 0;
    }
    const uint32_t sizes[3] = {10000, 100000, 1281167};
    const size_t counts[4] = {1, 2, 4, 8};
    for (int s = 0; s < 3; s++) {
        uint32_t *perm = torch_perm(12345, sizes[s]);
        struct cfs_seed_constraint c[8];
        for (uint32_t i = 0; i < 8; i++)
            c[i] = (struct cfs_seed_constraint){i, perm[i]};
        for (int k = 0; k < 4; k++)
            rate_row("sampler", sizes[s], c, counts[k], 1u << 24);
        /* rank 3 of 8: padded positions 3, 11, 19, 27 */
        for (uint32_t i = 0; i < 4; i++)
            c[i] = (struct cfs_seed_constraint){3 + 8 * i, perm[3 + 8 * i]};
        rate_row("ddp r3/8", sizes[s], c, 4, 1u << 24);
        free(perm);
    }
    if (io)
        inside_out_rate();
    if (full)
        full_range(1281167, 3141592653u);
    return 0;
}
