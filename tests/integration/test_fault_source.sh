#!/usr/bin/env bash
# Fault injection: source files modified, truncated or removed while mounted
# (issue 7).  The promise: a reader gets the old version it cached, or the
# new version in full, or a clear error — never a mix of old and new bytes.
#
# What the code does (found by these checks; the catalog, with its sizes and
# mtimes, is fixed for the life of a mount and the kernel keeps attributes
# for a day):
#  - a file already in a tier: the cached (old) version, whole, until the
#    tier drops it (its checksum and length are those of the fetched bytes);
#  - not cached, rewritten with the same size: fetched, the new version;
#  - not cached, shrunk or truncated to 0: the fetch is refused (length !=
#    the catalog's size: -EIO in cache.c finish), the open falls back to
#    the source and the kernel cuts i_size at the short read: the new
#    version in full;
#  - removed: open fails with ENOENT (after the fetch failed), logged once;
#  - KNOWN BUG (xfail below): not cached, grown: the fetch fails with
#    -EFBIG, the open falls back to reading the source directly
#    (src/prefetch.c:683), and the kernel, which still has the catalog's
#    size, reads only that many bytes: a prefix of the new version, no
#    error.  Fix: after the direct openat, fstat the fd and answer -ESTALE
#    when st_size/st_mtim differ from the catalog entry.
#  - KNOWN BUG (xfail below): rewritten in place, same size, while a fetch
#    reads it (a slow source, file > CFS_IO_CHUNK): the fetch returns old
#    bytes then new bytes, the length matches, the mix is checksummed and
#    served (and persisted).  Nothing protects this case: the io engine
#    does not compare the file's (size, mtime, ctime) before and after the
#    read.  Fix: fstat/statx the source before the first and after the last
#    read of a whole-file fetch (threads: fstat the fd; io_uring: a STATX
#    SQE on the path before the open and after the read), fail with -ESTALE
#    (and let the caller refetch once) when they differ.  A same-size
#    rewrite within one timestamp tick is invisible even to that; the
#    README should say that datasets must not be rewritten in place under
#    a mount.
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

# xcheck DESCRIPTION COMMAND...: a check that a known bug makes fail.  Its
# failure is reported as XFAIL; its success as a failure (XPASS: the bug is
# fixed, remove the mark), so the check can fail either way.
xcheck() {
    local what=$1
    shift
    if "$@"; then
        fail "XPASS (known bug fixed? make it a plain check): $what"
    else
        echo "xfail: $what"
    fi
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
if cfs_mount "$src" "$mnt" "$TMP/d1.log" -o ram=64M,index="$TMP/ix1"; then
    check "cached file read" same "$mnt/c0/cached.jpg" "$TMP/old/c0/cached.jpg"
    cat "$mnt/c0/gonecached.jpg" >/dev/null
    check "cached file is in RAM" test "$(getfattr --only-values -n user.clairfs.state "$mnt/c0/cached.jpg" 2>/dev/null)" = ram

    mk "$src/c0/cached.jpg" 100000
    check "cached, rewritten: the cached old version, whole" same "$mnt/c0/cached.jpg" "$TMP/old/c0/cached.jpg"

    mk "$src/c0/same.jpg" 100000
    check "not cached, same size, new bytes: the new version" same "$mnt/c0/same.jpg" "$src/c0/same.jpg"

    mk "$src/c0/shrink.jpg" 40000
    check "not cached, shrunk: the new version in full" same "$mnt/c0/shrink.jpg" "$src/c0/shrink.jpg"

    : >"$src/c0/zero.jpg"
    check "not cached, truncated to 0: empty" same "$mnt/c0/zero.jpg" "$src/c0/zero.jpg"

    mk "$src/c0/grow.jpg" 150000
    xcheck "not cached, grown: the new version in full or an error" \
        old_new_or_error "$mnt/c0/grow.jpg" "$TMP/old/c0/grow.jpg" "$src/c0/grow.jpg"

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
mkdir -p "$pfs"
"$CLAIRFS_PFSEMU" -f -o bandwidth=6M,latency_open=1ms "$big" "$pfs" >"$TMP/pfsemu.log" 2>&1 &
cfs_pids+=("$!")
cfs_mounts+=("$pfs")
for _ in $(seq 100); do cfs_is_mounted "$pfs" && break; sleep 0.05; done
mnt=$TMP/mnt2
if cfs_mount "$pfs" "$mnt" "$TMP/d2.log" -o ram=64M,index="$TMP/ix2"; then
    (cat "$mnt/c0/big.jpg" >"$TMP/big.got" 2>/dev/null) &
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
    xcheck "rewritten during the fetch: old or new version, never a mix" \
        old_new_or_error "$mnt/c0/big.jpg" "$TMP/big.old" "$TMP/big.new"
    check "unmount 2" cfs_umount "$mnt"
else
    fail "mount over pfsemu"
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
