/* torch-global without a seed: learnt one epoch at a time (the public
 * header's account of the windows says what is found).
 *
 * Why windows.  Such a trainer seeds each epoch's permutation from a draw
 * nobody registered: one epoch reads as the first randperm of a fresh
 * generator (torch-ddp at world 1, or torch-sampler), and the next epoch
 * as another, unrelated one.  A scan over the opens of both epochs fits
 * nothing - every seed explains at most one of them - so once the next
 * epoch's first opens refute the first epoch's fit while that fit still
 * explains its whole epoch, the module keeps only the next epoch's opens
 * (a window: ident_window_from) and scans them alone.  A second fresh
 * seed there is torch-global; from then on each epoch's window is scanned
 * for its own seed, and planned as the torch-ddp epoch that reads it.
 *
 * The run's seed.  After a third epoch learnt alone, the table of seeds
 * people use is tried once (rng_table.c); if it names none, every seed is
 * searched for one that draws the first epoch's private seed within its
 * first words (rng_range.c), slice after slice while the thread has no
 * attempt due, so that each epoch is still learnt from its own opens
 * meanwhile.  Either adopts torch-global of S, K and G for the whole run.
 *
 * Why the same rules offline.  clairfs-plan --identify replays a record
 * of opens (cfs_identify_offline_epochs) and must name what a mount would
 * learn from it: epoch 0 from its head, 32 opens doubled while they fit
 * nothing; the whole epoch checked before the next is learnt alone. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/rng_offset.h"
#include "clairfs/thread_priority.h"
#include "identify_i.h"

/* A fit that is one fresh generator's first randperm: what torch-global
 * reads each epoch, and what torch-ddp at world 1 or torch-sampler read in
 * the epoch identified; nothing registered to say which. */
static bool fresh_epoch(const struct cfs_identify_params *p, const struct cfs_identified *o,
                        struct ident_cand win)
{
    enum cfs_sampler_kind k = o->sampler.kind;
    /* in the observed order only: the windows are verified in it */
    return !p->hint_has_seed && p->nodes <= 1 && win.skip == 0 && win.p0 == 0 && win.order == 0 &&
           o->sampler.world == 1 && o->epoch == 0 && o->epoch_opens > 0 &&
           o->opens <= o->epoch_opens &&
           (k == CFS_SAMPLER_TORCH_DDP || k == CFS_SAMPLER_TORCH_SAMPLER);
}

/* Under the lock: the first readers of the window, as identify.c's
 * note_reader keeps them (a scan is restarted for a new reader, not for
 * one already in). */
static void readers_of_window(struct cfs_identify *id)
{
    id->nreaders = 0;
    for (size_t i = 0; i < id->len && id->nreaders < IDENT_NEW_READER_RESTARTS; i++) {
        size_t k = 0;
        while (k < id->nreaders && id->readers[k] != id->pids[i])
            k++;
        if (k == id->nreaders) {
            id->readers[id->nreaders] = id->pids[i];
            id->reader_seen[id->nreaders] = 0; /* the window's start */
            id->reader_first[id->nreaders] = id->samples[i];
            id->reader_two[id->nreaders] = false;
            id->reader_restarts[id->nreaders] = true;
            id->reader_parents[id->nreaders++] = id->ppids[i];
        } else if (id->samples[i] != id->reader_first[k]) {
            id->reader_two[k] = true;
        }
    }
}

/* Under the lock: the observations become the window of opens [from, len)
 * for the trainer's epoch `epoch`; learning starts again on them. */
void ident_window_from(struct cfs_identify *id, size_t from, uint32_t epoch)
{
    memmove(id->samples, id->samples + from, (id->len - from) * sizeof(*id->samples));
    memmove(id->pids, id->pids + from, (id->len - from) * sizeof(*id->pids));
    memmove(id->ppids, id->ppids + from, (id->len - from) * sizeof(*id->ppids));
    id->epochs.before += from;
    id->epochs.epoch = epoch;
    id->len -= from;
    id->generation++;
    id->state = CFS_IDENTIFY_LEARNING;
    id->next_attempt = id->len > IDENT_MIN_OPENS ? id->len : IDENT_MIN_OPENS;
    id->nkeep = 0;
    id->fruitless = 0;
    id->first_open = ident_now(id);
    readers_of_window(id);
}

/* On the thread, after an attempt over s[0, len) that refuted the
 * identification: if that was one fresh epoch and it explains the first
 * epoch_opens opens, the rest is the next epoch's, to be scanned alone.
 * Takes and returns with the lock held. */
bool ident_try_next_epoch(struct cfs_identify *id, const uint32_t *s, const pid_t *pids,
                           const pid_t *ppids, size_t len)
{
    const struct cfs_identified *r = &id->result;
    uint64_t per = r->epoch_opens;
    struct ident_cand win = id->win;
    if (!r->epoch_seed_only || r->per_epoch_global || !fresh_epoch(&id->p, r, win) || len < per ||
        per > IDENT_MAX_OBS / 2 || id->epochs.stage != IDENT_EPOCHS_OFF)
        return false;
    uint64_t gen = id->generation;
    struct cfs_identify_params p = id->p;
    pthread_mutex_unlock(&id->lock);
    struct ident_readers rd;
    struct cfs_identified fit;
    double bits;
    int rc = ident_group(s, pids, ppids, per, &rd);
    if (rc == 0) {
        rc = ident_verify(&p, &rd, win.seed, win.skip, win.p0, 0.0, &fit, &bits);
        ident_readers_free(&rd);
    }
    pthread_mutex_lock(&id->lock);
    if (rc < 0 || gen != id->generation || id->len < per)
        return false;
    id->epochs = (struct ident_epochs){.stage = IDENT_EPOCHS_TRYING,
                                       .per = per,
                                       .before = id->epochs.before,
                                       .priv = {(uint32_t)r->sampler.seed},
                                       .priv_epoch = r->epoch,
                                       .priv_count = 1};
    ident_window_from(id, per, r->epoch + 1);
    cfs_info("identify: epoch %u does not continue the order of epoch %u (%s): learning it "
             "from its own opens",
             id->epochs.epoch, r->epoch, r->text);
    return true;
}

/* Epoch e's private seed p learnt: kept with the epochs before it when
 * they are consecutive, else it starts the run anew; the same epoch fitted
 * again (an attempt over more of its opens) replaces its own. */
static void note_private_seed(struct ident_epochs *ep, uint32_t p, uint32_t e)
{
    if (ep->priv_count > 0 && e == ep->priv_epoch) {
        ep->priv[ep->priv_count - 1] = p;
        return;
    }
    if (ep->priv_count == 0 || e != ep->priv_epoch + 1) {
        ep->priv_count = 0;
    } else if (ep->priv_count == 3) {
        memmove(ep->priv, ep->priv + 1, 2 * sizeof(*ep->priv));
        ep->priv_count = 2;
    }
    ep->priv[ep->priv_count++] = p;
    ep->priv_epoch = e;
}

/* A fresh epoch's fit, out, named as torch-global's epoch e: planned as the
 * torch-ddp epoch that reads it (seeded seed + e: this epoch's seed). */
static void as_epoch_global(struct cfs_identified *out, uint32_t e)
{
    out->epoch_seed_only = true;
    out->per_epoch_global = true;
    out->sampler.kind = CFS_SAMPLER_TORCH_DDP;
    out->sampler.seed = (uint32_t)((uint32_t)out->sampler.seed - e);
    out->sampler.persistent_workers = false;
    out->epoch = e;
}

/* On the thread, the lock held: out fits the current observations.  In a
 * window, a fresh epoch is torch-global's (named so, planned as the
 * torch-ddp epoch that reads it); anything else ends the windows. */
void ident_epoch_fit(struct cfs_identify *id, struct cfs_identified *out, struct ident_cand win)
{
    out->opens_before = id->epochs.before;
    bool fresh = fresh_epoch(&id->p, out, win);
    out->epoch_seed_only = fresh;
    if (id->epochs.stage == IDENT_EPOCHS_OFF)
        return;
    if (!fresh) {
        id->epochs.stage = IDENT_EPOCHS_OFF;
        return;
    }
    id->epochs.stage = IDENT_EPOCHS_ON;
    note_private_seed(&id->epochs, (uint32_t)out->sampler.seed, id->epochs.epoch);
    as_epoch_global(out, id->epochs.epoch);
}

/* The table's search on this thread at idle priority (raised by a
 * cancel: a restart or the teardown); its CPU to the metrics. */
static int table_search(struct cfs_identify *id, const struct cfs_rng_table_problem *pr,
                        struct cfs_rng_table_result *res)
{
    double cpu0 = ident_clock_sec(CLOCK_THREAD_CPUTIME_ID);
    bool lowered = !id->pace.keep_thread_normal &&
                   strcmp(cfs_thread_lower_priority(), "normal") != 0;
    int rc = cfs_rng_table_find(pr, &id->cancel, res);
    if (lowered)
        (void)cfs_thread_normal_priority();
    double cpu = ident_clock_sec(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    if (id->p.metrics && cpu > 0)
        cfs_metrics_add(id->p.metrics, CFS_M_SEARCH_NS_IDLE, (uint64_t)(cpu * 1e9));
    return rc;
}

/* The whole run from here: torch-global of the seed found (res), in the
 * epoch the trainer is in now (the window may have moved on meanwhile);
 * named as a registered seed would be, the seed being exact. */
static void adopt_run_seed(struct cfs_identify *id, const struct cfs_rng_table_result *res,
                           uint32_t first, const char *how, double took,
                           struct cfs_identified *out)
{
    struct ident_epochs *ep = &id->epochs;
    struct cfs_identified r = id->result;
    r.sampler.kind = CFS_SAMPLER_TORCH_GLOBAL;
    r.sampler.seed = res->seed;
    r.sampler.rng_offset = res->offset;
    r.sampler.rng_epoch_words = res->words;
    r.sampler.persistent_workers = res->persistent_workers;
    r.seed_high_known = true;
    r.epoch_words_known = true;
    r.epoch_seed_only = r.per_epoch_global = false;
    r.epoch = ep->epoch;
    r.opens_before = ep->before;
    r.opens = id->len;
    struct cfs_sampler_params as_hint = r.sampler;
    struct cfs_identify_params named = id->p;
    named.hint = &as_hint;
    named.hint_has_seed = true;
    ident_finish(&named, &r, took, false);
    char text[sizeof(r.text)];
    snprintf(text, sizeof(text), "%.190s (no seed registered: %s, from epochs %u-%u)", r.text,
             how, first, first + 2);
    memcpy(r.text, text, sizeof(r.text));
    ep->stage = IDENT_EPOCHS_OFF;
    ep->range_on = false;
    id->state = CFS_IDENTIFY_IDENTIFIED;
    id->result = r;
    id->next_attempt = SIZE_MAX; /* the data path's misses say when it stops fitting */
    *out = r;
}

bool ident_epochs_table(struct cfs_identify *id, struct cfs_identified *out)
{
    struct ident_epochs *ep = &id->epochs;
    if (ep->table_tried || ep->priv_count < 3 || id->stop)
        return false;
    ep->table_tried = true;
    uint32_t priv[3];
    memcpy(priv, ep->priv, sizeof(priv));
    uint32_t first = ep->priv_epoch - 2;
    uint64_t restarts = id->restarts;
    struct cfs_rng_table_problem pr = {.private_seeds = priv,
                                       .first_epoch = first,
                                       .max_offset = id->p.global_max_offset
                                                         ? id->p.global_max_offset
                                                         : CFS_IDENTIFY_GLOBAL_MAX_OFFSET,
                                       .max_words = CFS_IDENTIFY_GLOBAL_MAX_WORDS};
    struct cfs_rng_table_result res;
    atomic_store(&id->cancel, false);
    id->tabling = true;
    pthread_mutex_unlock(&id->lock);
    double t0 = ident_now(id);
    int rc = table_search(id, &pr, &res);
    double took = ident_now(id) - t0;
    pthread_mutex_lock(&id->lock);
    id->tabling = false;
    if (rc < 0 || res.cancelled || id->restarts != restarts || id->stop)
        return false;
    if (res.found) {
        adopt_run_seed(id, &res, first, "a seed people use", took, out);
        return true;
    }
    unsigned threads = id->p.search_threads ? id->p.search_threads : cfs_seed_usable_cpus();
    cfs_info("identify: torch-global (no seed registered): the private seeds of epochs "
             "%u-%u follow from none of the %" PRIu64 " seeds people use (%.0f s); each "
             "epoch is learnt from its own opens, and all 2^32 seeds are searched for one "
             "that draws epoch %u's within its first %u words, on %u threads between the "
             "epochs' scans",
             first, first + 2, res.seeds_tried, took, first, CFS_RNG_RANGE_WORDS, threads);
    ep->range_on = true;
    memcpy(ep->range_priv, priv, sizeof(priv));
    ep->range_first = first;
    ep->range_next = 0;
    return ident_epochs_range(id, out);
}

static void pace_range(void *arg, struct cfs_seed_workers *w)
{
    struct cfs_identify *id = arg;
    ident_pace_chunk(&id->pace, &id->meter, w);
}

/* One slice of the full range, without the lock: at idle priority within
 * the budget, as a scan's long part. */
static int range_slice(struct cfs_identify *id, const struct cfs_rng_range_problem *pr,
                       struct cfs_rng_table_result *res)
{
    struct cfs_seed_threads t = {.threads = ident_pace_threads(&id->pace, id->p.search_threads),
                                 .idle = true,
                                 .every = IDENT_PACE_CHUNK,
                                 .pace = pace_range,
                                 .pace_arg = id};
    ident_pace_priority(&id->pace, true);
    ident_meter_scan(&id->meter, true);
    int rc = cfs_rng_range_find(pr, &id->cancel, &t, res);
    ident_meter_scan(&id->meter, false);
    ident_pace_priority(&id->pace, false);
    return rc;
}

bool ident_epochs_range(struct cfs_identify *id, struct cfs_identified *out)
{
    struct ident_epochs *ep = &id->epochs;
    const uint64_t all = 1ull << 32;
    uint64_t restarts = id->restarts;
    while (ep->range_on && !id->stop && id->len < id->next_attempt) {
        uint32_t priv[3];
        memcpy(priv, ep->range_priv, sizeof(priv));
        struct cfs_rng_range_problem pr = {
            .table = {.private_seeds = priv,
                      .first_epoch = ep->range_first,
                      .max_offset = id->p.global_max_offset ? id->p.global_max_offset
                                                            : CFS_IDENTIFY_GLOBAL_MAX_OFFSET,
                      .max_words = CFS_IDENTIFY_GLOBAL_MAX_WORDS},
            .seed_first = (uint32_t)ep->range_next,
            .seed_count = all - ep->range_next < IDENT_RANGE_SLICE ? all - ep->range_next
                                                                  : IDENT_RANGE_SLICE};
        struct cfs_rng_table_result res;
        atomic_store(&id->cancel, false);
        id->tabling = id->ranging = true;
        pthread_mutex_unlock(&id->lock);
        double t0 = ident_now(id);
        int rc = range_slice(id, &pr, &res);
        double took = ident_now(id) - t0;
        pthread_mutex_lock(&id->lock);
        id->tabling = id->ranging = false;
        if (id->restarts != restarts || id->stop)
            return false;
        ep->range_seconds += took;
        if (rc < 0) {
            cfs_warn("identify: the search of the 2^32 seeds for the run's seed failed (%s); "
                     "each epoch is learnt from its own opens",
                     strerror(-rc));
            ep->range_on = false;
            return false;
        }
        if (res.found) {
            adopt_run_seed(id, &res, ep->range_first, "a seed found among the 2^32",
                           ep->range_seconds, out);
            return true;
        }
        ep->range_next += res.seeds_tried;
        if (ep->range_next >= all) {
            cfs_info("identify: torch-global (no seed registered): none of the 2^32 seeds "
                     "draws the private seeds of epochs %u-%u with epoch %u's within its "
                     "first %u words (%.0f s); each epoch is learnt from its own opens",
                     ep->range_first, ep->range_first + 2, ep->range_first,
                     CFS_RNG_RANGE_WORDS, ep->range_seconds);
            ep->range_on = false;
        }
    }
    return false;
}

/* Offline: the attempt over opens [from, from + len) of a record alone.  1
 * identified (out), 0 not (out->text says why), -errno. */
static int offline_window(const struct cfs_identify_params *p, const uint32_t *s,
                          const pid_t *pids, const pid_t *ppids, size_t from, size_t len,
                          struct ident_attempt *a, struct cfs_identified *out)
{
    struct ident_obs obs = {s + from, pids ? pids + from : NULL, ppids ? ppids + from : NULL,
                            len};
    struct ident_readers rd;
    int rc = ident_group(obs.s, obs.pids, obs.ppids, len, &rd);
    if (rc < 0)
        return rc;
    struct ident_global g = {0};
    rc = ident_attempt_all(&(struct ident_attempt_in){.p = p, .obs = &obs, .rd = &rd}, &g, a, out);
    if (rc == 0)
        ident_not_identified(a, rd.opens, out);
    ident_readers_free(&rd);
    return rc;
}

/* Offline: opens [from, from + len) as torch-global's epoch e, a fresh
 * generator's first randperm.  1 (out named so), 0 not (out->text), -errno. */
static int offline_epoch(const struct cfs_identify_params *p, const uint32_t *s,
                         const pid_t *pids, const pid_t *ppids, size_t from, size_t len,
                         uint32_t e, struct ident_attempt *a, struct cfs_identified *out)
{
    int rc = offline_window(p, s, pids, ppids, from, len, a, out);
    if (rc != 1)
        return rc;
    if (!fresh_epoch(p, out, a->win)) {
        char was[sizeof(out->text)];
        ident_finish(p, out, 0, false);
        memcpy(was, out->text, sizeof(was));
        snprintf(out->text, sizeof(out->text), "its opens fit %.200s, not a fresh generator's",
                 was);
        return 0;
    }
    as_epoch_global(out, e);
    out->opens_before = from;
    ident_finish(p, out, 0, false);
    return 1;
}

int cfs_identify_offline_epochs(const struct cfs_identify_params *p, const uint32_t *samples,
                                const pid_t *pids, const pid_t *ppids, size_t count,
                                cfs_identify_cb each, void *arg, struct cfs_identified *out,
                                char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->opens = count;
    snprintf(out->text, sizeof(out->text), "no known torch order fits these %zu opens", count);
    if (p->hint_has_seed || p->nodes > 1 || p->n < 2 || p->n > UINT32_MAX ||
        count < IDENT_MIN_OPENS)
        return -ENOENT;
    for (size_t i = 0; i < count; i++)
        if (samples[i] >= p->n) {
            snprintf(err, errlen, "identify: open %zu is sample %u, beyond the %llu samples", i,
                     samples[i], (unsigned long long)p->n);
            return -EINVAL;
        }
    struct ident_attempt *a = malloc(sizeof(*a));
    struct ident_readers rd = {0};
    if (!a) {
        snprintf(err, errlen, "identify: out of memory for %zu opens", count);
        return -ENOMEM;
    }
    /* Epoch 0 from its head, as the mount finds it: 32 opens, doubled
     * while they fit nothing (or too little); short of the whole record,
     * which the caller found no one order explains. */
    struct cfs_identified first;
    int rc = 0;
    for (size_t head = IDENT_MIN_OPENS; head < count && rc == 0; head *= 2)
        rc = offline_window(p, samples, pids, ppids, 0, head, a, &first);
    uint64_t per = rc == 1 ? first.epoch_opens : 0;
    if (rc < 0)
        goto fail;
    if (rc == 0 || !fresh_epoch(p, &first, a->win) || per >= count) {
        rc = -ENOENT; /* not one fresh epoch, or nothing after it */
        goto out;
    }
    /* ... that explains its whole epoch, as the mount checks before it
     * learns the next epoch alone (ident_try_next_epoch) */
    struct ident_cand win = a->win;
    double bits;
    if ((rc = ident_group(samples, pids, ppids, per, &rd)) < 0)
        goto fail;
    rc = ident_verify(p, &rd, win.seed, win.skip, win.p0, cfs_identify_evidence_needed(p),
                      &first, &bits);
    if (rc < 0 && rc != -ENOENT)
        goto fail;
    if (rc != 1 || !fresh_epoch(p, &first, win)) {
        rc = -ENOENT;
        goto out;
    }
    as_epoch_global(&first, 0);
    ident_finish(p, &first, 0, false);
    /* Every later epoch alone; the second names torch-global. */
    int found = 1;
    uint32_t e = 1;
    for (uint64_t from = per; from < count && count - from >= IDENT_MIN_OPENS; from += per, e++) {
        struct cfs_identified cur;
        size_t len = count - from < per ? count - from : per;
        rc = offline_epoch(p, samples, pids, ppids, from, len, e, a, &cur);
        if (rc < 0)
            goto fail;
        if (rc == 0) {
            if (found > 1)
                snprintf(out->text, sizeof(out->text), "epoch %u: %.200s", e, cur.text);
            break;
        }
        if (found++ == 1 && each)
            each(arg, &first);
        if (each)
            each(arg, &cur);
        *out = cur;
    }
    rc = rc == 1 && found > 1 ? found : -ENOENT;
    goto out;
fail:
    snprintf(err, errlen, "identify: %s", strerror(-rc));
out:
    ident_readers_free(&rd);
    free(a);
    return rc;
}
