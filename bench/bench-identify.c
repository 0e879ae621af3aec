/* Order identification's cost: for synthetic datasets of 10 000, 100 000
 * and 1 281 167 samples (only indices matter), a torch-ddp trainer node of
 * 4 ranks x 4 DataLoader workers (batch 32) opening its files, the workers'
 * opens interleaved; printed per size:
 *
 *   - the opens needed: the shortest prefix of the open sequence whose
 *     identification carries the evidence the full 2^32 range demands
 *     (cfs_identify_evidence_needed), found by identifying prefixes over a
 *     narrow seed window (the evidence of a fit does not depend on the
 *     range searched);
 *   - the scan: time to identify those opens over 2^26 seeds ending at the
 *     true one, extrapolated to 2^32, against the exact seed search
 *     (cfs_seed_search, the true first open as one constraint) over the
 *     same range in the same run: the ratio is what the set constraint
 *     costs over knowing which process reads the stream's head;
 *   - with --full, one real identification over all 2^32 seeds, from seed
 *     0 up to the true one (37% of the range).
 *
 * usage: bench-identify [--full] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/identify.h"
#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"

enum { RANKS = 4, WORKERS = 4, BATCH = 32, READERS = RANKS * WORKERS };
#define SEED 0x5eed1234u

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The node's opens in epoch 0, `max` of them, workers round robin. */
static size_t simulate(uint32_t n, size_t max, uint32_t *s, pid_t *pid, pid_t *ppid)
{
    struct cfs_sampler_params sp = {
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = SEED, .n = n, .world = RANKS, .batch = BATCH};
    struct cfs_sampler *smp;
    char err[256];
    if (cfs_sampler_create(&sp, &smp, err, sizeof(err)) < 0 ||
        cfs_sampler_compute_epoch(smp, 0) < 0) {
        fprintf(stderr, "bench-identify: %s\n", err);
        exit(1);
    }
    uint64_t len = cfs_sampler_rank_len(smp, 0, 0), next[READERS] = {0};
    size_t k = 0;
    for (bool any = true; any && k < max;) {
        any = false;
        for (uint32_t i = 0; i < READERS && k < max; i++) {
            uint32_t r = i / WORKERS, w = i % WORKERS;
            /* worker w's j-th index: batch (j / BATCH) * WORKERS + w */
            uint64_t j = next[i], at = (j / BATCH * WORKERS + w) * BATCH + j % BATCH;
            if (at >= len)
                continue;
            any = true;
            next[i]++;
            s[k] = cfs_sampler_rank_at(smp, r, at);
            pid[k] = (pid_t)(2000 + 100 * r + w);
            ppid[k++] = (pid_t)(1000 + r);
        }
    }
    cfs_sampler_destroy(smp);
    return k;
}

static int identify(uint32_t n, uint32_t first, uint64_t count, const uint32_t *s, const pid_t *pid,
                    const pid_t *ppid, size_t k, struct cfs_identified *id)
{
    struct cfs_identify_params p = {.n = n, .nodes = 1, .seed_first = first, .seed_count = count};
    char err[256];
    return cfs_identify_offline(&p, s, pid, ppid, k, id, err, sizeof(err));
}

static void bench_size(uint32_t n, bool full)
{
    enum { MAX = 4096 };
    static uint32_t s[MAX];
    static pid_t pid[MAX], ppid[MAX];
    size_t total = simulate(n, MAX, s, pid, ppid);
    struct cfs_identify_params all = {.n = n, .nodes = 1};
    double need = cfs_identify_evidence_needed(&all);
    struct cfs_identified id;
    size_t k = 32;
    for (; k <= total; k += 4)
        if (identify(n, SEED - 512, 1024, s, pid, ppid, k, &id) == 0 && id.evidence_bits >= need)
            break;
    if (k > total) {
        printf("n=%u: not identified within %zu opens\n", n, total);
        return;
    }
    printf("n=%-8u opens needed %zu (%u readers; evidence %.0f bits, %.0f needed)\n", n, k, READERS,
           id.evidence_bits, need);
    const uint64_t range = 1ull << 26;
    double t0 = now();
    int rc = identify(n, SEED - (uint32_t)range + 1, range, s, pid, ppid, k, &id);
    double t_set = now() - t0;
    struct cfs_seed_constraint c = {.pos = 0, .value = s[0]};
    struct cfs_seed_problem sp = {.n = n, .c = &c, .nc = 1};
    struct cfs_seed_result res;
    t0 = now();
    cfs_seed_search(&sp, SEED - (uint32_t)range + 1, range, &res);
    double t_exact = now() - t0;
    printf("           2^26 seeds: identify %.2f s (%s), exact one-constraint search %.2f s: "
           "ratio %.2f; full range ~%.0f s\n",
           t_set, rc == 0 ? "identified" : "NOT identified", t_exact, t_set / t_exact, t_set * 64);
    if (full) {
        t0 = now();
        rc = identify(n, 0, 0, s, pid, ppid, k, &id);
        printf("           all 2^32 seeds from 0 (stops at the seed, %.0f%% in): %.1f s: %s\n",
               100.0 * SEED / 4294967296.0, now() - t0, rc == 0 ? id.text : "NOT identified");
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bool full = argc > 1 && strcmp(argv[1], "--full") == 0;
    static const uint32_t sizes[] = {10000, 100000, 1281167};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        bench_size(sizes[i], full);
    return 0;
}
