/* The cache tests' shared helpers; what each one is for is in
 * cache_fixture.h. */
#include "cache_fixture.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/index.h"

uint8_t byte_of(uint32_t id, uint64_t j)
{
    return (uint8_t)(id * 31u + j * 7u + (j >> 9));
}

struct cfs_cache_source src_of(uint32_t id, uint64_t size)
{
    return (struct cfs_cache_source){size, 1000 + id, id * 3u, 0x9e3779b97f4a7c15ull * (id + 1)};
}

int put_flags(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier,
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

int put(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier)
{
    return put_flags(c, id, size, tier, 0);
}

/* Acquire id and compare every byte; returns acquire's rc. */
int check_bytes(struct cfs_cache *c, uint32_t id, uint64_t size)
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

uint64_t next_use_table[64];
uint64_t table_next_use(void *arg, uint32_t id)
{
    (void)arg;
    return next_use_table[id];
}

struct cfs_cache *ram_cache(uint32_t nfiles, uint64_t ram, cfs_cache_next_use_fn fn)
{
    struct cfs_cache_params p = {.nfiles = nfiles, .ram_bytes = ram, .next_use = fn};
    struct cfs_cache *c;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    return c;
}

void expect_states(struct cfs_cache *c, const char *want)
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

char tmpdir[256];
void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cfs-cache-test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}
void remove_tmpdir(void)
{
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

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

void run_concurrent(uint64_t ssd_cap)
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
