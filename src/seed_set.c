/* The set search (clairfs/seed_search.h, cfs_seed_search_set): seeds whose
 * randperm(n) holds, at positions pos and pos + 1, members of two sets.
 *
 * The exact search (seed_search.c) filters on "z_p = v - p", one known
 * value.  Here the value is one of many, so the filter computes the value
 * itself: the first draws of 64 seeds at once (the shared vector kernel,
 * words 0 .. pos + 1 + the largest skip), then per seed a replay of the
 * pos + 2 swaps that decide positions pos and pos + 1 (for pos 0 the first
 * value is just z_0, and most seeds stop at its bit test).  The cost is the
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

static inline bool in_set(const uint64_t *set, uint32_t v)
{
    return (set[v >> 6] >> (v & 63)) & 1;
}

/* Values at positions pos and pos + 1 after the forward Fisher-Yates of
 * draws r[0 ..]: positions up to pos + 1 are final after step pos + 1 (the
 * last step is n - 2). */
static void window_values(const uint32_t *r, uint64_t n, uint32_t pos, uint32_t out[2])
{
    uint32_t key[2 * CFS_WINDOW], val[2 * CFS_WINDOW];
    unsigned nk = 0;
    uint64_t steps = (uint64_t)pos + 2 < n - 1 ? (uint64_t)pos + 2 : n - 1;
    for (uint32_t k = 0; k < steps; k++) {
        uint32_t b = k + r[k] % (uint32_t)(n - k);
        int ia = -1, ib = -1;
        for (unsigned i = 0; i < nk; i++) {
            if (key[i] == k)
                ia = (int)i;
            if (key[i] == b)
                ib = (int)i;
        }
        if (ia < 0)
            key[nk] = k, val[nk] = k, ia = (int)nk++;
        if (ib < 0)
            key[nk] = b, val[nk] = b, ib = (int)nk++;
        uint32_t t = val[ia];
        val[ia] = val[ib];
        val[ib] = t;
    }
    for (int q = 0; q < 2; q++) {
        out[q] = pos + (uint32_t)q;
        for (unsigned j = 0; j < nk; j++)
            if (key[j] == pos + (uint32_t)q)
                out[q] = val[j];
    }
}

static bool values_match(const struct cfs_seed_set_problem *p, const uint32_t v[2])
{
    return in_set(p->first, v[0]) && (p->pos + 1 >= p->n || in_set(p->second, v[1]));
}

/* r % n by a multiplication (Lemire, "Faster remainder by direct
 * computation", 2019), m = 2^64 / n rounded up: the division would cost
 * as much as the seeding it follows. */
static inline uint32_t fast_mod(uint32_t r, uint64_t m, uint32_t n)
{
    return (uint32_t)(((unsigned __int128)(m * r) * n) >> 64);
}

static bool lane_matches(const struct cfs_seed_set_problem *p, uint64_t m, const uint32_t *r,
                         uint32_t skip)
{
    /* pos 0: randperm[0] = z_0, decided before any replay */
    if (p->pos == 0 && !in_set(p->first, fast_mod(r[skip], m, (uint32_t)p->n)))
        return false;
    uint32_t v[2];
    window_values(r + skip, p->n, p->pos, v);
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
    uint32_t nw = maxskip + p->pos + 2;
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
        block_outputs_lanes(seed0, nw, wide, out);
        for (uint32_t l = 0; l < lanes && !stop; l++) {
            uint32_t r[CFS_WINDOW];
            for (uint32_t k = 0; k < nw; k++)
                r[k] = out[k][l];
            for (size_t i = 0; i < p->nskips && !stop; i++)
                if (lane_matches(p, m, r, p->skips[i]))
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
    uint32_t pos[2] = {p->pos, p->pos + 1};
    uint64_t done = 0;
    bool stop = false;
    int rc = 0;
    for (; done < count && !stop; done++) {
        if (cancel && atomic_load(cancel))
            break;
        for (size_t i = 0; i < p->nskips && !stop; i++) {
            uint32_t v[2];
            rc = cfs_seed_inside_out_at(first + (uint32_t)done, p->skips[i], p->n, pos, 2, v);
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
    for (size_t i = 0; i < p->nskips; i++)
        if (p->skips[i] + p->pos + 2 > CFS_WINDOW)
            return -EINVAL;
    if (p->algo == CFS_RANDPERM_CURRENT && p->n >= RANDPERM_LARGE_N)
        return inside_out_set(p, first, count, cancel, found, arg, searched);
    return forward_set(p, first, count, cancel, found, arg, searched);
}
