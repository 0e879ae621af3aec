/* The learned order: what the data path does around order identification
 * (the module itself is clairfs/identify.h, reached through the
 * cfs_identify_ops seam).
 *
 * Learning.  While no order is known every open of an indexed sample is
 * handed to the module with its opener, and its sample is remembered in
 * order (seen: the replay below).  A registered seed is observed too,
 * until the module has spoken: it is checked, never replaced
 * (registration is the user's promise) - except by torch-global of that
 * same seed when the registration named no other kind (global_refines:
 * the seed is kept, the module found how the trainer draws from it).
 *
 * Adoption (cfs_prefetch_adopt, on the module's thread).  The identified
 * sampler becomes the run's, for this node's ranks, planned from the
 * trainer's epoch; then the tracker is told what the trainer already read
 * of that epoch, so that its count (the position) is right: the module's
 * observations began at an epoch's start (its seed search reads an
 * epoch's first opens) and its epoch is the one of the last open it saw,
 * so at identification the trainer had read ((opens - 1) mod L) + 1 files
 * of its epoch, L being what this node reads in one epoch (L of them: the
 * epoch is complete, the tracker moves on), and every open remembered
 * since came on top.  Those last opens (from the epoch before the
 * trainer's: a search that outlasted epochs is planned from there, not
 * from the identified epoch) are replayed into the new tracker under the
 * plan lock's write side (no open in between), uncounted: they were not
 * predicted.  From then on the
 * prefetcher runs as for a registered seed.  The plan is made in two
 * stages: first the epochs up to the trainer's and the next (a fraction
 * of a second), then the whole span (100 epochs of ImageNet: seconds of
 * CPU), whose tracker is replayed the same opens and every open since, so
 * that the opens between identification and a long plan are predicted.
 *
 * One epoch's order.  An identification that says only its epoch
 * (identify.h epoch_seed_only: torch-global without a seed, or a fit the
 * next epoch has yet to confirm) is planned to that epoch's end and the
 * opens are observed on; when the trainer finishes the epoch the plan is
 * ended (pf_end_epoch_order: no misses counted, nothing dropped, the
 * module not restarted) and the next identification is adopted as a new
 * one.  The module counts its opens from its last restart (opens_before +
 * opens), as seen does.
 *
 * Self-correction.  A right order mispredicts well under 1 % of opens
 * (the tracker's window absorbs DataLoader reordering and slow ranks), a
 * wrong or stale one (a restarted trainer, a second job) nearly all.  So
 * 64 misses in a row (a few batches of every worker: no reordering makes
 * that many), or half of a block of 256 opens (a second reader interleaved
 * with a right one), drop the adopted order: plan and tracker freed, back
 * to reactive caching, the module restarted and given again the last
 * opens that missed (the new trainer's first opens, which its seed search
 * needs). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/cache.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/prefetch.h"
#include "clairfs/run_config.h"
#include "prefetch_i.h"

#define MISS_RUN_DROP 64u
#define BLOCK_OPENS 256u
#define BLOCK_MISSES_DROP (BLOCK_OPENS / 2)
/* Opens of the next epoch observed after an adoption: the module checks
 * the order a few dozen opens in (identify.c); this leaves it room. */
#define CHECK_OPENS 1024u

void pf_identify_init(struct cfs_prefetch *pf)
{
    pthread_mutex_init(&pf->replan_mu, NULL);
    pthread_mutex_init(&pf->order_mu, NULL);
    snprintf(pf->id_off, sizeof(pf->id_off), "off");
}

void pf_identify_free(struct cfs_prefetch *pf)
{
    free((void *)pf->seen);
    pf_roots_free(pf);
    pthread_mutex_destroy(&pf->order_mu);
    pthread_mutex_destroy(&pf->replan_mu);
}

void cfs_prefetch_set_identify(struct cfs_prefetch *pf, const struct cfs_identify_ops *ops,
                               void *arg, const char *off_reason)
{
    pf->id_ops = ops;
    pf->id_arg = arg;
    pthread_mutex_lock(&pf->mu);
    pf->scan_share = ops ? ops->scan_share : NULL;
    pf->scan_share_arg = arg;
    pthread_mutex_unlock(&pf->mu);
    snprintf(pf->id_off, sizeof(pf->id_off), "%s", off_reason ? off_reason : "off");
    if (!ops || pf->nsamples == 0)
        return;
    /* Remembered with a registered seed too: a torch-global identification
     * of it is adopted (global_refines) and replays.  What this node reads
     * of an epoch is at most every rank's share of n (padded by world) for
     * as many ranks as it runs; twice n covers the common one- and
     * two-rank nodes, and a replay longer than the ring keeps its tail (a
     * count off by the rest). */
    pf->seen_cap = pf->nsamples * 2 + 4096;
    pf->seen = calloc(pf->seen_cap, sizeof(*pf->seen));
    if (!pf->seen) {
        cfs_warn("order identification: out of memory; off");
        pf->id_ops = NULL;
        return;
    }
    atomic_store(&pf->learning, true);
    pf_order_set_state(pf, pf->run.seeded ? PF_ORDER_REGISTERED : PF_ORDER_LEARNING);
}

bool cfs_prefetch_learning(struct cfs_prefetch *pf)
{
    return atomic_load_explicit(&pf->learning, memory_order_relaxed);
}

void pf_learn_record(struct cfs_prefetch *pf, uint32_t s)
{
    uint64_t n = atomic_fetch_add_explicit(&pf->observed, 1, memory_order_relaxed) + 1;
    uint64_t until = atomic_load_explicit(&pf->observe_until, memory_order_relaxed);
    if (until && n >= until) {
        atomic_store(&pf->observe_until, 0);
        atomic_store(&pf->learning, false); /* confirmed past an epoch's start */
    }
    pf_seen_record(pf, s);
}

void pf_seen_record(struct cfs_prefetch *pf, uint32_t s)
{
    if (!pf->seen)
        return;
    uint64_t i = atomic_fetch_add_explicit(&pf->seen_count, 1, memory_order_relaxed);
    atomic_store_explicit(&pf->seen[i % pf->seen_cap], s, memory_order_relaxed);
}

bool pf_adopted_outcome(struct cfs_prefetch *pf, uint32_t s, const struct cfs_opener *who,
                        bool hit)
{
    uint64_t i = atomic_fetch_add_explicit(&pf->recent_count, 1, memory_order_relaxed);
    uint64_t opener = who ? (uint32_t)who->pid | (uint64_t)(uint32_t)who->ppid << 32 : 0;
    atomic_store_explicit(&pf->recent[i % PF_RECENT][0], s | (uint64_t)hit << 32,
                          memory_order_relaxed);
    atomic_store_explicit(&pf->recent[i % PF_RECENT][1], opener, memory_order_relaxed);
    bool drop = false;
    /* While the module still checks the order at the next epoch's start, a
     * refinement (torch-sampler for torch-ddp at world 1, persistent workers)
     * comes within a few opens: give it the time before dropping. */
    bool checking = atomic_load_explicit(&pf->observe_until, memory_order_relaxed) != 0;
    if (hit) {
        atomic_store_explicit(&pf->miss_run, 0, memory_order_relaxed);
    } else {
        drop = atomic_fetch_add(&pf->miss_run, 1) + 1 >= MISS_RUN_DROP * (checking ? 4 : 1);
        atomic_fetch_add(&pf->block_misses, 1);
    }
    if ((atomic_fetch_add(&pf->block_opens, 1) + 1) % BLOCK_OPENS == 0 && !checking) {
        unsigned missed = atomic_exchange(&pf->block_misses, 0);
        if (missed >= BLOCK_MISSES_DROP) {
            atomic_store(&pf->drop_block_misses, missed);
            drop = true;
        }
    }
    return drop && !atomic_exchange(&pf->drop_pending, true);
}

/* ---- adoption */

/* Would the planner read the same from a and b: the sampler's parameters
 * and this node's ranks, what a plan is made from?  Narrower than the
 * identify module's same_identification (identify_thread.c), which also
 * calls on_identified again for a change in the workers or in what is
 * confirmed (epoch_words_known, epoch_seed_only).  The workers, and G
 * confirmed at the value planned, change no plan: such an identification
 * is confirmed, not replanned.  An epoch_seed_only plan ends at its
 * epoch's end (pf_end_epoch_order) and the next identification is adopted
 * as a new one, with its own epoch_seed_only. */
static bool plans_alike(const struct cfs_identified *a, const struct cfs_identified *b)
{
    const struct cfs_sampler_params *x = &a->sampler, *y = &b->sampler;
    return x->kind == y->kind && x->seed == y->seed && x->world == y->world &&
           x->batch == y->batch && x->drop_last == y->drop_last &&
           x->drop_last_batch == y->drop_last_batch &&
           x->persistent_workers == y->persistent_workers && a->rank_first == b->rank_first &&
           a->rank_count == b->rank_count && a->rank_stride == b->rank_stride &&
           x->rng_offset == y->rng_offset && x->rng_epoch_words == y->rng_epoch_words;
}

/* A registered seed S with the default kind (torch-ddp) or torch-global,
 * identified as torch-global of that very S: the registration said S, the
 * opens say how the trainer draws from it (rng_offset, rng_epoch_words
 * are rarely known).  That is adopted, as an unregistered order is; a
 * registration it merely confirms is kept. */
static bool global_refines(const struct cfs_prefetch *pf, const struct cfs_identified *id)
{
    const struct cfs_sampler_params *reg = &pf->run.sampler, *got = &id->sampler;
    if (got->kind != CFS_SAMPLER_TORCH_GLOBAL || !id->seed_high_known || got->seed != reg->seed)
        return false;
    if (reg->kind == CFS_SAMPLER_TORCH_GLOBAL)
        return reg->rng_offset != got->rng_offset || reg->rng_epoch_words != got->rng_epoch_words ||
               reg->persistent_workers != got->persistent_workers;
    return reg->kind == CFS_SAMPLER_TORCH_DDP;
}

struct replay_arg {
    const struct cfs_identified *id;
    uint32_t passed;     /* whole epochs the plan begins after the identified one */
    uint64_t replayed;
    uint32_t epoch;      /* the tracker's after the replay */
    uint32_t from_epoch; /* where the replay began (past the epochs the ring lost) */
    uint64_t seen;       /* seen_count at the replay */
    const struct pf_root *root; /* the order's samples (NULL: the mount's own) */
    bool extend;         /* staged: seen keeps every open until the second replay */
    uint64_t replay_ns;  /* the last replay's time, the opens waiting (debug log) */
};

/* The last count of the seen opens of the order's root up to seen into t,
 * uncounted (the ring also holds the other roots' opens: a validation
 * folder read while the order was learnt is no part of it). */
static void replay_seen(struct cfs_prefetch *pf, struct pf_track *t, uint64_t seen,
                        uint64_t count, struct replay_arg *ra)
{
    uint64_t t0 = pf_now_ns(), from = seen - count;
    if (ra->root) {
        uint64_t floor = seen > pf->seen_cap ? seen - pf->seen_cap : 0, k = 0;
        for (from = seen; from > floor && k < count; from--)
            k += pf_root_holds(ra->root, atomic_load(&pf->seen[(from - 1) % pf->seen_cap]));
    }
    for (uint64_t i = from; i < seen; i++) {
        struct pf_obs o;
        uint32_t s = atomic_load(&pf->seen[i % pf->seen_cap]);
        if (pf_root_holds(ra->root, s))
            pf_track_open(t, s, &o);
    }
    ra->replay_ns = pf_now_ns() - t0;
}

/* Opens the trainer has read since the start of the epoch (of per opens)
 * it read at identification: the module's opens into that epoch (the last
 * open it heard ends an epoch or lies inside one) and every open seen since
 * (seen, counted from the first epoch start as opens_before + opens are).
 * 0 with per 0. */
static uint64_t opens_into_epoch(const struct cfs_identified *id, uint64_t per, uint64_t seen)
{
    uint64_t module = id->opens_before + id->opens; /* what the module had heard */
    uint64_t since = seen > module ? seen - module : 0;
    return (per && id->opens ? (id->opens - 1) % per + 1 : 0) + since;
}

/* Under the plan lock's write side: no open is running, every remembered
 * open is in seen. */
static void replay_epoch(struct cfs_prefetch *pf, struct pf_track *t, void *arg)
{
    struct replay_arg *ra = arg;
    uint64_t seen = atomic_load(&pf->seen_count);
    /* The module heard its root's opens only: counted so. */
    uint64_t seen_in = pf_root_count(pf, ra->root, 0, seen);
    uint64_t pos, len;
    uint32_t epoch;
    pf_track_position(t, &pos, &epoch, &(uint64_t){0});
    len = pf_track_epoch_len(t);
    uint64_t count = opens_into_epoch(ra->id, len, seen_in);
    if (len && count / len >= ra->passed)
        count -= (uint64_t)ra->passed * len; /* epochs before the plan's first */
    if (count > seen_in)
        count = seen_in;
    /* Identified epochs after its opens (a scan at idle priority that
     * outlasted epochs): the ring no longer holds the identified epoch's
     * start.  Replayed from the middle of an epoch, the count would be off
     * by what the ring lost - more than the window, and the tracker would
     * take the epoch's opens for the next epoch's and lose its place.  The
     * whole epochs the ring lost are skipped instead: the replay starts at
     * the first epoch start the ring holds. */
    if (len && count > pf->seen_cap) {
        uint64_t skip = (count - pf->seen_cap + len - 1) / len;
        if (skip <= UINT32_MAX - epoch && pf_track_set_epoch(t, epoch + (uint32_t)skip) == 0)
            count -= skip * len;
    }
    if (count > pf->seen_cap)
        count = pf->seen_cap; /* 0 without a ring */
    pf_track_position(t, NULL, &ra->from_epoch, NULL);
    replay_seen(pf, t, seen, count, ra);
    ra->replayed = count;
    ra->seen = seen;
    pf_track_position(t, NULL, &ra->epoch, NULL);
    atomic_store(&pf->extending, ra->extend);
    pf->adopted = true;
    pf->epoch_only = ra->id->epoch_seed_only;
    /* Observed on to the end of the next epoch's start: the module checks
     * the order there (identify_thread.c) and may refine it; one epoch's order,
     * for good: the module learns every next epoch from its opens. */
    uint64_t per = ra->id->epoch_opens;
    if (ra->root)
        atomic_store(&pf->observed, seen_in); /* the module's count, its root's opens */
    uint64_t until = per && !pf->epoch_only ? (ra->id->opens / per + 1) * per + CHECK_OPENS : 0;
    if (until <= atomic_load(&pf->observed))
        until = 0;
    atomic_store(&pf->observe_until, until);
    atomic_store(&pf->learning, until != 0 || pf->epoch_only);
    atomic_store(&pf->miss_run, 0);
    atomic_store(&pf->block_opens, 0);
    atomic_store(&pf->block_misses, 0);
    atomic_store(&pf->recent_count, 0);
    atomic_store(&pf->drop_pending, false);
}

/* The second replay of a staged adoption (adopt_rest): the whole span's
 * tracker hears what the first epochs' tracker heard - the first replay's
 * opens and every open since (seen kept them: extending) - and so stands
 * where that one stands, window and all.  More opens since than the ring
 * holds (epochs read while a few epochs were planned: not on any dataset
 * whose planning takes time) would leave it short by the rest. */
static void replay_again(struct cfs_prefetch *pf, struct pf_track *t, void *arg)
{
    struct replay_arg *ra = arg;
    uint64_t seen = atomic_load(&pf->seen_count);
    uint64_t count = ra->replayed + pf_root_count(pf, ra->root, ra->seen, seen);
    if (count > pf->seen_cap)
        count = pf->seen_cap;
    uint32_t epoch;
    pf_track_position(t, NULL, &epoch, NULL);
    if (ra->from_epoch != epoch)
        (void)pf_track_set_epoch(t, ra->from_epoch);
    replay_seen(pf, t, seen, count, ra);
    pf_track_position(t, NULL, &ra->epoch, NULL);
    ra->replayed = count;
    pf->adopted = true;
    atomic_store(&pf->extending, false);
}

/* The identified order as a run configuration of this node, planned from
 * `passed` epochs after the identified one (epochs_passed). */
static int identified_run(const struct cfs_prefetch *pf, const struct cfs_identified *id,
                          uint32_t passed, struct cfs_run_config *run, char *err, size_t errlen)
{
    const struct cfs_sampler_params *sp = &id->sampler;
    struct cfs_rank_range ranks = {id->rank_first, id->rank_count, id->rank_stride};
    if (sp->n != pf_root_n(pf, pf->plan_root) || sp->kind == CFS_SAMPLER_LIST || sp->world == 0 ||
        id->rank_count == 0 || cfs_rank_end(ranks) > sp->world) {
        snprintf(err, errlen,
                 "identified order does not fit the mount: n=%" PRIu64 " of %" PRIu64
                 " samples, %u ranks from %u step %u of world %u",
                 sp->n, pf_root_n(pf, pf->plan_root), id->rank_count, id->rank_first,
                 id->rank_stride, sp->world);
        return -EINVAL;
    }
    *run = pf->run;
    run->sampler = *sp;
    run->sampler.list_path = NULL;
    run->world = sp->world;
    run->ranks = ranks;
    run->start_epoch = id->epoch + passed;
    /* As many epochs ahead as the mount would plan for a registered run. */
    uint32_t span = pf->plan_span, start = run->start_epoch;
    run->epochs = start + (span > UINT32_MAX - start ? UINT32_MAX - start : span);
    if (id->epoch_seed_only)
        run->epochs = id->epoch + 1; /* the next epoch is not known yet */
    run->window = cfs_run_default_window(sp->batch, id->rank_count);
    run->seeded = true;
    return 0;
}

/* Whole epochs the trainer has finished since the identified one began
 * (replay_epoch's count over the node's epoch); UINT32_MAX where the
 * node's epoch is not known. */
static uint32_t epochs_ahead(struct cfs_prefetch *pf, const struct cfs_identified *id)
{
    uint64_t per = id->epoch_opens;
    if (per == 0)
        return UINT32_MAX;
    uint64_t seen = pf_root_count(pf, pf->plan_root, 0, atomic_load(&pf->seen_count));
    uint64_t ahead = opens_into_epoch(id, per, seen) / per;
    return ahead < UINT32_MAX - 2 ? (uint32_t)ahead : UINT32_MAX;
}

/* Epochs the plan skips after the identified one: all the trainer has
 * finished since, but the last (replayed, as the epoch before the
 * trainer's always is).  A search can outlast the plan's span - 280
 * epochs of a 10 000-file tree read from RAM, an epoch a second - and a
 * plan begun at the identified epoch would end before the trainer's: the
 * tracker could not stand there and the order would be dropped at once. */
static uint32_t epochs_passed(uint32_t ahead, const struct cfs_identified *id)
{
    if (ahead == UINT32_MAX || ahead < 2 || id->epoch_seed_only ||
        ahead - 1 > UINT32_MAX - 2 - id->epoch)
        return 0;
    return ahead - 1;
}

/* This thread's CPU time: the debug log sets a plan's time beside the
 * trainer against the CPU it took, the share of a core it got. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The debug line of a plan begun at t0 (this thread's CPU at cpu0) that
 * covers epochs to `last`, ra its replay. */
static void debug_planned(uint32_t last, uint64_t t0, uint64_t cpu0, const struct replay_arg *ra)
{
    cfs_debug("order: planned to epoch %u in %.2f s, %.2f CPU s (%" PRIu64 " opens replayed in "
              "%.2f s, in epoch %u)",
              last, (double)(pf_now_ns() - t0) / 1e9, (double)(thread_cpu_ns() - cpu0) / 1e9,
              ra->replayed, (double)ra->replay_ns / 1e9, ra->epoch);
}

/* A staged adoption's second plan: the whole span (run), its tracker
 * replayed to where the first one stands.  Failing, the first epochs'
 * plan stays: predicted to their end, then reactive. */
static void adopt_rest(struct cfs_prefetch *pf, const struct cfs_run_config *run,
                       struct replay_arg *ra)
{
    char err[256];
    uint64_t t0 = pf_now_ns(), cpu0 = thread_cpu_ns();
    int rc = pf_replan(pf, run, replay_again, ra, err, sizeof(err));
    atomic_store(&pf->extending, false); /* replay_again's too, under the lock */
    if (rc < 0) {
        cfs_warn("order: planning epochs %u to %u: %s; predicting to epoch %u", ra->epoch,
                 run->epochs - 1, err, pf->run.epochs - 1);
        return;
    }
    debug_planned(run->epochs - 1, t0, cpu0, ra);
    /* The first plan's end may have come first (the gauge fell there). */
    pf_order_set_state(pf, PF_ORDER_IDENTIFIED);
}

/* Can the order of root r (replan_mu held) be adopted now?  Not while
 * another root's is: the mount predicts one order at a time, and the
 * adopted one is not dropped for a folder read beside it (a validation
 * pass).  0, or -EBUSY with err. */
static int root_free_to_adopt(struct cfs_prefetch *pf, const struct pf_root *r,
                              const struct cfs_identified *id, char *err, size_t errlen)
{
    if (!pf->adopted || r == pf->plan_root)
        return 0;
    snprintf(err, errlen, "%s: %s; not predicted: the mount predicts %s's order",
             r ? pf_root_name(r) : ".", id->text,
             pf->plan_root ? pf_root_name(pf->plan_root) : "the mount's own");
    return -EBUSY;
}

int cfs_prefetch_adopt(struct cfs_prefetch *pf, const struct cfs_identified *id, char *err,
                       size_t errlen)
{
    return cfs_prefetch_adopt_at(pf, id, "", NULL, 0, err, errlen);
}

/* Every node's ranks and the first epoch of a distributed mount's agreed
 * plan (cfs_prefetch_adopt_cluster); NULL for one node's own adoption. */
struct cluster_plan {
    const struct cfs_rank_range *node_ranks;
    uint32_t from_epoch;
};

static int adopt(struct cfs_prefetch *pf, const struct cfs_identified *id, const char *root,
                 const uint32_t *map, uint64_t n, const struct cluster_plan *cluster, char *err,
                 size_t errlen);

int cfs_prefetch_adopt_at(struct cfs_prefetch *pf, const struct cfs_identified *id,
                          const char *root, const uint32_t *map, uint64_t n, char *err,
                          size_t errlen)
{
    return adopt(pf, id, root, map, n, NULL, err, errlen);
}

int cfs_prefetch_adopt_cluster(struct cfs_prefetch *pf, const struct cfs_identified *id,
                               const char *root, const uint32_t *map, uint64_t n,
                               const struct cfs_rank_range *node_ranks, uint32_t from_epoch,
                               char *err, size_t errlen)
{
    struct cluster_plan c = {.node_ranks = node_ranks, .from_epoch = from_epoch};
    return adopt(pf, id, root, map, n, pf->distributed ? &c : NULL, err, errlen);
}

static int adopt(struct cfs_prefetch *pf, const struct cfs_identified *id, const char *root,
                 const uint32_t *map, uint64_t n, const struct cluster_plan *cluster, char *err,
                 size_t errlen)
{
    int rc = 0;
    bool spent = false;
    err[0] = '\0';
    pthread_mutex_lock(&pf->replan_mu);
    if (pf->restart_owed)
        goto out; /* stale: the module restarts */
    const struct pf_root *r = pf_root_get(pf, root, map, n);
    if (map && !r) {
        rc = cfs_error_msg(err, errlen, -ENOMEM, "order of %s: out of memory", root);
        goto out;
    }
    if ((rc = root_free_to_adopt(pf, r, id, err, errlen)) < 0)
        goto out;
    bool refining = pf->adopted;
    if (refining) {
        pthread_mutex_lock(&pf->order_mu);
        bool same = plans_alike(&pf->ident, id);
        pthread_mutex_unlock(&pf->order_mu);
        if (same)
            goto out; /* confirmed */
    } else if (pf->run.seeded && !r && !global_refines(pf, id)) {
        pf_check_registered(pf, id);
        goto out;
    } else if (pf->run.seeded && r && !global_refines(pf, id)) {
        cfs_info("order: %s: %s; the registered order is kept", root, id->text);
        goto out;
    }
    if ((pf->distributed && !cluster) || pf->nsamples == 0 ||
        cfs_catalog_order_unavailable(pf->cat)) {
        snprintf(err, errlen, "identified order not adopted: %s",
                 pf->distributed ? "a distributed mount plans an order the nodes agreed on"
                                 : "no index order to plan with");
        rc = -EOPNOTSUPP;
        goto out;
    }
    struct cfs_run_config run;
    pf->plan_root = r; /* the plans below number r's samples */
    uint32_t ahead = epochs_ahead(pf, id), passed = epochs_passed(ahead, id);
    if (cluster) /* every node from the agreed epoch, the latest any node claimed */
        passed = cluster->from_epoch > id->epoch ? cluster->from_epoch - id->epoch : 0;
    if ((rc = identified_run(pf, id, passed, &run, err, errlen)) < 0) {
        pf->plan_root = pf->root;
        goto out;
    }
    if (cluster) /* every node's ranks, borrowed: pf_replan copies them */
        run.node_ranks = (struct cfs_rank_range *)cluster->node_ranks;
    /* Staged: a plan of 100 epochs of ImageNet takes seconds of CPU that
     * the trainer's opens would wait through unpredicted; the epoch it is
     * in and the next come first (UINT32_MAX: not staged, the node's epoch
     * unknown), the whole span right after (adopt_rest). */
    uint32_t full = run.epochs;
    uint32_t first = ahead == UINT32_MAX ? UINT32_MAX : ahead - passed + 2;
    bool staged = !id->epoch_seed_only && !cluster && full - run.start_epoch > first;
    if (staged)
        run.epochs = run.start_epoch + first;
    struct replay_arg ra = {.id = id, .passed = passed, .extend = staged, .root = r};
    uint64_t t0 = pf_now_ns(), cpu0 = thread_cpu_ns();
    atomic_store(&pf->adopting, true);
    rc = pf_replan(pf, &run, replay_epoch, &ra, err, errlen);
    atomic_store(&pf->adopting, false);
    if (rc < 0) {
        pf->plan_root = pf->root;
        goto out;
    }
    debug_planned(run.epochs - 1, t0, cpu0, &ra);
    pf->cluster_plan = cluster != NULL;
    pthread_mutex_lock(&pf->order_mu);
    pf->ident = *id;
    pf->cluster_dropped[0] = '\0';
    pthread_mutex_unlock(&pf->order_mu);
    pf_order_set_state(pf, PF_ORDER_IDENTIFIED);
    if (id->epoch_seed_only)
        cfs_info("order: %s %s%s%s; predicting it to the end of epoch %u only, the next "
                 "epoch's order is learnt from its own opens (%" PRIu64
                 " opens replayed, now in epoch %u)",
                 refining ? "refined to" : "identified", r ? root : "", r ? ": " : "", id->text,
                 id->epoch, ra.replayed, ra.epoch);
    else
        cfs_info("order: %s %s%s%s; predicting it (%" PRIu64 " opens replayed, now in epoch %u)",
                 refining ? "refined to" : "identified", r ? root : "", r ? ": " : "", id->text,
                 ra.replayed, ra.epoch);
    if (staged) {
        run.epochs = full;
        adopt_rest(pf, &run, &ra);
    }
    /* One epoch's order identified after its end (the trainer paused
     * there): the replay has consumed it all. */
    pthread_rwlock_rdlock(&pf->plan_lock);
    uint32_t at = 0;
    if (pf->epoch_only && pf->track)
        pf_track_position(pf->track, NULL, &at, NULL);
    spent = pf->epoch_only && pf->track && at >= pf->run.epochs;
    pthread_rwlock_unlock(&pf->plan_lock);
out:
    pthread_mutex_unlock(&pf->replan_mu);
    if (spent)
        pf_end_epoch_order(pf);
    return rc;
}

/* ---- self-correction */

/* The trailing misses among the last opens (plan_lock's write side held):
 * the opens of whatever the order no longer describes. */
static uint64_t trailing_misses(struct cfs_prefetch *pf, uint64_t again[][2])
{
    uint64_t n = atomic_load(&pf->recent_count);
    uint64_t have = n < PF_RECENT ? n : PF_RECENT, first = n, count = 0;
    while (first > n - have && !(atomic_load(&pf->recent[(first - 1) % PF_RECENT][0]) >> 32 & 1))
        first--;
    for (uint64_t i = first; i < n; i++, count++) {
        again[count][0] = atomic_load(&pf->recent[i % PF_RECENT][0]);
        again[count][1] = atomic_load(&pf->recent[i % PF_RECENT][1]);
    }
    return count;
}

/* Under replan_mu and plan_lock's write side: the adopted order's plan
 * out of the data path, back to reactive caching; its tracker, for the
 * caller to free once the locks are released. */
static struct pf_track *release_adopted(struct cfs_prefetch *pf)
{
    /* No callback sees the swap: LRU, or the passes' keys where the mount
     * sweeps (they never read the tracker). */
    pf_policy_unordered(pf);
    struct pf_track *old = pf->track;
    pf->track = NULL;
    pf->root = pf->plan_root = NULL;
    pf->adopted = false;
    pf->cluster_plan = false;
    pf->run.seeded = false;
    return old;
}

/* The drop's warning: this node's misses, and on a distributed mount the
 * refusal that makes every node drop the agreed order with it. */
static void warn_dropped(struct cfs_prefetch *pf, uint64_t nagain, bool cluster)
{
    char why[96];
    unsigned block = atomic_exchange(&pf->drop_block_misses, 0);
    if (block)
        snprintf(why, sizeof(why), "%u of the last %u opens missed", block, BLOCK_OPENS);
    else
        snprintf(why, sizeof(why), "%" PRIu64 " misses in a row", nagain);
    if (cluster)
        cfs_warn("order: this node's opens no longer fit the nodes' agreed order (%s); dropping "
                 "it and refusing it to the other nodes, which drop it too; learning again",
                 why);
    else
        cfs_warn("order: the opens no longer fit the identified order (%s); dropping it, "
                 "learning again",
                 why);
}

/* pf_drop_adopted with replan_mu taken (it is released here). */
static void drop_adopted_locked(struct cfs_prefetch *pf)
{
    uint64_t again[PF_RECENT][2];
    char root[256] = "";
    pthread_rwlock_wrlock(&pf->plan_lock);
    bool adopted = pf->adopted, cluster = adopted && pf->cluster_plan;
    uint64_t nagain = adopted ? trailing_misses(pf, again) : 0;
    struct pf_track *old = NULL;
    if (adopted) {
        if (pf->root)
            snprintf(root, sizeof(root), "%s", pf_root_name(pf->root));
        old = release_adopted(pf);
        atomic_store(&pf->observe_until, 0);
        atomic_store(&pf->seen_count, 0);
        atomic_store(&pf->observed, 0);
        pf->restart_owed = true; /* an identification before the restart is stale */
    }
    pthread_rwlock_unlock(&pf->plan_lock);
    pthread_mutex_unlock(&pf->replan_mu);
    if (!adopted)
        return;
    pf_track_destroy(old);
    warn_dropped(pf, nagain, cluster);
    pf_order_set_state(pf, PF_ORDER_LEARNING);
    pf_wake(pf);
    /* The other nodes drop it too (clairfs/order_agree.h): the agreement
     * calls cfs_prefetch_drop_cluster on every node, this one included,
     * after the state above. */
    if (cluster && pf->id_ops->refuse)
        pf->id_ops->refuse(pf->id_arg, root);
    /* Without replan_mu: the module's thread may be in on_identified,
     * waiting for it.  Nothing else is observed until the module has
     * restarted and heard the misses again (seen and the module agree). */
    pf->id_ops->restart(pf->id_arg);
    for (uint64_t i = 0; i < nagain; i++) {
        uint32_t s = (uint32_t)again[i][0];
        pf_learn_record(pf, s);
        pf->id_ops->observe(pf->id_arg, s, (pid_t)(uint32_t)again[i][1],
                            (pid_t)(uint32_t)(again[i][1] >> 32));
    }
    pthread_mutex_lock(&pf->replan_mu);
    pf->restart_owed = false;
    atomic_store(&pf->learning, true);
    atomic_store(&pf->drop_pending, false);
    pthread_mutex_unlock(&pf->replan_mu);
    /* Identified from the misses alone, while its callback was refused (a
     * distributed mount's identification is claimed, never adopted here). */
    struct cfs_identified id;
    char err[256];
    if (!pf->distributed && pf->id_ops->state &&
        pf->id_ops->state(pf->id_arg, &id) == CFS_IDENTIFY_IDENTIFIED &&
        cfs_prefetch_adopt(pf, &id, err, sizeof(err)) < 0)
        cfs_warn("order: %s", err);
}

void pf_drop_adopted(struct cfs_prefetch *pf)
{
    pthread_mutex_lock(&pf->replan_mu);
    drop_adopted_locked(pf);
}

void cfs_prefetch_drop_cluster(struct cfs_prefetch *pf, const char *why)
{
    pthread_mutex_lock(&pf->replan_mu);
    pthread_rwlock_wrlock(&pf->plan_lock);
    bool adopted = pf->adopted && pf->cluster_plan;
    struct pf_track *old = adopted ? release_adopted(pf) : NULL;
    if (adopted) {
        atomic_store(&pf->observe_until, 0);
        atomic_store(&pf->drop_pending, false);
    }
    pthread_rwlock_unlock(&pf->plan_lock);
    pthread_mutex_unlock(&pf->replan_mu);
    pf_track_destroy(old);
    pthread_mutex_lock(&pf->order_mu);
    snprintf(pf->cluster_dropped, sizeof(pf->cluster_dropped), "%s", why);
    pthread_mutex_unlock(&pf->order_mu);
    /* The identification goes on as it is: a claim of this node's stands
     * until its opens say otherwise, and no order is adopted until every
     * node's claims agree again. */
    pf_order_set_state(pf, PF_ORDER_DROPPED);
    cfs_warn("order: the nodes dropped their agreed order%s: %s",
             adopted ? "" : " (no longer adopted here)", why);
    pf_wake(pf);
}

/* pf_end_epoch_order with replan_mu taken (it is released here). */
static void end_epoch_order_locked(struct cfs_prefetch *pf)
{
    pthread_rwlock_wrlock(&pf->plan_lock);
    bool over = pf->adopted && pf->epoch_only;
    struct pf_track *old = over ? release_adopted(pf) : NULL;
    atomic_store(&pf->drop_pending, false);
    pthread_rwlock_unlock(&pf->plan_lock);
    pthread_mutex_unlock(&pf->replan_mu);
    if (!over)
        return;
    pf_track_destroy(old);
    /* Identified, no longer predicted: the gauge says so, and the opens
     * until the next epoch's order count as unplanned. */
    cfs_metrics_set(pf->m, CFS_M_ORDER_IDENTIFIED, 0);
    pthread_mutex_lock(&pf->order_mu);
    uint32_t epoch = pf->ident.epoch;
    pthread_mutex_unlock(&pf->order_mu);
    cfs_info("order: epoch %u's order ends with it (one epoch's order); epoch %u is not "
             "predicted until its own order is identified",
             epoch, epoch + 1);
    pf_wake(pf);
}

void pf_end_epoch_order(struct cfs_prefetch *pf)
{
    pthread_mutex_lock(&pf->replan_mu);
    end_epoch_order_locked(pf);
}

void pf_settle_owed(struct cfs_prefetch *pf)
{
    /* An adoption holds replan_mu while it plans its whole span (seconds
     * of CPU for ImageNet), as a window's re-plan does: the thread that
     * counted the open - a FUSE worker, or the open watch's, which every
     * open waits for under permission events - leaves the drop to the
     * next open that finds replan_mu free. */
    while (atomic_load(&pf->drop_owed) || atomic_load(&pf->end_owed)) {
        if (pthread_mutex_trylock(&pf->replan_mu) != 0)
            return;
        if (atomic_exchange(&pf->drop_owed, false)) {
            drop_adopted_locked(pf);
        } else if (atomic_exchange(&pf->end_owed, false)) {
            end_epoch_order_locked(pf);
        } else {
            pthread_mutex_unlock(&pf->replan_mu);
            return;
        }
    }
}

/* ---- the stats lines */

void cfs_prefetch_roots_text(struct cfs_prefetch *pf, char *buf, size_t len)
{
    buf[0] = '\0';
    if (pf->id_ops && pf->id_ops->text)
        pf->id_ops->text(pf->id_arg, buf, len);
}

void cfs_prefetch_order_text(struct cfs_prefetch *pf, char *buf, size_t len)
{
    pthread_mutex_lock(&pf->order_mu);
    enum pf_order_state st = pf->order_state;
    struct cfs_identified id = pf->ident;
    char why[sizeof(pf->contradiction)];
    memcpy(why, pf->contradiction, sizeof(why));
    pthread_mutex_unlock(&pf->order_mu);
    uint64_t observed = atomic_load(&pf->observed);
    pthread_rwlock_rdlock(&pf->plan_lock);
    struct cfs_sampler_params sp = pf->run.sampler;
    char root[272] = ""; /* "train: " for an order of a folder below the root */
    if (pf->root)
        snprintf(root, sizeof(root), "%s: ", pf_root_name(pf->root));
    pthread_rwlock_unlock(&pf->plan_lock);
    switch (st) {
    case PF_ORDER_REGISTERED:
    case PF_ORDER_CONFIRMED:
    case PF_ORDER_CONTRADICTED:
        snprintf(buf, len, "registered %s seed=%" PRIu64 " world=%u%s%s",
                 cfs_sampler_kind_name(sp.kind), sp.seed, sp.world,
                 st == PF_ORDER_CONFIRMED ? ", confirmed by the opens"
                 : st == PF_ORDER_CONTRADICTED ? "; " : "",
                 st == PF_ORDER_CONTRADICTED ? why : "");
        return;
    case PF_ORDER_IDENTIFIED:
        pthread_rwlock_rdlock(&pf->plan_lock);
        bool ended = id.epoch_seed_only && !pf->adopted;
        pthread_rwlock_unlock(&pf->plan_lock);
        if (ended)
            snprintf(buf, len,
                     "identified %s%s (epoch %u only, ended); not predicted from epoch %u on, "
                     "learning its order",
                     root, id.text, id.epoch, id.epoch + 1);
        else if (id.epoch_seed_only)
            snprintf(buf, len, "identified %s%s (epoch %u only)", root, id.text, id.epoch);
        else
            snprintf(buf, len, "identified %s%s", root, id.text);
        return;
    case PF_ORDER_LEARNING:
        if (pf->id_ops && pf->id_ops->state &&
            pf->id_ops->state(pf->id_arg, NULL) == CFS_IDENTIFY_NOT_A_SHUFFLE)
            snprintf(buf, len, "not a torch shuffle (%" PRIu64 " opens)", observed);
        else
            snprintf(buf, len, "learning (%" PRIu64 " opens)", observed);
        return;
    case PF_ORDER_DROPPED:
        pthread_mutex_lock(&pf->order_mu);
        snprintf(buf, len, "dropped by the nodes: %s", pf->cluster_dropped);
        pthread_mutex_unlock(&pf->order_mu);
        return;
    case PF_ORDER_OFF:
        break;
    }
    snprintf(buf, len, "not identified: %s", pf->id_off);
}
