/* One hypothesis (kind, world, batch, workers, drop_last, persistent
 * workers: identify_verify.c forms them from the head reader's opens)
 * followed over every reader of the opens, and the evidence of its fit.
 *
 * The walk.  Every reader must start at a worker's first batch w * B
 * (w < T; index 0 without workers) of some epoch, and every later open
 * must be exactly the next index of the schedule: batches w, w + T, ... of
 * the rank's stream, rank r = position mod W for torch-ddp; at the end of
 * the rank's stream (drop_last, drop_last_batch applied) a process
 * without workers, or a persistent worker, goes on with the next epoch; a
 * non-persistent worker's process ends.  Processes must be consistent with
 * the launch: without workers the readers are the rank processes
 * themselves (siblings: one parent); with workers, readers with one
 * parent are one rank's workers (one r).  Where a first open has several
 * places (an RA sampler repeats each value, identify_frameworks.c) the
 * placement backtracks within a budget.  A reader of an RA sampler opens
 * each file up to three times in an epoch: its start may be any of a
 * value's places (the evidence pays for that choice), and a repeated open
 * explains nothing new (the evidence counts permutation positions, not
 * opens).
 *
 * detectron2's stream has no epochs: rank r's index j, counted from the
 * stream's start, is stream position g = r + j W, position g % n of pass
 * g / n, and a worker's chunks run on across the passes (its process
 * lives as long as the stream).  Its walk counts j over the whole stream:
 * the pass follows from j, never the other way round.  ultralytics'
 * loader keeps one iterator for the run (ident_hyp.one_iter): its epochs
 * are epochs, but the workers' round robin over the batches runs on from
 * one epoch into the next.
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
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "identify_i.h"

static uint64_t next_index(const struct ident_hyp *h, uint64_t j)
{
    if (h->workers == 0 || (j + 1) % h->batch != 0)
        return j + 1;
    return j + (uint64_t)(h->workers - 1) * h->batch + 1;
}

/* detectron2: the pass of rank r's index j (identify_walk.c's top). */
static uint32_t stream_pass(const struct ident_hyp *h, uint64_t n, uint32_t r, uint64_t j)
{
    uint64_t g = r + j * h->world;
    return g / n > UINT32_MAX ? UINT32_MAX : (uint32_t)(g / n);
}

/* one_iter: the worker's next batch after the one that holds (e, j) is
 * T batches on in the count that runs across the epochs, NB a rank's
 * batches an epoch (the last may be short). */
static void next_one_iter(const struct ident_hyp *h, uint32_t *e, uint64_t *j)
{
    if ((*j + 1) % h->batch != 0 && *j + 1 < h->rank_len) {
        (*j)++;
        return;
    }
    uint64_t nb = (h->rank_len + h->batch - 1) / h->batch;
    uint64_t g = (uint64_t)*e * nb + *j / h->batch + h->workers;
    *e = g / nb > UINT32_MAX ? UINT32_MAX : (uint32_t)(g / nb);
    *j = g % nb * h->batch;
}

static uint32_t position(const struct ident_hyp *h, uint64_t n, uint32_t r, uint64_t j)
{
    if (ident_strided(h->kind))
        return (uint32_t)((r + j * h->world) % n);
    return ident_sharded(h->kind) ? ident_fw_position(h, n, r, j) : (uint32_t)j;
}

/* The (rank, index) pairs that read permutation position q: one for the
 * torch kinds, up to IDENT_FW_MAX_CHOICES for the RA samplers (every value
 * is repeated). */
static size_t places(const struct ident_hyp *h, uint64_t n, uint32_t e, uint32_t q, uint32_t *r,
                     uint64_t *j)
{
    if (h->kind == CFS_SAMPLER_DETECTRON2) {
        uint64_t g = (uint64_t)e * n + q;
        r[0] = (uint32_t)(g % h->world), j[0] = g / h->world;
        return 1;
    }
    if (ident_strided(h->kind)) {
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
static int agrees(struct ident_walk *w, uint32_t e, uint32_t r, uint64_t j, uint32_t x, bool mark)
{
    if (w->model) {
        if (e != w->model_epoch && cfs_sampler_compute_epoch(w->model, e) < 0) {
            w->err = -EIO;
            return 0;
        }
        w->model_epoch = e;
        if (w->h->kind == CFS_SAMPLER_DETECTRON2)
            j = position(w->h, w->v->n, r, j) / w->h->world; /* the pass's own index */
        return cfs_sampler_rank_at(w->model, r, j) == x;
    }
    uint32_t q = ident_pos_of(w->v, e, x, &w->err);
    if (q == IDENT_NONE)
        return e < w->v->maxep && !w->err ? (w->v->sparse ? -1 : 0) : -1;
    uint32_t want = position(w->h, w->v->n, r, j);
    if (q != want)
        return 0;
    if (mark)
        w->v->seen[e][q / 64] |= 1ull << (q % 64);
    return 1;
}

/* Follows reader i from (e, r, j); false at the first open off schedule. */
static bool follow(struct ident_walk *w, size_t i, uint32_t e, uint32_t r, uint64_t j, bool mark)
{
    const struct ident_hyp *h = w->h;
    const struct ident_reader *rd = &w->rd->r[i];
    uint64_t start = j;
    if (agrees(w, e, r, j, rd->s[0], mark) != 1)
        return false;
    bool stream = h->kind == CFS_SAMPLER_DETECTRON2;
    bool one_iter = h->one_iter && h->workers > 1;
    for (size_t k = 1; k < rd->len; k++) {
        if (one_iter) {
            next_one_iter(h, &e, &j);
        } else {
            j = next_index(h, j);
            if (stream) {
                e = stream_pass(h, w->v->n, r, j);
            } else if (j >= ident_rank_len_at(h, w->v->n, r)) {
                if (h->workers > 0 && !h->persistent)
                    return false; /* that worker's process ended with its epoch */
                e++, j = start;
            }
        }
        if (e >= w->v->maxep)
            break;
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
static bool rank_allowed(const struct ident_walk *w, size_t i, uint32_t r)
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
static bool place_next(struct ident_walk *w, size_t i)
{
    const struct ident_hyp *h = w->h;
    uint32_t first = w->rd->r[i].s[0];
    uint32_t last = w->max_epoch + 1 < w->v->maxep ? w->max_epoch + 1 : w->v->maxep - 1;
    for (uint32_t e = w->try_epoch[i]; e <= last; e++) {
        uint32_t q = ident_pos_of(w->v, e, first, &w->err);
        if (w->err)
            return false;
        if (q == IDENT_NONE)
            continue;
        uint32_t rs[IDENT_FW_MAX_CHOICES];
        uint64_t js[IDENT_FW_MAX_CHOICES];
        size_t nc = places(h, w->v->n, e, q, rs, js);
        for (size_t c = e == w->try_epoch[i] ? w->try_place[i] : 0; c < nc; c++) {
            uint32_t r = rs[c];
            uint64_t j = js[c];
            bool start = h->workers == 0 ? j == 0
                                         : j % h->batch == 0 && j / h->batch < h->workers &&
                                               j < ident_rank_len_at(h, w->v->n, r);
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
static bool place_all(struct ident_walk *w)
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
static bool processes_consistent(const struct ident_walk *w)
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
bool ident_walk_all(struct ident_walk *w, bool mark)
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

/* --- The evidence. ----------------------------------------------------- */

/* lgamma_r: lgamma sets the global signgam, a race between two roots'
 * identification threads. */
static double log2_falling(uint64_t n, uint64_t k)
{
    int sign;
    return (lgamma_r((double)n + 1.0, &sign) - lgamma_r((double)(n - k) + 1.0, &sign)) / log(2.0);
}

double ident_walk_evidence(struct ident_walk *w)
{
    struct ident_view *v = w->v;
    for (uint32_t e = 0; e < v->nep; e++)
        memset(v->seen[e], 0, ((v->sparse ? v->width : v->n) + 63) / 64 * sizeof(uint64_t));
    if (!ident_walk_all(w, true))
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
