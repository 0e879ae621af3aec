/* Private to the catalog module (catalog.c, catalog_scan.c, catalog_order.c,
 * catalog_store.c). */
#ifndef CLAIRFS_CATALOG_I_H
#define CLAIRFS_CATALOG_I_H

#include <stdarg.h>
#include <sys/stat.h>

#include "clairfs/catalog.h"

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
};

/* Scan-time facts that do not survive in the entries. */
struct cfs_scan_aux {
    /* 1 for a symlink kept as a link because its target directory is one of
     * its own ancestors: Python's is_dir() says True for it, so ImageFolder
     * would treat it as a directory, not a file. */
    uint8_t *loop;
};

struct cfs_catalog *cfs_catalog_alloc(void);
int cfs_catalog_reserve(struct cfs_catalog *c, uint32_t entries, size_t name_bytes);
/* Append an entry from a stat, with its name; returns the id or -errno. */
int64_t cfs_catalog_append(struct cfs_catalog *c, const char *name, size_t len, const struct stat *st,
                           cfs_id parent);
void cfs_catalog_totals(struct cfs_catalog *c);

int cfs_catalog_scan(struct cfs_catalog *c, const char *source, struct cfs_scan_aux *aux, char *err,
                     size_t errlen);
int cfs_catalog_build_order(struct cfs_catalog *c, const struct cfs_catalog_params *p,
                            const struct cfs_scan_aux *aux, char *err, size_t errlen);

/* Persistence (catalog_store.c).  load returns 0 when a valid stored catalog
 * was loaded into *out, 1 when there is none or it is stale (scan), -errno
 * on an error that makes the index unusable. */
int cfs_catalog_store_load(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                           size_t errlen);
int cfs_catalog_store_save(const struct cfs_catalog_params *p, const struct cfs_catalog *c, char *err,
                           size_t errlen);

void cfs_catalog_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Python str order of file names: code points of the UTF-8 decoding with
 * surrogateescape (an undecodable byte b becomes U+DC00+b). */
int cfs_pystr_cmp(const char *a, size_t alen, const char *b, size_t blen);
bool cfs_utf8_valid(const char *s, size_t len);

#endif
