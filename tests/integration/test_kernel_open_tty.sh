#!/usr/bin/env bash
# The kernel's own opens counted by the isatty() that follows each (root,
# the default options): Python's open() asks isatty() of every file it
# opens, which reaches clairfs as an IOCTL even once the kernel opens files
# itself.  Checked through a real mount, every byte compared:
#  - Python readers before the switch: every FUSE open followed by its
#    isatty(), so the switch counts opens by them (one logged line);
#  - each later epoch in a process of its own, and two epochs in one
#    process, count exactly their opens; one thread opening one file 200
#    times back to back counts 200 (notifications alone would merge them);
#  - no opener waits for the watch meanwhile: no permission events are
#    marked (the watch's own log line names the way opens are counted);
#  - a reader without isatty() (cat) is counted by the watch's
#    notifications, named once in the log, and the watch adds its
#    permission events: a thread's 200 os.open() of one file then count
#    200;
#  - a C reader from the start (clairfs-bench) keeps the permission events:
#    the log says "each one" without isatty().
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}"
cfs_setup
[ "$(id -u)" = 0 ] || { echo "SKIP: counting by isatty() starts from the permission events (root)"; exit 77; }

src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
m() { cfs_metric "$1" "$2"; }
reads() { # every open counted, whatever the source
    local s t=0
    for s in ram ssd peer pfs; do t=$((t + $(m "$1" "clairfs_reads_total{source=\"$s\"}"))); done
    echo $t
}
# py_epochs MNT K [os]: K passes over every file in one process, each
# compared with the source; "os" opens with os.open (no isatty()).
py_epochs() {
    "$PYTHON" - "$src" "$@" <<'PY'
import os, sys
src, mnt, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
raw = len(sys.argv) > 4
files = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
for _ in range(k):
    for rel in files:
        if raw:
            fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
            got = os.read(fd, 1 << 24)
            os.close(fd)
        else:
            with open(os.path.join(mnt, rel), "rb") as f:
                got = f.read()
        with open(os.path.join(src, rel), "rb") as f:
            if got != f.read():
                sys.exit(f"differs: {rel}")
PY
}
# opens_of_one MNT [os]: one thread opens one file 200 times back to back.
opens_of_one() {
    "$PYTHON" - "$1/$first" "${2:-}" <<'PY'
import os, sys
for _ in range(200):
    if sys.argv[2] == "os":
        os.close(os.open(sys.argv[1], os.O_RDONLY))
    else:
        open(sys.argv[1], "rb").close()
PY
}
first=$(cd "$src" && find . -type f | sort | head -n 1)

mnt=$TMP/mnt-tty
log=$TMP/d-tty.log
if cfs_mount "$src" "$mnt" "$log" -o ram=64M,no_identify,index="$TMP/ix-tty"; then
    check "tty: epoch 0 verified" py_epochs "$mnt" 1
    check "tty: all $N files staged" cfs_wait_staged "$mnt" "$N"
    check "tty: epoch 1 verified" py_epochs "$mnt" 1
    check "tty: switched, counted by isatty()" grep -q "each one by the isatty() that follows it" "$log"
    r0=$(reads "$mnt")
    check "tty: epochs 2-3 in one process verified" py_epochs "$mnt" 2
    check "tty: epoch 4 verified" py_epochs "$mnt" 1
    r=$(($(reads "$mnt") - r0))
    check "tty: every open counted once ($r of $((3 * N)))" test "$r" -eq $((3 * N))
    r0=$(reads "$mnt")
    opens_of_one "$mnt"
    r=$(($(reads "$mnt") - r0))
    check "tty: one thread's 200 opens of one file counted ($r)" test "$r" -eq 200
    check "tty: no reader without isatty() yet" bash -c '! grep "without isatty()" "$1"' _ "$log"
    # cat asks no isatty() of the files it reads.
    r0=$(reads "$mnt")
    check "tty: cat reads every file" bash -c 'cmp <(cd "$1" && find . -type f | sort | xargs cat) <(cd "$2" && find . -type f | sort | xargs cat)' _ "$mnt" "$src"
    sleep 0.3
    r=$(($(reads "$mnt") - r0))
    check "tty: cat's opens counted ($r of $N)" test "$r" -eq "$N"
    check "tty: the reader without isatty() named once" test "$(grep -c "without isatty(); every open is now counted" "$log")" -eq 1
    r0=$(reads "$mnt")
    opens_of_one "$mnt" os
    r=$(($(reads "$mnt") - r0))
    check "tty: then one thread's 200 os.open() of one file counted ($r)" test "$r" -eq 200
    r0=$(reads "$mnt")
    check "tty: an epoch after verified" py_epochs "$mnt" 1
    r=$(($(reads "$mnt") - r0))
    check "tty: its opens counted once ($r of $N)" test "$r" -eq "$N"
    check "tty: clean unmount" cfs_umount "$mnt"
else
    fail "mount tty"
fi

# A C reader before the switch: permission events from the start.
mnt=$TMP/mnt-c
log=$TMP/d-c.log
if cfs_mount "$src" "$mnt" "$log" -o seed=5,epochs=100,batch=8,ram=64M,index="$TMP/ix-c"; then
    check "c: epoch 0 verified" cfs_replay "$src" "$mnt" "seed=5,epochs=100,batch=8" --epochs 1
    check "c: all staged" cfs_wait_staged "$mnt" "$N"
    check "c: epochs 1-2 verified" cfs_replay "$src" "$mnt" "seed=5,start_epoch=1,epochs=100,batch=8" --epochs 2
    check "c: every open counted once" test "$(reads "$mnt")" -eq $((3 * N))
    check "c: switched, each open seen as made" grep -q "as the mount sees them, each one)" "$log"
    check "c: clean unmount" cfs_umount "$mnt"
else
    fail "mount c"
fi
cfs_finish
