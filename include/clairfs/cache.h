/* The cache tiers: a RAM tier and an SSD tier, each strictly bounded, keyed
 * by catalog file id.
 *
 * States.  A file is ABSENT, INFLIGHT (exactly one fetch owns it), RAM or
 * SSD.  Per file the cache keeps one pointer (NULL = ABSENT) and one bit
 * ("was cached before", for the refetch counter); everything else lives in
 * an entry allocated only while the file is in flight or resident, so 1.3 M
 * files cost ~10 MB of bookkeeping.  A fetch is begun with
 * cfs_cache_begin_fetch(), which reserves the bytes and marks the file
 * INFLIGHT; a second begin for the same file gets -EEXIST, so there are never
 * two fetches of one file.  Readers that want an INFLIGHT file wait
 * (CFS_CACHE_WAIT) and are all woken by cfs_cache_complete_fetch(): with the
 * bytes, or with the fetch's error.  A reader holds a pinned handle (RAM
 * pointer, or SSD fd + offset); a pinned entry is never evicted or freed.
 * cfs_cache_drop() of a pinned entry hides it from new readers and frees it
 * when the last pin goes.
 *
 * Locking.  One mutex guards the id table, both eviction heaps and the
 * counters; waiters sleep on one of a few condition variables hashed by id.
 * Filling a buffer, hashing it, writing or verifying an SSD file all happen
 * outside the mutex: while a file is INFLIGHT only its fetcher touches the
 * buffer, and an SSD entry being opened or verified is flagged so that other
 * readers wait for that one check instead of repeating it.  The policy
 * callback is called with the mutex held and must not call back into the
 * cache.
 *
 * Eviction.  Each tier has a max-heap of its unpinned resident entries keyed
 * by next use: with a policy (next_use(id): position of the file's next read,
 * smaller = sooner, UINT64_MAX = never again) the entry used farthest in the
 * future goes first (Belady's MIN); without one the key is the
 * reverse of the last-use tick (LRU).  Keys are refreshed when an entry is
 * published, when its last pin is released (a read just consumed a use), on
 * cfs_cache_touch(), on cfs_cache_set_policy(), and for the heap top before it
 * is evicted, so a stale key never evicts the wrong entry.  Under a policy, a
 * fetch that would evict an entry needed no later than the new file is
 * refused with -ENOSPC (a clairvoyant prefetcher must not thrash); a demand
 * fetch (CFS_CACHE_DEMAND: a reader waits for it) is never refused by policy.
 * A tier whose bytes are all pinned or in flight answers -EAGAIN.  A RAM
 * victim that will be read again (any victim under LRU) is demoted to the
 * SSD tier when the SSD tier can take it without evicting an entry needed
 * sooner: it turns INFLIGHT on the SSD tier and the begin_fetch that evicted
 * it writes the file after dropping the lock (readers wait for it as for a
 * fetch); otherwise it is freed.
 *
 * Bounds.  The RAM tier counts the bytes it allocates (sizes rounded up to
 * 4 KiB pages, the buffer's real allocation); the SSD tier counts entry file
 * sizes rounded up to 4 KiB blocks.  Bytes are reserved at begin_fetch, so
 * neither tier ever exceeds its capacity, even transiently.  A fetch into the
 * SSD tier stages its bytes in a heap buffer until complete_fetch writes the
 * file; those bytes are counted apart (staging_bytes) and bounded by the
 * number of fetches in flight.
 *
 * Checksums.  Every entry's xxh3-64 is computed from the fetched bytes at
 * complete_fetch.  RAM entries are trusted.  SSD entries are verified
 * (length and xxh3 of the whole file) when a reader opens them: on every
 * open (CFS_CACHE_VERIFY_EVERY_OPEN, the default) or only on the first open
 * after a warm restart (CFS_CACHE_VERIFY_FIRST_USE; entries written in this
 * run are then trusted).  Measured by `meson test --benchmark
 * cache_hit_path` (1000 files of 110 KB, page cache warm): acquire + pread
 * of the whole file + release takes 21-25 us verifying on first use, 37-39 us
 * verifying every open (RAM: 6-7 us with a memcpy).  ~15 us per 110 KB file
 * is a fraction of a FUSE round trip for such a file, and it catches a disk
 * that rots during a run, hence the default.  The length is checked on
 * every open in both modes.  Readers that overlap share one open and one
 * check.  A bad entry is dropped, counted (checksum_failures) and reported as
 * absent (-ENOENT), so the caller refetches it.
 *
 * Persistence and crash recovery (SSD tier, with an index).  Entry files
 * live in SSD_DIR/cache/ as <id in hex>, mode 0600, written to <id>.tmp then
 * renamed.  Each entry has an LMDB record in the "cache" database of the
 * index (tier, length, xxh3, source size, mtime and path hash, state).
 * Records are committed in batches (commit_batch, and on cfs_cache_sync()
 * and destroy): before a batch is committed, syncfs() makes every renamed
 * file of the batch durable, so a COMPLETE record always describes bytes
 * that are on disk.  An entry whose record is not yet committed is served in
 * this session but lost on a crash: refetched, never wrong.  At create the
 * cache walks the records: one not COMPLETE, of an unknown format, whose
 * file is missing or has another length, or whose source (asked through the
 * source callback) changed size, mtime or path hash, is deleted; files in
 * SSD_DIR/cache/ without a loaded record (orphans of a kill -9, temp files)
 * are unlinked; the rest are served, unverified until first use.  Without an
 * index the SSD tier starts empty.  A write error that means the SSD is
 * full or broken (ENOSPC, EDQUOT, EIO, EROFS) degrades the tier: no more SSD
 * fetches (-ENODEV), existing entries still served, the error returned once
 * from complete_fetch for the caller to log.  A record read or commit the
 * index refuses (disk full, I/O error) stops persistence for the rest of
 * the cache's life (counted in index_write_errors, the first error kept):
 * nothing else changes, reads never fail for it, and at the next create the
 * records are judged as always (files without one are orphans).
 *
 * Kernel page cache (with a kernel_drop callback).  A RAM entry whose bytes
 * were stored into the kernel's page cache (fuse_lowlevel_notify_store, by
 * the prefetcher's stager) can give up its buffer: cfs_cache_kernelize(),
 * only while the caller's pin is the entry's only one.  The entry stays a
 * RAM entry, keeps its charge (staged pages count against the RAM tier) and
 * is acquired as a handle with `kernel` set and no data: its reads are the
 * kernel's.  When such an entry is evicted or dropped it becomes a zombie:
 * invisible to readers, still in its slot (a new fetch of the id gets
 * -EBUSY) and still charged, until the pages are invalidated; kernel_drop
 * is called (mu held: it may only signal) and the stager takes the ids
 * (cfs_cache_take_kernel_drops), invalidates them and hands them back
 * (cfs_cache_kernel_dropped), which frees the bytes.  So a tier never counts
 * less than the memory it stands for.  make_room counts zombie bytes as
 * freed when it picks victims, and answers -EAGAIN while the room it needs
 * is still held by zombies (a prefetcher retries when woken; a demand
 * fetch reads the source instead of waiting on the kernel).  A kernel entry
 * is never demoted (it has no buffer to write).  When the kernel forgets the
 * inode (FORGET: its pages went with it) cfs_cache_kernel_forgot() frees an
 * unpinned kernel entry or zombie at once.  Pages the kernel reclaims
 * silently stay charged until the entry goes: an upper bound. */
#ifndef CLAIRFS_CACHE_H
#define CLAIRFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/tier.h"

struct cfs_index;
struct cfs_cache;


enum cfs_cache_state {
    CFS_CACHE_ABSENT = 0, /* xattr "pfs" */
    CFS_CACHE_INFLIGHT,
    CFS_CACHE_RAM,
    CFS_CACHE_SSD,
};

enum cfs_cache_verify {
    CFS_CACHE_VERIFY_EVERY_OPEN = 0,
    CFS_CACHE_VERIFY_FIRST_USE,
};

/* What the bytes were fetched from; an entry is valid only while the source
 * still matches. */
struct cfs_cache_source {
    uint64_t size;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t path_hash; /* hash of the relative path: a changed catalog
                           cannot map a stored entry to another file */
};

/* Position of the next read of file id (smaller = sooner), UINT64_MAX when
 * it is never read again.  Called with the cache lock held. */
typedef uint64_t (*cfs_cache_next_use_fn)(void *arg, uint32_t id);
/* Kernel-backed entries are waiting to be invalidated; called with the cache
 * lock held, so it may only wake someone. */
typedef void (*cfs_cache_kernel_drop_fn)(void *arg);
/* The current source of file id, for validating stored entries at create:
 * 0, or -ENOENT when the id no longer names a file. */
typedef int (*cfs_cache_source_fn)(void *arg, uint32_t id, struct cfs_cache_source *out);

struct cfs_cache_params {
    uint32_t nfiles;            /* ids are 0 .. nfiles-1 */
    uint64_t ram_bytes;         /* RAM tier capacity */
    uint64_t ssd_bytes;         /* SSD tier capacity; 0 = no SSD tier */
    const char *ssd_dir;        /* required with ssd_bytes; entries go to ssd_dir/cache/ */
    struct cfs_index *index;    /* NULL: the SSD tier does not persist */
    cfs_cache_source_fn source; /* NULL: stored entries cannot be validated, all dropped */
    void *source_arg;
    cfs_cache_next_use_fn next_use; /* NULL: LRU */
    void *next_use_arg;
    enum cfs_cache_verify ssd_verify;
    unsigned commit_batch; /* index records per commit; 0 = 64 */
    /* Non-NULL: RAM entries may be kernelized (see "Kernel page cache"). */
    cfs_cache_kernel_drop_fn kernel_drop;
    void *kernel_drop_arg;
};

int cfs_cache_create(const struct cfs_cache_params *p, struct cfs_cache **out, char *err,
                     size_t errlen);
/* Commits pending index records, frees everything.  No handle may be held. */
void cfs_cache_destroy(struct cfs_cache *c);
/* Commit pending index records now (after syncfs of the entry files). */
int cfs_cache_sync(struct cfs_cache *c);

/* Switch policy (NULL fn: LRU); every key is recomputed. */
void cfs_cache_set_policy(struct cfs_cache *c, cfs_cache_next_use_fn fn, void *arg);
/* The next use of id changed: refresh its eviction key. */
void cfs_cache_touch(struct cfs_cache *c, uint32_t id);

#define CFS_CACHE_DEMAND 1u /* begin_fetch: a reader waits; never refused by policy */
#define CFS_CACHE_NO_EVICT 2u /* begin_fetch: only into free room, else -ENOSPC */

/* Reserve size bytes in tier for id, evicting by policy, and mark id
 * INFLIGHT.  *buf receives a buffer of at least size bytes (4 KiB aligned)
 * that the caller fills.  Errors: -EEXIST (present or in flight), -EBUSY
 * (being dropped), -ENOSPC (refused: the victims are needed sooner),
 * -EAGAIN (the tier is held by pinned or in-flight entries), -EFBIG (larger
 * than the tier), -ENODEV (no SSD tier, or degraded), -EINVAL, -ENOMEM. */
int cfs_cache_begin_fetch(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier,
                          unsigned flags, void **buf);
/* End the fetch of id.  rc < 0: the fetch failed; the reservation is freed
 * and waiters get rc.  rc == 0: len bytes (<= size) are in the buffer, src
 * describes their source; the entry is checksummed and published (SSD: the
 * file written first).  Returns 0 when published, else the error (rc, or
 * the SSD write error, e.g. -ENOSPC which also degrades the SSD tier). */
int cfs_cache_complete_fetch(struct cfs_cache *c, uint32_t id, int rc, uint64_t len,
                             const struct cfs_cache_source *src);

/* A pinned reference to a cached file's bytes: data (RAM) or fd + offset
 * (SSD, fd is -1 for RAM).  Valid until cfs_cache_release(). */
struct cfs_cache_handle {
    uint32_t id;
    enum cfs_tier tier;
    const void *data;
    int fd;
    uint64_t offset;
    uint64_t size;
    uint64_t xxh3;
    bool kernel; /* the bytes are the kernel's page cache: data is NULL */
    void *priv;
};

#define CFS_CACHE_WAIT 1u /* acquire: wait for an in-flight fetch */

/* 0 and a pinned handle; -ENOENT when absent (or just found corrupt);
 * -EAGAIN when in flight and !WAIT; the fetch's error when a waited-for
 * fetch failed; -EIO when an SSD entry cannot be opened. */
int cfs_cache_acquire(struct cfs_cache *c, uint32_t id, unsigned flags, struct cfs_cache_handle *h);
void cfs_cache_release(struct cfs_cache *c, struct cfs_cache_handle *h);

/* Give up the buffer of the RAM entry behind h, whose bytes the caller has
 * stored into the kernel's page cache; h (the only pin) stays valid for
 * cfs_cache_release() but its data must not be used any more.  -EBUSY when
 * another reader pins it, it is dropped or not a RAM entry, or the cache
 * has no kernel_drop callback. */
int cfs_cache_kernelize(struct cfs_cache *c, struct cfs_cache_handle *h);
/* Up to max ids of zombies to invalidate; they stay charged until
 * cfs_cache_kernel_dropped(id). */
size_t cfs_cache_take_kernel_drops(struct cfs_cache *c, uint32_t *ids, size_t max);
void cfs_cache_kernel_dropped(struct cfs_cache *c, uint32_t id);
/* The kernel forgot id's inode, and its pages: free an unpinned kernel
 * entry or zombie of id now. */
void cfs_cache_kernel_forgot(struct cfs_cache *c, uint32_t id);

/* Remove id (read for the last time).  A pinned entry disappears for new
 * readers at once and is freed at its last release.  -ENOENT, -EBUSY (in
 * flight). */
int cfs_cache_drop(struct cfs_cache *c, uint32_t id);

enum cfs_cache_state cfs_cache_state(struct cfs_cache *c, uint32_t id);
/* "pfs", "inflight", "ram", "ssd": the user.clairfs.state xattr values. */
const char *cfs_cache_state_name(enum cfs_cache_state s);

struct cfs_cache_stats {
    uint64_t bytes[CFS_TIER_COUNT]; /* clairfs_cache_bytes{tier} */
    uint64_t peak[CFS_TIER_COUNT];  /* the most bytes[] has been since create */
    uint64_t capacity[CFS_TIER_COUNT];
    uint64_t entries[CFS_TIER_COUNT];
    uint64_t evictions[CFS_TIER_COUNT];
    uint64_t staging_bytes; /* SSD fetches in flight */
    uint64_t inflight;
    uint64_t refused;           /* begin_fetch -ENOSPC by policy */
    uint64_t demotions;         /* RAM victims written to the SSD tier */
    uint64_t refetches;         /* fetches of a file cached earlier in this run */
    uint64_t checksum_failures; /* SSD entries found corrupt at open */
    uint64_t loaded;            /* SSD entries reused at create */
    uint64_t stale;             /* stored entries whose source changed */
    uint64_t incomplete;        /* stored entries dropped by recovery */
    uint64_t orphans;           /* unreferenced files removed at create */
    uint64_t ssd_write_errors;
    uint64_t index_write_errors; /* record reads/commits the index refused */
    int index_error;             /* the first of them, -errno */
    uint64_t kernel_bytes;   /* RAM bytes held as kernel page cache, zombies included */
    uint64_t kernel_entries; /* kernel-backed entries (not zombies) */
    uint64_t zombie_bytes;   /* evicted kernel entries not yet invalidated */
    bool ssd_degraded;
    bool lru;
};
void cfs_cache_stats(struct cfs_cache *c, struct cfs_cache_stats *out);

#endif
