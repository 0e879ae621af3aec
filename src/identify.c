/* Order identification (clairfs/identify.h): the opens as they come.
 * cfs_identify_observe appends each open under the module's lock and
 * wakes the thread (identify_thread.c) when the next attempt is due;
 * cfs_identify_restart and cfs_identify_state are the rest of what the
 * data path asks.
 *
 * Why some opens restart a scan.  A scan filters the seeds with the sets
 * of the readers' first and second distinct opens (identify_scan.c): a
 * scan started without a reader that holds the stream's head cannot pass
 * the true seed, and the next scan may be minutes away.  So the first
 * opens of the first readers - and their second distinct opens - cancel a
 * running scan and start it again with them; which readers may do so, and
 * until when, is note_reader's question: a shell loop that runs one
 * process per file, or a later epoch's new workers, must not restart
 * scans forever.  Each open costs a lookup among those first readers, not
 * a scan.
 *
 * The trainers' pace (opens and seconds of reading) is counted here for
 * the scans' budget (identify_pace.c).
 *
 * Why the clock is a parameter.  "Within a minute of the first reader"
 * and the pace are times of the opens, read on params.now (ident_now):
 * the tests step a clock of their own past new_reader_seconds instead of
 * sleeping past it and hoping the host kept up. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "identify_i.h"

static bool process_alive(const struct cfs_identify *id, pid_t pid)
{
    if (id->p.process_alive)
        return id->p.process_alive(id->p.process_alive_arg, pid);
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Under the lock: does a reader with parent ppid, other than pid, still
 * run? */
static bool sibling_alive(const struct cfs_identify *id, pid_t pid, pid_t ppid)
{
    for (size_t i = 0; i < id->nreaders; i++)
        if (id->reader_parents[i] == ppid && id->readers[i] != pid &&
            process_alive(id, id->readers[i]))
            return true;
    return false;
}

/* Under the lock: the running scan is cancelled (and started again with
 * the opens so far), or the next attempt comes with the next open. */
static void restart_scan(struct cfs_identify *id)
{
    if (id->attempting)
        ident_cancel_attempt(id);
    else if (id->len >= IDENT_MIN_OPENS && id->next_attempt > id->len + 1)
        id->next_attempt = id->len + 1;
}

/* Under the lock, from observe: the window holds a whole epoch and one
 * more open came: the next window starts with it.  One that ends
 * unidentified ends the windows (too short an epoch for a scan, or no
 * longer torch-global: learning goes on over every open). */
static void epoch_roll(struct cfs_identify *id)
{
    if (id->state != CFS_IDENTIFY_IDENTIFIED) {
        id->epochs.stage = IDENT_EPOCHS_OFF;
        return;
    }
    if (id->attempting)
        ident_cancel_attempt(id);
    ident_window_from(id, id->len, id->epochs.epoch + 1);
}

/* Under the lock: reader i opened `sample`.  Its second distinct open
 * joins the scan's second set as its first open joins the first
 * (randperm[p0 + 1] is the head's second open when its batch holds two
 * samples or more), so a scan begun while the head had opened once cannot
 * pass its true seed - and no new reader may come to cancel it: seen as
 * accelerate's head slow to its second open while three workers read 31
 * files, the scan at idle priority then waiting for the loader's epoch to
 * end.  It restarts the scan as the reader's first open did, once. */
static void note_second(struct cfs_identify *id, size_t i, uint32_t sample)
{
    if (id->reader_two[i] || sample == id->reader_first[i])
        return;
    id->reader_two[i] = true;
    if (!id->reader_restarts[i] || id->state == CFS_IDENTIFY_IDENTIFIED || id->len >= id->p.n)
        return;
    restart_scan(id);
}

/* Under the lock: a reader's first open changes the sets a scan filters
 * with (another rank whose first open is randperm[1], say), so a scan
 * started without it can pass over the true seed; it is cancelled and
 * started again with the new reader, for the first readers only (a shell
 * loop that runs one process per file must not restart scans forever) and
 * only within the first n opens (not for a later epoch's workers); so is
 * its second distinct open (note_second). */
static void note_reader(struct cfs_identify *id, uint32_t sample, pid_t pid, pid_t ppid)
{
    for (size_t i = 0; i < id->nreaders; i++)
        if (id->readers[i] == pid) {
            note_second(id, i, sample);
            return; /* every open but a reader's first two: nothing more */
        }
    if (id->nreaders == IDENT_NEW_READER_RESTARTS)
        return;
    double now = ident_now(id) - id->first_open, parent_first = now;
    for (size_t i = 0; i < id->nreaders; i++)
        if (id->reader_parents[i] == ppid && id->reader_seen[i] < parent_first)
            parent_first = id->reader_seen[i];
    size_t r = id->nreaders++;
    id->readers[r] = pid;
    id->reader_seen[r] = now;
    id->reader_parents[r] = ppid;
    id->reader_first[r] = sample;
    id->reader_two[r] = false;
    id->reader_restarts[r] = false; /* unless its first open restarts the scan */
    if (id->state == CFS_IDENTIFY_IDENTIFIED)
        return; /* checked as the opens come */
    /* First seen after a dataset's worth of opens (n: one epoch of every
     * rank on this node, or more), the reader is a later epoch's - the
     * DataLoader's new workers - and its first open is not the head of the
     * epoch the running scan filters with.  Cancelling for it would throw
     * the scan away at every epoch's start: at ImageNet's size on busy
     * cores the scan at idle priority outlasts an epoch and would never
     * end.  A node that runs only some of the ranks reads fewer than n
     * files an epoch, so a reader first seen a minute after its parent's
     * first reader (new_reader_seconds) does not restart it either: a
     * later epoch's workers are the same ranks' children.  A rank can
     * start late (DDP ranks meet in init_process_group, then each lists
     * the dataset on its own, 10 s and more for ImageNet through a busy
     * mount, while the first rank's workers read ahead), and a scan
     * without its workers' first opens cannot find the order: the
     * epoch's head is one of them.  So a reader of a new parent restarts
     * the scan at any time in the first epoch, and so do its siblings
     * within the minute after it (the worker with the head need not open
     * first).  Past the minute a sibling that still runs says the same: a
     * later epoch's workers start after their rank's last ones ended (a
     * DataLoader joins its workers at the epoch's end), where ranks
     * without workers - siblings under one launcher - run side by side,
     * and one that starts minutes late holds the head as much as a late
     * rank's workers do.  The next attempt takes the reader in. */
    double late = id->p.new_reader_seconds > 0 ? id->p.new_reader_seconds
                                               : CFS_IDENTIFY_NEW_READER_SECONDS;
    if (id->len >= id->p.n || (now - parent_first > late && !sibling_alive(id, pid, ppid)))
        return;
    id->reader_restarts[r] = true;
    restart_scan(id);
}

void cfs_identify_observe(struct cfs_identify *id, uint32_t sample, pid_t pid, pid_t ppid)
{
    if (sample >= id->p.n)
        return; /* not an indexed sample of this order */
    pthread_mutex_lock(&id->lock);
    if (id->epochs.stage != IDENT_EPOCHS_OFF && id->len == id->epochs.per)
        epoch_roll(id); /* this open begins the next epoch */
    if (id->len < IDENT_MAX_OBS) {
        if (id->len == 0)
            id->first_open = ident_now(id);
        /* the trainers' pace, for the search's budget only (absolute
         * times: an epoch's window moves first_open) */
        if (id->pace.budget > 0) {
            double now = ident_now(id);
            bool paced = atomic_load(&id->pace.opens) > 0; /* an open before this one */
            double gap = paced && now > id->last_open ? now - id->last_open : 0;
            id->last_open = now;
            atomic_fetch_add(&id->pace.reading_us,
                             (uint64_t)((gap < IDENT_PACE_GAP ? gap : IDENT_PACE_GAP) * 1e6));
            atomic_fetch_add(&id->pace.opens, 1);
        }
        note_reader(id, sample, pid, ppid);
        id->samples[id->len] = sample;
        id->pids[id->len] = pid;
        id->ppids[id->len] = ppid;
        if (++id->len == id->next_attempt) {
            pthread_cond_signal(&id->wake);
            if (id->ranging) /* the full range's slice yields to the attempt */
                ident_cancel_attempt(id);
        }
    }
    pthread_mutex_unlock(&id->lock);
}

void cfs_identify_restart(struct cfs_identify *id)
{
    pthread_mutex_lock(&id->lock);
    id->len = 0;
    id->generation++;
    id->restarts++;
    id->refine_pending = id->refine_checking = false;
    id->state = CFS_IDENTIFY_LEARNING;
    id->next_attempt = IDENT_MIN_OPENS;
    id->fruitless = 0;
    id->nkeep = 0;
    id->nreaders = 0;
    memset(&id->result, 0, sizeof(id->result));
    memset(&id->global, 0, sizeof(id->global));
    memset(&id->epochs, 0, sizeof(id->epochs));
    atomic_store(&id->pace.opens, 0);
    atomic_store(&id->pace.reading_us, 0);
    atomic_store(&id->pace.reset, true);
    ident_cancel_attempt(id);
    pthread_mutex_unlock(&id->lock);
}

/* Under the lock: what a late hint or late orders change is tried on the
 * opens so far, at once (the running attempt cancelled), or at the first
 * attempt's opens. */
static void rescan_now(struct cfs_identify *id)
{
    id->fruitless = 0;
    if (id->attempting)
        ident_cancel_attempt(id);
    if (id->len >= IDENT_MIN_OPENS) {
        id->next_attempt = id->len;
        pthread_cond_signal(&id->wake);
    } else {
        id->next_attempt = IDENT_MIN_OPENS;
    }
}

/* Does hint tell the order identified (r) better: the same seed, world and
 * batch, and drop_last, persistent workers or detectron2's stream where r
 * has torch-ddp's (another node saw them at its epoch 1)? */
static bool hint_refines(const struct cfs_sampler_params *r, const struct cfs_sampler_params *hint)
{
    bool family = hint->kind == r->kind ||
                  (r->kind == CFS_SAMPLER_TORCH_DDP && hint->kind == CFS_SAMPLER_DETECTRON2);
    bool differs = hint->kind != r->kind || hint->drop_last != r->drop_last ||
                   hint->drop_last_batch != r->drop_last_batch ||
                   hint->persistent_workers != r->persistent_workers;
    return family && differs && (uint32_t)hint->seed == (uint32_t)r->seed &&
           hint->world == r->world && hint->batch == r->batch;
}

void cfs_identify_take_hint(struct cfs_identify *id, const struct cfs_sampler_params *hint)
{
    pthread_mutex_lock(&id->lock);
    bool learning = id->state != CFS_IDENTIFY_IDENTIFIED;
    if ((learning || hint_refines(&id->result.sampler, hint)) && hint->n == id->p.n) {
        id->late_hint = *hint;
        id->late_hint.list_path = NULL;
        id->late_hint_pending = true;
        id->refine_pending = !learning;
        rescan_now(id);
    }
    pthread_mutex_unlock(&id->lock);
}

/* A copy of the module's opens and parameters, for a check on the
 * caller's thread (the thread sets p.hint between attempts: copied under
 * the lock, into hint). */
struct opens_copy {
    struct cfs_identify_params p;
    struct cfs_sampler_params hint;
    uint32_t *s;
    pid_t *pids, *ppids;
    size_t len;
};

static void opens_copy_free(struct opens_copy *c)
{
    free(c->s);
    free(c->pids);
    free(c->ppids);
    c->s = NULL, c->pids = NULL, c->ppids = NULL;
}

/* -EALREADY once identified, -ENOMEM. */
static int snapshot(struct cfs_identify *id, struct opens_copy *c)
{
    pthread_mutex_lock(&id->lock);
    c->p = id->p;
    if (c->p.hint) {
        c->hint = *c->p.hint;
        c->p.hint = &c->hint;
    }
    c->len = id->len;
    bool identified = id->state == CFS_IDENTIFY_IDENTIFIED;
    size_t bytes = c->len ? c->len : 1;
    c->s = identified ? NULL : malloc(bytes * sizeof(*c->s));
    c->pids = c->s ? malloc(bytes * sizeof(*c->pids)) : NULL;
    c->ppids = c->pids ? malloc(bytes * sizeof(*c->ppids)) : NULL;
    if (c->ppids) {
        memcpy(c->s, id->samples, c->len * sizeof(*c->s));
        memcpy(c->pids, id->pids, c->len * sizeof(*c->pids));
        memcpy(c->ppids, id->ppids, c->len * sizeof(*c->ppids));
    }
    pthread_mutex_unlock(&id->lock);
    if (c->ppids)
        return 0;
    opens_copy_free(c);
    return identified ? -EALREADY : -ENOMEM;
}

int cfs_identify_take_candidate(struct cfs_identify *id, uint32_t seed, uint32_t skip)
{
    struct opens_copy c;
    int rc = snapshot(id, &c);
    if (rc < 0)
        return rc;
    /* Verified here, on the caller's thread, before the module hears of
     * it: a seed that passed another share but fits nothing (thousands a
     * range at a few thousand samples) must not cancel the running scan. */
    struct cfs_identified out;
    char err[256];
    rc = cfs_identify_split_verify(&c.p, c.s, c.pids, c.ppids, c.len, &seed, &skip, 1, &out, err,
                                   sizeof(err));
    opens_copy_free(&c);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    pthread_mutex_lock(&id->lock);
    if (id->state != CFS_IDENTIFY_IDENTIFIED) {
        /* the next attempt checks it first, at once, over every open */
        id->passed = (struct ident_cand){seed, skip, 0};
        id->passed_pending = true;
        if (id->attempting)
            ident_cancel_attempt(id);
        id->next_attempt = id->len;
        pthread_cond_signal(&id->wake);
    }
    pthread_mutex_unlock(&id->lock);
    return 1;
}

int cfs_identify_split_sets_now(struct cfs_identify *id, struct cfs_split_sets *out)
{
    struct opens_copy c;
    int rc = snapshot(id, &c);
    if (rc < 0)
        return rc;
    rc = cfs_identify_split_sets(&c.p, c.s, c.pids, c.ppids, c.len, out);
    opens_copy_free(&c);
    return rc;
}

void cfs_identify_take_orders(struct cfs_identify *id, const uint32_t *const *orders,
                              const char *const *names, size_t count)
{
    pthread_mutex_lock(&id->lock);
    id->late_orders = orders;
    id->late_order_names = names;
    id->late_norders = count;
    id->late_orders_pending = true;
    if (id->state != CFS_IDENTIFY_IDENTIFIED && count) {
        rescan_now(id);
    }
    pthread_mutex_unlock(&id->lock);
}

enum cfs_identify_state cfs_identify_state(struct cfs_identify *id, struct cfs_identified *out)
{
    pthread_mutex_lock(&id->lock);
    enum cfs_identify_state st = id->state;
    if (out && st == CFS_IDENTIFY_IDENTIFIED)
        *out = id->result;
    pthread_mutex_unlock(&id->lock);
    return st;
}
