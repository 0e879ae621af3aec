/* Simulated trainers for the identification tests: the opens that every
 * rank's DataLoader workers make, from the exact sampler models. */
#ifndef CLAIRFS_TEST_IDENTIFY_FIXTURE_H
#define CLAIRFS_TEST_IDENTIFY_FIXTURE_H

#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/types.h>

#include "clairfs/identify.h"
#include "clairfs/sampler.h"

/* A simulated trainer on one node. */
struct trainer {
    enum cfs_sampler_kind kind;
    uint64_t seed;
    uint32_t n, world, batch, workers;
    /* this node's ranks: rank_first, + rank_stride, ... (0 or 1: a block) */
    uint32_t rank_first, ranks, rank_stride;
    bool persistent, drop_last, drop_last_batch;
    uint32_t first_epoch, epochs;
    uint64_t rng_offset; /* the drawn-seed kinds' words before the loader */
};

struct opens {
    uint32_t *s;
    pid_t *pid, *ppid;
    size_t len, cap;
};

static inline void push(struct opens *o, uint32_t s, pid_t pid, pid_t ppid)
{
    if (o->len == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 1024;
        o->s = realloc(o->s, o->cap * sizeof(*o->s));
        o->pid = realloc(o->pid, o->cap * sizeof(*o->pid));
        o->ppid = realloc(o->ppid, o->cap * sizeof(*o->ppid));
        ck_assert(o->s && o->pid && o->ppid);
    }
    o->s[o->len] = s, o->pid[o->len] = pid, o->ppid[o->len] = ppid;
    o->len++;
}

static inline void opens_free(struct opens *o)
{
    free(o->s);
    free(o->pid);
    free(o->ppid);
}

/* Rank processes are 1000 + r (children of the launcher, 999); worker w
 * of rank r is 2000 + 100 r + w, plus 10000 per epoch when workers are not
 * persistent.  Per epoch, every reader's stream is produced, then the
 * readers' opens are interleaved one at a time (round robin), up to max.
 * detectron2's loader is one iterator over the stream: its workers live
 * for the run and take the batches round robin with the count running on
 * across the epochs. */
static inline struct opens simulate(const struct trainer *t, size_t max)
{
    struct cfs_sampler_params sp = {.kind = t->kind,
                                    .seed = t->seed,
                                    .n = t->n,
                                    .world = t->world,
                                    .batch = t->batch,
                                    .drop_last = t->drop_last,
                                    .drop_last_batch = t->drop_last_batch,
                                    .persistent_workers = t->persistent,
                                    .rng_offset = t->rng_offset};
    struct cfs_sampler *s;
    char err[256];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    struct opens o = {0};
    uint32_t readers = t->ranks * (t->workers ? t->workers : 1);
    uint32_t stride = t->rank_stride ? t->rank_stride : 1;
    bool one_iter = t->kind == CFS_SAMPLER_DETECTRON2;
    uint64_t *ran = calloc(t->ranks, sizeof(*ran)); /* a rank's indices so far (one_iter) */
    uint32_t **stream = calloc(readers, sizeof(*stream));
    size_t *len = calloc(readers, sizeof(*len)), *at = calloc(readers, sizeof(*at));
    for (uint32_t e = t->first_epoch; e < t->first_epoch + t->epochs && o.len < max; e++) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
        for (uint32_t k = 0; k < readers; k++) {
            uint32_t r = t->rank_first + k / (t->workers ? t->workers : 1) * stride;
            uint32_t w = t->workers ? k % t->workers : 0;
            uint64_t rl = cfs_sampler_rank_len(s, e, r),
                     from = one_iter ? ran[k / (t->workers ? t->workers : 1)] : 0;
            stream[k] = realloc(stream[k], (rl + 1) * sizeof(**stream));
            len[k] = 0, at[k] = 0;
            for (uint64_t j = 0; j < rl; j++)
                if (t->workers == 0 || ((from + j) / t->batch) % t->workers == w)
                    stream[k][len[k]++] = cfs_sampler_rank_at(s, r, j);
        }
        for (uint32_t l = 0; one_iter && l < t->ranks; l++)
            ran[l] += cfs_sampler_rank_len(s, e, t->rank_first + l * stride);
        for (bool any = true; any && o.len < max;) {
            any = false;
            for (uint32_t k = 0; k < readers && o.len < max; k++) {
                if (at[k] == len[k])
                    continue;
                any = true;
                uint32_t r = t->rank_first + k / (t->workers ? t->workers : 1) * stride;
                uint32_t w = t->workers ? k % t->workers : 0;
                pid_t pid =
                    t->workers
                        ? (pid_t)(2000 + 100 * r + w + (t->persistent || one_iter ? 0 : 10000 * e))
                        : (pid_t)(1000 + r);
                pid_t ppid = t->workers ? (pid_t)(1000 + r) : 999;
                push(&o, stream[k][at[k]++], pid, ppid);
            }
        }
    }
    for (uint32_t k = 0; k < readers; k++)
        free(stream[k]);
    free(stream);
    free(len);
    free(at);
    free(ran);
    cfs_sampler_destroy(s);
    return o;
}

/* Simulated readers are no processes: none runs (as a later epoch's
 * workers find their rank's earlier ones, ended). */
static inline bool no_process(void *arg, pid_t pid)
{
    (void)arg, (void)pid;
    return false;
}

/* A clock the test steps (cfs_identify_params.now): the module's notion of
 * when the opens came moves only when the test says, never with how fast
 * a loaded host ran the test. */
struct fake_clock {
    _Atomic double seconds;
};

static inline double fake_now(void *arg)
{
    return atomic_load(&((struct fake_clock *)arg)->seconds);
}

/* Only the test's thread steps it. */
static inline void fake_clock_advance(struct fake_clock *c, double seconds)
{
    atomic_store(&c->seconds, atomic_load(&c->seconds) + seconds);
}

static inline struct cfs_identify_params params(uint32_t n, uint64_t seed, uint64_t range)
{
    /* The torch-global walk (test_identify_global.c) kept short: a
     * registered seed that fits no other kind would walk 2^25 offsets. */
    return (struct cfs_identify_params){.n = n,
                                        .nodes = 1,
                                        .global_max_offset = 4096,
                                        .seed_first = (uint32_t)seed - (uint32_t)(range / 2),
                                        .seed_count = range,
                                        .process_alive = no_process};
}

static inline int identify(const struct cfs_identify_params *p, const struct opens *o,
                           struct cfs_identified *id)
{
    char err[256] = "";
    int rc = cfs_identify_offline(p, o->s, o->pid, o->ppid, o->len, id, err, sizeof(err));
    ck_assert_msg(rc == 0 || rc == -ENOENT, "identify: %d %s", rc, err);
    return rc;
}

#endif
