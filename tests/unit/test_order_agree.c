/* The nodes' agreement on an identified order (clairfs/order_agree.h): the
 * decision over every node's claim (waiting, agreed from the latest epoch
 * with every node's ranks, contradicted by another job or overlapping
 * ranks), its description for the log, and nodes of the module wired to
 * each other by a fake transport: a claim reaches the other nodes, a node
 * without one is given it as a hint, and every node adopts once all
 * claimed; a node that never claims (a dead peer) leaves the others
 * waiting, never hanging; a claim lost on its way is answered again. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "clairfs/order_agree.h"

static struct cfs_identified ddp(uint64_t seed, uint32_t world, uint32_t first, uint32_t count,
                                 uint32_t epoch)
{
    struct cfs_identified id = {0};
    id.sampler = (struct cfs_sampler_params){
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = 3000, .world = world, .batch = 8};
    id.rank_first = first, id.rank_count = count, id.epoch = epoch;
    return id;
}

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

/* Two trainings on one allocation, each on its own nodes: each node holds
 * the head of its own job's order and claims it; no common order. */
START_TEST(two_jobs_never_agree)
{
    struct table t = {0};
    struct cfs_identified a = ddp(5, 2, 0, 2, 0), b = ddp(6, 2, 0, 2, 0);
    claim(&t, 0, &a, "");
    claim(&t, 1, &b, "");
    ck_assert_int_eq(decide(&t, 2), CFS_ORDER_CONTRADICTED);
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

/* --- The module, nodes wired by a fake transport. --- */

#define NODES_MAX 4

struct node;
struct cluster {
    struct node *n[NODES_MAX];
    uint32_t nodes;
    uint32_t dead; /* messages to or from this node are lost (NODES_MAX: none) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct node {
    struct cluster *cl;
    uint32_t node;
    struct cfs_order_agree *a;
    int hints, adopts;
    struct cfs_sampler_params hint;
    char hint_root[CFS_ORDER_ROOT_MAX];
    struct cfs_rank_range ranks[NODES_MAX];
    uint32_t from_epoch;
    const void *ctx;
};

static int fake_send(void *arg, uint32_t dest, const void *msg, size_t len)
{
    struct node *n = arg;
    if (n->node == n->cl->dead || dest == n->cl->dead)
        return 0; /* lost, as to a peer that died */
    cfs_order_agree_receive(n->cl->n[dest]->a, n->node, msg, len);
    return 0;
}

static void fake_hint(void *arg, const char *root, const struct cfs_sampler_params *hint)
{
    struct node *n = arg;
    pthread_mutex_lock(&n->cl->mu);
    n->hints++;
    n->hint = *hint;
    snprintf(n->hint_root, sizeof(n->hint_root), "%s", root);
    pthread_cond_broadcast(&n->cl->cv);
    pthread_mutex_unlock(&n->cl->mu);
}

static void fake_adopt(void *arg, const char *root, const void *ctx,
                       const struct cfs_identified *mine, const struct cfs_rank_range *ranks,
                       uint32_t from_epoch)
{
    struct node *n = arg;
    (void)root, (void)mine;
    pthread_mutex_lock(&n->cl->mu);
    n->adopts++;
    memcpy(n->ranks, ranks, n->cl->nodes * sizeof(*ranks));
    n->from_epoch = from_epoch;
    n->ctx = ctx;
    pthread_cond_broadcast(&n->cl->cv);
    pthread_mutex_unlock(&n->cl->mu);
}

static void cluster_start(struct cluster *cl, struct node *nodes, uint32_t count)
{
    memset(cl, 0, sizeof(*cl));
    cl->nodes = count;
    cl->dead = NODES_MAX;
    pthread_mutex_init(&cl->mu, NULL);
    pthread_cond_init(&cl->cv, NULL);
    for (uint32_t i = 0; i < count; i++) {
        nodes[i] = (struct node){.cl = cl, .node = i};
        cl->n[i] = &nodes[i];
    }
    for (uint32_t i = 0; i < count; i++) {
        struct cfs_order_agree_params p = {.node = i,
                                           .nodes = count,
                                           .send = fake_send,
                                           .hint = fake_hint,
                                           .adopt = fake_adopt,
                                           .arg = &nodes[i]};
        char err[256];
        ck_assert_int_eq(cfs_order_agree_create(&p, &nodes[i].a, err, sizeof(err)), 0);
    }
}

static void cluster_stop(struct cluster *cl)
{
    for (uint32_t i = 0; i < cl->nodes; i++)
        cfs_order_agree_destroy(cl->n[i]->a);
    pthread_cond_destroy(&cl->cv);
    pthread_mutex_destroy(&cl->mu);
}

/* Waits until *counter reaches want: the module's thread acts on its own
 * time.  The bound only keeps a broken module from hanging the suite. */
static bool wait_count(struct cluster *cl, const int *counter, int want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&cl->mu);
    int rc = 0;
    while (*counter < want && rc == 0)
        rc = pthread_cond_timedwait(&cl->cv, &cl->mu, &until);
    bool ok = *counter >= want;
    pthread_mutex_unlock(&cl->mu);
    return ok;
}

START_TEST(a_claim_becomes_the_others_hint_then_every_node_adopts)
{
    struct cluster cl;
    struct node n[2];
    cluster_start(&cl, n, 2);
    struct cfs_identified head = ddp(17, 4, 0, 2, 0);
    static const int ctx0 = 0, ctx1 = 1;
    cfs_order_agree_local(n[0].a, "", &ctx0, &head);
    ck_assert(wait_count(&cl, &n[1].hints, 1));
    ck_assert_uint_eq(n[1].hint.seed, 17);
    ck_assert_uint_eq(n[1].hint.world, 4);
    ck_assert_uint_eq(n[1].hint.batch, 8);
    ck_assert_str_eq(n[1].hint_root, "");
    char text[600];
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, text, sizeof(text)), CFS_ORDER_WAITING);
    /* node 1's identification, hinted, fits its own ranks */
    struct cfs_identified second = ddp(17, 4, 2, 2, 0);
    cfs_order_agree_local(n[1].a, "", &ctx1, &second);
    ck_assert(wait_count(&cl, &n[0].adopts, 1));
    ck_assert(wait_count(&cl, &n[1].adopts, 1));
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(n[i].from_epoch, 0);
        ck_assert_uint_eq(n[i].ranks[0].first, 0);
        ck_assert_uint_eq(n[i].ranks[1].first, 2);
        ck_assert_uint_eq(n[i].ranks[1].count, 2);
    }
    ck_assert_ptr_eq(n[0].ctx, &ctx0);
    ck_assert_ptr_eq(n[1].ctx, &ctx1);
    ck_assert_int_eq(n[0].hints, 0); /* it had its own */
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, text, sizeof(text)), CFS_ORDER_AGREED);
    ck_assert_str_eq(text, "nodes 0-1 agree: torch-ddp seed=17 world=4 batch=8, planned from "
                           "epoch 0");
    /* the same claim again (a confirmation) adopts nothing more */
    cfs_order_agree_local(n[1].a, "", &ctx1, &second);
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, NULL, 0), CFS_ORDER_AGREED);
    cluster_stop(&cl);
    ck_assert_int_eq(n[0].adopts, 1);
    ck_assert_int_eq(n[1].adopts, 1);
}
END_TEST

START_TEST(a_dead_node_leaves_the_others_waiting)
{
    struct cluster cl;
    struct node n[3];
    cluster_start(&cl, n, 3);
    cl.dead = 2;
    struct cfs_identified head = ddp(17, 6, 0, 2, 0), second = ddp(17, 6, 2, 2, 0);
    cfs_order_agree_local(n[0].a, "", NULL, &head);
    cfs_order_agree_local(n[1].a, "", NULL, &second);
    char text[600];
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, text, sizeof(text)), CFS_ORDER_WAITING);
    ck_assert_str_eq(text, "waiting for 1 of 3 nodes (node 0: torch-ddp seed=17 world=6 batch=8)");
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_WAITING);
    cluster_stop(&cl); /* returns: nothing waits on a claim */
    ck_assert_int_eq(n[0].adopts + n[1].adopts + n[2].adopts, 0);
    /* stopped, a node still records what comes, and calls nothing back */
    cluster_start(&cl, n, 2);
    cfs_order_agree_stop(n[1].a);
    cfs_order_agree_stop(n[1].a);
    struct cfs_identified four = ddp(17, 4, 0, 2, 0), other = ddp(17, 4, 2, 2, 0);
    cfs_order_agree_local(n[0].a, "", NULL, &four);
    cfs_order_agree_local(n[1].a, "", NULL, &other);
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_AGREED);
    ck_assert(wait_count(&cl, &n[0].adopts, 1));
    cluster_stop(&cl);
    ck_assert_int_eq(n[1].adopts + n[1].hints, 0);
}
END_TEST

/* Node 0's claim is lost on its way (a note is never retried); node 1's
 * first claim to node 0 brings node 0's back. */
START_TEST(a_lost_claim_is_answered_again)
{
    struct cluster cl;
    struct node n[2];
    cluster_start(&cl, n, 2);
    cl.dead = 1;
    struct cfs_identified head = ddp(17, 4, 0, 2, 0), second = ddp(17, 4, 2, 2, 0);
    cfs_order_agree_local(n[0].a, "", NULL, &head);
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_WAITING);
    cl.dead = NODES_MAX;
    cfs_order_agree_local(n[1].a, "", NULL, &second);
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_AGREED);
    ck_assert(wait_count(&cl, &n[0].adopts, 1));
    ck_assert(wait_count(&cl, &n[1].adopts, 1));
    cluster_stop(&cl);
}
END_TEST

START_TEST(bad_messages_are_dropped)
{
    struct cluster cl;
    struct node n[2];
    cluster_start(&cl, n, 2);
    struct cfs_order_claim c;
    struct cfs_identified head = ddp(17, 4, 0, 2, 0);
    cfs_order_claim_of(&head, "", &c);
    cfs_order_agree_receive(n[1].a, 0, &c, sizeof(c) - 1); /* short */
    cfs_order_agree_receive(n[1].a, 1, &c, sizeof(c));     /* from itself */
    cfs_order_agree_receive(n[1].a, 7, &c, sizeof(c));     /* no such node */
    struct cfs_order_claim bad = c;
    bad.magic ^= 1;
    cfs_order_agree_receive(n[1].a, 0, &bad, sizeof(bad));
    bad = c;
    memset(bad.root, 'x', sizeof(bad.root)); /* unterminated */
    cfs_order_agree_receive(n[1].a, 0, &bad, sizeof(bad));
    bad = c;
    bad.world = 0;
    cfs_order_agree_receive(n[1].a, 0, &bad, sizeof(bad));
    char text[600];
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, text, sizeof(text)), CFS_ORDER_WAITING);
    ck_assert_str_eq(text, "learning (no node has identified the order)");
    /* one order's epoch alone is no claim */
    struct cfs_identified once = head;
    once.epoch_seed_only = true;
    cfs_order_agree_local(n[0].a, "", NULL, &once);
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_WAITING);
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, text, sizeof(text)), CFS_ORDER_WAITING);
    ck_assert_str_eq(text, "learning (no node has identified the order)");
    cluster_stop(&cl);
    char err[256];
    struct cfs_order_agree *a;
    struct cfs_order_agree_params p = {.node = 2, .nodes = 2};
    ck_assert_int_eq(cfs_order_agree_create(&p, &a, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "order agreement: node 2 of 2");
    cfs_order_agree_destroy(NULL);
}
END_TEST

static Suite *order_agree_suite(void)
{
    Suite *s = suite_create("order_agree");
    TCase *t = tcase_create("decide");
    tcase_add_test(t, every_node_must_claim_and_the_ranks_cover_the_world);
    tcase_add_test(t, four_nodes_of_world_8);
    tcase_add_test(t, two_jobs_never_agree);
    suite_add_tcase(s, t);
    TCase *m = tcase_create("nodes");
    tcase_add_test(m, a_claim_becomes_the_others_hint_then_every_node_adopts);
    tcase_add_test(m, a_dead_node_leaves_the_others_waiting);
    tcase_add_test(m, a_lost_claim_is_answered_again);
    tcase_add_test(m, bad_messages_are_dropped);
    suite_add_tcase(s, m);
    return s;
}

int main(void)
{
    return cfs_check_run(order_agree_suite());
}
