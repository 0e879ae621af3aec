/* Order identification of a torch-global trainer (clairfs/sampler.h) from
 * a registered seed S: torch.manual_seed(S), a model built (K words of the
 * global generator), DataLoader(shuffle=True) without a generator, G words
 * an epoch outside the loader.  identify_scan.c calls this with its
 * observations when the registered seed did not explain them as the
 * registered kind; identify_verify.c judges every candidate.
 *
 * K from epoch 0.  The reader whose first open is the head of the stream
 * (worker 0 of a rank, or the rank itself without workers) opened
 * randperm positions 0, 1, ... m-1 first (m up to the batch).  Not knowing
 * which reader that is nor the batch, each of the first HEADS readers is
 * tried as the head with m constraints, enough that a false K in the range
 * is unlikely (m <= 8), then with m = 2 (batches of two).  The offset
 * finder (clairfs/rng_offset.h) walks K = 0 .. max_offset once per try in
 * its background thread at idle priority (this thread waits, cancellable);
 * every K it names is verified against all opens as torch-global with
 * G = 0 (right when G is 0, or when only epoch 0 was seen), else against
 * the first n/2 opens (all of epoch 0: the loader reads n, or n less the
 * last partial batch, an epoch per rank).  Beyond max_offset nothing is
 * found: a "not found within K <= ..." is logged once and the seed scan
 * goes on as without torch-global; nothing torch-global is adopted, the
 * registered order stays (its predictions miss: a reactive cache).
 *
 * G from epoch 1.  With K, batch and ranks known, epoch 1 starts E0 opens
 * in (n or n less the partial batch, per rank); its readers' first opens
 * give the constraints again, now at known positions, and the finder walks
 * G upwards from 0 in doubling chunks up to CFS_IDENTIFY_GLOBAL_MAX_WORDS,
 * stopping at the first that verifies (the data path mispredicts until
 * then), for both loader iterators (persistent_workers or not: 2 or 4
 * words an epoch).  A G is verified against every open with the full
 * model.
 *
 * Evidence: the candidates tried here are counted in
 * cfs_identify_evidence_needed (ident_global_candidates), so the bound of
 * identify_verify.c holds.  The dense views of identify_verify.c are
 * needed (n <= 2^22). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/log.h"
#include "clairfs/rng_offset.h"
#include "identify_i.h"

#define HEADS 4                 /* readers tried as the head of an epoch */
#define MAX_CONSTRAINTS 8       /* more only slow the finder's replay */
#define WORDS_FIRST 4096u       /* G tried first */
#define GLOBAL_MAX_N (1u << 22) /* identify_verify.c's dense views */
#define SYNC_COUNT (1u << 20)   /* shorter walks run on this thread (0.2 s) */

static bool applies(const struct cfs_identify_params *p)
{
    const struct cfs_sampler_params *h = p->hint;
    return h && p->hint_has_seed && !p->hint_identified && p->n >= 2 && p->n <= GLOBAL_MAX_N &&
           (h->kind == CFS_SAMPLER_TORCH_DDP || h->kind == CFS_SAMPLER_TORCH_GLOBAL);
}

static uint64_t max_offset(const struct cfs_identify_params *p)
{
    return p->global_max_offset ? p->global_max_offset : CFS_IDENTIFY_GLOBAL_MAX_OFFSET;
}

double ident_global_candidates(const struct cfs_identify_params *p)
{
    if (!applies(p))
        return 0;
    /* K: HEADS heads, two constraint counts; G: two epoch starts, two
     * iterators, HEADS heads; each names at most CFS_RNG_MAX_CANDIDATES */
    double k = 2.0 * HEADS * ((double)max_offset(p) + 1.0);
    double g = 2.0 * 2.0 * HEADS * ((double)CFS_IDENTIFY_GLOBAL_MAX_WORDS + 1.0);
    return (k + g) * CFS_RNG_MAX_CANDIDATES;
}

void ident_global_describe(const struct cfs_identified *id, char *buf, size_t len)
{
    const struct cfs_sampler_params *s = &id->sampler;
    if (s->kind == CFS_SAMPLER_TORCHDATA_WORKERS)
        snprintf(buf, len, " rng_offset=%" PRIu64 "%s", s->rng_offset,
                 s->persistent_workers ? " persistent_workers" : "");
    else if (s->kind != CFS_SAMPLER_TORCH_GLOBAL)
        snprintf(buf, len, "%s", "");
    else if (id->epoch_words_known)
        snprintf(buf, len, " rng_offset=%" PRIu64 " rng_epoch_words=%" PRIu64, s->rng_offset,
                 s->rng_epoch_words);
    else
        snprintf(buf, len, " rng_offset=%" PRIu64 " rng_epoch_words=? (epoch 0 only)",
                 s->rng_offset);
}

/* A walk of the finder: on this thread when short or offline (no cancel),
 * else in its idle thread, this one polling cancel. */
static int walk(const struct cfs_rng_problem *pr, uint64_t first, uint64_t count,
                const atomic_bool *cancel, struct cfs_rng_result *res)
{
    if (!cancel || count <= SYNC_COUNT)
        return cfs_rng_draw_search(pr, first, 1, count, res);
    struct cfs_rng_search *s;
    int rc = cfs_rng_search_start(pr, first, 1, count, &s);
    if (rc < 0)
        return rc;
    while (!cfs_rng_search_done(s)) {
        if (atomic_load(cancel)) {
            cfs_rng_search_cancel(s);
            break;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    rc = cfs_rng_search_finish(s, res);
    return rc == 0 && res->cancelled ? -ECANCELED : rc;
}

/* Opens [from, to) grouped by process. */
static int group_range(const struct ident_obs *obs, size_t from, size_t to,
                       struct ident_readers *rd)
{
    return ident_group(obs->s + from, obs->pids ? obs->pids + from : NULL,
                       obs->ppids ? obs->ppids + from : NULL, to - from, rd);
}

static struct cfs_sampler_params model_of(const struct cfs_identify_params *p, uint64_t k,
                                          uint64_t g, bool persistent)
{
    return (struct cfs_sampler_params){.kind = CFS_SAMPLER_TORCH_GLOBAL,
                                       .seed = p->hint->seed,
                                       .n = p->n,
                                       .world = 1,
                                       .batch = 1,
                                       .persistent_workers = persistent,
                                       .randperm = p->algo,
                                       .rng_offset = k,
                                       .rng_epoch_words = g};
}

/* Verifies the model on rd; on a fit records what it says in g. */
static int verify(const struct cfs_identify_params *p, const struct ident_readers *rd,
                  const struct cfs_sampler_params *m, double need, struct ident_global *g,
                  struct cfs_identified *out)
{
    double bits;
    int rc = ident_verify_model(p, rd, m, need, out, &bits);
    if (rc < 0)
        return rc;
    *g = (struct ident_global){.found = true,
                               .persistent = out->sampler.persistent_workers,
                               .offset = m->rng_offset,
                               .words = m->rng_epoch_words,
                               .batch = out->sampler.batch,
                               .workers = out->workers,
                               .ranks = out->rank_count ? out->rank_count : 1};
    return rc;
}

/* Model (K, G, persistent) against every open; G counts as known when the
 * fit reached epoch 1. */
static int verify_all(const struct cfs_identify_params *p, const struct ident_readers *all,
                      const struct cfs_sampler_params *m, double need, bool words_known,
                      struct ident_global *g, struct cfs_identified *out)
{
    int rc = verify(p, all, m, need, g, out);
    if (rc >= 0) {
        g->words_known = words_known || out->epoch >= 1;
        out->epoch_words_known = g->words_known;
    }
    return rc;
}

/* K alone, from epoch 0's first n/2 opens; the whole observation's opens
 * and epoch reported (the mount replays them). */
static int verify_epoch0(const struct cfs_identify_params *p, const struct ident_obs *obs,
                         uint64_t k, double need, struct ident_global *g,
                         struct cfs_identified *out)
{
    size_t to = obs->len < p->n / 2 ? obs->len : (size_t)(p->n / 2);
    struct ident_readers rd;
    int rc = group_range(obs, 0, to, &rd);
    if (rc < 0)
        return rc;
    struct cfs_sampler_params m = model_of(p, k, 0, false);
    rc = verify(p, &rd, &m, need, g, out);
    ident_readers_free(&rd);
    if (rc < 0)
        return rc;
    g->words_known = false;
    out->epoch_words_known = false;
    out->opens = obs->len;
    out->epoch = out->epoch_opens ? (uint32_t)((obs->len - 1) / out->epoch_opens) : 0;
    return rc;
}

/* "randperm[i] == reader's open i" for i < m. */
static size_t head_constraints(const struct ident_reader *r, size_t m,
                               struct cfs_seed_constraint *c)
{
    if (m > r->len)
        m = r->len;
    if (m > MAX_CONSTRAINTS)
        m = MAX_CONSTRAINTS;
    for (size_t i = 0; i < m; i++)
        c[i] = (struct cfs_seed_constraint){.pos = (uint32_t)i, .value = r->s[i]};
    return m;
}

/* Constraints enough that a chance match among count candidates is
 * unlikely (2^-12 a walk). */
static size_t constraints_needed(uint64_t n, uint64_t count)
{
    double want = log2((double)count + 1.0) + 12.0, have = 0;
    size_t m = 0;
    while (have < want && m < MAX_CONSTRAINTS && m < n)
        have += log2((double)(n - m++));
    return m < 2 ? 2 : m;
}

static int find_offset(const struct cfs_identify_params *p, const struct ident_obs *obs,
                       const struct ident_readers *all, const atomic_bool *cancel, double need,
                       struct ident_global *g, struct cfs_identified *out)
{
    uint64_t count = max_offset(p) + 1;
    size_t want = constraints_needed(p->n, count);
    for (int pass = 0; pass < 2; pass++) {
        size_t m = pass == 0 ? want : 2;
        if (pass == 1 && want == 2)
            break;
        for (size_t h = 0; h < all->nr && h < HEADS; h++) {
            struct cfs_seed_constraint c[MAX_CONSTRAINTS];
            struct cfs_rng_problem pr = {.seed = p->hint->seed, .n = p->n, .algo = p->algo, .c = c};
            if (all->r[h].len < 2)
                continue;
            pr.nc = head_constraints(&all->r[h], m, c);
            struct cfs_rng_result res;
            int rc = walk(&pr, cfs_rng_epoch_draw(0, 0, false, 0), count, cancel, &res);
            if (rc < 0)
                return rc;
            for (uint32_t i = 0; i < res.n_found; i++) {
                for (int pers = 0; pers < 2; pers++) {
                    struct cfs_sampler_params mo = model_of(p, res.found[i], 0, pers);
                    rc = verify_all(p, all, &mo, need, false, g, out);
                    if (rc != -ENOENT)
                        return rc;
                }
                rc = verify_epoch0(p, obs, res.found[i], need, g, out);
                if (rc != -ENOENT)
                    return rc;
            }
        }
    }
    return -ENOENT;
}

/* G candidates for epoch 1 read by rd1: per head and loader iterator,
 * the walk goes up in chunks doubling from WORDS_FIRST and stops at the
 * first G that verifies (the data path mispredicts epoch 1 meanwhile: a G
 * of 384000, two words per element of a small dropout a step, takes
 * about 0.1 s).  Chunks up to SYNC_COUNT words run on this thread at its
 * priority (a fraction of a second), longer ones in the finder's idle
 * thread. */
/* One chunk [g0, g0 + count) of G for the iterator pers, head constraints
 * pr: verified as found. */
static int words_chunk(const struct cfs_identify_params *p, const struct ident_readers *all,
                       const struct cfs_rng_problem *pr, bool pers, uint64_t g0, uint64_t count,
                       const atomic_bool *cancel, double need, struct ident_global *g,
                       struct cfs_identified *out)
{
    const struct ident_global known = *g;
    uint64_t first = cfs_rng_epoch_draw(known.offset, 0, pers, 1) + g0;
    struct cfs_rng_result res;
    int rc = walk(pr, first, count, count <= SYNC_COUNT ? NULL : cancel, &res);
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < res.n_found; i++) {
        struct cfs_sampler_params mo = model_of(p, known.offset, g0 + res.found[i], pers);
        rc = verify_all(p, all, &mo, need, true, g, out);
        if (rc != -ENOENT)
            return rc;
        *g = known;
    }
    return -ENOENT;
}

/* G candidates for epoch 1 read by rd1.  Per head, the walk goes up in
 * chunks doubling from WORDS_FIRST and stops at the first G that
 * verifies, the loader's usual iterator (not persistent) first up to
 * SYNC_COUNT words (on this thread at its priority: the data path
 * mispredicts epoch 1 meanwhile; a G of 384000, two words per element of
 * a small dropout a step, takes about 0.1 s), then the other, then both
 * beyond, in the finder's idle thread. */
static int try_words(const struct cfs_identify_params *p, const struct ident_readers *all,
                     const struct ident_readers *rd1, const atomic_bool *cancel, double need,
                     struct ident_global *g, struct cfs_identified *out)
{
    size_t m = g->workers && g->batch < MAX_CONSTRAINTS ? g->batch : MAX_CONSTRAINTS;
    for (size_t h = 0; h < rd1->nr && h < HEADS; h++) {
        struct cfs_seed_constraint c[MAX_CONSTRAINTS];
        struct cfs_rng_problem pr = {.seed = p->hint->seed, .n = p->n, .algo = p->algo, .c = c};
        pr.nc = head_constraints(&rd1->r[h], m, c);
        for (int phase = 0; phase < 3; phase++) {
            uint64_t lo = phase < 2 ? 0 : SYNC_COUNT,
                     hi = phase < 2 ? SYNC_COUNT : CFS_IDENTIFY_GLOBAL_MAX_WORDS + 1;
            for (uint64_t g0 = lo, count = lo ? lo : WORDS_FIRST; g0 < hi;
                 g0 += count, count = g0) {
                if (count > hi - g0)
                    count = hi - g0;
                for (int pers = phase == 1; pers < (phase == 0 ? 1 : 2); pers++) {
                    int rc = words_chunk(p, all, &pr, pers, g0, count, cancel, need, g, out);
                    if (rc != -ENOENT)
                        return rc;
                }
            }
        }
    }
    return -ENOENT;
}

/* G from epoch 1's first opens, K known; -ENOENT also when epoch 1 has
 * not begun. */
static int find_words(const struct cfs_identify_params *p, const struct ident_obs *obs,
                      const struct ident_readers *all, const atomic_bool *cancel, double need,
                      struct ident_global *g, struct cfs_identified *out)
{
    uint64_t lens[2] = {p->n, g->batch ? p->n / g->batch * g->batch : p->n};
    int rc = -ENOENT;
    for (int k = 0; k < 2 && rc == -ENOENT; k++) {
        uint64_t e0 = lens[k] * g->ranks;
        if ((k == 1 && lens[1] == lens[0]) || obs->len < e0 + 2)
            continue;
        size_t to = obs->len - e0 > p->n / 2 ? (size_t)(e0 + p->n / 2) : obs->len;
        struct ident_readers rd1;
        if ((rc = group_range(obs, (size_t)e0, to, &rd1)) < 0)
            return rc;
        rc = try_words(p, all, &rd1, cancel, need, g, out);
        ident_readers_free(&rd1);
    }
    return rc;
}

/* What was found before, against the opens now: 1 or 0 (still fits),
 * -ENOENT (the trainer moved past what is known, or is another). */
static int recheck(const struct cfs_identify_params *p, const struct ident_obs *obs,
                   const struct ident_readers *all, double need, struct ident_global *g,
                   struct cfs_identified *out)
{
    const struct ident_global known = *g;
    struct cfs_sampler_params m = model_of(p, known.offset, known.words, known.persistent);
    int rc = verify_all(p, all, &m, need, known.words_known, g, out);
    if (rc != -ENOENT || known.words_known)
        return rc;
    *g = known;
    return verify_epoch0(p, obs, known.offset, need, g, out);
}

int ident_global_attempt(const struct cfs_identify_params *p, const struct ident_obs *obs,
                         const atomic_bool *cancel, double need_bits, struct ident_global *g,
                         struct cfs_identified *out)
{
    if (!applies(p) || obs->len < IDENT_MIN_OPENS)
        return -ENOENT;
    struct ident_readers all;
    int rc = group_range(obs, 0, obs->len, &all);
    if (rc < 0)
        return rc;
    bool told = g->told;
    rc = -ENOENT;
    if (g->found)
        rc = recheck(p, obs, &all, need_bits, g, out);
    if (rc == -ENOENT && p->hint->kind == CFS_SAMPLER_TORCH_GLOBAL) {
        /* the registered offsets first: a check, not a search */
        struct cfs_sampler_params m =
            model_of(p, p->hint->rng_offset, p->hint->rng_epoch_words, p->hint->persistent_workers);
        rc = verify_all(p, &all, &m, need_bits, false, g, out);
    }
    if (rc == -ENOENT) {
        *g = (struct ident_global){0};
        rc = find_offset(p, obs, &all, cancel, need_bits, g, out);
        if (rc == -ENOENT && !told)
            cfs_info("identify: torch-global seed=%" PRIu64 " not found within K <= %" PRIu64
                     " (rng_offset) in %zu opens; searching other orders",
                     p->hint->seed, max_offset(p), obs->len);
        told = told || rc == -ENOENT;
    }
    if (rc >= 0 && g->found && !g->words_known) {
        /* K found; once epoch 1 has begun, G */
        struct ident_global known = *g;
        struct cfs_identified k_only = *out;
        int wrc = find_words(p, obs, &all, cancel, need_bits, g, out);
        if (wrc == -ENOENT)
            *g = known, *out = k_only;
        else
            rc = wrc;
    }
    if (rc < 0 && rc != -ECANCELED)
        *g = (struct ident_global){0};
    g->told = told;
    ident_readers_free(&all);
    return rc;
}
