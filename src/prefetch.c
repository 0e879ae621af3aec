/* The prefetcher's top: create/start/destroy, the `control` commands
 * (epoch, seed), stats, the state xattr, and serving this node's entries
 * to its peers: what the daemon calls besides the open path
 * (prefetch_open.c).  It calls down into the other files and none of them
 * calls it: the state they share, and what each does to it (wake-ups,
 * gauges, eviction keys, the plan's replacement), is prefetch_state.c's,
 * so that a change here cannot reach back into a thread of the data path.
 * The design is at the top of include/clairfs/prefetch.h; the layers and
 * the map of threads and locks are at the top of prefetch_i.h. */
#include "clairfs/prefetch.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/cache.h"
#include "clairfs/index.h"
#include "clairfs/io.h"
#include "clairfs/log.h"
#include "clairfs/model.h"
#include "clairfs/peer.h"
#include "clairfs/plan.h"
#include "clairfs/run_config.h"
#include "prefetch_i.h"

/* pf->run := a deep copy of *run (node_ranks and the sampler's list). */
static int keep_run_config(struct cfs_prefetch *pf, const struct cfs_run_config *run)
{
    pf->run = *run;
    pf->plan_span = run->epochs > run->start_epoch ? run->epochs - run->start_epoch : 100;
    pf->run.node_ranks = malloc(run->nodes * sizeof(*run->node_ranks));
    pf->run.sampler.list_path = NULL;
    if (!pf->run.node_ranks)
        return -ENOMEM;
    memcpy(pf->run.node_ranks, run->node_ranks, run->nodes * sizeof(*run->node_ranks));
    if (run->sampler.list_path && !(pf->sampler_list = strdup(run->sampler.list_path)))
        return -ENOMEM;
    pf->run.sampler.list_path = pf->sampler_list;
    return 0;
}

/* The configuration must be of this catalog and of the peers' node. */
static int check_run_config(const struct cfs_prefetch *pf, char *err, size_t errlen)
{
    uint32_t nodes = pf->peer_ops->nodes(pf->peer), node = pf->peer_ops->node(pf->peer);
    if (pf->run.nodes != nodes || pf->run.node != node) {
        snprintf(err, errlen,
                 "prefetch: a run configuration of node %u of %u, the peers say %u of %u",
                 pf->run.node, pf->run.nodes, node, nodes);
        return -EINVAL;
    }
    if (pf->run.sampler.n != pf->nsamples) {
        snprintf(err, errlen,
                 "prefetch: a run configuration of %" PRIu64 " samples, the catalog has %" PRIu64,
                 pf->run.sampler.n, pf->nsamples);
        return -EINVAL;
    }
    return 0;
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
    /* Writers first.  An open holds the read side while its demand fetch
     * runs, and a trainer's workers keep one in flight at nearly every
     * moment: with readers first, a re-plan waited for a moment when none
     * held it (an adoption at ImageNet size over the emulated PFS: 17 and
     * 62 s for 1.5 CPU s of planning).  Now it waits for the opens in
     * flight only, and new opens wait for it.  No thread takes the read
     * side twice (the second would wait behind a waiting writer). */
    pthread_rwlockattr_t plan_attr;
    pthread_rwlockattr_init(&plan_attr);
    pthread_rwlockattr_setkind_np(&plan_attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&pf->plan_lock, &plan_attr);
    pthread_rwlockattr_destroy(&plan_attr);
    pthread_mutex_init(&pf->mu, NULL);
    pthread_mutex_init(&pf->gauge_mu, NULL);
    pthread_mutex_init(&pf->zombie_mu, NULL);
    pthread_mutex_init(&pf->retrieve_mu, NULL);
    pthread_mutex_init(&pf->kernel_mu, NULL);
    pthread_cond_init(&pf->zombie_cv, NULL);
    pthread_cond_init(&pf->cv, NULL);
    pthread_cond_init(&pf->idle_cv, NULL);
    pthread_cond_init(&pf->fin_cv, NULL);
    pf_identify_init(pf);
    pf->cat = p->catalog;
    pf->m = p->metrics;
    pf->source_fd = p->source_fd;
    pf->opts = *p->opts;
    pf->opts.order_list = pf->opts.ssd_dir = pf->opts.index_dir = NULL;
    pf->opts.sampler_list = pf->opts.model_file = pf->opts.record_opens = NULL;
    pf->peer_ops = p->peer_ops ? p->peer_ops : &cfs_peer_single_ops;
    pf->peer = p->peer;
    if (keep_run_config(pf, p->run) < 0)
        goto nomem;
    pf->order_state = pf->run.seeded ? PF_ORDER_REGISTERED : PF_ORDER_OFF;
    pf->nsamples = cfs_catalog_sample_count(pf->cat);
    if ((rc = check_run_config(pf, err, errlen)) < 0)
        goto fail;
    pf->nodes = pf->run.nodes;
    pf->node = pf->run.node;
    pf->distributed = pf->run.distributed;
    struct cfs_model_params mp;
    cfs_model_defaults(&mp);
    if (p->opts->model_file && (rc = cfs_model_load(p->opts->model_file, &mp, err, errlen)) < 0)
        goto fail;
    if (cfs_model_create(&mp, pf->nodes, pf->nodes, &pf->model) < 0 ||
        !(pf->peer_inflight = calloc(pf->nodes, sizeof(*pf->peer_inflight))))
        goto nomem;
    pf->progress = p->progress;
    pf->progress_interval = p->progress_interval;
    if ((p->ssd_dir && !(pf->ssd_dir = strdup(p->ssd_dir))) ||
        (p->index_dir && !(pf->index_dir = strdup(p->index_dir))))
        goto nomem;

    pf->sizes = malloc((pf->nsamples ? pf->nsamples : 1) * sizeof(*pf->sizes));
    if (!pf->sizes)
        goto nomem;
    for (uint64_t i = 0; i < pf->nsamples; i++)
        pf->sizes[i] = cfs_catalog_entry(pf->cat, cfs_catalog_sample_entry(pf->cat, i))->size;
    /* Every epoch reads every sample once (on one node), so while the
     * order is unknown any file not yet read in the current pass is read
     * before the pass ends: the sweep stages those into RAM at the PFS's
     * full rate instead of one open at a time.  Where RAM is short it
     * makes room by evicting files already read in the pass, never one not
     * yet read (prefetch_state.c, "The passes"), so the source stays busy
     * for the whole epoch and fetches each file once; an identified order
     * (Belady) then keeps what was staged until read.  Not on a
     * distributed mount (each node reads its share only, and the PFS would
     * serve the dataset once per node), nor without a RAM tier. */
    pf->sweep = !pf->run.seeded && !pf->distributed && pf->opts.sweep != CFS_SWEEP_OFF &&
                pf->nsamples > 0 &&
                pf->run.ram > 0;
    if (pf->sweep && !(pf->pass_read = calloc(pf->nsamples, sizeof(*pf->pass_read))))
        goto nomem;

    if (pf->run.seeded && pf->nsamples > 0) {
        rc = pf_tracker_of_run(pf, &pf->run, err, errlen, &pf->track);
        if (rc)
            goto fail;
        cfs_metrics_set(pf->m, CFS_M_EPOCH, pf->run.start_epoch);
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
    if (pf->run.ssd && pf->index_dir) {
        /* The index only makes the SSD tier survive a remount: one that
         * cannot open (a full disk) costs that, not the mount. */
        rc = cfs_index_open(pf->index_dir, &pf->index, err, errlen);
        if (rc == -ENOMEM)
            return rc;
        if (rc) {
            cfs_warn("%s; the SSD tier serves without persisting its entries", err);
            err[0] = '\0';
            pf->index = NULL;
            pf->index_unopened = true; /* counted as a refused write */
        }
    }
    struct cfs_cache_params cp = {
        .nfiles = cfs_catalog_entry_count(pf->cat), .ram_bytes = pf->run.ram,
        .ssd_bytes = pf->run.ssd, .ssd_dir = pf->ssd_dir, .index = pf->index,
        .source = pf_source_cb, .source_arg = pf,
        .next_use = pf->track ? pf_next_use_cb : pf->pass_read ? pf_pass_key_cb : NULL,
        .next_use_arg = pf,
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
    uint64_t dataset = cfs_catalog_total_bytes(pf->cat);
    uint64_t window_tier = pf->run.ram ? pf->run.ram : pf->run.ssd;
    pf->window_tier_files =
        dataset ? (uint64_t)((double)window_tier * (double)cfs_catalog_sample_count(pf->cat) /
                             (double)dataset)
                : 0;
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

void cfs_prefetch_stop(struct cfs_prefetch *pf)
{
    if (!pf || !pf->running)
        return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = true;
    pthread_cond_signal(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    pthread_join(pf->thread, NULL);
    pthread_mutex_lock(&pf->mu);
    pf->running = false; /* wait_idle reads it under mu */
    pthread_mutex_unlock(&pf->mu);
}

void cfs_prefetch_destroy(struct cfs_prefetch *pf)
{
    if (!pf)
        return;
    cfs_prefetch_stop(pf);
    cfs_io_destroy(pf->io); /* every callback has run after it */
    if (pf->fin_running) {
        pthread_mutex_lock(&pf->mu);
        pf->fin_stop = true;
        pthread_cond_signal(&pf->fin_cv);
        pthread_mutex_unlock(&pf->mu);
        pthread_join(pf->finisher, NULL);
    }
    /* The retrievals' pins first: the last one of a dropped kernel entry
     * kicks the stager, and the cache must still be there. */
    pf_retrieve_destroy(pf);
    pf_stager_destroy(atomic_load(&pf->stager));
    cfs_cache_destroy(pf->cache);
    cfs_index_close(pf->index);
    pf_track_destroy(pf->track);
    cfs_model_destroy(pf->model);
    free(pf->from_node);
    free((void *)pf->changed);
    free(pf->peer_inflight);
    cfs_run_config_free(&pf->run);
    free(pf->sampler_list);
    free(pf->ssd_dir);
    free(pf->index_dir);
    free(pf->sizes);
    free((void *)pf->pass_read);
    pthread_cond_destroy(&pf->fin_cv);
    pthread_cond_destroy(&pf->idle_cv);
    pthread_cond_destroy(&pf->cv);
    pthread_mutex_destroy(&pf->mu);
    pthread_mutex_destroy(&pf->gauge_mu);
    pthread_cond_destroy(&pf->zombie_cv);
    pthread_mutex_destroy(&pf->zombie_mu);
    pthread_mutex_destroy(&pf->retrieve_mu);
    pthread_mutex_destroy(&pf->kernel_mu);
    pthread_rwlock_destroy(&pf->plan_lock);
    pf_identify_free(pf);
    pf_evals_free(pf);
    free(pf);
}

int cfs_prefetch_predict_pass(struct cfs_prefetch *pf, const char *root, const uint32_t *map,
                              uint64_t n, uint32_t stride)
{
    int rc = pf_eval_add(pf, root, map, n, stride);
    if (rc == 0) {
        cfs_info("order: the validation pass over %s (%" PRIu64 " files, world=%u) is predicted: "
                 "kept after each epoch where the tiers hold it, else staged before the epoch "
                 "ends",
                 root, n, stride);
        pf_wake(pf);
    } else if (rc != -EEXIST) {
        cfs_warn("order: the validation pass over %s is not predicted: %s", root, strerror(-rc));
    }
    return rc == -EEXIST ? 0 : rc;
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

/* A peer asks for a file this node owns but has not fetched yet (its
 * prefetcher had not reached it): fetch it now, for the peer, if there is
 * free room.  -EAGAIN when the fetch is under way, else -ENOENT.  Never waits for the plan lock (this
 * runs on the peer thread). */
static int provide_fetch_owned(struct cfs_prefetch *pf, uint32_t id)
{
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || e->sample == CFS_NO_SAMPLE || pthread_rwlock_tryrdlock(&pf->plan_lock) != 0)
        return -ENOENT;
    int rc = -ENOENT;
    if (pf->track && pf_owned_for_peers(pf, e->sample)) {
        enum cfs_tier tier = pf_track_tier(pf->track, e->sample);
        /* Into free room only: an eviction may demote to the SSD tier,
         * a disk write this thread must not wait for. */
        rc = pf_fetch_start(pf, id, tier, true, CFS_CACHE_NO_EVICT, NULL);
        if (rc == 0)
            cfs_metrics_add(pf->m, CFS_M_PEER_LATE, 1);
        rc = rc == 0 || rc == -EEXIST ? -EAGAIN : -ENOENT;
    }
    pthread_rwlock_unlock(&pf->plan_lock);
    return rc;
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
    /* Never waits: a file in flight here is -EAGAIN, and the peer layer
     * holds the reply back until it is published (peer_defer.c), so that
     * the asker does not read the same bytes from the PFS. */
    int rc = cfs_cache_acquire(pf->cache, id, 0, &pv->h);
    if (rc == -ENOENT)
        rc = provide_fetch_owned(pf, id);
    if (rc != 0) {
        free(pv);
        return rc == -EAGAIN ? -EAGAIN : -ENOENT;
    }
    if (pv->h.kernel) {
        /* Staged: the bytes are the kernel's; read them back, pinned. */
        struct cfs_cache_handle h = pv->h;
        free(pv);
        rc = pf_retrieve_provide(pf, id, &h, v);
        if (rc == 0) {
            atomic_fetch_add(&pf->peer_served, 1);
            cfs_metrics_add(pf->m, CFS_M_PEER_SERVED_FILES, 1);
        }
        return rc;
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

static void keep_adopted(struct cfs_prefetch *pf, struct pf_track *t, void *arg)
{
    (void)t;
    pf->adopted = *(bool *)arg;
}

/* An epoch of the run outside the plan's window: the window from there. */
static int plan_window_at(struct cfs_prefetch *pf, uint32_t epoch)
{
    char err[256];
    pthread_mutex_lock(&pf->replan_mu);
    pthread_rwlock_rdlock(&pf->plan_lock);
    struct cfs_run_config run = pf->run;
    bool adopted = pf->adopted, planned = pf->track != NULL;
    pthread_rwlock_unlock(&pf->plan_lock);
    int rc = -ERANGE;
    if (planned && epoch < run.epochs) {
        run.start_epoch = epoch;
        rc = pf_replan(pf, &run, keep_adopted, &adopted, err, sizeof(err));
        if (rc < 0)
            cfs_warn("order: planning the window from epoch %u: %s", epoch, err);
    }
    pthread_mutex_unlock(&pf->replan_mu);
    return rc;
}

/* "epoch N": the trainer starts epoch N. */
static int set_epoch(struct cfs_prefetch *pf, uint32_t epoch)
{
    int rc = 0;
    pthread_rwlock_rdlock(&pf->plan_lock);
    if (pf->track)
        rc = pf_track_set_epoch(pf->track, epoch);
    pthread_rwlock_unlock(&pf->plan_lock);
    if (rc == -ERANGE) /* outside the window (run_config.h) */
        rc = plan_window_at(pf, epoch);
    if (rc)
        return rc;
    cfs_metrics_set(pf->m, CFS_M_EPOCH, epoch);
    if (pf->track)
        cfs_cache_set_policy(pf->cache, pf_next_use_cb, pf);
    pf_wake(pf);
    return 0;
}

/* "seed N": re-plan this node's run with seed N.  A registered seed
 * replaces an adopted order. */
static int set_seed(struct cfs_prefetch *pf, uint64_t seed, char *err, size_t errlen)
{
    if (cfs_catalog_order_unavailable(pf->cat)) {
        snprintf(err, errlen, "no index order to plan with (%s)",
                 cfs_catalog_order_unavailable(pf->cat));
        return -ENOEXEC;
    }
    if (pf->nsamples == 0)
        return 0;
    if (pf->distributed) {
        /* One node cannot re-plan alone: its peers would disagree on who
         * holds what.  Remount all nodes with the new seed. */
        snprintf(err, errlen, "a distributed mount cannot change its seed; remount every node");
        return -EOPNOTSUPP;
    }
    pthread_mutex_lock(&pf->replan_mu);
    /* The copy shares run's node_ranks and sampler list for the planner. */
    struct cfs_run_config run = pf->run;
    run.sampler.seed = seed;
    run.sampler.n = pf->nsamples; /* a seed of the mount's own order */
    run.seeded = true;
    pf->plan_root = NULL;
    int rc = pf_replan(pf, &run, NULL, NULL, err, errlen);
    if (rc == 0) {
        atomic_store(&pf->learning, false);
        pthread_mutex_lock(&pf->order_mu);
        pf->order_state = PF_ORDER_REGISTERED;
        pthread_mutex_unlock(&pf->order_mu);
        cfs_metrics_set(pf->m, CFS_M_ORDER_IDENTIFIED, 0);
    }
    pthread_mutex_unlock(&pf->replan_mu);
    return rc;
}

int cfs_prefetch_command(void *arg, const struct cfs_ctl_cmd *cmd)
{
    struct cfs_prefetch *pf = arg;
    char err[256];
    switch (cmd->kind) {
    case CFS_CTL_CMD_EPOCH:
        return set_epoch(pf, (uint32_t)cmd->value);
    case CFS_CTL_CMD_SEED: {
        int rc = set_seed(pf, cmd->value, err, sizeof(err));
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
    out->planned = pf->track != NULL;
    out->adopted = pf->adopted;
    if (pf->track) {
        out->plan_start = pf_track_start_epoch(pf->track);
        out->plan_end = pf_track_end_epoch(pf->track);
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
    }
    out->checksum_failures = st.checksum_failures;
    out->loaded = st.loaded;
    out->peer_fetches = atomic_load(&pf->peer_fetches);
    out->peer_fallbacks = atomic_load(&pf->peer_fallbacks);
    out->peer_served = atomic_load(&pf->peer_served);
    out->io_engine = cfs_io_describe(pf->io);
}
