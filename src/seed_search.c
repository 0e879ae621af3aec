/* Seed recovery by exhaustive search (clairfs/seed_search.h).
 *
 * The forward Fisher-Yates (randperm for n < 214748364, and every n with
 * CFS_RANDPERM_LEGACY) swaps position k with k + z_k, z_k = r_k % (n - k),
 * r_k the k-th tempered MT word. Positions below k are final after step k,
 * so position p depends on the first p + 1 draws only, and those draws,
 * while k < 227, depend on three words of the seeding recurrence each:
 * r_k = temper(s[k + 397] ^ twist(s[k], s[k + 1])). A candidate seed
 * therefore costs ~400 steps of s[j] = 1812433253 * (s[j-1] ^ s[j-1] >> 30)
 * + j and one tempering, not 624 words plus a twist plus a permutation.
 *
 * One constraint is enough to discard almost every seed, given this fact:
 * if randperm(n)[p] = v with v >= p, then z_p = v - p exactly (v cannot
 * have moved before step p: its first move would put it at a position
 * below p, final there). z_p = v - p is "r_p - (v - p) is a non-negative
 * multiple of n - p", a multiply-and-compare divisibility test (Hacker's
 * Delight 10-17) that vectorises, unlike a modulo. So the search runs in
 * two stages over blocks of 64 consecutive seeds:
 *
 *   filter    the cheapest such constraint (fewest seeding steps), one
 *             tempered word per seed, in GCC vector extensions (8 x 8
 *             lanes, an AVX2 clone where the CPU has it); words up to 622
 *             come from the first twist's formula unrolled onto seeding
 *             words, so a DistributedSampler rank up to ~600 filters too;
 *             about 1 seed in n - p survives;
 *   verify    for a block with a survivor, the first draws of all 64 lanes
 *             (same vector code), then per surviving lane an exact sparse
 *             replay of the swaps (only the positions touched) against the
 *             constraints of the first CFS_WINDOW positions, and a scalar
 *             generator for constraints further out.
 *
 * torch >= 2.6's inside-out shuffle (n >= 214748364) writes r[z] = i at
 * step i, z = random64 % (i + 1): the final value at a small position p is
 * the LAST step i that drew z = p, i.e. a draw near the end of the 2n-word
 * stream. What is cheap to check without the whole stream: if the final
 * value v > p then step v drew z_v = p (values only move towards the end),
 * one random64 at words 2v, 2v+1. Walking the stream there costs 2v words
 * a seed (~10^8: 0.07 s); but that draw is a GF(2)-linear function of the
 * seeded state, so src/seed_jump.c turns it into 2496 table lookups
 * (~3 us) once its tables are built (~1.5 s, for long ranges only). The
 * filter takes the constraint with the smallest such v; about one seed in
 * v survives and is verified by a full O(n) replay
 * (cfs_seed_inside_out_at, ~2 s). The whole 2^32 range: hours on one core,
 * not minutes. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clairfs/seed_search.h"
#include "clairfs/thread_priority.h"
#include "seed_jump.h"
#include "seed_kernel.h"


/* "r_w - c is a non-negative multiple of m" for each lane, as a bit mask;
 * m = d * 2^shift, dinv = d^-1 mod 2^32, lim = (2^32 - 1) / m.
 *
 * Word w < 623 of the first twist, from seeding words only: w' = s[w + 397]
 * ^ T(s[w], s[w+1]) below 227; above, w' = (w - 227)' ^ T(s[w], s[w+1]),
 * unrolled down to a word below 227. The events say where the recurrence
 * must stop: a T pair ends at j = k + 1, the base word at j = k + 397. */
struct divtest {
    uint32_t word, c, dinv, shift, lim;
    uint32_t nev;
    uint32_t ev_at[4];
    bool ev_pair[4];
};

static inline void advance(v8u x[NV], uint32_t *j, uint32_t to)
{
    while (*j < to)
        init_step(x, ++*j);
}

SEED_KERNEL static uint64_t block_filter(uint32_t seed0, const struct divtest *t)
{
    v8u x[NV], prev[NV], acc[NV];
    seed_lanes(x, seed0);
    for (int v = 0; v < NV; v++)
        acc[v] = (v8u){0};
    uint32_t j = 0;
    for (uint32_t e = 0; e < t->nev; e++) {
        if (t->ev_pair[e]) {
            advance(x, &j, t->ev_at[e] - 1);
            copy_lanes(prev, x);
            advance(x, &j, t->ev_at[e]);
            for (int v = 0; v < NV; v++)
                twist_into(&acc[v], &prev[v], &x[v]);
        } else {
            advance(x, &j, t->ev_at[e]);
            for (int v = 0; v < NV; v++)
                acc[v] ^= x[v];
        }
    }
    v8u any = {0};
    v8u pass[NV];
    for (int v = 0; v < NV; v++) {
        v8u r = acc[v];
        temper_lanes(&r);
        v8u q = (r - t->c) * t->dinv;
        q = (q >> t->shift) | (q << ((32u - t->shift) & 31u));
        pass[v] = (v8u)((r >= t->c) & (q <= t->lim));
        any |= pass[v];
    }
    uint32_t some = 0;
    for (int l = 0; l < LANES; l++)
        some |= any[l];
    if (!some)
        return 0;
    uint64_t mask = 0;
    for (int v = 0; v < NV; v++)
        for (int l = 0; l < LANES; l++)
            if (pass[v][l])
                mask |= 1ull << (v * LANES + l);
    return mask;
}


/* --- The prepared problem. --------------------------------------------- */

/* Positions touched by a sparse replay of the swaps; a stamp per slot
 * empties it in O(1) between seeds. */
struct sparse_map {
    uint32_t *key, *val, *stamp;
    uint32_t bits, gen;
};

struct search_ctx {
    uint64_t n;
    uint32_t skip;
    struct cfs_seed_constraint *c;
    size_t nc;
    bool inside_out;
    uint32_t max_pos;
    /* forward */
    bool has_filter;
    struct divtest filter;
    uint32_t nwin;        /* draws the window check replays (0: none needed) */
    bool need_full;       /* a constraint at CFS_WINDOW or beyond */
    struct sparse_map map;
    /* inside-out: the constraints with value > pos, by value */
    struct cfs_seed_constraint *late;
    size_t nlate;
    uint32_t *io_pos, *io_val;
};

struct run {
    const atomic_bool *cancel;
    _Atomic uint64_t *done;
    struct cfs_seed_result *res;
};

static void record(struct run *run, uint32_t seed)
{
    struct cfs_seed_result *r = run->res;
    if (r->n_low32 < CFS_SEED_MAX_CANDIDATES)
        r->low32[r->n_low32++] = seed;
    r->matches++;
}

static uint32_t inverse_odd(uint32_t d)
{
    uint32_t inv = d; /* correct to 3 bits; each Newton step doubles them */
    for (int i = 0; i < 4; i++)
        inv *= 2u - d * inv;
    return inv;
}

static void make_divtest(struct divtest *t, uint32_t word, uint32_t m, uint32_t c)
{
    uint32_t shift = (uint32_t)__builtin_ctz(m);
    t->word = word;
    t->c = c;
    t->shift = shift;
    t->dinv = inverse_odd(m >> shift);
    t->lim = UINT32_MAX / m;
    t->nev = 0;
    uint32_t k = word;
    for (;; k -= MT_DIRECT) {
        t->ev_at[t->nev] = k + 1;
        t->ev_pair[t->nev++] = true;
        if (k < MT_DIRECT)
            break;
    }
    t->ev_at[t->nev] = k + MT_M;
    t->ev_pair[t->nev++] = false;
    /* by stopping point (insertion sort of at most 4) */
    for (uint32_t a = 1; a < t->nev; a++)
        for (uint32_t b = a; b > 0 && t->ev_at[b - 1] > t->ev_at[b]; b--) {
            uint32_t at = t->ev_at[b];
            bool pair = t->ev_pair[b];
            t->ev_at[b] = t->ev_at[b - 1], t->ev_pair[b] = t->ev_pair[b - 1];
            t->ev_at[b - 1] = at, t->ev_pair[b - 1] = pair;
        }
}

/* Seeding steps the filter on word w runs. */
static uint32_t filter_cost(uint32_t w)
{
    uint32_t base = w % MT_DIRECT + MT_M;
    return base > w + 1 ? base : w + 1;
}

static int map_init(struct sparse_map *m, uint64_t steps)
{
    uint32_t bits = 4;
    while ((1ull << bits) < 4 * steps + 4)
        bits++;
    if (bits > 31)
        return -ENOMEM;
    size_t cap = (size_t)1 << bits;
    m->bits = bits;
    m->gen = 0;
    m->key = malloc(cap * sizeof(*m->key));
    m->val = malloc(cap * sizeof(*m->val));
    m->stamp = calloc(cap, sizeof(*m->stamp));
    return m->key && m->val && m->stamp ? 0 : -ENOMEM;
}

static void map_free(struct sparse_map *m)
{
    free(m->key);
    free(m->val);
    free(m->stamp);
}

static void map_clear(struct sparse_map *m)
{
    if (++m->gen == 0) { /* stamps wrapped: really clear once */
        memset(m->stamp, 0, ((size_t)1 << m->bits) * sizeof(*m->stamp));
        m->gen = 1;
    }
}

static uint32_t *map_slot(struct sparse_map *m, uint32_t pos)
{
    uint32_t mask = (1u << m->bits) - 1;
    uint32_t i = (pos * 0x9e3779b1u) >> (32 - m->bits);
    while (m->stamp[i] == m->gen && m->key[i] != pos)
        i = (i + 1) & mask;
    if (m->stamp[i] != m->gen) {
        m->stamp[i] = m->gen;
        m->key[i] = pos;
        m->val[i] = pos; /* the identity it starts from */
    }
    return &m->val[i];
}

static void map_swap(struct sparse_map *m, uint32_t a, uint32_t b)
{
    uint32_t *pa = map_slot(m, a);
    uint32_t *pb = map_slot(m, b);
    uint32_t t = *pa;
    *pa = *pb;
    *pb = t;
}

/* Forward Fisher-Yates: do the constraints at positions below CFS_WINDOW
 * hold, given the draws r[0 .. nwin-1]? Few positions: a linear list. */
static bool window_ok(const struct search_ctx *x, const uint32_t *r)
{
    struct window_swaps w;
    window_shuffle(r, x->n, x->nwin, &w);
    for (size_t i = 0; i < x->nc; i++)
        if (x->c[i].pos < CFS_WINDOW && window_value(&w, x->c[i].pos) != x->c[i].value)
            return false;
    return true;
}

/* Every constraint, from a real generator and a sparse replay. */
static bool full_ok(struct search_ctx *x, uint32_t seed)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, x->skip);
    uint64_t steps = x->max_pos < x->n - 1 ? (uint64_t)x->max_pos + 1 : x->n - 1;
    map_clear(&x->map);
    for (uint64_t k = 0; k < steps; k++) {
        uint32_t z = cfs_mt19937_next32(&mt) % (uint32_t)(x->n - k);
        map_swap(&x->map, (uint32_t)k, (uint32_t)k + z);
    }
    for (size_t i = 0; i < x->nc; i++)
        if (*map_slot(&x->map, x->c[i].pos) != x->c[i].value)
            return false;
    return true;
}

static void forward_survivors(struct search_ctx *x, uint32_t seed0, uint64_t mask,
                              struct run *run)
{
    v8u out[CFS_WINDOW][NV];
    if (x->nwin)
        block_outputs(seed0, x->skip, x->nwin, out);
    while (mask) {
        int l = __builtin_ctzll(mask);
        mask &= mask - 1;
        uint32_t seed = seed0 + (uint32_t)l;
        if (x->nwin) {
            uint32_t r[CFS_WINDOW];
            for (uint32_t k = 0; k < x->nwin; k++)
                r[k] = out[k][l / LANES][l % LANES];
            if (!window_ok(x, r))
                continue;
        }
        if (x->need_full && !full_ok(x, seed))
            continue;
        record(run, seed);
    }
}

static void forward_range(struct search_ctx *x, uint32_t first, uint64_t count, struct run *run)
{
    uint64_t done = 0;
    while (done < count) {
        if ((done & (BLOCK * 1024 - 1)) == 0 && atomic_load_explicit(run->cancel,
                                                                     memory_order_relaxed)) {
            run->res->cancelled = true;
            break;
        }
        uint32_t seed0 = first + (uint32_t)done;
        uint64_t lanes = count - done < BLOCK ? count - done : BLOCK;
        uint64_t mask = x->has_filter ? block_filter(seed0, &x->filter) : ~0ull;
        if (lanes < BLOCK)
            mask &= (1ull << lanes) - 1;
        if (mask)
            forward_survivors(x, seed0, mask, run);
        done += lanes;
        atomic_store_explicit(run->done, done, memory_order_relaxed);
    }
    run->res->searched = done;
}

/* --- Inside-out. ---------------------------------------------------------- */

/* Value at position q after steps 0 .. t-1 (q < t <= max position + 1),
 * from the stored draws z[0 .. t-1]: the last step in (q, t) that drew q
 * wrote its own index there; failing that, step q copied position z_q. */
static uint32_t io_value(const uint32_t *z, uint32_t q, uint32_t t)
{
    for (;;) {
        for (uint32_t i = t; i-- > q + 1;)
            if (z[i] == q)
                return i;
        if (z[q] == q)
            return q;
        t = q;
        q = z[q];
    }
}

int cfs_seed_inside_out_at(uint32_t seed, uint32_t skip_words, uint64_t n, const uint32_t *pos,
                           size_t npos, uint32_t *values)
{
    if (n == 0 || n > UINT32_MAX)
        return -EINVAL;
    uint32_t maxp = 0;
    for (size_t i = 0; i < npos; i++) {
        if (pos[i] >= n)
            return -EINVAL;
        if (pos[i] > maxp)
            maxp = pos[i];
    }
    uint32_t *z = malloc(((size_t)maxp + 1) * sizeof(*z));
    uint32_t *last = malloc(((size_t)maxp + 1) * sizeof(*last));
    if (!z || !last) {
        free(z);
        free(last);
        return -ENOMEM;
    }
    memset(last, 0xff, ((size_t)maxp + 1) * sizeof(*last));
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, skip_words);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t zi = cfs_mt19937_next64(&mt) % (i + 1);
        if (i <= maxp)
            z[i] = (uint32_t)zi;
        if (zi <= maxp)
            last[zi] = (uint32_t)i;
    }
    for (size_t i = 0; i < npos; i++) {
        uint32_t p = pos[i];
        if (last[p] != UINT32_MAX && last[p] > p)
            values[i] = last[p];
        else
            values[i] = z[p] == p ? p : io_value(z, z[p], p);
    }
    free(z);
    free(last);
    return 0;
}

static int cmp_by_value(const void *a, const void *b)
{
    const struct cfs_seed_constraint *x = a, *y = b;
    return (x->value > y->value) - (x->value < y->value);
}

static bool inside_out_ok(struct search_ctx *x, uint32_t seed)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    uint64_t at = 0;
    for (size_t i = 0; i < x->nlate; i++) {
        /* z_v = p is necessary for a final value v > p (see the top). */
        uint64_t w = x->skip + 2ull * x->late[i].value;
        cfs_mt19937_discard(&mt, w - at);
        uint64_t r = cfs_mt19937_next64(&mt);
        at = w + 2;
        if (r % ((uint64_t)x->late[i].value + 1) != x->late[i].pos)
            return false;
    }
    if (cfs_seed_inside_out_at(seed, x->skip, x->n, x->io_pos, x->nc, x->io_val) < 0)
        return false;
    for (size_t i = 0; i < x->nc; i++)
        if (x->io_val[i] != x->c[i].value)
            return false;
    return true;
}

/* The jump tables cost about 1.5 s to build and 3 us a seed; walking the
 * stream to word 2v costs about 0.6 ns a word. */
static bool jump_pays(const struct search_ctx *x, uint64_t count)
{
    if (x->nlate == 0)
        return false;
    double words = (double)x->skip + 2.0 * x->late[0].value;
    return (double)count * (words * 0.6e-9 - 3e-6) > 1.5;
}

/* The smallest late constraint through the jump tables, 8 seeds at a time;
 * survivors go through inside_out_ok. Returns seeds done, or -errno. */
static int64_t inside_out_jump(struct search_ctx *x, uint32_t first, uint64_t count,
                               struct run *run)
{
    struct cfs_seed_jump *jt;
    int rc = cfs_seed_jump_create(x->skip + 2ull * x->late[0].value, &jt);
    if (rc < 0)
        return rc;
    uint32_t st[CFS_JUMP_LANES][CFS_JUMP_STATE_WORDS]; /* 20 KB */
    uint64_t m = (uint64_t)x->late[0].value + 1, want = x->late[0].pos, done = 0;
    while (done < count) {
        if (atomic_load_explicit(run->cancel, memory_order_relaxed)) {
            run->res->cancelled = true;
            break;
        }
        uint32_t seed0 = first + (uint32_t)done;
        uint64_t lanes = count - done < CFS_JUMP_LANES ? count - done : CFS_JUMP_LANES;
        cfs_seed_jump_states(seed0, st);
        for (uint32_t l = 0; l < lanes; l++)
            if (cfs_seed_jump_draw(jt, st[l]) % m == want && inside_out_ok(x, seed0 + l))
                record(run, seed0 + l);
        done += lanes;
        atomic_store_explicit(run->done, done, memory_order_relaxed);
    }
    cfs_seed_jump_destroy(jt);
    return (int64_t)done;
}

static void inside_out_range(struct search_ctx *x, uint32_t first, uint64_t count,
                             struct run *run)
{
    uint64_t done = 0;
    if (jump_pays(x, count)) {
        int64_t got = inside_out_jump(x, first, count, run);
        if (got >= 0) {
            run->res->searched = (uint64_t)got;
            return;
        }
        /* out of memory for the tables: the slow way still answers */
    }
    for (; done < count; done++) {
        if (atomic_load_explicit(run->cancel, memory_order_relaxed)) {
            run->res->cancelled = true;
            break;
        }
        uint32_t seed = first + (uint32_t)done;
        if (inside_out_ok(x, seed))
            record(run, seed);
        atomic_store_explicit(run->done, done + 1, memory_order_relaxed);
    }
    run->res->searched = done;
}

/* --- Preparing and running a search. --------------------------------------- */

static void ctx_free(struct search_ctx *x)
{
    free(x->c);
    free(x->late);
    free(x->io_pos);
    free(x->io_val);
    map_free(&x->map);
}

/* Two values at one position, or one value at two: no permutation. */
static bool contradictory(const struct cfs_seed_constraint *c, size_t nc)
{
    for (size_t i = 0; i < nc; i++)
        for (size_t j = i + 1; j < nc; j++)
            if ((c[i].pos == c[j].pos) != (c[i].value == c[j].value))
                return true;
    return false;
}

static int prepare_forward(struct search_ctx *x)
{
    uint32_t best = UINT32_MAX; /* the filter's cost */
    uint32_t win_max = 0;
    bool any_win = false;
    for (size_t i = 0; i < x->nc; i++) {
        uint32_t p = x->c[i].pos, v = x->c[i].value;
        if (p < CFS_WINDOW) {
            any_win = true;
            if (p > win_max)
                win_max = p;
        } else {
            x->need_full = true;
        }
        if (v >= p && p + 1 < x->n && x->skip + p < MT_FILTER_MAX &&
            filter_cost(x->skip + p) < best) {
            best = filter_cost(x->skip + p);
            make_divtest(&x->filter, x->skip + p, (uint32_t)(x->n - p), v - p);
            x->has_filter = true;
        }
    }
    if (any_win)
        x->nwin = win_max + 1 < x->n - 1 ? win_max + 1 : (uint32_t)(x->n - 1);
    if (!x->need_full)
        return 0;
    return map_init(&x->map, (uint64_t)x->max_pos + 1);
}

static int prepare_inside_out(struct search_ctx *x)
{
    x->late = malloc(x->nc * sizeof(*x->late));
    x->io_pos = malloc(x->nc * sizeof(*x->io_pos));
    x->io_val = malloc(x->nc * sizeof(*x->io_val));
    if (!x->late || !x->io_pos || !x->io_val)
        return -ENOMEM;
    for (size_t i = 0; i < x->nc; i++) {
        x->io_pos[i] = x->c[i].pos;
        if (x->c[i].value > x->c[i].pos)
            x->late[x->nlate++] = x->c[i];
    }
    qsort(x->late, x->nlate, sizeof(*x->late), cmp_by_value);
    return 0;
}

/* Returns 0 and a context, 1 when the answer needs no search (res filled),
 * or -errno. */
static int prepare(const struct cfs_seed_problem *p, uint64_t count, struct search_ctx *x,
                   struct cfs_seed_result *res)
{
    memset(x, 0, sizeof(*x));
    memset(res, 0, sizeof(*res));
    if (p->n == 0 || p->n > UINT32_MAX || p->skip_words > CFS_SEED_MAX_SKIP ||
        count > (1ull << 32) || (p->nc && !p->c))
        return -EINVAL;
    for (size_t i = 0; i < p->nc; i++)
        if (p->c[i].pos >= p->n || p->c[i].value >= p->n)
            return -EINVAL;
    if (p->n == 1 || p->nc == 0) {
        res->verdict = CFS_SEED_UNIDENTIFIABLE;
        res->searched = res->matches = count;
        return 1;
    }
    if (contradictory(p->c, p->nc)) {
        res->verdict = CFS_SEED_NONE;
        res->searched = count;
        return 1;
    }
    x->n = p->n;
    x->skip = p->skip_words;
    x->nc = p->nc;
    x->inside_out = p->algo == CFS_RANDPERM_CURRENT && p->n >= RANDPERM_LARGE_N;
    if (!(x->c = malloc(p->nc * sizeof(*x->c))))
        return -ENOMEM;
    memcpy(x->c, p->c, p->nc * sizeof(*x->c));
    for (size_t i = 0; i < p->nc; i++)
        if (x->c[i].pos > x->max_pos)
            x->max_pos = x->c[i].pos;
    int rc = x->inside_out ? prepare_inside_out(x) : prepare_forward(x);
    if (rc < 0)
        ctx_free(x);
    return rc;
}

static void finish_result(struct cfs_seed_result *res)
{
    if (res->matches == 0)
        res->verdict = CFS_SEED_NONE;
    else if (res->matches == 1)
        res->verdict = CFS_SEED_UNIQUE;
    else
        res->verdict = CFS_SEED_AMBIGUOUS;
}

static void run_search(struct search_ctx *x, uint32_t first, uint64_t count, struct run *run)
{
    if (x->inside_out)
        inside_out_range(x, first, count, run);
    else
        forward_range(x, first, count, run);
    finish_result(run->res);
}

int cfs_seed_search(const struct cfs_seed_problem *p, uint32_t first, uint64_t count,
                    struct cfs_seed_result *res)
{
    struct search_ctx x;
    int rc = prepare(p, count, &x, res);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    atomic_bool cancel = false;
    _Atomic uint64_t done = 0;
    struct run run = {.cancel = &cancel, .done = &done, .res = res};
    run_search(&x, first, count, &run);
    ctx_free(&x);
    return 0;
}

/* --- The background search. ------------------------------------------------ */

struct cfs_seed_search {
    pthread_t thread;
    struct search_ctx ctx;
    bool have_ctx; /* false: prepare() answered without a search */
    uint32_t first;
    uint64_t count;
    atomic_bool cancel;
    atomic_bool finished;
    _Atomic uint64_t done;
    const char *_Atomic priority;
    struct cfs_seed_result res;
};

static void *search_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-seed-search");
    struct cfs_seed_search *s = arg;
    atomic_store(&s->priority, cfs_thread_lower_priority());
    struct run run = {.cancel = &s->cancel, .done = &s->done, .res = &s->res};
    run_search(&s->ctx, s->first, s->count, &run);
    atomic_store(&s->finished, true);
    return NULL;
}

int cfs_seed_search_start(const struct cfs_seed_problem *p, uint32_t first, uint64_t count,
                          struct cfs_seed_search **out)
{
    *out = NULL;
    struct cfs_seed_search *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    int rc = prepare(p, count, &s->ctx, &s->res);
    if (rc < 0) {
        free(s);
        return rc;
    }
    s->first = first;
    s->count = count;
    atomic_init(&s->cancel, false);
    atomic_init(&s->done, rc > 0 ? count : 0);
    atomic_init(&s->finished, rc > 0);
    atomic_init(&s->priority, NULL);
    if (rc == 0) {
        s->have_ctx = true;
        rc = -pthread_create(&s->thread, NULL, search_thread, s);
        if (rc < 0) {
            ctx_free(&s->ctx);
            free(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

double cfs_seed_search_progress(const struct cfs_seed_search *s)
{
    if (s->count == 0)
        return 1.0;
    return (double)atomic_load(&s->done) / (double)s->count;
}

bool cfs_seed_search_done(const struct cfs_seed_search *s)
{
    return atomic_load(&s->finished);
}

const char *cfs_seed_search_priority(const struct cfs_seed_search *s)
{
    const char *p = atomic_load(&s->priority);
    return p ? p : "not started";
}

void cfs_seed_search_cancel(struct cfs_seed_search *s)
{
    atomic_store(&s->cancel, true);
}

int cfs_seed_search_finish(struct cfs_seed_search *s, struct cfs_seed_result *res)
{
    if (s->have_ctx) {
        pthread_join(s->thread, NULL);
        ctx_free(&s->ctx);
    }
    *res = s->res;
    free(s);
    return 0;
}

/* --- Helpers. -------------------------------------------------------------- */

int cfs_seed_constraints_ddp(uint64_t n, uint32_t world, uint32_t rank, bool drop_last,
                             const uint32_t *indices, size_t count,
                             struct cfs_seed_constraint *out, size_t max)
{
    if (n == 0 || n > UINT32_MAX || world == 0 || rank >= world)
        return -EINVAL;
    uint64_t num_samples = drop_last ? n / world : (n + world - 1) / world;
    if (count > num_samples)
        return -EINVAL;
    if (count > INT_MAX)
        return -E2BIG;
    for (size_t i = 0; i < count; i++) {
        if (indices[i] >= n)
            return -EINVAL;
        if (i == max)
            return -E2BIG;
        /* Within one rank the positions never meet modulo n: the padding
         * is shorter than world. */
        out[i].pos = (uint32_t)((rank + (uint64_t)i * world) % n);
        out[i].value = indices[i];
    }
    return (int)count;
}

int cfs_seed_reconstruct(uint32_t low32, uint64_t epoch, bool high_known, uint32_t high,
                         uint64_t *seed)
{
    /* (S + e) mod 2^32 = low32 fixes S mod 2^32 whatever the carries. */
    uint32_t s_low = low32 - (uint32_t)epoch;
    *seed = ((uint64_t)(high_known ? high : 0) << 32) | s_low;
    return high_known ? 0 : -ENODATA;
}

const char *cfs_seed_verdict_name(enum cfs_seed_verdict v)
{
    switch (v) {
    case CFS_SEED_NONE: return "none";
    case CFS_SEED_UNIQUE: return "unique";
    case CFS_SEED_AMBIGUOUS: return "ambiguous";
    case CFS_SEED_UNIDENTIFIABLE: return "unidentifiable";
    }
    return "?";
}
