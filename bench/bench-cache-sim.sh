#!/usr/bin/env bash
# The cache at its optimum: the PFS bytes a mount fetches in each epoch
# against clairfs-plan's clairvoyant simulation for the same options, with
# the tiers holding half the dataset (RAM only, then RAM and SSD a quarter
# each), and in the same run the time of epochs 1-3 against the mount as a
# reactive cache (no seed, no identification, no sweep: an LRU FUSE cache).
# Prints figures and ratios, asserts nothing (tests/integration/
# test_sim_agree.sh is the test of the bytes).
#
#   bench/bench-cache-sim.sh [--quick] [--workers T] [BUILD_DIR]
#
# Source: clairfs-pfsemu (2 ms per open, 200 MB/s) over ~8000 ImageNet-sized
# files (--quick: 2000).  Reader: clairfs-bench, T workers (default 4),
# batch 32, prefetch factor 2, compute per batch half the PFS transfer time
# (bench-cache.sh (a)), one epoch a run (DataLoader workers start again each
# epoch), 4 epochs.
set -u
quick=0 workers=4
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1; shift ;;
    --workers) workers=$2; shift 2 ;;
    *) break ;;
    esac
done
B=${1:-build}
B=$(cd "$B" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLAIRFS=$B/clairfs BENCH=$B/clairfs-bench PFSEMU=$B/clairfs-pfsemu PLAN=$B/clairfs-plan
PY=/usr/bin/python3; [ -x $PY ] || PY=python3
for x in "$CLAIRFS" "$BENCH" "$PFSEMU" "$PLAN"; do [ -x "$x" ] || { echo "missing $x (build first)"; exit 1; }; done

bench_name=bench-cache-sim
. "$ROOT/bench/mount_cleanup.sh"
T=$(mktemp -d /dev/shm/clairfs-bench.XXXXXX 2>/dev/null || mktemp -d /tmp/clairfs-bench.XXXXXX)
work=$T

if [ $quick = 1 ]; then classes=20; else classes=80; fi
src=$T/data
echo "generating $((classes * 100)) files ..."
$PY "$ROOT/tools/clairfs-gendata" --quiet --classes $classes --files 100 --size imagenet --seed 1 "$src"
N=$(find "$src" -type f | wc -l)
TOTAL=$(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
COMPUTE=$(awk -v t="$TOTAL" -v n="$N" 'BEGIN { printf "%.4f", t / 200e6 / 2 / (n / 32) }')
E=4
TRAINER="seed=11,batch=32,epochs=$E"
echo "dataset: $N files, $((TOTAL / 1000000)) MB; compute per batch $COMPUTE s; $workers workers"

wait_mount() { for _ in $(seq 400); do [ -e "$1/$2" ] && return 0; sleep 0.05; done; return 1; }
pfs=$T/pfs
mkdir -p "$pfs"
"$PFSEMU" -f -o latency_open=2ms,bandwidth=200M "$src" "$pfs" >"$T/pfsemu.log" 2>&1 &
pids+=($!) mnts+=("$pfs")
wait_mount "$pfs" "$(ls "$src" | head -1)" || { echo "pfsemu failed"; exit 1; }
cat "$src"/*/* >/dev/null

metric() { awk -v k="$2" '$1 == k { print $2 }' "$1/.clairfs/metrics"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }
# epochs LABEL MNT: E epochs, one a run; "LABEL e bytes reclaimed" lines into $T/bytes
epochs() {
    local label=$1 mnt=$2 prev=0 prev_rec=0 e b r
    for e in $(seq 0 $((E - 1))); do
        "$BENCH" -o "$TRAINER,start_epoch=$e" --workers "$workers" --prefetch-factor 2 \
            --compute "$COMPUTE" --epochs 1 --csv --label "$label" "$mnt" >>"$T/runs.csv"
        b=$(metric "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
        r=$(metric "$mnt" 'clairfs_pfs_bytes_total{reason="reclaimed"}')
        echo "$label $e $((b - prev)) $((${r:-0} - prev_rec))" >>"$T/bytes"
        prev=$b prev_rec=${r:-0}
    done
}
run_mount() { # run_mount LABEL OPTS
    local mnt=$T/mnt-$1
    mkdir -p "$mnt"
    "$CLAIRFS" -f -o "$2" "$pfs" "$mnt" >>"$T/clairfs.log" 2>&1 &
    pids+=($!) mnts+=("$mnt")
    wait_mount "$mnt" .clairfs/ready || { echo "mount $1 failed"; tail "$T/clairfs.log"; exit 1; }
    epochs "$1" "$mnt"
    fusermount3 -u "$mnt"
    sleep 0.2
}
sim() { # sim LABEL OPTS: "LABEL e bytes" into $T/sim
    "$PLAN" --json -o "$2" "$pfs" | $PY -c '
import json, sys
for e in json.load(sys.stdin)["simulation"]["policies"]["clairvoyant"]["epochs"]:
    print(sys.argv[1], e["epoch"], e["pfs_bytes"])' "$1" >>"$T/sim"
}
col() { awk -v l="$1" -v e="$2" -v c="$3" '$1 == l && $2 == e { print $c }' "$4"; }
wall() { awk -F, -v l="$1" -v e="$2" '$1 == l && $3 == e { print $4 }' "$T/runs.csv"; }
stall() { awk -F, -v l="$1" -v e="$2" '$1 == l && $3 == e { print $5 }' "$T/runs.csv"; }

half=$((TOTAL / 2)) quarter=$((TOTAL / 4))
RAM="ram=$half" SSD="ram=$quarter,ssd=$quarter,ssd_dir=$T/ssd"
run_mount ram "$TRAINER,$RAM,index=$T/ix-ram"
sim ram "$TRAINER,$RAM,index=$T/ix-ram"
run_mount ssd "$TRAINER,$SSD,index=$T/ix-ssd"
sim ssd "$TRAINER,$SSD,index=$T/ix-ssd"
run_mount reactive "batch=32,$RAM,no_identify,no_sweep,index=$T/ix-reactive"

echo
echo "== PFS bytes per epoch, mount / clairvoyant simulation (bytes the kernel reclaimed from staged files taken out)"
printf "%-6s %-6s %14s %14s %8s %12s\n" case epoch mount sim ratio reclaimed
for c in ram ssd; do
    sm=0 ss=0
    for e in $(seq 0 $((E - 1))); do
        mb=$(col $c "$e" 3 "$T/bytes") rb=$(col $c "$e" 4 "$T/bytes") sb=$(col $c "$e" 3 "$T/sim")
        printf "%-6s %-6s %14s %14s %8s %12s\n" $c "$e" $((mb - rb)) "$sb" "$(ratio $((mb - rb)) "$sb")" "$rb"
        if [ "$e" -gt 0 ]; then sm=$((sm + mb - rb)) ss=$((ss + sb)); fi
    done
    echo "$c, epochs 1-$((E - 1)): mount / sim $(ratio $sm $ss) ($((sm / (E - 1) / 1000000)) MB against $((ss / (E - 1) / 1000000)) MB an epoch)"
done
echo
echo "== epochs 1-$((E - 1)), ram = half: clairfs against the reactive cache (no seed, no_identify, no_sweep)"
wc=0 wr=0 sc=0 sr=0
for e in $(seq 1 $((E - 1))); do
    wc=$(awk -v a=$wc -v b="$(wall ram "$e")" 'BEGIN{print a+b}')
    wr=$(awk -v a=$wr -v b="$(wall reactive "$e")" 'BEGIN{print a+b}')
    sc=$(awk -v a=$sc -v b="$(stall ram "$e")" 'BEGIN{print a+b}')
    sr=$(awk -v a=$sr -v b="$(stall reactive "$e")" 'BEGIN{print a+b}')
done
echo "wall: clairfs $wc s, reactive $wr s: clairfs $(ratio "$wr" "$wc")x faster;  stall: clairfs $sc s, reactive $sr s"
rb=0
for e in $(seq 1 $((E - 1))); do rb=$((rb + $(col reactive "$e" 3 "$T/bytes"))); done
echo "reactive PFS bytes per epoch after epoch 0: $((rb / (E - 1) / 1000000)) MB"
echo
echo "raw CSV:"
awk 'NR == 1 || !/^label,/' "$T/runs.csv"
