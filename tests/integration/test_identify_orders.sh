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
for i in range(1, 2401):
    put(os.path.join(root, "images", "train", "img%d.jpg" % i))
for i in range(1, 201):
    put(os.path.join(root, "images", "val", "img%d.jpg" % i))
PY
nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
ram=$((2 * nbytes / 1024 + 1024))K
. "$(dirname "$0")/identify_lib.sh"

identify_pattern timm torch-ddp 2 0 "train: torch-ddp seed=0 (low 32 bits) world=2 order=timm" \
    --train-dir train --order timm
identify_pattern ultralytics torch 1 7 \
    "images/train: torch seed=7 (low 32 bits) world=1 order=ultralytics" \
    --train-dir images/train --order ultralytics

cfs_finish
