/* The DataLoader emulation against real PyTorch: goldens recorded by
 * tests/golden/loader/gen_loader_goldens.py (torch 1.13) give, per epoch,
 * the main loop's send/yield sequence, each worker's load order and each
 * batch's worker and indices.  The emulation must reproduce all three. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/loader.h"

#define MAXN 256
#define MAXW 8
#define MAXEV 1024

static const char *const goldens[] = {
    "n10_b3_w2_p2_keep_fresh.txt",      "n10_b3_w2_p2_drop_fresh.txt",
    "n23_b4_w3_p1_keep_persistent.txt", "n23_b4_w3_p3_drop_fresh.txt",
    "n7_b2_w4_p2_keep_fresh.txt",       "n40_b1_w4_p2_keep_persistent.txt",
    "n17_b3_w1_p2_keep_fresh.txt",      "n12_b5_w0_p2_keep_fresh.txt",
    "n50_b8_w3_p4_drop_fresh.txt",
};

/* What one epoch looked like, from PyTorch or from the emulation.  Worker
 * slot MAXW-1 stands for the main process (worker -1). */
struct record {
    char events[MAXEV][16];
    int nevents;
    uint32_t worker_order[MAXW][MAXN];
    int worker_len[MAXW];
    int batch_worker[MAXN];
    uint32_t batch_idx[MAXN][MAXN];
    int batch_len[MAXN];
    int nbatches;
};

static int slot_of(long w)
{
    return w < 0 ? MAXW - 1 : (int)w;
}

/* The emulation's side: fetch runs in the worker threads, each writing only
 * its own row; trace runs in the main thread. */
struct run {
    struct record rec;
    uint32_t window;
    atomic_long yielded;
    atomic_int violations; /* batches started before their window opened */
    uint32_t fail_index;   /* fetch of this index fails with -EIO */
};

static int fetch(void *arg, uint32_t worker, uint64_t batch, uint32_t index)
{
    struct run *r = arg;
    int w = worker == CFS_LOADER_MAIN ? MAXW - 1 : (int)worker;
    /* PyTorch cannot start batch k before k - P*T was received. */
    if (r->window && (long)batch >= (long)r->window &&
        atomic_load(&r->yielded) < (long)batch - (long)r->window + 1)
        atomic_fetch_add(&r->violations, 1);
    r->rec.worker_order[w][r->rec.worker_len[w]++] = index;
    r->rec.batch_worker[batch] = worker == CFS_LOADER_MAIN ? -1 : (int)worker;
    r->rec.batch_idx[batch][r->rec.batch_len[batch]++] = index;
    return index == r->fail_index ? -EIO : 0;
}

static void trace(void *arg, enum cfs_loader_event ev, uint64_t batch, uint32_t worker)
{
    (void)worker;
    struct run *r = arg;
    snprintf(r->rec.events[r->rec.nevents++], 16, "%s %llu",
             ev == CFS_LOADER_SEND ? "send" : "yield", (unsigned long long)batch);
    if (ev == CFS_LOADER_YIELD)
        atomic_fetch_add(&r->yielded, 1);
}

/* Read the numbers after a keyword into v; returns how many. */
static int numbers(const char *s, long *v, int max)
{
    int n = 0;
    char *end;
    while (n < max) {
        long x = strtol(s, &end, 10);
        if (end == s)
            break;
        v[n++] = x;
        s = end;
    }
    return n;
}

static void check_golden(const char *name)
{
    char path[1024];
    const char *root = getenv("CLAIRFS_SOURCE_ROOT");
    ck_assert_msg(root != NULL, "CLAIRFS_SOURCE_ROOT is not set");
    snprintf(path, sizeof(path), "%s/tests/golden/loader/%s", root, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);

    static char line[8192];
    static long v[MAXN + 4];
    static struct record want;
    static uint32_t stream[MAXN];
    static struct run got;
    struct cfs_loader_params p = {0};
    struct cfs_loader *l = NULL;
    long n = 0, epochs = 0, epochs_seen = 0;
    int ended = 0;

    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f)); /* comment */
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    ck_assert_int_eq(sscanf(line, "params %ld %u %u %u %d %ld", &n, &p.batch, &p.workers,
                            &p.prefetch, (int *)&v[0], &epochs), 6);
    p.drop_last = v[0] != 0;
    ck_assert(n > 0 && n <= MAXN && p.workers < MAXW - 1);
    memset(&got, 0, sizeof(got));
    got.window = p.workers * p.prefetch;
    got.fail_index = UINT32_MAX;
    ck_assert_int_eq(cfs_loader_create(&p, fetch, trace, &got, &l), 0);

    /* Each "epoch" line runs the previous epoch's comparison first. */
    for (;;) {
        int have = fgets(line, sizeof(line), f) != NULL;
        int boundary = !have || strncmp(line, "epoch", 5) == 0 || strncmp(line, "end", 3) == 0;
        if (boundary && epochs_seen > 0) {
            memset(&got.rec, 0, sizeof(got.rec));
            atomic_store(&got.yielded, 0);
            ck_assert_int_eq(cfs_loader_start_epoch(l, stream, (uint64_t)n), 0);
            uint64_t k, expect = 0;
            int rc;
            while ((rc = cfs_loader_next(l, &k)) == 1)
                ck_assert_uint_eq(k, expect++);
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(cfs_loader_next(l, &k), 0);
            got.rec.nbatches = (int)expect;

            ck_assert_int_eq(got.rec.nbatches, want.nbatches);
            ck_assert_uint_eq(cfs_loader_batch_count((uint64_t)n, p.batch, p.drop_last),
                              (uint64_t)want.nbatches);
            ck_assert_int_eq(got.rec.nevents, want.nevents);
            for (int i = 0; i < want.nevents; i++)
                ck_assert_str_eq(got.rec.events[i], want.events[i]);
            for (int w = 0; w < MAXW; w++) {
                ck_assert_int_eq(got.rec.worker_len[w], want.worker_len[w]);
                for (int i = 0; i < want.worker_len[w]; i++)
                    ck_assert_uint_eq(got.rec.worker_order[w][i], want.worker_order[w][i]);
            }
            for (int b = 0; b < want.nbatches; b++) {
                ck_assert_int_eq(got.rec.batch_worker[b], want.batch_worker[b]);
                ck_assert_int_eq(
                    (int)cfs_loader_batch_worker((uint64_t)b, p.workers),
                    want.batch_worker[b] < 0 ? (int)CFS_LOADER_MAIN : want.batch_worker[b]);
                ck_assert_int_eq(got.rec.batch_len[b], want.batch_len[b]);
                for (int i = 0; i < want.batch_len[b]; i++)
                    ck_assert_uint_eq(got.rec.batch_idx[b][i], want.batch_idx[b][i]);
            }
            ck_assert_int_eq(atomic_load(&got.violations), 0);
        }
        if (!have)
            break;
        if (strncmp(line, "end", 3) == 0) {
            ended = 1;
            break;
        }
        if (strncmp(line, "epoch", 5) == 0) {
            memset(&want, 0, sizeof(want));
            epochs_seen++;
        } else if (strncmp(line, "stream ", 7) == 0) {
            ck_assert_int_eq(numbers(line + 7, v, MAXN), n);
            for (long i = 0; i < n; i++)
                stream[i] = (uint32_t)v[i];
        } else if (strncmp(line, "send ", 5) == 0 || strncmp(line, "yield ", 6) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(want.events[want.nevents++], 16, "%.15s", line);
        } else if (strncmp(line, "worker ", 7) == 0) {
            int c = numbers(line + 7, v, MAXN + 1);
            int w = slot_of(v[0]);
            want.worker_len[w] = c - 1;
            for (int i = 1; i < c; i++)
                want.worker_order[w][i - 1] = (uint32_t)v[i];
        } else if (strncmp(line, "batch ", 6) == 0) {
            int c = numbers(line + 6, v, MAXN + 2);
            int b = (int)v[0];
            want.batch_worker[b] = (int)v[1];
            want.batch_len[b] = c - 2;
            for (int i = 2; i < c; i++)
                want.batch_idx[b][i - 2] = (uint32_t)v[i];
            if (b + 1 > want.nbatches)
                want.nbatches = b + 1;
        } else {
            ck_abort_msg("%s: unexpected line: %s", name, line);
        }
    }
    ck_assert_msg(ended, "%s: no 'end' line", name);
    ck_assert_int_eq(epochs_seen, epochs);
    cfs_loader_destroy(l);
    fclose(f);
}

START_TEST(matches_pytorch_goldens)
{
    check_golden(goldens[_i]);
}
END_TEST

START_TEST(batch_count_and_worker)
{
    ck_assert_uint_eq(cfs_loader_batch_count(10, 3, false), 4);
    ck_assert_uint_eq(cfs_loader_batch_count(10, 3, true), 3);
    ck_assert_uint_eq(cfs_loader_batch_count(9, 3, false), 3);
    ck_assert_uint_eq(cfs_loader_batch_count(9, 3, true), 3);
    ck_assert_uint_eq(cfs_loader_batch_count(2, 3, true), 0);
    ck_assert_uint_eq(cfs_loader_batch_count(0, 3, false), 0);
    ck_assert_uint_eq(cfs_loader_batch_worker(7, 3), 1);
    ck_assert_uint_eq(cfs_loader_batch_worker(7, 0), CFS_LOADER_MAIN);
}
END_TEST

START_TEST(bad_params_are_rejected)
{
    struct cfs_loader *l = NULL;
    struct cfs_loader_params p = {.batch = 0, .workers = 2, .prefetch = 2};
    ck_assert_int_eq(cfs_loader_create(&p, fetch, NULL, NULL, &l), -EINVAL);
    p.batch = 4;
    p.prefetch = 0;
    ck_assert_int_eq(cfs_loader_create(&p, fetch, NULL, NULL, &l), -EINVAL);
    cfs_loader_destroy(NULL);
}
END_TEST

/* A failing sample fails its batch only, in batch order, like PyTorch's
 * re-raise from __next__; the other batches still arrive. */
START_TEST(fetch_error_is_returned_with_its_batch)
{
    static struct run r;
    static uint32_t stream[20];
    for (uint32_t i = 0; i < 20; i++)
        stream[i] = 19 - i;
    memset(&r, 0, sizeof(r));
    r.fail_index = 12; /* position 7: batch 2 of batch size 3 */
    struct cfs_loader_params p = {.batch = 3, .workers = 3, .prefetch = 2};
    r.window = 6;
    struct cfs_loader *l = NULL;
    ck_assert_int_eq(cfs_loader_create(&p, fetch, trace, &r, &l), 0);
    ck_assert_int_eq(cfs_loader_start_epoch(l, stream, 20), 0);
    uint64_t k;
    int results[8];
    int count = 0;
    int rc;
    while ((rc = cfs_loader_next(l, &k)) != 0) {
        ck_assert_uint_eq(k, (uint64_t)count);
        results[count++] = rc;
    }
    ck_assert_int_eq(count, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(results[i], i == 2 ? -EIO : 1);
    /* The failing batch stopped at the failing sample: 19 18 17 | 16 15 14 | 13 12. */
    ck_assert_int_eq(r.rec.batch_len[2], 2);
    cfs_loader_destroy(l);
}
END_TEST

static int slow_fetch(void *arg, uint32_t worker, uint64_t batch, uint32_t index)
{
    (void)worker;
    (void)batch;
    (void)index;
    atomic_fetch_add((atomic_int *)arg, 1);
    nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
    return 0;
}

/* Abandoning an epoch (a trainer that breaks out of its loop) and
 * destroying mid-epoch neither hangs nor loads batches that were never sent. */
START_TEST(abandoned_epochs_do_not_hang)
{
    static uint32_t stream[1000];
    for (uint32_t i = 0; i < 1000; i++)
        stream[i] = i;
    atomic_int loaded = 0;
    struct cfs_loader_params p = {.batch = 4, .workers = 2, .prefetch = 2};
    struct cfs_loader *l = NULL;
    ck_assert_int_eq(cfs_loader_create(&p, slow_fetch, NULL, &loaded, &l), 0);
    uint64_t k;
    ck_assert_int_eq(cfs_loader_start_epoch(l, stream, 1000), 0);
    ck_assert_int_eq(cfs_loader_next(l, &k), 1);
    ck_assert_int_eq(cfs_loader_start_epoch(l, stream, 1000), 0);
    /* At most the 4 sent batches plus the 1 sent after the first receive. */
    ck_assert_int_le(atomic_load(&loaded), 5 * 4);
    ck_assert_int_eq(cfs_loader_next(l, &k), 1);
    ck_assert_uint_eq(k, 0);
    ck_assert_int_eq(cfs_loader_next(l, &k), 1);
    ck_assert_uint_eq(k, 1);
    cfs_loader_destroy(l);
}
END_TEST

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, matches_pytorch_goldens, 0,
                        (int)(sizeof(goldens) / sizeof(goldens[0])));
    tcase_add_test(tc, batch_count_and_worker);
    tcase_add_test(tc, bad_params_are_rejected);
    tcase_add_test(tc, fetch_error_is_returned_with_its_batch);
    tcase_add_test(tc, abandoned_epochs_do_not_hang);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(loader_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
