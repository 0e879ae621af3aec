/* Where each value sits in each epoch of a candidate seed: the table
 * every check of a hypothesis reads (identify_walk.c asks, for each open,
 * at which permutation position of which epoch its sample lies).
 *
 * A view takes the epochs from the exact sampler models (clairfs/sampler.h:
 * the torch orders themselves, not a re-derivation), world 1 and batch 1,
 * and keeps each epoch's inverse permutation, computed upwards as the
 * walks reach later epochs, within VIEW_BYTES a candidate.
 *
 * Why sparse above DENSE_MAX.  n-entry arrays per epoch and candidate
 * would cost gigabytes at the largest datasets, so a large n keeps none:
 * the values at the first SPARSE_WINDOW positions of each epoch come from
 * a sparse replay (forward Fisher-Yates, whose first w steps touch at most
 * 2w positions) or cfs_seed_inside_out_at (torch >= 2.6's large-n
 * shuffle), held in a small hash table.  Opens outside that window end a
 * reader's verification (their position is unknown, not wrong), and the
 * stateful torch models are verified in their epoch 0 only: their later
 * epochs need the whole stream. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"
#include "identify_i.h"

#define DENSE_MAX (1u << 22)
#define SPARSE_WINDOW (1u << 18)
#define VIEW_BYTES (256ull << 20) /* epoch inverses kept per candidate */
#define MAX_EPOCHS 4096u

static uint32_t hash_slot(uint32_t v, uint32_t bits)
{
    return (v * 0x9e3779b1u) >> (32 - bits);
}

static void sparse_put(uint32_t *tab, uint32_t bits, uint32_t v, uint32_t pos)
{
    uint32_t cap = 1u << bits, i = hash_slot(v, bits);
    while (tab[i] != IDENT_NONE)
        i = (i + 1) & (cap - 1);
    tab[i] = v;
    tab[cap + i] = pos;
}

static uint32_t sparse_get(const uint32_t *tab, uint32_t bits, uint32_t v)
{
    uint32_t cap = 1u << bits, i = hash_slot(v, bits);
    while (tab[i] != IDENT_NONE) {
        if (tab[i] == v)
            return tab[cap + i];
        i = (i + 1) & (cap - 1);
    }
    return IDENT_NONE;
}

/* Forward Fisher-Yates, values at positions 0 .. w-1 only: steps 0 .. w-1
 * touch at most 2w positions, kept in a small table. */
static int forward_window(uint32_t seed, uint32_t skip, uint64_t n, uint32_t w, uint32_t *vals)
{
    uint32_t bits = 4;
    while ((1u << bits) < 4 * w)
        bits++;
    uint32_t *tab = malloc(sizeof(*tab) * 2 * ((size_t)1 << bits));
    if (!tab)
        return -ENOMEM;
    memset(tab, 0xff, sizeof(*tab) * ((size_t)1 << bits));
    uint32_t cap = 1u << bits;
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, skip);
    for (uint32_t k = 0; k < w && k + 1 < n; k++) {
        uint32_t b = k + cfs_mt19937_next32(&mt) % (uint32_t)(n - k);
        uint32_t ia = hash_slot(k, bits), ib;
        while (tab[ia] != IDENT_NONE && tab[ia] != k)
            ia = (ia + 1) & (cap - 1);
        if (tab[ia] == IDENT_NONE)
            tab[ia] = k, tab[cap + ia] = k;
        ib = hash_slot(b, bits);
        while (tab[ib] != IDENT_NONE && tab[ib] != b)
            ib = (ib + 1) & (cap - 1);
        if (tab[ib] == IDENT_NONE)
            tab[ib] = b, tab[cap + ib] = b;
        uint32_t t = tab[cap + ia];
        tab[cap + ia] = tab[cap + ib];
        tab[cap + ib] = t;
    }
    for (uint32_t q = 0; q < w; q++) {
        uint32_t got = sparse_get(tab, bits, q);
        vals[q] = got == IDENT_NONE ? q : got;
    }
    free(tab);
    return 0;
}

int ident_view_init(struct ident_view *v, const struct cfs_identify_params *p,
                     enum cfs_sampler_kind kind, bool persistent, uint32_t seed32, uint32_t skip,
                     const struct cfs_sampler_params *model)
{
    memset(v, 0, sizeof(*v));
    v->kind = kind, v->persistent = persistent, v->seed32 = seed32, v->skip = skip;
    v->n = p->n, v->algo = p->algo;
    v->sparse = p->n > DENSE_MAX;
    v->width = v->sparse ? SPARSE_WINDOW : (uint32_t)p->n;
    v->hbits = 4;
    while ((1u << v->hbits) < 2 * v->width)
        v->hbits++;
    uint64_t per = v->sparse ? 8ull << v->hbits : 4ull * p->n;
    v->maxep = (uint32_t)(VIEW_BYTES / per < MAX_EPOCHS ? VIEW_BYTES / per : MAX_EPOCHS);
    if (v->maxep == 0)
        v->maxep = 1;
    if (v->sparse && kind != CFS_SAMPLER_TORCH_DDP)
        v->maxep = 1; /* the stateful models' later epochs need the whole stream */
    v->inv = calloc(v->maxep, sizeof(*v->inv));
    v->seen = calloc(v->maxep, sizeof(*v->seen));
    if (!v->inv || !v->seen)
        return -ENOMEM;
    struct cfs_sampler_params sp = {.kind = kind,
                                    .seed = seed32,
                                    .n = p->n,
                                    .world = 1,
                                    .batch = 1,
                                    .persistent_workers = persistent,
                                    .randperm = p->algo};
    if (model) {
        sp = *model;
        sp.world = 1, sp.batch = 1, sp.list_path = NULL;
    }
    v->base = sp;
    if (v->sparse)
        return model ? -ENOTSUP : 0;
    char err[256];
    return cfs_sampler_create(&sp, &v->s, err, sizeof(err));
}

void ident_view_free(struct ident_view *v)
{
    for (uint32_t e = 0; v->inv && e < v->nep; e++) {
        free(v->inv[e]);
        free(v->seen[e]);
    }
    free(v->inv);
    free(v->seen);
    cfs_sampler_destroy(v->s);
}

static int sparse_epoch(struct ident_view *v, uint32_t e, uint32_t *tab)
{
    uint32_t w = v->width < v->n ? v->width : (uint32_t)v->n;
    uint32_t *vals = malloc(sizeof(*vals) * w);
    int rc = -ENOMEM;
    if (!vals)
        return rc;
    uint32_t seed = v->kind == CFS_SAMPLER_TORCH_DDP ? v->seed32 + e : v->seed32;
    if (v->algo == CFS_RANDPERM_CURRENT && v->n >= UINT32_MAX / 20u) {
        uint32_t *pos = malloc(sizeof(*pos) * w);
        rc = -ENOMEM;
        if (pos) {
            for (uint32_t q = 0; q < w; q++)
                pos[q] = q;
            rc = cfs_seed_inside_out_at(seed, v->skip, v->n, pos, w, vals);
            free(pos);
        }
    } else {
        rc = forward_window(seed, v->skip, v->n, w, vals);
    }
    if (rc == 0) {
        memset(tab, 0xff, sizeof(*tab) << v->hbits);
        for (uint32_t q = 0; q < w; q++)
            sparse_put(tab, v->hbits, vals[q], q);
    }
    free(vals);
    return rc;
}

/* Computes epochs up to e (the models are iterated upwards). */
static int view_epoch(struct ident_view *v, uint32_t e)
{
    for (; v->nep <= e; v->nep++) {
        uint32_t ep = v->nep;
        size_t entries = v->sparse ? (size_t)2 << v->hbits : (size_t)v->n;
        size_t width = v->sparse ? v->width : (size_t)v->n;
        v->inv[ep] = malloc(entries * sizeof(uint32_t));
        v->seen[ep] = calloc((width + 63) / 64, sizeof(uint64_t));
        if (!v->inv[ep] || !v->seen[ep]) {
            v->nep++;
            return -ENOMEM;
        }
        if (v->sparse) {
            int rc = sparse_epoch(v, ep, v->inv[ep]);
            if (rc < 0) {
                v->nep++;
                return rc;
            }
            continue;
        }
        const uint32_t *order;
        uint64_t len, step, stride;
        int rc = cfs_sampler_compute_epoch(v->s, ep);
        if (rc == 0)
            rc = cfs_sampler_epoch_order(v->s, &order, &len, &step, &stride);
        if (rc < 0) {
            v->nep++;
            return rc;
        }
        for (uint32_t q = 0; q < len; q++)
            v->inv[ep][order[q]] = q;
    }
    return 0;
}

uint32_t ident_pos_of(struct ident_view *v, uint32_t e, uint32_t x, int *err)
{
    if (e >= v->maxep || x >= v->n)
        return IDENT_NONE;
    if (e >= v->nep) {
        int rc = view_epoch(v, e);
        if (rc < 0) {
            *err = rc;
            return IDENT_NONE;
        }
    }
    return v->sparse ? sparse_get(v->inv[e], v->hbits, x) : v->inv[e][x];
}
