#!/bin/bash
# A distributed mount learns the order with nothing registered (suite 'mpi'):
#   test_mpi_identify.sh SCENARIO
# Nodes under mpirun (shared memory), nothing but ram= and index= given; real
# torch DDP trainers (identify_trainer.py: DistributedSampler, num_workers=2,
# batches of 8, in step over gloo), 4 epochs, pausing after epoch 0 until
# their mount says identified (at most CLAIRFS_IDENTIFY_PAUSE s, 60 here).
#   nodes2  2 nodes, one trainer of world 4: ranks 0-1 read node 0's mount,
#           2-3 node 1's (the block torchrun --nnodes 2 gives)
#   nodes2persistent  nodes2 with persistent DataLoader workers: epoch 0
#           cannot show them, epoch 1's start does; the head node claims the
#           order refined, node 1 checks it against its own opens, and both
#           adopt the refinement ("nodes 0-1 agree: torch-ddp seed=17 world=4
#           batch=8 persistent_workers (refinement 1), planned from epoch 1")
#   nodes2one  2 nodes, one trainer of world 2: one rank a node (node 0's
#           readers never open randperm[1]: the scan's second stride)
#   nodes2cyclic  nodes2 with the ranks dealt round robin, as srun
#           --distribution=cyclic places them: ranks 0 and 2 read node 0's
#           mount, 1 and 3 node 1's (each node claims ranks with stride 2)
#   cyclicregistered  nodes2cyclic with seed=, world= and batch= registered:
#           the plan's blocks are not the trainer's ranks, and each node
#           says so ("order: planned ranks 2-3, but the opens are ranks
#           1-3 (...: ranks=cyclic, or register nothing)"); every byte still
#           right; then with ranks=cyclic too:
#           the opens confirm the registered order, epochs 1-3 predicted
#   nodes4  4 nodes, one trainer of world 8, 2 ranks a node
#   nodes8  8 nodes, world 16 (by hand, not in the suite: 56 processes)
#   compare nodes2, then the same trainer with seed=, world= and batch=
#           registered; prints both runs' PFS bytes of epochs 1-3 (by hand,
#           not in the suite: they vary with the host's load)
#   jobs    2 nodes, two trainers of world 2 with seeds 17 and 100017, each on
#           one node's mount (two jobs on one allocation)
#   refuse  nodes2one, then node 1's rank reshuffles with another seed from
#           epoch 2: node 1's opens stop fitting the agreed order, it refuses
#           it, and every node drops its plan together and stays a reactive
#           cache for the rest of the run
# The RAM tiers hold the dataset together, not alone (120 % of it over the
# nodes).  One trainer: node 0 holds the head of the order and identifies
# it, the other nodes check its claim against their own opens, every node
# adopts one plan.  Checked: every trainer byte equals the source's,
# clairfs_order_identified 1 on every node, the agreement in the log ("nodes
# 0-1 agree: torch-ddp seed=17 world=4 batch=8") and the stats, and on each
# node at least the opens of epochs 1-3 predicted, at most 1 % of the
# predicted opens missed.  Two jobs: each node
# identifies its own, the nodes disagree ("node 1 contradicts node 0"), no
# node adopts (clairfs_order_identified 0, nothing predicted), every byte
# right.  Refused: both nodes first agree and adopt, then both log the
# drop, their stats say the nodes dropped the order for node 1's opens,
# clairfs_order_identified is 0 on each, and nothing is predicted in epoch
# 3 (the predictions counted at epoch 2's end are all there are).
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh).
# Exit 77 when mpirun, FUSE or torch is missing.
set -u
SCENARIO=${1:?scenario}
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
cfs_need_torch
cfs_setup
CLAIRFS_IDENTIFY_PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-60}
. "$(dirname "$0")/identify_lib.sh"
identify_dataset

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_COMMON="--oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo"
SEED=17
case $SCENARIO in
nodes2 | compare) NODES=2 WORLD=4 JOBS=1 ;;
nodes2persistent) NODES=2 WORLD=4 JOBS=1 PERSISTENT=--persistent ;;
nodes2one) NODES=2 WORLD=2 JOBS=1 ;;
nodes2cyclic) NODES=2 WORLD=4 JOBS=1 CYCLIC=1 ;;
cyclicregistered) NODES=2 WORLD=4 JOBS=1 CYCLIC=1 PAUSE=5 ;;
nodes4) NODES=4 WORLD=8 JOBS=1 ;;
nodes8) NODES=8 WORLD=16 JOBS=1 ;; # by hand: 8 daemons, 16 ranks, 32 workers
jobs) NODES=2 WORLD=2 JOBS=2 PAUSE=5 ;; # nothing to wait for: no node adopts
refuse) NODES=2 WORLD=2 JOBS=1 RESEED="--reseed 2:$((SEED + 5000))" ;;
*) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
MPIPID=
PERSISTENT=${PERSISTENT:-} RESEED=${RESEED:-}
CYCLIC=${CYCLIC:-}

mpi_cleanup() {
    cfs_mpi_stop
    cfs_cleanup
}
trap mpi_cleanup EXIT

# cluster_start OPTS: mpirun NODES daemons with -o OPTS (log $TMP/mpi.log),
# every mount ready.
cluster_start() {
    local r
    for r in $(seq 0 $((NODES - 1))); do mkdir -p "$TMP/m$r"; done
    # shellcheck disable=SC2086
    env --default-signal=INT timeout -k 5 300 mpirun -np $NODES $MPI_COMMON \
        "$CLAIRFS" -o "$1" "$src" "$TMP/m{rank}" >"$TMP/mpi.log" 2>&1 &
    MPIPID=$!
    for _ in $(seq 300); do
        ready && return 0
        kill -0 "$MPIPID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$TMP/mpi.log"
    fail "the mounts did not come up"
    cfs_finish
}
ready() {
    local r
    for r in $(seq 0 $((NODES - 1))); do [ -e "$TMP/m$r/.clairfs/ready" ] || return 1; done
}

# cluster_stop: every node unmounted, mpirun's status checked.
cluster_stop() {
    local r
    for r in $(seq 0 $((NODES - 1))); do fusermount3 -u "$TMP/m$r"; done
    wait "$MPIPID"
    check "mpirun ends cleanly" test $? -eq 0
    MPIPID=
}

# trainers: JOBS trainers of WORLD ranks each; job j's rank r reads node
# j * NODES / JOBS + r / (ranks a node)'s mount (CYCLIC: node r % NODES),
# compares every byte with the source's; rank r of job j logs to
# $TMP/job$j.rank$r.log and copies its mount's metrics at epoch 1 to
# $TMP/snap.job$j.rank$r and at each epoch E's end to
# $TMP/end.job$j.rank$r.E.  RESEED goes to node 1's ranks.
per_node=$((JOBS * WORLD / NODES))
# node_ranks NODE: the ranks of its job that node NODE serves
node_ranks() {
    local j=$(($1 * JOBS / NODES))
    if [ -n "$CYCLIC" ]; then
        seq "$1" "$NODES" $((WORLD - 1))
    else
        seq $((($1 - j * NODES / JOBS) * per_node)) $((($1 - j * NODES / JOBS + 1) * per_node - 1))
    fi
}
# predictions NODE: its ranks' opens (opens), those of epochs 1-3 (later)
# and its mount's predictions since the mount (hit, miss: a rank's workers
# may open epoch 1's first batch before the node's first rank copies the
# metrics at epoch 1)
predictions() {
    local r j=$(($1 * JOBS / NODES))
    opens=0
    for r in $(node_ranks "$1"); do
        opens=$((opens + $(wc -l <"$TMP/job$j.rank$r.log")))
    done
    later=$((opens * (EPOCHS - 1) / EPOCHS))
    hit=$(cfs_metric "$TMP/m$1" 'clairfs_prediction_total{result="hit"}')
    miss=$(cfs_metric "$TMP/m$1" 'clairfs_prediction_total{result="miss"}')
}
# predicted_well WHAT: at least the opens of epochs 1-3 predicted, at most
# 1 % of the predicted opens mispredicted
predicted_well() {
    check "$1: at least the opens of epochs 1-$((EPOCHS - 1)) predicted ($((hit + miss)) of $later)" \
        test "$((hit + miss))" -ge "$later"
    check "$1: at most 1 % of the predicted opens mispredicted ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
}
trainers() {
    local j r node port pids=() p rc=0 t0=$SECONDS reseed
    for j in $(seq 0 $((JOBS - 1))); do
        port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        for r in $(seq 0 $((WORLD - 1))); do
            node=$((j * NODES / JOBS + r / per_node))
            [ -n "$CYCLIC" ] && node=$((r % NODES))
            reseed=
            [ "$node" = 1 ] && reseed=$RESEED
            # shellcheck disable=SC2086
            timeout 600 "$TORCH_PY" "$TRAINER" --data "$TMP/m$node" --src "$src" \
                --kind torch-ddp --seed $((SEED + 100000 * j)) --world $WORLD --rank "$r" \
                --epochs $EPOCHS --batch $BATCH --workers $WORKERS --pause "$PAUSE" \
                $PERSISTENT $reseed --port "$port" --snapshot "$TMP/snap.job$j.rank$r" \
                --epoch-snapshots "$TMP/end.job$j.rank$r" --log "$TMP/job$j.rank$r.log" &
            pids+=($!)
            cfs_pids+=($!)
        done
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    check "every rank ran its $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
    echo "trainers: $((SECONDS - t0)) s"
}

# pfs_later: the PFS bytes every node fetched in epochs 1-3 (since the
# snapshot of its first rank), summed into pfs_later.
pfs_later() {
    local node j first was now
    pfs_later=0
    for node in $(seq 0 $((NODES - 1))); do
        j=$((node * JOBS / NODES))
        first=$(node_ranks "$node" | head -1)
        now=$(cfs_metric "$TMP/m$node" 'clairfs_fetch_bytes_total{from="pfs"}')
        was=$(awk '$1 == "clairfs_fetch_bytes_total{from=\"pfs\"}" { print $2 }' \
            "$TMP/snap.job$j.rank$first")
        pfs_later=$((pfs_later + now - ${was:-0}))
    done
}

# The RAM tiers hold the dataset together, not alone (60 % each on 2 nodes,
# 30 % on 4): after epoch 0 the PFS is spared only where every node plans
# the same owners.
# (what the RAM tier charges: whole 4 KiB pages)
paged=$(find "$src" -type f -printf '%s\n' | awk '{ s += int(($1 + 4095) / 4096) * 4096 } END { print s }')
ram=$((paged * 6 / 5 / NODES / 1024 + 64))K
if [ "$SCENARIO" = cyclicregistered ]; then
    cluster_start "ram=$ram,index=$TMP/index{rank},seed=$SEED,world=$WORLD,batch=$BATCH"
    trainers
    grep -E 'order:|identify:' "$TMP/mpi.log"
    check "node 0 says its readers are not its planned ranks" \
        grep -q "clairfs\[rank 0\]: order: planned ranks 0-1, but the opens are rank" "$TMP/mpi.log"
    check "node 1 says its readers are not its planned ranks" \
        grep -q "clairfs\[rank 1\]: order: planned ranks 2-3, but the opens are rank" "$TMP/mpi.log"
    cluster_stop
    rm -rf "$TMP"/index* "$TMP"/job* "$TMP"/snap.* "$TMP"/end.*
    cluster_start "ram=$ram,index=$TMP/index{rank},seed=$SEED,world=$WORLD,batch=$BATCH,ranks=cyclic"
    trainers
    grep -E 'order:|identify:|mounted' "$TMP/mpi.log"
    for node in 0 1; do
        predictions "$node"
        echo "ranks=cyclic, node $node: $opens opens; predicted: hit=$hit miss=$miss"
        check "ranks=cyclic, node $node: the opens confirm the registered order" \
            grep -q "clairfs\[rank $node\]: order: the opens confirm the registered order" "$TMP/mpi.log"
        predicted_well "ranks=cyclic, node $node"
    done
    cluster_stop
    cfs_finish
    exit
fi
cluster_start "ram=$ram,index=$TMP/index{rank}"
trainers
for node in $(seq 0 $((NODES - 1))); do
    mnt=$TMP/m$node
    j=$((node * JOBS / NODES))
    first=$(node_ranks "$node" | head -1)
    grep -E '^(roots|order):' "$mnt/.clairfs/stats"
    predictions "$node"
    echo "node $node: $opens opens, $later in epochs 1-$((EPOCHS - 1)); predicted: hit=$hit miss=$miss"
    if [ -n "$RESEED" ]; then
        ended=$(awk '$1 ~ /^clairfs_prediction_total\{result="(hit|miss)"\}$/ { s += $2 }
            END { print s + 0 }' \
            "$TMP/end.job$j.rank$first.2")
        check "node $node: clairfs_order_identified 0" \
            test "$(cfs_metric "$mnt" clairfs_order_identified)" = 0
        check "node $node: nothing predicted in epoch 3 ($((hit + miss)) predictions, $ended at epoch 2's end)" \
            test "$((hit + miss))" = "$ended"
        check "node $node: predicted before (the order was adopted)" test "$ended" -gt 0
        check "node $node: the stats say the nodes dropped the order for node 1's opens" \
            grep -q "^order: *dropped by the nodes: node 1" "$mnt/.clairfs/stats"
        check "node $node: logs the drop" \
            grep -q "clairfs\[rank $node\]: order: the nodes dropped their agreed order.*: node 1" \
            "$TMP/mpi.log"
    elif [ "$JOBS" = 1 ]; then
        check "node $node: clairfs_order_identified 1" \
            test "$(cfs_metric "$mnt" clairfs_order_identified)" = 1
        predicted_well "node $node"
        check "node $node: the stats say the nodes agree" \
            grep -q "cluster: nodes 0-$((NODES - 1)) agree" "$mnt/.clairfs/stats"
    else
        check "node $node: clairfs_order_identified 0" \
            test "$(cfs_metric "$mnt" clairfs_order_identified)" = 0
        check "node $node: nothing predicted ($hit hits, $miss misses)" test "$((hit + miss))" = 0
        check "node $node: the stats say the nodes disagree" \
            grep -q "cluster: node 1 contradicts node 0" "$mnt/.clairfs/stats"
    fi
done
grep -E 'order:|identify:' "$TMP/mpi.log"
if [ -n "$RESEED" ]; then
    check "the nodes first agree on the trainer's order" \
        grep -q "nodes 0-1 agree: torch-ddp seed=$SEED world=$WORLD batch=$BATCH" "$TMP/mpi.log"
elif [ "$JOBS" = 1 ]; then
    check "the nodes agree on the trainer's order" \
        grep -q "nodes 0-$((NODES - 1)) agree: torch-ddp seed=$SEED world=$WORLD batch=$BATCH" \
        "$TMP/mpi.log"
    [ -n "$CYCLIC" ] && check "node 1 identified its ranks 1 and 3 (step 2)" \
        grep -q "clairfs\[rank 1\]: identify: torch-ddp seed=${SEED}[^w]*world=$WORLD (ranks 1-3 step 2 here)" \
        "$TMP/mpi.log"
    if [ -n "$PERSISTENT" ]; then
        check "the nodes agree on the refinement epoch 1 shows, from epoch 1" \
            grep -q "nodes 0-1 agree: torch-ddp seed=$SEED world=$WORLD batch=$BATCH persistent_workers (refinement 1), planned from epoch 1" \
            "$TMP/mpi.log"
        # Which node refines first is the trainers' race: one that has not
        # yet is asked to check the other's refinement (identify_refine is
        # the unit test of that path), or both see epoch 1 at once and
        # refine from their own opens.  Either way each node's order is
        # refined.
        asked=$(grep -c "order: node [01] refined the order to torch-ddp seed=$SEED world=$WORLD batch=$BATCH persistent_workers (refinement 1)" "$TMP/mpi.log")
        refined=$(grep -o "clairfs\[rank [01]\]: order: refined to torch-ddp seed=$SEED " "$TMP/mpi.log" |
            sort -u | wc -l)
        echo "refinement: $asked node(s) asked to check the other's; $refined node(s) refined"
        check "each node's order refined ($refined of 2; $asked asked to check the other's)" \
            test "$refined" -eq 2
    fi
else
    check "the nodes say they disagree" \
        grep -q "node 1 contradicts node 0: torch-ddp seed=$((SEED + 100000))" "$TMP/mpi.log"
fi
pfs_later
learnt=$pfs_later
echo "PFS bytes of epochs 1-$((EPOCHS - 1)), every node: $learnt (dataset $nbytes)"
cluster_stop

if [ "$SCENARIO" = compare ]; then
    # The same trainer on the same cluster with its settings registered.
    rm -rf "$TMP"/index* "$TMP"/job* "$TMP"/snap.*
    cluster_start "ram=$ram,index=$TMP/index{rank},seed=$SEED,world=$WORLD,batch=$BATCH"
    trainers
    pfs_later
    echo "PFS bytes of epochs 1-$((EPOCHS - 1)): $learnt learnt, $pfs_later registered" \
        "(dataset $nbytes, $paged in pages; ram=$ram a node)"
    cluster_stop
fi
cfs_finish
