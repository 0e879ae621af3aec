#!/usr/bin/env bash
# Identified means predicted: a reader whose first epoch fits a fresh
# generator's first randperm, each of whose epochs the mount predicts or
# counts.  torchdata's StatefulDataLoader(shuffle=True) (transcribed in
# tests/golden/library_samplers.py, driven by identify_trainer.py --kind
# torchdata) seeds its sampler's generator from one global draw and reads
# one randperm of it per epoch: without workers epoch 0 is identified as
# one epoch's order (predicted to its end, then the gauge falls), and the
# later epochs as that generator's stream; with two workers each epoch
# reads its generator's second randperm, and 2004 is no seed of the table
# the mount walks for that reader (identify_torchdata.c: test
# identify_libraries finds one that is), so nothing is identified and
# every open counts as unplanned.  The seed, 2004, is one whose
# global draw seeds the generator below 2^20, where the search starts (a
# few milliseconds).  Checked from the metrics the reader copies at each
# epoch's end:
#   - every open is counted once in clairfs_prediction_total (hit, miss or
#     unplanned): each epoch's three grow by its opens, nothing is silently
#     left out;
#   - at the end of an epoch the mount predicted nothing of (no hit), the
#     gauge clairfs_order_identified is 0; where it is 1, the epoch's opens
#     but its first batches were predicted, at most 1 % of them missed;
#   - a mount that predicts nothing at the end says in its stats which
#     one-epoch order ended; every byte equals the source's.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
. "$(dirname "$0")/identify_shares.sh"
identify_dataset

# run NAME WORKERS: the reader with WORKERS DataLoader workers on a fresh
# mount, and the checks above.
run() {
    local name=$1 workers=$2 mnt=$TMP/mnt-$1 pid rc=0 e opens per_epoch
    cfs_mount "$src" "$mnt" "$TMP/$name.daemon.log" -o ram=$ram,index="$TMP/index-$name" ||
        { fail "$name: mount"; return; }
    timeout 600 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind torchdata --seed 2004 \
        --epochs $EPOCHS --batch $BATCH --workers "$workers" --pause 5 \
        --epoch-snapshots "$TMP/$name.end" --log "$TMP/$name.rank0.log" &
    pid=$!
    cfs_pids+=($pid)
    wait "$pid" || rc=1
    check "$name: the reader ran its $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
    cat "$mnt/.clairfs/stats"
    grep -E 'identify:|order:' "$TMP/$name.daemon.log"
    opens=$(wc -l <"$TMP/$name.rank0.log")
    per_epoch=$((opens / EPOCHS))
    epoch_shares "$TMP/$name.end" "$EPOCHS" "$per_epoch"
    for e in $(seq 0 $((EPOCHS - 1))); do
        epoch_counts "$TMP/$name.end" "$e"
        check "$name: epoch $e: every open counted once ($((ep_hit + ep_miss + ep_unplanned)) of $per_epoch)" \
            test "$((ep_hit + ep_miss + ep_unplanned))" -eq "$per_epoch"
        [ "$ep_hit" -gt 0 ] ||
            check "$name: epoch $e: nothing predicted, the gauge says 0" test "$ep_gauge" = 0
        if [ "$ep_gauge" = 1 ]; then
            # identified in the epoch: its first batches before, the rest predicted
            check "$name: epoch $e: the gauge says 1, the epoch's opens predicted" \
                test "$((ep_hit + ep_miss))" -ge "$((per_epoch - 600))"
            check "$name: epoch $e: at most 1 % missed ($ep_miss of $((ep_hit + ep_miss)))" \
                test "$((ep_miss * 100))" -le "$((ep_hit + ep_miss))"
        fi
    done
    # Nothing predicted at the end: the stats say why.
    if [ "$(cfs_metric "$mnt" clairfs_order_identified)" = 0 ] &&
        grep -q "^order: *identified" "$mnt/.clairfs/stats"; then
        check "$name: the stats say which epoch's order ended and nothing is predicted since" \
            grep -Eq "^order: *identified .*\(epoch [0-9]+ only, ended\); not predicted from epoch [0-9]+ on" \
            "$mnt/.clairfs/stats"
    fi
    [ "$workers" -gt 0 ] ||
        check "$name: epoch 0 identified as one epoch's order" \
            grep -q "order: identified .* predicting it to the end of epoch 0 only" \
            "$TMP/$name.daemon.log"
    check "$name: unmount is clean" cfs_umount "$mnt"
}

# Without workers (the issue's reader), then with two (torchdata-workers:
# an epoch reads its generator's second randperm; 2004 is outside the table).
run torchdata 0
run torchdata-workers 2
cfs_finish
