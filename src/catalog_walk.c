/* The three shapes of walk the libraries' index orders are made of, over
 * the catalog's entries below any directory.
 *
 * Every library lists a folder's samples by walking it and sorting, but
 * they sort different things, and each sort has its own walk here:
 *
 *   sorted(paths)        torchvision's neighbours (mmpretrain, ultralytics,
 *                        order=sorted) sort whole relative paths.  A path
 *                        list sorts like a depth-first walk whose siblings
 *                        are ordered by name, a directory's name read as if
 *                        it ended in '/' ("a b" before "a/x" before "a0"):
 *                        cfs_walk_sorted(), which sorts only folders that
 *                        need it (those with subfolders, or with names that
 *                        are not UTF-8 when the order is Python's).
 *   sorted(os.walk(d))   ImageFolder sorts the walk's (dirpath, dirs, files)
 *                        tuples, i.e. a class's directories by their whole
 *                        path, not depth first ("a/b", "a/b c", "a/b/x"),
 *                        then each one's files by name: cfs_walk_os_sorted().
 *   sorted(key=natural)  timm sorts every found path by natural key, which
 *                        is not a sibling order (digit runs span names):
 *                        cfs_walk_natural() builds the paths and sorts them.
 *
 * Which entries are samples (extensions, hidden names, links) is the
 * caller's rule, passed as a predicate; the walks only order.  Nothing here
 * writes to the catalog, so candidates can be tried on a live one.
 *
 * Place in the layer order (src/catalog_i.h): layer 1, above the structure
 * and the name comparisons, below the orders (catalog_order.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_i.h"

int cfs_idlist_push(struct cfs_idlist *l, cfs_id id)
{
    if (l->n == l->cap) {
        uint64_t ncap = l->cap ? 2 * l->cap : 256;
        cfs_id *v = realloc(l->v, ncap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = ncap;
    }
    l->v[l->n++] = id;
    return 0;
}

/* ---- sorted(paths) ---- */

static int key_cmp(const void *pa, const void *pb, void *arg)
{
    const struct cfs_walk_rules *r = arg;
    const struct cfs_catalog *c = r->cat;
    cfs_id ia = *(const cfs_id *)pa, ib = *(const cfs_id *)pb;
    size_t la, lb;
    const char *x = cfs_name_of(c, ia, &la), *y = cfs_name_of(c, ib, &lb);
    int ta = S_ISDIR(c->e[ia].mode) ? '/' : -1, tb = S_ISDIR(c->e[ib].mode) ? '/' : -1;
    if (r->python)
        return cfs_pykey_cmp(x, la, ta, y, lb, tb);
    size_t n = la < lb ? la : lb;
    int d = memcmp(x, y, n);
    if (d)
        return d;
    /* One name is a prefix of the other: the next key byte is '/' for a
     * directory, the end for anything else. */
    int ca = la > n ? (unsigned char)x[n] : ta;
    int cb = lb > n ? (unsigned char)y[n] : tb;
    return (ca > cb) - (ca < cb);
}

/* Does dir's id-ordered (bytewise) child list differ from the key order? */
static bool needs_sort(const struct cfs_catalog *c, const struct cfs_entry *dir, bool python)
{
    for (uint32_t i = 0; i < dir->nchildren; i++) {
        const struct cfs_entry *e = &c->e[dir->first_child + i];
        if (S_ISDIR(e->mode) || (python && !cfs_utf8_valid(c->names + e->name_off, e->name_len)))
            return true;
    }
    return false;
}

struct frame {
    cfs_id *kids; /* NULL: children in id order */
    cfs_id first;
    uint32_t n, pos;
};

static int open_frame(const struct cfs_catalog *c, const struct cfs_walk_rules *r, struct frame *f,
                      cfs_id dir)
{
    const struct cfs_entry *d = &c->e[dir];
    *f = (struct frame){NULL, d->first_child, d->nchildren, 0};
    if (!needs_sort(c, d, r->python))
        return 0;
    f->kids = malloc(f->n * sizeof(cfs_id));
    if (!f->kids)
        return -ENOMEM;
    for (uint32_t i = 0; i < f->n; i++)
        f->kids[i] = f->first + i;
    qsort_r(f->kids, f->n, sizeof(cfs_id), key_cmp, (void *)r);
    return 0;
}

int cfs_walk_sorted(const struct cfs_walk_rules *r, cfs_id dir, struct cfs_idlist *out)
{
    const struct cfs_catalog *c = r->cat;
    uint32_t cap = 64, depth = 0;
    struct frame *st = malloc(cap * sizeof(*st));
    int rc = -ENOMEM;
    if (!st)
        return -ENOMEM;
    if (open_frame(c, r, &st[0], dir) < 0)
        goto out;
    depth = 1;
    while (depth > 0) {
        struct frame *f = &st[depth - 1];
        if (f->pos == f->n) {
            free(f->kids);
            depth--;
            continue;
        }
        cfs_id id = f->kids ? f->kids[f->pos] : f->first + f->pos;
        f->pos++;
        const struct cfs_entry *e = &c->e[id];
        if (!S_ISDIR(e->mode)) {
            if (r->keep(c, id) && cfs_idlist_push(out, id) < 0)
                goto out;
            continue;
        }
        if (!e->nchildren || (r->enter && !r->enter(c, id)))
            continue;
        if (depth == cap) {
            struct frame *ns = realloc(st, 2 * cap * sizeof(*st));
            if (!ns)
                goto out;
            st = ns;
            cap *= 2;
        }
        if (open_frame(c, r, &st[depth], id) < 0)
            goto out;
        depth++;
    }
    rc = 0;
out:
    while (depth > 0)
        free(st[--depth].kids);
    free(st);
    return rc;
}

/* ---- a folder's subfolders, by name ---- */

static int py_name_cmp(const void *pa, const void *pb, void *arg)
{
    const struct cfs_catalog *c = arg;
    size_t la, lb;
    const char *x = cfs_name_of(c, *(const cfs_id *)pa, &la),
               *y = cfs_name_of(c, *(const cfs_id *)pb, &lb);
    return cfs_pystr_cmp(x, la, y, lb);
}

/* ids[0..n) are in bytewise name order; put them in Python order.  The two
 * agree unless a name is not valid UTF-8. */
void cfs_walk_py_sort(const struct cfs_catalog *c, cfs_id *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        size_t len;
        const char *nm = cfs_name_of(c, ids[i], &len);
        if (!cfs_utf8_valid(nm, len)) {
            qsort_r(ids, n, sizeof(*ids), py_name_cmp, (void *)c);
            return;
        }
    }
}

int cfs_walk_subdirs(const struct cfs_catalog *c, cfs_id dir, cfs_id **out, uint32_t *n)
{
    const struct cfs_entry *d = &c->e[dir];
    *n = 0;
    *out = malloc(((size_t)d->nchildren + 1) * sizeof(cfs_id));
    if (!*out)
        return -ENOMEM;
    for (uint32_t k = 0; k < d->nchildren; k++)
        if (S_ISDIR(c->e[d->first_child + k].mode))
            (*out)[(*n)++] = d->first_child + k;
    cfs_walk_py_sort(c, *out, *n);
    return 0;
}

/* ---- sorted(os.walk(dir)) ---- */

/* An entry and its relative path, kept in a pool (directories to sort by
 * path, files to sort by natural key). */
struct dirpath {
    cfs_id id;
    uint32_t off, len; /* into a path pool */
};

struct pathpool {
    char *buf;
    size_t len, cap;
};

/* Append id's path to the pool; its offset and length in *off, *plen. */
static int pool_add(const struct cfs_catalog *c, struct pathpool *p, cfs_id id, uint32_t *off,
                    uint32_t *plen)
{
    for (;;) {
        /* The pool starts unallocated: no pointer arithmetic on NULL. */
        int len =
            p->buf ? cfs_catalog_path(c, id, p->buf + p->len, p->cap - p->len) : -ENAMETOOLONG;
        if (len >= 0) {
            *off = (uint32_t)p->len;
            *plen = (uint32_t)len;
            p->len += (size_t)len;
            return 0;
        }
        size_t ncap = p->cap ? 2 * p->cap : 65536;
        if (ncap > UINT32_MAX)
            return -ENOMEM;
        char *b = realloc(p->buf, ncap);
        if (!b)
            return -ENOMEM;
        p->buf = b;
        p->cap = ncap;
    }
}

struct dirlist {
    struct dirpath *v;
    size_t n, cap;
};

static int push_path(const struct cfs_catalog *c, struct dirlist *l, struct pathpool *p, cfs_id id)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? 2 * l->cap : 64;
        struct dirpath *v = realloc(l->v, ncap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = ncap;
    }
    struct dirpath *d = &l->v[l->n];
    d->id = id;
    int rc = pool_add(c, p, id, &d->off, &d->len);
    if (rc == 0)
        l->n++;
    return rc;
}

static int dirpath_cmp(const void *pa, const void *pb, void *arg)
{
    const char *pool = arg;
    const struct dirpath *a = pa, *b = pb;
    return cfs_pystr_cmp(pool + a->off, a->len, pool + b->off, b->len);
}

/* The files of one directory that keep() takes, in Python name order. */
static int emit_files(const struct cfs_catalog *c, cfs_id dir, cfs_walk_keep keep,
                      struct cfs_idlist *out)
{
    const struct cfs_entry *d = &c->e[dir];
    uint64_t first = out->n;
    for (uint32_t k = 0; k < d->nchildren; k++) {
        cfs_id id = d->first_child + k;
        if (!S_ISDIR(c->e[id].mode) && keep(c, id) && cfs_idlist_push(out, id) < 0)
            return -ENOMEM;
    }
    if (out->n > first) /* an empty list may have no array yet */
        cfs_walk_py_sort(c, out->v + first, (uint32_t)(out->n - first));
    return 0;
}

int cfs_walk_os_sorted(const struct cfs_catalog *c, cfs_id dir, cfs_walk_keep keep,
                       struct cfs_idlist *out)
{
    struct dirlist l = {0};
    struct pathpool p = {0};
    int rc = push_path(c, &l, &p, dir);
    /* Every directory of the subtree (the list itself is the queue). */
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const struct cfs_entry *d = &c->e[l.v[i].id];
        for (uint32_t k = 0; rc == 0 && k < d->nchildren; k++)
            if (S_ISDIR(c->e[d->first_child + k].mode))
                rc = push_path(c, &l, &p, d->first_child + k);
    }
    if (rc == 0 && l.n > 1)
        qsort_r(l.v, l.n, sizeof(*l.v), dirpath_cmp, p.buf);
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        rc = emit_files(c, l.v[i].id, keep, out);
    free(l.v);
    free(p.buf);
    return rc;
}

/* ---- sorted(paths, key=natural_key) ---- */

static int natural_cmp(const void *pa, const void *pb, void *arg)
{
    const struct dirpath *a = pa, *b = pb;
    const char *pool = arg;
    int d = cfs_natural_cmp(pool + a->off, a->len, pool + b->off, b->len);
    if (d)
        return d;
    /* Equal keys ("a01" and "a1", "A.jpg" and "a.jpg"): timm's stable sort
     * keeps os.walk's order, the directory listing's; here bytewise. */
    size_t n = a->len < b->len ? a->len : b->len;
    d = memcmp(pool + a->off, pool + b->off, n);
    return d ? d : (a->len > b->len) - (a->len < b->len);
}

int cfs_walk_natural(const struct cfs_catalog *c, cfs_id dir, cfs_walk_keep keep,
                     struct cfs_idlist *out)
{
    struct dirlist files = {0};
    struct pathpool p = {0};
    struct cfs_idlist dirs = {0};
    int rc = cfs_idlist_push(&dirs, dir);
    for (uint64_t i = 0; rc == 0 && i < dirs.n; i++) {
        const struct cfs_entry *d = &c->e[dirs.v[i]];
        for (uint32_t k = 0; rc == 0 && k < d->nchildren; k++) {
            cfs_id id = d->first_child + k;
            if (S_ISDIR(c->e[id].mode))
                rc = cfs_idlist_push(&dirs, id);
            else if (keep(c, id))
                rc = push_path(c, &files, &p, id);
        }
    }
    if (rc == 0 && files.n > 1)
        qsort_r(files.v, files.n, sizeof(*files.v), natural_cmp, p.buf);
    for (size_t i = 0; rc == 0 && i < files.n; i++)
        rc = cfs_idlist_push(out, files.v[i].id);
    free(files.v);
    free(dirs.v);
    free(p.buf);
    return rc;
}
