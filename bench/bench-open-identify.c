/* What learning the order costs an open: the data path's open + release of
 * a RAM-resident file without a seed (the hot path while learning), timed
 * in the same run
 *   base     identification off: nothing looked up, nothing observed;
 *   lookup   + the opener's look-up (opener.c, a cached thread);
 *   learn    + the look-up, the sample remembered, and an observe that
 *            appends under a mutex, as the identify module's does.
 * Thread CPU time per open, best of 7 rounds interleaved (the machine may
 * be shared), and each as a ratio of base and as ns added.  Figures only:
 * nothing is asserted about time (the fixture's checks of bytes run inside
 * a Check runner, hence the test case around it). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "prefetch_fixture.h"
#include "src/opener.h"

#define OPENS 100000u
#define ROUNDS 7

struct append_log {
    pthread_mutex_t mu;
    uint32_t *samples;
    size_t n, cap;
};

static void log_observe(void *arg, uint32_t sample, pid_t pid, pid_t ppid)
{
    struct append_log *l = arg;
    (void)pid;
    (void)ppid;
    pthread_mutex_lock(&l->mu);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->samples = realloc(l->samples, l->cap * sizeof(*l->samples));
    }
    l->samples[l->n++] = sample;
    pthread_mutex_unlock(&l->mu);
}

static void log_restart(void *arg)
{
    ((struct append_log *)arg)->n = 0;
}

static const struct cfs_identify_ops log_ops = {log_observe, log_restart, NULL};

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum mode { BASE, LOOKUP, LEARN, NMODES };

static double run(struct cfs_prefetch *pf, const struct fixture *fx, struct cfs_openers *o,
                  enum mode mode)
{
    pid_t tid = (pid_t)gettid();
    double t0 = cpu_ns();
    for (uint32_t i = 0; i < OPENS; i++) {
        struct cfs_opener who = {0, 0};
        if (mode != BASE && (mode == LOOKUP || cfs_prefetch_learning(pf)))
            cfs_openers_lookup(o, tid, &who);
        struct cfs_prefetch_file *f = NULL;
        cfs_id id = cfs_catalog_sample_entry(fx->cat, i % NFILES);
        if (cfs_prefetch_open_as(pf, id, &who, &f) != 0) {
            fprintf(stderr, "open failed\n");
            exit(1);
        }
        cfs_prefetch_release(pf, f);
    }
    return (cpu_ns() - t0) / OPENS;
}

START_TEST(open_cost)
{
    struct fixture fx;
    struct cfs_metrics m;
    char err[256];
    fixture_init(&fx);
    struct cfs_prefetch *base = make_pf(&fx, "ram=16M", &m, NULL);
    struct cfs_metrics m2;
    struct cfs_prefetch *learn = make_pf(&fx, "ram=16M", &m2, NULL);
    struct append_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    cfs_prefetch_set_identify(learn, &log_ops, &log, NULL);
    cfs_prefetch_set_identify(base, NULL, NULL, "off");
    struct cfs_openers *o = NULL;
    ck_assert_msg(cfs_openers_create("/proc", NULL, &o, err, sizeof(err)) == 0, "%s", err);
    for (uint32_t s = 0; s < NFILES; s++) { /* every file resident in both */
        read_check(base, &fx, s);
        read_check(learn, &fx, s);
    }
    double best[NMODES] = {1e300, 1e300, 1e300};
    for (int r = 0; r < ROUNDS; r++) {
        double t;
        if ((t = run(base, &fx, o, BASE)) < best[BASE])
            best[BASE] = t;
        if ((t = run(base, &fx, o, LOOKUP)) < best[LOOKUP])
            best[LOOKUP] = t;
        if ((t = run(learn, &fx, o, LEARN)) < best[LEARN])
            best[LEARN] = t;
    }
    static const char *names[] = {"base", "lookup", "learn"};
    printf("open+release of a RAM-resident file, no seed, %u opens x %d rounds (best, CPU)\n",
           OPENS, ROUNDS);
    for (int i = 0; i < NMODES; i++)
        printf("  %-7s %8.0f ns/open  %.3fx base  %+6.0f ns\n", names[i], best[i],
               best[i] / best[BASE], best[i] - best[BASE]);
    printf("  observed %zu opens, /proc read %llu times\n", log.n,
           (unsigned long long)cfs_openers_proc_reads(o));
    cfs_openers_destroy(o);
    cfs_prefetch_destroy(learn);
    cfs_prefetch_destroy(base);
    free(log.samples);
    fixture_fini(&fx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench_open_identify");
    TCase *tc = tcase_create("open");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, open_cost);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
