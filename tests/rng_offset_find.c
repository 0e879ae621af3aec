/* rng_offset_find: the offset finder on the command line, for the live
 * oracle (tests/integration/test_rng_offset_live.py) and the benchmark.
 *
 *   rng_offset_find --seed S --n N --epoch0 "I0 I1 ..." [--epoch1 "I0 ..."]
 *                   [--max-offset M] [--max-words W] [--persistent-workers]
 *                   [--legacy-randperm]
 *     prints "rng_offset=K" and, with --epoch1, "rng_epoch_words=G"; the
 *     indices are the first ones an epoch read (randperm positions 0, 1, ...).
 *     Exit 1 with a one-line reason when the answer is not unique.
 *   rng_offset_find --bench COUNT
 *     offsets/s over COUNT offsets for ImageNet's n, with eight observed
 *     positions (the cheap filter) and with only a late position (every
 *     candidate replayed: the baseline), and their ratio. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/rng_offset.h"

#define MAX_OBSERVED 64

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -EINVAL;
    *v = x;
    return 0;
}

static int parse_indices(const char *s, struct cfs_seed_constraint *c, size_t *nc)
{
    *nc = 0;
    while (*s) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s) {
            if (*s != ' ')
                return -EINVAL;
            s++;
            continue;
        }
        if (errno || v > UINT32_MAX || *nc == MAX_OBSERVED)
            return -EINVAL;
        c[*nc] = (struct cfs_seed_constraint){.pos = (uint32_t)*nc, .value = (uint32_t)v};
        (*nc)++;
        s = end;
    }
    return 0;
}

static int report(const char *what, int rc, const struct cfs_rng_result *r)
{
    if (rc < 0) {
        fprintf(stderr, "rng_offset_find: %s: %s\n", what, strerror(-rc));
        return 1;
    }
    if (r->verdict != CFS_SEED_UNIQUE) {
        fprintf(stderr, "rng_offset_find: %s: %s (%llu matches in %llu)\n", what,
                cfs_seed_verdict_name(r->verdict), (unsigned long long)r->matches,
                (unsigned long long)r->searched);
        return 1;
    }
    printf("%s=%llu\n", what, (unsigned long long)r->found[0]);
    return 0;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double rate(const struct cfs_rng_problem *p, uint64_t count)
{
    struct cfs_rng_result r;
    double t0 = cpu_now();
    if (cfs_rng_offset_find(p, count - 1, &r) < 0)
        return 0;
    return (double)count / (cpu_now() - t0);
}

static int bench(uint64_t count)
{
    struct cfs_seed_constraint c[8];
    const uint64_t n = 1281167;
    for (uint32_t i = 0; i < 8; i++)
        c[i] = (struct cfs_seed_constraint){.pos = i, .value = 1000 + i};
    struct cfs_rng_problem cheap = {.seed = 0, .n = n, .algo = CFS_RANDPERM_LEGACY, .c = c,
                                    .nc = 8};
    /* A late position with a value below it: no cheap filter applies. */
    struct cfs_seed_constraint late = {.pos = 700, .value = 3};
    struct cfs_rng_problem full = cheap;
    full.c = &late;
    full.nc = 1;
    double fast = rate(&cheap, count), slow = rate(&full, count / 16 ? count / 16 : 1);
    printf("rng_offset cheap filter: %.3g offsets/s (2^28 in %.0f s)\n", fast,
           (double)(1u << 28) / fast);
    printf("rng_offset full replay (baseline): %.3g offsets/s\n", slow);
    printf("rng_offset speedup of the cheap filter: %.1fx\n", fast / slow);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"seed", required_argument, 0, 's'},      {"n", required_argument, 0, 'n'},
        {"epoch0", required_argument, 0, '0'},    {"epoch1", required_argument, 0, '1'},
        {"max-offset", required_argument, 0, 'K'}, {"max-words", required_argument, 0, 'G'},
        {"persistent-workers", no_argument, 0, 'p'}, {"legacy-randperm", no_argument, 0, 'L'},
        {"bench", required_argument, 0, 'B'},     {0, 0, 0, 0}};
    struct cfs_seed_constraint c0[MAX_OBSERVED], c1[MAX_OBSERVED];
    size_t n0 = 0, n1 = 0;
    bool have1 = false, pw = false;
    uint64_t max_offset = 1u << 28, max_words = 1u << 20, v = 0, bench_count = 0;
    struct cfs_rng_problem p = {.algo = CFS_RANDPERM_CURRENT};
    int c;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case '0': rc = parse_indices(optarg, c0, &n0); break;
        case '1': rc = parse_indices(optarg, c1, &n1); have1 = true; break;
        case 'p': pw = true; break;
        case 'L': p.algo = CFS_RANDPERM_LEGACY; break;
        case '?': rc = -EINVAL; break;
        default:
            rc = parse_u64(optarg, &v);
            if (c == 's') p.seed = v;
            else if (c == 'n') p.n = v;
            else if (c == 'K') max_offset = v;
            else if (c == 'G') max_words = v;
            else if (c == 'B') bench_count = v;
        }
        if (rc < 0) {
            fprintf(stderr, "rng_offset_find: bad argument %s\n", optarg ? optarg : "");
            return 2;
        }
    }
    if (bench_count)
        return bench(bench_count);
    struct cfs_rng_result r;
    p.c = c0;
    p.nc = n0;
    int rc = cfs_rng_offset_find(&p, max_offset, &r);
    if (report("rng_offset", rc, &r))
        return 1;
    if (!have1)
        return 0;
    uint64_t k = r.found[0];
    p.c = c1;
    p.nc = n1;
    rc = cfs_rng_epoch_words_find(&p, k, pw, 1, max_words, &r);
    return report("rng_epoch_words", rc, &r);
}
