/* The prefetcher's state and control: create/start/destroy, the cache's
 * eviction key (the tracker's next use; owned files count as needed now),
 * the wake-ups and gauges the other threads share, the `control` commands
 * (epoch, seed), stats, the state xattr, and serving this node's entries
 * to its peers.  The design is at the top of include/clairfs/prefetch.h;
 * the files of the data path and the map of threads and locks are at the
 * top of prefetch_i.h. */
#include "clairfs/prefetch.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "clairfs/cache.h"
#include "clairfs/index.h"
#include "clairfs/io.h"
#include "clairfs/log.h"
#include "clairfs/model.h"
#include "clairfs/peer.h"
#include "clairfs/plan.h"
#include "prefetch_i.h"

void pf_wake(struct cfs_prefetch *pf)
{
    pthread_mutex_lock(&pf->mu);
    pf->wake_seq++;
    pf->idle = false;
    pthread_cond_signal(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

/* The trainers moved (an open, a release).  Waking the prefetcher costs two
 * context switches, as much as serving a staged file's open, and one open
 * rarely gives it more than one file to start: wake it every NUDGE_EVERY
 * moves (the window ahead of the trainers is ~1000 files deep), and at once
 * when the epoch changed (the next one is materialised). */
#define NUDGE_EVERY 16u

void pf_nudge(struct cfs_prefetch *pf, bool now)
{
    if (now || atomic_fetch_add(&pf->moves, 1) + 1 >= NUDGE_EVERY) {
        atomic_store(&pf->moves, 0);
        pf_wake(pf);
    }
}

/* Serialised, so that the last writer publishes the newest figures: a
 * thread that read the stats before another's change cannot overwrite the
 * gauges after it. */
void pf_update_gauges(struct cfs_prefetch *pf)
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

bool pf_owned_for_peers(const struct cfs_prefetch *pf, uint32_t s)
{
    return pf->distributed && pf->track &&
           pf_track_owner(pf->track, s, NULL, NULL) == pf->node;
}

/* Owned files count as needed now, for the whole run. */
uint64_t pf_sample_next_use(struct cfs_prefetch *pf, uint32_t s)
{
    if (pf_owned_for_peers(pf, s))
        return 0;
    return pf_track_next_use(pf->track, s);
}

uint64_t pf_next_use_cb(void *arg, uint32_t id)
{
    struct cfs_prefetch *pf = arg;
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || e->sample == CFS_NO_SAMPLE || !pf->track)
        return UINT64_MAX;
    return pf_sample_next_use(pf, e->sample);
}

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
    pf->peer_ops = p->peer_ops ? p->peer_ops : &cfs_peer_single_ops;
    pf->peer = p->peer;
    pf->nodes = pf->peer_ops->nodes(pf->peer);
    pf->node = pf->peer_ops->node(pf->peer);
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
        .source = pf_source_cb, .source_arg = pf,
        .next_use = pf->track ? pf_next_use_cb : NULL, .next_use_arg = pf,
        .kernel_drop = pf->opts.no_pagecache ? NULL : pf_kernel_drop_cb, .kernel_drop_arg = pf,
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
    rc = -pthread_create(&pf->finisher, NULL, pf_finisher_main, pf);
    if (rc == 0) {
        pf->fin_running = true;
        rc = -pthread_create(&pf->thread, NULL, pf_prefetch_main, pf);
    }
    if (rc) {
        snprintf(err, errlen, "prefetch: cannot start a thread: %s", strerror(-rc));
        return rc;
    }
    pf->running = true;
    pf_update_gauges(pf);
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
        cfs_cache_set_policy(pf->cache, pf_next_use_cb, pf);
    pf_wake(pf);
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
    cfs_cache_set_policy(pf->cache, pf_next_use_cb, pf);
    pthread_rwlock_unlock(&pf->plan_lock);
    cfs_metrics_set(pf->m, CFS_M_EPOCH, pf->opts.start_epoch);
    pf_track_destroy(old);
    pf_wake(pf);
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
