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
 * candidate per open, not several: randperm(n) depends on n, so each
 * candidate would need its own pass over the seeds, and the deepest root
 * above a group's opens is the only one a loop reading all of its classes
 * makes plausible (a nested layout that fools the rule is registered with
 * order=imagefolder:ROOT). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

int roots_build(const struct cfs_catalog *c, cfs_id dir, uint32_t **map, uint64_t *n, char *why,
                size_t whylen)
{
    cfs_id *ids = NULL;
    int rc = cfs_catalog_order_at(c, CFS_ORDER_IMAGEFOLDER, dir, &ids, n, why, whylen);
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

cfs_id cfs_roots_resolve(const struct cfs_catalog *c, cfs_id id, uint32_t **map, uint64_t *n)
{
    *map = NULL;
    *n = cfs_catalog_sample_count(c);
    char why[256];
    /* As the mount routes an open: a root whose order does not build gives
     * way to the next one up. */
    for (cfs_id d = cfs_roots_root_of(c, id); d != CFS_ID_NONE;
         d = roots_candidate(c, cfs_catalog_entry(c, d)->parent))
        if (roots_build(c, d, map, n, why, sizeof(why)) == 0)
            return d;
    *n = cfs_catalog_sample_count(c);
    return CFS_ID_NONE;
}
