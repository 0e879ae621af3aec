#!/bin/bash
# The seed scan split across the nodes, live (suite 'mpi').
# 2 nodes under mpirun (shared memory), nothing registered; 140 000 files of
# a few bytes (280 classes of 500: the head splits its scan only above about
# 130 000 samples, where a share passes few seeds); a real torch DDP trainer
# of world 4 (identify_trainer.py, 2 ranks a node, num_workers=2, batches of
# 8) seeded 2^31 + 17: near the start of node 1's share (seeds 2^31 ..
# 2^32 - 1), 2^31 seeds into the head's own scan.  Each rank reads only
# epoch 0's first BATCHES batches, pausing at batch PAUSE_STEP until its
# mount says identified.
# Checked: node 1 scanned its share with node 0's sets and passed the seed
# back; node 0 found that it fits its own opens; the nodes agree on the
# trainer's order; every byte the ranks read equals the source's; and on
# each node the opens after the pause were predicted (at most 1 % of them
# missed).  Printed, never checked: the time from the first open to the
# agreed plan, and node 1's clairfs_search_cpu_seconds_total (its own scan
# and its share: test_identify_thread checks that a share is counted).
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh).
# Exit 77 when mpirun, FUSE or torch is missing.
set -u
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
cfs_need_torch
cfs_setup
TRAINER=$(dirname "$0")/identify_trainer.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_COMMON="--oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo"
NODES=2 WORLD=4 BATCH=8 WORKERS=2
# By hand, ImageNet's size: CLAIRFS_SPLIT_CLASSES=1000 CLAIRFS_SPLIT_PER_CLASS=1281
# CLAIRFS_SPLIT_EMPTY=1 (empty files: a page each would take 5 GiB)
# CLAIRFS_SPLIT_LIMIT=900 (the seconds mpirun and the trainers may take).
CLASSES=${CLAIRFS_SPLIT_CLASSES:-280} PER_CLASS=${CLAIRFS_SPLIT_PER_CLASS:-500}
SEED=$((2147483648 + 17))
BATCHES=${CLAIRFS_SPLIT_BATCHES:-60}
PAUSE_STEP=20
PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-40}
LIMIT=${CLAIRFS_SPLIT_LIMIT:-300}
MPIPID=
# The source in RAM (a page a file, 560 MiB): on a busy disk, writing and
# removing 140 000 files took minutes.
src=$(mktemp -d /dev/shm/clairfs-split.XXXXXX) || { fail "a source in /dev/shm"; cfs_finish; }
trap 'cfs_mpi_stop; cfs_cleanup; rm -rf "$src"' EXIT

t0=$SECONDS
"$PYTHON" - "$src" "$CLASSES" "$PER_CLASS" "${CLAIRFS_SPLIT_EMPTY:-0}" <<'PY' ||
import os, sys
root, classes, per, empty = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
for c in range(classes):
    d = os.path.join(root, "c%04d" % c)
    os.mkdir(d)
    for i in range(per):
        with open(os.path.join(d, "%07d.jpg" % (c * per + i)), "w") as f:
            f.write("" if empty else "%d %d\n" % (c, i))
PY
    { fail "the source tree"; cfs_finish; }
echo "source: $((CLASSES * PER_CLASS)) files in $((SECONDS - t0)) s"

for r in $(seq 0 $((NODES - 1))); do mkdir -p "$TMP/m$r"; done
env --default-signal=INT timeout -k 5 "$LIMIT" mpirun -np $NODES $MPI_COMMON \
    "$CLAIRFS" -o "ram=64M,index=$TMP/index{rank}" "$src" "$TMP/m{rank}" >"$TMP/mpi.log" 2>&1 &
MPIPID=$!
for _ in $(seq $((LIMIT * 2))); do
    [ -e "$TMP/m0/.clairfs/ready" ] && [ -e "$TMP/m1/.clairfs/ready" ] && break
    kill -0 "$MPIPID" 2>/dev/null || break
    sleep 0.1
done
[ -e "$TMP/m0/.clairfs/ready" ] && [ -e "$TMP/m1/.clairfs/ready" ] ||
    { cat "$TMP/mpi.log"; fail "the mounts did not come up"; cfs_finish; }
echo "mounts ready: $((SECONDS - t0)) s"

# watch_agreement: from either node's first open (an unplanned
# prediction), the time to the agreement in the log and to both nodes'
# plans adopted ("predicting it": a plan of 1.28 M samples takes seconds),
# polled every 20 ms, into $TMP/agreed (measurements: printed, never
# checked).
watch_agreement() {
    local first="" agreed="" now opens m
    while kill -0 "$MPIPID" 2>/dev/null; do
        for m in 0 1; do
            [ -n "$first" ] && break # the mounts are read until then, the log after
            now=$EPOCHREALTIME
            opens=$(cfs_metric "$TMP/m$m" 'clairfs_prediction_total{result="unplanned"}')
            [ "${opens:-0}" -gt 0 ] && first=$now
        done
        now=$EPOCHREALTIME
        [ -n "$first" ] && [ -z "$agreed" ] && grep -q 'order: nodes 0-1 agree' "$TMP/mpi.log" &&
            agreed=$now
        if [ -n "$agreed" ] && [ "$(grep -c '\]: order: .*; predicting it' "$TMP/mpi.log")" -ge 2 ]; then
            awk -v a="$first" -v b="$agreed" -v c="$now" \
                'BEGIN { printf "%.2f s to the agreement, %.2f s to both plans\n", b - a, c - a }' \
                >"$TMP/agreed"
            return
        fi
        sleep 0.02
    done
}
watch_agreement & # ends with mpirun at the latest
watcher=$!

# Rank r reads node r / 2's mount (the block torchrun --nnodes 2 gives).
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=() rc=0 t1=$SECONDS
for r in $(seq 0 $((WORLD - 1))); do
    timeout "$LIMIT" "$TORCH_PY" "$TRAINER" --data "$TMP/m$((r / 2))" --src "$src" --kind torch-ddp \
        --seed $SEED --world $WORLD --rank "$r" --epochs 1 --batch $BATCH --workers $WORKERS \
        --batches "$BATCHES" --identify-by-step $PAUSE_STEP --pause "$PAUSE" --port "$port" \
        --log "$TMP/rank$r.log" &
    pids+=($!)
    cfs_pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
check "every rank read its $BATCHES batches with the source's bytes" test "$rc" -eq 0
echo "trainers: $((SECONDS - t1)) s"

wait "$watcher"
echo "from the first open: $(cat "$TMP/agreed" 2>/dev/null || echo "no agreement seen")" \
    "($((CLASSES * PER_CLASS)) files)"
grep -E 'order:|identify:' "$TMP/mpi.log"
check "node 1 scanned its share with node 0's sets" \
    grep -q 'clairfs\[rank 1\]: order: scanning seeds 2147483648-4294967295 (share 1 of 2) with node 0' \
    "$TMP/mpi.log"
check "node 1 passed a seed of its share to node 0" \
    grep -q 'clairfs\[rank 1\]: order: share 1 of 2 stopped (a claim or newer sets came); [1-9][0-9]* seeds passed to node 0' \
    "$TMP/mpi.log"
check "node 0 found node 1's seed fits its opens" \
    grep -q "clairfs\[rank 0\]: identify: .*seed $SEED from another node's share fits this node's opens" \
    "$TMP/mpi.log"
check "the nodes agree on the trainer's order" \
    grep -q "nodes 0-1 agree: torch-ddp seed=$SEED world=$WORLD batch=$BATCH" "$TMP/mpi.log"
# the pause's opens (prefetched batches) are unplanned: the rest of each
# rank's batches, less the loader's prefetch (2 a worker) and a batch of
# slack
later=$(((BATCHES - PAUSE_STEP - 2 * WORKERS - 1) * BATCH * 2))
for node in 0 1; do
    mnt=$TMP/m$node
    grep -E '^(order|identify):' "$mnt/.clairfs/stats"
    hit=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="hit"}')
    miss=$(cfs_metric "$mnt" 'clairfs_prediction_total{result="miss"}')
    echo "node $node: predicted hit=$hit miss=$miss"
    check "node $node: clairfs_order_identified 1" \
        test "$(cfs_metric "$mnt" clairfs_order_identified)" = 1
    check "node $node: the opens after the pause predicted ($((hit + miss)) of at least $later)" \
        test "$((hit + miss))" -ge "$later"
    check "node $node: at most 1 % of them missed ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
    check "node $node: the stats say the nodes agree" \
        grep -q "cluster: nodes 0-1 agree" "$mnt/.clairfs/stats"
done
cpu=$(awk '$1 ~ /^clairfs_search_cpu_seconds_total/ { s += $2 } END { print s + 0 }' \
    "$TMP/m1/.clairfs/metrics")
echo "node 1: search CPU $cpu s"
for node in 0 1; do fusermount3 -u "$TMP/m$node"; done
wait "$MPIPID"
check "mpirun ends cleanly" test $? -eq 0
MPIPID=
echo "whole test: $((SECONDS - t0)) s"
cfs_finish
