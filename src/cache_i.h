/* Private to the cache module: shared by cache.c (states, eviction, readers)
 * and cache_ssd.c (entry files, index records, recovery). */
#ifndef CLAIRFS_CACHE_I_H
#define CLAIRFS_CACHE_I_H

#include "clairfs/cache.h"

#include <pthread.h>

#define CACHE_PAGE 4096u
#define CACHE_NCOND 32u

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

struct cheap {
    struct centry **a;
    uint32_t n, cap;
};

enum { OP_PUT = 1, OP_DEL = 2 };

/* The stored form of a cache entry (db "cache", key: id big-endian). */
#define CACHE_REC_MAGIC 0x43464345u /* "CFCE" */
#define CACHE_REC_VERSION 1
#define CACHE_REC_COMPLETE 2
#define CACHE_REC_INFLIGHT 1
struct cache_rec {
    uint32_t magic;
    uint8_t version;
    uint8_t state;
    uint8_t tier;
    uint8_t pad0;
    uint64_t len;
    uint64_t xxh;
    uint64_t src_size;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint32_t pad1;
    uint64_t path_hash;
};

struct cache_op {
    int kind;
    uint32_t id;
    struct cache_rec rec;
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

    /* SSD tier */
    bool ssd;
    char *ssd_path; /* ssd_dir/cache */
    int ssd_dirfd;
    struct cfs_index *index;
    unsigned commit_batch;
    struct cache_op *ops; /* pending index operations, in order (mu held) */
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

/* cache_ssd.c */
int cache_ssd_open(struct cfs_cache *c, const struct cfs_cache_params *p, char *err, size_t errlen);
void cache_ssd_close(struct cfs_cache *c);
void cache_ssd_name(uint32_t id, bool tmp, char *buf, size_t len);
int cache_ssd_write(struct cfs_cache *c, uint32_t id, const void *buf, uint64_t len);
int cache_ssd_open_verify(struct cfs_cache *c, struct centry *e, bool verify, int *fd);
void cache_ssd_unlink(struct cfs_cache *c, uint32_t id);
int cache_queue_op(struct cfs_cache *c, int kind, const struct centry *e);
bool cache_ops_due(struct cfs_cache *c);

/* cache.c, with mu held */
int cache_insert_loaded(struct cfs_cache *c, struct centry *e);
void cache_trim_tier(struct cfs_cache *c, int tier);

#endif
