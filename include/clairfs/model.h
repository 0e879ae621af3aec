/* The performance model of a distributed mount: for each fetch of a file
 * this node does not hold, where to get it from, the owner on another node
 * or the PFS, as the NoPFS paper does: estimate the time of both; the
 * owner unless it is clearly the slower (below).
 *
 *   PFS:  latency + size / bandwidth, both measured: the least-squares
 *         line through the PFS fetches' (bytes, seconds), weighted as the
 *         sums below, once it has 16 completions' weight over sizes that
 *         vary and a positive slope.  Before, or with files all of a size,
 *         or with any PFS figure given in the model file: the measured (or
 *         given) latency + size / share, share = min(pfs_client_bw,
 *         pfs_bw / clients): the PFS's aggregate bandwidth divided among
 *         the nodes reading it at once (every node of the job, in a
 *         synchronous data-parallel run), one client alone reaching at
 *         most pfs_client_bw.
 *   Peer: latency + size / min(net_bw, tier_bw of the owner's tier)
 *         + queued * per_file, the latency and the per-file service time
 *         being the ones measured from that peer when there are some, else
 *         net_latency (and the latency plus this file's transfer).  queued
 *         is what the caller says the fetch would wait behind: the requests
 *         in flight to that peer for a read the trainer waits on now, 0 for
 *         a prefetch (its queue costs the trainer nothing while the
 *         prefetcher is ahead, and counting it sent every deep prefetch
 *         window to the PFS).  A peer marked slow (no answer within
 *         peer_timeout) is never chosen.
 *
 * The choice: the peer unless its estimate exceeds CFS_MODEL_MARGIN times
 * the PFS's.  The measured figures swing by tens of percent under load, a
 * file the owner holds costs the shared PFS nothing when read from the
 * owner, and only a peer clearly slower than the PFS (a busy or remote
 * node, an SSD tier) should lose its files to it.
 *
 * Parameters come from constants (below, a conservative parallel
 * filesystem under load and a commodity network), overridden by a file
 * given with -o model=FILE: "key = value" lines, '#' comments, keys
 * pfs_bw, pfs_client_bw, net_bw, ram_bw, ssd_bw (bytes per second, K/M/G
 * suffixes allowed), pfs_latency, net_latency (seconds).  Unknown keys and
 * bad values are errors naming FILE:LINE.
 *
 * Measured service: the data path reports every completed fetch
 * (cfs_model_peer_done, cfs_model_pfs_done, below).  A peer answers in
 * order, so a peer fetch's service time runs from its submission or that
 * peer's previous completion, whichever is later: a request that waited
 * behind others was served only since the one before it left, and the wait
 * before is queueing.  (The queue-inclusive mean this replaced, 46-157 ms
 * per peer file behind a batch on one 1 Gbit link, lost to a PFS measured
 * at a few ms once the cluster had stopped reading it, and sent 23-47 MiB
 * per epoch of files the owners held to the PFS.)  A PFS fetch's runs from
 * its submission: the io engine runs this node's PFS fetches at once
 * (io_depth), none waits behind another, and what it took is the PFS's
 * latency at the load the cluster put on it.  Per source the model keeps
 * sums of service seconds, bytes and completions, decayed by
 * CFS_MODEL_DECAY per completion (a batch's REPLY completes its files at
 * once: the first carries the batch's time, the others none, and the sums
 * average over the batch), starting from the configured latency as
 * CFS_MODEL_PRIOR completions.  Latency = (seconds - bytes / bandwidth) /
 * completions: a latency, not a rate, so that small and large files
 * measure the same thing; per-file service = seconds / completions.
 *
 * Pure computation apart from the measurements (one mutex, held for a few
 * arithmetic operations): no I/O but cfs_model_load(), no MPI. */
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
/* Any PFS figure given: the PFS's time is the configured share's, not the
 * measured line's. */
#define CFS_MODEL_FIXED_PFS ((1u << 0) | (1u << 1) | CFS_MODEL_FIXED_PFS_LATENCY)

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
 * (its tier) behind queued requests (INFINITY for a node that does not
 * exist). */
double cfs_model_pfs_time(const struct cfs_model *m, uint64_t size);
double cfs_model_peer_time(const struct cfs_model *m, uint32_t node, enum cfs_tier tier,
                           uint64_t size, uint32_t queued);
/* Where to fetch size bytes held by node in tier, behind queued requests
 * to it (0 for a prefetch); slow: the peer layer marked it slow.  When the
 * estimate says PFS, every CFS_MODEL_PROBE_EVERY-th choice for that node
 * still says PEER: a probe that refreshes the measurement (the peer may
 * have been busy only for a while). */
#define CFS_MODEL_PROBE_EVERY 16
#define CFS_MODEL_MARGIN 2.0  /* the PFS only when the peer is estimated this many times slower */
#define CFS_MODEL_DECAY (1.0 / 64) /* per completion: about a batch's worth of memory */
#define CFS_MODEL_PRIOR 8.0   /* the configured latency's weight in completions */
enum cfs_model_source cfs_model_choose(struct cfs_model *m, uint32_t node,
                                       enum cfs_tier tier, uint64_t size, uint32_t queued,
                                       bool slow);
/* A peer fetch of bytes took seconds of service (a sample as
 * cfs_model_peer_done computes them; nothing when the model file gives
 * net_latency). */
void cfs_model_observe(struct cfs_model *m, uint32_t node, uint64_t bytes, double seconds);
/* The measured latency of node, seconds, 0 before any observation. */
double cfs_model_measured_latency(const struct cfs_model *m, uint32_t node);

/* Completions as the data path sees them: a fetch of bytes submitted at t0
 * and complete at now (ns).  Peer fetches measure that node, PFS fetches
 * the PFS; a latency given in the model file stays as given.  Timeouts are
 * not reported: the peer layer's slow mark already keeps fetches off a
 * silent peer, and seconds of silence averaged in made a peer that answers
 * again look slow for thousands of fetches. */
void cfs_model_peer_done(struct cfs_model *m, uint32_t node, uint64_t bytes, uint64_t t0_ns,
                         uint64_t now_ns);
void cfs_model_pfs_done(struct cfs_model *m, uint64_t bytes, uint64_t t0_ns, uint64_t now_ns);
/* The PFS latency the model uses now (measured, else configured), s. */
double cfs_model_pfs_latency(const struct cfs_model *m);
/* The bandwidth one PFS fetch sees now, bytes/s: measured (the slope of
 * the completions' seconds against their bytes) once they say enough,
 * else the configured share. */
double cfs_model_pfs_bandwidth(const struct cfs_model *m);

#endif
