/* Counters and gauges of one mount, lock-free, and their two renderings:
 * Prometheus text (.clairfs/metrics) and a one-screen summary for people
 * (.clairfs/stats).
 *
 * Every metric is one slot of an array of _Atomic uint64_t indexed by
 * enum cfs_metric; the table in metrics.c gives each slot its Prometheus
 * name, labels, type, help text and its place in the stats screen.  A
 * module that needs a new figure adds one enum value here and one row to
 * that table; nothing else changes.  Updates are relaxed atomics: the hot
 * path pays one uncontended atomic add, and a snapshot copies every slot
 * once before rendering, so one rendering never mixes two reads of a slot. */
#ifndef CLAIRFS_METRICS_H
#define CLAIRFS_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum cfs_metric {
    CFS_M_CATALOG_FILES = 0,
    CFS_M_CATALOG_DIRS,
    CFS_M_CATALOG_BYTES,
    CFS_M_CATALOG_FROM_INDEX, /* 0/1 */
    CFS_M_READS_RAM,          /* files read (one per open), by source */
    CFS_M_READS_SSD,
    CFS_M_READS_PEER,
    CFS_M_READS_PFS,
    CFS_M_STALL_NS, /* rendered in seconds */
    CFS_M_PREDICTION_HIT,
    CFS_M_PREDICTION_MISS,
    CFS_M_PREDICTION_UNPLANNED, /* opens of samples no order in force covers */
    CFS_M_PREDICTION_EVAL_HIT, /* an evaluation pass's opens, predicted on their own */
    CFS_M_PREDICTION_EVAL_MISS,
    CFS_M_FETCH_BYTES_PFS,
    CFS_M_FETCH_BYTES_PEER,
    CFS_M_CACHE_BYTES_RAM,
    CFS_M_CACHE_BYTES_SSD,
    CFS_M_EPOCH,
    CFS_M_CHECKSUM_FAILURES, /* SSD entries found corrupt and refetched */
    CFS_M_PEER_FETCH_OK,     /* peer fetches that got their bytes from the owner */
    CFS_M_PEER_FETCH_FALLBACK, /* the peer did not give the bytes: read from the PFS */
    CFS_M_PEER_SERVED_FILES, /* files this node sent to its peers */
    CFS_M_SOURCE_CHANGED,    /* source files found changed under the mount (once per file) */
    CFS_M_CACHE_PEAK_RAM,    /* the most bytes each tier ever held: its bound, checked */
    CFS_M_CACHE_PEAK_SSD,
    CFS_M_PAGECACHE_BYTES,    /* RAM-tier bytes held as kernel page cache */
    CFS_M_PAGECACHE_STAGED,   /* files stored into the page cache */
    CFS_M_PAGECACHE_INVALIDATED, /* staged files whose pages were dropped */
    CFS_M_PAGECACHE_FALLBACK, /* opens of a staged file whose reads reached us */
    CFS_M_READ_REQUESTS,      /* FUSE READ requests on dataset files */
    CFS_M_INDEX_WRITE_ERRORS, /* index writes refused: the SSD tier stopped persisting */
    CFS_M_FETCHES_PFS,        /* completed fetches, by source */
    CFS_M_FETCHES_PEER,
    CFS_M_FETCH_NS_PFS,       /* their time from submission to completion, summed */
    CFS_M_FETCH_NS_PEER,
    CFS_M_ORDER_IDENTIFIED,   /* 0/1: the read order was identified from the opens */
    CFS_M_SWEEP_HELD,         /* 0/1: the sweep holds back (the order's scan finds busy cores) */
    CFS_M_SEARCH_NS_NORMAL,   /* the order's scans' CPU time at the normal priority */
    CFS_M_SEARCH_NS_IDLE,     /* ... and at SCHED_IDLE */
    CFS_M_PEER_LATE,          /* owned files a peer asked for before this node began them */
    CFS_M_PAGECACHE_RETRIEVES, /* staged owned files read back from the page cache for peers */
    CFS_M_PAGECACHE_RETRIEVE_SHORT, /* ... of which the kernel had dropped pages */
    /* The PFS bytes (CFS_M_FETCH_BYTES_PFS) by why they did not come from a
     * peer; the six add up to it. */
    CFS_M_PFS_BYTES_UNHELD,   /* no other node holds the file (this node owns it, or nobody) */
    CFS_M_PFS_BYTES_UNREAD,   /* its owner has not read it yet: the cluster's first read */
    CFS_M_PFS_BYTES_SLOW,     /* its owner is marked slow or gone */
    CFS_M_PFS_BYTES_MODEL,    /* the model estimated the PFS faster than its owner */
    CFS_M_PFS_BYTES_FALLBACK, /* its owner was asked and did not give the bytes */
    CFS_M_PFS_BYTES_RECLAIMED, /* a staged file whose pages the kernel dropped */
    CFS_M_FUSE_REQUESTS_DEVICE, /* FUSE requests read from /dev/fuse */
    CFS_M_FUSE_REQUESTS_RING,   /* ... and taken from an io_uring queue (fuse_ring.h) */
    CFS_M_FUSE_RING_QUEUES,     /* io_uring queues registered: 0 on /dev/fuse alone */
    CFS_M_COUNT
};

/* The dataset roots' series of clairfs_order_identified, {root="NAME"}
 * beside the unlabelled one: label values the opens find (clairfs/
 * roots.h), so these slots are named at run time, once each, up to
 * CFS_METRICS_ROOTS. */
#define CFS_METRICS_ROOTS 16
#define CFS_METRICS_ROOT_NAME 128

struct cfs_metrics {
    _Atomic uint64_t v[CFS_M_COUNT];
    char root_name[CFS_METRICS_ROOTS][CFS_METRICS_ROOT_NAME];
    _Atomic uint64_t root_identified[CFS_METRICS_ROOTS];
    atomic_uint nroots; /* slots named: a name is written before this counts it */
};

/* A consistent copy of every slot, taken once per rendering. */
struct cfs_metrics_snapshot {
    uint64_t v[CFS_M_COUNT];
    unsigned nroots;
    char root_name[CFS_METRICS_ROOTS][CFS_METRICS_ROOT_NAME];
    uint64_t root_identified[CFS_METRICS_ROOTS];
};

/* A new root series of clairfs_order_identified named `root` ("." for the
 * mount's own order), at 0: its index, or -ENOSPC when all are named.
 * One caller at a time (the roots module's lock). */
int cfs_metrics_root_add(struct cfs_metrics *m, const char *root);
static inline void cfs_metrics_root_set(struct cfs_metrics *m, int slot, uint64_t value)
{
    if (slot >= 0 && slot < CFS_METRICS_ROOTS)
        atomic_store_explicit(&m->root_identified[slot], value, memory_order_relaxed);
}

void cfs_metrics_init(struct cfs_metrics *m);

static inline void cfs_metrics_add(struct cfs_metrics *m, enum cfs_metric id, uint64_t delta)
{
    atomic_fetch_add_explicit(&m->v[id], delta, memory_order_relaxed);
}

static inline void cfs_metrics_set(struct cfs_metrics *m, enum cfs_metric id, uint64_t value)
{
    atomic_store_explicit(&m->v[id], value, memory_order_relaxed);
}

static inline uint64_t cfs_metrics_get(const struct cfs_metrics *m, enum cfs_metric id)
{
    return atomic_load_explicit(&((struct cfs_metrics *)m)->v[id], memory_order_relaxed);
}

void cfs_metrics_snapshot(const struct cfs_metrics *m, struct cfs_metrics_snapshot *s);

/* Prometheus name of a slot, e.g. "clairfs_reads_total"; labels (without
 * braces) or "" — for tools that look figures up by name. */
const char *cfs_metrics_name(enum cfs_metric id);
const char *cfs_metrics_labels(enum cfs_metric id);

/* Render into a malloc'd NUL-terminated buffer (*out, length *len).
 * Returns 0 or -ENOMEM. */
int cfs_metrics_render_prometheus(const struct cfs_metrics_snapshot *s, char **out, size_t *len);
int cfs_metrics_render_stats(const struct cfs_metrics_snapshot *s, char **out, size_t *len);

/* "0 B", "512 B", "1.5 KiB", "3.25 GiB": for the stats screen and tools. */
void cfs_metrics_format_bytes(uint64_t bytes, char *buf, size_t len);

#endif
