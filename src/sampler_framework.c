/* The training frameworks' own samplers: hf-accelerate, torchvision-ra and
 * timm-ra (clairfs/sampler.h says which upstream code each reproduces).
 *
 * All three draw one randperm(n) per epoch from a generator seeded afresh
 * (accelerate and torchvision with seed + epoch, timm with the epoch), so an
 * epoch is a pure function of its number, like torch-ddp. What differs is
 * how the permutation becomes each rank's stream, and that is not a plain
 * strided walk of the permutation: accelerate hands out whole batches
 * round-robin and pads the last round from the epoch's head, the RA samplers
 * repeat every index. So each epoch is laid out once as the ranks' streams
 * interleaved - view[i * W + r] is the i-th index rank r reads - which is a
 * strided walk again (rank_step 1, stride W) for the planner's sweep, and
 * makes rank_at() one load.
 *
 * Memory: the RA layout is a prefix of the repeated permutation no longer
 * than n (W * floor(floor(n/256)*256/W) <= n), built in place over the
 * permutation. accelerate's can exceed n by less than W*B entries (the
 * padding), so it gets an array of its own next to the permutation. */
#include <errno.h>
#include <stdio.h>

#include "clairfs/sampler.h"
#include "sampler_i.h"

/* RASampler and RepeatAugSampler keep floor(n / 256) * 256 / W indices per
 * rank (RepeatAugSampler's defaults selected_round=256, selected_ratio=W). */
#define RA_SELECTED_ROUND 256
#define RA_DEFAULT_REPETITIONS 3

static uint32_t repetitions(const struct cfs_sampler_params *p)
{
    return p->repetitions ? p->repetitions : RA_DEFAULT_REPETITIONS;
}

/* Batches per rank of accelerate's BatchSamplerShard (split_batches=False,
 * even_batches=True): full rounds only with drop_last, else the rounds the
 * padding completes. */
static uint64_t accelerate_batches(const struct cfs_sampler_params *p)
{
    if (p->drop_last_batch)
        return p->n / p->batch / p->world;
    uint64_t batches = (p->n + p->batch - 1) / p->batch;
    return (batches + p->world - 1) / p->world;
}

static int ra_layout(const struct cfs_sampler_params *p, struct cfs_framework_layout *out,
                     char *err, size_t errlen)
{
    uint64_t r = repetitions(p), repeated = p->n * r; /* n < 2^32, r < 2^32 */
    uint64_t total = (repeated + p->world - 1) / p->world * p->world;
    /* Both samplers pad once, from the head, then assert the length: a
     * world that needs more padding than there are repeated indices makes
     * them raise, so there is no order to model. */
    if (total - repeated > repeated) {
        snprintf(err, errlen,
                 "sampler=%s: world=%u needs %llu padding indices, more than the "
                 "n*repetitions=%llu it pads from: the sampler's own assertion fails",
                 cfs_sampler_kind_name(p->kind), p->world, (unsigned long long)(total - repeated),
                 (unsigned long long)repeated);
        return -EINVAL;
    }
    uint64_t selected = p->n / RA_SELECTED_ROUND * RA_SELECTED_ROUND / p->world;
    out->rank_len = p->drop_last_batch ? selected / p->batch * p->batch : selected;
    out->view_len = out->rank_len * p->world; /* <= n */
    out->separate_view = false;
    return 0;
}

int cfs_framework_layout(const struct cfs_sampler_params *p, struct cfs_framework_layout *out,
                         char *err, size_t errlen)
{
    if (p->kind != CFS_SAMPLER_HF_ACCELERATE)
        return ra_layout(p, out, err, errlen);
    uint64_t rank_len, view_len;
    if (__builtin_mul_overflow(accelerate_batches(p), (uint64_t)p->batch, &rank_len) ||
        __builtin_mul_overflow(rank_len, (uint64_t)p->world, &view_len) ||
        view_len > SIZE_MAX / sizeof(uint32_t)) {
        snprintf(err, errlen,
                 "sampler=hf-accelerate: world=%u x batch=%u: the padded epoch is too large",
                 p->world, p->batch);
        return -EINVAL;
    }
    out->rank_len = rank_len;
    out->view_len = view_len;
    out->separate_view = true;
    return 0;
}

static void accelerate_view(const struct cfs_sampler_params *p, const uint32_t *perm,
                            uint64_t rank_len, uint32_t *view)
{
    uint64_t w = p->world, b = p->batch;
    /* Round j gives rank r batch j*W + r; rank r's i-th index (i = j*B + t)
     * is entry (j*W + r)*B + t of the batches handed out. Past n, those are
     * the loop-around tail: the first min(W*B, n) indices doubled until
     * there are W*B of them, of which fewer than W*B are taken - the same
     * as reading the permutation cyclically, entry pos % n. Walk the entries
     * in order, scatter into the interleaved layout. */
    for (uint64_t j = 0; j < rank_len / b; j++)
        for (uint64_t r = 0; r < w; r++) {
            uint64_t pos = (j * w + r) * b;
            for (uint64_t t = 0; t < b; t++)
                view[(j * b + t) * w + r] = perm[(pos + t) % p->n];
        }
}

int cfs_framework_epoch(const struct cfs_sampler_params *p, const struct cfs_framework_layout *l,
                        uint32_t epoch, uint32_t *perm, uint32_t *view, char *err, size_t errlen)
{
    struct cfs_mt19937 mt;
    uint64_t seed = (uint64_t)epoch;
    if (p->kind != CFS_SAMPLER_TIMM_RA) {
        if (__builtin_add_overflow(p->seed, (uint64_t)epoch, &seed)) {
            snprintf(err, errlen,
                     "seed=%llu + epoch %u exceeds 2^64-1: torch's manual_seed would fail",
                     (unsigned long long)p->seed, epoch);
            return -ERANGE;
        }
    }
    cfs_mt19937_seed(&mt, seed);
    cfs_torch_randperm(&mt, perm, (uint32_t)p->n, p->randperm);
    if (p->kind == CFS_SAMPLER_HF_ACCELERATE) {
        accelerate_view(p, perm, l->rank_len, view);
        return 0;
    }
    /* RA: rank r's i-th index is repeated[r + i*W] = perm[(r + i*W) / R]
     * (never in the padding: the selected prefix is at most n long), so the
     * interleaved layout is view[k] = perm[k / R]. Built downwards in place:
     * entry k reads perm[k / R] with k / R <= k, below everything written. */
    uint64_t r = repetitions(p);
    for (uint64_t k = l->view_len; k-- > 0;)
        view[k] = perm[k / r];
    return 0;
}
