#!/usr/bin/env bash
# Fault injection: source files modified, truncated or removed while mounted
# (suite faults).  The promise: a reader gets the old version it cached, or the
# new version in full, or a clear error — never a mix of old and new bytes.
#
# What the code does (the catalog, with its sizes and mtimes, is fixed for
# the life of a mount, and the kernel keeps attributes for a day; see
# "Exactness" in include/clairfs/prefetch.h):
#  - a file already in a tier: the cached (old) version, whole, until the
#    tier drops it (its checksum and length are those of the fetched bytes);
#  - not cached and changed (same size new bytes, shrunk, truncated to 0,
#    grown): the fetch reports the file's size and mtime after its last
#    read, they differ from the catalog's, the bytes are not published and
#    the open fails with ESTALE; the direct-read fallback checks the opened
#    fd the same way (a grown file was once served as a prefix of the new
#    version: the kernel reads only the catalog's size).  Each changed file
#    is logged once and counted in clairfs_source_changed_total;
#  - removed: open fails with ENOENT (after the fetch failed), logged once;
#  - rewritten in place, same size, while a fetch reads it (a slow source,
#    file > CFS_IO_CHUNK): the fetch's stat after its last read shows the
#    new mtime, the mix is neither served nor persisted (RAM and SSD
#    tiers), the waiting reader gets ESTALE.  A same-size rewrite within
#    one timestamp tick of the scan stays invisible: the README says that
#    datasets must not be modified in place under a mount;
#  - between mounts, rewritten in place with the same size (no directory
#    mtime changes, so the stored catalog is reused): an SSD entry made
#    before is still served — the old version, whole (consistent, but
#    stale); `-o rescan` picks up the new mtime, drops the entry as stale
#    and serves the new version.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_PFSEMU:?}"
cfs_setup

src=$TMP/src
mkdir -p "$src/c0"
mk() { head -c "$2" /dev/urandom >"$1"; }
for f in cached same shrink zero grow gone gonecached; do mk "$src/c0/$f.jpg" 100000; done
cp -a "$src" "$TMP/old"

# stale MNTFILE: reading fails with ESTALE and gives no byte.
stale() {
    local n
    n=$(cat "$1" 2>"$TMP/stale.err" | wc -c)
    grep -q "Stale file handle" "$TMP/stale.err" && [ "$n" -eq 0 ]
}
# Through a pipe: cmp -s of two regular files of different st_size answers
# "differ" without reading, and the mount reports the catalog's size until
# a read shows the file shorter.
same() { cat "$1" 2>/dev/null | cmp -s - "$2"; }
# read_is MNTFILE OLD NEW: the read gives OLD whole, NEW whole, or fails.
old_new_or_error() {
    local out=$TMP/read.out
    if ! cat "$1" >"$out" 2>"$TMP/read.err"; then
        echo "  read failed: $(cat "$TMP/read.err")"
        return 0
    fi
    same "$out" "$2" && { echo "  got the old version"; return 0; }
    same "$out" "$3" && { echo "  got the new version"; return 0; }
    echo "  got $(stat -c %s "$out") bytes: neither version" >&2
    return 1
}

mnt=$TMP/mnt
# no_sweep: files stay uncached until read (the cases below need both kinds).
if cfs_mount "$src" "$mnt" "$TMP/d1.log" -o ram=64M,no_sweep,index="$TMP/ix1"; then
    check "cached file read" same "$mnt/c0/cached.jpg" "$TMP/old/c0/cached.jpg"
    cat "$mnt/c0/gonecached.jpg" >/dev/null
    check "cached file is in RAM" test "$(getfattr --only-values -n user.clairfs.state "$mnt/c0/cached.jpg" 2>/dev/null)" = ram

    mk "$src/c0/cached.jpg" 100000
    check "cached, rewritten: the cached old version, whole" same "$mnt/c0/cached.jpg" "$TMP/old/c0/cached.jpg"

    mk "$src/c0/same.jpg" 100000
    check "not cached, same size, new bytes: ESTALE" stale "$mnt/c0/same.jpg"
    check "... and again (no refetch needed to say so)" stale "$mnt/c0/same.jpg"

    mk "$src/c0/shrink.jpg" 40000
    check "not cached, shrunk: ESTALE" stale "$mnt/c0/shrink.jpg"

    : >"$src/c0/zero.jpg"
    check "not cached, truncated to 0: ESTALE" stale "$mnt/c0/zero.jpg"

    mk "$src/c0/grow.jpg" 150000
    check "not cached, grown: ESTALE, never a prefix" stale "$mnt/c0/grow.jpg"
    check "4 changed files counted" \
        test "$(cfs_metric "$mnt" clairfs_source_changed_total)" -eq 4
    check "each changed file logged once" \
        test "$(grep -c 'changed under the mount' "$TMP/d1.log")" -eq 4

    rm "$src/c0/gone.jpg"
    check "not cached, removed: open fails" eval '! cat "$mnt/c0/gone.jpg" >/dev/null 2>&1'
    check "removed: the error is ENOENT" grep -q "No such file" <(cat "$mnt/c0/gone.jpg" 2>&1)
    rm "$src/c0/gonecached.jpg"
    check "cached, removed: the cached version" same "$mnt/c0/gonecached.jpg" "$TMP/old/c0/gonecached.jpg"
    check "the failed open is logged once" test "$(grep -c 'cannot open.*gone.jpg' "$TMP/d1.log")" -eq 1
    check "unmount" cfs_umount "$mnt"
else
    fail "mount"
fi

# --- in-place same-size rewrite while a fetch reads the file (slow source).
big=$TMP/bigsrc
mkdir -p "$big/c0"
mk "$big/c0/big.jpg" 12000000
cp "$big/c0/big.jpg" "$TMP/big.old"
mk "$TMP/big.new" 12000000
pfs=$TMP/pfs
cfs_pfsemu "$big" "$pfs" bandwidth=6M,latency_open=1ms || fail "pfsemu"
mnt=$TMP/mnt2
if cfs_mount "$pfs" "$mnt" "$TMP/d2.log" -o ram=64M,no_sweep,index="$TMP/ix2"; then
    (cat "$mnt/c0/big.jpg" >"$TMP/big.got" 2>"$TMP/big.err") &
    reader=$!
    # The fetch takes ~2 s at 6 MB/s: rewrite once it is surely reading
    # (in flight, plus time for its first reads), long before it ends.
    for _ in $(seq 200); do
        [ "$(getfattr --only-values -n user.clairfs.state "$mnt/c0/big.jpg" 2>/dev/null)" = inflight ] && break
        sleep 0.05
    done
    sleep 0.4
    dd if="$TMP/big.new" of="$big/c0/big.jpg" conv=notrunc bs=1M status=none
    timeout 60 tail --pid=$reader -f /dev/null
    check "rewritten during the fetch: the waiting reader got ESTALE, no byte" \
        eval 'grep -q "Stale file handle" "$TMP/big.err" && [ ! -s "$TMP/big.got" ]'
    check "rewritten during the fetch: old or new version, never a mix" \
        old_new_or_error "$mnt/c0/big.jpg" "$TMP/big.old" "$TMP/big.new"
    check "the change is counted" test "$(cfs_metric "$mnt" clairfs_source_changed_total)" -eq 1
    check "unmount 2" cfs_umount "$mnt"
else
    fail "mount over pfsemu"
fi

# --- the same while the prefetcher stages the file into the SSD tier: the
# mix must not be persisted either.
cp "$TMP/big.old" "$big/c0/big.jpg"
mk "$TMP/big.new" 12000000
mnt=$TMP/mnt2b
OPTS2="ram=0,ssd=64M,ssd_dir=$TMP/ssd2,index=$TMP/ix2b,seed=1,epochs=1"
if cfs_mount "$pfs" "$mnt" "$TMP/d2b.log" -o "$OPTS2"; then
    for _ in $(seq 200); do
        [ "$(getfattr --only-values -n user.clairfs.state "$mnt/c0/big.jpg" 2>/dev/null)" = inflight ] && break
        sleep 0.05
    done
    sleep 0.4
    dd if="$TMP/big.new" of="$big/c0/big.jpg" conv=notrunc bs=1M status=none
    for _ in $(seq 400); do
        [ "$(cfs_metric "$mnt" clairfs_source_changed_total)" -ge 1 ] && break
        sleep 0.05
    done
    check "staged during a rewrite: the change is counted" \
        test "$(cfs_metric "$mnt" clairfs_source_changed_total)" -eq 1
    check "staged during a rewrite: old or new version, never a mix" \
        old_new_or_error "$mnt/c0/big.jpg" "$TMP/big.old" "$TMP/big.new"
    check "staged during a rewrite: no SSD entry" \
        test "$(find "$TMP/ssd2/cache" -type f 2>/dev/null | wc -l)" -eq 0
    check "unmount 2b" cfs_umount "$mnt"
else
    fail "mount over pfsemu with SSD"
fi
fusermount3 -u "$pfs"

# --- between mounts: an SSD entry, then an in-place rewrite of its source.
rm -rf "$src" && mkdir -p "$src/c0"
for i in 0 1 2 3; do mk "$src/c0/f$i.jpg" 50000; done
mnt=$TMP/mnt3
OPTS="ram=0,ssd=16M,ssd_dir=$TMP/ssd,index=$TMP/ix3,seed=1,epochs=2"
if cfs_mount "$src" "$mnt" "$TMP/d3.log" -o "$OPTS"; then
    for _ in $(seq 200); do
        [ "$(cfs_metric "$mnt" 'clairfs_cache_bytes{tier="ssd"}')" -ge 200000 ] && break
        sleep 0.05
    done
    check "4 entries staged on SSD" test "$(find "$TMP/ssd/cache" -type f | wc -l)" -eq 4
    check "unmount 3" cfs_umount "$mnt"
    cp "$src/c0/f0.jpg" "$TMP/f0.old"
    # In place: the directory's mtime does not change.
    mk "$TMP/f0.new" 50000
    dd if="$TMP/f0.new" of="$src/c0/f0.jpg" conv=notrunc bs=64K status=none
    check "remount (stored catalog)" cfs_mount "$src" "$mnt" "$TMP/d4.log" -o "$OPTS"
    check "rewritten between mounts: old or new version, whole" \
        old_new_or_error "$mnt/c0/f0.jpg" "$TMP/f0.old" "$TMP/f0.new"
    check "unmount 4" cfs_umount "$mnt"
    check "remount with rescan" cfs_mount "$src" "$mnt" "$TMP/d5.log" -o "$OPTS,rescan"
    check "rescan: the new version" same "$mnt/c0/f0.jpg" "$TMP/f0.new"
    check "rescan: only the stale entry refetched" \
        test "$(cfs_metric "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')" -eq 50000
    check "unmount 5" cfs_umount "$mnt"
else
    fail "mount with SSD"
fi

cfs_finish
