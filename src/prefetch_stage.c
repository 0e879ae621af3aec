/* The page-cache stager: stores RAM entries into the kernel's page cache,
 * lets the cache free their buffers, and invalidates the pages of entries
 * the cache evicts or drops.  The design is in include/clairfs/prefetch.h
 * ("Page cache"); the accounting in include/clairfs/cache.h ("Kernel page
 * cache").
 *
 * One thread does every store and invalidation: both wait on the page locks
 * of a READ in flight for the same inode, which a FUSE worker answers, so
 * they must never run inside a FUSE request (libfuse's notify documentation
 * and PR #1153: a deadlock otherwise).  Invalidations go first: until the
 * kernel has dropped a zombie's pages its bytes stay charged and the
 * prefetcher waits for that room.
 *
 * The second half is the prefetcher's glue: the stager's callbacks (which
 * entries may be staged, room freed, gauges) and the public
 * cfs_prefetch_kernel_start/stop and cfs_prefetch_forgot. */
#include "prefetch_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/cache.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/prefetch.h"

/* Bytes per store: whole files of a few hundred KB would do as well
 * (docs/read-path.md); bounded chunks keep each kernel call, and the page
 * locks it holds, short. */
#define STAGE_CHUNK (256u * 1024u)
#define DROP_BATCH 256u

struct pf_stager {
    struct pf_stager_params p;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work or stop */
    pthread_cond_t exit_cv; /* the thread has returned */
    bool stop, exited, joined, disabled, drops;
    /* FIFO of ids to stage; an id is queued at most once (bit set). */
    uint32_t *ring;
    uint32_t head, n;
    uint8_t *queued;
};

void pf_stager_queue(struct pf_stager *s, uint32_t id)
{
    if (!s || id >= s->p.nentries)
        return;
    pthread_mutex_lock(&s->mu);
    uint8_t bit = (uint8_t)(1u << (id % 8));
    if (!s->disabled && !s->stop && !(s->queued[id / 8] & bit)) {
        s->queued[id / 8] |= bit;
        s->ring[(s->head + s->n) % s->p.nentries] = id;
        s->n++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void pf_stager_kick(struct pf_stager *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->drops = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Invalidate every zombie; the cache frees each one's bytes after it. */
static void drop_zombies(struct pf_stager *s)
{
    uint32_t ids[DROP_BATCH];
    size_t n, total = 0;
    while ((n = cfs_cache_take_kernel_drops(s->p.cache, ids, DROP_BATCH)) > 0) {
        for (size_t i = 0; i < n; i++) {
            /* -ENOENT: the kernel already forgot the inode and its pages. */
            (void)s->p.ops->inval(s->p.ops_arg, ids[i]);
            cfs_cache_kernel_dropped(s->p.cache, ids[i]);
        }
        total += n;
    }
    if (total) {
        cfs_metrics_add(s->p.metrics, CFS_M_PAGECACHE_INVALIDATED, total);
        s->p.gauges(s->p.arg);
        s->p.freed(s->p.arg);
    }
}

/* Store entry id into the page cache and let the cache free its buffer. */
static void stage_one(struct pf_stager *s, uint32_t id)
{
    if (!s->p.eligible(s->p.arg, id) || !s->p.ops->known(s->p.ops_arg, id))
        return; /* an unknown inode is staged after its first read instead */
    struct cfs_cache_handle h;
    if (cfs_cache_acquire(s->p.cache, id, 0, &h) != 0)
        return;
    if (!h.data || h.kernel || h.size == 0) {
        cfs_cache_release(s->p.cache, &h);
        return;
    }
    int rc = 0;
    for (uint64_t off = 0; off < h.size && rc == 0; off += STAGE_CHUNK) {
        size_t len = h.size - off < STAGE_CHUNK ? (size_t)(h.size - off) : STAGE_CHUNK;
        rc = s->p.ops->store(s->p.ops_arg, id, off, (const char *)h.data + off, len);
    }
    if (rc == 0)
        rc = cfs_cache_kernelize(s->p.cache, &h);
    if (rc == 0) {
        cfs_metrics_add(s->p.metrics, CFS_M_PAGECACHE_STAGED, 1);
        s->p.gauges(s->p.arg);
    } else {
        /* Pages that made it would be a second, uncounted copy of bytes
         * the tier keeps (a reader pinned the buffer meanwhile, or the
         * store failed part way): drop them. */
        (void)s->p.ops->inval(s->p.ops_arg, id);
        cfs_debug("page cache: file %u not staged: %s", id, strerror(-rc));
        if (rc != -EBUSY && rc != -ENOENT) {
            cfs_warn("page cache: staging failed (%s); reads are answered from the RAM tier",
                     strerror(-rc));
            pthread_mutex_lock(&s->mu);
            s->disabled = true;
            s->n = 0;
            memset(s->queued, 0, s->p.nentries / 8 + 1);
            pthread_mutex_unlock(&s->mu);
        }
    }
    cfs_cache_release(s->p.cache, &h);
}

static void *stager_main(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-stager");
    struct pf_stager *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!s->drops && s->n == 0) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        bool drops = s->drops;
        s->drops = false;
        bool have = s->n > 0;
        uint32_t id = 0;
        if (have) {
            id = s->ring[s->head];
            s->head = (s->head + 1) % s->p.nentries;
            s->n--;
            s->queued[id / 8] &= (uint8_t)~(1u << (id % 8));
        }
        pthread_mutex_unlock(&s->mu);
        if (drops)
            drop_zombies(s);
        if (have)
            stage_one(s, id);
        pthread_mutex_lock(&s->mu);
    }
    s->exited = true;
    pthread_cond_broadcast(&s->exit_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int pf_stager_create(const struct pf_stager_params *p, struct pf_stager **out)
{
    struct pf_stager *s = calloc(1, sizeof(*s));
    *out = NULL;
    if (!s)
        return -ENOMEM;
    s->p = *p;
    uint32_t n = p->nentries ? p->nentries : 1;
    s->p.nentries = n;
    s->ring = malloc(n * sizeof(*s->ring));
    s->queued = calloc(n / 8 + 1, 1);
    if (!s->ring || !s->queued) {
        free(s->ring);
        free(s->queued);
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->exit_cv, NULL);
    int rc = -pthread_create(&s->thread, NULL, stager_main, s);
    if (rc) {
        s->joined = true; /* nothing to join */
        pf_stager_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

int pf_stager_stop(struct pf_stager *s, double timeout)
{
    if (!s || s->joined)
        return 0;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    if (timeout >= 0) {
        struct timespec ts = pf_deadline((uint64_t)(timeout * 1e9));
        int rc = 0;
        while (!s->exited && rc == 0)
            rc = pthread_cond_timedwait(&s->exit_cv, &s->mu, &ts);
    }
    bool exited = s->exited || timeout < 0;
    pthread_mutex_unlock(&s->mu);
    if (!exited)
        return -ETIMEDOUT;
    pthread_join(s->thread, NULL);
    s->joined = true;
    return 0;
}

void pf_stager_destroy(struct pf_stager *s)
{
    if (!s)
        return;
    (void)pf_stager_stop(s, -1);
    pthread_cond_destroy(&s->exit_cv);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->ring);
    free(s->queued);
    free(s);
}

/* ---- the prefetcher's glue */

void pf_kernel_drop_cb(void *arg)
{
    struct cfs_prefetch *pf = arg;
    pf_stager_kick(atomic_load(&pf->stager));
}

static bool stage_eligible(void *arg, uint32_t id)
{
    struct cfs_prefetch *pf = arg;
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || !S_ISREG(e->mode) || e->size == 0 || pf_is_changed(pf, id))
        return false;
    pthread_rwlock_rdlock(&pf->plan_lock);
    /* Without a plan too (the sweep's passes, or the reactive LRU cache),
     * unless an SSD tier is there: RAM victims are demoted to it then,
     * and a staged entry has no buffer to demote.  Owned files too where peers can be served from
     * the page cache (prefetch_retrieve.c). */
    bool ok = (pf->track || pf->run.ssd == 0) &&
              (pf_retrieve_possible(pf) ||
               !(e->sample != CFS_NO_SAMPLE && pf_owned_for_peers(pf, e->sample)));
    pthread_rwlock_unlock(&pf->plan_lock);
    return ok;
}

static void stage_freed(void *arg)
{
    struct cfs_prefetch *pf = arg;
    pthread_mutex_lock(&pf->zombie_mu);
    pf->zombie_gen++;
    pthread_cond_broadcast(&pf->zombie_cv);
    pthread_mutex_unlock(&pf->zombie_mu);
    pf_wake(pf); /* a prefetch that waited for the zombies' room may start */
}

static void stage_gauges(void *arg)
{
    pf_update_gauges(arg);
}

int cfs_prefetch_kernel_start(struct cfs_prefetch *pf, const struct cfs_kernel_ops *ops,
                              void *arg, char *err, size_t errlen)
{
    if (pf->opts.no_pagecache || atomic_load(&pf->stager))
        return 0;
    struct pf_stager_params sp = {
        .cache = pf->cache, .metrics = pf->m, .nentries = cfs_catalog_entry_count(pf->cat),
        .ops = ops, .ops_arg = arg, .eligible = stage_eligible, .freed = stage_freed,
        .gauges = stage_gauges, .arg = pf,
    };
    pf->kops_arg = arg;
    atomic_store(&pf->kops, ops); /* before the stager asks stage_eligible */
    struct pf_stager *st;
    int rc = pf_stager_create(&sp, &st);
    if (rc) {
        snprintf(err, errlen, "page cache: cannot start the stager: %s", strerror(-rc));
        return rc;
    }
    pf->stageable = 0;
    for (uint32_t id = 0; id < sp.nentries; id++) {
        const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
        if (e && S_ISREG(e->mode) && e->size > 0)
            pf->stageable++;
    }
    atomic_store(&pf->stager, st);
    /* What the prefetcher fetched before the stager existed. */
    for (uint32_t id = 0; id < sp.nentries; id++)
        if (cfs_cache_state(pf->cache, id) == CFS_CACHE_RAM)
            pf_stager_queue(st, id);
    return 0;
}

bool cfs_prefetch_all_staged(struct cfs_prefetch *pf)
{
    if (!pf || !atomic_load(&pf->stager))
        return false;
    struct cfs_cache_stats st;
    cfs_cache_stats(pf->cache, &st);
    /* Files kept for peers, changed files and a stager that gave up are
     * never staged, so any of them keeps this false for good. */
    return st.kernel_entries >= pf->stageable && st.zombie_bytes == 0;
}

int cfs_prefetch_kernel_stop(struct cfs_prefetch *pf, double timeout)
{
    return pf ? pf_stager_stop(atomic_load(&pf->stager), timeout) : 0;
}

void cfs_prefetch_forgot(struct cfs_prefetch *pf, cfs_id id)
{
    if (!pf->cache || pf->opts.no_pagecache)
        return;
    cfs_cache_kernel_forgot(pf->cache, id);
    pf_update_gauges(pf);
}
