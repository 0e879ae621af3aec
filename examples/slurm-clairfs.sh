#!/bin/bash
# A Slurm job: clairfs on every node (one MPI rank per node, the nodes share
# their caches), then an unmodified torchrun trainer against the mounts.
#
#   sbatch examples/slurm-clairfs.sh            (edit the settings below)
#
# Steps: start one clairfs daemon per node as one MPI job in the background
# (Open MPI's mpirun inside the allocation, or srun --mpi=pmix); wait
# until every node's .clairfs/ready exists; run torchrun on every node with
# --data at the node-local mount; unmount every node at the end, also when
# training fails or the job is cancelled (trap on EXIT/TERM).  Open MPI
# aborts the whole clairfs job when one daemon dies (docs/distributed.md):
# the trap still unmounts what is left, so that no node keeps a
# dead mount.
#
#SBATCH --job-name=clairfs-train
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=32
#SBATCH --gpus-per-node=4
#SBATCH --time=04:00:00
#SBATCH --signal=B:TERM@120
set -u

# --- settings ------------------------------------------------------------
DATA=${DATA:-/lustre/datasets/imagenet/train}   # the dataset on the PFS
MNT=${MNT:-/tmp/clairfs-$SLURM_JOB_ID}          # node-local mount point ({rank}: node index)
SSD=${SSD:-/local/scratch/$USER/clairfs}        # node-local SSD tier
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
NODES=${SLURM_JOB_NUM_NODES:-1}
WORLD=$((NODES * GPUS_PER_NODE))                # trainer ranks
SEED=${SEED:-0} BATCH=${BATCH:-256} EPOCHS=${EPOCHS:-90} WORKERS=${WORKERS:-8}
RAM=${RAM:-64G}                                 # RAM tier per node
CLAIRFS=${CLAIRFS:-clairfs}
TRAINER=${TRAINER:-$(dirname "$0")/train_ddp.py}
TRAINER_ARGS=${TRAINER_ARGS:-}                  # more trainer arguments
PYTHON=${PYTHON:-python3}
# How the daemons start: mpirun (Open MPI inside the allocation) or srun
# (--mpi=pmix, where Slurm and Open MPI share PMIx).
CLAIRFS_LAUNCH=${CLAIRFS_LAUNCH:-$(command -v mpirun >/dev/null && echo mpirun || echo srun)}
# How the trainer starts: torchrun per node, or srun with one task per GPU
# (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT from Slurm's variables).
TRAINER_LAUNCH=${TRAINER_LAUNCH:-torchrun}
# -------------------------------------------------------------------------

# The trainer's sampler settings, identical on every node (checked at start:
# a node whose seed or dataset differs stops the mount on every node).  A
# one-node mount learns them from the opens (examples/job-clairfs.sh); a
# distributed one plans one order on every node before the first open, so
# here they are registered.
OPTS="seed=$SEED,world=$WORLD,batch=$BATCH,epochs=$EPOCHS,ram=$RAM"
OPTS="$OPTS,ssd_dir=$SSD/{rank},index=$SSD/{rank}/index"

# One command per node, run on every node through srun.  Node-local paths
# may hold {rank} (the node's index, as clairfs expands it for MPI rank =
# node): several nodes can then share one host, as in tests.
on_nodes() { srun --nodes="$NODES" --ntasks-per-node=1 --overlap "$@"; }
# on_node_sh 'SCRIPT': SCRIPT through bash on every node, with $MNT its mount.
on_node_sh() {
    on_nodes bash -c 'MNT=${1//\{rank\}/$SLURM_NODEID}; SSD=${2//\{rank\}/$SLURM_NODEID}; eval "$3"' \
        _ "$MNT" "$SSD" "$1"
}

CLAIRFS_STEP=
cleanup() {
    # Unmount every node's mount; the daemons then exit (MPI_Finalize
    # waits for all of them, so the step ends when the last node is done).
    on_node_sh 'mountpoint -q "$MNT" && fusermount3 -u "$MNT"; rmdir "$MNT" 2>/dev/null; true'
    if [ -n "$CLAIRFS_STEP" ]; then
        for _ in $(seq 60); do kill -0 "$CLAIRFS_STEP" 2>/dev/null || break; sleep 1; done
        kill "$CLAIRFS_STEP" 2>/dev/null
        wait "$CLAIRFS_STEP" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

on_node_sh 'mkdir -p "$MNT" "$SSD"' || exit 1

# The daemons: one MPI job, one rank per node, in the foreground (-f: Open
# MPI does not support fork after MPI_Init) as a background job step.
if [ "$CLAIRFS_LAUNCH" = srun ]; then
    srun --nodes="$NODES" --ntasks-per-node=1 --mpi=pmix --overlap \
        "$CLAIRFS" -f -o "$OPTS" "$DATA" "$MNT" &
else
    mpirun -np "$NODES" --map-by ppr:1:node "$CLAIRFS" -f -o "$OPTS" "$DATA" "$MNT" &
fi
CLAIRFS_STEP=$!

# Wait for every node: the catalog is loaded, the plan made, prefetching
# started.  A failed start (e.g. nodes that disagree) ends the step.
deadline=$((SECONDS + 1800))
until on_node_sh 'test -e "$MNT/.clairfs/ready"' 2>/dev/null; do
    kill -0 "$CLAIRFS_STEP" 2>/dev/null || { echo "clairfs failed to start" >&2; exit 1; }
    [ $SECONDS -lt $deadline ] || { echo "clairfs not ready after 30 min" >&2; exit 1; }
    sleep 2
done
echo "clairfs ready on $NODES nodes at $MNT"

# The trainer, unmodified, with --data at the node-local mount.
MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MASTER_ADDR=$(scontrol show node "$MASTER" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
export MASTER_ADDR=${MASTER_ADDR:-$MASTER} MASTER_PORT=${MASTER_PORT:-29500}
ARGS="--seed $SEED --batch $BATCH --workers $WORKERS --epochs $EPOCHS $TRAINER_ARGS"
if [ "$TRAINER_LAUNCH" = srun ]; then
    srun --nodes="$NODES" --ntasks-per-node="$GPUS_PER_NODE" --overlap bash -c '
        export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID
        exec "$1" "$2" --data "${3//\{rank\}/$SLURM_NODEID}" $4' \
        _ "$PYTHON" "$TRAINER" "$MNT" "$ARGS"
else
    on_node_sh "torchrun --nnodes=$NODES --nproc-per-node=$GPUS_PER_NODE \
        --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv-id=$SLURM_JOB_ID \
        '$TRAINER' --data \"\$MNT\" $ARGS"
fi
status=$?
echo "trainer exit status $status"

# Where each node's reads came from (clairfs-stat gives the live view).
on_node_sh 'echo "$(hostname) $SLURMD_NODENAME: $(grep -E "^clairfs_reads_total" "$MNT/.clairfs/metrics" | tr "\n" " ")"'
exit $status
