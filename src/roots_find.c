/* Which directory an opened file's dataset is rooted at, and that root's
 * order in the mount's sample numbers.
 *
 * A trainer names its dataset's folder, and nothing in an open says which:
 * MNT/train/n01440764/x.JPEG is a sample of ImageFolder(MNT/train) and of
 * ImageFolder(MNT), whose classes are then train and val.  The opens of a
 * training loop span its classes, so the folder is the one whose class
 * folders they are: the deepest directory above the file with at least two
 * subdirectories (an ImageFolder with one class is a folder of images in
 * a folder, as ROOT/cls/images/x.jpg has), up to the mount's root, which
 * is the mount's own order.  A root is taken only when its order builds
 * (cfs_catalog_order_at, from the entries alone) and every sample of it
 * has a place in the mount's order: the data path plans in the mount's
 * sample numbers, and a root's index i is the mount's sample map[i].  One
 * candidate root per open, not several: randperm(n) depends on n, so each
 * candidate root would need its own pass over the seeds, and the deepest
 * root above a group's opens is the only one a loop reading all of its
 * classes makes plausible (a nested layout that fools the rule is
 * registered with order=imagefolder:ROOT).  A folder of images without
 * classes (a detection dataset's images/train beside images/val) is found
 * from the opens, not from the tree: roots.c moves a root's opens to the
 * folder that holds its first 64 (one more candidate root, one more scan
 * at most).
 *
 * The libraries' orders of one root, though, share its n where they take
 * the same files (timm's, mmpretrain's, ultralytics' on most trees), so
 * they are candidates of the root's one scan (cfs_root_orders_build): each
 * that builds, numbers the same samples and differs from the first order
 * and from the candidates before it is given to the root's identification
 * as a renumbering of the first order's indices.  One that does not build
 * is no candidate, never an error; one of another n (timm's where a class
 * holds a .bmp) would need a scan of its own and is left out.  Where
 * ImageFolder's order does not build at a root (a class folder without an
 * image: torchvision raises, so no trainer reads the root that way), the
 * first library order that does is the root's own, with no scan more: the
 * candidates of another n are tested there, in the one scan of that n. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "roots_i.h"

static bool is_dir(const struct cfs_catalog *c, cfs_id id)
{
    return S_ISDIR(cfs_catalog_entry(c, id)->mode);
}

/* Subdirectories of dir, counted up to two: enough to tell a class list. */
static unsigned subdirs(const struct cfs_catalog *c, cfs_id dir)
{
    const struct cfs_entry *e = cfs_catalog_entry(c, dir);
    unsigned k = 0;
    for (uint32_t i = 0; i < e->nchildren && k < 2; i++)
        k += is_dir(c, e->first_child + i);
    return k;
}

cfs_id roots_candidate(const struct cfs_catalog *c, cfs_id from)
{
    cfs_id weak = CFS_ID_NONE;
    for (cfs_id d = from; d != 0 && d != CFS_ID_NONE; d = cfs_catalog_entry(c, d)->parent) {
        unsigned k = subdirs(c, d);
        if (k >= 2)
            return d;
        if (k == 1 && weak == CFS_ID_NONE)
            weak = d;
    }
    /* The mount's root itself, if it lists classes, else the deepest
     * folder with one class. */
    return subdirs(c, 0) >= 2 ? CFS_ID_NONE : weak;
}

cfs_id cfs_roots_root_of(const struct cfs_catalog *c, cfs_id id)
{
    if (id >= cfs_catalog_entry_count(c) || id == 0)
        return CFS_ID_NONE;
    cfs_id p = cfs_catalog_entry(c, id)->parent;
    if (p == 0 || p == CFS_ID_NONE)
        return CFS_ID_NONE;
    return roots_candidate(c, cfs_catalog_entry(c, p)->parent);
}

static int build_kind(const struct cfs_catalog *c, cfs_id dir, enum cfs_order kind, uint32_t **map,
                      uint64_t *n, char *why, size_t whylen)
{
    cfs_id *ids = NULL;
    int rc = cfs_catalog_order_at(c, kind, dir, &ids, n, why, whylen);
    if (rc != 0)
        return rc < 0 ? rc : -ENOENT;
    for (uint64_t i = 0; i < *n; i++) {
        uint32_t s = cfs_catalog_entry(c, ids[i])->sample;
        if (s == CFS_NO_SAMPLE) {
            snprintf(why, whylen, "%s has no place in the mount's order",
                     cfs_catalog_name(c, ids[i]));
            free(ids);
            return -ENOENT;
        }
        ids[i] = s; /* in place: an entry id becomes the mount's sample */
    }
    *map = ids;
    return 0;
}

/* A root of class folders: ImageFolder's order, else (a class holding no
 * image, where torchvision raises) the first library's that builds there,
 * with empty classes allowed (ultralytics-cls, as ImageFolder(root,
 * allow_empty=True)), or no class needed (timm's walk), or mmpretrain's. */
static const enum cfs_order class_kinds[] = {CFS_ORDER_IMAGEFOLDER, CFS_ORDER_ULTRALYTICS_CLS,
                                             CFS_ORDER_TIMM, CFS_ORDER_MMPRETRAIN};

static int build_first(const struct cfs_catalog *c, cfs_id dir, const enum cfs_order *kinds,
                       size_t nkinds, enum cfs_order *kind, uint32_t **map, uint64_t *n, char *why,
                       size_t whylen)
{
    int rc = -ENOENT;
    char first_why[256] = "";
    for (size_t k = 0; k < nkinds && rc == -ENOENT; k++) {
        if ((rc = build_kind(c, dir, kinds[k], map, n, why, whylen)) == 0)
            *kind = kinds[k];
        else if (k == 0)
            snprintf(first_why, sizeof(first_why), "%s", why);
    }
    /* The first kind's reason is the one a user can act on. */
    if (rc == -ENOENT && first_why[0])
        snprintf(why, whylen, "%s", first_why);
    return rc;
}

int roots_build(const struct cfs_catalog *c, cfs_id dir, enum cfs_order *kind, uint32_t **map,
                uint64_t *n, char *why, size_t whylen)
{
    return build_first(c, dir, class_kinds, sizeof(class_kinds) / sizeof(class_kinds[0]), kind, map,
                       n, why, whylen);
}

/* A folder of images read by a library's glob: YOLODataset's, else every
 * file by path. */
static const enum cfs_order folder_kinds[] = {CFS_ORDER_ULTRALYTICS, CFS_ORDER_SORTED};

int roots_build_folder(const struct cfs_catalog *c, cfs_id dir, enum cfs_order *kind,
                       uint32_t **map, uint64_t *n, char *why, size_t whylen)
{
    return build_first(c, dir, folder_kinds, sizeof(folder_kinds) / sizeof(folder_kinds[0]), kind,
                       map, n, why, whylen);
}

cfs_id cfs_roots_narrow(const struct cfs_catalog *c, cfs_id root, const cfs_id *ids, size_t count,
                        uint32_t **map, uint64_t *n, enum cfs_order *kind)
{
    cfs_id top = root == CFS_ID_NONE ? 0 : root, common = CFS_ID_NONE;
    for (size_t i = 0; i < count; i++) {
        cfs_id folder = cfs_catalog_entry(c, ids[i])->parent;
        common = i ? roots_common_dir(c, common, folder) : folder;
    }
    char why[256];
    if (count == 0 || common == top || roots_build_folder(c, common, kind, map, n, why,
                                                          sizeof(why)) < 0)
        return CFS_ID_NONE;
    return common;
}

static unsigned depth_of(const struct cfs_catalog *c, cfs_id d)
{
    unsigned k = 0;
    for (; d != 0 && d != CFS_ID_NONE; d = cfs_catalog_entry(c, d)->parent)
        k++;
    return k;
}

cfs_id roots_common_dir(const struct cfs_catalog *c, cfs_id a, cfs_id b)
{
    unsigned da = depth_of(c, a), db = depth_of(c, b);
    for (; da > db; da--)
        a = cfs_catalog_entry(c, a)->parent;
    for (; db > da; db--)
        b = cfs_catalog_entry(c, b)->parent;
    while (a != b && a != 0 && a != CFS_ID_NONE) {
        a = cfs_catalog_entry(c, a)->parent;
        b = cfs_catalog_entry(c, b)->parent;
    }
    return a == CFS_ID_NONE ? 0 : a;
}

/* The libraries' orders tried beside ImageFolder's, in the order a tie is
 * named (catalog_order.c transcribes each). */
static const enum cfs_order candidate_kinds[] = {CFS_ORDER_TIMM, CFS_ORDER_MMPRETRAIN,
                                                 CFS_ORDER_ULTRALYTICS_CLS, CFS_ORDER_ULTRALYTICS,
                                                 CFS_ORDER_SORTED};

void cfs_root_orders_free(struct cfs_root_orders *o)
{
    for (size_t k = 0; k < o->count; k++) {
        free(o->index[k]);
        free(o->map[k]);
    }
    o->count = 0;
}

/* kind's order at dir as the first order's indices (*index) and the
 * mount's samples (*map): 1 when it is a candidate, 0 when it is none
 * (does not build, other samples, the first order again), -ENOMEM.
 * first_of[s]: the first order's index of mount sample s, UINT32_MAX for
 * none. */
static int candidate(const struct cfs_catalog *c, cfs_id dir, enum cfs_order kind,
                     const uint32_t *first_of, uint64_t n, uint32_t **index, uint32_t **map)
{
    cfs_id *ids = NULL;
    uint64_t m = 0;
    char why[256];
    *index = NULL;
    *map = NULL;
    int rc = cfs_catalog_order_at(c, kind, dir, &ids, &m, why, sizeof(why));
    if (rc != 0 || m != n) {
        free(ids);
        return rc == -ENOMEM ? -ENOMEM : 0;
    }
    uint32_t *idx = malloc(n * sizeof(*idx));
    if (!idx) {
        free(ids);
        return -ENOMEM;
    }
    bool same = true;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t s = cfs_catalog_entry(c, ids[j])->sample;
        uint32_t x = s == CFS_NO_SAMPLE ? UINT32_MAX : first_of[s];
        if (x == UINT32_MAX) { /* a sample the first order does not number */
            free(idx);
            free(ids);
            return 0;
        }
        idx[x] = (uint32_t)j;
        ids[j] = s; /* in place: an entry id becomes the mount's sample */
        same = same && x == j;
    }
    if (same) {
        free(idx);
        free(ids);
        return 0;
    }
    *index = idx;
    *map = ids;
    return 1;
}

int cfs_root_orders_build(const struct cfs_catalog *c, cfs_id dir, const uint32_t *map, uint64_t n,
                       struct cfs_root_orders *o)
{
    memset(o, 0, sizeof(*o));
    uint64_t ns = cfs_catalog_sample_count(c);
    uint32_t *first_of = malloc((ns ? ns : 1) * sizeof(*first_of));
    if (!first_of)
        return -ENOMEM;
    memset(first_of, 0xff, ns * sizeof(*first_of));
    for (uint64_t i = 0; i < n; i++)
        first_of[map ? map[i] : i] = (uint32_t)i;
    int rc = 0;
    for (size_t k = 0; k < sizeof(candidate_kinds) / sizeof(candidate_kinds[0]); k++) {
        uint32_t *index, *m;
        rc = candidate(c, dir, candidate_kinds[k], first_of, n, &index, &m);
        if (rc < 0)
            break;
        /* an order another candidate already is (mmpretrain's and
         * ultralytics-cls's often are each other's) */
        for (size_t j = 0; rc == 1 && j < o->count; j++)
            if (memcmp(o->index[j], index, n * sizeof(*index)) == 0)
                rc = 0;
        if (rc == 1) {
            o->name[o->count] = cfs_order_name(candidate_kinds[k]);
            o->index[o->count] = index;
            o->map[o->count++] = m;
        } else {
            free(index);
            free(m);
        }
    }
    free(first_of);
    if (rc < 0) {
        cfs_root_orders_free(o);
        return rc;
    }
    return 0;
}

cfs_id cfs_roots_resolve(const struct cfs_catalog *c, cfs_id id, uint32_t **map, uint64_t *n,
                         enum cfs_order *kind)
{
    *map = NULL;
    *n = cfs_catalog_sample_count(c);
    *kind = CFS_ORDER_IMAGEFOLDER;
    char why[256];
    /* As the mount routes an open: a root whose order does not build gives
     * way to the next one up. */
    for (cfs_id d = cfs_roots_root_of(c, id); d != CFS_ID_NONE;
         d = roots_candidate(c, cfs_catalog_entry(c, d)->parent))
        if (roots_build(c, d, kind, map, n, why, sizeof(why)) == 0)
            return d;
    *n = cfs_catalog_sample_count(c);
    return CFS_ID_NONE;
}
