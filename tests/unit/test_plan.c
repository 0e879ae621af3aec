/* The planner on hand-checkable streams (a table-driven source) and on the
 * real DistributedSampler model (coverage property). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/plan.h"
#include "clairfs/sampler.h"

/* --- A source reading fixed per-epoch, per-rank lists. --- */

#define MAXLEN 8
struct fake {
    uint32_t world, epochs;
    /* lists[epoch][rank] terminated by UINT32_MAX */
    uint32_t lists[6][4][MAXLEN + 1];
};

struct fake_state {
    const struct fake *f;
    uint32_t epoch;
};

static int fake_create(const void *cfg, void **st, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct fake_state *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->f = cfg;
    *st = s;
    return 0;
}
static void fake_destroy(void *st)
{
    free(st);
}
static uint64_t fake_len(void *st, uint32_t e, uint32_t r)
{
    const struct fake_state *s = st;
    uint64_t l = 0;
    while (s->f->lists[e][r][l] != UINT32_MAX)
        l++;
    return l;
}
static int fake_compute(void *st, uint32_t e)
{
    ((struct fake_state *)st)->epoch = e;
    return 0;
}
static uint32_t fake_at(void *st, uint32_t r, uint64_t i)
{
    const struct fake_state *s = st;
    return s->f->lists[s->epoch][r][i];
}

#define END UINT32_MAX

static struct cfs_plan *make_plan(const struct fake *fk, struct cfs_plan_source *src, uint64_t n,
                                  const uint64_t *sizes, uint32_t nodes, uint32_t node,
                                  uint64_t ram, uint64_t ssd)
{
    *src = (struct cfs_plan_source){fake_create, fake_destroy, fake_len, fake_compute, fake_at,
                                    fk};
    struct cfs_plan_params pp = {
        .n = n, .sizes = sizes, .source = src, .world = fk->world, .start_epoch = 0,
        .epochs = fk->epochs, .nodes = nodes, .node = node, .ram = ram, .ssd = ssd,
    };
    struct cfs_plan *p = NULL;
    char err[256] = "";
    int rc = cfs_plan_create(&pp, &p, err, sizeof(err));
    ck_assert_msg(rc == 0, "plan: %d %s", rc, err);
    return p;
}

static const uint64_t size100[8] = {100, 100, 100, 100, 100, 100, 100, 100};

/* Two ranks on one node: e0 r0 [0,1] r1 [2,3]; e1 r0 [3,0] r1 [1,3].
 * Lockstep stream: e0: 0 2 1 3, e1: 3 1 0 3. */
static const struct fake two_ranks = {
    .world = 2, .epochs = 2,
    .lists = {{{0, 1, END}, {2, 3, END}}, {{3, 0, END}, {1, 3, END}}},
};

START_TEST(lockstep_stream_counts_and_first_use)
{
    struct cfs_plan_source src;
    struct cfs_plan *p = make_plan(&two_ranks, &src, 4, size100, 1, 0, 0, 0);
    static const uint32_t want_file[] = {0, 2, 1, 3, 3, 1, 0, 3};
    static const uint32_t want_rank[] = {0, 1, 0, 1, 0, 1, 0, 1};
    static const uint32_t want_step[] = {0, 0, 1, 1, 0, 0, 1, 1};
    struct cfs_plan_walk *w;
    char err[128];
    ck_assert_int_eq(cfs_plan_walk_create(p, &w, err, sizeof(err)), 0);
    struct cfs_plan_access a;
    for (unsigned i = 0; i < 8; i++) {
        ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1);
        ck_assert_uint_eq(a.pos, i);
        ck_assert_uint_eq(a.sample, want_file[i]);
        ck_assert_uint_eq(a.rank, want_rank[i]);
        ck_assert_uint_eq(a.step, want_step[i]);
        ck_assert_uint_eq(a.epoch, i / 4);
        ck_assert(a.new_epoch == (i % 4 == 0));
    }
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 0);
    cfs_plan_walk_destroy(w);

    ck_assert_uint_eq(cfs_plan_epoch_start(p, 0), 0);
    ck_assert_uint_eq(cfs_plan_epoch_start(p, 1), 4);
    ck_assert_uint_eq(cfs_plan_epoch_start(p, 2), 8);
    ck_assert_uint_eq(cfs_plan_count(p, 0), 2);
    ck_assert_uint_eq(cfs_plan_count(p, 1), 2);
    ck_assert_uint_eq(cfs_plan_count(p, 2), 1);
    ck_assert_uint_eq(cfs_plan_count(p, 3), 3);
    ck_assert_uint_eq(cfs_plan_first_use(p, 0), 0);
    ck_assert_uint_eq(cfs_plan_first_use(p, 2), 1);
    ck_assert_uint_eq(cfs_plan_first_use(p, 1), 2);
    ck_assert_uint_eq(cfs_plan_first_use(p, 3), 3);
    cfs_plan_destroy(p);
}
END_TEST

/* Ranks of unequal length: a rank that has finished its epoch is skipped. */
START_TEST(lockstep_skips_finished_ranks)
{
    static const struct fake fk = {
        .world = 2, .epochs = 1, .lists = {{{5, 6, 7, END}, {4, END}}},
    };
    struct cfs_plan_source src;
    struct cfs_plan *p = make_plan(&fk, &src, 8, size100, 1, 0, 0, 0);
    static const uint32_t want[] = {5, 4, 6, 7};
    static const uint32_t rank[] = {0, 1, 0, 0};
    struct cfs_plan_walk *w;
    ck_assert_int_eq(cfs_plan_walk_create(p, &w, NULL, 0), 0);
    struct cfs_plan_access a;
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1);
        ck_assert_uint_eq(a.sample, want[i]);
        ck_assert_uint_eq(a.rank, rank[i]);
    }
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 0);
    cfs_plan_walk_destroy(w);
    cfs_plan_destroy(p);
}
END_TEST

/* Counts: f3 3, f0 2 (first 0), f1 2 (first 2), f2 1.  Sizes 100. */
START_TEST(tiers_fill_ram_then_ssd_with_exact_capacities)
{
    struct cfs_plan_source src;
    struct cfs_plan *p = make_plan(&two_ranks, &src, 4, size100, 1, 0, 200, 100);
    ck_assert_int_eq(cfs_plan_tier(p, 3), CFS_TIER_RAM);
    ck_assert_int_eq(cfs_plan_tier(p, 0), CFS_TIER_RAM); /* tie with f1, earlier first use */
    ck_assert_int_eq(cfs_plan_tier(p, 1), CFS_TIER_SSD);
    ck_assert_int_eq(cfs_plan_tier(p, 2), CFS_TIER_NONE);
    uint64_t k;
    const uint32_t *o = cfs_plan_prefetch_order(p, CFS_TIER_RAM, &k);
    ck_assert_uint_eq(k, 2);
    ck_assert_uint_eq(o[0], 0); /* first use 0 */
    ck_assert_uint_eq(o[1], 3); /* first use 3 */
    o = cfs_plan_prefetch_order(p, CFS_TIER_SSD, &k);
    ck_assert_uint_eq(k, 1);
    ck_assert_uint_eq(o[0], 1);
    struct cfs_plan_node_summary s;
    ck_assert_int_eq(cfs_plan_node_summary(p, 0, &s), 0);
    ck_assert_uint_eq(s.files[CFS_TIER_RAM], 2);
    ck_assert_uint_eq(s.bytes[CFS_TIER_SSD], 100);
    ck_assert_uint_eq(s.files[CFS_TIER_NONE], 1);
    ck_assert_uint_eq(s.reads, 8);
    /* Held: f3 (3 reads) f0 (2) f1 (2): first fetch from the PFS, rest local;
     * f2 read once from the PFS. */
    ck_assert_uint_eq(s.pfs_read_bytes, 400);
    ck_assert_uint_eq(s.local_read_bytes, 400);
    cfs_plan_destroy(p);

    /* One byte short: f0 no longer fits in RAM and goes to the SSD, f1 finds
     * no room at all. */
    p = make_plan(&two_ranks, &src, 4, size100, 1, 0, 199, 100);
    ck_assert_int_eq(cfs_plan_tier(p, 3), CFS_TIER_RAM);
    ck_assert_int_eq(cfs_plan_tier(p, 0), CFS_TIER_SSD);
    ck_assert_int_eq(cfs_plan_tier(p, 1), CFS_TIER_NONE);
    ck_assert_int_eq(cfs_plan_tier(p, 2), CFS_TIER_NONE);
    cfs_plan_destroy(p);

    /* A smaller later file still fits in the room a big one could not use. */
    static const uint64_t mixed[4] = {150, 100, 50, 100};
    p = make_plan(&two_ranks, &src, 4, mixed, 1, 0, 200, 0);
    ck_assert_int_eq(cfs_plan_tier(p, 3), CFS_TIER_RAM);  /* 100, 100 left */
    ck_assert_int_eq(cfs_plan_tier(p, 0), CFS_TIER_NONE); /* 150 > 100 */
    ck_assert_int_eq(cfs_plan_tier(p, 1), CFS_TIER_RAM);  /* 100, 0 left */
    ck_assert_int_eq(cfs_plan_tier(p, 2), CFS_TIER_NONE);
    cfs_plan_destroy(p);
}
END_TEST

/* Two nodes, one rank each.  e0: r0 [0,1] r1 [2,3]; e1: r0 [0,2] r1 [1,3].
 * node0 reads f0 x2, f1, f2; node1 reads f2, f3 x2, f1.  Every file is read
 * twice in total.  Priority: best count 2 first (f0 by node0 at step 0, f3 by
 * node1 at step 1), then f2 (best reader node1, first at step 0) and f1
 * (node0 at step 1 beats node1 at step 2). */
static const struct fake two_nodes = {
    .world = 2, .epochs = 2,
    .lists = {{{0, 1, END}, {2, 3, END}}, {{0, 2, END}, {1, 3, END}}},
};

START_TEST(owner_map_deduplicates)
{
    struct cfs_plan_source src;
    enum cfs_tier t;
    struct cfs_plan *p = make_plan(&two_nodes, &src, 4, size100, 2, 0, 200, 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 0, &t), 0);
    ck_assert_int_eq(t, CFS_TIER_RAM);
    ck_assert_uint_eq(cfs_plan_owner(p, 1, &t), 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 2, &t), 1);
    ck_assert_int_eq(t, CFS_TIER_RAM);
    ck_assert_uint_eq(cfs_plan_owner(p, 3, &t), 1);
    ck_assert_uint_eq(cfs_plan_owned_bytes(p), 400);
    ck_assert_int_eq(cfs_plan_tier(p, 0), CFS_TIER_RAM);
    ck_assert_int_eq(cfs_plan_tier(p, 1), CFS_TIER_RAM);
    ck_assert_int_eq(cfs_plan_tier(p, 2), CFS_TIER_NONE); /* no room for a replica */
    ck_assert_uint_eq(cfs_plan_total_count(p, 2), 2);
    struct cfs_plan_node_summary s;
    ck_assert_int_eq(cfs_plan_node_summary(p, 1, &s), 0);
    ck_assert_uint_eq(s.ranks.first, 1);
    ck_assert_uint_eq(s.owned_files, 2);
    ck_assert_uint_eq(s.files[CFS_TIER_NONE], 1); /* f1, from node0 */
    ck_assert_uint_eq(s.peer_read_bytes, 100);
    cfs_plan_destroy(p);

    /* The same plan seen from node 1 agrees on every owner. */
    p = make_plan(&two_nodes, &src, 4, size100, 2, 1, 200, 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 0, NULL), 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 1, NULL), 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 2, NULL), 1);
    ck_assert_uint_eq(cfs_plan_owner(p, 3, NULL), 1);
    ck_assert_int_eq(cfs_plan_tier(p, 3), CFS_TIER_RAM);
    cfs_plan_destroy(p);

    /* Room for one file each: f0 and f3 are owned, f2 and f1 find no room. */
    p = make_plan(&two_nodes, &src, 4, size100, 2, 0, 100, 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 0, NULL), 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 3, NULL), 1);
    ck_assert_uint_eq(cfs_plan_owner(p, 1, NULL), CFS_NODE_NONE);
    ck_assert_uint_eq(cfs_plan_owner(p, 2, NULL), CFS_NODE_NONE);
    cfs_plan_destroy(p);

    /* Room for three: owners as before, then node0 replicates f2, its most
     * read file that it does not own. */
    p = make_plan(&two_nodes, &src, 4, size100, 2, 0, 300, 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 2, NULL), 1);
    ck_assert_int_eq(cfs_plan_tier(p, 2), CFS_TIER_RAM);
    ck_assert_int_eq(cfs_plan_tier(p, 3), CFS_TIER_NONE);
    cfs_plan_destroy(p);
}
END_TEST

/* Two nodes, one rank each.  e0: r0 [0,1,2,7] r1 [7,4,5,6]; e1: r0 [0,1,2,7]
 * r1 [3,4,5,6].  node0 reads f7 twice, at its step 3, and owns it; node1
 * reads it once, at step 0 of epoch 0. */
static const struct fake early_peer = {
    .world = 2,
    .epochs = 2,
    .lists = {{{0, 1, 2, 7, END}, {7, 4, 5, 6, END}}, {{0, 1, 2, 7, END}, {3, 4, 5, 6, END}}},
};

START_TEST(owner_stages_in_the_clusters_first_use_order)
{
    struct cfs_plan_source src;
    struct cfs_plan *p = make_plan(&early_peer, &src, 8, size100, 2, 0, 800, 0);
    ck_assert_uint_eq(cfs_plan_owner(p, 7, NULL), 0);
    ck_assert_uint_eq(cfs_plan_first_use(p, 7), 3);
    uint64_t k;
    const uint32_t *o = cfs_plan_prefetch_order(p, CFS_TIER_RAM, &k);
    ck_assert_uint_eq(k, 4);
    /* f7 when node1 first reads it (step 0, tied with f0: by index), not
     * at node0's own step 3. */
    static const uint32_t want0[] = {0, 7, 1, 2};
    for (unsigned i = 0; i < 4; i++)
        ck_assert_uint_eq(o[i], want0[i]);
    cfs_plan_destroy(p);

    /* node1: its owned files and its replica of f7 by its own first reads. */
    p = make_plan(&early_peer, &src, 8, size100, 2, 1, 800, 0);
    o = cfs_plan_prefetch_order(p, CFS_TIER_RAM, &k);
    ck_assert_uint_eq(k, 5);
    static const uint32_t want1[] = {7, 4, 5, 6, 3};
    for (unsigned i = 0; i < 5; i++)
        ck_assert_uint_eq(o[i], want1[i]);
    cfs_plan_destroy(p);
}
END_TEST

/* W=1, e0 [0,1] e1 [1,1] e2 [2,0] e3 [0,2]: positions 0..7. */
START_TEST(next_use_exact_in_window_epoch_start_beyond)
{
    static const struct fake fk = {
        .world = 1, .epochs = 4,
        .lists = {{{0, 1, END}}, {{1, 1, END}}, {{2, 0, END}}, {{0, 2, END}}},
    };
    struct cfs_plan_source src;
    struct cfs_plan *p = make_plan(&fk, &src, 3, size100, 1, 0, 0, 0);
    struct cfs_plan_walk *w;
    ck_assert_int_eq(cfs_plan_walk_create(p, &w, NULL, 0), 0);
    bool exact;
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 0, &exact), 0);
    ck_assert(exact);
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 2, &exact), 4); /* epoch 2 starts at 4 */
    ck_assert(!exact);
    struct cfs_plan_access a;
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 0: f0 */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 0, &exact), 4);
    ck_assert(!exact);
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 1, &exact), 1);
    ck_assert(exact);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 1: f1 */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 1, NULL), 2);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 2: f1 */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 1, NULL), 3);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 3: f1, its last */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 1, NULL), CFS_POS_NEVER);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 4: f2, window e2+e3 */
    ck_assert_uint_eq(a.sample, 2);
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 2, &exact), 7);
    ck_assert(exact);
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 0, &exact), 5);
    ck_assert(exact);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 5: f0 */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 0, NULL), 6);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 6: f0 */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 0, NULL), CFS_POS_NEVER);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 1); /* pos 7: f2 */
    ck_assert_uint_eq(cfs_plan_walk_next_use(w, 2, NULL), CFS_POS_NEVER);
    ck_assert_int_eq(cfs_plan_walk_next(w, &a), 0);
    cfs_plan_walk_destroy(w);
    cfs_plan_destroy(p);
}
END_TEST

START_TEST(default_rank_blocks_are_contiguous_and_even)
{
    struct cfs_rank_range r;
    static const uint32_t first[] = {0, 3, 6, 8}, count[] = {3, 3, 2, 2};
    for (uint32_t i = 0; i < 4; i++) {
        cfs_plan_default_ranks(10, 4, i, &r);
        ck_assert_uint_eq(r.first, first[i]);
        ck_assert_uint_eq(r.count, count[i]);
    }
    cfs_plan_default_ranks(2, 3, 2, &r);
    ck_assert_uint_eq(r.count, 0);
    ck_assert_uint_eq(r.first, 2);
}
END_TEST

START_TEST(bad_parameters_are_rejected_with_a_message)
{
    struct cfs_plan_source src = {fake_create, fake_destroy, fake_len, fake_compute, fake_at,
                                  &two_ranks};
    struct cfs_plan_params pp = {.n = 4, .sizes = size100, .source = &src, .world = 2,
                                 .epochs = 2, .nodes = 1};
    struct cfs_plan *p = NULL;
    char err[256];
    pp.world = 0;
    ck_assert_int_eq(cfs_plan_create(&pp, &p, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "world=0"));
    pp.world = 2;
    pp.start_epoch = 2;
    ck_assert_int_eq(cfs_plan_create(&pp, &p, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "start_epoch=2"));
    pp.start_epoch = 0;
    struct cfs_rank_range rr = {1, 2};
    pp.ranks = &rr;
    ck_assert_int_eq(cfs_plan_create(&pp, &p, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "ranks=1-2"));
    ck_assert_ptr_null(p);
    rr = (struct cfs_rank_range){0, 2, 2}; /* ranks 0 and 2 of world 2 */
    ck_assert_int_eq(cfs_plan_create(&pp, &p, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_null(p);
}
END_TEST

/* Property: the union over all nodes' streams of an epoch is what
 * DistributedSampler reads: the permutation once, plus the head repeated as
 * padding (or cut with drop_last), each node's stream the lockstep
 * interleaving of its ranks, in blocks or (cyclic) node k's ranks k,
 * k + nodes, ... */
static void check_ddp_cover(uint64_t n, uint32_t world, uint32_t nodes, bool drop_last,
                            uint64_t seed, bool cyclic)
{
    struct cfs_rank_range dealt[8];
    for (uint32_t k = 0; k < nodes && k < 8; k++)
        dealt[k] = (struct cfs_rank_range){k, world / nodes, nodes};
    struct cfs_sampler_params sp = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = n,
                                    .world = world, .batch = 1, .drop_last = drop_last};
    uint64_t *sizes = calloc(n, sizeof(*sizes));
    uint32_t *seen = calloc(n, sizeof(*seen));
    struct cfs_sampler *s = NULL;
    char err[256] = "";
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    const uint32_t epochs = 3;
    uint64_t per_rank = drop_last ? n / world : (n + world - 1) / world;
    for (uint32_t node = 0; node < nodes; node++) {
        struct cfs_plan_params pp = {.n = n,
                                     .sizes = sizes,
                                     .sampler = sp,
                                     .world = world,
                                     .epochs = epochs,
                                     .nodes = nodes,
                                     .node = node,
                                     .ranks = cyclic ? dealt : NULL,
                                     .ram = 0,
                                     .ssd = 0};
        struct cfs_plan *p = NULL;
        ck_assert_msg(cfs_plan_create(&pp, &p, err, sizeof(err)) == 0, "%s", err);
        struct cfs_rank_range rr = cfs_plan_node_ranks(p, node);
        struct cfs_plan_walk *w;
        ck_assert_int_eq(cfs_plan_walk_create(p, &w, err, sizeof(err)), 0);
        struct cfs_plan_access a;
        uint64_t i = 0;
        while (cfs_plan_walk_next(w, &a) == 1) {
            uint32_t e = (uint32_t)(i / (per_rank * rr.count));
            uint64_t in = i % (per_rank * rr.count);
            ck_assert_uint_eq(a.epoch, e);
            ck_assert_uint_eq(a.rank, cfs_rank_at(rr, (uint32_t)(in % rr.count)));
            ck_assert_uint_eq(a.step, in / rr.count);
            ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
            ck_assert_uint_eq(a.sample, cfs_sampler_rank_at(s, a.rank, a.step));
            seen[a.sample] += 1u << (8 * e);
            i++;
        }
        ck_assert_uint_eq(i, per_rank * rr.count * epochs);
        cfs_plan_walk_destroy(w);
        cfs_plan_destroy(p);
    }
    for (uint32_t e = 0; e < epochs; e++) {
        uint64_t total = 0, twice = 0, missing = 0;
        for (uint64_t f = 0; f < n; f++) {
            uint32_t c = (seen[f] >> (8 * e)) & 0xFF;
            total += c;
            twice += c >= 2;
            missing += c == 0;
        }
        ck_assert_uint_eq(total, per_rank * world);
        if (drop_last) {
            ck_assert_uint_eq(twice, 0);
            ck_assert_uint_eq(missing, n - per_rank * world);
        } else {
            ck_assert_uint_eq(missing, 0);
            if (per_rank * world - n <= n)
                ck_assert_uint_eq(twice, per_rank * world - n);
        }
    }
    cfs_sampler_destroy(s);
    free(sizes);
    free(seen);
}

START_TEST(ddp_streams_cover_the_dataset_like_distributed_sampler)
{
    check_ddp_cover(10, 3, 3, false, 0, false);
    check_ddp_cover(10, 3, 2, false, 7, false);
    check_ddp_cover(10, 3, 1, true, 1, false);
    check_ddp_cover(37, 8, 3, false, 2147483647ull, false);
    check_ddp_cover(37, 8, 4, true, 4294967301ull, false);
    check_ddp_cover(3, 5, 2, false, 3, false); /* n < W: padding exceeds n */
    check_ddp_cover(37, 8, 4, false, 5, true); /* srun --distribution=cyclic */
    check_ddp_cover(37, 8, 2, true, 9, true);
    check_ddp_cover(2003, 16, 8, false, 3141592653ull, true);
}
END_TEST

/* The sampler as a plan source: the planner then counts each node's reads
 * in stream order, a block at a time, instead of partitioning the node's
 * whole epoch stream by file range as it does for the default torch-ddp
 * source.  Both must give the same plan. */
static int smp_create(const void *cfg, void **st, char *err, size_t errlen)
{
    return cfs_sampler_create(cfg, (struct cfs_sampler **)st, err, errlen);
}
static void smp_destroy(void *st)
{
    cfs_sampler_destroy(st);
}
static uint64_t smp_len(void *st, uint32_t e, uint32_t r)
{
    return cfs_sampler_rank_len(st, e, r);
}
static int smp_compute(void *st, uint32_t e)
{
    return cfs_sampler_compute_epoch(st, e);
}
static uint32_t smp_at(void *st, uint32_t r, uint64_t i)
{
    return cfs_sampler_rank_at(st, r, i);
}

static void check_blocked_equals_stream_order(uint64_t n, uint32_t world, uint32_t nodes,
                                              uint32_t node, uint32_t epochs, uint64_t ram,
                                              uint64_t ssd)
{
    uint64_t *sizes = malloc(n * sizeof(*sizes));
    ck_assert_ptr_nonnull(sizes);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += sizes[i] = 1000 + (i * 2654435761u) % 9000;
    struct cfs_plan_params pp = {
        .n = n, .sizes = sizes, .world = world, .epochs = epochs, .nodes = nodes, .node = node,
        .ram = ram ? ram : total / nodes / 3, .ssd = ssd,
        .sampler = {.kind = CFS_SAMPLER_TORCH_DDP, .n = n, .world = world, .batch = 1, .seed = 42},
    };
    struct cfs_plan *blocked = NULL, *ordered = NULL;
    char err[256] = "";
    ck_assert_int_eq(cfs_plan_create(&pp, &blocked, err, sizeof(err)), 0);
    struct cfs_plan_source src = {smp_create, smp_destroy, smp_len, smp_compute, smp_at,
                                  &pp.sampler};
    pp.source = &src;
    ck_assert_int_eq(cfs_plan_create(&pp, &ordered, err, sizeof(err)), 0);
    for (uint32_t e = 0; e <= epochs; e++)
        ck_assert_uint_eq(cfs_plan_epoch_start(blocked, e), cfs_plan_epoch_start(ordered, e));
    uint64_t owned = 0;
    for (uint32_t f = 0; f < n; f++) {
        enum cfs_tier tb, to;
        ck_assert_uint_eq(cfs_plan_count(blocked, f), cfs_plan_count(ordered, f));
        ck_assert_uint_eq(cfs_plan_first_use(blocked, f), cfs_plan_first_use(ordered, f));
        ck_assert_uint_eq(cfs_plan_tier(blocked, f), cfs_plan_tier(ordered, f));
        ck_assert_uint_eq(cfs_plan_total_count(blocked, f), cfs_plan_total_count(ordered, f));
        ck_assert_uint_eq(cfs_plan_owner(blocked, f, &tb), cfs_plan_owner(ordered, f, &to));
        ck_assert_uint_eq(tb, to);
        ck_assert_uint_eq(cfs_plan_owner_epoch(blocked, f), cfs_plan_owner_epoch(ordered, f));
        ck_assert_uint_eq(cfs_plan_static_pinners(blocked, f),
                          cfs_plan_static_pinners(ordered, f));
        ck_assert_uint_eq(cfs_plan_static_pinner_epoch(blocked, f),
                          cfs_plan_static_pinner_epoch(ordered, f));
        ck_assert(cfs_plan_static_pinned(blocked, f) == cfs_plan_static_pinned(ordered, f));
        ck_assert(cfs_plan_peer_pinned(blocked, f) == cfs_plan_peer_pinned(ordered, f));
        owned += cfs_plan_owner(blocked, f, NULL) == node;
    }
    ck_assert_uint_gt(owned, 0);
    for (int t = CFS_TIER_RAM; t <= CFS_TIER_SSD; t++) {
        uint64_t kb, ko;
        const uint32_t *ob = cfs_plan_prefetch_order(blocked, t, &kb);
        const uint32_t *oo = cfs_plan_prefetch_order(ordered, t, &ko);
        ck_assert_uint_eq(kb, ko);
        ck_assert(kb == 0 || memcmp(ob, oo, kb * sizeof(*ob)) == 0);
    }
    for (uint32_t j = 0; j < nodes; j++) {
        struct cfs_plan_node_summary sb, so;
        cfs_plan_node_summary(blocked, j, &sb);
        cfs_plan_node_summary(ordered, j, &so);
        ck_assert(memcmp(&sb, &so, sizeof(sb)) == 0);
    }
    cfs_plan_destroy(blocked);
    cfs_plan_destroy(ordered);
    free(sizes);
}

/* Large enough for several file blocks (65536 files each), with padding
 * (n not a multiple of world), a node of one rank and one of several, and
 * an SSD tier. */
START_TEST(partitioned_sweep_gives_the_stream_order_plan)
{
    check_blocked_equals_stream_order(140003, 12, 5, 0, 5, 0, 0);
    check_blocked_equals_stream_order(140003, 12, 5, 4, 5, 0, 50000000);
    check_blocked_equals_stream_order(140000, 3, 3, 1, 3, 0, 0);
}
END_TEST

/* Each node's records, as the plan shows them, against every node's reads
 * counted here from the sampler itself: the planned node's counts, the
 * totals, the first epoch any node reads a file, every node's reads and
 * bytes, and the static pinners (readers only).  Windows of 6 epochs (one
 * byte a record) and 11 (two), with padding and uneven rank blocks, and a
 * sampler that reads a file several times an epoch. */
static void check_records_against_the_sampler(enum cfs_sampler_kind kind, uint64_t n,
                                              uint32_t world, uint32_t nodes, uint32_t epochs)
{
    uint64_t *sizes = malloc(n * sizeof(*sizes));
    uint32_t *cnt = calloc((size_t)nodes * n, sizeof(*cnt));
    uint32_t *first = malloc((size_t)nodes * n * sizeof(*first));
    uint32_t *node_of = malloc(world * sizeof(*node_of));
    ck_assert(sizes && cnt && first && node_of);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += sizes[i] = 1000 + (i * 2654435761u) % 9000;
    for (size_t i = 0; i < (size_t)nodes * n; i++)
        first[i] = UINT32_MAX;
    for (uint32_t j = 0; j < nodes; j++) {
        struct cfs_rank_range rr;
        cfs_plan_default_ranks(world, nodes, j, &rr);
        for (uint32_t l = 0; l < rr.count; l++)
            node_of[rr.first + l] = j;
    }
    struct cfs_sampler_params sp = {.kind = kind, .n = n, .world = world, .batch = 2, .seed = 9};
    struct cfs_sampler *smp = NULL;
    char err[256] = "";
    ck_assert_int_eq(cfs_sampler_create(&sp, &smp, err, sizeof(err)), 0);
    for (uint32_t e = 0; e < epochs; e++) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(smp, e), 0);
        for (uint32_t r = 0; r < world; r++)
            for (uint64_t i = 0; i < cfs_sampler_rank_len(smp, e, r); i++) {
                size_t at = (size_t)node_of[r] * n + cfs_sampler_rank_at(smp, r, i);
                cnt[at]++;
                first[at] = first[at] < e ? first[at] : e;
            }
    }
    cfs_sampler_destroy(smp);
    for (uint32_t node = 0; node < nodes; node++) {
        struct cfs_plan_params pp = {
            .n = n,
            .sizes = sizes,
            .world = world,
            .epochs = epochs,
            .nodes = nodes,
            .node = node,
            .ram = total / nodes / 3,
            .sampler = sp,
        };
        struct cfs_plan *p = NULL;
        ck_assert_int_eq(cfs_plan_create(&pp, &p, err, sizeof(err)), 0);
        for (uint32_t f = 0; f < n; f++) {
            uint32_t sum = 0, earliest = UINT32_MAX, readers = 0;
            for (uint32_t j = 0; j < nodes; j++) {
                sum += cnt[(size_t)j * n + f];
                readers += cnt[(size_t)j * n + f] > 0;
                if (first[(size_t)j * n + f] < earliest)
                    earliest = first[(size_t)j * n + f];
            }
            ck_assert_uint_eq(cfs_plan_count(p, f), cnt[(size_t)node * n + f]);
            ck_assert_uint_eq(cfs_plan_total_count(p, f), sum);
            ck_assert_uint_eq(cfs_plan_owner_epoch(p, f), earliest);
            ck_assert_uint_le(cfs_plan_static_pinners(p, f), readers);
            if (cfs_plan_tier(p, f) != CFS_TIER_NONE)
                ck_assert(cnt[(size_t)node * n + f] > 0 || cfs_plan_owner(p, f, NULL) == node);
        }
        for (uint32_t j = 0; j < nodes; j++) {
            struct cfs_plan_node_summary s;
            uint64_t reads = 0, bytes = 0;
            for (uint32_t f = 0; f < n; f++) {
                reads += cnt[(size_t)j * n + f];
                bytes += cnt[(size_t)j * n + f] * sizes[f];
            }
            ck_assert_int_eq(cfs_plan_node_summary(p, j, &s), 0);
            ck_assert_uint_eq(s.reads, reads);
            ck_assert_uint_eq(s.read_bytes, bytes);
        }
        cfs_plan_destroy(p);
    }
    free(sizes);
    free(cnt);
    free(first);
    free(node_of);
}

START_TEST(records_count_every_nodes_reads)
{
    check_records_against_the_sampler(CFS_SAMPLER_TORCH_DDP, 3001, 7, 5, 6);
    check_records_against_the_sampler(CFS_SAMPLER_TORCH_DDP, 3001, 7, 5, 11);
    check_records_against_the_sampler(CFS_SAMPLER_TIMM_RA, 2000, 8, 3, 6);
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, lockstep_stream_counts_and_first_use);
    tcase_add_test(tc, lockstep_skips_finished_ranks);
    tcase_add_test(tc, tiers_fill_ram_then_ssd_with_exact_capacities);
    tcase_add_test(tc, owner_map_deduplicates);
    tcase_add_test(tc, owner_stages_in_the_clusters_first_use_order);
    tcase_add_test(tc, next_use_exact_in_window_epoch_start_beyond);
    tcase_add_test(tc, default_rank_blocks_are_contiguous_and_even);
    tcase_add_test(tc, bad_parameters_are_rejected_with_a_message);
    tcase_add_test(tc, ddp_streams_cover_the_dataset_like_distributed_sampler);
    tcase_add_test(tc, partitioned_sweep_gives_the_stream_order_plan);
    tcase_add_test(tc, records_count_every_nodes_reads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(plan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
