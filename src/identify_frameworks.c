/* The frameworks' samplers as hypotheses of order identification
 * (identify_verify.c walks them; clairfs/sampler.h and
 * src/sampler_framework.c say what each sampler reads).
 *
 * hf-accelerate and torchvision-ra draw, each epoch, randperm(n) of a
 * generator seeded S + e, exactly as torch-ddp does: the same candidate
 * (seed, skip 0) and the same epoch permutations serve them; only where a
 * rank's index j sits in that permutation differs:
 *
 *   hf-accelerate   batch g = j / B of rank r is global batch g * W + r,
 *                   position (g * W + r) * B + j % B, modulo n past the end
 *                   (the last round is completed from the epoch's head);
 *   torchvision-ra  rank r's index j is entry k = r + j * W of the list
 *                   that repeats every index R = 3 times in a row: position
 *                   k / R.  An epoch has a value at R entries, so a reader
 *                   can start at up to R places, and one process reads the
 *                   same file several times in an epoch (W < R).
 *   timm-ra         reads as torchvision-ra but seeds its generator with the
 *                   epoch alone: the candidate's "seed" is the epoch the
 *                   observation began in.  Nothing in the opens tells the
 *                   two apart: torchvision-ra with seed S at epoch e is
 *                   timm-ra at epoch S + e, and both predict the same
 *                   opens from there on.  A candidate seed below
 *                   TIMM_EPOCHS is named timm-ra at that epoch (an epoch
 *                   number; torchvision's own default seed, 0, lands here
 *                   too), a larger one torchvision-ra, unless the
 *                   registered sampler names one of the two.
 *
 * R is the frameworks' default, 3 (RASampler(repetitions=3), timm's
 * num_repeats=3); another R is not searched.
 *
 * The schedule (world, batch, workers) comes from the reader that opens the
 * epoch's first entry, as for torch-ddp (identify_verify.c's top comment),
 * but the rules differ: an accelerate rank reads B consecutive positions,
 * then jumps to its next batch at T * W * B (T workers; W * B without
 * workers), so the first jump gives B and T * W; an RA rank r0 < R reads
 * positions (r0 + i * W) / R, so its second open gives W to within R values,
 * and before its first jump its siblings' starts give B and T.  The RA
 * samplers' first value opens the epoch for up to R ranks: identify_verify.c
 * tries each reader that starts with it as the head.
 *
 * Where they cannot be told from torch-ddp: with batches of one sample
 * accelerate hands out what DistributedSampler does; at world 1 it reads
 * the permutation in order as torch-ddp does but for the padding of the
 * last batch (none when B divides n, or with drop_last_batch; world 1
 * without workers shows B only there, accelerate_padded); and at world W
 * without workers its ranks, siblings under the launcher, read what W
 * persistent workers of one torch-ddp rank read, but for the padding of the
 * last round.  torch-ddp is tried first and named until a padding shows
 * (the module checks again at the next epoch's start, identify_thread.c).
 *
 * The training libraries' samplers share some of these rules: detectron2's
 * stream, ultralytics-ddp and mmengine-noround are strided as torch-ddp is
 * (ident_strided), mmengine-noround with a share of its own per rank; and
 * ultralytics seeds its generator with a constant, scanned before the rest
 * of the range and named here.
 *
 * ident_stride_of_starts, the siblings' starts read as one stride, lives
 * here, below identify_verify.c, which reads torch-ddp's batches from it
 * as accelerate's are read here. */
#include <stddef.h>
#include <stdint.h>

#include "identify_i.h"

#define RA_REPETITIONS 3u /* the frameworks' default (sampler_framework.c) */
#define RA_SELECTED_ROUND 256u
#define TIMM_EPOCHS 4096u /* candidate seeds below this are read as epochs */

bool ident_sharded(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_TORCH_DDP || kind == CFS_SAMPLER_HF_ACCELERATE ||
           kind == CFS_SAMPLER_TORCHVISION_RA || kind == CFS_SAMPLER_TIMM_RA ||
           kind == CFS_SAMPLER_DETECTRON2 || kind == CFS_SAMPLER_ULTRALYTICS_DDP ||
           kind == CFS_SAMPLER_MMENGINE_NOROUND;
}

bool ident_strided(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_TORCH_DDP || kind == CFS_SAMPLER_DETECTRON2 ||
           kind == CFS_SAMPLER_ULTRALYTICS_DDP || kind == CFS_SAMPLER_MMENGINE_NOROUND;
}

uint64_t ident_rank_len_at(const struct ident_hyp *h, uint64_t n, uint32_t r)
{
    if (h->kind != CFS_SAMPLER_MMENGINE_NOROUND)
        return h->rank_len;
    uint64_t len = r < n ? (n - r + h->world - 1) / h->world : 0;
    return h->drop_last_batch ? len / h->batch * h->batch : len;
}

static bool ra(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_TORCHVISION_RA || kind == CFS_SAMPLER_TIMM_RA;
}

uint64_t ident_fw_rank_len(const struct ident_hyp *h, uint64_t n)
{
    uint64_t len;
    if (h->kind == CFS_SAMPLER_HF_ACCELERATE) {
        if (h->drop_last_batch)
            return n / h->batch / h->world * h->batch;
        uint64_t batches = (n + h->batch - 1) / h->batch;
        return (batches + h->world - 1) / h->world * h->batch;
    }
    /* RA's padding needs n * R >= W roughly (sampler_framework.c); a
     * world that large reads nothing anyway (selected is 0) */
    len = n / RA_SELECTED_ROUND * RA_SELECTED_ROUND / h->world;
    return h->drop_last_batch ? len / h->batch * h->batch : len;
}

uint32_t ident_fw_position(const struct ident_hyp *h, uint64_t n, uint32_t r, uint64_t j)
{
    if (h->kind == CFS_SAMPLER_HF_ACCELERATE) {
        uint64_t g = j / h->batch;
        return (uint32_t)(((g * h->world + r) * h->batch + j % h->batch) % n);
    }
    return (uint32_t)((r + j * h->world) / RA_REPETITIONS);
}

size_t ident_fw_places(const struct ident_hyp *h, uint64_t n, uint32_t q, uint32_t *r, uint64_t *j)
{
    if (h->kind == CFS_SAMPLER_HF_ACCELERATE) {
        uint64_t g = q / h->batch;
        r[0] = (uint32_t)(g % h->world);
        j[0] = g / h->world * h->batch + q % h->batch;
        return j[0] < h->rank_len && q < n;
    }
    size_t k = 0;
    for (uint64_t e = (uint64_t)q * RA_REPETITIONS; e < ((uint64_t)q + 1) * RA_REPETITIONS; e++)
        if (e / h->world < h->rank_len) {
            r[k] = (uint32_t)(e % h->world);
            j[k++] = e / h->world;
        }
    return k;
}

uint32_t ident_fw_choices(const struct ident_hyp *h)
{
    return ra(h->kind) ? RA_REPETITIONS : 1;
}

static bool push(struct ident_hyp *out, size_t *k, size_t max, struct ident_hyp h)
{
    for (size_t i = 0; i < *k; i++)
        if (out[i].kind == h.kind && out[i].world == h.world && out[i].batch == h.batch &&
            out[i].workers == h.workers)
            return true;
    if (*k == max)
        return false;
    out[(*k)++] = h;
    return true;
}

/* accelerate at world 1 without workers: one process reads the whole
 * permutation in order, as torch-ddp's would, then the p entries that
 * complete the last batch from the epoch's head (positions 0 .. p-1 again),
 * then the next epoch.  Every B with ceil(n / B) * B = n + p reads exactly
 * that (B > p divides n + p): the smallest is named. */
static size_t accelerate_padded(const struct ident_fw_head *hd, struct ident_hyp *out, size_t max)
{
    uint64_t n = hd->n, p = 0;
    while (n + p < hd->len && p < n && hd->pos(hd->arg, n + p) == p)
        p++;
    if (p == 0 || n + p >= hd->len || max == 0)
        return 0; /* no padding (torch-ddp's order), or not seen to its end */
    uint64_t b = p + 1;
    while ((n + p) % b != 0)
        b++;
    if (b > UINT32_MAX)
        return 0;
    out[0] =
        (struct ident_hyp){.kind = CFS_SAMPLER_HF_ACCELERATE, .world = 1, .batch = (uint32_t)b};
    return 1;
}

/* Workers 1 .. k of a rank start at w times one stride (identify_i.h). */
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

/* accelerate, the head still in its first batch (`opened` opens, no jump
 * yet): worker w of its rank starts at the rank's batch w, global batch
 * w W, position w W B, so its siblings' first opens, when each sits at a
 * distinct multiple 1 .. T-1 of one m, say T = siblings + 1 and W B = m.
 * Each W that divides m with B = m / W past the head's opens is a
 * hypothesis; the walk tells them apart (other ranks' readers, the head's
 * next batch).  Without one, an attempt whose head had not finished its
 * batch fit nothing, and the scan that followed at idle priority waited
 * for the loader's epoch to end. */
static size_t accelerate_siblings(const struct ident_fw_head *hd, size_t opened,
                                  struct ident_hyp *out, size_t max)
{
    size_t t = hd->nsiblings, k = 0;
    if (t + 1 > IDENT_MAX_WORLD)
        return 0;
    uint32_t m = ident_stride_of_starts(hd->sibling_first, t);
    if (m == 0 || m < opened)
        return 0;
    for (uint32_t w = 1; w <= m && w <= IDENT_MAX_WORLD; w++) {
        if (m % w != 0 || m / w < opened)
            continue;
        struct ident_hyp h = {.kind = CFS_SAMPLER_HF_ACCELERATE,
                              .world = w,
                              .batch = m / w,
                              .workers = (uint32_t)t + 1};
        if (!push(out, &k, max, h))
            break;
    }
    return k;
}

/* accelerate: B consecutive positions, then T' * W * B (T' = T, or 1
 * without workers).  No jump seen yet: the siblings' starts, if any. */
static size_t accelerate_hyps(const struct ident_fw_head *hd, struct ident_hyp *out, size_t max)
{
    size_t i = 1, k = 0;
    while (i < hd->len && hd->pos(hd->arg, i) == i)
        i++;
    if (i == hd->n)
        return accelerate_padded(hd, out, max);
    if (i == hd->len)
        return accelerate_siblings(hd, i, out, max);
    uint32_t q = i < hd->len ? hd->pos(hd->arg, i) : IDENT_NONE;
    if (q == IDENT_NONE || q % i != 0)
        return 0;
    uint32_t tw = q / (uint32_t)i; /* T' * W */
    uint32_t batch = (uint32_t)i;
    for (uint32_t w = 1; w <= tw && w <= IDENT_MAX_WORLD; w++) {
        if (tw % w != 0)
            continue;
        uint32_t t = tw / w;
        struct ident_hyp h = {.kind = CFS_SAMPLER_HF_ACCELERATE,
                              .world = w,
                              .batch = batch,
                              .workers = t == 1 ? 0 : t};
        if (!push(out, &k, max, h))
            break;
    }
    return k;
}

/* RA, one world: the head is rank r0 at index 0; its opens continue while
 * they sit at (r0 + i W) / R, and the first that does not is a worker's
 * jump to index T B (B = i). */
static bool ra_schedule(const struct ident_fw_head *hd, uint32_t r0, struct ident_hyp *h)
{
    h->batch = hd->hint_batch ? hd->hint_batch : 1;
    h->workers = 0;
    /* past the epoch's end (a reader without workers goes on into the
     * next) the epoch-0 positions say nothing */
    uint64_t end = hd->n / RA_SELECTED_ROUND * RA_SELECTED_ROUND / h->world;
    for (size_t i = 1; i < hd->len && i < end; i++) {
        uint32_t q = hd->pos(hd->arg, i);
        if (q == IDENT_NONE)
            return true;
        if (q == (r0 + i * h->world) / RA_REPETITIONS)
            continue;
        for (uint64_t e = (uint64_t)q * RA_REPETITIONS; e < ((uint64_t)q + 1) * RA_REPETITIONS;
             e++) {
            if (e % h->world != r0)
                continue;
            uint64_t j = e / h->world;
            if (j > i && j % i == 0) {
                h->batch = (uint32_t)i;
                h->workers = (uint32_t)(j / i);
                return true;
            }
        }
        return false;
    }
    return true;
}

/* Does some place of the value at position q sit at rank r0's index j
 * (entry r0 + j W)? */
static bool ra_at(uint32_t q, uint32_t r0, uint32_t world, uint64_t j)
{
    uint64_t e = r0 + j * world;
    return e / RA_REPETITIONS == q;
}

/* RA, the head still in its first batch (ra_schedule saw no jump): worker
 * w of its rank starts at index w B, so the siblings' first opens, when
 * each sits at a distinct multiple of one B (some place of its value:
 * repeated values sit at R entries), give B and T = siblings + 1, as
 * identify_verify.c's schedule_from_siblings does for torch-ddp.  Each B
 * that the first sibling's places allow is a hypothesis; the walk tells
 * them apart.  (A worker that has opened nothing yet makes T too small:
 * the walk of the head's next batch refutes it.) */
static bool ra_siblings(const struct ident_fw_head *hd, uint32_t r0, struct ident_hyp h,
                        struct ident_hyp *out, size_t *k, size_t max)
{
    size_t t = hd->nsiblings;
    if (t == 0 || t + 1 > IDENT_MAX_WORLD)
        return true;
    uint32_t q0 = hd->sibling_first[0];
    for (uint64_t e = (uint64_t)q0 * RA_REPETITIONS; e < ((uint64_t)q0 + 1) * RA_REPETITIONS;
         e++) {
        if (e % h.world != r0)
            continue;
        uint64_t j0 = e / h.world;
        for (uint64_t w0 = 1; w0 <= t; w0++) {
            if (j0 % w0 != 0 || j0 / w0 < hd->len || j0 / w0 > UINT32_MAX)
                continue; /* B: past every open the head made in its first batch */
            uint64_t b = j0 / w0;
            bool used[IDENT_MAX_WORLD] = {false}, ok = true;
            for (size_t i = 0; i < t && ok; i++) {
                ok = false;
                for (uint64_t w = 1; w <= t && !ok; w++)
                    if (!used[w] && ra_at(hd->sibling_first[i], r0, h.world, w * b))
                        used[w] = ok = true;
            }
            if (!ok)
                continue;
            h.batch = (uint32_t)b;
            h.workers = (uint32_t)t + 1;
            if (!push(out, k, max, h))
                return false;
        }
    }
    return true;
}

static size_t ra_hyps(const struct ident_fw_head *hd, struct ident_hyp *out, size_t max)
{
    size_t k = 0;
    uint32_t q1 = hd->len < 2 ? IDENT_NONE : hd->pos(hd->arg, 1);
    if (q1 == IDENT_NONE)
        return 0;
    /* the head is whichever of ranks 0 .. R-1 opened the epoch's first
     * value first: rank r0 reads entry r0 first, then r0 + W */
    for (uint32_t r0 = 0; r0 < RA_REPETITIONS; r0++) {
        uint64_t lo = (uint64_t)q1 * RA_REPETITIONS;
        for (uint64_t e = lo; e < lo + RA_REPETITIONS; e++) {
            if (e <= r0 || e - r0 > IDENT_MAX_WORLD)
                continue;
            uint32_t w = (uint32_t)(e - r0);
            if (r0 >= w)
                continue;
            struct ident_hyp h = {.kind = CFS_SAMPLER_TORCHVISION_RA, .world = w};
            if (!ra_schedule(hd, r0, &h))
                continue;
            if (h.workers == 0 && !ra_siblings(hd, r0, h, out, &k, max))
                return k;
            if (!push(out, &k, max, h))
                return k;
        }
    }
    return k;
}

size_t ident_fw_hypotheses(const struct ident_fw_head *hd, struct ident_hyp *out, size_t max)
{
    size_t k = accelerate_hyps(hd, out, max);
    return k + ra_hyps(hd, out + k, max - k);
}

/* ultralytics: InfiniteDataLoader(shuffle=True, generator=g) keeps one
 * iterator for the run (torch with persistent workers), g seeded
 * 6148914691236517205 + RANK, RANK being -1 in one process. */
#define ULTRALYTICS_SEED_ONE_PROCESS 6148914691236517204ull

const uint32_t ident_constant_seed[IDENT_CONSTANT_SEEDS] = {
    (uint32_t)ULTRALYTICS_SEED_ONE_PROCESS,
};

bool ident_lib_ultralytics(uint32_t seed32, bool persistent, const struct cfs_sampler_params *hint,
                           uint64_t *seed)
{
    if (!persistent || seed32 != (uint32_t)ULTRALYTICS_SEED_ONE_PROCESS)
        return false;
    if (hint && hint->kind != CFS_SAMPLER_TORCH_DDP && hint->kind != CFS_SAMPLER_ULTRALYTICS)
        return false; /* the default kind, or ultralytics, may be renamed */
    *seed = ULTRALYTICS_SEED_ONE_PROCESS;
    return true;
}

bool ident_fw_timm(uint32_t seed32, const struct cfs_sampler_params *hint)
{
    if (hint && hint->kind == CFS_SAMPLER_TIMM_RA)
        return true;
    if (hint && hint->kind == CFS_SAMPLER_TORCHVISION_RA)
        return false;
    return seed32 < TIMM_EPOCHS;
}
