/* One attempt at identification over a set of observations: the
 * candidates kept from the last attempt, the registered seed as
 * torch-global's (identify_global.c), then the seed scans that find
 * candidates for identify_verify.c to judge; cfs_identify_offline; the
 * result in words.
 *
 * Why a scan over sets.  The identifier does not know which process reads
 * the head of the stream, nor the world or batch size.  But the head's
 * first entry, randperm position p0 (0; on node k of a torch-ddp run with
 * L ranks a node, k * L), is the first open of some reader: worker 0 of
 * rank p0, or the rank itself without workers.  Position p0 + 1 is that
 * reader's second open (stride 1: the torch models, a world of one, a
 * batch of one sample per worker...) or the first open of another reader
 * (rank p0 + 1, or worker 1 of a batch-1 loader).  So one pass over the
 * seeds with the set constraint of clairfs/seed_search.h - randperm[p0] in
 * {first opens}, randperm[p0 + 1] in {first and second opens} - covers
 * every hypothesis at once; about 2^32 R 2R / n^2 seeds pass for R readers
 * (ImageNet: none or one besides the real one), each verified against all
 * opens.  Skips 0 and 2 share the pass (the filter computes the first four
 * words of every seed).
 *
 * The frameworks' samplers keep the constraint but for one word.  An
 * accelerate rank reads whole batches: randperm[0] is worker 0 of rank 0's
 * first open, randperm[1] its second (B >= 2) or the first of rank 1 or
 * worker 1 (B = 1), as above.  The RA samplers repeat every value R times
 * in a row and deal the repeated list to the ranks: entries 0 .. R-1 are
 * randperm[0], entry R is randperm[1].  randperm[0] is still a first open
 * (entry 0: rank 0's), but a reader can open randperm[0] twice before
 * randperm[1] (world 1: entries 0, 1, 2 are its first three opens).  The
 * reader of entry R, though, reads entries in increasing order and all of
 * its entries below R hold randperm[0]: randperm[1] is its first or its
 * second DISTINCT open.  So the second set takes, per reader, the first open
 * and the first open that differs from it.  For the torch models that is
 * the second open whenever it differs from the first, and when it does not
 * the set only grows: no seed the old constraint passed is lost, the sets
 * keep at most two values a reader (the filter's pass rate is the same) and
 * it is still one scan for every model.
 *
 * One rank a node.  On a distributed mount whose nodes serve one trainer
 * rank each, the head node's readers are rank 0's: they open positions 0,
 * W, 2W, ... and randperm[1] is rank 1's, on another node.  randperm[W]
 * is worker 0's second open (B >= 2) or worker 1's first (B = 1), so the
 * same two sets hold it, and the filter also passes randperm[p0 + W] in
 * the second set, W the node count (block placement: one rank a node is a
 * world of one per node).  That is one more stride in the same pass, not a
 * pass per guessed world: the seeding computes W - 1 more words a seed
 * (bench-seed-search: see docs/distributed.md for the cost) and twice as
 * many seeds pass the filter to be verified.  Exchanging the other nodes'
 * first opens over MPI would keep the filter as it was, but makes the head
 * node wait on its peers, where the stride needs nothing but its opens.
 *
 * A dataset root's candidate index orders (params.orders: timm's,
 * mmpretrain's ... of the same n samples) add index sets, not scans: the
 * sets take each reader's opens as numbered in every order, and a seed
 * that passes is verified in each order in turn (the observed one first).
 * The union is at most (1 + orders) times as large, the pass rate at most
 * its square; the evidence demanded counts each seed once per order.
 *
 * Why the head at the normal priority.  A scan's long part yields to the
 * trainer (identify_pace.c).  Its head - a registered seed's span, the
 * range's first IDENT_SCAN_HEAD_SEEDS seeds, the checks of kept candidates -
 * takes milliseconds and decides what the data path predicts, so it runs
 * at the normal priority (ident_attempt_all says why).
 *
 * Evidence.  A fit short of the evidence that cfs_identify_evidence_needed
 * demands for the whole range ends a scan: the next opens confirm or
 * refute it in microseconds.  The module's thread keeps it
 * (identify_thread.c) and re-verifies it as opens arrive. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "clairfs/seed_search.h"
#include "identify_i.h"

#define HINT_SPAN 1024u            /* seeds tried from a registered one: a resumed run's epochs */
#define TIMM_HINT_EPOCHS 8u        /* epochs before another node's timm-ra claim tried */

/* --- The scans. ------------------------------------------------------------ */

static bool on_candidate(void *arg, uint32_t seed, uint32_t skip)
{
    struct ident_attempt *a = arg;
    struct cfs_identified id;
    double bits;
    /* every index order of the root, the observed one first */
    for (uint32_t k = 0; k < a->norders; k++) {
        int rc = ident_verify(a->p, &a->in_order[k], seed, skip, a->p0, a->need_bits, &id, &bits);
        id.order = k;
        if (rc == 1) {
            *a->out = id;
            a->win = (struct ident_cand){seed, skip, a->p0, k};
            a->rc = 1;
            return true;
        }
        if (rc == 0) {
            if (a->fits++ == 0 || bits > a->near_bits)
                a->near = id, a->near_bits = bits;
            if (a->nkeep < IDENT_MAX_KEEP)
                a->keep[a->nkeep++] = (struct ident_cand){seed, skip, a->p0, k};
            /* A fit short of evidence ends the scan: the next opens confirm
             * or refute it in microseconds, where the rest of the range
             * costs minutes.  The evidence demanded counts every seed of
             * the range as tried, so stopping early only demands more
             * than needed. */
            return a->scanning;
        } else if (rc != -ENOENT) {
            a->rc = rc;
            return true;
        }
    }
    return false;
}

/* The scans' sets: each reader's first open, and its first and second
 * distinct opens, in every index order of the attempt (their union: one
 * pass over the seeds for every order). */
static int set_bits(uint64_t **first, uint64_t **second, const struct ident_attempt *a, uint64_t n)
{
    *first = calloc((n + 63) / 64, sizeof(uint64_t));
    *second = calloc((n + 63) / 64, sizeof(uint64_t));
    if (!*first || !*second)
        return -ENOMEM;
    for (size_t o = 0; o < a->norders; o++) {
        const struct ident_readers *rd = &a->in_order[o];
        for (size_t i = 0; i < rd->nr; i++) {
            const struct ident_reader *r = &rd->r[i];
            if (r->len == 0)
                continue;
            uint32_t v = r->s[0];
            (*first)[v / 64] |= 1ull << (v % 64);
            (*second)[v / 64] |= 1ull << (v % 64);
            /* the second DISTINCT open (the top comment says why) */
            for (size_t k = 1; k < r->len; k++)
                if (r->s[k] != v) {
                    v = r->s[k];
                    (*second)[v / 64] |= 1ull << (v % 64);
                    break;
                }
        }
    }
    return 0;
}

/* The head positions to try: 0 (every torch model, node 0 of torch-ddp)
 * and, when the registered world says how many ranks L a node has, node k's
 * first rank: k L where the ranks are placed in blocks, k where they are
 * dealt round robin (L >= 2: one rank a node is both).  A scan's filter
 * reads positions up to its vector words (filtered); a hinted seed is
 * verified at any (try_hinted_seed: node 29 and up of one rank a node). */
#define HEADS_MAX 3
static size_t head_positions(const struct cfs_identify_params *p, bool filtered, uint32_t *pos)
{
    size_t k = 0;
    pos[k++] = 0;
    if (p->nodes > 1 && p->node > 0 && p->hint && p->hint->world >= p->nodes) {
        uint32_t per = p->hint->world / p->nodes;
        uint64_t at[2] = {(uint64_t)p->node * per, per > 1 ? p->node : 0};
        for (size_t i = 0; i < 2; i++)
            if (at[i] && (!filtered || at[i] + 2 <= CFS_SEED_SET_WORDS - 2) && at[i] + 1 < p->n)
                pos[k++] = (uint32_t)at[i];
    }
    return k;
}

/* The second stride the filter also passes: on a distributed mount the
 * world when each node serves one rank (the node count, however the
 * launcher places them; a registered world says whether it is one a node),
 * where randperm[p0 + 1] is another node's; 0 when it does not fit the
 * filter's window of draws: at the stream's head 227 words, up to 224
 * nodes (past the vector stage's 32, only the seeds whose randperm[0]
 * passes compute them: seed_set.c); at a later head 32. */
uint32_t ident_scan_alt_gap(const struct cfs_identify_params *p, uint32_t p0, uint32_t maxskip)
{
    if (p->nodes < 2 || (p->hint && p->hint->world && p->hint->world != p->nodes))
        return 0;
    uint32_t words = p0 == 0 ? CFS_SEED_SET_HEAD_WORDS : CFS_SEED_SET_WORDS;
    return (uint64_t)p0 + p->nodes + 1 + maxskip <= words ? p->nodes : 0;
}

static void pace_chunk(void *arg, struct cfs_seed_workers *w)
{
    struct ident_attempt *a = arg;
    ident_pace_chunk(a->pace, a->meter, w);
}

/* Scans [first, first + count) for every head position. */
static int scan(struct ident_attempt *a, const uint64_t *fs, const uint64_t *ss, uint32_t first,
                uint64_t count)
{
    uint32_t heads[HEADS_MAX];
    size_t nh = head_positions(a->p, true, heads);
    for (size_t h = 0; h < nh && a->rc == 0; h++) {
        static const uint32_t both[] = {0, 2}, ddp_only[] = {0};
        struct cfs_seed_set_problem sp = {.n = a->p->n,
                                          .algo = a->p->algo,
                                          .pos = heads[h],
                                          .skips = heads[h] ? ddp_only : both,
                                          .nskips = heads[h] ? 1 : 2,
                                          .first = fs,
                                          .second = ss,
                                          .alt_gap =
                                              ident_scan_alt_gap(a->p, heads[h], heads[h] ? 0 : 2)};
        a->p0 = heads[h];
        ident_meter_scan(a->meter, true);
        /* A scan's long part, and offline every scan, on the usable CPUs'
         * threads (seed_threads.c), paced where the module thread's is;
         * its head on the module thread.  A candidate that stops the
         * search (on_candidate: a fit, short of evidence or not) stops
         * them all. */
        unsigned threads = !a->pace ? a->p->search_threads
                           : a->paced ? ident_pace_threads(a->pace, a->p->search_threads)
                                      : 1;
        struct cfs_seed_threads t = {.threads = threads,
                                     .idle = a->paced,
                                     .every = IDENT_PACE_CHUNK,
                                     .pace = a->paced ? pace_chunk : NULL,
                                     .pace_arg = a,
                                     .progress = a->scanned};
        uint64_t searched;
        int rc = cfs_seed_search_set_threads(&sp, first, count, a->cancel, on_candidate, a,
                                             &searched, &t);
        ident_meter_scan(a->meter, false);
        if (rc < 0)
            return rc;
        if (a->cancel && atomic_load(a->cancel))
            return -ECANCELED;
    }
    return a->rc < 0 ? a->rc : 0;
}

/* The registered seed itself (skip 0: torch-ddp and torch-sampler) at
 * every head position, verified without the set filter: on a node of one
 * rank randperm[p0 + 1] is the first open of a rank on another node, which
 * the filter's second set cannot hold, and the hinted span's scan would
 * pass over the seed that the other node's claim names (order_agree.h).
 * Another node's timm-ra claim names the epoch it was made in (timm-ra
 * seeds with the epoch alone): this node's opens began there or up to
 * TIMM_HINT_EPOCHS before. */
static void try_hinted_seed(struct ident_attempt *a)
{
    const struct cfs_sampler_params *hint = a->p->hint;
    uint32_t heads[HEADS_MAX], seed = (uint32_t)hint->seed, tries = 1;
    if (hint->kind == CFS_SAMPLER_TIMM_RA && a->p->hint_identified)
        tries = (seed < TIMM_HINT_EPOCHS ? seed : TIMM_HINT_EPOCHS) + 1;
    size_t nh = head_positions(a->p, false, heads);
    for (uint32_t t = 0; t < tries && a->rc == 0; t++)
        for (size_t h = 0; h < nh && a->rc == 0; h++) {
            a->p0 = heads[h];
            on_candidate(a, seed - t, 0);
        }
}

/* The candidate index orders an attempt tries beside the observed one. */
static size_t attempt_orders(const struct cfs_identify_params *p)
{
    if (!p->orders)
        return 0;
    return p->norders < IDENT_MAX_ORDERS ? p->norders : IDENT_MAX_ORDERS;
}

/* n = 1: every order reads sample 0; nothing to learn, nothing to get wrong. */
static void trivial(const struct cfs_identify_params *p, const struct ident_readers *rd,
                    struct cfs_identified *out)
{
    memset(out, 0, sizeof(*out));
    out->sampler =
        (struct cfs_sampler_params){.kind = CFS_SAMPLER_TORCH_SAMPLER,
                                    .n = 1,
                                    .batch = 1,
                                    .randperm = p->algo,
                                    .world = p->hint && p->hint->world ? p->hint->world : 1};
    out->rank_count = 1;
    out->opens = rd->opens;
}

double cfs_identify_evidence_needed(const struct cfs_identify_params *p)
{
    uint64_t count = p->seed_count ? p->seed_count : 1ull << 32;
    for (size_t i = 0; i < p->nmore_seeds; i++)
        count += p->more_seeds[i].count;
    size_t nh = head_positions(p, true, (uint32_t[HEADS_MAX]){0});
    /* every seed of the range with both skips, per head position, plus a
     * hinted seed's span and the candidates kept from an earlier attempt */
    double tried = (double)count * 2.0 * (double)nh + 2.0 * HINT_SPAN + IDENT_MAX_KEEP +
                   ident_global_candidates(p) + ident_torchdata_candidates(p);
    /* each seed verified in every index order of the root */
    return log2(tried * (double)(1 + attempt_orders(p))) + IDENT_HYPOTHESIS_BITS +
           IDENT_SAFETY_BITS;
}

/* A walk's outcome (1 identified, 0 a fit short of evidence, or -ENOENT
 * or an error) recorded in the attempt as a scan's would be. */
static int walk_outcome(struct ident_attempt *a, int rc)
{
    if (rc == 1 || rc == 0)
        a->global_win = true;
    if (rc == 1)
        a->rc = 1;
    if (rc == 0)
        a->fits = 1, a->near = *a->out, a->near_bits = a->out->evidence_bits;
    return rc;
}

/* The registered seed as torch-global's (identify_global.c) in each index
 * order of the root, the one it was last found in first: a timm dataset
 * shuffled from the global generator draws the same stream over timm's
 * numbering.  1, 0 (a fit short of evidence, kept in g), -ENOENT (none),
 * -errno. */
static int global_step(struct ident_attempt *a, const struct ident_obs *obs, struct ident_global *g)
{
    uint32_t first = g->found && g->order < a->norders ? g->order : 0;
    int rc = -ENOENT;
    for (uint32_t i = 0; i < a->norders && rc == -ENOENT; i++) {
        uint32_t k = (first + i) % (uint32_t)a->norders;
        struct ident_obs in_k = *obs;
        uint32_t *renumbered = NULL;
        if (k) {
            renumbered = malloc((obs->len ? obs->len : 1) * sizeof(*renumbered));
            if (!renumbered)
                return -ENOMEM;
            for (size_t j = 0; j < obs->len; j++)
                renumbered[j] = a->p->orders[k - 1][obs->s[j]];
            in_k.s = renumbered;
        }
        rc = ident_global_attempt(a->p, &in_k, a->cancel, a->need_bits, g, a->out);
        free(renumbered);
        if (rc == 1 || rc == 0)
            g->order = k, a->out->order = k;
    }
    return walk_outcome(a, rc);
}

/* torchdata-workers (identify_torchdata.c): the fit kept in g->td, or
 * (kept_only false) the walk of the seeds people use.  As global_step. */
static int torchdata_step(struct ident_attempt *a, struct ident_global *g, bool kept_only)
{
    int rc = ident_torchdata_attempt(a->p, a->rd, a->cancel, a->need_bits, kept_only, &g->td,
                                     a->out);
    return walk_outcome(a, rc);
}

static int attempt_orders_all(const struct ident_attempt_in *in, struct ident_global *g,
                              struct ident_attempt *a, struct cfs_identified *out)
{
    const struct cfs_identify_params *p = in->p;
    const struct ident_readers *rd = in->rd;
    struct ident_pace *pace = in->pace;
    if (p->n == 1 && rd->opens > 0) {
        trivial(p, rd, out);
        return 1;
    }
    uint64_t count = p->seed_count ? p->seed_count : 1ull << 32;
    a->need_bits = cfs_identify_evidence_needed(p);
    bool global_tried = g->found;
    if (g->found) {
        int grc = global_step(a, in->obs, g);
        if (grc != -ENOENT)
            return grc;
    }
    if (g->td.found) {
        int trc = torchdata_step(a, g, true);
        if (trc != -ENOENT)
            return trc;
    }
    for (size_t i = 0; i < in->nkeep && a->rc == 0; i++) {
        a->p0 = in->keep[i].p0;
        on_candidate(a, in->keep[i].seed, in->keep[i].skip);
    }
    if (a->rc != 0 || (in->nkeep && a->fits) || in->kept_only)
        return a->rc;
    a->fits = 0, a->nkeep = 0;
    a->scanning = true;
    /* On the module's thread (cancel given) a scan takes minutes and
     * yields to the trainer.  The rest - waking up for an epoch's first
     * opens, checking the kept candidates - takes milliseconds and decides
     * what the data path predicts: a SCHED_IDLE thread would wait seconds
     * for a busy core just to start it, so the thread sleeps at the normal
     * priority and drops it only for the long part of a scan.  A registered
     * seed's span and the range's first IDENT_SCAN_HEAD_SEEDS seeds (the seeds
     * people pick; ~10 ms) are scanned before that: a trainer whose loader
     * keeps every core busy starves a SCHED_IDLE thread for its whole
     * epoch 0, and its seed would wait for the epoch's end. */
    uint64_t *fs = NULL, *ss = NULL;
    int rc = p->n >= 2 && rd->nr > 0 ? set_bits(&fs, &ss, a, p->n) : -ENOENT;
    if (rc == 0 && p->hint && p->hint_has_seed)
        try_hinted_seed(a);
    if (rc == 0 && a->rc == 0 && p->hint && p->hint_has_seed)
        rc = scan(a, fs, ss, (uint32_t)p->hint->seed, HINT_SPAN);
    if (rc == 0 && a->rc == 0 && !a->fits && !global_tried) {
        /* with a registered seed, a walk of the global stream (idle) */
        if (pace && p->hint_has_seed)
            ident_pace_priority(pace, true);
        rc = global_step(a, in->obs, g);
        rc = rc == -ENOENT ? 0 : rc < 0 ? rc : a->rc != 0 || a->fits ? -ENOENT : 0;
    }
    /* Lowered only where the long part begins: a SCHED_IDLE thread that
     * meant to raise itself again soon could wait for a core first. */
    uint64_t head = count < IDENT_SCAN_HEAD_SEEDS ? count : IDENT_SCAN_HEAD_SEEDS;
    if (rc == 0 && a->rc == 0 && pace) {
        ident_pace_priority(pace, false);
        rc = scan(a, fs, ss, p->seed_first, head);
    } else {
        head = 0;
    }
    /* The libraries' constant seeds (identify_frameworks.c) come next, at
     * the same priority: one seed each, where the range holds them (they
     * are among the seeds the evidence demanded counts). */
    for (size_t i = 0; i < IDENT_CONSTANT_SEEDS && rc == 0 && a->rc == 0 && !a->fits; i++) {
        uint32_t c = ident_constant_seed[i];
        if ((uint64_t)(uint32_t)(c - p->seed_first) < count &&
            (uint64_t)(uint32_t)(c - p->seed_first) >= head)
            rc = scan(a, fs, ss, c, 1);
    }
    if (pace)
        ident_pace_priority(pace, true);
    /* torchdata with workers: no seed of the range is a candidate; a
     * walk of seconds, before the scan of minutes */
    if (rc == 0 && a->rc == 0 && !a->fits) {
        rc = torchdata_step(a, g, false);
        rc = rc == -ENOENT ? 0 : rc < 0 ? rc : a->rc != 0 || a->fits ? -ENOENT : 0;
    }
    a->paced = pace != NULL;
    if (rc == 0 && a->rc == 0 && count > head)
        rc = scan(a, fs, ss, p->seed_first + (uint32_t)head, count - head);
    for (size_t i = 0; i < p->nmore_seeds && rc == 0 && a->rc == 0 && !a->fits; i++)
        rc = scan(a, fs, ss, p->more_seeds[i].first, p->more_seeds[i].count);
    a->paced = false;
    free(fs);
    free(ss);
    if (pace)
        ident_pace_priority(pace, false);
    if (rc == -ENOENT)
        rc = 0;
    return rc < 0 ? rc : a->rc;
}

int ident_attempt_all(const struct ident_attempt_in *in, struct ident_global *g,
                      struct ident_attempt *a, struct cfs_identified *out)
{
    memset(a, 0, sizeof(*a));
    a->p = in->p, a->rd = in->rd, a->cancel = in->cancel, a->scanned = in->scanned;
    a->meter = in->meter, a->pace = in->pace;
    a->out = out;
    /* The opens in each candidate order, renumbered once an attempt: a
     * seed that passes the filter is verified in each. */
    a->in_order[0] = *in->rd;
    a->norders = 1;
    int rc = 0;
    for (size_t k = 0; k < attempt_orders(in->p) && rc == 0; k++)
        if ((rc = ident_readers_renumber(in->rd, in->p->orders[k], &a->in_order[k + 1])) == 0)
            a->norders++;
    if (rc == 0)
        rc = attempt_orders_all(in, g, a, out);
    for (size_t k = 1; k < a->norders; k++)
        ident_readers_free(&a->in_order[k]);
    a->norders = 1;
    return rc;
}

/* --- What was identified, in words. ----------------------------------------- */

/* Seeds from the generator's low 32 bits, the registered seed's high bits
 * when its low bits agree; the registered values the opens contradict. */
void ident_finish(const struct cfs_identify_params *p, struct cfs_identified *id, double seconds,
                   bool log_contradiction)
{
    const struct cfs_sampler_params *h = p->hint;
    char note[160] = "";
    /* a late hint is another node's claim (order_agree.h), not the user's */
    const char *who = p->hint_identified ? "another node's" : "registered";
    id->seconds = seconds;
    id->seed_high_known = false;
    uint32_t low = (uint32_t)id->sampler.seed;
    enum cfs_sampler_kind kind = id->sampler.kind;
    if (kind == CFS_SAMPLER_TIMM_RA || kind == CFS_SAMPLER_ULTRALYTICS ||
        kind == CFS_SAMPLER_TORCHDATA_WORKERS) {
        /* seeded by the epoch, or by a constant (identify_frameworks.c), or
         * a seed of the table whole (identify_torchdata.c): no seed to
         * recover */
        id->seed_high_known = true;
    } else if (h && p->hint_has_seed && p->n > 1) {
        uint32_t k = low - (uint32_t)h->seed;
        bool ddp = kind == CFS_SAMPLER_TORCH_DDP || kind == CFS_SAMPLER_HF_ACCELERATE ||
                   kind == CFS_SAMPLER_TORCHVISION_RA;
        if (k == 0 || (ddp && k < HINT_SPAN)) {
            /* seeded S + e, resumed at epoch k: seed S + k epoch 0 is S epoch k */
            id->sampler.seed = h->seed;
            id->epoch += k;
            id->seed_high_known = true;
        } else {
            snprintf(note + strlen(note), sizeof(note) - strlen(note),
                     "; %s seed=%llu contradicted", who, (unsigned long long)h->seed);
        }
    }
    if (h && h->kind != id->sampler.kind && h->kind != CFS_SAMPLER_LIST)
        snprintf(note + strlen(note), sizeof(note) - strlen(note), "; %s sampler=%s contradicted",
                 who, cfs_sampler_kind_name(h->kind));
    if (h && h->world && h->world != id->sampler.world)
        snprintf(note + strlen(note), sizeof(note) - strlen(note), "; %s world=%u contradicted",
                 who, h->world);
    if (h && id->workers && h->batch && h->batch != id->sampler.batch)
        snprintf(note + strlen(note), sizeof(note) - strlen(note), "; %s batch=%u contradicted",
                 who, h->batch);
    char global[96];
    ident_global_describe(id, global, sizeof(global));
    char ranks[64] = "", dealt[24] = ""; /* only some ranks opened here (yet) */
    uint32_t step = id->rank_stride > 1 && id->rank_count > 1 ? id->rank_stride : 1;
    if (step > 1)
        snprintf(dealt, sizeof(dealt), " step %u", step);
    if (id->rank_count && id->rank_count < id->sampler.world)
        snprintf(ranks, sizeof(ranks), " (ranks %u-%u%s here)", id->rank_first,
                 id->rank_first + (id->rank_count - 1) * step, dealt);
    if (id->per_epoch_global) {
        snprintf(id->text, sizeof(id->text),
                 "torch-global (no seed registered) epoch %u's private seed=%u (low 32 bits) "
                 "batch=%u workers=%u after %llu opens in %.0f s%s",
                 id->epoch, (uint32_t)(id->sampler.seed + id->epoch), id->sampler.batch,
                 id->workers, (unsigned long long)id->opens, seconds, note);
        return;
    }
    char order[48] = ""; /* a candidate index order, by its order= name */
    if (id->order && id->order <= p->norders && p->order_names)
        snprintf(order, sizeof(order), " order=%s", p->order_names[id->order - 1]);
    else if (!id->order && p->order_name)
        snprintf(order, sizeof(order), " order=%s", p->order_name);
    snprintf(id->text, sizeof(id->text),
             "%s seed=%llu%s%s world=%u%s%s batch=%u workers=%u epoch %u after %llu opens in "
             "%.0f s%s",
             cfs_sampler_kind_name(id->sampler.kind), (unsigned long long)id->sampler.seed,
             id->seed_high_known || p->n == 1 ? "" : " (low 32 bits)", global, id->sampler.world,
             ranks, order,
             id->sampler.batch, id->workers, id->epoch, (unsigned long long)id->opens, seconds,
             note);
    if (note[0] && log_contradiction)
        cfs_warn("identify: the opens fit %s", id->text);
}

void ident_not_identified(const struct ident_attempt *a, uint64_t opens, struct cfs_identified *out)
{
    memset(out, 0, sizeof(*out));
    out->opens = opens;
    if (a->fits && a->near_bits >= a->need_bits) /* short of IDENT_MIN_OPENS only */
        snprintf(out->text, sizeof(out->text),
                 "%llu opens fit %s seed=%llu (low 32 bits) with %.0f bits of evidence, but "
                 "identification waits for %d opens",
                 (unsigned long long)opens, cfs_sampler_kind_name(a->near.sampler.kind),
                 (unsigned long long)a->near.sampler.seed, a->near_bits, IDENT_MIN_OPENS);
    else if (a->fits)
        snprintf(out->text, sizeof(out->text),
                 "%llu opens fit %s seed=%llu (low 32 bits) but give %.0f of the %.0f bits of "
                 "evidence needed",
                 (unsigned long long)opens, cfs_sampler_kind_name(a->near.sampler.kind),
                 (unsigned long long)a->near.sampler.seed, a->near_bits, a->need_bits);
    else
        snprintf(out->text, sizeof(out->text), "no known torch order fits these %llu opens",
                 (unsigned long long)opens);
}

int ident_offline_outcome(const struct cfs_identify_params *p, const struct ident_attempt *a,
                          size_t opens, int rc, struct cfs_identified *out, char *err,
                          size_t errlen)
{
    if (rc == 1) {
        ident_finish(p, out, 0, false);
        return 0;
    }
    if (rc == 0) {
        ident_not_identified(a, opens, out);
        return -ENOENT;
    }
    snprintf(err, errlen, "identify: %s", strerror(-rc));
    return rc;
}

int cfs_identify_offline(const struct cfs_identify_params *p, const uint32_t *samples,
                         const pid_t *pids, const pid_t *ppids, size_t count,
                         struct cfs_identified *out, char *err, size_t errlen)
{
    if (p->n == 0 || p->n > UINT32_MAX) {
        snprintf(err, errlen, "identify: a dataset of %llu samples: must be 1..%u",
                 (unsigned long long)p->n, UINT32_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < count; i++)
        if (samples[i] >= p->n) {
            snprintf(err, errlen, "identify: open %zu is sample %u, beyond the %llu samples", i,
                     samples[i], (unsigned long long)p->n);
            return -EINVAL;
        }
    struct ident_readers rd;
    int rc = ident_group(samples, pids, ppids, count, &rd);
    struct ident_attempt *a = rc == 0 ? malloc(sizeof(*a)) : NULL;
    if (!a) {
        ident_readers_free(&rd);
        snprintf(err, errlen, "identify: out of memory for %zu opens", count);
        return -ENOMEM;
    }
    struct ident_obs obs = {samples, pids, ppids, count};
    struct ident_global g = {0};
    rc = ident_attempt_all(&(struct ident_attempt_in){.p = p, .obs = &obs, .rd = &rd}, &g, a, out);
    rc = ident_offline_outcome(p, a, rd.opens, rc, out, err, errlen);
    free(a);
    ident_readers_free(&rd);
    return rc;
}
