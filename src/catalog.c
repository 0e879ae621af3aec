/* The catalog's entry points: the top of the catalog module.
 *
 * cfs_catalog_open() is the only place that knows the whole sequence:
 * reuse the stored copy when it is still valid for the source
 * (catalog_store.c), else scan SOURCE (catalog_scan.c), put it in index
 * order at the order's root (catalog_order.c; where the order is optional
 * and does not fit the tree, the catalog keeps no samples and the reason),
 * count the totals and store the result.
 *
 * One optional order has a fallback: ImageFolder's at SOURCE itself, the
 * default, which a detection tree (images/{train,val} beside
 * labels/{train,val}, whose label folders hold no image) or any tree with
 * a folder of other files never fits.  Without samples the mount would
 * identify nothing, not even the datasets below its root (images/train
 * read by a YOLO loader), since every root's order is a map into the
 * mount's sample numbers.  Every file by sorted path builds on every tree
 * and numbers every file a root below can take, so it is the numbering of
 * such a mount, with the reason kept (cfs_catalog_order_fallback) for the
 * log.  A registered seed still needs the order asked for: no fallback
 * there, the tree is an error as before.
 *
 * The synthetic catalogs, for
 * planning at scale without a dataset, are built here too, straight into
 * the structure.
 *
 * Place in the layer order (src/catalog_i.h): the highest layer; it calls
 * every file below it and none of them calls it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_i.h"

int cfs_catalog_open(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                     size_t errlen)
{
    struct cfs_catalog *c = NULL;
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
    if ((unsigned)p->order >= CFS_ORDER_KINDS) {
        cfs_catalog_errf(err, errlen, "unknown index order %d", (int)p->order);
        return -EINVAL;
    }
    if (p->order == CFS_ORDER_LIST && p->order_root && *p->order_root) {
        cfs_catalog_errf(err, errlen,
                         "order=list:FILE takes no root: its paths are relative to the source");
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
    rc = cfs_catalog_scan(c, p->source, err, errlen);
    if (rc < 0)
        goto out;
    rc = cfs_catalog_build_order(c, p, err, errlen);
    if (rc < 0 && rc != -ENOMEM && p->order_optional && p->order == CFS_ORDER_IMAGEFOLDER &&
        !(p->order_root && *p->order_root)) {
        rc = cfs_catalog_note_fallback(c, err);
        struct cfs_catalog_params sorted = *p;
        sorted.order = CFS_ORDER_SORTED;
        if (rc == 0)
            rc = cfs_catalog_build_order(c, &sorted, err, errlen);
        if (rc == 0 && err && errlen)
            err[0] = '\0';
    }
    if (rc < 0 && rc != -ENOMEM && p->order_optional) {
        /* Not an ImageFolder (or the list or the root does not fit): every
         * file is still served, none is a sample. */
        rc = cfs_catalog_drop_order(c, err);
        if (err && errlen)
            err[0] = '\0';
    }
    if (rc < 0)
        goto out;
    cfs_catalog_totals(c);
    if (p->index_dir) {
        rc = cfs_catalog_store_save(p, c, err, errlen);
        /* The copy only makes the next mount warm: a full disk or a
         * failing index costs that, never this mount. */
        if (rc < 0 && rc != -ENOMEM) {
            free(c->not_stored);
            c->not_stored = strdup(err && *err ? err : "the catalog could not be stored");
            if (err && errlen)
                err[0] = '\0';
            rc = c->not_stored ? 0 : -ENOMEM;
        }
        if (rc < 0)
            goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
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
    uint32_t cls = 0;
    uint64_t cls_end = nclasses ? n / nclasses + (0 < n % nclasses) : n;
    for (uint64_t i = 0; i < n; i++) {
        st.st_size = (off_t)cfs_catalog_synthetic_size(i, mean_size);
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

uint64_t cfs_catalog_synthetic_size(uint64_t i, uint64_t mean_size)
{
    /* Uniform in [mean/2, 3*mean/2): mean preserved, varied. */
    return mean_size ? mean_size / 2 + mix64(i) % mean_size : 0;
}

int cfs_catalog_synthetic(uint64_t n, uint64_t mean_size, struct cfs_catalog **out)
{
    return cfs_catalog_synthetic_layout(n, mean_size, 0, out);
}
