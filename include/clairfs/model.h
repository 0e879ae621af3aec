/* The performance model of a distributed mount: for each fetch of a file
 * this node does not hold, where to get it from, the owner on another node
 * or the PFS, as the NoPFS paper does: estimate the time of both and take
 * the smaller.
 *
 *   PFS:  pfs_latency + size / share, share = min(pfs_client_bw,
 *         pfs_bw / clients): the PFS's aggregate bandwidth is divided among
 *         the nodes reading it at once (every node of the job, in a
 *         synchronous data-parallel run), and one client alone reaches at
 *         most pfs_client_bw.
 *   Peer: latency + size / min(net_bw, tier_bw of the owner's tier), the
 *         latency being the one measured from that peer when there is one,
 *         else net_latency.  A peer marked slow (no answer within
 *         peer_timeout) is never chosen.
 *
 * Parameters come from constants (below, a conservative parallel
 * filesystem under load and a commodity network), overridden by a file
 * given with -o model=FILE: "key = value" lines, '#' comments, keys
 * pfs_bw, pfs_client_bw, net_bw, ram_bw, ssd_bw (bytes per second, K/M/G
 * suffixes allowed), pfs_latency, net_latency (seconds).  Unknown keys and
 * bad values are errors naming FILE:LINE.
 *
 * Measured latency: the data path reports every completed fetch
 * (cfs_model_peer_done, cfs_model_pfs_done, below); the service time beyond
 * the transfer at the modelled bandwidth, as an exponentially weighted mean
 * (alpha 1/8, starting from net_latency or pfs_latency), is the peer's or
 * the PFS's latency.  A latency, not a rate, so that small and large files
 * measure the same thing.  A busy source's service time grows: exactly when
 * the other should take some of the load.
 *
 * Pure computation apart from the measurements' atomics: no I/O but
 * cfs_model_load(), no MPI. */
#ifndef CLAIRFS_MODEL_H
#define CLAIRFS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/tier.h"

struct cfs_model_params {
    double pfs_bw;        /* aggregate PFS bandwidth, bytes/s */
    double pfs_client_bw; /* one client's maximum, bytes/s */
    double pfs_latency;   /* per file (open + first byte), s */
    double net_bw;        /* one peer link, bytes/s */
    double net_latency;   /* one request round trip, s */
    double ram_bw, ssd_bw; /* reading the owner's tier, bytes/s */
    unsigned fixed;        /* CFS_MODEL_FIXED_*: keys set by a model file */
};
/* A latency given in the model file is used as it is, never replaced by the
 * measured one. */
#define CFS_MODEL_FIXED_PFS_LATENCY (1u << 2)
#define CFS_MODEL_FIXED_NET_LATENCY (1u << 4)

enum cfs_model_source { CFS_MODEL_PFS = 0, CFS_MODEL_PEER = 1 };

struct cfs_model;

/* The built-in defaults. */
void cfs_model_defaults(struct cfs_model_params *out);
/* Apply a config file on top of *p: 0, or -errno with "FILE:LINE: ..." in
 * err. */
int cfs_model_load(const char *path, struct cfs_model_params *p, char *err, size_t errlen);

/* nodes: the peers measured (ranks 0..nodes-1); clients: nodes that read
 * the PFS concurrently. */
int cfs_model_create(const struct cfs_model_params *p, uint32_t nodes, uint32_t clients,
                     struct cfs_model **out);
void cfs_model_destroy(struct cfs_model *m);

/* Estimated seconds to fetch size bytes from the PFS, or from peer node
 * (its tier).  */
double cfs_model_pfs_time(const struct cfs_model *m, uint64_t size);
double cfs_model_peer_time(const struct cfs_model *m, uint32_t node, enum cfs_tier tier,
                           uint64_t size);
/* Where to fetch size bytes held by node in tier; slow: the peer layer
 * marked it slow.  When the estimate says PFS, every CFS_MODEL_PROBE_EVERY-th
 * choice for that node still says PEER: a probe that refreshes the measured
 * latency (the peer may have been busy only for a while). */
#define CFS_MODEL_PROBE_EVERY 16
enum cfs_model_source cfs_model_choose(struct cfs_model *m, uint32_t node,
                                       enum cfs_tier tier, uint64_t size, bool slow);
/* A peer fetch of bytes took seconds (its latency sample, timeouts
 * included; nothing when the model file gives net_latency);
 * cfs_model_peer_done() is the data path's way in. */
void cfs_model_observe(struct cfs_model *m, uint32_t node, uint64_t bytes, double seconds);
/* The measured latency of node, seconds, 0 before any observation. */
double cfs_model_measured_latency(const struct cfs_model *m, uint32_t node);

/* Completions as the data path sees them: a fetch of bytes submitted at t0
 * and complete at now (ns).  The sample is what the fetch took, queueing
 * included, beyond its transfer at the modelled bandwidth, on both sides
 * alike: a source that is loaded (a peer's queue of batches, the io
 * engine's queue of PFS reads) answers later, and the other one takes the
 * next files.  (Dividing a peer request's time by the requests in flight at
 * its completion, as before, over-weighted the last ones of every batch,
 * which see few in flight after a long wait, and was compared with a PFS
 * latency nobody measured.)  Peer fetches measure that node's latency, PFS
 * fetches the PFS's (an EWMA, alpha 1/8, from pfs_latency); a latency given
 * in the model file stays as given. */
void cfs_model_peer_done(struct cfs_model *m, uint32_t node, uint64_t bytes, uint64_t t0_ns,
                         uint64_t now_ns);
void cfs_model_pfs_done(struct cfs_model *m, uint64_t bytes, uint64_t t0_ns, uint64_t now_ns);
/* The PFS latency the model uses now (measured, else configured), s. */
double cfs_model_pfs_latency(const struct cfs_model *m);

#endif
