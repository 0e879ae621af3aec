/* The decision of the nodes' agreement over every node's claim
 * (cfs_order_agree_decide, pure): waiting until every node claimed and the
 * ranks cover the world, agreed from the latest epoch with every node's
 * ranks (in blocks, or dealt round robin as srun --distribution=cyclic
 * deals them), contradicted by another job or by overlapping ranks; a
 * refinement that waits for every node's check, or is refused; and its
 * description for the log and the stats. */
#include <check.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/order_agree.h"
#include "order_fixture.h"

struct table {
    struct cfs_order_claim c[8];
    bool have[8];
    struct cfs_rank_range ranks[8];
    struct cfs_order_decision d;
    char text[600];
};

static void claim(struct table *t, uint32_t node, const struct cfs_identified *id, const char *root)
{
    cfs_order_claim_of(id, root, &t->c[node]);
    t->have[node] = true;
}

static enum cfs_order_agreement decide(struct table *t, uint32_t nodes)
{
    cfs_order_agree_decide(t->c, t->have, nodes, t->ranks, &t->d);
    cfs_order_agree_describe(t->c, t->have, nodes, &t->d, t->text, sizeof(t->text));
    return t->d.state;
}

/* The decision over two nodes' claims alone: node 0's a, node 1's b. */
static enum cfs_order_agreement decide_pair(const struct cfs_identified *a,
                                            const struct cfs_identified *b, struct table *t)
{
    *t = (struct table){0};
    claim(t, 0, a, "");
    claim(t, 1, b, "");
    return decide(t, 2);
}

START_TEST(every_node_must_claim_and_the_ranks_cover_the_world)
{
    struct table t = {0};
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_WAITING);
    ck_assert_uint_eq(t.d.missing, 2);
    ck_assert_str_eq(t.text, "learning (no node has identified the order)");
    struct cfs_identified head = ddp(5, 4, 0, 2, 0);
    claim(&t, 0, &head, "");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_WAITING);
    ck_assert_uint_eq(t.d.missing, 1);
    ck_assert_str_eq(t.text, "waiting for 1 of 2 nodes (node 0: torch-ddp seed=5 world=4 batch=8)");
    /* node 1 has seen one of its ranks so far */
    struct cfs_identified second = ddp(5, 4, 2, 1, 1);
    claim(&t, 1, &second, "");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_WAITING);
    ck_assert_ptr_nonnull(strstr(t.text, "waiting for every rank of world 4"));
    second.rank_count = 2;
    claim(&t, 1, &second, "");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_AGREED);
    ck_assert_uint_eq(t.d.from_epoch, 1); /* the latest epoch a node claimed */
    ck_assert_uint_eq(t.ranks[0].first, 0);
    ck_assert_uint_eq(t.ranks[0].count, 2);
    ck_assert_uint_eq(t.ranks[1].first, 2);
    ck_assert_uint_eq(t.ranks[1].count, 2);
    ck_assert_str_eq(t.text,
                     "nodes 0-1 agree: torch-ddp seed=5 world=4 batch=8, planned from epoch 1");
}
END_TEST

START_TEST(four_nodes_of_world_8)
{
    struct table t = {0};
    for (uint32_t node = 0; node < 4; node++) {
        struct cfs_identified id = ddp(node == 0 ? 5 : (1ull << 32) + 5, 8, 2 * node, 2, node % 3);
        id.sampler.drop_last = true;
        claim(&t, node, &id, "train");
    }
    /* the head node knows the low 32 bits, the others were hinted the seed */
    ck_assert_int_eq(decide(&t, 4), CFS_ORDER_AGREED);
    ck_assert_uint_eq(t.d.from_epoch, 2);
    for (uint32_t node = 0; node < 4; node++)
        ck_assert_uint_eq(t.ranks[node].first, 2 * node);
    ck_assert_str_eq(t.text, "nodes 0-3 agree: train: torch-ddp seed=5 world=8 batch=8 drop_last, "
                             "planned from epoch 2");
}
END_TEST

/* srun --distribution=cyclic: node k of 4 serves ranks k and k + 4 of 8.
 * The strides cover the world once: agreed, every node's ranks as
 * claimed; a node that has seen one of its ranks waits; a block and a
 * stride that share a rank overlap. */
START_TEST(ranks_dealt_cyclically_cover_the_world)
{
    struct table t = {0};
    for (uint32_t node = 0; node < 4; node++) {
        struct cfs_identified id = ddp(5, 8, node, 2, 1);
        id.rank_stride = 4;
        claim(&t, node, &id, "");
        ck_assert_uint_eq(t.c[node].rank_stride, 4);
    }
    ck_assert_int_eq(decide(&t, 4), CFS_ORDER_AGREED);
    for (uint32_t node = 0; node < 4; node++) {
        ck_assert_uint_eq(t.ranks[node].first, node);
        ck_assert_uint_eq(t.ranks[node].count, 2);
        ck_assert_uint_eq(t.ranks[node].stride, 4);
        ck_assert_uint_eq(cfs_rank_at(t.ranks[node], 1), node + 4);
    }
    ck_assert_str_eq(t.text,
                     "nodes 0-3 agree: torch-ddp seed=5 world=8 batch=8, planned from epoch 1");
    /* node 3 has seen rank 3 only: rank 7 is nobody's yet */
    struct cfs_identified partial = ddp(5, 8, 3, 1, 1);
    claim(&t, 3, &partial, "");
    ck_assert_uint_eq(t.c[3].rank_stride, 1);
    ck_assert_int_eq(decide(&t, 4), CFS_ORDER_WAITING);
    /* a stride past the world */
    struct cfs_identified past = ddp(5, 8, 3, 2, 1);
    past.rank_stride = 5;
    claim(&t, 3, &past, "");
    ck_assert_int_eq(decide(&t, 4), CFS_ORDER_CONTRADICTED);
    /* world 4 on two nodes: ranks 0-1 in a block and 1, 3 dealt share
     * rank 1; 0, 2 and 1, 3 hold each once */
    struct cfs_identified block = ddp(5, 4, 0, 2, 0), dealt = ddp(5, 4, 1, 2, 0), even = block;
    dealt.rank_stride = even.rank_stride = 2;
    struct table u;
    ck_assert_int_eq(decide_pair(&block, &dealt, &u), CFS_ORDER_CONTRADICTED);
    ck_assert_ptr_nonnull(strstr(u.text, "ranks overlap"));
    ck_assert_int_eq(decide_pair(&even, &dealt, &u), CFS_ORDER_AGREED);
}
END_TEST

/* Two trainings on one allocation, each on its own nodes: each node holds
 * the head of its own job's order and claims it; no common order. */
START_TEST(two_jobs_never_agree)
{
    struct table t;
    struct cfs_identified a = ddp(5, 2, 0, 2, 0), b = ddp(6, 2, 0, 2, 0);
    ck_assert_int_eq(decide_pair(&a, &b, &t), CFS_ORDER_CONTRADICTED);
    ck_assert_uint_eq(t.d.first_differing, 1);
    ck_assert_uint_eq(t.d.differs_from, 0);
    ck_assert_str_eq(t.text, "node 1 contradicts node 0: torch-ddp seed=6 world=2 batch=8 against "
                             "torch-ddp seed=5 world=2 batch=8; every node stays a reactive cache");
    /* one seed and world, but both claim ranks 0-1: two jobs of one seed */
    claim(&t, 1, &a, "");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_CONTRADICTED);
    ck_assert_ptr_nonnull(strstr(t.text, "ranks overlap"));
    /* one order of two folders */
    struct cfs_identified c = ddp(5, 4, 0, 2, 0), d = ddp(5, 4, 2, 2, 0);
    claim(&t, 0, &c, "train");
    claim(&t, 1, &d, "val");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_CONTRADICTED);
    /* batch, drop_last and the kind are part of the order */
    claim(&t, 1, &d, "train");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_AGREED);
    d.sampler.batch = 16;
    claim(&t, 1, &d, "train");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_CONTRADICTED);
    d.sampler.batch = 8, d.sampler.drop_last = true;
    claim(&t, 1, &d, "train");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_CONTRADICTED);
    d.sampler.drop_last = false, d.sampler.kind = CFS_SAMPLER_HF_ACCELERATE;
    claim(&t, 1, &d, "train");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_CONTRADICTED);
}
END_TEST

/* The head claims at epoch 0, before drop_last shows; at epoch 1 it claims
 * the refinement.  Until node 1 claims it too the nodes wait on the older
 * plan (no contradiction); then every node plans it from epoch 1, the
 * latest claimed. */
START_TEST(a_refinement_waits_for_every_node_then_agrees)
{
    struct table t;
    struct cfs_identified head = ddp(5, 4, 0, 2, 0), second = ddp(5, 4, 2, 2, 0);
    ck_assert_int_eq(decide_pair(&head, &second, &t), CFS_ORDER_AGREED);
    ck_assert_uint_eq(t.d.generation, 0);
    ck_assert_uint_eq(t.d.from_epoch, 0);
    head.sampler.drop_last = head.sampler.persistent_workers = true, head.epoch = 1;
    claim(&t, 0, &head, "");
    t.c[0].generation = 1;
    ck_assert(cfs_order_claim_refines(&t.c[0], &t.c[1]));
    ck_assert(!cfs_order_claim_refines(&t.c[1], &t.c[1]));
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_WAITING);
    ck_assert_uint_eq(t.d.refining, 1);
    ck_assert_str_eq(t.text, "refining: 1 of 2 nodes checking node 0's refinement 1 (torch-ddp "
                             "seed=5 world=4 batch=8 drop_last persistent_workers); no node "
                             "changes its plan yet");
    second.sampler.drop_last = second.sampler.persistent_workers = true, second.epoch = 1;
    claim(&t, 1, &second, "");
    t.c[1].generation = 1;
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_AGREED);
    ck_assert_uint_eq(t.d.from_epoch, 1); /* the latest epoch claimed */
    ck_assert_str_eq(t.text, "nodes 0-1 agree: torch-ddp seed=5 world=4 batch=8 drop_last "
                             "persistent_workers (refinement 1), planned from epoch 1");
    /* torch-ddp seen as detectron2's stream is a refinement too */
    struct table u = {0};
    struct cfs_identified d2 = ddp(5, 4, 0, 2, 1), old = ddp(5, 4, 2, 2, 0);
    d2.sampler.kind = CFS_SAMPLER_DETECTRON2;
    claim(&u, 0, &d2, "");
    claim(&u, 1, &old, "");
    u.c[0].generation = 1;
    ck_assert_int_eq(decide(&u, 2), CFS_ORDER_WAITING);
    ck_assert_uint_eq(u.d.refining, 1);
    /* ...but not the other way, nor another seed, world or batch */
    u.c[0] = u.c[1], u.c[1] = t.c[0];
    u.c[1].kind = CFS_SAMPLER_DETECTRON2, u.c[1].generation = 0, u.c[0].generation = 1;
    ck_assert(!cfs_order_claim_refines(&u.c[0], &u.c[1]));
    ck_assert_int_eq(decide(&u, 2), CFS_ORDER_CONTRADICTED);
    u.c[0] = t.c[0], u.c[1] = t.c[1], u.c[1].generation = 0, u.c[0].batch = 16;
    ck_assert_int_eq(decide(&u, 2), CFS_ORDER_CONTRADICTED);
    ck_assert_str_eq(u.text, "node 1 contradicts node 0: torch-ddp seed=5 world=4 batch=8 "
                             "drop_last persistent_workers against torch-ddp seed=5 world=4 "
                             "batch=16 drop_last persistent_workers; every node stays a reactive "
                             "cache");
    /* a node whose opens refuse the refinement: no node plans */
    u.c[0] = t.c[0], u.c[1] = t.c[0], u.c[1].refused = 1, u.c[1].rank_first = 2;
    ck_assert_int_eq(decide(&u, 2), CFS_ORDER_CONTRADICTED);
    ck_assert(u.d.refused);
    ck_assert_str_eq(u.text, "node 1's opens contradict node 0's refinement 1: torch-ddp seed=5 "
                             "world=4 batch=8 drop_last persistent_workers; every node stays a "
                             "reactive cache");
}
END_TEST

static Suite *order_decide_suite(void)
{
    Suite *s = suite_create("order_decide");
    TCase *t = tcase_create("decide");
    tcase_add_test(t, every_node_must_claim_and_the_ranks_cover_the_world);
    tcase_add_test(t, four_nodes_of_world_8);
    tcase_add_test(t, ranks_dealt_cyclically_cover_the_world);
    tcase_add_test(t, two_jobs_never_agree);
    tcase_add_test(t, a_refinement_waits_for_every_node_then_agrees);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(order_decide_suite());
}
