/* The data path and the prefetcher thread; the design is at the top of
 * include/clairfs/prefetch.h, position tracking in prefetch_track.c. */
#include "clairfs/prefetch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "clairfs/cache.h"
#include "clairfs/index.h"
#include "clairfs/io.h"
#include "clairfs/log.h"
#include "clairfs/model.h"
#include "clairfs/peer.h"
#include "clairfs/plan.h"
#include "prefetch_i.h"

/* One fetch from the source; lives from begin_fetch to its completion. */
struct fetch {
    struct cfs_io_req req;
    struct cfs_peer_req preq; /* when asked from a peer first */
    uint64_t t0;              /* when the peer was asked, ns */
    bool via_peer;            /* the bytes are coming from preq.node */
    struct cfs_prefetch *pf;
    struct fetch *qnext;
    uint32_t id;
    enum cfs_cache_tier tier;
    bool prefetch;
    char path[];
};

struct cfs_prefetch_file {
    cfs_id id;
    uint32_t sample;
    uint64_t size;
    struct cfs_cache_handle h;
    bool has_h;
    int fd; /* direct reads from the source */
    void *pbuf; /* the bytes of a direct read from a peer (size bytes) */
    enum cfs_metric source;
    bool kernel;                /* staged: the kernel serves the reads */
    atomic_bool fell_back;      /* a read of a staged file reached us */
    pthread_mutex_t fd_mu;      /* a staged file's source fd opens at its first read */
};

struct cfs_prefetch {
    const struct cfs_catalog *cat;
    struct cfs_metrics *m;
    int source_fd;
    struct cfs_cache *cache;
    struct cfs_io *io;
    struct cfs_index *index;
    char *ssd_dir, *index_dir;
    struct cfs_options opts; /* scalars only: the strings are not kept */
    uint32_t window;
    uint64_t *sizes; /* per sample, for the planner */
    uint64_t nsamples;

    /* The tracker; replaced by "seed N" under the write lock.  The cache's
     * policy callback reads it without this lock: a swap first switches
     * the cache to LRU. */
    pthread_rwlock_t plan_lock;
    struct pf_track *track;

    pthread_mutex_t gauge_mu; /* update_gauges */
    atomic_uint moves;        /* opens and releases since the prefetcher was woken */

    /* The prefetcher thread and what it waits on. */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* wakes the prefetcher */
    pthread_cond_t idle_cv; /* wakes wait_idle */
    pthread_t thread;
    bool running, stop, paused, idle;
    uint64_t wake_seq;
    uint32_t inflight, max_inflight; /* prefetches */
    uint64_t lookahead;
    uint64_t scan, scan_gen;
    uint64_t order_idx[2];
    uint64_t owned_idx[2]; /* distributed: cursor of the owned files' staging */
    uint64_t fetched_bytes;

    /* SSD completions are written by a finisher thread: the io engine's
     * callbacks must not block on the disk. */
    pthread_t finisher;
    bool fin_running, fin_stop;
    struct fetch *fin_head, *fin_tail;
    pthread_cond_t fin_cv;

    bool progress;
    double progress_interval;

    atomic_uint_fast64_t prefetches, demand_fetches, direct_opens, dropped;
    atomic_bool ssd_error_logged;
    /* Bitmap by entry id: the source file was found changed under the mount
     * (its reads fail with ESTALE unless a tier holds it; logged once). */
    _Atomic uint64_t *changed;

    /* Peers (NULL peer: one node).  distributed: the plan spans nodes and
     * fetches may go to peers (not with no_peers). */
    struct cfs_peer *peer;
    uint32_t nodes, node;
    bool distributed;
    struct cfs_rank_range *node_ranks; /* nodes entries, or NULL */
    struct cfs_model *model;
    /* Per entry id: 1 + the node the last completed fetch came from, 0 for
     * the PFS; read by an open that waited for that fetch. */
    _Atomic uint32_t *from_node;
    _Atomic uint32_t *peer_inflight; /* per node: requests in flight */
    uint32_t nentries;
    atomic_uint_fast64_t peer_fetches, peer_fallbacks, peer_served;

    /* Page-cache staging (prefetch_stage.c); NULL until kernel_start. */
    struct pf_stager *_Atomic stager;
    atomic_uint_fast64_t kernel_opens, kernel_fallbacks;
    atomic_bool reclaim_warned;
    /* Zombies invalidated (stage_freed): a demand fetch refused for their
     * room waits for this, briefly. */
    pthread_mutex_t zombie_mu;
    pthread_cond_t zombie_cv;
    uint64_t zombie_gen;
};

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void wake(struct cfs_prefetch *pf)
{
    pthread_mutex_lock(&pf->mu);
    pf->wake_seq++;
    pf->idle = false;
    pthread_cond_signal(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

/* Serialised, so that the last writer publishes the newest figures: a
 * thread that read the stats before another's change cannot overwrite the
 * gauges after it. */
/* The trainers moved (an open, a release).  Waking the prefetcher costs two
 * context switches, as much as serving a staged file's open, and one open
 * rarely gives it more than one file to start: wake it every NUDGE_EVERY
 * moves (the window ahead of the trainers is ~1000 files deep), and at once
 * when the epoch changed (the next one is materialised). */
#define NUDGE_EVERY 16u

static void nudge(struct cfs_prefetch *pf, bool now)
{
    if (now || atomic_fetch_add(&pf->moves, 1) + 1 >= NUDGE_EVERY) {
        atomic_store(&pf->moves, 0);
        wake(pf);
    }
}

static void update_gauges(struct cfs_prefetch *pf)
{
    struct cfs_cache_stats st;
    pthread_mutex_lock(&pf->gauge_mu);
    cfs_cache_stats(pf->cache, &st);
    cfs_metrics_set(pf->m, CFS_M_CACHE_BYTES_RAM, st.bytes[CFS_TIER_RAM]);
    cfs_metrics_set(pf->m, CFS_M_CACHE_BYTES_SSD, st.bytes[CFS_TIER_SSD]);
    cfs_metrics_set(pf->m, CFS_M_CACHE_PEAK_RAM, st.peak[CFS_TIER_RAM]);
    cfs_metrics_set(pf->m, CFS_M_CACHE_PEAK_SSD, st.peak[CFS_TIER_SSD]);
    cfs_metrics_set(pf->m, CFS_M_CHECKSUM_FAILURES, st.checksum_failures);
    cfs_metrics_set(pf->m, CFS_M_PAGECACHE_BYTES, st.kernel_bytes);
    pthread_mutex_unlock(&pf->gauge_mu);
}

/* ---- the cache's callbacks */

/* This node keeps sample s for its peers (plan_lock held, or the cache's
 * policy callback, which a tracker swap excludes). */
static bool owned_for_peers(const struct cfs_prefetch *pf, uint32_t s)
{
    return pf->distributed && pf->track &&
           pf_track_owner(pf->track, s, NULL, NULL) == pf->node;
}

/* The eviction key: owned files count as needed now, for the whole run. */
static uint64_t sample_next_use(struct cfs_prefetch *pf, uint32_t s)
{
    if (owned_for_peers(pf, s))
        return 0;
    return pf_track_next_use(pf->track, s);
}

static uint64_t next_use_cb(void *arg, uint32_t id)
{
    struct cfs_prefetch *pf = arg;
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || e->sample == CFS_NO_SAMPLE || !pf->track)
        return UINT64_MAX;
    return sample_next_use(pf, e->sample);
}

static int source_of(const struct cfs_prefetch *pf, uint32_t id, struct cfs_cache_source *out)
{
    char path[PATH_MAX];
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || !S_ISREG(e->mode))
        return -ENOENT;
    int len = cfs_catalog_path(pf->cat, id, path, sizeof(path));
    if (len < 0)
        return len;
    out->size = e->size;
    out->mtime_sec = e->mtime_sec;
    out->mtime_nsec = e->mtime_nsec;
    out->path_hash = XXH3_64bits(path, (size_t)len);
    return 0;
}

static int source_cb(void *arg, uint32_t id, struct cfs_cache_source *out)
{
    return source_of(arg, id, out);
}

/* The cache has zombies for the stager (cache lock held: only a signal). */
static void kernel_drop_cb(void *arg)
{
    struct cfs_prefetch *pf = arg;
    pf_stager_kick(atomic_load(&pf->stager));
}

/* ---- the source's identity (see "Exactness" in prefetch.h) */

/* The file as observed (size, mtime) is still the catalog's entry e. */
static bool same_identity(const struct cfs_entry *e, uint64_t size, int64_t msec, uint32_t mnsec)
{
    return size == e->size && msec == e->mtime_sec && mnsec == e->mtime_nsec;
}

static bool fd_is_catalogs(int fd, const struct cfs_entry *e)
{
    struct stat st;
    return fstat(fd, &st) == 0 && same_identity(e, (uint64_t)st.st_size, st.st_mtim.tv_sec,
                                                (uint32_t)st.st_mtim.tv_nsec);
}

static bool is_changed(const struct cfs_prefetch *pf, uint32_t id)
{
    return pf->changed && id < cfs_catalog_entry_count(pf->cat) &&
           (atomic_load(&pf->changed[id / 64]) >> (id % 64) & 1);
}

/* Remember that id's source changed; count and log it the first time. */
static void mark_changed(struct cfs_prefetch *pf, uint32_t id, const char *path)
{
    uint64_t bit = 1ull << (id % 64);
    if (!pf->changed || id >= cfs_catalog_entry_count(pf->cat) ||
        (atomic_fetch_or(&pf->changed[id / 64], bit) & bit))
        return;
    cfs_metrics_add(pf->m, CFS_M_SOURCE_CHANGED, 1);
    cfs_warn("%s changed under the mount (size or mtime differ from the catalog): not served "
             "unless cached (ESTALE); remount with -o rescan to serve the new version",
             path);
}

/* Open entry id's source file for direct reads: 0 and *fd, or -errno
 * (-ESTALE when it is not the catalog's file any more: the kernel has the
 * catalog's size, so it would be served cut short, or padded). */
static int open_source(struct cfs_prefetch *pf, uint32_t id, int *fd)
{
    char path[PATH_MAX];
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    int rc = cfs_catalog_path(pf->cat, id, path, sizeof(path));
    if (rc < 0)
        return rc;
    int sfd = openat(pf->source_fd, path, O_RDONLY | O_CLOEXEC);
    if (sfd < 0)
        return -errno;
    if (!fd_is_catalogs(sfd, e)) {
        close(sfd);
        mark_changed(pf, id, path);
        return -ESTALE;
    }
    *fd = sfd;
    return 0;
}

/* ---- fetches */

/* Publishes (or fails) the fetch and frees f.  Returns what its waiters
 * get: 0, or the fetch's error. */
static int fetch_finish(struct fetch *f)
{
    struct cfs_prefetch *pf = f->pf;
    struct cfs_cache_source src = {0};
    int64_t res = f->req.res;
    int rc = res < 0 ? (int)res : 0;
    if (rc == 0 && source_of(pf, f->id, &src) < 0)
        rc = -ENOENT;
    /* Read from a file that is not the catalog's any more (or that could
     * not be stat'ed after the read), the bytes may mix two versions: never
     * publish them.  A peer's bytes were checked where they were fetched. */
    if (rc == 0 && !f->via_peer &&
        !(f->req.has_st && f->req.st.size == src.size && f->req.st.mtime_sec == src.mtime_sec &&
          f->req.st.mtime_nsec == src.mtime_nsec)) {
        mark_changed(pf, f->id, f->path);
        rc = -ESTALE;
    }
    bool peer = f->via_peer && rc == 0;
    /* Before publishing: a waiter that wakes reads where the bytes came from. */
    if (pf->from_node && f->id < pf->nentries)
        atomic_store(&pf->from_node[f->id], peer ? f->preq.node + 1 : 0);
    int crc = cfs_cache_complete_fetch(pf->cache, f->id, rc, rc ? 0 : (uint64_t)res, &src);
    /* Staged ahead of its open (a demand fetch is read at once: staged after). */
    if (crc == 0 && f->prefetch && f->tier == CFS_TIER_RAM)
        pf_stager_queue(atomic_load(&pf->stager), f->id);
    if (res > 0)
        cfs_metrics_add(pf->m, peer ? CFS_M_FETCH_BYTES_PEER : CFS_M_FETCH_BYTES_PFS,
                        (uint64_t)res);
    if (crc < 0 && rc == 0 && f->tier == CFS_TIER_SSD &&
        !atomic_exchange(&pf->ssd_error_logged, true))
        cfs_warn("SSD tier: writing an entry failed (%s); the tier keeps what it has",
                 strerror(-crc));
    update_gauges(pf);
    if (f->prefetch) {
        pthread_mutex_lock(&pf->mu);
        pf->inflight--;
        if (res > 0)
            pf->fetched_bytes += (uint64_t)res;
        pf->wake_seq++;
        pf->idle = false;
        pthread_cond_signal(&pf->cv);
        pthread_mutex_unlock(&pf->mu);
    }
    free(f);
    return rc;
}

static void fetch_done(struct cfs_io_req *req)
{
    struct fetch *f = req->arg;
    struct cfs_prefetch *pf = f->pf;
    if (f->tier == CFS_TIER_SSD && req->res >= 0) {
        pthread_mutex_lock(&pf->mu);
        f->qnext = NULL;
        if (pf->fin_tail)
            pf->fin_tail->qnext = f;
        else
            pf->fin_head = f;
        pf->fin_tail = f;
        pthread_cond_signal(&pf->fin_cv);
        pthread_mutex_unlock(&pf->mu);
        return;
    }
    (void)fetch_finish(f);
}

static void *finisher_main(void *arg)
{
    struct cfs_prefetch *pf = arg;
    pthread_mutex_lock(&pf->mu);
    for (;;) {
        struct fetch *f = pf->fin_head;
        if (!f) {
            if (pf->fin_stop)
                break;
            pthread_cond_wait(&pf->fin_cv, &pf->mu);
            continue;
        }
        pf->fin_head = f->qnext;
        if (!pf->fin_head)
            pf->fin_tail = NULL;
        pthread_mutex_unlock(&pf->mu);
        (void)fetch_finish(f);
        pthread_mutex_lock(&pf->mu);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

/* The node to ask for entry e instead of the PFS, or -1 (plan_lock held). */
static int peer_choice(struct cfs_prefetch *pf, const struct cfs_entry *e)
{
    if (!pf->distributed || !pf->track || e->sample == CFS_NO_SAMPLE || e->size == 0)
        return -1;
    int tier;
    uint32_t from;
    uint32_t owner = pf_track_owner(pf->track, e->sample, &tier, &from);
    if (owner == PF_NO_NODE || owner == pf->node || owner >= pf->nodes)
        return -1;
    /* Before the cluster's first read of the file its owner has not
     * staged it: the PFS, without a round trip that would say so. */
    uint32_t epoch;
    pf_track_position(pf->track, NULL, &epoch, NULL);
    if (epoch - pf_track_start_epoch(pf->track) < from)
        return -1;
    bool slow = cfs_peer_node_state(pf->peer, owner) != CFS_PEER_UP;
    enum cfs_model_tier mt = tier == PF_TIER_SSD ? CFS_MODEL_TIER_SSD : CFS_MODEL_TIER_RAM;
    if (cfs_model_choose(pf->model, owner, mt, e->size, slow) != CFS_MODEL_PEER)
        return -1;
    return (int)owner;
}

/* The peer answered (on the peer thread): the bytes, or the same fetch
 * again from the PFS. */
static void peer_done(struct cfs_peer_req *r)
{
    struct fetch *f = r->arg;
    struct cfs_prefetch *pf = f->pf;
    double secs = (double)(now_ns() - f->t0) * 1e-9;
    uint32_t concurrent = atomic_fetch_sub(&pf->peer_inflight[r->node], 1);
    if (r->res >= 0 && (uint64_t)r->res == f->req.size_hint) {
        cfs_model_observe(pf->model, r->node, (uint64_t)r->res, secs, concurrent);
        atomic_fetch_add(&pf->peer_fetches, 1);
        cfs_metrics_add(pf->m, CFS_M_PEER_FETCH_OK, 1);
        f->req.res = r->res;
        fetch_done(&f->req);
        return;
    }
    if (r->res == -ETIMEDOUT)
        cfs_model_observe(pf->model, r->node, 0, secs, 1);
    atomic_fetch_add(&pf->peer_fallbacks, 1);
    cfs_metrics_add(pf->m, CFS_M_PEER_FETCH_FALLBACK, 1);
    cfs_debug("peer %u: file %u: %s; reading the PFS", r->node, r->id, strerror((int)-r->res));
    f->via_peer = false;
    int rc = cfs_io_submit(pf->io, &f->req);
    if (rc) {
        f->req.res = rc;
        (void)fetch_finish(f);
    }
}

/* Begin the fetch of id into tier and submit it.  0, or the cache's
 * begin_fetch error (-EEXIST, -ENOSPC, -EAGAIN, -EFBIG, -ENODEV, ...).
 * With sync_res (a demand fetch whose caller waits for it anyway) a fetch
 * from the source runs in the calling thread: 0 then means it is complete
 * and *sync_res is what its waiters got (0 or the fetch's error); a fetch
 * from a peer is submitted as usual and leaves *sync_res alone. */
static int fetch_start(struct cfs_prefetch *pf, uint32_t id, enum cfs_cache_tier tier,
                       bool prefetch, unsigned cache_flags, int *sync_res)
{
    char path[PATH_MAX];
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || !S_ISREG(e->mode))
        return -EINVAL;
    if (is_changed(pf, id))
        return -ESTALE; /* its bytes could never be published */
    int plen = cfs_catalog_path(pf->cat, id, path, sizeof(path));
    if (plen < 0)
        return plen;
    struct fetch *f = malloc(sizeof(*f) + (size_t)plen + 1);
    if (!f)
        return -ENOMEM;
    memcpy(f->path, path, (size_t)plen + 1);
    void *buf;
    int rc = cfs_cache_begin_fetch(pf->cache, id, e->size, tier, cache_flags, &buf);
    if (rc) {
        free(f);
        return rc;
    }
    memset(&f->req, 0, sizeof(f->req));
    f->pf = pf;
    f->id = id;
    f->tier = tier;
    f->prefetch = prefetch;
    f->req.path = f->path;
    f->req.fd = -1;
    f->req.prio = prefetch ? CFS_IO_PREFETCH : CFS_IO_DEMAND;
    f->req.buf = buf;
    f->req.cap = (size_t)e->size;
    f->req.size_hint = e->size;
    f->req.done = fetch_done;
    f->req.arg = f;
    if (prefetch) {
        pthread_mutex_lock(&pf->mu);
        pf->inflight++;
        pthread_mutex_unlock(&pf->mu);
        atomic_fetch_add(&pf->prefetches, 1);
    } else {
        atomic_fetch_add(&pf->demand_fetches, 1);
    }
    f->via_peer = false;
    int owner = peer_choice(pf, e);
    if (owner >= 0) {
        f->preq = (struct cfs_peer_req){
            .node = (uint32_t)owner, .id = id, .buf = buf, .cap = (size_t)e->size,
            .size_hint = e->size, .done = peer_done, .arg = f,
        };
        f->via_peer = true;
        f->t0 = now_ns();
        atomic_fetch_add(&pf->peer_inflight[owner], 1);
        if (cfs_peer_submit(pf->peer, &f->preq) == 0)
            return 0;
        atomic_fetch_sub(&pf->peer_inflight[owner], 1);
        f->via_peer = false; /* slow, gone or not started: the PFS */
    }
    if (sync_res && !prefetch) {
        /* The open waits for it anyway: read it here, as the engine would. */
        cfs_io_run_sync(pf->source_fd, &f->req);
        *sync_res = fetch_finish(f); /* publishes, wakes the other waiters */
        return 0;
    }
    rc = cfs_io_submit(pf->io, &f->req);
    if (rc) {
        f->req.res = rc;
        (void)fetch_finish(f); /* fails the cache entry, wakes its waiters */
    }
    return rc;
}

/* ---- the prefetcher thread */

static enum cfs_cache_tier cache_tier(int plan_tier)
{
    return plan_tier == PF_TIER_SSD ? CFS_TIER_SSD : CFS_TIER_RAM;
}

static bool room_for_more(struct cfs_prefetch *pf)
{
    pthread_mutex_lock(&pf->mu);
    bool ok = pf->inflight < pf->max_inflight && !pf->stop && !pf->paused;
    pthread_mutex_unlock(&pf->mu);
    return ok;
}

static bool skip_unowned(struct cfs_prefetch *pf, uint32_t s)
{
    return !owned_for_peers(pf, s);
}

static bool skip_unused(struct cfs_prefetch *pf, uint32_t s)
{
    return sample_next_use(pf, s) == PF_NEVER;
}

/* Fetch the files the plan puts in tier k (0: RAM, 1: SSD) in order of
 * first use, from cursor[k] on, skipping those skip() names, until the cache
 * refuses or the io depth is used.  Returns the fetches started. */
static unsigned fetch_tier_order(struct cfs_prefetch *pf, struct pf_track *t, int k,
                                 uint64_t cursor[2], bool (*skip)(struct cfs_prefetch *, uint32_t))
{
    int tier = k == 0 ? PF_TIER_RAM : PF_TIER_SSD;
    uint64_t count;
    const uint32_t *order = pf_track_order(t, tier, &count);
    unsigned started = 0;
    while (cursor[k] < count && room_for_more(pf)) {
        uint32_t s = order[cursor[k]];
        if (skip(pf, s)) {
            cursor[k]++;
            continue;
        }
        int rc = fetch_start(pf, cfs_catalog_sample_entry(pf->cat, s), cache_tier(tier), true, 0,
                             NULL);
        if (rc == -ENODEV) {
            cursor[k] = count; /* no SSD tier, or degraded */
            break;
        }
        if (rc == -ENOSPC || rc == -EAGAIN || rc == -ENOMEM)
            break;
        if (rc == 0)
            started++;
        cursor[k]++;
    }
    return started;
}

/* One pass: the window ahead of the trainer, then the planned tiers.
 * Returns the number of fetches started. */
static unsigned prefetch_round(struct cfs_prefetch *pf)
{
    unsigned started = 0;
    bool blocked = false;

    pthread_rwlock_rdlock(&pf->plan_lock);
    struct pf_track *t = pf->track;
    if (!t)
        goto out;
    uint64_t pos, gen;
    pf_track_position(t, &pos, NULL, &gen);
    if (gen != pf->scan_gen || pf->scan < pos) {
        pf->scan = pos;
        pf->scan_gen = gen;
    }
    uint64_t limit = pf->lookahead ? pos + pf->lookahead : UINT64_MAX;
    /* Free room is filled as far ahead as the plan goes, but an eviction
     * is only worth it for a file the trainers will open soon: the reorder
     * window plus the fetches in flight.  Farther ahead, evicting now what
     * Belady would keep until after its next read costs a fetch, and buys
     * nothing the later prefetch would not (a cache that fills itself with
     * the soonest files fetched ~9 % more than the simulator's MIN). */
    uint64_t evict_horizon = pos + pf_track_window(t) + pf->max_inflight;
    while (pf->scan < limit && room_for_more(pf)) {
        uint32_t s;
        bool consumed;
        if (pf_track_sample_at(t, pf->scan, &s, &consumed) <= 0)
            break;
        if (!consumed) {
            cfs_id id = cfs_catalog_sample_entry(pf->cat, s);
            int tier = pf_track_tier(t, s);
            unsigned flags = pf->scan < evict_horizon ? 0 : CFS_CACHE_NO_EVICT;
            int rc = fetch_start(pf, id, cache_tier(tier), true, flags, NULL);
            if (rc == -ENODEV && tier == PF_TIER_SSD)
                rc = fetch_start(pf, id, CFS_TIER_RAM, true, flags, NULL);
            if (rc == 0)
                started++;
            else if (rc == -ENOSPC || rc == -EAGAIN || rc == -ENOMEM) {
                blocked = true; /* wait for the trainer or for completions */
                break;
            }
        }
        pf->scan++;
    }
    /* Distributed: the files this node owns, whatever the window: its
     * peers read them on their own schedule (owned files evict only
     * non-owned ones, and the plan reserved their bytes). */
    for (int k = 0; k < 2 && pf->distributed; k++)
        started += fetch_tier_order(pf, t, k, pf->owned_idx, skip_unowned);
    /* Stage the planned tiers in order of first use once the window is
     * covered (their bytes are reserved by the plan). */
    for (int k = 0; k < 2 && !blocked; k++)
        started += fetch_tier_order(pf, t, k, pf->order_idx, skip_unused);
out:
    pthread_rwlock_unlock(&pf->plan_lock);
    return started;
}

/* Warm-up progress: resident bytes against what the plan holds.  Returns
 * true once everything is staged (no more lines). */
static bool log_progress(struct cfs_prefetch *pf, double *last_t, uint64_t *last_bytes)
{
    uint64_t target = 0;
    pthread_rwlock_rdlock(&pf->plan_lock);
    if (pf->track)
        target = pf_track_tier_bytes(pf->track, PF_TIER_RAM) +
                 pf_track_tier_bytes(pf->track, PF_TIER_SSD);
    pthread_rwlock_unlock(&pf->plan_lock);
    struct cfs_cache_stats st;
    cfs_cache_stats(pf->cache, &st);
    if (target > st.capacity[0] + st.capacity[1])
        target = st.capacity[0] + st.capacity[1];
    if (target == 0)
        return true;
    uint64_t staged = st.bytes[0] + st.bytes[1];
    pthread_mutex_lock(&pf->mu);
    uint64_t fetched = pf->fetched_bytes;
    pthread_mutex_unlock(&pf->mu);
    double t = now_sec(), dt = t - *last_t;
    double rate = dt > 0 ? (double)(fetched - *last_bytes) / dt : 0;
    double pct = staged >= target ? 100.0 : 100.0 * (double)staged / (double)target;
    char a[32], b[32];
    cfs_metrics_format_bytes(staged, a, sizeof(a));
    cfs_metrics_format_bytes(target, b, sizeof(b));
    if (rate > 0 && staged < target)
        cfs_info("warm-up: staged %.1f%% (%s of %s), %.1f MB/s, ETA %.0f s", pct, a, b, rate / 1e6,
                 (double)(target - staged) / rate);
    else
        cfs_info("warm-up: staged %.1f%% (%s of %s), %.1f MB/s", pct, a, b, rate / 1e6);
    *last_t = t;
    *last_bytes = fetched;
    return pct >= 99.9;
}

static void *prefetch_main(void *arg)
{
    struct cfs_prefetch *pf = arg;
    double interval = pf->progress_interval > 0 ? pf->progress_interval : 5.0;
    double last_t = now_sec();
    uint64_t last_bytes = 0;
    bool warm = !pf->progress;

    pthread_mutex_lock(&pf->mu);
    while (!pf->stop) {
        uint64_t seq = pf->wake_seq;
        unsigned started = 0;
        if (!pf->paused) {
            pthread_mutex_unlock(&pf->mu);
            started = prefetch_round(pf);
            pthread_mutex_lock(&pf->mu);
        }
        if (started == 0 && seq == pf->wake_seq && !pf->stop) {
            if (pf->inflight == 0) {
                pf->idle = true;
                pthread_cond_broadcast(&pf->idle_cv);
            }
            struct timespec ts = pf_deadline(1000000000u);
            (void)pthread_cond_timedwait(&pf->cv, &pf->mu, &ts);
        }
        if (!warm && now_sec() - last_t >= interval) {
            pthread_mutex_unlock(&pf->mu);
            warm = log_progress(pf, &last_t, &last_bytes);
            pthread_mutex_lock(&pf->mu);
        }
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

/* ---- lifecycle */

static int track_create(const struct cfs_prefetch *pf, const struct cfs_options *o, char *err,
                        size_t errlen, struct pf_track **out)
{
    struct pf_track_params tp = {
        .n = pf->nsamples, .sizes = pf->sizes, .world = o->world,
        .rank_first = o->has_ranks ? o->rank_first : 0,
        .rank_count = o->has_ranks ? o->rank_last - o->rank_first + 1 : 0,
        .start_epoch = o->start_epoch, .epochs = o->epochs,
        .ram = o->ram, .ssd = o->ssd, .window = pf->window,
    };
    if (pf->distributed) {
        tp.nodes = pf->nodes;
        tp.node = pf->node;
        tp.ranks = pf->node_ranks;
    } else if (pf->nodes > 1) {
        /* no_peers: this node alone, with its own block of ranks. */
        struct cfs_rank_range rr;
        if (pf->node_ranks)
            rr = pf->node_ranks[pf->node];
        else
            cfs_plan_default_ranks(o->world, pf->nodes, pf->node, &rr);
        tp.rank_first = rr.first;
        tp.rank_count = rr.count;
    }
    cfs_options_sampler_params(o, pf->nsamples, &tp.sampler);
    return pf_track_create(&tp, out, err, errlen);
}

int cfs_prefetch_create(const struct cfs_prefetch_params *p, struct cfs_prefetch **out, char *err,
                        size_t errlen)
{
    struct cfs_prefetch *pf = calloc(1, sizeof(*pf));
    int rc = -ENOMEM;
    *out = NULL;
    if (!pf) {
        snprintf(err, errlen, "prefetch: out of memory");
        return rc;
    }
    pthread_rwlock_init(&pf->plan_lock, NULL);
    pthread_mutex_init(&pf->mu, NULL);
    pthread_mutex_init(&pf->gauge_mu, NULL);
    pthread_mutex_init(&pf->zombie_mu, NULL);
    pthread_cond_init(&pf->zombie_cv, NULL);
    pthread_cond_init(&pf->cv, NULL);
    pthread_cond_init(&pf->idle_cv, NULL);
    pthread_cond_init(&pf->fin_cv, NULL);
    pf->cat = p->catalog;
    pf->m = p->metrics;
    pf->source_fd = p->source_fd;
    pf->opts = *p->opts;
    pf->opts.order_list = pf->opts.ssd_dir = pf->opts.index_dir = NULL;
    pf->opts.sampler_list = pf->opts.model_file = NULL;
    pf->peer = p->peer;
    pf->nodes = (uint32_t)cfs_peer_size(p->peer);
    pf->node = (uint32_t)cfs_peer_rank(p->peer);
    pf->distributed = pf->nodes > 1 && !p->opts->no_peers;
    if (pf->nodes > 1 && p->node_ranks) {
        pf->node_ranks = malloc(pf->nodes * sizeof(*pf->node_ranks));
        if (!pf->node_ranks)
            goto nomem;
        memcpy(pf->node_ranks, p->node_ranks, pf->nodes * sizeof(*pf->node_ranks));
    }
    struct cfs_model_params mp;
    cfs_model_defaults(&mp);
    if (p->opts->model_file && (rc = cfs_model_load(p->opts->model_file, &mp, err, errlen)) < 0)
        goto fail;
    if (cfs_model_create(&mp, pf->nodes, pf->nodes, &pf->model) < 0 ||
        !(pf->peer_inflight = calloc(pf->nodes, sizeof(*pf->peer_inflight))))
        goto nomem;
    if (p->opts->sampler_list && !(pf->opts.sampler_list = strdup(p->opts->sampler_list)))
        goto nomem;
    pf->window = p->window;
    pf->progress = p->progress;
    pf->progress_interval = p->progress_interval;

    /* The SSD tier: ssd= bytes, by default half the free space of ssd_dir. */
    const char *ssd_dir = p->ssd_dir;
    if ((ssd_dir && !(pf->ssd_dir = strdup(ssd_dir))) ||
        (p->index_dir && !(pf->index_dir = strdup(p->index_dir))))
        goto nomem;
    if (!ssd_dir) {
        pf->opts.ssd = 0;
    } else if (!p->opts->has_ssd) {
        struct statvfs sv;
        (void)mkdir(ssd_dir, 0700);
        if (statvfs(ssd_dir, &sv) < 0) {
            rc = -errno;
            snprintf(err, errlen, "ssd_dir %s: %s", ssd_dir, strerror(errno));
            goto fail;
        }
        pf->opts.ssd = (uint64_t)sv.f_bavail * sv.f_frsize / 2;
    }

    pf->nsamples = cfs_catalog_sample_count(pf->cat);
    pf->sizes = malloc((pf->nsamples ? pf->nsamples : 1) * sizeof(*pf->sizes));
    if (!pf->sizes)
        goto nomem;
    for (uint64_t i = 0; i < pf->nsamples; i++)
        pf->sizes[i] = cfs_catalog_entry(pf->cat, cfs_catalog_sample_entry(pf->cat, i))->size;

    if (pf->opts.has_seed && pf->nsamples > 0) {
        rc = track_create(pf, &pf->opts, err, errlen, &pf->track);
        if (rc)
            goto fail;
        cfs_metrics_set(pf->m, CFS_M_EPOCH, pf->opts.start_epoch);
    }
    if (pf->opts.io == CFS_IO_URING) {
        /* io=uring must fail before the mount when the kernel refuses it. */
        struct cfs_io *probe = NULL;
        struct cfs_io_params ip = {.kind = CFS_IO_URING, .depth = 4, .source_fd = pf->source_fd};
        rc = cfs_io_create(&ip, &probe, err, errlen);
        cfs_io_destroy(probe);
        if (rc)
            goto fail;
    }
    *out = pf;
    return 0;
nomem:
    rc = -ENOMEM;
    snprintf(err, errlen, "prefetch: out of memory");
fail:
    cfs_prefetch_destroy(pf);
    return rc;
}

int cfs_prefetch_start(struct cfs_prefetch *pf, char *err, size_t errlen)
{
    int rc;
    if (pf->opts.ssd && pf->index_dir) {
        rc = cfs_index_open(pf->index_dir, &pf->index, err, errlen);
        if (rc)
            return rc;
    }
    struct cfs_cache_params cp = {
        .nfiles = cfs_catalog_entry_count(pf->cat), .ram_bytes = pf->opts.ram,
        .ssd_bytes = pf->opts.ssd, .ssd_dir = pf->ssd_dir, .index = pf->index,
        .source = source_cb, .source_arg = pf,
        .next_use = pf->track ? next_use_cb : NULL, .next_use_arg = pf,
        .kernel_drop = pf->opts.no_pagecache ? NULL : kernel_drop_cb, .kernel_drop_arg = pf,
    };
    rc = cfs_cache_create(&cp, &pf->cache, err, errlen);
    if (rc)
        return rc;
    pf->changed = calloc(cp.nfiles / 64 + 1, sizeof(*pf->changed));
    if (!pf->changed) {
        snprintf(err, errlen, "prefetch: out of memory");
        return -ENOMEM;
    }
    if (pf->distributed) {
        pf->nentries = cp.nfiles;
        pf->from_node = calloc(cp.nfiles ? cp.nfiles : 1, sizeof(*pf->from_node));
        if (!pf->from_node) {
            snprintf(err, errlen, "prefetch: out of memory");
            return -ENOMEM;
        }
    }
    struct cfs_io_params ip = {
        .kind = pf->opts.io, .depth = pf->opts.io_depth ? pf->opts.io_depth : 64,
        .source_fd = pf->source_fd,
    };
    rc = cfs_io_create(&ip, &pf->io, err, errlen);
    if (rc)
        return rc;
    pf->max_inflight = ip.depth - ip.depth / 8;
    if (pf->max_inflight == 0)
        pf->max_inflight = 1;
    pf->lookahead = pf->opts.lookahead;
    pf->scan_gen = UINT64_MAX;
    rc = -pthread_create(&pf->finisher, NULL, finisher_main, pf);
    if (rc == 0) {
        pf->fin_running = true;
        rc = -pthread_create(&pf->thread, NULL, prefetch_main, pf);
    }
    if (rc) {
        snprintf(err, errlen, "prefetch: cannot start a thread: %s", strerror(-rc));
        return rc;
    }
    pf->running = true;
    update_gauges(pf);
    return 0;
}

void cfs_prefetch_destroy(struct cfs_prefetch *pf)
{
    if (!pf)
        return;
    if (pf->running) {
        pthread_mutex_lock(&pf->mu);
        pf->stop = true;
        pthread_cond_signal(&pf->cv);
        pthread_mutex_unlock(&pf->mu);
        pthread_join(pf->thread, NULL);
    }
    cfs_io_destroy(pf->io); /* every callback has run after it */
    if (pf->fin_running) {
        pthread_mutex_lock(&pf->mu);
        pf->fin_stop = true;
        pthread_cond_signal(&pf->fin_cv);
        pthread_mutex_unlock(&pf->mu);
        pthread_join(pf->finisher, NULL);
    }
    pf_stager_destroy(atomic_load(&pf->stager));
    cfs_cache_destroy(pf->cache);
    cfs_index_close(pf->index);
    pf_track_destroy(pf->track);
    cfs_model_destroy(pf->model);
    free(pf->from_node);
    free((void *)pf->changed);
    free(pf->peer_inflight);
    free(pf->node_ranks);
    free(pf->ssd_dir);
    free(pf->index_dir);
    free(pf->sizes);
    free(pf->opts.sampler_list);
    pthread_cond_destroy(&pf->fin_cv);
    pthread_cond_destroy(&pf->idle_cv);
    pthread_cond_destroy(&pf->cv);
    pthread_mutex_destroy(&pf->mu);
    pthread_mutex_destroy(&pf->gauge_mu);
    pthread_cond_destroy(&pf->zombie_cv);
    pthread_mutex_destroy(&pf->zombie_mu);
    pthread_rwlock_destroy(&pf->plan_lock);
    free(pf);
}

/* ---- the read path */

/* An open seen by the tracker (plan_lock held for reading).  True when it
 * moved the trainers to another epoch. */
static bool observe(struct cfs_prefetch *pf, uint32_t sample)
{
    if (!pf->track)
        return false;
    struct pf_obs o;
    pf_track_open(pf->track, sample, &o);
    cfs_metrics_add(pf->m, o.hit ? CFS_M_PREDICTION_HIT : CFS_M_PREDICTION_MISS, 1);
    if (o.epoch_changed) {
        cfs_metrics_set(pf->m, CFS_M_EPOCH, o.epoch);
        cfs_cache_set_policy(pf->cache, next_use_cb, pf); /* re-key every entry */
    }
    return o.epoch_changed;
}

static enum cfs_metric tier_metric(enum cfs_cache_tier t)
{
    return t == CFS_TIER_SSD ? CFS_M_READS_SSD : CFS_M_READS_RAM;
}

/* The room a demand fetch needs is held by staged entries whose pages the
 * stager is dropping: wait for it, at most ZOMBIE_WAIT_NS (the stager may
 * itself wait on the page lock of a READ that another FUSE worker answers,
 * so the wait is bounded: never a hang, at worst a direct read).  False
 * when no zombie holds room. */
#define ZOMBIE_WAIT_NS 50000000ull

static bool wait_for_zombies(struct cfs_prefetch *pf)
{
    struct cfs_cache_stats st;
    cfs_cache_stats(pf->cache, &st);
    if (st.zombie_bytes == 0)
        return false;
    struct timespec ts = pf_deadline(ZOMBIE_WAIT_NS);
    pthread_mutex_lock(&pf->zombie_mu);
    uint64_t gen = pf->zombie_gen;
    int rc = 0;
    while (pf->zombie_gen == gen && rc == 0)
        rc = pthread_cond_timedwait(&pf->zombie_cv, &pf->zombie_mu, &ts);
    pthread_mutex_unlock(&pf->zombie_mu);
    return true;
}

/* A synchronous peer fetch into a buffer of the open's own. */
struct peer_wait {
    struct cfs_peer_req r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void peer_wait_done(struct cfs_peer_req *r)
{
    struct peer_wait *w = r->arg;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* 0 and *out (size bytes, malloc'd), or -errno: the caller reads the PFS.
 * Never hangs: the peer layer completes every request (timeouts). */
static int peer_read_direct(struct cfs_prefetch *pf, uint32_t id, uint64_t size, uint32_t node,
                            void **out)
{
    struct peer_wait w = {.done = false};
    void *buf = malloc(size ? size : 1);
    if (!buf)
        return -ENOMEM;
    w.r = (struct cfs_peer_req){
        .node = node, .id = id, .buf = buf, .cap = (size_t)size, .size_hint = size,
        .done = peer_wait_done, .arg = &w,
    };
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    uint64_t t0 = now_ns();
    atomic_fetch_add(&pf->peer_inflight[node], 1);
    int rc = cfs_peer_submit(pf->peer, &w.r);
    if (rc == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = w.r.res >= 0 && (uint64_t)w.r.res == size ? 0 : w.r.res < 0 ? (int)w.r.res : -EIO;
    }
    uint32_t concurrent = atomic_fetch_sub(&pf->peer_inflight[node], 1);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (rc == 0) {
        cfs_model_observe(pf->model, node, size, (double)(now_ns() - t0) * 1e-9, concurrent);
        cfs_metrics_add(pf->m, CFS_M_PEER_FETCH_OK, 1);
        cfs_metrics_add(pf->m, CFS_M_FETCH_BYTES_PEER, size);
        atomic_fetch_add(&pf->peer_fetches, 1);
        *out = buf;
        return 0;
    }
    cfs_metrics_add(pf->m, CFS_M_PEER_FETCH_FALLBACK, 1);
    atomic_fetch_add(&pf->peer_fallbacks, 1);
    free(buf);
    return rc;
}

int cfs_prefetch_open(struct cfs_prefetch *pf, cfs_id id, struct cfs_prefetch_file **out)
{
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    *out = NULL;
    if (!e)
        return -ENOENT;
    if (!S_ISREG(e->mode))
        return -EINVAL;
    struct cfs_prefetch_file *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->id = id;
    f->sample = e->sample;
    f->size = e->size;
    f->fd = -1;
    pthread_mutex_init(&f->fd_mu, NULL);

    pthread_rwlock_rdlock(&pf->plan_lock);
    bool new_epoch = observe(pf, e->sample);
    unsigned demand_flags = pf->track ? 0 : CFS_CACHE_DEMAND;
    uint64_t t0 = now_ns();
    bool waited = false;
    int rc = -ENOENT;
    for (int tries = 0; tries < 8; tries++) {
        rc = cfs_cache_acquire(pf->cache, id, 0, &f->h);
        if (rc == 0) {
            f->source = tier_metric(f->h.tier);
            break;
        }
        if (rc == -ENOENT) {
            /* Absent: fetch it, unless the policy would rather not keep it. */
            int fetched = 1; /* 1: submitted, else done here with this result */
            rc = fetch_start(pf, id, CFS_TIER_RAM, false, demand_flags, &fetched);
            if (rc == -EEXIST)
                continue;
            /* -EBUSY: this very file is a zombie; -EAGAIN: its room is. */
            if ((rc == -EBUSY || rc == -EAGAIN) && wait_for_zombies(pf))
                continue;
            if (rc == -EBUSY)
                continue;
            if (rc)
                break;
            waited = true;
            if (fetched < 0) {
                rc = fetched; /* what the wait for it would have returned */
                if (rc != -ENOENT)
                    break;
                continue;
            }
        } else if (rc != -EAGAIN) {
            break;
        }
        waited = true;
        rc = cfs_cache_acquire(pf->cache, id, CFS_CACHE_WAIT, &f->h);
        if (rc == 0) {
            f->source = pf->from_node && atomic_load(&pf->from_node[id]) ? CFS_M_READS_PEER
                                                                         : CFS_M_READS_PFS;
            break;
        }
        if (rc != -ENOENT)
            break; /* the fetch failed: try the source itself */
    }
    /* Not cached (the tier is full of files needed sooner, or of fetches
     * in flight): a direct read, from the owner when there is one. */
    int owner = rc && rc != -ESTALE ? peer_choice(pf, e) : -1;
    bool planned = pf->track != NULL;
    pthread_rwlock_unlock(&pf->plan_lock);
    if (owner >= 0 && peer_read_direct(pf, id, e->size, (uint32_t)owner, &f->pbuf) == 0) {
        f->source = CFS_M_READS_PEER;
        waited = true;
        rc = 0;
    } else if (rc == 0) {
        f->has_h = true;
        f->kernel = f->h.kernel; /* staged: the kernel serves the reads */
        if (f->kernel)
            atomic_fetch_add(&pf->kernel_opens, 1);
    } else if (rc != -ESTALE) {
        rc = open_source(pf, id, &f->fd);
        f->source = CFS_M_READS_PFS;
        atomic_fetch_add(&pf->direct_opens, 1);
        waited = true;
    }
    if (waited)
        cfs_metrics_add(pf->m, CFS_M_STALL_NS, now_ns() - t0);
    /* The position moved.  Without a plan the prefetcher has nothing to
     * move to (set_seed wakes it when a plan comes). */
    if (planned)
        nudge(pf, new_epoch);
    if (rc) {
        pthread_mutex_destroy(&f->fd_mu);
        free(f);
        return rc;
    }
    /* Counted here, not at the first read: the reads of a staged file, or
     * of pages the kernel kept from an earlier open, never reach us. */
    cfs_metrics_add(pf->m, f->source, 1);
    *out = f;
    return 0;
}

/* A read of a staged file reached us: the kernel reclaimed some of its
 * pages.  The source answers (the tier gave its buffer to the kernel); with
 * keep_cache the reply refills the page cache. */
static int open_fallback(struct cfs_prefetch *pf, struct cfs_prefetch_file *f)
{
    int rc = 0;
    if (!atomic_exchange(&f->fell_back, true)) {
        cfs_metrics_add(pf->m, CFS_M_PAGECACHE_FALLBACK, 1);
        /* Now and then is the kernel's right; one open in ten is a host
         * that reclaims page cache hard, and the operator should know. */
        uint64_t n = atomic_fetch_add(&pf->kernel_fallbacks, 1) + 1;
        if (n >= 64 && n * 10 >= atomic_load(&pf->kernel_opens) &&
            !atomic_exchange(&pf->reclaim_warned, true))
            cfs_warn("page cache: the kernel reclaimed staged pages of %" PRIu64 " of %" PRIu64
                     " opens (memory pressure or proactive reclaim); their reads go to the "
                     "source; -o no_pagecache keeps the RAM tier in clairfs",
                     n, (uint64_t)atomic_load(&pf->kernel_opens));
    }
    pthread_mutex_lock(&f->fd_mu);
    if (f->fd < 0)
        rc = open_source(pf, f->id, &f->fd);
    pthread_mutex_unlock(&f->fd_mu);
    return rc;
}

int cfs_prefetch_read(struct cfs_prefetch *pf, struct cfs_prefetch_file *f, uint64_t off,
                      size_t size, void *scratch, struct cfs_prefetch_extent *x)
{
    memset(x, 0, sizeof(*x));
    x->fd = -1;
    if (f->pbuf) {
        if (off >= f->size)
            return 0;
        x->data = (const char *)f->pbuf + off;
        x->len = f->size - off < size ? (size_t)(f->size - off) : size;
        return 0;
    }
    if (f->kernel) {
        int rc = open_fallback(pf, f);
        if (rc)
            return rc;
    } else if (f->has_h) {
        if (off >= f->h.size)
            return 0;
        size_t n = f->h.size - off < size ? (size_t)(f->h.size - off) : size;
        if (f->h.data) {
            x->data = (const char *)f->h.data + off;
        } else {
            x->fd = f->h.fd;
            x->pos = f->h.offset + off;
        }
        x->len = n;
        return 0;
    }
    uint64_t t0 = now_ns();
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(f->fd, (char *)scratch + got, size - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int rc = -errno;
            cfs_metrics_add(pf->m, CFS_M_STALL_NS, now_ns() - t0);
            return rc;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    cfs_metrics_add(pf->m, CFS_M_STALL_NS, now_ns() - t0);
    cfs_metrics_add(pf->m, CFS_M_FETCH_BYTES_PFS, got);
    /* Checked at open; a change since may have mixed versions within
     * this open's reads (a local fstat: cheap next to the read). */
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, f->id);
    if (!e || !fd_is_catalogs(f->fd, e)) {
        char path[PATH_MAX];
        if (cfs_catalog_path(pf->cat, f->id, path, sizeof(path)) >= 0)
            mark_changed(pf, f->id, path);
        return -EIO;
    }
    x->data = scratch;
    x->len = got;
    return 0;
}

ssize_t cfs_prefetch_pread(struct cfs_prefetch *pf, struct cfs_prefetch_file *f, void *buf,
                           size_t size, uint64_t off)
{
    struct cfs_prefetch_extent x;
    int rc = cfs_prefetch_read(pf, f, off, size, buf, &x);
    if (rc)
        return rc;
    if (x.data) {
        if (x.data != buf)
            memcpy(buf, x.data, x.len);
        return (ssize_t)x.len;
    }
    size_t got = 0;
    while (got < x.len) {
        ssize_t n = pread(x.fd, (char *)buf + got, x.len - got, (off_t)(x.pos + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO; /* the entry was checked: it cannot be short */
        got += (size_t)n;
    }
    return (ssize_t)got;
}

bool cfs_prefetch_is_direct(const struct cfs_prefetch_file *f)
{
    return (!f->has_h || f->kernel) && !f->pbuf;
}

bool cfs_prefetch_keep_cache(const struct cfs_prefetch_file *f)
{
    return f->kernel;
}

uint64_t cfs_prefetch_file_size(const struct cfs_prefetch_file *f)
{
    return f->size;
}

void cfs_prefetch_release(struct cfs_prefetch *pf, struct cfs_prefetch_file *f)
{
    if (!f)
        return;
    bool ram = f->has_h && f->h.tier == CFS_TIER_RAM;
    if (f->has_h)
        cfs_cache_release(pf->cache, &f->h);
    if (f->fd >= 0)
        close(f->fd);
    free(f->pbuf);
    pthread_mutex_destroy(&f->fd_mu);
    /* Read for the last time: free the RAM now.  SSD entries stay, evicted
     * first when room is needed, for the next job that mounts the tier. */
    bool last = false;
    pthread_rwlock_rdlock(&pf->plan_lock);
    bool planned = pf->track != NULL;
    if (ram && f->sample != CFS_NO_SAMPLE)
        last = pf->track && pf_track_next_use(pf->track, f->sample) == PF_NEVER &&
               !owned_for_peers(pf, f->sample);
    pthread_rwlock_unlock(&pf->plan_lock);
    if (last && cfs_cache_drop(pf->cache, f->id) == 0)
        atomic_fetch_add(&pf->dropped, 1);
    else if (ram && !f->kernel)
        pf_stager_queue(atomic_load(&pf->stager), f->id); /* read again later: stage it */
    update_gauges(pf);
    if (planned)
        nudge(pf, false); /* room freed: a refused prefetch may start */
    free(f);
}

/* ---- page-cache staging */

static bool stage_eligible(void *arg, uint32_t id)
{
    struct cfs_prefetch *pf = arg;
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || !S_ISREG(e->mode) || e->size == 0 || is_changed(pf, id))
        return false;
    pthread_rwlock_rdlock(&pf->plan_lock);
    /* Without a plan too (the reactive LRU cache), unless an SSD tier is
     * there: LRU demotes RAM victims to it, and a staged entry has no
     * buffer to demote. */
    bool ok = (pf->track || pf->opts.ssd == 0) &&
              !(e->sample != CFS_NO_SAMPLE && owned_for_peers(pf, e->sample));
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
    wake(pf); /* a prefetch that waited for the zombies' room may start */
}

static void stage_gauges(void *arg)
{
    update_gauges(arg);
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
    struct pf_stager *st;
    int rc = pf_stager_create(&sp, &st);
    if (rc) {
        snprintf(err, errlen, "page cache: cannot start the stager: %s", strerror(-rc));
        return rc;
    }
    atomic_store(&pf->stager, st);
    /* What the prefetcher fetched before the stager existed. */
    for (uint32_t id = 0; id < sp.nentries; id++)
        if (cfs_cache_state(pf->cache, id) == CFS_CACHE_RAM)
            pf_stager_queue(st, id);
    return 0;
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
    update_gauges(pf);
}

/* ---- state, control, stats */

int cfs_prefetch_state(void *arg, cfs_id id, char *buf, size_t len)
{
    struct cfs_prefetch *pf = arg;
    enum cfs_cache_state st = cfs_cache_state(pf->cache, id);
    const char *s = cfs_cache_state_name(st);
    int n;
    uint32_t owner = PF_NO_NODE;
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (st == CFS_CACHE_ABSENT && pf->distributed && e && e->sample != CFS_NO_SAMPLE) {
        pthread_rwlock_rdlock(&pf->plan_lock);
        if (pf->track)
            owner = pf_track_owner(pf->track, e->sample, NULL, NULL);
        pthread_rwlock_unlock(&pf->plan_lock);
    }
    if (owner != PF_NO_NODE && owner != pf->node)
        n = snprintf(buf, len, "peer:%u", owner);
    else
        n = snprintf(buf, len, "%s", s);
    if (n < 0 || (size_t)n >= len)
        return -ERANGE;
    return 0;
}

struct provided {
    struct cfs_prefetch *pf;
    struct cfs_cache_handle h;
};

static void provide_release(void *arg, struct cfs_peer_view *v)
{
    struct provided *pv = arg;
    (void)v;
    cfs_cache_release(pv->pf->cache, &pv->h);
    free(pv);
}

int cfs_prefetch_provide(void *arg, uint32_t id, struct cfs_peer_view *v)
{
    struct cfs_prefetch *pf = arg;
    if (!pf->cache || id >= cfs_catalog_entry_count(pf->cat))
        return -ENOENT;
    struct provided *pv = malloc(sizeof(*pv));
    if (!pv)
        return -ENOMEM;
    pv->pf = pf;
    /* Never waits: a file in flight here is "not held" for the peer, which
     * then reads the PFS rather than stall the peer thread. */
    if (cfs_cache_acquire(pf->cache, id, 0, &pv->h) != 0) {
        free(pv);
        return -ENOENT;
    }
    if (pv->h.kernel) {
        /* Staged: the bytes are the kernel's (owned files never are). */
        cfs_cache_release(pf->cache, &pv->h);
        free(pv);
        return -ENOENT;
    }
    *v = (struct cfs_peer_view){
        .data = pv->h.data, .fd = pv->h.fd, .offset = pv->h.offset, .len = pv->h.size,
        .xxh3 = pv->h.xxh3, .has_xxh3 = true, .release = provide_release, .release_arg = pv,
        .priv = pv,
    };
    atomic_fetch_add(&pf->peer_served, 1);
    cfs_metrics_add(pf->m, CFS_M_PEER_SERVED_FILES, 1);
    return 0;
}

int cfs_prefetch_set_epoch(struct cfs_prefetch *pf, uint32_t epoch)
{
    int rc = 0;
    pthread_rwlock_rdlock(&pf->plan_lock);
    if (pf->track)
        rc = pf_track_set_epoch(pf->track, epoch);
    pthread_rwlock_unlock(&pf->plan_lock);
    if (rc)
        return rc;
    cfs_metrics_set(pf->m, CFS_M_EPOCH, epoch);
    if (pf->track)
        cfs_cache_set_policy(pf->cache, next_use_cb, pf);
    wake(pf);
    return 0;
}

int cfs_prefetch_set_seed(struct cfs_prefetch *pf, uint64_t seed, char *err, size_t errlen)
{
    struct pf_track *t = NULL, *old;
    if (pf->nsamples == 0)
        return 0;
    if (pf->distributed) {
        /* One node cannot re-plan alone: its peers would disagree on who
         * holds what.  Remount all nodes with the new seed. */
        snprintf(err, errlen, "a distributed mount cannot change its seed; remount every node");
        return -EOPNOTSUPP;
    }
    /* Plan outside every lock: the mount keeps serving meanwhile (opts
     * changes only here, and the ctl serialises commands). */
    struct cfs_options o = pf->opts;
    o.seed = seed;
    o.has_seed = true;
    int rc = track_create(pf, &o, err, errlen, &t);
    if (rc)
        return rc;
    pthread_rwlock_wrlock(&pf->plan_lock);
    cfs_cache_set_policy(pf->cache, NULL, NULL); /* no callback sees the swap */
    old = pf->track;
    pf->track = t;
    pf->opts.seed = seed;
    pf->opts.has_seed = true;
    pf->scan = 0;
    pf->scan_gen = UINT64_MAX;
    pf->order_idx[0] = pf->order_idx[1] = 0;
    cfs_cache_set_policy(pf->cache, next_use_cb, pf);
    pthread_rwlock_unlock(&pf->plan_lock);
    cfs_metrics_set(pf->m, CFS_M_EPOCH, pf->opts.start_epoch);
    pf_track_destroy(old);
    wake(pf);
    return 0;
}

int cfs_prefetch_command(void *arg, const struct cfs_ctl_cmd *cmd)
{
    struct cfs_prefetch *pf = arg;
    char err[256];
    switch (cmd->kind) {
    case CFS_CTL_CMD_EPOCH:
        return cfs_prefetch_set_epoch(pf, (uint32_t)cmd->value);
    case CFS_CTL_CMD_SEED: {
        int rc = cfs_prefetch_set_seed(pf, cmd->value, err, sizeof(err));
        if (rc)
            cfs_err("seed %" PRIu64 ": %s", cmd->value, err);
        return rc;
    }
    }
    return -EINVAL;
}

int cfs_prefetch_wait_idle(struct cfs_prefetch *pf, double timeout)
{
    struct timespec ts = pf_deadline((uint64_t)(timeout * 1e9));
    int rc = 0;
    pthread_mutex_lock(&pf->mu);
    while (rc == 0 && pf->running && (!pf->idle || pf->inflight))
        rc = -pthread_cond_timedwait(&pf->idle_cv, &pf->mu, &ts);
    pthread_mutex_unlock(&pf->mu);
    return rc ? -ETIMEDOUT : 0;
}

void cfs_prefetch_stats(struct cfs_prefetch *pf, struct cfs_prefetch_stats *out)
{
    struct cfs_cache_stats st;
    memset(out, 0, sizeof(*out));
    pthread_rwlock_rdlock(&pf->plan_lock);
    if (pf->track) {
        out->planned = true;
        pf_track_position(pf->track, &out->position, &out->epoch, NULL);
        out->window = pf_track_window(pf->track);
    }
    pthread_rwlock_unlock(&pf->plan_lock);
    if (!pf->cache)
        return;
    cfs_cache_stats(pf->cache, &st);
    out->prefetches = atomic_load(&pf->prefetches);
    out->demand_fetches = atomic_load(&pf->demand_fetches);
    out->direct_opens = atomic_load(&pf->direct_opens);
    out->dropped = atomic_load(&pf->dropped);
    for (int t = 0; t < 2; t++) {
        out->cache_bytes[t] = st.bytes[t];
        out->cache_capacity[t] = st.capacity[t];
        out->evictions[t] = st.evictions[t];
    }
    out->checksum_failures = st.checksum_failures;
    out->refetches = st.refetches;
    out->loaded = st.loaded;
    out->refused = st.refused;
    out->peer_fetches = atomic_load(&pf->peer_fetches);
    out->peer_fallbacks = atomic_load(&pf->peer_fallbacks);
    out->peer_served = atomic_load(&pf->peer_served);
    out->io_engine = cfs_io_describe(pf->io);
}
