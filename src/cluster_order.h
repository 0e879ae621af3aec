/* The daemon's side of the nodes' agreement on an identified order
 * (cluster_order.c; the agreement itself is clairfs/order_agree.h): a
 * distributed mount with nothing registered claims what each root's
 * identification finds, hands another node's claim to the roots as a hint,
 * scans its share of the head's seed range, and adopts the agreed plan. */
#ifndef CLAIRFS_CLUSTER_ORDER_H
#define CLAIRFS_CLUSTER_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "clairfs/identify.h"
#include "clairfs/peer.h"
#include "clairfs/prefetch.h"
#include "clairfs/roots.h"

struct cfs_cluster_order_params {
    uint32_t node, nodes;
    struct cfs_peer *peer;   /* the claims' transport (cfs_peer_note) */
    struct cfs_prefetch *pf; /* adopts the agreed plan */
};

struct cfs_cluster_order;

/* Starts the agreement's thread, before the peer thread that hands it the
 * other nodes' notes (cfs_cluster_order_note).  0 or -errno with a
 * one-line message. */
int cfs_cluster_order_create(const struct cfs_cluster_order_params *p,
                             struct cfs_cluster_order **out, char *err, size_t errlen);
/* The roots its hints go to, once they exist (before the first open). */
void cfs_cluster_order_set_roots(struct cfs_cluster_order *co, struct cfs_roots *roots);
/* Stops the agreement's thread: no callback reaches the roots or the data
 * path once it returns.  Accepts NULL. */
void cfs_cluster_order_stop(struct cfs_cluster_order *co);
/* After the peer thread left: frees.  Accepts NULL. */
void cfs_cluster_order_destroy(struct cfs_cluster_order *co);

/* A root's identification thread found an order: claimed to every node. */
void cfs_cluster_order_identified(struct cfs_cluster_order *co, const struct cfs_root *root,
                                  const struct cfs_identified *id);
/* A root's identification thread: its opens do not fit the refinement
 * another node claimed (hint, why), which every node then drops. */
void cfs_cluster_order_refused(struct cfs_cluster_order *co, const struct cfs_root *root,
                               const struct cfs_sampler_params *hint, const char *why);
/* The data path: this node's opens no longer fit the order every node
 * adopted for root ("" the mount's own): every node drops it. */
void cfs_cluster_order_refuse_adopted(struct cfs_cluster_order *co, const char *root);
/* The head's identification thread: its sets, for the other nodes' shares. */
void cfs_cluster_order_split(struct cfs_cluster_order *co, const struct cfs_root *root,
                             const struct cfs_split_sets *sets);
/* The peer thread: a note from node src (must not block). */
void cfs_cluster_order_note(struct cfs_cluster_order *co, uint32_t src, const void *msg,
                            size_t len);
/* Where the agreement stands, for the stats' cluster clause. */
void cfs_cluster_order_text(struct cfs_cluster_order *co, char *buf, size_t len);

#endif
