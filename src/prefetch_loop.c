/* The prefetcher thread: walks the node's stream from the trainer's
 * position forward and keeps the tiers ahead of it.
 *
 * One round (prefetch_round) fetches, in this order: on a distributed
 * mount, the files this node owns for its peers; the window ahead of the
 * trainer (at most `lookahead` files; evicting only for files needed
 * within the eviction horizon: the readers' lead, the fetches in flight
 * and a slack, see prefetch_round); then the files
 * the plan assigns to RAM and SSD in order of first use (the owned files:
 * the first use by any node, cfs_plan_prefetch_order).  Each walk
 * stops when the cache refuses (-ENOSPC: the room is needed sooner; wait
 * for the trainer) or the prefetch depth is used.  The cursors (scan,
 * order_idx, owned_idx) are this thread's, under the plan lock; a jump of
 * the trainer's position (its generation changes) restarts the scan.
 * Without a tracker (no order known yet) a round is the sweep instead,
 * where pf->sweep allows: the samples not yet read in the current pass,
 * in index order, into RAM, evicting only files read in this pass (see
 * "The passes" in prefetch_state.c), unless it holds back for busy cores
 * (sweep_holds).  With an order, the evaluation passes beside it follow
 * (eval_round).
 * The
 * thread sleeps when a round started nothing and nobody woke it, and tells
 * wait_idle when nothing is in flight either.  With `progress` it logs the
 * warm-up (staged bytes against what the plan holds) until it is done. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "clairfs/cache.h"
#include "clairfs/catalog.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/prefetch.h"
#include "prefetch_i.h"

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool room_for_more(struct cfs_prefetch *pf)
{
    pthread_mutex_lock(&pf->mu);
    bool ok = pf->inflight < pf->max_inflight && !pf->stop;
    pthread_mutex_unlock(&pf->mu);
    return ok;
}

static bool skip_unowned(struct cfs_prefetch *pf, uint32_t s)
{
    return !pf_owned_for_peers(pf, s);
}

static bool skip_unused(struct cfs_prefetch *pf, uint32_t s)
{
    return pf_sample_next_use(pf, s) == PF_NEVER;
}

/* Fetch the files the plan puts in tier k in order of first use, from
 * cursor[k] on, skipping those skip() names, until the cache refuses or the
 * io depth is used.  Returns the fetches started. */
static unsigned fetch_tier_order(struct cfs_prefetch *pf, struct pf_track *t, enum cfs_tier k,
                                 uint64_t cursor[CFS_TIER_COUNT],
                                 bool (*skip)(struct cfs_prefetch *, uint32_t))
{
    const enum cfs_tier tier = k;
    uint64_t count;
    const uint32_t *order = pf_track_order(t, tier, &count);
    unsigned started = 0;
    while (cursor[k] < count && room_for_more(pf)) {
        uint32_t s = order[cursor[k]];
        if (skip(pf, s)) {
            cursor[k]++;
            continue;
        }
        int rc = pf_fetch_start(pf, cfs_catalog_sample_entry(pf->cat, s), tier, true, 0, NULL);
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

/* While no order is known: the samples not yet read in this pass, in
 * index order, into RAM, evicting files read in it (pf->sweep says
 * when).  -ENOSPC: RAM holds only files not yet read; the trainer's next
 * reads make room (its opens wake this thread).  Returns the fetches
 * started. */
static unsigned sweep_round(struct cfs_prefetch *pf)
{
    unsigned started = 0;
    uint64_t pass = pf_pass_current(pf);
    if (pass != pf->sweep_pass) {
        pf->sweep_pass = pass;
        pf->sweep_idx = 0;
    }
    while (pf->sweep_idx < pf->nsamples && room_for_more(pf)) {
        if (pf_pass_was_read(pf, (uint32_t)pf->sweep_idx, pass)) {
            pf->sweep_idx++; /* not read again in this pass */
            continue;
        }
        cfs_id id = cfs_catalog_sample_entry(pf->cat, pf->sweep_idx);
        if (cfs_cache_state(pf->cache, id) != CFS_CACHE_ABSENT) {
            pf->sweep_idx++; /* held or in flight: from the second pass on, most files */
            continue;
        }
        int rc = pf_fetch_start(pf, id, CFS_TIER_RAM, true, 0, NULL);
        if (rc == -EAGAIN || rc == -ENOMEM || rc == -ENOSPC)
            break; /* again at the next round */
        if (rc == 0)
            started++;
        pf->sweep_idx++; /* fetched, already held or in flight, or not fetchable */
    }
    return started;
}

/* The evaluation passes after the trainer's epoch (prefetch_eval.c), in
 * their order, into RAM.  Their key is the epoch's end, so the cache
 * refuses them (-ENOSPC) while every file held is needed sooner.  due: the
 * epoch's end is within the horizon where the window evicts, and the pass
 * comes before the next epoch's files the window reaches for, so it goes
 * first and takes room from files needed after the evaluation; else it
 * takes free room only (what the tiers can hold beside the training order
 * stays resident).  Returns the fetches started. */
static unsigned eval_round(struct pf_track *t, struct cfs_prefetch *pf, bool due)
{
    uint32_t epoch;
    pf_track_position(t, NULL, &epoch, NULL);
    unsigned flags = due ? 0 : CFS_CACHE_NO_EVICT;
    unsigned started = 0;
    struct pf_eval *at = NULL;
    uint64_t s;
    while ((s = pf_eval_next(pf, &at, epoch)) != PF_NEVER && room_for_more(pf)) {
        cfs_id id = cfs_catalog_sample_entry(pf->cat, (uint32_t)s);
        if (cfs_cache_state(pf->cache, id) == CFS_CACHE_ABSENT) {
            int rc = pf_fetch_start(pf, id, CFS_TIER_RAM, true, flags, NULL);
            if (rc == -ENOSPC || rc == -EAGAIN || rc == -ENOMEM)
                break; /* needed later than all the cache holds: at a later round */
            started += rc == 0;
        }
        pf_eval_step(at);
    }
    return started;
}

/* sweep=auto's brake.  The sweep's fetches cost CPU (for each file a
 * lookup, an open and reads through the source's client, a completion,
 * context switches) and buy time only where the source is what the
 * trainer waits for.  While the order's scan runs it measures what is
 * idle: past its first seeds it runs at SCHED_IDLE, so the share of a core
 * it gets is what the trainer and everything else leave (about one where
 * the source is the limit, whatever the sweep does).  Below
 * SWEEP_HOLD_BELOW the cores are busy, and the sweep's CPU comes out of
 * the trainer's and the scan's: at ImageNet size over an emulated PFS on 2
 * cores the trainer read 2.7-2.9x fewer files a second with it, and the
 * scan needed 6-11 CPU s more for the same seeds (README, "Where that CPU
 * goes").  The sweep then holds back, until the share is back at
 * SWEEP_RESUME_AT, no scan runs (but while an identified order is being
 * planned: it prefetches in a moment), or the order is known.  The
 * prefetcher thread's. */
#define SWEEP_HOLD_BELOW 0.5
#define SWEEP_RESUME_AT 0.75

/* Whether the sweep holds back now (no order planned yet: order_known
 * false), or may go on (an order planned).  The identification's
 * scan_share takes only its meter's leaf lock, so it is asked under the
 * plan lock's read side, and only while no order is planned. */
static bool sweep_holds(struct cfs_prefetch *pf, bool order_known)
{
    if (pf->opts.sweep != CFS_SWEEP_AUTO)
        return false;
    double share = -1;
    bool scanning = false;
    if (!order_known) {
        pthread_mutex_lock(&pf->mu);
        bool (*scan_share)(void *, double *) = pf->scan_share;
        void *arg = pf->scan_share_arg;
        pthread_mutex_unlock(&pf->mu);
        scanning = scan_share && scan_share(arg, &share);
    }
    if (!pf->sweep_held && scanning && share >= 0 && share < SWEEP_HOLD_BELOW) {
        pf->sweep_held = true;
        pf->held_since = now_sec();
        cfs_info("sweep: held back: the order's search gets %.2f of a core (the cores are busy; "
                 "fetching ahead would take the trainer's CPU)",
                 share);
    } else if (pf->sweep_held && ((!scanning && !atomic_load(&pf->adopting)) ||
                                  share >= SWEEP_RESUME_AT)) {
        pf->sweep_held = false;
        char why[64];
        if (scanning)
            snprintf(why, sizeof(why), "the search gets %.2f of a core", share);
        else
            snprintf(why, sizeof(why), "%s", order_known ? "the order is known" : "no search runs");
        cfs_info("sweep: resumed after %.0f s held back: %s", now_sec() - pf->held_since, why);
    } else {
        return pf->sweep_held;
    }
    cfs_metrics_set(pf->m, CFS_M_SWEEP_HELD, pf->sweep_held);
    return pf->sweep_held;
}

/* The window's eviction horizon is at most the files its tier holds over
 * this.  Measured at ram = half the dataset, a reader without workers: a
 * horizon of 0.44 and 0.5 of the tier's files fetched within 2 % of the
 * simulator's bytes an epoch, 0.69 of it 1.2x (600 files); at 2000 files
 * 0.6 of it still agreed, the whole tier 1.04-1.19x. */
#define EVICT_TIER_SHARE 2

/* One pass: the window ahead of the trainer, then the planned tiers.
 * Returns the number of fetches started. */
static unsigned prefetch_round(struct cfs_prefetch *pf)
{
    unsigned started = 0;
    bool blocked = false;

    pthread_rwlock_rdlock(&pf->plan_lock);
    struct pf_track *t = pf->track;
    if (!t) {
        if (pf->sweep && !sweep_holds(pf, false))
            started = sweep_round(pf);
        goto out;
    }
    if (pf->sweep_held)
        (void)sweep_holds(pf, true);
    uint64_t pos, gen;
    pf_track_position(t, &pos, NULL, &gen);
    if (gen != pf->scan_gen || pf->scan < pos) {
        pf->scan = pos;
        pf->scan_gen = gen;
    }
    uint64_t limit = pf->lookahead ? pos + pf->lookahead : UINT64_MAX;
    /* Free room is filled as far ahead as the plan goes, but an eviction
     * is only worth it for a file the trainers will open soon: as far as
     * their opens run ahead of the count (measured, pf_track_lead), the
     * fetches in flight and the reorder window as slack against the
     * source's hiccups.  Every file fetched ahead holds room that MIN gives
     * to a file read again sooner; while the horizon is well inside the
     * tier that costs next to nothing, near the tier's size it thrashes
     * (the window of 1024 files and more alone: RAM for half of 600 files
     * fetched 1.75x the simulator's bytes an epoch, of 2000 1.04-1.19x).
     * So the horizon is at most a share of the files the tier holds, and
     * at least the lead and the fetches in flight. */
    uint64_t ahead = pf_track_lead(t) + (uint64_t)pf->max_inflight;
    uint64_t horizon_len = ahead + pf_track_window(t);
    uint64_t tier_share = pf->window_tier_files / EVICT_TIER_SHARE;
    if (horizon_len > tier_share)
        horizon_len = tier_share > ahead ? tier_share : ahead;
    uint64_t evict_horizon = pos + horizon_len;
    /* The evaluation pass is staged by the window's horizon: it is read
     * after the epoch whatever the readers' reordering. */
    uint64_t eval_horizon = pos + pf_track_window(t) + pf->max_inflight;
    /* The evaluation after the epoch, when its end is that near (and as
     * many opens nearer as the pass has files: fetching them takes about
     * as long as reading them), before the next epoch's files, which the
     * trainer reads after it. */
    bool eval_due = pf_track_epoch_end(t) <= eval_horizon + pf_eval_files(pf);
    if (eval_due)
        started += eval_round(t, pf, true);
    /* Distributed: first the files this node owns, whatever the window: its
     * peers read them on their own schedule, from their first use on.
     * Before the window, whose fetches would otherwise take the room the
     * plan reserved for them (owned files evict only non-owned ones). */
    for (enum cfs_tier k = 0; k < CFS_TIER_COUNT && pf->distributed; k++)
        started += fetch_tier_order(pf, t, k, pf->owned_idx, skip_unowned);
    while (pf->scan < limit && room_for_more(pf)) {
        uint32_t s;
        bool consumed;
        if (pf_track_sample_at(t, pf->scan, &s, &consumed) <= 0)
            break;
        if (!consumed) {
            cfs_id id = cfs_catalog_sample_entry(pf->cat, s);
            enum cfs_tier tier = pf_track_tier(t, s);
            unsigned flags = pf->scan < evict_horizon ? 0 : CFS_CACHE_NO_EVICT;
            int rc = pf_fetch_start(pf, id, tier, true, flags, NULL);
            if (rc == -ENODEV && tier == CFS_TIER_SSD)
                rc = pf_fetch_start(pf, id, CFS_TIER_RAM, true, flags, NULL);
            if (rc == 0)
                started++;
            else if (rc == -ENOSPC || rc == -EAGAIN || rc == -ENOMEM) {
                blocked = true; /* wait for the trainer or for completions */
                break;
            }
        }
        pf->scan++;
    }
    /* Stage the planned tiers in order of first use once the window is
     * covered (their bytes are reserved by the plan). */
    for (enum cfs_tier k = 0; k < CFS_TIER_COUNT && !blocked; k++)
        started += fetch_tier_order(pf, t, k, pf->order_idx, skip_unused);
    if (!blocked && !eval_due)
        started += eval_round(t, pf, false);
out:
    pthread_rwlock_unlock(&pf->plan_lock);
    return started;
}

/* ---- the next window (run_config.h: a plan covers a window of epochs) */

/* pf_replan's replay for the next window: the new tracker takes the old
 * one's place, and the plan stays what it was (adopted or registered). */
static void follow_window(struct cfs_prefetch *pf, struct pf_track *t, void *arg)
{
    bool *adopted = arg;
    pf->adopted = *adopted;
    if (pf_track_follow(t, pf->track) < 0)
        cfs_warn("order: the next window's plan starts at epoch %u, not where the trainer is",
                 pf_track_start_epoch(t));
}

/* Once the trainer is in the last epoch of the plan's window and the run
 * goes on, the next window is planned from that epoch (the two share it,
 * so that the new tracker takes the trainer's place inside it), here, by
 * the prefetcher: planning takes seconds at ImageNet-22k scale, an epoch
 * takes minutes.  Every node steps its windows from the same epochs, so
 * the nodes' plans agree; each when its own trainer gets there, which is
 * why the next plan keeps this one's owners in the epoch they share
 * (plan.c: a peer asked there holds the file on either plan).  Skipped
 * this round when another re-plan holds replan_mu. */
static void plan_next_window(struct cfs_prefetch *pf)
{
    pthread_rwlock_rdlock(&pf->plan_lock);
    struct pf_track *t = pf->track;
    uint32_t epoch = 0, end = 0, run_end = pf->run.epochs;
    if (t) {
        pf_track_position(t, NULL, &epoch, NULL);
        end = pf_track_end_epoch(t);
    }
    pthread_rwlock_unlock(&pf->plan_lock);
    if (!t || end >= run_end || epoch + 1 < end || end == pf->window_failed ||
        pthread_mutex_trylock(&pf->replan_mu) != 0)
        return;
    pthread_rwlock_rdlock(&pf->plan_lock);
    bool same = pf->track == t, adopted = pf->adopted;
    struct cfs_run_config run = pf->run;
    pthread_rwlock_unlock(&pf->plan_lock);
    if (same) { /* nobody re-planned since */
        char err[256];
        uint64_t t0 = pf_now_ns();
        run.start_epoch = end - 1;
        pf->window_prev = pf_track_plan(t);
        int rc = pf_replan(pf, &run, follow_window, &adopted, err, sizeof(err));
        pf->window_prev = NULL;
        if (rc < 0) {
            pf->window_failed = end; /* said once */
            cfs_warn("order: planning the window from epoch %u: %s; predicting to epoch %u",
                     run.start_epoch, err, end - 1);
        } else {
            cfs_debug("order: planned the window from epoch %u in %.2f s", run.start_epoch,
                      (double)(pf_now_ns() - t0) / 1e9);
        }
    }
    pthread_mutex_unlock(&pf->replan_mu);
}

/* Warm-up progress: resident bytes against what the plan holds.  Returns
 * true once everything is staged (no more lines). */
static bool log_progress(struct cfs_prefetch *pf, double *last_t, uint64_t *last_bytes)
{
    uint64_t target = 0;
    pthread_rwlock_rdlock(&pf->plan_lock);
    if (pf->track)
        target = pf_track_tier_bytes(pf->track, CFS_TIER_RAM) +
                 pf_track_tier_bytes(pf->track, CFS_TIER_SSD);
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

void *pf_prefetch_main(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-prefetch");
    struct cfs_prefetch *pf = arg;
    double interval = pf->progress_interval > 0 ? pf->progress_interval : 5.0;
    double last_t = now_sec();
    uint64_t last_bytes = 0;
    bool warm = !pf->progress;

    pthread_mutex_lock(&pf->mu);
    while (!pf->stop) {
        uint64_t seq = pf->wake_seq;
        pthread_mutex_unlock(&pf->mu);
        plan_next_window(pf);
        unsigned started = prefetch_round(pf);
        pthread_mutex_lock(&pf->mu);
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
