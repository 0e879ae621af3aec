/* The module's thread: it takes a snapshot of the opens, runs one attempt
 * on it (identify_scan.c) without the module's lock, and records what the
 * outcome changes - the state, the result, the candidates kept, when the
 * next attempt comes; cfs_identify_create and cfs_identify_destroy start
 * and stop it.
 *
 * Why attempts at these points.  The thread tries when IDENT_MIN_OPENS
 * opens are in, keeps the candidates that fit with too little evidence and
 * re-verifies them as opens arrive (cheap), and scans again only when none
 * still fits or the opens fit nothing (then after they doubled: a scan
 * costs minutes of idle CPU).  After an identification it keeps checking
 * as opens come - at the next epoch's start, where what epoch 0 left open
 * shows, and sooner while ranks of the world have not opened yet - and
 * tells on_identified again only when the answer changed
 * (same_identification).
 *
 * Why a snapshot.  cfs_identify_observe runs on the data path and must not
 * wait for a scan: the thread copies the opens under the lock and works
 * on the copy; an observation that changes what the scan should have seen
 * (a restart, a new reader: identify.c) cancels it, and an outcome whose
 * generation is stale is dropped.
 *
 * Why the progress is counted.  The attempts begun, their opens, the seeds
 * their scans passed and whether the thread waits for opens
 * (ident_progress_of) are what the tests wait for - a scan running over
 * these opens, past a given seed; nothing more to come - where they would
 * otherwise sleep for as long as a host probably takes. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clairfs/log.h"
#include "clairfs/seed_search.h"
#include "clairfs/thread_priority.h"
#include "identify_i.h"

/* Scans in a row that fit nothing before the module stops searching (until
 * cfs_identify_restart): opens 32, 64, ... 4096 without a seed, enough for
 * any trainer whose head is a torch shuffle; one with a registered seed,
 * whose scan only says what the opens fit instead.  A reader that is no
 * shuffle (a threaded loader in one process, a sequential pass) would
 * otherwise cost a scan of minutes each time its opens doubled. */
#define FRUITLESS_SCANS 8u
#define FRUITLESS_SCANS_HINTED 1u
#define RANKS_CHECK 8u         /* opens to the next check while ranks are missing */

/* Under the lock: the running attempt stops at its next check of cancel.
 * Its thread may be in a scan's idle part: on cores that a trainer (or
 * anything else) keeps busy, a SCHED_IDLE thread would not run to see the
 * flag for seconds, and a minute was seen on a loaded host - while the
 * attempt that should replace it waits.  So it is put back at the normal
 * priority, where it finishes the chunk it is in (8192 seeds) and starts
 * the next attempt; that lowers it again where its long part begins. */
void ident_cancel_attempt(struct cfs_identify *id)
{
    atomic_store(&id->cancel, true);
    if (id->attempting || id->tabling)
        (void)cfs_thread_normal_priority_of(id->thread);
}

void ident_progress_of(struct cfs_identify *id, struct ident_progress *out)
{
    pthread_mutex_lock(&id->lock);
    *out = (struct ident_progress){.attempts = id->attempts,
                                   .opens = id->attempt_opens,
                                   .scanned = atomic_load(&id->scanned),
                                   .attempting = id->attempting,
                                   /* the full range's search acts on no open */
                                   .settled = (id->waiting || id->ranging) &&
                                              id->len < id->next_attempt};
    pthread_mutex_unlock(&id->lock);
}

/* One attempt on a snapshot of the observations; called without the lock. */
static int attempt_snapshot(struct cfs_identify *id, const uint32_t *s, const pid_t *pids,
                            const pid_t *ppids, size_t len, const struct ident_cand *keep,
                            size_t nkeep, bool kept_only, struct ident_global *g, struct cfs_identified *out,
                            struct ident_attempt *a)
{
    struct ident_readers rd;
    int rc = ident_group(s, pids, ppids, len, &rd);
    if (rc < 0)
        return rc;
    struct ident_obs obs = {s, pids, ppids, len};
    struct ident_attempt_in in = {.p = &id->p,
                                  .obs = &obs,
                                  .rd = &rd,
                                  .cancel = &id->cancel,
                                  .scanned = &id->scanned,
                                  .meter = &id->meter,
                                  .pace = &id->pace,
                                  .keep = keep,
                                  .nkeep = nkeep,
                                  .kept_only = kept_only};
    rc = ident_attempt_all(&in, g, a, out);
    ident_pace_charge(&id->pace); /* the checks too, at the normal priority */
    a->readers = rd.nr;
    ident_readers_free(&rd);
    return rc;
}

/* Under the lock: the outcome of an attempt over `len` opens. */
static void record_outcome(struct cfs_identify *id, int rc, const struct ident_attempt *a,
                           size_t len)
{
    if (rc == 1) {
        /* Keep checking as opens come: a later epoch can tell apart what
         * epoch 0 could not (torch-ddp at world 1 and torch-sampler,
         * persistent workers or not), from the same seed, cheaply. */
        id->state = CFS_IDENTIFY_IDENTIFIED;
        id->keep[0] = a->win;
        id->win = a->global_win ? (struct ident_cand){0, UINT32_MAX, 0} : a->win;
        id->nkeep = a->global_win ? 0 : 1; /* a torch-global fit is kept in id->global */
        id->next_attempt = len + len / 4 + IDENT_MIN_OPENS;
        /* What epoch 0 leaves open shows in the next epoch's first batches:
         * check there too, before the data path has mispredicted for long
         * (observations begin at an epoch's start). */
        uint64_t per = a->out->epoch_opens;
        if (per) {
            /* the first epoch start after the last open seen (len itself
             * when that open ended an epoch: a trainer paused there) */
            uint64_t past = (len + per - 1) / per * per + IDENT_MIN_OPENS;
            if (past < id->next_attempt)
                id->next_attempt = past;
        }
        /* Fewer ranks than the world: some have not opened yet (or run on
         * other nodes), and their opens miss until a check finds them
         * (same_identification); check sooner, still geometrically (a node that
         * holds only some ranks must not pay a check every few opens). */
        const struct cfs_identified *o = a->out;
        uint64_t soon = len + RANKS_CHECK + len / 16;
        if (o->rank_count < o->sampler.world && soon < id->next_attempt)
            id->next_attempt = soon;
        return;
    }
    if (rc != -ECANCELED)
        id->passed_pending = false; /* checked */
    if (rc < 0 && rc != -ECANCELED)
        cfs_warn("identify: %s; trying again when the opens have doubled", strerror(-rc));
    id->nkeep = a->nkeep;
    memcpy(id->keep, a->keep, a->nkeep * sizeof(*a->keep));
    bool fits = rc == 0 && a->fits;
    id->state = fits || rc < 0 ? CFS_IDENTIFY_LEARNING : CFS_IDENTIFY_NOT_A_SHUFFLE;
    /* a fit short of evidence is re-verified cheaply; a scan costs minutes;
     * one cancelled for a new reader's first open starts again at once */
    id->next_attempt = rc == -ECANCELED ? len : fits ? len + IDENT_MIN_OPENS : 2 * len;
    if (fits)
        id->fruitless = 0;
    else if (rc == 0 &&
             ++id->fruitless >= (id->p.hint_has_seed ? FRUITLESS_SCANS_HINTED : FRUITLESS_SCANS)) {
        cfs_info("identify: %zu opens fit no torch shuffle after %u scans; searching no more "
                 "until the order is reset",
                 len, id->fruitless);
        id->next_attempt = SIZE_MAX;
    }
}

/* Does b tell the data path nothing that a did not?  Everything the
 * planner reads: the sampler, and this node's ranks (one rank's workers
 * can open a few batches before the next rank's start - the first opens
 * show ranks 0 of 2 - and the ranks seen later must reach the planner).
 * And what the module says of it besides: the workers, whether G was read
 * off a later epoch (epoch_words_known), whether only this epoch is known
 * (epoch_seed_only: the data path then plans to the epoch's end only).
 * Wider than the prefetcher's plans_alike (prefetch_adopt.c), which asks
 * only whether the plan changes: on_identified is called again for a
 * change in any of these, and the adopter replans only for a change in
 * what it plans with. */
static bool same_identification(const struct cfs_identified *a, const struct cfs_identified *b)
{
    const struct cfs_sampler_params *x = &a->sampler, *y = &b->sampler;
    return x->kind == y->kind && x->seed == y->seed && x->world == y->world &&
           x->batch == y->batch && x->drop_last == y->drop_last &&
           x->drop_last_batch == y->drop_last_batch &&
           x->persistent_workers == y->persistent_workers && a->workers == b->workers &&
           x->rng_offset == y->rng_offset && x->rng_epoch_words == y->rng_epoch_words &&
           a->epoch_words_known == b->epoch_words_known && a->rank_first == b->rank_first &&
           a->rank_count == b->rank_count && a->rank_stride == b->rank_stride &&
           a->epoch_seed_only == b->epoch_seed_only && a->order == b->order;
}

/* How the opens answer a refinement (hint) that came once identified:
 * NULL when they fit it or cannot tell, else why they refuse it. */
static const char *refinement_answer(const struct cfs_sampler_params *hint,
                                     const struct cfs_identified *got, char *why, size_t len)
{
    if (!got)
        return "no order fits the opens";
    const struct cfs_sampler_params *g = &got->sampler;
    if ((uint32_t)g->seed != (uint32_t)hint->seed || g->world != hint->world ||
        g->batch != hint->batch)
        snprintf(why, len, "the opens fit %s seed=%u world=%u batch=%u",
                 cfs_sampler_kind_name(g->kind), (uint32_t)g->seed, g->world, g->batch);
    else if (hint->kind == CFS_SAMPLER_DETECTRON2 && g->kind == CFS_SAMPLER_TORCH_DDP)
        return NULL; /* tried after torch-ddp: until epoch 1 shows, both fit */
    else if (g->kind != hint->kind)
        snprintf(why, len, "the opens fit %s", cfs_sampler_kind_name(g->kind));
    else if (g->drop_last != hint->drop_last || g->drop_last_batch != hint->drop_last_batch ||
             g->persistent_workers != hint->persistent_workers)
        snprintf(why, len, "the opens fit drop_last=%d drop_last_batch=%d persistent_workers=%d",
                 g->drop_last, g->drop_last_batch, g->persistent_workers);
    else
        return NULL;
    return why;
}

/* Under the lock, released meanwhile: an attempt after a refinement taken
 * once identified ended with got (NULL: nothing fits).  True when the
 * opens refused it (on_refused was called): the order stays as it was.
 * The variants are tried with the hint's drop_last and persistent workers
 * first (identify_verify.c), so a refinement the opens cannot tell yet is
 * the one found, never refused. */
static bool check_refinement(struct cfs_identify *id, const struct cfs_identified *got)
{
    if (!id->refine_checking)
        return false;
    id->refine_checking = false;
    char buf[160];
    struct cfs_sampler_params hint = id->hint;
    const char *why = refinement_answer(&hint, got, buf, sizeof(buf));
    if (!why)
        return false;
    pthread_mutex_unlock(&id->lock);
    cfs_info("identify: another node's refinement (%s seed=%u drop_last=%d drop_last_batch=%d "
             "persistent_workers=%d) does not fit: %s",
             cfs_sampler_kind_name(hint.kind), (uint32_t)hint.seed, hint.drop_last,
             hint.drop_last_batch, hint.persistent_workers, why);
    if (id->p.on_refused)
        id->p.on_refused(id->p.cb_arg, &hint, why);
    pthread_mutex_lock(&id->lock);
    return true;
}

/* Under the lock, released meanwhile: the run's seed found, said. */
static void announce(struct cfs_identify *id, struct cfs_identified *out)
{
    pthread_mutex_unlock(&id->lock);
    cfs_info("identify: %s", out->text);
    if (id->p.on_identified)
        id->p.on_identified(id->p.cb_arg, out);
    pthread_mutex_lock(&id->lock);
}

static void *identify_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-identify");
    struct cfs_identify *id = arg;
    struct ident_attempt *a = malloc(sizeof(*a)); /* scans yield (ident_attempt_all) */
    id->pace.cpu_mark = ident_clock_sec(CLOCK_THREAD_CPUTIME_ID);
    pthread_mutex_lock(&id->lock);
    while (!id->stop) {
        if (id->len < id->next_attempt || !a) {
            /* nothing to scan: the full range's search for the run's seed
             * goes on, if one runs, until an attempt falls due */
            struct cfs_identified run;
            if (a && ident_epochs_range(id, &run))
                announce(id, &run);
            else if (!id->stop && (id->len < id->next_attempt || !a)) {
                id->waiting = true;
                pthread_cond_wait(&id->wake, &id->lock);
                id->waiting = false;
            }
            continue;
        }
        if (id->late_hint_pending) {
            /* no attempt runs: nothing reads p meanwhile */
            id->hint = id->late_hint;
            id->p.hint = &id->hint;
            id->p.hint_has_seed = true;
            id->p.hint_identified = true;
            id->late_hint_pending = false;
            id->refine_checking = id->refine_pending;
            id->refine_pending = false;
        }
        if (id->late_orders_pending) {
            id->p.orders = id->late_orders;
            id->p.order_names = id->late_order_names;
            id->p.norders = id->late_norders;
            id->late_orders_pending = false;
        }
        uint64_t gen = id->generation;
        size_t len = id->len;
        atomic_store(&id->cancel, false);
        id->attempting = true;
        id->attempts++;
        id->attempt_opens = len;
        atomic_store(&id->scanned, 0);
        uint32_t *s = malloc(len * sizeof(*s));
        pid_t *pids = malloc(len * sizeof(*pids)), *ppids = malloc(len * sizeof(*ppids));
        if (s && pids && ppids) {
            memcpy(s, id->samples, len * sizeof(*s));
            memcpy(pids, id->pids, len * sizeof(*pids));
            memcpy(ppids, id->ppids, len * sizeof(*ppids));
        }
        struct ident_cand keep[IDENT_MAX_KEEP];
        size_t nkeep = id->nkeep;
        memcpy(keep, id->keep, nkeep * sizeof(*keep));
        if (id->passed_pending && nkeep < IDENT_MAX_KEEP)
            keep[nkeep++] = id->passed;
        struct ident_global global = id->global;
        double seconds = 0;
        /* One fresh epoch's fit checked past its end: if the kept seed
         * fails there, the next epoch is learnt alone (ident_try_next_epoch)
         * rather than scanned together with the last. */
        bool kept_only = id->state == CFS_IDENTIFY_IDENTIFIED && id->result.epoch_seed_only &&
                         !id->result.per_epoch_global && id->epochs.stage == IDENT_EPOCHS_OFF &&
                         len > id->result.epoch_opens;
        bool split = id->state != CFS_IDENTIFY_IDENTIFIED && id->p.on_split && id->p.node == 0 &&
                     id->p.nodes > 1;
        pthread_mutex_unlock(&id->lock);
        struct cfs_split_sets sets;
        if (split && s && pids && ppids &&
            cfs_identify_split_sets(&id->p, s, pids, ppids, len, &sets) == 0 &&
            memcmp(&sets, &id->split_sent, sizeof(sets)) != 0) {
            id->split_sent = sets;
            id->p.on_split(id->p.cb_arg, &sets);
        }
        struct cfs_identified out;
        a->readers = 0;
        int rc = s && pids && ppids ? attempt_snapshot(id, s, pids, ppids, len, keep, nkeep,
                                                       kept_only, &global, &out, a)
                                    : -ENOMEM;
        pthread_mutex_lock(&id->lock);
        id->attempting = false;
        bool current = gen == id->generation && !id->stop;
        bool was = id->state == CFS_IDENTIFY_IDENTIFIED;
        if (current && rc != 1 && rc != -ECANCELED && was &&
            ident_try_next_epoch(id, s, pids, ppids, len))
            current = false; /* the next epoch is learnt alone */
        free(s);
        free(pids);
        free(ppids);
        cfs_debug("identify: attempt over %zu opens of %zu readers (%zu kept%s): %s%s after %.2f s",
                  len, a->readers, nkeep, kept_only ? ", kept only" : "",
                  rc == 1 ? "identified" : rc == -ECANCELED ? "cancelled" : rc < 0 ? strerror(-rc)
                  : a->fits ? "fits, short of evidence" : "nothing fits",
                  current ? "" : " (the observations were reset meanwhile)",
                  ident_now(id) - id->first_open);
        if (!current)
            continue; /* restarted meanwhile: the observations are gone */
        id->global = global;
        seconds = ident_now(id) - id->first_open;
        record_outcome(id, rc, a, len);
        /* Orders taken while the attempt ran, too late to cancel it: over
         * the opens so far with them, at once, not when those doubled. */
        if (id->late_orders_pending && id->len >= IDENT_MIN_OPENS && id->next_attempt > id->len)
            id->next_attempt = id->len;
        if (kept_only && rc == 0 && !a->fits)
            id->next_attempt = len; /* not the next epoch's: scan them all at once */
        if (rc == 0 && !a->fits && check_refinement(id, NULL))
            continue;
        if (rc != 1)
            continue;
        ident_epoch_fit(id, &out, a->win);
        struct cfs_identified quiet = out;
        ident_finish(&id->p, &quiet, seconds, false);
        if (check_refinement(id, &quiet))
            continue; /* the order stays what it was */
        if (was && same_identification(&id->result, &quiet))
            continue; /* confirmed by the new opens */
        ident_finish(&id->p, &out, seconds, true);
        id->result = out;
        pthread_mutex_unlock(&id->lock);
        cfs_info("identify: %s", out.text);
        if (id->p.on_identified)
            id->p.on_identified(id->p.cb_arg, &out);
        pthread_mutex_lock(&id->lock);
        /* A third epoch learnt alone: perhaps the run's seed is one people
         * use, and every later epoch follows from it. */
        if (out.per_epoch_global && ident_epochs_table(id, &out))
            announce(id, &out);
    }
    pthread_mutex_unlock(&id->lock);
    free(a);
    return NULL;
}

/* The CPUs this process may run on. */
static unsigned online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

int cfs_identify_create(const struct cfs_identify_params *p, struct cfs_identify **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    if (p->n == 0 || p->n > UINT32_MAX) {
        snprintf(err, errlen, "identify: a dataset of %llu samples: must be 1..%u",
                 (unsigned long long)p->n, UINT32_MAX);
        return -EINVAL;
    }
    struct cfs_identify *id = calloc(1, sizeof(*id));
    if (!id)
        goto oom;
    id->p = *p;
    if (p->hint) {
        id->hint = *p->hint;
        id->hint.list_path = NULL;
        id->p.hint = &id->hint;
    }
    id->next_attempt = IDENT_MIN_OPENS;
    atomic_init(&id->cancel, false);
    atomic_init(&id->scanned, 0);
    id->samples = malloc(IDENT_MAX_OBS * sizeof(*id->samples));
    id->pids = malloc(IDENT_MAX_OBS * sizeof(*id->pids));
    id->ppids = malloc(IDENT_MAX_OBS * sizeof(*id->ppids));
    if (!id->samples || !id->pids || !id->ppids)
        goto oom;
    pthread_mutex_init(&id->lock, NULL);
    pthread_cond_init(&id->wake, NULL);
    pthread_mutex_init(&id->meter.mu, NULL);
    id->meter.share = -1;
    id->pace.idle_share = -1;
    id->pace.budget = p->search_budget;
    id->pace.keep_thread_normal = p->thread_stays_idle;
    id->pace.cores = p->cores ? p->cores : online_cpus();
    id->pace.n = p->n;
    id->pace.metrics = p->metrics;
    atomic_init(&id->pace.spent_ns, 0);
    /* one rank a node: the head node's readers hold randperm[W], not
     * randperm[1], and the scan's filter reaches W only so far
     * (identify_scan.c) */
    if (p->nodes > 1 && p->node == 0 && (uint64_t)p->nodes + 3 > CFS_SEED_SET_HEAD_WORDS)
        cfs_warn("identify: %u nodes: where each serves one trainer rank, the seed scan cannot "
                 "find the order (its filter reaches %u nodes); register seed= for such a run "
                 "(two ranks a node or more are learnt)",
                 p->nodes, CFS_SEED_SET_HEAD_WORDS - 3);
    int rc = -pthread_create(&id->thread, NULL, identify_thread, id);
    if (rc < 0) {
        snprintf(err, errlen, "identify: cannot start its thread: %s", strerror(-rc));
        pthread_mutex_destroy(&id->meter.mu);
        pthread_cond_destroy(&id->wake);
        pthread_mutex_destroy(&id->lock);
        goto fail;
    }
    /* Read by other threads (cfs_identify_scan_share): without it the
     * scans' share is never measured and nothing holds back for it. */
    pthread_mutex_lock(&id->meter.mu);
    id->meter.has_clock = pthread_getcpuclockid(id->thread, &id->meter.clock) == 0;
    pthread_mutex_unlock(&id->meter.mu);
    *out = id;
    return 0;
oom:
    snprintf(err, errlen, "identify: out of memory for %u observations", IDENT_MAX_OBS);
fail:
    if (id) {
        free(id->samples);
        free(id->pids);
        free(id->ppids);
    }
    free(id);
    return -ENOMEM;
}

void cfs_identify_halt(struct cfs_identify *id)
{
    pthread_mutex_lock(&id->lock);
    id->stop = true;
    ident_cancel_attempt(id);
    pthread_cond_signal(&id->wake);
    pthread_mutex_unlock(&id->lock);
}

void cfs_identify_destroy(struct cfs_identify *id)
{
    if (!id)
        return;
    cfs_identify_halt(id);
    pthread_join(id->thread, NULL);
    pthread_mutex_destroy(&id->meter.mu);
    pthread_cond_destroy(&id->wake);
    pthread_mutex_destroy(&id->lock);
    free(id->samples);
    free(id->pids);
    free(id->ppids);
    free(id);
}
