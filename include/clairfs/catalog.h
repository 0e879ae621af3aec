/* The catalog: every entry of SOURCE, scanned once, with a stable id, and
 * the dataset's index order (dataset index i -> file, as PyTorch numbers
 * the samples).
 *
 * Ids are assigned breadth first with each directory's children sorted by
 * name (bytewise), so a directory's children are the contiguous ids
 * [first_child, first_child + nchildren) and lookup is a binary search.
 * Id 0 is the root (its parent is CFS_ID_NONE, its name "").  Symbolic
 * links are followed (as torchvision does with followlinks=True): a link to
 * a file or directory is presented as that file or directory; a broken link
 * or one that would loop is kept as a symlink.  How the catalog's files
 * layer (entry points, store, scan and orders, walks, table and names) is
 * in src/catalog_i.h. */
#ifndef CLAIRFS_CATALOG_H
#define CLAIRFS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs_index;

typedef uint32_t cfs_id;
#define CFS_ID_NONE UINT32_MAX
#define CFS_NO_SAMPLE UINT32_MAX

/* The index orders: the numbering one library gives a folder's samples.
 * The exact rules, and the library versions they were read from, are in
 * src/catalog_order.c's opening comment.  In short:
 * IMAGEFOLDER is torchvision 0.14 ImageFolder(root).samples (Python code
 * point order, undecodable bytes as surrogates; broken links named like
 * images are samples, as for torchvision; a class folder without images
 * cannot be built; unlike os.walk a link back to one of its own ancestors
 * is not followed).
 * SORTED is every regular file (links to files included) by relative path,
 * bytewise.
 * LIST reads one relative path a line: every byte but '\n' belongs to the
 * path (no comment syntax: a name may start with '#'), empty lines are
 * skipped, "." and empty components are ignored; a path that is not a
 * non-directory of SOURCE is an error naming the file and line; a path may
 * repeat (its entry's `sample` is its first position).
 * TIMM is timm's folder reader (find_images_and_targets): every .png, .jpg,
 * .jpeg below the root by natural key ("img2" before "img10").
 * MMPRETRAIN is mmpretrain's CustomDataset in folder mode: class folders
 * by name, each one's files (hidden ones left out) by relative path.
 * ULTRALYTICS is the YOLO detection dataset's image list of a directory:
 * every image below it by path, hidden files and folders left out.
 * ULTRALYTICS_CLS is the YOLO classification dataset: ImageFolder, empty
 * classes allowed, broken links and .ppm/.pgm left out. */
enum cfs_order {
    CFS_ORDER_IMAGEFOLDER = 0, /* torchvision ImageFolder(root).samples */
    CFS_ORDER_SORTED,          /* every regular file, sorted by relative path */
    CFS_ORDER_LIST,            /* relative paths, one per line, from a file */
    CFS_ORDER_TIMM,            /* timm ImageDataset(root) (reader_image_folder) */
    CFS_ORDER_MMPRETRAIN,      /* mmpretrain CustomDataset(data_prefix=root) */
    CFS_ORDER_ULTRALYTICS,     /* ultralytics YOLODataset(img_path=root).im_files */
    CFS_ORDER_ULTRALYTICS_CLS, /* ultralytics ClassificationDataset(root).samples */
};
#define CFS_ORDER_KINDS 7

struct cfs_entry {
    uint64_t size;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint32_t mode; /* S_IFMT bits and permissions */
    uint32_t uid;
    uint32_t gid;
    uint32_t nlink;
    cfs_id parent;
    cfs_id first_child; /* directories only */
    uint32_t nchildren; /* directories only */
    uint32_t name_off;  /* into the name pool, see cfs_catalog_name() */
    uint32_t name_len;
    uint32_t sample; /* position in index order, or CFS_NO_SAMPLE */
    /* A symlink kept as a link because its target is this directory, one of
     * its own ancestors (Python's is_dir() says True for it, so os.walk
     * lists it among the directories); CFS_ID_NONE for any other entry. */
    cfs_id loop_dir;
};

struct cfs_catalog_params {
    const char *source;    /* directory to scan */
    enum cfs_order order;
    const char *order_list; /* CFS_ORDER_LIST */
    /* order=KIND:ROOT: the directory of SOURCE (relative; "" and "."
     * components skipped) the order is rooted at; NULL or "" for SOURCE
     * itself.  Not for CFS_ORDER_LIST, whose paths are relative to SOURCE. */
    const char *order_root;
    const char *index_dir;  /* LMDB environment; NULL: no persistence */
    bool rescan;            /* ignore a stored catalog */
    /* The index order is only wanted, not needed (without it a mount
     * predicts nothing, but serves): a tree the order does not fit still opens, with no
     * samples, and cfs_catalog_order_unavailable() says why.  Without it
     * such a tree is an error.  A stored copy made without an order is
     * reused only when the order is optional again.  ImageFolder's order
     * at SOURCE itself that does not build (a detection tree's labels/
     * holds no image) is replaced by every file by sorted path, and
     * cfs_catalog_order_fallback() says why. */
    bool order_optional;
    /* An environment the caller already opened, used instead of opening
     * index_dir (LMDB forbids opening one environment twice in a process).
     * index_dir must still be set (it enables persistence and names the
     * index in messages). */
    struct cfs_index *index;
};

struct cfs_catalog;

/* Load the catalog stored in index_dir when it is valid for the source
 * (directory mtimes unchanged), else scan SOURCE and store it.  Returns 0 or
 * -errno with a one-line message in err: -ENOENT / -ENOTDIR for a missing
 * or non-directory SOURCE, -ENOENT for an order=list path not in SOURCE,
 * an order root that is not in SOURCE (-ENOTDIR: not a directory) or an
 * order that cannot be built there (an ImageFolder class without images;
 * see catalog_order.c for the exact rules of each order).  A root where the
 * order finds no sample at all is an empty index, not an error.  The stored
 * copy is reused when it was made for the same source (real path), order,
 * order root (as given) and list file (real path, mtime, size) and every
 * directory's mtime is unchanged; a damaged or older-format
 * copy is replaced by a scan.  A scan that cannot be stored (disk full, a
 * failing index) still opens: cfs_catalog_not_stored() says why. */
int cfs_catalog_open(const struct cfs_catalog_params *p, struct cfs_catalog **out, char *err,
                     size_t errlen);
/* A catalog of n synthetic files (no source), sizes drawn around mean_size;
 * for planning at scale without a dataset. */
int cfs_catalog_synthetic(uint64_t n, uint64_t mean_size, struct cfs_catalog **out);
/* The size of synthetic file i (index i), without making the catalog: the
 * planner needs the sizes alone, and at ImageNet-22k scale the names and
 * entries are a gigabyte. */
uint64_t cfs_catalog_synthetic_size(uint64_t i, uint64_t mean_size);
/* The same with nclasses class folders "c<k>" (0: flat), files "<i>.jpg"
 * zero-padded so bytewise order is numeric; class k holds a contiguous run
 * of n/nclasses (+1 for the first n%nclasses) files.  File sizes are uniform
 * in [mean/2, 3*mean/2), a fixed function of the file number.  Index order
 * is file number order (equal to order=sorted and order=imagefolder). */
int cfs_catalog_synthetic_layout(uint64_t n, uint64_t mean_size, uint32_t nclasses,
                                 struct cfs_catalog **out);
void cfs_catalog_destroy(struct cfs_catalog *c);

/* True when cfs_catalog_open() reused a stored catalog instead of scanning. */
bool cfs_catalog_loaded_from_index(const struct cfs_catalog *c);
/* NULL when the index order was built; else the one-line reason it could
 * not be (the catalog then has no samples: every file is cached as read). */
const char *cfs_catalog_order_unavailable(const struct cfs_catalog *c);
/* Why the samples are numbered by sorted path instead of the ImageFolder
 * order asked for (order_optional, at SOURCE itself), or NULL. */
const char *cfs_catalog_order_fallback(const struct cfs_catalog *c);
/* NULL when a scanned catalog was stored in the index (or none was asked
 * for); else why it could not be (disk full, index failing): the catalog is
 * whole, only the next open scans again. */
const char *cfs_catalog_not_stored(const struct cfs_catalog *c);

/* Entries left out of a scan: directories that could not be opened or read
 * (kept, empty) and entries that vanished or could not be stat'ed. */
uint64_t cfs_catalog_skipped(const struct cfs_catalog *c);

uint32_t cfs_catalog_entry_count(const struct cfs_catalog *c);
const struct cfs_entry *cfs_catalog_entry(const struct cfs_catalog *c, cfs_id id);
/* Name of an entry, NUL-terminated (may hold any byte but '/' and NUL). */
const char *cfs_catalog_name(const struct cfs_catalog *c, cfs_id id);
/* Child of `dir` called `name`, or CFS_ID_NONE. */
cfs_id cfs_catalog_lookup(const struct cfs_catalog *c, cfs_id dir, const char *name);
/* The entry at a relative path ("" and "." components skipped, so "",
 * "." and "/" are the root), or CFS_ID_NONE; ".." is not special (no entry
 * has that name).  O(components x log(children)). */
cfs_id cfs_catalog_resolve(const struct cfs_catalog *c, const char *path);
/* Relative path of id ("" for the root) into buf; returns its length or
 * -ENAMETOOLONG. */
int cfs_catalog_path(const struct cfs_catalog *c, cfs_id id, char *buf, size_t buflen);

/* Index order: number of samples, and sample -> entry id. */
uint64_t cfs_catalog_sample_count(const struct cfs_catalog *c);
cfs_id cfs_catalog_sample_entry(const struct cfs_catalog *c, uint64_t sample);

/* ---- index orders at any directory, from the entries alone ----
 *
 * cfs_catalog_order_at() builds `kind`'s index order for the dataset rooted
 * at directory `root` (any directory of the catalog, 0 for SOURCE) from the
 * catalog's entries, without touching SOURCE: the mount's own order is
 * this call on its root, and the identification calls it for candidate
 * roots derived from opened paths.  The catalog is only read (concurrent
 * calls are safe on a catalog no one modifies).
 *
 * Returns 0 with *samples (malloc'ed entry ids, dataset index i ->
 * (*samples)[i], to free()) and *n >= 1; or one of the two "not buildable"
 * answers with a one-line reason in why and *samples NULL, *n 0:
 *   CFS_ORDER_EMPTY          the library finds no sample there (no class
 *                            folder, no image): it would raise;
 *   CFS_ORDER_NOT_BUILDABLE  the library raises for another reason (an
 *                            ImageFolder class without images);
 * or -EINVAL (CFS_ORDER_LIST, or an unknown kind), -ENOTDIR (root is not a
 * directory), -ENOMEM.  Callers trying candidates treat any answer but 0
 * as "not this root".
 *
 * Cost: one pass over root's subtree (S entries) with no system call:
 * O(S) to collect, plus the sorts the library's order needs - none for a
 * folder whose names are valid UTF-8 and hold no subfolder (children are
 * stored in bytewise order, which is then Python's), O(k log k) name
 * compares for a folder of k children otherwise; TIMM sorts all its
 * samples' paths by natural key, O(S log S) compares of paths it builds
 * (O(S x depth) bytes).  Memory O(S). */
#define CFS_ORDER_EMPTY 1
#define CFS_ORDER_NOT_BUILDABLE 2
int cfs_catalog_order_at(const struct cfs_catalog *c, enum cfs_order kind, cfs_id root,
                         cfs_id **samples, uint64_t *n, char *why, size_t whylen);

/* order= values: "KIND" or "KIND:ROOT" (ROOT relative to SOURCE), and
 * "list:FILE".  Parses v: *kind, and *arg pointing into v after the colon
 * (the FILE or the ROOT; "" when there is none).  0, or -EINVAL for an
 * unknown kind or "list" without a file. */
int cfs_order_parse(const char *v, enum cfs_order *kind, const char **arg);
/* The order's name as order= spells it ("imagefolder", ...), or "?". */
const char *cfs_order_name(enum cfs_order kind);
/* "imagefolder, sorted, timm, ...": every kind, for messages and --help. */
#define CFS_ORDER_NAMES                                                                            \
    "imagefolder, sorted, timm, mmpretrain, ultralytics, ultralytics-cls (each KIND or "           \
    "KIND:ROOT) or list:FILE"

/* Totals for metrics: regular files, directories, bytes of regular files. */
uint64_t cfs_catalog_file_count(const struct cfs_catalog *c);
uint64_t cfs_catalog_dir_count(const struct cfs_catalog *c);
uint64_t cfs_catalog_total_bytes(const struct cfs_catalog *c);

/* A hash (xxh3-64) of every entry's path (as name and parent id), type,
 * size and mtime and of the index order: nodes compare it to check they
 * serve the same dataset.  Equal for a scanned and a loaded catalog. */
uint64_t cfs_catalog_hash(const struct cfs_catalog *c);

#endif
