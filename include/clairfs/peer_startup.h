/* The nodes' start-up meetings: how the nodes of a distributed mount learn,
 * before anything is mounted, that every one of them can start and plans
 * the same run.
 *
 * There are two meetings, each one MPI_Allgather of every node's word (its
 * status and its trainer ranks).  The first comes once the catalog is
 * loaded and the run configuration made: every node's ranks go into the
 * configuration, then the nodes compare their configurations and catalogs
 * (the agreement, peer.h).  The second comes once every node has its plan,
 * so that after it every node mounts.  A node that fails before a meeting
 * still attends it, with a failed status, from cfs_peer_startup_destroy()
 * on its exit path: no node waits forever in a collective, and every node
 * exits non-zero with nothing mounted.
 *
 * Single node (peer NULL) or built without MPI: the handle is NULL and
 * every call succeeds at once. */
#ifndef CLAIRFS_PEER_STARTUP_H
#define CLAIRFS_PEER_STARTUP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h" /* HAVE_MPI */

#include "clairfs/peer.h"
#include "clairfs/run_config.h"

struct cfs_peer_startup;

#if HAVE_MPI

/* The buffers of both meetings, allocated now so that the exit path can
 * always attend.  peer NULL: *out = NULL.  0 or -ENOMEM (message in err). */
int cfs_peer_startup_create(struct cfs_peer *peer, struct cfs_peer_startup **out, char *err,
                            size_t errlen);
/* First meeting: every node's trainer ranks replace cfg->node_ranks, then
 * the agreement on cfg and the catalog hash.  0, -ECANCELED (a node could
 * not start; err names it, or is empty when this node is the one),
 * -EINVAL (the nodes disagree, err says on what), -EIO. */
int cfs_peer_startup_meet_config(struct cfs_peer_startup *s, struct cfs_run_config *cfg,
                                 uint64_t catalog_hash, char *err, size_t errlen);
/* Second meeting: every node has its plan.  0, -ECANCELED, -EIO. */
int cfs_peer_startup_meet_planned(struct cfs_peer_startup *s, char *err, size_t errlen);
/* Attends the meetings not yet held, as failed, and frees.  Accepts NULL. */
void cfs_peer_startup_destroy(struct cfs_peer_startup *s);

#else /* !HAVE_MPI: one node, nothing to meet. */

static inline int cfs_peer_startup_create(struct cfs_peer *peer, struct cfs_peer_startup **out,
                                          char *err, size_t errlen)
{
    (void)peer; (void)err; (void)errlen;
    *out = NULL;
    return 0;
}
static inline int cfs_peer_startup_meet_config(struct cfs_peer_startup *s,
                                               struct cfs_run_config *cfg, uint64_t catalog_hash,
                                               char *err, size_t errlen)
{
    (void)s; (void)cfg; (void)catalog_hash; (void)err; (void)errlen;
    return 0;
}
static inline int cfs_peer_startup_meet_planned(struct cfs_peer_startup *s, char *err,
                                                size_t errlen)
{
    (void)s; (void)err; (void)errlen;
    return 0;
}
static inline void cfs_peer_startup_destroy(struct cfs_peer_startup *s) { (void)s; }

#endif /* HAVE_MPI */

#endif
