/* Private to the planner (plan.c, plan_owners.c, plan_sweep.c, plan_query.c,
 * plan_stream.c); the simulator (sim.c) is a client and asks through
 * clairfs/plan.h.  plan.c builds the plan and calls plan_sweep.c for the
 * pass over the run's reads, then plan_owners.c for the owners. */
#ifndef CLAIRFS_PLAN_I_H
#define CLAIRFS_PLAN_I_H

#include "clairfs/plan.h"

enum {
    PLAN_STATIC = 1,      /* in this node's NoPFS static set */
    PLAN_PEER_PINNED = 2, /* owned here and read by another node */
};

struct cfs_plan {
    struct cfs_plan_params params; /* sizes and ranks not kept */
    struct cfs_plan_source src_buf;
    const struct cfs_plan_source *src;
    uint64_t n;
    uint32_t world, nodes, node;
    uint32_t start_epoch, nepochs;
    uint64_t ram, ssd;
    struct cfs_rank_range *ranks;
    struct cfs_plan_node_summary *summary;
    uint64_t *epoch_start; /* nepochs + 1 */
    uint64_t dataset_bytes, owned_bytes;

    /* Per file. */
    const uint64_t *sizes; /* the caller's (plan.h) */
    uint32_t *count;       /* planned node's reads */
    uint64_t *first_use;   /* planned node's first position */
    uint8_t *epochs_read;  /* bm_bytes per file: bit rel set when read in epoch rel */
    uint32_t bm_bytes;
    uint8_t *tier;
    uint8_t *flags;
    uint32_t *owner;
    uint8_t *owner_tier;
    /* Relative epochs, saturated at 255 as the build's records are; a file
     * nobody reads (total_count 0) or nobody pins (static_pinners 0) has
     * none, which the accessors say as UINT32_MAX. */
    uint8_t *owner_epoch;  /* of the cluster's first read */
    uint32_t *total_count;
    uint16_t *static_pinners;
    uint8_t *static_epoch; /* the first in which a static pinner reads it */

    uint32_t *order[CFS_TIER_COUNT];
    uint64_t order_len[CFS_TIER_COUNT];
};

/* --- While a plan is built (plan.c, plan_owners.c, plan_sweep.c). --- */

/* Per node while building: a record of each file the node reads in the
 * window, the read count and the epoch of the first read (relative), both
 * saturating at 255.  Sparse: a node of many reads only the files its
 * ranks draw, so the passes over the records (owners, placement,
 * summaries) cost the reads of the window, not nodes x files.  rv() packs
 * a record (low byte the count, high byte the epoch). */
#define RCOUNT(v) ((uint32_t)(v) & 0xFF)
#define REPOCH(v) ((uint32_t)(v) >> 8)

/* One node's records, in ascending file order (plan_sweep.c merges each
 * epoch's reads in).  file: each record's file, or NULL once the node
 * reads a third of the files or more: then the records are dense, record f
 * is file f, len is n and an unread file's cnt is 0 (a sparse record costs
 * 4 more bytes than a dense one, and the walks over it are slower; the
 * records of a node of few, or a long window, are dense).  cnt: the reads,
 * saturating; fep: the first epoch, NULL for a window of at most
 * PACKED_EPOCHS epochs, whose record is one byte: the first epoch in the
 * high 3 bits, the reads (saturating at PACKED_MAX) below.  held: a bit a
 * record, the replicas placement gives the node (the files it owns are
 * those whose owner it is).  A record with cnt 0 is no record: walks skip
 * it. */
struct node_records {
    uint32_t *file;
    uint8_t *cnt;
    uint8_t *fep;
    uint64_t *held;
    uint64_t len, cap;
};

struct plan_build {
    struct node_records *rec; /* per node */
    bool packed;              /* records of one byte (fep NULL) */
    uint32_t *total;          /* reads by all nodes */
    uint32_t *best;           /* the node that reads the file most */
    uint32_t *key;
    uint32_t *ids;
    uint64_t *free_room; /* per node, for owners */
    uint64_t room_bound; /* at least the most free_room of any node */
    /* Owned files grouped by owner, each group by index: node j's are
     * by_owner[owned_start[j] .. owned_start[j + 1]) (in key's storage);
     * owned: room for one node's (owned_most), sorted, and owned_rec the
     * node's record of each (NO_RECORD when it does not read it), with as
     * much room again behind. */
    uint32_t *by_owner;
    uint64_t *owned_start;
    uint32_t *owned;
    uint32_t *owned_rec;
    uint64_t owned_most;
    /* Cluster time of a read (CLUSTER_TIME): the first by any node, as its
     * low half (the place within its epoch) and its epoch, which up to
     * CLUSTER_EPOCHS_IMPLIED epochs is the file's owner_epoch (the first
     * epoch any node reads it) and not kept apart (cluster_epoch NULL): 4
     * bytes a file, not 8, at the planner's peak.  Set for files some node
     * reads.  The planned node's first is its first_use, in cluster time by
     * local_cluster_time(). */
    uint32_t *cluster_first;
    uint32_t *cluster_epoch;
    /* Files some node read in an earlier epoch (whose cluster_first is
     * final), and in this one: the sweep looks at cluster_first only for a
     * file not in seen_before, so that the load misses the cache
     * about once a file instead of once a file per node. */
    uint64_t *seen_before, *seen_now;
    uint64_t min_size; /* the smallest file: room below it is full */
    uint64_t max_size; /* the largest file: the slack of a fair share */
    size_t file_words; /* of a bitmap over the files */
};

#define PACKED_EPOCHS 8u
#define CLUSTER_EPOCHS_IMPLIED 255u
#define PACKED_MAX 31u
#define NO_RECORD UINT32_MAX

static inline uint32_t rec_file(const struct node_records *r, uint64_t k)
{
    return r->file ? r->file[k] : (uint32_t)k;
}
static inline uint32_t rec_count(const struct node_records *r, uint64_t k)
{
    return r->fep ? r->cnt[k] : r->cnt[k] & PACKED_MAX;
}
static inline uint32_t rec_epoch(const struct node_records *r, uint64_t k)
{
    return r->fep ? r->fep[k] : (uint32_t)r->cnt[k] >> 5;
}
static inline uint16_t rv(const struct node_records *r, uint64_t k)
{
    return (uint16_t)(rec_epoch(r, k) << 8 | rec_count(r, k));
}

/* A node's preference among its reads: more reads, then earlier first epoch. */
static inline uint32_t pref(uint16_t v)
{
    return ((255 - RCOUNT(v)) << 8) | REPOCH(v);
}

/* Node r's record of file f, or NO_RECORD: a binary search, for the few
 * look-ups that do not walk the records in order. */
static inline uint32_t rec_find(const struct node_records *r, uint32_t f)
{
    if (!r->file) /* dense, or no records at all */
        return r->len && r->cnt[f] ? f : NO_RECORD;
    uint64_t lo = 0, hi = r->len;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->file[mid] < f)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->len && r->file[lo] == f ? (uint32_t)lo : NO_RECORD;
}

static inline bool bit_get(const uint64_t *b, uint64_t i)
{
    return (b[i >> 6] >> (i & 63)) & 1;
}
static inline void bit_set(uint64_t *b, uint64_t i)
{
    b[i >> 6] |= 1ull << (i & 63);
}

/* The nodes' trainers step in lockstep, so a read's place in time is the
 * fraction of its node's epoch stream read before it: read i of a node
 * stream of len reads in relative epoch rel is at rel + i/len, in 32.32
 * fixed point.  It compares reads of different nodes, whose streams differ
 * in length when their rank counts do. */
static inline uint64_t cluster_time(uint32_t rel, uint64_t i, uint64_t len)
{
    return (uint64_t)rel << 32 | (uint64_t)(((unsigned __int128)i << 32) / len);
}

/* Count every node's reads of every epoch (plan_sweep.c): b->rec,
 * cluster_first, and the planned node's count, first_use, epochs_read and
 * epoch_start.  st: an instance of p->src.  0 or -errno with err set. */
int plan_sweep(struct cfs_plan *p, struct plan_build *b, void *st, char *err, size_t errlen);

/* The owners of the files some node reads (plan_owners.c): p->owner and
 * owner_epoch, b->total and best; pp->prev's owners kept in the epoch the
 * windows share.  0 or -ENOMEM. */
int plan_assign_owners(struct cfs_plan *p, struct plan_build *b, const struct cfs_plan_params *pp);

const struct cfs_plan_source *plan_source(const struct cfs_plan_params *pp,
                                          struct cfs_plan_source *buf);

#endif
