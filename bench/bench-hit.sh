#!/usr/bin/env bash
# The hit path at its limit: how much slower than tmpfs is a clairfs epoch
# whose every file is already in the kernel page cache?  What is left is the
# FUSE round trips of the opens and closes, so this script measures those
# alone, with many epochs (a cached epoch of 2000 files takes ~0.05 s, too
# short for one sample to mean anything on a shared machine).
#
# usage: bench/bench-hit.sh [--build DIR] [--epochs K] [--reps R] [--trace]
#                           [--opts OPTS]...
#   --build DIR   meson build directory (default $CLAIRFS_BUILD or build)
#   --epochs K    cached epochs per reader run (default 4)
#   --reps R      rounds; each round runs the reader on tmpfs, then on every
#                 configuration's mount, K epochs each (default 8)
#   --opts OPTS   extra clairfs -o options of one clairfs configuration; give
#                 it several times to compare configurations in the same run
#                 (default: one configuration, the defaults)
#   --trace       also record the kernel's fuse tracepoints (perf) during the
#                 last round's run on each mount and print, per cached epoch
#                 and per open, the requests of each type and their mean
#                 round trip (kernel send to reply); needs root and tracefs
#
# The reader is clairfs-bench with the trainer's order (seed=42, batch 32,
# 4 DataLoader worker threads, files read whole with 64 KiB reads, no
# compute) over 2000 files of ~110 KB (clairfs-gendata, as bench.sh --quick)
# in tmpfs.  Every configuration gets its own mount of that tmpfs directory
# (no emulated PFS: only cached epochs are measured; ram= twice the dataset,
# ssd=0), all mounted at once; each is read once (epoch 0, cold, verified
# byte for byte with --verify) and then the rounds alternate between the
# systems, every run continuing the trainer's epochs (start_epoch), so that
# the load of a shared machine falls on all of them alike.  The figure is
# the median epoch per system and its ratio to tmpfs's median in the run,
# and each daemon's CPU per cached epoch (median over the rounds).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bench_name=bench-hit reps=8
. "$top/bench/trainer_bench_args.sh"
CLAIRFS=$build/clairfs BENCH=$build/clairfs-bench
for b in "$CLAIRFS" "$BENCH"; do [ -x "$b" ] || { echo "bench-hit: $b is not built" >&2; exit 1; }; done
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
if [ $trace -eq 1 ] && ! command -v perf >/dev/null; then echo "bench-hit: --trace needs perf" >&2; exit 1; fi

. "$top/bench/fuse_trace.sh"
work= mnts=() dpids=()
cleanup() {
    local rc=$? m p
    trap - EXIT INT TERM
    fuse_trace_stop
    for m in "${mnts[@]}"; do
        grep -qF " $m " /proc/self/mountinfo && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    for p in "${dpids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    [ -n "$work" ] && rm -rf --one-file-system "$work"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

work=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-benchhit.XXXXXX") || exit 1
src=$work/dataset
timeout 600 "$PYTHON" "$top/tools/clairfs-gendata" --classes 20 --files 100 --size lognormal:92K:0.6 \
    --max-size 2M --seed 1 --quiet "$src" || { echo "bench-hit: clairfs-gendata failed" >&2; exit 1; }
kib=$(du -sk "$src" | cut -f1)
nfiles=$(find "$src" -type f | wc -l)
TRAINER="seed=42,world=1,batch=32"

# mount_clairfs C OPTS: configuration C's mount over the source, ready.
mount_clairfs() {
    local c=$1 mnt=$work/mnt$1 i
    mkdir -p "$mnt"
    "$CLAIRFS" -f -o "$TRAINER,epochs=1000,ram=$((kib * 2))K,ssd=0,index=$work/index$c${2:+,$2}" \
        "$src" "$mnt" >"$work/clairfs$c.log" 2>&1 &
    dpids+=($!) mnts+=("$mnt")
    for ((i = 0; i < 600; i++)); do
        [ -e "$mnt/.clairfs/ready" ] && return 0
        kill -0 "${dpids[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    echo "bench-hit: clairfs did not mount: $(tail -n 1 "$work/clairfs$c.log")" >&2
    exit 1
}

# run_reader LABEL DIR EPOCH0 EPOCHS [VERIFY]: one clairfs-bench run of
# epochs EPOCH0.. ; appends the epoch times to $work/samples.LABEL.
run_reader() {
    local label=$1 dir=$2 e0=$3 k=$4 verify=${5:-}
    timeout 600 "$BENCH" -o "$TRAINER,start_epoch=$e0" --workers 4 --epochs "$k" --csv \
        ${verify:+--verify "$verify"} --label x "$dir" >"$work/run.csv" 2>"$work/run.log" ||
        { echo "bench-hit: reader failed on $label: $(tail -n 1 "$work/run.log")" >&2; exit 1; }
    awk -F, -v n="$nfiles" '$3 ~ /^[0-9]+$/ && $8 != n { print "epoch " $3 " read " $8 " files"; exit 1 }' \
        "$work/run.csv" >&2 || exit 1
    awk -F, '$3 ~ /^[0-9]+$/ { print $4 }' "$work/run.csv" >>"$work/samples.$label"
}

labels=(tmpfs)
for ((c = 0; c < ${#configs[@]}; c++)); do labels+=("$c"); done
name() { [ "$1" = tmpfs ] && echo tmpfs || echo "clairfs${configs[$1]:+ -o ${configs[$1]}}"; }
echo "== $nfiles files, $((kib / 1024)) MiB in tmpfs; $reps rounds of $epochs epochs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((c = 0; c < ${#configs[@]}; c++)); do
    mount_clairfs "$c" "${configs[$c]}"
    run_reader "cold$c" "$work/mnt$c" 0 1 "$src"
done
for ((r = 1; r <= reps; r++)); do
    e0=$((1 + (r - 1) * epochs))
    for l in "${labels[@]}"; do
        dir=$src
        [ "$l" = tmpfs ] || dir=$work/mnt$l
        [ $trace -eq 1 ] && [ $r -eq "$reps" ] && [ "$l" != tmpfs ] && fuse_trace_start "$work/perf$l.data"
        [ "$l" = tmpfs ] || cpu0=$(proc_cpu "${dpids[$l]}")
        # The last round compares every byte.
        run_reader "$l" "$dir" "$e0" "$epochs" "$([ $r -eq "$reps" ] && [ "$l" != tmpfs ] && echo "$src")"
        [ "$l" = tmpfs ] ||
            awk -v a="$cpu0" -v b="$(proc_cpu "${dpids[$l]}")" -v k="$epochs" 'BEGIN { print (b - a) / k }' >>"$work/cpu.$l"
        fuse_trace_stop
    done
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%.4f %.4f %d", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], NR }'; }
echo "== cached epochs: median seconds per epoch, ratio to tmpfs in this run; load $(cut -d' ' -f1-3 /proc/loadavg)"
read -r base _ _ < <(median "$work/samples.tmpfs")
for l in "${labels[@]}"; do
    read -r med min n < <(median "$work/samples.$l")
    awk -v l="$(name "$l")" -v m="$med" -v b="$base" -v mn="$min" -v n="$n" \
        'BEGIN { printf "  %-40s %8.4f s  x%.2f  (%d epochs, fastest %.4f s)\n", l, m, m / b, n, mn }'
done
for ((c = 0; c < ${#configs[@]}; c++)); do
    read -r cpu _ _ < <(median "$work/cpu.$c")
    echo "== $(name "$c"): cold epoch 0 (read with --verify) $(cat "$work/samples.cold$c") s; daemon CPU per cached epoch $cpu s (median of $reps rounds); counters (all epochs)"
    grep -E '^clairfs_(reads_total|read_requests_total|pagecache_fallback)' "$work/mnt$c/.clairfs/metrics" | sed 's/^/  /'
    grep -h "kernel_open:" "$work/clairfs$c.log" | sed 's/^/  log: /'
    [ $trace -eq 1 ] && fuse_trace_report "$work/perf$c.data" "$(fuse_conn "$work/mnt$c")" "$epochs" "$nfiles"
done
exit 0
