/* Index orders: which file dataset index i names, the numbering a library's
 * dataset gives its samples and that a sampler's indices refer to.
 *
 * Users mount a dataset's root and train on a folder below it (MNT/train
 * beside MNT/val), so an order is rooted at any directory of the catalog
 * (order=KIND:ROOT) and built from the entries alone, without touching
 * SOURCE: the mount builds its own order that way, and the identification
 * tries many candidate roots the same way.  Each kind below transcribes
 * one library's code; the walks it is made of are in catalog_walk.c and
 * Python's name comparisons in catalog_names.c.  Every path below is
 * relative to the root, and "Python order" is str order by code point with
 * undecodable bytes as U+DC80..U+DCFF (surrogateescape).
 *
 * Place in the layer order (src/catalog_i.h): layer 2.  It reads the
 * structure (catalog_table.c) through the walks (catalog_walk.c) and, for
 * the mount, writes the sample list; catalog.c calls it after a scan.
 *
 * Shared by every kind: symbolic links are followed as the scan presents
 * them (as os.walk(followlinks=True), glob and os.scandir do), except a
 * link back to one of its own ancestors, which the libraries walk until the
 * kernel's ELOOP stops them, repeating files, and which is not followed
 * here (an entry with loop_dir set; for os.walk it is a directory, never a
 * file).  A root where a kind finds no sample is CFS_ORDER_EMPTY (every
 * library raises there); the mount takes it as an empty index, since an
 * empty SOURCE is a valid, empty dataset for the filesystem.
 *
 * order=sorted: every regular file (or link to one) by relative path,
 * bytewise ("a b" before "a/x" before "a0").
 *
 * order=imagefolder: torchvision 0.14's ImageFolder(root).samples.
 *   classes  = sorted(e.name for e in os.scandir(root) if e.is_dir())
 *   per class: for root, _, files in sorted(os.walk(class, followlinks=True)):
 *                  for f in sorted(files): keep if f.lower() ends with one of
 *                  .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp
 * sorted(os.walk()) sorts directories by their whole path: "a/b c" before
 * "a/b/x" (' ' < '/').  os.walk's "files" are all non-directories, broken
 * links included, so a broken link named x.jpg is a sample, as it is for
 * torchvision.  A class without any image cannot be built (torchvision
 * raises FileNotFoundError); a root without class folders is EMPTY.
 *
 * order=ultralytics-cls: ultralytics ClassificationDataset(root), read at
 * ultralytics/data/dataset.py 0088d787 (8.3 series): with torchvision >=
 * 0.18 it is ImageFolder(root, allow_empty=True), so a class without
 * images is no error, then verify_images() keeps the samples PIL opens with
 * a format in IMG_FORMATS and sides of 10 px or more.  From the entries:
 * broken links are left out (PIL cannot open them), and so are .ppm and
 * .pgm files (PIL says PPM, which IMG_FORMATS lacks); the other files are
 * taken to be the images their names say.  Not modelled: fraction < 1.
 *
 * order=timm: timm 1.0.29.dev0 (huggingface/pytorch-image-models aa4b5850,
 * timm/data/readers/reader_image_folder.py, find_images_and_targets with
 * its defaults, as ImageDataset(root) and create_dataset('', root) use it):
 *   for root, subdirs, files in os.walk(folder, topdown=False,
 *                                       followlinks=True):
 *       for f in files: keep if os.path.splitext(f)[1].lower() in
 *                       {'.png', '.jpg', '.jpeg'}   (img_extensions.py)
 *   images sorted by natural_key(path), natural_key(s) =
 *       [int(t) if t.isdigit() else t for t in re.split(r'(\d+)', s.lower())]
 * Every file below the root counts, in any folder at any depth, files
 * directly in the root too (the label, the leaf folder's name with
 * leaf_name_only=True, does not change the order).  "img2" sorts before
 * "img10", "B.jpg" between "a.jpg" and "c.jpg"; splitext finds no
 * extension in ".jpg" or "..jpg".  Divergences: paths with equal keys ("a1"
 * and "a01", "A.jpg" and "a.jpg") keep os.walk's order in timm, which is
 * the directory listing's, and are bytewise here; non-ASCII letters are not
 * lowered here and non-ASCII digits are not numbers (Python does both, and
 * int() raises on a superscript digit).
 *
 * order=mmpretrain: mmpretrain 1.2.0 (open-mmlab/mmpretrain ee7f2e88,
 * mmpretrain/datasets/custom.py, CustomDataset(data_prefix=root) with
 * with_label=True and no ann_file; ImageNet(...) without ann_file is the
 * same) over mmengine's LocalBackend.list_dir_or_file (open-mmlab/mmengine
 * 17a824cb, mmengine/fileio/backends/local_backend.py):
 *   find_folders: folders = sorted(names of os.scandir(root) entries for
 *                 which osp.isdir() holds, hidden ones included)
 *   get_samples:  for each folder: sorted(relative paths of every entry
 *                 below it, recursively, with is_file() and a name not
 *                 starting with '.'), kept if path.lower() ends with one of
 *                 .jpg .jpeg .png .ppm .bmp .pgm .tif
 * So: class folders in Python order, each one's files by relative path in
 * Python order (a plain sort of paths, "a b/x" before "a/x"); hidden files
 * are left out but hidden folders are walked; broken links, fifos and the
 * like are not files; files directly in the root are no samples; a class
 * without images is only a warning.
 *
 * order=ultralytics: the YOLO detection dataset, ultralytics
 * YOLODataset(img_path=root).im_files, read at ultralytics/data/base.py
 * 002363f1 (BaseDataset.get_img_files) and ultralytics/data/utils.py
 * 00bfe345 (IMG_FORMATS):
 *   f = glob.glob(str(p / "**" / "*.*"), recursive=True)
 *   im_files = sorted(x for x in f if x.rpartition(".")[-1].lower() in
 *       {bmp dng jpeg jpg mpo png tif tiff webp pfm heic})
 * glob skips hidden names in "*.*" and does not descend into hidden
 * folders; "*.*" needs a dot in the name.  get_labels() then drops the
 * images verify_image_label() cannot open (a directory named x.jpg, a broken
 * link): regular files only here, the others taken to be valid images.
 * Labels (img2label_paths: .../images/... -> .../labels/....txt) do not
 * change the order.  Not modelled: a list file as img_path (use
 * order=list:FILE), fraction < 1.
 *
 * order=list:FILE: one relative path a line, always relative to SOURCE
 * (no ROOT).  Every byte but '\n' is part of the path (names may start with
 * '#' or hold spaces), empty lines are ignored, and "" and "." components
 * are skipped ("./a//b" is "a/b").  A path that is not a non-directory
 * entry of SOURCE is an error naming the file and the line.  A path may
 * repeat; the entry's `sample` field is then its first position. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_i.h"

/* ---- which entries each library takes for a sample ---- */

static bool hidden(const struct cfs_catalog *c, cfs_id id)
{
    return c->e[id].name_len && c->names[c->e[id].name_off] == '.';
}

static const char *const tv_ext[] = {".jpg", ".jpeg", ".png",  ".ppm",  ".bmp",
                                     ".pgm", ".tif",  ".tiff", ".webp", NULL};

static bool imagefolder_keep(const struct cfs_catalog *c, cfs_id id)
{
    size_t len;
    const char *nm = cfs_name_of(c, id, &len);
    return c->e[id].loop_dir == CFS_ID_NONE && cfs_name_endswith(nm, len, tv_ext);
}

/* torchvision's list less the PPM format (.ppm, .pgm), regular files only. */
static const char *const ycls_ext[] = {".jpg", ".jpeg", ".png",  ".bmp",
                                       ".tif", ".tiff", ".webp", NULL};

static bool ultralytics_cls_keep(const struct cfs_catalog *c, cfs_id id)
{
    size_t len;
    const char *nm = cfs_name_of(c, id, &len);
    return S_ISREG(c->e[id].mode) && cfs_name_endswith(nm, len, ycls_ext);
}

static const char *const timm_ext[] = {".png", ".jpg", ".jpeg", NULL};

static bool timm_keep(const struct cfs_catalog *c, cfs_id id)
{
    size_t len;
    const char *nm = cfs_name_of(c, id, &len);
    return c->e[id].loop_dir == CFS_ID_NONE && cfs_name_suffix_in(nm, len, true, timm_ext);
}

static const char *const mmp_ext[] = {".jpg", ".jpeg", ".png", ".ppm",
                                      ".bmp", ".pgm",  ".tif", NULL};

static bool mmpretrain_keep(const struct cfs_catalog *c, cfs_id id)
{
    size_t len;
    const char *nm = cfs_name_of(c, id, &len);
    return S_ISREG(c->e[id].mode) && !hidden(c, id) && cfs_name_endswith(nm, len, mmp_ext);
}

static const char *const yolo_ext[] = {".bmp", ".dng",  ".jpeg", ".jpg", ".mpo",  ".png",
                                       ".tif", ".tiff", ".webp", ".pfm", ".heic", NULL};

static bool ultralytics_keep(const struct cfs_catalog *c, cfs_id id)
{
    size_t len;
    const char *nm = cfs_name_of(c, id, &len);
    return S_ISREG(c->e[id].mode) && !hidden(c, id) && cfs_name_suffix_in(nm, len, false, yolo_ext);
}

static bool not_hidden(const struct cfs_catalog *c, cfs_id id)
{
    return !hidden(c, id);
}

static bool regular(const struct cfs_catalog *c, cfs_id id)
{
    return S_ISREG(c->e[id].mode);
}

/* ---- the orders ---- */

/* "'train'" or "the source", for messages. */
static const char *where(const struct cfs_catalog *c, cfs_id root, char *buf, size_t len)
{
    if (root == 0 || len < 3)
        return "the source";
    buf[0] = '\'';
    int n = cfs_catalog_path(c, root, buf + 1, len - 2);
    if (n < 0)
        return "the order's root";
    memcpy(buf + 1 + n, "'", 2);
    return buf;
}

/* ImageFolder's shape: class folders, each walked as sorted(os.walk()).
 * Strict: a class without a sample cannot be built (torchvision without
 * allow_empty); else it adds nothing. */
static int class_folders(const struct cfs_catalog *c, cfs_id root, cfs_walk_keep keep, bool strict,
                         struct cfs_idlist *out, char *why, size_t whylen)
{
    cfs_id *classes;
    uint32_t ncls;
    int rc = cfs_walk_subdirs(c, root, &classes, &ncls);
    for (uint32_t k = 0; rc == 0 && k < ncls; k++) {
        uint64_t before = out->n;
        rc = cfs_walk_os_sorted(c, classes[k], keep, out);
        if (rc == 0 && strict && out->n == before) {
            cfs_catalog_errf(why, whylen,
                             "order=imagefolder: class folder '%s' holds no image file "
                             "(torchvision's ImageFolder would fail too); use order=sorted or "
                             "order=list:FILE",
                             cfs_catalog_name(c, classes[k]));
            rc = CFS_ORDER_NOT_BUILDABLE;
        }
    }
    if (rc == 0 && ncls == 0) {
        char buf[512];
        cfs_catalog_errf(why, whylen, "order=%s: %s holds no class folder",
                         strict ? "imagefolder" : "ultralytics-cls",
                         where(c, root, buf, sizeof(buf)));
        rc = CFS_ORDER_EMPTY;
    }
    free(classes);
    return rc;
}

/* mmpretrain's shape: class folders, each one's files as sorted paths. */
static int mmpretrain(const struct cfs_catalog *c, cfs_id root, struct cfs_idlist *out)
{
    struct cfs_walk_rules r = {.cat = c, .python = true, .keep = mmpretrain_keep};
    cfs_id *classes;
    uint32_t ncls;
    int rc = cfs_walk_subdirs(c, root, &classes, &ncls);
    for (uint32_t k = 0; rc == 0 && k < ncls; k++)
        rc = cfs_walk_sorted(&r, classes[k], out);
    free(classes);
    return rc;
}

static int build(const struct cfs_catalog *c, enum cfs_order kind, cfs_id root,
                 struct cfs_idlist *out, char *why, size_t whylen)
{
    struct cfs_walk_rules sorted = {.cat = c, .python = false, .keep = regular};
    struct cfs_walk_rules yolo = {
        .cat = c, .python = true, .keep = ultralytics_keep, .enter = not_hidden};
    switch (kind) {
    case CFS_ORDER_IMAGEFOLDER:
        return class_folders(c, root, imagefolder_keep, true, out, why, whylen);
    case CFS_ORDER_ULTRALYTICS_CLS:
        return class_folders(c, root, ultralytics_cls_keep, false, out, why, whylen);
    case CFS_ORDER_SORTED:
        return cfs_walk_sorted(&sorted, root, out);
    case CFS_ORDER_TIMM:
        return cfs_walk_natural(c, root, timm_keep, out);
    case CFS_ORDER_MMPRETRAIN:
        return mmpretrain(c, root, out);
    case CFS_ORDER_ULTRALYTICS:
        return cfs_walk_sorted(&yolo, root, out);
    case CFS_ORDER_LIST:
        break;
    }
    cfs_catalog_errf(why, whylen, "order %s cannot be built from the catalog alone",
                     cfs_order_name(kind));
    return -EINVAL;
}

int cfs_catalog_order_at(const struct cfs_catalog *c, enum cfs_order kind, cfs_id root,
                         cfs_id **samples, uint64_t *n, char *why, size_t whylen)
{
    *samples = NULL;
    *n = 0;
    if (root >= c->n || !S_ISDIR(c->e[root].mode)) {
        cfs_catalog_errf(why, whylen, "order=%s: entry %u is not a directory", cfs_order_name(kind),
                         (unsigned)root);
        return -ENOTDIR;
    }
    struct cfs_idlist out = {0};
    int rc = build(c, kind, root, &out, why, whylen);
    if (rc == 0 && out.n == 0) {
        char buf[512];
        cfs_catalog_errf(why, whylen, "order=%s: %s holds no sample", cfs_order_name(kind),
                         where(c, root, buf, sizeof(buf)));
        rc = CFS_ORDER_EMPTY;
    }
    if (rc == -ENOMEM)
        cfs_catalog_errf(why, whylen, "out of memory");
    if (rc != 0) {
        free(out.v);
        return rc;
    }
    *samples = out.v;
    *n = out.n;
    return 0;
}

/* ---- order=list:FILE ---- */

static int list_line(const struct cfs_catalog *c, const char *file, size_t lineno, char *line,
                     size_t len, struct cfs_idlist *out, char *err, size_t errlen)
{
    if (memchr(line, '\0', len)) {
        cfs_catalog_errf(err, errlen, "order=list:%s line %zu: path holds a NUL byte", file,
                         lineno);
        return -EINVAL;
    }
    cfs_id id = cfs_catalog_resolve(c, line);
    if (id == CFS_ID_NONE || S_ISDIR(c->e[id].mode)) {
        cfs_catalog_errf(err, errlen, "order=list:%s line %zu: '%s' is %s", file, lineno, line,
                         id == CFS_ID_NONE ? "not in the source" : "a directory, not a file");
        return id == CFS_ID_NONE ? -ENOENT : -EISDIR;
    }
    return cfs_idlist_push(out, id);
}

static int order_list(const struct cfs_catalog *c, const char *file, struct cfs_idlist *out,
                      char *err, size_t errlen)
{
    FILE *f = fopen(file, "re");
    char *line = NULL;
    size_t lcap = 0, lineno = 0;
    int rc = 0;
    if (!f) {
        rc = -errno;
        cfs_catalog_errf(err, errlen, "order=list:%s: %s", file, strerror(-rc));
        return rc;
    }
    while (rc == 0) {
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
        if (len > 0)
            rc = list_line(c, file, lineno, line, (size_t)len, out, err, errlen);
    }
    if (rc == -ENOMEM)
        cfs_catalog_errf(err, errlen, "out of memory");
    free(line);
    fclose(f);
    return rc;
}

/* ---- the mount's own order ---- */

int cfs_catalog_build_order(struct cfs_catalog *c, const struct cfs_catalog_params *p, char *err,
                            size_t errlen)
{
    struct cfs_idlist out = {0};
    int rc;
    if (p->order == CFS_ORDER_LIST) {
        rc = order_list(c, p->order_list, &out, err, errlen);
    } else {
        const char *rp = p->order_root ? p->order_root : "";
        cfs_id root = cfs_catalog_resolve(c, rp);
        if (root == CFS_ID_NONE || !S_ISDIR(c->e[root].mode)) {
            cfs_catalog_errf(err, errlen, "order=%s:%s: '%s' is not a directory of the source",
                             cfs_order_name(p->order), rp, rp);
            return root == CFS_ID_NONE ? -ENOENT : -ENOTDIR;
        }
        uint64_t n;
        rc = cfs_catalog_order_at(c, p->order, root, &out.v, &n, err, errlen);
        out.n = n;
        /* An empty SOURCE (or root) is a valid, empty dataset. */
        if (rc == CFS_ORDER_EMPTY) {
            rc = 0;
            if (err && errlen)
                err[0] = '\0';
        }
        if (rc == CFS_ORDER_NOT_BUILDABLE)
            rc = -ENOENT;
    }
    if (rc == 0 && !out.v && !(out.v = malloc(sizeof(cfs_id))))
        rc = -ENOMEM;
    if (rc < 0) {
        if (rc == -ENOMEM)
            cfs_catalog_errf(err, errlen, "out of memory");
        free(out.v);
        return rc;
    }
    cfs_catalog_set_order(c, out.v, out.n);
    return 0;
}
