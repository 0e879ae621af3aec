#!/bin/bash
# A distributed mount learns the order with nothing registered (suite 'mpi'):
# 2 nodes under mpirun (shared memory), nothing but ram= and index= given;
# a real torch DDP trainer of world 4 (identify_trainer.py: DistributedSampler
# with seed 17, num_workers=2, batches of 8, in step over gloo), ranks 0-1
# reading node 0's mount and ranks 2-3 node 1's (the block torchrun --nnodes
# 2 gives), 4 epochs, pausing after epoch 0 until its mount says identified.
# Node 0 holds the head of the order and identifies it; node 1 checks node
# 0's claim against its own opens; both adopt one plan.  Checked: every
# trainer byte equals the source's, clairfs_order_identified 1 on both
# nodes, the agreement in the log ("nodes 0-1 agree: torch-ddp seed=17
# world=4"), and on each node at most 1 % of the opens of epochs 1-3
# mispredicted (and every one of them predicted, hit or miss).
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds a trainer waits for identification after epoch 0 (60 here).
# Exit 77 when mpirun, FUSE or torch is missing.
set -u
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
cfs_need_torch
cfs_setup
CLAIRFS_IDENTIFY_PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-60}
. "$(dirname "$0")/identify_lib.sh"
identify_dataset

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_COMMON="--oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo"
NODES=2 WORLD=4 SEED=17
MPIPID=

mpi_cleanup() {
    local m
    for m in "$TMP"/m*; do
        [ -d "$m" ] && cfs_is_mounted "$m" && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    if [ -n "$MPIPID" ] && kill -0 "$MPIPID" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$MPIPID" 2>/dev/null || break; sleep 0.1; done
        kill "$MPIPID" 2>/dev/null
        wait "$MPIPID" 2>/dev/null
    fi
    cfs_cleanup
}
trap mpi_cleanup EXIT

for r in $(seq 0 $((NODES - 1))); do mkdir -p "$TMP/m$r"; done
# shellcheck disable=SC2086
env --default-signal=INT timeout -k 5 300 mpirun -np $NODES $MPI_COMMON \
    "$CLAIRFS" -o "ram=$ram,index=$TMP/index{rank}" "$src" "$TMP/m{rank}" >"$TMP/mpi.log" 2>&1 &
MPIPID=$!
for _ in $(seq 300); do
    [ -e "$TMP/m0/.clairfs/ready" ] && [ -e "$TMP/m1/.clairfs/ready" ] && break
    kill -0 "$MPIPID" 2>/dev/null || break
    sleep 0.1
done
[ -e "$TMP/m0/.clairfs/ready" ] && [ -e "$TMP/m1/.clairfs/ready" ] ||
    { cat "$TMP/mpi.log"; fail "the mounts did not come up"; cfs_finish; }

t0=$SECONDS
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in $(seq 0 $((WORLD - 1))); do
    node=$((r / (WORLD / NODES)))
    timeout 600 "$TORCH_PY" "$TRAINER" --data "$TMP/m$node" --src "$src" --kind torch-ddp \
        --seed $SEED --world $WORLD --rank "$r" --epochs $EPOCHS --batch $BATCH \
        --workers $WORKERS --pause "$PAUSE" --port "$port" --snapshot "$TMP/snap.rank$r" \
        --log "$TMP/rank$r.log" &
    pids+=($!)
    cfs_pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
check "every rank ran its $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
echo "trainers: $((SECONDS - t0)) s"

for node in $(seq 0 $((NODES - 1))); do
    mnt=$TMP/m$node
    first_rank=$((node * WORLD / NODES))
    tail -1 "$mnt/.clairfs/stats"
    opens=$(cat "$TMP/rank$first_rank.log" "$TMP/rank$((first_rank + 1)).log" | wc -l)
    later=$((opens * (EPOCHS - 1) / EPOCHS))
    predicted_since "$mnt" "$TMP/snap.rank$first_rank"
    echo "node $node: $opens opens, $later in epochs 1-$((EPOCHS - 1)); predicted since epoch 1:" \
        "hit=$hit miss=$miss"
    check "node $node: clairfs_order_identified 1" \
        test "$(cfs_metric "$mnt" clairfs_order_identified)" = 1
    check "node $node: the opens of epochs 1-$((EPOCHS - 1)) predicted ($((hit + miss)) of $later)" \
        test "$((hit + miss))" -ge "$later"
    check "node $node: at most 1 % of them mispredicted ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
done
grep -E 'order:|identify:' "$TMP/mpi.log"
check "the nodes agree on the trainer's order" \
    grep -q "nodes 0-1 agree: torch-ddp seed=$SEED world=$WORLD batch=$BATCH" "$TMP/mpi.log"

for r in $(seq 0 $((NODES - 1))); do fusermount3 -u "$TMP/m$r"; done
wait "$MPIPID"
check "mpirun ends cleanly" test $? -eq 0
MPIPID=
cfs_finish
