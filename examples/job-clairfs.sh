#!/bin/bash
# A one-node training job on clairfs, with nothing registered: the mount
# learns the trainer's order from its first opens and sizes its RAM tier
# from the node (half the memory the job may use, at most the dataset).
# Submit with sbatch, or run it as it is; the environment overrides the
# defaults: DATA (the dataset directory), MNT (the mount point), TRAINER
# (the command, given the mount as --data).
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
set -euo pipefail
DATA=${DATA:-/lustre/datasets/imagenet/train}
MNT=${MNT:-/tmp/clairfs-${SLURM_JOB_ID:-$$}}
TRAINER=${TRAINER:-torchrun --nproc-per-node=8 train.py}

mkdir -p "$MNT"
clairfs "$DATA" "$MNT"                       # returns once the mount is live
trap 'fusermount3 -u "$MNT"' EXIT            # unmount also when training fails
$TRAINER --data "$MNT"
tail -n 1 "$MNT/.clairfs/stats"              # what the mount learnt: "order: identified ..."
