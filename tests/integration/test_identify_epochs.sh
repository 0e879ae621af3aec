#!/usr/bin/env bash
# A torch-global trainer with nothing registered, not even its seed: every
# epoch reads the first randperm of a private generator seeded by a draw
# from the global one, so each epoch is learnt from its own first opens
# (identify.h).  The trainer (identify_trainer.py --kind torch-global, 4
# epochs, num_workers=2, 40 ms a step) pauses after epoch 0 until the mount
# has identified it, and from epoch 1 on after each epoch's first batch
# until the mount names that epoch's private seed: an epoch long enough for
# a search of the 2^32 seeds (about 1-2 minutes of one core here; an
# ImageNet epoch lasts far longer).  The trainer's seed, 101469, is one
# whose four epochs draw private seeds below 0.09 * 2^32, where the search,
# which runs upwards from 0, comes first: the same search, a tenth of the
# wait; it is outside the table of seeds people use (src/rng_table.c), as
# a trainer's that never calls torch.manual_seed is (torch seeds itself
# from the OS), so the run's seed is not found and every epoch is learnt
# alone.  Each epoch's share of its opens predicted is printed (from the
# metrics the trainer copies at each epoch's end).
#   - the stats say "identified torch-global (no seed registered) epoch 3's
#     private seed=... (epoch 3 only, ended)", clairfs_order_identified 1
#     once epoch 1's order is named and 0 after the last epoch (its order
#     ended with it);
#   - the log names epochs 1, 2 and 3 each identified from its own opens;
#   - from epoch 1's identification on (the counters the trainer copied
#     then, subtracted): the rest of epochs 1-3 predicted (each epoch's
#     first batches before its identification are not: no order is in
#     force there) and at most 1 % of the predicted opens missed;
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

global_trainer_run "" 1500 101469 --pause-epochs --snapshot "$TMP/epoch1.metrics" \
    --epoch-snapshots "$TMP/end" --step-seconds 0.04 --slow-steps 50
predicted_since "$mnt" "$TMP/epoch1.metrics"
echo "$opens opens, $per_epoch per epoch; from epoch 1's identification: hit=$hit miss=$miss"
epoch_shares "$TMP/end" "$EPOCHS" "$per_epoch"
check "the run's seed is not claimed: epochs 0-2 follow from no seed of the table" \
    grep -q "identify: torch-global (no seed registered): the private seeds of epochs 0-2 follow from none of the 1036 seeds people use" \
    "$TMP/daemon.log"
check "clairfs_order_identified 1 once epoch 1's order was named" \
    test "$(awk '$1 == "clairfs_order_identified" { print $2 }' "$TMP/epoch1.metrics")" = 1
# The last epoch's order ended with it: nothing is predicted now.
check "clairfs_order_identified 0 after the last epoch" \
    test "$(cfs_metric "$mnt" clairfs_order_identified)" = 0
check "the stats say identified torch-global epoch 3's private seed, ended with its epoch" \
    grep -Eq "^order: *identified torch-global \(no seed registered\) epoch 3's private seed=[0-9]+ .*\(epoch 3 only, ended\)" \
    "$mnt/.clairfs/stats"
for e in 1 2 3; do
    check "epoch $e identified from its own opens" \
        grep -q "identify: torch-global (no seed registered) epoch $e's private seed=" "$TMP/daemon.log"
done
# Each epoch's first batches come before its search ends (at most a few
# hundred opens of the DataLoader's prefetch): the rest is predicted.
check "the rest of epochs 1-3 predicted: hit+miss >= $((3 * per_epoch - 600))" \
    test "$((hit + miss))" -ge "$((3 * per_epoch - 600))"
check "at most 1 % of the predicted opens missed ($miss of $((hit + miss)))" \
    test "$((miss * 100))" -le "$((hit + miss))"
check "unmount is clean" cfs_umount "$mnt"
cfs_finish
