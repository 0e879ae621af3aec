/* The cache simulator behind clairfs-plan: replays one node's planned
 * stream against four policies and counts where each read's bytes come from.
 *
 * It counts bytes, not time: a fetch is a fetch whether the prefetcher made
 * it ahead of the read or the read waited for it, so "prefetch in access
 * order" changes when the clairvoyant policy fetches, not what.  Capacity is
 * ram + ssd of the node (both tiers count as the node's cache), each file
 * charged in whole granules (the mount's pages, charge_granule).
 *
 *  nocache      every read goes to the PFS.
 *  lru          a reactive LRU cache of the node's capacity, filled on
 *               demand; LRU nodes know nothing of each other, so no peers.
 *  static       NoPFS: the node pins its most-read files (ties by first use)
 *               up to its capacity, fetched at first use; a read of a file
 *               another node pins is a peer read once that node has read
 *               the file (in an earlier epoch), else a PFS read.
 *  clairvoyant  the global assignment of clairfs/plan.h: files the node owns
 *               and other nodes read are pinned for the peers; the rest of
 *               the capacity is managed by Belady's MIN (evict the entry
 *               whose next use is farthest; do not insert a file used later
 *               than every entry; drop a file at its last read; entries
 *               re-keyed at every epoch).  An owner stages a file from the
 *               PFS in the epoch of the cluster's first read of it (it knows
 *               every plan): reads in that epoch are PFS reads, later misses
 *               elsewhere peer reads; files without an owner: PFS.
 * Epochs are a common clock: all trainer ranks advance in lockstep.
 * Pessimistic in a file's first epoch, where prefetching can do better. */
#ifndef CLAIRFS_SIM_H
#define CLAIRFS_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "clairfs/plan.h"

enum cfs_sim_policy {
    CFS_SIM_NOCACHE = 0,
    CFS_SIM_LRU,
    CFS_SIM_STATIC,
    CFS_SIM_CLAIRVOYANT,
    CFS_SIM_POLICIES,
};

struct cfs_sim_epoch {
    uint64_t reads, read_bytes;
    uint64_t local_hits, local_bytes;
    uint64_t peer_reads, peer_bytes;
    uint64_t pfs_reads, pfs_bytes;
};

/* The mount's tiers charge whole pages (cache_i.h): a caller simulating a
 * mount sets charge_granule to this. */
#define CFS_SIM_TIER_PAGE 4096u

struct cfs_sim_result {
    uint32_t start_epoch, nepochs;
    /* A file takes its size rounded up to this of the capacity; 1 (what
     * cfs_sim_result_init sets): its size.  PFS and peer bytes are sizes. */
    uint64_t charge_granule;
    struct cfs_sim_epoch *epoch[CFS_SIM_POLICIES]; /* nepochs each */
};

const char *cfs_sim_policy_name(enum cfs_sim_policy policy);

/* Allocate a zeroed result for the plan's epochs. */
int cfs_sim_result_init(struct cfs_sim_result *r, const struct cfs_plan *p);
void cfs_sim_result_free(struct cfs_sim_result *r);

/* Replay the plan's node and add its figures to *r (call once per node with
 * that node's plan to sum a cluster).  Returns 0 or -errno, message in err. */
int cfs_sim_run(const struct cfs_plan *p, struct cfs_sim_result *r, char *err, size_t errlen);

/* Sum of a policy's figures over epochs [from, nepochs). */
struct cfs_sim_epoch cfs_sim_sum(const struct cfs_sim_result *r, enum cfs_sim_policy policy,
                                 uint32_t from);

#endif
