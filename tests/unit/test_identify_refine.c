/* A refinement another node claimed, taken by a module that identified
 * already (cfs_identify_take_hint, clairfs/order_agree.h).
 *
 * On a distributed mount the head node claims at epoch 0, before its opens
 * can show persistent workers or drop_last; at epoch 1's start it claims
 * the order again, refined.  A node that identified from the first claim
 * must check the refinement against its own opens at once, not at its own
 * next check, so that every node can claim it in the same epoch.  These
 * tests give node 1 of 2 (ranks 2-3 of world 4) its epoch 0 and the first
 * opens of epoch 1 - too few for its own check - then the refinement: the
 * module checks it over the opens so far and says the refined order, or,
 * when its opens contradict it, refuses it (on_refused).  A hint of
 * another seed is no refinement and is ignored. */
#include <check.h>
#include <stdio.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "identify_fixture.h"
#include "identify_seen.h"

#define EPOCH1_OPENS 12 /* below the module's own check at epoch 1's start */
#define EPOCH1_SEEN 400 /* past it: the workers shown */

/* Node 1 of 2: ranks 2-3 of a torch-ddp trainer of world 4, n samples. */
static struct trainer node1_trainer(uint32_t n)
{
    return (struct trainer){.kind = CFS_SAMPLER_TORCH_DDP,
                            .seed = 4242,
                            .n = n,
                            .world = 4,
                            .batch = 8,
                            .workers = 2,
                            .rank_first = 2,
                            .ranks = 2,
                            .epochs = 2};
}

/* Node 0's first claim: its epoch 0 shows no drop_last, no workers' kind. */
static struct cfs_sampler_params claim_of(const struct trainer *t)
{
    return (struct cfs_sampler_params){
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = t->seed, .n = t->n, .world = 4, .batch = 8};
}

/* Node 1's identification, hinted node 0's claim, reporting to seen. */
static struct cfs_identify *
node1_module(const struct trainer *t, const struct cfs_sampler_params *claimed, struct seen *seen)
{
    struct cfs_identify_params p = params(t->n, t->seed, 4096);
    p.node = 1, p.nodes = 2;
    p.hint = claimed, p.hint_has_seed = true, p.hint_identified = true;
    p.on_identified = on_identified, p.on_refused = on_refused, p.cb_arg = seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    return id;
}

START_TEST(a_refinement_is_checked_at_once_when_identified)
{
    struct trainer t = node1_trainer(2000);
    t.persistent = true;
    struct opens o = simulate(&t, SIZE_MAX);
    ck_assert_uint_eq(o.len, 2000); /* 1000 an epoch: ranks 2-3 of 4 */
    struct cfs_sampler_params claimed = claim_of(&t);
    struct seen seen = {0};
    struct cfs_identify *id = node1_module(&t, &claimed, &seen);
    for (size_t i = 0; i < 1000; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_ge(wait_calls(&seen, 1), 1);
    ck_assert(wait_settled(id).settled);
    for (size_t i = 1000; i < 1000 + EPOCH1_OPENS; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert(wait_settled(id).settled);
    int before = calls_of(&seen);
    struct cfs_identified got;
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    ck_assert_uint_eq(got.rank_first, 2);
    ck_assert(!got.sampler.persistent_workers); /* its own check has not come */
    /* another seed is no refinement */
    struct cfs_sampler_params other = claimed;
    other.seed = t.seed + 1, other.persistent_workers = true;
    cfs_identify_take_hint(id, &other);
    ck_assert(wait_settled(id).settled);
    ck_assert_int_eq(calls_of(&seen), before);
    /* node 0 refined its claim: persistent workers */
    struct cfs_sampler_params refined = claimed;
    refined.persistent_workers = true;
    cfs_identify_take_hint(id, &refined);
    ck_assert_int_eq(wait_calls(&seen, before + 1), before + 1);
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    ck_assert(got.sampler.persistent_workers);
    ck_assert_uint_eq(got.sampler.seed, t.seed);
    ck_assert_uint_eq(got.sampler.world, 4);
    ck_assert_uint_eq(got.rank_first, 2);
    ck_assert_uint_eq(got.rank_count, 2);
    ck_assert_uint_eq(got.epoch, 1);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* Node 1's trainer pads its ranks' shares (2002 samples, world 4: 501
 * each), and node 0 claims drop_last: node 1's opens, past epoch 0's end,
 * refuse it, and its order stays what it was. */
START_TEST(a_refinement_the_opens_contradict_is_refused)
{
    struct trainer t = node1_trainer(2002);
    struct opens o = simulate(&t, SIZE_MAX);
    struct cfs_sampler_params claimed = claim_of(&t);
    struct seen seen = {0};
    struct cfs_identify *id = node1_module(&t, &claimed, &seen);
    for (size_t i = 0; i < 1002 + EPOCH1_SEEN; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_ge(wait_calls(&seen, 1), 1);
    ck_assert(wait_settled(id).settled);
    int before = calls_of(&seen);
    struct cfs_sampler_params refined = claimed;
    refined.drop_last = true;
    cfs_identify_take_hint(id, &refined);
    for (int i = 0; i < WAIT_POLLS && !__atomic_load_n(&seen.refusals, __ATOMIC_SEQ_CST); i++)
        usleep(10000);
    ck_assert_int_eq(__atomic_load_n(&seen.refusals, __ATOMIC_SEQ_CST), 1);
    ck_assert(seen.refused.drop_last);
    ck_assert(wait_settled(id).settled);
    ck_assert_int_eq(calls_of(&seen), before);
    struct cfs_identified got;
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    ck_assert(!got.sampler.drop_last);
    ck_assert_uint_eq(got.sampler.seed, t.seed);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

static Suite *identify_refine_suite(void)
{
    Suite *s = suite_create("identify_refine");
    TCase *t = tcase_create("refine");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, a_refinement_is_checked_at_once_when_identified);
    tcase_add_test(t, a_refinement_the_opens_contradict_is_refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_refine_suite());
}
