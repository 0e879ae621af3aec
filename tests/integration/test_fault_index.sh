#!/usr/bin/env bash
# Faults in the LMDB index (index=DIR, here ssd_dir/index); every byte read
# is compared with the source (clairfs-bench --verify):
#  - 4 KiB of random bytes written into data.mdb between two mounts (at
#    8 KiB, the first page after the meta pages; at the middle; at the last
#    page), and data.mdb truncated to half: the next mount comes up, logs
#    one line saying the index is damaged and moved to INDEX.damaged, and
#    serves every byte right; the daemon never aborts (exit status 0 at
#    unmount, no core); INDEX.damaged holds one copy however often it
#    happens; the remount after the rebuild reuses the SSD tier again.
#  - the index on a small tmpfs that is filled during the mount: the SSD
#    tier's record commits fail, reads stay right, the failure is logged
#    once and counted in clairfs_index_write_errors_total, the unmount is
#    clean, and the next mount (space freed) comes up.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}" "${CLAIRFS_PFSEMU:?}"
cfs_setup
small=$TMP/small # a tmpfs: lib.sh's cleanup only knows FUSE mounts
trap 'mountpoint -q "$small" && umount -l "$small"; cfs_cleanup' EXIT
ulimit -c unlimited 2>/dev/null # a core, were one dumped, would be seen
cd "$TMP" || exit 1

cfs_ssd_fault_setup || cfs_finish
bench() { cfs_ssd_fault_bench "$@"; } # bench MNT [args]
m() { cfs_metric "$1" "$2"; }
no_crash() { # no_crash LOG
    ! grep -qiE "assert|abort|segmentation|sanitizer" "$1" && [ -z "$(find "$TMP" -maxdepth 2 -name 'core*' -type f)" ]
}
scribble() { # scribble FILE OFFSET SEED: 4 KiB of random bytes at OFFSET
    "$PYTHON" -c 'import random, sys
r = random.Random(int(sys.argv[3])); f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2]))
f.write(bytes(r.getrandbits(8) for _ in range(4096)))' "$@"
}

# --- a warm SSD tier and its index, kept as the pristine copy.
ssd=$TMP/ssd
mnt=$TMP/mnt
OPTS="$TRAINER,ram=0,ssd=64M,ssd_dir=$ssd"
if cfs_mount "$src" "$mnt" "$TMP/d0.log" -o "$OPTS"; then
    check "staged on SSD" cfs_wait_ssd "$mnt" "$TOTAL"
    check "first mount: epoch 0 verified" bench "$mnt" --epochs 1
    check "first mount: unmount" cfs_umount "$mnt"
else
    fail "first mount"
    cfs_finish
fi
cp -a "$ssd" "$TMP/ssd.good"
SIZE=$(stat -c %s "$ssd/index/data.mdb")
echo "data.mdb: $SIZE bytes"

# damaged NAME COMMAND...: restore the pristine tier, damage it with COMMAND,
# mount, verify, unmount.
damaged() {
    local name=$1 log=$TMP/$1.log
    shift
    rm -rf "$ssd/index" "$ssd/cache"
    cp -a "$TMP/ssd.good/index" "$TMP/ssd.good/cache" "$ssd/"
    "$@"
    if cfs_mount "$src" "$mnt" "$log" -o "$OPTS"; then
        check "$name: epoch 0 verified" bench "$mnt" --epochs 1
        check "$name: clean unmount" cfs_umount "$mnt"
        check "$name: one line says damaged and moved aside" \
            test "$(grep -c "index $ssd/index is damaged (.*): moved to $ssd/index.damaged, rebuilding" "$log")" -eq 1
        check "$name: no abort, no core" no_crash "$log"
        check "$name: the damaged copy kept" test -s "$ssd/index.damaged/data.mdb"
        check "$name: one copy only" test "$(find "$ssd" -maxdepth 1 -name 'index.damaged*' | wc -l)" -eq 1
        grep "is damaged" "$log"
    else
        fail "$name: mount"
    fi
}
damaged "random bytes at 8 KiB" scribble "$ssd/index/data.mdb" 8192 1
damaged "random bytes at the middle" scribble "$ssd/index/data.mdb" $((SIZE / 2 / 4096 * 4096)) 2
damaged "random bytes at the last page" scribble "$ssd/index/data.mdb" $((SIZE - 4096)) 3
damaged "data.mdb truncated" truncate -s $((SIZE / 2)) "$ssd/index/data.mdb"

# After the rebuild: a sound index again, the SSD tier warm at the next mount.
if cfs_mount "$src" "$mnt" "$TMP/after.log" -o "$OPTS"; then
    check "after the rebuild: staged" cfs_wait_ssd "$mnt" "$TOTAL"
    check "after the rebuild: epoch 0 verified" bench "$mnt" --epochs 1
    check "after the rebuild: unmount" cfs_umount "$mnt"
    check "after the rebuild: remount" cfs_mount "$src" "$mnt" "$TMP/after2.log" -o "$OPTS"
    check "after the rebuild: no damage found" eval '! grep -q "is damaged" "$TMP/after2.log"'
    check "after the rebuild: SSD entries reused" grep -q "($N SSD entries reused)" "$TMP/after2.log"
    check "after the rebuild: warm epoch 0 verified" bench "$mnt" --epochs 1
    check "after the rebuild: unmount 2" cfs_umount "$mnt"
else
    fail "mount after the rebuild"
fi

# --- the index on a tmpfs that fills up during the mount.
mkdir -p "$small"
if mount -t tmpfs -o size=4M,mode=0700 clairfs-test "$small" 2>"$TMP/tmpfs.err"; then
    ssd=$TMP/ssd-full
    mnt=$TMP/mnt-full
    OPTS="$TRAINER,ram=0,ssd=64M,ssd_dir=$ssd,index=$small/index"
    # Staged from a slow source (about 2.5 s for the dataset), so that the
    # tmpfs is full long before the last records are committed: from the
    # local copy the stager could commit them all before dd has run.
    pfs=$TMP/pfs
    cfs_pfsemu "$src" "$pfs" bandwidth=2M,latency_open=1ms || fail "pfsemu"
    if cfs_mount "$pfs" "$mnt" "$TMP/full.log" -o "$OPTS"; then
        dd if=/dev/zero of="$small/fill" bs=64k 2>/dev/null
        check "full index: staged" cfs_wait_ssd "$mnt" "$TOTAL"
        check "full index: 2 epochs verified" bench "$mnt"
        check "full index: record writes counted" \
            test "$(m "$mnt" clairfs_index_write_errors_total)" -ge 1
        check "full index: clean unmount" cfs_umount "$mnt"
        check "full index: logged once" \
            test "$(grep -c "writing the SSD tier's records failed" "$TMP/full.log")" -eq 1
        check "full index: no abort, no core" no_crash "$TMP/full.log"
        rm -f "$small/fill"
        check "full index: remount with room again" cfs_mount "$pfs" "$mnt" "$TMP/full2.log" -o "$OPTS"
        check "full index: remount verified" bench "$mnt" --epochs 1
        check "full index: unmount 2" cfs_umount "$mnt"
    else
        fail "mount with the index on a tmpfs"
    fi
    # Full before the mount, with no environment there yet: LMDB cannot even
    # make its lock file (a write through a mapping: SIGBUS unless its room
    # is taken first).  The catalog and the SSD tier serve unpersisted.
    rm -rf "$small/index" "$ssd"
    dd if=/dev/zero of="$small/fill" bs=64k 2>/dev/null
    if check "full before the mount: it mounts" cfs_mount "$src" "$mnt" "$TMP/full3.log" -o "$OPTS"; then
        check "full before the mount: 2 epochs verified" bench "$mnt"
        check "full before the mount: counted" \
            test "$(m "$mnt" clairfs_index_write_errors_total)" -ge 1
        check "full before the mount: the catalog served unstored, said once" \
            test "$(grep -c "serving without it (the next mount scans again)" "$TMP/full3.log")" -eq 1
        check "full before the mount: the SSD tier unpersisted, said once" \
            test "$(grep -c "the SSD tier serves without persisting" "$TMP/full3.log")" -eq 1
        check "full before the mount: clean unmount" cfs_umount "$mnt"
        check "full before the mount: no abort, no core" no_crash "$TMP/full3.log"
    fi
    rm -f "$small/fill"
    umount "$small"
else
    echo "cannot mount a tmpfs ($(cat "$TMP/tmpfs.err")): full-index case not run"
    fail "mount -t tmpfs"
fi

cfs_finish
