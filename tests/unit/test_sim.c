/* The simulator against independent reimplementations on small fixed seeds:
 * LRU and Belady's MIN over the materialised DistributedSampler stream. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/plan.h"
#include "clairfs/sampler.h"
#include "clairfs/sim.h"

#define NEVER UINT64_MAX

static struct cfs_plan *ddp_plan(uint64_t n, uint32_t world, uint32_t epochs, uint32_t nodes,
                                 uint32_t node, uint64_t seed, const uint64_t *sizes,
                                 uint64_t ram)
{
    struct cfs_plan_params pp = {
        .n = n, .sizes = sizes, .world = world, .epochs = epochs, .nodes = nodes, .node = node,
        .ram = ram,
        .sampler = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n, .world = world,
                    .batch = 1},
    };
    struct cfs_plan *p = NULL;
    char err[256] = "";
    ck_assert_msg(cfs_plan_create(&pp, &p, err, sizeof(err)) == 0, "%s", err);
    return p;
}

static void simulate(struct cfs_plan *p, struct cfs_sim_result *r)
{
    char err[256] = "";
    ck_assert_int_eq(cfs_sim_result_init(r, p), 0);
    ck_assert_msg(cfs_sim_run(p, r, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(cache_as_big_as_the_dataset_hits_after_the_first_epoch)
{
    enum { N = 50, E = 4 };
    uint64_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = 10;
    struct cfs_plan *p = ddp_plan(N, 1, E, 1, 0, 5, sizes, 10 * N);
    struct cfs_sim_result r;
    simulate(p, &r);
    for (int pol = 0; pol < CFS_SIM_POLICIES; pol++)
        for (int e = 0; e < E; e++) {
            const struct cfs_sim_epoch *x = &r.epoch[pol][e];
            ck_assert_uint_eq(x->reads, N);
            ck_assert_uint_eq(x->read_bytes, 10 * N);
            bool hits = pol != CFS_SIM_NOCACHE && e > 0;
            ck_assert_msg(x->local_hits == (hits ? N : 0), "%s epoch %d: %llu hits",
                          cfs_sim_policy_name(pol), e, (unsigned long long)x->local_hits);
            ck_assert_uint_eq(x->pfs_bytes, hits ? 0 : 10 * N);
            ck_assert_uint_eq(x->peer_reads, 0);
        }
    cfs_sim_result_free(&r);
    cfs_plan_destroy(p);
}
END_TEST

/* The single node's stream, materialised (small n only). */
static uint32_t *stream(uint64_t n, uint32_t epochs, uint64_t seed)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n,
                                    .world = 1, .batch = 1};
    struct cfs_sampler *s;
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, NULL, 0), 0);
    uint32_t *out = malloc(n * epochs * sizeof(*out));
    for (uint32_t e = 0; e < epochs; e++) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
        for (uint64_t i = 0; i < n; i++)
            out[e * n + i] = cfs_sampler_rank_at(s, 0, i);
    }
    cfs_sampler_destroy(s);
    return out;
}

/* LRU with unit sizes, hits per epoch. */
static void ref_lru(const uint32_t *st, uint64_t n, uint32_t epochs, uint64_t cap, uint64_t *hits)
{
    uint64_t *last = calloc(n, sizeof(*last)); /* 0: not cached, else time + 1 */
    uint64_t used = 0;
    for (uint64_t t = 0; t < n * epochs; t++) {
        uint32_t f = st[t];
        if (last[f]) {
            hits[t / n]++;
        } else if (cap) {
            if (used == cap) {
                uint64_t victim = 0, oldest = UINT64_MAX;
                for (uint64_t g = 0; g < n; g++)
                    if (last[g] && last[g] < oldest) {
                        oldest = last[g];
                        victim = g;
                    }
                last[victim] = 0;
                used--;
            }
            used++;
        }
        if (last[f] || cap)
            last[f] = t + 1;
    }
    free(last);
}

/* Belady's MIN with bypass, unit sizes, exact next use. */
static void ref_min(const uint32_t *st, uint64_t n, uint32_t epochs, uint64_t cap, uint64_t *hits)
{
    uint64_t len = n * epochs;
    uint64_t *nxt = malloc(len * sizeof(*nxt)), *seen = malloc(n * sizeof(*seen));
    uint64_t *key = malloc(n * sizeof(*key));
    bool *in = calloc(n, sizeof(*in));
    for (uint64_t f = 0; f < n; f++)
        seen[f] = NEVER;
    for (uint64_t t = len; t-- > 0;) {
        nxt[t] = seen[st[t]];
        seen[st[t]] = t;
    }
    uint64_t used = 0;
    for (uint64_t t = 0; t < len; t++) {
        uint32_t f = st[t];
        if (in[f]) {
            hits[t / n]++;
            key[f] = nxt[t];
            if (nxt[t] == NEVER) {
                in[f] = false;
                used--;
            }
            continue;
        }
        if (nxt[t] == NEVER || cap == 0)
            continue;
        if (used == cap) {
            uint64_t far = 0, victim = 0;
            for (uint64_t g = 0; g < n; g++)
                if (in[g] && key[g] >= far) {
                    far = key[g];
                    victim = g;
                }
            if (far <= nxt[t])
                continue; /* bypass */
            in[victim] = false;
            used--;
        }
        in[f] = true;
        key[f] = nxt[t];
        used++;
    }
    free(nxt);
    free(seen);
    free(key);
    free(in);
}

/* Half the dataset cached, one node, two epochs (the walker's window covers
 * both, so the clairvoyant policy is exact MIN). */
START_TEST(half_cache_matches_reference_lru_and_min)
{
    enum { N = 400, E = 2 };
    static const uint64_t seeds[] = {0, 1, 12345};
    uint64_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = 1;
    for (unsigned k = 0; k < 3; k++) {
        uint32_t *st = stream(N, E, seeds[k]);
        uint64_t lru[E] = {0}, min[E] = {0};
        ref_lru(st, N, E, N / 2, lru);
        ref_min(st, N, E, N / 2, min);
        struct cfs_plan *p = ddp_plan(N, 1, E, 1, 0, seeds[k], sizes, N / 2);
        struct cfs_sim_result r;
        simulate(p, &r);
        for (int e = 0; e < E; e++) {
            ck_assert_uint_eq(r.epoch[CFS_SIM_LRU][e].local_hits, lru[e]);
            ck_assert_uint_eq(r.epoch[CFS_SIM_CLAIRVOYANT][e].local_hits, min[e]);
        }
        /* Static: every file is read twice, first in epoch 0, so ties go by
         * index: files 0..N/2-1 are pinned and hit in epoch 1. */
        ck_assert_uint_eq(r.epoch[CFS_SIM_STATIC][0].local_hits, 0);
        ck_assert_uint_eq(r.epoch[CFS_SIM_STATIC][1].local_hits, N / 2);
        /* docs/design.md, "The facts the design rests on", fact 5: LRU
         * collapses, MIN keeps about half. */
        ck_assert_uint_lt(lru[1], N * 30 / 100);
        ck_assert_uint_ge(min[1], N * 45 / 100);
        cfs_sim_result_free(&r);
        cfs_plan_destroy(p);
        free(st);
    }
}
END_TEST

/* Over many epochs the window is inexact beyond the next epoch: the
 * clairvoyant policy stays at or below exact MIN, and above static pinning. */
START_TEST(many_epochs_clairvoyant_between_static_and_min)
{
    enum { N = 300, E = 8 };
    uint64_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = 1;
    uint32_t *st = stream(N, E, 7);
    uint64_t min[E] = {0}, lru[E] = {0};
    ref_min(st, N, E, N / 2, min);
    ref_lru(st, N, E, N / 2, lru);
    struct cfs_plan *p = ddp_plan(N, 1, E, 1, 0, 7, sizes, N / 2);
    struct cfs_sim_result r;
    simulate(p, &r);
    uint64_t min_all = 0, lru_all = 0;
    for (int e = 0; e < E; e++) {
        min_all += min[e];
        lru_all += lru[e];
    }
    struct cfs_sim_epoch cv = cfs_sim_sum(&r, CFS_SIM_CLAIRVOYANT, 0);
    struct cfs_sim_epoch sp = cfs_sim_sum(&r, CFS_SIM_STATIC, 0);
    struct cfs_sim_epoch lr = cfs_sim_sum(&r, CFS_SIM_LRU, 0);
    ck_assert_uint_eq(lr.local_hits, lru_all);
    ck_assert_uint_le(cv.local_hits, min_all);
    ck_assert_uint_ge(cv.local_hits, sp.local_hits);
    ck_assert_uint_eq(sp.local_hits, (uint64_t)(N / 2) * (E - 1));
    cfs_sim_result_free(&r);
    cfs_plan_destroy(p);
    free(st);
}
END_TEST

/* Two nodes, one rank each, each with room for 60 % of the dataset: the
 * owners hold every file, so from epoch 1 on nothing comes from the PFS under
 * the clairvoyant policy; NoPFS's uncoordinated pinning leaves holes. */
START_TEST(two_nodes_cover_the_dataset_together)
{
    enum { N = 200, E = 5 };
    uint64_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = 3;
    struct cfs_plan *p0 = ddp_plan(N, 2, E, 2, 0, 3, sizes, 3 * N * 6 / 10);
    ck_assert_uint_eq(cfs_plan_owned_bytes(p0), 3 * N);
    struct cfs_sim_result r;
    ck_assert_int_eq(cfs_sim_result_init(&r, p0), 0);
    ck_assert_int_eq(cfs_sim_run(p0, &r, NULL, 0), 0);
    struct cfs_plan *p1 = ddp_plan(N, 2, E, 2, 1, 3, sizes, 3 * N * 6 / 10);
    ck_assert_int_eq(cfs_sim_run(p1, &r, NULL, 0), 0);
    for (uint32_t f = 0; f < N; f++)
        ck_assert_uint_eq(cfs_plan_owner(p0, f, NULL), cfs_plan_owner(p1, f, NULL));
    struct cfs_sim_epoch cv = cfs_sim_sum(&r, CFS_SIM_CLAIRVOYANT, 1);
    struct cfs_sim_epoch sp = cfs_sim_sum(&r, CFS_SIM_STATIC, 1);
    struct cfs_sim_epoch lr = cfs_sim_sum(&r, CFS_SIM_LRU, 1);
    ck_assert_uint_eq(cv.reads, (uint64_t)N * (E - 1));
    ck_assert_uint_eq(cv.pfs_reads, 0);
    ck_assert_uint_eq(cv.local_hits + cv.peer_reads, cv.reads);
    ck_assert_uint_gt(sp.pfs_reads, 0);
    ck_assert_uint_eq(lr.peer_reads, 0);
    cfs_sim_result_free(&r);
    cfs_plan_destroy(p0);
    cfs_plan_destroy(p1);
}
END_TEST

static Suite *sim_suite(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, cache_as_big_as_the_dataset_hits_after_the_first_epoch);
    tcase_add_test(tc, half_cache_matches_reference_lru_and_min);
    tcase_add_test(tc, many_epochs_clairvoyant_between_static_and_min);
    tcase_add_test(tc, two_nodes_cover_the_dataset_together);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sim_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
