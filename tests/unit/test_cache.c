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
#include "src/cache_ssd.h" /* the record layout, to craft a crashed index */

#define PAGE 4096u

/* ---- helpers */

static uint8_t byte_of(uint32_t id, uint64_t j)
{
    return (uint8_t)(id * 31u + j * 7u + (j >> 9));
}

static struct cfs_cache_source src_of(uint32_t id, uint64_t size)
{
    return (struct cfs_cache_source){size, 1000 + id, id * 3u, 0x9e3779b97f4a7c15ull * (id + 1)};
}

static int put_flags(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier,
                     unsigned flags)
{
    void *buf;
    int rc = cfs_cache_begin_fetch(c, id, size, tier, flags, &buf);
    if (rc)
        return rc;
    for (uint64_t j = 0; j < size; j++)
        ((uint8_t *)buf)[j] = byte_of(id, j);
    struct cfs_cache_source s = src_of(id, size);
    return cfs_cache_complete_fetch(c, id, 0, size, &s);
}

static int put(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier)
{
    return put_flags(c, id, size, tier, 0);
}

/* Acquire id and compare every byte; returns acquire's rc. */
static int check_bytes(struct cfs_cache *c, uint32_t id, uint64_t size)
{
    struct cfs_cache_handle h;
    int rc = cfs_cache_acquire(c, id, CFS_CACHE_WAIT, &h);
    if (rc)
        return rc;
    ck_assert_uint_eq(h.size, size);
    uint8_t *copy = malloc(size + 1);
    if (h.tier == CFS_TIER_RAM) {
        ck_assert_ptr_nonnull(h.data);
        memcpy(copy, h.data, size);
    } else {
        ck_assert_int_ge(h.fd, 0);
        ck_assert_int_eq(pread(h.fd, copy, size, (off_t)h.offset), (ssize_t)size);
    }
    uint64_t bad = size;
    for (uint64_t j = 0; j < size && bad == size; j++)
        if (copy[j] != byte_of(id, j))
            bad = j;
    ck_assert_msg(bad == size, "file %u byte %llu wrong", id, (unsigned long long)bad);
    free(copy);
    cfs_cache_release(c, &h);
    return 0;
}

static uint64_t next_use_table[64];
static uint64_t table_next_use(void *arg, uint32_t id)
{
    (void)arg;
    return next_use_table[id];
}

static struct cfs_cache *ram_cache(uint32_t nfiles, uint64_t ram, cfs_cache_next_use_fn fn)
{
    struct cfs_cache_params p = {.nfiles = nfiles, .ram_bytes = ram, .next_use = fn};
    struct cfs_cache *c;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    return c;
}

static void expect_states(struct cfs_cache *c, const char *want)
{
    /* want: one letter per id: r(am) s(sd) i(nflight) -(absent) */
    for (uint32_t id = 0; want[id]; id++) {
        enum cfs_cache_state s = cfs_cache_state(c, id);
        char got = s == CFS_CACHE_RAM        ? 'r'
                   : s == CFS_CACHE_SSD      ? 's'
                   : s == CFS_CACHE_INFLIGHT ? 'i'
                                             : '-';
        ck_assert_msg(got == want[id], "file %u: state %c, want %c (all: want %s)", id, got,
                      want[id], want);
    }
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char tmpdir[256];
static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cfs-cache-test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}
static void remove_tmpdir(void)
{
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

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

struct worker {
    struct cfs_cache *c;
    unsigned seed;
    uint64_t cap;
    uint64_t ssd_cap;
    atomic_int *violations;
    int hits;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int step = 0; step < 3000; step++) {
        uint32_t id = (uint32_t)rand_r(&w->seed) % 256;
        uint64_t size = 1000 + id * 97u; /* fixed per id: readers can check */
        int op = rand_r(&w->seed) % 8;
        if (op < 3) {
            enum cfs_tier tier = op == 2 && w->ssd_cap ? CFS_TIER_SSD : CFS_TIER_RAM;
            int rc = put_flags(w->c, id, size, tier, CFS_CACHE_DEMAND);
            if (rc && rc != -EEXIST && rc != -EBUSY && rc != -EAGAIN)
                atomic_fetch_add(w->violations, 1);
        } else if (op < 7) {
            int rc = check_bytes(w->c, id, size);
            if (rc == 0)
                w->hits++;
            else if (rc != -ENOENT)
                atomic_fetch_add(w->violations, 1);
        } else {
            (void)cfs_cache_drop(w->c, id);
        }
        struct cfs_cache_stats st;
        cfs_cache_stats(w->c, &st);
        if (st.bytes[CFS_TIER_RAM] > w->cap || st.bytes[CFS_TIER_SSD] > w->ssd_cap)
            atomic_fetch_add(w->violations, 1);
    }
    return NULL;
}

static void run_concurrent(uint64_t ssd_cap)
{
    uint64_t cap = 40 * PAGE;
    struct cfs_cache_params p = {.nfiles = 256,
                                 .ram_bytes = cap,
                                 .ssd_bytes = ssd_cap,
                                 .ssd_dir = ssd_cap ? tmpdir : NULL,
                                 .commit_batch = 256};
    struct cfs_index *ix = NULL;
    struct cfs_cache *c;
    char err[256], path[300];
    if (ssd_cap) {
        make_tmpdir();
        snprintf(path, sizeof(path), "%s/index", tmpdir);
        ck_assert_int_eq(cfs_index_open(path, &ix, err, sizeof(err)), 0);
        p.index = ix;
    }
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    atomic_int violations = 0;
    struct worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){c, (unsigned)(i * 7919 + 1), cap, ssd_cap, &violations, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    int hits = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        hits += w[i].hits;
    }
    ck_assert_int_eq(atomic_load(&violations), 0);
    ck_assert_int_gt(hits, 100);
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_le(st.bytes[CFS_TIER_RAM], cap);
    ck_assert_uint_le(st.bytes[CFS_TIER_SSD], ssd_cap);
    ck_assert_uint_eq(st.inflight, 0);
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_uint_eq(st.checksum_failures, 0);
    if (ssd_cap) {
        ck_assert_uint_gt(st.demotions, 10);
        ck_assert_uint_gt(st.evictions[CFS_TIER_SSD], 10);
    }
    for (uint32_t id = 0; id < 256; id++)
        (void)cfs_cache_drop(c, id);
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 0);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], 0);
    cfs_cache_destroy(c);
    cfs_index_close(ix);
    if (ssd_cap)
        remove_tmpdir();
}

START_TEST(ram_bound_holds_with_concurrent_threads)
{
    run_concurrent(0);
}
END_TEST

START_TEST(both_bounds_hold_with_concurrent_threads_and_demotion)
{
    run_concurrent(60 * PAGE);
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

/* ---- SSD tier and persistence */

struct src_table {
    uint64_t size[32];
    struct cfs_cache_source override[32];
    bool overridden[32];
};

static int table_source(void *arg, uint32_t id, struct cfs_cache_source *out)
{
    struct src_table *t = arg;
    if (id >= 32 || t->size[id] == 0)
        return -ENOENT;
    *out = t->overridden[id] ? t->override[id] : src_of(id, t->size[id]);
    return 0;
}

struct ssd_env {
    struct cfs_index *ix;
    struct cfs_cache *c;
    struct src_table src;
};

static int ssd_open(struct ssd_env *env, uint64_t ssd_bytes, enum cfs_cache_verify verify,
                    unsigned batch)
{
    char path[300], err[256];
    struct cfs_cache_params p = {.nfiles = 32,
                                 .ram_bytes = 8 * PAGE,
                                 .ssd_bytes = ssd_bytes,
                                 .ssd_dir = tmpdir,
                                 .source = table_source,
                                 .source_arg = &env->src,
                                 .ssd_verify = verify,
                                 .commit_batch = batch};
    snprintf(path, sizeof(path), "%s/index", tmpdir);
    ck_assert_int_eq(cfs_index_open(path, &env->ix, err, sizeof(err)), 0);
    p.index = env->ix;
    int rc = cfs_cache_create(&p, &env->c, err, sizeof(err));
    ck_assert_msg(rc == 0, "create: %s", err);
    return rc;
}

static void ssd_close(struct ssd_env *env)
{
    cfs_cache_destroy(env->c);
    cfs_index_close(env->ix);
    env->c = NULL;
    env->ix = NULL;
}

static void entry_path(uint32_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/cache/%08x", tmpdir, id);
}

static uint64_t round_page(uint64_t n)
{
    return (n + PAGE - 1) / PAGE * PAGE;
}

static uint64_t fsize(uint32_t id)
{
    return 3000 + id * 1111u;
}

START_TEST(ssd_entries_survive_a_restart)
{
    struct ssd_env env = {0};
    make_tmpdir();
    for (uint32_t id = 0; id < 10; id++)
        env.src.size[id] = fsize(id);
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 4);
    for (uint32_t id = 0; id < 10; id++)
        ck_assert_int_eq(put(env.c, id, fsize(id), CFS_TIER_SSD), 0);
    ck_assert_int_eq(put(env.c, 10, 500, CFS_TIER_RAM), 0);
    ck_assert_int_eq(check_bytes(env.c, 3, fsize(3)), 0);
    struct stat sb;
    char path[300];
    entry_path(3, path, sizeof(path));
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0600);
    ck_assert_uint_eq((uint64_t)sb.st_size, fsize(3));
    struct cfs_cache_stats st;
    cfs_cache_stats(env.c, &st);
    uint64_t ssd_bytes = st.bytes[CFS_TIER_SSD];
    ck_assert_uint_eq(st.entries[CFS_TIER_SSD], 10);
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_int_eq(cfs_cache_drop(env.c, 9), 0); /* dropped: gone for good */
    ssd_close(&env);

    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_FIRST_USE, 4);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 9);
    ck_assert_uint_eq(st.orphans, 0);
    ck_assert_uint_eq(st.incomplete, 0);
    ck_assert_uint_eq(st.stale, 0);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], ssd_bytes - round_page(fsize(9)));
    expect_states(env.c, "sssssssss---");
    ck_assert_str_eq(cfs_cache_state_name(CFS_CACHE_SSD), "ssd");
    for (uint32_t id = 0; id < 9; id++)
        ck_assert_int_eq(check_bytes(env.c, id, fsize(id)), 0);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.checksum_failures, 0);
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

static int count_entry_files(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/cache", tmpdir);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static bool entry_exists(uint32_t id)
{
    char path[300];
    entry_path(id, path, sizeof(path));
    return access(path, F_OK) == 0;
}

static void write_file(const char *path, uint64_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    char *b = calloc(1, len + 1);
    ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
    free(b);
    close(fd);
}

static void put_record(struct cfs_index *ix, uint32_t id, uint8_t state, uint64_t len)
{
    struct cache_rec r = {.magic = CACHE_REC_MAGIC,
                          .version = CACHE_REC_VERSION,
                          .state = state,
                          .tier = CFS_TIER_SSD,
                          .len = len};
    struct cfs_cache_source s = src_of(id, len);
    r.src_size = s.size;
    r.mtime_sec = s.mtime_sec;
    r.mtime_nsec = s.mtime_nsec;
    r.path_hash = s.path_hash;
    unsigned char key[4] = {(unsigned char)(id >> 24), (unsigned char)(id >> 16),
                            (unsigned char)(id >> 8), (unsigned char)id};
    struct cfs_index_txn *t;
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    ck_assert_int_eq(cfs_index_put(t, "cache", key, 4, &r, sizeof(r)), 0);
    ck_assert_int_eq(cfs_index_commit(t), 0);
}

START_TEST(kill_9_leaves_nothing_servable_that_is_incomplete)
{
    make_tmpdir();
    struct ssd_env env = {0};
    for (uint32_t id = 0; id < 10; id++)
        env.src.size[id] = fsize(id);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* The crashing mount: three committed entries, two written but not
         * yet recorded, a temp file mid-write, an INFLIGHT record with a
         * partial file, a COMPLETE record whose file was cut short. */
        char path[300];
        ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1000);
        for (uint32_t id = 0; id < 3; id++)
            if (put(env.c, id, fsize(id), CFS_TIER_SSD))
                _exit(2);
        if (cfs_cache_sync(env.c))
            _exit(3);
        for (uint32_t id = 3; id < 5; id++)
            if (put(env.c, id, fsize(id), CFS_TIER_SSD))
                _exit(4);
        snprintf(path, sizeof(path), "%s/cache/%08x.tmp", tmpdir, 5u);
        write_file(path, 100);
        put_record(env.ix, 6, CACHE_REC_INFLIGHT, fsize(6));
        entry_path(6, path, sizeof(path));
        write_file(path, 200);
        put_record(env.ix, 7, CACHE_REC_COMPLETE, fsize(7));
        entry_path(7, path, sizeof(path));
        write_file(path, fsize(7) - 1);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(count_entry_files(), 8);

    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1000);
    struct cfs_cache_stats st;
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 3);
    ck_assert_uint_eq(st.incomplete, 2);
    ck_assert_uint_eq(st.orphans, 5); /* 3, 4, 5.tmp, 6, 7 */
    ck_assert_uint_eq(st.stale, 0);
    expect_states(env.c, "sss-------");
    ck_assert_int_eq(count_entry_files(), 3);
    for (uint32_t id = 3; id < 8; id++)
        ck_assert(!entry_exists(id));
    for (uint32_t id = 0; id < 3; id++)
        ck_assert_int_eq(check_bytes(env.c, id, fsize(id)), 0);
    struct cfs_cache_handle h;
    ck_assert_int_eq(cfs_cache_acquire(env.c, 7, 0, &h), -ENOENT);
    ck_assert_int_eq(put(env.c, 7, fsize(7), CFS_TIER_SSD), 0);
    ssd_close(&env);

    /* The recovery was committed: the next open finds a clean index. */
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1000);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 4);
    ck_assert_uint_eq(st.incomplete + st.orphans + st.stale, 0);
    expect_states(env.c, "sss----s--");
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

static void flip_byte(uint32_t id, off_t off)
{
    char path[300];
    uint8_t b;
    entry_path(id, path, sizeof(path));
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

START_TEST(corrupt_ssd_entry_is_detected_counted_and_absent)
{
    make_tmpdir();
    struct ssd_env env = {0};
    struct cfs_cache_stats st;
    for (uint32_t id = 0; id < 4; id++)
        env.src.size[id] = fsize(id);

    /* In a session, verifying on every open. */
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1);
    for (uint32_t id = 0; id < 4; id++)
        ck_assert_int_eq(put(env.c, id, fsize(id), CFS_TIER_SSD), 0);
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), 0);
    flip_byte(0, 1234);
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), -ENOENT);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.checksum_failures, 1);
    ck_assert_int_eq(cfs_cache_state(env.c, 0), CFS_CACHE_ABSENT);
    ck_assert(!entry_exists(0));
    ck_assert_int_eq(put(env.c, 0, fsize(0), CFS_TIER_SSD), 0); /* refetched */
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), 0);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.refetches, 1);
    ssd_close(&env);

    /* After a restart, verifying on first use only. */
    flip_byte(2, 0);
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_FIRST_USE, 1);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 4); /* length is right: only the checksum can tell */
    ck_assert_int_eq(check_bytes(env.c, 1, fsize(1)), 0);
    ck_assert_int_eq(check_bytes(env.c, 2, fsize(2)), -ENOENT);
    ck_assert_int_eq(check_bytes(env.c, 2, fsize(2)), -ENOENT);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.checksum_failures, 1);
    expect_states(env.c, "ss-s");
    ssd_close(&env);

    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_FIRST_USE, 1);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 3);
    expect_states(env.c, "ss-s");
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

START_TEST(changed_source_invalidates_stored_entries)
{
    make_tmpdir();
    struct ssd_env env = {0};
    struct cfs_cache_stats st;
    for (uint32_t id = 0; id < 6; id++)
        env.src.size[id] = fsize(id);
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    for (uint32_t id = 0; id < 6; id++)
        ck_assert_int_eq(put(env.c, id, fsize(id), CFS_TIER_SSD), 0);
    ssd_close(&env);

    env.src.overridden[1] = true;
    env.src.override[1] = src_of(1, fsize(1));
    env.src.override[1].mtime_sec++;
    env.src.overridden[2] = true;
    env.src.override[2] = src_of(2, fsize(2));
    env.src.override[2].mtime_nsec++;
    env.src.size[3] = fsize(3) + 1;
    env.src.overridden[4] = true;
    env.src.override[4] = src_of(4, fsize(4));
    env.src.override[4].path_hash ^= 1; /* another file got this id */
    env.src.size[5] = 0;                /* gone from the catalog */
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 1);
    ck_assert_uint_eq(st.stale, 5);
    ck_assert_uint_eq(st.orphans, 5);
    expect_states(env.c, "s-----");
    ck_assert_int_eq(count_entry_files(), 1);
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), 0);
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

START_TEST(ssd_bound_holds_and_shrinks_at_restart)
{
    make_tmpdir();
    struct ssd_env env = {0};
    struct cfs_cache_stats st;
    for (uint32_t id = 0; id < 8; id++)
        env.src.size[id] = 4000 + id;
    ssd_open(&env, 4 * PAGE, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    for (uint32_t id = 0; id < 6; id++) {
        ck_assert_int_eq(put(env.c, id, 4000 + id, CFS_TIER_SSD), 0);
        cfs_cache_stats(env.c, &st);
        ck_assert_uint_le(st.bytes[CFS_TIER_SSD], 4 * PAGE);
    }
    ck_assert_uint_eq(st.evictions[CFS_TIER_SSD], 2);
    expect_states(env.c, "--ssss");
    ck_assert_int_eq(count_entry_files(), 4);
    ssd_close(&env);

    ssd_open(&env, 2 * PAGE, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], 2 * PAGE);
    ck_assert_uint_eq(st.entries[CFS_TIER_SSD], 2);
    ck_assert_int_eq(count_entry_files(), 2);
    ssd_close(&env);
    ssd_open(&env, 2 * PAGE, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 2);
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

START_TEST(full_ssd_degrades_the_tier)
{
    /* A 64 KiB tmpfs in a private mount namespace: gone when we exit. */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        fprintf(stderr, "full_ssd_degrades_the_tier: no mount namespace, not checked\n");
        return;
    }
    make_tmpdir();
    ck_assert_int_eq(mount("tmpfs", tmpdir, "tmpfs", 0, "size=64k,mode=0700"), 0);
    struct cfs_cache_params p = {
        .nfiles = 16, .ram_bytes = 16 * PAGE, .ssd_bytes = 1 << 20, .ssd_dir = tmpdir};
    struct cfs_cache *c;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    int rc = 0;
    uint32_t id;
    for (id = 0; id < 16 && rc == 0; id++)
        rc = put(c, id, 20000, CFS_TIER_SSD);
    ck_assert_int_eq(rc, -ENOSPC);
    uint32_t failed = id - 1;
    ck_assert_uint_ge(failed, 1);
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert(st.ssd_degraded);
    ck_assert_uint_eq(st.ssd_write_errors, 1);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], failed * round_page(20000));
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_int_eq(cfs_cache_state(c, failed), CFS_CACHE_ABSENT);
    ck_assert_int_eq(put(c, failed, 20000, CFS_TIER_SSD), -ENODEV);
    ck_assert_int_eq(put(c, failed, 20000, CFS_TIER_RAM), 0);
    for (id = 0; id < failed; id++)
        ck_assert_int_eq(check_bytes(c, id, 20000), 0);
    ck_assert_int_eq(check_bytes(c, failed, 20000), 0);
    cfs_cache_destroy(c);
    umount(tmpdir);
    remove_tmpdir();
}
END_TEST

START_TEST(ssd_without_index_starts_empty)
{
    make_tmpdir();
    struct cfs_cache_params p = {
        .nfiles = 8, .ram_bytes = PAGE, .ssd_bytes = 1 << 20, .ssd_dir = tmpdir};
    struct cfs_cache *c;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(put(c, 1, 5000, CFS_TIER_SSD), 0);
    ck_assert_int_eq(check_bytes(c, 1, 5000), 0);
    cfs_cache_destroy(c);
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.orphans, 1);
    ck_assert_uint_eq(st.loaded, 0);
    ck_assert_int_eq(cfs_cache_state(c, 1), CFS_CACHE_ABSENT);
    cfs_cache_destroy(c);
    p.ssd_dir = NULL;
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "ssd_dir"));
    cfs_cache_destroy(NULL);
    remove_tmpdir();
}
END_TEST

START_TEST(ram_victims_needed_again_move_to_ssd)
{
    make_tmpdir();
    uint64_t table[] = {10, 20, 5, 2, 1, 30};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache_params p = {.nfiles = 8,
                                 .ram_bytes = 2 * PAGE,
                                 .ssd_bytes = 2 * PAGE,
                                 .ssd_dir = tmpdir,
                                 .next_use = table_next_use};
    struct cfs_cache *c;
    struct cfs_cache_stats st;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 1, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 2, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "rsr");
    struct cfs_cache_handle h;
    ck_assert_int_eq(cfs_cache_acquire(c, 1, 0, &h), 0);
    ck_assert_int_eq(h.tier, CFS_TIER_SSD);
    cfs_cache_release(c, &h);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0); /* evicts 0 (10) to SSD */
    expect_states(c, "ssrr");
    ck_assert_int_eq(cfs_cache_drop(c, 3), 0);
    ck_assert_int_eq(put(c, 4, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "ssr-r");
    /* 2 (5) leaves RAM for 5; on SSD it displaces 1 (20), not 0 (10). */
    ck_assert_int_eq(put_flags(c, 5, PAGE, CFS_TIER_RAM, CFS_CACHE_DEMAND), 0);
    expect_states(c, "s-s-rr");
    /* A victim never used again is not worth an SSD copy. */
    next_use_table[4] = UINT64_MAX;
    cfs_cache_touch(c, 4);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "s-sr-r");
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.demotions, 3);
    ck_assert_uint_eq(st.evictions[CFS_TIER_RAM], 4);
    ck_assert_uint_eq(st.evictions[CFS_TIER_SSD], 1);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 2 * PAGE);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], 2 * PAGE);
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_uint_eq(st.inflight, 0);
    const uint32_t alive[] = {0, 2, 3, 5};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(check_bytes(c, alive[i], PAGE), 0);
    cfs_cache_destroy(c);
    remove_tmpdir();
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
    t = tcase_create("ssd");
    tcase_add_test(t, ssd_entries_survive_a_restart);
    tcase_add_test(t, kill_9_leaves_nothing_servable_that_is_incomplete);
    tcase_add_test(t, corrupt_ssd_entry_is_detected_counted_and_absent);
    tcase_add_test(t, changed_source_invalidates_stored_entries);
    tcase_add_test(t, ssd_bound_holds_and_shrinks_at_restart);
    tcase_add_test(t, full_ssd_degrades_the_tier);
    tcase_add_test(t, ssd_without_index_starts_empty);
    tcase_add_test(t, ram_victims_needed_again_move_to_ssd);
    tcase_add_test(t, both_bounds_hold_with_concurrent_threads_and_demotion);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cache_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
