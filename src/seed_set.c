/* The set search (clairfs/seed_search.h, cfs_seed_search_set): seeds whose
 * randperm(n) holds, at positions pos and pos + 1, members of two sets.
 *
 * The exact search (seed_search.c) filters on "z_p = v - p", one known
 * value.  Here the value is one of many, so the filter computes the value
 * itself: the first draws of 64 seeds at once (the shared vector kernel,
 * words 0 .. pos + 1 + the largest skip), then per seed a replay of the
 * pos + 2 swaps that decide positions pos and pos + 1 (for pos 0 the first
 * value is just z_0, and most seeds stop at its bit test; alt_gap g adds
 * position pos + g, g - 1 more words and swaps).  Past the vector stage's
 * CFS_WINDOW words (alt_gap 30 and up at pos 0: more than 29 nodes of one
 * rank) the seeds whose z_0 passes, about |first| / n of them, get their
 * words one seed at a time (seed_words), and the vector stage computes
 * only the words of positions pos and pos + 1: at ImageNet's n that costs
 * what no second stride does (bench-seed-search --gap).  The cost is the
 * seeding recurrence, as for the exact filter, plus one division for most
 * seeds: the full range in a few minutes on one core.
 *
 * torch >= 2.6's inside-out shuffle decides the value at a small position
 * by a late draw (seed_search.c explains); there every seed is replayed
 * (cfs_seed_inside_out_at), which only small ranges can afford. */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "clairfs/seed_search.h"
#include "seed_kernel.h"

_Static_assert(CFS_SEED_SET_WORDS == CFS_WINDOW && CFS_SEED_SET_HEAD_WORDS == CFS_SET_WORDS,
               "seed_search.h's words are the kernel's");

static inline bool in_set(const uint64_t *set, uint32_t v)
{
    return (set[v >> 6] >> (v & 63)) & 1;
}

/* The largest offset from pos that the filter reads. */
static uint32_t reach(const struct cfs_seed_set_problem *p)
{
    return p->alt_gap > 1 ? p->alt_gap : 1;
}

/* Values at positions pos, pos + 1 and pos + alt_gap (where asked) after
 * the forward Fisher-Yates of draws r[0 ..]: positions up to pos + g are
 * final after step pos + g (the last step is n - 2). */
static void window_values(const struct cfs_seed_set_problem *p, const uint32_t *r, uint32_t out[3])
{
    struct window_swaps w;
    uint64_t steps = (uint64_t)p->pos + reach(p) + 1;
    window_shuffle(r, p->n, steps < p->n - 1 ? (uint32_t)steps : (uint32_t)(p->n - 1), &w);
    out[0] = window_value(&w, p->pos);
    out[1] = window_value(&w, p->pos + 1);
    out[2] = p->alt_gap > 1 && p->pos + p->alt_gap < p->n ? window_value(&w, p->pos + p->alt_gap)
                                                          : out[1];
}

static bool values_match(const struct cfs_seed_set_problem *p, const uint32_t v[3])
{
    if (!in_set(p->first, v[0]))
        return false;
    if (p->pos + 1 >= p->n || in_set(p->second, v[1]))
        return true;
    return p->alt_gap > 1 && p->pos + p->alt_gap < p->n && in_set(p->second, v[2]);
}

/* r % n by a multiplication (Lemire, "Faster remainder by direct
 * computation", 2019), m = 2^64 / n rounded up: the division would cost
 * as much as the seeding it follows. */
static inline uint32_t fast_mod(uint32_t r, uint64_t m, uint32_t n)
{
    return (uint32_t)(((unsigned __int128)(m * r) * n) >> 64);
}

#if SEED_WIDE
#include <immintrin.h>

/* r mod n of 8 lanes in doubles: q = floor(r / n) from r * (1 / n) may be
 * one off where r / n is within 2^-52 of an integer, and r - q n, an
 * integer below 2^33, is exact in a fused multiply-add; one correction
 * either way makes it the remainder. */
__attribute__((target("avx512f"))) static inline __m256i mod_8(__m256i r, __m512d nd, __m512d inv)
{
    __m512d x = _mm512_cvtepu32_pd(r);
    __m512d q = _mm512_roundscale_pd(_mm512_mul_pd(x, inv), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512d rem = _mm512_fnmadd_pd(q, nd, x);
    rem = _mm512_mask_add_pd(rem, _mm512_cmp_pd_mask(rem, _mm512_setzero_pd(), _CMP_LT_OQ), rem,
                             nd);
    rem = _mm512_mask_sub_pd(rem, _mm512_cmp_pd_mask(rem, nd, _CMP_GE_OQ), rem, nd);
    return _mm512_cvttpd_epu32(rem);
}

/* Bit l of the result: lane l's word mod n is in set (16 lanes). */
__attribute__((target("avx512f"))) static inline uint32_t in_set_16(const uint32_t *words,
                                                                   const uint64_t *set,
                                                                   __m512d nd, __m512d inv)
{
    __m512i w = _mm512_loadu_si512((const void *)words);
    __m256i lo = mod_8(_mm512_castsi512_si256(w), nd, inv);
    __m256i hi = mod_8(_mm512_extracti64x4_epi64(w, 1), nd, inv);
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    /* the set's 64-bit words as 32-bit ones (little-endian): v / 32 < n / 32 + 1 */
    __m512i got = _mm512_i32gather_epi32(_mm512_srli_epi32(v, 5), (const void *)set, 4);
    __m512i bit = _mm512_srlv_epi32(got, _mm512_and_si512(v, _mm512_set1_epi32(31)));
    return _mm512_test_epi32_mask(bit, _mm512_set1_epi32(1));
}

/* Position 0's test (randperm[0] = z_skip mod n in the first set) for the
 * 128 lanes of a wide block at once, per skip: lanes[i] bit l for skip
 * skips[i].  The scalar test costs as much as the seeding's third; few
 * lanes pass. */
__attribute__((target("avx512f"))) static void first_filter_wide(
    const struct cfs_seed_set_problem *p, const uint32_t out[][WIDE_BLOCK], uint64_t lanes[][2])
{
    __m512d nd = _mm512_set1_pd((double)p->n), inv = _mm512_set1_pd(1.0 / (double)p->n);
    for (size_t i = 0; i < p->nskips; i++)
        for (int h = 0; h < 2; h++) {
            uint64_t m = 0;
            for (int c = 0; c < 4; c++)
                m |= (uint64_t)in_set_16(&out[p->skips[i]][64 * h + 16 * c], p->first, nd, inv)
                     << (16 * c);
            lanes[i][h] = m;
        }
}
#endif

/* Seed's lane: r its first min(nw, CFS_WINDOW) words, nw the filter's. */
static bool lane_matches(const struct cfs_seed_set_problem *p, uint64_t m, const uint32_t *r,
                         uint32_t skip, uint32_t seed, uint32_t nw)
{
    /* pos 0: randperm[0] = z_0, decided before any replay */
    if (p->pos == 0 && !in_set(p->first, fast_mod(r[skip], m, (uint32_t)p->n)))
        return false;
    uint32_t v[3], all[CFS_SET_WORDS];
    if (nw > CFS_WINDOW) {
        seed_words(seed, nw, all);
        r = all;
    }
    window_values(p, r + skip, v);
    return values_match(p, v);
}

static int forward_set(const struct cfs_seed_set_problem *p, uint32_t first, uint64_t count,
                       const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                       uint64_t *searched)
{
    uint32_t maxskip = 0;
    for (size_t i = 0; i < p->nskips; i++)
        if (p->skips[i] > maxskip)
            maxskip = p->skips[i];
    uint32_t nw = maxskip + p->pos + reach(p) + 1;
    /* the vector stage's words: past its window, only those of positions
     * pos and pos + 1 (the survivors of position 0 get the rest, seed_words) */
    uint32_t nvec = nw <= CFS_WINDOW ? nw : maxskip + p->pos + 2;
    uint64_t m = UINT64_MAX / p->n + 1;
    uint32_t out[CFS_WINDOW][WIDE_BLOCK];
    bool wide = seed_wide_supported();
    uint64_t done = 0;
    bool stop = false;
    while (done < count && !stop) {
        if ((done & (WIDE_BLOCK * 512 - 1)) == 0 && cancel && atomic_load(cancel))
            break;
        uint32_t seed0 = first + (uint32_t)done;
        uint64_t lanes = count - done < WIDE_BLOCK ? count - done : WIDE_BLOCK;
        block_outputs_lanes(seed0, nvec, wide, out);
#if SEED_WIDE
        if (wide && p->pos == 0) {
            /* only the lanes whose position 0 passes, in seed order */
            uint64_t pass[4][2];
            first_filter_wide(p, (const uint32_t(*)[WIDE_BLOCK])out, pass);
            for (uint32_t h = 0; h < 2 && !stop; h++) {
                uint64_t any = 0;
                for (size_t i = 0; i < p->nskips; i++)
                    any |= pass[i][h];
                while (any && !stop) {
                    uint32_t l = 64 * h + (uint32_t)__builtin_ctzll(any);
                    any &= any - 1;
                    if (l >= lanes)
                        break;
                    uint32_t r[CFS_WINDOW];
                    for (uint32_t k = 0; k < nvec; k++)
                        r[k] = out[k][l];
                    for (size_t i = 0; i < p->nskips && !stop; i++)
                        if ((pass[i][h] >> (l % 64) & 1) &&
                            lane_matches(p, m, r, p->skips[i], seed0 + l, nw))
                            stop = found(arg, seed0 + l, p->skips[i]);
                }
            }
            done += lanes;
            continue;
        }
#endif
        for (uint32_t l = 0; l < lanes && !stop; l++) {
            uint32_t r[CFS_WINDOW];
            for (uint32_t k = 0; k < nvec; k++)
                r[k] = out[k][l];
            for (size_t i = 0; i < p->nskips && !stop; i++)
                if (lane_matches(p, m, r, p->skips[i], seed0 + l, nw))
                    stop = found(arg, seed0 + l, p->skips[i]);
        }
        done += lanes;
    }
    *searched = done;
    return 0;
}

static int inside_out_set(const struct cfs_seed_set_problem *p, uint32_t first, uint64_t count,
                          const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                          uint64_t *searched)
{
    uint32_t pos[3] = {p->pos, p->pos + 1, p->pos + reach(p)};
    size_t npos = p->alt_gap > 1 && p->pos + p->alt_gap < p->n ? 3 : 2;
    uint64_t done = 0;
    bool stop = false;
    int rc = 0;
    for (; done < count && !stop; done++) {
        if (cancel && atomic_load(cancel))
            break;
        for (size_t i = 0; i < p->nskips && !stop; i++) {
            uint32_t v[3];
            rc = cfs_seed_inside_out_at(first + (uint32_t)done, p->skips[i], p->n, pos, npos, v);
            if (npos == 2)
                v[2] = v[1];
            if (rc < 0)
                goto out;
            if (values_match(p, v))
                stop = found(arg, first + (uint32_t)done, p->skips[i]);
        }
    }
out:
    *searched = done;
    return rc;
}

int cfs_seed_search_set(const struct cfs_seed_set_problem *p, uint32_t first, uint64_t count,
                        const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                        uint64_t *searched)
{
    *searched = 0;
    if (p->n < 2 || p->n > UINT32_MAX || p->pos >= p->n || !p->first || !p->second ||
        p->nskips == 0 || p->nskips > 4 || count > (1ull << 32))
        return -EINVAL;
    /* positions pos and pos + 1 from the vector stage's words; pos + alt_gap
     * past them only where position 0's test thins the seeds out first */
    uint32_t words = p->pos == 0 ? CFS_SET_WORDS : CFS_WINDOW;
    for (size_t i = 0; i < p->nskips; i++)
        if (p->skips[i] + p->pos + 2 > CFS_WINDOW || p->skips[i] + p->pos + reach(p) + 1 > words)
            return -EINVAL;
    if (p->algo == CFS_RANDPERM_CURRENT && p->n >= RANDPERM_LARGE_N)
        return inside_out_set(p, first, count, cancel, found, arg, searched);
    return forward_set(p, first, count, cancel, found, arg, searched);
}
