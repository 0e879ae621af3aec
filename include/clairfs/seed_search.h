/* Seed recovery: which generator seeds make torch's randperm put the
 * observed dataset indices where a trainer read them.
 *
 * clairfs predicts a trainer's shuffle (clairfs/sampler.h) only when it
 * knows the seed. The order in which a trainer opens its first files is a
 * handful of entries of the epoch's permutation: "position p of randperm(n)
 * holds index v". This module finds every 32-bit MT19937 seed (the
 * generator keeps only the low 32 bits of the 64-bit seed it is given, so
 * 2^32 candidates are all there are) whose randperm agrees with all of
 * them, by exhaustive search over a range of seeds.
 *
 * What the answer means: a seed here is the generator's seed modulo 2^32.
 * For torch-ddp the generator of epoch e is seeded S + e, so a search over
 * epoch e's order yields (S + e) mod 2^32; cfs_seed_reconstruct() turns it
 * back into S when the caller knows S's high 32 bits, and says so when it
 * does not.
 *
 * Cost (see src/seed_search.c for why): for the forward Fisher-Yates
 * (every n below 214748364, and any n with CFS_RANDPERM_LEGACY) a candidate
 * costs one tempered MT word for the cheapest constraint; the full 2^32
 * range takes about two minutes on one core. That needs one constraint
 * with value >= pos and pos + skip_words < 623 (a RandomSampler's first
 * open, any DistributedSampler rank below ~600); without one, every seed
 * is replayed on its own (microseconds each: hours for the range). For torch >= 2.6's inside-out shuffle
 * (n >= 214748364) the value at a small position is decided by a late draw
 * (word 2v for an observed index v); a candidate costs about 3 us through
 * precomputed jump tables (built in ~1.5 s when the range is long enough
 * to pay for them), so the full range takes hours on one core: search
 * sub-ranges first (small seeds, a known seed's neighbourhood).
 *
 * The search runs in one background thread at idle priority (SCHED_IDLE,
 * else nice 19) so the trainer keeps its CPUs, or synchronously. */
#ifndef CLAIRFS_SEED_SEARCH_H
#define CLAIRFS_SEED_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/sampler.h"

/* "randperm(n)[pos] == value" as torch returned it, before any padding. */
struct cfs_seed_constraint {
    uint32_t pos;
    uint32_t value;
};

struct cfs_seed_problem {
    uint64_t n; /* dataset length, 1..2^32-1 */
    enum cfs_randperm_algo algo;
    /* 32-bit words the generator drew before the randperm: 0 for torch-ddp
     * (fresh generator each epoch), 2 for epoch 0 of the torch model (the
     * loader's _base_seed); at most CFS_SEED_MAX_SKIP. */
    uint32_t skip_words;
    const struct cfs_seed_constraint *c;
    size_t nc;
};

#define CFS_SEED_MAX_SKIP 64u
#define CFS_SEED_MAX_CANDIDATES 8u

enum cfs_seed_verdict {
    CFS_SEED_NONE = 0,         /* no seed in the range agrees */
    CFS_SEED_UNIQUE,           /* exactly one seed in the range agrees */
    CFS_SEED_AMBIGUOUS,        /* several agree (matches says how many) */
    CFS_SEED_UNIDENTIFIABLE,   /* every seed agrees: n = 1 or no constraint */
};

struct cfs_seed_result {
    enum cfs_seed_verdict verdict;
    uint64_t searched;   /* seeds examined (less than asked if cancelled) */
    uint64_t matches;    /* seeds in the examined range that agree */
    bool cancelled;
    /* The first matches (at most CFS_SEED_MAX_CANDIDATES), ascending from
     * the range's start: generator seeds modulo 2^32. */
    uint32_t n_low32;
    uint32_t low32[CFS_SEED_MAX_CANDIDATES];
};

/* Search seeds first, first+1, ..., first+count-1 (mod 2^32; count <=
 * 2^32). Returns 0 or -EINVAL (n out of range, a constraint outside
 * 0..n-1, skip_words too large). Contradictory constraints (one position,
 * two values; one value, two positions) are answered CFS_SEED_NONE. */
int cfs_seed_search(const struct cfs_seed_problem *p, uint32_t first, uint64_t count,
                    struct cfs_seed_result *res);

/* The same in a background thread. The problem is copied. */
struct cfs_seed_search;
int cfs_seed_search_start(const struct cfs_seed_problem *p, uint32_t first, uint64_t count,
                          struct cfs_seed_search **out);
/* Fraction of the range examined, 0..1. */
double cfs_seed_search_progress(const struct cfs_seed_search *s);
bool cfs_seed_search_done(const struct cfs_seed_search *s);
/* How the thread yields to the trainer: "idle" (SCHED_IDLE), "nice 19"
 * where SCHED_IDLE was refused, "normal" where both were, or "not
 * started" (before the thread ran, or when no search was needed). */
const char *cfs_seed_search_priority(const struct cfs_seed_search *s);
/* Ask the thread to stop; the result then covers what was examined. */
void cfs_seed_search_cancel(struct cfs_seed_search *s);
/* Wait for the thread, fill res, free everything. Returns the search's
 * return code. */
int cfs_seed_search_finish(struct cfs_seed_search *s, struct cfs_seed_result *res);

/* A DistributedSampler rank's first opened indices as randperm constraints:
 * rank `rank` of `world` reads padded positions rank, rank + world, ...;
 * the padding repeats the permutation's head (cyclically when world > n),
 * so padded position j is randperm position j % n; with drop_last the list
 * is cut instead. Writes `count` constraints and returns count, or -EINVAL
 * (more indices than the rank reads in an epoch, an index >= n) or -E2BIG
 * (max too small). */
int cfs_seed_constraints_ddp(uint64_t n, uint32_t world, uint32_t rank, bool drop_last,
                             const uint32_t *indices, size_t count,
                             struct cfs_seed_constraint *out, size_t max);

/* A 64-bit seed from a recovered low32 (the generator seed modulo 2^32 of
 * epoch `epoch`, i.e. (S + epoch) mod 2^32 for torch-ddp, pass epoch 0 for
 * a generator seeded once): with high_known, *seed = S exactly (S's high 32
 * bits are `high`) and the return is 0; without, *seed gets the smallest S
 * consistent with low32 (high bits 0) and the return is -ENODATA: only
 * the low 32 bits are known. */
int cfs_seed_reconstruct(uint32_t low32, uint64_t epoch, bool high_known, uint32_t high,
                         uint64_t *seed);

/* torch >= 2.6's inside-out randperm(n) (n >= 214748364), final values at
 * `npos` positions, without the n-entry array: O(n) time (2n words),
 * O(max position) memory. For tests and verification. Returns 0,
 * -EINVAL or -ENOMEM. */
int cfs_seed_inside_out_at(uint32_t seed, uint32_t skip_words, uint64_t n,
                           const uint32_t *pos, size_t npos, uint32_t *values);

/* The set search of order identification (clairfs/identify.h): which
 * seeds put, at randperm(n) positions pos and pos + 1, values of two given
 * sets.  An identifier does not know which of the processes it saw opening
 * files reads the stream's head, nor the world size, but the head's first
 * two entries are among the first (and second) opens of some reader; one
 * pass over the seeds tests that for every reader at once.  The filter is
 * one tempered word per seed for pos 0 (a replay of pos + 2 draws else),
 * then a bit test; the caller verifies each seed found (about 2^32 |first|
 * |second| / n^2 of them). */
/* The draws the set filter may reach (pos + 1 + the larger of 1 and
 * alt_gap + the largest skip): at pos 0, where the test of randperm[0]
 * leaves few seeds to replay, CFS_SEED_SET_HEAD_WORDS (the words of
 * MT19937's first state that need no twisted word); elsewhere the vector
 * stage's CFS_SEED_SET_WORDS. */
#define CFS_SEED_SET_WORDS 32u
#define CFS_SEED_SET_HEAD_WORDS 227u

struct cfs_seed_set_problem {
    uint64_t n; /* 2..2^32-1 */
    enum cfs_randperm_algo algo;
    uint32_t pos;             /* pos + 2 + every skip <= CFS_SEED_SET_WORDS */
    const uint32_t *skips;    /* skip_words tried for every seed (1..4 of them) */
    size_t nskips;
    const uint64_t *first;    /* bitset over 0..n-1: allowed randperm[pos] */
    const uint64_t *second;   /* allowed randperm[pos + 1] */
    /* 0, or a stride g >= 2 whose randperm[pos + g] in second also passes
     * (pos + g + 1 + every skip within the words above): on a distributed mount of one
     * trainer rank a node, the head node's readers hold randperm[pos] and
     * randperm[pos + world] but not randperm[pos + 1]. */
    uint32_t alt_gap;
};

/* A seed (modulo 2^32) and the skip it matched with; true stops the search. */
typedef bool (*cfs_seed_set_found)(void *arg, uint32_t seed, uint32_t skip_words);

/* Seeds first .. first + count - 1 (count <= 2^32), in order; stops early
 * when found() says so or *cancel becomes true (cancel may be NULL).
 * *searched gets the seeds examined.  Returns 0 or -EINVAL.  For torch >=
 * 2.6's inside-out shuffle (n >= 214748364) every seed costs a replay of 2n
 * words: small ranges only. */
int cfs_seed_search_set(const struct cfs_seed_set_problem *p, uint32_t first, uint64_t count,
                        const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                        uint64_t *searched);

/* The set search over several threads (src/seed_threads.c): the range in
 * chunks that worker threads take in turn, what they find handed to
 * found() on the calling thread in seed order, so found() sees the same
 * seeds, skips and order, and *searched is the same, for any number of
 * threads.  The workers live for one call. */
struct cfs_seed_workers;
struct cfs_seed_threads {
    unsigned threads; /* 0: cfs_seed_usable_cpus(); 1: on the calling thread */
    bool idle;        /* the workers start at idle priority (else the normal) */
    /* On the calling thread: before the first seed, about every `every`
     * seeds a thread (0: only then), and once the workers stopped.  w is
     * NULL on one thread (the calling thread scans): its CPU clock is the
     * scan's.  May read the workers' CPU time and set their priority. */
    uint64_t every;
    void (*pace)(void *arg, struct cfs_seed_workers *w);
    void *pace_arg;
    _Atomic uint64_t *progress; /* seeds examined, added as they pass; may be NULL */
};

int cfs_seed_search_set_threads(const struct cfs_seed_set_problem *p, uint32_t first,
                                uint64_t count, const _Atomic bool *cancel,
                                cfs_seed_set_found found, void *arg, uint64_t *searched,
                                const struct cfs_seed_threads *t);
/* Any scan of a seed range on the same threads: scan() examines seeds
 * first .. first + count - 1 in order as cfs_seed_search_set does (found()
 * on every seed that passes, stopping when it says so or *cancel is set;
 * *searched the seeds examined, up to the end of a stopping seed's block
 * of `block` seeds), chunk seeds at a time (0: 2^16); what the chunks find
 * reaches found() in seed order on the calling thread, for any number of
 * threads.  rng_range.c's search of the global seeds uses it. */
struct cfs_seed_scan {
    int (*scan)(const void *problem, uint32_t first, uint64_t count, const _Atomic bool *cancel,
                cfs_seed_set_found found, void *arg, uint64_t *searched);
    const void *problem;
    uint64_t chunk, block;
};
int cfs_seed_scan_threads(const struct cfs_seed_scan *scan, uint32_t first, uint64_t count,
                          const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                          uint64_t *searched, const struct cfs_seed_threads *t);
/* All of the workers to idle priority (SCHED_IDLE, else nice 19) or back to
 * the normal one, together; 0 or the first -errno (w NULL: nothing). */
int cfs_seed_workers_priority(struct cfs_seed_workers *w, bool idle);
/* The workers' CPU seconds since the last call (0 for NULL). */
double cfs_seed_workers_cpu_take(struct cfs_seed_workers *w);
/* The CPUs this process may use: its affinity mask, bounded by its
 * cgroup's cpu.max quota (rounded up) where one is set; at least 1. */
unsigned cfs_seed_usable_cpus(void);

const char *cfs_seed_verdict_name(enum cfs_seed_verdict v);

#endif
