#!/usr/bin/env bash
# The libraries' index orders learnt on a mount with nothing registered.
# A tree whose names hold the traps the orders part on (unpadded numbers:
# c2 before c10 and img2 before img10 in timm's natural order only) is
# mounted, and a real torch trainer (identify_trainer.py, num_workers=2,
# 4 epochs, pausing after epoch 0) numbers a folder's files as a library
# does (the transcriptions of tests/golden/library_orders.py):
#   timm         timm's ImageDataset(MNT/train) (train/<class>/imgI.JPEG),
#                DistributedSampler's default seed 0 at world 2
#   ultralytics  YOLODataset(MNT/images/train)'s sorted glob of a folder of
#                images without classes (images/val beside it, so images/
#                looks like an ImageFolder of two classes),
#                DataLoader(shuffle=True, generator=g) seeded 7, one process
# The tree is a detection dataset's too: labels/{train,val}/*.txt beside
# images/, so ImageFolder's order does not build at the mount's root (the
# label folders hold no image) and the mount numbers its files by sorted
# path; both folders must be learnt below it all the same.
# Each must be identified in its folder with the library named in the
# stats' order line (`train: torch-ddp seed=0 ... order=timm`), and of the
# training opens of epochs 1-3 at most 1 % mispredicted
# (clairfs_prediction_total), every byte right.
#
# Environment: CLAIRFS (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the most seconds a
# trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
TRAINER=$(dirname "$0")/identify_trainer.py
EPOCHS=4 BATCH=8 WORKERS=2
PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-300}
src=$TMP/src
# 2400 files in each folder read: more than twice the tracker's reordering
# window (1024), so a wrong order shows as misses.
"$PYTHON" - "$src" <<'PY' || { fail "tree"; cfs_finish; }
import os, random, sys
root, rng = sys.argv[1], random.Random(5)
def put(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rng.randbytes(rng.randrange(200, 2000)))
for c in range(24):
    for i in range(1, 101):
        put(os.path.join(root, "train", "c%d" % c, "img%d.JPEG" % i))
for split, count in (("train", 2400), ("val", 200)):
    for i in range(1, count + 1):
        put(os.path.join(root, "images", split, "img%d.jpg" % i))
        label = os.path.join(root, "labels", split, "img%d.txt" % i)
        os.makedirs(os.path.dirname(label), exist_ok=True)
        with open(label, "w") as f:
            f.write("%d 0.5 0.5 0.2 0.2\n" % (i % 80))
PY
nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
ram=$((2 * nbytes / 1024 + 1024))K
. "$(dirname "$0")/identify_lib.sh"

# Each trainer's mount says once why its files are numbered by sorted path.
identify_more_checks() {
    check "$1: the mount's files numbered by sorted path, once" test "$(grep -c \
        "no ImageFolder order at the mount's root (order=imagefolder: class folder 'labels' holds no image file.*): its files numbered by sorted path" \
        "$TMP/$1.daemon.log")" -eq 1
}
identify_pattern timm torch-ddp 2 0 "train: torch-ddp seed=0 (low 32 bits) world=2 order=timm" \
    --train-dir train --order timm
identify_pattern ultralytics torch 1 7 \
    "images/train: torch seed=7 (low 32 bits) world=1 order=ultralytics" \
    --train-dir images/train --order ultralytics

cfs_finish
