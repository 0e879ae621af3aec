#!/usr/bin/env bash
# FUSE over io_uring (src/fuse_ring.h) through real mounts, every byte
# compared with the source.  Checked:
#  - with the kernel's switch on (/sys/module/fuse/parameters/enable_uring,
#    set here and restored), the default mount registers a queue per
#    possible CPU, says so once, and every request after INIT comes over
#    the ring: a listing, stats, every file's bytes (small ones, one of
#    3 MB that takes many READs, and the SSD tier's files, whose replies
#    libfuse splices), the state xattr and a symlink's target,
#    /dev/fuse carried nothing after the mount was ready;
#  - the count is exact: 1000 isatty() calls on an open file are 1000 more
#    requests on the ring than the same loop without them;
#  - a trainer epoch verified over the ring (clairfs-bench --verify), and
#    three on a mount that switches to the kernel's own opens (the open
#    watch's marks send requests from a ring worker);
#  - SIGTERM with the ring running unmounts and exits 0;
#  - -o fuse_io=device keeps every request on /dev/fuse (no queue);
#  - with the switch off, the mount says why it stays on /dev/fuse, and
#    fuse_io=uring turns that line into a warning; bytes still compared.
# Serial: the kernel's switch is machine-wide.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}"
cfs_setup

knob=/sys/module/fuse/parameters/enable_uring
if [ ! -w "$knob" ]; then
    echo "SKIP: no FUSE over io_uring switch to set ($knob; needs root and Linux >= 6.14)"
    exit 77
fi
knob_was=$(cat "$knob")
restore_knob() { [ "$knob_was" = Y ] && echo 1 >"$knob" || echo 0 >"$knob"; }
trap 'restore_knob; cfs_cleanup' EXIT

src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
head -c 3000000 /dev/urandom >"$src/big.bin"
ln -s nowhere "$src/dangling.link" # stays a link: READLINK
cpus=$(awk -F- '{ print $NF + 1 }' /sys/devices/system/cpu/possible)
m() { cfs_metric "$1" "$2"; }
ring() { m "$1" 'clairfs_fuse_requests_total{transport="io_uring"}'; }
dev() { m "$1" 'clairfs_fuse_requests_total{transport="dev"}'; }

# same_tree MNT: names, sizes and bytes of every file equal the source's.
same_tree() {
    local f
    diff <(cd "$src" && find -L . -printf '%y %s %p\n' 2>/dev/null | sort) \
         <(cd "$1" && find . -path ./.clairfs -prune -o -printf '%y %s %p\n' | sort) || return 1
    while IFS= read -r f; do
        cmp -s "$src/$f" "$1/$f" || { echo "differs: $f" >&2; return 1; }
    done < <(cd "$src" && find . -type f)
}

# isatty_requests MNT N: ring requests over one metrics read, N isatty()
# calls on an open file, and a second metrics read.
isatty_requests() {
    "$PYTHON" - "$1" "$2" <<'EOF'
import os, sys
mnt, n = sys.argv[1], int(sys.argv[2])
def ring():
    with open(os.path.join(mnt, '.clairfs/metrics')) as f:
        for line in f:
            if line.startswith('clairfs_fuse_requests_total{transport="io_uring"}'):
                return int(line.split()[1])
fd = os.open(os.path.join(mnt, 'big.bin'), os.O_RDONLY)
before = ring()
for _ in range(n):
    os.isatty(fd)
after = ring()
os.close(fd)
print(after - before)
EOF
}

# --- the switch on: the ring carries the requests.
echo 1 >"$knob"
mnt=$TMP/mnt-ring
log=$TMP/d-ring.log
if cfs_mount "$src" "$mnt" "$log" -o seed=3,batch=8,ram=4M,ssd=64M,ssd_dir="$TMP/ssd",index="$TMP/ix"; then
    check "ring: $cpus queues registered" test "$(m "$mnt" clairfs_fuse_ring_queues)" -eq "$cpus"
    # The line follows the gauge: the mount is up before the kernel's INIT
    # reaches the daemon, and the queues start there.
    for _ in $(seq 50); do grep -q "FUSE requests over io_uring: " "$log" && break; sleep 0.1; done
    check "ring: one line says the ring runs" \
        test "$(grep -c "FUSE requests over io_uring: $cpus CPU queues of" "$log")" -eq 1
    dev0=$(dev "$mnt") # INIT, and what came before the queues were registered
    check "ring: the tree and every byte equal the source's" same_tree "$mnt"
    check "ring: epoch verified" cfs_replay "$src" "$mnt" "seed=3,batch=8" --epochs 1
    check "ring: files come from the SSD tier" \
        test "$(m "$mnt" 'clairfs_reads_total{source="ssd"}')" -gt 0
    check "ring: second pass, tiers and page cache, equal" same_tree "$mnt"
    check "ring: the symlink's target" test "$(readlink "$mnt/dangling.link")" = nowhere
    state=$(getfattr --only-values -n user.clairfs.state "$mnt/big.bin" 2>/dev/null)
    check "ring: state xattr ($state)" test -n "$state"
    check "ring: stats render" grep -q '^fuse' "$mnt/.clairfs/stats"
    r1=$(ring "$mnt")
    check "ring: requests came over the ring ($r1)" test "$r1" -gt 1000
    base=$(isatty_requests "$mnt" 0)
    with=$(isatty_requests "$mnt" 1000)
    check "ring: 1000 isatty() are 1000 requests ($with against $base)" test $((with - base)) -eq 1000
    check "ring: nothing more on /dev/fuse ($dev0, then $(dev "$mnt"))" test "$(dev "$mnt")" -eq "$dev0"
    kill -TERM "$CFS_PID"
    wait "$CFS_PID"
    rc=$?
    check "ring: SIGTERM exits 0 ($rc)" test "$rc" -eq 0
    check "ring: unmounted" cfs_wait_unmounted "$mnt"
else
    fail "ring: mount"
fi

# --- the switch to the kernel's own opens over the ring: the open watch's
# marks look every directory up through the mount from a ring worker, whose
# own requests must be served meanwhile.
# (A tree of samples alone: every file is staged, so the mount switches.)
ko_src=$TMP/src-ko
cfs_small_dataset "$ko_src" || fail "gendata (ko)"
mnt=$TMP/mnt-ko
log=$TMP/d-ko.log
if cfs_mount "$ko_src" "$mnt" "$log" -o seed=3,batch=8,ram=64M,index="$TMP/ix-ko"; then
    check "ko: epoch 0 verified" cfs_replay "$ko_src" "$mnt" "seed=3,batch=8" --epochs 1 --catalog "$ko_src"
    check "ko: all staged" cfs_wait_staged "$mnt" "$N"
    check "ko: epochs 1-2 verified" cfs_replay "$ko_src" "$mnt" "seed=3,start_epoch=1,batch=8" --epochs 2
    check "ko: switched, each open counted" grep -q "kernel_open: every file.*each one" "$log"
    check "ko: over the ring" test "$(m "$mnt" clairfs_fuse_ring_queues)" -eq "$cpus"
    check "ko: clean unmount" cfs_umount "$mnt"
else
    fail "ko: mount"
fi

# --- fuse_io=device: the switch on, the ring not asked for.
mnt=$TMP/mnt-dev
log=$TMP/d-dev.log
if cfs_mount "$src" "$mnt" "$log" -o no_identify,fuse_io=device,index="$TMP/ix"; then
    check "device: every byte" same_tree "$mnt"
    check "device: no queue" test "$(m "$mnt" clairfs_fuse_ring_queues)" -eq 0
    check "device: nothing on a ring" test "$(ring "$mnt")" -eq 0
    check "device: requests on /dev/fuse" test "$(dev "$mnt")" -gt 100
    check "device: no line about the ring" test "$(grep -c 'FUSE requests over' "$log")" -eq 0
    check "device: clean unmount" cfs_umount "$mnt"
else
    fail "device: mount"
fi

# --- the switch off: /dev/fuse, and the reason once.
echo 0 >"$knob"
# fuse_io=uring says it at the warning level: shown with log_level=warning.
for mode in auto uring; do
    mnt=$TMP/mnt-off-$mode
    log=$TMP/d-off-$mode.log
    level=$([ $mode = uring ] && echo ,log_level=warning)
    if cfs_mount "$src" "$mnt" "$log" -o no_identify,fuse_io=$mode,index="$TMP/ix"$level; then
        check "off/$mode: every byte" same_tree "$mnt"
        check "off/$mode: no queue" test "$(m "$mnt" clairfs_fuse_ring_queues)" -eq 0
        check "off/$mode: nothing on a ring" test "$(ring "$mnt")" -eq 0
        check "off/$mode: the reason, once" \
            test "$(grep -c 'FUSE requests stay on /dev/fuse: FUSE over io_uring is off in the kernel\|FUSE requests over /dev/fuse: FUSE over io_uring is off in the kernel' "$log")" -eq 1
        check "off/$mode: clean unmount" cfs_umount "$mnt"
    else
        fail "off/$mode: mount"
    fi
done
check "off/uring: the warning names the option" \
    grep -q 'fuse_io=uring: FUSE requests stay on /dev/fuse' "$TMP/d-off-uring.log"

cfs_finish
