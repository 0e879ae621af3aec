/* The run's global seed from three epochs' private seeds, over the whole
 * range of 2^32 seeds, for a trainer that draws little before its loader.
 *
 * Why.  rng_table.c finds S when it is one of the seeds people use, with
 * K (the words drawn before the loader's first iterator) up to 2^25: it
 * walks each table seed's stream.  Any other S is one of 2^32, and a walk
 * of 2^25 words each is out of reach.  But a trainer that seeds and then
 * builds no model, or a small one on the GPU, draws its first epoch's
 * private seed within the first words of S's stream.  For those the
 * question is one compare a word over the first words of every stream:
 * the cost of seeding a generator and one twist, 2^32 times, which the
 * seed search's kernels already do 64 seeds abreast.
 *
 * The bound on K.  The first epoch's private seed (word D_e0 + 1 = K + 3
 * + e0 (L + G), rng_offset.h) must stand below `words`: CFS_RNG_RANGE_WORDS
 * (624, the first twist: K <= 620 when epoch 0 is the first of the three)
 * by default, at most two twists (1 248 words).  Beyond that the cost
 * grows a twist a block of 624 words while the init, the dearer part,
 * stays; the bound keeps the whole range at a few CPU minutes, seconds on
 * a node's idle cores.
 *
 * How.  For 128 seeds at a time the vector stage seeds 128 generators
 * (seed_kernel.h's recurrence, in 16 lanes where the CPU has AVX-512, else
 * 8), twists their states in place and compares
 * each word below the bound with the first private seed untempered (the
 * tempering is a bijection).  A lane that matched is a rare event (about
 * words / 2^32 a seed); its seed is walked as rng_table.c walks a table
 * seed (rng_seed_fits), over G's range for the second epoch's private
 * seed and at one word for the third's.
 *
 * The false-claim bound.  A seed is claimed only if three 32-bit words of
 * its stream equal the three private seeds at places the model allows: at
 * most `words` places for the first, 2 (G_max + 1) for the second (both
 * loader iterators), one for the third.  Over the 2^32 seeds a chance
 * claim has probability at most 2^32 x words / 2^32 x 2 (G_max + 1) / 2^32
 * x 2^-32 = words x (G_max + 1) x 2^-63: 2^-29.7 at words = 624 and
 * G_max = 2^24 (2^-28.7 at 1 248).  The per-epoch scans' own bound on each
 * private seed stands apart (identification.md).
 *
 * The same answer for any number of threads.  The range is scanned by
 * cfs_seed_scan_threads (seed_threads.c): chunks of seeds on search_threads
 * workers at idle priority, what they find handed over in seed order, the
 * first fit ending the search.  Cancel is polled every few blocks; a
 * caller resumes a cancelled or sliced search from seed_first +
 * seeds_tried. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/rng_offset.h"
#include "clairfs/seed_search.h"
#include "rng_i.h"
#include "seed_kernel.h"

enum { MT_N = 624, CANCEL_BLOCKS = 32, STEP = WIDE_BLOCK };

/* Words lo .. hi - 1 of the next block of the 64 states, twisted in place
 * (word k from k, k + 1 and k + 397 modulo 624, the later ones already
 * new), each compared with want; any[] gathers the lanes that matched. */
static inline void twist_compare(v8u (*s)[NV], uint32_t lo, uint32_t hi, v8u want, v8u any[NV])
{
    for (uint32_t k = lo; k < hi; k++) {
        uint32_t k1 = k + 1 < MT_N ? k + 1 : 0;
        uint32_t km = k + MT_M < MT_N ? k + MT_M : k + MT_M - MT_N;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            v8u y = s[km][v];
            twist_into(&y, &s[k][v], &s[k1][v]);
            s[k][v] = y;
            any[v] |= (v8u)(y == want);
        }
    }
}

/* The lanes (bit l: seed seed0 + l) whose stream's words 0 .. words - 1
 * hold want_raw (untempered) somewhere. */
SEED_KERNEL static uint64_t block_matches(uint32_t seed0, uint32_t want_raw, uint32_t words,
                                          v8u (*s)[NV])
{
    v8u x[NV], any[NV];
    seed_lanes(x, seed0);
    for (int v = 0; v < NV; v++) {
        s[0][v] = x[v];
        any[v] = (v8u){0};
    }
    for (uint32_t j = 1; j < MT_N; j++) {
        init_step(x, j);
        copy_lanes(s[j], x);
    }
    v8u want = (v8u){0} + want_raw;
    for (uint32_t done = 0; done < words; done += MT_N)
        twist_compare(s, 0, words - done < MT_N ? words - done : MT_N, want, any);
    uint64_t lanes = 0;
    for (int v = 0; v < NV; v++)
        for (int l = 0; l < LANES; l++)
            if (any[v][l])
                lanes |= 1ull << (v * LANES + l);
    return lanes;
}

#if SEED_WIDE
/* block_matches for 128 seeds in 16-lane vectors, where the CPU has
 * AVX-512 (seed_kernel.h: the recurrence's multiplications and the twist's
 * operations twice the lanes an instruction, about twice the seeds a
 * second).  lanes[h]: seeds seed0 + 64 h .. + 63. */
__attribute__((target("avx512f"))) static void block_matches_wide(uint32_t seed0, uint32_t want_raw,
                                                                  uint32_t words, v16u (*s)[NV],
                                                                  uint64_t lanes[2])
{
    const v16u iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    v16u x[NV], any[NV], want = (v16u){0} + want_raw;
    for (int v = 0; v < NV; v++) {
        x[v] = iota + (seed0 + (uint32_t)(v * WIDE_LANES));
        s[0][v] = x[v];
        any[v] = (v16u){0};
    }
    for (uint32_t j = 1; j < MT_N; j++) {
        wide_step(x, j);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            s[j][v] = x[v];
    }
    for (uint32_t done = 0; done < words; done += MT_N) {
        uint32_t hi = words - done < MT_N ? words - done : MT_N;
        for (uint32_t k = 0; k < hi; k++) {
            uint32_t k1 = k + 1 < MT_N ? k + 1 : 0;
            uint32_t km = k + MT_M < MT_N ? k + MT_M : k + MT_M - MT_N;
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) {
                v16u u = s[k][v], w = s[k1][v], y = s[km][v];
                y ^= (((u & 0x80000000u) | (w & 0x7fffffffu)) >> 1) ^ (-(w & 1u) & 0x9908b0dfu);
                s[k][v] = y;
                any[v] |= (v16u)(y == want);
            }
        }
    }
    lanes[0] = lanes[1] = 0;
    for (int v = 0; v < NV; v++)
        for (int l = 0; l < WIDE_LANES; l++)
            if (any[v][l])
                lanes[v / 4] |= 1ull << ((v % 4) * WIDE_LANES + l);
}
#endif

/* The lanes of seeds seed0 .. seed0 + 127 that matched (bit l of
 * lanes[h]: seed seed0 + 64 h + l), by the wide kernel where the CPU has
 * it; state: room for either kernel's states. */
static void step_matches(uint32_t seed0, uint32_t want_raw, uint32_t words, bool wide, void *state,
                         uint64_t lanes[2])
{
#if SEED_WIDE
    if (wide) {
        block_matches_wide(seed0, want_raw, words, state, lanes);
        return;
    }
#endif
    (void)wide;
    for (int h = 0; h < 2; h++)
        lanes[h] = block_matches(seed0 + (uint32_t)(h * BLOCK), want_raw, words, state);
}

struct range_scan {
    const struct cfs_rng_range_problem *p;
    uint32_t want_raw, words;
    bool wide;     /* the CPU runs block_matches_wide */
    uint64_t last; /* the first private seed's last word (rng_seed_fits) */
};

/* cfs_seed_scan's scan(): seeds first .. first + count - 1, in steps of
 * 128 whatever the kernel (so a stop counts the same seeds on any CPU);
 * found() gets each seed that fits (skip 0). */
static int scan_range(const void *problem, uint32_t first, uint64_t count,
                      const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                      uint64_t *searched)
{
    const struct range_scan *r = problem;
    *searched = 0;
    if (count == 0)
        return 0;
    /* 64-byte vectors of 16 lanes, or two kernels' 32-byte ones */
    void *s = aligned_alloc(64, (size_t)MT_N * NV * 64);
    if (!s)
        return -ENOMEM;
    for (uint64_t off = 0, steps = 0; off < count; off += STEP, steps++) {
        if (cancel && steps % CANCEL_BLOCKS == 0 && atomic_load(cancel))
            break;
        uint32_t seed0 = first + (uint32_t)off;
        uint64_t lanes[2];
        step_matches(seed0, r->want_raw, r->words, r->wide, s, lanes);
        uint64_t len = count - off < STEP ? count - off : STEP;
        *searched = off + len;
        for (uint64_t l = 0; l < len; l++) {
            struct cfs_rng_table_result fit = {0};
            if ((lanes[l / 64] >> (l % 64) & 1) &&
                rng_seed_fits(&r->p->table, seed0 + (uint32_t)l, r->last, &fit) &&
                found(arg, seed0 + (uint32_t)l, 0)) {
                free(s);
                return 0;
            }
        }
    }
    free(s);
    return 0;
}

struct first_fit {
    bool found;
    uint32_t seed;
};

static bool take_first(void *arg, uint32_t seed, uint32_t skip)
{
    (void)skip;
    struct first_fit *f = arg;
    f->found = true;
    f->seed = seed;
    return true;
}

static int check_problem(const struct cfs_rng_range_problem *p)
{
    const struct cfs_rng_table_problem *t = &p->table;
    uint32_t words = p->words ? p->words : CFS_RNG_RANGE_WORDS;
    if (!t->private_seeds || t->max_offset > (1ull << 40) || t->max_words > (1ull << 40) ||
        t->first_epoch > 1024 || words < 4 || words > CFS_RNG_RANGE_WORDS_MAX)
        return -EINVAL;
    if (p->seed_count == 0 || p->seed_count > (1ull << 32) - p->seed_first)
        return -EINVAL;
    return 0;
}

int cfs_rng_range_find(const struct cfs_rng_range_problem *p, const atomic_bool *cancel,
                       const struct cfs_seed_threads *t, struct cfs_rng_table_result *res)
{
    memset(res, 0, sizeof(*res));
    int rc = check_problem(p);
    if (rc < 0)
        return rc;
    struct range_scan r = {.p = p,
                           .want_raw = rng_untemper(p->table.private_seeds[0]),
                           .words = p->words ? p->words : CFS_RNG_RANGE_WORDS,
                           .wide = seed_wide_supported(),
                           .last = rng_first_word_last(&p->table)};
    if (r.last > r.words - 1)
        r.last = r.words - 1;
    struct cfs_seed_scan scan = {.scan = scan_range, .problem = &r, .block = STEP};
    struct first_fit f = {0};
    uint64_t searched = 0;
    rc = cfs_seed_scan_threads(&scan, p->seed_first, p->seed_count, cancel, take_first, &f,
                               &searched, t);
    if (rc < 0)
        return rc;
    res->seeds_tried = searched;
    if (f.found) {
        /* the fit again, on this thread, for K, G and the iterator */
        (void)rng_seed_fits(&p->table, f.seed, r.last, res);
        res->seeds_tried = searched;
    } else if (cancel && atomic_load(cancel) && searched < p->seed_count) {
        res->cancelled = true;
    }
    return 0;
}
