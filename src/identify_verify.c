/* Does a candidate seed explain the opens?  (Order identification, the
 * verification half; identify_scan.c finds the candidates.)
 *
 * A candidate is a generator seed (mod 2^32) and the words drawn before
 * its first randperm: 2 is the torch model's epoch 0 (the loader's
 * _base_seed), 0 is torch-ddp's every epoch (a fresh generator seeded S +
 * e) and torch-sampler's epoch 0.  For each sampler kind that fits the skip
 * this file takes the model's epoch permutations (identify_view.c) and
 * forms hypotheses of the DataLoader's schedule, which the opens
 * themselves reveal; identify_walk.c follows each over every reader and
 * weighs its evidence.  The hypotheses come from the head reader:
 *
 *   - the reader whose first open is the head of the stream (position p0:
 *     rank p0's first sample) is worker 0 of its rank; its second open is
 *     at position p0 + W (batch >= 2) or p0 + W * T (batch 1), so the world
 *     W is a divisor of that distance (or the registered world);
 *   - that reader reads stream indices 0 .. B-1, then jumps to T * B:
 *     batch B and workers T (no jump seen: no workers, T = 0); before its
 *     first batch is done, its siblings' first opens at B, 2B, ... say B
 *     and T.
 *
 * The frameworks' samplers (hf-accelerate, torchvision-ra, timm-ra) draw
 * their epochs as torch-ddp does and are tried on its candidates after it;
 * where their ranks' indices sit, and the schedule their head reader
 * shows, is identify_frameworks.c's (so is which of them the opens cannot
 * tell from torch-ddp).
 *
 * The training libraries' samplers are hypotheses as well.  detectron2's
 * stream (one generator's randperms back to back) and ultralytics-ddp
 * (DistributedSampler read one epoch late by one iterator) are views of
 * their own on the same candidates as torch-ddp (seed S, nothing skipped),
 * tried after torch-ddp and torch-sampler: their first epoch is torch-ddp's
 * epoch 0, named so until the next epoch's opens refute it (the module
 * checks again there, identify_thread.c).  mmengine-noround, torch-ddp's
 * permutation unpadded, is tried on torch-ddp's view for each world that
 * does not divide n.  A torch fit of ultralytics' constant seed is named
 * ultralytics (identify_frameworks.c).
 *
 * The first hypothesis that explains every open wins (registered values
 * are tried first; then world ascending, drop_last false first, persistent
 * workers false first, torch-ddp before torch-sampler: the two read the
 * same epoch 0 at world 1 and differ from epoch 1 on; torch-ddp before the
 * frameworks', unless a framework sampler is registered).  The winner is then
 * replayed once more through cfs_sampler_rank_at() with its full
 * parameters, so the answer is what the model, as the planner will run
 * it, reads. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "identify_i.h"

#define MAX_WORLDS IDENT_MAX_WORLD
#define FW_HYPS 64

static uint64_t rank_len_of(const struct ident_hyp *h, uint64_t n)
{
    uint64_t len = n;
    if (h->kind == CFS_SAMPLER_DETECTRON2)
        return (n + h->world - 1) / h->world; /* pass 0's rank 0: the walk needs no more */
    if (ident_sharded(h->kind) && !ident_strided(h->kind))
        return ident_fw_rank_len(h, n);
    if (ident_strided(h->kind))
        len = h->drop_last ? n / h->world : (n + h->world - 1) / h->world;
    return h->drop_last_batch ? len / h->batch * h->batch : len;
}

struct search {
    const struct cfs_identify_params *p;
    const struct ident_readers *rd;
    struct ident_view *v;
    uint32_t *rank, *epoch0, *try_epoch, *try_place, *max_before;
    uint64_t *start;
    size_t head; /* the reader at the head of the stream */
    double need_bits, best_bits;
    uint32_t max_epoch; /* the latest epoch the fit reached */
    bool fits;
    /* in_node_block: where a fit's ranks may sit (the passes of
     * verify_view), and whether a fit was refused for its ranks */
    enum ident_placement placement;
    bool block_refused;
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
static struct ident_walk walk_of(const struct search *s, const struct ident_hyp *h)
{
    return (struct ident_walk){.v = s->v,
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
        uint32_t q = ident_pos_of(s->v, 0, rd->r[i].s[0], err);
        if (q == IDENT_NONE || k == MAX_WORLDS)
            return;
        if (ident_strided(h->kind) && q % h->world != h->p0 % h->world)
            continue; /* another rank (siblings without workers) */
        uint32_t j = ident_strided(h->kind) ? q / h->world : q;
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

/* Batch and workers from the head reader's opens, for world W. */
static void schedule_from_head(struct search *s, struct ident_hyp *h, int *err)
{
    const struct ident_reader *a = &s->rd->r[s->head];
    const struct cfs_sampler_params *hint = s->p->hint;
    h->batch = hint && hint->batch ? hint->batch : 1;
    h->workers = 0;
    for (size_t i = 1; i < a->len; i++) {
        uint32_t q = ident_pos_of(s->v, 0, a->s[i], err);
        if (q == IDENT_NONE)
            return;
        uint64_t j = q;
        if (ident_strided(h->kind)) {
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

/* On a distributed mount that learns the order (nothing registered, or
 * another node's claim) the nodes serve equal shares of the ranks
 * (docs/distributed.md): node k of N serves ranks k L .. k L + L - 1 of a
 * world of N L (a block: torchrun, srun's default), or k, k + N, ...,
 * k + (L - 1) N (dealt round robin: srun --distribution=cyclic, mpirun
 * --map-by node).  A fit that puts this node's readers elsewhere is
 * another reading of the same opens, not the run's: with one rank a node
 * and batches of one, rank 0's two workers read what ranks 0 and 2 of
 * twice the world read, or what two of a world-1 loader's eight workers
 * read.  Blocks come first (verify_view's first pass): under cyclic
 * placement those readings are ranks k and k + N of one node, and a block
 * is the launchers' default.  Registered settings may place other blocks
 * (ranks=A-B): not checked.  A fit is refused only while another may be
 * placed better: when none is, the view is tried again with less (the
 * next pass), since two trainings on one allocation, each on its own
 * nodes, must still be identified to be told apart. */
static bool in_node_block(const struct search *s, const struct ident_hyp *h)
{
    uint32_t nodes = s->p->nodes;
    if (s->placement == IDENT_PLACE_ANY || nodes < 2 || !ident_sharded(h->kind) ||
        (s->p->hint && !s->p->hint_identified))
        return true;
    if (h->world % nodes != 0)
        return false;
    uint32_t per = h->world / nodes, lo = s->p->node * per;
    bool block = true, dealt = true;
    for (size_t i = 0; i < s->rd->nr; i++)
        if (s->rd->r[i].len) {
            block = block && s->rank[i] >= lo && s->rank[i] < lo + per;
            dealt = dealt && s->rank[i] % nodes == s->p->node;
        }
    return block || (dealt && s->placement == IDENT_PLACE_DEALT);
}

/* Did a worker of h end its epoch short of its schedule?  A DataLoader
 * starts an epoch's workers once the last epoch's have all ended, so a
 * worker whose rank has a new reader of a later epoch read its whole
 * share: when h expects one more index than it read, h is wrong about the
 * rank's length - torch-ddp's drop_last, which a node's share tells only
 * here (a worker that goes on into the next epoch, or a reader without
 * workers, has the walk itself check it; a persistent hypothesis accepts
 * readers that stop, so it is checked here too). */
static bool worker_cut_short(const struct search *s, const struct ident_hyp *h)
{
    if (h->workers == 0 || h->one_iter || !ident_strided(h->kind) ||
        h->kind == CFS_SAMPLER_DETECTRON2)
        return false;
    const struct ident_readers *rd = s->rd;
    for (size_t i = 0; i < rd->nr; i++) {
        const struct ident_reader *a = &rd->r[i];
        bool ended = false;
        for (size_t k = 0; k < rd->nr && !ended; k++)
            ended = rd->r[k].len && rd->r[k].ppid == a->ppid && s->epoch0[k] > s->epoch0[i];
        if (!ended || a->len == 0)
            continue;
        uint64_t j = s->start[i];
        for (size_t k = 1; k < a->len; k++)
            j = (j + 1) % h->batch ? j + 1 : j + (uint64_t)(h->workers - 1) * h->batch + 1;
        uint64_t len = ident_rank_len_at(h, s->p->n, s->rank[i]);
        uint64_t batches = (len + h->batch - 1) / h->batch, w = s->start[i] / h->batch % h->workers;
        if (batches <= w)
            continue;
        uint64_t last = w + (batches - 1 - w) / h->workers * h->workers;
        uint64_t end = (last + 1) * h->batch < len ? (last + 1) * h->batch : len;
        if (j + 1 < end)
            return true;
    }
    return false;
}

/* Tries the drop_last / persistent variants of h; true when one fits. */
static bool try_variants(struct search *s, struct ident_hyp h)
{
    const struct cfs_sampler_params *hint = s->p->hint;
    bool dl_pref = hint ? hint->drop_last : false, dlb_pref = hint ? hint->drop_last_batch : false;
    bool pw_pref = hint ? hint->persistent_workers : false;
    bool dl_matters = (h.kind == CFS_SAMPLER_TORCH_DDP || h.kind == CFS_SAMPLER_ULTRALYTICS_DDP) &&
                      s->p->n % h.world != 0;
    /* detectron2's stream: no drop_last of any kind applies, and its
     * workers live as long as the stream; ultralytics' one iterator keeps
     * its workers too, dealing them batches across the epochs */
    bool stream = h.kind == CFS_SAMPLER_DETECTRON2;
    uint64_t lib_seed;
    h.one_iter = h.kind == CFS_SAMPLER_ULTRALYTICS_DDP ||
                 (h.kind == CFS_SAMPLER_TORCH && s->v->persistent &&
                  ident_lib_ultralytics(s->v->seed32, true, hint, &lib_seed));
    bool kept = stream || h.one_iter; /* the workers: persistent only */
    /* a fit whose workers ended short: kept while the other drop_last
     * is tried, taken when that does not fit (a trainer may end its
     * epochs early) */
    struct ident_hyp cut;
    double cut_bits = 0;
    uint32_t cut_epoch = 0;
    bool have_cut = false;
    for (int a = 0; a < (dl_matters ? 2 : 1); a++)
        for (int b = 0; b < (stream ? 1 : 2); b++)
            for (int c = 0; c < (h.workers && !kept ? 2 : 1); c++) {
                h.drop_last = dl_matters ? (a ? !dl_pref : dl_pref) : false;
                h.drop_last_batch = stream ? false : b ? !dlb_pref : dlb_pref;
                h.persistent = kept ? h.workers > 0 : h.workers ? (c ? !pw_pref : pw_pref) : false;
                if ((h.kind == CFS_SAMPLER_TORCH || h.kind == CFS_SAMPLER_TORCH_GLOBAL ||
                     h.kind == CFS_SAMPLER_TORCHDATA_WORKERS) &&
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
                struct ident_walk w = walk_of(s, &h);
                if (!ident_walk_all(&w, false))
                    continue;
                if (!in_node_block(s, &h)) {
                    s->block_refused = true;
                    continue;
                }
                if (dl_matters && worker_cut_short(s, &h)) {
                    if (!have_cut)
                        cut = h, cut_bits = ident_walk_evidence(&w), cut_epoch = w.max_epoch;
                    have_cut = true;
                    continue;
                }
                s->best_bits = ident_walk_evidence(&w);
                s->max_epoch = w.max_epoch;
                s->best = h;
                s->fits = true;
                return true;
            }
    if (have_cut) {
        s->best_bits = cut_bits;
        s->max_epoch = cut_epoch;
        s->best = cut;
        s->fits = true;
    }
    return have_cut;
}

/* Reader i's first step in epoch 0: how far its second open lies past its
 * first; 0 when it has not opened twice or they are not in that order. */
static uint32_t first_step(struct search *s, size_t i, int *err)
{
    const struct ident_reader *a = &s->rd->r[i];
    if (a->len < 2)
        return 0;
    uint32_t q0 = ident_pos_of(s->v, 0, a->s[0], err), q1 = ident_pos_of(s->v, 0, a->s[1], err);
    return q0 != IDENT_NONE && q1 != IDENT_NONE && q1 > q0 ? q1 - q0 : 0;
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
    return ident_pos_of(h->s->v, 0, h->s->rd->r[h->s->head].s[i], h->err);
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
        uint32_t q = ident_pos_of(s->v, 0, s->rd->r[i].s[0], err);
        if (q != IDENT_NONE)
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
        if (i == head || ident_pos_of(s->v, 0, s->rd->r[i].s[0], err) != 0)
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
    return kind == CFS_SAMPLER_HF_ACCELERATE || kind == CFS_SAMPLER_TORCHVISION_RA ||
           kind == CFS_SAMPLER_TIMM_RA;
}

/* A framework's order another node claimed (clairfs/order_agree.h), checked
 * on node k > 0: the sampler puts this node's first rank (k L in a block,
 * k where the ranks are dealt round robin) elsewhere than at that position
 * (accelerate deals whole batches: k L B; the RA samplers repeat each
 * value: (k L) / 3), and the head's schedule names no hypothesis there
 * (identify_frameworks.c reads it from position 0).  So the claim's kind,
 * world and batch are walked as they are, each worker count up to
 * IDENT_HINT_WORKERS: the walk refutes the wrong ones in a few opens.
 * timm-ra is torchvision-ra's layout over a generator seeded with the
 * epoch: the view's seed is the candidate epoch (try_hinted_seed,
 * identify_scan.c), and fill names it timm-ra. */
#define IDENT_HINT_WORKERS 16
static bool try_framework_claim(struct search *s, int *err)
{
    const struct cfs_sampler_params *hint = s->p->hint;
    uint32_t nodes = s->p->nodes;
    if (!hint || !s->p->hint_has_seed || nodes < 2 || s->p->node == 0 || !hint->batch ||
        !hint->world || hint->world % nodes != 0 ||
        (hint->kind != CFS_SAMPLER_HF_ACCELERATE && hint->kind != CFS_SAMPLER_TORCHVISION_RA &&
         hint->kind != CFS_SAMPLER_TIMM_RA))
        return false;
    enum cfs_sampler_kind kind =
        hint->kind == CFS_SAMPLER_TIMM_RA ? CFS_SAMPLER_TORCHVISION_RA : hint->kind;
    uint32_t per = hint->world / nodes;
    uint32_t first[2] = {s->p->node * per, s->p->node}; /* a block; dealt round robin */
    for (int f = 0; f < (per > 1 ? 2 : 1); f++) {
        struct ident_hyp h = {.kind = kind, .world = hint->world, .batch = hint->batch};
        uint32_t q = ident_fw_position(&h, s->p->n, first[f], 0);
        bool head = false;
        for (size_t i = 0; i < s->rd->nr && !head && !*err; i++)
            head = s->rd->r[i].len && ident_pos_of(s->v, 0, s->rd->r[i].s[0], err) == q;
        for (uint32_t t = 0; head && t <= IDENT_HINT_WORKERS && !*err; t++) {
            h.workers = t;
            if (try_variants(s, h))
                return true;
        }
    }
    return false;
}

static bool try_view(struct search *s, uint32_t p0, int *err)
{
    if (p0 != 0 && s->v->kind == CFS_SAMPLER_TORCH_DDP && try_framework_claim(s, err))
        return true;
    s->head = s->rd->nr;
    for (size_t i = 0; i < s->rd->nr; i++)
        if (ident_pos_of(s->v, 0, s->rd->r[i].s[0], err) == p0) {
            s->head = i;
            break;
        }
    if (s->head == s->rd->nr || *err)
        return false;
    bool ddp = ident_strided(s->v->kind);
    if (!ddp && p0 != 0)
        return false;
    /* a registered framework sampler is tried first (at world 1 and with
     * batches of one, accelerate reads as torch-ddp) */
    bool fw = s->v->kind == CFS_SAMPLER_TORCH_DDP && p0 == 0;
    bool fw_first = fw && s->p->hint && fw_kind(s->p->hint->kind);
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
            /* MMEngine's DefaultSampler(round_up=False): torch-ddp's
             * permutation unpadded, another order only where W does not
             * divide n, and seen only where a persistent worker goes on past
             * its rank's shorter share (without, torch-ddp predicts every
             * open it makes) */
            if (!*err && single == (pass == 1) && h.kind == CFS_SAMPLER_TORCH_DDP &&
                s->p->n % h.world != 0) {
                h.kind = CFS_SAMPLER_MMENGINE_NOROUND;
                if (try_variants(s, h))
                    return true;
            }
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
        struct ident_walk w = walk_of(s, h);
        w.model = m;
        rc = ident_walk_all(&w, false) ? 0 : w.err ? w.err : -ENOENT;
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
    uint32_t lo = UINT32_MAX, hi = 0, ranks = 0, nodes = s->p->nodes;
    bool dealt = nodes > 1;
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
    /* ranks k, k + N, ... of a cyclic placement: one stride N, where no
     * block of the node's share holds them (a block's first pass took
     * every fit that one does) */
    for (size_t i = 0; i < rd->nr && dealt; i++)
        dealt = rd->r[i].len == 0 || s->rank[i] % nodes == lo % nodes;
    dealt = dealt && s->placement != IDENT_PLACE_BLOCK && hi - lo >= nodes;
    out->epoch = s->max_epoch;
    if (h->kind == CFS_SAMPLER_TORCHVISION_RA && ident_fw_timm(s->v->seed32, s->p->hint)) {
        /* timm-ra seeds with the epoch: the candidate seed is the epoch the
         * opens began in, the sampler's seed= changes nothing (the
         * registered one is kept; another node's claim has 0 and says its
         * epoch in the hint's seed: order_agree.c) */
        out->sampler.kind = CFS_SAMPLER_TIMM_RA;
        out->sampler.seed =
            s->p->hint && s->p->hint_has_seed && !s->p->hint_identified ? s->p->hint->seed : 0;
        out->epoch = s->v->seed32 + s->max_epoch;
    }
    uint64_t lib_seed;
    if (h->kind == CFS_SAMPLER_TORCH &&
        ident_lib_ultralytics(s->v->seed32, h->persistent, s->p->hint, &lib_seed)) {
        out->sampler.kind = CFS_SAMPLER_ULTRALYTICS; /* the same stream, named for who seeds so */
        out->sampler.seed = lib_seed;
    }
    if (ident_sharded(h->kind)) {
        out->rank_first = lo;
        out->rank_stride = dealt ? nodes : 1;
        out->rank_count = (hi - lo) / out->rank_stride + 1;
        out->epoch_opens = 0;
        for (uint32_t r = lo; r <= hi; r += out->rank_stride)
            out->epoch_opens += ident_rank_len_at(h, s->p->n, r);
    } else {
        out->epoch_opens = h->rank_len * ranks;
        /* every rank reads the whole stream: the world is the ranks seen
         * on every node, or the registered world */
        out->rank_count = ranks;
        out->rank_first = s->p->node * ranks;
        out->rank_stride = 1;
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
    struct ident_view v;
    int rc = -ENOENT, err = ident_view_init(&v, s->p, kind, pers, seed32, skip, model);
    s->v = &v;
    s->fits = false;
    /* blocks, then ranks dealt round robin, then anywhere (in_node_block) */
    s->placement = IDENT_PLACE_BLOCK, s->block_refused = false;
    bool fit = err == 0 && try_view(s, p0, &err) && s->fits;
    for (; !fit && err == 0 && s->block_refused && s->placement != IDENT_PLACE_ANY;) {
        s->placement = s->placement == IDENT_PLACE_BLOCK ? IDENT_PLACE_DEALT : IDENT_PLACE_ANY;
        s->block_refused = false;
        fit = try_view(s, p0, &err) && s->fits;
    }
    if (fit) {
        err = confirm(s, &s->best);
        if (err == 0) {
            *bits = s->best_bits;
            fill(s, &s->best, out);
            rc = s->best_bits >= s->need_bits && s->rd->opens >= IDENT_MIN_OPENS ? 1 : 0;
        }
    }
    ident_view_free(&v);
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
    } skip0[] = {{CFS_SAMPLER_TORCH_DDP, false},
                 {CFS_SAMPLER_TORCH_SAMPLER, false},
                 {CFS_SAMPLER_DETECTRON2, false},
                 {CFS_SAMPLER_ULTRALYTICS_DDP, true}},
      skip2[] = {{CFS_SAMPLER_TORCH, false}, {CFS_SAMPLER_TORCH, true}};
    struct search s = {.p = p, .rd = rd, .need_bits = need_bits};
    int rc = -ENOMEM;
    if (!search_alloc(&s))
        goto out;
    rc = -ENOENT;
    *bits = 0;
    size_t nkinds =
        skip_words == 2 ? sizeof(skip2) / sizeof(*skip2) : sizeof(skip0) / sizeof(*skip0);
    /* ultralytics' seed: its one iterator is torch's with persistent
     * workers, which epoch 0 cannot tell from torch's without; tried first */
    uint64_t lib_seed;
    bool pers_first = skip_words == 2 && ident_lib_ultralytics(seed32, true, p->hint, &lib_seed);
    for (size_t k = 0; k < nkinds && rc == -ENOENT; k++) {
        size_t at = pers_first ? nkinds - 1 - k : k;
        enum cfs_sampler_kind kind = skip_words == 2 ? skip2[at].kind : skip0[at].kind;
        bool pers = skip_words == 2 ? skip2[at].persistent : skip0[at].persistent;
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
