#!/usr/bin/env bash
# The hit path at its limit: how much slower than tmpfs is a clairfs epoch
# whose every file is already in the kernel page cache?  What is left is the
# FUSE round trips of the opens and closes, so this script measures those
# alone, with many epochs (a cached epoch of 2000 files takes ~0.05 s, too
# short for one sample to mean anything on a shared machine).
#
# usage: bench/bench-hit.sh [--build DIR] [--epochs E] [--reps R] [--trace]
#                           [--opts OPTS]...
#   --build DIR   meson build directory (default $CLAIRFS_BUILD or build)
#   --epochs E    epochs per reader run (default 12; the first is the cold one)
#   --reps R      alternating tmpfs / clairfs runs (default 3)
#   --opts OPTS   extra clairfs -o options of one clairfs configuration; give
#                 it several times to compare configurations in the same run
#                 (default: one configuration, the defaults)
#   --trace       also record the kernel's fuse tracepoints (perf) in the last
#                 repetition of each configuration and print, per cached
#                 epoch, the requests of each type and their mean round trip
#                 (kernel send to reply); needs root and tracefs
#
# The reader is clairfs-bench with the trainer's order (seed=42, batch 32,
# 4 DataLoader worker threads, files read whole with 64 KiB reads, no
# compute) over 2000 files of ~110 KB (clairfs-gendata, as bench.sh --quick)
# in tmpfs; clairfs mounts that tmpfs directory itself (no emulated PFS:
# only cached epochs are measured) with ram= the dataset and ssd=0.  The
# figure is the median of epochs 2..E over all repetitions, per system, and
# its ratio to tmpfs's median from the same run.  clairfs-bench --verify
# compares every byte with the source in the last repetition.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-build} epochs=12 reps=3 trace=0 configs=()
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --reps) reps=${2:?}; shift 2 ;;
    --opts) configs+=("$2"); shift 2 ;;
    --trace) trace=1; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-hit: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#configs[@]} -eq 0 ] && configs=("")
case $build in /*) ;; *) build=$top/$build ;; esac
CLAIRFS=$build/clairfs BENCH=$build/clairfs-bench
for b in "$CLAIRFS" "$BENCH"; do [ -x "$b" ] || { echo "bench-hit: $b is not built" >&2; exit 1; }; done
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
if [ $trace -eq 1 ] && ! command -v perf >/dev/null; then echo "bench-hit: --trace needs perf" >&2; exit 1; fi

work= mnt= dpid= ppid=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -n "$ppid" ] && kill -INT "$ppid" 2>/dev/null && wait "$ppid" 2>/dev/null
    if [ -n "$mnt" ] && grep -qF " $mnt " /proc/self/mountinfo; then
        fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt"
    fi
    [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
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
reader=(-o "seed=42,world=1,batch=32" --workers 4 --epochs "$epochs" --csv)

# mount_clairfs OPTS: a fresh mount over the source, ready (sets mnt, dpid).
mount_clairfs() {
    mnt=$work/mnt
    rm -rf "$work/index"
    mkdir -p "$mnt"
    "$CLAIRFS" -f -o "seed=42,world=1,batch=32,epochs=$epochs,ram=$((kib * 2))K,ssd=0,index=$work/index${1:+,$1}" \
        "$src" "$mnt" >"$work/clairfs.log" 2>&1 &
    dpid=$!
    local i
    for ((i = 0; i < 600; i++)); do
        [ -e "$mnt/.clairfs/ready" ] && return 0
        kill -0 "$dpid" 2>/dev/null || break
        sleep 0.05
    done
    echo "bench-hit: clairfs did not mount: $(tail -n 1 "$work/clairfs.log")" >&2
    exit 1
}
unmount_clairfs() {
    fusermount3 -u "$mnt" || { echo "bench-hit: cannot unmount $mnt" >&2; exit 1; }
    wait "$dpid" 2>/dev/null
    dpid= mnt=
}

# trace_report FILE: per cached epoch (split at every nfiles-th OPEN), the
# requests of each opcode and their mean kernel round trip.
trace_report() {
    perf script -i "$1" -F time,event,trace 2>/dev/null | awk -v n="$nfiles" -v E="$epochs" '
        { t = $1 + 0; sub(/:$/, "", $1) }
        $2 ~ /fuse_request_send/ {
            for (i = 3; i <= NF; i++) { if ($i == "req") u = $(i + 1); if ($i == "opcode") op = $(i + 2) }
            gsub(/[()]/, "", op)
            if (op == "FUSE_OPEN" && opens++ % n == 0) epoch++
            if (epoch < 2) next
            cnt[op]++; start[u] = t; opof[u] = op
        }
        $2 ~ /fuse_request_end/ {
            for (i = 3; i <= NF; i++) if ($i == "req") u = $(i + 1)
            if (u in start) { rt[opof[u]] += t - start[u]; done[opof[u]]++; delete start[u] }
        }
        END {
            k = E - 1
            printf "  %-22s %14s %18s\n", "request", "per cached epoch", "mean round trip us"
            for (op in cnt) printf "  %-22s %14.1f %18.1f\n", op, cnt[op] / k, done[op] ? 1e6 * rt[op] / done[op] : 0
        }' | sort -k2 -nr
}

# run_reader LABEL DIR [VERIFY]: one clairfs-bench run; appends epochs 2..E to LABEL's samples.
run_reader() {
    local label=$1 dir=$2 verify=${3:-}
    timeout 600 "$BENCH" "${reader[@]}" ${verify:+--verify "$verify"} --label "$label" "$dir" \
        >"$work/run.csv" 2>"$work/run.log" || { echo "bench-hit: reader failed on $label: $(tail -n 1 "$work/run.log")" >&2; exit 1; }
    awk -F, -v n="$nfiles" '$3 ~ /^[0-9]+$/ && $8 != n { print "epoch " $3 " read " $8 " files"; exit 1 }' "$work/run.csv" >&2 || exit 1
    awk -F, -v l="$label" '$3 ~ /^[0-9]+$/ && $3 >= 1 { print l "\t" $4 }' "$work/run.csv" >>"$work/samples"
    awk -F, -v l="$label" '$3 == 0 { print l "\t" $4 }' "$work/run.csv" >>"$work/cold"
}

: >"$work/samples"
: >"$work/cold"
echo "== $nfiles files, $((kib / 1024)) MiB in tmpfs; $epochs epochs x $reps repetitions; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= reps; r++)); do
    last=$([ $r -eq "$reps" ] && echo "$src")
    run_reader tmpfs "$src"
    for ((c = 0; c < ${#configs[@]}; c++)); do
        label="clairfs${configs[$c]:+ -o ${configs[$c]}}"
        mount_clairfs "${configs[$c]}"
        if [ $trace -eq 1 ] && [ -n "$last" ]; then
            perf record -q -a -e fuse:fuse_request_send -e fuse:fuse_request_end -o "$work/perf$c.data" \
                >/dev/null 2>&1 &
            ppid=$!
            sleep 0.5
        fi
        run_reader "$label" "$mnt" "$last"
        if [ -n "$ppid" ]; then kill -INT "$ppid"; wait "$ppid" 2>/dev/null; ppid=; fi
        grep -E '^clairfs_(reads_total|read_requests_total|pagecache_fallback)' "$mnt/.clairfs/metrics" \
            >"$work/metrics$c"
        unmount_clairfs
    done
done
echo "== cached epochs (2..$epochs): median seconds per epoch, ratio to tmpfs in this run; load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -F'\t' '{ n[$1]++; v[$1, n[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
    END {
        for (i = 1; i <= k; i++) {
            l = order[i]; m = n[l]
            for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[l, b] < v[l, a]) { x = v[l, a]; v[l, a] = v[l, b]; v[l, b] = x }
            med[l] = m % 2 ? v[l, (m + 1) / 2] : (v[l, m / 2] + v[l, m / 2 + 1]) / 2
        }
        for (i = 1; i <= k; i++) { l = order[i]
            printf "  %-40s %8.4f s  x%.2f  (%d samples, min %.4f)\n", l, med[l], med[l] / med["tmpfs"], n[l], v[l, 1] }
    }' "$work/samples"
echo "== cold epoch 1: median seconds"
awk -F'\t' '{ s[$1] = s[$1] " " $2 } END { for (l in s) printf "  %-40s%s\n", l, s[l] }' "$work/cold"
for ((c = 0; c < ${#configs[@]}; c++)); do
    echo "== clairfs${configs[$c]:+ -o ${configs[$c]}}: counters of the last repetition (all epochs)"
    sed 's/^/  /' "$work/metrics$c"
    if [ $trace -eq 1 ]; then trace_report "$work/perf$c.data"; fi
done
