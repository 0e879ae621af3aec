/* MT19937 and randperm exactly as PyTorch's CPU generator runs them.
 *
 * Seeding (at::mt19937_engine::init_with_uint32, ATen/core/MT19937RNGEngine.h,
 * unchanged from torch 1.13 to current main): the generator takes a uint64_t
 * seed but only its low 32 bits enter the state, so manual_seed(2^32 + 5)
 * draws exactly what manual_seed(5) draws (checked live on torch 1.13).
 * Python's Generator.manual_seed() takes ints in [-2^63, 2^64); negative ones
 * wrap to uint64 and 2^64 or more raises "Overflow when unpacking long".
 *
 * random() is one tempered 32-bit word; random64() is two, the first one in
 * the high half (CPUGeneratorImpl::random64, detail::make64BitsFrom32Bits).
 *
 * randperm_cpu (aten/src/ATen/native/TensorFactories.cpp):
 *  - n < UINT32_MAX / 20 (= 214748364): identity, then for i = 0..n-2 swap
 *    element i with i + random() % (n - i): n - 1 words. Same code in torch
 *    1.13 and current main; checked live on torch 1.13 by the golden vectors
 *    and the oracle test.
 *  - n >= 214748364, torch >= 2.6 only (PR 143682, merged December 2024,
 *    relanded as 143875 and picked into the 2.6 release as 144735, to avoid
 *    the modulo bias of a 32-bit draw): the "inside-out" Fisher-Yates, for
 *    i = 0..n-1: z = random64() % (i + 1); r[i] = r[z]; r[z] = i: 2n words.
 *    Implemented from the current main source; NOT checked live (no torch
 *    >= 2.6 here).
 *  - torch <= 2.5 runs the first algorithm for every n. Checked live once
 *    (not in the suite: ~1 GB and 20 s in torch) with Debian's torch
 *    1.13.0a0, seed 3: randperm(214748363) and randperm(214748364, int32)
 *    equal CFS_RANDPERM_LEGACY exactly (a position-weighted checksum of the
 *    whole permutation), and n = 214748364 differs from CFS_RANDPERM_CURRENT
 *    from its first element on - so 1.13 has no large-n branch. */
#include <stdint.h>

#include "clairfs/sampler.h"

enum { MT_N = 624, MT_M = 397 };

#define RANDPERM_LARGE_N (UINT32_MAX / 20u)
#define SWAP_AHEAD 32u /* a power of two: the ring index is a mask */

/* The generator's core - seeding, the twist, one word - runs billions of
 * times in the suite (a replay of torch >= 2.6's shuffle draws 2n words at
 * n > 2^27) and is left out of the sanitizers' and the fuzzers'
 * instrumentation, which made it ten times slower there (most of the
 * sanitizer stage's time): its loops touch only the state's own 624 words
 * with constant bounds and have no branch worth a fuzzer's coverage.  The
 * callers stay instrumented. */
#if defined(__clang__)
#define MT_CORE __attribute__((no_sanitize("address", "undefined", "coverage")))
#elif defined(__GNUC__)
#define MT_CORE __attribute__((no_sanitize("address", "undefined")))
#else
#define MT_CORE
#endif

MT_CORE void cfs_mt19937_seed(struct cfs_mt19937 *mt, uint64_t seed)
{
    mt->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (uint32_t j = 1; j < MT_N; j++)
        mt->state[j] = 1812433253u * (mt->state[j - 1] ^ (mt->state[j - 1] >> 30)) + j;
    mt->next = MT_N; /* torch's left_ = 1: the first draw twists first */
}

MT_CORE static inline uint32_t twist(uint32_t u, uint32_t v)
{
    return (((u & 0x80000000u) | (v & 0x7fffffffu)) >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

MT_CORE void cfs_mt19937_twist_state(uint32_t s[MT_N])
{
    int j;
    for (j = 0; j < MT_N - MT_M; j++)
        s[j] = s[j + MT_M] ^ twist(s[j], s[j + 1]);
    for (; j < MT_N - 1; j++)
        s[j] = s[j + MT_M - MT_N] ^ twist(s[j], s[j + 1]);
    s[MT_N - 1] = s[MT_M - 1] ^ twist(s[MT_N - 1], s[0]);
}

MT_CORE uint32_t cfs_mt19937_temper(uint32_t y)
{
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

MT_CORE static void next_state(struct cfs_mt19937 *mt)
{
    cfs_mt19937_twist_state(mt->state);
    mt->next = 0;
}

MT_CORE uint32_t cfs_mt19937_next32(struct cfs_mt19937 *mt)
{
    if (mt->next >= MT_N)
        next_state(mt);
    return cfs_mt19937_temper(mt->state[mt->next++]);
}

uint64_t cfs_mt19937_next64(struct cfs_mt19937 *mt)
{
    uint64_t hi = cfs_mt19937_next32(mt);
    uint64_t lo = cfs_mt19937_next32(mt);
    return (hi << 32) | lo;
}

void cfs_mt19937_discard(struct cfs_mt19937 *mt, uint64_t words)
{
    /* Skipping needs the twists but not the tempering. */
    while (words > 0) {
        if (mt->next >= MT_N)
            next_state(mt);
        uint64_t avail = (uint64_t)(MT_N - mt->next);
        uint64_t take = words < avail ? words : avail;
        mt->next += (int)take;
        words -= take;
    }
}

uint64_t cfs_torch_randperm_words(uint64_t n, enum cfs_randperm_algo algo)
{
    if (n < RANDPERM_LARGE_N || algo == CFS_RANDPERM_LEGACY)
        return n > 0 ? n - 1 : 0;
    return 2 * n;
}

void cfs_torch_randperm(struct cfs_mt19937 *mt, uint32_t *perm, uint32_t n,
                        enum cfs_randperm_algo algo)
{
    if (n < RANDPERM_LARGE_N || algo == CFS_RANDPERM_LEGACY) {
        for (uint32_t i = 0; i < n; i++)
            perm[i] = i;
        /* Swap i with target[i] = i + next32 % (n - i).  The targets do not
         * depend on the array, so they are drawn SWAP_AHEAD swaps early and
         * their cache lines prefetched: on a permutation larger than the
         * cache each swap is a miss, and overlapping them nearly halves the
         * time (ImageNet-22k: 14.2 M entries an epoch).  Same draws, same
         * order, same permutation. */
        uint32_t target[SWAP_AHEAD];
        uint32_t swaps = n > 0 ? n - 1 : 0;
        for (uint32_t k = 0; k < swaps && k < SWAP_AHEAD; k++) {
            target[k] = cfs_mt19937_next32(mt) % (n - k) + k;
            __builtin_prefetch(&perm[target[k]], 1);
        }
        for (uint32_t i = 0; i < swaps; i++) {
            uint32_t z = target[i % SWAP_AHEAD];
            uint32_t k = i + SWAP_AHEAD;
            if (k < swaps) {
                target[k % SWAP_AHEAD] = cfs_mt19937_next32(mt) % (n - k) + k;
                __builtin_prefetch(&perm[target[k % SWAP_AHEAD]], 1);
            }
            uint32_t save = perm[i];
            perm[i] = perm[z];
            perm[z] = save;
        }
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t z = cfs_mt19937_next64(mt) % (i + 1);
        perm[i] = (uint32_t)i; /* z == i reads it back */
        perm[i] = perm[z];
        perm[z] = (uint32_t)i;
    }
}
