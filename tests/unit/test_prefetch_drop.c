/* The learned order dropped, without the identify module (adopt_fixture.h's
 * fake): an adopted order that mispredicts 64 opens in a row, or half of a
 * block of 256, is dropped and the module restarted once with the misses
 * (by a later open where a re-plan holds replan_mu);
 * a registered seed never drops; a distributed mount's agreed plan that
 * stops fitting is refused to the other nodes, and dropped when they drop
 * it. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adopt_fixture.h"
#include "check_run.h"
#include "fake_peer.h"
#include "prefetch_fixture.h"
#include "src/prefetch_i.h"

/* One epoch planned for rank 0 of world 2 (60 samples): rank 1's files
 * are never predicted, so each open of one is a miss. */
struct drop_run {
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake;
    struct cfs_prefetch *pf;
    uint32_t other[NFILES]; /* rank 1's files of epoch 0 */
    uint32_t nother;
    uint32_t *mine;
    uint64_t nmine;
};

static void drop_run_start(struct drop_run *r)
{
    char err[256];
    memset(r, 0, sizeof(*r));
    r->fake.state = CFS_IDENTIFY_LEARNING;
    fixture_init(&r->fx);
    r->pf = make_pf(&r->fx, "ram=16M,epochs=1", &r->m, NULL);
    cfs_prefetch_set_identify(r->pf, &fake_ops, &r->fake, NULL);
    r->mine = ddp7_stream(2, 0, &r->nmine);
    ck_assert_uint_eq(r->nmine, NFILES / 2);
    bool is_mine[NFILES] = {false};
    for (uint64_t i = 0; i < r->nmine; i++)
        is_mine[r->mine[i]] = true;
    for (uint32_t s = 0; s < NFILES; s++)
        if (!is_mine[s])
            r->other[r->nother++] = s;
    struct cfs_identified id = ddp7(2, 0, 0);
    ck_assert_msg(cfs_prefetch_adopt(r->pf, &id, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(cfs_prefetch_wait_idle(r->pf, 30), 0);
}

static void drop_run_finish(struct drop_run *r)
{
    free(r->mine);
    cfs_prefetch_destroy(r->pf);
    fixture_fini(&r->fx);
}

static void assert_dropped(struct drop_run *r)
{
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(r->pf, &st);
    ck_assert(!st.planned && !st.adopted);
    ck_assert(cfs_prefetch_learning(r->pf));
    ck_assert_uint_eq(r->fake.restarts, 1);
    ck_assert_uint_eq(mget(&r->m, CFS_M_ORDER_IDENTIFIED), 0);
}

START_TEST(drop_after_64_misses_in_a_row)
{
    struct drop_run r;
    drop_run_start(&r);
    for (uint32_t i = 0; i < 10; i++)
        read_check_as(r.pf, &r.fx, r.mine[i], &trainer);
    struct cfs_opener stranger = {.pid = 777, .ppid = 1};
    for (uint32_t i = 0; i < 63; i++)
        read_check_as(r.pf, &r.fx, r.other[i % r.nother], &stranger);
    ck_assert_uint_eq(r.fake.restarts, 0);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(r.pf, &st);
    ck_assert(st.adopted);
    read_check_as(r.pf, &r.fx, r.other[63 % r.nother], &stranger);
    assert_dropped(&r);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PREDICTION_HIT), 10);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PREDICTION_MISS), 64);
    /* The module hears the 64 misses again, in order, with their opener. */
    ck_assert_uint_eq(r.fake.n, 64);
    for (uint32_t i = 0; i < 64; i++) {
        ck_assert_uint_eq(r.fake.samples[i], r.other[i % r.nother]);
        ck_assert_int_eq(r.fake.pids[i], stranger.pid);
        ck_assert_int_eq(r.fake.ppids[i], stranger.ppid);
    }
    order_text_starts(r.pf, "learning (64 opens)");
    /* Learning again: later opens are observed, nothing is predicted. */
    read_check_as(r.pf, &r.fx, r.mine[0], &trainer);
    ck_assert_uint_eq(r.fake.n, 65);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PREDICTION_HIT) + mget(&r.m, CFS_M_PREDICTION_MISS), 74);
    drop_run_finish(&r);
}
END_TEST

/* The open that ends the run of misses while a re-plan holds replan_mu
 * (an adoption planning its whole span: seconds) does not wait for it:
 * the order stays adopted, and the first open after it is dropped. */
START_TEST(a_drop_waits_for_no_replan)
{
    struct drop_run r;
    drop_run_start(&r);
    struct cfs_opener stranger = {.pid = 777, .ppid = 1};
    pthread_mutex_lock(&r.pf->replan_mu); /* trylock by its holder: EBUSY */
    for (uint32_t i = 0; i < 64; i++)
        read_check_as(r.pf, &r.fx, r.other[i % r.nother], &stranger);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(r.pf, &st);
    ck_assert(st.adopted);
    ck_assert_uint_eq(r.fake.restarts, 0);
    read_check_as(r.pf, &r.fx, r.other[64 % r.nother], &stranger);
    ck_assert_uint_eq(r.fake.restarts, 0); /* still held: still owed */
    pthread_mutex_unlock(&r.pf->replan_mu);
    read_check_as(r.pf, &r.fx, r.other[65 % r.nother], &stranger);
    assert_dropped(&r);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PREDICTION_MISS), 66);
    ck_assert_uint_eq(r.fake.n, 66); /* every miss heard again, once */
    drop_run_finish(&r);
}
END_TEST

/* One hit then four misses, over and over: never 64 misses in a row, but
 * 205 of a block of 256 (the rule: at least half) drop it at the 256th. */
START_TEST(drop_after_half_a_block_missed)
{
    struct drop_run r;
    drop_run_start(&r);
    uint32_t hits = 0, misses = 0;
    for (uint32_t i = 0; i < 255; i++) {
        if (i % 5 == 0)
            read_check_as(r.pf, &r.fx, r.mine[hits++], &trainer);
        else
            read_check_as(r.pf, &r.fx, r.other[misses++ % r.nother], &trainer);
    }
    ck_assert_uint_eq(r.fake.restarts, 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PREDICTION_HIT), hits);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PREDICTION_MISS), misses);
    read_check_as(r.pf, &r.fx, r.other[misses++ % r.nother], &trainer); /* 256th: i % 5 == 0 */
    assert_dropped(&r);
    /* The trailing run of misses (the four after the hit at open 250, and
     * this one) is heard again. */
    ck_assert_uint_eq(r.fake.n, 5);
    for (uint32_t i = 0; i < 5; i++)
        ck_assert_uint_eq(r.fake.samples[i], r.other[(misses - 5 + i) % r.nother]);
    drop_run_finish(&r);
}
END_TEST

/* The refusals a cluster plan's drop sends (cfs_identify_ops.refuse). */
static unsigned cluster_refusals;
static char cluster_refused_root[64] = "?";

static void fake_refuse(void *arg, const char *root)
{
    (void)arg;
    cluster_refusals++;
    snprintf(cluster_refused_root, sizeof(cluster_refused_root), "%s", root);
}

/* Node 0 of 2 (world 2, one rank a node) on the nodes' agreed order: 64
 * misses in a row drop its plan and refuse the order to the others
 * (refuse, once), never adopting alone after; the others' drop comes back
 * as cfs_prefetch_drop_cluster, and the order line and gauge say it.  A
 * node that only hears the drop (its opens still fit) drops its plan
 * without learning again. */
START_TEST(a_cluster_plan_that_stops_fitting_is_refused_to_every_node)
{
    char err[256];
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_IDENTIFIED};
    static const struct cfs_identify_ops ops = {.observe = fake_observe,
                                                .restart = fake_restart,
                                                .state = fake_state,
                                                .refuse = fake_refuse};
    fixture_init(&fx);
    cfs_metrics_init(&m);
    struct fake_peer *fp = fake_peer_create(0, 2, 5.0); /* holds nothing: the PFS serves */
    struct cfs_prefetch *pf = create_pf(
        &fx, "ram=16M,epochs=1", 2, 0,
        (struct cfs_prefetch_params){.metrics = &m, .peer_ops = &fake_peer_ops, .peer = fp});
    ck_assert_int_eq(cfs_prefetch_start(pf, err, sizeof(err)), 0);
    cfs_prefetch_set_identify(pf, &ops, &fake, NULL);
    const struct cfs_rank_range ranks[2] = {{0, 1}, {1, 1}};
    for (int round = 0; round < 2; round++) {
        struct cfs_identified id = ddp7(2, 0, 0);
        ck_assert_msg(
            cfs_prefetch_adopt_cluster(pf, &id, "", NULL, NFILES, ranks, 0, err, sizeof(err)) == 0,
            "%s", err);
        ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
        ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 1);
        unsigned restarts = fake.restarts;
        if (round == 0) {
            uint64_t nmine;
            uint32_t *mine = ddp7_stream(2, 0, &nmine);
            bool is_mine[NFILES] = {false};
            for (uint64_t i = 0; i < nmine; i++)
                is_mine[mine[i]] = true;
            free(mine);
            for (uint32_t s = 0, missed = 0; missed < 64; s = (s + 1) % NFILES)
                if (!is_mine[s]) { /* rank 1's files, read twice over */
                    read_check_as(pf, &fx, s, &trainer);
                    missed++;
                }
            ck_assert_uint_eq(cluster_refusals, 1);
            ck_assert_str_eq(cluster_refused_root, "");
            ck_assert_uint_eq(fake.restarts, restarts + 1); /* it learns again */
            order_text_starts(pf, "learning");
        }
        cfs_prefetch_drop_cluster(pf, "node 0's opens no longer fit the agreed order");
        struct cfs_prefetch_stats st;
        cfs_prefetch_stats(pf, &st);
        ck_assert(!st.planned && !st.adopted);
        ck_assert_uint_eq(mget(&m, CFS_M_ORDER_IDENTIFIED), 0);
        order_text_starts(pf, "dropped by the nodes: node 0's opens no longer fit");
        if (round == 1) /* only told: no refusal of its own, no learning again */
            ck_assert_uint_eq(fake.restarts, restarts);
    }
    ck_assert_uint_eq(cluster_refusals, 1);
    cfs_prefetch_destroy(pf);
    fake_peer_destroy(fp);
    fixture_fini(&fx);
}
END_TEST

/* A registered seed never drops, however many misses. */
START_TEST(registered_seed_never_drops)
{
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_identify fake = {.state = CFS_IDENTIFY_LEARNING};
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "seed=7,world=2,ranks=0-0,ram=16M,epochs=1", &m, NULL);
    cfs_prefetch_set_identify(pf, &fake_ops, &fake, NULL);
    uint64_t nmine;
    uint32_t *mine = ddp7_stream(2, 0, &nmine);
    bool is_mine[NFILES] = {false};
    for (uint64_t i = 0; i < nmine; i++)
        is_mine[mine[i]] = true;
    uint32_t missed = 0;
    for (uint32_t pass = 0; pass < 3; pass++)
        for (uint32_t s = 0; s < NFILES; s++)
            if (!is_mine[s]) {
                read_check_as(pf, &fx, s, &trainer);
                missed++;
            }
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), missed);
    ck_assert_uint_ge(missed, 128);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert(st.planned);
    ck_assert_uint_eq(fake.restarts, 0);
    free(mine);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefetch_drop");
    TCase *tc = tcase_create("drop");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, drop_after_64_misses_in_a_row);
    tcase_add_test(tc, a_drop_waits_for_no_replan);
    tcase_add_test(tc, drop_after_half_a_block_missed);
    tcase_add_test(tc, registered_seed_never_drops);
    tcase_add_test(tc, a_cluster_plan_that_stops_fitting_is_refused_to_every_node);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
