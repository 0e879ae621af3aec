/* Private to the cache module.
 *
 * Layers.  A file calls only files listed before it here, never one after
 * it (checked by the unit test layers).  Bottom up:
 *   cache_ssd.c   the SSD store (cache_ssd.h): entry files and their records;
 *                 it includes nothing of this header;
 *   cache_heap.c  the eviction heaps: a max-heap of entries on their key;
 *   cache_kernel.c kernel-backed RAM entries and their zombies (public
 *                 kernel API of cache.h; cache_zombify for the core);
 *   cache.c       the core: entry states, tiers, eviction, fetches and
 *                 readers, the queue of index records and the judgement of
 *                 stored entries at a warm restart (public API, cache.h).
 */
#ifndef CLAIRFS_CACHE_I_H
#define CLAIRFS_CACHE_I_H

#include "cache_ssd.h"
#include "clairfs/cache.h"

#include <pthread.h>

#define CACHE_PAGE 4096u  /* allocation and block granule: what a tier charges */
#define CACHE_NCOND 32u   /* condition variables readers wait on, hashed by id */

enum { ST_FAILED = 16 }; /* beyond enum cfs_cache_state: a fetch that failed */

enum {
    EF_DOOMED = 1u,    /* dropped or corrupt: invisible, freed at last ref */
    EF_VERIFIED = 2u,  /* SSD bytes checked against len and xxh3 */
    EF_PREPARING = 4u, /* a reader is opening/verifying the SSD file */
    EF_DEMOTING = 8u,  /* a RAM victim being written to the SSD tier */
    EF_KERNEL = 16u,   /* RAM entry whose bytes are the kernel's page cache (buf freed) */
    EF_ZOMBIE = 32u,   /* kernel entry evicted or dropped: charged until its pages go */
};

struct centry {
    uint32_t id;
    uint8_t state; /* enum cfs_cache_state or ST_FAILED */
    uint8_t tier;
    uint8_t flags;
    int fetch_rc;
    uint32_t pins;
    uint32_t waiters;
    int32_t heap_pos;  /* -1: not in the heap (pinned, waited on, in flight) */
    int fd;            /* SSD: open while pinned */
    uint64_t key;      /* eviction key: larger goes first */
    uint64_t reserved; /* bytes asked for at begin_fetch */
    uint64_t charge;   /* bytes counted against the tier */
    uint64_t len;
    void *buf; /* RAM: the bytes; SSD: staging while in flight */
    uint64_t xxh;
    struct cfs_cache_source src;
    struct centry *next_demote; /* make_room's list of RAM victims moving to SSD */
};

/* A max-heap of entries on centry.key; each entry knows its position. */
struct cheap {
    struct centry **a;
    uint32_t n, cap;
};

struct cfs_cache {
    pthread_mutex_t mu;
    pthread_cond_t cond[CACHE_NCOND];
    uint32_t nfiles;
    struct centry **slot;
    uint8_t *seen; /* bitmap: cached before in this run */
    struct cheap heap[CFS_TIER_COUNT];
    struct centry **scratch; /* victims under consideration (mu held) */
    uint32_t scratch_cap;
    cfs_cache_next_use_fn next_use;
    void *next_use_arg;
    uint64_t tick;
    uint64_t members[CFS_TIER_COUNT]; /* entries of a tier in any state: bounds its heap */
    enum cfs_cache_verify verify;
    struct cfs_cache_stats st;

    /* SSD tier: NULL without one. */
    struct cfs_ssd_store *ssd;
    bool persist; /* the store keeps records: queue them */
    unsigned commit_batch;
    struct cfs_ssd_op *ops; /* pending record changes, in order (mu held) */
    size_t nops, ops_cap;
    pthread_mutex_t ix_mu; /* one committer at a time, in queue order */

    /* Page cache (EF_KERNEL entries): ids of zombies whose pages the
     * kernel must drop before their bytes are free (nfiles slots: an id
     * is a zombie at most once at a time). */
    uint32_t *zq;
    uint32_t zq_n;
    cfs_cache_kernel_drop_fn kernel_drop;
    void *kernel_drop_arg;
};

static inline uint64_t cache_round(uint64_t n)
{
    return (n + CACHE_PAGE - 1) / CACHE_PAGE * CACHE_PAGE;
}

/* cache_kernel.c, mu held: an unreferenced kernel entry leaves the tier's
 * view (readers, heap, entry count) but keeps its slot and its charge until
 * the stager has invalidated its pages. */
void cache_zombify(struct cfs_cache *c, struct centry *e);

/* cache_heap.c.  Capacity is reserved (cache_heap_reserve) by every path
 * that adds a member to a tier, so a push never allocates. */
int cache_heap_reserve(struct cheap *h, uint64_t n);
void cache_heap_push(struct cheap *h, struct centry *e);
void cache_heap_remove(struct cheap *h, struct centry *e);
/* e's key changed: move it to its place. */
void cache_heap_fix(struct cheap *h, struct centry *e);
/* Entry i's key grew or shrank below its children: sift it down. */
void cache_heap_down(struct cheap *h, uint32_t i);

#endif
