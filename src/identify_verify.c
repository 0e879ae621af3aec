/* Does a candidate seed explain the opens?  (Order identification, the
 * verification half; identify.c finds the candidates.)
 *
 * A candidate is a generator seed (mod 2^32) and the words drawn before
 * its first randperm: 2 is the torch model's epoch 0 (the loader's
 * _base_seed), 0 is torch-ddp's every epoch (a fresh generator seeded S +
 * e) and torch-sampler's epoch 0.  For each sampler kind that fits the skip
 * this file takes the model's epoch permutations (clairfs/sampler.h: the
 * exact torch orders, not a re-derivation) and asks, for each observed
 * open, where in the epoch it sits.  The rest is the DataLoader's
 * schedule, which the opens themselves reveal:
 *
 *   - the reader whose first open is the head of the stream (position p0:
 *     rank p0's first sample) is worker 0 of its rank; its second open is
 *     at position p0 + W (batch >= 2) or p0 + W * T (batch 1), so the world
 *     W is a divisor of that distance (or the registered world);
 *   - that reader reads stream indices 0 .. B-1, then jumps to T * B:
 *     batch B and workers T (no jump seen: no workers, T = 0);
 *   - every other reader must then start at a worker's first batch w * B
 *     (w < T; index 0 without workers) of some epoch, and every later open
 *     must be exactly the next index of the schedule: batches w, w + T,
 *     ... of the rank's stream, rank r = position mod W for torch-ddp; at
 *     the end of the rank's stream (drop_last, drop_last_batch applied)
 *     a process without workers, or a persistent worker, goes on with the
 *     next epoch; a non-persistent worker's process ends;
 *   - processes are consistent with the launch: without workers the
 *     readers are the rank processes themselves (siblings: one parent);
 *     with workers, readers with one parent are one rank's workers (one r).
 *
 * The frameworks' samplers (hf-accelerate, torchvision-ra, timm-ra) draw
 * their epochs as torch-ddp does and are tried on its candidates after it;
 * where their ranks' indices sit, and the schedule their head reader
 * shows, is identify_frameworks.c's (so is which of them the opens cannot
 * tell from torch-ddp).  A reader of an RA sampler opens each file up to
 * three times in an epoch: its start may be any of a value's places (the
 * evidence pays for that choice), and a repeated open explains nothing new
 * (the evidence counts permutation positions, not opens).
 *
 * The first hypothesis that explains every open wins (registered values
 * are tried first; then world ascending, drop_last false first, persistent
 * workers false first, torch-ddp before torch-sampler: the two read the
 * same epoch 0 at world 1 and differ from epoch 1 on; torch-ddp before the
 * frameworks', unless a framework sampler is registered).  The winner is then
 * replayed once more through cfs_sampler_rank_at() with its full
 * parameters, so the answer is what the model, as the planner will run
 * it, reads.
 *
 * Why a fit is not luck.  Take an order that is not one of these shuffles,
 * as random as any: each epoch a permutation of n unrelated to MT19937.
 * A fixed seed and hypothesis predicts one exact sequence; the chance that
 * k distinct positions of an epoch agree is (n-k)!/n!.  The fit chose, per
 * reader, where it starts (at most n positions times the epochs tried) and
 * B, T from one more open: subtracting log2 of those choices from the
 * log2(n!/(n-k)!) summed over epochs leaves the evidence E in bits.  The
 * union over at most 2^12 hypotheses per seed and the S seeds x skips tried
 * bounds the chance of any false fit by S * 2^12 * 2^-E; identification
 * demands E >= log2 S + 12 + 40, so a false identification has probability
 * below 2^-40, and at least IDENT_MIN_OPENS opens.  The same bound holds
 * the other way round for any fixed order the generator did not make,
 * structured ones included (sequential, strided, reversed): taking each
 * seed's randperm as a uniformly random permutation - what torch relies on
 * - the chance that one seed reproduces k of its positions is the same
 * (n-k)!/n!.
 *
 * Large n (above DENSE_MAX) keeps no n-entry arrays: the values at the
 * first SPARSE_WINDOW positions of each epoch come from a sparse replay
 * (forward Fisher-Yates) or cfs_seed_inside_out_at (torch >= 2.6's large-n
 * shuffle), opens outside that window end a reader's verification, and
 * the stateful torch models are verified in their epoch 0 only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"
#include "identify_i.h"

#define DENSE_MAX (1u << 22)
#define SPARSE_WINDOW (1u << 18)
#define VIEW_BYTES (256ull << 20) /* epoch inverses kept per candidate */
#define MAX_EPOCHS 4096u
#define MAX_WORLDS IDENT_MAX_WORLD
#define FW_HYPS 64
#define NONE UINT32_MAX

/* Where each value sits in each epoch of one generator family. */
struct view {
    enum cfs_sampler_kind kind;
    bool persistent;
    uint32_t seed32, skip;
    uint64_t n;
    enum cfs_randperm_algo algo;
    bool sparse;
    struct cfs_sampler *s;
    /* the model the epochs come from (world 1, batch 1) */
    struct cfs_sampler_params base;
    uint32_t **inv;  /* dense: inv[e][v]; sparse: hash, keys then positions */
    uint64_t **seen; /* bitsets of explained positions, per epoch */
    uint32_t nep, maxep, hbits, width;
};

static uint32_t hash_slot(uint32_t v, uint32_t bits)
{
    return (v * 0x9e3779b1u) >> (32 - bits);
}

static void sparse_put(uint32_t *tab, uint32_t bits, uint32_t v, uint32_t pos)
{
    uint32_t cap = 1u << bits, i = hash_slot(v, bits);
    while (tab[i] != NONE)
        i = (i + 1) & (cap - 1);
    tab[i] = v;
    tab[cap + i] = pos;
}

static uint32_t sparse_get(const uint32_t *tab, uint32_t bits, uint32_t v)
{
    uint32_t cap = 1u << bits, i = hash_slot(v, bits);
    while (tab[i] != NONE) {
        if (tab[i] == v)
            return tab[cap + i];
        i = (i + 1) & (cap - 1);
    }
    return NONE;
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
        while (tab[ia] != NONE && tab[ia] != k)
            ia = (ia + 1) & (cap - 1);
        if (tab[ia] == NONE)
            tab[ia] = k, tab[cap + ia] = k;
        ib = hash_slot(b, bits);
        while (tab[ib] != NONE && tab[ib] != b)
            ib = (ib + 1) & (cap - 1);
        if (tab[ib] == NONE)
            tab[ib] = b, tab[cap + ib] = b;
        uint32_t t = tab[cap + ia];
        tab[cap + ia] = tab[cap + ib];
        tab[cap + ib] = t;
    }
    for (uint32_t q = 0; q < w; q++) {
        uint32_t got = sparse_get(tab, bits, q);
        vals[q] = got == NONE ? q : got;
    }
    free(tab);
    return 0;
}

/* model: a full sampler configuration to take the epochs from (torch-global,
 * identify_global.c); NULL: kind's, seeded seed32. */
static int view_init(struct view *v, const struct cfs_identify_params *p,
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

static void view_free(struct view *v)
{
    for (uint32_t e = 0; v->inv && e < v->nep; e++) {
        free(v->inv[e]);
        free(v->seen[e]);
    }
    free(v->inv);
    free(v->seen);
    cfs_sampler_destroy(v->s);
}

static int sparse_epoch(struct view *v, uint32_t e, uint32_t *tab)
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
static int view_epoch(struct view *v, uint32_t e)
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

/* Position of value x in epoch e, NONE when unknown (beyond the epochs
 * kept, outside the sparse window) or on error (*err set). */
static uint32_t pos_of(struct view *v, uint32_t e, uint32_t x, int *err)
{
    if (e >= v->maxep || x >= v->n)
        return NONE;
    if (e >= v->nep) {
        int rc = view_epoch(v, e);
        if (rc < 0) {
            *err = rc;
            return NONE;
        }
    }
    return v->sparse ? sparse_get(v->inv[e], v->hbits, x) : v->inv[e][x];
}

/* --- Walking the schedule. ----------------------------------------------- */

struct walk {
    struct view *v;
    const struct ident_hyp *h;
    const struct ident_readers *rd;
    struct cfs_sampler *model; /* confirming: compare with rank_at */
    uint32_t model_epoch;
    uint32_t *rank;   /* per reader: DDP rank (torch kinds: 0) */
    uint32_t *epoch0; /* per reader: the epoch of its first open */
    uint64_t *start;  /* per reader: the rank's index of its first open */
    /* per reader, the placement search's state: the epoch and the choice
     * of place to try next, and max_epoch before its placement */
    uint32_t *try_epoch, *try_place, *max_before;
    uint64_t budget;  /* schedules followed before the walk gives up */
    uint32_t max_epoch;
    int err;
};

static uint64_t next_index(const struct ident_hyp *h, uint64_t j)
{
    if (h->workers == 0 || (j + 1) % h->batch != 0)
        return j + 1;
    return j + (uint64_t)(h->workers - 1) * h->batch + 1;
}

static uint32_t position(const struct ident_hyp *h, uint64_t n, uint32_t r, uint64_t j)
{
    if (h->kind == CFS_SAMPLER_TORCH_DDP)
        return (uint32_t)((r + j * h->world) % n);
    return ident_sharded(h->kind) ? ident_fw_position(h, n, r, j) : (uint32_t)j;
}

/* The (rank, index) pairs that read permutation position q: one for the
 * torch kinds, up to IDENT_FW_MAX_CHOICES for the RA samplers (every value
 * is repeated). */
static size_t places(const struct ident_hyp *h, uint64_t n, uint32_t q, uint32_t *r, uint64_t *j)
{
    if (h->kind == CFS_SAMPLER_TORCH_DDP) {
        r[0] = q % h->world, j[0] = q / h->world;
        return 1;
    }
    if (ident_sharded(h->kind))
        return ident_fw_places(h, n, q, r, j);
    r[0] = 0, j[0] = q;
    return 1;
}

/* Is x what the schedule puts at (epoch e, rank r, index j)?  1 yes, 0 no,
 * -1 unknown (not kept: verification of the reader stops there). */
static int agrees(struct walk *w, uint32_t e, uint32_t r, uint64_t j, uint32_t x, bool mark)
{
    if (w->model) {
        if (e != w->model_epoch && cfs_sampler_compute_epoch(w->model, e) < 0) {
            w->err = -EIO;
            return 0;
        }
        w->model_epoch = e;
        return cfs_sampler_rank_at(w->model, r, j) == x;
    }
    uint32_t q = pos_of(w->v, e, x, &w->err);
    if (q == NONE)
        return e < w->v->maxep && !w->err ? (w->v->sparse ? -1 : 0) : -1;
    uint32_t want = position(w->h, w->v->n, r, j);
    if (q != want)
        return 0;
    if (mark)
        w->v->seen[e][q / 64] |= 1ull << (q % 64);
    return 1;
}

/* Follows reader i from (e, r, j); false at the first open off schedule. */
static bool follow(struct walk *w, size_t i, uint32_t e, uint32_t r, uint64_t j, bool mark)
{
    const struct ident_hyp *h = w->h;
    const struct ident_reader *rd = &w->rd->r[i];
    uint64_t start = j;
    if (agrees(w, e, r, j, rd->s[0], mark) != 1)
        return false;
    for (size_t k = 1; k < rd->len; k++) {
        j = next_index(h, j);
        if (j >= h->rank_len) {
            if (h->workers > 0 && !h->persistent)
                return false; /* that worker's process ended with its epoch */
            e++, j = start;
            if (e >= w->v->maxep)
                break;
        }
        int a = agrees(w, e, r, j, rd->s[k], mark);
        if (a < 0)
            break;
        if (a == 0)
            return false;
    }
    if (e > w->max_epoch && e < w->v->maxep)
        w->max_epoch = e;
    return true;
}

/* May reader i read rank r, given the readers placed before it?  With
 * workers a sharded kind's readers with one parent are one rank's workers,
 * and a rank's workers have one parent (processes_consistent). */
static bool rank_allowed(const struct walk *w, size_t i, uint32_t r)
{
    const struct ident_readers *rd = w->rd;
    if (w->h->workers == 0 || !ident_sharded(w->h->kind))
        return true;
    for (size_t k = 0; k < i; k++)
        if ((rd->r[k].ppid == rd->r[i].ppid) != (w->rank[k] == r))
            return false;
    return true;
}

/* Reader i placed at the next place from its search state on: its first
 * open a worker's first index in some epoch up to one past the latest
 * seen, with its schedule holding and its rank consistent with its
 * process.  False when no place is left (or the budget is spent). */
static bool place_next(struct walk *w, size_t i)
{
    const struct ident_hyp *h = w->h;
    uint32_t first = w->rd->r[i].s[0];
    uint32_t last = w->max_epoch + 1 < w->v->maxep ? w->max_epoch + 1 : w->v->maxep - 1;
    for (uint32_t e = w->try_epoch[i]; e <= last; e++) {
        uint32_t q = pos_of(w->v, e, first, &w->err);
        if (w->err)
            return false;
        if (q == NONE)
            continue;
        uint32_t rs[IDENT_FW_MAX_CHOICES];
        uint64_t js[IDENT_FW_MAX_CHOICES];
        size_t nc = places(h, w->v->n, q, rs, js);
        for (size_t c = e == w->try_epoch[i] ? w->try_place[i] : 0; c < nc; c++) {
            uint32_t r = rs[c];
            uint64_t j = js[c];
            bool start = h->workers == 0
                             ? j == 0
                             : j % h->batch == 0 && j / h->batch < h->workers && j < h->rank_len;
            if (!start || !rank_allowed(w, i, r))
                continue;
            if (w->budget == 0)
                return false;
            w->budget--;
            w->max_before[i] = w->max_epoch;
            if (follow(w, i, e, r, j, false)) {
                w->rank[i] = r;
                w->epoch0[i] = e;
                w->start[i] = j;
                w->try_epoch[i] = e;
                w->try_place[i] = (uint32_t)c + 1;
                return true;
            }
            w->max_epoch = w->max_before[i];
        }
    }
    return false;
}

/* Every reader placed, in order.  Where a first open has several places
 * (an RA sampler's value read by two ranks' workers, a reader with one open
 * so far) the first may be refuted only by a later reader's process: then
 * the earlier reader moves to its next place (backtracking without
 * recursion - a long window of a small dataset holds thousands of
 * readers - within a budget of schedules followed; a walk out of budget
 * fits nothing). */
static bool place_all(struct walk *w)
{
    size_t nr = w->rd->nr, i = 0;
    if (nr == 0)
        return true;
    w->try_epoch[0] = w->try_place[0] = 0;
    for (;;) {
        if (place_next(w, i)) {
            if (++i == nr)
                return true;
            w->try_epoch[i] = w->try_place[i] = 0;
            continue;
        }
        if (w->err || i == 0 || w->budget == 0)
            return false;
        i--; /* reader i's next place, with what it had seen before */
        w->max_epoch = w->max_before[i];
    }
}

/* Processes against the launch (see the top). */
static bool processes_consistent(const struct walk *w)
{
    const struct ident_readers *rd = w->rd;
    for (size_t a = 0; a < rd->nr; a++)
        for (size_t b = a + 1; b < rd->nr; b++) {
            if (w->h->workers == 0) {
                if (rd->r[a].ppid != rd->r[b].ppid)
                    return false;
                continue;
            }
            if (!ident_sharded(w->h->kind))
                continue;
            bool same_rank = rd->r[a].ppid == rd->r[b].ppid;
            if (same_rank != (w->rank[a] == w->rank[b]))
                return false;
        }
    return true;
}

/* Every reader placed; with mark, the placement found is walked once more
 * marking what it reads (the evidence counts the placement that fits, not
 * the schedules tried on the way). */
static bool walk_all(struct walk *w, bool mark)
{
    w->max_epoch = 0;
    w->budget = 64 * (uint64_t)w->rd->nr + 1024;
    if (!place_all(w) || w->err || !processes_consistent(w))
        return false;
    if (mark) {
        w->max_epoch = 0;
        for (size_t i = 0; i < w->rd->nr; i++)
            if (!follow(w, i, w->epoch0[i], w->rank[i], w->start[i], true))
                return false;
    }
    return !w->err;
}

/* --- Hypotheses. ------------------------------------------------------ */

static double log2_falling(uint64_t n, uint64_t k)
{
    return (lgamma((double)n + 1.0) - lgamma((double)(n - k) + 1.0)) / log(2.0);
}

static double evidence_bits(struct walk *w)
{
    struct view *v = w->v;
    for (uint32_t e = 0; e < v->nep; e++)
        memset(v->seen[e], 0, ((v->sparse ? v->width : v->n) + 63) / 64 * sizeof(uint64_t));
    if (!walk_all(w, true))
        return -1;
    double bits = 0;
    for (uint32_t e = 0; e < v->nep; e++) {
        uint64_t k = 0, words = ((v->sparse ? v->width : v->n) + 63) / 64;
        for (uint64_t i = 0; i < words; i++)
            k += (uint64_t)__builtin_popcountll(v->seen[e][i]);
        bits += log2_falling(v->n, k);
    }
    /* each reader's start: a position, an epoch, and which of a repeated
     * value's places (RA) */
    double per_reader = log2((double)v->n) + log2((double)w->max_epoch + 2.0) +
                        log2((double)ident_fw_choices(w->h));
    return bits - per_reader * (double)w->rd->nr - log2((double)v->n);
}

static uint64_t rank_len_of(const struct ident_hyp *h, uint64_t n)
{
    uint64_t len = n;
    if (ident_sharded(h->kind) && h->kind != CFS_SAMPLER_TORCH_DDP)
        return ident_fw_rank_len(h, n);
    if (h->kind == CFS_SAMPLER_TORCH_DDP)
        len = h->drop_last ? n / h->world : (n + h->world - 1) / h->world;
    return h->drop_last_batch ? len / h->batch * h->batch : len;
}

struct search {
    const struct cfs_identify_params *p;
    const struct ident_readers *rd;
    struct view *v;
    uint32_t *rank, *epoch0, *try_epoch, *try_place, *max_before;
    uint64_t *start;
    size_t head; /* the reader at the head of the stream */
    double need_bits, best_bits;
    uint32_t max_epoch; /* the latest epoch the fit reached */
    bool fits;
    struct ident_hyp best;
};

/* The per-reader arrays of a search (every walk of it shares them). */
static bool search_alloc(struct search *s)
{
    size_t nr = s->rd->nr ? s->rd->nr : 1;
    s->rank = calloc(nr, sizeof(*s->rank));
    s->epoch0 = calloc(nr, sizeof(*s->epoch0));
    s->try_epoch = calloc(nr, sizeof(*s->try_epoch));
    s->try_place = calloc(nr, sizeof(*s->try_place));
    s->max_before = calloc(nr, sizeof(*s->max_before));
    s->start = calloc(nr, sizeof(*s->start));
    return s->rank && s->epoch0 && s->try_epoch && s->try_place && s->max_before && s->start;
}

static void search_free(struct search *s)
{
    free(s->rank);
    free(s->epoch0);
    free(s->try_epoch);
    free(s->try_place);
    free(s->max_before);
    free(s->start);
}

/* A walk of hypothesis h over the search's view and per-reader arrays. */
static struct walk walk_of(const struct search *s, const struct ident_hyp *h)
{
    return (struct walk){.v = s->v,
                         .h = h,
                         .rd = s->rd,
                         .rank = s->rank,
                         .epoch0 = s->epoch0,
                         .start = s->start,
                         .try_epoch = s->try_epoch,
                         .try_place = s->try_place,
                         .max_before = s->max_before};
}

/* Before the head reader's first batch is done: its rank's other workers
 * (readers with its parent) start at w * B, w = 1 .. T-1, so their starts,
 * when they are exactly B, 2B, ..., (T-1)B, say B and T.  (A worker that
 * has opened nothing yet would make T too small: the walk of the head's
 * next batch then refutes it.) */
static void schedule_from_siblings(struct search *s, struct ident_hyp *h, int *err)
{
    const struct ident_readers *rd = s->rd;
    const struct ident_reader *a = &rd->r[s->head];
    uint32_t starts[MAX_WORLDS];
    size_t k = 0;
    for (size_t i = 0; i < rd->nr; i++) {
        if (i == s->head || rd->r[i].ppid != a->ppid)
            continue;
        uint32_t q = pos_of(s->v, 0, rd->r[i].s[0], err);
        if (q == NONE || k == MAX_WORLDS)
            return;
        if (h->kind == CFS_SAMPLER_TORCH_DDP && q % h->world != h->p0 % h->world)
            continue; /* another rank (siblings without workers) */
        uint32_t j = h->kind == CFS_SAMPLER_TORCH_DDP ? q / h->world : q;
        if (j == 0)
            return; /* ranks reading one stream: no workers */
        starts[k++] = j;
    }
    uint32_t stride = ident_stride_of_starts(starts, k);
    if (stride == 0)
        return;
    h->batch = stride;
    h->workers = (uint32_t)k + 1;
}

uint32_t ident_stride_of_starts(const uint32_t *starts, size_t k)
{
    uint32_t min = UINT32_MAX;
    for (size_t i = 0; i < k; i++)
        if (starts[i] < min)
            min = starts[i];
    if (k == 0 || min == 0)
        return 0;
    for (size_t i = 0; i < k; i++) {
        if (starts[i] % min != 0 || starts[i] / min > k)
            return 0;
        for (size_t j = 0; j < i; j++)
            if (starts[j] == starts[i])
                return 0;
    }
    return min;
}

/* Batch and workers from the head reader's opens, for world W. */
static void schedule_from_head(struct search *s, struct ident_hyp *h, int *err)
{
    const struct ident_reader *a = &s->rd->r[s->head];
    const struct cfs_sampler_params *hint = s->p->hint;
    h->batch = hint && hint->batch ? hint->batch : 1;
    h->workers = 0;
    for (size_t i = 1; i < a->len; i++) {
        uint32_t q = pos_of(s->v, 0, a->s[i], err);
        if (q == NONE)
            return;
        uint64_t j = q;
        if (h->kind == CFS_SAMPLER_TORCH_DDP) {
            if (q % h->world != h->p0 % h->world)
                return;
            j = q / h->world;
        }
        if (j == i)
            continue;
        if (j < i || (j - i) % i != 0)
            return; /* not a worker's jump: the walk decides */
        h->batch = (uint32_t)i;
        h->workers = (uint32_t)((j - i) / i + 1);
        return;
    }
    schedule_from_siblings(s, h, err);
}

/* Tries the drop_last / persistent variants of h; true when one fits. */
static bool try_variants(struct search *s, struct ident_hyp h)
{
    const struct cfs_sampler_params *hint = s->p->hint;
    bool dl_pref = hint ? hint->drop_last : false, dlb_pref = hint ? hint->drop_last_batch : false;
    bool pw_pref = hint ? hint->persistent_workers : false;
    bool dl_matters = h.kind == CFS_SAMPLER_TORCH_DDP && s->p->n % h.world != 0;
    for (int a = 0; a < (dl_matters ? 2 : 1); a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < (h.workers ? 2 : 1); c++) {
                h.drop_last = dl_matters ? (a ? !dl_pref : dl_pref) : false;
                h.drop_last_batch = b ? !dlb_pref : dlb_pref;
                h.persistent = h.workers ? (c ? !pw_pref : pw_pref) : false;
                if ((h.kind == CFS_SAMPLER_TORCH || h.kind == CFS_SAMPLER_TORCH_GLOBAL) &&
                    h.persistent != s->v->persistent)
                    continue;
                h.rank_len = rank_len_of(&h, s->p->n);
                if (b && rank_len_of(&(struct ident_hyp){.kind = h.kind,
                                                         .world = h.world,
                                                         .batch = h.batch,
                                                         .drop_last = h.drop_last},
                                     s->p->n) == h.rank_len)
                    continue; /* drop_last_batch changes nothing here */
                if (h.rank_len == 0)
                    continue;
                struct walk w = walk_of(s, &h);
                if (!walk_all(&w, false))
                    continue;
                s->best_bits = evidence_bits(&w);
                s->max_epoch = w.max_epoch;
                s->best = h;
                s->fits = true;
                return true;
            }
    return false;
}

/* Reader i's first step in epoch 0: how far its second open lies past its
 * first; 0 when it has not opened twice or they are not in that order. */
static uint32_t first_step(struct search *s, size_t i, int *err)
{
    const struct ident_reader *a = &s->rd->r[i];
    if (a->len < 2)
        return 0;
    uint32_t q0 = pos_of(s->v, 0, a->s[0], err), q1 = pos_of(s->v, 0, a->s[1], err);
    return q0 != NONE && q1 != NONE && q1 > q0 ? q1 - q0 : 0;
}

/* The worlds to try for torch-ddp: the registered one, then the divisors
 * (above p0: the head is rank p0) of a reader's first step, which is W
 * within a batch (W * T from a batch of one to the worker's next).  The
 * head reader's when it has opened twice.  Before that, the first other
 * reader's that has: a scan restarted for a late rank's readers takes its
 * snapshot at each new reader's first open, so when rank 0 is the late
 * one the last snapshot holds exactly one open of its worker 0, the head
 * (an ImageNet run whose true seed was refuted here scanned all 2^32 seeds
 * a second time).  Still at most MAX_WORLDS hypotheses; the walk refutes
 * the wrong ones. */
static size_t worlds(struct search *s, uint32_t p0, uint32_t *out, int *err)
{
    size_t k = 0;
    const struct cfs_sampler_params *hint = s->p->hint;
    if (hint && hint->world > p0)
        out[k++] = hint->world;
    uint32_t d = first_step(s, s->head, err);
    for (size_t i = 0; d == 0 && i < s->rd->nr && !*err; i++)
        if (i != s->head)
            d = first_step(s, i, err);
    for (uint32_t w = p0 + 1; w <= d && k < MAX_WORLDS; w++)
        if (d % w == 0 && !(hint && w == hint->world))
            out[k++] = w;
    return k;
}

/* The frameworks' samplers over the torch-ddp view's permutations (the
 * same generator seeded S + e): their hypotheses from the head reader's
 * opens (identify_frameworks.c), from the stream's head only. */
struct head_pos {
    struct search *s;
    int *err;
};

static uint32_t head_pos(void *arg, size_t i)
{
    struct head_pos *h = arg;
    return pos_of(h->s->v, 0, h->s->rd->r[h->s->head].s[i], h->err);
}

/* One head: its hypotheses (identify_frameworks.c), each walked. */
static bool try_frameworks_head(struct search *s, int *err)
{
    const struct cfs_sampler_params *hint = s->p->hint;
    struct head_pos arg = {s, err};
    const struct ident_reader *a = &s->rd->r[s->head];
    uint32_t siblings[IDENT_MAX_WORLD];
    size_t ns = 0;
    for (size_t i = 0; i < s->rd->nr && ns < IDENT_MAX_WORLD; i++) {
        if (i == s->head || s->rd->r[i].ppid != a->ppid || s->rd->r[i].len == 0)
            continue;
        uint32_t q = pos_of(s->v, 0, s->rd->r[i].s[0], err);
        if (q != NONE)
            siblings[ns++] = q;
    }
    struct ident_fw_head hd = {.pos = head_pos,
                               .arg = &arg,
                               .len = a->len,
                               .n = s->p->n,
                               .hint_batch = hint ? hint->batch : 0,
                               .sibling_first = siblings,
                               .nsiblings = ns};
    struct ident_hyp hyps[FW_HYPS];
    size_t nh = ident_fw_hypotheses(&hd, hyps, FW_HYPS);
    for (size_t i = 0; i < nh && !*err; i++)
        if (try_variants(s, hyps[i]))
            return true;
    return false;
}

/* An RA sampler's first value opens the epoch at R entries, so up to R
 * readers (ranks 0 .. R-1's first workers) start with it, and the one
 * whose rank's schedule shows (its first batch done, or its siblings
 * started) may be any of them: each is tried as the head. */
static bool try_frameworks(struct search *s, int *err)
{
    size_t head = s->head;
    bool fit = try_frameworks_head(s, err);
    for (size_t i = 0; i < s->rd->nr && !fit && !*err; i++) {
        if (i == head || pos_of(s->v, 0, s->rd->r[i].s[0], err) != 0)
            continue;
        s->head = i;
        fit = try_frameworks_head(s, err);
    }
    if (!fit)
        s->head = head;
    return fit;
}

static bool fw_kind(enum cfs_sampler_kind kind)
{
    return ident_sharded(kind) && kind != CFS_SAMPLER_TORCH_DDP;
}

static bool try_view(struct search *s, uint32_t p0, int *err)
{
    s->head = s->rd->nr;
    for (size_t i = 0; i < s->rd->nr; i++)
        if (pos_of(s->v, 0, s->rd->r[i].s[0], err) == p0) {
            s->head = i;
            break;
        }
    if (s->head == s->rd->nr || *err)
        return false;
    bool ddp = s->v->kind == CFS_SAMPLER_TORCH_DDP;
    if (!ddp && p0 != 0)
        return false;
    /* a registered framework sampler is tried first (at world 1 and with
     * batches of one, accelerate reads as torch-ddp) */
    bool fw = ddp && p0 == 0, fw_first = fw && s->p->hint && fw_kind(s->p->hint->kind);
    if (fw_first && try_frameworks(s, err))
        return true;
    uint32_t w[MAX_WORLDS + 1] = {1};
    size_t nw = ddp ? worlds(s, p0, w, err) : 1;
    /* Batches of one sample spread over workers read exactly what a wider
     * world without workers reads (W = 1, 2 workers, batch 1 is W = 2
     * without workers, rank for worker): the same streams, told apart by
     * nothing observable.  The common setup, batches of several samples,
     * is preferred. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < nw && !*err; i++) {
            struct ident_hyp h = {.kind = s->v->kind, .world = w[i], .p0 = p0};
            schedule_from_head(s, &h, err);
            bool single = h.batch == 1 && h.workers > 1;
            if (!*err && single == (pass == 1) && try_variants(s, h))
                return true;
        }
    return fw && !fw_first && !*err && try_frameworks(s, err);
}

/* The winner once more through the model with its full parameters: what
 * the planner will read is what was observed. */
static int confirm(struct search *s, const struct ident_hyp *h)
{
    if (s->v->sparse)
        return 0; /* the model would need the n-entry arrays avoided here */
    struct cfs_sampler_params sp = s->v->base; /* the view's; a framework's kind is h's */
    sp.kind = h->kind;
    sp.world = h->world, sp.batch = h->batch, sp.drop_last = h->drop_last;
    sp.drop_last_batch = h->drop_last_batch, sp.persistent_workers = h->persistent;
    char err[256];
    struct cfs_sampler *m;
    int rc = cfs_sampler_create(&sp, &m, err, sizeof(err));
    if (rc < 0)
        return rc;
    rc = -ENOENT;
    if (cfs_sampler_rank_len(m, 0, 0) == h->rank_len && cfs_sampler_compute_epoch(m, 0) == 0) {
        struct walk w = walk_of(s, h);
        w.model = m;
        rc = walk_all(&w, false) ? 0 : w.err ? w.err : -ENOENT;
    }
    cfs_sampler_destroy(m);
    return rc;
}

static void fill(const struct search *s, const struct ident_hyp *h, struct cfs_identified *out)
{
    const struct ident_readers *rd = s->rd;
    memset(out, 0, sizeof(*out));
    out->sampler = s->v->base; /* the view's; a framework's kind is h's */
    out->sampler.kind = h->kind;
    out->sampler.world = h->world, out->sampler.batch = h->batch;
    out->sampler.drop_last = h->drop_last, out->sampler.drop_last_batch = h->drop_last_batch;
    out->sampler.persistent_workers = h->persistent;
    out->workers = h->workers;
    out->opens = rd->opens;
    out->evidence_bits = s->best_bits;
    uint32_t lo = UINT32_MAX, hi = 0, ranks = 0;
    for (size_t i = 0; i < rd->nr; i++) {
        /* a rank process: the reader itself without workers, else its parent */
        bool new_rank = true;
        for (size_t j = 0; j < i && new_rank; j++)
            new_rank = h->workers ? rd->r[j].ppid != rd->r[i].ppid : false;
        if (h->workers == 0)
            new_rank = true;
        ranks += new_rank;
        if (s->rank[i] < lo)
            lo = s->rank[i];
        if (s->rank[i] > hi)
            hi = s->rank[i];
    }
    out->epoch = s->max_epoch;
    if (h->kind == CFS_SAMPLER_TORCHVISION_RA && ident_fw_timm(s->v->seed32, s->p->hint)) {
        /* timm-ra seeds with the epoch: the candidate seed is the epoch the
         * opens began in, the sampler's seed= changes nothing (the
         * registered one is kept) */
        out->sampler.kind = CFS_SAMPLER_TIMM_RA;
        out->sampler.seed = s->p->hint && s->p->hint_has_seed ? s->p->hint->seed : 0;
        out->epoch = s->v->seed32 + s->max_epoch;
    }
    if (ident_sharded(h->kind)) {
        out->rank_first = lo;
        out->rank_count = hi - lo + 1;
        out->epoch_opens = h->rank_len * out->rank_count;
    } else {
        out->epoch_opens = h->rank_len * ranks;
        /* every rank reads the whole stream: the world is the ranks seen
         * on every node, or the registered world */
        out->rank_count = ranks;
        out->rank_first = s->p->node * ranks;
        out->sampler.world = s->p->hint && s->p->hint->world
                                 ? s->p->hint->world
                                 : ranks * (s->p->nodes ? s->p->nodes : 1);
    }
}

/* One view (kind, persistent, seed32 after skip words, or model): 1, 0,
 * -ENOENT or -errno as ident_verify. */
static int verify_view(struct search *s, enum cfs_sampler_kind kind, bool pers, uint32_t seed32,
                       uint32_t skip, const struct cfs_sampler_params *model, uint32_t p0,
                       struct cfs_identified *out, double *bits)
{
    struct view v;
    int rc = -ENOENT, err = view_init(&v, s->p, kind, pers, seed32, skip, model);
    s->v = &v;
    s->fits = false;
    if (err == 0 && try_view(s, p0, &err) && s->fits) {
        err = confirm(s, &s->best);
        if (err == 0) {
            *bits = s->best_bits;
            fill(s, &s->best, out);
            rc = s->best_bits >= s->need_bits && s->rd->opens >= IDENT_MIN_OPENS ? 1 : 0;
        }
    }
    view_free(&v);
    return err < 0 && err != -ENOENT ? err : rc;
}

int ident_verify(const struct cfs_identify_params *p, const struct ident_readers *rd,
                 uint32_t seed32, uint32_t skip_words, uint32_t p0, double need_bits,
                 struct cfs_identified *out, double *bits)
{
    /* skip 2 is the torch model's epoch 0 (persistent workers or not: they
     * differ from epoch 1 on); skip 0 is torch-ddp's and torch-sampler's */
    static const struct {
        enum cfs_sampler_kind kind;
        bool persistent;
    } skip0[] = {{CFS_SAMPLER_TORCH_DDP, false}, {CFS_SAMPLER_TORCH_SAMPLER, false}},
      skip2[] = {{CFS_SAMPLER_TORCH, false}, {CFS_SAMPLER_TORCH, true}};
    struct search s = {.p = p, .rd = rd, .need_bits = need_bits};
    int rc = -ENOMEM;
    if (!search_alloc(&s))
        goto out;
    rc = -ENOENT;
    *bits = 0;
    for (int k = 0; k < 2 && rc == -ENOENT; k++) {
        enum cfs_sampler_kind kind = skip_words == 2 ? skip2[k].kind : skip0[k].kind;
        bool pers = skip_words == 2 ? skip2[k].persistent : skip0[k].persistent;
        if (skip_words != 0 && skip_words != 2)
            break;
        rc = verify_view(&s, kind, pers, seed32, skip_words, NULL, p0, out, bits);
    }
out:
    search_free(&s);
    return rc;
}

int ident_verify_model(const struct cfs_identify_params *p, const struct ident_readers *rd,
                       const struct cfs_sampler_params *model, double need_bits,
                       struct cfs_identified *out, double *bits)
{
    struct search s = {.p = p, .rd = rd, .need_bits = need_bits};
    int rc = -ENOMEM;
    *bits = 0;
    if (search_alloc(&s))
        rc = verify_view(&s, model->kind, model->persistent_workers, (uint32_t)model->seed, 0,
                         model, 0, out, bits);
    search_free(&s);
    return rc;
}
