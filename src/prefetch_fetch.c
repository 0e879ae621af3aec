/* One fetch, from the PFS or from a peer, and the source's identity.
 *
 * A fetch lives from pf_fetch_start to fetch_finish: the cache entry is
 * begun (its buffer reserved), the bytes are asked from the owner when the
 * plan names another node that already holds the file and the model says
 * it is faster, else from the io engine (or, for a demand fetch whose
 * opener waits anyway, read in the opener's thread).  A peer answer that is
 * not the bytes resubmits the same fetch to the io engine.  fetch_finish
 * publishes or fails the entry, counts the bytes by origin and wakes the
 * prefetcher; SSD-bound completions go through the finisher thread, since
 * the io engine's callbacks must not block on the disk.
 *
 * Identity ("Exactness" in prefetch.h): a fetch from the source publishes
 * its bytes only when the file's size and mtime after the last read are
 * still the catalog's; a file found changed is remembered in a bitmap,
 * counted and logged once (pf_mark_changed, prefetch_state.c: the stager
 * and the open path ask it too). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "clairfs/cache.h"
#include "clairfs/io.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/model.h"
#include "clairfs/peer.h"
#include "clairfs/prefetch.h"
#include "prefetch_i.h"

struct fetch {
    struct cfs_io_req req;
    struct cfs_peer_req preq; /* when asked from a peer first */
    uint64_t t0;              /* when the peer or the PFS was asked, ns */
    bool via_peer;            /* the bytes are coming from preq.node */
    bool settled;             /* pf_peer_settled when the peer was asked */
    enum cfs_metric why;      /* CFS_M_PFS_BYTES_*: why the PFS, when it is read */
    struct cfs_prefetch *pf;
    struct fetch *qnext;
    uint32_t id;
    enum cfs_tier tier;
    bool prefetch;
    char path[];
};

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

int pf_source_cb(void *arg, uint32_t id, struct cfs_cache_source *out)
{
    return source_of(arg, id, out);
}


/* ---- the source's identity (see "Exactness" in prefetch.h) */

/* The file as observed (size, mtime) is still the catalog's entry e. */
static bool same_identity(const struct cfs_entry *e, uint64_t size, int64_t msec, uint32_t mnsec)
{
    return size == e->size && msec == e->mtime_sec && mnsec == e->mtime_nsec;
}

bool pf_fd_is_catalogs(int fd, const struct cfs_entry *e)
{
    struct stat st;
    return fstat(fd, &st) == 0 && same_identity(e, (uint64_t)st.st_size, st.st_mtim.tv_sec,
                                                (uint32_t)st.st_mtim.tv_nsec);
}

/* -ESTALE matters: the kernel has the catalog's size, so a changed file
 * would be served cut short, or padded. */
int pf_open_source(struct cfs_prefetch *pf, uint32_t id, int *fd)
{
    char path[PATH_MAX];
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    int rc = cfs_catalog_path(pf->cat, id, path, sizeof(path));
    if (rc < 0)
        return rc;
    int sfd = openat(pf->source_fd, path, O_RDONLY | O_CLOEXEC);
    if (sfd < 0)
        return -errno;
    if (!pf_fd_is_catalogs(sfd, e)) {
        close(sfd);
        pf_mark_changed(pf, id, path);
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
        pf_mark_changed(pf, f->id, f->path);
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
    if (res > 0) {
        cfs_metrics_add(pf->m, peer ? CFS_M_FETCH_BYTES_PEER : CFS_M_FETCH_BYTES_PFS,
                        (uint64_t)res);
        if (!peer)
            cfs_metrics_add(pf->m, f->why, (uint64_t)res);
    }
    if (res > 0) {
        uint64_t now = pf_now_ns();
        cfs_metrics_add(pf->m, peer ? CFS_M_FETCHES_PEER : CFS_M_FETCHES_PFS, 1);
        cfs_metrics_add(pf->m, peer ? CFS_M_FETCH_NS_PEER : CFS_M_FETCH_NS_PFS, now - f->t0);
        if (!f->via_peer)
            cfs_model_pfs_done(pf->model, (uint64_t)res, f->t0, now);
    }
    if (crc < 0 && rc == 0 && f->tier == CFS_TIER_SSD &&
        !atomic_exchange(&pf->ssd_error_logged, true))
        cfs_warn("SSD tier: writing an entry failed (%s); the tier keeps what it has",
                 strerror(-crc));
    pf_update_gauges(pf);
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

void *pf_finisher_main(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-finisher");
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

bool pf_peer_settled(struct cfs_prefetch *pf, const struct cfs_entry *e)
{
    if (!pf->track || e->sample == CFS_NO_SAMPLE)
        return false;
    uint32_t epoch, from;
    pf_track_position(pf->track, NULL, &epoch, NULL);
    (void)pf_track_owner(pf->track, e->sample, NULL, &from);
    return epoch - pf_track_start_epoch(pf->track) > from;
}

int pf_peer_choice(struct cfs_prefetch *pf, const struct cfs_entry *e, bool waiting,
                   enum cfs_metric *why)
{
    *why = CFS_M_PFS_BYTES_UNHELD;
    if (!pf->distributed || !pf->track || e->sample == CFS_NO_SAMPLE || e->size == 0)
        return -1;
    enum cfs_tier tier;
    uint32_t from;
    uint32_t owner = pf_track_owner(pf->track, e->sample, &tier, &from);
    if (owner == PF_NO_NODE || owner == pf->node || owner >= pf->nodes)
        return -1;
    /* Before the cluster's first read of the file its owner has not
     * staged it: the PFS, without a round trip that would say so. */
    uint32_t epoch;
    pf_track_position(pf->track, NULL, &epoch, NULL);
    *why = CFS_M_PFS_BYTES_UNREAD;
    if (epoch - pf_track_start_epoch(pf->track) < from)
        return -1;
    bool slow = pf->peer_ops->node_state(pf->peer, owner) != CFS_PEER_UP;
    *why = slow ? CFS_M_PFS_BYTES_SLOW : CFS_M_PFS_BYTES_MODEL;
    /* A read the trainer waits on now waits behind what is in flight to
     * the owner (the peer layer answers in order); a prefetch's wait costs
     * nothing while the prefetcher is ahead. */
    uint32_t queued = waiting ? atomic_load(&pf->peer_inflight[owner]) : 0;
    if (cfs_model_choose(pf->model, owner, tier, e->size, queued, slow) != CFS_MODEL_PEER)
        return -1;
    return (int)owner;
}

/* The peer answered (on the peer thread): the bytes, or the same fetch
 * again from the PFS. */
static void peer_done(struct cfs_peer_req *r)
{
    struct fetch *f = r->arg;
    struct cfs_prefetch *pf = f->pf;
    uint64_t now = pf_now_ns();
    atomic_fetch_sub(&pf->peer_inflight[r->node], 1);
    if (r->res >= 0 && (uint64_t)r->res == f->req.size_hint) {
        if (f->settled)
            cfs_model_peer_done(pf->model, r->node, (uint64_t)r->res, f->t0, now);
        atomic_fetch_add(&pf->peer_fetches, 1);
        cfs_metrics_add(pf->m, CFS_M_PEER_FETCH_OK, 1);
        f->req.res = r->res;
        fetch_done(&f->req);
        return;
    }
    atomic_fetch_add(&pf->peer_fallbacks, 1);
    cfs_metrics_add(pf->m, CFS_M_PEER_FETCH_FALLBACK, 1);
    cfs_debug("peer %u: file %u: %s; reading the PFS", r->node, r->id, strerror((int)-r->res));
    f->via_peer = false;
    f->why = CFS_M_PFS_BYTES_FALLBACK;
    f->t0 = now;
    int rc = cfs_io_submit(pf->io, &f->req);
    if (rc) {
        f->req.res = rc;
        (void)fetch_finish(f);
    }
}

/* Begin the fetch of id into the tier the plan gives it (a file no tier
 * holds goes to RAM, just ahead of its use) and submit it.  0, or the cache's
 * begin_fetch error (-EEXIST, -ENOSPC, -EAGAIN, -EFBIG, -ENODEV, ...).
 * With sync_res (a demand fetch whose caller waits for it anyway) a fetch
 * from the source runs in the calling thread: 0 then means it is complete
 * and *sync_res is what its waiters got (0 or the fetch's error); a fetch
 * from a peer is submitted as usual and leaves *sync_res alone. */
int pf_fetch_start(struct cfs_prefetch *pf, uint32_t id, enum cfs_tier planned, bool prefetch,
                   unsigned cache_flags, int *sync_res)
{
    enum cfs_tier tier = planned == CFS_TIER_NONE ? CFS_TIER_RAM : planned;
    char path[PATH_MAX];
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || !S_ISREG(e->mode))
        return -EINVAL;
    if (pf_is_changed(pf, id))
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
    f->t0 = pf_now_ns();
    int owner = pf_peer_choice(pf, e, !prefetch, &f->why);
    if (owner >= 0) {
        f->preq = (struct cfs_peer_req){
            .node = (uint32_t)owner, .id = id, .buf = buf, .cap = (size_t)e->size,
            .size_hint = e->size, .done = peer_done, .arg = f,
        };
        f->via_peer = true;
        f->settled = pf_peer_settled(pf, e);
        f->t0 = pf_now_ns();
        atomic_fetch_add(&pf->peer_inflight[owner], 1);
        if (pf->peer_ops->submit(pf->peer, &f->preq) == 0)
            return 0;
        atomic_fetch_sub(&pf->peer_inflight[owner], 1);
        f->via_peer = false; /* slow, gone or not started: the PFS */
        f->why = CFS_M_PFS_BYTES_SLOW;
        f->t0 = pf_now_ns();
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
