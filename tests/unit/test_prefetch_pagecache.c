/* Page-cache staging against a fake kernel: what the stager stores and
 * invalidates byte for byte, the hooks of the switch to the kernel's own
 * opens (all staged, reads without an open), and the pin of a handle the
 * kernel will send no RELEASE for.  Apart from test_prefetch.c because the
 * fake kernel (its stores, invalidations and lookups) is all these tests
 * share; the data path's fixture is the same (prefetch_fixture.h). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/cache.h"
#include "clairfs/catalog.h"
#include "clairfs/metrics.h"
#include "clairfs/peer.h"
#include "clairfs/prefetch.h"
#include "epoch_stream.h"
#include "prefetch_fixture.h"
#include "src/prefetch_i.h" /* the mount's cache, to drop a file from it */

/* The kernel's page cache as the stager sees it: per entry id the bytes
 * stored, whether the inode is "looked up", and the calls made. */
struct fake_kernel {
    pthread_mutex_t mu;
    unsigned char *pages[NFILES + 64];
    size_t len[NFILES + 64];
    bool unknown[NFILES + 64];
    unsigned stores, invals;
};

static bool fake_known(void *arg, cfs_id id)
{
    struct fake_kernel *k = arg;
    pthread_mutex_lock(&k->mu);
    bool known = !k->unknown[id];
    pthread_mutex_unlock(&k->mu);
    return known;
}

static int fake_store(void *arg, cfs_id id, uint64_t off, const void *data, size_t len)
{
    struct fake_kernel *k = arg;
    pthread_mutex_lock(&k->mu);
    if (off + len > k->len[id]) {
        k->pages[id] = realloc(k->pages[id], off + len);
        k->len[id] = off + len;
    }
    memcpy(k->pages[id] + off, data, len);
    k->stores++;
    pthread_mutex_unlock(&k->mu);
    return 0;
}

static int fake_inval(void *arg, cfs_id id)
{
    struct fake_kernel *k = arg;
    pthread_mutex_lock(&k->mu);
    free(k->pages[id]);
    k->pages[id] = NULL;
    k->len[id] = 0;
    k->invals++;
    pthread_mutex_unlock(&k->mu);
    return 0;
}

static const struct cfs_kernel_ops fake_ops = {fake_known, fake_store, fake_inval};

/* A kernel that takes retrieves and answers none until the test does. */
static void *asked_cookie;
static cfs_id asked_id;

static int fake_retrieve(void *arg, cfs_id id, uint64_t off, size_t len, void *cookie)
{
    (void)arg, (void)off, (void)len;
    asked_cookie = cookie;
    asked_id = id;
    return 0;
}

static size_t fake_retrieve_max(void *arg)
{
    (void)arg;
    return 1 << 20;
}

static const struct cfs_kernel_ops retrieving_ops = {fake_known, fake_store, fake_inval,
                                                     fake_retrieve, fake_retrieve_max};

/* The pages a test's stager left stored (no last epoch invalidated them). */
static void fake_kernel_free(struct fake_kernel *k)
{
    for (size_t i = 0; i < sizeof(k->pages) / sizeof(k->pages[0]); i++)
        free(k->pages[i]);
}

static bool wait_metric(const struct cfs_metrics *m, enum cfs_metric id, uint64_t want)
{
    for (int i = 0; i < 3000 && cfs_metrics_get(m, id) < want; i++)
        usleep(10000);
    return cfs_metrics_get(m, id) == want;
}

/* A mount of the fixture with opts whose stager stores into k (the kernel
 * ops ops, fake_ops by default). */
static struct cfs_prefetch *kernel_pf_ops(struct fixture *fx, const char *opts,
                                          struct cfs_metrics *m, const struct cfs_kernel_ops *ops,
                                          struct fake_kernel *k)
{
    char err[256] = "";
    struct cfs_prefetch *pf = make_pf(fx, opts, m, NULL);
    ck_assert_int_eq(cfs_prefetch_kernel_start(pf, ops, k, err, sizeof(err)), 0);
    return pf;
}

static struct cfs_prefetch *kernel_pf(struct fixture *fx, const char *opts, struct cfs_metrics *m,
                                      struct fake_kernel *k)
{
    return kernel_pf_ops(fx, opts, m, &fake_ops, k);
}

static void kernel_pf_end(struct cfs_prefetch *pf, struct fixture *fx, struct fake_kernel *k)
{
    ck_assert_int_eq(cfs_prefetch_kernel_stop(pf, 5), 0);
    cfs_prefetch_destroy(pf);
    fake_kernel_free(k);
    fixture_fini(fx);
}

/* ram >= dataset: the stager stores every file (but the empty one) into
 * the page cache byte for byte and frees the tier's buffers; opens of staged
 * files ask for keep_cache, count as RAM reads, and a read that still
 * arrives is answered from the source; a peer is refused a staged file;
 * after the last epoch every staged file was invalidated and nothing is
 * charged. */
START_TEST(path_staged_into_a_fake_page_cache)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_kernel k = {.mu = PTHREAD_MUTEX_INITIALIZER};
    fixture_init(&fx);
    cfs_id hidden = cfs_catalog_sample_entry(fx.cat, 11);
    k.unknown[hidden] = true; /* the kernel has not looked this one up */
    struct cfs_prefetch *pf = kernel_pf(&fx, "seed=5,epochs=3,ram=16M", &m, &k);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_STAGED, NFILES - 2));
    pthread_mutex_lock(&k.mu);
    uint64_t staged_bytes = 0;
    for (uint32_t s = 0; s < NFILES; s++) {
        cfs_id id = cfs_catalog_sample_entry(fx.cat, s);
        uint32_t i = (uint32_t)strtoul(cfs_catalog_name(fx.cat, id) + 1, NULL, 10);
        if (file_size(i) == 0 || id == hidden) {
            ck_assert_ptr_null(k.pages[id]);
            continue;
        }
        unsigned char *want = malloc(file_size(i));
        fill_bytes(i, want, file_size(i));
        ck_assert_uint_eq(k.len[id], file_size(i));
        ck_assert_msg(memcmp(k.pages[id], want, file_size(i)) == 0, "staged bytes of f%04u", i);
        free(want);
        staged_bytes += (file_size(i) + 4095) / 4096 * 4096;
    }
    pthread_mutex_unlock(&k.mu);
    ck_assert_uint_eq(mget(&m, CFS_M_PAGECACHE_BYTES), staged_bytes);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert_uint_ge(st.cache_bytes[0], staged_bytes); /* still charged to ram= */

    /* A staged file: keep_cache, no bytes for a peer, the source answers a
     * read that reaches clairfs. */
    cfs_id id0 = cfs_catalog_sample_entry(fx.cat, 0);
    struct cfs_prefetch_file *f = NULL;
    ck_assert_int_eq(cfs_prefetch_open_as(pf, id0, NULL, &f), 0);
    ck_assert(cfs_prefetch_keep_cache(f));
    ck_assert(cfs_prefetch_is_direct(f));
    cfs_prefetch_release(pf, f);
    struct cfs_peer_view v;
    ck_assert_int_eq(cfs_prefetch_provide(pf, id0, &v), -ENOENT);
    ck_assert_int_eq(cfs_prefetch_provide(pf, hidden, &v), 0); /* not staged: served */
    v.release(v.release_arg, &v);

    /* The trainer: every read arrives here (a fake kernel serves nothing),
     * so each staged open is a fallback, answered from the source. */
    for (uint32_t e = 0; e < 3; e++)
        replay_epoch(pf, &fx, 5, e);
    /* One open more than the plan's: one file may be read past its
     * expected last use, from the source. */
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM) + mget(&m, CFS_M_READS_PFS), 3 * NFILES + 1);
    ck_assert_uint_le(mget(&m, CFS_M_READS_PFS), 1);
    ck_assert_uint_ge(mget(&m, CFS_M_PAGECACHE_FALLBACK) + mget(&m, CFS_M_READS_PFS), 3 * (NFILES - 2));
    /* The hidden file was read (known now for the kernel) and staged after. */
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_INVALIDATED, mget(&m, CFS_M_PAGECACHE_STAGED)));
    ck_assert_uint_eq(mget(&m, CFS_M_PAGECACHE_BYTES), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_CACHE_BYTES_RAM), 0);
    pthread_mutex_lock(&k.mu);
    for (uint32_t id = 0; id < NFILES + 1; id++)
        ck_assert_ptr_null(k.pages[id]);
    ck_assert_uint_eq(k.invals, mget(&m, CFS_M_PAGECACHE_INVALIDATED));
    pthread_mutex_unlock(&k.mu);
    kernel_pf_end(pf, &fx, &k);
}
END_TEST

/* -o kernel_open's two hooks: all_staged turns true only once every
 * non-empty file is staged (not before the stager, not with a file the
 * kernel has not looked up); a handle opened without an open reads the
 * source byte for byte, counts one fallback and no read, and moves
 * nothing (still all staged afterwards). */
START_TEST(path_all_staged_and_unseen_reads)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_kernel k = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char err[256] = "";
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "seed=5,epochs=100,ram=16M", &m, NULL);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert(!cfs_prefetch_all_staged(pf)); /* no stager yet */
    cfs_id hidden = cfs_catalog_sample_entry(fx.cat, 11);
    k.unknown[hidden] = true;
    ck_assert_int_eq(cfs_prefetch_kernel_start(pf, &fake_ops, &k, err, sizeof(err)), 0);
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_STAGED, NFILES - 2));
    ck_assert(!cfs_prefetch_all_staged(pf)); /* one file the kernel does not know */
    /* Its first read makes it known; its release stages it. */
    pthread_mutex_lock(&k.mu);
    k.unknown[hidden] = false;
    pthread_mutex_unlock(&k.mu);
    struct cfs_prefetch_file *f = NULL;
    ck_assert_int_eq(cfs_prefetch_open_as(pf, hidden, NULL, &f), 0);
    cfs_prefetch_release(pf, f);
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_STAGED, NFILES - 1));
    for (int i = 0; i < 300 && !cfs_prefetch_all_staged(pf); i++)
        usleep(10000);
    ck_assert(cfs_prefetch_all_staged(pf));

    uint64_t reads = mget(&m, CFS_M_READS_RAM) + mget(&m, CFS_M_READS_PFS);
    uint64_t fallbacks = mget(&m, CFS_M_PAGECACHE_FALLBACK);
    cfs_id id0 = cfs_catalog_sample_entry(fx.cat, 0);
    uint32_t i0 = (uint32_t)strtoul(cfs_catalog_name(fx.cat, id0) + 1, NULL, 10);
    size_t size = file_size(i0);
    unsigned char *want = malloc(size + 1), *got = malloc(size + 1);
    fill_bytes(i0, want, size);
    ck_assert_int_eq(cfs_prefetch_open_unseen(pf, id0, &f), 0);
    ck_assert(cfs_prefetch_is_direct(f));
    ck_assert(!cfs_prefetch_keep_cache(f));
    ck_assert_int_eq(read_into(pf, f, got, size + 1, 0), (ssize_t)size);
    ck_assert(memcmp(got, want, size) == 0);
    cfs_prefetch_release(pf, f);
    free(want);
    free(got);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM) + mget(&m, CFS_M_READS_PFS), reads);
    ck_assert_uint_eq(mget(&m, CFS_M_PAGECACHE_FALLBACK), fallbacks + 1);
    ck_assert(cfs_prefetch_all_staged(pf));
    ck_assert_int_eq(cfs_prefetch_open_unseen(pf, (cfs_id)cfs_catalog_entry_count(fx.cat), &f),
                     -ENOENT);
    kernel_pf_end(pf, &fx, &k);
}
END_TEST

/* The kernel sends no RELEASE for a handle open when it switched to its
 * own opens.  A staged file's handle pins its entry: read for the last time
 * (one epoch) and closed as the open watch sees it, it stays charged until
 * the handle goes; unpinned first, the close frees it at once. */
START_TEST(path_unpinned_handle_freed_at_its_close)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_kernel k = {.mu = PTHREAD_MUTEX_INITIALIZER};
    fixture_init(&fx);
    struct cfs_prefetch *pf = kernel_pf(&fx, "seed=5,epochs=1,ram=16M", &m, &k);
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_STAGED, NFILES - 1));
    uint32_t *order = epoch_stream(NFILES, 5, 0);
    cfs_id ids[2];
    struct cfs_prefetch_file *f[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = cfs_catalog_sample_entry(fx.cat, order[i]);
        ck_assert_int_eq(cfs_prefetch_open_as(pf, ids[i], NULL, &f[i]), 0);
        ck_assert(cfs_prefetch_keep_cache(f[i])); /* staged */
    }
    free(order);
    cfs_prefetch_close_seen(pf, ids[0]); /* still pinned: only doomed */
    cfs_prefetch_unpin(pf, f[1]);
    cfs_prefetch_close_seen(pf, ids[1]);
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_INVALIDATED, 1));
    pthread_mutex_lock(&k.mu);
    ck_assert_ptr_nonnull(k.pages[ids[0]]);
    ck_assert_ptr_null(k.pages[ids[1]]);
    pthread_mutex_unlock(&k.mu);
    cfs_prefetch_release(pf, f[1]); /* no second release of the pin */
    cfs_prefetch_release(pf, f[0]); /* the pin goes: freed now */
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_INVALIDATED, 2));
    kernel_pf_end(pf, &fx, &k);
}
END_TEST

/* A peer's retrieve of a staged file pins its entry until the answer is
 * handed over: the file dropped meanwhile (evicted) keeps its pages, and
 * the kernel's answer comes back whole.  Unpinned, the stager invalidated
 * the pages first and every such answer came back short. */
START_TEST(a_retrieve_pins_its_entry)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_kernel k = {.mu = PTHREAD_MUTEX_INITIALIZER};
    fixture_init(&fx);
    struct cfs_prefetch *pf = kernel_pf_ops(&fx, "seed=5,epochs=3,ram=16M", &m, &retrieving_ops, &k);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert(wait_metric(&m, CFS_M_PAGECACHE_STAGED, NFILES - 1));
    cfs_id id = cfs_catalog_sample_entry(fx.cat, 3);
    pthread_mutex_lock(&k.mu);
    size_t len = k.len[id];
    unsigned invals = k.invals;
    pthread_mutex_unlock(&k.mu);
    ck_assert_uint_gt(len, 0);
    struct cfs_peer_view v;
    ck_assert_int_eq(cfs_prefetch_provide(pf, id, &v), -EAGAIN); /* asked */
    ck_assert_uint_eq(asked_id, id);
    ck_assert_int_eq(cfs_cache_drop(pf->cache, id), 0);
    usleep(200000); /* the stager's turn to invalidate a zombie */
    pthread_mutex_lock(&k.mu);
    ck_assert_ptr_nonnull(k.pages[id]);
    ck_assert_uint_eq(k.invals, invals);
    cfs_prefetch_retrieved(asked_cookie, 0, k.pages[id], k.len[id]);
    pthread_mutex_unlock(&k.mu);
    ck_assert_uint_eq(mget(&m, CFS_M_PAGECACHE_RETRIEVE_SHORT), 0);
    kernel_pf_end(pf, &fx, &k);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("prefetch_pagecache");
    TCase *tc = tcase_create("pagecache");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, path_staged_into_a_fake_page_cache);
    tcase_add_test(tc, path_all_staged_and_unseen_reads);
    tcase_add_test(tc, path_unpinned_handle_freed_at_its_close);
    tcase_add_test(tc, a_retrieve_pins_its_entry);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return cfs_check_run(suite());
}
