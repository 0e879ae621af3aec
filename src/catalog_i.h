/* Private to the catalog module.  Its files form layers, each calling only
 * the layers below it:
 *
 *   3  catalog.c        entry points: cfs_catalog_open() (load, or scan +
 *                       order + store) and the synthetic catalogs;
 *   2  catalog_store.c  the catalog's copy in LMDB: load it when still
 *                       valid for the source, save it after a scan;
 *      catalog_scan.c   fills the entries from SOURCE (ids, names, stats,
 *                       the links kept because they loop);
 *      catalog_order.c  the index orders: each library's rules, built at
 *                       any directory from the entries alone
 *                       (cfs_catalog_order_at), the mount's own order, and
 *                       order=list;
 *   1  catalog_walk.c   the walks the orders are made of (sorted paths,
 *                       sorted os.walk, natural key), read-only;
 *   0  catalog_table.c  the in-memory structure: flat arrays of entries,
 *                       names and samples, growing them, and the public
 *                       read-only accessors;
 *      catalog_names.c  Python's comparisons of names (code point order,
 *                       natural key, extension tests), pure functions.
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
    char *order_fallback;    /* why the samples are by sorted path, not ImageFolder's */
    char *not_stored;        /* why the scan could not be stored in the index */
};

struct cfs_catalog *cfs_catalog_alloc(void);
int cfs_catalog_reserve(struct cfs_catalog *c, uint32_t entries, size_t name_bytes);
/* No index order: no samples, and why (a message, or NULL for a generic
 * one) kept for cfs_catalog_order_unavailable().  0 or -ENOMEM. */
int cfs_catalog_drop_order(struct cfs_catalog *c, const char *why);
/* The samples are numbered by sorted path because the order asked for
 * does not build, why (as cfs_catalog_drop_order's).  0 or -ENOMEM. */
int cfs_catalog_note_fallback(struct cfs_catalog *c, const char *why);
/* Make samples[0..n) (malloc'ed; taken over) the index order and set each
 * entry's `sample` to its first position. */
void cfs_catalog_set_order(struct cfs_catalog *c, cfs_id *samples, uint64_t n);
/* Append an entry from a stat, with its name; returns the id or -errno. */
int64_t cfs_catalog_append(struct cfs_catalog *c, const char *name, size_t len, const struct stat *st,
                           cfs_id parent);
/* Recount the regular files, directories and bytes. */
void cfs_catalog_totals(struct cfs_catalog *c);

/* An entry's name and its length (names may hold any byte but '/' and NUL). */
static inline const char *cfs_name_of(const struct cfs_catalog *c, cfs_id id, size_t *len)
{
    *len = c->e[id].name_len;
    return c->names + c->e[id].name_off;
}

/* A one-line message into err (names may hold newlines). */
void cfs_catalog_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- layer 0: catalog_names.c.  Names are byte strings (not
 * NUL-terminated); Python sees them as str by surrogateescape. */

/* Python's order of a + ta against b + tb, where a terminal is -1 (the
 * end) or '/' (a directory read as a path prefix). */
int cfs_pykey_cmp(const char *a, size_t alen, int ta, const char *b, size_t blen, int tb);
/* Python's str order. */
int cfs_pystr_cmp(const char *a, size_t alen, const char *b, size_t blen);
/* True when s decodes as UTF-8 without an escaped byte. */
bool cfs_utf8_valid(const char *s, size_t len);
/* timm's natural_key order (ASCII letters lowered, ASCII digit runs as
 * numbers). */
int cfs_natural_cmp(const char *a, size_t alen, const char *b, size_t blen);
/* name.lower().endswith(exts) (exts: lowercase, NULL-terminated). */
bool cfs_name_endswith(const char *name, size_t len, const char *const *exts);
/* The text from the last '.' on, lowered, is one of exts; with splitext,
 * as os.path.splitext finds it (leading dots start no extension). */
bool cfs_name_suffix_in(const char *name, size_t len, bool splitext, const char *const *exts);

/* ---- layer 1: catalog_walk.c */

struct cfs_idlist {
    cfs_id *v;
    uint64_t n, cap;
};
int cfs_idlist_push(struct cfs_idlist *l, cfs_id id);

/* Is non-directory id a sample? */
typedef bool (*cfs_walk_keep)(const struct cfs_catalog *c, cfs_id id);

struct cfs_walk_rules {
    const struct cfs_catalog *cat;
    bool python;        /* Python's code point order, else bytewise */
    cfs_walk_keep keep; /* which non-directories are samples */
    /* Which directories are walked into (NULL: all). */
    bool (*enter)(const struct cfs_catalog *c, cfs_id id);
};

/* The kept files below dir in the sorted order of their relative paths. */
int cfs_walk_sorted(const struct cfs_walk_rules *r, cfs_id dir, struct cfs_idlist *out);
/* dir's subdirectories in Python name order (*out malloc'ed). */
int cfs_walk_subdirs(const struct cfs_catalog *c, cfs_id dir, cfs_id **out, uint32_t *n);
/* ids[0..n), in bytewise name order, into Python name order. */
void cfs_walk_py_sort(const struct cfs_catalog *c, cfs_id *ids, uint32_t n);
/* for root, _, files in sorted(os.walk(dir)): for f in sorted(files) if kept. */
int cfs_walk_os_sorted(const struct cfs_catalog *c, cfs_id dir, cfs_walk_keep keep,
                       struct cfs_idlist *out);
/* The kept files below dir by natural key of their paths. */
int cfs_walk_natural(const struct cfs_catalog *c, cfs_id dir, cfs_walk_keep keep,
                     struct cfs_idlist *out);

/* ---- layer 2: catalog_scan.c, catalog_order.c */

int cfs_catalog_scan(struct cfs_catalog *c, const char *source, char *err, size_t errlen);
/* The mount's order (p->order at p->order_root) into the catalog. */
int cfs_catalog_build_order(struct cfs_catalog *c, const struct cfs_catalog_params *p, char *err,
                            size_t errlen);

/* ---- layer 2: catalog_store.c.  load returns 0 when a valid stored
 * catalog was loaded into *out, 1 when there is none or it is stale (scan),
 * -errno on an error that makes the index unusable. */
int cfs_catalog_store_load(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                           size_t errlen);
int cfs_catalog_store_save(const struct cfs_catalog_params *p, const struct cfs_catalog *c, char *err,
                           size_t errlen);

#endif
