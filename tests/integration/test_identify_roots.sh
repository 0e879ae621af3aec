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
# so clairfs_prediction_total counts the training opens alone), and every
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
m() { cfs_metric "$1" "$2"; }

# trainer NAME KIND WORLD SEED WANT: WORLD ranks on a fresh mount; the checks.
trainer() {
    local name=$1 kind=$2 world=$3 seed=$4 want=$5
    local mnt=$TMP/mnt-$name pids=() r rc=0 port t0=$SECONDS
    port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" \
        -o ram=$ram,index="$TMP/index-$name"${CLAIRFS_IDENTIFY_MOUNT_OPTS:+,$CLAIRFS_IDENTIFY_MOUNT_OPTS} ||
        { fail "$name: mount"; return; }
    for r in $(seq 0 $((world - 1))); do
        timeout 900 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind "$kind" \
            --seed "$seed" --world "$world" --rank "$r" --epochs $EPOCHS --batch $BATCH \
            --workers $WORKERS --pause "$PAUSE" --port "$port" --train-dir train --val-dir val \
            --decode --log "$TMP/$name.rank$r.log" &
        pids+=($!)
        cfs_pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    check "$name: every rank ran its $EPOCHS epochs and evaluations with the source's bytes" \
        test "$rc" -eq 0
    cat "$mnt/.clairfs/stats"
    local train val hit miss per_epoch
    train=$(cat "$TMP/$name".rank*.log | grep -vc '^val')
    val=$(cat "$TMP/$name".rank*.log | grep -c '^val')
    per_epoch=$((train / EPOCHS))
    hit=$(m "$mnt" 'clairfs_prediction_total{result="hit"}')
    miss=$(m "$mnt" 'clairfs_prediction_total{result="miss"}')
    echo "$name: $train training opens ($per_epoch an epoch), $val validation opens;" \
        "predicted hit=$hit miss=$miss; $((SECONDS - t0)) s"
    check "$name: clairfs_order_identified 1" test "$(m "$mnt" clairfs_order_identified)" = 1
    check "$name: the stats say identified train: $want" \
        grep -q "^order: *identified train: $want " "$mnt/.clairfs/stats"
    check "$name: the roots: line says the validation pass is sequential, world=$world" \
        grep -q "^roots: .*val: sequential, world=$world " "$mnt/.clairfs/stats"
    check "$name: training epochs 1-$((EPOCHS - 1)) predicted: hit+miss >= $((3 * per_epoch))" \
        test "$((hit + miss))" -ge "$((3 * per_epoch))"
    check "$name: the validation opens are neither hit nor miss: hit+miss <= $train" \
        test "$((hit + miss))" -le "$train"
    check "$name: at most 1 % of the predicted opens missed ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
    grep -E 'order:|identify:' "$TMP/$name.daemon.log"
    check "$name: unmount is clean" cfs_umount "$mnt"
}

declare -A reader_pid reader_daemon
reader_start() {
    local name=$1
    shift
    local mnt=$TMP/mnt-$name
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" -o ram=$ram,index="$TMP/index-$name" ||
        { fail "$name: mount"; return; }
    reader_daemon[$name]=$CFS_PID
    "$@" >"$TMP/$name.reader.log" 2>&1 &
    reader_pid[$name]=$!
    cfs_pids+=($!)
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
reader_start find-xargs find_xargs
reader_start shuffled shuffled all
reader_start alternate shuffled alternate
deadline=$((SECONDS + 40))

trainer ddp torch-ddp 2 0 "torch-ddp seed=0"
trainer torch torch 1 7 "torch seed=7"

for name in "${readers[@]}"; do
    [ -n "${reader_pid[$name]:-}" ] || continue
    wait "${reader_pid[$name]}"
    rc=$?
    cat "$TMP/$name.reader.log"
    check "$name: every byte equals the source's" test "$rc" -eq 0
    mnt=$TMP/mnt-$name
    while [ "$SECONDS" -lt "$deadline" ]; do sleep 1; done
    cat "$mnt/.clairfs/stats"
    check "$name: clairfs_order_identified 0" test "$(m "$mnt" clairfs_order_identified)" = 0
    check "$name: the stats do not say identified" \
        bash -c '! grep -q "^order: *identified" "$1/.clairfs/stats"' _ "$mnt"
    CFS_PID=${reader_daemon[$name]}
    check "$name: unmount is clean" cfs_umount "$mnt"
done
cfs_finish
