#!/usr/bin/env bash
# Planner scaling benchmark: time and peak RSS of clairfs-plan for
# an ImageNet-1k-shaped synthetic dataset, how both grow with n, epochs and
# nodes, and the simulator's figures for ram = 25/50/100 % of a node's share.
#
# Usage: bench/bench-plan.sh [CLAIRFS_PLAN] [SIM_EPOCHS]
# SIM_EPOCHS (default 10): the simulator replays every access of the node
# (with a heap for Belady), so the policy table uses fewer epochs than 90.
# Figures are wall seconds and max RSS of one process on one core; they vary
# with the load of the machine, so compare rows of the same run.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
plan=${1:-$top/build/clairfs-plan}
sim_epochs=${2:-10}
[ -x "$plan" ] || { echo "bench-plan: $plan not built" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "bench-plan: needs /usr/bin/time" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

N=1281167
MEAN=110K

# run LABEL ARGS...: prints "LABEL seconds peak_MiB"
run() {
    local label=$1; shift
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$plan" "$@" >"$tmp/out"
    read -r secs kib <"$tmp/t"
    printf "%-34s %8.2f s %8.0f MiB\n" "$label" "$secs" "$((kib / 1024))"
}

echo "== clairfs-plan --synthetic $N, epochs=90, world=64, --nodes 16, planning node 0"
run "n=1281167 E=90 nodes=16" -o seed=42,epochs=90,world=64,ram=8G --synthetic $N \
    --mean-size $MEAN --nodes 16 --node 0 --no-sim
grep -E "^dataset|^ +0 " "$tmp/out" || true

echo
echo "== growth (each row changes one parameter of the row above)"
printf "%-34s %10s %12s\n" "case" "time" "peak RSS"
for n in 320292 640584 1281167; do
    run "n=$n E=90 nodes=16" -o seed=42,epochs=90,world=64,ram=8G --synthetic $n \
        --mean-size $MEAN --nodes 16 --node 0 --no-sim
done
for e in 22 45 90; do
    run "n=$N E=$e nodes=16" -o seed=42,epochs=$e,world=64,ram=8G --synthetic $N \
        --mean-size $MEAN --nodes 16 --node 0 --no-sim
done
for nodes in 4 16 64; do
    run "n=$N E=90 nodes=$nodes" -o seed=42,epochs=90,world=64,ram=8G --synthetic $N \
        --mean-size $MEAN --nodes $nodes --node 0 --no-sim
done

echo
echo "== simulator: ImageNet-1k shape, world=64, 16 nodes, node 0, $sim_epochs epochs"
"$plan" -o seed=42,epochs=1,world=64,ram=0 --synthetic $N --mean-size $MEAN --no-sim >"$tmp/ds"
bytes=$(awk '/^dataset:/ {print $4}' "$tmp/ds")
share=$((bytes / 16))
echo "dataset $bytes bytes; a node's share $share bytes"
for pct in 25 50 100; do
    ram=$((share * pct / 100))
    echo "-- ram = $pct % of the share ($ram bytes)"
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$plan" -o seed=42,epochs=$sim_epochs,world=64,ram=$ram \
        --synthetic $N --mean-size $MEAN --nodes 16 --node 0 >"$tmp/out"
    sed -n '/^policy/,$p' "$tmp/out"
    read -r secs kib <"$tmp/t"
    echo "(plan + simulation: $secs s, $((kib / 1024)) MiB)"
done
