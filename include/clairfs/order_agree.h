/* The nodes of a distributed mount learn the read order together and adopt
 * one plan (nothing registered on many nodes).
 *
 * Why the nodes must agree.  A distributed plan is one plan of every node:
 * each file's owner, each node's tiers and the cluster's first reads come
 * from every node's stream over the same epochs.  A node that planned alone
 * would ask peers for files they never fetch, and own files nobody asks
 * for.  So no node adopts an identified order until every node's opens fit
 * it, and then all adopt it with every node's ranks, from one epoch.
 *
 * What each node can learn alone.  torch-ddp interleaves the ranks: rank r
 * reads positions r, r + W, ... of each epoch's permutation, and a node
 * sees only its own ranks' opens.  The node that serves rank 0 holds the
 * head of the permutation and finds seed, world, batch and its ranks from
 * its opens (identify.h); any other node needs the world to know where its
 * readers' stream starts, and its seed search could not tell the seed from
 * a handful of positions anyway.  So a node that identified sends its
 * result (a claim: kind, seed, n, world, batch, drop_last flags, its epoch
 * and ranks) to every other node; a node that has none takes the claim as
 * a hint with a seed (cfs_identify_take_hint), which its identification
 * checks against its own opens, and when they fit it claims the same order
 * with its own ranks.  A node whose opens do not fit the hint never claims
 * it.
 *
 * Which ranks a node serves.  torchrun --nnodes=N gives node k the block of
 * ranks k*L .. k*L+L-1 (L ranks a node), as does Slurm's srun with its
 * default block distribution; srun --distribution=cyclic (and mpirun
 * --map-by node) gives node k ranks k, k+N, ..., k+(L-1)N.  A claim names
 * either: its ranks are rank_first, rank_first + rank_stride, ...  The
 * late hint is searched at both head positions, k*L and k (identify_scan.c),
 * a fit in a block taken before a cyclic one (identify_verify.c), and the
 * claims' ranks must cover the world once whichever way each node's fall
 * (docs/distributed.md).
 *
 * The decision (cfs_order_agree_decide, pure, the same on every node since
 * every node hears every claim): AGREED when every node claimed, the claims
 * name one order and their ranks cover the world once; CONTRADICTED when
 * two claims name different orders or overlap (two jobs on one allocation);
 * WAITING otherwise.  An agreed order is planned on
 * every node from the latest epoch any node claimed (from_epoch), so that
 * every node's plan covers the same epochs.  A node whose peer died never
 * hears its claim: it waits, a reactive cache, and never hangs (nothing
 * blocks on a claim).  The transport never retries a note, so a node that
 * hears from another for the first time answers with its own claim: a
 * claim lost on its way comes back with the other node's first one.
 *
 * Refinements.  The head node claims during epoch 0, before its opens can
 * show drop_last, persistent workers or detectron2's stream (they show at
 * epoch 1's start), and claims again when they do.  Had the new claim to
 * match every other node's at once, it would read as a contradiction until
 * each node refined on its own.  So a claim carries a generation: a claim
 * alike in kind family, seed, n, world, batch and root that differs only
 * in drop_last, drop_last_batch, persistent_workers or torch-ddp becoming
 * detectron2 (cfs_order_claim_refines) is the next generation.  Every node
 * that claimed the older one is given it to check (the refine callback: a
 * hint its identification takes although it has identified) and claims it
 * again when its opens fit, or refuses it (cfs_order_agree_refuse) when
 * they do not.  Until every node has claimed the newest generation, the
 * decision waits and every node keeps the plan it had (never half the
 * nodes on the new one); then every node adopts it from the latest epoch
 * any node claimed, as the first claim (the adoption replays each node's
 * opens into that epoch: a plan from the epoch after would put a node
 * still in epoch 1 at epoch 2's start, every open a miss).  A refusal
 * contradicts: every node drops the plan it had adopted (the drop
 * callback) and stays a reactive cache.  A node that dies meanwhile
 * leaves the others on the older plan.
 *
 * An order that stops fitting.  A node whose opens stop fitting the order
 * every node adopted (its trainer restarted with another seed: the data
 * path's run of misses, prefetch_adopt.c) refuses that order the same way
 * (cfs_order_agree_refuse_adopted), rather than dropping its plan alone:
 * the others' plans would still give it files to own and peers to ask
 * that its trainer no longer reads.  Every node drops the plan (the drop
 * callback, told which node and why) and stays a reactive cache; the
 * refusing node learns again, its next claim replaces the refusal, and
 * the nodes adopt again only when every claim names one order.
 *
 * The split seed scan.  The head node alone can filter the seed space,
 * but any node can scan a share of it with the head's two sets
 * (identify.h, "The seed scan split across the nodes"): the head sends
 * them (cfs_order_agree_split, a SPLIT note), each node scans its share
 * and sends every seed that passes back to the head (cfs_order_agree_passed,
 * a PASSED note), and the head verifies it against its own opens; what it
 * identifies goes the claim's way above.  The result is the one the head
 * alone would find: the filter is the head's, the verification too.  A
 * lost SPLIT leaves that share to nobody: the head's own scan of the whole
 * range, which goes on at idle priority, still finds the seed.
 *
 * Threads.  cfs_order_agree_local runs on an identification thread,
 * cfs_order_agree_receive on the peer communication thread (it must not
 * block: it takes the module's lock, records, signals); the module's own
 * thread (`cfs-agree`) calls adopt, which plans for seconds, and hint.
 * One lock, a leaf but for the callbacks, which run without it. */
#ifndef CLAIRFS_ORDER_AGREE_H
#define CLAIRFS_ORDER_AGREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/identify.h"
#include "clairfs/plan.h"

#define CFS_ORDER_CLAIM_MAGIC 0x636c61696d763033ull /* "claimv03" */
#define CFS_ORDER_ROOT_MAX 120

/* One node's claim, as sent: fixed-size, raw bytes. */
struct cfs_order_claim {
    uint64_t magic;
    uint64_t kind, seed, n, world, batch;
    uint64_t drop_last, drop_last_batch, persistent_workers;
    uint64_t epoch, rank_first, rank_count;
    /* 0 for the first order claimed; one more at each refinement (the same
     * order told better: drop_last, persistent workers, detectron2's
     * stream), so that an older claim waits for its node's check of the
     * newer one rather than contradicting it */
    uint64_t generation;
    /* CFS_CLAIM_REFUSED_*: this node's opens contradict the claim of this
     * generation (the other fields are that claim's, the ranks this
     * node's) */
    uint64_t refused;
    /* the node's ranks are rank_first, rank_first + rank_stride, ...
     * (rank_count of them; 0 or 1: one block; the node count: cyclic) */
    uint64_t rank_stride;
    char root[CFS_ORDER_ROOT_MAX]; /* the dataset root ("" the mount's own), NUL-terminated */
};

enum {
    CFS_CLAIM_REFUSED_REFINEMENT = 1, /* a refinement this node checked */
    CFS_CLAIM_REFUSED_ADOPTED = 2,    /* the order every node adopted: its opens stopped fitting */
};

#define CFS_SPLIT_NOTE_MAGIC 0x73706c6974763031ull  /* "splitv01" */
#define CFS_PASSED_NOTE_MAGIC 0x7061737365763031ull /* "passev01" */

/* The head's sets for the other nodes' shares: fixed-size, raw bytes. */
struct cfs_split_note {
    uint64_t magic;
    char root[CFS_ORDER_ROOT_MAX];
    struct cfs_split_sets sets;
};

/* A seed that passed a node's share, for the head. */
struct cfs_passed_note {
    uint64_t magic;
    uint64_t seed, skip;
    char root[CFS_ORDER_ROOT_MAX];
};

enum cfs_order_agreement {
    CFS_ORDER_WAITING = 0, /* a node has not claimed, or the ranks do not cover the world */
    CFS_ORDER_AGREED,
    CFS_ORDER_CONTRADICTED, /* two claims differ: no node adopts */
};

struct cfs_order_decision {
    enum cfs_order_agreement state;
    uint32_t from_epoch;               /* AGREED: every node plans from it */
    struct cfs_rank_range *node_ranks; /* AGREED: nodes entries (the caller's array) */
    uint32_t first_differing;          /* CONTRADICTED: a node whose claim differs from... */
    uint32_t differs_from;             /* ...this one's */
    uint32_t missing;                  /* WAITING: nodes without a claim */
    uint32_t generation;               /* the newest generation claimed */
    uint32_t refining;                 /* WAITING: nodes whose claim is an older generation */
    bool refused;                      /* CONTRADICTED: first_differing refused it... */
    bool no_longer_fits;               /* ...the order adopted (else a refinement) */
};

/* The claim of an identification (root "" for the mount's own order). */
void cfs_order_claim_of(const struct cfs_identified *id, const char *root,
                        struct cfs_order_claim *out);
/* The sampler a claim names (a hint with a seed). */
void cfs_order_claim_sampler(const struct cfs_order_claim *c, struct cfs_sampler_params *out);
/* Whether a and b name one order (everything but the epoch, the ranks and
 * the generation). */
bool cfs_order_claims_alike(const struct cfs_order_claim *a, const struct cfs_order_claim *b);
/* Whether newer tells older's order better: one kind family (torch-ddp may
 * become detectron2), seed, n, world, batch and root, and a difference in
 * drop_last, drop_last_batch, persistent_workers or that kind only. */
bool cfs_order_claim_refines(const struct cfs_order_claim *newer,
                             const struct cfs_order_claim *older);

/* The decision over claims[0..nodes) (have[i]: node i claimed), node_ranks
 * an array of nodes entries the caller gives (filled when AGREED). */
void cfs_order_agree_decide(const struct cfs_order_claim *claims, const bool *have, uint32_t nodes,
                            struct cfs_rank_range *node_ranks, struct cfs_order_decision *out);

/* "nodes 0-1 agree: torch-ddp seed=5 world=4 batch=8, planned from epoch 1",
 * "waiting for node 1 (node 0: torch-ddp seed=5 world=4)", "node 1
 * contradicts node 0: torch-ddp seed=6 world=4 against seed=5 world=4;
 * every node stays a reactive cache". */
void cfs_order_agree_describe(const struct cfs_order_claim *claims, const bool *have,
                              uint32_t nodes, const struct cfs_order_decision *d, char *buf,
                              size_t len);

struct cfs_order_agree_params {
    uint32_t node, nodes;
    /* Send len bytes to node dest (never this node): must not block. */
    int (*send)(void *arg, uint32_t dest, const void *msg, size_t len);
    /* Another node's order, for root, as a hint to this node's identification. */
    void (*hint)(void *arg, const char *root, const struct cfs_sampler_params *hint);
    /* Another node refined the order this node claimed: check hint against
     * this node's opens although it has identified, and claim it again
     * (cfs_order_agree_local) or refuse it (cfs_order_agree_refuse).  NULL:
     * the hint callback. */
    void (*refine)(void *arg, const char *root, const struct cfs_sampler_params *hint);
    /* An order adopted before no longer holds for every node (a refinement
     * one node refused, or the order one node's opens stopped fitting):
     * back to reactive caching; why is the decision's description ("node 1's
     * opens no longer fit the agreed order (...); every node drops it and
     * stays a reactive cache").  NULL: nothing. */
    void (*drop)(void *arg, const char *root, const char *why);
    /* Every node agreed: adopt this node's identification (ctx as given to
     * cfs_order_agree_local) with every node's ranks, from from_epoch. */
    void (*adopt)(void *arg, const char *root, const void *ctx, const struct cfs_identified *mine,
                  const struct cfs_rank_range *node_ranks, uint32_t from_epoch);
    /* The head (node src) split the scan: scan this node's share of s and
     * hand each seed that passes to cfs_order_agree_passed, stopping when
     * *cancel becomes true (a claim came: the order is found; or the
     * module stops).  On the module's thread, which waits for it; not
     * called once a claim was heard.  NULL: no share scanned. */
    void (*scan_share)(void *arg, const char *root, uint32_t src, const struct cfs_split_sets *s,
                       const _Atomic bool *cancel);
    /* Node src's share passed seed (skip): verify it against this node's
     * opens (this node sent the sets).  On the module's thread. */
    void (*passed)(void *arg, const char *root, uint32_t src, uint32_t seed, uint32_t skip);
    void *arg;
};

struct cfs_order_agree;

/* Starts the module's thread.  0 or -errno with a one-line message. */
int cfs_order_agree_create(const struct cfs_order_agree_params *p, struct cfs_order_agree **out,
                           char *err, size_t errlen);
/* Stops the thread: no callback runs once it returns, while local and
 * receive may still be called (they record, nothing more).  Idempotent;
 * accepts NULL.  The teardown stops it before what the callbacks reach
 * (the roots a hint goes to, the maps an adoption reads) goes. */
void cfs_order_agree_stop(struct cfs_order_agree *a);
/* Stops the thread if needed, frees.  Accepts NULL. */
void cfs_order_agree_destroy(struct cfs_order_agree *a);
/* This node identified an order (again, or refined): claimed to every node.
 * One epoch's order (epoch_seed_only) is no claim: it says one epoch. */
void cfs_order_agree_local(struct cfs_order_agree *a, const char *root, const void *ctx,
                           const struct cfs_identified *id);
/* This node's opens contradict the newest refinement heard for root: said
 * to every node, which all fall back to reactive caching together. */
void cfs_order_agree_refuse(struct cfs_order_agree *a, const char *root);
/* This node's opens no longer fit the order every node adopted for root
 * (the data path's misses): said to every node, which all drop it and
 * stay reactive caches, until the claims agree again.  Nothing when no
 * order of root is adopted. */
void cfs_order_agree_refuse_adopted(struct cfs_order_agree *a, const char *root);
/* A message from node src (the peer thread).  Bad bytes are dropped. */
void cfs_order_agree_receive(struct cfs_order_agree *a, uint32_t src, const void *msg, size_t len);
/* This node holds the head of root's order: s goes to every other node,
 * whose scan_share scans its share.  The caller scans share `node` itself. */
void cfs_order_agree_split(struct cfs_order_agree *a, const char *root,
                           const struct cfs_split_sets *s);
/* A seed this node's share passed, to the head (its passed callback; this
 * node's own when it is the head). */
void cfs_order_agree_passed(struct cfs_order_agree *a, const char *root, uint32_t head,
                            uint32_t seed, uint32_t skip);
/* The state and its description (stats' cluster line). */
enum cfs_order_agreement cfs_order_agree_state(struct cfs_order_agree *a, char *buf, size_t len);

#endif
