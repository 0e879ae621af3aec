#!/usr/bin/env bash
# Load and soak, bounded in time; every byte read through the
# mount is compared with the source by tests/reader_stress.c:
#  - 16 reader threads over 3 epochs (each a fresh shuffle) of 600 files,
#    RAM tier at a quarter of the dataset plus an SSD tier, so that
#    evictions, demotions and direct reads race with each other;
#  - 10 000 descriptors open on the mount at once (RLIMIT_NOFILE raised),
#    then each read whole, verified and closed; the daemon's own descriptor
#    count is sampled while they are all open, and must stay below its
#    RLIMIT_NOFILE soft limit minus a margin (no EMFILE waiting to happen)
#    and back near its idle count afterwards;
#  - 100 000 preads of 1-8 KiB at random offsets of three 64 MiB files from
#    8 threads, RAM tier for two of them (the third is read directly).
. "$(dirname "$0")/lib.sh"
: "${READER_STRESS:?}"
cfs_setup

src=$TMP/src
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 12 --files 50 --size lognormal:16K:0.6 --seed 21 \
    "$src" || { fail "gendata"; cfs_finish; }
TOTAL=$(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
stress() { timeout 120 "$READER_STRESS" "$@"; }
fds_of() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

mnt=$TMP/mnt
if cfs_mount "$src" "$mnt" "$TMP/d1.log" -o ram=$((TOTAL / 4)),ssd=64M,ssd_dir="$TMP/ssd"; then
    check "16 threads x 3 epochs, every byte verified" \
        stress --threads 16 --epochs 3 --read-size 16384 "$mnt" "$src"
    check "16 threads: 1800 files read" grep -q "^files 1800 " <(stress --threads 16 --epochs 3 --quiet "$mnt" "$src")

    idle=$(fds_of "$CFS_PID")
    limit=$(awk '/Max open files/ { print $4 }' "/proc/$CFS_PID/limits")
    READER_STRESS_HOLD=2 stress --open-all 10000 "$mnt" "$src" >"$TMP/open.out" 2>&1 &
    opener=$!
    peak=0
    for _ in $(seq 100); do
        grep -q "descriptors open" "$TMP/open.out" 2>/dev/null && break
        sleep 0.1
    done
    for _ in 1 2 3 4 5; do
        n=$(fds_of "$CFS_PID")
        [ "$n" -gt "$peak" ] && peak=$n
        sleep 0.2
    done
    wait "$opener"
    orc=$?
    cat "$TMP/open.out"
    check "10 000 concurrent opens: all opened, read, verified (rc $orc)" test $orc -eq 0
    check "10 000 opens: 10000 descriptors at once" grep -q "^open-all: 10000 descriptors" "$TMP/open.out"
    check "10 000 opens: every file verified" grep -q "^files 10000 " "$TMP/open.out"
    after=$(fds_of "$CFS_PID")
    echo "daemon descriptors: idle $idle, with 10 000 opens $peak, after $after (limit $limit)"
    check "daemon fds stay below its limit ($peak < $limit - 64)" test "$peak" -lt $((limit - 64))
    check "daemon fds back to idle (+8) after the closes" test "$after" -le $((idle + 8))
    check "daemon still serving" stress --threads 2 "$mnt" "$src"
    check "unmount" cfs_umount "$mnt"
else
    fail "mount"
fi

big=$TMP/big
mkdir -p "$big/c0"
for i in 0 1 2; do head -c $((64 << 20)) /dev/urandom >"$big/c0/f$i.jpg"; done
mnt=$TMP/mnt-big
if cfs_mount "$big" "$mnt" "$TMP/d2.log" -o ram=140M,index="$TMP/ix-big"; then
    check "100 000 random 1-8 KiB preads of 3 x 64 MiB from 8 threads, each verified" \
        stress --threads 8 --random 100000 --min 1024 --max 8192 "$mnt" "$big"
    check "unmount big" cfs_umount "$mnt"
else
    fail "mount big"
fi
rm -rf "$big"
cfs_finish
