/* The SSD store: the lowest layer of the cache module.
 *
 * It knows one directory of entry files (SSD_DIR/cache/<id in hex>, written
 * as <id>.tmp then renamed), how to write, verify (length and xxh3) and
 * unlink them, and the entries' records in the index's "cache" database.
 * It knows nothing of the cache core above it: no lock, no entry states, no
 * tier accounting, no policy and no source.  Everything it needs arrives as
 * plain arguments (an id, a length, a checksum, a record to store, a set of
 * ids to keep), and what it learns goes back as results; deciding what a
 * stored record is still worth, when to commit and what to count is the
 * core's job (src/cache.c).  Callers serialize the calls that change the
 * index (cfs_ssd_commit, cfs_ssd_forget); the file calls are safe from any
 * thread for distinct ids. */
#ifndef CLAIRFS_CACHE_SSD_H
#define CLAIRFS_CACHE_SSD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs_index;
struct cfs_ssd_store;

/* The stored form of an entry's record (db "cache", key: id big-endian,
 * so the records walk in id order). */
#define CACHE_REC_MAGIC 0x43464345u /* "CFCE" */
#define CACHE_REC_VERSION 1
#define CACHE_REC_COMPLETE 2
#define CACHE_REC_INFLIGHT 1
#define CACHE_REC_TIER_SSD 1 /* the value of CFS_TIER_SSD */
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

/* What one entry file holds and what its bytes were read from: the content
 * of its record. */
struct cfs_ssd_entry {
    uint32_t id;
    uint64_t len;
    uint64_t xxh;
    uint64_t src_size;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t path_hash;
};

/* A change to the records, queued by the core and committed in batches. */
enum cfs_ssd_op_kind {
    CFS_SSD_PUT = 1, /* the entry's file is renamed into place: record it COMPLETE */
    CFS_SSD_DEL = 2, /* the entry's file is gone: forget its record */
};
struct cfs_ssd_op {
    enum cfs_ssd_op_kind kind;
    struct cfs_ssd_entry e; /* e.id only for CFS_SSD_DEL */
};

/* A record found in the index at open, as stored. */
struct cfs_ssd_stored {
    unsigned char key[16]; /* the raw key, to forget the record by */
    size_t klen;
    /* A COMPLETE SSD record of this format under an id key; e is filled
     * only then. */
    bool complete;
    struct cfs_ssd_entry e;
};

/* Make SSD_DIR and SSD_DIR/cache (mode 0700) and open the latter.  index
 * NULL: the store keeps no records (commits do nothing).  0 or -errno with a
 * message in err. */
int cfs_ssd_open(const char *ssd_dir, struct cfs_index *index, struct cfs_ssd_store **out,
                 char *err, size_t errlen);
void cfs_ssd_close(struct cfs_ssd_store *s);
/* True when the store keeps records in an index. */
bool cfs_ssd_persists(const struct cfs_ssd_store *s);

/* Write len bytes as id's entry file (temp file, then rename; no fsync:
 * cfs_ssd_commit makes the files durable before their records). */
int cfs_ssd_write(struct cfs_ssd_store *s, uint32_t id, const void *buf, uint64_t len);
/* Open id's entry file for reading, checking that it holds len bytes and,
 * with verify, that they hash (xxh3-64) to xxh.  0 and *fd, -EBADMSG when
 * the file is not what was written, else -errno. */
int cfs_ssd_open_verified(struct cfs_ssd_store *s, uint32_t id, uint64_t len, uint64_t xxh,
                          bool verify, int *fd);
void cfs_ssd_unlink(struct cfs_ssd_store *s, uint32_t id);

/* Apply ops in order in one transaction, after one syncfs of the directory
 * when any op records a file, so a COMPLETE record always describes bytes
 * that are on disk. */
int cfs_ssd_commit(struct cfs_ssd_store *s, const struct cfs_ssd_op *ops, size_t n);

/* Every stored record, in key order, into *out (malloc'd, *n of them). */
int cfs_ssd_load(struct cfs_ssd_store *s, struct cfs_ssd_stored **out, size_t *n);
/* True when id's entry file is a regular file of len bytes. */
bool cfs_ssd_file_holds(struct cfs_ssd_store *s, uint32_t id, uint64_t len);
/* Delete the n stored records v (as loaded) in one transaction. */
int cfs_ssd_forget(struct cfs_ssd_store *s, const struct cfs_ssd_stored *v, size_t n);
/* Unlink every file of ours but the entry files of the ids set in keep
 * (a bitmap of nkeep bits); *removed counts the files unlinked. */
int cfs_ssd_remove_orphans(struct cfs_ssd_store *s, const uint8_t *keep, uint32_t nkeep,
                           uint64_t *removed);

#endif
