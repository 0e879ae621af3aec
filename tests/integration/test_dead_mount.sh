#!/usr/bin/env bash
# A dead mount point: a daemon killed with SIGKILL leaves its FUSE mount in
# the table with no one to answer it (every access fails with ENOTCONN).
# The next clairfs on it names it in one line with the fix, exits non-zero
# and leaves it as it is; with -o reclaim it detaches it and mounts in its
# place, so that a job script's retry works.  Only a dead FUSE mount is
# reclaimed: a live mount stays an error (also one whose daemon is stopped
# and answers nothing), and reclaim on a plain directory is an ordinary
# mount.
. "$(dirname "$0")/lib.sh"
cfs_setup

src=$TMP/src
mnt=$TMP/mnt
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 3 --files 10 --size 8K "$src" || fail "gendata"

# Dead mounts are unmounted lazily at exit, before lib.sh's cleanup.
dead_cleanup() {
    local m
    for m in "$mnt" "$TMP/empty-mnt"; do
        while cfs_is_mounted "$m"; do fusermount3 -u -z "$m" 2>/dev/null || break; done
    done
    cfs_cleanup
}
trap dead_cleanup EXIT

# refuse DESCRIPTION EXPECTED-TEXT clairfs-args...: non-zero exit, exactly
# one stderr line holding the text, the mounts on $mnt unchanged.
refuse() {
    local what=$1 want=$2
    shift 2
    cfs_refuse "$what" "$want" "$mnt" "$@"
}

# stat_error PATH: the error stat reports (empty when it succeeds).
stat_error() {
    "$PYTHON" -c '
import os, sys
try:
    os.stat(sys.argv[1]); os.statvfs(sys.argv[1]); os.listdir(sys.argv[1])
except OSError as e:
    print(os.strerror(e.errno))' "$1"
}

# dies_within PATH: the mount answers ENOTCONN within 5 s.  A daemon
# killed while its requests came over FUSE's io_uring ends its connection
# a moment after its exit, once the kernel has torn its ring down.
dies_within() {
    for _ in $(seq 100); do
        [ "$(stat_error "$1")" = "Transport endpoint is not connected" ] && return 0
        sleep 0.05
    done
    return 1
}

# every_byte_right: every file of the source reads back equal through $mnt.
every_byte_right() {
    (cd "$src" && find . -type f) | while read -r f; do
        cmp -s "$src/$f" "$mnt/$f" || { echo "differs: $f" >&2; exit 1; }
    done
}

# --- a daemon killed with SIGKILL leaves a dead mount.
if cfs_mount "$src" "$mnt" "$TMP/first.log" -o index="$TMP/index"; then
    check "the first mount serves" every_byte_right
    kill -KILL "$CFS_PID"
    wait "$CFS_PID" 2>/dev/null
    check "after SIGKILL the mount is still in the table" cfs_is_mounted "$mnt"
    check "... and dead: ENOTCONN" dies_within "$mnt"
else
    fail "first mount"
fi

refuse "dead mount, no reclaim: one line with the fix" \
    "mountpoint $mnt: a dead FUSE mount (its daemon is gone): run fusermount3 -u -z $mnt, or mount with -o reclaim" \
    -f -o index="$TMP/index" "$src" "$mnt"
check "... the dead mount is left as it was" test "$(stat_error "$mnt")" = "Transport endpoint is not connected"
refuse "dead mount, no reclaim, daemon mode: the same line" "a dead FUSE mount" \
    -o index="$TMP/index" "$src" "$mnt"

# --- -o reclaim detaches it and mounts in its place.
if cfs_mount "$src" "$mnt" "$TMP/reclaim.log" -o reclaim,index="$TMP/index"; then
    check "reclaim: one mount on the mount point" test "$(cfs_mount_count "$mnt")" -eq 1
    check "reclaim: every byte right" every_byte_right
    check "reclaim: logged" grep -q "detached a dead FUSE mount" "$TMP/reclaim.log"
    # A live mount, ours, is never reclaimed.
    refuse "a live clairfs mount with -o reclaim: refused" "already a mount point" \
        -f -o reclaim,index="$TMP/index2" "$src" "$mnt"
    check "... the live mount still serves" every_byte_right
    # A live daemon that does not answer (stopped) is not dead: refused, and
    # the refusal does not wait for it.
    kill -STOP "$CFS_PID"
    # The refusing process exits with its statfs thread still waiting on
    # the stopped daemon; LeakSanitizer's stop-the-world (ASan builds) would
    # wait for that thread forever, so it does not look at this exit.
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
        refuse "a stopped live clairfs with -o reclaim: refused, no hang" "already a mount point" \
        -f -o reclaim,index="$TMP/index2" "$src" "$mnt"
    kill -CONT "$CFS_PID"
    check "reclaim mount unmounts cleanly" cfs_umount "$mnt"
else
    fail "mount with -o reclaim over a dead mount"
fi

# --- a daemon-mode retry over a dead mount, as a job script runs it.
if cfs_mount "$src" "$mnt" "$TMP/second.log" -o index="$TMP/index"; then
    kill -KILL "$CFS_PID"
    wait "$CFS_PID" 2>/dev/null
    check "daemon mode with -o reclaim mounts over a dead mount" \
        "$CLAIRFS" -o reclaim,index="$TMP/index" "$src" "$mnt"
    pid=$(cfs_pid_of_mount "$mnt") && cfs_pids+=("$pid")
    check "... and serves every byte" every_byte_right
    check "... one mount" test "$(cfs_mount_count "$mnt")" -eq 1
    check "... unmounts" fusermount3 -u "$mnt"
else
    fail "second mount"
fi

# --- a live mount of something other than clairfs is never reclaimed.
if command -v mount >/dev/null && [ "$(id -u)" -eq 0 ] && mount -t tmpfs none "$mnt" 2>/dev/null; then
    cfs_mounts+=("$mnt")
    refuse "a live tmpfs with -o reclaim: refused" "already a mount point" \
        -f -o reclaim,index="$TMP/index" "$src" "$mnt"
    umount "$mnt"
fi

# --- reclaim on a plain empty directory is an ordinary mount.
mkdir -p "$TMP/empty-mnt"
if cfs_mount "$src" "$TMP/empty-mnt" "$TMP/plain.log" -o reclaim,index="$TMP/index"; then
    check "reclaim on an empty directory: mounts, nothing detached" \
        bash -c '! grep -q "detached" "$1"' _ "$TMP/plain.log"
    check "... serves" cmp -s "$src/n0000/img_000000.JPEG" "$TMP/empty-mnt/n0000/img_000000.JPEG"
    check "... unmounts" cfs_umount "$TMP/empty-mnt"
else
    fail "reclaim on an empty directory"
fi
cfs_finish
