#!/usr/bin/env bash
# Fault injection: a trainer that reads in another order than the mount's
# registered seed.  The mount serves trainer rank 0 of world=2
# with seed=5; the trainer's rank 0 replays seed=6 (and a mount without seed
# is the reactive baseline), over a clairfs-pfsemu source, RAM tier at half
# the dataset.  World 2, because the tracker's reordering window is at least
# 1024 opens: with world=1 and fewer files than that, any permutation of the
# epoch is "expected now" and no open can miss.  Checked:
#  - every byte right (clairfs-bench --verify);
#  - every open counted once as a prediction: hit + miss = files read; with
#    the wrong seed at least 10 % miss (files of rank 1's shard in both
#    planned epochs: ~25 % by chance), with the right seed none;
#  - no thrash: with the wrong seed each of the N opens costs at most one
#    fetch from the PFS (a miss) and each of the N planned reads at most
#    one (a prefetch), so at most 2N fetches: a file evicted and fetched
#    again and again would pass that.  (The wall time against the reactive
#    mount's is printed, not checked: a benchmark's figure.)
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}" "${CLAIRFS_PFSEMU:?}"
cfs_setup

src=$TMP/src
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 10 --files 30 --size lognormal:20K:0.5 --seed 8 \
    "$src" || { fail "gendata"; cfs_finish; }
N=300 # files rank 0 reads in 2 epochs of a 300-file dataset at world=2
TOTAL=$(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
RAM=$((TOTAL / 2))
pfs=$TMP/pfs
cfs_pfsemu "$src" "$pfs" bandwidth=16M,latency_open=1ms,latency_read=200us || fail "pfsemu"
m() { cfs_metric "$1" "$2"; }
# run NAME MOUNTOPTS: mount, replay seed=6 for 2 epochs verified; sets HIT,
# MISS, READS, FETCHES (from the PFS) and WALL (s)
run() {
    local name=$1 opts=$2 mnt=$TMP/mnt-$1
    cfs_mount "$pfs" "$mnt" "$TMP/d-$name.log" -o "$opts" || return 1
    "$CLAIRFS_BENCH" -o seed=6,world=2,epochs=2,batch=8 --rank 0 --workers 4 --csv --verify "$src" "$mnt" \
        >"$TMP/bench-$name.csv" 2>"$TMP/bench-$name.err" || { cat "$TMP/bench-$name.err" >&2; return 1; }
    HIT=$(m "$mnt" 'clairfs_prediction_total{result="hit"}')
    MISS=$(m "$mnt" 'clairfs_prediction_total{result="miss"}')
    READS=$(($(m "$mnt" 'clairfs_reads_total{source="ram"}') + $(m "$mnt" 'clairfs_reads_total{source="pfs"}')))
    FETCHES=$(m "$mnt" 'clairfs_fetches_total{from="pfs"}')
    WALL=$(awk -F, '$3 ~ /^[0-9]+$/ { s += $4 } END { printf "%.3f", s }' "$TMP/bench-$name.csv")
    cfs_umount "$mnt"
}

if run wrong "seed=5,world=2,ranks=0-0,epochs=2,batch=8,ram=$RAM,index=$TMP/ix1"; then
    echo "wrong seed: hit $HIT miss $MISS reads $READS PFS fetches $FETCHES wall ${WALL}s"
    check "wrong seed: every read counted once" test "$READS" -eq "$N"
    check "wrong seed: every open predicted or missed" test $((HIT + MISS)) -eq "$N"
    check "wrong seed: >= 10 % misses" test "$MISS" -ge $((N / 10))
    check "wrong seed: no thrash: $FETCHES PFS fetches <= 2 x $N" test "$FETCHES" -le $((2 * N))
    wrong_wall=$WALL
else
    fail "wrong-seed run (bytes or mount)"
fi
if run right "seed=6,world=2,ranks=0-0,epochs=2,batch=8,ram=$RAM,index=$TMP/ix2"; then
    echo "right seed: hit $HIT miss $MISS wall ${WALL}s"
    check "right seed: no miss" test "$MISS" -eq 0 -a "$HIT" -eq "$N"
else
    fail "right-seed run"
fi
if run reactive "ram=$RAM,index=$TMP/ix3"; then
    echo "reactive: PFS fetches $FETCHES wall ${WALL}s"
    check "reactive: nothing predicted" test $((HIT + MISS)) -eq 0
    echo "throughput wrong seed / reactive (a benchmark's figure, not checked):" \
        "$(awk -v r="$WALL" -v w="${wrong_wall:-0}" 'BEGIN { if (w > 0) printf "%.2fx", r / w }')"
else
    fail "reactive run"
fi
fusermount3 -u "$pfs"
cfs_finish
