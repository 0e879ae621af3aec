/* The nodes' agreement on an identified order (clairfs/order_agree.h), its
 * module: nodes wired to each other by a fake transport (the decision over
 * the claims alone is test_order_decide.c's): a claim reaches the other nodes, a node
 * without one is given it as a hint, and every node adopts once all
 * claimed; a node that never claims (a dead peer) leaves the others
 * waiting, never hanging; a claim lost on its way is answered again; the
 * seed scan split across two nodes: a seed in node 1's share found there,
 * verified by the head and agreed, as the head alone would have found it;
 * a refinement (drop_last, persistent workers, detectron2's stream seen at
 * epoch 1) that waits for every node's check and is then adopted by all
 * from the latest epoch claimed, refused by one node's opens (every node drops the
 * plan), or unanswered by a dead node (every node keeps the older plan). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "clairfs/order_agree.h"
#include "identify_fixture.h"
#include "order_fixture.h"

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
    int hints, adopts, refines, drops;
    char drop_why[600]; /* the last drop's */
    struct cfs_sampler_params hint;
    char hint_root[CFS_ORDER_ROOT_MAX];
    struct cfs_rank_range ranks[NODES_MAX];
    uint32_t from_epoch;
    const void *ctx;
    /* the split scan: this node's opens (NULL: it scans and verifies nothing) */
    const struct opens *o;
    struct cfs_identify_params ip;
    int scans, passes, verified, scanning, heard;
    int scan_rc;                    /* the last share scan's */
    struct cfs_identified split_id; /* what the head verified */
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

static void fake_refine(void *arg, const char *root, const struct cfs_sampler_params *hint)
{
    struct node *n = arg;
    pthread_mutex_lock(&n->cl->mu);
    n->refines++;
    n->hint = *hint;
    snprintf(n->hint_root, sizeof(n->hint_root), "%s", root);
    pthread_cond_broadcast(&n->cl->cv);
    pthread_mutex_unlock(&n->cl->mu);
}

static void fake_drop(void *arg, const char *root, const char *why)
{
    struct node *n = arg;
    (void)root;
    pthread_mutex_lock(&n->cl->mu);
    n->drops++;
    snprintf(n->drop_why, sizeof(n->drop_why), "%s", why);
    pthread_cond_broadcast(&n->cl->cv);
    pthread_mutex_unlock(&n->cl->mu);
}

struct collected {
    uint32_t seed[16], skip[16];
    int count;
};

static bool collect(void *arg, uint32_t seed, uint32_t skip)
{
    struct collected *c = arg;
    ck_assert_int_lt(c->count, 16);
    c->seed[c->count] = seed, c->skip[c->count] = skip;
    c->count++;
    return false;
}

static const struct cfs_seed_threads one_thread = {.threads = 1};

/* The head's sets came: this node scans its share on one thread and sends
 * back what passes. */
static void fake_scan_share(void *arg, const char *root, uint32_t src,
                            const struct cfs_split_sets *s, const _Atomic bool *cancel)
{
    struct node *n = arg;
    if (!n->o)
        return;
    pthread_mutex_lock(&n->cl->mu);
    n->scanning++;
    pthread_cond_broadcast(&n->cl->cv);
    pthread_mutex_unlock(&n->cl->mu);
    struct collected c = {0};
    int rc = cfs_identify_split_scan(s, n->node, n->cl->nodes, cancel, collect, &c, &one_thread);
    for (int i = 0; i < c.count && rc == 0; i++)
        cfs_order_agree_passed(n->a, root, src, c.seed[i], c.skip[i]);
    pthread_mutex_lock(&n->cl->mu);
    n->scan_rc = rc;
    n->scans++;
    n->passes += c.count;
    pthread_cond_broadcast(&n->cl->cv);
    pthread_mutex_unlock(&n->cl->mu);
}

/* A seed another node's share passed: the head verifies it against its
 * own opens, and claims what fits. */
static void fake_passed(void *arg, const char *root, uint32_t src, uint32_t seed, uint32_t skip)
{
    struct node *n = arg;
    (void)src;
    pthread_mutex_lock(&n->cl->mu);
    n->heard++;
    pthread_mutex_unlock(&n->cl->mu);
    if (!n->o)
        return;
    struct cfs_identified id;
    char err[256];
    int rc = cfs_identify_split_verify(&n->ip, n->o->s, n->o->pid, n->o->ppid, n->o->len, &seed,
                                       &skip, 1, &id, err, sizeof(err));
    ck_assert_msg(rc == 0 || rc == -ENOENT, "%s", err);
    if (rc == 0)
        cfs_order_agree_local(n->a, root, NULL, &id);
    pthread_mutex_lock(&n->cl->mu);
    if (rc == 0) {
        n->split_id = id;
        n->verified++;
    }
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
                                           .refine = fake_refine,
                                           .drop = fake_drop,
                                           .scan_share = fake_scan_share,
                                           .passed = fake_passed,
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

/* Both nodes of a pair told to drop their plan, each one's state the
 * contradiction `want`. */
static void assert_both_dropped(struct cluster *cl, struct node n[2], const char *want)
{
    ck_assert(wait_count(cl, &n[0].drops, 1));
    ck_assert(wait_count(cl, &n[1].drops, 1));
    char text[600];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cfs_order_agree_state(n[i].a, text, sizeof(text)), CFS_ORDER_CONTRADICTED);
        ck_assert_str_eq(text, want);
    }
}

/* Two nodes, ranks 0-1 and 2-3 of a torch-ddp trainer (seed 17, world 4),
 * each claims its share: both adopt the agreed order from epoch 0. */
static void agreed_pair(struct cluster *cl, struct node n[2], struct cfs_identified *head,
                        struct cfs_identified *second)
{
    cluster_start(cl, n, 2);
    *head = ddp(17, 4, 0, 2, 0), *second = ddp(17, 4, 2, 2, 0);
    cfs_order_agree_local(n[0].a, "", NULL, head);
    cfs_order_agree_local(n[1].a, "", NULL, second);
    ck_assert(wait_count(cl, &n[0].adopts, 1));
    ck_assert(wait_count(cl, &n[1].adopts, 1));
}

/* Two nodes agreed at epoch 0; node 0 refines at epoch 1.  Node 1 is
 * asked to check it although it identified, and every node keeps the
 * older plan until node 1 claims it too; then both adopt from epoch 1. */
START_TEST(a_refinement_is_checked_by_every_node_and_adopted_together)
{
    struct cluster cl;
    struct node n[2];
    struct cfs_identified head, second;
    agreed_pair(&cl, n, &head, &second);
    /* node 1 may have been hinted node 0's first claim before it claimed */
    int hints = n[0].hints + n[1].hints;
    head.sampler.drop_last = true, head.epoch = 1;
    cfs_order_agree_local(n[0].a, "", NULL, &head);
    ck_assert(wait_count(&cl, &n[1].refines, 1));
    ck_assert(n[1].hint.drop_last);
    ck_assert_uint_eq(n[1].hint.seed, 17);
    char text[600];
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, text, sizeof(text)), CFS_ORDER_WAITING);
    ck_assert_ptr_nonnull(strstr(text, "refining: 1 of 2 nodes checking node 0's refinement 1"));
    ck_assert_int_eq(n[0].refines + n[0].hints + n[1].hints, hints);
    /* node 1's opens fit it (at epoch 1 too) */
    second.sampler.drop_last = true, second.epoch = 1;
    cfs_order_agree_local(n[1].a, "", NULL, &second);
    ck_assert(wait_count(&cl, &n[0].adopts, 2));
    ck_assert(wait_count(&cl, &n[1].adopts, 2));
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(n[i].from_epoch, 1);
        ck_assert_uint_eq(n[i].ranks[1].first, 2);
    }
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, text, sizeof(text)), CFS_ORDER_AGREED);
    ck_assert_str_eq(text, "nodes 0-1 agree: torch-ddp seed=17 world=4 batch=8 drop_last "
                           "(refinement 1), planned from epoch 1");
    cluster_stop(&cl);
    ck_assert_int_eq(n[0].adopts + n[1].adopts, 4);
    ck_assert_int_eq(n[0].drops + n[1].drops, 0);
}
END_TEST

/* Node 1's opens contradict node 0's refinement: every node drops the plan
 * both had adopted, together. */
START_TEST(a_refinement_one_node_refuses_drops_the_plan_on_every_node)
{
    struct cluster cl;
    struct node n[2];
    struct cfs_identified head, second;
    agreed_pair(&cl, n, &head, &second);
    cfs_order_agree_refuse(n[1].a, ""); /* nothing refined yet: nothing to refuse */
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_AGREED);
    head.sampler.persistent_workers = true, head.epoch = 1;
    cfs_order_agree_local(n[0].a, "", NULL, &head);
    ck_assert(wait_count(&cl, &n[1].refines, 1));
    cfs_order_agree_refuse(n[1].a, "");
    assert_both_dropped(&cl, n,
                        "node 1's opens contradict node 0's refinement 1: torch-ddp seed=17 "
                        "world=4 batch=8 persistent_workers; every node stays a reactive cache");
    cluster_stop(&cl);
    ck_assert_int_eq(n[0].adopts + n[1].adopts, 2);
    ck_assert_int_eq(n[0].drops + n[1].drops, 2);
}
END_TEST

/* Node 1's opens stop fitting the order both adopted (its trainer
 * reshuffled): it refuses that order, and every node drops its plan with
 * it, told which node; node 1's next claim of another order keeps every
 * node off a plan, and a claim of the agreed order again brings both back. */
START_TEST(an_order_one_node_stops_fitting_drops_the_plan_on_every_node)
{
    struct cluster cl;
    struct node n[2];
    struct cfs_identified head, second;
    agreed_pair(&cl, n, &head, &second);
    cfs_order_agree_refuse_adopted(n[1].a, "val"); /* not the root adopted: nothing */
    ck_assert_int_eq(cfs_order_agree_state(n[1].a, NULL, 0), CFS_ORDER_AGREED);
    cfs_order_agree_refuse_adopted(n[1].a, "");
    const char *want = "node 1's opens no longer fit the agreed order (torch-ddp seed=17 world=4 "
                       "batch=8); every node drops it and stays a reactive cache";
    assert_both_dropped(&cl, n, want);
    ck_assert_str_eq(n[0].drop_why, want);
    ck_assert_str_eq(n[1].drop_why, want);
    char text[600];
    /* node 1 learnt its trainer's new order: still no plan anywhere */
    struct cfs_identified other = ddp(99, 4, 2, 2, 2);
    cfs_order_agree_local(n[1].a, "", NULL, &other);
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, text, sizeof(text)), CFS_ORDER_CONTRADICTED);
    ck_assert_ptr_nonnull(strstr(text, "node 1 contradicts node 0: torch-ddp seed=99"));
    /* ... and the agreed order again: every node adopts it again, together */
    second.epoch = 3;
    cfs_order_agree_local(n[1].a, "", NULL, &second);
    ck_assert(wait_count(&cl, &n[0].adopts, 2));
    ck_assert(wait_count(&cl, &n[1].adopts, 2));
    ck_assert_uint_eq(n[0].from_epoch, 3);
    cluster_stop(&cl);
    ck_assert_int_eq(n[0].drops + n[1].drops, 2);
    ck_assert_int_eq(n[0].adopts + n[1].adopts, 4);
}
END_TEST

/* Three nodes agreed; node 2 dies, node 0 refines and node 1 checks it:
 * nobody hears node 2's check, so every node keeps the older plan (none
 * on the new one alone) and nothing hangs. */
START_TEST(a_node_dead_during_a_refinement_leaves_every_node_on_the_older_plan)
{
    struct cluster cl;
    struct node n[3];
    cluster_start(&cl, n, 3);
    struct cfs_identified id[3];
    for (uint32_t i = 0; i < 3; i++) {
        id[i] = ddp(17, 6, 2 * i, 2, 0);
        cfs_order_agree_local(n[i].a, "", NULL, &id[i]);
    }
    for (int i = 0; i < 3; i++)
        ck_assert(wait_count(&cl, &n[i].adopts, 1));
    cl.dead = 2;
    for (uint32_t i = 0; i < 2; i++) {
        id[i].sampler.drop_last = true, id[i].epoch = 1;
        cfs_order_agree_local(n[i].a, "", NULL, &id[i]);
    }
    char text[600];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cfs_order_agree_state(n[i].a, text, sizeof(text)), CFS_ORDER_WAITING);
        ck_assert_ptr_nonnull(strstr(text, "refining: 1 of 3 nodes checking node"));
    }
    cluster_stop(&cl); /* returns: nothing waits on a check */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(n[i].adopts, 1);
        ck_assert_int_eq(n[i].drops, 0);
    }
    ck_assert_int_eq(n[2].refines, 0);
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

/* The seed is in node 1's share of the range [0, 2^20): the head sends
 * its sets, its own share passes nothing that fits, node 1's passes the
 * seed, the head verifies it, and the nodes agree on what the head alone
 * finds over the whole range. */
START_TEST(a_seed_in_node_1s_share_is_found_there_and_agreed)
{
    const uint32_t n_samples = 20000, seed = (1u << 19) + 4242;
    struct trainer t0 = {.kind = CFS_SAMPLER_TORCH_DDP,
                         .seed = seed,
                         .n = n_samples,
                         .world = 4,
                         .batch = 8,
                         .workers = 2,
                         .rank_first = 0,
                         .ranks = 2,
                         .epochs = 1};
    struct trainer t1 = t0;
    t1.rank_first = 2;
    struct opens o0 = simulate(&t0, 256), o1 = simulate(&t1, 256);
    struct cfs_identify_params p0 = {
        .n = n_samples, .node = 0, .nodes = 2, .seed_count = 1u << 20, .process_alive = no_process};
    struct cfs_identified alone;
    ck_assert_int_eq(identify(&p0, &o0, &alone), 0); /* the head alone, the whole range */
    ck_assert_uint_eq(alone.sampler.seed, seed);

    struct cluster cl;
    struct node n[2];
    cluster_start(&cl, n, 2);
    n[0].o = &o0, n[0].ip = p0;
    n[1].o = &o1;
    struct cfs_split_sets s;
    ck_assert_int_eq(cfs_identify_split_sets(&p0, o0.s, o0.pid, o0.ppid, o0.len, &s), 0);
    ck_assert_uint_eq(s.nfirst, 4); /* 2 ranks, 2 workers each: 4 first opens */
    ck_assert_uint_eq(s.nsecond, 8);
    ck_assert_uint_eq(s.alt_gap, 2); /* the node count: were it one rank a node */
    cfs_order_agree_split(n[0].a, "", &s);
    /* the head's own share: whatever passes there does not fit */
    struct collected mine = {0};
    ck_assert_int_eq(cfs_identify_split_scan(&s, 0, 2, NULL, collect, &mine, &one_thread), 0);
    for (int i = 0; i < mine.count; i++) {
        struct cfs_identified id;
        char err[256];
        ck_assert_int_eq(cfs_identify_split_verify(&p0, o0.s, o0.pid, o0.ppid, o0.len,
                                                   &mine.seed[i], &mine.skip[i], 1, &id, err,
                                                   sizeof(err)),
                         -ENOENT);
    }
    ck_assert(wait_count(&cl, &n[1].scans, 1));
    ck_assert_int_ge(n[1].passes, 1);
    ck_assert(wait_count(&cl, &n[0].verified, 1));
    const struct cfs_identified *found = &n[0].split_id;
    ck_assert_uint_eq(found->sampler.kind, alone.sampler.kind);
    ck_assert_uint_eq(found->sampler.seed, alone.sampler.seed);
    ck_assert_uint_eq(found->sampler.world, alone.sampler.world);
    ck_assert_uint_eq(found->sampler.batch, alone.sampler.batch);
    ck_assert_uint_eq(found->rank_first, alone.rank_first);
    ck_assert_uint_eq(found->rank_count, alone.rank_count);
    ck_assert_uint_eq(found->epoch, alone.epoch);
    ck_assert_str_eq(found->text, alone.text);

    /* node 1 checks the head's claim against its own opens, as a hint */
    ck_assert(wait_count(&cl, &n[1].hints, 1));
    struct cfs_identify_params p1 = {.n = n_samples,
                                     .node = 1,
                                     .nodes = 2,
                                     .seed_count = 1u << 20,
                                     .hint = &n[1].hint,
                                     .hint_has_seed = true,
                                     .hint_identified = true,
                                     .process_alive = no_process};
    struct cfs_identified second;
    ck_assert_int_eq(identify(&p1, &o1, &second), 0);
    ck_assert_uint_eq(second.rank_first, 2);
    cfs_order_agree_local(n[1].a, "", NULL, &second);
    ck_assert(wait_count(&cl, &n[0].adopts, 1));
    ck_assert(wait_count(&cl, &n[1].adopts, 1));
    char text[600], want[200];
    snprintf(want, sizeof(want),
             "nodes 0-1 agree: torch-ddp seed=%u world=4 batch=8, planned from epoch 0", seed);
    ck_assert_int_eq(cfs_order_agree_state(n[0].a, text, sizeof(text)), CFS_ORDER_AGREED);
    ck_assert_str_eq(text, want);
    cluster_stop(&cl);
    ck_assert_int_eq(n[0].scans, 0); /* the head scans its share itself */
    ck_assert_int_eq(n[1].verified, 0);
    opens_free(&o0);
    opens_free(&o1);
}
END_TEST

/* Node 1 scans its half of all 2^32 seeds (a minute on one core) when
 * node 0's claim comes: the scan stops, the claim becomes its hint; a
 * split that comes after a claim is not scanned at all. */
START_TEST(a_claim_stops_a_share_scan)
{
    struct trainer t0 = {.kind = CFS_SAMPLER_TORCH_DDP,
                         .seed = 7,
                         .n = 1000000,
                         .world = 4,
                         .batch = 8,
                         .workers = 2,
                         .ranks = 2,
                         .epochs = 1};
    struct opens o0 = simulate(&t0, 64);
    struct cfs_identify_params p0 = {.n = 1000000, .nodes = 2, .process_alive = no_process};
    struct cfs_split_sets s;
    ck_assert_int_eq(cfs_identify_split_sets(&p0, o0.s, o0.pid, o0.ppid, o0.len, &s), 0);
    struct cluster cl;
    struct node n[2];
    cluster_start(&cl, n, 2);
    n[1].o = &o0, n[1].ip = p0;
    cfs_order_agree_split(n[0].a, "", &s);
    ck_assert(wait_count(&cl, &n[1].scanning, 1));
    struct cfs_identified head = ddp(7, 4, 0, 2, 0);
    cfs_order_agree_local(n[0].a, "", NULL, &head);
    ck_assert(wait_count(&cl, &n[1].scans, 1));
    ck_assert_int_eq(n[1].scan_rc, -ECANCELED);
    ck_assert(wait_count(&cl, &n[1].hints, 1));
    cfs_order_agree_split(n[0].a, "", &s);
    /* a note after it, to node 1 itself: handled once the split was */
    cfs_order_agree_passed(n[1].a, "", 1, 8, 0);
    ck_assert(wait_count(&cl, &n[1].heard, 1));
    ck_assert_int_eq(n[1].scanning, 1);
    cluster_stop(&cl);
    opens_free(&o0);
}
END_TEST

/* The shares cover the range once; sets that cannot be the head's are
 * refused, and their notes dropped. */
START_TEST(the_shares_cover_the_range_and_bad_sets_are_refused)
{
    struct cfs_split_sets s = {.n = 1000, .seed_first = 0xfffffff0u, .seed_count = 0};
    for (uint32_t nodes = 1; nodes <= 7; nodes++) {
        uint64_t next = s.seed_first, total = 0;
        for (uint32_t k = 0; k < nodes; k++) {
            uint32_t first;
            uint64_t count;
            cfs_identify_split_share(&s, k, nodes, &first, &count);
            ck_assert_uint_eq(first, (uint32_t)next);
            next += count, total += count;
        }
        ck_assert_uint_eq(total, 1ull << 32);
    }
    struct collected c = {0};
    ck_assert_int_eq(cfs_identify_split_scan(&s, 0, 2, NULL, collect, &c, &one_thread), -EINVAL);
    s.nfirst = s.nsecond = 1;
    s.first[0] = 5, s.second[0] = 1000; /* past n */
    ck_assert_int_eq(cfs_identify_split_scan(&s, 0, 2, NULL, collect, &c, &one_thread), -EINVAL);
    s.second[0] = 7;
    ck_assert_int_eq(cfs_identify_split_scan(&s, 2, 2, NULL, collect, &c, &one_thread), -EINVAL);
    s.alt_gap = 225; /* past the filter's window (227 words at the head) */
    ck_assert_int_eq(cfs_identify_split_scan(&s, 0, 2, NULL, collect, &c, &one_thread), -EINVAL);

    /* more readers than a note carries: no split, the head scans alone */
    struct opens o = {0};
    for (uint32_t r = 0; r < CFS_SPLIT_VALUES_MAX + 1; r++)
        push(&o, r, (pid_t)(100 + r), 1);
    struct cfs_identify_params p = {.n = 1000, .nodes = 2, .process_alive = no_process};
    ck_assert_int_eq(cfs_identify_split_sets(&p, o.s, o.pid, o.ppid, o.len, &s), -E2BIG);
    opens_free(&o);
    ck_assert_int_eq(cfs_identify_split_sets(&p, NULL, NULL, NULL, 0, &s), -ENOENT);
    /* 2^32 seeds at 20 000 samples: a share would pass hundreds */
    struct trainer small = {.kind = CFS_SAMPLER_TORCH_DDP,
                            .seed = 7,
                            .n = 20000,
                            .world = 4,
                            .batch = 8,
                            .workers = 2,
                            .ranks = 2,
                            .epochs = 1};
    o = simulate(&small, 64);
    p.n = 20000;
    ck_assert_int_eq(cfs_identify_split_sets(&p, o.s, o.pid, o.ppid, o.len, &s), -ERANGE);
    p.seed_count = 1u << 24; /* a range of 2^24: a few */
    ck_assert_int_eq(cfs_identify_split_sets(&p, o.s, o.pid, o.ppid, o.len, &s), 0);
    opens_free(&o);

    struct cluster cl;
    struct node n[2];
    cluster_start(&cl, n, 2);
    n[1].o = n[0].o = &o; /* would scan and verify, were a note taken */
    struct cfs_split_note bad = {.magic = CFS_SPLIT_NOTE_MAGIC};
    memset(bad.root, 'x', sizeof(bad.root)); /* unterminated */
    cfs_order_agree_receive(n[1].a, 0, &bad, sizeof(bad));
    cfs_order_agree_receive(n[1].a, 0, &bad, sizeof(bad) - 1);
    struct cfs_passed_note far = {.magic = CFS_PASSED_NOTE_MAGIC, .seed = 1ull << 32};
    cfs_order_agree_receive(n[0].a, 1, &far, sizeof(far));
    cluster_stop(&cl); /* the module's thread has handled what it took */
    ck_assert_int_eq(n[1].scans + n[0].verified, 0);
}
END_TEST

static Suite *order_agree_suite(void)
{
    Suite *s = suite_create("order_agree");
    TCase *m = tcase_create("nodes");
    tcase_add_test(m, a_claim_becomes_the_others_hint_then_every_node_adopts);
    tcase_add_test(m, a_dead_node_leaves_the_others_waiting);
    tcase_add_test(m, a_lost_claim_is_answered_again);
    tcase_add_test(m, bad_messages_are_dropped);
    tcase_add_test(m, a_refinement_is_checked_by_every_node_and_adopted_together);
    tcase_add_test(m, a_refinement_one_node_refuses_drops_the_plan_on_every_node);
    tcase_add_test(m, an_order_one_node_stops_fitting_drops_the_plan_on_every_node);
    tcase_add_test(m, a_node_dead_during_a_refinement_leaves_every_node_on_the_older_plan);
    suite_add_tcase(s, m);
    TCase *split = tcase_create("split");
    tcase_set_timeout(split, 120);
    tcase_add_test(split, a_seed_in_node_1s_share_is_found_there_and_agreed);
    tcase_add_test(split, a_claim_stops_a_share_scan);
    tcase_add_test(split, the_shares_cover_the_range_and_bad_sets_are_refused);
    suite_add_tcase(s, split);
    return s;
}

int main(void)
{
    return cfs_check_run(order_agree_suite());
}
