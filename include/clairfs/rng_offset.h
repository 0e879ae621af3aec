/* Where a torch-global trainer's loader sits in the global generator's
 * stream: the offset finder.
 *
 * The torch-global model (clairfs/sampler.h) needs, besides the seed S of
 * torch.manual_seed, two counts no configuration file states: K, the words
 * of the global generator that building the model drew before the loader's
 * first iterator (ResNet-50's initialisation draws about 25 million), and
 * G, the words each epoch draws outside the loader (dropout on the CPU).
 * Both can be read off the first indices the trainer opens. Epoch e's
 * order is randperm(n) of a private generator seeded with the low 32 bits
 * of a random64 taken at word D_e of the stream seeded S - the second word
 * of the pair, D_e + 1, is those low bits - where
 *
 *     D_e = K + 2 + e * (L + G),  L = 4, or 2 with persistent_workers.
 *
 * So a search walks the stream once and, for each candidate position,
 * seeds a private generator and checks the observed "randperm[pos] ==
 * value" constraints (struct cfs_seed_constraint) on a prefix of its
 * permutation. K comes from epoch 0's constraints (positions K + 2 for K =
 * 0..max), then G from epoch 1's given K (positions K + 2 + L + G).
 *
 * Cost: a candidate costs the part of one MT seeding the cheapest
 * constraint needs (value >= pos, pos < 227: pos + 398 multiplications,
 * run 16 candidates abreast), and rarely a prefix replay; about 2^28
 * offsets in minutes on one core (tests/rng_offset_bench prints the rate).
 * Without a usable cheap constraint every candidate is replayed in full
 * (several times slower). torch >= 2.6's inside-out randperm (n >=
 * 214748364 with CFS_RANDPERM_CURRENT) decides small positions by late
 * draws and is refused (-ENOTSUP): the global trainers clairfs meets on
 * such datasets are modelled with torch <= 2.5 or a known offset.
 *
 * Without S: each epoch's private seed is still a 64-bit draw, and only
 * its low 32 bits reach the private generator, so the exhaustive seed
 * search (clairfs/seed_search.h, skip_words 0) recovers that epoch's
 * private seed from the same constraints - enough to predict the rest of
 * that one epoch, not the next ones (the next private seed is far down an
 * unknown stream). From three consecutive epochs' private seeds S is
 * found when it is one people use (cfs_rng_table_find, below; rng_table.c),
 * with K and G in the bounds of a registered seed's search; an S outside
 * that table is searched over all 2^32 seeds only where the first epoch's
 * draw stands among the stream's first words (cfs_rng_range_find: a
 * trainer that builds no model, or a small one, before its loader).
 *
 * Pure computation: synchronous, or the general walk in one background
 * thread at idle priority (SCHED_IDLE, else nice 19), the seed search's
 * pattern, so a mount can run it beside the trainer. */
#ifndef CLAIRFS_RNG_OFFSET_H
#define CLAIRFS_RNG_OFFSET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"

/* One epoch's observed permutation entries. Positions must be below
 * CFS_RNG_MAX_POS (the first indices a trainer opens). */
struct cfs_rng_problem {
    uint64_t seed; /* torch.manual_seed's argument */
    uint64_t n;    /* dataset length, 1..2^32-1 */
    enum cfs_randperm_algo algo;
    const struct cfs_seed_constraint *c;
    size_t nc;
};

#define CFS_RNG_MAX_POS (1u << 20)
#define CFS_RNG_MAX_CANDIDATES 8u

struct cfs_rng_result {
    /* NONE, UNIQUE, AMBIGUOUS (matches > 1), or UNIDENTIFIABLE (n = 1 or
     * no constraint: every candidate agrees). */
    enum cfs_seed_verdict verdict;
    uint64_t searched; /* candidates examined */
    uint64_t matches;  /* candidates that agree */
    bool cancelled;    /* a background walk stopped early: searched < count */
    uint32_t n_found;  /* the first matches, ascending, at most CFS_RNG_MAX_CANDIDATES */
    uint64_t found[CFS_RNG_MAX_CANDIDATES];
};

/* The general walk: candidates j = 0..count-1 are the random64 drawn at
 * word first + j * step of the stream seeded p->seed; found[] holds the
 * matching j. Returns 0, -EINVAL (n out of range, a constraint outside
 * 0..n-1 or at a position >= CFS_RNG_MAX_POS, step 0), -ENOTSUP (inside-out
 * randperm) or -ENOMEM. Contradictory constraints answer CFS_SEED_NONE. */
int cfs_rng_draw_search(const struct cfs_rng_problem *p, uint64_t first, uint64_t step,
                        uint64_t count, struct cfs_rng_result *res);

/* rng_offset: every K in 0..max_offset whose epoch 0 agrees with p's
 * constraints (found[] holds K). */
int cfs_rng_offset_find(const struct cfs_rng_problem *p, uint64_t max_offset,
                        struct cfs_rng_result *res);

/* rng_epoch_words: given K, every G in 0..max_words whose epoch `epoch`
 * (>= 1) agrees with p's constraints (found[] holds G). */
int cfs_rng_epoch_words_find(const struct cfs_rng_problem *p, uint64_t offset,
                             bool persistent_workers, uint32_t epoch, uint64_t max_words,
                             struct cfs_rng_result *res);

/* cfs_rng_draw_search() in a background thread (the problem is copied).
 * Progress is the fraction of the candidates examined; cancel makes the
 * result cover what was examined (cancelled set); finish waits for the
 * thread, fills res, frees everything and returns the walk's return code.
 * priority says how the thread yields: "idle", "nice 19", "normal" or
 * "not started". */
struct cfs_rng_search;
int cfs_rng_search_start(const struct cfs_rng_problem *p, uint64_t first, uint64_t step,
                         uint64_t count, struct cfs_rng_search **out);
double cfs_rng_search_progress(const struct cfs_rng_search *s);
bool cfs_rng_search_done(const struct cfs_rng_search *s);
const char *cfs_rng_search_priority(const struct cfs_rng_search *s);
void cfs_rng_search_cancel(struct cfs_rng_search *s);
int cfs_rng_search_finish(struct cfs_rng_search *s, struct cfs_rng_result *res);

/* The seeds people give torch.manual_seed, most used first (rng_table.c
 * says where each comes from): up to cap of them into out, their count. */
size_t cfs_rng_seed_table(uint64_t *out, size_t cap);

/* Three consecutive epochs' private seeds (the low 32 bits each epoch's
 * randperm was seeded with), epochs first_epoch .. first_epoch + 2 of the
 * run, and the bounds of the search. */
struct cfs_rng_table_problem {
    const uint32_t *private_seeds;  /* 3 */
    uint32_t first_epoch;           /* 0..1024 */
    uint64_t max_offset, max_words; /* K <= max_offset, G <= max_words */
    const uint64_t *seeds;          /* tried in turn; NULL: cfs_rng_seed_table's */
    size_t nseeds;
};

struct cfs_rng_table_result {
    bool found;
    uint64_t seed, offset, words; /* S, K, G of the first seed tried that fits */
    bool persistent_workers;      /* L = 2 */
    uint64_t seeds_tried;
    bool cancelled; /* *cancel was set: seeds_tried is where it stopped */
};

/* S, K, G and the loader's iterator that put those private seeds at their
 * words of S's stream, S tried in the table's order, the first that fits
 * (a false fit is about 2^-46 a seed: rng_table.c).  Polls cancel (NULL:
 * none) between seeds.  0 (res->found says whether), -EINVAL. */
int cfs_rng_table_find(const struct cfs_rng_table_problem *p, const atomic_bool *cancel,
                       struct cfs_rng_table_result *res);

/* Any seed of a range, the first epoch's private seed among the stream's
 * first `words` words (rng_range.c: the bound on K, and a false claim
 * below 2^-29 over the 2^32 seeds at the default words and G_max = 2^24).
 * Seeds seed_first .. seed_first + seed_count - 1 (count 1..2^32, within
 * 2^32) on t's threads (clairfs/seed_search.h: threads, idle, pace,
 * progress), the first that fits in seed order, whatever the threads.
 * table: the private seeds, first_epoch and the bounds on K and G
 * (seeds, nseeds unused).  res as cfs_rng_table_find's; on a cancel,
 * seeds_tried says where to resume.  0, -EINVAL, -ENOMEM. */
#define CFS_RNG_RANGE_WORDS 624u
#define CFS_RNG_RANGE_WORDS_MAX 1248u
struct cfs_rng_range_problem {
    struct cfs_rng_table_problem table;
    uint32_t words; /* 4..CFS_RNG_RANGE_WORDS_MAX; 0: CFS_RNG_RANGE_WORDS */
    uint32_t seed_first;
    uint64_t seed_count;
};
int cfs_rng_range_find(const struct cfs_rng_range_problem *p, const atomic_bool *cancel,
                       const struct cfs_seed_threads *t, struct cfs_rng_table_result *res);

/* Word D_e of the formula above: where epoch e's private seed is drawn. */
uint64_t cfs_rng_epoch_draw(uint64_t offset, uint64_t epoch_words, bool persistent_workers,
                            uint64_t epoch);

#endif
