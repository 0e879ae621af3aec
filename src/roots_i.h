/* Private to the dataset roots (clairfs/roots.h).  The module is three
 * files in layers; a file calls only the files below it:
 *
 *   roots.c       the roots as opens find them: routing, one identification
 *                 each, what they found, the text
 *   roots_pass.c  an unshuffled pass told by its steps
 *   roots_find.c  the root of an opened file, a root's order as the
 *                 mount's samples
 *
 * roots_pass.c and roots_find.c call no other roots file. */
#ifndef CLAIRFS_ROOTS_I_H
#define CLAIRFS_ROOTS_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clairfs/roots.h"

/* --- The root of an open (roots_find.c). -------------------------------- */

/* The deepest directory from `from` up (the mount's root excluded) that
 * lists at least two folders, else CFS_ID_NONE when the mount's root does,
 * else the deepest that lists one (roots_find.c's top comment). */
cfs_id roots_candidate(const struct cfs_catalog *c, cfs_id from);
/* dir's ImageFolder order as the mount's samples: *map (malloc'ed, root
 * index -> sample), *n; where it does not build, the first of
 * ultralytics-cls', timm's and mmpretrain's that does (*kind says which).
 * 0, or -ENOENT with why (no order builds there, or a sample has no place
 * in the mount's order), -errno. */
int roots_build(const struct cfs_catalog *c, cfs_id dir, enum cfs_order *kind, uint32_t **map,
                uint64_t *n, char *why, size_t whylen);
/* The same for a folder without classes, a root narrowed to the folder
 * holding its opens: the first of ultralytics' and sorted orders that
 * builds at dir (*kind says which). */
int roots_build_folder(const struct cfs_catalog *c, cfs_id dir, enum cfs_order *kind,
                       uint32_t **map, uint64_t *n, char *why, size_t whylen);
/* The deepest directory above both a and b (entries; 0 the mount's root). */
cfs_id roots_common_dir(const struct cfs_catalog *c, cfs_id a, cfs_id b);



/* --- An unshuffled pass (roots_pass.c). --------------------------------- */

#define ROOTS_PASS_READERS 64 /* processes followed */
#define ROOTS_PASS_MAX_STRIDE 64
#define ROOTS_PASS_MIN_STEPS 64 /* steps seen before a verdict */

struct roots_pass {
    pid_t pid[ROOTS_PASS_READERS];
    uint32_t last[ROOTS_PASS_READERS];
    size_t nreaders;
    uint64_t steps, stride_steps[ROOTS_PASS_MAX_STRIDE + 1];
};

/* Records process pid's open of index x; returns the stride (1..64) once
 * the steps say an unshuffled pass, else 0. */
uint32_t roots_pass_open(struct roots_pass *p, pid_t pid, uint32_t x);

#endif
