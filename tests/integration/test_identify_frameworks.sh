#!/usr/bin/env bash
# The mount learns the frameworks' read orders by itself.  Each sampler
# gets a fresh mount with nothing registered (no sampler=, seed=, world=)
# and a real torch DataLoader (identify_trainer.py: ImageFolder,
# num_workers=2, batch 8, 4 epochs, a pause after epoch 0 until the mount
# says it identified the order) whose sampler is the transcription of the
# framework's own code in tests/golden/framework_orders.py:
#   hf-accelerate   SeedableRandomSampler(data_seed=17) under
#                   BatchSamplerShard, world 2 (gloo, in step as DDP)
#   torchvision-ra  RASampler(seed=100003, repetitions=3), world 2; each
#                   file opened up to 3 times an epoch, by one or two ranks
#   timm-ra         RepeatAugSampler (seeded with the epoch), world 1: its
#                   one rank's workers open each file 3 times in a row;
#                   identified as timm-ra at epoch 0 (its seed is the epoch)
#   lightning       the DistributedSampler Lightning injects after
#                   seed_everything(4242), world 2: identified as torch-ddp
# Each must end with clairfs_order_identified 1, `order: identified KIND`
# in the stats, at least the opens of epochs 1-3 predicted, at most 1 % of
# the predicted opens missed, and every byte the trainer got equal to the
# source's.  (torchvision-ra with a seed below 4096 reads exactly as timm-ra
# and is named so: src/identify_frameworks.c.)
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds a trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup

TRAINER=$(dirname "$0")/identify_trainer.py
EPOCHS=4 BATCH=8 WORKERS=2
PAUSE=${CLAIRFS_IDENTIFY_PAUSE:-300}
src=$TMP/src
# 3000 files, as test_identify_mount.sh (more than twice the tracker's
# reordering window, so a wrong order shows as misses).  The RA samplers
# read floor(3000/256)*256 = 2816 entries an epoch, 939 distinct files.
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 30 --files 100 --size lognormal:2K:0.6 \
    --max-size 16K --seed 5 "$src" || { fail "gendata"; cfs_finish; }
nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
ram=$((2 * nbytes / 1024 + 1024))K

m() { cfs_metric "$1" "$2"; }

# pattern KIND WORLD SEED [IDENTIFIED-AS]: one trainer run on a fresh mount.
pattern() {
    local kind=$1 world=$2 seed=$3 want=${4:-$1}
    local name=$kind mnt=$TMP/mnt-$kind pids=() r rc=0 port t0=$SECONDS
    port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" -o ram=$ram,index="$TMP/index-$name" ||
        { fail "$name: mount"; return; }
    for r in $(seq 0 $((world - 1))); do
        timeout 600 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind "$kind" \
            --seed "$seed" --world "$world" --rank "$r" --epochs $EPOCHS --batch $BATCH \
            --workers $WORKERS --pause "$PAUSE" --port "$port" \
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
    echo "$name: $opens opens, $per_epoch per epoch; predicted hit=$hit miss=$miss;" \
        "$((SECONDS - t0)) s"
    check "$name: clairfs_order_identified 1" test "$(m "$mnt" clairfs_order_identified)" = 1
    check "$name: the stats say identified $want" \
        grep -q "^order: *identified $want " "$mnt/.clairfs/stats"
    check "$name: epochs 1-$((EPOCHS - 1)) predicted: hit+miss >= $((3 * per_epoch))" \
        test "$((hit + miss))" -ge "$((3 * per_epoch))"
    check "$name: at most 1 % of the predicted opens missed ($miss of $((hit + miss)))" \
        test "$((miss * 100))" -le "$((hit + miss))"
    grep -E 'order:|identify:' "$TMP/$name.daemon.log"
    check "$name: unmount is clean" cfs_umount "$mnt"
}

pattern hf-accelerate 2 17
pattern torchvision-ra 2 100003
pattern timm-ra 1 0
pattern lightning 2 4242 torch-ddp
cfs_finish
