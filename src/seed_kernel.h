/* The vector kernels of the seed search, shared by the exact search
 * (seed_search.c) and the set search of order identification
 * (seed_set.c): 64 MT19937 generators seeded with consecutive seeds, run
 * side by side in GCC vector extensions (8 vectors of 8 lanes, an AVX2
 * clone where the CPU has it).  Internal to the cfs-seed-search library;
 * seed_search.c's top comment explains the recurrence they exploit. */
#ifndef CLAIRFS_SEED_KERNEL_H
#define CLAIRFS_SEED_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

enum {
    MT_M = 397,
    MT_DIRECT = 227,     /* words r_k with k < 227 need no twisted word */
    MT_FILTER_MAX = 623, /* the first twist's words the filter can compute */
    LANES = 8,
    NV = 8,
    BLOCK = LANES * NV,
    CFS_WINDOW = 32, /* positions verified from the vector stage's draws */
    /* draws the set filter replays at position 0 (seed_set.c): past
     * CFS_WINDOW, computed one seed at a time (seed_words) */
    CFS_SET_WORDS = MT_DIRECT,
};

#define RANDPERM_LARGE_N (UINT32_MAX / 20u)

typedef uint32_t v8u __attribute__((vector_size(32)));

/* GCC only: clang 14 gives a static function's clones a global resolver,
 * defined again in every file that includes this header. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEED_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define SEED_KERNEL
#endif

/* --- Vector kernels: 64 generators seeded seed0 .. seed0 + 63. ------------ */

static inline void seed_lanes(v8u x[NV], uint32_t seed0)
{
    const v8u iota = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int v = 0; v < NV; v++)
        x[v] = iota + (seed0 + (uint32_t)(v * LANES));
}

/* Unrolled so the eight vectors stay in registers (x86-64 has 16). */
static inline void init_step(v8u x[NV], uint32_t j)
{
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
        x[v] = 1812433253u * (x[v] ^ (x[v] >> 30)) + j;
}

/* Element-wise, not memcpy: x must not need an address, or it leaves the
 * registers for the whole recurrence. */
static inline void copy_lanes(v8u dst[NV], const v8u src[NV])
{
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
        dst[v] = src[v];
}

/* By pointer: a vector passed by value would change the ABI between the
 * AVX2 clone and the default one. */
static inline void twist_into(v8u *acc, const v8u *u, const v8u *w)
{
    *acc ^= (((*u & 0x80000000u) | (*w & 0x7fffffffu)) >> 1) ^ (-(*w & 1u) & 0x9908b0dfu);
}

static inline void temper_lanes(v8u *y)
{
    *y ^= *y >> 11;
    *y ^= (*y << 7) & 0x9d2c5680u;
    *y ^= (*y << 15) & 0xefc60000u;
    *y ^= *y >> 18;
}

static inline void twist_temper(v8u *out, const v8u *hi, const v8u *u, const v8u *w)
{
    v8u y = *hi;
    twist_into(&y, u, w);
    temper_lanes(&y);
    *out = y;
}

/* Tempered words w0 .. w0 + nw - 1 (w0 + nw <= MT_DIRECT, nw <= CFS_WINDOW). */
SEED_KERNEL static void block_outputs(uint32_t seed0, uint32_t w0, uint32_t nw,
                                      v8u out[CFS_WINDOW][NV])
{
    v8u x[NV], lo[CFS_WINDOW + 1][NV], hi[CFS_WINDOW][NV];
    seed_lanes(x, seed0);
    uint32_t j = 0;
    for (; j < w0; j++)
        init_step(x, j + 1);
    for (; j <= w0 + nw; j++) {
        copy_lanes(lo[j - w0], x);
        init_step(x, j + 1);
    }
    for (; j < w0 + MT_M; j++)
        init_step(x, j + 1);
    for (; j < w0 + MT_M + nw; j++) {
        copy_lanes(hi[j - w0 - MT_M], x);
        init_step(x, j + 1);
    }
    for (uint32_t k = 0; k < nw; k++)
        for (int v = 0; v < NV; v++)
            twist_temper(&out[k][v], &hi[k][v], &lo[k][v], &lo[k + 1][v]);
}

/* --- The wide kernel: 128 generators in 16-lane vectors (AVX-512). --------
 * Where the CPU has AVX-512 the seeding recurrence, a chain of dependent
 * multiplications, keeps twice the lanes in flight: about 2x the seeds a
 * second of the 8-lane kernel on this machine (10.6 against 20.9 ns a seed
 * for the first four words).  The set search of identification uses it;
 * block_outputs_lanes() picks it at run time. */
enum { WIDE_LANES = 16, WIDE_BLOCK = WIDE_LANES * NV };

#if defined(__x86_64__) && defined(__GNUC__)
#define SEED_WIDE 1
typedef uint32_t v16u __attribute__((vector_size(64)));

static inline void wide_step(v16u x[NV], uint32_t j)
{
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
        x[v] = 1812433253u * (x[v] ^ (x[v] >> 30)) + j;
}

/* Tempered words 0 .. nw - 1 (nw < CFS_WINDOW) of seeds seed0 .. seed0 +
 * 127, lane-major: out[k][l] is word k of seed seed0 + l. */
__attribute__((target("avx512f"))) static void block_outputs_wide(uint32_t seed0, uint32_t nw,
                                                                 uint32_t out[][WIDE_BLOCK])
{
    v16u x[NV], lo[CFS_WINDOW + 1][NV], hi[CFS_WINDOW][NV];
    const v16u iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    for (int v = 0; v < NV; v++)
        x[v] = iota + (seed0 + (uint32_t)(v * WIDE_LANES));
    uint32_t j = 0;
    for (; j <= nw; j++) {
        for (int v = 0; v < NV; v++)
            lo[j][v] = x[v];
        wide_step(x, j + 1);
    }
    for (; j < MT_M; j++)
        wide_step(x, j + 1);
    for (; j < MT_M + nw; j++) {
        for (int v = 0; v < NV; v++)
            hi[j - MT_M][v] = x[v];
        wide_step(x, j + 1);
    }
    for (uint32_t k = 0; k < nw; k++)
        for (int v = 0; v < NV; v++) {
            v16u u = lo[k][v], w = lo[k + 1][v], y = hi[k][v];
            y ^= (((u & 0x80000000u) | (w & 0x7fffffffu)) >> 1) ^ (-(w & 1u) & 0x9908b0dfu);
            y ^= y >> 11;
            y ^= (y << 7) & 0x9d2c5680u;
            y ^= (y << 15) & 0xefc60000u;
            y ^= y >> 18;
            __builtin_memcpy(&out[k][v * WIDE_LANES], &y, sizeof(y));
        }
}
#else
#define SEED_WIDE 0
#endif

/* Words 0 .. nw - 1 of seeds seed0 .. seed0 + WIDE_BLOCK - 1 into out
 * (lane-major), by the wide kernel where the CPU has it (wide: its
 * answer to __builtin_cpu_supports, asked once by the caller). */
static inline void block_outputs_lanes(uint32_t seed0, uint32_t nw, bool wide,
                                       uint32_t out[][WIDE_BLOCK])
{
#if SEED_WIDE
    if (wide) {
        block_outputs_wide(seed0, nw, out);
        return;
    }
#endif
    (void)wide;
    v8u part[CFS_WINDOW][NV];
    for (uint32_t half = 0; half < WIDE_BLOCK / BLOCK; half++) {
        block_outputs(seed0 + half * BLOCK, 0, nw, part);
        for (uint32_t k = 0; k < nw; k++)
            for (uint32_t l = 0; l < BLOCK; l++)
                out[k][half * BLOCK + l] = part[k][l / LANES][l % LANES];
    }
}

/* Does this CPU run the wide kernel? */
static inline bool seed_wide_supported(void)
{
#if SEED_WIDE
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

/* Tempered words 0 .. nw - 1 (nw <= MT_DIRECT) of one seed: the vector
 * kernels' recurrence, scalar, for the few seeds that pass a first test
 * and need words past the vector stage's. */
static inline void seed_words(uint32_t seed, uint32_t nw, uint32_t *out)
{
    uint32_t lo[CFS_SET_WORDS + 1], hi[CFS_SET_WORDS], x = seed;
    for (uint32_t j = 0; j < MT_M + nw; j++) {
        if (j <= nw)
            lo[j] = x;
        if (j >= MT_M)
            hi[j - MT_M] = x;
        x = 1812433253u * (x ^ (x >> 30)) + j + 1;
    }
    for (uint32_t k = 0; k < nw; k++) {
        uint32_t u = lo[k], w = lo[k + 1], y = hi[k];
        y ^= (((u & 0x80000000u) | (w & 0x7fffffffu)) >> 1) ^ (-(w & 1u) & 0x9908b0dfu);
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c5680u;
        y ^= (y << 15) & 0xefc60000u;
        y ^= y >> 18;
        out[k] = y;
    }
}

/* --- The first steps of the forward Fisher-Yates, sparsely. --------------- */

/* The positions the first `steps` swaps touched and the values they hold:
 * at most two new positions a step, few steps, so a linear list. */
struct window_swaps {
    uint32_t key[2 * CFS_SET_WORDS], val[2 * CFS_SET_WORDS];
    unsigned nk;
};

/* Replay swaps 0 .. steps - 1 (steps <= CFS_SET_WORDS) of randperm(n) from
 * the draws r[0 ..]. */
static inline void window_shuffle(const uint32_t *r, uint64_t n, uint32_t steps,
                                  struct window_swaps *w)
{
    w->nk = 0;
    for (uint32_t k = 0; k < steps; k++) {
        uint32_t b = k + r[k] % (uint32_t)(n - k);
        int ia = -1, ib = -1;
        for (unsigned i = 0; i < w->nk; i++) {
            if (w->key[i] == k)
                ia = (int)i;
            if (w->key[i] == b)
                ib = (int)i;
        }
        if (ia < 0)
            w->key[w->nk] = k, w->val[w->nk] = k, ia = (int)w->nk++;
        if (ib < 0)
            w->key[w->nk] = b, w->val[w->nk] = b, ib = (int)w->nk++;
        uint32_t t = w->val[ia];
        w->val[ia] = w->val[ib];
        w->val[ib] = t;
    }
}

/* The value at position pos after the replayed swaps. */
static inline uint32_t window_value(const struct window_swaps *w, uint32_t pos)
{
    for (unsigned j = 0; j < w->nk; j++)
        if (w->key[j] == pos)
            return w->val[j];
    return pos;
}

#endif
