#!/usr/bin/env bash
# Identified means predicted: a reader whose first epoch fits a fresh
# generator's first randperm but whose later epochs fit nothing the mount
# knows.  torchdata's StatefulDataLoader(shuffle=True) (transcribed in
# tests/golden/library_samplers.py, driven by identify_trainer.py --kind
# torchdata, no DataLoader workers) seeds its sampler's generator from one
# global draw and reads one randperm of it per epoch: epoch 0 is identified
# as one epoch's order, epochs 1-3 are that generator's next randperms,
# which no fresh seed explains.  The trainer's seed, 2004, is one whose
# global draw seeds the generator below 2^20, where the search starts (a
# few milliseconds).  Checked from the metrics the trainer copies at each
# epoch's end:
#   - every open is counted once in clairfs_prediction_total (hit, miss or
#     unplanned): in each of epochs 1-3 the three grow by that epoch's
#     opens, nothing is silently left out;
#   - at the end of an epoch the mount predicted nothing of (no hit), the
#     gauge clairfs_order_identified is 0; where it is 1, that epoch's opens
#     were hits with at most 1 % missed;
#   - every byte equals the source's.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
identify_dataset

mnt=$TMP/mnt
cfs_mount "$src" "$mnt" "$TMP/daemon.log" -o ram=$ram,index="$TMP/index" ||
    { fail "mount"; cfs_finish; }
timeout 600 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind torchdata --seed 2004 \
    --epochs $EPOCHS --batch $BATCH --workers 0 --pause 5 --epoch-snapshots "$TMP/end" \
    --log "$TMP/rank0.log" &
pid=$!
cfs_pids+=($pid)
rc=0
wait "$pid" || rc=1
check "the trainer ran its $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
cat "$mnt/.clairfs/stats"
grep -E 'identify:|order:' "$TMP/daemon.log"

count() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
result() { count "$1" "clairfs_prediction_total{result=\"$2\"}"; }
opens=$(wc -l <"$TMP/rank0.log")
per_epoch=$((opens / EPOCHS))
check "epoch 0 identified as one epoch's order" \
    grep -q "order: identified .* predicting it to the end of epoch 0 only" "$TMP/daemon.log"
for e in $(seq 0 $((EPOCHS - 1))); do
    hit=$(result "$TMP/end.$e" hit) miss=$(result "$TMP/end.$e" miss)
    unplanned=$(result "$TMP/end.$e" unplanned)
    if [ "$e" -gt 0 ]; then
        p=$((e - 1))
        hit=$((hit - $(result "$TMP/end.$p" hit))) miss=$((miss - $(result "$TMP/end.$p" miss)))
        unplanned=$((unplanned - $(result "$TMP/end.$p" unplanned)))
    fi
    gauge=$(count "$TMP/end.$e" clairfs_order_identified)
    echo "epoch $e: $per_epoch opens; hit=$hit miss=$miss unplanned=$unplanned;" \
        "clairfs_order_identified $gauge at its end"
    check "epoch $e: every open counted once ($((hit + miss + unplanned)) of $per_epoch)" \
        test "$((hit + miss + unplanned))" -eq "$per_epoch"
    [ "$hit" -gt 0 ] || check "epoch $e: nothing predicted, the gauge says 0" test "$gauge" = 0
    if [ "$gauge" = 1 ]; then
        check "epoch $e: the gauge says 1, the epoch's opens were hits" \
            test "$((hit + miss))" -eq "$per_epoch"
        check "epoch $e: at most 1 % missed ($miss of $per_epoch)" \
            test "$((miss * 100))" -le "$per_epoch"
    fi
done
# Nothing predicted at the end: the gauge and the stats say so.
if [ "$(cfs_metric "$mnt" clairfs_order_identified)" = 0 ]; then
    check "the stats say epoch 0's order ended and nothing is predicted since" \
        grep -Eq "^order: *identified .*\(epoch 0 only, ended\); not predicted from epoch 1 on" \
        "$mnt/.clairfs/stats"
fi
check "unmount is clean" cfs_umount "$mnt"
cfs_finish
