#!/bin/bash
# A distributed clairfs run on one host: NODES clairfs daemons under mpirun
# (one MPI rank per "node", each with its own mount point and SSD tier),
# and one unmodified PyTorch DDP trainer rank per node reading its node's
# mount.  The same steps as examples/slurm-clairfs.sh, without Slurm.
#
#   examples/local-multinode.sh [--nodes N] [--epochs E] [--data DIR] [--keep]
#
# Without --data it generates a small dataset (tools/clairfs-gendata).  The
# daemons are started with `mpirun ... clairfs -f` in the background; the
# script waits for every node's .clairfs/ready, runs the trainers (one
# process per rank with the variables torchrun sets), prints each node's
# read sources, and unmounts every node at the end — also when training
# fails or the script is interrupted (trap).  Exit status: the trainers'.
#
# Environment: CLAIRFS (default build/clairfs), PYTHON (default
# /usr/bin/python3, which has torch on Debian), MPIRUN_ARGS (extra mpirun
# arguments; as root this script adds --allow-run-as-root's variables).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
CLAIRFS=${CLAIRFS:-$ROOT/build/clairfs}
PYTHON=${PYTHON:-/usr/bin/python3}
NODES=2 EPOCHS=2 DATA= KEEP=0
SEED=5 BATCH=16
while [ $# -gt 0 ]; do
    case $1 in
    --nodes) NODES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [--nodes N] [--epochs E] [--data DIR] [--keep]" >&2; exit 2 ;;
    esac
done
[ -x "$CLAIRFS" ] || { echo "no clairfs at $CLAIRFS (set CLAIRFS)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "mpirun not found (apt install openmpi-bin)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/clairfs-multinode.XXXXXX)
MPIPID=
TRAINERS=()
cleanup() {
    local r
    for p in "${TRAINERS[@]}"; do kill "$p" 2>/dev/null; done
    # Every node's mount goes, whatever happened: a mount left behind
    # would hold its daemon, and MPI_Finalize waits for every rank.
    for r in $(seq 0 $((NODES - 1))); do
        mountpoint -q "$WORK/mnt$r" 2>/dev/null && fusermount3 -u "$WORK/mnt$r"
    done
    if [ -n "$MPIPID" ]; then
        for _ in $(seq 100); do kill -0 "$MPIPID" 2>/dev/null || break; sleep 0.1; done
        kill "$MPIPID" 2>/dev/null
        wait "$MPIPID" 2>/dev/null
    fi
    [ "$KEEP" = 1 ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$DATA" ]; then
    DATA=$WORK/data
    "$PYTHON" "$ROOT/tools/clairfs-gendata" --classes 8 --files 40 --size lognormal:32K \
        --quiet "$DATA"
fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BYTES=$(du -sb "$DATA" | cut -f1)
# Each node's RAM tier: its share of the dataset plus 10 %; together the
# nodes hold all of it, and each fetches what others own from them.
RAM=$((BYTES / NODES * 11 / 10 + 1048576))
WORLD=$NODES # one trainer rank per node
for r in $(seq 0 $((NODES - 1))); do mkdir -p "$WORK/mnt$r"; done

# One node per rank, {rank} in the mount point, SSD directory and index.
# shellcheck disable=SC2086
mpirun -np "$NODES" --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    ${MPIRUN_ARGS:-} "$CLAIRFS" -f \
    -o "seed=$SEED,world=$WORLD,batch=$BATCH,epochs=$EPOCHS,ram=$RAM" \
    -o "ssd_dir=$WORK/ssd{rank},ssd=64M" \
    "$DATA" "$WORK/mnt{rank}" >"$WORK/clairfs.log" 2>&1 &
MPIPID=$!
for _ in $(seq 600); do
    ready=1
    for r in $(seq 0 $((NODES - 1))); do [ -e "$WORK/mnt$r/.clairfs/ready" ] || ready=0; done
    [ $ready = 1 ] && break
    kill -0 "$MPIPID" 2>/dev/null || { echo "clairfs did not start:"; cat "$WORK/clairfs.log"; exit 1; }
    sleep 0.1
done
[ $ready = 1 ] || { echo "timed out waiting for the mounts"; cat "$WORK/clairfs.log"; exit 1; }
echo "$NODES nodes mounted: $(grep -o 'node [0-9]* of [0-9]*, trainer ranks [0-9-]*' "$WORK/clairfs.log" | tr '\n' ';')"

# The trainers: rank r reads node r's mount.  Under torchrun on a cluster
# each node's torchrun sets these variables; here we set them ourselves.
PORT=$((29500 + RANDOM % 1000))
for r in $(seq 0 $((WORLD - 1))); do
    RANK=$r LOCAL_RANK=0 WORLD_SIZE=$WORLD MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
        "$PYTHON" "$HERE/train_ddp.py" --data "$WORK/mnt$r" --seed "$SEED" --batch "$BATCH" \
        --workers 2 --epochs "$EPOCHS" >"$WORK/train$r.log" 2>&1 &
    TRAINERS+=($!)
done
status=0
for p in "${TRAINERS[@]}"; do wait "$p" || status=1; done
TRAINERS=()
cat "$WORK/train0.log"
[ $status = 0 ] || { echo "training failed:"; tail -5 "$WORK"/train*.log; }

for r in $(seq 0 $((NODES - 1))); do
    echo "node $r: $(grep -E '^clairfs_(reads_total|fetch_bytes_total)' "$WORK/mnt$r/.clairfs/metrics" |
        sed -E 's/clairfs_//; s/_total//' | tr '\n' ' ')"
done
exit $status
