#!/usr/bin/env bash
# The sweep with a RAM tier of half the dataset and no order known
# (nothing registered, no_identify), over the emulated PFS (4 MiB/s): a
# reader opens every file once in a random order, slower than the link, as
# an epoch does.  Once the free room is taken the sweep goes on by evicting
# files already read, never one not yet read, so the PFS keeps being used
# for it: most opens are RAM hits (far more than the free room holds), and
# no file is fetched twice (before the last open the PFS has served the
# dataset's bytes but the last file's, unless the sweep staged it; after
# it, the next pass may begin).  Every byte equals the source's.
. "$(dirname "$0")/lib.sh"

: "${CLAIRFS_PFSEMU:?CLAIRFS_PFSEMU must name clairfs-pfsemu}"
cfs_setup
src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
RAM=$((PAGES * 4096 / 2))
m() { cfs_metric "$1" "$2"; }

pfs=$TMP/pfs
cfs_pfsemu "$src" "$pfs" bandwidth=4M,latency_open=1ms || { fail "pfsemu"; cfs_finish; }
mnt=$TMP/mnt
if cfs_mount "$pfs" "$mnt" "$TMP/daemon.log" -o ram=$RAM,no_identify,index="$TMP/index"; then
    last=$(cfs_read_shuffled "$src" "$mnt" 0 $((N - 1))) ||
        fail "the first $((N - 1)) files equal the source's"
    state=inflight
    for _ in $(seq 100); do
        state=$(getfattr --only-values -n user.clairfs.state "$mnt/$last" 2>/dev/null)
        [ "$state" != inflight ] && break
        sleep 0.1
    done
    size=$(stat -c %s "$src/$last")
    want=$((TOTAL - size))
    [ "$state" = ram ] && want=$TOTAL
    got=$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
    echo "before the last open: the last file $state, $got PFS bytes, dataset $TOTAL"
    check "no file fetched twice ($got PFS bytes, $want expected)" test "$got" -eq "$want"
    cfs_read_shuffled "$src" "$mnt" $((N - 1)) "$N" >/dev/null || fail "the last file equals the source's"
    ram=$(m "$mnt" 'clairfs_reads_total{source="ram"}')
    pfsr=$(m "$mnt" 'clairfs_reads_total{source="pfs"}')
    echo "reads: $ram from RAM, $pfsr from the PFS, of $N; RAM tier $RAM bytes"
    check "every open counted once" test $((ram + pfsr)) -eq "$N"
    check "the sweep went on past the free room ($ram RAM hits of $N)" test "$ram" -ge $((N * 3 / 4))
    check "the RAM tier never over its bound" \
        test "$(m "$mnt" 'clairfs_cache_peak_bytes{tier="ram"}')" -le "$RAM"
    check "nothing predicted" test "$(m "$mnt" 'clairfs_prediction_total{result="hit"}')" -eq 0
    check "clean unmount" cfs_umount "$mnt"
else
    fail "mount"
fi
fusermount3 -u "$pfs"

cfs_finish
