#!/usr/bin/env bash
# A dataset root below the mount's: users mount a dataset's root and train
# on a folder of it.  An ImageNet-shaped tree of real JPEG files
# (ROOT/train/<class>/*.JPEG, ROOT/val/<class>/*.JPEG, a few files at the
# root) is mounted with nothing registered, and identify_trainer.py trains
# on ImageFolder(MNT/train), decoding each image with PIL, with
# num_workers=2, 4 epochs, and the classification reference's evaluate()
# over ImageFolder(MNT/val) after every epoch (DistributedSampler(shuffle=
# False) at world 2, SequentialSampler alone: fresh workers, children of
# the same ranks, reading another folder), pausing after epoch 0:
#   ddp    torch-ddp, DistributedSampler's default seed 0, world 2
#   torch  DataLoader(shuffle=True, generator=g), one process
# Each must end with clairfs_order_identified 1 and the stats' order line
# naming the root (`identified train: torch-ddp seed=0 world=2 ...`), the
# roots: line naming the validation pass (`val: sequential, world=W`), the
# training opens of epochs 1-3 predicted with at most 1 % of them missed
# (the validation opens are neither: they are no part of train's order,
# so clairfs_prediction_total{result=...} counts the training opens alone),
# the validation pass predicted on its own from epoch 1 on (the passes of
# epochs 1-3 exactly: clairfs_prediction_total{phase="validation",...} hit
# 3 x 600, miss 0; the pass of epoch 0, in which it was named, is not
# counted), the validation files kept resident between passes (no file
# read from the source twice), the training order never dropped, and every
# byte right.
#
# Beside them, readers of train/ and val/ that are no torch shuffle, each on
# a fresh mount: find | xargs cat, Python reading in random.shuffle order,
# and a reader alternating between the two folders at random: the order is
# never identified (the gauge stays 0) in the 40 s from their start.
#
# Environment: CLAIRFS (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the most seconds a
# trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
identify_jpeg_dataset

# After identify_pattern's checks (the training opens alone are in the rank
# logs, and clairfs_prediction_total must count them alone): the validation
# pass named and predicted, and no validation open counted as hit or miss.
identify_more_checks() {
    identify_validation_checks "$1" "$2" "$3" "$TMP/$1.rank" "$TMP/$1.snap.0" "$TMP/$1.daemon.log"
}

find_xargs() {
    (cd "$mnt" && find train val -type f) >"$TMP/list"
    cmp <(cd "$mnt" && tr '\n' '\0' <"$TMP/list" | xargs -0 cat) \
        <(cd "$src" && tr '\n' '\0' <"$TMP/list" | xargs -0 cat)
}
# shuffled MODE: three passes over train/ and val/ in random.shuffle order
# (MODE all), or alternating at random between the two folders, each read
# in its own shuffled order (MODE alternate).
shuffled() {
    "$PYTHON" - "$src" "$mnt" "$1" <<'PY'
import os, random, sys
src, mnt, mode = sys.argv[1:4]
def files(part):
    return sorted(os.path.relpath(os.path.join(d, f), src)
                  for d, _, fs in os.walk(os.path.join(src, part)) for f in fs)
rng = random.Random(7)
for _ in range(3):
    if mode == "all":
        order = files("train") + files("val")
        rng.shuffle(order)
    else:
        t, v = files("train"), files("val")
        rng.shuffle(t), rng.shuffle(v)
        order = []
        while t or v:
            pick = t if (t and (not v or rng.random() < 0.5)) else v
            order.append(pick.pop())
    for rel in order:
        with open(os.path.join(mnt, rel), "rb") as a, open(os.path.join(src, rel), "rb") as b:
            if a.read() != b.read():
                sys.exit(f"differs: {rel}")
PY
}
readers=(find-xargs shuffled alternate)
reader_start find-xargs "" find_xargs
reader_start shuffled "" shuffled all
reader_start alternate "" shuffled alternate
deadline=$((SECONDS + 40))

identify_pattern ddp torch-ddp 2 0 "train: torch-ddp seed=0" "${ROOT_ARGS[@]}" --snapshot "$TMP/ddp.snap.{rank}"
identify_pattern torch torch 1 7 "train: torch seed=7" "${ROOT_ARGS[@]}" --snapshot "$TMP/torch.snap.{rank}"

readers_end "$deadline"
cfs_finish
