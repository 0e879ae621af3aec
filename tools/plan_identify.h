/* clairfs-plan --identify FILE: a recorded open order, identified offline
 * (tools/plan_identify.c). */
#ifndef CLAIRFS_PLAN_IDENTIFY_H
#define CLAIRFS_PLAN_IDENTIFY_H

#include "clairfs/catalog.h"
#include "clairfs/identify.h"

/* Reads FILE (format in plan_identify.c), resolves its paths through cat,
 * finds the dataset root the opens are rooted at (root: the registered
 * order=KIND:ROOT's, whose samples cat numbers; NULL: found as the mount
 * finds it), identifies there (p->n is set) and prints the identification
 * line, prefixed "ROOT: " for a root below the source.  Returns the exit
 * status: 0 identified, 1 not, 2 bad input. */
int plan_identify(const char *prog, const char *file, const struct cfs_catalog *cat,
                  const char *root, struct cfs_identify_params *p);

#endif
