/* Planning a window of epochs at a time (run_config.h): how long the window
 * is; that a window's plan holds what the whole run's plan holds about
 * those epochs, on the real torch-ddp model (the node's stream, its read
 * counts, the next use its Belady consumers see); that the next window's
 * owners of the files read in the epoch two windows share are the last
 * one's; and that the tracker of the next window takes the trainer's place
 * in the epoch the two share. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/options.h"
#include "clairfs/run_config.h"
#include "src/prefetch_i.h"

static void make(const char *list, uint64_t n, uint32_t nodes, uint32_t node,
                 struct cfs_run_config *c)
{
    struct cfs_options o;
    char err[256] = "";
    cfs_options_init(&o);
    ck_assert_msg(cfs_options_parse_list(&o, list, err, sizeof(err)) == 0, "%s: %s", list, err);
    struct cfs_run_inputs in = {.opts = &o, .nsamples = n, .nodes = nodes, .node = node};
    ck_assert_msg(cfs_run_config_make(&in, c, err, sizeof(err)) == 0, "make: %s", err);
}

static uint64_t *sizes_of(uint64_t n, uint64_t size)
{
    uint64_t *s = malloc(n * sizeof(*s));
    for (uint64_t i = 0; i < n; i++)
        s[i] = size;
    return s;
}

/* 1000 files of 1000 bytes (1 MB): a node of 4 reads 1 - (3/4)^h of them
 * in h epochs, and the window is the first h >= 4 at which that is twice
 * its capacity. */
START_TEST(window_is_the_fewest_epochs_that_read_twice_the_capacity)
{
    static const struct {
        const char *opts;
        uint32_t nodes;
        uint32_t end;
    } cases[] = {
        {"seed=1,world=4,epochs=90,ram=2M", 1, 90},      /* the tiers hold it all: the run */
        {"seed=1,world=4,epochs=90,ram=100K", 1, 4},     /* every file an epoch: the floor */
        {"seed=1,world=4,epochs=90,ram=300K", 4, 4},     /* (3/4)^4 = 0.32 <= 0.4 */
        {"seed=1,world=4,epochs=90,ram=400K", 4, 6},     /* (3/4)^6 = 0.18 <= 0.2 < 0.24 */
        {"seed=1,world=4,start_epoch=7,epochs=90,ram=400K", 4, 13},
        {"seed=1,world=4,epochs=5,ram=400K", 4, 5},      /* the run ends first */
    };
    uint64_t *sizes = sizes_of(1000, 1000);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cfs_run_config c;
        make(cases[i].opts, 1000, cases[i].nodes, 0, &c);
        c.ram = c.ram / 1024 * 1000; /* K means 1024: in the test's decimal bytes */
        ck_assert_msg(cfs_run_config_plan_end(&c, sizes) == cases[i].end, "%s: %u, not %u",
                      cases[i].opts, cfs_run_config_plan_end(&c, sizes), cases[i].end);
        ck_assert_uint_eq(cfs_run_config_plan_end(&c, NULL), c.epochs);
        struct cfs_plan_params pp;
        cfs_run_config_plan_params(&c, sizes, &pp);
        ck_assert_uint_eq(pp.epochs, cases[i].end);
        cfs_run_config_free(&c);
    }
    free(sizes);
}
END_TEST

static struct cfs_plan *plan_of(const struct cfs_run_config *c, const uint64_t *sizes,
                                uint32_t start, uint32_t end)
{
    struct cfs_plan_params pp;
    cfs_run_config_plan_params(c, sizes, &pp);
    pp.start_epoch = start;
    pp.epochs = end;
    struct cfs_plan *p = NULL;
    char err[256] = "";
    ck_assert_msg(cfs_plan_create(&pp, &p, err, sizeof(err)) == 0, "plan: %s", err);
    return p;
}

/* Every position of the whole plan w's stream from window v's first epoch
 * on: the window's position of it is pos - off. */
static void check_window(const struct cfs_plan *whole, const struct cfs_plan *v, uint64_t n)
{
    uint32_t rel0 = cfs_plan_start_epoch(v) - cfs_plan_start_epoch(whole);
    uint64_t off = cfs_plan_epoch_start(whole, rel0);
    uint64_t end = cfs_plan_epoch_start(whole, rel0 + cfs_plan_epoch_count(v));
    ck_assert_uint_eq(cfs_plan_epoch_start(v, cfs_plan_epoch_count(v)), end - off);
    uint32_t *count = calloc(n, sizeof(*count));
    struct cfs_plan_walk *ww = NULL, *wv = NULL;
    char err[256];
    ck_assert_int_eq(cfs_plan_walk_create(whole, &ww, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_plan_walk_create(v, &wv, err, sizeof(err)), 0);
    struct cfs_plan_access a, b;
    while (cfs_plan_walk_next(ww, &a) == 1 && a.pos < off)
        ;
    for (uint64_t pos = off; pos < end; pos++) {
        if (pos > off)
            ck_assert_int_eq(cfs_plan_walk_next(ww, &a), 1);
        ck_assert_int_eq(cfs_plan_walk_next(wv, &b), 1);
        ck_assert_uint_eq(a.pos, pos);
        ck_assert_uint_eq(b.pos, pos - off);
        ck_assert_uint_eq(a.sample, b.sample);
        ck_assert_uint_eq(a.epoch, b.epoch);
        count[a.sample]++;
        /* Belady's key: the next use, exact or an epoch's start, the same
         * inside the window; beyond it, the window says never. */
        bool xa, xb;
        uint64_t na = cfs_plan_walk_next_use(ww, a.sample, &xa);
        uint64_t nb = cfs_plan_walk_next_use(wv, a.sample, &xb);
        if (na != CFS_POS_NEVER && na < end) {
            ck_assert_uint_eq(nb, na - off);
            ck_assert(xa == xb);
        } else {
            ck_assert_uint_eq(nb, CFS_POS_NEVER);
        }
    }
    ck_assert_int_eq(cfs_plan_walk_next(wv, &b), 0);
    for (uint64_t f = 0; f < n; f++)
        ck_assert_uint_eq(cfs_plan_count(v, (uint32_t)f), count[f]);
    cfs_plan_walk_destroy(ww);
    cfs_plan_walk_destroy(wv);
    free(count);
}

/* n file sizes spread over 1 000-5 999 bytes. */
static uint64_t *spread_sizes(uint64_t n)
{
    uint64_t *sizes = malloc(n * sizeof(*sizes));
    ck_assert_ptr_nonnull(sizes);
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = 1000 + (i * 7919) % 5000;
    return sizes;
}

/* 30 000 files, 4 nodes of 2 ranks, 13 epochs: the windows the mount plans,
 * each beginning in the last epoch of the one before. */
START_TEST(windows_hold_what_the_whole_run_plan_holds)
{
    const uint64_t n = 30000;
    uint64_t *sizes = spread_sizes(n);
    struct cfs_run_config c;
    make("seed=42,world=8,epochs=13,ram=4M", n, 4, 1, &c);
    uint32_t end = cfs_run_config_plan_end(&c, sizes);
    ck_assert_msg(end > CFS_PLAN_WINDOW_MIN - 1 && end < 13, "window to %u", end);
    struct cfs_plan *whole = plan_of(&c, sizes, 0, 13);
    for (uint32_t start = 0; start < 13;) {
        c.start_epoch = start;
        uint32_t e = cfs_run_config_plan_end(&c, sizes);
        struct cfs_plan *v = plan_of(&c, sizes, start, e);
        check_window(whole, v, n);
        cfs_plan_destroy(v);
        start = e >= 13 ? 13 : e - 1;
    }
    cfs_plan_destroy(whole);
    cfs_run_config_free(&c);
    free(sizes);
}
END_TEST

/* 30 000 files, 4 nodes of 2 ranks, the windows [0, e) and [e - 1, ...):
 * planned with the first as its previous window, the second gives every
 * file read in epoch e - 1 the first one's owner (the node or none), on
 * every node alike; planned alone, it gives some of them another. */
START_TEST(next_window_keeps_the_owners_of_the_shared_epoch)
{
    const uint64_t n = 30000;
    uint64_t *sizes = spread_sizes(n);
    struct cfs_run_config c;
    make("seed=42,world=8,epochs=13,ram=4M", n, 4, 1, &c);
    uint32_t e = cfs_run_config_plan_end(&c, sizes);
    struct cfs_plan *first = plan_of(&c, sizes, 0, e);
    c.start_epoch = e - 1;
    uint32_t e2 = cfs_run_config_plan_end(&c, sizes);
    struct cfs_plan *alone = plan_of(&c, sizes, e - 1, e2);
    struct cfs_plan *next[2];
    for (uint32_t k = 0; k < 2; k++) {
        struct cfs_plan_params pp;
        cfs_run_config_plan_params(&c, sizes, &pp);
        pp.node = k ? 3 : 1;
        pp.prev = first;
        char err[256] = "";
        ck_assert_msg(cfs_plan_create(&pp, &next[k], err, sizeof(err)) == 0, "plan: %s", err);
    }
    uint64_t shared = 0, moved_alone = 0;
    for (uint32_t f = 0; f < n; f++) {
        ck_assert_uint_eq(cfs_plan_owner(next[0], f, NULL), cfs_plan_owner(next[1], f, NULL));
        if (cfs_plan_owner_epoch(next[0], f) != 0)
            continue;
        shared++;
        ck_assert_uint_eq(cfs_plan_owner(next[0], f, NULL), cfs_plan_owner(first, f, NULL));
        moved_alone += cfs_plan_owner(alone, f, NULL) != cfs_plan_owner(first, f, NULL);
    }
    ck_assert_uint_gt(shared, n / 2);
    ck_assert_uint_gt(moved_alone, 0);
    cfs_plan_destroy(next[0]);
    cfs_plan_destroy(next[1]);
    cfs_plan_destroy(alone);
    cfs_plan_destroy(first);
    cfs_run_config_free(&c);
    free(sizes);
}
END_TEST

/* The trainer half-way through epoch 3, the last of the window [0, 4): the
 * tracker of [3, 7) stands where the old one stands and predicts the rest
 * of the epoch and the next. */
START_TEST(next_window_tracker_takes_the_trainers_place)
{
    const uint64_t n = 5000;
    uint64_t *sizes = sizes_of(n, 100);
    struct cfs_run_config c;
    make("seed=3,world=2,epochs=20,ram=64K", n, 1, 0, &c);
    struct pf_track_params tp = {.window = c.window};
    cfs_run_config_plan_params(&c, sizes, &tp.plan);
    ck_assert_uint_eq(tp.plan.epochs, 4);
    struct pf_track *old = NULL, *t = NULL;
    char err[256] = "";
    ck_assert_msg(pf_track_create(&tp, &old, err, sizeof(err)) == 0, "%s", err);
    struct cfs_plan *whole = plan_of(&c, sizes, 0, 5);
    struct cfs_plan_walk *w = NULL;
    ck_assert_int_eq(cfs_plan_walk_create(whole, &w, err, sizeof(err)), 0);
    struct cfs_plan_access a;
    uint64_t half = cfs_plan_epoch_start(whole, 3) + n / 2;
    struct pf_obs o;
    while (cfs_plan_walk_next(w, &a) == 1 && a.pos < half) {
        pf_track_open(old, a.sample, &o);
        ck_assert(o.hit);
    }
    c.start_epoch = 3;
    cfs_run_config_plan_params(&c, sizes, &tp.plan);
    ck_assert_msg(pf_track_create(&tp, &t, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(pf_track_follow(t, old), 0);
    uint64_t pos;
    uint32_t epoch;
    pf_track_position(t, &pos, &epoch, NULL);
    ck_assert_uint_eq(epoch, 3);
    ck_assert_uint_eq(pos, n / 2);
    /* The rest of epoch 3 and epoch 4, predicted one after the other. */
    do {
        uint32_t s;
        bool consumed;
        ck_assert_int_eq(pf_track_sample_at(t, pos, &s, &consumed), 1);
        ck_assert_uint_eq(s, a.sample);
        ck_assert(!consumed);
        pf_track_open(t, a.sample, &o);
        ck_assert(o.hit);
        pos++;
    } while (cfs_plan_walk_next(w, &a) == 1);
    pf_track_position(t, &pos, &epoch, NULL);
    ck_assert_uint_eq(epoch, 5);
    cfs_plan_walk_destroy(w);
    cfs_plan_destroy(whole);
    pf_track_destroy(t);
    pf_track_destroy(old);
    cfs_run_config_free(&c);
    free(sizes);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_window");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, window_is_the_fewest_epochs_that_read_twice_the_capacity);
    tcase_add_test(tc, windows_hold_what_the_whole_run_plan_holds);
    tcase_add_test(tc, next_window_keeps_the_owners_of_the_shared_epoch);
    tcase_add_test(tc, next_window_tracker_takes_the_trainers_place);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
