/* torchdata's StatefulDataLoader with worker processes (torchdata-workers),
 * identified with nothing registered: a search of its own, since the seed
 * scans cannot reach it.
 *
 * Its RandomSampler (torchdata 0.11+) seeds a generator of its own with
 * one draw of the global generator when the loader is built: after
 * torch.manual_seed(S) and K words drawn before (a model built first), the
 * low word of the random64 at word K, i.e. global word K + 1.  With
 * workers, every epoch's iterator iter()s the batch sampler twice (its
 * __init__ and _reset(first_iter=True)), and torchdata's sampler iterator
 * draws its randperm when made: epoch 0 reads the generator's second
 * randperm, never its first.  The seed scans' filter computes only a
 * generator's first words, so no seed of the range is a candidate.
 *
 * Scanning the range for a second randperm costs one randperm's words a seed
 * (the seeding and about n / 624 twists): at n = 3000 some 2 to 4 us, 2 to 5
 * CPU hours for 2^32 seeds; at ImageNet's n a CPU month.  What can be walked
 * is the global stream of the seeds people use (cfs_rng_seed_table: 0..1023,
 * 42, 3407, ...) for small K: each (S, K) gives the sampler's seed, whose
 * second randperm's first two values must be a reader's first open and a
 * reader's first or first distinct one (the scans' set filter, pass rate
 * about R * 2R / n^2); the few that pass are verified as the
 * torchdata-workers model itself (identify_verify.c), persistent workers or
 * not (epoch 1 tells them apart: randperm 3 without, 2 with).  K is walked up
 * to the bound that keeps the whole walk within TD_WORDS words of the
 * generator, a seeding counted as MT_SEED_WORDS, and TD_MAX_OFFSET: the walk
 * runs in every attempt that found nothing in the scan's head (before its
 * long part), which a reader that is no shuffle and many a fit not yet sure
 * of itself pay too (a unit test of the frameworks' orders walked some 60
 * times), so it is kept to a few hundredths of a second of a core: K <= 33
 * at n = 301, 18 at 1 001, 7 at 3 000, 2 at 10 000, then 0.  K = 0 alone - a
 * loader built right after torch.manual_seed, the case worth most - is
 * walked up to n = 2^21, at 1 036 randperms' words (ImageNet's 1 281 167:
 * about half a second; seed 3407 is found in 0.03 s); nothing above.  A
 * trainer that builds its model before its loader (K in the millions), seeds
 * outside the table or reads a larger dataset is not found: register
 * sampler=torchdata-workers,seed=S (and rng_offset=K).
 *
 * Evidence: the walk adds at most table seeds x (the K walked + 1) x 2
 * candidates (at most about 2^16) to the 2^33 of the scans, counted in
 * cfs_identify_evidence_needed; each candidate is one model tried under
 * the usual schedules (identify_verify.c), so the bound of
 * docs/identification.md holds.
 *
 * A fit is kept in struct ident_global (td) and re-verified first at the
 * next attempts, as a torch-global fit is: no walk is repeated while the
 * opens agree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/rng_offset.h"
#include "clairfs/sampler.h"
#include "identify_i.h"

#define TD_WORDS (1ull << 25) /* generator words the walk may draw (a few hundredths of a second) */
#define TD_K0_MAX_N (1u << 21) /* K = 0 walked up to this n past TD_WORDS */
#define TD_MAX_OFFSET 256u    /* K walked at most: a loader built before the model */
#define MT_SEED_WORDS 624u    /* a seeding's cost, in words drawn */
#define TD_TABLE_MAX 4096u       /* seeds of the table taken */

static bool applies(const struct cfs_identify_params *p)
{
    if (p->n < 2 || p->n > IDENT_TD_MAX_N)
        return false;
    if (!p->hint)
        return true;
    /* a registered kind other than the default is someone else's order;
     * a registered seed is searched as given */
    return p->hint->kind == CFS_SAMPLER_TORCHDATA_WORKERS ||
           (p->hint->kind == CFS_SAMPLER_TORCH_DDP && !p->hint_has_seed);
}

/* The seeds walked: the registered one, or the table. */
static size_t seeds_of(const struct cfs_identify_params *p, uint64_t *out)
{
    if (p->hint && p->hint_has_seed) {
        out[0] = p->hint->seed;
        return 1;
    }
    return cfs_rng_seed_table(out, TD_TABLE_MAX);
}

/* K walked for each seed: 0 .. the result (-1: none). */
static int64_t max_offset(const struct cfs_identify_params *p, size_t nseeds)
{
    if (p->hint && p->hint_has_seed && p->hint->rng_offset)
        return -1; /* registered K: the planner's, nothing to search (K = 0 means "not said") */
    uint64_t words = cfs_torch_randperm_words(p->n, p->algo) + 2 + MT_SEED_WORDS;
    uint64_t per_seed = TD_WORDS / (nseeds ? nseeds : 1) / words;
    if (per_seed == 0)
        return p->n <= TD_K0_MAX_N ? 0 : -1; /* the loader built first: worth half a second */
    return per_seed - 1 < TD_MAX_OFFSET ? (int64_t)per_seed - 1 : TD_MAX_OFFSET;
}

double ident_torchdata_candidates(const struct cfs_identify_params *p)
{
    if (!applies(p))
        return 0;
    uint64_t *seeds = malloc(TD_TABLE_MAX * sizeof(*seeds));
    if (!seeds)
        return 0;
    size_t ns = seeds_of(p, seeds);
    free(seeds);
    int64_t k = max_offset(p, ns);
    return k < 0 ? 0 : (double)ns * (double)(k + 1) * 2.0;
}

/* The first two values of the sampler generator's second randperm (torch's
 * forward Fisher-Yates, one word a step, as identify_view.c replays it). */
static void second_head(uint32_t seed, uint64_t n, uint64_t words, uint32_t *v0, uint32_t *v1)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, words);
    uint32_t b0 = cfs_mt19937_next32(&mt) % (uint32_t)n;
    uint32_t b1 = n > 2 ? 1 + cfs_mt19937_next32(&mt) % (uint32_t)(n - 1) : 1;
    *v0 = b0;
    *v1 = b0 != 0 && b1 == b0 ? 0 : b1; /* the first swap put 0 at b0 */
}

static bool bit(const uint64_t *set, uint32_t v)
{
    return set[v / 64] >> (v % 64) & 1;
}

/* The scans' sets: every reader's first open, and its first and first
 * distinct opens (identify_scan.c's top comment). */
static int sets_of(const struct ident_readers *rd, uint64_t n, uint64_t **first, uint64_t **second)
{
    size_t words = (size_t)((n + 63) / 64);
    *first = calloc(words, sizeof(**first));
    *second = calloc(words, sizeof(**second));
    if (!*first || !*second)
        return -ENOMEM;
    for (size_t i = 0; i < rd->nr; i++) {
        const struct ident_reader *r = &rd->r[i];
        if (r->len == 0 || r->s[0] >= n)
            continue;
        (*first)[r->s[0] / 64] |= 1ull << (r->s[0] % 64);
        (*second)[r->s[0] / 64] |= 1ull << (r->s[0] % 64);
        for (size_t j = 1; j < r->len; j++)
            if (r->s[j] != r->s[0]) {
                if (r->s[j] < n)
                    (*second)[r->s[j] / 64] |= 1ull << (r->s[j] % 64);
                break;
            }
    }
    return 0;
}

static struct cfs_sampler_params model_of(const struct cfs_identify_params *p, uint64_t seed,
                                          uint64_t k, bool persistent)
{
    return (struct cfs_sampler_params){.kind = CFS_SAMPLER_TORCHDATA_WORKERS,
                                       .seed = seed,
                                       .n = p->n,
                                       .world = 1,
                                       .batch = 1,
                                       .persistent_workers = persistent,
                                       .randperm = p->algo,
                                       .rng_offset = k};
}

/* (S, K) against every open, persistent workers or not (pers first):
 * 1, 0 (short of evidence), -ENOENT, -errno.  A fit is kept in td. */
static int verify_both(const struct cfs_identify_params *p, const struct ident_readers *rd,
                       uint64_t seed, uint64_t k, bool pers, double need,
                       struct ident_torchdata *td, struct cfs_identified *out)
{
    int rc = -ENOENT;
    for (int i = 0; i < 2 && rc == -ENOENT; i++) {
        bool persistent = i ? !pers : pers;
        struct cfs_sampler_params m = model_of(p, seed, k, persistent);
        double bits;
        rc = ident_verify_model(p, rd, &m, need, out, &bits);
        if (rc >= 0) {
            *td = (struct ident_torchdata){.found = true,
                                           .seed = seed,
                                           .offset = k,
                                           .persistent = out->sampler.persistent_workers};
            out->seed_high_known = true; /* the table's seed, whole */
        }
    }
    return rc;
}

/* The walk over seeds x K: the first (S, K) whose second randperm passes
 * the sets and verifies. */
static int walk(const struct cfs_identify_params *p, const struct ident_readers *rd,
                const atomic_bool *cancel, double need, const uint64_t *seeds, size_t ns,
                uint64_t kmax, struct ident_torchdata *td, struct cfs_identified *out)
{
    uint64_t *first = NULL, *second = NULL;
    uint32_t *words = malloc((kmax + 2) * sizeof(*words));
    int rc = words ? sets_of(rd, p->n, &first, &second) : -ENOMEM;
    uint64_t skip = cfs_torch_randperm_words(p->n, p->algo);
    int best = -ENOENT;
    for (size_t i = 0; i < ns && rc == 0 && best != 1; i++) {
        struct cfs_mt19937 mt;
        cfs_mt19937_seed(&mt, seeds[i]);
        for (uint64_t w = 0; w < kmax + 2; w++)
            words[w] = cfs_mt19937_next32(&mt);
        for (uint64_t k = 0; k <= kmax && best != 1; k++) {
            uint32_t v0, v1;
            second_head(words[k + 1], p->n, skip, &v0, &v1);
            if (!bit(first, v0) || !bit(second, v1))
                continue;
            int v = verify_both(p, rd, seeds[i], k, false, need, td, out);
            if (v < 0 && v != -ENOENT)
                rc = v;
            else if (v == 1 || (v == 0 && best == -ENOENT))
                best = v; /* a fit short of evidence is kept; a better one ends the walk */
        }
        if (cancel && atomic_load(cancel))
            rc = -ECANCELED;
    }
    free(words);
    free(first);
    free(second);
    return rc < 0 ? rc : best;
}

int ident_torchdata_attempt(const struct cfs_identify_params *p, const struct ident_readers *rd,
                            const atomic_bool *cancel, double need_bits, bool kept_only,
                            struct ident_torchdata *td, struct cfs_identified *out)
{
    if (td->found) {
        struct ident_torchdata was = *td;
        int rc = verify_both(p, rd, was.seed, was.offset, was.persistent, need_bits, td, out);
        if (rc != -ENOENT)
            return rc;
        *td = (struct ident_torchdata){0};
    }
    if (kept_only || !applies(p) || rd->nr == 0)
        return -ENOENT;
    uint64_t *seeds = malloc(TD_TABLE_MAX * sizeof(*seeds));
    if (!seeds)
        return -ENOMEM;
    size_t ns = seeds_of(p, seeds);
    int64_t kmax = max_offset(p, ns);
    int rc = kmax < 0 ? -ENOENT
                      : walk(p, rd, cancel, need_bits, seeds, ns, (uint64_t)kmax, td, out);
    free(seeds);
    return rc;
}
