/* The evaluation pass beside the training order: predicted, kept and
 * staged as a cache that knows the future would.
 *
 * A training loop runs evaluate() after every epoch: an unshuffled pass
 * (SequentialSampler, DistributedSampler(shuffle=False)) over another
 * folder, which identification names by its steps (clairfs/roots.h) and
 * hands here.  Its future is as known as the training order's: every
 * sample of the folder, in index order, strided by rank, right after the
 * training epoch ends.  Three things follow from it.
 *
 * - Prediction.  From the first pass that starts after it was named, an
 *   open of the folder is a hit when its index is where the pass should
 *   be (the count of its opens since the pass began, within the tracker's
 *   reordering window), else a miss; they are counted apart
 *   (clairfs_prediction_total{phase="validation"}), never as hits or
 *   misses of the training order, which they can neither feed nor drop.
 *   The next pass is known to begin when an index falls back by more than
 *   half the pass from the highest opened (the workers of one pass read
 *   within a few batches of each other, and their first batches in any
 *   order); a pass cut short shows as misses until a rank's first sample
 *   (an index below the stride) starts the count again.
 *
 * - Keeping.  The next use of an evaluation file is the end of the
 *   training epoch under way: that is its eviction key (pf_eval_key,
 *   through pf_sample_next_use), so Belady's rule keeps it over every file
 *   the training order needs later (the next epoch's) and gives it up for
 *   every file the epoch still reads.  Where the tiers hold the training
 *   epoch's files and the evaluation set, it stays resident across epochs
 *   (ImageNet's 6.4 GB beside 140 GB is the common case); it is never
 *   "read for the last time", so a read does not drop it.
 *
 * - Staging.  The prefetcher walks the folder in the pass's order
 *   (prefetch_loop.c eval_round): into free room at any time, and near the
 *   epoch's end evicting what is needed after the evaluation, so the pass
 *   is staged before the trainer reaches it where it cannot stay.  "Near"
 *   is the horizon where the training window evicts, widened by the
 *   pass's own length: fetching the pass takes about as long as reading
 *   it where the source's cost is per open, so it starts that many opens
 *   before the end.
 *
 * The passes are kept to the end in a list published by an atomic head
 * (an open reads it without a lock); the per-pass counters are atomics.
 * A cursor is the prefetcher thread's. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "prefetch_i.h"

#define OUTSIDE UINT32_MAX

struct pf_eval {
    char name[256];
    uint64_t n;
    uint64_t total; /* opens in one pass: n padded to a multiple of the stride */
    uint32_t stride;
    uint32_t *map;            /* pass index -> the mount's sample */
    uint32_t *local;          /* the mount's sample -> pass index, OUTSIDE */
    atomic_bool armed;        /* a pass began since it was named */
    atomic_uint_fast64_t top; /* until then: the highest index opened */
    atomic_uint_fast64_t pos; /* opens since the current pass began */
    uint64_t cursor, cursor_epoch; /* the prefetcher thread's */
    struct pf_eval *next;
};

static struct pf_eval *head(const struct cfs_prefetch *pf)
{
    return atomic_load_explicit(&pf->evals, memory_order_acquire);
}

int pf_eval_add(struct cfs_prefetch *pf, const char *name, const uint32_t *map, uint64_t n,
                uint32_t stride)
{
    if (!map || n == 0 || stride == 0)
        return -EINVAL;
    for (struct pf_eval *e = head(pf); e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return -EEXIST;
    struct pf_eval *e = calloc(1, sizeof(*e));
    if (!e || !(e->map = malloc(n * sizeof(*map))) ||
        !(e->local = malloc((pf->nsamples + 1) * sizeof(*e->local)))) {
        if (e)
            free(e->map);
        free(e);
        return -ENOMEM;
    }
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->n = n;
    e->stride = stride;
    e->total = (n + stride - 1) / stride * stride;
    memcpy(e->map, map, n * sizeof(*map));
    memset(e->local, 0xff, (pf->nsamples + 1) * sizeof(*e->local));
    for (uint64_t i = 0; i < n; i++)
        if (map[i] < pf->nsamples)
            e->local[map[i]] = (uint32_t)i;
    /* Passes are added by the opens that name them, one at a time per
     * root; a race of two roots named at once is settled by the CAS. */
    struct pf_eval *old = head(pf);
    do
        e->next = old;
    while (!atomic_compare_exchange_weak_explicit(&pf->evals, &old, e, memory_order_release,
                                                  memory_order_acquire));
    return 0;
}

static struct pf_eval *pass_of(const struct cfs_prefetch *pf, uint32_t s, uint32_t *i)
{
    if (s >= pf->nsamples)
        return NULL;
    for (struct pf_eval *e = head(pf); e; e = e->next)
        if ((*i = e->local[s]) != OUTSIDE)
            return e;
    return NULL;
}

bool pf_eval_holds(const struct cfs_prefetch *pf, uint32_t s)
{
    uint32_t i;
    return pass_of(pf, s, &i) != NULL;
}

enum pf_eval_result pf_eval_open(struct cfs_prefetch *pf, uint32_t s, uint32_t window)
{
    uint32_t i;
    struct pf_eval *e = pass_of(pf, s, &i);
    if (!e)
        return PF_EVAL_NONE;
    bool start = i < e->stride; /* a rank's first sample: a pass begins */
    if (!atomic_load_explicit(&e->armed, memory_order_acquire)) {
        /* The pass it was named in runs on up to its last indices; the
         * next one begins where an index falls back by over half a pass
         * (the workers of one pass are never that far apart). */
        uint64_t top = atomic_load_explicit(&e->top, memory_order_relaxed);
        while (i > top && !atomic_compare_exchange_weak(&e->top, &top, i))
            ;
        if ((uint64_t)i + e->total / 2 >= top)
            return PF_EVAL_UNARMED;
        bool no = false;
        if (atomic_compare_exchange_strong(&e->armed, &no, true))
            cfs_debug("order: the validation pass over %s begins: predicted", e->name);
    }
    uint64_t p = atomic_fetch_add_explicit(&e->pos, 1, memory_order_relaxed) % e->total;
    uint64_t d = p > i ? p - i : i - p;
    if (d > e->total - d)
        d = e->total - d; /* the pass wraps around */
    if (d <= window)
        return PF_EVAL_HIT;
    if (start) /* a pass cut short, and a new one: count from here */
        atomic_store_explicit(&e->pos, i + 1, memory_order_relaxed);
    return PF_EVAL_MISS;
}

bool pf_eval_key(struct cfs_prefetch *pf, uint32_t s, uint64_t *key)
{
    uint32_t i;
    if (!pf->track || !pass_of(pf, s, &i))
        return false;
    *key = pf_track_epoch_end(pf->track);
    return true;
}

uint64_t pf_eval_files(const struct cfs_prefetch *pf)
{
    uint64_t k = 0;
    for (struct pf_eval *e = head(pf); e; e = e->next)
        k += e->n;
    return k;
}

uint64_t pf_eval_next(struct cfs_prefetch *pf, struct pf_eval **at, uint32_t epoch)
{
    for (struct pf_eval *e = *at ? *at : head(pf); e; e = e->next) {
        if (e->cursor_epoch != (uint64_t)epoch + 1) {
            e->cursor_epoch = (uint64_t)epoch + 1; /* a new epoch: the pass again */
            e->cursor = 0;
        }
        if (e->cursor < e->n) {
            *at = e;
            return e->map[e->cursor];
        }
    }
    *at = NULL;
    return PF_NEVER;
}

void pf_eval_step(struct pf_eval *at)
{
    at->cursor++;
}

void pf_evals_free(struct cfs_prefetch *pf)
{
    struct pf_eval *e = head(pf);
    atomic_store(&pf->evals, NULL);
    while (e) {
        struct pf_eval *next = e->next;
        free(e->map);
        free(e->local);
        free(e);
        e = next;
    }
}
