/* The open/read/release path, called from the FUSE workers.
 *
 * An open tells the tracker (a prediction hit or miss; an epoch change
 * re-keys the cache), then takes a pinned cache handle: a resident entry is
 * served as it is, a fetch in flight is waited for, an absent file is
 * fetched on demand by the opening thread itself (a peer-owned file goes
 * to its owner at demand priority).  A room held by zombies is waited for
 * briefly.  When the cache will not take the file (Belady, or a tier full
 * of fetches in flight) the open reads it directly: from the owner into a
 * buffer of the open's own, else from the source through a file
 * descriptor, checked against the catalog's identity after the open and
 * after every read.  A staged file (the kernel serves its reads) opens its
 * source only when a read still reaches us (the kernel reclaimed pages).
 * Release drops a RAM entry read for the last time, or queues it for
 * staging when it will be read again.  Counting is in prefetch.h
 * ("Counting"). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/cache.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/model.h"
#include "clairfs/peer.h"
#include "clairfs/prefetch.h"
#include "prefetch_i.h"

struct cfs_prefetch_file {
    cfs_id id;
    uint32_t sample;
    uint64_t size;
    struct cfs_cache_handle h;
    bool has_h;
    int fd; /* direct reads from the source */
    void *pbuf; /* the bytes of a direct read from a peer (size bytes) */
    enum cfs_metric source;
    enum cfs_metric pfs_why;    /* CFS_M_PFS_BYTES_*: why direct reads go to the PFS */
    bool kernel;                /* staged: the kernel serves the reads */
    atomic_bool fell_back;      /* a read of a staged file reached us */
    pthread_mutex_t fd_mu;      /* a staged file's source fd opens at its first read */
};

/* An open seen by the tracker, by the sweep's passes and by order
 * identification (plan_lock held for reading).  True when it moved the
 * trainers to another epoch, or without an order to another pass; *learn
 * when the identify module must hear of it, *drop when the adopted order
 * is to be dropped, *over when it was one epoch's and that epoch is over
 * (all after unlocking). */
static bool observe(struct cfs_prefetch *pf, uint32_t sample, const struct cfs_opener *who,
                    bool *learn, bool *drop, bool *over)
{
    /* Outside the adopted order's root (a validation folder read between
     * epochs): no part of the order, neither hit nor miss but unplanned;
     * still heard by the identification, which learns that folder's own
     * order.  An evaluation pass it named is predicted on its own
     * (prefetch_eval.c) and counted there. */
    enum pf_eval_result ev =
        sample == CFS_NO_SAMPLE ? PF_EVAL_NONE : pf_eval_open(pf, sample, pf->run.window);
    bool eval_counted = ev == PF_EVAL_HIT || ev == PF_EVAL_MISS;
    if (eval_counted)
        cfs_metrics_add(pf->m, ev == PF_EVAL_HIT ? CFS_M_PREDICTION_EVAL_HIT
                                                 : CFS_M_PREDICTION_EVAL_MISS, 1);
    bool outside = sample != CFS_NO_SAMPLE &&
                   (ev != PF_EVAL_NONE || !pf_root_holds(pf->root, sample));
    *learn = sample != CFS_NO_SAMPLE && (outside || cfs_prefetch_learning(pf));
    *drop = *over = false;
    if (*learn && !outside)
        pf_learn_record(pf, sample);
    else if (!outside && sample != CFS_NO_SAMPLE &&
             atomic_load_explicit(&pf->extending, memory_order_relaxed))
        pf_seen_record(pf, sample);
    /* Counted with a tracker too: dropped, the order leaves the passes
     * where the opens have them. */
    bool pass_end = sample != CFS_NO_SAMPLE && pf_pass_open(pf, sample);
    if (sample != CFS_NO_SAMPLE && !eval_counted && (outside || !pf->track))
        cfs_metrics_add(pf->m, CFS_M_PREDICTION_UNPLANNED, 1);
    if (outside)
        return false;
    if (!pf->track) {
        if (pass_end)
            pf_policy_unordered(pf); /* every file is unread again: re-key */
        return pass_end;
    }
    struct pf_obs o;
    pf_track_open(pf->track, sample, &o);
    cfs_metrics_add(pf->m, o.hit ? CFS_M_PREDICTION_HIT : CFS_M_PREDICTION_MISS, 1);
    if (pf->adopted && sample != CFS_NO_SAMPLE)
        *drop = pf_adopted_outcome(pf, sample, who, o.hit);
    if (o.epoch_changed && pf->adopted && pf->epoch_only && o.epoch >= pf->run.epochs)
        *over = !atomic_exchange(&pf->drop_pending, true);
    if (o.epoch_changed) {
        /* Past the plan's last epoch nothing is predicted: the opens are
         * misses (counted; an identified order is dropped by them). */
        if (o.epoch >= pf->run.epochs)
            cfs_metrics_set(pf->m, CFS_M_ORDER_IDENTIFIED, 0);
        cfs_metrics_set(pf->m, CFS_M_EPOCH, o.epoch);
        cfs_cache_set_policy(pf->cache, pf_next_use_cb, pf); /* re-key every entry */
    }
    return o.epoch_changed;
}

/* What observe() asked for, done once plan_lock is released. */
static void observed(struct cfs_prefetch *pf, uint32_t sample, const struct cfs_opener *who,
                     bool learn, bool drop, bool over)
{
    if (learn)
        pf->id_ops->observe(pf->id_arg, sample, who ? who->pid : 0, who ? who->ppid : 0);
    if (drop)
        atomic_store(&pf->drop_owed, true);
    if (over)
        atomic_store(&pf->end_owed, true);
    pf_settle_owed(pf);
}

static enum cfs_metric tier_metric(enum cfs_tier t)
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
                            bool settled, void **out)
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
    uint64_t t0 = pf_now_ns();
    atomic_fetch_add(&pf->peer_inflight[node], 1);
    int rc = pf->peer_ops->submit(pf->peer, &w.r);
    if (rc == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = w.r.res >= 0 && (uint64_t)w.r.res == size ? 0 : w.r.res < 0 ? (int)w.r.res : -EIO;
    }
    atomic_fetch_sub(&pf->peer_inflight[node], 1);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (rc == 0) {
        uint64_t now = pf_now_ns();
        if (settled)
            cfs_model_peer_done(pf->model, node, size, t0, now);
        cfs_metrics_add(pf->m, CFS_M_FETCHES_PEER, 1);
        cfs_metrics_add(pf->m, CFS_M_FETCH_NS_PEER, now - t0);
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

/* A handle for an open of regular file id: its entry in *e, no bytes yet. */
static int file_new(struct cfs_prefetch *pf, cfs_id id, const struct cfs_entry **e,
                    struct cfs_prefetch_file **out)
{
    *e = cfs_catalog_entry(pf->cat, id);
    if (!*e)
        return -ENOENT;
    if (!S_ISREG((*e)->mode))
        return -EINVAL;
    struct cfs_prefetch_file *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->id = id;
    f->sample = (*e)->sample;
    f->size = (*e)->size;
    f->fd = -1;
    f->pfs_why = CFS_M_PFS_BYTES_UNHELD;
    pthread_mutex_init(&f->fd_mu, NULL);
    *out = f;
    return 0;
}

int cfs_prefetch_open_as(struct cfs_prefetch *pf, cfs_id id, const struct cfs_opener *who,
                         struct cfs_prefetch_file **out)
{
    const struct cfs_entry *e;
    struct cfs_prefetch_file *f;
    *out = NULL;
    int frc = file_new(pf, id, &e, &f);
    if (frc)
        return frc;

    pthread_rwlock_rdlock(&pf->plan_lock);
    bool learn, drop, over;
    bool new_epoch = observe(pf, e->sample, who, &learn, &drop, &over);
    /* With a plan, or the passes' keys, a file the policy would rather
     * not keep is read directly: no eviction of a file needed sooner. */
    unsigned demand_flags = pf->track || pf->pass_read ? 0 : CFS_CACHE_DEMAND;
    uint64_t t0 = pf_now_ns();
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
            rc = pf_fetch_start(pf, id, CFS_TIER_RAM, false, demand_flags, &fetched);
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
    int owner = rc && rc != -ESTALE ? pf_peer_choice(pf, e, true, &f->pfs_why) : -1;
    bool settled = owner >= 0 && pf_peer_settled(pf, e);
    bool prefetching = pf->track != NULL || pf->sweep;
    pthread_rwlock_unlock(&pf->plan_lock);
    observed(pf, e->sample, who, learn, drop, over);
    if (owner >= 0 && peer_read_direct(pf, id, e->size, (uint32_t)owner, settled, &f->pbuf) == 0) {
        f->source = CFS_M_READS_PEER;
        waited = true;
        rc = 0;
    } else if (rc == 0) {
        f->has_h = true;
        f->kernel = f->h.kernel; /* staged: the kernel serves the reads */
        if (f->kernel)
            atomic_fetch_add(&pf->kernel_opens, 1);
    } else if (rc != -ESTALE) {
        if (owner >= 0)
            f->pfs_why = CFS_M_PFS_BYTES_FALLBACK;
        rc = pf_open_source(pf, id, &f->fd);
        f->source = CFS_M_READS_PFS;
        atomic_fetch_add(&pf->direct_opens, 1);
        waited = true;
    }
    if (waited)
        cfs_metrics_add(pf->m, CFS_M_STALL_NS, pf_now_ns() - t0);
    /* The position moved (or, sweeping, a file was read: room to make).
     * Without a plan or a sweep the prefetcher has nothing to move to
     * (set_seed wakes it when a plan comes). */
    if (prefetching)
        pf_nudge(pf, new_epoch);
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

int cfs_prefetch_open_unseen(struct cfs_prefetch *pf, cfs_id id, struct cfs_prefetch_file **out)
{
    const struct cfs_entry *e;
    struct cfs_prefetch_file *f;
    *out = NULL;
    int rc = file_new(pf, id, &e, &f);
    if (rc)
        return rc;
    /* No sample: its release must not take it for the trainer's last read. */
    f->sample = CFS_NO_SAMPLE;
    f->source = CFS_M_READS_PFS;
    f->pfs_why = CFS_M_PFS_BYTES_RECLAIMED;
    rc = pf_open_source(pf, id, &f->fd);
    if (rc) {
        pthread_mutex_destroy(&f->fd_mu);
        free(f);
        return rc;
    }
    cfs_metrics_add(pf->m, CFS_M_PAGECACHE_FALLBACK, 1);
    *out = f;
    return 0;
}

/* An open the kernel made without asking (opens are off), seen afterwards
 * (fs.c's open watch): counted and observed as cfs_prefetch_open_as would,
 * but nothing is pinned or fetched, since the kernel serves the bytes from
 * the page cache, or asks for the pages it lacks with READs (open_unseen). */
int cfs_prefetch_open_seen(struct cfs_prefetch *pf, cfs_id id, const struct cfs_opener *who)
{
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e)
        return -ENOENT;
    if (!S_ISREG(e->mode))
        return -EINVAL;
    pthread_rwlock_rdlock(&pf->plan_lock);
    bool learn, drop, over;
    bool new_epoch = observe(pf, e->sample, who, &learn, &drop, &over);
    bool prefetching = pf->track != NULL || pf->sweep;
    pthread_rwlock_unlock(&pf->plan_lock);
    struct cfs_cache_handle h;
    enum cfs_metric source = CFS_M_READS_PFS; /* its pages are gone: READs to the source */
    if (cfs_cache_acquire(pf->cache, id, 0, &h) == 0) {
        source = tier_metric(h.tier);
        cfs_cache_release(pf->cache, &h);
    }
    observed(pf, e->sample, who, learn, drop, over);
    if (prefetching)
        pf_nudge(pf, new_epoch);
    atomic_fetch_add(&pf->kernel_opens, 1);
    cfs_metrics_add(pf->m, source, 1);
    return 0;
}

/* The close of such an open: read for the last time, its RAM is freed as
 * cfs_prefetch_release frees a file opened through clairfs. */
void cfs_prefetch_close_seen(struct cfs_prefetch *pf, cfs_id id)
{
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || !S_ISREG(e->mode) || e->sample == CFS_NO_SAMPLE)
        return;
    struct cfs_cache_handle h;
    if (cfs_cache_acquire(pf->cache, id, 0, &h) != 0)
        return;
    bool ram = h.tier == CFS_TIER_RAM;
    cfs_cache_release(pf->cache, &h);
    pthread_rwlock_rdlock(&pf->plan_lock);
    bool last = ram && pf->track && pf_sample_next_use(pf, e->sample) == PF_NEVER;
    pthread_rwlock_unlock(&pf->plan_lock);
    if (last && cfs_cache_drop(pf->cache, id) == 0) {
        atomic_fetch_add(&pf->dropped, 1);
        pf_update_gauges(pf);
        pf_nudge(pf, false);
    }
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
    f->pfs_why = CFS_M_PFS_BYTES_RECLAIMED;
    if (f->fd < 0)
        rc = pf_open_source(pf, f->id, &f->fd);
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
    uint64_t t0 = pf_now_ns();
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(f->fd, (char *)scratch + got, size - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int rc = -errno;
            cfs_metrics_add(pf->m, CFS_M_STALL_NS, pf_now_ns() - t0);
            return rc;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    cfs_metrics_add(pf->m, CFS_M_STALL_NS, pf_now_ns() - t0);
    cfs_metrics_add(pf->m, CFS_M_FETCH_BYTES_PFS, got);
    cfs_metrics_add(pf->m, f->pfs_why, got);
    /* Checked at open; a change since may have mixed versions within
     * this open's reads (a local fstat: cheap next to the read). */
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, f->id);
    if (!e || !pf_fd_is_catalogs(f->fd, e)) {
        char path[PATH_MAX];
        if (cfs_catalog_path(pf->cat, f->id, path, sizeof(path)) >= 0)
            pf_mark_changed(pf, f->id, path);
        return -EIO;
    }
    x->data = scratch;
    x->len = got;
    return 0;
}

bool cfs_prefetch_is_direct(const struct cfs_prefetch_file *f)
{
    return (f->kernel || !f->has_h) && !f->pbuf;
}

bool cfs_prefetch_read_in_memory(const struct cfs_prefetch_file *f)
{
    return f->pbuf || (!f->kernel && f->has_h && f->h.data);
}

bool cfs_prefetch_keep_cache(const struct cfs_prefetch_file *f)
{
    return f->kernel;
}

uint64_t cfs_prefetch_file_size(const struct cfs_prefetch_file *f)
{
    return f->size;
}

/* The kernel serves a staged file's reads from its pages and never reads
 * the tier through the handle, so the pin can go before the release: the
 * close the open watch sees then drops the file after its last read. */
void cfs_prefetch_unpin(struct cfs_prefetch *pf, struct cfs_prefetch_file *f)
{
    if (!f || !f->kernel || !f->has_h)
        return;
    cfs_cache_release(pf->cache, &f->h);
    f->has_h = false;
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
    bool prefetching = pf->track != NULL || pf->sweep;
    if (ram && f->sample != CFS_NO_SAMPLE)
        last = pf->track && pf_sample_next_use(pf, f->sample) == PF_NEVER;
    pthread_rwlock_unlock(&pf->plan_lock);
    if (last && cfs_cache_drop(pf->cache, f->id) == 0)
        atomic_fetch_add(&pf->dropped, 1);
    else if (ram && !f->kernel)
        pf_stager_queue(atomic_load(&pf->stager), f->id); /* read again later: stage it */
    pf_update_gauges(pf);
    if (prefetching)
        pf_nudge(pf, false); /* room freed: a refused prefetch may start */
    free(f);
}
