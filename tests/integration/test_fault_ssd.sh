#!/usr/bin/env bash
# Fault injection on the SSD tier and its LMDB index; every byte
# read is compared with the source (clairfs-bench --verify):
#  - entries damaged during a mount (one truncated, one with a flipped byte,
#    one deleted): the first two are caught at open (length, xxh3) and
#    counted in clairfs_cache_checksum_failures_total, the deleted one is
#    simply absent; all three are read from the source.  (A byte flipped
#    between mounts is test_cache_tiers.sh's.)
#  - an entry truncated between mounts: recovery drops it (its file no
#    longer has the recorded length), it is refetched, the rest is warm.
#  - ssd_dir on a 2 MiB tmpfs with ssd=16M, ram=1M (and the index on it
#    too): the first failed write degrades the tier, one log line, every
#    byte still right (what the tier holds, the RAM tier and the source
#    serve), the daemon unmounts cleanly.
#  - the LMDB map starting at 64 KiB (CLAIRFS_INDEX_MAPSIZE, test-only): the
#    catalog and the cache records do not fit, the map grows (data.mdb ends
#    far above 64 KiB), the records persist: a remount serves from SSD.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}"
cfs_setup
small=$TMP/small # a tmpfs: lib.sh's cleanup only knows FUSE mounts
trap 'mountpoint -q "$small" && umount -l "$small"; cfs_cleanup' EXIT

cfs_ssd_fault_setup || cfs_finish
bench() { cfs_ssd_fault_bench "$@"; } # bench MNT [args]
m() { cfs_metric "$1" "$2"; }

# --- damaged entries during a mount.
ssd=$TMP/ssd
mnt=$TMP/mnt
OPTS="$TRAINER,ram=0,ssd=64M,ssd_dir=$ssd"
if cfs_mount "$src" "$mnt" "$TMP/d1.log" -o "$OPTS"; then
    check "staged on SSD" cfs_wait_ssd "$mnt" "$TOTAL"
    mapfile -t ents < <(find "$ssd/cache" -type f | sort | head -3)
    truncate -s 100 "${ents[0]}"
    "$PYTHON" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(7); b = f.read(1); f.seek(7); f.write(bytes([b[0] ^ 0x40]))' "${ents[1]}"
    rm "${ents[2]}"
    check "damaged entries: epoch 0 verified" bench "$mnt" --epochs 1
    check "truncated + flipped counted" test "$(m "$mnt" clairfs_cache_checksum_failures_total)" -eq 2
    check "three reads from the source" test "$(m "$mnt" 'clairfs_reads_total{source="pfs"}')" -eq 3
    check "the rest from SSD" test "$(m "$mnt" 'clairfs_reads_total{source="ssd"}')" -eq $((N - 3))
    check "unmount" cfs_umount "$mnt"
else
    fail "mount 1"
fi

# --- an entry truncated between mounts.
K=$(find "$ssd/cache" -type f | wc -l)
victim=$(find "$ssd/cache" -type f | sort | tail -1)
truncate -s 10 "$victim"
if cfs_mount "$src" "$mnt" "$TMP/d2.log" -o "$OPTS"; then
    check "after a truncated entry: epoch 0 verified" bench "$mnt" --epochs 1
    check "no checksum failure (recovery dropped it first)" \
        test "$(m "$mnt" clairfs_cache_checksum_failures_total)" -eq 0
    check "the other $((K - 1)) entries reused" grep -q "($((K - 1)) SSD entries reused)" "$TMP/d2.log"
    check "unmount 2" cfs_umount "$mnt"
else
    fail "mount 2"
fi

# --- ssd_dir (and the index) on a full 2 MiB tmpfs, ssd=16M.
mkdir -p "$small"
if mount -t tmpfs -o size=2M,mode=0700 clairfs-test "$small" 2>"$TMP/tmpfs.err"; then
    mnt=$TMP/mnt-full
    if cfs_mount "$src" "$mnt" "$TMP/d3.log" -o "$TRAINER,ram=1M,ssd=16M,ssd_dir=$small/ssd"; then
        check "full SSD: 2 epochs verified" bench "$mnt"
        check "full SSD: every read served" \
            test $(($(m "$mnt" 'clairfs_reads_total{source="ram"}') + $(m "$mnt" 'clairfs_reads_total{source="ssd"}') + $(m "$mnt" 'clairfs_reads_total{source="pfs"}'))) -eq $((2 * N))
        check "full SSD: SSD tier within the tmpfs" \
            test "$(m "$mnt" 'clairfs_cache_bytes{tier="ssd"}')" -le $((2 << 20))
        check "full SSD: still serving after the bench" cmp -s "$mnt/$(cd "$src" && find . -type f | head -1)" "$src/$(cd "$src" && find . -type f | head -1)"
        check "full SSD: clean unmount" cfs_umount "$mnt"
        check "full SSD: the write failure logged once" \
            test "$(grep -c 'SSD tier: writing an entry failed (No space left on device)' "$TMP/d3.log")" -eq 1
        check "full SSD: nothing else went wrong" eval '! grep -qiE "assert|abort|segfault|sanitizer" "$TMP/d3.log"'
    else
        fail "mount with a full ssd_dir"
    fi
    umount "$small"
else
    echo "cannot mount a tmpfs ($(cat "$TMP/tmpfs.err")): full-SSD case not run"
    fail "mount -t tmpfs"
fi

# --- the LMDB map starting at 64 KiB.
ssd=$TMP/ssd-map
mnt=$TMP/mnt-map
OPTS="$TRAINER,ram=0,ssd=64M,ssd_dir=$ssd"
export CLAIRFS_INDEX_MAPSIZE=65536
if cfs_mount "$src" "$mnt" "$TMP/d4.log" -o "$OPTS"; then
    check "tiny map: staged" cfs_wait_ssd "$mnt" "$TOTAL"
    check "tiny map: epoch 0 verified" bench "$mnt" --epochs 1
    check "tiny map: unmount" cfs_umount "$mnt"
    size=$(stat -c %s "$ssd/index/data.mdb")
    echo "tiny map: data.mdb is $size bytes"
    check "tiny map: the map grew past 64 KiB" test "$size" -gt 65536
    check "tiny map: remount" cfs_mount "$src" "$mnt" "$TMP/d5.log" -o "$OPTS"
    check "tiny map: warm epoch 0 verified" bench "$mnt" --epochs 1
    check "tiny map: every record persisted (all reads from SSD)" \
        test "$(m "$mnt" 'clairfs_reads_total{source="ssd"}')" -eq $N
    check "tiny map: unmount 2" cfs_umount "$mnt"
else
    fail "mount with a 64 KiB map"
fi
unset CLAIRFS_INDEX_MAPSIZE

cfs_finish
