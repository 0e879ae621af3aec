#!/bin/bash
# clairfs-pfsemu must emulate, not merely pass through: every byte identical,
# opens that cost latency_open, one bandwidth cap shared by all readers, no
# page cache between repeated reads, and a clean unmount (fusermount3 -u and
# SIGTERM).  Bounds are generous lower bounds (0.7x of the minimum the
# emulation imposes): sleeping cannot finish early on a slow machine.
#
# usage: test_pfsemu.sh PATH/TO/clairfs-pfsemu
set -u

PFSEMU=${1:?usage: test_pfsemu.sh clairfs-pfsemu}
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "SKIP: no FUSE"; exit 77; }

WORK=$(mktemp -d)
SRC=$WORK/src
MNT=$WORK/mnt
PID=
mkdir -p "$SRC" "$MNT"

cleanup() {
    if [ -n "$PID" ]; then
        fusermount3 -u "$MNT" 2>/dev/null
        kill "$PID" 2>/dev/null
        wait "$PID" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }

# Start the emulator in the foreground (so $! is its PID) and wait for the mount.
mount_emu() {
    "$PFSEMU" -f -o "$1" "$SRC" "$MNT" &
    PID=$!
    for _ in $(seq 100); do
        mountpoint -q "$MNT" && return 0
        kill -0 "$PID" 2>/dev/null || fail "clairfs-pfsemu -o $1 exited before mounting"
        sleep 0.05
    done
    fail "clairfs-pfsemu -o $1 did not mount"
}

# Unmount the way named in $1 and require exit status 0 and no mount left.
unmount_emu() {
    if [ "$1" = sigterm ]; then kill -TERM "$PID"; else fusermount3 -u "$MNT" || fail "fusermount3 -u"; fi
    wait "$PID"
    local rc=$?
    PID=
    [ $rc -eq 0 ] || fail "clairfs-pfsemu exited with $rc after $1"
    mountpoint -q "$MNT" && fail "still mounted after $1"
    return 0
}

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
at_least() { awk -v t="$1" -v m="$2" 'BEGIN { exit !(t >= m) }'; }

# A small ImageFolder-like tree: 4 classes x 40 files of 1..24 KiB, a
# nested directory, a symlink, an empty file and one 40 MiB file.
for c in 0 1 2 3; do
    mkdir -p "$SRC/class$c/sub"
    for i in $(seq 40); do
        head -c $(( (i * 613 + c * 977) % 24576 + 1024 )) /dev/urandom > "$SRC/class$c/img$i.jpg"
    done
    head -c 5000 /dev/urandom > "$SRC/class$c/sub/deep.jpg"
done
: > "$SRC/empty"
ln -s class0/img1.jpg "$SRC/link.jpg"
head -c $((40 << 20)) /dev/urandom > "$SRC/big.bin"

# 1. Open latency (no bandwidth cap, so only opens cost), read-only, listing.
mount_emu latency_open=20ms,latency_read=0,bandwidth=0
[ "$(readlink "$MNT/link.jpg")" = class0/img1.jpg ] || fail "symlink target differs"
echo x 2>/dev/null > "$MNT/class0/new" && fail "a write succeeded on the read-only mount"
[ "$(ls "$MNT" | tr '\n' ' ')" = "big.bin class0 class1 class2 class3 empty link.jpg " ] ||
    fail "root listing: $(ls "$MNT")"

N=50
t0=$(now)
for i in $(seq $N); do cat "$MNT/class1/img$((i % 40 + 1)).jpg"; done >/dev/null
t=$(elapsed "$t0")
echo "pfsemu: $N sequential opens at latency_open=20ms: ${t}s (minimum 1.000s)"
at_least "$t" 0.7 || fail "$N opens took ${t}s, expected >= 0.7s"

# 4 parallel readers x 40 opens: concurrent opens overlap, but each waits.
t0=$(now)
readers=()
for c in 0 1 2 3; do cat "$MNT"/class$c/img*.jpg >/dev/null & readers+=($!); done
wait "${readers[@]}"
t=$(elapsed "$t0")
echo "pfsemu: 4 readers x 40 opens at latency_open=20ms: ${t}s (minimum 0.800s)"
at_least "$t" 0.56 || fail "4x40 parallel opens took ${t}s, expected >= 0.56s"
unmount_emu fusermount

# 2. Every byte identical; one shared bandwidth cap, paid again on every read.
mount_emu latency_open=0,latency_read=0,bandwidth=20M
diff -r --exclude=big.bin "$SRC" "$MNT" || fail "tree differs through the emulator"
t0=$(now)
cmp "$MNT/big.bin" "$SRC/big.bin" || fail "big.bin differs"
t=$(elapsed "$t0")
echo "pfsemu: 40 MiB at bandwidth=20M: ${t}s (minimum 2.000s)"
at_least "$t" 1.4 || fail "40 MiB took ${t}s at 20 MiB/s, expected >= 1.4s"

# The same bytes again, by two readers at once (one half each): still
# 40 MiB through one cap, none of it from the page cache.
t0=$(now)
dd if="$MNT/big.bin" of=/dev/null bs=1M count=20 status=none & r1=$!
dd if="$MNT/big.bin" of=/dev/null bs=1M skip=20 status=none & r2=$!
wait $r1 $r2
t=$(elapsed "$t0")
echo "pfsemu: 2 readers x 20 MiB again at bandwidth=20M: ${t}s (minimum 2.000s)"
at_least "$t" 1.4 || fail "2x20 MiB took ${t}s, expected >= 1.4s (shared cap, no page cache)"
unmount_emu sigterm

# 3. Bad input: a clear error and a non-zero exit, nothing mounted.
"$PFSEMU" -o latency_open=fast "$SRC" "$MNT" 2>"$WORK/err" && fail "accepted latency_open=fast"
grep -q "latency_open=fast" "$WORK/err" || fail "no message naming latency_open: $(cat "$WORK/err")"
"$PFSEMU" "$WORK/missing" "$MNT" 2>/dev/null && fail "accepted a missing source"
mountpoint -q "$MNT" && fail "mounted despite an error"

echo "PASS"
