#!/usr/bin/env bash
# The main job on an embedded default, on a fresh machine: install what is
# missing, build, generate an ImageNet-like sample dataset, put an emulated
# loaded parallel filesystem (clairfs-pfsemu) in front of it, mount clairfs
# over that with nothing but the two paths (it learns the trainer's order
# from the opens), and train the same DDP job on the PFS directly and
# through clairfs.  Installs only the demo's packages (tools/deps.sh demo).  Prints epoch times, the ratio and clairfs's
# stats, and removes everything it made, also on failure or Ctrl-C.
#
# usage: tools/demo.sh [--files N] [--classes N] [--epochs E] [--bench]
#   --files N     files per class (default 100; 20 classes: 2000 files, ~210 MB)
#   --classes N   class folders (default 20)
#   --epochs E    epochs (default 3)
#   --bench       replay the trainer with clairfs-bench even when PyTorch imports
# Environment: CLAIRFS_BUILD (build directory, default build), DEMO_PFS
# (clairfs-pfsemu options, default latency_open=5ms,latency_read=1ms,bandwidth=60M).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

classes=20 files=100 epochs=3 force_bench=0
while [ $# -gt 0 ]; do
    case $1 in
    --files) files=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --bench) force_bench=1; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
SEED=42 WORLD=2 BATCH=32 WORKERS=2
PFS_OPTS=${DEMO_PFS:-latency_open=5ms,latency_read=1ms,bandwidth=60M}

say() { printf '\n== %s\n' "$*"; }

# --- everything made below is undone here, in reverse order.
work= pfs_pid= cfs_pid= pfs_mnt= cfs_mnt=
bench_pids=() # background replays (they ignore SIGINT, as background jobs do)
is_mounted() { [ -n "$1" ] && awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
stop() { # stop PID MOUNTPOINT: unmount, then make sure the daemon is gone
    local pid=$1 mnt=$2
    if is_mounted "$mnt"; then fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null || true; fi
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    local p
    for p in "${bench_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    stop "$cfs_pid" "$cfs_mnt"
    stop "$pfs_pid" "$pfs_mnt"
    [ -n "$work" ] && rm -rf "$work"
    [ $rc -ne 0 ] && echo "demo: stopped (status $rc); everything it started is cleaned up" >&2
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for PATH PID WHAT: until PATH exists, while PID lives (30 s at most).
wait_for() {
    for _ in $(seq 600); do
        [ -e "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || { echo "demo: $3 exited; its log:" >&2; cat "$work/$3.log" >&2; return 1; }
        sleep 0.05
    done
    echo "demo: $3 did not come up in 30 s" >&2
    return 1
}

say "setting up (tools/deps.sh demo, meson)"
tools/deps.sh demo
build=${CLAIRFS_BUILD:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
meson compile -C "$build" clairfs clairfs-pfsemu clairfs-bench clairfs-stat >/dev/null

trainer=bench
if [ $force_bench -eq 0 ] && /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
    trainer=torch
fi

work=$(mktemp -d /tmp/clairfs-demo.XXXXXX)
src=$work/dataset pfs_mnt=$work/pfs cfs_mnt=$work/clairfs
mkdir -p "$pfs_mnt" "$cfs_mnt"

say "generating $((classes * files)) ImageNet-sized files"
if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
"$py" tools/clairfs-gendata --classes "$classes" --files "$files" --size lognormal:90K:0.6 \
    --max-size 2M --seed 1 "$src"
nbytes=$(du -sb "$src" | cut -f1)

say "emulated loaded PFS: clairfs-pfsemu -o $PFS_OPTS"
"$build/clairfs-pfsemu" -f -o "$PFS_OPTS" "$src" "$pfs_mnt" >"$work/pfsemu.log" 2>&1 &
pfs_pid=$!
wait_for "$pfs_mnt/n0000" "$pfs_pid" pfsemu

# Nothing registered: the order is learnt from the trainer's opens, and the
# RAM tier is sized from the machine (here: the dataset).  The index goes
# to the demo's directory (XDG_CACHE_HOME), so that nothing stays behind.
say "clairfs PFS MOUNTPOINT"
XDG_CACHE_HOME=$work/cache "$build/clairfs" -f "$pfs_mnt" "$cfs_mnt" >"$work/clairfs.log" 2>&1 &
cfs_pid=$!
wait_for "$cfs_mnt/.clairfs/ready" "$cfs_pid" clairfs

# train DIR OUT: one run of the job; OUT gets "EPOCH SECONDS" lines.
train() {
    local dir=$1 out=$2
    if [ $trainer = torch ]; then
        /usr/bin/python3 examples/train_ddp.py --data "$dir" --epochs "$epochs" --seed $SEED \
            --batch $BATCH --workers $WORKERS --world $WORLD | tee "$out.raw"
        awk '$1 == "epoch" { print $2, $4 }' "$out.raw" >"$out"
    else
        # One replay per trainer rank, concurrently; an epoch ends with its slowest rank.
        local r
        bench_pids=()
        for r in $(seq 0 $((WORLD - 1))); do
            "$build/clairfs-bench" -o seed=$SEED,world=$WORLD,batch=$BATCH,epochs="$epochs" \
                --rank "$r" --workers $WORKERS --csv "$dir" >"$out.rank$r" &
            bench_pids+=($!)
        done
        for r in "${bench_pids[@]}"; do wait "$r"; done
        bench_pids=()
        cat "$out".rank* | awk -F, '$3 ~ /^[0-9]+$/ { if ($4 > w[$3]) w[$3] = $4 }
            END { for (e in w) print e, w[e] }' | sort -n >"$out"
        awk '{ printf "epoch %d wall %.3f (slowest of the ranks)\n", $1, $2 }' "$out"
    fi
}

label=$([ $trainer = torch ] && echo "examples/train_ddp.py (PyTorch DDP, $WORLD ranks)" ||
        echo "clairfs-bench ($WORLD ranks replayed)")
say "training on the PFS directly: $label"
train "$pfs_mnt" "$work/pfs.times"
say "training through clairfs: $label"
train "$cfs_mnt" "$work/clairfs.times"

say "comparison: $((classes * files)) files, $((nbytes / 1048576)) MiB, PFS $PFS_OPTS"
join "$work/pfs.times" "$work/clairfs.times" | awk '
    BEGIN { printf "%-7s %12s %12s %9s\n", "epoch", "PFS (s)", "clairfs (s)", "speedup" }
    { printf "%-7s %12.2f %12.2f %8.2fx\n", $1, $2, $3, ($3 > 0 ? $2 / $3 : 0); a += $2; b += $3 }
    END { printf "%-7s %12.2f %12.2f %8.2fx\n", "total", a, b, (b > 0 ? a / b : 0) }'

say "cat $cfs_mnt/.clairfs/stats"
cat "$cfs_mnt/.clairfs/stats"
say "what the mount learnt and sized (its log)"
grep -E 'ram tier|identify|order' "$work/clairfs.log" || true
say "clairfs-stat MOUNTPOINT 0 (totals; clairfs-stat MOUNTPOINT 1 gives a live view)"
"$build/clairfs-stat" "$cfs_mnt" 0
say "done; cleaning up"
