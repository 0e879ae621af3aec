#!/usr/bin/python3
"""The index orders that the training libraries give a folder's samples.

The libraries are not installed on the test machines.  So each order below
transcribes the library's own code - restructured and in our words, but
step for step the same behaviour - on top of the REAL Python modules it is
built on (os.walk, os.scandir, glob, re, sorted), and torchvision's where
the library uses torchvision.  clairfs's C orders (`order=`, src/catalog_order.c)
are compared with these lists by test_library_orders.py.

  timm             huggingface/pytorch-image-models aa4b5850 (timm
                   1.0.29.dev0, 2026-08-08):
                   timm/data/readers/reader_image_folder.py
                   find_images_and_targets (types, class_to_idx defaults,
                   leaf_name_only=True, sort=True), ReaderImageFolder (raises
                   on no image); timm/utils/misc.py natural_key;
                   timm/data/readers/img_extensions.py IMG_EXTENSIONS.
  mmpretrain       open-mmlab/mmpretrain ee7f2e88 (1.2.0, 2024-11-01):
                   mmpretrain/datasets/custom.py find_folders, get_samples,
                   CustomDataset._find_samples / is_valid_file (with_label,
                   no ann_file, default extensions); over open-mmlab/mmengine
                   17a824cb mmengine/fileio/backends/local_backend.py
                   LocalBackend.list_dir_or_file.
  ultralytics      ultralytics/ultralytics 002363f1
                   ultralytics/data/base.py BaseDataset.get_img_files (a
                   directory img_path, fraction=1); 00bfe345
                   ultralytics/data/utils.py IMG_FORMATS; 0088d787
                   ultralytics/data/dataset.py YOLODataset.get_labels (keeps
                   the images verify_image_label() opens).
  ultralytics-cls  the same dataset.py: ClassificationDataset (torchvision
                   >= 0.18: ImageFolder(root, allow_empty=True), then
                   verify_images()).

Stand-ins, for what no tree of empty files can show: the image checks
(verify_image_label, verify_image: PIL opens it, 10 px or more, a format
in IMG_FORMATS) are reduced to what the file's kind and name decide - a
broken link or a directory cannot be opened, and PIL says PPM (not in
IMG_FORMATS) for .ppm and .pgm.  allow_empty is torchvision 0.18's; the
installed torchvision (0.14) has none, so ultralytics_cls runs the
installed make_dataset one class at a time and takes a class it rejects
as empty, which is what allow_empty=True does.

Module use:   order(kind, root) -> [path relative to root, str] or raises.
"""
import glob
import os
import os.path as osp
import re
from pathlib import Path


# ---- timm ----

TIMM_IMG_EXTENSIONS = ('.png', '.jpg', '.jpeg')


def natural_key(string_):
    return [int(s) if s.isdigit() else s for s in re.split(r'(\d+)', string_.lower())]


def timm_find_images_and_targets(folder):
    types = set(TIMM_IMG_EXTENSIONS)
    labels, filenames = [], []
    for root, _subdirs, files in os.walk(folder, topdown=False, followlinks=True):
        rel_path = os.path.relpath(root, folder) if root != folder else ''
        label = os.path.basename(rel_path)  # leaf_name_only=True
        for f in files:
            _base, ext = os.path.splitext(f)
            if ext.lower() in types:
                filenames.append(os.path.join(root, f))
                labels.append(label)
    class_to_idx = {c: i for i, c in enumerate(sorted(set(labels), key=natural_key))}
    samples = [(f, class_to_idx[l]) for f, l in zip(filenames, labels) if l in class_to_idx]
    samples = sorted(samples, key=lambda k: natural_key(k[0]))
    if not samples:  # ReaderImageFolder
        raise RuntimeError('Found 0 images in subfolders of %s' % folder)
    return samples


# ---- mmpretrain over mmengine's local backend ----

def mmengine_list_dir_or_file(dir_path, list_dir=True, list_file=True, recursive=False):
    top = dir_path

    def walk(d):
        for entry in os.scandir(d):
            if not entry.name.startswith('.') and entry.is_file():
                if list_file:
                    yield osp.relpath(entry.path, top)
            elif osp.isdir(entry.path):
                if list_dir:
                    yield osp.relpath(entry.path, top)
                if recursive:
                    yield from walk(entry.path)

    return walk(dir_path)


MMP_EXTENSIONS = tuple(set(e.lower() for e in
                           ('.jpg', '.jpeg', '.png', '.ppm', '.bmp', '.pgm', '.tif')))


def mmpretrain_samples(root):
    folders = sorted(mmengine_list_dir_or_file(root, list_dir=True, list_file=False))
    folder_to_idx = {f: i for i, f in enumerate(folders)}
    samples = []
    for folder in sorted(folder_to_idx):
        files = mmengine_list_dir_or_file(osp.join(root, folder), list_dir=False,
                                          list_file=True, recursive=True)
        for f in sorted(files):
            if f.lower().endswith(MMP_EXTENSIONS):  # is_valid_file
                samples.append((osp.join(folder, f), folder_to_idx[folder]))
    if not samples:  # _find_samples
        raise RuntimeError('Found 0 files in subfolders of: %s' % root)
    return samples


# ---- ultralytics ----

IMG_FORMATS = {"bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm", "heic"}


def pil_would_open(path):
    """Stand-in for the image checks: a regular file whose name says a
    format PIL reports inside IMG_FORMATS."""
    return osp.isfile(path) and not path.lower().endswith(('.ppm', '.pgm'))


def ultralytics_im_files(img_path):
    p = Path(img_path)
    f = glob.glob(str(p / "**" / "*.*"), recursive=True)
    im_files = sorted(x.replace("/", os.sep) for x in f
                      if x.rpartition(".")[-1].lower() in IMG_FORMATS)
    assert im_files, "No images found in %s" % img_path
    # get_labels: cache_labels keeps the images verify_image_label opens.
    im_files = [x for x in im_files if osp.isfile(x)]
    if not im_files:
        raise RuntimeError("No valid images found")
    return im_files, str(p)


def ultralytics_cls_samples(root):
    from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes, make_dataset
    classes, class_to_idx = find_classes(root)  # raises without class folders
    samples = []
    for c in classes:  # make_dataset(allow_empty=True), one class at a time
        try:
            samples += make_dataset(root, {c: class_to_idx[c]}, IMG_EXTENSIONS)
        except FileNotFoundError:
            pass
    return [s for s in samples if pil_would_open(s[0])]  # verify_images


def order(kind, root):
    """Sample paths relative to root, in the library's index order."""
    if kind == "timm":
        return [osp.relpath(p, root) for p, _ in timm_find_images_and_targets(root)]
    if kind == "mmpretrain":
        return [p for p, _ in mmpretrain_samples(root)]
    if kind == "ultralytics":
        files, prefix = ultralytics_im_files(root)
        return [x[len(prefix) + 1:] for x in files]
    if kind == "ultralytics-cls":
        return [osp.relpath(p, root) for p, _ in ultralytics_cls_samples(root)]
    raise ValueError(kind)
