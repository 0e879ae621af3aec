/* One node's share of a distributed torch-ddp run: the opens of the ranks
 * one node serves (a contiguous block of them, as torchrun --nnodes and
 * srun's default block distribution place them, or ranks k, k + N, ... as
 * srun --distribution=cyclic deals them) are a strided subset of every
 * epoch's permutation.  The node that serves rank 0 holds the head
 * and identifies seed, world, batch and its ranks alone; every other node
 * is given that result as a hint with a seed (what the nodes' agreement,
 * clairfs/order_agree.h, sends it) and checks it against its own opens:
 * the same order with its own ranks, or nothing when its opens contradict
 * the hint.
 *
 * Worlds 4, 8 and 16 (and 32, 64 for one rank a node's head), one and
 * two ranks a node, blocks and cyclic, batches of 8 and 5, with and
 * without drop_last, on every node of the run; the head node alone only
 * where it can (head_cases says which).  All offline
 * (cfs_identify_offline), 4096 seeds searched around the true one as in
 * test_identify.c. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/order_agree.h"
#include "clairfs/sampler.h"
#include "identify_fixture.h"

struct share_case {
    uint32_t world, ranks_per_node, batch;
    bool drop_last;
    bool cyclic; /* node k of N serves ranks k, k + N, ... */
};

/* The last: node 29 and up, its first rank past the seed filter's words. */
static const struct share_case cases[] = {
    {4, 2, 8, false}, {4, 1, 8, false}, {8, 2, 8, false}, {8, 1, 8, false}, {4, 2, 5, true},
    {8, 1, 5, true},  {8, 2, 5, false}, {4, 1, 5, true},  {8, 2, 8, true},  {32, 1, 8, false},
};
/* Both the head node's cases and the other nodes': world 16, and ranks
 * dealt round robin (after each table's own, in the same loop). */
static const struct share_case both_cases[] = {
    {16, 2, 8, false},      {16, 1, 8, false},       {4, 2, 8, false, true},
    {8, 2, 8, false, true}, {16, 2, 8, false, true}, {8, 2, 5, true, true},
};
#define NBOTH (sizeof(both_cases) / sizeof(both_cases[0]))
/* The head node alone: two ranks a node, and one (randperm[1] is then
 * another node's first open: the seed scan's filter takes randperm[W],
 * identify_scan.c, up to 224 nodes: 32 and 64 here, past the filter's
 * vector words); drop_last from the two whole epochs of the share (a
 * worker of epoch 0 ends one index short of torch-ddp's padded share:
 * identify_verify.c, worker_cut_short). */
static const struct share_case head_cases[] = {
    {4, 2, 8, false},  {8, 2, 8, false}, {8, 2, 5, false}, {4, 2, 5, false}, {2, 1, 8, false},
    {4, 1, 8, false},  {8, 1, 8, false}, {8, 1, 5, false}, {2, 1, 1, false}, {4, 1, 1, false},
    {4, 2, 8, true},   {8, 2, 5, true},  {4, 1, 5, true},  {8, 1, 8, true},  {32, 1, 8, false},
    {64, 1, 8, false}, {64, 1, 5, true},
};

/* Case i of a table, then of both_cases. */
#define CASE_AT(table, i)                                                                          \
    ((size_t)(i) < sizeof(table) / sizeof(table[0])                                                \
         ? &table[i]                                                                               \
         : &both_cases[(size_t)(i) - sizeof(table) / sizeof(table[0])])

/* n not a multiple of any world here: the padding (or the cut, with
 * drop_last) shows in every rank's length. */
#define SHARE_N 2003u
#define SHARE_SEED 3141592653u

static uint32_t nodes_of(const struct share_case *c)
{
    return c->world / c->ranks_per_node;
}

/* Node k's ranks: k L .. k L + L - 1, or k, k + N, ... */
static uint32_t first_rank(const struct share_case *c, uint32_t node)
{
    return c->cyclic ? node : node * c->ranks_per_node;
}

static uint32_t rank_stride(const struct share_case *c)
{
    return c->cyclic && c->ranks_per_node > 1 ? nodes_of(c) : 1;
}

static struct trainer node_trainer(const struct share_case *c, uint32_t node)
{
    return (struct trainer){.kind = CFS_SAMPLER_TORCH_DDP,
                            .seed = SHARE_SEED,
                            .n = SHARE_N,
                            .world = c->world,
                            .batch = c->batch,
                            .workers = 2,
                            .rank_first = first_rank(c, node),
                            .ranks = c->ranks_per_node,
                            .rank_stride = rank_stride(c),
                            .drop_last = c->drop_last,
                            .epochs = 2};
}

/* The node's ranks as identified: the trainer's. */
static void assert_ranks(const struct share_case *c, uint32_t node, const struct cfs_identified *id)
{
    ck_assert_uint_eq(id->rank_first, first_rank(c, node));
    ck_assert_uint_eq(id->rank_count, c->ranks_per_node);
    ck_assert_uint_eq(id->rank_stride, rank_stride(c));
}

/* The node's opens identified with the head node's result as the hint. */
static int check_share(const struct share_case *c, uint32_t node,
                       const struct cfs_sampler_params *hint, bool seeded, uint64_t range_seed,
                       struct cfs_identified *id)
{
    struct trainer t = node_trainer(c, node);
    struct opens o = simulate(&t, 100000);
    struct cfs_identify_params p = params(t.n, range_seed, 4096);
    p.hint = hint;
    p.hint_has_seed = p.hint_identified = seeded; /* another node's claim */
    p.node = node;
    p.nodes = nodes_of(c);
    int rc = identify(&p, &o, id);
    opens_free(&o);
    return rc;
}

/* got reads what the trainer's sampler reads, every rank of the world in
 * epochs 0 and 1: drop_last without drop_last_batch and the converse read
 * alike where the cut falls on a batch boundary (a world of 8, batches of
 * 5 over 2003 samples), and nothing can tell them apart. */
static void assert_same_reads(const struct cfs_sampler_params *got, const struct share_case *c)
{
    struct cfs_sampler_params want = {.kind = CFS_SAMPLER_TORCH_DDP,
                                      .seed = SHARE_SEED,
                                      .n = SHARE_N,
                                      .world = c->world,
                                      .batch = c->batch,
                                      .drop_last = c->drop_last};
    struct cfs_sampler *a, *b;
    char err[256];
    ck_assert_int_eq(cfs_sampler_create(got, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_create(&want, &b, err, sizeof(err)), 0);
    for (uint32_t e = 0; e < 2; e++) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(a, e), 0);
        ck_assert_int_eq(cfs_sampler_compute_epoch(b, e), 0);
        for (uint32_t r = 0; r < c->world; r++) {
            uint64_t len = cfs_sampler_rank_len(b, e, r);
            ck_assert_uint_eq(cfs_sampler_rank_len(a, e, r), len);
            for (uint64_t j = 0; j < len; j++)
                ck_assert_uint_eq(cfs_sampler_rank_at(a, r, j), cfs_sampler_rank_at(b, r, j));
        }
    }
    cfs_sampler_destroy(a);
    cfs_sampler_destroy(b);
}

/* What the head node claims: the trainer's own sampler. */
static struct cfs_sampler_params head_claim(const struct share_case *c)
{
    return (struct cfs_sampler_params){.kind = CFS_SAMPLER_TORCH_DDP,
                                       .seed = SHARE_SEED,
                                       .n = SHARE_N,
                                       .world = c->world,
                                       .batch = c->batch,
                                       .drop_last = c->drop_last};
}

START_TEST(the_head_node_identifies_alone)
{
    const struct share_case *c = CASE_AT(head_cases, _i);
    struct cfs_identified id;
    ck_assert_msg(check_share(c, 0, NULL, false, SHARE_SEED, &id) == 0, "world %u: %s", c->world,
                  id.text);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH_DDP && id.sampler.world == c->world,
                  "world %u: %s", c->world, id.text);
    ck_assert_uint_eq(id.sampler.seed, SHARE_SEED);
    ck_assert_uint_eq(id.sampler.batch, c->batch);
    assert_same_reads(&id.sampler, c);
    assert_ranks(c, 0, &id);
    ck_assert_uint_eq(id.workers, 2);
}
END_TEST

START_TEST(every_other_node_checks_the_head_nodes_result)
{
    const struct share_case *c = CASE_AT(cases, _i);
    struct cfs_sampler_params head = head_claim(c);
    uint32_t nodes = nodes_of(c);
    for (uint32_t node = 1; node < nodes; node++) {
        struct cfs_identified id;
        /* without the hint the node's readers hold no head */
        ck_assert_int_eq(check_share(c, node, NULL, false, SHARE_SEED, &id), -ENOENT);
        ck_assert_msg(check_share(c, node, &head, true, SHARE_SEED, &id) == 0,
                      "world %u node %u: %s", c->world, node, id.text);
        ck_assert_uint_eq(id.sampler.seed, SHARE_SEED);
        ck_assert_uint_eq(id.sampler.world, c->world);
        ck_assert_uint_eq(id.sampler.batch, c->batch);
        ck_assert_int_eq(id.sampler.drop_last, c->drop_last);
        assert_ranks(c, node, &id);
        ck_assert_uint_eq(id.epoch, 1);
    }
}
END_TEST

/* Another job's seed (or world) sent as the hint: the node's opens do not
 * fit it, and no other order is made up for them. */
START_TEST(a_hint_the_opens_contradict_is_not_confirmed)
{
    const struct share_case *c = CASE_AT(cases, _i);
    struct cfs_identified id;
    struct cfs_sampler_params other = head_claim(c);
    other.seed = SHARE_SEED + 100000u; /* outside the 4096 seeds searched */
    ck_assert_int_eq(check_share(c, 1, &other, true, other.seed, &id), -ENOENT);
    other = head_claim(c);
    other.world = c->world * 2;
    int rc = check_share(c, 1, &other, true, SHARE_SEED, &id);
    ck_assert_msg(rc == -ENOENT || id.sampler.world != other.world, "%s", id.text);
}
END_TEST

/* The frameworks' samplers (identify_frameworks.c) on a node's share:
 * accelerate deals whole batches to the ranks, the RA samplers repeat
 * each value 3 times before dealing, so node k's first rank does not
 * start at position k L.  The head node names the framework alone; every
 * other node checks its claim (identify_verify.c: try_framework_claim). */
static const enum cfs_sampler_kind fw_kinds[] = {CFS_SAMPLER_HF_ACCELERATE,
                                                 CFS_SAMPLER_TORCHVISION_RA};

START_TEST(every_node_checks_a_frameworks_order)
{
    enum cfs_sampler_kind kind = fw_kinds[_i / 2];
    /* torchvision-ra's head node at world 8 with 2 ranks a node names no
     * world from its ranks 0-1 (nor does one mount of those two ranks) */
    struct share_case c = {_i % 2 && kind == CFS_SAMPLER_HF_ACCELERATE ? 8 : 4, _i % 2 ? 2 : 1, 8,
                           false};
    uint32_t nodes = c.world / c.ranks_per_node;
    struct cfs_sampler_params claim = head_claim(&c);
    claim.kind = kind;
    for (uint32_t node = 0; node < nodes; node++) {
        struct trainer t = node_trainer(&c, node);
        t.kind = kind;
        struct opens o = simulate(&t, 100000);
        struct cfs_identify_params p = params(t.n, SHARE_SEED, 4096);
        p.hint = node ? &claim : NULL;
        p.hint_has_seed = p.hint_identified = node > 0;
        p.node = node;
        p.nodes = nodes;
        struct cfs_identified id;
        int rc = identify(&p, &o, &id);
        opens_free(&o);
        ck_assert_msg(rc == 0, "%s world %u node %u: %s", cfs_sampler_kind_name(kind), c.world,
                      node, id.text);
        ck_assert_int_eq(id.sampler.kind, kind);
        ck_assert_uint_eq((uint32_t)id.sampler.seed, SHARE_SEED);
        ck_assert_uint_eq(id.sampler.world, c.world);
        ck_assert_uint_eq(id.sampler.batch, c.batch);
        ck_assert_uint_eq(id.rank_first, node * c.ranks_per_node);
        ck_assert_uint_eq(id.rank_count, c.ranks_per_node);
        ck_assert_uint_eq(id.workers, 2);
    }
}
END_TEST

/* detectron2's stream (one generator's randperms back to back, dealt to
 * the ranks as torch-ddp deals an epoch) and timm's RepeatAugSampler
 * (torchvision-ra's layout, its generator seeded with the epoch alone):
 * the head node identifies the order alone, and every other node checks
 * the claim it sends (cfs_order_claim_of, cfs_order_claim_sampler: what
 * the nodes' agreement hands a node as its hint) against its own opens,
 * and claims the same order with its own ranks.  The timm-ra trainer
 * starts at epoch 3 (a resumed run): every node names the epoch it is in. */
static const struct share_case stream_cases[] = {
    {4, 1, 8, false},
    {4, 2, 8, false},
    {4, 2, 8, false, true},
    {8, 2, 8, false, true},
};
static const enum cfs_sampler_kind stream_kinds[] = {CFS_SAMPLER_DETECTRON2, CFS_SAMPLER_TIMM_RA};
#define NSTREAM_CASES (sizeof(stream_cases) / sizeof(stream_cases[0]))

START_TEST(every_node_checks_a_stream_or_an_epoch_seeded_order)
{
    enum cfs_sampler_kind kind = stream_kinds[_i / NSTREAM_CASES];
    const struct share_case *c = &stream_cases[_i % NSTREAM_CASES];
    /* timm-ra's "seed" is the epoch: the range searched holds small seeds */
    uint64_t around = kind == CFS_SAMPLER_TIMM_RA ? 2048 : SHARE_SEED;
    struct cfs_order_claim head, mine;
    struct cfs_sampler_params hint;
    for (uint32_t node = 0; node < nodes_of(c); node++) {
        struct trainer t = node_trainer(c, node);
        t.kind = kind;
        t.first_epoch = kind == CFS_SAMPLER_TIMM_RA ? 3 : 0;
        struct opens o = simulate(&t, 100000);
        struct cfs_identify_params p = params(t.n, around, 4096);
        p.hint = node ? &hint : NULL;
        p.hint_has_seed = p.hint_identified = node > 0;
        p.node = node;
        p.nodes = nodes_of(c);
        struct cfs_identified id;
        int rc = identify(&p, &o, &id);
        opens_free(&o);
        ck_assert_msg(rc == 0, "%s world %u node %u: %s", cfs_sampler_kind_name(kind), c->world,
                      node, id.text);
        ck_assert_msg(id.sampler.kind == kind, "%s", id.text);
        if (kind == CFS_SAMPLER_DETECTRON2)
            ck_assert_uint_eq((uint32_t)id.sampler.seed, SHARE_SEED);
        else
            ck_assert_uint_eq(id.epoch, 4); /* its epochs 3 and 4 */
        ck_assert_uint_eq(id.sampler.world, c->world);
        ck_assert_uint_eq(id.sampler.batch, c->batch);
        ck_assert_uint_eq(id.workers, 2);
        assert_ranks(c, node, &id);
        cfs_order_claim_of(&id, "", node ? &mine : &head);
        if (node == 0)
            cfs_order_claim_sampler(&head, &hint);
        else
            ck_assert_msg(cfs_order_claims_alike(&mine, &head), "node %u: %s", node, id.text);
    }
}
END_TEST

static Suite *share_suite(void)
{
    Suite *s = suite_create("identify_share");
    TCase *t = tcase_create("shares");
    tcase_set_timeout(t, 120);
    size_t ncases = sizeof(cases) / sizeof(cases[0]) + NBOTH;
    tcase_add_loop_test(t, the_head_node_identifies_alone, 0,
                        (int)(sizeof(head_cases) / sizeof(head_cases[0]) + NBOTH));
    tcase_add_loop_test(t, every_other_node_checks_the_head_nodes_result, 0, (int)ncases);
    tcase_add_loop_test(t, a_hint_the_opens_contradict_is_not_confirmed, 0, (int)ncases);
    tcase_add_loop_test(t, every_node_checks_a_frameworks_order, 0, 4);
    tcase_add_loop_test(t, every_node_checks_a_stream_or_an_epoch_seeded_order, 0,
                        (int)(2 * NSTREAM_CASES));
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(share_suite());
}
