/* The daemon's side of the nodes' agreement (cluster_order.h).
 *
 * The agreement module (clairfs/order_agree.h) decides; it knows neither
 * the roots nor the data path, and reaches them through the callbacks set
 * here: a claim another node made becomes a hint to this node's roots, an
 * agreed order is adopted by the prefetcher with every node's ranks, a
 * share of the head's seed range is scanned on this node's idle CPUs.  It
 * sits beside main rather than in it because these callbacks run on the
 * agreement's thread and the identification's, not in the mount's phases:
 * main only creates it, hands it the roots and the peer notes, and stops
 * it in the teardown before what the callbacks reach goes.
 *
 * The roots are made after the agreement (the peer thread, which hands in
 * the claims, starts between the two), so they are set later and read
 * atomically; a claim heard before they exist is kept by the agreement as
 * a hint owed, and a hint the roots get before a root's first open is kept
 * for that root (cfs_roots_take_hint).
 *
 * Falling back together.  Two things make a node refuse what the others
 * hold: its identification's check of another node's refinement fails
 * (cfs_cluster_order_refused), or the data path's misses show that its
 * opens stopped fitting the adopted order (cfs_cluster_order_refuse_adopted).
 * Either way the agreement tells every node, and each drops the plan it
 * adopted (cfs_prefetch_drop_cluster): no node goes on with a plan whose
 * owners and first reads the others no longer share. */
#include "cluster_order.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "clairfs/order_agree.h"
#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"

struct cfs_cluster_order {
    struct cfs_cluster_order_params p;
    struct cfs_roots *_Atomic roots;
    struct cfs_order_agree *agree;
};

/* The agreement's thread: every node's opens fit one order. */
static void agreed_adopt(void *arg, const char *root, const void *map,
                         const struct cfs_identified *mine, const struct cfs_rank_range *node_ranks,
                         uint32_t from_epoch)
{
    struct cfs_cluster_order *co = arg;
    char err[512];
    int rc = cfs_prefetch_adopt_cluster(co->p.pf, mine, root, map, mine->sampler.n, node_ranks,
                                        from_epoch, err, sizeof(err));
    if (rc == -EBUSY)
        cfs_info("order: %s", err);
    else if (rc < 0)
        cfs_warn("order: %s", err);
}

static void agreed_hint(void *arg, const char *root, const struct cfs_sampler_params *hint)
{
    struct cfs_cluster_order *co = arg;
    struct cfs_roots *roots = atomic_load(&co->roots);
    if (roots)
        cfs_roots_take_hint(roots, root, hint);
}

/* The agreement's thread: a node refused the order every node adopted. */
static void agreed_drop(void *arg, const char *root, const char *why)
{
    (void)root; /* the mount predicts one root's order at a time */
    cfs_prefetch_drop_cluster(((struct cfs_cluster_order *)arg)->p.pf, why);
}

static int agreement_send(void *arg, uint32_t dest, const void *msg, size_t len)
{
    return cfs_peer_note(((struct cfs_cluster_order *)arg)->p.peer, dest, msg, len);
}

struct share_scan {
    struct cfs_cluster_order *co;
    const char *root;
    uint32_t head;
    unsigned passed;
};

static bool share_passed(void *arg, uint32_t seed, uint32_t skip)
{
    struct share_scan *sc = arg;
    sc->passed++;
    cfs_order_agree_passed(sc->co->agree, sc->root, sc->head, seed, skip);
    return false;
}

/* The agreement's thread: node src (the head) sent its sets; this node's
 * share of the range, paced as its own search of that root (its budget,
 * its metric), until a claim comes. */
static void agreed_scan_share(void *arg, const char *root, uint32_t src,
                              const struct cfs_split_sets *s, const _Atomic bool *cancel)
{
    struct cfs_cluster_order *co = arg;
    uint32_t node = co->p.node, nodes = co->p.nodes;
    struct share_scan sc = {.co = co, .root = root, .head = src};
    uint32_t first;
    uint64_t count;
    cfs_identify_split_share(s, node, nodes, &first, &count);
    cfs_info("order: scanning seeds %u-%u (share %u of %u) with node %u's sets", first,
             (uint32_t)(first + count - 1), node, nodes, src);
    int rc = cfs_roots_split_scan(atomic_load(&co->roots), root, s, node, nodes, cancel,
                                  share_passed, &sc);
    cfs_info("order: share %u of %u %s; %u seeds passed to node %u", node, nodes,
             rc == -ECANCELED ? "stopped (a claim or newer sets came)"
             : rc < 0         ? strerror(-rc)
                              : "scanned",
             sc.passed, src);
}

/* The agreement's thread: a seed another node's share passed. */
static void agreed_passed(void *arg, const char *root, uint32_t src, uint32_t seed, uint32_t skip)
{
    struct cfs_cluster_order *co = arg;
    struct cfs_roots *roots = atomic_load(&co->roots);
    (void)src;
    if (roots)
        cfs_roots_take_candidate(roots, root, seed, skip);
}

int cfs_cluster_order_create(const struct cfs_cluster_order_params *p,
                             struct cfs_cluster_order **out, char *err, size_t errlen)
{
    *out = NULL;
    struct cfs_cluster_order *co = calloc(1, sizeof(*co));
    if (!co) {
        snprintf(err, errlen, "order agreement: out of memory");
        return -ENOMEM;
    }
    co->p = *p;
    struct cfs_order_agree_params ap = {
        .node = p->node,
        .nodes = p->nodes,
        .send = agreement_send,
        .hint = agreed_hint,
        /* an identified module takes a refinement as a hint, checked at once */
        .refine = agreed_hint,
        .drop = agreed_drop,
        .adopt = agreed_adopt,
        .scan_share = agreed_scan_share,
        .passed = agreed_passed,
        .arg = co,
    };
    int rc = cfs_order_agree_create(&ap, &co->agree, err, errlen);
    if (rc < 0) {
        free(co);
        return rc;
    }
    *out = co;
    return 0;
}

void cfs_cluster_order_set_roots(struct cfs_cluster_order *co, struct cfs_roots *roots)
{
    atomic_store(&co->roots, roots);
}

void cfs_cluster_order_stop(struct cfs_cluster_order *co)
{
    if (co)
        cfs_order_agree_stop(co->agree);
}

void cfs_cluster_order_destroy(struct cfs_cluster_order *co)
{
    if (!co)
        return;
    cfs_order_agree_destroy(co->agree);
    free(co);
}

void cfs_cluster_order_identified(struct cfs_cluster_order *co, const struct cfs_root *root,
                                  const struct cfs_identified *id)
{
    cfs_order_agree_local(co->agree, root->name, root->map, id);
}

void cfs_cluster_order_refused(struct cfs_cluster_order *co, const struct cfs_root *root,
                               const struct cfs_sampler_params *hint, const char *why)
{
    cfs_warn("order: %s%sthis node's opens refuse the refinement to %s seed=%u (%s); every "
             "node drops the agreed order",
             root->name, root->name[0] ? ": " : "", cfs_sampler_kind_name(hint->kind),
             (uint32_t)hint->seed, why);
    cfs_order_agree_refuse(co->agree, root->name);
}

void cfs_cluster_order_refuse_adopted(struct cfs_cluster_order *co, const char *root)
{
    cfs_order_agree_refuse_adopted(co->agree, root);
}

void cfs_cluster_order_split(struct cfs_cluster_order *co, const struct cfs_root *root,
                             const struct cfs_split_sets *sets)
{
    cfs_order_agree_split(co->agree, root->name, sets);
}

void cfs_cluster_order_note(struct cfs_cluster_order *co, uint32_t src, const void *msg, size_t len)
{
    cfs_order_agree_receive(co->agree, src, msg, len);
}

void cfs_cluster_order_text(struct cfs_cluster_order *co, char *buf, size_t len)
{
    cfs_order_agree_state(co->agree, buf, len);
}
