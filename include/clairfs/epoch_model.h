/* The epoch-time model of clairfs-plan --env: from where each node's reads
 * of one epoch come from (the simulator's counts, clairfs/sim.h) and a
 * cluster description (clairfs/cluster_env.h), how long the epoch takes.
 *
 * Reads are overlapped with compute (prefetching), so the epoch takes
 *
 *     max(compute, the slowest node's I/O time)
 *
 * compute being the no-I/O lower bound: a node's samples per trainer rank
 * (its reads over its ranks; DistributedSampler's ranks differ by at most
 * one sample) times compute_per_sample, for the node with most (the node's
 * ranks run in parallel, one per GPU; the slowest node sets the pace of
 * synchronous training).
 *
 * A node's I/O time is the longest of its sources, which its fetch
 * threads read at once:
 *   PFS   pfs_bytes / share + pfs_reads * pfs_latency / in_flight, share =
 *         pfs_bw(R) / R with R the nodes that read the PFS in the epoch:
 *         the aggregate bandwidth is divided evenly among them (the node
 *         with most bytes finishes last; the others' leftover bandwidth is
 *         not redistributed, a slight pessimism when loads differ);
 *   NIC   (peer_bytes + pfs_bytes) / net_bw + peer_reads * net_latency /
 *         in_flight: everything from off the node enters through its link;
 *   SSD   (local_bytes + peer_bytes) * ssd_fraction / ssd_bw and
 *   RAM   the rest at ram_bw: the node's tiers serve its own hits and, in
 *         a symmetric cluster, as many bytes to its peers as it receives
 *         from them.
 * ssd_fraction is the share of a node's held bytes that sit on its SSD
 * (cfs_epoch_ssd_fraction): with random sampling every held file is read
 * about equally often, so hits split as the bytes held do. */
#ifndef CLAIRFS_EPOCH_MODEL_H
#define CLAIRFS_EPOCH_MODEL_H

#include <stdint.h>

#include "clairfs/cluster_env.h"

/* One node's epoch.  Doubles: the figures of a sampled simulation are
 * scaled up to the dataset they stand for. */
struct cfs_epoch_node {
    double samples;                  /* samples per trainer rank of the node */
    double local_reads, local_bytes; /* from the node's own tiers */
    double peer_reads, peer_bytes;   /* from other nodes */
    double pfs_reads, pfs_bytes;     /* from the PFS */
    double ssd_fraction;             /* of tier reads, those from the SSD (0..1) */
};

enum cfs_epoch_bound {
    CFS_EPOCH_COMPUTE,
    CFS_EPOCH_PFS,
    CFS_EPOCH_NET,
    CFS_EPOCH_SSD,
    CFS_EPOCH_RAM
};

struct cfs_epoch_time {
    double compute;             /* the no-I/O lower bound, s */
    double io;                  /* the slowest node's I/O time, s */
    double total;               /* max(compute, io) */
    uint32_t readers;           /* nodes that read the PFS */
    double pfs_share;           /* bytes/s each of them gets */
    uint32_t slowest;           /* the node of io */
    enum cfs_epoch_bound bound; /* what total is: compute, or the slowest node's source */
};

const char *cfs_epoch_bound_name(enum cfs_epoch_bound b);

/* One node's I/O time with PFS share `share` (bytes/s; unused without PFS
 * bytes); the source that takes longest in *bound when not NULL. */
double cfs_epoch_node_io(const struct cfs_cluster_env *e, const struct cfs_epoch_node *n,
                         double share, enum cfs_epoch_bound *bound);

/* The epoch of `count` nodes. */
void cfs_epoch_model(const struct cfs_cluster_env *e, const struct cfs_epoch_node *nodes,
                     uint32_t count, struct cfs_epoch_time *out);

/* The share of held bytes on the SSD for a node that holds
 * min(ram + ssd, wanted) bytes, RAM filled first. */
double cfs_epoch_ssd_fraction(const struct cfs_cluster_env *e, double wanted);

#endif
