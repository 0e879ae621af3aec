/* The catalog's copy in LMDB (database "catalog").
 *
 * Place in the layer order (src/catalog_i.h): layer 2.  It copies the
 * structure (catalog_table.c) to and from the index and never scans:
 * "no valid copy" is an answer (1) that catalog.c turns into a scan.
 *
 * Four records: "meta" (format version, sizes, the source, order and
 * order root the catalog was made for, the list file's mtime and size, a
 * checksum of the blobs), and three blobs "entries", "names", "samples" that are the
 * in-memory arrays byte for byte.  Loading is three memcpy's after
 * checking, so it costs little more than the stat of every directory that
 * decides whether the copy is still valid: a directory's mtime changes when
 * an entry is added, removed or renamed in it, so equal mtimes on every
 * directory (followed through links, as the scan did) mean the same tree.
 * A file rewritten in place is not seen here; the cache checks size and
 * mtime of every file it fetches.
 *
 * Anything unexpected in the stored copy (another version, a short blob, a
 * bad checksum, an index out of range) means "scan again", never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "catalog_i.h"
#include "clairfs/index.h"

#define STORE_MAGIC 0x43465343u /* "CSFC" */
#define STORE_VERSION 3u /* 3: the order root and the entries' loop_dir */
#define STORE_NO_ORDER 1u /* flags: made without an index order (order_optional) */
#define STORE_FALLBACK 2u /* flags: numbered by sorted path, ImageFolder's not built */
#define DB "catalog"

struct store_meta {
    uint32_t magic, version;
    uint32_t entry_size, order;
    uint32_t n, source_len;
    uint32_t list_len, list_nsec;
    uint64_t names_len, nsamples, skipped;
    int64_t list_sec;
    uint64_t list_size;
    uint64_t checksum;
    uint32_t flags, why_len;
    uint32_t root_len, pad;
    /* followed by the source's real path, the list file's, the order root
     * as given, and with STORE_NO_ORDER the reason the order could not be
     * built */
};

static uint64_t blob_sum(const void *e, size_t elen, const void *nm, size_t nlen, const void *s,
                         size_t slen)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, e, elen);
    XXH3_64bits_update(st, nm, nlen);
    XXH3_64bits_update(st, s, slen);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* What the stored copy must have been made for. */
struct want {
    char source[PATH_MAX];
    char list[PATH_MAX];
    struct stat list_st;
    const char *root; /* order=KIND:ROOT as given ("" for none) */
    uint32_t order;
    bool order_optional;
};

static int want_init(const struct cfs_catalog_params *p, struct want *w)
{
    memset(w, 0, sizeof(*w));
    w->order = (uint32_t)p->order;
    w->order_optional = p->order_optional;
    /* As given: another spelling of the same root only costs a rescan. */
    w->root = p->order_root ? p->order_root : "";
    if (!realpath(p->source, w->source))
        return -errno;
    if (p->order == CFS_ORDER_LIST) {
        if (!realpath(p->order_list, w->list) || stat(w->list, &w->list_st) < 0) {
            if (!p->order_optional)
                return -errno;
            /* An optional order from a list that is not there: the copy is
             * made without an order, keyed on no list. */
            memset(w->list, 0, sizeof(w->list));
            memset(&w->list_st, 0, sizeof(w->list_st));
        }
    }
    return 0;
}

static int open_index(const struct cfs_catalog_params *p, struct cfs_index **ix, bool *own,
                      char *err, size_t errlen)
{
    if (p->index) {
        *ix = p->index;
        *own = false;
        return 0;
    }
    *own = true;
    return cfs_index_open(p->index_dir, ix, err, errlen);
}

/* The index is a cache of what the source holds: an environment LMDB cannot
 * read (-EIO: not an LMDB file, corrupted, another LMDB version) is removed
 * and made anew rather than stopping the mount. */
static int open_index_fresh(const struct cfs_catalog_params *p, struct cfs_index **ix, bool *own,
                            char *err, size_t errlen)
{
    int rc = open_index(p, ix, own, err, errlen);
    if (rc != -EIO || !*own)
        return rc;
    char path[PATH_MAX];
    const char *files[] = {"data.mdb", "lock.mdb"};
    for (int i = 0; i < 2; i++) {
        if (snprintf(path, sizeof(path), "%s/%s", p->index_dir, files[i]) >= (int)sizeof(path))
            return rc;
        if (unlink(path) < 0 && errno != ENOENT)
            return rc;
    }
    return open_index(p, ix, own, err, errlen);
}

/* Every directory's mtime as now, compared with the stored one. */
static bool dirs_unchanged(const struct cfs_catalog *c, const char *source)
{
    int fd = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char *path = malloc(PATH_MAX);
    bool same = path != NULL;
    for (uint32_t i = 0; same && i < c->n; i++) {
        const struct cfs_entry *e = &c->e[i];
        if (!S_ISDIR(e->mode))
            continue;
        struct stat st;
        int len = cfs_catalog_path(c, i, path, PATH_MAX);
        same = len >= 0 && fstatat(fd, len ? path : ".", &st, 0) == 0 && S_ISDIR(st.st_mode) &&
               st.st_mtim.tv_sec == e->mtime_sec && (uint32_t)st.st_mtim.tv_nsec == e->mtime_nsec;
    }
    free(path);
    close(fd);
    return same;
}

static bool structure_ok(const struct cfs_catalog *c)
{
    if (c->n == 0 || c->e[0].parent != CFS_ID_NONE || !S_ISDIR(c->e[0].mode) ||
        c->names_len == 0 || c->names[c->names_len - 1] != '\0')
        return false;
    for (uint32_t i = 0; i < c->n; i++) {
        const struct cfs_entry *e = &c->e[i];
        if ((i && e->parent >= i) || (uint64_t)e->name_off + e->name_len >= c->names_len ||
            c->names[e->name_off + e->name_len] != '\0')
            return false;
        /* A name is one path component: no NUL or '/' inside it. */
        const char *name = c->names + e->name_off;
        if (memchr(name, '\0', e->name_len) || memchr(name, '/', e->name_len))
            return false;
        if (e->nchildren && (e->first_child <= i || (uint64_t)e->first_child + e->nchildren > c->n))
            return false;
        if (e->loop_dir != CFS_ID_NONE && (e->loop_dir >= i || !S_ISDIR(c->e[e->loop_dir].mode)))
            return false;
    }
    for (uint64_t s = 0; s < c->nsamples; s++)
        if (c->samples[s] >= c->n)
            return false;
    return true;
}

/* memcpy out of the index's map, letting go of the map's pages as they
 * are copied: read, they stay in the process's resident set as long as it
 * lives (about 90 bytes a file: as much again as the copy), though the
 * catalog never reads them again.  The pages stay in the page cache; a
 * later read of the map faults them back in. */
#define COPY_CHUNK ((size_t)4 << 20)

static void copy_out(void *dst, const void *src, size_t len)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* Whole pages only: the first and last may hold other records. */
    uintptr_t released = ((uintptr_t)src + page - 1) & ~(page - 1);
    for (size_t done = 0; done < len;) {
        size_t take = len - done < COPY_CHUNK ? len - done : COPY_CHUNK;
        memcpy((char *)dst + done, (const char *)src + done, take);
        done += take;
        uintptr_t end = ((uintptr_t)src + done) & ~(page - 1);
        if (end > released) {
            (void)madvise((void *)released, end - released, MADV_DONTNEED);
            released = end;
        }
    }
}

static int load_records(struct cfs_index_txn *t, const struct want *w, struct cfs_catalog *c)
{
    const void *mv, *ev, *nv, *sv;
    size_t ml, el, nl, sl;
    if (cfs_index_get(t, DB, "meta", 4, &mv, &ml) < 0 || ml < sizeof(struct store_meta))
        return 1;
    struct store_meta m;
    memcpy(&m, mv, sizeof(m));
    const char *paths = (const char *)mv + sizeof(m);
    if (m.magic != STORE_MAGIC || m.version != STORE_VERSION ||
        m.entry_size != sizeof(struct cfs_entry) || m.order != w->order ||
        ml != sizeof(m) + m.source_len + m.list_len + m.root_len + m.why_len ||
        m.source_len != strlen(w->source) || memcmp(paths, w->source, m.source_len) != 0 ||
        m.root_len != strlen(w->root) ||
        memcmp(paths + m.source_len + m.list_len, w->root, m.root_len) != 0)
        return 1;
    /* A copy without an order serves a mount that needs none; one that
     * needs it scans again, and the scan says why it fails. */
    bool no_order = m.flags & STORE_NO_ORDER, fallback = m.flags & STORE_FALLBACK;
    if (no_order && (!w->order_optional || m.nsamples != 0))
        return 1;
    /* The sorted numbering stands in only for an optional order; and a
     * copy made before it existed, without an order where it now builds
     * one, is scanned again. */
    if ((fallback && !w->order_optional) ||
        (no_order && w->order == CFS_ORDER_IMAGEFOLDER && !w->root[0]))
        return 1;
    if (w->order == CFS_ORDER_LIST &&
        (m.list_len != strlen(w->list) || memcmp(paths + m.source_len, w->list, m.list_len) != 0 ||
         m.list_sec != w->list_st.st_mtim.tv_sec ||
         m.list_nsec != (uint32_t)w->list_st.st_mtim.tv_nsec ||
         m.list_size != (uint64_t)w->list_st.st_size))
        return 1;
    if (cfs_index_get(t, DB, "entries", 7, &ev, &el) < 0 ||
        cfs_index_get(t, DB, "names", 5, &nv, &nl) < 0 ||
        cfs_index_get(t, DB, "samples", 7, &sv, &sl) < 0)
        return 1;
    /* The meta record is outside the blob checksum: bound its counts before
     * multiplying them, or a wrapped product passes the length check. */
    if (m.nsamples > SIZE_MAX / sizeof(cfs_id))
        return 1;
    /* Every catalog has its root: an empty one is damage, not a catalog. */
    if (m.n == 0 || m.names_len == 0)
        return 1;
    if (el != (uint64_t)m.n * sizeof(struct cfs_entry) || nl != m.names_len ||
        sl != m.nsamples * sizeof(cfs_id))
        return 1;
    if (cfs_catalog_reserve(c, m.n, nl) < 0)
        return -ENOMEM;
    c->samples = malloc(sl ? sl : 1);
    if (!c->samples)
        return -ENOMEM;
    copy_out(c->e, ev, el);
    copy_out(c->names, nv, nl);
    copy_out(c->samples, sv, sl);
    /* The checksum reads the copies: the map's pages are let go. */
    if (blob_sum(c->e, el, c->names, nl, c->samples, sl) != m.checksum)
        return 1;
    c->n = m.n;
    c->names_len = nl;
    c->nsamples = m.nsamples;
    c->skipped = m.skipped;
    if (no_order || fallback) {
        char why[512];
        size_t len = m.why_len < sizeof(why) ? m.why_len : sizeof(why) - 1;
        memcpy(why, paths + m.source_len + m.list_len + m.root_len, len);
        why[len] = '\0';
        if ((no_order ? cfs_catalog_drop_order(c, why) : cfs_catalog_note_fallback(c, why)) < 0)
            return -ENOMEM;
    }
    return structure_ok(c) ? 0 : 1;
}

int cfs_catalog_store_load(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                           size_t errlen)
{
    struct want *w = malloc(sizeof(*w));
    struct cfs_index *ix = NULL;
    struct cfs_index_txn *t = NULL;
    struct cfs_catalog *c = NULL;
    bool own = false;
    int rc;
    if (!w)
        return -ENOMEM;
    /* A source or list we cannot resolve: let the scan report it. */
    rc = want_init(p, w) < 0 ? 1 : 0;
    if (rc)
        goto out;
    rc = open_index(p, &ix, &own, err, errlen);
    if (rc < 0 && rc != -ENOMEM) {
        /* Unreadable (the save after the scan replaces it) or unopenable
         * (a full disk: the scan is served unstored): scan either way. */
        rc = 1;
        if (err && errlen)
            err[0] = '\0';
        goto out;
    }
    if (rc < 0)
        goto out;
    c = cfs_catalog_alloc();
    if (!c) {
        rc = -ENOMEM;
        goto out;
    }
    rc = cfs_index_begin(ix, false, &t);
    if (rc < 0) {
        cfs_catalog_errf(err, errlen, "index '%s': cannot read: %s", p->index_dir,
                         strerror(-rc));
        goto out;
    }
    rc = load_records(t, w, c);
    cfs_index_abort(t);
    if (rc == 0 && !dirs_unchanged(c, w->source))
        rc = 1;
    if (rc == 0) {
        cfs_catalog_totals(c);
        c->from_index = true;
        *out = c;
        c = NULL;
    }
out:
    if (rc == -ENOMEM)
        cfs_catalog_errf(err, errlen, "out of memory");
    cfs_catalog_destroy(c);
    if (own)
        cfs_index_close(ix);
    free(w);
    return rc;
}

int cfs_catalog_store_save(const struct cfs_catalog_params *p, const struct cfs_catalog *c, char *err,
                           size_t errlen)
{
    struct want *w = malloc(sizeof(*w));
    struct cfs_index *ix = NULL;
    struct cfs_index_txn *t = NULL;
    char *meta = NULL;
    bool own = false;
    int rc;
    if (!w)
        return -ENOMEM;
    rc = want_init(p, w);
    if (rc < 0) {
        cfs_catalog_errf(err, errlen, "source '%s': %s", p->source, strerror(-rc));
        goto out;
    }
    rc = open_index_fresh(p, &ix, &own, err, errlen);
    if (rc < 0)
        goto out;
    size_t el = (size_t)c->n * sizeof(struct cfs_entry), sl = c->nsamples * sizeof(cfs_id);
    const char *why = c->order_unavailable ? c->order_unavailable
                      : c->order_fallback  ? c->order_fallback
                                           : "";
    struct store_meta m = {
        .magic = STORE_MAGIC,
        .version = STORE_VERSION,
        .entry_size = sizeof(struct cfs_entry),
        .order = w->order,
        .n = c->n,
        .source_len = (uint32_t)strlen(w->source),
        .list_len = (uint32_t)strlen(w->list),
        .list_nsec = (uint32_t)w->list_st.st_mtim.tv_nsec,
        .names_len = c->names_len,
        .nsamples = c->nsamples,
        .skipped = c->skipped,
        .list_sec = w->list_st.st_mtim.tv_sec,
        .list_size = (uint64_t)w->list_st.st_size,
        .checksum = blob_sum(c->e, el, c->names, c->names_len, c->samples, sl),
        .flags = c->order_unavailable ? STORE_NO_ORDER
                 : c->order_fallback  ? STORE_FALLBACK
                                      : 0,
        .why_len = (uint32_t)strlen(why),
        .root_len = (uint32_t)strlen(w->root),
    };
    size_t ml = sizeof(m) + m.source_len + m.list_len + m.root_len + m.why_len;
    meta = malloc(ml);
    if (!meta) {
        rc = -ENOMEM;
        goto out;
    }
    memcpy(meta, &m, sizeof(m));
    memcpy(meta + sizeof(m), w->source, m.source_len);
    memcpy(meta + sizeof(m) + m.source_len, w->list, m.list_len);
    memcpy(meta + sizeof(m) + m.source_len + m.list_len, w->root, m.root_len);
    if (m.why_len)
        memcpy(meta + sizeof(m) + m.source_len + m.list_len + m.root_len, why, m.why_len);

    rc = cfs_index_reserve(ix, ml + el + c->names_len + sl);
    if (rc == 0)
        rc = cfs_index_begin(ix, true, &t);
    /* The meta record goes last in the same transaction: a reader sees the
     * old copy or the new one, never a mix. */
    if (rc == 0)
        rc = cfs_index_put(t, DB, "entries", 7, c->e, el);
    if (rc == 0)
        rc = cfs_index_put(t, DB, "names", 5, c->names, c->names_len);
    if (rc == 0)
        rc = cfs_index_put(t, DB, "samples", 7, c->samples, sl);
    if (rc == 0)
        rc = cfs_index_put(t, DB, "meta", 4, meta, ml);
    if (rc == 0) {
        rc = cfs_index_commit(t);
        t = NULL;
    }
    if (rc < 0)
        cfs_catalog_errf(err, errlen, "index '%s': cannot store the catalog: %s",
                         p->index_dir ? p->index_dir : "(given)", strerror(-rc));
out:
    if (rc == -ENOMEM)
        cfs_catalog_errf(err, errlen, "out of memory");
    cfs_index_abort(t);
    if (own)
        cfs_index_close(ix);
    free(meta);
    free(w);
    return rc;
}
