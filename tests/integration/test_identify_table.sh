#!/usr/bin/env bash
# A torch-global trainer seeded with a seed people use, nothing registered:
# timm's train.py calls torch.manual_seed(42 + rank) and builds its model
# before DataLoader(shuffle=True), persistent_workers=True by default.  The
# trainer (identify_trainer.py --kind torch-global --seed SEED --persistent,
# 4 epochs, num_workers=2) pauses after epoch 0
# and after each later epoch's first batch until the mount names that
# epoch's private seed or the run's seed.  Epochs 1 and 2 are learnt from
# their own first opens; epochs 0-2's private seeds then name the run's
# seed from the table of seeds people use, with the model's K and the
# dropout's G (src/rng_table.c), and the whole run is predicted from there.
# SEED is 42 + 279 (timm's seed at rank 279): among the table's 42 + rank
# seeds, one whose epochs 0-2 draw private seeds low in the range, where
# the search, running upwards from 0, comes first (a few minutes less).
#   - the log names epochs 1 and 2 each identified from its own opens, then
#     torch-global seed=SEED "a seed people use, from epochs 0-2";
#   - the stats say identified torch-global seed=SEED, and
#     clairfs_order_identified is 1 at the end (the whole run's order);
#   - epoch 3 (from the metrics the trainer copied at each epoch's end): at
#     most its first batches unplanned, the rest predicted, at most 1 % of
#     them missed; each epoch's share predicted is printed;
#   - every byte the trainer got equal to the source's.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds the trainer waits for each identification (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
. "$(dirname "$0")/identify_shares.sh"
identify_dataset
SEED=321

global_trainer_run "" 1500 $SEED --persistent --pause-epochs --epoch-snapshots "$TMP/end" \
    --step-seconds 0.04 --slow-steps 50
epoch_shares "$TMP/end" "$EPOCHS" "$per_epoch"
for e in 1 2; do
    check "epoch $e identified from its own opens" \
        grep -q "identify: torch-global (no seed registered) epoch $e's private seed=" "$TMP/daemon.log"
done
check "the run's seed named from epochs 0-2" \
    grep -Eq "identify: torch-global seed=$SEED rng_offset=[0-9]+ rng_epoch_words=[0-9]+ .*a seed people use, from epochs 0-2" \
    "$TMP/daemon.log"
check "the stats say identified torch-global seed=$SEED" \
    grep -q "^order: *identified torch-global seed=$SEED " "$mnt/.clairfs/stats"
check "clairfs_order_identified 1 at the end" \
    test "$(cfs_metric "$mnt" clairfs_order_identified)" = 1
epoch_counts "$TMP/end" 3
# Epoch 3's first batches may come before the table's search ends (the
# DataLoader's prefetch): the rest is predicted.
check "epoch 3 predicted: hit+miss >= $((per_epoch - 600))" \
    test "$((ep_hit + ep_miss))" -ge "$((per_epoch - 600))"
check "epoch 3: at most 1 % of the predicted opens missed ($ep_miss of $((ep_hit + ep_miss)))" \
    test "$((ep_miss * 100))" -le "$((ep_hit + ep_miss))"
check "unmount is clean" cfs_umount "$mnt"
cfs_finish
