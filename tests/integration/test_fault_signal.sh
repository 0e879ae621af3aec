#!/usr/bin/env bash
# Fault injection: SIGTERM with reads in flight.  The source is a
# slow clairfs-pfsemu (2 MB/s, 5 ms per read), so that when the daemon gets
# SIGTERM, fetches and FUSE reads are in flight.  Promised and checked:
#  - the daemon exits (status 0: a signal is a clean stop) within 20 s;
#  - the mount is gone (libfuse unmounts on the way out);
#  - the 8 reader threads all return within the bound (timeout 60 s):
#    each read gives the right bytes or an error (EIO, ENOTCONN,
#    ECONNABORTED, ECANCELED where the requests came over FUSE's io_uring:
#    the kernel ends those on a ring that goes away with it, or ENOENT once
#    the mount point is the empty directory again) — never wrong bytes;
#  - a remount of the same SSD tier serves everything correctly.
# (kill -9 during prefetch, then remount, is test_cache_tiers.sh's.)
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_PFSEMU:?}" "${READER_STRESS:?}"
cfs_setup

src=$TMP/src
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 4 --files 50 --size lognormal:40K:0.5 --seed 5 \
    "$src" || { fail "gendata"; cfs_finish; }
pfs=$TMP/pfs
cfs_pfsemu "$src" "$pfs" bandwidth=2M,latency_open=2ms,latency_read=5ms || fail "pfsemu"

mnt=$TMP/mnt
OPTS="seed=3,epochs=2,ram=1M,ssd=64M,ssd_dir=$TMP/ssd,io_depth=16"
if cfs_mount "$pfs" "$mnt" "$TMP/d1.log" -o "$OPTS"; then
    pid=$CFS_PID
    timeout 60 "$READER_STRESS" --threads 8 --epochs 2 \
        --tolerate EIO,ENOTCONN,ECONNABORTED,ECANCELED,ENOENT "$mnt" "$src" >"$TMP/readers.out" 2>&1 &
    readers=$!
    sleep 1.5
    check "reads in flight at SIGTERM" test "$(cfs_metric "$mnt" clairfs_fetch_bytes_total'{from="pfs"}')" -gt 0
    kill -TERM "$pid"
    gone=1
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || { gone=0; break; }; sleep 0.1; done
    check "daemon exited within 20 s of SIGTERM" test $gone -eq 0
    wait "$pid"
    check "daemon exit status 0" test $? -eq 0
    check "mount gone" eval '! cfs_is_mounted "$mnt"'
    wait "$readers"
    rrc=$?
    cat "$TMP/readers.out"
    check "readers returned in time, no wrong bytes, only the errors of a stop (rc $rrc)" test $rrc -eq 0
    check "the shutdown was logged" grep -q "unmounting\|terminat\|signal" "$TMP/d1.log"
    check "remount after SIGTERM" cfs_mount "$pfs" "$mnt" "$TMP/d2.log" -o "$OPTS"
    check "after the remount every byte right" \
        timeout 60 "$READER_STRESS" --threads 4 "$mnt" "$src"
    check "unmount" cfs_umount "$mnt"
else
    fail "mount"
fi
fusermount3 -u "$pfs"
cfs_finish
