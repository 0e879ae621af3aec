/* The cache core without an SSD: the RAM tier's bound, eviction order
 * (Belady with the next-use table, LRU), kernel-backed entries and their
 * zombies, pins, and fetches with their waiters.  The SSD tier and
 * persistence are test_cache_ssd.c; the helpers both share are
 * cache_fixture.h. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clairfs/cache.h"
#include "clairfs/index.h"

#include "cache_fixture.h"
#include "check_run.h"

/* ---- RAM tier: bounds */

START_TEST(ram_bound_holds_under_random_sequences)
{
    for (int mode = 0; mode < 2; mode++) {
        uint64_t cap = 64 * 1024;
        for (uint32_t i = 0; i < 64; i++)
            next_use_table[i] = (i * 37u) % 64u;
        struct cfs_cache *c = ram_cache(64, cap, mode ? table_next_use : NULL);
        unsigned seed = 12345;
        uint64_t sizes[64] = {0};
        int published = 0;
        for (int step = 0; step < 4000; step++) {
            uint32_t id = (uint32_t)rand_r(&seed) % 64;
            int op = rand_r(&seed) % 4;
            if (op < 2) {
                uint64_t size = (uint64_t)(rand_r(&seed) % 20000);
                int rc = put_flags(c, id, size, CFS_TIER_RAM, op == 0 ? CFS_CACHE_DEMAND : 0);
                ck_assert_msg(rc == 0 || rc == -EEXIST || rc == -ENOSPC, "rc %d", rc);
                if (rc == 0) {
                    sizes[id] = size;
                    published++;
                }
            } else if (op == 2) {
                int rc = check_bytes(c, id, sizes[id]);
                ck_assert_msg(rc == 0 || rc == -ENOENT, "rc %d", rc);
            } else {
                int rc = cfs_cache_drop(c, id);
                ck_assert_msg(rc == 0 || rc == -ENOENT, "rc %d", rc);
            }
            struct cfs_cache_stats st;
            cfs_cache_stats(c, &st);
            ck_assert_uint_le(st.bytes[CFS_TIER_RAM], cap);
            ck_assert_uint_eq(st.bytes[CFS_TIER_RAM] % PAGE, 0);
            ck_assert_uint_eq(st.inflight, 0);
        }
        ck_assert_int_gt(published, 500);
        struct cfs_cache_stats st;
        cfs_cache_stats(c, &st);
        ck_assert_uint_gt(st.evictions[CFS_TIER_RAM], 100);
        ck_assert_uint_gt(st.refetches, 100);
        for (uint32_t id = 0; id < 64; id++)
            (void)cfs_cache_drop(c, id);
        cfs_cache_stats(c, &st);
        ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 0);
        ck_assert_uint_eq(st.entries[CFS_TIER_RAM], 0);
        cfs_cache_destroy(c);
    }
}
END_TEST

START_TEST(ram_bound_holds_with_concurrent_threads)
{
    run_concurrent(0);
}
END_TEST

/* ---- eviction order */

START_TEST(belady_evicts_farthest_next_use_first)
{
    /* Room for 4 one-page files.  Next uses: 0 at 10, 1 never, 2 at 30,
     * 3 at 20; newcomers 4, 5, 6 are needed at 5, 6, 7. */
    uint64_t table[] = {10, UINT64_MAX, 30, 20, 5, 6, 7};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache *c = ram_cache(8, 4 * PAGE, table_next_use);
    for (uint32_t id = 0; id < 4; id++)
        ck_assert_int_eq(put(c, id, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "rrrr---");
    ck_assert_int_eq(put(c, 4, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "r-rrr--"); /* never used again goes first */
    ck_assert_int_eq(put(c, 5, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "r--rrr-"); /* then the farthest, 30 */
    ck_assert_int_eq(put(c, 6, 2 * PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "----rrr"); /* 20 and 10: two pages needed */
    /* A key that moved (file 5 was read; next use now 50) is honoured. */
    next_use_table[5] = 50;
    cfs_cache_touch(c, 5);
    next_use_table[0] = 8;
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "r---r-r");
    next_use_table[1] = 3;
    ck_assert_int_eq(put(c, 1, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "-r--r-r");
    next_use_table[2] = 9; /* later than everything cached: refused */
    ck_assert_int_eq(put(c, 2, PAGE, CFS_TIER_RAM), -ENOSPC);
    expect_states(c, "-r--r-r");
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.evictions[CFS_TIER_RAM], 6);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 4 * PAGE);
    ck_assert(!st.lru);
    cfs_cache_destroy(c);
}
END_TEST

/* ---- RAM tier: entries whose bytes are the kernel's page cache */

static atomic_int kernel_drop_calls;
static void count_kernel_drop(void *arg)
{
    (void)arg;
    atomic_fetch_add(&kernel_drop_calls, 1);
}

static struct cfs_cache *kernel_cache(uint32_t nfiles, uint64_t ram, cfs_cache_next_use_fn fn)
{
    struct cfs_cache_params p = {.nfiles = nfiles, .ram_bytes = ram, .next_use = fn,
                                 .kernel_drop = count_kernel_drop};
    struct cfs_cache *c;
    char err[256];
    atomic_store(&kernel_drop_calls, 0);
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    return c;
}

/* Stage id the way the stager does: pin, (store), kernelize, release. */
static int kernelize(struct cfs_cache *c, uint32_t id)
{
    struct cfs_cache_handle h;
    int rc = cfs_cache_acquire(c, id, 0, &h);
    if (rc)
        return rc;
    rc = cfs_cache_kernelize(c, &h);
    if (rc == 0) {
        ck_assert(h.kernel);
        ck_assert_ptr_null(h.data);
    }
    cfs_cache_release(c, &h);
    return rc;
}

static struct cfs_cache_stats stats_of(struct cfs_cache *c)
{
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    return st;
}

START_TEST(kernel_entries_stay_charged_until_their_pages_are_dropped)
{
    /* Room for 4 pages.  Next uses: 0 at 10, 1 at 40, 2 at 30, newcomers
     * 3 at 5 and 4 at 6. */
    uint64_t table[] = {10, 40, 30, 5, 6};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache *c = kernel_cache(8, 4 * PAGE, table_next_use);
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 1, 2 * PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 2, PAGE, CFS_TIER_RAM), 0);

    /* Kernelized only while the stager's pin is the only one. */
    struct cfs_cache_handle reader;
    ck_assert_int_eq(cfs_cache_acquire(c, 0, 0, &reader), 0);
    ck_assert_int_eq(kernelize(c, 0), -EBUSY);
    cfs_cache_release(c, &reader);
    ck_assert_int_eq(kernelize(c, 0), 0);
    ck_assert_int_eq(kernelize(c, 0), -EBUSY); /* already the kernel's */
    ck_assert_int_eq(kernelize(c, 1), 0);
    struct cfs_cache_stats st = stats_of(c);
    ck_assert_uint_eq(st.kernel_entries, 2);
    ck_assert_uint_eq(st.kernel_bytes, 3 * PAGE);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 4 * PAGE);
    ck_assert_uint_eq(st.entries[CFS_TIER_RAM], 3);
    expect_states(c, "rrr--");

    /* A reader of a kernel entry gets no bytes, only the size. */
    ck_assert_int_eq(cfs_cache_acquire(c, 1, 0, &reader), 0);
    ck_assert(reader.kernel);
    ck_assert_ptr_null(reader.data);
    ck_assert_uint_eq(reader.size, 2 * PAGE);
    cfs_cache_release(c, &reader);

    /* File 3 needs a page: the farthest (1, at 40, two kernel pages) goes,
     * but its bytes stay charged until the pages are dropped: -EAGAIN. */
    void *buf;
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 3, PAGE, CFS_TIER_RAM, 0, &buf), -EAGAIN);
    ck_assert_int_eq(atomic_load(&kernel_drop_calls), 1);
    st = stats_of(c);
    ck_assert_uint_eq(st.zombie_bytes, 2 * PAGE);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 4 * PAGE);
    ck_assert_uint_eq(st.kernel_entries, 1);
    ck_assert_uint_eq(st.entries[CFS_TIER_RAM], 2);
    expect_states(c, "r-r--"); /* a zombie is invisible... */
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 1, PAGE, CFS_TIER_RAM, CFS_CACHE_DEMAND, &buf),
                     -EBUSY); /* ...and its id cannot be fetched again yet */
    /* Asking again does not evict more for bytes already on their way out. */
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 3, PAGE, CFS_TIER_RAM, 0, &buf), -EAGAIN);
    ck_assert_uint_eq(stats_of(c).evictions[CFS_TIER_RAM], 1);

    uint32_t ids[8];
    ck_assert_uint_eq(cfs_cache_take_kernel_drops(c, ids, 8), 1);
    ck_assert_uint_eq(ids[0], 1);
    ck_assert_uint_eq(cfs_cache_take_kernel_drops(c, ids, 8), 0);
    cfs_cache_kernel_dropped(c, 1);
    st = stats_of(c);
    ck_assert_uint_eq(st.zombie_bytes, 0);
    ck_assert_uint_eq(st.kernel_bytes, PAGE);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 2 * PAGE);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 4, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "r-rrr");

    /* Dropped after its last read: a zombie too, freed by the stager. */
    ck_assert_int_eq(cfs_cache_drop(c, 0), 0);
    ck_assert_int_eq(atomic_load(&kernel_drop_calls), 2);
    ck_assert_uint_eq(stats_of(c).zombie_bytes, PAGE);
    ck_assert_uint_eq(cfs_cache_take_kernel_drops(c, ids, 8), 1);
    cfs_cache_kernel_dropped(c, ids[0]);
    ck_assert_uint_eq(stats_of(c).bytes[CFS_TIER_RAM], 3 * PAGE);

    /* The kernel forgot an inode: its pages went with it, freed at once;
     * a pinned one (an open file) is kept. */
    ck_assert_int_eq(kernelize(c, 2), 0);
    ck_assert_int_eq(kernelize(c, 3), 0);
    ck_assert_int_eq(cfs_cache_acquire(c, 3, 0, &reader), 0);
    cfs_cache_kernel_forgot(c, 2);
    cfs_cache_kernel_forgot(c, 3);
    cfs_cache_kernel_forgot(c, 4); /* not a kernel entry: untouched */
    cfs_cache_release(c, &reader);
    st = stats_of(c);
    ck_assert_uint_eq(st.kernel_entries, 1);
    ck_assert_uint_eq(st.kernel_bytes, PAGE);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 2 * PAGE);
    ck_assert_uint_eq(st.peak[CFS_TIER_RAM], 4 * PAGE);
    expect_states(c, "---rr");
    ck_assert_int_eq(check_bytes(c, 4, PAGE), 0);
    cfs_cache_destroy(c);
}
END_TEST

START_TEST(kernelize_needs_a_kernel_drop_callback)
{
    struct cfs_cache *c = ram_cache(2, 4 * PAGE, NULL);
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(kernelize(c, 0), -EBUSY);
    ck_assert_int_eq(check_bytes(c, 0, PAGE), 0);
    cfs_cache_destroy(c);
}
END_TEST

START_TEST(belady_sees_a_stale_key_at_the_top)
{
    /* The policy moved without a touch: the heap top is re-asked. */
    uint64_t table[] = {100, 50, 10, 5};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache *c = ram_cache(4, 3 * PAGE, table_next_use);
    for (uint32_t id = 0; id < 3; id++)
        ck_assert_int_eq(put(c, id, PAGE, CFS_TIER_RAM), 0);
    next_use_table[0] = 1; /* file 0 is now needed first */
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "r-rr");
    cfs_cache_destroy(c);
}
END_TEST

START_TEST(lru_evicts_least_recently_used)
{
    struct cfs_cache *c = ram_cache(8, 3 * PAGE, NULL);
    for (uint32_t id = 0; id < 3; id++)
        ck_assert_int_eq(put(c, id, 100, CFS_TIER_RAM), 0);
    ck_assert_int_eq(check_bytes(c, 0, 100), 0); /* 0 becomes most recent */
    ck_assert_int_eq(put(c, 3, 100, CFS_TIER_RAM), 0);
    expect_states(c, "r-rr----");
    ck_assert_int_eq(put(c, 4, 100, CFS_TIER_RAM), 0);
    expect_states(c, "r--rr---");
    ck_assert_int_eq(check_bytes(c, 3, 100), 0);
    ck_assert_int_eq(put(c, 5, 100, CFS_TIER_RAM), 0);
    expect_states(c, "---rrr--");
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert(st.lru);
    ck_assert_uint_eq(st.evictions[CFS_TIER_RAM], 3);
    ck_assert_uint_eq(st.refused, 0);
    cfs_cache_destroy(c);
}
END_TEST

START_TEST(clairvoyant_fetch_refuses_to_thrash)
{
    uint64_t table[] = {1, 2, 5, UINT64_MAX};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache *c = ram_cache(4, 2 * PAGE, table_next_use);
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 1, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 2, PAGE, CFS_TIER_RAM), -ENOSPC);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), -ENOSPC); /* never used: never worth it */
    expect_states(c, "rr--");
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.refused, 2);
    ck_assert_uint_eq(st.evictions[CFS_TIER_RAM], 0);
    /* A reader is waiting for 2: admitted, evicting the later of 0 and 1. */
    ck_assert_int_eq(put_flags(c, 2, PAGE, CFS_TIER_RAM, CFS_CACHE_DEMAND), 0);
    expect_states(c, "r-r-");
    /* Larger than the tier. */
    void *buf;
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 1, 3 * PAGE, CFS_TIER_RAM, CFS_CACHE_DEMAND, &buf),
                     -EFBIG);
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 1, PAGE, CFS_TIER_SSD, 0, &buf), -ENODEV);
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 0, PAGE, CFS_TIER_RAM, 0, &buf), -EEXIST);
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 9, PAGE, CFS_TIER_RAM, 0, &buf), -EINVAL);
    cfs_cache_destroy(c);
}
END_TEST

START_TEST(pinned_entries_are_never_evicted)
{
    uint64_t table[] = {100, 10, 1, 2};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache *c = ram_cache(4, 2 * PAGE, table_next_use);
    struct cfs_cache_handle h0, h2;
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 1, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(cfs_cache_acquire(c, 0, 0, &h0), 0);
    ck_assert_int_eq(put(c, 2, PAGE, CFS_TIER_RAM), 0); /* 0 is farther but pinned */
    expect_states(c, "r-r-");
    ck_assert_int_eq(cfs_cache_acquire(c, 2, 0, &h2), 0);
    ck_assert_int_eq(put_flags(c, 3, PAGE, CFS_TIER_RAM, CFS_CACHE_DEMAND), -EAGAIN);
    /* Dropping a pinned entry hides it at once and frees it at release. */
    ck_assert_int_eq(cfs_cache_drop(c, 0), 0);
    expect_states(c, "--r-");
    struct cfs_cache_handle h;
    ck_assert_int_eq(cfs_cache_acquire(c, 0, 0, &h), -ENOENT);
    void *buf;
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 0, PAGE, CFS_TIER_RAM, 0, &buf), -EBUSY);
    for (uint64_t j = 0; j < PAGE; j++)
        ck_assert_uint_eq(((const uint8_t *)h0.data)[j], byte_of(0, j));
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 2 * PAGE);
    cfs_cache_release(c, &h0);
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], PAGE);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "--rr");
    cfs_cache_release(c, &h2);
    cfs_cache_destroy(c);
}
END_TEST

/* ---- in-flight fetches */

struct waiter {
    struct cfs_cache *c;
    uint32_t id;
    uint64_t size;
    int rc;
    atomic_int *done;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = check_bytes(w->c, w->id, w->size);
    atomic_fetch_add(w->done, 1);
    return NULL;
}

static void run_waiters(int fetch_rc)
{
    enum { N = 8 };
    struct cfs_cache *c = ram_cache(4, 16 * PAGE, NULL);
    atomic_int done = 0;
    struct waiter w[N];
    pthread_t th[N];
    void *buf, *buf2;
    uint64_t size = 3 * PAGE + 5;

    ck_assert_int_eq(cfs_cache_begin_fetch(c, 1, size, CFS_TIER_RAM, 0, &buf), 0);
    ck_assert_int_eq(cfs_cache_state(c, 1), CFS_CACHE_INFLIGHT);
    ck_assert_str_eq(cfs_cache_state_name(cfs_cache_state(c, 1)), "inflight");
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 1, size, CFS_TIER_RAM, CFS_CACHE_DEMAND, &buf2),
                     -EEXIST);
    struct cfs_cache_handle h;
    ck_assert_int_eq(cfs_cache_acquire(c, 1, 0, &h), -EAGAIN);
    for (int i = 0; i < N; i++) {
        w[i] = (struct waiter){c, 1, size, 1, &done};
        ck_assert_int_eq(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
    }
    usleep(50 * 1000);
    ck_assert_int_eq(atomic_load(&done), 0); /* all still waiting */
    for (uint64_t j = 0; j < size; j++)
        ((uint8_t *)buf)[j] = byte_of(1, j);
    struct cfs_cache_source s = src_of(1, size);
    ck_assert_int_eq(cfs_cache_complete_fetch(c, 1, fetch_rc, size, &s), fetch_rc);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].rc, fetch_rc);
    }
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.inflight, 0);
    if (fetch_rc) {
        ck_assert_int_eq(cfs_cache_state(c, 1), CFS_CACHE_ABSENT);
        ck_assert_str_eq(cfs_cache_state_name(CFS_CACHE_ABSENT), "pfs");
        ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 0);
        ck_assert_int_eq(put(c, 1, size, CFS_TIER_RAM), 0); /* refetch works */
    }
    ck_assert_int_eq(cfs_cache_state(c, 1), CFS_CACHE_RAM);
    ck_assert_str_eq(cfs_cache_state_name(CFS_CACHE_RAM), "ram");
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 4 * PAGE);
    cfs_cache_destroy(c);
}

START_TEST(waiters_all_get_the_bytes_of_one_fetch)
{
    run_waiters(0);
}
END_TEST

START_TEST(waiters_all_get_the_error_of_a_failed_fetch)
{
    run_waiters(-EIO);
}
END_TEST

START_TEST(short_fetch_is_never_published)
{
    struct cfs_cache *c = ram_cache(4, 16 * PAGE, NULL);
    void *buf;
    ck_assert_int_eq(cfs_cache_begin_fetch(c, 2, 1000, CFS_TIER_RAM, 0, &buf), 0);
    struct cfs_cache_source s = src_of(2, 1000);
    ck_assert_int_eq(cfs_cache_complete_fetch(c, 2, 0, 900, &s), -EIO);
    ck_assert_int_eq(cfs_cache_state(c, 2), CFS_CACHE_ABSENT);
    ck_assert_int_eq(cfs_cache_complete_fetch(c, 2, 0, 1000, &s), -EINVAL);
    cfs_cache_destroy(c);
}
END_TEST

static Suite *cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *t = tcase_create("ram");
    tcase_add_test(t, ram_bound_holds_under_random_sequences);
    tcase_add_test(t, ram_bound_holds_with_concurrent_threads);
    tcase_add_test(t, belady_evicts_farthest_next_use_first);
    tcase_add_test(t, belady_sees_a_stale_key_at_the_top);
    tcase_add_test(t, kernel_entries_stay_charged_until_their_pages_are_dropped);
    tcase_add_test(t, kernelize_needs_a_kernel_drop_callback);
    tcase_add_test(t, lru_evicts_least_recently_used);
    tcase_add_test(t, clairvoyant_fetch_refuses_to_thrash);
    tcase_add_test(t, pinned_entries_are_never_evicted);
    tcase_add_test(t, waiters_all_get_the_bytes_of_one_fetch);
    tcase_add_test(t, waiters_all_get_the_error_of_a_failed_fetch);
    tcase_add_test(t, short_fetch_is_never_published);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(cache_suite());
}
