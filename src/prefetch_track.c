/* Where is the trainer?  Position tracking from opens.
 *
 * The trainer never tells us its position; it opens files.  A PyTorch
 * DataLoader opens them out of order (T workers each load whole batches,
 * P*T batches are in flight), and several local ranks step only roughly in
 * lockstep.  So the position is not "the slot of the last open" but a
 * count: the number of distinct expected reads of the current epoch seen so
 * far.  A count is immune to reordering: after k opens of files of this
 * epoch the trainer has consumed k slots, whichever they were, and the
 * slots it has not consumed lie within the reordering window around k.
 *
 * Three epochs are materialised (previous, current, next), each as its
 * slot list plus per sample the first slot, a link to the next slot of the
 * same sample, and how many of its occurrences were consumed.  An open of s
 * consumes, in this order: its next unconsumed occurrence in the current
 * epoch; in the next epoch, if that occurrence lies within the window of
 * the next epoch's own count (the fastest rank already started it); in the
 * previous epoch (a slow rank's tail).  Anything else (a second open of a
 * file, a file the plan never reads now) is a miss and changes nothing.
 * The epoch advances when the current one is fully consumed, or when the
 * next one has consumed more than a window (the trainer skipped the rest).
 * A hit is an open whose slot lies within the window of the count.
 *
 * Next use (the cache's eviction key) is read from the same tables: the
 * next unconsumed occurrence in the previous, current or next epoch, else
 * the plan walker's answer, whose cursor stands at the end of the next
 * epoch.  All of it sits behind one mutex that is a leaf: the cache calls
 * next_use with its own lock held, and nothing here calls out. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/plan.h"
#include "prefetch_i.h"

#define NONE32 UINT32_MAX

struct pf_epoch {
    bool valid;
    uint32_t rel;    /* epoch relative to start_epoch */
    uint64_t start;  /* absolute position of slot 0 */
    uint32_t len;
    uint32_t consumed;
    uint32_t *file;  /* len */
    uint32_t *nxt;   /* len: next slot of the same sample, NONE32 */
    uint32_t *first; /* n: first slot of the sample, NONE32 */
    uint32_t *used;  /* n: occurrences consumed */
    uint32_t cap;
};

struct pf_track {
    pthread_mutex_t mu;
    struct cfs_plan *plan;
    struct cfs_plan_walk *walk;
    uint64_t n;
    uint32_t start_epoch, nepochs;
    uint32_t node; /* the planned node */
    uint32_t window;
    uint32_t walked_rel; /* epochs the walker has produced: [0, walked_rel) */
    /* How far ahead of the count an open within the window took its slot:
     * the most in the current epoch and in the one before. */
    uint32_t lead, last_lead;
    struct pf_epoch ep[3];
    int prev, cur, next; /* indices into ep */
    uint64_t gen;
};

static int epoch_alloc(struct pf_epoch *e, uint64_t n)
{
    e->first = malloc((n ? n : 1) * sizeof(*e->first));
    e->used = calloc(n ? n : 1, sizeof(*e->used));
    if (!e->first || !e->used)
        return -ENOMEM;
    memset(e->first, 0xFF, n * sizeof(*e->first));
    return 0;
}

static void epoch_clear(struct pf_epoch *e)
{
    if (e->valid)
        for (uint32_t i = 0; i < e->len; i++) {
            e->first[e->file[i]] = NONE32;
            e->used[e->file[i]] = 0;
        }
    e->valid = false;
    e->len = 0;
    e->consumed = 0;
}

/* Restart the walker at position 0 (for a jump backwards). */
static int walk_restart(struct pf_track *t)
{
    char err[256];
    cfs_plan_walk_destroy(t->walk);
    t->walk = NULL;
    t->walked_rel = 0;
    return cfs_plan_walk_create(t->plan, &t->walk, err, sizeof(err));
}

/* Pull relative epoch rel out of the walker into e (the walker must stand at
 * its start); rel beyond the plan leaves e invalid. */
static int epoch_fill(struct pf_track *t, struct pf_epoch *e, uint32_t rel)
{
    epoch_clear(e);
    e->rel = rel;
    if (rel >= t->nepochs)
        return 0;
    uint64_t start = cfs_plan_epoch_start(t->plan, rel);
    uint64_t len = cfs_plan_epoch_start(t->plan, rel + 1) - start;
    if (len >= NONE32)
        return -EFBIG;
    if (len > e->cap) {
        free(e->file);
        free(e->nxt);
        e->file = malloc(len * sizeof(*e->file));
        e->nxt = malloc(len * sizeof(*e->nxt));
        e->cap = (e->file && e->nxt) ? (uint32_t)len : 0;
        if (!e->cap)
            return -ENOMEM;
    }
    for (uint64_t i = 0; i < len; i++) {
        struct cfs_plan_access a;
        int rc = cfs_plan_walk_next(t->walk, &a);
        if (rc <= 0 || a.pos != start + i)
            return rc < 0 ? rc : -EIO;
        e->file[i] = a.sample;
    }
    for (uint64_t i = len; i-- > 0;) {
        uint32_t f = e->file[i];
        e->nxt[i] = e->first[f];
        e->first[f] = (uint32_t)i;
    }
    e->start = start;
    e->len = (uint32_t)len;
    e->valid = true;
    t->walked_rel = rel + 1;
    return 0;
}

/* Slot of the k-th occurrence of s in e, or NONE32. */
static uint32_t occurrence(const struct pf_epoch *e, uint32_t s, uint32_t k)
{
    if (!e->valid)
        return NONE32;
    uint32_t slot = e->first[s];
    while (k-- > 0 && slot != NONE32)
        slot = e->nxt[slot];
    return slot;
}

static int advance(struct pf_track *t)
{
    int old = t->prev;
    t->last_lead = t->lead;
    t->lead = 0;
    t->prev = t->cur;
    t->cur = t->next;
    t->next = old;
    return epoch_fill(t, &t->ep[t->next], t->ep[t->cur].rel + 1);
}

int pf_track_create(const struct pf_track_params *p, struct pf_track **out, char *err,
                    size_t errlen)
{
    struct pf_track *t = calloc(1, sizeof(*t));
    int rc = -ENOMEM;
    *out = NULL;
    if (!t)
        goto nomem;
    assert(p->window > 0); /* the run configuration's, never 0 */
    pthread_mutex_init(&t->mu, NULL);
    t->n = p->plan.n;
    t->start_epoch = p->plan.start_epoch;
    t->prev = 0;
    t->cur = 1;
    t->next = 2;
    t->node = p->plan.node;
    rc = cfs_plan_create(&p->plan, &t->plan, err, errlen);
    if (rc)
        goto fail;
    t->nepochs = cfs_plan_epoch_count(t->plan);
    t->window = p->window;
    for (int i = 0; i < 3; i++)
        if ((rc = epoch_alloc(&t->ep[i], p->plan.n)) < 0)
            goto nomem;
    rc = walk_restart(t);
    if (rc == 0)
        rc = epoch_fill(t, &t->ep[t->cur], 0);
    if (rc == 0)
        rc = epoch_fill(t, &t->ep[t->next], 1);
    if (rc) {
        snprintf(err, errlen, "prefetch: walking the plan: %s", strerror(-rc));
        goto fail;
    }
    *out = t;
    return 0;
nomem:
    rc = -ENOMEM;
    snprintf(err, errlen, "prefetch: out of memory for the position tracker");
fail:
    pf_track_destroy(t);
    return rc;
}

void pf_track_destroy(struct pf_track *t)
{
    if (!t)
        return;
    for (int i = 0; i < 3; i++) {
        free(t->ep[i].file);
        free(t->ep[i].nxt);
        free(t->ep[i].first);
        free(t->ep[i].used);
    }
    cfs_plan_walk_destroy(t->walk);
    cfs_plan_destroy(t->plan);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static uint32_t absdiff(uint32_t a, uint32_t b)
{
    return a > b ? a - b : b - a;
}

void pf_track_open(struct pf_track *t, uint32_t s, struct pf_obs *o)
{
    pthread_mutex_lock(&t->mu);
    struct pf_epoch *prev = &t->ep[t->prev], *cur = &t->ep[t->cur], *next = &t->ep[t->next];
    uint32_t w = t->window;
    uint32_t old_rel = cur->rel;
    o->hit = false;
    if (s < t->n) {
        /* The occurrence within its window wins: current, next, previous;
         * failing that, the current epoch's (an out-of-order reader). */
        uint32_t c = occurrence(cur, s, cur->used[s]);
        uint32_t nx = occurrence(next, s, next->used[s]);
        uint32_t pv = occurrence(prev, s, prev->used[s]);
        struct pf_epoch *take = NULL;
        if (c != NONE32 && absdiff(c, cur->consumed) <= w) {
            take = cur;
            o->hit = true;
        } else if (nx != NONE32 && nx <= next->consumed + w) {
            take = next;
            o->hit = cur->len - cur->consumed <= w;
        } else if (pv != NONE32 && (uint64_t)(prev->len - pv) + cur->consumed <= w) {
            take = prev;
            o->hit = true;
        } else if (c != NONE32) {
            take = cur;
        } else if (pv != NONE32) {
            take = prev;
        }
        if (take && o->hit && take != prev) {
            uint64_t slot = take->start + (take == cur ? c : nx);
            uint64_t pos = cur->start + cur->consumed;
            if (slot > pos && slot - pos > t->lead)
                t->lead = (uint32_t)(slot - pos);
        }
        if (take) {
            take->used[s]++;
            take->consumed++;
        }
    }
    /* The current epoch is done, or the trainer has clearly moved on. */
    while (cur->valid && (cur->consumed >= cur->len || next->consumed > w)) {
        if (advance(t) < 0)
            break; /* the walker failed: stay on the last epoch we know */
        cur = &t->ep[t->cur];
        next = &t->ep[t->next];
    }
    o->epoch_changed = cur->rel != old_rel;
    o->epoch = t->start_epoch + cur->rel;
    pthread_mutex_unlock(&t->mu);
}

uint64_t pf_track_next_use(struct pf_track *t, uint32_t s)
{
    uint64_t pos = PF_NEVER;
    if (s >= t->n)
        return pos;
    pthread_mutex_lock(&t->mu);
    const int order[3] = {t->prev, t->cur, t->next};
    for (int i = 0; i < 3 && pos == PF_NEVER; i++) {
        const struct pf_epoch *e = &t->ep[order[i]];
        uint32_t slot = occurrence(e, s, e->valid ? e->used[s] : 0);
        if (slot != NONE32)
            pos = e->start + slot;
    }
    if (pos == PF_NEVER && t->ep[t->next].valid)
        pos = cfs_plan_walk_next_use(t->walk, s, NULL);
    pthread_mutex_unlock(&t->mu);
    return pos;
}

void pf_track_position(struct pf_track *t, uint64_t *pos, uint32_t *epoch, uint64_t *gen)
{
    pthread_mutex_lock(&t->mu);
    const struct pf_epoch *cur = &t->ep[t->cur];
    if (pos)
        *pos = cur->valid ? cur->start + cur->consumed : cfs_plan_epoch_start(t->plan, t->nepochs);
    if (epoch)
        *epoch = t->start_epoch + cur->rel;
    if (gen)
        *gen = t->gen;
    pthread_mutex_unlock(&t->mu);
}

int pf_track_sample_at(struct pf_track *t, uint64_t pos, uint32_t *s, bool *consumed)
{
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    const int order[2] = {t->cur, t->next};
    for (int i = 0; i < 2; i++) {
        const struct pf_epoch *e = &t->ep[order[i]];
        if (!e->valid || pos < e->start || pos - e->start >= e->len)
            continue;
        uint32_t slot = (uint32_t)(pos - e->start), f = e->file[slot], k = 0;
        for (uint32_t q = e->first[f]; q != slot && q != NONE32; q = e->nxt[q])
            k++;
        *s = f;
        *consumed = e->used[f] > k;
        rc = 1;
        break;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int pf_track_set_epoch(struct pf_track *t, uint32_t e)
{
    if (e < t->start_epoch || e - t->start_epoch >= t->nepochs)
        return -ERANGE;
    uint32_t rel = e - t->start_epoch;
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    if (rel < t->ep[t->cur].rel) {
        /* Backwards: walk again from the start of the run. */
        for (int i = 0; i < 3; i++)
            epoch_clear(&t->ep[i]);
        rc = walk_restart(t);
        for (uint32_t r = 0; rc == 0 && r < rel; r++)
            rc = epoch_fill(t, &t->ep[t->prev], r); /* skipped, buffer reused */
        epoch_clear(&t->ep[t->prev]);
        if (rc == 0)
            rc = epoch_fill(t, &t->ep[t->cur], rel);
        if (rc == 0)
            rc = epoch_fill(t, &t->ep[t->next], rel + 1);
    } else {
        while (rc == 0 && t->ep[t->cur].rel < rel)
            rc = advance(t);
        /* Forget what was consumed: the trainer starts epoch e afresh. */
        for (int i = 0; i < 3; i++) {
            struct pf_epoch *ep = &t->ep[i];
            if (i == t->prev) {
                epoch_clear(ep);
                continue;
            }
            for (uint32_t k = 0; ep->valid && k < ep->len; k++)
                ep->used[ep->file[k]] = 0;
            ep->consumed = 0;
        }
    }
    t->gen++;
    pthread_mutex_unlock(&t->mu);
    return rc;
}

uint64_t pf_track_epoch_len(struct pf_track *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t len = t->ep[t->cur].valid ? t->ep[t->cur].len : 0;
    pthread_mutex_unlock(&t->mu);
    return len;
}

uint64_t pf_track_epoch_end(struct pf_track *t)
{
    pthread_mutex_lock(&t->mu);
    const struct pf_epoch *cur = &t->ep[t->cur];
    uint64_t end = cur->valid ? cur->start + cur->len : PF_NEVER;
    pthread_mutex_unlock(&t->mu);
    return end;
}

uint32_t pf_track_window(const struct pf_track *t)
{
    return t->window;
}

uint32_t pf_track_lead(struct pf_track *t)
{
    pthread_mutex_lock(&t->mu);
    uint32_t lead = t->lead > t->last_lead ? t->lead : t->last_lead;
    pthread_mutex_unlock(&t->mu);
    return lead;
}

enum cfs_tier pf_track_tier(const struct pf_track *t, uint32_t s)
{
    return cfs_plan_tier(t->plan, s);
}

const uint32_t *pf_track_order(const struct pf_track *t, enum cfs_tier tier, uint64_t *count)
{
    return cfs_plan_prefetch_order(t->plan, tier, count);
}

uint64_t pf_track_tier_bytes(const struct pf_track *t, enum cfs_tier tier)
{
    struct cfs_plan_node_summary sum;
    if (cfs_plan_node_summary(t->plan, t->node, &sum) < 0)
        return 0;
    return sum.bytes[tier];
}

uint32_t pf_track_owner(const struct pf_track *t, uint32_t s, enum cfs_tier *tier,
                        uint32_t *from_epoch)
{
    enum cfs_tier pt = CFS_TIER_NONE;
    if (s >= t->n)
        return PF_NO_NODE;
    uint32_t owner = cfs_plan_owner(t->plan, s, &pt);
    if (tier)
        *tier = pt;
    if (from_epoch)
        *from_epoch = cfs_plan_owner_epoch(t->plan, s);
    return owner == CFS_NODE_NONE ? PF_NO_NODE : owner;
}

uint32_t pf_track_start_epoch(const struct pf_track *t)
{
    return t->start_epoch;
}

uint32_t pf_track_end_epoch(const struct pf_track *t)
{
    return t->start_epoch + t->nepochs;
}

const struct cfs_plan *pf_track_plan(const struct pf_track *t)
{
    return t->plan;
}

/* What was consumed of from's epoch, copied into to's copy of the same
 * absolute epoch: the two plans walk the same sampler, so the epoch's
 * files are the same, slot for slot. */
static void copy_consumed(struct pf_epoch *to, uint32_t to_start, const struct pf_epoch *from,
                          uint32_t from_start)
{
    if (!to->valid || !from->valid || to->rel + to_start != from->rel + from_start ||
        to->len != from->len)
        return;
    for (uint32_t k = 0; k < from->len; k++)
        to->used[from->file[k]] = from->used[from->file[k]];
    to->consumed = from->consumed;
}

int pf_track_follow(struct pf_track *t, struct pf_track *from)
{
    pthread_mutex_lock(&from->mu);
    const struct pf_epoch *cur = &from->ep[from->cur];
    uint32_t epoch = from->start_epoch + cur->rel;
    pthread_mutex_unlock(&from->mu);
    if (epoch < t->start_epoch || epoch - t->start_epoch >= t->nepochs)
        epoch = t->start_epoch; /* not in t's window: at its start */
    int rc = epoch == t->start_epoch + t->ep[t->cur].rel ? 0 : pf_track_set_epoch(t, epoch);
    if (rc < 0)
        return rc;
    /* t is not shared yet: from's lock alone keeps the copy consistent. */
    pthread_mutex_lock(&from->mu);
    copy_consumed(&t->ep[t->cur], t->start_epoch, &from->ep[from->cur], from->start_epoch);
    copy_consumed(&t->ep[t->next], t->start_epoch, &from->ep[from->next], from->start_epoch);
    pthread_mutex_unlock(&from->mu);
    t->gen++;
    return 0;
}
