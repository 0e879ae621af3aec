/* The catalog's in-memory form and its accessors; cfs_catalog_open() ties
 * the scan (catalog_scan.c), the index order (catalog_order.c) and the LMDB
 * copy (catalog_store.c) together.
 *
 * Everything lives in three flat arrays (entries, the name pool, the sample
 * list) so that storing and loading the catalog is a copy of three blobs and
 * a lookup is a binary search over a directory's contiguous children. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "catalog_i.h"

void cfs_catalog_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* One line, whatever a name in the message contains. */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = '?';
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

int cfs_catalog_open(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                     size_t errlen)
{
    struct cfs_catalog *c = NULL;
    struct cfs_scan_aux aux = {0};
    int rc;

    *out = NULL;
    if (!p || !p->source || !*p->source) {
        cfs_catalog_errf(err, errlen, "no source directory given");
        return -EINVAL;
    }
    if (p->order == CFS_ORDER_LIST && (!p->order_list || !*p->order_list)) {
        cfs_catalog_errf(err, errlen, "order=list needs a file: order=list:FILE");
        return -EINVAL;
    }
    if (p->order != CFS_ORDER_IMAGEFOLDER && p->order != CFS_ORDER_SORTED &&
        p->order != CFS_ORDER_LIST) {
        cfs_catalog_errf(err, errlen, "unknown index order %d", (int)p->order);
        return -EINVAL;
    }
    if (p->index_dir && !p->rescan) {
        rc = cfs_catalog_store_load(p, &c, err, errlen);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            *out = c;
            return 0;
        }
    }
    c = cfs_catalog_alloc();
    if (!c) {
        rc = -ENOMEM;
        cfs_catalog_errf(err, errlen, "out of memory");
        goto out;
    }
    rc = cfs_catalog_scan(c, p->source, &aux, err, errlen);
    if (rc < 0)
        goto out;
    rc = cfs_catalog_build_order(c, p, &aux, err, errlen);
    if (rc < 0)
        goto out;
    cfs_catalog_totals(c);
    if (p->index_dir) {
        rc = cfs_catalog_store_save(p, c, err, errlen);
        if (rc < 0)
            goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    free(aux.loop);
    cfs_catalog_destroy(c);
    return rc;
}

/* splitmix64: a fixed, well-spread sequence from the file number, so a
 * synthetic catalog is the same on every node and in every run. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static unsigned digits(uint64_t v)
{
    unsigned d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Zero-padded decimal, so bytewise order is numeric order. */
static size_t put_num(char *dst, uint64_t v, unsigned width)
{
    for (unsigned i = width; i-- > 0;) {
        dst[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return width;
}

int cfs_catalog_synthetic_layout(uint64_t n, uint64_t mean_size, uint32_t nclasses,
                                 struct cfs_catalog **out)
{
    *out = NULL;
    if (nclasses > n)
        nclasses = (uint32_t)n;
    uint64_t total = 1 + (uint64_t)nclasses + n;
    if (total >= CFS_ID_NONE)
        return -EOVERFLOW;
    struct cfs_catalog *c = cfs_catalog_alloc();
    if (!c)
        return -ENOMEM;
    unsigned fw = digits(n ? n - 1 : 0), cw = digits(nclasses ? nclasses - 1 : 0);
    size_t fname = fw + 4 + 1, cname = 1 + cw + 1;
    int rc = cfs_catalog_reserve(c, (uint32_t)total, 1 + nclasses * cname + n * fname);
    if (rc < 0)
        goto fail;
    c->samples = malloc((n ? n : 1) * sizeof(cfs_id));
    if (!c->samples) {
        rc = -ENOMEM;
        goto fail;
    }

    struct stat st = {0};
    st.st_mode = S_IFDIR | 0755;
    st.st_nlink = 2 + nclasses;
    st.st_mtim.tv_sec = 1600000000;
    cfs_catalog_append(c, "", 0, &st, CFS_ID_NONE);
    char name[64];
    cfs_id first_file = 1;
    if (nclasses) {
        c->e[0].first_child = 1;
        c->e[0].nchildren = nclasses;
        st.st_nlink = 2;
        for (uint32_t k = 0; k < nclasses; k++) {
            name[0] = 'c';
            size_t len = 1 + put_num(name + 1, k, cw);
            cfs_catalog_append(c, name, len, &st, 0);
        }
        first_file = 1 + nclasses;
    }
    st.st_mode = S_IFREG | 0644;
    st.st_nlink = 1;
    uint64_t half = mean_size / 2;
    uint32_t cls = 0;
    uint64_t cls_end = nclasses ? n / nclasses + (0 < n % nclasses) : n;
    for (uint64_t i = 0; i < n; i++) {
        /* Sizes uniform in [mean/2, 3*mean/2): mean preserved, varied. */
        uint64_t r = mix64(i);
        st.st_size = (off_t)(mean_size ? half + r % mean_size : 0);
        size_t len = put_num(name, i, fw);
        memcpy(name + len, ".jpg", 4);
        len += 4;
        cfs_id parent = 0;
        if (nclasses) {
            /* Classes get n/nclasses files each, the first n%nclasses one more. */
            while (i >= cls_end) {
                cls++;
                cls_end += n / nclasses + (cls < n % nclasses);
            }
            parent = 1 + cls;
            if (c->e[parent].nchildren == 0)
                c->e[parent].first_child = (cfs_id)(first_file + i);
            c->e[parent].nchildren++;
        }
        int64_t id = cfs_catalog_append(c, name, len, &st, parent);
        c->e[id].sample = (uint32_t)i;
        c->samples[i] = (cfs_id)id;
    }
    if (!nclasses && n) {
        c->e[0].first_child = 1;
        c->e[0].nchildren = (uint32_t)n;
    }
    c->nsamples = n;
    cfs_catalog_totals(c);
    *out = c;
    return 0;
fail:
    cfs_catalog_destroy(c);
    return rc;
}

int cfs_catalog_synthetic(uint64_t n, uint64_t mean_size, struct cfs_catalog **out)
{
    return cfs_catalog_synthetic_layout(n, mean_size, 0, out);
}

bool cfs_catalog_loaded_from_index(const struct cfs_catalog *c)
{
    return c->from_index;
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

int cfs_pystr_cmp(const char *a, size_t alen, const char *b, size_t blen)
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

bool cfs_utf8_valid(const char *s, size_t len)
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
