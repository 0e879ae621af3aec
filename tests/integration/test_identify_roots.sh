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
TRAINER=$(dirname "$0")/identify_trainer.py
EPOCHS=4 BATCH=8 WORKERS=2
PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-300}
src=$TMP/src
# 30 classes: 100 training and 20 validation images each, 8x8 to 40x40
# pixels; more training files than twice the tracker's window (1024), so a
# wrong order shows as misses.
"$TORCH_PY" - "$src" <<'PY' || { fail "JPEG tree"; cfs_finish; }
import os, random, sys
from PIL import Image
root, rng = sys.argv[1], random.Random(5)
for part, per in (("train", 100), ("val", 20)):
    for c in range(30):
        d = os.path.join(root, part, "n%08d" % (1440764 + c))
        os.makedirs(d)
        for i in range(per):
            side = rng.randrange(8, 41)
            img = Image.new("RGB", (side, side), tuple(rng.randrange(256) for _ in range(3)))
            img.save(os.path.join(d, "%s_%05d.JPEG" % (part, c * per + i)), quality=90)
for name in ("LICENSE", "README.txt", "labels.txt"):
    with open(os.path.join(root, name), "w") as f:
        f.write(name + "\n")
PY
nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
ram=$((2 * nbytes / 1024 + 1024))K
echo "dataset: $(find "$src/train" -type f | wc -l) training, $(find "$src/val" -type f | wc -l)" \
    "validation files, $nbytes bytes"
. "$(dirname "$0")/identify_lib.sh"

# After identify_pattern's checks (the training opens alone are in the rank
# logs, and clairfs_prediction_total must count them alone): the validation
# pass named, and no validation open counted as hit or miss.
identify_more_checks() {
    local name=$1 mnt=$2 world=$3 train val hit miss vhit vhit0 vmiss pfs
    train=$(cat "$TMP/$name".rank*.log | wc -l)
    val=$(cat "$TMP/$name".rank*.log.val | wc -l)
    hit=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="hit"}')
    miss=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="miss"}')
    echo "$name: $val validation opens beside $train training opens"
    check "$name: $val validation opens, 4 passes over val/" test "$val" -eq $((4 * 600))
    check "$name: the roots: line says the validation pass is sequential, world=$world" \
        grep -q "^roots: .*val: sequential, world=$world " "$mnt/.clairfs/stats"
    check "$name: the validation opens are neither hit nor miss: hit+miss <= $train" \
        test "$((hit + miss))" -le "$train"
    vhit=$(cfs_metric "$mnt" 'clairfs_prediction_total{phase="validation",result="hit"}')
    vmiss=$(cfs_metric "$mnt" 'clairfs_prediction_total{phase="validation",result="miss"}')
    echo "$name: validation passes predicted: hit=$vhit miss=$vmiss"
    # epoch 0's pass may be predicted from where it was named on: counted
    # from rank 0's snapshot after it (every rank's evaluation ends in step,
    # as the reference's metric_logger.synchronize_between_processes())
    vhit0=$(cfs_metric "$TMP/$name.snap.0" 'clairfs_prediction_total{phase="validation",result="hit"}')
    check "$name: the validation passes of epochs 1-3 are predicted hits: $vhit - $vhit0 = $((3 * 600))" \
        test "$((vhit - vhit0))" -eq $((3 * 600))
    check "$name: no validation open mispredicted ($vmiss)" test "$vmiss" -eq 0
    check "$name: the daemon predicts the validation pass over val" \
        grep -q "order: the validation pass over val (600 files, world=$world) is predicted" \
        "$TMP/$name.daemon.log"
    # The tiers hold both folders (ram= twice the tree): the validation
    # files stay resident after their first pass, never fetched again.
    pfs=$(cfs_metric "$mnt" 'clairfs_reads_total{source="pfs"}')
    check "$name: every file read from the source once at most: $pfs reads <= 3600" \
        test "$pfs" -le 3600
    check "$name: clairfs_order_identified{root=\"train\"} 1" \
        test "$(cfs_metric "$mnt" 'clairfs_order_identified{root="train"}')" = 1
    check "$name: clairfs_order_identified{root=\"val\"} 1 (the unshuffled pass)" \
        test "$(cfs_metric "$mnt" 'clairfs_order_identified{root="val"}')" = 1
    check "$name: the training order is never dropped" \
        bash -c '! grep -q "no longer fit the identified order" "$1"' _ "$TMP/$name.daemon.log"
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

folders=(--train-dir train --val-dir val --decode)
identify_pattern ddp torch-ddp 2 0 "train: torch-ddp seed=0" "${folders[@]}" --snapshot "$TMP/ddp.snap.{rank}"
identify_pattern torch torch 1 7 "train: torch seed=7" "${folders[@]}" --snapshot "$TMP/torch.snap.{rank}"

readers_end "$deadline"
cfs_finish
