#!/usr/bin/env bash
# Mount benchmark: reading and walking a ~100 k-file tree in tmpfs
# directly, through bindfs and through clairfs, side by side in one run.
#
# usage: bench/bench-mount.sh [--quick] [--reps N] [--classes C --files F]
#                             [--size SPEC] [--data DIR]
#
#   --quick        10 x 1000 files instead of 100 x 1000
#   --reps N       repetitions of every measurement (default 3; the median
#                  is reported)
#   --classes C, --files F, --size SPEC   the tree (clairfs-gendata; default
#                  size uniform:4K-16K, ~1 GB for 100 k files)
#   --data DIR     use this existing tree instead of generating one
#
# Environment: CLAIRFS_BUILD (build directory, default <top>/build) for
# clairfs; CLAIRFS_OPTS extra -o options for the clairfs mount (default
# none: the mount serves without a seed); BENCH_TMP the tmpfs directory for
# the tree, the mount points and clairfs's index (default /dev/shm).
#
# Readers (each timed alone; the file readers are clairfs-bench,
# which reads every file whole with 64 KiB read(2)s into reused buffers;
# xargs cat spends most of its time mapping and unmapping a buffer per file):
#   par4   4 worker threads, batches of 32, files in directory order
#   shuf4  the same in a trainer's shuffled order (DistributedSampler seed=1,
#          world=1); clairfs-bench scans the tree (readdir + stat) first,
#          outside the timing, so only the file data is cold
#   one    1 thread reading every file in directory order
#   tar    tar -cf - . | cat >/dev/null (one thread: readdir, stat, read;
#          the pipe because GNU tar skips reading when it writes /dev/null)
#   find   find MOUNT -type f | wc -l (count checked against the source)
#   walk   /usr/bin/python3 os.walk counting files (count checked)
# Every reader gets a fresh mount: "cold" is its first pass right after the
# mount (no kernel page, dentry or attribute cache for the FUSE file
# systems; clairfs's own tiers empty), "warm" the second pass on the same
# mount (the clairfs-bench readers: epochs 0 and 1 of one run).  The source is tmpfs, so "direct" is memory-resident in both
# passes: it is the floor, not a cold-disk figure.  Each repetition runs
# direct, bindfs and clairfs back to back, so load on the machine spreads
# over all three; ratios are time / baseline time (above 1 = slower).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-$top/build}
clairfs=$build/clairfs
bench=$build/clairfs-bench
gendata=$top/tools/clairfs-gendata
python=/usr/bin/python3
[ -x "$python" ] || python=python3

classes=100 files=1000 size=uniform:4K-16K reps=3 data=""
while [ $# -gt 0 ]; do
    case $1 in
    --quick) classes=10 files=1000 ;;
    --reps) reps=${2:?--reps N}; shift ;;
    --classes) classes=${2:?--classes C}; shift ;;
    --files) files=${2:?--files F}; shift ;;
    --size) size=${2:?--size SPEC}; shift ;;
    --data) data=${2:?--data DIR}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-mount: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "bench-mount: --reps $reps: expected a count >= 1" >&2; exit 2; }
for exe in "$clairfs" "$bench"; do
    [ -x "$exe" ] || { echo "bench-mount: $exe not built (set CLAIRFS_BUILD)" >&2; exit 1; }
done
command -v bindfs >/dev/null || { echo "bench-mount: bindfs not installed" >&2; exit 1; }
command -v fusermount3 >/dev/null && [ -c /dev/fuse ] ||
    { echo "bench-mount: needs /dev/fuse and fusermount3" >&2; exit 1; }

tmp=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-bench-mount.XXXXXX")
mounts=() pids=()
cleanup() {
    local m p
    for m in "${mounts[@]}"; do
        if is_mounted "$m"; then
            fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true
        fi
    done
    for p in "${pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$p" 2>/dev/null || true
        fi
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

is_mounted() {
    awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# --- the tree
if [ -n "$data" ]; then
    src=$(cd "$data" && pwd)
else
    src=$tmp/src
    echo "generating $((classes * files)) files ($size) in $src ..."
    t0=$EPOCHREALTIME
    "$python" "$gendata" --classes "$classes" --files "$files" --size "$size" --quiet "$src"
    printf "  %.1f s\n" "$(bc -l <<<"$EPOCHREALTIME - $t0")"
fi
# Directory order, for the clairfs-bench readers (one relative path a line).
(cd "$src" && find . -type f) | sed 's|^\./||' >"$tmp/list"
if grep -q '^#' "$tmp/list" || [ "$(cd "$src" && find . -type f -name '*
*' | wc -l)" -ne 0 ]; then
    echo "bench-mount: file names with newlines or a leading # do not fit --order-file" >&2
    exit 1
fi
nfiles=$(wc -l <"$tmp/list")
nbytes=$(cd "$src" && find . -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
mib=$(bc -l <<<"$nbytes / 1048576")

# --- mounting.  mount_fs KIND MNT: sets MNT_PID; "direct" mounts nothing.
MNT_PID=""
mount_fs() {
    local kind=$1 mnt=$2
    MNT_PID=""
    case $kind in
    direct) return 0 ;;
    bindfs)
        mkdir -p "$mnt"
        bindfs -f "$src" "$mnt" >>"$tmp/bindfs.log" 2>&1 &
        ;;
    clairfs)
        mkdir -p "$mnt"
        # A non-interactive shell starts background jobs with SIGINT ignored;
        # give the daemon the default so an interrupted run still unmounts.
        env --default-signal=INT "$clairfs" -f \
            -o "index=$tmp/index${CLAIRFS_OPTS:+,$CLAIRFS_OPTS}" "$src" "$mnt" \
            >>"$tmp/clairfs.log" 2>&1 &
        ;;
    esac
    MNT_PID=$!
    pids+=("$MNT_PID")
    mounts+=("$mnt")
    for _ in $(seq 1200); do
        if is_mounted "$mnt" && { [ "$kind" != clairfs ] || [ -e "$mnt/.clairfs/ready" ]; }; then
            return 0
        fi
        kill -0 "$MNT_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "bench-mount: $kind mount at $mnt failed; log:" >&2
    tail -n 20 "$tmp/$kind.log" >&2
    return 1
}

umount_fs() {
    local mnt=$1
    [ -n "$MNT_PID" ] || return 0
    fusermount3 -u "$mnt"
    wait "$MNT_PID" || { echo "bench-mount: daemon at $mnt exited $?" >&2; return 1; }
    MNT_PID=""
}

# --- readers.  run_reader NAME DIR prints the seconds of one pass;
# run_bench NAME DIR prints those of epochs 0 and 1 (cold, warm).  A wrong
# count of files or bytes is fatal.
elapsed() { bc -l <<<"$EPOCHREALTIME - $1"; }
run_bench() {
    local name=$1 dir=$2 args
    case $name in
    par4) args=(--order-file "$tmp/list" --workers 4 -o batch=32) ;;
    shuf4) args=(-o seed=1,batch=32 --workers 4) ;;
    one) args=(--order-file "$tmp/list" --workers 0) ;;
    esac
    # CSV: label,rank,epoch,wall_s,stall_s,first_batch_s,batches,files,bytes,...
    "$bench" --csv --epochs 2 "${args[@]}" "$dir" >"$tmp/bench.csv"
    awk -F, -v n="$nfiles" -v b="$nbytes" -v what="$name over $dir" '
        NR > 1 { if ($8 != n || $9 != b) { bad = $8 " files, " $9 " bytes" }; w[$3] = $4 }
        END {
            if (bad != "" || !(0 in w) || !(1 in w)) {
                printf "bench-mount: %s read %s, the source has %d files, %d bytes\n", \
                    what, bad, n, b > "/dev/stderr"; exit 1 }
            print w[0], w[1] }' "$tmp/bench.csv"
}
run_reader() {
    local name=$1 dir=$2 t0 got
    t0=$EPOCHREALTIME
    case $name in
    tar) tar -C "$dir" -cf - . | cat >/dev/null ;;
    find) got=$(find "$dir" -type f | wc -l) ;;
    walk)
        got=$("$python" -c 'import os, sys
print(sum(len(f) for _, _, f in os.walk(sys.argv[1])))' "$dir")
        ;;
    esac
    elapsed "$t0"
    if [ -n "${got:-}" ] && [ "$got" -ne "$nfiles" ]; then
        echo "bench-mount: $name over $dir counted $got files, the source has $nfiles" >&2
        exit 1
    fi
}

readers=(par4 shuf4 one tar find walk)
data_readers=" par4 shuf4 one tar "
kinds=(direct bindfs clairfs)
declare -A t # t[reader,pass,kind] = "s1 s2 ..."

echo "clairfs: $clairfs (-o index=...${CLAIRFS_OPTS:+,$CLAIRFS_OPTS})"
echo "tree: $src: $nfiles files, $(printf %.0f "$mib") MiB; $reps repetitions; $(nproc) CPUs;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"

# The first clairfs mount scans the catalog; later ones reuse it (as a
# remount of an unchanged dataset does).  Time both, outside the table.
t0=$EPOCHREALTIME
mount_fs clairfs "$tmp/first"
first_mount=$(elapsed "$t0")
umount_fs "$tmp/first"
t0=$EPOCHREALTIME
mount_fs clairfs "$tmp/first"
re_mount=$(elapsed "$t0")
umount_fs "$tmp/first"
printf "clairfs mount until .clairfs/ready: first (catalog scan) %.2f s, remount %.2f s\n" \
    "$first_mount" "$re_mount"

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { bc -l <<<"$1 / $2"; }
# cell SECONDS: the time, and the throughput for the readers of file data.
cell() {
    if [[ $data_readers == *" $r "* ]]; then
        printf "%7.3f (%5.0f)" "$1" "$(bc -l <<<"$mib / $1")"
    else
        printf "%15.3f" "$1"
    fi
}
# print_table DONE: the medians over the DONE repetitions run so far (a
# table after every repetition, so an interrupted run still reports).
print_table() {
    local done=$1 r pass d b c
    echo
    echo "median of $done of $reps repetitions, seconds (MiB/s for the readers of file data);" \
        "ratio = time / time"
    printf "%-6s %-5s %16s %16s %16s %10s %10s %10s\n" reader pass direct bindfs clairfs \
        clfs/dir clfs/bind bind/dir
    for r in "${readers[@]}"; do
        for pass in cold warm; do
            d=$(median "${t[$r,$pass,direct]}")
            b=$(median "${t[$r,$pass,bindfs]}")
            c=$(median "${t[$r,$pass,clairfs]}")
            printf "%-6s %-5s %16s %16s %16s %10.2f %10.2f %10.2f\n" "$r" "$pass" "$(cell "$d")" \
                "$(cell "$b")" "$(cell "$c")" "$(ratio "$c" "$d")" "$(ratio "$c" "$b")" \
                "$(ratio "$b" "$d")"
        done
    done
    if [ -s "$tmp/metrics" ]; then
        echo "clairfs metrics after its par4 cold + warm passes (last repetition):"
        sed 's/^/  /' "$tmp/metrics"
    fi
}

for rep in $(seq "$reps"); do
    for r in "${readers[@]}"; do
        for k in "${kinds[@]}"; do
            mnt=$tmp/mnt-$k
            dir=$src
            if [ "$k" != direct ]; then
                mount_fs "$k" "$mnt"
                dir=$mnt
            fi
            case $r in
            par4|shuf4|one)
                pair=$(run_bench "$r" "$dir")
                t[$r,cold,$k]+="${pair% *} "
                t[$r,warm,$k]+="${pair#* } "
                ;;
            *)
                for pass in cold warm; do
                    t[$r,$pass,$k]+="$(run_reader "$r" "$dir") "
                done
                ;;
            esac
            if [ "$k" = clairfs ] && [ "$r" = par4 ]; then
                grep -E '^clairfs_(reads_total|fetch_bytes_total|cache_bytes)' \
                    "$mnt/.clairfs/metrics" >"$tmp/metrics" || true
            fi
            [ "$k" = direct ] || umount_fs "$mnt"
        done
    done
    echo
    echo "repetition $rep of $reps done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    print_table "$rep"
done
