/* Private to the catalog module.  Its files form layers, each calling only
 * the layers below it:
 *
 *   3  catalog.c        entry points: cfs_catalog_open() (load, or scan +
 *                       order + store) and the synthetic catalogs;
 *   2  catalog_store.c  the catalog's copy in LMDB: load it when still
 *                       valid for the source, save it after a scan;
 *   1  catalog_scan.c   fills the entries from SOURCE (ids, names, stats);
 *      catalog_order.c  fills the sample list (the dataset's index order)
 *                       from the entries; the two do not call each other,
 *                       the scan hands the order its facts (cfs_scan_aux);
 *   0  catalog_table.c  the in-memory structure: flat arrays of entries,
 *                       names and samples, growing them, and the public
 *                       read-only accessors.
 *
 * The declarations below are grouped by the layer that defines them. */
#ifndef CLAIRFS_CATALOG_I_H
#define CLAIRFS_CATALOG_I_H

#include <stdarg.h>
#include <sys/stat.h>

#include "clairfs/catalog.h"

/* ---- layer 0: catalog_table.c */

struct cfs_catalog {
    struct cfs_entry *e;
    uint32_t n, cap;
    char *names; /* pool of NUL-terminated names; offset 0 is the root's "" */
    size_t names_len, names_cap;
    cfs_id *samples;
    uint64_t nsamples;
    uint64_t nfiles, ndirs, bytes;
    uint64_t skipped;
    bool from_index;
    char *order_unavailable; /* why the index order could not be built (order_optional) */
    char *not_stored;        /* why the scan could not be stored in the index */
};

struct cfs_catalog *cfs_catalog_alloc(void);
int cfs_catalog_reserve(struct cfs_catalog *c, uint32_t entries, size_t name_bytes);
/* No index order: no samples, and why (a message, or NULL for a generic
 * one) kept for cfs_catalog_order_unavailable().  0 or -ENOMEM. */
int cfs_catalog_drop_order(struct cfs_catalog *c, const char *why);
/* Append an entry from a stat, with its name; returns the id or -errno. */
int64_t cfs_catalog_append(struct cfs_catalog *c, const char *name, size_t len, const struct stat *st,
                           cfs_id parent);
/* Recount the regular files, directories and bytes. */
void cfs_catalog_totals(struct cfs_catalog *c);

/* A one-line message into err (names may hold newlines). */
void cfs_catalog_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- layer 1: catalog_scan.c, catalog_order.c */

/* Scan-time facts that do not survive in the entries. */
struct cfs_scan_aux {
    /* 1 for a symlink kept as a link because its target directory is one of
     * its own ancestors: Python's is_dir() says True for it, so ImageFolder
     * would treat it as a directory, not a file. */
    uint8_t *loop;
};

int cfs_catalog_scan(struct cfs_catalog *c, const char *source, struct cfs_scan_aux *aux, char *err,
                     size_t errlen);
int cfs_catalog_build_order(struct cfs_catalog *c, const struct cfs_catalog_params *p,
                            const struct cfs_scan_aux *aux, char *err, size_t errlen);

/* ---- layer 2: catalog_store.c.  load returns 0 when a valid stored
 * catalog was loaded into *out, 1 when there is none or it is stale (scan),
 * -errno on an error that makes the index unusable. */
int cfs_catalog_store_load(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                           size_t errlen);
int cfs_catalog_store_save(const struct cfs_catalog_params *p, const struct cfs_catalog *c, char *err,
                           size_t errlen);

#endif
