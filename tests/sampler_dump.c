/* sampler_dump: prints a sampler's per-epoch, per-rank streams in the
 * list:FILE format (clairfs/sampler.h), the same text that
 * tests/golden/torch_orders.py prints from real PyTorch, so the two can be
 * compared with diff. With --bench it times randperm instead.
 *
 *   sampler_dump --kind K --n N --seed S [--world W] [--batch B] [--drop-last]
 *                [--drop-last-batch] [--persistent-workers] [--epochs E]
 *                [--start-epoch E0] [--list FILE] [--legacy-randperm] [--repetitions R]
 *                [--rng-offset K] [--rng-epoch-words G]
 *   (K: any kind's name, cfs_sampler_kind_name(), or one of the second names
 *    sampler= takes: lightning, mmengine = torch-ddp, mmengine-infinite =
 *    detectron2, hf-trainer = torch-sampler)
 *   sampler_dump --bench N [REPEAT] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/sampler.h"

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-')
        return -1;
    *v = strtoull(s, &end, 10);
    return (errno || *end) ? -1 : 0;
}

/* The kinds' names, and the second names options.c gives some of them. */
static int parse_kind(const char *a, enum cfs_sampler_kind *kind)
{
    static const struct {
        const char *name;
        enum cfs_sampler_kind kind;
    } aliases[] = {{"lightning", CFS_SAMPLER_TORCH_DDP},
                   {"mmengine", CFS_SAMPLER_TORCH_DDP},
                   {"mmengine-infinite", CFS_SAMPLER_DETECTRON2},
                   {"hf-trainer", CFS_SAMPLER_TORCH_SAMPLER}};
    for (int k = 0; k < CFS_SAMPLER_KINDS; k++)
        if (k != CFS_SAMPLER_LIST && !strcmp(a, cfs_sampler_kind_name((enum cfs_sampler_kind)k))) {
            *kind = (enum cfs_sampler_kind)k;
            return 0;
        }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcmp(a, aliases[i].name)) {
            *kind = aliases[i].kind;
            return 0;
        }
    return -1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench(uint64_t n, uint64_t repeat)
{
    uint32_t *perm = malloc(n * sizeof(*perm));
    struct cfs_mt19937 mt;
    double best = 1e30, t0;
    if (!perm)
        return 1;
    for (uint64_t k = 0; k < repeat; k++) {
        cfs_mt19937_seed(&mt, k);
        t0 = now();
        cfs_torch_randperm(&mt, perm, (uint32_t)n, CFS_RANDPERM_CURRENT);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    /* Baselines in the same run: drawing the same words, and skipping them. */
    uint64_t words = cfs_torch_randperm_words(n, CFS_RANDPERM_CURRENT);
    uint32_t sink = 0;
    cfs_mt19937_seed(&mt, 0);
    t0 = now();
    for (uint64_t i = 0; i < words; i++)
        sink ^= cfs_mt19937_next32(&mt);
    double draw = now() - t0;
    cfs_mt19937_seed(&mt, 0);
    t0 = now();
    cfs_mt19937_discard(&mt, words);
    double skip = now() - t0;
    printf("randperm n=%llu: best of %llu %.3f ms (%.2f ns/element, %.2fx the bare draws); "
           "drawing its %llu words %.3f ms, skipping them %.3f ms%s\n",
           (unsigned long long)n, (unsigned long long)repeat, best * 1e3, best * 1e9 / (double)n,
           best / draw, (unsigned long long)words, draw * 1e3, skip * 1e3, sink == 1 ? " " : "");
    free(perm);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kind", required_argument, 0, 'k'},       {"n", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},       {"world", required_argument, 0, 'w'},
        {"batch", required_argument, 0, 'b'},      {"drop-last", no_argument, 0, 'd'},
        {"drop-last-batch", no_argument, 0, 'D'},  {"persistent-workers", no_argument, 0, 'p'},
        {"epochs", required_argument, 0, 'e'},     {"start-epoch", required_argument, 0, 'S'},
        {"list", required_argument, 0, 'l'},       {"bench", required_argument, 0, 'B'},
        {"legacy-randperm", no_argument, 0, 'L'}, {"repetitions", required_argument, 0, 'R'},
        {"rng-offset", required_argument, 0, 'K'}, {"rng-epoch-words", required_argument, 0, 'G'},
        {0, 0, 0, 0}};
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_TORCH_DDP, .world = 1, .batch = 1};
    uint64_t epochs = 1, start = 0, v, bench_n = 0;
    char err[512];
    int c;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case 'k':
            if (parse_kind(a, &p.kind) < 0) {
                fprintf(stderr, "sampler_dump: bad --kind %s\n", a);
                return 2;
            }
            break;
        case 'l': p.kind = CFS_SAMPLER_LIST; p.list_path = a; break;
        case 'd': p.drop_last = true; break;
        case 'D': p.drop_last_batch = true; break;
        case 'p': p.persistent_workers = true; break;
        case 'L': p.randperm = CFS_RANDPERM_LEGACY; break;
        default:
            if (c == '?' || parse_u64(a, &v) < 0) {
                fprintf(stderr, "sampler_dump: bad argument %s\n", a ? a : "");
                return 2;
            }
            if (c == 'n') p.n = v;
            else if (c == 's') p.seed = v;
            else if (c == 'w') p.world = (uint32_t)v;
            else if (c == 'b') p.batch = (uint32_t)v;
            else if (c == 'e') epochs = v;
            else if (c == 'S') start = v;
            else if (c == 'B') bench_n = v;
            else if (c == 'R') p.repetitions = (uint32_t)v;
            else if (c == 'K') p.rng_offset = v;
            else if (c == 'G') p.rng_epoch_words = v;
        }
    }
    if (bench_n) {
        uint64_t repeat = 5;
        if (optind < argc && parse_u64(argv[optind], &repeat) < 0)
            return 2;
        return bench(bench_n, repeat ? repeat : 1);
    }
    struct cfs_sampler *s;
    if (cfs_sampler_create(&p, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "sampler_dump: %s\n", err);
        return 1;
    }
    printf("clairfs-sampler-list world=%u epochs=%llu n=%llu\n", p.world,
           (unsigned long long)(epochs - start), (unsigned long long)p.n);
    for (uint64_t e = start; e < epochs; e++) {
        if (cfs_sampler_compute_epoch(s, (uint32_t)e) < 0) {
            fprintf(stderr, "sampler_dump: epoch %llu: %s\n", (unsigned long long)e,
                    cfs_sampler_error(s));
            cfs_sampler_destroy(s);
            return 1;
        }
        for (uint32_t r = 0; r < p.world; r++) {
            uint64_t len = cfs_sampler_rank_len(s, (uint32_t)e, r);
            printf("epoch %llu rank %u:", (unsigned long long)(e - start), r);
            for (uint64_t i = 0; i < len; i++)
                printf(" %u", cfs_sampler_rank_at(s, r, i));
            putchar('\n');
        }
    }
    cfs_sampler_destroy(s);
    return fflush(stdout) == 0 ? 0 : 1;
}
