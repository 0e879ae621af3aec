/* The order= kinds by name: "KIND", "KIND:ROOT" and "list:FILE".
 *
 * Option parsing (options.c, in the utility library every program links)
 * and the catalog both need the names, and the utility library cannot
 * depend on the catalog, so the table lives here, on its own, in the
 * utility library (the catalog links it).  The rules of each kind are in
 * catalog_order.c.
 *
 * Place in the layer order (src/catalog_i.h): outside the catalog's layers;
 * calls nothing. */
#include <errno.h>
#include <string.h>

#include "clairfs/catalog.h"

static const char *const kind_names[CFS_ORDER_KINDS] = {
    [CFS_ORDER_IMAGEFOLDER] = "imagefolder",
    [CFS_ORDER_SORTED] = "sorted",
    [CFS_ORDER_LIST] = "list",
    [CFS_ORDER_TIMM] = "timm",
    [CFS_ORDER_MMPRETRAIN] = "mmpretrain",
    [CFS_ORDER_ULTRALYTICS] = "ultralytics",
    [CFS_ORDER_ULTRALYTICS_CLS] = "ultralytics-cls",
};

const char *cfs_order_name(enum cfs_order kind)
{
    return (unsigned)kind < CFS_ORDER_KINDS ? kind_names[kind] : "?";
}

int cfs_order_parse(const char *v, enum cfs_order *kind, const char **arg)
{
    size_t len = strcspn(v, ":");
    for (int k = 0; k < CFS_ORDER_KINDS; k++) {
        if (strlen(kind_names[k]) != len || strncmp(v, kind_names[k], len) != 0)
            continue;
        *arg = v[len] ? v + len + 1 : v + len;
        if (k == CFS_ORDER_LIST && !**arg)
            return -EINVAL; /* list needs its FILE */
        *kind = (enum cfs_order)k;
        return 0;
    }
    return -EINVAL;
}
