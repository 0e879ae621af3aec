#!/usr/bin/env bash
# README's first mount, run as written: the shell block between
# <!-- first-mount:begin --> and <!-- first-mount:end --> in README.md, with
# HOME a fresh directory and the programs (clairfs, clairfs-gendata) on
# PATH as an install puts them.  It must succeed as a whole (set -e), list
# the 4 class folders, find the mount's bytes equal to the source's (its
# own diff -r), show the stats of the 100-file catalog, and leave nothing
# mounted and no daemon behind; the index is where README says, under
# ~/.cache/clairfs.
. "$(dirname "$0")/lib.sh"
root=${CLAIRFS_SOURCE_ROOT:?}
cfs_setup

block=$(awk '/^<!-- first-mount:begin -->/ { on = 1; next }
             /^<!-- first-mount:end -->/ { on = 0 }
             on && !/^```/' "$root/README.md")
[ -n "$block" ] || { fail "README.md has no first-mount block"; cfs_finish; }
echo "$block"
mkdir -p "$TMP/bin" "$TMP/home"
ln -s "$CLAIRFS" "$TMP/bin/clairfs"
ln -s "$CLAIRFS_GENDATA" "$TMP/bin/clairfs-gendata"
mnt=$TMP/home/clairfs-demo/mnt
cfs_mounts+=("$mnt") # unmounted by the EXIT trap if the block stops half-way

HOME=$TMP/home PATH=$TMP/bin:$PATH bash -eu -c "$block" >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/out" "$TMP/err"
check "the block runs as written (exit 0)" test "$rc" -eq 0
check "ls lists the 4 class folders" \
    test "$(grep -cE '^n000[0-3]$' "$TMP/out")" -eq 4
check "diff -r finds the source's bytes" grep -qx "the same bytes" "$TMP/out"
check "the stats show the 100-file catalog" grep -qE '^catalog +files 100 ' "$TMP/out"
check "nothing is left mounted" bash -c '! awk -v m="$1" '\''$5 == m { f = 1 } END { exit !f }'\'' /proc/self/mountinfo' _ "$mnt"
gone() { ! cfs_pid_of_mount "$mnt" >/dev/null; }
for _ in $(seq 100); do gone && break; sleep 0.1; done
check "the daemon is gone after fusermount3 -u" gone
check "the index is under ~/.cache/clairfs" \
    test "$(find "$TMP/home/.cache/clairfs" -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq 1
cfs_finish
