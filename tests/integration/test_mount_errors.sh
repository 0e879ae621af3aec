#!/usr/bin/env bash
# Bad input: every bad invocation exits non-zero with exactly one line on
# stderr and leaves nothing mounted; bad files inside the source (unreadable,
# vanished, odd names, loops, empty trees) are served or refused per file
# without taking the daemon down.
. "$(dirname "$0")/lib.sh"
cfs_setup

src=$TMP/src
mnt=$TMP/mnt
mkdir -p "$mnt"
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 3 --files 10 --size 2K "$src" || fail "gendata"

# cfs_refuse DESCRIPTION EXPECTED-TEXT MOUNTPOINT-TO-WATCH clairfs-args... (lib.sh)

cfs_refuse "nonexistent source" "No such file or directory" "$mnt" -f "$TMP/nope" "$mnt"
cfs_refuse "source is a file" "not a directory" "$mnt" -f "$src/n0000/img_000000.JPEG" "$mnt"
cfs_refuse "missing mountpoint" "No such file or directory" "$TMP/nomnt" -f "$src" "$TMP/nomnt"
touch "$TMP/file"
cfs_refuse "mountpoint is a file" "not a directory" "$TMP/file" -f "$src" "$TMP/file"
cfs_refuse "unknown -o option" "unknown option 'bogus'" "$mnt" -f -o bogus "$src" "$mnt"
cfs_refuse "unknown option among good ones" "unknown option 'frobnicate=1'" "$mnt" -f -o seed=1,frobnicate=1,ro "$src" "$mnt"
cfs_refuse "bad size suffix" "ram=12Q" "$mnt" -f -o ram=12Q "$src" "$mnt"
cfs_refuse "bad option value" "world=0" "$mnt" -f -o world=0 "$src" "$mnt"
cfs_refuse "options that contradict" "start_epoch" "$mnt" -f -o epochs=2,start_epoch=2 "$src" "$mnt"
cfs_refuse "unknown command-line flag" "unknown argument '-x'" "$mnt" -x "$src" "$mnt"
cfs_refuse "no arguments" "usage" "$mnt"
cfs_refuse "one argument" "missing MOUNTPOINT" "$mnt" "$src"
cfs_refuse "three arguments" "unexpected argument" "$mnt" -f "$src" "$mnt" extra
cfs_refuse "mountpoint inside the source" "inside the source" "$src/n0000" -f "$src" "$src/n0000"
cfs_refuse "daemon mode fails the same way" "No such file or directory" "$mnt" "$TMP/nope" "$mnt"

# A mount point that is already mounted (by clairfs itself).
if cfs_mount "$src" "$mnt" "$TMP/first.log" -o index="$TMP/index"; then
    cfs_refuse "mountpoint already mounted" "already a mount point" "$mnt" -f -o index="$TMP/index2" "$src" "$mnt"
    check "the first mount still serves" cmp -s "$src/n0001/img_000010.JPEG" "$mnt/n0001/img_000010.JPEG"
    check "first mount unmounts cleanly" cfs_umount "$mnt"
else
    fail "first mount"
fi

# mount(8)/fstab options are accepted; fsname/subtype override ours.
if cfs_mount "$src" "$mnt" "$TMP/fstab.log" -o noauto,_netdev,nofail,x-systemd.automount,defaults,user,nosuid,nodev,noatime,fsname=mydata,subtype=cfs,index="$TMP/index"; then
    check "fstab and FUSE options accepted; fsname and subtype applied" grep -q "^mydata $mnt fuse.cfs .*noatime" /proc/mounts
    check "unmount" cfs_umount "$mnt"
else
    fail "mount with fstab options"
fi

# -o ro: the kernel refuses every write, control included.
if cfs_mount "$src" "$mnt" "$TMP/ro.log" -o ro,index="$TMP/index"; then
    check "-o ro mounts read-only" grep -q " $mnt fuse.clairfs ro," /proc/mounts
    check "-o ro: files still read" cmp -s "$src/n0002/img_000020.JPEG" "$mnt/n0002/img_000020.JPEG"
    check "unmount" cfs_umount "$mnt"
else
    fail "mount -o ro"
fi

# --- bad files inside the source -------------------------------------------
odd=$TMP/odd
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 2 --files 4 --size 3K --odd-names --extras "$odd" || fail "gendata odd"
chmod 600 "$odd/n0001/img_000004.JPEG"      # unreadable for nobody
chmod 640 "$odd/n0001/img_000005.jpg"
chmod 644 "$odd/n0001/img_000006.png"
ln -s .. "$odd/n0000/up"                    # a directory loop
mkdir "$odd/.clairfs" && echo hidden >"$odd/.clairfs/metrics"   # shadowed by ours
mnt2=$TMP/mnt2
if cfs_mount "$odd" "$mnt2" "$TMP/odd.log" -o order=sorted,allow_other,no_sweep,index="$TMP/index-odd"; then
    check "odd names (space, newline, tab, non-UTF-8) read back equal" "$PYTHON" - "$odd" "$mnt2" <<'EOF'
import os, sys
src, mnt = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
names = [b"with space.jpg", b"new\nline.png", b"latin1-\xe9\xff.JPEG", b"tab\there.jpg", b"-dash.jpg"]
c0 = os.path.join(mnt, b"n0000")
ok = all(n in os.listdir(c0) for n in names)
for n in names:
    with open(os.path.join(src, b"n0000", n), "rb") as a, open(os.path.join(c0, n), "rb") as b:
        ok = ok and a.read() == b.read()
with open(os.path.join(mnt, b"class with space \xe9", b"a.jpg"), "rb") as b, \
     open(os.path.join(src, b"class with space \xe9", b"a.jpg"), "rb") as a:
    ok = ok and a.read() == b.read()
sys.exit(0 if ok else 1)
EOF
    if command -v setpriv >/dev/null; then
        asnobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
        check "EACCES: nobody cannot read a 0600 file" bash -c '
            out=$("$@" cat "$0/n0001/img_000004.JPEG" 2>&1 >/dev/null) && exit 1
            case $out in *"Permission denied"*) exit 0 ;; *) exit 1 ;; esac' \
            "$mnt2" setpriv --reuid=nobody --regid=nogroup --clear-groups
        check "EACCES: nobody cannot read a 0640 root:root file" bash -c '
            out=$("$@" cat "$0/n0001/img_000005.jpg" 2>&1 >/dev/null) && exit 1
            case $out in *"Permission denied"*) exit 0 ;; *) exit 1 ;; esac' \
            "$mnt2" setpriv --reuid=nobody --regid=nogroup --clear-groups
        check "nobody reads a 0644 file" asnobody cmp -s "$odd/n0001/img_000006.png" "$mnt2/n0001/img_000006.png"
        check "nobody cannot write control (owner only)" bash -c '! "$@" sh -c "echo epoch 1 > $0/.clairfs/control" 2>/dev/null' \
            "$mnt2" setpriv --reuid=nobody --regid=nogroup --clear-groups
        check "nobody reads metrics" asnobody grep -q clairfs_epoch "$mnt2/.clairfs/metrics"
    fi
    check "root still reads the 0600 file" cmp -s "$odd/n0001/img_000004.JPEG" "$mnt2/n0001/img_000004.JPEG"

    rm "$odd/n0001/img_000007.JPEG"
    check "a file removed after the scan: ENOENT" bash -c '
        out=$(cat "$1/n0001/img_000007.JPEG" 2>&1 >/dev/null) && exit 1
        case $out in *"No such file or directory"*) exit 0 ;; *) exit 1 ;; esac' _ "$mnt2"
    cat "$mnt2/n0001/img_000007.JPEG" >/dev/null 2>&1
    check "... logged once" test "$(grep -c 'cannot open.*img_000007' "$TMP/odd.log")" -eq 1
    check "... the daemon still serves" cmp -s "$odd/n0000/img_000000.JPEG" "$mnt2/n0000/img_000000.JPEG"
    check "a directory loop is a symlink, find terminates" bash -c '[ -L "$1/n0000/up" ] && timeout 20 find "$1" >/dev/null' _ "$mnt2"
    check "empty directories list empty" test -z "$(ls -A "$mnt2/empty_dir/empty_sub")"
    check "source's own .clairfs is shadowed and unlisted" bash -c '
        ! ls -A "$1" | grep -qx .clairfs && grep -q "^# TYPE clairfs_epoch" "$1/.clairfs/metrics"' _ "$mnt2"
    check "... which is logged" grep -q "\.clairfs is hidden" "$TMP/odd.log"
    check "unmount" cfs_umount "$mnt2"
else
    fail "mount of the odd tree"
fi

# --- an empty source.
mkdir "$TMP/empty"
if cfs_mount "$TMP/empty" "$mnt" "$TMP/empty.log" -o order=sorted,index="$TMP/index-empty"; then
    check "empty source lists nothing" test -z "$(ls -A "$mnt")"
    check "empty source: 0 files, 1 dir" test "$(cfs_metric "$mnt" clairfs_catalog_files) $(cfs_metric "$mnt" clairfs_catalog_dirs)" = "0 1"
    check "unmount" cfs_umount "$mnt"
else
    fail "mount of an empty source"
fi
cfs_finish
