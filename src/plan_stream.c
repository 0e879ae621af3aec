/* Walking the planned node's stream with next use.
 *
 * The walker holds two epochs of the stream, A (current) and B (next), as
 * file lists, with a link from each slot to the next slot that reads the
 * same file (nxt).  Per file, nu[f] is the first slot after the cursor that
 * reads f, or NEVER.  Consuming slot p sets nu[f] = nxt[p], so next use is
 * O(1) inside the window.  When A is exhausted, B becomes A and the
 * following epoch is generated as the new B: the last slot of each file in
 * A is linked to its first slot in B, and files absent from A get their
 * first slot in B.  Beyond the window the per-file epoch bitmap of the plan
 * gives the epoch, whose start position is returned (inexact).
 *
 * Positions are absolute stream positions (uint64), so nothing shifts when
 * the window moves; linking an epoch needs a file's slot in it only (32
 * bits).  Memory: 12 bytes per file plus two epochs of the node's stream
 * (12 bytes per access). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_i.h"

#define NONE32 UINT32_MAX

struct epoch_buf {
    uint32_t rel;      /* epoch relative to start; valid when len or rel < nepochs */
    bool valid;
    uint64_t start;    /* position of slot 0 */
    uint64_t len;
    uint32_t *file;
    uint64_t *nxt;
    uint64_t cap;
    uint64_t *rank_len; /* per local rank */
};

struct cfs_plan_walk {
    const struct cfs_plan *p;
    struct cfs_plan_source src;
    void *st;
    struct cfs_rank_range rr;
    struct epoch_buf buf[2];
    int a; /* index of A in buf */
    uint64_t *nu;
    uint32_t *tmp; /* link_next(): a file's next slot in B, NONE32 when none */
    /* Cursor within A: slot, and the lockstep step/rank it stands for. */
    uint64_t slot;
    uint64_t step;
    uint32_t lrank;
    bool started;
};

static int fill(struct cfs_plan_walk *w, struct epoch_buf *b, uint32_t rel)
{
    const struct cfs_plan *p = w->p;
    b->rel = rel;
    b->valid = rel < p->nepochs;
    b->len = 0;
    if (!b->valid)
        return 0;
    b->start = p->epoch_start[rel];
    uint64_t len = p->epoch_start[rel + 1] - b->start;
    if (len >= NONE32)
        return -EOVERFLOW; /* slots are 32-bit in link_next() */
    if (len > b->cap) {
        free(b->file);
        free(b->nxt);
        b->file = malloc(len * sizeof(*b->file));
        b->nxt = malloc(len * sizeof(*b->nxt));
        if (!b->file || !b->nxt) {
            b->cap = 0;
            return -ENOMEM;
        }
        b->cap = len;
    }
    uint32_t e = p->start_epoch + rel;
    int rc = w->src.compute_epoch(w->st, e);
    if (rc < 0)
        return rc;
    uint64_t maxlen = 0;
    for (uint32_t l = 0; l < w->rr.count; l++) {
        b->rank_len[l] = w->src.rank_len(w->st, e, cfs_rank_at(w->rr, l));
        if (b->rank_len[l] > maxlen)
            maxlen = b->rank_len[l];
    }
    uint64_t k = 0;
    for (uint64_t s = 0; s < maxlen; s++)
        for (uint32_t l = 0; l < w->rr.count; l++)
            if (s < b->rank_len[l] && k < len)
                b->file[k++] = w->src.rank_at(w->st, cfs_rank_at(w->rr, l), s);
    if (k != len)
        return -EIO; /* the source changed under us */
    b->len = len;
    return 0;
}

/* Link the new B after A (A's slots already point inside A or NEVER). */
static inline uint64_t slot_pos(const struct epoch_buf *b, uint32_t slot)
{
    return slot == NONE32 ? CFS_POS_NEVER : b->start + slot;
}

static void link_next(struct cfs_plan_walk *w, struct epoch_buf *a, struct epoch_buf *b)
{
    for (uint64_t i = b->len; i-- > 0;) {
        uint32_t f = b->file[i];
        b->nxt[i] = slot_pos(b, w->tmp[f]);
        w->tmp[f] = (uint32_t)i;
    }
    if (a)
        for (uint64_t i = 0; i < a->len; i++)
            if (a->nxt[i] == CFS_POS_NEVER)
                a->nxt[i] = slot_pos(b, w->tmp[a->file[i]]);
    for (uint64_t i = 0; i < b->len; i++) {
        uint32_t f = b->file[i];
        if (w->nu[f] == CFS_POS_NEVER)
            w->nu[f] = slot_pos(b, w->tmp[f]);
    }
    for (uint64_t i = 0; i < b->len; i++)
        w->tmp[b->file[i]] = NONE32;
}

int cfs_plan_walk_create(const struct cfs_plan *p, struct cfs_plan_walk **out, char *err,
                         size_t errlen)
{
    struct cfs_plan_walk *w = calloc(1, sizeof(*w));
    int rc = -ENOMEM;
    *out = NULL;
    if (!w)
        return rc;
    w->p = p;
    w->src = *p->src;
    w->rr = p->ranks[p->node];
    w->nu = malloc(p->n * sizeof(*w->nu) + 1);
    w->tmp = malloc(p->n * sizeof(*w->tmp) + 1);
    for (int i = 0; i < 2; i++)
        w->buf[i].rank_len = calloc(w->rr.count + 1, sizeof(uint64_t));
    if (!w->nu || !w->tmp || !w->buf[0].rank_len || !w->buf[1].rank_len)
        goto fail;
    memset(w->nu, 0xFF, p->n * sizeof(*w->nu));
    memset(w->tmp, 0xFF, p->n * sizeof(*w->tmp)); /* NONE32 */
    rc = w->src.create(w->src.cfg, &w->st, err, errlen);
    if (rc < 0)
        goto fail_reported;
    rc = fill(w, &w->buf[0], 0);
    if (rc == 0)
        rc = fill(w, &w->buf[1], 1);
    if (rc < 0)
        goto fail;
    link_next(w, NULL, &w->buf[0]);
    link_next(w, &w->buf[0], &w->buf[1]);
    *out = w;
    return 0;
fail:
    if (err && errlen)
        snprintf(err, errlen, "planner: %s", strerror(-rc));
fail_reported:
    cfs_plan_walk_destroy(w);
    return rc;
}

void cfs_plan_walk_destroy(struct cfs_plan_walk *w)
{
    if (!w)
        return;
    if (w->st)
        w->src.destroy(w->st);
    for (int i = 0; i < 2; i++) {
        free(w->buf[i].file);
        free(w->buf[i].nxt);
        free(w->buf[i].rank_len);
    }
    free(w->nu);
    free(w->tmp);
    free(w);
}

int cfs_plan_walk_next(struct cfs_plan_walk *w, struct cfs_plan_access *acc)
{
    struct epoch_buf *a = &w->buf[w->a];
    bool new_epoch = !w->started;
    if (w->started) {
        /* Advance the lockstep cursor past the slot returned last. */
        w->slot++;
        do {
            if (++w->lrank >= w->rr.count) {
                w->lrank = 0;
                w->step++;
            }
        } while (w->slot < a->len && w->step >= a->rank_len[w->lrank]);
    } else {
        w->started = true;
        while (w->rr.count && a->len && w->step >= a->rank_len[w->lrank])
            w->lrank++;
    }
    while (w->slot >= a->len) {
        if (!a->valid)
            return 0;
        /* A is done: B becomes A, the next epoch becomes B. */
        struct epoch_buf *b = &w->buf[1 - w->a];
        if (!b->valid)
            return 0;
        int rc = fill(w, a, b->rel + 1);
        if (rc < 0)
            return rc;
        link_next(w, b, a);
        w->a = 1 - w->a;
        a = b;
        w->slot = 0;
        w->step = 0;
        w->lrank = 0;
        while (a->len && w->step >= a->rank_len[w->lrank])
            w->lrank++;
        new_epoch = true;
    }
    uint32_t f = a->file[w->slot];
    w->nu[f] = a->nxt[w->slot];
    acc->pos = a->start + w->slot;
    acc->epoch = w->p->start_epoch + a->rel;
    acc->rank = cfs_rank_at(w->rr, w->lrank);
    acc->step = w->step;
    acc->sample = f;
    acc->new_epoch = new_epoch;
    return 1;
}

uint64_t cfs_plan_walk_next_use(const struct cfs_plan_walk *w, uint32_t f, bool *exact)
{
    const struct cfs_plan *p = w->p;
    if (exact)
        *exact = true;
    if (f >= p->n)
        return CFS_POS_NEVER;
    if (w->nu[f] != CFS_POS_NEVER)
        return w->nu[f];
    /* Beyond the window: the first epoch after B that reads f. */
    uint32_t from = w->buf[1 - w->a].rel + 1;
    const uint8_t *bm = p->epochs_read + (size_t)f * p->bm_bytes;
    for (uint32_t rel = from; rel < p->nepochs; rel++) {
        if ((rel % 8) == 0 && bm[rel / 8] == 0) {
            rel += 7;
            continue;
        }
        if (bm[rel / 8] & (1u << (rel % 8))) {
            if (exact)
                *exact = false;
            return p->epoch_start[rel];
        }
    }
    return CFS_POS_NEVER;
}
