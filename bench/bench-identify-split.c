/* The seed scan split across a distributed mount's nodes, at ImageNet's
 * size: the time from the head's sets to the head's verified seed, for a
 * late seed (15/16 into the 2^32 seeds), when 1, 2 and 4 nodes each scan a
 * share (clairfs/identify.h, "The seed scan split across the nodes").
 *
 * The trainer is torch-ddp at world 8, 2 ranks a node, 4 workers, batch
 * 32, over 1 281 167 samples; the head's sets come from its first 64
 * opens.  Only the share that holds the seed decides the time (the head
 * verifies the first seed that fits, and the shares run at once on their
 * own hosts), so that share is scanned here from its start, on one thread
 * (one core a node; the argument gives more), every seed that passes
 * verified on the head's opens as it would be; the time is CPU time.  The other nodes' cost is
 * the same per seed.  A node's share of a ring of N: 1/N of the range.
 *
 * usage: bench-identify-split [THREADS] */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clairfs/identify.h"
#include "identify_fixture.h"

#define N 1281167u
#define SEED 0xf0003039u /* 15/16 into the range */

static double clock_sec(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct head {
    const struct cfs_identify_params *p;
    const struct opens *o;
    struct cfs_identified id;
    int passed;
    bool found;
};

/* What a share passed, verified as the head would (true: stop). */
static bool verify(void *arg, uint32_t seed, uint32_t skip)
{
    struct head *h = arg;
    char err[256];
    h->passed++;
    int rc = cfs_identify_split_verify(h->p, h->o->s, h->o->pid, h->o->ppid, h->o->len, &seed,
                                       &skip, 1, &h->id, err, sizeof(err));
    ck_assert_msg(rc == 0 || rc == -ENOENT, "%s", err);
    h->found = rc == 0;
    return h->found;
}

static unsigned threads = 1;

START_TEST(late_seed)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = SEED,
                        .n = N,
                        .world = 8,
                        .batch = 32,
                        .workers = 4,
                        .rank_first = 0,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 64);
    struct cfs_identify_params p = {.n = N, .node = 0, .nodes = 4, .process_alive = no_process};
    struct cfs_split_sets s;
    ck_assert_int_eq(cfs_identify_split_sets(&p, o.s, o.pid, o.ppid, o.len, &s), 0);
    printf("n = %u, seed %u (15/16 into the range), the head's sets: %llu and %llu values, "
           "%u thread(s) a node\n",
           N, SEED, (unsigned long long)s.nfirst, (unsigned long long)s.nsecond, threads);
    fflush(stdout);
    static const uint32_t nodes[] = {1, 2, 4};
    double one = 0;
    for (size_t i = 0; i < 3; i++) {
        uint32_t k = (uint32_t)(((uint64_t)SEED * nodes[i]) >> 32), first;
        uint64_t count;
        cfs_identify_split_share(&s, k, nodes[i], &first, &count);
        struct head h = {.p = &p, .o = &o};
        struct cfs_seed_threads th = {.threads = threads};
        /* the process's CPU clock: on a shared host the wall clock says
         * more of the neighbours than of the scan */
        double t0 = clock_sec(CLOCK_MONOTONIC), c0 = clock_sec(CLOCK_PROCESS_CPUTIME_ID);
        ck_assert_int_eq(cfs_identify_split_scan(&s, k, nodes[i], NULL, verify, &h, &th), 0);
        double secs = clock_sec(CLOCK_PROCESS_CPUTIME_ID) - c0;
        double wall = clock_sec(CLOCK_MONOTONIC) - t0;
        ck_assert(h.found);
        ck_assert_uint_eq(h.id.sampler.seed, SEED);
        if (i == 0)
            one = secs;
        printf("%u node(s): node %u's share from seed %u, %.2f G seeds to the seed, %d passed: "
               "%.1f CPU s (%.2fx one node's; %.1f s wall)\n",
               nodes[i], k, first, (double)(SEED - first) / 1e9, h.passed, secs, secs / one, wall);
        fflush(stdout);
    }
    opens_free(&o);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && (threads = (unsigned)atoi(argv[1])) == 0) {
        fprintf(stderr, "usage: bench-identify-split [THREADS]\n");
        return 2;
    }
    Suite *s = suite_create("identify_split");
    TCase *t = tcase_create("late_seed");
    tcase_set_timeout(t, 3600);
    tcase_add_test(t, late_seed);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK); /* the fixture asserts as the tests do */
    srunner_run_all(r, CK_SILENT);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
