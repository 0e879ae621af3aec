/* The catalog's in-memory structure: the bottom of the catalog module.
 *
 * Everything lives in three flat arrays (entries, the name pool, the sample
 * list) so that storing and loading the catalog is a copy of three blobs and
 * a lookup is a binary search over a directory's contiguous children.  This
 * file grows the arrays, appends entries, counts the totals and answers
 * every read-only question about a catalog (the public accessors of
 * include/clairfs/catalog.h).
 *
 * Place in the layer order (src/catalog_i.h): the lowest layer.  The scan
 * and the index order build on it, the store persists it, catalog.c
 * composes them; this file calls none of them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "catalog_i.h"
#include "clairfs/log.h"

void cfs_catalog_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cfs_verror_msg(err, errlen, fmt, ap);
    va_end(ap);
}

struct cfs_catalog *cfs_catalog_alloc(void)
{
    struct cfs_catalog *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->names_cap = 4096;
    c->names = malloc(c->names_cap);
    if (!c->names) {
        free(c);
        return NULL;
    }
    c->names[0] = '\0';
    c->names_len = 1;
    return c;
}

void cfs_catalog_destroy(struct cfs_catalog *c)
{
    if (!c)
        return;
    free(c->e);
    free(c->names);
    free(c->samples);
    free(c->order_unavailable);
    free(c->order_fallback);
    free(c->not_stored);
    free(c);
}

int cfs_catalog_reserve(struct cfs_catalog *c, uint32_t entries, size_t name_bytes)
{
    if (entries > c->cap) {
        struct cfs_entry *e = realloc(c->e, (size_t)entries * sizeof(*e));
        if (!e)
            return -ENOMEM;
        c->e = e;
        c->cap = entries;
    }
    if (name_bytes > c->names_cap) {
        char *nm = realloc(c->names, name_bytes);
        if (!nm)
            return -ENOMEM;
        c->names = nm;
        c->names_cap = name_bytes;
    }
    return 0;
}

int64_t cfs_catalog_append(struct cfs_catalog *c, const char *name, size_t len, const struct stat *st,
                           cfs_id parent)
{
    if (c->n >= CFS_ID_NONE - 1 || c->names_len + len + 1 > UINT32_MAX)
        return -EOVERFLOW;
    if (c->n == c->cap) {
        uint32_t ncap = c->cap ? (c->cap > UINT32_MAX / 2 ? UINT32_MAX - 1 : c->cap * 2) : 1024;
        int rc = cfs_catalog_reserve(c, ncap, 0);
        if (rc < 0)
            return rc;
    }
    if (c->names_len + len + 1 > c->names_cap) {
        size_t ncap = c->names_cap * 2;
        while (ncap < c->names_len + len + 1)
            ncap *= 2;
        int rc = cfs_catalog_reserve(c, 0, ncap);
        if (rc < 0)
            return rc;
    }
    struct cfs_entry *e = &c->e[c->n];
    memset(e, 0, sizeof(*e));
    e->size = (uint64_t)st->st_size;
    e->mtime_sec = st->st_mtim.tv_sec;
    e->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
    e->mode = st->st_mode;
    e->uid = st->st_uid;
    e->gid = st->st_gid;
    e->nlink = (uint32_t)st->st_nlink;
    e->parent = parent;
    e->first_child = CFS_ID_NONE;
    e->nchildren = 0;
    e->sample = CFS_NO_SAMPLE;
    e->loop_dir = CFS_ID_NONE;
    if (len == 0) {
        e->name_off = 0;
    } else {
        e->name_off = (uint32_t)c->names_len;
        memcpy(c->names + c->names_len, name, len);
        c->names[c->names_len + len] = '\0';
        c->names_len += len + 1;
    }
    e->name_len = (uint32_t)len;
    return c->n++;
}

void cfs_catalog_totals(struct cfs_catalog *c)
{
    c->nfiles = c->ndirs = c->bytes = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (S_ISREG(c->e[i].mode)) {
            c->nfiles++;
            c->bytes += c->e[i].size;
        } else if (S_ISDIR(c->e[i].mode)) {
            c->ndirs++;
        }
    }
}

bool cfs_catalog_loaded_from_index(const struct cfs_catalog *c)
{
    return c->from_index;
}

int cfs_catalog_drop_order(struct cfs_catalog *c, const char *why)
{
    free(c->order_unavailable);
    c->order_unavailable = strdup(why && *why ? why : "the index order does not fit the tree");
    if (!c->order_unavailable)
        return -ENOMEM;
    for (uint32_t i = 0; i < c->n; i++)
        c->e[i].sample = CFS_NO_SAMPLE;
    c->nsamples = 0;
    return 0;
}

void cfs_catalog_set_order(struct cfs_catalog *c, cfs_id *samples, uint64_t n)
{
    free(c->samples);
    c->samples = samples;
    c->nsamples = n;
    for (uint32_t i = 0; i < c->n; i++)
        c->e[i].sample = CFS_NO_SAMPLE;
    for (uint64_t s = n; s-- > 0;)
        c->e[samples[s]].sample = (uint32_t)s;
}

const char *cfs_catalog_order_unavailable(const struct cfs_catalog *c)
{
    return c->order_unavailable;
}

int cfs_catalog_note_fallback(struct cfs_catalog *c, const char *why)
{
    free(c->order_fallback);
    c->order_fallback = strdup(why && *why ? why : "the index order does not fit the tree");
    return c->order_fallback ? 0 : -ENOMEM;
}

const char *cfs_catalog_order_fallback(const struct cfs_catalog *c)
{
    return c->order_fallback;
}

const char *cfs_catalog_not_stored(const struct cfs_catalog *c)
{
    return c->not_stored;
}

uint64_t cfs_catalog_skipped(const struct cfs_catalog *c)
{
    return c->skipped;
}

uint32_t cfs_catalog_entry_count(const struct cfs_catalog *c)
{
    return c->n;
}

const struct cfs_entry *cfs_catalog_entry(const struct cfs_catalog *c, cfs_id id)
{
    return id < c->n ? &c->e[id] : NULL;
}

const char *cfs_catalog_name(const struct cfs_catalog *c, cfs_id id)
{
    return id < c->n ? c->names + c->e[id].name_off : NULL;
}

cfs_id cfs_catalog_lookup(const struct cfs_catalog *c, cfs_id dir, const char *name)
{
    if (dir >= c->n || !S_ISDIR(c->e[dir].mode) || c->e[dir].nchildren == 0)
        return CFS_ID_NONE;
    uint32_t lo = c->e[dir].first_child, hi = lo + c->e[dir].nchildren;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int d = strcmp(c->names + c->e[mid].name_off, name);
        if (d == 0)
            return mid;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return CFS_ID_NONE;
}

cfs_id cfs_catalog_resolve(const struct cfs_catalog *c, const char *path)
{
    cfs_id id = 0;
    char name[256];
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/");
        if (len >= sizeof(name))
            return CFS_ID_NONE; /* longer than any name (NAME_MAX) */
        memcpy(name, p, len);
        name[len] = '\0';
        if (len && strcmp(name, ".") != 0) {
            id = cfs_catalog_lookup(c, id, name);
            if (id == CFS_ID_NONE)
                return CFS_ID_NONE;
        }
        p += len + (p[len] == '/');
    }
    return id;
}

int cfs_catalog_path(const struct cfs_catalog *c, cfs_id id, char *buf, size_t buflen)
{
    if (id >= c->n)
        return -ENOENT;
    size_t len = 0;
    for (cfs_id i = id; i != 0; i = c->e[i].parent)
        len += c->e[i].name_len + (c->e[i].parent != 0);
    if (len + 1 > buflen || len > INT32_MAX)
        return -ENAMETOOLONG;
    buf[len] = '\0';
    size_t pos = len;
    for (cfs_id i = id; i != 0; i = c->e[i].parent) {
        pos -= c->e[i].name_len;
        memcpy(buf + pos, c->names + c->e[i].name_off, c->e[i].name_len);
        if (c->e[i].parent != 0)
            buf[--pos] = '/';
    }
    return (int)len;
}

uint64_t cfs_catalog_sample_count(const struct cfs_catalog *c)
{
    return c->nsamples;
}

cfs_id cfs_catalog_sample_entry(const struct cfs_catalog *c, uint64_t sample)
{
    return sample < c->nsamples ? c->samples[sample] : CFS_ID_NONE;
}

uint64_t cfs_catalog_file_count(const struct cfs_catalog *c)
{
    return c->nfiles;
}

uint64_t cfs_catalog_dir_count(const struct cfs_catalog *c)
{
    return c->ndirs;
}

uint64_t cfs_catalog_total_bytes(const struct cfs_catalog *c)
{
    return c->bytes;
}

/* Ids follow from the tree, so (name, parent id) identifies a path: hashing
 * them is hashing the paths, without building each one. */
uint64_t cfs_catalog_hash(const struct cfs_catalog *c)
{
    XXH3_state_t *s = XXH3_createState();
    if (!s)
        return 0;
    XXH3_64bits_reset(s);
    for (uint32_t i = 0; i < c->n; i++) {
        const struct cfs_entry *e = &c->e[i];
        struct {
            uint64_t size;
            int64_t sec;
            uint32_t nsec, mode, parent, len;
        } rec = {e->size, e->mtime_sec, e->mtime_nsec, e->mode & S_IFMT, e->parent, e->name_len};
        XXH3_64bits_update(s, &rec, sizeof(rec));
        XXH3_64bits_update(s, c->names + e->name_off, e->name_len);
    }
    uint64_t ns = c->nsamples;
    XXH3_64bits_update(s, &ns, sizeof(ns));
    if (c->nsamples)
        XXH3_64bits_update(s, c->samples, c->nsamples * sizeof(cfs_id));
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}
