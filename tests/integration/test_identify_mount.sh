#!/usr/bin/env bash
# The mount learns the read order by itself.  Each pattern gets a fresh
# mount with nothing registered (no seed=, no world=) and a real torch
# DataLoader (identify_trainer.py: ImageFolder, num_workers=2, 4 epochs,
# a pause after epoch 0 until the mount says it identified the order):
#   torch-ddp      two trainer processes, DistributedSampler world 2, in
#                  step as DDP keeps them (torch.distributed, gloo)
#   torch          shuffle=True, generator=g; without and with
#                  persistent_workers
#   torch-sampler  sampler=RandomSampler(generator=g)
# Each must end with clairfs_order_identified 1, `order: identified` in
# the stats, at least the opens of epochs 1-3 predicted and at most 1 % of
# the predicted opens missed (nothing is predicted before identification),
# and every byte the trainer got equal to the source's.
#
# Then readers that are no torch shuffle, each on a fresh mount: a
# sequential cmp of every file (twice), find | xargs cat, and Python
# reading in random.shuffle order (three passes): the order is never
# identified (the gauge stays 0, the stats never say identified) and every
# byte is right.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds a trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup

TRAINER=$(dirname "$0")/identify_trainer.py
EPOCHS=4 BATCH=8 WORKERS=2
PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-300} # most seconds a trainer waits after epoch 0
src=$TMP/src
# 30 x 100 = 3000 files of a few KiB: more than twice the tracker's
# reordering window (1024 files at least), so that an order that is wrong
# (a wrong seed, persistent_workers or world) shows as misses; below the
# window any order of an epoch's files counts as predicted.
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 30 --files 100 --size lognormal:2K:0.6 \
    --max-size 16K --seed 5 "$src" || { fail "gendata"; cfs_finish; }
nfiles=$(find "$src" -type f | wc -l)
nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
ram=$((2 * nbytes / 1024 + 1024))K
echo "dataset: $nfiles files, $nbytes bytes"

m() { cfs_metric "$1" "$2"; }

# pattern NAME KIND WORLD SEED [--persistent]: one trainer run on a fresh mount.
pattern() {
    local name=$1 kind=$2 world=$3 seed=$4 extra=${5:-}
    local mnt=$TMP/mnt-$name pids=() r rc=0 port
    port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" -o ram=$ram,index="$TMP/index-$name" ||
        { fail "$name: mount"; return; }
    for r in $(seq 0 $((world - 1))); do
        timeout 900 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind "$kind" \
            --seed "$seed" --world "$world" --rank "$r" --epochs $EPOCHS --batch $BATCH \
            --workers $WORKERS --pause "$PAUSE" --port "$port" $extra \
            --log "$TMP/$name.rank$r.log" &
        pids+=($!)
        cfs_pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    check "$name: every rank ran its $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
    cat "$mnt/.clairfs/stats"
    local opens hit miss per_epoch
    opens=$(cat "$TMP/$name".rank*.log | wc -l)
    per_epoch=$((opens / EPOCHS))
    hit=$(m "$mnt" 'clairfs_prediction_total{result="hit"}')
    miss=$(m "$mnt" 'clairfs_prediction_total{result="miss"}')
    echo "$name: $opens opens, $per_epoch per epoch; predicted hit=$hit miss=$miss"
    check "$name: clairfs_order_identified 1" test "$(m "$mnt" clairfs_order_identified)" = 1
    check "$name: the stats say identified $kind" \
        grep -q "^order: *identified $kind " "$mnt/.clairfs/stats"
    check "$name: epochs 1-$((EPOCHS - 1)) predicted: hit+miss >= $((3 * per_epoch))" \
        test "$((hit + miss))" -ge "$((3 * per_epoch))"
    check "$name: at most 1 % of the predicted opens missed ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
    grep 'order:' "$TMP/$name.daemon.log"
    check "$name: unmount is clean" cfs_umount "$mnt"
}

pattern ddp torch-ddp 2 17
pattern torch torch 1 23
pattern torch-persistent torch 1 29 --persistent
pattern sampler torch-sampler 1 31

# reader NAME COMMAND...: COMMAND reads the mount $mnt (exported) and
# compares with $src; then the order must not be identified.
reader() {
    local name=$1
    shift
    mnt=$TMP/mnt-$name
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" -o ram=$ram,index="$TMP/index-$name" ||
        { fail "$name: mount"; return; }
    check "$name: every byte equals the source's" "$@"
    # Give the module the time it would take to search these opens.
    for _ in $(seq 60); do
        grep -q '^order: *not a torch shuffle' "$mnt/.clairfs/stats" && break
        sleep 1
    done
    cat "$mnt/.clairfs/stats"
    check "$name: clairfs_order_identified 0" test "$(m "$mnt" clairfs_order_identified)" = 0
    check "$name: the stats do not say identified" \
        bash -c '! grep -q "^order: *identified" "$1/.clairfs/stats"' _ "$mnt"
    check "$name: unmount is clean" cfs_umount "$mnt"
}

sequential() {
    local pass f
    for pass in 1 2; do
        (cd "$src" && find . -type f | sort) | while read -r f; do
            cmp -s "$src/$f" "$mnt/$f" || { echo "differs: $f" >&2; exit 1; }
        done || return 1
    done
}
find_xargs() {
    (cd "$mnt" && find . -type f) >"$TMP/list"
    test "$(wc -l <"$TMP/list")" -eq "$nfiles" || return 1
    cmp <(cd "$mnt" && tr '\n' '\0' <"$TMP/list" | xargs -0 cat) \
        <(cd "$src" && tr '\n' '\0' <"$TMP/list" | xargs -0 cat)
}
shuffled() {
    "$PYTHON" - "$src" "$mnt" <<'EOF'
import os, random, sys
src, mnt = sys.argv[1], sys.argv[2]
files = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, fs in os.walk(src) for f in fs)
rng = random.Random(7)
for _ in range(3):
    rng.shuffle(files)
    for rel in files:
        with open(os.path.join(mnt, rel), "rb") as a, open(os.path.join(src, rel), "rb") as b:
            if a.read() != b.read():
                sys.exit(f"differs: {rel}")
EOF
}

reader sequential sequential
reader find-xargs find_xargs
reader shuffled shuffled
cfs_finish
