/* The vector kernels of the seed search, shared by the exact search
 * (seed_search.c) and the set search of order identification
 * (seed_set.c): 64 MT19937 generators seeded with consecutive seeds, run
 * side by side in GCC vector extensions (8 vectors of 8 lanes, an AVX2
 * clone where the CPU has it).  Internal to the cfs-seed-search library;
 * seed_search.c's top comment explains the recurrence they exploit. */
#ifndef CLAIRFS_SEED_KERNEL_H
#define CLAIRFS_SEED_KERNEL_H

#include <stdint.h>

enum {
    MT_M = 397,
    MT_DIRECT = 227, /* words r_k with k < 227 need no twisted word */
    MT_FILTER_MAX = 623, /* the first twist's words the filter can compute */
    LANES = 8,
    NV = 8,
    BLOCK = LANES * NV,
    CFS_WINDOW = 32, /* positions verified from the vector stage's draws */
};

#define RANDPERM_LARGE_N (UINT32_MAX / 20u)

typedef uint32_t v8u __attribute__((vector_size(32)));

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

#endif
