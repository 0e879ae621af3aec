/* Index order: which file dataset index i names, the numbering a PyTorch
 * dataset gives its samples and that a sampler's indices refer to.
 *
 * Place in the layer order (src/catalog_i.h): layer 1.  It fills the
 * sample list of a scanned catalog through the structure's accessors
 * (catalog_table.c), using the scan's facts handed over in cfs_scan_aux;
 * catalog.c calls it after the scan.
 *
 * order=sorted: every regular file (or link to one) by relative path,
 * bytewise.  A directory's subtree sorts as if its name ended in '/', so
 * "a b" (0x20) comes before "a/x" and "a/x" before "a0"; a depth-first walk
 * that orders siblings by that key gives exactly the sorted path list.
 *
 * order=imagefolder: torchvision 0.14's ImageFolder(root).samples.
 *   classes  = sorted(e.name for e in os.scandir(root) if e.is_dir())
 *   per class: for root, _, files in sorted(os.walk(class, followlinks=True)):
 *                  for f in sorted(files): keep if f.lower() ends with an
 *                  image extension
 * Python sorts str by code point, with undecodable bytes as U+DC80..U+DCFF
 * (pystr_cmp), and sorted(os.walk()) sorts directories by their whole
 * path: "a/b c" comes before "a/b/x" (' ' < '/'), so a class's directories
 * are collected and sorted as paths, not walked depth first.  os.walk's
 * "files" are all non-directories, broken links included, so a broken link
 * named x.jpg is a sample, as it is for torchvision.  A class without any
 * image is an error (torchvision raises FileNotFoundError); a root without
 * class directories gives an empty index (torchvision raises too, but an
 * empty SOURCE is a valid, empty dataset for the filesystem).
 * Divergence: a link to one of its own ancestors is walked by os.walk until
 * the kernel's ELOOP stops it, repeating files; here it is not followed.
 *
 * order=list:FILE: one relative path a line.  Every byte but '\n' is part
 * of the path (names may start with '#' or hold spaces), empty lines are
 * ignored, and "" and "." components are skipped ("./a//b" is "a/b").  A
 * path that is not a non-directory entry of SOURCE is an error naming the
 * file and the line.  A path may repeat; the entry's `sample` field is then
 * its first position. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_i.h"

static void emit(struct cfs_catalog *c, cfs_id id)
{
    if (c->e[id].sample == CFS_NO_SAMPLE)
        c->e[id].sample = (uint32_t)c->nsamples;
    c->samples[c->nsamples++] = id;
}

/* ---- order=sorted ---- */

static int key_cmp(const void *pa, const void *pb, void *arg)
{
    const struct cfs_catalog *c = arg;
    const struct cfs_entry *a = &c->e[*(const cfs_id *)pa], *b = &c->e[*(const cfs_id *)pb];
    const unsigned char *x = (const unsigned char *)c->names + a->name_off;
    const unsigned char *y = (const unsigned char *)c->names + b->name_off;
    size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int d = memcmp(x, y, n);
    if (d)
        return d;
    /* One name is a prefix of the other: the next key byte is '/' for a
     * directory, the end for anything else. */
    int ca = a->name_len > n ? x[n] : S_ISDIR(a->mode) ? '/' : -1;
    int cb = b->name_len > n ? y[n] : S_ISDIR(b->mode) ? '/' : -1;
    return (ca > cb) - (ca < cb);
}

struct frame {
    cfs_id *kids; /* NULL: children in id order */
    cfs_id first;
    uint32_t n, pos;
};

static int order_sorted(struct cfs_catalog *c)
{
    uint32_t cap = 64, depth = 0;
    struct frame *st = malloc(cap * sizeof(*st));
    int rc = -ENOMEM;
    if (!st)
        return -ENOMEM;
    st[0] = (struct frame){NULL, c->e[0].first_child, c->e[0].nchildren, 0};
    depth = 1;
    bool first_frame = true;
    while (depth > 0) {
        struct frame *f = &st[depth - 1];
        if (first_frame) {
            first_frame = false;
            bool subdirs = false;
            for (uint32_t i = 0; i < f->n && !subdirs; i++)
                subdirs = S_ISDIR(c->e[f->first + i].mode);
            if (subdirs) {
                f->kids = malloc(f->n * sizeof(cfs_id));
                if (!f->kids)
                    goto out;
                for (uint32_t i = 0; i < f->n; i++)
                    f->kids[i] = f->first + i;
                qsort_r(f->kids, f->n, sizeof(cfs_id), key_cmp, c);
            }
        }
        if (f->pos == f->n) {
            free(f->kids);
            depth--;
            continue;
        }
        cfs_id id = f->kids ? f->kids[f->pos] : f->first + f->pos;
        f->pos++;
        const struct cfs_entry *e = &c->e[id];
        if (S_ISREG(e->mode)) {
            emit(c, id);
        } else if (S_ISDIR(e->mode) && e->nchildren) {
            if (depth == cap) {
                struct frame *ns = realloc(st, 2 * cap * sizeof(*st));
                if (!ns)
                    goto out;
                st = ns;
                cap *= 2;
            }
            st[depth++] = (struct frame){NULL, e->first_child, e->nchildren, 0};
            first_frame = true;
        }
    }
    rc = 0;
out:
    while (depth > 0)
        free(st[--depth].kids);
    free(st);
    return rc;
}

/* ---- order=imagefolder ---- */

/* Python str order of file names: code points of the UTF-8 decoding with
 * surrogateescape (an undecodable byte b becomes U+DC00+b). */

/* One code point of Python's UTF-8 decoding with surrogateescape.  A byte
 * that does not start a complete, shortest-form, non-surrogate sequence is
 * escaped alone; this gives the same result as Python's maximal-subpart
 * error ranges, since every byte in such a range is escaped one by one. */
static uint32_t cp_next(const unsigned char *s, size_t n, size_t *i)
{
    size_t k = *i;
    unsigned b = s[k];
    if (b < 0x80) {
        *i = k + 1;
        return b;
    }
    unsigned need = 0, lo = 0x80, hi = 0xBF;
    uint32_t cp = 0;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        cp = b & 0x0F;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        cp = b & 0x07;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    }
    if (need == 0 || k + need >= n)
        goto escape;
    for (unsigned j = 1; j <= need; j++) {
        unsigned t = s[k + j];
        if (t < (j == 1 ? lo : 0x80) || t > (j == 1 ? hi : 0xBF))
            goto escape;
        cp = (cp << 6) | (t & 0x3F);
    }
    *i = k + 1 + need;
    return cp;
escape:
    *i = k + 1;
    return 0xDC00 + b;
}

static int pystr_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t i = 0, j = 0;
    while (i < alen && j < blen) {
        if (x[i] < 0x80 && y[j] < 0x80) {
            if (x[i] != y[j])
                return x[i] < y[j] ? -1 : 1;
            i++;
            j++;
            continue;
        }
        uint32_t ca = cp_next(x, alen, &i), cb = cp_next(y, blen, &j);
        if (ca != cb)
            return ca < cb ? -1 : 1;
    }
    return (i < alen) - (j < blen);
}

static bool utf8_valid(const char *s, size_t len)
{
    const unsigned char *x = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (x[i] < 0x80) {
            i++;
            continue;
        }
        if (cp_next(x, len, &i) - 0xDC80u < 0x80u)
            return false;
    }
    return true;
}

static const char *const img_ext[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                      ".pgm", ".tif", ".tiff", ".webp"};

static bool is_image(const char *name, size_t len)
{
    /* Python's str.lower() maps no non-ASCII character to these ASCII
     * letters, so an ASCII fold is exact here. */
    for (size_t k = 0; k < sizeof(img_ext) / sizeof(img_ext[0]); k++) {
        size_t el = strlen(img_ext[k]), i = 0;
        if (len < el)
            continue;
        for (const char *t = name + len - el; i < el; i++) {
            char ch = t[i] >= 'A' && t[i] <= 'Z' ? (char)(t[i] + 32) : t[i];
            if (ch != img_ext[k][i])
                break;
        }
        if (i == el)
            return true;
    }
    return false;
}

static int py_name_cmp(const void *pa, const void *pb, void *arg)
{
    const struct cfs_catalog *c = arg;
    const struct cfs_entry *a = &c->e[*(const cfs_id *)pa], *b = &c->e[*(const cfs_id *)pb];
    return pystr_cmp(c->names + a->name_off, a->name_len, c->names + b->name_off, b->name_len);
}

/* ids[0..n) are in bytewise name order; put them in Python order.  The two
 * agree unless a name is not valid UTF-8. */
static void py_sort_names(struct cfs_catalog *c, cfs_id *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct cfs_entry *e = &c->e[ids[i]];
        if (!utf8_valid(c->names + e->name_off, e->name_len)) {
            qsort_r(ids, n, sizeof(*ids), py_name_cmp, c);
            return;
        }
    }
}

struct dirpath {
    cfs_id id;
    uint32_t off, len; /* into a path pool */
};

static int dirpath_cmp(const void *pa, const void *pb, void *arg)
{
    const char *pool = arg;
    const struct dirpath *a = pa, *b = pb;
    return pystr_cmp(pool + a->off, a->len, pool + b->off, b->len);
}

struct ifscratch {
    struct dirpath *dirs;
    size_t ndirs, dcap;
    char *pool;
    size_t plen, pcap;
    cfs_id *kids;
    size_t kcap;
};

static int push_dir(const struct cfs_catalog *c, struct ifscratch *w, cfs_id id)
{
    if (w->ndirs == w->dcap) {
        size_t ncap = w->dcap ? 2 * w->dcap : 64;
        struct dirpath *d = realloc(w->dirs, ncap * sizeof(*d));
        if (!d)
            return -ENOMEM;
        w->dirs = d;
        w->dcap = ncap;
    }
    for (;;) {
        /* The pool starts unallocated: no pointer arithmetic on NULL. */
        int len = w->pool ? cfs_catalog_path(c, id, w->pool + w->plen, w->pcap - w->plen)
                          : -ENAMETOOLONG;
        if (len >= 0) {
            w->dirs[w->ndirs++] = (struct dirpath){id, (uint32_t)w->plen, (uint32_t)len};
            w->plen += (size_t)len;
            return 0;
        }
        size_t ncap = w->pcap ? 2 * w->pcap : 65536;
        char *p = realloc(w->pool, ncap);
        if (!p)
            return -ENOMEM;
        w->pool = p;
        w->pcap = ncap;
    }
}

static int order_class(struct cfs_catalog *c, const struct cfs_scan_aux *aux, struct ifscratch *w,
                       cfs_id cls, char *err, size_t errlen)
{
    w->ndirs = 0;
    w->plen = 0;
    int rc = push_dir(c, w, cls);
    /* Every directory of the class subtree (the list itself is the stack). */
    for (size_t i = 0; rc == 0 && i < w->ndirs; i++) {
        const struct cfs_entry *d = &c->e[w->dirs[i].id];
        for (uint32_t k = 0; rc == 0 && k < d->nchildren; k++)
            if (S_ISDIR(c->e[d->first_child + k].mode))
                rc = push_dir(c, w, d->first_child + k);
    }
    if (rc < 0)
        return rc;
    if (w->ndirs > 1)
        qsort_r(w->dirs, w->ndirs, sizeof(*w->dirs), dirpath_cmp, w->pool);
    uint64_t before = c->nsamples;
    for (size_t i = 0; i < w->ndirs; i++) {
        const struct cfs_entry *d = &c->e[w->dirs[i].id];
        if (d->nchildren > w->kcap) {
            cfs_id *k = realloc(w->kids, d->nchildren * sizeof(*k));
            if (!k)
                return -ENOMEM;
            w->kids = k;
            w->kcap = d->nchildren;
        }
        uint32_t nk = 0;
        for (uint32_t k = 0; k < d->nchildren; k++) {
            cfs_id id = d->first_child + k;
            const struct cfs_entry *e = &c->e[id];
            if (S_ISDIR(e->mode) || (aux && aux->loop && aux->loop[id]))
                continue;
            if (is_image(c->names + e->name_off, e->name_len))
                w->kids[nk++] = id;
        }
        py_sort_names(c, w->kids, nk);
        for (uint32_t k = 0; k < nk; k++)
            emit(c, w->kids[k]);
    }
    if (c->nsamples == before) {
        cfs_catalog_errf(err, errlen,
                         "order=imagefolder: class folder '%s' holds no image file "
                         "(torchvision's ImageFolder would fail too); use order=sorted or "
                         "order=list:FILE",
                         c->names + c->e[cls].name_off);
        return -ENOENT;
    }
    return 0;
}

static int order_imagefolder(struct cfs_catalog *c, const struct cfs_scan_aux *aux, char *err,
                             size_t errlen)
{
    const struct cfs_entry *root = &c->e[0];
    struct ifscratch w = {0};
    cfs_id *classes = malloc((root->nchildren + 1) * sizeof(*classes));
    uint32_t ncls = 0;
    int rc = -ENOMEM;
    if (!classes)
        goto out;
    for (uint32_t k = 0; k < root->nchildren; k++)
        if (S_ISDIR(c->e[root->first_child + k].mode))
            classes[ncls++] = root->first_child + k;
    py_sort_names(c, classes, ncls);
    rc = 0;
    for (uint32_t k = 0; rc == 0 && k < ncls; k++)
        rc = order_class(c, aux, &w, classes[k], err, errlen);
out:
    if (rc == -ENOMEM)
        cfs_catalog_errf(err, errlen, "out of memory");
    free(classes);
    free(w.dirs);
    free(w.pool);
    free(w.kids);
    return rc;
}

/* ---- order=list:FILE ---- */

static cfs_id resolve(const struct cfs_catalog *c, char *path)
{
    cfs_id id = 0;
    char *save = NULL;
    for (char *tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (strcmp(tok, ".") == 0)
            continue;
        id = cfs_catalog_lookup(c, id, tok);
        if (id == CFS_ID_NONE)
            return CFS_ID_NONE;
    }
    return id;
}

static int order_list(struct cfs_catalog *c, const char *file, char *err, size_t errlen)
{
    FILE *f = fopen(file, "re");
    char *line = NULL, *copy = NULL;
    size_t lcap = 0, cap = c->nsamples, lineno = 0;
    int rc = 0;
    if (!f) {
        rc = -errno;
        cfs_catalog_errf(err, errlen, "order=list:%s: %s", file, strerror(-rc));
        return rc;
    }
    for (;;) {
        errno = 0;
        ssize_t len = getline(&line, &lcap, f);
        if (len < 0) {
            if (errno) {
                rc = -errno;
                cfs_catalog_errf(err, errlen, "order=list:%s: %s", file, strerror(-rc));
            }
            break;
        }
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (memchr(line, '\0', (size_t)len)) {
            rc = -EINVAL;
            cfs_catalog_errf(err, errlen, "order=list:%s line %zu: path holds a NUL byte", file,
                             lineno);
            break;
        }
        free(copy);
        copy = strdup(line);
        if (!copy) {
            rc = -ENOMEM;
            break;
        }
        cfs_id id = resolve(c, copy);
        if (id == CFS_ID_NONE || S_ISDIR(c->e[id].mode)) {
            rc = id == CFS_ID_NONE ? -ENOENT : -EISDIR;
            cfs_catalog_errf(err, errlen, "order=list:%s line %zu: '%s' is %s", file, lineno, line,
                             id == CFS_ID_NONE ? "not in the source" : "a directory, not a file");
            break;
        }
        if (c->nsamples == cap) {
            size_t ncap = cap ? 2 * cap : 1024;
            cfs_id *s = realloc(c->samples, ncap * sizeof(*s));
            if (!s) {
                rc = -ENOMEM;
                break;
            }
            c->samples = s;
            cap = ncap;
        }
        emit(c, id);
    }
    if (rc == -ENOMEM)
        cfs_catalog_errf(err, errlen, "out of memory");
    free(copy);
    free(line);
    fclose(f);
    return rc;
}

int cfs_catalog_build_order(struct cfs_catalog *c, const struct cfs_catalog_params *p,
                            const struct cfs_scan_aux *aux, char *err, size_t errlen)
{
    free(c->samples);
    c->nsamples = 0;
    for (uint32_t i = 0; i < c->n; i++)
        c->e[i].sample = CFS_NO_SAMPLE;
    c->samples = malloc(((size_t)c->n + 1) * sizeof(cfs_id));
    if (!c->samples) {
        cfs_catalog_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    switch (p->order) {
    case CFS_ORDER_SORTED: {
        int rc = order_sorted(c);
        if (rc < 0)
            cfs_catalog_errf(err, errlen, "out of memory");
        return rc;
    }
    case CFS_ORDER_IMAGEFOLDER:
        return order_imagefolder(c, aux, err, errlen);
    case CFS_ORDER_LIST:
        free(c->samples);
        c->samples = NULL;
        return order_list(c, p->order_list, err, errlen);
    }
    return -EINVAL;
}
