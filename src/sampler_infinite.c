/* The infinite stream of detectron2's TrainingSampler (and MMEngine's
 * InfiniteSampler, the same code): one generator, seeded once, yields
 * randperm(n) after randperm(n) for as long as training runs, and rank r of
 * W reads every W-th index of that one stream from position r
 * (clairfs/sampler.h has the versions read).
 *
 * Why passes: nothing in the trainer marks an epoch - the sampler is never
 * re-seeded and set_epoch does nothing - so the only natural unit is the
 * randperm itself. clairfs_epoch p is therefore pass p, stream positions
 * p*n .. p*n + n-1, and every consumer that walks epochs (the planner, the
 * identification, the dump) walks passes. A rank's share of a pass is the
 * positions congruent to r modulo W, which start at an offset that moves
 * with p*n mod W; when W does not divide n the ranks' lengths differ by one
 * and the rank that reads a pass's first index changes from pass to pass.
 *
 * Each pass is laid out as the ranks' streams interleaved, view[i * W + r]
 * being rank r's i-th index of the pass - the layout the frameworks'
 * samplers use - so the planner walks it as a strided array. The generator
 * is kept at the start of the next pass, so walking passes upwards costs one
 * randperm each; going back replays (by discarding words) from the seed. */
#include "clairfs/sampler.h"
#include "sampler_i.h"

/* Where rank r's positions start in pass p: the first j >= 0 with
 * (p*n + j) % W == r. */
static uint64_t pass_offset(const struct cfs_sampler_params *p, uint32_t pass, uint32_t rank)
{
    uint64_t w = p->world, d = (uint64_t)pass % w * (p->n % w) % w;
    return (rank + w - d) % w;
}

uint64_t cfs_infinite_rank_len(const struct cfs_sampler_params *p, uint32_t pass, uint32_t rank)
{
    uint64_t off = pass_offset(p, pass, rank);
    return off < p->n ? (p->n - off + p->world - 1) / p->world : 0;
}

uint64_t cfs_infinite_view_len(const struct cfs_sampler_params *p)
{
    return (p->n + p->world - 1) / p->world * p->world;
}

void cfs_infinite_pass(const struct cfs_sampler_params *p, struct cfs_mt19937 *mt,
                       uint64_t *at_pass, uint32_t pass, uint32_t *perm, uint32_t *view)
{
    uint64_t rp = cfs_torch_randperm_words(p->n, p->randperm);
    if (*at_pass > pass) {
        cfs_mt19937_seed(mt, p->seed);
        *at_pass = 0;
    }
    /* The passes in between draw exactly their randperms' words. */
    cfs_mt19937_discard(mt, (pass - *at_pass) * rp);
    cfs_torch_randperm(mt, perm, (uint32_t)p->n, p->randperm);
    *at_pass = (uint64_t)pass + 1;
    for (uint32_t r = 0; r < p->world; r++) {
        uint64_t off = pass_offset(p, pass, r), len = cfs_infinite_rank_len(p, pass, r);
        for (uint64_t i = 0; i < len; i++)
            view[i * p->world + r] = perm[off + i * p->world];
    }
}
