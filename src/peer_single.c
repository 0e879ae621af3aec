/* Peers when there are none: the single-node ops every mount without peers
 * hands the prefetcher, and, in a build without MPI, the node handle's
 * functions (cfs_peer_init and the rest), which then always speak of one
 * node.  The MPI transport is peer.c and peer_proto.c. */
#include "clairfs/peer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h" /* HAVE_MPI */

static uint32_t single_node(const void *peer)
{
    (void)peer;
    return 0;
}

static uint32_t single_nodes(const void *peer)
{
    (void)peer;
    return 1;
}

static int single_submit(void *peer, struct cfs_peer_req *req)
{
    (void)peer;
    (void)req;
    return -ESHUTDOWN;
}

static enum cfs_peer_state single_node_state(const void *peer, uint32_t node)
{
    (void)peer;
    return node == 0 ? CFS_PEER_SELF : CFS_PEER_GONE;
}

const struct cfs_peer_ops cfs_peer_single_ops = {
    .node = single_node,
    .nodes = single_nodes,
    .submit = single_submit,
    .node_state = single_node_state,
};

#if !HAVE_MPI

const struct cfs_peer_ops *cfs_peer_ops_of(const struct cfs_peer *p)
{
    (void)p;
    return &cfs_peer_single_ops;
}

int cfs_peer_init(int *argc, char ***argv, struct cfs_peer **out, char *err, size_t errlen)
{
    (void)argc;
    (void)argv;
    *out = NULL;
    if (!cfs_peer_launched())
        return 0;
    if (err && errlen)
        snprintf(err, errlen, "started by mpirun, but clairfs was built without MPI");
    return -ENOTSUP;
}

int cfs_peer_rank(const struct cfs_peer *p)
{
    (void)p;
    return 0;
}

int cfs_peer_size(const struct cfs_peer *p)
{
    (void)p;
    return 1;
}

int cfs_peer_agree(struct cfs_peer *p, const struct cfs_peer_agreement *mine, char *err,
                   size_t errlen)
{
    (void)p;
    (void)mine;
    (void)err;
    (void)errlen;
    return 0;
}

int cfs_peer_allgather(struct cfs_peer *p, const void *mine, size_t len, void *all, char *err,
                       size_t errlen)
{
    (void)p;
    (void)err;
    (void)errlen;
    memcpy(all, mine, len);
    return 0;
}

int cfs_peer_start(struct cfs_peer *p, const struct cfs_peer_params *params, char *err,
                   size_t errlen)
{
    (void)p;
    (void)params;
    snprintf(err, errlen, "peers: not running under MPI");
    return -ENOTSUP;
}

int cfs_peer_note(struct cfs_peer *p, uint32_t dest, const void *msg, size_t len)
{
    (void)p, (void)dest, (void)msg, (void)len;
    return -ESHUTDOWN;
}

int cfs_peer_submit(struct cfs_peer *p, struct cfs_peer_req *req)
{
    return single_submit(p, req);
}

enum cfs_peer_state cfs_peer_node_state(const struct cfs_peer *p, uint32_t node)
{
    return single_node_state(p, node);
}

void cfs_peer_get_stats(struct cfs_peer *p, struct cfs_peer_stats *out)
{
    (void)p;
    *out = (struct cfs_peer_stats){0};
}

void cfs_peer_leave(struct cfs_peer *p)
{
    (void)p;
}

void cfs_peer_destroy(struct cfs_peer *p)
{
    (void)p;
}

#endif /* !HAVE_MPI */
