/* The prefetcher's shared state, and what every part of the data path
 * does to it: wake the prefetcher, refresh the gauges, key the cache's
 * evictions (by the tracker with an order, by the passes over the dataset
 * without), remember the source files found changed, and replace the
 * plan.
 *
 * Why a module of its own: every thread of the data path does these, and
 * they need nothing but the struct, the tracker, the cache and the
 * metrics.  Kept in the top file (create, destroy, commands), they made the
 * open path, the fetches, the stager and adoption call up into the file
 * that calls down into them: a circle in which no file could be read, or
 * changed, alone.  Here they sit below every other file of the prefetcher
 * but the tracker, and call nothing above (the layers are at the top of
 * prefetch_i.h).  So what belongs here is only what needs no more than
 * that; whatever fetches, stages, identifies or serves belongs above. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/cache.h"
#include "clairfs/catalog.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/run_config.h"
#include "prefetch_i.h"

/* ---- waking the prefetcher, the gauges */

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
    cfs_metrics_set(pf->m, CFS_M_INDEX_WRITE_ERRORS,
                    st.index_write_errors + (pf->index_unopened ? 1 : 0));
    if (st.index_write_errors && !atomic_exchange(&pf->index_error_logged, true))
        cfs_warn("index %s: writing the SSD tier's records failed (%s); serving without "
                 "persisting them", pf->index_dir ? pf->index_dir : "(none)",
                 strerror(-st.index_error));
    pthread_mutex_unlock(&pf->gauge_mu);
}

/* ---- the cache's eviction keys: with an order */

bool pf_owned_for_peers(const struct cfs_prefetch *pf, uint32_t s)
{
    return pf->distributed && pf->track &&
           pf_track_owner(pf->track, s, NULL, NULL) == pf->node;
}

/* Owned files count as needed now, for the whole run; an evaluation
 * pass's files at the end of the trainer's epoch (prefetch_eval.c). */
uint64_t pf_sample_next_use(struct cfs_prefetch *pf, uint32_t s)
{
    if (pf_owned_for_peers(pf, s))
        return 0;
    uint64_t key;
    if (pf_eval_key(pf, s, &key))
        return key; /* read again after the epoch: kept over what is read later */
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

/* ---- the cache's eviction keys: without an order, the passes.  While no
 * order is known, the trainer's epoch is a permutation of the samples:
 * each is read once before any is read again.
 * So a file already read in the current pass is worth nothing until every
 * other file has been read, and a file not yet read will be, before the
 * pass ends.  The sweep fetches only files not yet read, and the cache's
 * policy (pf_pass_key_cb) lets it evict only files already read: every
 * byte swept is read from RAM in the same pass, and no file is fetched
 * twice in one (nor does a trainer's demand fetch evict a file not yet
 * read: its own file, just read, is worth no more than those).
 *
 * Where a pass ends is counted, not observed: every nsamples opens of
 * samples.  For a permutation that is the epoch's end exactly.  An epoch
 * that reads some files twice (padding to the world size) or leaves some
 * out (drop_last) moves the boundary by as many opens: the files read
 * across it are taken for the other pass's, at worst read from the source
 * once more or swept once too many, never wrong, and the count never
 * stalls (a boundary that waited for every sample would never come when
 * some are never read).  At a pass's end every entry is re-keyed and the
 * sweep starts again from the first sample. */

bool pf_pass_open(struct cfs_prefetch *pf, uint32_t s)
{
    if (!pf->pass_read || s >= pf->nsamples)
        return false;
    uint64_t k = atomic_fetch_add_explicit(&pf->pass_opens, 1, memory_order_relaxed);
    atomic_store_explicit(&pf->pass_read[s], (uint32_t)(k / pf->nsamples + 1),
                          memory_order_relaxed);
    return (k + 1) % pf->nsamples == 0;
}

uint64_t pf_pass_current(struct cfs_prefetch *pf)
{
    return atomic_load_explicit(&pf->pass_opens, memory_order_relaxed) / pf->nsamples;
}

bool pf_pass_was_read(const struct cfs_prefetch *pf, uint32_t s, uint64_t pass)
{
    return atomic_load_explicit(&pf->pass_read[s], memory_order_relaxed) == (uint32_t)(pass + 1);
}

/* Keys (larger goes first): a file read in this pass is evicted before any
 * other, and a fetch of one (a demand fetch: the open marked it) evicts
 * nothing, since the cache refuses a victim needed no later than the new
 * file; a file not yet read is refused as a victim to every fetch but one
 * with CFS_CACHE_DEMAND, which the open path does not use meanwhile. */
#define PASS_KEY_READ (UINT64_MAX - 1)
#define PASS_KEY_UNREAD (UINT64_MAX / 2)

uint64_t pf_pass_key_cb(void *arg, uint32_t id)
{
    struct cfs_prefetch *pf = arg;
    const struct cfs_entry *e = cfs_catalog_entry(pf->cat, id);
    if (!e || e->sample == CFS_NO_SAMPLE || e->sample >= pf->nsamples)
        return UINT64_MAX;
    return pf_pass_was_read(pf, e->sample, pf_pass_current(pf)) ? PASS_KEY_READ : PASS_KEY_UNREAD;
}

void pf_policy_unordered(struct cfs_prefetch *pf)
{
    if (pf->pass_read)
        cfs_cache_set_policy(pf->cache, pf_pass_key_cb, pf);
    else
        cfs_cache_set_policy(pf->cache, NULL, NULL);
}

/* ---- the plan: one way to replace it */

/* The tracker of the run configuration `run` (the kept one, or a copy that
 * differs in its seed): the plan of this node and the window. */
int pf_tracker_of_run(struct cfs_prefetch *pf, const struct cfs_run_config *run,
                      char *err, size_t errlen, struct pf_track **out)
{
    struct pf_track_params tp = {.window = run->window};
    cfs_run_config_plan_params(run, pf->sizes, &tp.plan);
    tp.plan.prev = pf->window_prev;
    /* An order of a folder below the mount's root: its sampler's indices
     * are that root's (prefetch_root.c). */
    if (pf_root_plan(pf, pf->plan_root, &tp.plan) < 0)
        return cfs_error_msg(err, errlen, -ENOMEM, "prefetch: out of memory");
    return pf_track_create(&tp, out, err, errlen);
}

/* Every plan after creation comes through here (the seed command, an
 * adoption and its second stage), so that the order of the swap - the
 * cache's policy off, the replay, the swap, the cursors reset, the policy
 * back on - is written once. */
int pf_replan(struct cfs_prefetch *pf, const struct cfs_run_config *run,
              void (*replay)(struct cfs_prefetch *, struct pf_track *, void *), void *arg,
              char *err, size_t errlen)
{
    struct pf_track *t = NULL, *old;
    /* Plan outside plan_lock: the mount keeps serving meanwhile (replan_mu
     * keeps every other re-plan out). */
    int rc = pf_tracker_of_run(pf, run, err, errlen, &t);
    if (rc)
        return rc;
    uint64_t t0 = pf_now_ns();
    pthread_rwlock_wrlock(&pf->plan_lock);
    uint64_t waited = pf_now_ns() - t0;
    cfs_cache_set_policy(pf->cache, NULL, NULL); /* no callback sees the swap */
    pf->adopted = false; /* the replay of an adoption says otherwise */
    if (replay)
        replay(pf, t, arg);
    old = pf->track;
    pf->track = t;
    pf->root = pf->plan_root; /* the samples the new tracker's order holds */
    struct cfs_sampler_params sp = run->sampler;
    sp.list_path = pf->run.sampler.list_path; /* the kept copy (an identified order has none) */
    pf->run.sampler = sp;
    pf->run.world = run->world;
    pf->run.start_epoch = run->start_epoch;
    pf->run.epochs = run->epochs;
    pf->run.ranks = run->ranks;
    if (!pf->distributed)
        pf->run.node_ranks[pf->node] = run->ranks;
    else if (run->node_ranks != pf->run.node_ranks) /* an agreed order: every node's */
        memcpy(pf->run.node_ranks, run->node_ranks, pf->nodes * sizeof(*run->node_ranks));
    pf->run.window = run->window;
    pf->run.seeded = run->seeded;
    pf->scan = 0;
    pf->scan_gen = UINT64_MAX;
    pf->order_idx[0] = pf->order_idx[1] = 0;
    cfs_cache_set_policy(pf->cache, pf_next_use_cb, pf);
    uint64_t pos;
    uint32_t epoch;
    pf_track_position(t, &pos, &epoch, &(uint64_t){0});
    pthread_rwlock_unlock(&pf->plan_lock);
    cfs_debug("order: the new plan waited %.3f s for the opens in flight", (double)waited / 1e9);
    cfs_metrics_set(pf->m, CFS_M_EPOCH, epoch);
    pf_track_destroy(old);
    pf_wake(pf);
    return 0;
}

/* ---- the source files found changed (see "Exactness" in prefetch.h) */

bool pf_is_changed(const struct cfs_prefetch *pf, uint32_t id)
{
    return pf->changed && id < cfs_catalog_entry_count(pf->cat) &&
           (atomic_load(&pf->changed[id / 64]) >> (id % 64) & 1);
}

void pf_mark_changed(struct cfs_prefetch *pf, uint32_t id, const char *path)
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

void pf_order_set_state(struct cfs_prefetch *pf, enum pf_order_state st)
{
    pthread_mutex_lock(&pf->order_mu);
    pf->order_state = st;
    pthread_mutex_unlock(&pf->order_mu);
    cfs_metrics_set(pf->m, CFS_M_ORDER_IDENTIFIED,
                    st == PF_ORDER_IDENTIFIED || st == PF_ORDER_CONFIRMED);
}
