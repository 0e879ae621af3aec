/* The learned order on the data path, without the identify module (a fake
 * behind struct cfs_identify_ops records what the prefetcher tells it:
 * adopt_fixture.h).
 * Adoption of a known identification (torch-ddp seed 7) on a prefetcher
 * made without a seed predicts every later open, with the epoch's opens
 * before it replayed into the tracker (the epoch gauge proves the count);
 * a registered seed is checked, never replaced (confirmed once the opens
 * show every rank planned for the node; replaced by torch-global of
 * it, with its K and G, when registered so or as the default kind; the
 * drops are test_prefetch_drop.c's); one epoch's order ends with
 * its epoch, and a lasting one after it is planned the mount's epochs;
 * every open of a sample is counted once, as a hit, a miss or unplanned
 * (no order covers it), and the gauge says 1 only while an order predicts;
 * sweep=auto holds the sweep while the search reports little of a core. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adopt_fixture.h"
#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/prefetch.h"
#include "clairfs/sampler.h"
#include "prefetch_fixture.h"
#include "src/prefetch_i.h"

/* Learn `learned` opens of epoch 0 (identified after `at` of them: the
 * module's epoch is the last open's, so 120 of 120 is epoch 0 complete),
 * adopt, then read the rest of epoch 0 and all of epoch 1: every open
 * after adoption is a predicted RAM hit, every file fetched once, and the
 * epoch advances at the right count (without the replay it would lag). */
static const uint32_t learn_cases[][2] = {{40, 30}, {120, 120}, {120, 100}};

START_TEST(adopt_predicts_as_registered)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256], want[128];
    uint32_t learned = learn_cases[_i][0], at = learn_cases[_i][1];
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=3", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    ck_assert(cfs_prefetch_learning(pf));
    order_text_starts(pf, "learning (0 opens)");
    uint32_t *e0 = epoch_stream(NFILES, 7, 0);
    for (uint32_t i = 0; i < learned; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    ck_assert_uint_eq(fake.n, learned);
    for (uint32_t i = 0; i < learned; i++) {
        ck_assert_uint_eq(fake.samples[i], e0[i]);
        ck_assert_int_eq(fake.pids[i], trainer.pid);
        ck_assert_int_eq(fake.ppids[i], trainer.ppid);
    }
    snprintf(want, sizeof(want), "learning (%u opens)", learned);
    order_text_starts(pf, want);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT) + mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);

    struct cfs_identified id = ddp7(1, 0, at);
    ck_assert_msg(cfs_prefetch_adopt(pf, &id, err, sizeof(err)) == 0, "%s", err);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert(st.planned && st.adopted);
    ck_assert(!cfs_prefetch_learning(pf));
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    snprintf(want, sizeof(want), "identified torch-ddp seed=7 world=1 epoch 0 after %u opens", at);
    order_text_starts(pf, want);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), learned == NFILES ? 1 : 0);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);

    for (uint32_t i = learned; i < NFILES; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 1);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    replay_epoch(pf, &fx, 7, 1);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 2);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), NFILES - learned + NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_PFS), learned);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), NFILES - learned + NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    ck_assert_uint_eq(fake.n, learned); /* not observed after adoption */
    ck_assert_uint_eq(fake.restarts, 0);
    free(e0);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* The trainer reads epochs 0 .. epochs - 1 of torch-ddp seed 7 whole,
 * then the first `into` opens of epoch `epochs`. */
static void read_until(struct cfs_prefetch *pf, struct fixture *fx, uint32_t epochs,
                       uint32_t into)
{
    for (uint32_t e = 0; e <= epochs; e++) {
        uint32_t *s = epoch_stream(NFILES, 7, e);
        for (uint32_t i = 0; i < (e < epochs ? NFILES : into); i++)
            read_check_as(pf, fx, s[i], &trainer);
        free(s);
    }
}

/* Identified epochs after the opens it was found from (a scan at idle
 * priority outlasting epochs): the ring of opens (2 n + 4096) no longer
 * holds epoch 0's start.  The replay skips the epochs the ring lost and
 * starts at an epoch's start, so the tracker stands in the trainer's epoch
 * at its count: every later open is predicted.  (Replayed from the ring's
 * oldest open, mid-epoch, the count was off by more than the window and
 * the order was dropped.) */
START_TEST(adopt_after_more_epochs_than_the_ring_holds)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    const uint32_t epochs = 40, into = 50; /* 4850 opens > the ring's 4336 */
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=60", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    read_until(pf, &fx, epochs, into);
    ck_assert_uint_gt((uint64_t)epochs * NFILES + into, 2 * NFILES + 4096);
    struct cfs_identified id = ddp7(1, 0, 30); /* from epoch 0's first 30 opens */
    ck_assert_msg(cfs_prefetch_adopt(pf, &id, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), epochs);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    uint32_t *s = epoch_stream(NFILES, 7, epochs);
    for (uint32_t i = into; i < NFILES; i++)
        read_check_as(pf, &fx, s[i], &trainer);
    free(s);
    s = epoch_stream(NFILES, 7, epochs + 1);
    for (uint32_t i = 0; i < NFILES; i++)
        read_check_as(pf, &fx, s[i], &trainer);
    free(s);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), epochs + 2);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), NFILES - into + NFILES);
    ck_assert_uint_eq(fake.restarts, 0);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Identified after more epochs than the plan spans (a search that
 * outlasted them: 280 epochs of a 10 000-file tree read from RAM): the
 * plan begins at the epoch before the trainer's, not at the identified
 * one, whose span would end before the trainer's epoch - the tracker
 * could not stand there and the order was dropped at once.  Every open
 * after the adoption is predicted, past the first plan's epochs too. */
START_TEST(adopt_after_more_epochs_than_the_plan_spans)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    const uint32_t epochs = 40, into = 50, span = 30;
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=30", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    read_until(pf, &fx, epochs, into);
    struct cfs_identified id = ddp7(1, 0, 30); /* from epoch 0's first 30 opens */
    id.epoch_opens = NFILES;
    ck_assert_msg(cfs_prefetch_adopt(pf, &id, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), epochs);
    ck_assert_uint_eq(pf->run.start_epoch, epochs - 1);
    ck_assert_uint_eq(pf->run.epochs, epochs - 1 + span);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    uint64_t after = 0;
    for (uint32_t e = epochs; e < epochs + 4; e++) {
        uint32_t *s = epoch_stream(NFILES, 7, e);
        for (uint32_t i = e == epochs ? into : 0; i < NFILES; i++, after++)
            read_check_as(pf, &fx, s[i], &trainer);
        free(s);
    }
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), epochs + 4);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), after);
    ck_assert_uint_eq(fake.restarts, 0);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* The adoption plans the trainer's epoch and the next first, then the
 * whole span: epochs past the first plan's are predicted too, the tracker
 * of the whole span standing where the first one stood, also when the
 * trainer is epochs ahead of the identification (more opens than the
 * ring holds).  Without the second plan the opens after epoch 1 (or
 * after the first plan's two epochs) would go unpredicted. */
static const uint32_t staged_cases[][2] = {{40, 30}, {12 * NFILES + 50, 30}};

START_TEST(staged_adoption_predicts_past_its_first_epochs)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    const uint32_t learned = staged_cases[_i][0], at = staged_cases[_i][1];
    const uint32_t last = 20; /* read to the end of this epoch */
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=30", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint32_t e = 0, i = 0, *s = epoch_stream(NFILES, 7, 0);
    for (uint32_t k = 0; k < learned; k++) {
        read_check_as(pf, &fx, s[i++], &trainer);
        if (i == NFILES) {
            free(s);
            s = epoch_stream(NFILES, 7, ++e);
            i = 0;
        }
    }
    struct cfs_identified id = ddp7(1, 0, at);
    id.epoch_opens = NFILES; /* as the module says it: staged */
    ck_assert_msg(cfs_prefetch_adopt(pf, &id, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    /* the whole span: 30 from epoch 0, or from the epoch before the
     * trainer's when it is further on */
    uint32_t start = learned / NFILES > 1 ? learned / NFILES - 1 : 0;
    ck_assert_uint_eq(pf->run.start_epoch, start);
    ck_assert_uint_eq(pf->run.epochs, start + 30);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), e);
    uint64_t after = 0;
    for (;;) {
        for (; i < NFILES; i++, after++)
            read_check_as(pf, &fx, s[i], &trainer);
        free(s);
        if (e == last)
            break;
        s = epoch_stream(NFILES, 7, ++e);
        i = 0;
    }
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), last + 1);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), after);
    ck_assert_uint_eq(fake.restarts, 0);
    ck_assert(!atomic_load(&pf->extending));
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* A registered seed is observed, checked against the identification, and
 * kept: the contradiction is named, the gauge says 0; a fitting
 * identification confirms it. */
START_TEST(registered_seed_is_checked_not_replaced)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "seed=7,ram=16M,epochs=3", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    ck_assert(cfs_prefetch_learning(pf));
    order_text_starts(pf, "registered torch-ddp seed=7 world=1");
    uint32_t *e0 = epoch_stream(NFILES, 7, 0);
    read_check_as(pf, &fx, e0[0], &trainer);
    free(e0);
    ck_assert_uint_eq(fake.n, 1);
    struct cfs_identified id = ddp7(2, 0, 1);
    ck_assert_msg(cfs_prefetch_adopt(pf, &id, err, sizeof(err)) == 0, "%s", err);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert(st.planned && !st.adopted);
    ck_assert_uint_eq(pf->run.world, 1);
    ck_assert(!cfs_prefetch_learning(pf));
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);
    order_text_starts(pf, "registered torch-ddp seed=7 world=1; registered world=1, but the "
                          "opens fit world=2");
    id = ddp7(1, 0, 1);
    ck_assert_int_eq(cfs_prefetch_adopt(pf, &id, err, sizeof(err)), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    order_text_starts(pf, "registered torch-ddp seed=7 world=1, confirmed by the opens");
    cfs_prefetch_stats(pf, &st);
    ck_assert(st.planned && !st.adopted);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* A node planned for ranks 0-1 whose first opens show rank 0 alone (its
 * workers open a few batches before rank 1's start) is not confirmed yet:
 * it observes on, and the identification that shows both ranks confirms. */
START_TEST(registered_ranks_confirmed_when_all_seen)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "seed=7,world=2,ram=16M,epochs=3", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    ck_assert_uint_eq(pf->run.ranks.count, 2);
    struct cfs_identified id = ddp7(2, 0, 32);
    ck_assert_int_eq(cfs_prefetch_adopt(pf, &id, err, sizeof(err)), 0);
    ck_assert(cfs_prefetch_learning(pf));
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);
    char text[400];
    cfs_prefetch_order_text(pf, text, sizeof(text));
    ck_assert_msg(strstr(text, "confirmed") == NULL, "order: \"%s\"", text);
    id.rank_count = 2;
    ck_assert_int_eq(cfs_prefetch_adopt(pf, &id, err, sizeof(err)), 0);
    ck_assert(!cfs_prefetch_learning(pf));
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    order_text_starts(pf, "registered torch-ddp seed=7 world=2, confirmed by the opens");
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* torch-global seed 7, K = 5, G = 3: epoch e's order of n samples. */
static uint32_t *global7_stream(uint32_t n, uint32_t epoch)
{
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_GLOBAL,
                                    .seed = 7,
                                    .n = n,
                                    .world = 1,
                                    .batch = 1,
                                    .rng_offset = 5,
                                    .rng_epoch_words = 3};
    struct cfs_sampler *s = NULL;
    char err[128];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, epoch), 0);
    uint32_t *out = malloc(n * sizeof(*out));
    for (uint64_t i = 0; i < n; i++)
        out[i] = cfs_sampler_rank_at(s, 0, i);
    cfs_sampler_destroy(s);
    return out;
}

/* seed=7 registered alone (the default kind) or with sampler=torch-global:
 * torch-global of seed 7 with the K and G the opens show is adopted and
 * predicts the next epoch exactly; registered as another kind (torch), the
 * registration is kept.  The same for a dataset root below the mount's
 * (cases 3-5: train, the even samples, with its map). */
START_TEST(registered_seed_refined_to_torch_global)
{
    static const char *opts[] = {"seed=7,ram=16M,epochs=3",
                                 "seed=7,sampler=torch-global,ram=16M,epochs=3",
                                 "seed=7,sampler=torch,ram=16M,epochs=3"};
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    fixture_init(&fx);
    bool rooted = _i >= 3;
    uint32_t n = rooted ? NFILES / 2 : NFILES, map[NFILES];
    for (uint32_t i = 0; i < NFILES; i++)
        map[i] = rooted ? 2 * i : i;
    struct cfs_prefetch *pf = make_pf(&fx, opts[_i % 3], &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint32_t *e0 = global7_stream(n, 0), *e1 = global7_stream(n, 1);
    for (uint32_t i = 0; i < n; i++)
        read_check_as(pf, &fx, map[e0[i]], &trainer);
    struct cfs_identified id = {
        .sampler = {.kind = CFS_SAMPLER_TORCH_GLOBAL,
                    .seed = 7,
                    .n = n,
                    .world = 1,
                    .batch = 1,
                    .rng_offset = 5,
                    .rng_epoch_words = 3},
        .rank_count = 1,
        .epoch = 0,
        .opens = n,
        .epoch_opens = n,
        .seed_high_known = true,
        .epoch_words_known = true,
    };
    snprintf(id.text, sizeof(id.text), "torch-global seed=7 rng_offset=5 rng_epoch_words=3");
    ck_assert_msg((rooted ? cfs_prefetch_adopt_at(pf, &id, "train", map, n, err, sizeof(err))
                          : cfs_prefetch_adopt(pf, &id, err, sizeof(err))) == 0,
                  "%s", err);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    if (_i % 3 == 2) {
        ck_assert(st.planned && !st.adopted);
        ck_assert_int_eq(pf->run.sampler.kind, CFS_SAMPLER_TORCH);
        order_text_starts(pf, "registered torch seed=7");
    } else {
        ck_assert(st.planned && st.adopted);
        ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
        order_text_starts(pf, rooted ? "identified train: torch-global seed=7 rng_offset=5"
                                     : "identified torch-global seed=7 rng_offset=5");
        uint64_t hit = mget(&m, CFS_M_PREDICTION_HIT), miss = mget(&m, CFS_M_PREDICTION_MISS);
        for (uint32_t i = 0; i < n; i++)
            read_check_as(pf, &fx, map[e1[i]], &trainer);
        ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT) - hit, n);
        ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS) - miss, 0);
    }
    free(e0);
    free(e1);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Identification off: nothing is observed, the stats say why. */
START_TEST(off_observes_nothing)
{
    struct fixture fx;
    struct cfs_metrics m;
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep", &m, NULL);
    cfs_prefetch_set_identify(pf, NULL, NULL, "off (-o no_identify)");
    ck_assert(!cfs_prefetch_learning(pf));
    read_check_as(pf, &fx, 3, &trainer);
    order_text_starts(pf, "not identified: off (-o no_identify)");
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* sweep=auto's brake, on the share of a core the search reports (a fake
 * here: the decision, not how a scheduler shares the CPU): held while a
 * scan gets less than half a core, resumed at three quarters, or when no
 * scan runs; the gauge follows each decision. */
/* What the fake search reports of its share of a core. */
static bool fake_scan_share(void *arg, double *share)
{
    struct fake_identify *f = arg;
    *share = atomic_load(&f->share);
    return atomic_load(&f->scanning);
}

/* The gauge reaches `want` within 20 s (the prefetcher decides each round). */
static bool sweep_held_becomes(const struct cfs_metrics *m, uint64_t want)
{
    for (int i = 0; i < 2000; i++) {
        if (mget(m, CFS_M_SWEEP_HELD) == want)
            return true;
        usleep(10000);
    }
    return false;
}

START_TEST(sweep_auto_holds_while_the_search_gets_little_of_a_core)
{
    struct fixture fx;
    struct cfs_metrics m;
    static struct fake_identify f = {.state = CFS_IDENTIFY_LEARNING};
    static const struct cfs_identify_ops ops = {fake_observe, fake_restart, fake_state,
                                                fake_scan_share};
    atomic_store(&f.scanning, true);
    atomic_store(&f.share, 0.1);
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,sweep=auto", &m, NULL);
    cfs_prefetch_set_identify(pf, &ops, &f, NULL);
    ck_assert_msg(sweep_held_becomes(&m, 1), "a scan at 0.1 of a core holds the sweep");
    /* Between the two thresholds: still held after two rounds of the
     * prefetcher (a round a second while it has nothing to fetch). */
    atomic_store(&f.share, 0.6);
    usleep(2500000);
    ck_assert_uint_eq(mget(&m, CFS_M_SWEEP_HELD), 1);
    atomic_store(&f.share, 0.8);
    ck_assert_msg(sweep_held_becomes(&m, 0), "a scan at 0.8 of a core resumes it");
    atomic_store(&f.share, 0.2);
    ck_assert_msg(sweep_held_becomes(&m, 1), "held again at 0.2");
    atomic_store(&f.scanning, false);
    ck_assert_msg(sweep_held_becomes(&m, 0), "no scan: resumed");
    read_check_as(pf, &fx, 3, &trainer);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* One epoch's order (epoch_seed_only), identified at that epoch's end, is
 * ended at once; a lasting order identified in the next epoch is then
 * planned as far ahead as the mount's own run (epochs=4: epochs 1-3), not
 * to the one-epoch plan's end. */
START_TEST(one_epoch_order_then_a_lasting_one)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=4", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint32_t *e0 = epoch_stream(NFILES, 7, 0), *e1 = epoch_stream(NFILES, 7, 1);
    for (uint32_t i = 0; i < NFILES; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    struct cfs_identified once = ddp7(1, 0, NFILES);
    once.epoch_seed_only = true;
    once.epoch_opens = NFILES;
    ck_assert_msg(cfs_prefetch_adopt(pf, &once, err, sizeof(err)) == 0, "%s", err);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert(!st.adopted); /* its epoch is over */
    ck_assert(cfs_prefetch_learning(pf));

    const uint32_t early = 10;
    for (uint32_t i = 0; i < early; i++)
        read_check_as(pf, &fx, e1[i], &trainer);
    ck_assert_uint_eq(fake.n, NFILES + early);
    struct cfs_identified lasting = ddp7(1, 1, NFILES + early);
    lasting.epoch_opens = NFILES;
    ck_assert_msg(cfs_prefetch_adopt(pf, &lasting, err, sizeof(err)) == 0, "%s", err);
    cfs_prefetch_stats(pf, &st);
    ck_assert(st.adopted);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    for (uint32_t i = early; i < NFILES; i++)
        read_check_as(pf, &fx, e1[i], &trainer);
    for (uint32_t e = 2; e < 4; e++) {
        ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
        replay_epoch(pf, &fx, 7, e);
    }
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), NFILES - early + 2 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 4);
    free(e0);
    free(e1);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Every open of a sample once in clairfs_prediction_total. */
static uint64_t counted(const struct cfs_metrics *m)
{
    return mget(m, CFS_M_PREDICTION_HIT) + mget(m, CFS_M_PREDICTION_MISS) +
           mget(m, CFS_M_PREDICTION_UNPLANNED);
}

/* One epoch's order that the next epoch does not continue (torchdata's
 * sampler: epoch 0 reads as a fresh generator's first randperm, epoch 1 as
 * its second, which no fresh seed explains): predicted to its epoch's end,
 * then the gauge falls to 0, the stats say it ended, and epoch 1's opens
 * are counted as unplanned - never left out. */
START_TEST(one_epoch_order_ends_and_the_rest_is_unplanned)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    const uint32_t learned = 30;
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=4", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint32_t *e0 = epoch_stream(NFILES, 7, 0), *e1 = epoch_stream(NFILES, 9, 0);
    for (uint32_t i = 0; i < learned; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_UNPLANNED), learned);
    struct cfs_identified once = ddp7(1, 0, learned);
    once.epoch_seed_only = true;
    once.epoch_opens = NFILES;
    ck_assert_msg(cfs_prefetch_adopt(pf, &once, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    order_text_starts(pf, "identified torch-ddp seed=7 world=1 epoch 0 after 30 opens (epoch 0 "
                          "only)");
    for (uint32_t i = learned; i < NFILES; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert(!st.adopted);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);
    order_text_starts(pf, "identified torch-ddp seed=7 world=1 epoch 0 after 30 opens (epoch 0 "
                          "only, ended); not predicted from epoch 1 on, learning its order");
    for (uint32_t i = 0; i < NFILES; i++)
        read_check_as(pf, &fx, e1[i], &trainer);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), NFILES - learned);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_UNPLANNED), learned + NFILES);
    ck_assert_uint_eq(counted(&m), 2 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);
    ck_assert(cfs_prefetch_learning(pf)); /* the module hears epoch 1 */
    ck_assert_uint_eq(fake.n, 2 * NFILES);
    free(e0);
    free(e1);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* An identified order run past its plan's last epoch (epochs=2): the gauge
 * falls to 0 when the trainer enters epoch 2, and epoch 2's opens are
 * counted as misses. */
START_TEST(past_the_plan_the_gauge_falls_and_the_opens_miss)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    const uint32_t learned = 30;
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=2", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint32_t *e0 = epoch_stream(NFILES, 7, 0);
    for (uint32_t i = 0; i < learned; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    struct cfs_identified id = ddp7(1, 0, learned);
    id.epoch_opens = NFILES;
    ck_assert_msg(cfs_prefetch_adopt(pf, &id, err, sizeof(err)) == 0, "%s", err);
    for (uint32_t i = learned; i < NFILES; i++)
        read_check_as(pf, &fx, e0[i], &trainer);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    replay_epoch(pf, &fx, 7, 1);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 2);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);
    replay_epoch(pf, &fx, 7, 2);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 2 * NFILES - learned);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_UNPLANNED), learned);
    ck_assert_uint_eq(counted(&m), 3 * NFILES);
    free(e0);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Two dataset roots: train (the even samples) and val (the odd ones).
 * train's order is adopted with its map; val's, identified meanwhile, is
 * not predicted (-EBUSY: one order at a time).  Every open is counted
 * once: train's as hits, val's as unplanned, the gauge stays 1. */
START_TEST(opens_beside_the_predicted_root_are_unplanned)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    char err[256];
    enum { HALF = NFILES / 2 };
    uint32_t train[HALF], val[HALF];
    for (uint32_t i = 0; i < HALF; i++) {
        train[i] = 2 * i;
        val[i] = 2 * i + 1;
    }
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,no_sweep,epochs=4", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint32_t *perm = epoch_stream(HALF, 7, 0), *vperm = epoch_stream(HALF, 9, 0);
    const uint32_t learned = 20, vals = 12;
    for (uint32_t i = 0; i < learned; i++)
        read_check_as(pf, &fx, train[perm[i]], &trainer);
    struct cfs_identified id = ddp7(1, 0, learned);
    id.sampler.n = HALF;
    id.epoch_opens = HALF;
    ck_assert_msg(cfs_prefetch_adopt_at(pf, &id, "train", train, HALF, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    order_text_starts(pf, "identified train: torch-ddp seed=7");
    for (uint32_t i = 0; i < vals; i++)
        read_check_as(pf, &fx, val[vperm[i]], &trainer);
    struct cfs_identified vid = ddp7(1, 0, vals);
    vid.sampler.seed = 9;
    vid.sampler.n = HALF;
    vid.epoch_opens = HALF;
    ck_assert_int_eq(cfs_prefetch_adopt_at(pf, &vid, "val", val, HALF, err, sizeof(err)), -EBUSY);
    ck_assert_msg(strstr(err, "not predicted") != NULL, "%s", err);
    for (uint32_t i = learned; i < HALF; i++)
        read_check_as(pf, &fx, train[perm[i]], &trainer);
    for (uint32_t i = vals; i < HALF; i++)
        read_check_as(pf, &fx, val[vperm[i]], &trainer);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), HALF - learned);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_UNPLANNED), learned + HALF);
    ck_assert_uint_eq(counted(&m), NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
    free(perm);
    free(vperm);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefetch_adopt");
    TCase *tc = tcase_create("adopt");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, adopt_predicts_as_registered, 0,
                        sizeof(learn_cases) / sizeof(learn_cases[0]));
    tcase_add_test(tc, adopt_after_more_epochs_than_the_ring_holds);
    tcase_add_test(tc, adopt_after_more_epochs_than_the_plan_spans);
    tcase_add_loop_test(tc, staged_adoption_predicts_past_its_first_epochs, 0,
                        sizeof(staged_cases) / sizeof(staged_cases[0]));
    tcase_add_test(tc, registered_seed_is_checked_not_replaced);
    tcase_add_test(tc, registered_ranks_confirmed_when_all_seen);
    tcase_add_loop_test(tc, registered_seed_refined_to_torch_global, 0, 6);
    tcase_add_test(tc, off_observes_nothing);
    tcase_add_test(tc, sweep_auto_holds_while_the_search_gets_little_of_a_core);
    tcase_add_test(tc, one_epoch_order_then_a_lasting_one);
    tcase_add_test(tc, one_epoch_order_ends_and_the_rest_is_unplanned);
    tcase_add_test(tc, past_the_plan_the_gauge_falls_and_the_opens_miss);
    tcase_add_test(tc, opens_beside_the_predicted_root_are_unplanned);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
