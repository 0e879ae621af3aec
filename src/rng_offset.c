/* The offset finder (clairfs/rng_offset.h says what it answers).
 *
 * The walk is the global stream read once: candidate j's private seed is
 * the word after position first + j*step. Almost every candidate is
 * rejected by one cheap test. For forward Fisher-Yates, an index v >= pos
 * can only end at position pos if no earlier step moved it (a step i < pos
 * that picks it puts it at i, final), so step pos must pick it straight
 * from its home: word pos of the private generator, modulo n - pos, equals
 * v - pos. Word pos < 227 of a freshly seeded MT19937 is the tempering of
 * state[pos + 397] ^ twist(state[pos], state[pos + 1]), and the seeding
 * recurrence reaches state[pos + 397] after pos + 397 multiplications -
 * less than a full seeding, and a recurrence with no branch, so 16
 * candidates are run abreast in plain loops the compiler vectorises.
 *
 * A candidate that passes (about one in n - pos) is replayed: Fisher-Yates
 * up to the largest constrained position with the permutation kept sparse
 * (a dense array for the positions up to it, a small hash table for the
 * far positions its swaps touch, at most one per step). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clairfs/rng_offset.h"
#include "clairfs/thread_priority.h"

enum { LANES = 16, MT_M = 397, CHEAP_POS_LIMIT = 624 - MT_M };

#define RANDPERM_LARGE_N (UINT32_MAX / 20u)
#define EMPTY_KEY UINT32_MAX

/* The sparse permutation of one replay. */
struct sparse_perm {
    uint32_t dense_len; /* positions 0..dense_len-1 */
    uint32_t *dense;
    uint32_t cap; /* power of two */
    uint32_t *keys, *vals;
};

struct walk {
    const struct cfs_rng_problem *p;
    int cheap; /* index of the constraint that filters, -1 none */
    uint32_t cheap_pos, cheap_mod, cheap_want;
    struct sparse_perm sp;
    struct cfs_rng_result *res;
};

static inline uint32_t twist(uint32_t u, uint32_t v)
{
    return (((u & 0x80000000u) | (v & 0x7fffffffu)) >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

/* The seeding recurrence from state index `from` to `to` on every lane. */
static void seed_advance(uint32_t x[LANES], uint32_t from, uint32_t to)
{
    for (uint32_t j = from + 1; j <= to; j++)
        for (int l = 0; l < LANES; l++)
            x[l] = 1812433253u * (x[l] ^ (x[l] >> 30)) + j;
}

/* Word `pos` (< 227) of the generators seeded seeds[0..LANES-1]. */
static void cheap_words(const uint32_t seeds[LANES], uint32_t pos, uint32_t out[LANES])
{
    uint32_t x[LANES], a[LANES], b[LANES];
    memcpy(x, seeds, sizeof(x));
    seed_advance(x, 0, pos);
    memcpy(a, x, sizeof(a));
    seed_advance(x, pos, pos + 1);
    memcpy(b, x, sizeof(b));
    seed_advance(x, pos + 1, pos + MT_M);
    for (int l = 0; l < LANES; l++)
        out[l] = cfs_mt19937_temper(x[l] ^ twist(a[l], b[l]));
}

static uint32_t *sparse_slot(struct sparse_perm *sp, uint32_t pos)
{
    if (pos < sp->dense_len)
        return &sp->dense[pos];
    uint32_t h = (uint32_t)((pos * 0x9e3779b97f4a7c15ull) >> 40) & (sp->cap - 1);
    while (sp->keys[h] != EMPTY_KEY && sp->keys[h] != pos)
        h = (h + 1) & (sp->cap - 1);
    if (sp->keys[h] == EMPTY_KEY) {
        sp->keys[h] = pos;
        sp->vals[h] = pos; /* untouched: the identity */
    }
    return &sp->vals[h];
}

/* Replays randperm(n) of the generator seeded `seed` up to the largest
 * constrained position and checks every constraint. */
static bool replay_agrees(struct walk *w, uint32_t seed)
{
    const struct cfs_rng_problem *p = w->p;
    struct sparse_perm *sp = &w->sp;
    struct cfs_mt19937 mt;
    for (uint32_t i = 0; i < sp->dense_len; i++)
        sp->dense[i] = i;
    memset(sp->keys, 0xff, (size_t)sp->cap * sizeof(*sp->keys));
    cfs_mt19937_seed(&mt, seed);
    uint64_t steps = p->n - 1 < sp->dense_len ? p->n - 1 : sp->dense_len;
    for (uint64_t i = 0; i < steps; i++) {
        uint32_t j = (uint32_t)(i + cfs_mt19937_next32(&mt) % (p->n - i));
        uint32_t *a = &sp->dense[i], *b = sparse_slot(sp, j), t = *a;
        *a = *b;
        *b = t;
    }
    for (size_t k = 0; k < p->nc; k++)
        if (sp->dense[p->c[k].pos] != p->c[k].value)
            return false;
    return true;
}

static void record(struct walk *w, uint64_t j)
{
    struct cfs_rng_result *r = w->res;
    if (r->n_found < CFS_RNG_MAX_CANDIDATES)
        r->found[r->n_found++] = j;
    r->matches++;
}

static void check_batch(struct walk *w, const uint32_t seeds[LANES], uint64_t j0, int lanes)
{
    uint32_t words[LANES];
    if (w->cheap >= 0)
        cheap_words(seeds, w->cheap_pos, words);
    for (int l = 0; l < lanes; l++) {
        if (w->cheap >= 0 && words[l] % w->cheap_mod != w->cheap_want)
            continue;
        if (replay_agrees(w, seeds[l]))
            record(w, j0 + (uint64_t)l);
    }
}

/* -EINVAL for malformed input, 1 for contradictory constraints, else 0. */
static int check_constraints(const struct cfs_rng_problem *p)
{
    for (size_t a = 0; a < p->nc; a++) {
        if (p->c[a].pos >= p->n || p->c[a].value >= p->n || p->c[a].pos >= CFS_RNG_MAX_POS)
            return -EINVAL;
    }
    for (size_t a = 0; a < p->nc; a++)
        for (size_t b = a + 1; b < p->nc; b++) {
            bool same_pos = p->c[a].pos == p->c[b].pos;
            bool same_val = p->c[a].value == p->c[b].value;
            if (same_pos != same_val)
                return 1;
        }
    return 0;
}

static int walk_init(struct walk *w, const struct cfs_rng_problem *p, struct cfs_rng_result *res)
{
    uint32_t max_pos = 0;
    memset(w, 0, sizeof(*w));
    w->p = p;
    w->res = res;
    w->cheap = -1;
    for (size_t k = 0; k < p->nc; k++) {
        const struct cfs_seed_constraint *c = &p->c[k];
        if (c->pos > max_pos)
            max_pos = c->pos;
        if (c->value >= c->pos && c->pos < CHEAP_POS_LIMIT &&
            (w->cheap < 0 || c->pos < w->cheap_pos)) {
            w->cheap = (int)k;
            w->cheap_pos = c->pos;
        }
    }
    if (w->cheap >= 0) {
        w->cheap_mod = (uint32_t)(p->n - w->cheap_pos);
        w->cheap_want = p->c[w->cheap].value - w->cheap_pos;
    }
    w->sp.dense_len = max_pos + 1;
    for (w->sp.cap = 16; w->sp.cap < 2 * w->sp.dense_len; w->sp.cap *= 2)
        ;
    w->sp.dense = malloc((size_t)w->sp.dense_len * sizeof(uint32_t));
    w->sp.keys = malloc((size_t)w->sp.cap * sizeof(uint32_t));
    w->sp.vals = malloc((size_t)w->sp.cap * sizeof(uint32_t));
    return w->sp.dense && w->sp.keys && w->sp.vals ? 0 : -ENOMEM;
}

static void walk_free(struct walk *w)
{
    free(w->sp.dense);
    free(w->sp.keys);
    free(w->sp.vals);
}

/* How often (in batches of LANES candidates) the walk looks at its cancel
 * flag and publishes its progress. */
#define CHECK_EVERY_BATCHES 1024u

/* A background walk's shared state; NULL for a synchronous one. */
struct walk_control {
    atomic_bool cancel;
    _Atomic uint64_t done;
};

static int run_walk(const struct cfs_rng_problem *p, uint64_t first, uint64_t step,
                    uint64_t count, struct cfs_rng_result *res, struct walk_control *ctl)
{
    struct walk w;
    struct cfs_mt19937 mt;
    uint32_t seeds[LANES];
    uint64_t last;
    int rc;

    memset(res, 0, sizeof(*res));
    if (p->n == 0 || p->n > UINT32_MAX || step == 0 ||
        (count > 0 && (__builtin_mul_overflow(count - 1, step, &last) ||
                       __builtin_add_overflow(last, first, &last) || last == UINT64_MAX)))
        return -EINVAL;
    if (p->algo == CFS_RANDPERM_CURRENT && p->n >= RANDPERM_LARGE_N)
        return -ENOTSUP;
    rc = check_constraints(p);
    if (rc < 0)
        return rc;
    res->searched = count;
    if (rc == 1)
        return 0; /* contradictory: CFS_SEED_NONE */
    if (p->n == 1 || p->nc == 0) {
        res->verdict = CFS_SEED_UNIDENTIFIABLE;
        res->matches = count;
        return 0;
    }
    rc = walk_init(&w, p, res);
    if (rc < 0)
        goto out;
    /* The private seed is the low half of the random64 at position D:
     * word D + 1. */
    cfs_mt19937_seed(&mt, p->seed);
    cfs_mt19937_discard(&mt, first + 1);
    for (uint64_t j0 = 0, batch = 0; j0 < count; j0 += LANES, batch++) {
        if (ctl && batch % CHECK_EVERY_BATCHES == 0) {
            atomic_store(&ctl->done, j0);
            if (atomic_load(&ctl->cancel)) {
                res->searched = j0;
                res->cancelled = true;
                break;
            }
        }
        int lanes = count - j0 < LANES ? (int)(count - j0) : LANES;
        for (int l = 0; l < LANES; l++) {
            if (l < lanes) {
                if (j0 + (uint64_t)l > 0)
                    cfs_mt19937_discard(&mt, step - 1);
                seeds[l] = cfs_mt19937_next32(&mt);
            } else {
                seeds[l] = 0;
            }
        }
        check_batch(&w, seeds, j0, lanes);
    }
    res->verdict = res->matches == 0   ? CFS_SEED_NONE
                   : res->matches == 1 ? CFS_SEED_UNIQUE
                                       : CFS_SEED_AMBIGUOUS;
out:
    walk_free(&w);
    return rc;
}

int cfs_rng_draw_search(const struct cfs_rng_problem *p, uint64_t first, uint64_t step,
                        uint64_t count, struct cfs_rng_result *res)
{
    return run_walk(p, first, step, count, res, NULL);
}

struct cfs_rng_search {
    struct cfs_rng_problem p; /* c points at the copy below */
    struct cfs_seed_constraint *c;
    uint64_t first, step, count;
    struct walk_control ctl;
    _Atomic(const char *) priority;
    atomic_bool finished;
    int rc;
    struct cfs_rng_result res;
    pthread_t thread;
};

static void *search_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-rng-offset");
    struct cfs_rng_search *s = arg;
    atomic_store(&s->priority, cfs_thread_lower_priority());
    s->rc = run_walk(&s->p, s->first, s->step, s->count, &s->res, &s->ctl);
    atomic_store(&s->ctl.done, s->count);
    atomic_store(&s->finished, true);
    return NULL;
}

int cfs_rng_search_start(const struct cfs_rng_problem *p, uint64_t first, uint64_t step,
                         uint64_t count, struct cfs_rng_search **out)
{
    struct cfs_rng_search *s = calloc(1, sizeof(*s));
    *out = NULL;
    if (!s)
        return -ENOMEM;
    s->c = malloc((p->nc ? p->nc : 1) * sizeof(*s->c));
    if (!s->c) {
        free(s);
        return -ENOMEM;
    }
    memcpy(s->c, p->c, p->nc * sizeof(*s->c));
    s->p = *p;
    s->p.c = s->c;
    s->first = first;
    s->step = step;
    s->count = count;
    atomic_init(&s->priority, "not started");
    int rc = -pthread_create(&s->thread, NULL, search_thread, s);
    if (rc < 0) {
        free(s->c);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

double cfs_rng_search_progress(const struct cfs_rng_search *s)
{
    uint64_t done = atomic_load(&((struct cfs_rng_search *)s)->ctl.done);
    return s->count ? (double)done / (double)s->count : 1.0;
}

bool cfs_rng_search_done(const struct cfs_rng_search *s)
{
    return atomic_load(&((struct cfs_rng_search *)s)->finished);
}

const char *cfs_rng_search_priority(const struct cfs_rng_search *s)
{
    return atomic_load(&((struct cfs_rng_search *)s)->priority);
}

void cfs_rng_search_cancel(struct cfs_rng_search *s)
{
    atomic_store(&s->ctl.cancel, true);
}

int cfs_rng_search_finish(struct cfs_rng_search *s, struct cfs_rng_result *res)
{
    pthread_join(s->thread, NULL);
    int rc = s->rc;
    *res = s->res;
    free(s->c);
    free(s);
    return rc;
}

uint64_t cfs_rng_epoch_draw(uint64_t offset, uint64_t epoch_words, bool persistent_workers,
                            uint64_t epoch)
{
    return offset + 2 + epoch * ((persistent_workers ? 2u : 4u) + epoch_words);
}

int cfs_rng_offset_find(const struct cfs_rng_problem *p, uint64_t max_offset,
                        struct cfs_rng_result *res)
{
    if (max_offset >= UINT64_MAX - 4) {
        memset(res, 0, sizeof(*res));
        return -EINVAL;
    }
    return cfs_rng_draw_search(p, 2, 1, max_offset + 1, res);
}

int cfs_rng_epoch_words_find(const struct cfs_rng_problem *p, uint64_t offset,
                             bool persistent_workers, uint32_t epoch, uint64_t max_words,
                             struct cfs_rng_result *res)
{
    uint64_t first;
    memset(res, 0, sizeof(*res));
    if (epoch == 0 || max_words >= UINT64_MAX / epoch ||
        __builtin_add_overflow(offset, 2 + (uint64_t)epoch * (persistent_workers ? 2u : 4u),
                               &first))
        return -EINVAL;
    return cfs_rng_draw_search(p, first, epoch, max_words + 1, res);
}
