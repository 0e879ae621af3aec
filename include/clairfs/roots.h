/* Dataset roots: which folder of the mount a trainer's dataset is rooted
 * at, and order identification run per root.
 *
 * Users mount a dataset's root and train on a folder below it
 * (ImageFolder(MNT/train) beside ImageFolder(MNT/val)).  A sampler's
 * indices number the samples of the folder the dataset was built on, not
 * the mount's: an open of MNT/train/c/x.JPEG is index i of train's order,
 * and the seed search must see i.  So every open is routed to a root - the
 * deepest directory above it that is an index order's root (for
 * ImageFolder: a directory with at least two class folders, else the
 * deepest that builds at all, else the mount's own order root) - and each
 * root has its own identification (clairfs/identify.h) fed with the
 * root's indices.  Opens are thus grouped by root as well as by process
 * tree: a validation pass over MNT/val is never part of the training
 * order's observations, and a validation worker never one of its readers.
 *
 * Each root is searched in its ImageFolder order and, in the same scan,
 * in the libraries' orders of the same samples (timm, mmpretrain,
 * ultralytics, sorted: "order=timm" in what was found); a root whose first
 * 64 opens all lie in one folder below it gives them to that folder, a
 * root of its own in the orders of a folder without classes (ultralytics'
 * detection dataset, images/train beside images/val).
 *
 * A root's order is built from the catalog (cfs_catalog_order_at), never
 * by a scan of the source, the first time an open lands below it; a root
 * whose order cannot be built, or holds a file that has no place in the
 * mount's own order (the data path plans in the mount's sample numbers),
 * is skipped for the next one up.  A registered order=KIND:ROOT, or any
 * kind but the default imagefolder, routes every open to the mount's own
 * order (the catalog's, rooted where it was registered): registration is
 * the user's promise.
 *
 * An unshuffled pass (SequentialSampler, DistributedSampler(shuffle=
 * False): each process reads ascending indices at one stride) is told by
 * its steps alone (roots_pass.c) and reported so ("val: sequential,
 * world=2"); its root's seed search is stopped, since no seed explains
 * it, and on_pass hands it to the data path, which predicts it as the
 * evaluation after each epoch.
 *
 * Thread safety: cfs_roots_observe from any thread (a root's order is
 * built under the module's lock, once); the rest from one thread. */
#ifndef CLAIRFS_ROOTS_H
#define CLAIRFS_ROOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clairfs/catalog.h"
#include "clairfs/identify.h"

#define CFS_ROOTS_MAX 16 /* roots identified at once; opens below others go to the mount's */

/* A dataset root as the data path adopts it. */
struct cfs_root {
    const char *name;   /* relative to the source; "" for the mount's own order */
    uint64_t n;         /* samples in the root's order */
    const uint32_t *map; /* root index i -> the mount's sample; NULL: the identity */
};

typedef void (*cfs_roots_cb)(void *arg, const struct cfs_root *root,
                             const struct cfs_identified *id);

struct cfs_roots_params {
    const struct cfs_catalog *catalog; /* its order is the mount's sample numbering */
    bool derive; /* false: every open to the mount's own order (order= registered) */
    /* The identification of each root: these, with n the root's (on_identified
     * and cb_arg are the module's own). */
    struct cfs_identify_params identify;
    cfs_roots_cb on_identified; /* called from a root's identification thread */
    /* Optional: root (never the mount's own) was named an unshuffled pass
     * at stride `stride`; called once a root, from the observing thread,
     * without the module's lock. */
    void (*on_pass)(void *arg, const struct cfs_root *root, uint32_t stride);
    /* Optional: a root's head sets for the other nodes (cfs_identify_params
     * on_split), from its identification thread. */
    void (*on_split)(void *arg, const struct cfs_root *root, const struct cfs_split_sets *sets);
    /* Optional: a root's opens do not fit the refinement it was given
     * (cfs_identify_params on_refused), from its identification thread. */
    void (*on_refused)(void *arg, const struct cfs_root *root,
                       const struct cfs_sampler_params *hint, const char *why);
    void *cb_arg;
};

struct cfs_roots;

/* 0 or -errno with a one-line message. */
int cfs_roots_create(const struct cfs_roots_params *p, struct cfs_roots **out, char *err,
                     size_t errlen);
/* Stops every root's identification.  Accepts NULL. */
void cfs_roots_destroy(struct cfs_roots *r);

/* An open of the mount's sample `sample` by pid, child of ppid. */
void cfs_roots_observe(struct cfs_roots *r, uint32_t sample, pid_t pid, pid_t ppid);
/* Back to learning, every root. */
void cfs_roots_restart(struct cfs_roots *r);
/* A late hint (cfs_identify_take_hint) for the root named `name` ("" the
 * mount's own) when its n is the hint's; kept for that root when no open
 * has reached it yet (the last hint only). */
void cfs_roots_take_hint(struct cfs_roots *r, const char *name,
                         const struct cfs_sampler_params *hint);
/* A seed another node's share of root `name`'s scan passed
 * (cfs_identify_take_candidate), verified on the calling thread; the
 * root's identification lives until the check ends, though an open stops
 * it meanwhile. */
void cfs_roots_take_candidate(struct cfs_roots *r, const char *name, uint32_t seed, uint32_t skip);
/* Share `node` of `nodes` of the head's scan of root `name` with its sets
 * s (cfs_identify_split_scan_paced): paced by that root's identification
 * here, within its budget and counted in its metric (that identification
 * lives until the share ends, though an open stops it meanwhile); by none,
 * at idle priority only, when this node has no such root (r may be NULL).
 * The caller waits; cfs_identify_split_scan_paced's returns. */
int cfs_roots_split_scan(struct cfs_roots *r, const char *name, const struct cfs_split_sets *s,
                         uint32_t node, uint32_t nodes, const _Atomic bool *cancel,
                         cfs_identify_split_found found, void *arg);
/* The state of the root last identified, else of the root with the most
 * opens (out may be NULL). */
enum cfs_identify_state cfs_roots_state(struct cfs_roots *r, struct cfs_identified *out);
/* True while any root's scan runs; *share the least a scan got. */
bool cfs_roots_scan_share(struct cfs_roots *r, double *share);
/* One clause a root, "train: identified torch-ddp seed=0 ...; val:
 * sequential, world=2", into buf (empty before any open). */
void cfs_roots_text(struct cfs_roots *r, char *buf, size_t len);

/* The root an open of entry `id` belongs to (cfs_roots_observe's rule),
 * for tests and clairfs-plan: its directory, or CFS_ID_NONE for the mount's
 * own order. */
cfs_id cfs_roots_root_of(const struct cfs_catalog *c, cfs_id id);

/* The same, with the root's order as the mount's samples (*map malloc'ed,
 * root index -> sample; NULL and the mount's n for the mount's own order)
 * and its kind (*kind: ImageFolder's, else the library's that builds where
 * a class holds no image): the deepest root above entry id whose order
 * builds, as the mount takes it.  For clairfs-plan --identify. */
cfs_id cfs_roots_resolve(const struct cfs_catalog *c, cfs_id id, uint32_t **map, uint64_t *n,
                         enum cfs_order *kind);

/* The folder below root (CFS_ID_NONE: the mount's) that holds every one
 * of the opened entries ids[0 .. count) (a root's first opens), with its
 * order as a folder without classes (*kind: ultralytics', else sorted) as
 * the mount's samples (*map malloc'ed, *n): the mount's narrowing of a
 * root (roots.c), without its test of an unshuffled pass.  CFS_ID_NONE
 * when they span root's folders or the order does not build.  For
 * clairfs-plan --identify. */
cfs_id cfs_roots_narrow(const struct cfs_catalog *c, cfs_id root, const cfs_id *ids, size_t count,
                        uint32_t **map, uint64_t *n, enum cfs_order *kind);

/* A root's candidate index orders beside its first (roots_find.c's top
 * comment): the libraries' orders that build at the root, number the same
 * n samples and differ from the first and from each other, as
 * cfs_identify_params.orders takes them. */
#define CFS_ROOT_MAX_ORDERS 5
struct cfs_root_orders {
    size_t count;
    const char *name[CFS_ROOT_MAX_ORDERS]; /* as order= spells it */
    uint32_t *index[CFS_ROOT_MAX_ORDERS];  /* the first order's index x -> its index in this one */
    uint32_t *map[CFS_ROOT_MAX_ORDERS];    /* this order's index -> the mount's sample */
};
/* Fills o for the root at directory dir (0: the mount's root) whose first
 * order is map (n samples; NULL: the mount's own order).  An order that
 * does not build, or numbers other samples, is left out, never an error:
 * 0 or -ENOMEM (o empty). */
int cfs_root_orders_build(const struct cfs_catalog *c, cfs_id dir, const uint32_t *map, uint64_t n,
                          struct cfs_root_orders *o);
void cfs_root_orders_free(struct cfs_root_orders *o);

#endif
