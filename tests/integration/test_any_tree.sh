#!/usr/bin/env bash
# Every tree mounts: without a seed ImageFolder's order is not needed, so a
# tree that is no ImageFolder (a folder without image files, text files,
# files at the root, deep nesting) mounts with no options at all, its files
# numbered by sorted path (so folders below the root can still be learnt),
# and serves every byte; the stored catalog makes the next such mount warm;
# with a seed the same tree is one clear line, a non-zero exit and nothing
# mounted.
. "$(dirname "$0")/lib.sh"
cfs_setup

src=$TMP/src
mkdir -p "$src/images/cat" "$src/deep/a/b/c" "$src/docs"
head -c 5000 /dev/urandom >"$src/images/cat/1.jpg"
head -c 7000 /dev/urandom >"$src/images/cat/2.png"
head -c 300 /dev/urandom >"$src/deep/a/b/c/blob.bin"
echo "a tree that is no ImageFolder" >"$src/docs/README.txt"
head -c 12345 /dev/urandom >"$src/top-level.dat"
nfiles=$(find "$src" -type f | wc -l)
export HOME=$TMP/home # the default index lives under ~/.cache/clairfs

mnt=$TMP/mnt
check "mounts with no options" cfs_mount "$src" "$mnt" "$TMP/1.log"
check "every byte as in the source" diff -r "$src" "$mnt"
check "the log says the files are numbered by sorted path, and why" \
    grep -q "no ImageFolder order at the mount's root (order=imagefolder: class folder 'deep' holds no image file.*): its files numbered by sorted path" "$TMP/1.log"
check "and that the order is learnt from the opens" grep -q "learning the read order" "$TMP/1.log"
check "nothing predicted" test "$(cfs_metric "$mnt" 'clairfs_prediction_total{result="miss"}')" -eq 0
check "every open counted as a read" bash -c \
    '[ "$(awk "/^clairfs_reads_total/ { s += \$2 } END { print s }" "$1/.clairfs/metrics")" -eq "$2" ]' \
    _ "$mnt" "$nfiles"
# A seed given through the control file plans in that numbering.
check "seed N through .clairfs/control is taken" bash -c 'echo "seed 5" >"$1/.clairfs/control"' _ "$mnt"
check "and the mount still serves every byte" diff -r "$src" "$mnt"
check "unmount" cfs_umount "$mnt"

check "a second mount loads the stored catalog" cfs_mount "$src" "$mnt" "$TMP/2.log"
check "warm: the catalog came from the index" test "$(cfs_metric "$mnt" clairfs_catalog_loaded_from_index)" -eq 1
check "every byte again" diff -r "$src" "$mnt"
check "unmount 2" cfs_umount "$mnt"

# With a seed the order is needed: one line, exit 1, nothing mounted (also
# with the no-order copy in the index).
"$CLAIRFS" -o seed=3 "$src" "$mnt" 2>"$TMP/seed.err"
rc=$?
check "with a seed the tree is an error" test "$rc" -ne 0
check "in one line naming the reason" bash -c \
    '[ "$(wc -l <"$1")" -eq 1 ] && grep -q "class folder .deep. holds no image file" "$1"' _ "$TMP/seed.err"
check "and nothing mounted" test "$(cfs_mount_count "$mnt")" -eq 0

# order=sorted fits any tree: with a seed it mounts and predicts.
check "order=sorted with a seed mounts" cfs_mount "$src" "$mnt" "$TMP/3.log" -o seed=3,order=sorted
check "every byte with a plan" diff -r "$src" "$mnt"
check "unmount 3" cfs_umount "$mnt"
cfs_finish
