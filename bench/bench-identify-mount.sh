#!/usr/bin/env bash
# What learning the order costs the trainer: epoch 0 of a real torch
# DataLoader (tests/integration/identify_trainer.py: ImageFolder, shuffle
# with a seeded generator, batch 8, 2 workers) through clairfs over the
# emulated PFS, with
#   registered   the trainer's order given (-o sampler=torch,seed=S,batch=8):
#                nothing to learn
#   learned      nothing registered, a small seed (S = 23): the first scan
#                finds it within the first opens
#   searching    nothing registered, a seed near the end of the range
#                (S = 4000000000): the scan of all 2^32 seeds runs through
#                the whole epoch at idle priority, beside the trainer
#   learned-nosweep, searching-nosweep (with --rows): the same with
#                no_sweep, what the sweep (the dataset staged in index order
#                while the order is unknown) is worth
#   learned-sweepon, searching-sweepon (with --rows): the same with
#                sweep=on, the sweep never held back (the default, auto,
#                holds it while the scan gets less than half a core)
#   noidentify (with --rows): nothing registered, no_identify: the sweep
#                alone, without the search beside the trainer
#   registered-ddp (with --rows): seed=23,batch=8 with the default sampler,
#                torch-ddp, which is not the trainer's order: the mount keeps
#                the registration and mispredicts about a third of the opens
# side by side in one run, rounds alternating between the rows so that a
# shared machine's load falls on all alike.  Printed: each row's median
# epoch-0 time and its ratio to the first row's, the median time from the
# mount to epoch 0's end (the prefetching began at the mount: while the
# trainer imports torch and lists the folders a plan or the sweep stages
# files, so a trainer that starts late has a shorter epoch 0), what the
# mount predicted and waited for, and the identification it logged.
# Figures, not assertions.
#
# The emulated PFS is bandwidth-bound by default (3 MiB/s, 2 ms per open):
# faster, it stages the whole dataset while the trainer imports torch and
# lists the folders, before epoch 0 starts, and every row then times the
# same reads from RAM (the rows differ by the machine's noise only).
#
# usage: bench/bench-identify-mount.sh [--build DIR] [--files N] [--reps R]
#            [--rows "ROW ..."] [--ram PCT]
#   --files N   files in the dataset (default 3000, of ~8 KiB)
#   --reps R    rounds (default 3)
#   --rows      the rows, registered first (default "registered learned
#               searching")
#   --ram PCT   the RAM tier as a percentage of the dataset (default 200;
#               below 100 the sweep evicts files already read in the epoch
#               to stage those not yet read)
# Environment: BENCH_PFS (clairfs-pfsemu -o options; default
# bandwidth=3145728: 3 MiB/s, its other defaults 2 ms per open, 0.5 ms per
# read; BENCH_PFS= for its own 200 MiB/s), BENCH_TMP (default /dev/shm),
# BENCH_KEEP=1 (keep the work directory: the daemons' logs ROW-ROUND.log,
# the trainers' outputs and opens, named on the last line).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-build} files=3000 reps=3 rows=(registered learned searching) ram_pct=200
pfs_opts=${BENCH_PFS-bandwidth=3145728}
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --files) files=${2:?}; shift 2 ;;
    --reps) reps=${2:?}; shift 2 ;;
    --rows) read -ra rows <<<"${2:?}"; shift 2 ;;
    --ram) ram_pct=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-identify-mount: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for row in "${rows[@]}"; do
    case $row in
    registered | registered-ddp | learned | searching | learned-nosweep | searching-nosweep | \
        learned-sweepon | searching-sweepon | noidentify) ;;
    *) echo "bench-identify-mount: unknown row $row (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
CLAIRFS=$build/clairfs PFSEMU=$build/clairfs-pfsemu TORCH_PY=/usr/bin/python3
for b in "$CLAIRFS" "$PFSEMU"; do
    [ -x "$b" ] || { echo "bench-identify-mount: $b is not built" >&2; exit 1; }
done
"$TORCH_PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "bench-identify-mount: torch and torchvision do not import under $TORCH_PY" >&2; exit 1; }
TRAINER=$top/tests/integration/identify_trainer.py

bench_name=bench-identify-mount
. "$top/bench/mount_cleanup.sh"

wait_mounted() { # wait_mounted MNT PID
    local i
    for i in $(seq 200); do
        grep -qF " $1 " /proc/self/mountinfo && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

work=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-benchident.XXXXXX") || exit 1
classes=30
timeout 600 "$TORCH_PY" "$top/tools/clairfs-gendata" --classes $classes --files $((files / classes)) \
    --size lognormal:8K:0.6 --max-size 64K --seed 5 --quiet "$work/src" ||
    { echo "bench-identify-mount: clairfs-gendata failed" >&2; exit 1; }
nbytes=$(du -sb "$work/src" | cut -f1)
mkdir -p "$work/pfs"
"$PFSEMU" -f ${pfs_opts:+-o "$pfs_opts"} "$work/src" "$work/pfs" >"$work/pfsemu.log" 2>&1 &
pids+=($!)
mnts+=("$work/pfs")
wait_mounted "$work/pfs" "${pids[-1]}" || { echo "bench-identify-mount: pfsemu did not mount" >&2; exit 1; }

declare -A times since
# run ROW ROUND: one fresh mount, one epoch of the trainer; appends its time.
run() {
    local row=$1 k=$2 mnt=$work/mnt-$1-$2 seed=23 opts="ram=$((ram_pct * nbytes / 102400 + 1024))K"
    # registered: the trainer's own sampler (DataLoader(shuffle=True,
    # generator=g) is sampler=torch; the default, torch-ddp, is another
    # order, which the mount keeps and mispredicts)
    case $row in
    registered) opts+=",sampler=torch,seed=23,batch=8" ;;
    registered-ddp) opts+=",seed=23,batch=8" ;;
    searching* | noidentify) seed=4000000000 ;;
    esac
    [ "$row" = noidentify ] && opts+=",no_identify"
    case $row in *-nosweep) opts+=",no_sweep" ;; *-sweepon) opts+=",sweep=on" ;; esac
    mkdir -p "$mnt"
    "$CLAIRFS" -f -o "$opts,index=$work/index-$row-$k" "$work/pfs" "$mnt" >"$work/$row-$k.log" 2>&1 &
    local dpid=$!
    pids+=($dpid)
    mnts+=("$mnt")
    wait_mounted "$mnt" $dpid || { echo "bench-identify-mount: $row did not mount" >&2; return 1; }
    local t_mount=$EPOCHREALTIME
    "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$work/src" --kind torch --seed $seed --epochs 1 \
        --batch 8 --workers 2 --pause 0 --log "$work/$row-$k.opens" \
        --snapshot "$work/$row-$k.metrics" >"$work/$row-$k.out" 2>&1 ||
        { echo "bench-identify-mount: the trainer failed on $row:" >&2; cat "$work/$row-$k.out" >&2; }
    times[$row]+="$(awk '$3 == "epoch" && $4 == 0 { print $5 }' "$work/$row-$k.out") "
    since[$row]+="$(awk -v t0="$t_mount" '$3 == "clock" && $6 == "0'"'"'s" { printf "%.3f", $8 - t0 }' \
        "$work/$row-$k.out") "
    fusermount3 -u "$mnt"
    wait $dpid 2>/dev/null
}

echo "dataset: $files files, $((nbytes / 1024)) KiB; RAM tier $ram_pct % of it; emulated PFS ${pfs_opts:-(defaults)}; $reps rounds"
for k in $(seq "$reps"); do
    for row in "${rows[@]}"; do run "$row" "$k" || exit 1; done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=$(echo "${times[${rows[0]}]}" | median)
base_since=$(echo "${since[${rows[0]}]}" | median)
printf '%-17s %10s %8s %13s %8s   %s\n' row "epoch 0 s" ratio "from mount s" ratio "runs (epoch 0 s)"
for row in "${rows[@]}"; do
    med=$(echo "${times[$row]}" | median)
    msince=$(echo "${since[$row]}" | median)
    printf '%-17s %10.3f %8.3f %13.3f %8.3f   %s\n' "$row" "$med" \
        "$(awk -v a="$med" -v b="$base" 'BEGIN { print a / b }')" "$msince" \
        "$(awk -v a="$msince" -v b="$base_since" 'BEGIN { print (b > 0 ? a / b : 0) }')" "${times[$row]}"
done
# what the mount predicted and waited for in round 1, as epoch 0 ended
for row in "${rows[@]}"; do
    awk -v row="$row" '/^clairfs_prediction_total\{result="hit"\}/ { h = $2 }
        /^clairfs_prediction_total\{result="miss"\}/ { m = $2 }
        /^clairfs_stall_seconds_total / { st = $2 }
        /^clairfs_reads_total\{source="pfs"\}/ { p = $2 }
        END { printf "%s: predicted %d hit %d miss, %d opens waited for the PFS, %.2f s stalled\n", row, h, m, p, st }' \
        "$work/$row-1.metrics" 2>/dev/null
done
for row in "${rows[@]:1}"; do
    echo "$row: $(grep -h 'order: identified\|identify:' "$work/$row-1.log" | head -1 | cut -c1-160)"
    [ -n "$(grep -h 'order: identified' "$work/$row-1.log")" ] || echo "$row: not identified within the epoch"
done
