/* The description of a cluster clairfs-plan models but does not run on:
 * what the PFS delivers to how many readers at once, each node's RAM and
 * SSD tiers, the network between nodes, and what a trainer rank spends
 * computing one sample.  clairfs-plan --env uses it to turn the
 * simulator's bytes per source into epoch times (clairfs/epoch_model.h).
 *
 * Given as a built-in preset (cfs_cluster_env_preset: "lassen", the NoPFS
 * paper's machine, and "lassen-ram", the same without SSDs;
 * src/cluster_env.c says where each number comes from) or
 * as a file of "key = value" lines like -o model=FILE's: '#' starts a
 * comment, blank lines are ignored, every key at most once.
 *
 *   pfs_bw = R:BW R:BW ...   aggregate PFS bandwidth (bytes/s) with R
 *                            readers at once; R strictly increasing, at
 *                            most CFS_CLUSTER_ENV_POINTS points; linear
 *                            between points, saturated beyond the last,
 *                            proportional to R below the first (required)
 *   pfs_latency = S          per file read from the PFS, seconds (0)
 *   net_bw = BW              one node's network link, bytes/s (required)
 *   net_latency = S          per peer message, seconds (0)
 *   in_flight = N            reads a node keeps in flight, over which the
 *                            per-read latencies overlap (64, io_depth's
 *                            default)
 *   ram = SIZE, ssd = SIZE   per-node tier capacities (ram required, ssd 0)
 *   ram_bw, ssd_bw = BW      tier read bandwidth, bytes/s (ram_bw required;
 *                            ssd_bw when ssd > 0)
 *   compute_per_sample = S   seconds one trainer rank computes per sample
 *                            (required; the no-I/O lower bound)
 *   ranks_per_node = N       trainer ranks (GPUs) per node (1)
 *
 * Sizes and bandwidths take K/M/G/T suffixes (powers of 1024, as every
 * size of clairfs) or plain numbers such as 330e6.  Errors name FILE:LINE
 * (or FILE for a missing key) on one line. */
#ifndef CLAIRFS_CLUSTER_ENV_H
#define CLAIRFS_CLUSTER_ENV_H

#include <stddef.h>
#include <stdint.h>

#define CFS_CLUSTER_ENV_POINTS 32

struct cfs_cluster_env {
    char name[64]; /* the preset's name or the file's path */
    uint32_t pfs_points;
    uint32_t pfs_readers[CFS_CLUSTER_ENV_POINTS]; /* strictly increasing, >= 1 */
    double pfs_bw[CFS_CLUSTER_ENV_POINTS];        /* aggregate bytes/s */
    double pfs_latency;                           /* s per file */
    double net_bw;                                /* bytes/s per node */
    double net_latency;                           /* s per peer message */
    uint32_t in_flight;                           /* >= 1 */
    uint64_t ram, ssd;                            /* bytes per node */
    double ram_bw, ssd_bw;                        /* bytes/s */
    double compute_per_sample;                    /* s per sample per trainer rank */
    uint32_t ranks_per_node;                      /* >= 1 */
};

/* A built-in description by name: 0, or -ENOENT for an unknown name. */
int cfs_cluster_env_preset(const char *name, struct cfs_cluster_env *out);

/* Read FILE into *out: 0, or -errno with a one-line message in err. */
int cfs_cluster_env_load(const char *path, struct cfs_cluster_env *out, char *err, size_t errlen);

/* --env ARG: a preset's name, else a file. */
int cfs_cluster_env_get(const char *arg, struct cfs_cluster_env *out, char *err, size_t errlen);

/* The aggregate PFS bandwidth with `readers` nodes reading at once (0 for
 * none), bytes/s. */
double cfs_cluster_env_pfs_bw(const struct cfs_cluster_env *e, uint32_t readers);

#endif
