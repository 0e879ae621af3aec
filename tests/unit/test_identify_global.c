/* Order identification of torch-global trainers from a registered seed:
 * opens simulated from the exact model (clairfs/sampler.h: seed S, K words
 * drawn building the model, G words an epoch outside the loader) - the
 * DataLoader's workers reading their batches, interleaved as processes
 * race - are identified as torch-global with the right K and G; epoch 0
 * alone gives K with G unknown; the module's thread gives K, then G once
 * epoch 1 begins; a K beyond the searched bound is not identified, never
 * misnamed.  Every case searches K up to 4096 (the mount: 2^25). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/sampler.h"

#define N 1000u
#define SEED 20240601u
#define MAX_K 4096u

struct trainer {
    uint64_t seed, offset, words;
    uint32_t batch, workers, epochs;
    bool persistent;
};

struct opens {
    uint32_t *s;
    pid_t *pid, *ppid;
    size_t len;
};

/* One rank (pid 1000) whose worker w is pid 2000 + w, plus 10000 an epoch
 * when not persistent; the workers' opens interleave one at a time. */
static struct opens simulate(const struct trainer *t)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_GLOBAL,
                                    .seed = t->seed,
                                    .n = N,
                                    .world = 1,
                                    .batch = t->batch,
                                    .persistent_workers = t->persistent,
                                    .rng_offset = t->offset,
                                    .rng_epoch_words = t->words};
    struct cfs_sampler *s;
    char err[256];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    size_t cap = (size_t)N * t->epochs;
    struct opens o = {malloc(cap * sizeof(uint32_t)), malloc(cap * sizeof(pid_t)),
                      malloc(cap * sizeof(pid_t)), 0};
    ck_assert(o.s && o.pid && o.ppid);
    uint32_t readers = t->workers ? t->workers : 1;
    for (uint32_t e = 0; e < t->epochs; e++) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
        uint64_t len = cfs_sampler_rank_len(s, e, 0), next[8] = {0};
        ck_assert_uint_le(readers, 8);
        for (uint32_t w = 0; w < readers; w++)
            next[w] = (uint64_t)w * t->batch;
        for (bool any = true; any;) {
            any = false;
            for (uint32_t w = 0; w < readers; w++) {
                if (next[w] >= len)
                    continue;
                any = true;
                o.s[o.len] = cfs_sampler_rank_at(s, 0, next[w]);
                o.pid[o.len] =
                    t->workers ? (pid_t)(2000 + w + (t->persistent ? 0 : 10000 * e)) : 1000;
                o.ppid[o.len] = t->workers ? 1000 : 999;
                o.len++;
                next[w]++;
                if (t->workers && next[w] % t->batch == 0)
                    next[w] += (uint64_t)(t->workers - 1) * t->batch;
            }
        }
    }
    cfs_sampler_destroy(s);
    return o;
}

static void opens_free(struct opens *o)
{
    free(o->s);
    free(o->pid);
    free(o->ppid);
}

/* seed=S registered, nothing else (the default kind, torch-ddp). */
static struct cfs_sampler_params hint = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = SEED, .n = N};

static struct cfs_identify_params params(void)
{
    /* the general scan covers a few seeds far from any private seed */
    return (struct cfs_identify_params){.n = N,
                                        .nodes = 1,
                                        .hint = &hint,
                                        .hint_has_seed = true,
                                        .seed_first = 1u << 31,
                                        .seed_count = 1024,
                                        .global_max_offset = MAX_K};
}

static int identify(const struct opens *o, size_t len, struct cfs_identified *id)
{
    struct cfs_identify_params p = params();
    char err[256] = "";
    int rc = cfs_identify_offline(&p, o->s, o->pid, o->ppid, len, id, err, sizeof(err));
    ck_assert_msg(rc == 0 || rc == -ENOENT, "identify: %d %s", rc, err);
    return rc;
}

static const uint64_t offsets[] = {0, 7, 3001}, words[] = {0, 2, 10};

START_TEST(offset_and_epoch_words_are_found)
{
    struct trainer t = {.seed = SEED,
                        .offset = offsets[_i / 3],
                        .words = words[_i % 3],
                        .batch = 8,
                        .workers = 2,
                        .epochs = 3};
    struct opens o = simulate(&t);
    struct cfs_identified id;
    ck_assert_msg(identify(&o, o.len, &id) == 0, "K=%llu G=%llu: %s", (unsigned long long)t.offset,
                  (unsigned long long)t.words, id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH_GLOBAL);
    ck_assert_uint_eq(id.sampler.seed, SEED);
    ck_assert(id.seed_high_known);
    ck_assert_uint_eq(id.sampler.rng_offset, t.offset);
    ck_assert(id.epoch_words_known);
    ck_assert_uint_eq(id.sampler.rng_epoch_words, t.words);
    ck_assert(!id.sampler.persistent_workers);
    ck_assert_uint_eq(id.sampler.world, 1);
    ck_assert_uint_eq(id.sampler.batch, 8);
    ck_assert_uint_eq(id.workers, 2);
    ck_assert_uint_eq(id.epoch, 2);
    ck_assert_ptr_nonnull(strstr(id.text, "torch-global seed=20240601 rng_offset="));
    opens_free(&o);
}
END_TEST

/* Two words per element of a dropout each step: G in the hundreds of
 * thousands, past the walk's first chunks and past the synchronous ones. */
/* A dataset in another index order of the root (timm's natural sort, say)
 * shuffled from the global generator: the stream's indices are the
 * candidate order's, the opens observed in the root's first order.  Found
 * in that order, and named. */
START_TEST(found_in_a_candidate_order)
{
    struct trainer t = {.seed = SEED, .offset = 7, .words = 2, .batch = 8, .workers = 2,
                        .epochs = 3};
    struct opens o = simulate(&t);
    /* index[x]: the candidate order's index of the sample observed as x */
    uint32_t *index = malloc(N * sizeof(*index)), *observed = malloc(N * sizeof(*observed));
    ck_assert(index && observed);
    for (uint32_t x = 0; x < N; x++)
        index[x] = (x * 7 + 3) % N;
    for (uint32_t x = 0; x < N; x++)
        observed[index[x]] = x;
    for (size_t i = 0; i < o.len; i++)
        o.s[i] = observed[o.s[i]];
    const uint32_t *const orders[] = {index};
    const char *const names[] = {"timm"};
    struct cfs_identify_params p = params();
    p.orders = orders, p.order_names = names, p.norders = 1;
    struct cfs_identified id;
    char err[256] = "";
    ck_assert_msg(cfs_identify_offline(&p, o.s, o.pid, o.ppid, o.len, &id, err, sizeof(err)) == 0,
                  "%s %s", err, id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH_GLOBAL);
    ck_assert_uint_eq(id.sampler.rng_offset, t.offset);
    ck_assert_uint_eq(id.sampler.rng_epoch_words, t.words);
    ck_assert_uint_eq(id.order, 1);
    ck_assert_msg(strstr(id.text, " order=timm "), "%s", id.text);
    free(index);
    free(observed);
    opens_free(&o);
}
END_TEST

START_TEST(large_epoch_words)
{
    static const uint64_t large[] = {384000, (1u << 20) + 5};
    struct trainer t = {.seed = SEED, .offset = 1348, .words = large[_i], .batch = 8};
    t.workers = 2, t.epochs = 2, t.persistent = _i == 1;
    struct opens o = simulate(&t);
    struct cfs_identified id;
    ck_assert_msg(identify(&o, o.len, &id) == 0, "%s", id.text);
    ck_assert_uint_eq(id.sampler.rng_offset, 1348);
    ck_assert(id.epoch_words_known);
    ck_assert_uint_eq(id.sampler.rng_epoch_words, t.words);
    ck_assert(id.sampler.persistent_workers == t.persistent);
    opens_free(&o);
}
END_TEST

START_TEST(persistent_workers_and_no_workers)
{
    struct trainer t = {.seed = SEED, .offset = 7, .words = 10, .batch = 8, .epochs = 3};
    t.workers = _i == 0 ? 2 : 0;
    t.persistent = _i == 0;
    struct opens o = simulate(&t);
    struct cfs_identified id;
    ck_assert_msg(identify(&o, o.len, &id) == 0, "%s", id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH_GLOBAL);
    ck_assert_uint_eq(id.sampler.rng_offset, 7);
    ck_assert_uint_eq(id.sampler.rng_epoch_words, 10);
    ck_assert(id.epoch_words_known);
    ck_assert_uint_eq(id.workers, t.workers);
    if (t.workers)
        ck_assert(id.sampler.persistent_workers);
    opens_free(&o);
}
END_TEST

START_TEST(epoch_0_alone_gives_the_offset)
{
    struct trainer t = {.seed = SEED, .offset = 3001, .words = 10, .batch = 8, .workers = 2};
    t.epochs = 1;
    struct opens o = simulate(&t);
    struct cfs_identified id;
    size_t len = _i == 0 ? 64 : o.len; /* a few batches, or the whole epoch */
    ck_assert_msg(identify(&o, len, &id) == 0, "%s", id.text);
    ck_assert_int_eq(id.sampler.kind, CFS_SAMPLER_TORCH_GLOBAL);
    ck_assert_uint_eq(id.sampler.rng_offset, 3001);
    ck_assert(!id.epoch_words_known);
    ck_assert_uint_eq(id.epoch, 0);
    ck_assert_uint_eq(id.opens, len);
    ck_assert_ptr_nonnull(strstr(id.text, "rng_epoch_words=? (epoch 0 only)"));
    opens_free(&o);
}
END_TEST

START_TEST(an_offset_beyond_the_bound_is_not_identified)
{
    struct trainer t = {.seed = SEED, .offset = MAX_K + 1 + 100 * _i, .words = 2};
    t.batch = 8, t.workers = 2, t.epochs = 2;
    struct opens o = simulate(&t);
    struct cfs_identified id;
    ck_assert_msg(identify(&o, o.len, &id) == -ENOENT, "K=%llu: %s", (unsigned long long)t.offset,
                  id.text);
    opens_free(&o);
}
END_TEST

/* The module's thread: epoch 0 gives K (G unknown), epoch 1 G. */
struct seen {
    pthread_mutex_t mu;
    int calls;
    struct cfs_identified last;
};

static void on_identified(void *arg, const struct cfs_identified *id)
{
    struct seen *s = arg;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    s->last = *id;
    pthread_mutex_unlock(&s->mu);
}

static bool wait_calls(struct seen *s, int calls)
{
    for (int i = 0; i < 3000; i++) {
        pthread_mutex_lock(&s->mu);
        bool done = s->calls >= calls;
        pthread_mutex_unlock(&s->mu);
        if (done)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    return false;
}

START_TEST(the_thread_finds_the_offset_then_the_epoch_words)
{
    struct trainer t = {.seed = SEED, .offset = 3001, .words = 10, .batch = 8, .workers = 2};
    t.epochs = 2;
    struct opens o = simulate(&t);
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct cfs_identify_params p = params();
    p.on_identified = on_identified, p.cb_arg = &s;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (size_t i = 0; i < N; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert(wait_calls(&s, 1));
    ck_assert_int_eq(s.last.sampler.kind, CFS_SAMPLER_TORCH_GLOBAL);
    ck_assert_uint_eq(s.last.sampler.rng_offset, 3001);
    ck_assert(!s.last.epoch_words_known);
    for (size_t i = N; i < o.len; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_msg(wait_calls(&s, 2), "%s", s.last.text);
    ck_assert(s.last.epoch_words_known);
    ck_assert_uint_eq(s.last.sampler.rng_epoch_words, 10);
    ck_assert_uint_eq(s.last.epoch, 1);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_IDENTIFIED);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

static Suite *identify_global_suite(void)
{
    Suite *s = suite_create("identify_global");
    TCase *t = tcase_create("torch-global");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, offset_and_epoch_words_are_found, 0, 9);
    tcase_add_loop_test(t, persistent_workers_and_no_workers, 0, 2);
    tcase_add_loop_test(t, large_epoch_words, 0, 2);
    tcase_add_loop_test(t, epoch_0_alone_gives_the_offset, 0, 2);
    tcase_add_loop_test(t, an_offset_beyond_the_bound_is_not_identified, 0, 2);
    tcase_add_test(t, the_thread_finds_the_offset_then_the_epoch_words);
    tcase_add_test(t, found_in_a_candidate_order);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_global_suite());
}
