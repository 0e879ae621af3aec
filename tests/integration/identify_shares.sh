# The share of each epoch's opens the mount predicted, from the metrics the
# trainer copied at each epoch's end (identify_trainer.py --epoch-snapshots
# PREFIX: PREFIX.0 .. PREFIX.E-1), sourced by the per-epoch tests.
#
# epoch_counts PREFIX E: sets ep_hit, ep_miss, ep_unplanned to epoch E's own
# (its end's counts less the last epoch's) and ep_gauge to
# clairfs_order_identified at its end.
epoch_counts() {
    local prefix=$1 e=$2 r
    local -A now=() before=()
    for r in hit miss unplanned; do
        now[$r]=$(awk -v k="clairfs_prediction_total{result=\"$r\"}" '$1 == k { print $2 }' "$prefix.$e")
        before[$r]=0
        [ "$e" -eq 0 ] ||
            before[$r]=$(awk -v k="clairfs_prediction_total{result=\"$r\"}" '$1 == k { print $2 }' \
                "$prefix.$((e - 1))")
    done
    ep_hit=$((${now[hit]:-0} - ${before[hit]:-0}))
    ep_miss=$((${now[miss]:-0} - ${before[miss]:-0}))
    ep_unplanned=$((${now[unplanned]:-0} - ${before[unplanned]:-0}))
    ep_gauge=$(awk '$1 == "clairfs_order_identified" { print $2 }' "$prefix.$e")
}

# epoch_shares PREFIX EPOCHS PER_EPOCH: one line an epoch, the share of its
# opens predicted (hits over its opens) and its counts.
epoch_shares() {
    local prefix=$1 epochs=$2 per=$3 e
    for e in $(seq 0 $((epochs - 1))); do
        epoch_counts "$prefix" "$e"
        awk -v e="$e" -v h="$ep_hit" -v m="$ep_miss" -v u="$ep_unplanned" -v p="$per" -v g="$ep_gauge" \
            'BEGIN { printf "epoch %d: %.1f %% of its %d opens predicted (hit %d, miss %d, " \
                     "unplanned %d), clairfs_order_identified %s at its end\n", e, 100 * h / p, p, h, m, u, g }'
    done
}
