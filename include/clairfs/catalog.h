/* The catalog: every entry of SOURCE, scanned once, with a stable id, and
 * the dataset's index order (DESIGN.md fact 2).
 *
 * Ids are assigned breadth first with each directory's children sorted by
 * name (bytewise), so a directory's children are the contiguous ids
 * [first_child, first_child + nchildren) and lookup is a binary search.
 * Id 0 is the root.  Symbolic links are followed (as torchvision does with
 * followlinks=True): a link to a file or directory is presented as that file
 * or directory; a broken link or one that would loop is kept as a symlink. */
#ifndef CLAIRFS_CATALOG_H
#define CLAIRFS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t cfs_id;
#define CFS_ID_NONE UINT32_MAX
#define CFS_NO_SAMPLE UINT32_MAX

enum cfs_order {
    CFS_ORDER_IMAGEFOLDER = 0, /* torchvision ImageFolder(root).samples */
    CFS_ORDER_SORTED,          /* every regular file, sorted by relative path */
    CFS_ORDER_LIST,            /* relative paths, one per line, from a file */
};

struct cfs_entry {
    uint64_t size;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint32_t mode; /* S_IFMT bits and permissions */
    uint32_t uid;
    uint32_t gid;
    uint32_t nlink;
    cfs_id parent;
    cfs_id first_child; /* directories only */
    uint32_t nchildren; /* directories only */
    uint32_t name_off;  /* into the name pool, see cfs_catalog_name() */
    uint32_t name_len;
    uint32_t sample; /* position in index order, or CFS_NO_SAMPLE */
};

struct cfs_catalog_params {
    const char *source;    /* directory to scan */
    enum cfs_order order;
    const char *order_list; /* CFS_ORDER_LIST */
    const char *index_dir;  /* LMDB environment; NULL: no persistence */
    bool rescan;            /* ignore a stored catalog */
};

struct cfs_catalog;

/* Load the catalog stored in index_dir when it is valid for the source
 * (directory mtimes unchanged), else scan SOURCE and store it.  Returns 0 or
 * -errno with a one-line message in err. */
int cfs_catalog_open(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                     size_t errlen);
/* A catalog of n synthetic files (no source), sizes drawn around mean_size;
 * for planning at scale without a dataset. */
int cfs_catalog_synthetic(uint64_t n, uint64_t mean_size, struct cfs_catalog **out);
void cfs_catalog_destroy(struct cfs_catalog *c);

/* True when cfs_catalog_open() reused a stored catalog instead of scanning. */
bool cfs_catalog_loaded_from_index(const struct cfs_catalog *c);

uint32_t cfs_catalog_entry_count(const struct cfs_catalog *c);
const struct cfs_entry *cfs_catalog_entry(const struct cfs_catalog *c, cfs_id id);
/* Name of an entry, NUL-terminated (may hold any byte but '/' and NUL). */
const char *cfs_catalog_name(const struct cfs_catalog *c, cfs_id id);
/* Child of `dir` called `name`, or CFS_ID_NONE. */
cfs_id cfs_catalog_lookup(const struct cfs_catalog *c, cfs_id dir, const char *name);
/* Relative path of id ("" for the root) into buf; returns its length or
 * -ENAMETOOLONG. */
int cfs_catalog_path(const struct cfs_catalog *c, cfs_id id, char *buf, size_t buflen);

/* Index order: number of samples, and sample -> entry id. */
uint64_t cfs_catalog_sample_count(const struct cfs_catalog *c);
cfs_id cfs_catalog_sample_entry(const struct cfs_catalog *c, uint64_t sample);

/* Totals for metrics: regular files, directories, bytes of regular files. */
uint64_t cfs_catalog_file_count(const struct cfs_catalog *c);
uint64_t cfs_catalog_dir_count(const struct cfs_catalog *c);
uint64_t cfs_catalog_total_bytes(const struct cfs_catalog *c);

/* A hash of every entry's path, size and mtime and of the index order:
 * nodes compare it to check they serve the same dataset. */
uint64_t cfs_catalog_hash(const struct cfs_catalog *c);

#endif
