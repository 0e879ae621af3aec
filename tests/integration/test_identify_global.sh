#!/usr/bin/env bash
# A torch-global trainer learned from its seed alone.  The mount gets only
# seed=S (the default kind; nothing of rng_offset or rng_epoch_words) and a
# real trainer (identify_trainer.py --kind torch-global: torch.manual_seed(S),
# a small torch.nn model built, so K > 0, its CPU Dropout run each step, so
# G > 0, DataLoader(shuffle=True) without a generator, num_workers=2, 4
# epochs, a pause after epoch 0 until the mount says it identified the
# order, each step 40 ms longer, the wait for a GPU's step).  The mount must
# find K from epoch 0's opens, then G from epoch 1's, and adopt
# torch-global.  G is known only 32 opens into epoch 1 plus the walk to it
# (G = 384000 here: ~0.1 s of an idle core), and that epoch is mispredicted
# until then: the trainer pauses at its 4th batch of epoch 1 until the
# stats name G (--wait-order), so that the opens mispredicted are those
# 4 batches and its workers' prefetch, within the 1 % below, however the
# host's cores are shared.
#   - clairfs_order_identified 1, the stats say "identified torch-global
#     seed=S rng_offset=K rng_epoch_words=G" with K > 0 and G > 0;
#   - from epoch 1 on (the counters the trainer copied when it resumed,
#     subtracted) at least 3 epochs of opens predicted and at most 1 % of
#     them missed (epoch 0 was predicted with the registered torch-ddp);
#   - every byte the trainer got equal to the source's.
# It trains below a dataset root with the validation pass beside it, as
# test_identify_roots.sh's trainers: ImageFolder(MNT/train) of real JPEG
# files decoded with PIL (identify_jpeg_dataset), the classification
# reference's evaluate() over ImageFolder(MNT/val) after every epoch (its
# fresh DataLoader draws its base seed from the global generator: words of
# G too).  The stats name the root (`identified train: torch-global ...`),
# and the validation pass is checked as there (identify_validation_checks:
# named, its passes of epochs 1-3 predicted hits, none of its opens a
# training hit or miss, no file read from the source twice, the training
# order never dropped).
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds the trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
identify_jpeg_dataset
SEED=4242

global_trainer_run "seed=$SEED" 900 $SEED "${ROOT_ARGS[@]}" --snapshot "$TMP/resumed.metrics" \
    --step-seconds 0.04 --slow-steps 50 --wait-order 'rng_epoch_words=[0-9]' --wait-order-at 1:4
predicted_since "$mnt" "$TMP/resumed.metrics"
echo "$opens opens, $per_epoch per epoch; from epoch 1: predicted hit=$hit miss=$miss"
check "clairfs_order_identified 1" test "$(cfs_metric "$mnt" clairfs_order_identified)" = 1
line=$(grep '^order:' "$mnt/.clairfs/stats")
k=$(sed -n 's/.* rng_offset=\([0-9]*\) .*/\1/p' <<<"$line")
g=$(sed -n 's/.* rng_epoch_words=\([0-9]*\) .*/\1/p' <<<"$line")
check "the stats say identified train: torch-global seed=$SEED with K and G" \
    grep -Eq "^order: *identified train: torch-global seed=$SEED rng_offset=[0-9]+ rng_epoch_words=[0-9]+ " \
    "$mnt/.clairfs/stats"
check "K > 0 (the model's initialisation): K=$k" test "${k:-0}" -gt 0
check "G > 0 (the dropout): G=$g" test "${g:-0}" -gt 0
check "epochs 1-$((EPOCHS - 1)) predicted: hit+miss >= $((3 * per_epoch))" \
    test "$((hit + miss))" -ge "$((3 * per_epoch))"
check "at most 1 % of the predicted opens missed ($miss of $((hit + miss)))" \
    test "$((miss * 100))" -le "$((hit + miss))"
identify_validation_checks global "$mnt" 1 "$TMP/rank" "$TMP/resumed.metrics" "$TMP/daemon.log" \
    registered
check "unmount is clean" cfs_umount "$mnt"
cfs_finish
