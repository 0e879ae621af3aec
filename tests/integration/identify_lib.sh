# What the mount tests of order identification share (sourced after lib.sh
# and cfs_setup): the dataset, the trainer's settings, one trainer run on a
# fresh mount with its checks, and readers that are no torch shuffle, each
# on a mount of its own.
#
# identify_dataset: 30 x 100 = 3000 files of a few KiB in $src: more than
# twice the tracker's reordering window (1024 files at least), so that an
# order that is wrong (a wrong seed, persistent_workers, world, K or G)
# shows as misses; below the window any order of an epoch's files counts as
# predicted.  Sets TRAINER, EPOCHS, BATCH, WORKERS, PAUSE (the most seconds a
# trainer waits for identification after epoch 0: CLAIRFS_IDENTIFY_PAUSE,
# default 300), src, nfiles, nbytes and ram (twice the dataset).
identify_dataset() {
    identify_settings
    "$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 30 --files 100 --size lognormal:2K:0.6 \
        --max-size 16K --seed 5 "$src" || { fail "gendata"; cfs_finish; }
    identify_sizes
    echo "dataset: $nfiles files, $nbytes bytes"
}

# identify_jpeg_dataset: an ImageNet-shaped tree of real JPEG files in $src,
# for a trainer below a dataset root with the validation pass
# (identify_trainer.py --train-dir train --val-dir val --decode): 30
# classes, 100 training (ROOT/train/<class>/*.JPEG, 3000 files: twice the
# tracker's window and more, as identify_dataset's) and 20 validation images
# each (ROOT/val/...), 8x8 to 40x40 pixels, and a few files at the root.
# Sets what identify_dataset sets, and ntrain and nval.
identify_jpeg_dataset() {
    identify_settings
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
    identify_sizes
    ntrain=$(find "$src/train" -type f | wc -l)
    nval=$(find "$src/val" -type f | wc -l)
    echo "dataset: $ntrain training, $nval validation files, $nbytes bytes"
}

identify_settings() {
    TRAINER=$(dirname "${BASH_SOURCE[0]}")/identify_trainer.py
    EPOCHS=4 BATCH=8 WORKERS=2
    PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-300}
    src=$TMP/src
}

identify_sizes() {
    nfiles=$(find "$src" -type f | wc -l)
    nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
    ram=$((2 * nbytes / 1024 + 1024))K
}

# The trainer's arguments for identify_jpeg_dataset's tree: ImageFolder of
# train/, decoded, the validation pass over val/ after every epoch.
ROOT_ARGS=(--train-dir train --val-dir val --decode)

# identify_validation_checks NAME MNT WORLD LOGS SNAPSHOT DAEMON_LOG
# [registered]: the checks of a run of identify_trainer.py with ROOT_ARGS on
# identify_jpeg_dataset's tree at world WORLD (its training opens in
# LOGS*.log, its validation opens in LOGS*.log.val, rank 0's metrics after
# epoch 0's pass in SNAPSHOT): the validation pass named, predicted on its
# own from epoch 1 on, no validation open counted as a training hit or miss
# (clairfs_prediction_total{result=...} counts the training opens alone),
# the validation files kept resident, both roots identified, the training
# order never dropped.  "registered": the mount was given seed=, whose
# order numbers every file of the mount, val/ too, and predicts until
# train's is adopted: epoch 0's validation opens are its hits and misses,
# so the validation opens are checked as neither from the snapshot on only.
identify_validation_checks() {
    local name=$1 mnt=$2 world=$3 logs=$4 snap=$5 log=$6 registered=${7:-}
    local train val hit miss vhit vhit0 vmiss pfs want
    train=$(cat "$logs"*.log | wc -l)
    val=$(cat "$logs"*.log.val | wc -l)
    hit=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="hit"}')
    miss=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="miss"}')
    echo "$name: $val validation opens beside $train training opens"
    check "$name: $val validation opens, $EPOCHS passes over val/" test "$val" -eq $((EPOCHS * nval))
    check "$name: the roots: line says the validation pass is sequential, world=$world" \
        grep -q "^roots: .*val: sequential, world=$world " "$mnt/.clairfs/stats"
    [ -n "$registered" ] ||
        check "$name: the validation opens are neither hit nor miss: hit+miss <= $train" \
            test "$((hit + miss))" -le "$train"
    local later since_hit since_miss
    later=$(cat "$logs"*.log | awk '$1 > 0' | wc -l)
    since_hit=$(cfs_metric "$snap" 'clairfs_prediction_total{result="hit"}')
    since_miss=$(cfs_metric "$snap" 'clairfs_prediction_total{result="miss"}')
    since_hit=$((hit - ${since_hit:-0})) since_miss=$((miss - ${since_miss:-0}))
    check "$name: from epoch 1 the validation opens are neither hit nor miss: $since_hit + $since_miss <= $later" \
        test "$((since_hit + since_miss))" -le "$later"
    vhit=$(cfs_metric "$mnt" 'clairfs_prediction_total{phase="validation",result="hit"}')
    vmiss=$(cfs_metric "$mnt" 'clairfs_prediction_total{phase="validation",result="miss"}')
    echo "$name: validation passes predicted: hit=$vhit miss=$vmiss"
    # epoch 0's pass may be predicted from where it was named on: counted
    # from rank 0's snapshot after it (every rank's evaluation ends in step,
    # as the reference's metric_logger.synchronize_between_processes())
    vhit0=$(cfs_metric "$snap" 'clairfs_prediction_total{phase="validation",result="hit"}')
    check "$name: rank 0's metrics after epoch 0's pass in $snap" test -s "$snap"
    vhit0=${vhit0:-0} want=$(((EPOCHS - 1) * nval))
    check "$name: the validation passes of epochs 1-$((EPOCHS - 1)) are predicted hits: $vhit - $vhit0 = $want" \
        test "$((vhit - vhit0))" -eq "$want"
    check "$name: no validation open mispredicted ($vmiss)" test "$vmiss" -eq 0
    check "$name: the daemon predicts the validation pass over val" \
        grep -q "order: the validation pass over val ($nval files, world=$world) is predicted" "$log"
    # The tiers hold both folders (ram= twice the tree): the validation
    # files stay resident after their first pass, never fetched again.
    pfs=$(cfs_metric "$mnt" 'clairfs_reads_total{source="pfs"}')
    check "$name: every file read from the source once at most: $pfs reads <= $((ntrain + nval))" \
        test "$pfs" -le $((ntrain + nval))
    check "$name: clairfs_order_identified{root=\"train\"} 1" \
        test "$(cfs_metric "$mnt" 'clairfs_order_identified{root="train"}')" = 1
    check "$name: clairfs_order_identified{root=\"val\"} 1 (the unshuffled pass)" \
        test "$(cfs_metric "$mnt" 'clairfs_order_identified{root="val"}')" = 1
    check "$name: the training order is never dropped" \
        bash -c '! grep -q "no longer fit the identified order" "$1"' _ "$log"
}

# identify_pattern's trainers: the first steps of each epoch take 10 ms,
# as a model's step would.  The refinement at epoch 1's start (persistent
# workers, a stream's second pass) is checked a few batches in, and the
# opens made while the check waits for a core are misses: a loader with no
# step at all opened 16 000 files a second there, and on a host at load 24
# the 10-20 ms wait cost 1.2-1.8 % of 3 000-file epochs (132 and 186 misses).
STEPS="--step-seconds 0.01 --slow-steps 40"

# identify_pattern NAME KIND WORLD SEED WANT [TRAINER ARGS...]: WORLD trainer
# processes of identify_trainer.py --kind KIND on a fresh mount with nothing
# registered, in step as DDP keeps them (gloo on a free port); then the
# order must be identified as WANT (clairfs_order_identified 1, the stats'
# order line), the opens of epochs 1-3 predicted, at most 1 % of them
# missed, every byte equal to the source's, the unmount clean.
# CLAIRFS_IDENTIFY_MOUNT_OPTS adds mount options (log_level=debug: each
# attempt's outcome in $TMP/NAME.daemon.log, for a run that went wrong).
identify_pattern() {
    local name=$1 kind=$2 world=$3 seed=$4 want=$5
    shift 5
    local mnt=$TMP/mnt-$name pids=() r rc=0 port t0=$SECONDS
    port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" \
        -o ram=$ram,index="$TMP/index-$name"${CLAIRFS_IDENTIFY_MOUNT_OPTS:+,$CLAIRFS_IDENTIFY_MOUNT_OPTS} ||
        { fail "$name: mount"; return; }
    for r in $(seq 0 $((world - 1))); do
        timeout 900 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind "$kind" \
            --seed "$seed" --world "$world" --rank "$r" --epochs $EPOCHS --batch $BATCH \
            --workers $WORKERS --pause "$PAUSE" --port "$port" $STEPS "$@" \
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
    hit=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="hit"}')
    miss=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="miss"}')
    echo "$name: $opens opens, $per_epoch per epoch; predicted hit=$hit miss=$miss" \
        "unplanned=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="unplanned"}');" \
        "$((SECONDS - t0)) s"
    check "$name: clairfs_order_identified 1" test "$(cfs_metric "$mnt" clairfs_order_identified)" = 1
    check "$name: the stats say identified $want" \
        grep -q "^order: *identified $want " "$mnt/.clairfs/stats"
    # A fit of one epoch's order is refined a few batches into the next
    # (the opens before are unplanned), so epochs 1-3 less those.
    check "$name: epochs 1-$((EPOCHS - 1)) predicted: hit+miss >= $((3 * per_epoch - 600))" \
        test "$((hit + miss))" -ge "$((3 * per_epoch - 600))"
    check "$name: at most 1 % of the predicted opens missed ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
    grep -E 'order:|identify:' "$TMP/$name.daemon.log"
    # A test's own checks of the same run (identify_more_checks NAME MNT WORLD).
    [ "$(type -t identify_more_checks)" != function ] || identify_more_checks "$name" "$mnt" "$world"
    check "$name: unmount is clean" cfs_umount "$mnt"
}

# reader_start NAME OPTS COMMAND...: a fresh mount $TMP/mnt-NAME (more
# mount options OPTS, "" for none) read by COMMAND in the background
# (COMMAND reads $mnt and compares with $src).  The three readers run at
# once, and their mounts then search their opens side by side, beside the
# trainers: waiting for each in turn cost three minutes of an idle host.
declare -A reader_pid reader_daemon
reader_start() {
    local name=$1 more=${2:+,$2}
    shift 2
    local mnt=$TMP/mnt-$name
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" -o ram=$ram,index="$TMP/index-$name"$more ||
        { fail "$name: mount"; return; }
    reader_daemon[$name]=$CFS_PID
    "$@" >"$TMP/$name.reader.log" 2>&1 &
    reader_pid[$name]=$!
    cfs_pids+=($!)
}

# reader_end NAME DEADLINE: once the mount says its opens are not a torch
# shuffle, or at DEADLINE (in $SECONDS) at the latest, the order must not be
# identified; then the mount goes.
reader_end() {
    local name=$1 deadline=$2 mnt=$TMP/mnt-$1
    [ -n "${reader_pid[$name]:-}" ] || return
    # Give the module the time it would take to search these opens.
    while [ "$SECONDS" -lt "$deadline" ]; do
        grep -q '^order: *not a torch shuffle' "$mnt/.clairfs/stats" && break
        sleep 1
    done
    cat "$mnt/.clairfs/stats"
    check "$name: clairfs_order_identified 0" test "$(cfs_metric "$mnt" clairfs_order_identified)" = 0
    check "$name: the stats do not say identified" \
        bash -c '! grep -q "^order: *identified" "$1/.clairfs/stats"' _ "$mnt"
    CFS_PID=${reader_daemon[$name]}
    check "$name: unmount is clean" cfs_umount "$mnt"
}

# readers_end DEADLINE: every reader of the array readers (started with
# reader_start) done, its bytes right; then reader_end for each.
readers_end() {
    local name rc
    for name in "${readers[@]}"; do
        [ -n "${reader_pid[$name]:-}" ] || continue
        wait "${reader_pid[$name]}"
        rc=$?
        cat "$TMP/$name.reader.log"
        check "$name: every byte equals the source's" test "$rc" -eq 0
    done
    for name in "${readers[@]}"; do reader_end "$name" "$1"; done
}

# predicted_since MNT SNAPSHOT: sets hit and miss to the predictions the
# mount counted since SNAPSHOT, a copy of its .clairfs/metrics taken then.
predicted_since() {
    local was_hit was_miss
    hit=$(cfs_metric "$1" 'clairfs_prediction_total{result="hit"}')
    miss=$(cfs_metric "$1" 'clairfs_prediction_total{result="miss"}')
    was_hit=$(cfs_metric "$2" 'clairfs_prediction_total{result="hit"}')
    was_miss=$(cfs_metric "$2" 'clairfs_prediction_total{result="miss"}')
    hit=$((hit - ${was_hit:-0})) miss=$((miss - ${was_miss:-0}))
}

# global_trainer_run MOUNT_OPTS TIMEOUT SEED [TRAINER ARGS...]: a fresh mount
# $TMP/mnt (log $TMP/daemon.log; MOUNT_OPTS after ram= and index=, "" for
# none) read by one torch-global trainer process seeded SEED
# (identify_trainer.py, the dataset's epochs, batch, workers and pause, its
# opens in $TMP/rank0.log, then TRAINER ARGS); checks that it ran with the
# source's bytes, prints the stats and the log's order lines, and sets mnt,
# opens and per_epoch.  A mount that fails ends the test.
global_trainer_run() {
    local opts=$1 limit=$2 seed=$3 pid rc=0
    shift 3
    mnt=$TMP/mnt
    cfs_mount "$src" "$mnt" "$TMP/daemon.log" -o ram=$ram,index="$TMP/index"${opts:+,$opts} ||
        { fail "mount"; cfs_finish; }
    timeout "$limit" "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind torch-global \
        --seed "$seed" --epochs $EPOCHS --batch $BATCH --workers $WORKERS --pause "$PAUSE" \
        --log "$TMP/rank0.log" "$@" &
    pid=$!
    cfs_pids+=($pid)
    wait "$pid" || rc=1
    check "the trainer ran its $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
    cat "$mnt/.clairfs/stats"
    grep -E 'identify:|order:' "$TMP/daemon.log"
    opens=$(wc -l <"$TMP/rank0.log")
    per_epoch=$((opens / EPOCHS))
}
