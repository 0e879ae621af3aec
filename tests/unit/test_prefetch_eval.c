/* The evaluation pass beside the training order (prefetch_eval.c) on the
 * data path: the fixture's first 80 samples are the training root, the
 * last 40 a validation folder read in order after every epoch at stride 2
 * (DistributedSampler(shuffle=False) at world 2, its ranks interleaved).
 * The training order (torch-ddp seed 7 over the root's 80) is adopted with
 * the root's map after epoch 0, and the pass named.  Then, with the RAM
 * tier holding everything: the validation files are staged before their
 * first pass and kept after it (never read from the source, never dropped
 * at a release); the pass in which it was named is not counted, each later
 * pass is 40 validation hits and no miss; the training order's hits and
 * misses count the training opens alone, and it is never dropped. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/prefetch.h"
#include "prefetch_fixture.h"

#define NTRAIN 80
#define NVAL (NFILES - NTRAIN)

static void fake_observe(void *arg, uint32_t sample, pid_t pid, pid_t ppid)
{
    (void)sample, (void)pid, (void)ppid;
    atomic_fetch_add((atomic_uint *)arg, 1);
}

static void fake_restart(void *arg)
{
    (void)arg;
    ck_abort_msg("the training order was dropped");
}

static enum cfs_identify_state fake_state(void *arg, struct cfs_identified *out)
{
    (void)arg, (void)out;
    return CFS_IDENTIFY_LEARNING;
}

static const struct cfs_identify_ops fake_ops = {fake_observe, fake_restart, fake_state};

static void train_epoch(struct cfs_prefetch *pf, struct fixture *fx, uint32_t e)
{
    uint32_t *s = epoch_stream(NTRAIN, 7, e); /* root indices: the map is the identity */
    for (uint32_t i = 0; i < NTRAIN; i++)
        read_check(pf, fx, s[i]);
    free(s);
}

/* The validation pass: rank 0 reads 0, 2, 4, ..., rank 1 reads 1, 3, ...,
 * two at a time each, the ranks taking turns. */
static void val_pass(struct cfs_prefetch *pf, struct fixture *fx)
{
    for (uint32_t b = 0; b < NVAL; b += 4)
        for (uint32_t k = 0; k < 4; k++)
            read_check(pf, fx, NTRAIN + b + (k % 2) * 1 + (k / 2) * 2);
}

static unsigned val_resident(struct cfs_prefetch *pf, struct fixture *fx)
{
    unsigned held = 0;
    char state[32];
    for (uint32_t i = NTRAIN; i < NFILES; i++) {
        ck_assert_int_eq(cfs_prefetch_state(pf, cfs_catalog_sample_entry(fx->cat, i), state,
                                            sizeof(state)),
                         0);
        held += strcmp(state, "ram") == 0;
    }
    return held;
}

/* A prefetcher over the fixture that has read epoch 0 of the training
 * order, then adopted that order (torch-ddp seed 7 on train, the identity
 * map) as the identification would. */
static struct cfs_prefetch *train_identified(struct fixture *fx, struct cfs_metrics *m,
                                             atomic_uint *observed)
{
    fixture_init(fx);
    struct cfs_prefetch *pf = make_pf(fx, "ram=16M,no_sweep,epochs=4", m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, observed, NULL);
    static uint32_t train_map[NTRAIN];
    for (uint32_t i = 0; i < NTRAIN; i++)
        train_map[i] = i;
    train_epoch(pf, fx, 0);
    char err[256];
    struct cfs_identified id = {
        .sampler = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = 7, .n = NTRAIN, .world = 1,
                    .batch = 1},
        .rank_first = 0, .rank_count = 1, .epoch = 0, .opens = NTRAIN, .seconds = 1,
        .seed_high_known = true,
    };
    snprintf(id.text, sizeof(id.text), "torch-ddp seed=7 world=1 epoch 0 after 80 opens");
    ck_assert_msg(cfs_prefetch_adopt_at(pf, &id, "train", train_map, NTRAIN, err, sizeof(err)) ==
                      0,
                  "%s", err);
    return pf;
}

START_TEST(validation_pass_predicted_kept_and_counted_apart)
{
    struct fixture fx;
    struct cfs_metrics m;
    atomic_uint observed = 0;
    struct cfs_prefetch *pf = train_identified(&fx, &m, &observed);
    uint32_t val_map[NVAL];
    for (uint32_t i = 0; i < NVAL; i++)
        val_map[i] = NTRAIN + i;
    ck_assert_int_eq(cfs_prefetch_predict_pass(pf, "val", val_map, NVAL, 2), 0);
    ck_assert_int_eq(cfs_prefetch_predict_pass(pf, "val", val_map, NVAL, 2), 0); /* once */
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert_uint_eq(val_resident(pf, &fx), NVAL); /* staged into free room */

    val_pass(pf, &fx); /* the pass it was named in: not counted */
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_EVAL_HIT), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_EVAL_MISS), 0);
    for (uint32_t e = 1; e < 4; e++) {
        ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
        train_epoch(pf, &fx, e);
        ck_assert_uint_eq(val_resident(pf, &fx), NVAL); /* kept through the epoch */
        val_pass(pf, &fx);
        ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_EVAL_HIT), e * NVAL);
        ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_EVAL_MISS), 0);
    }
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 3 * NTRAIN);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    /* Epoch 0's training files alone came from the source. */
    ck_assert_uint_eq(mget(&m, CFS_M_READS_PFS), NTRAIN);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), 3 * NTRAIN + 4 * NVAL);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert(st.adopted);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Two evaluation folders read after every epoch, each a pass of its own:
 * val (the first 20 of the 40, at stride 2) then test (the last 20, in
 * order, one process): both predicted at once, each pass after the one
 * they were named in 20 hits, no miss. */
START_TEST(two_validation_roots_predicted_at_once)
{
    struct fixture fx;
    struct cfs_metrics m;
    atomic_uint observed = 0;
    struct cfs_prefetch *pf = train_identified(&fx, &m, &observed);
    uint32_t val_map[NVAL / 2], test_map[NVAL / 2];
    for (uint32_t i = 0; i < NVAL / 2; i++)
        val_map[i] = NTRAIN + i, test_map[i] = NTRAIN + NVAL / 2 + i;
    ck_assert_int_eq(cfs_prefetch_predict_pass(pf, "val", val_map, NVAL / 2, 2), 0);
    ck_assert_int_eq(cfs_prefetch_predict_pass(pf, "test", test_map, NVAL / 2, 1), 0);
    for (uint32_t e = 0; e < 4; e++) {
        ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
        if (e)
            train_epoch(pf, &fx, e);
        ck_assert_uint_eq(val_resident(pf, &fx), NVAL); /* both staged, both kept */
        for (uint32_t b = 0; b < NVAL / 2; b += 4)
            for (uint32_t k = 0; k < 4; k++)
                read_check(pf, &fx, NTRAIN + b + (k % 2) * 1 + (k / 2) * 2);
        for (uint32_t i = 0; i < NVAL / 2; i++)
            read_check(pf, &fx, NTRAIN + NVAL / 2 + i);
        ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_EVAL_HIT), e * NVAL);
        ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_EVAL_MISS), 0);
    }
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 3 * NTRAIN);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefetch_eval");
    TCase *tc = tcase_create("eval");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, validation_pass_predicted_kept_and_counted_apart);
    tcase_add_test(tc, two_validation_roots_predicted_at_once);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
