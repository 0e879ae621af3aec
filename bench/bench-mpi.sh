#!/bin/bash
# Distributed clairfs on one host: epoch time of a 4-rank trainer
# replay (clairfs-bench, one trainer rank per node, all ranks at once) over
#   pfs        the emulated PFS directly (clairfs-pfsemu over a copy in /tmp)
#   clairfs    NODES clairfs daemons under mpirun over TCP, sharing their
#              caches (ram per node = 1/NODES of the dataset + 10 %)
#   no_peers   the same daemons with -o no_peers (each node alone)
# side by side, in one run, on the same dataset and emulated PFS.  The
# epoch time is the slowest rank's (synchronous training waits for it).
# Figures, not assertions.
#
#   bench/bench-mpi.sh [BUILD_DIR] [--nodes N] [--epochs E] [--files F]
#
# Also printed: the per-file cost of a fetch from the PFS and from a peer
# (clairfs_fetch_seconds_total / clairfs_fetches_total), and the start-up
# time (mpirun to every mount's ready file) of NODES nodes and, mounted
# alone, of 2, 4 and 8 nodes (STARTUP_NODES).
#
# Environment: PFS_OPTS (clairfs-pfsemu -o options; default its own: 2 ms per
# open, 0.5 ms per read, 200 MiB/s shared), OMPI_* as usual.  As root the
# Open MPI run-as-root variables are set.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
NODES=4 EPOCHS=3 FILES=100 CLASSES=8
while [ $# -gt 0 ]; do
    case $1 in
    --nodes) NODES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    -*) echo "usage: $0 [BUILD_DIR] [--nodes N] [--epochs E] [--files F]" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
    esac
done
CLAIRFS=$BUILD/clairfs PFSEMU=$BUILD/clairfs-pfsemu BENCH=$BUILD/clairfs-bench
for x in "$CLAIRFS" "$PFSEMU" "$BENCH"; do
    [ -x "$x" ] || { echo "missing $x (meson compile -C $BUILD)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "no mpirun" >&2; exit 2; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PYTHON=/usr/bin/python3; [ -x $PYTHON ] || PYTHON=python3

W=$(mktemp -d /tmp/clairfs-bench-mpi.XXXXXX)
PFSPID= MPIPID=
cleanup() {
    local m
    for m in "$W"/mnt* "$W/pfs"; do
        mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    [ -n "$MPIPID" ] && { sleep 1; kill "$MPIPID" 2>/dev/null; wait "$MPIPID" 2>/dev/null; }
    [ -n "$PFSPID" ] && { kill "$PFSPID" 2>/dev/null; wait "$PFSPID" 2>/dev/null; }
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$PYTHON" "$ROOT/tools/clairfs-gendata" --classes "$CLASSES" --files "$FILES" --size imagenet \
    --quiet "$W/src"
BYTES=$(du -sb "$W/src" | cut -f1)
NFILES=$((CLASSES * FILES))
mkdir -p "$W/pfs"
"$PFSEMU" -f ${PFS_OPTS:+-o "$PFS_OPTS"} "$W/src" "$W/pfs" >"$W/pfsemu.log" 2>&1 &
PFSPID=$!
for _ in $(seq 100); do mountpoint -q "$W/pfs" && break; sleep 0.1; done
mountpoint -q "$W/pfs" || { echo "pfsemu did not mount"; cat "$W/pfsemu.log"; exit 1; }

WORLD=$NODES SEED=3 BATCH=16
TRAINER="seed=$SEED,world=$WORLD,batch=$BATCH,epochs=$EPOCHS"
RAM=$((BYTES / NODES * 11 / 10))
# The model told the emulated PFS's shared bandwidth (clairfs-pfsemu's
# default, or MODEL_PFS_BW when PFS_OPTS changes it); the latencies of the
# PFS and of the peers are measured by the fetches (MODEL_PFS_LATENCY fixes
# the PFS's instead).
{
    printf 'pfs_bw = %s\npfs_client_bw = %s\n' "${MODEL_PFS_BW:-200M}" "${MODEL_PFS_BW:-200M}"
    [ -n "${MODEL_PFS_LATENCY:-}" ] && printf 'pfs_latency = %s\n' "$MODEL_PFS_LATENCY"
} >"$W/model.conf"

# epoch CONFIG E DIR...: every rank's epoch E at once, rank r on DIR r;
# prints the slowest rank's wall time.
epoch() {
    local cfg=$1 e=$2 r pids=() max=0
    shift 2
    local dirs=("$@")
    for r in $(seq 0 $((WORLD - 1))); do
        "$BENCH" -o "$TRAINER,start_epoch=$e" --epochs 1 --rank "$r" --workers 4 --csv \
            "${dirs[$r]}" >"$W/b.$cfg.$e.$r" 2>&1 &
        pids+=($!)
    done
    for r in $(seq 0 $((WORLD - 1))); do wait "${pids[$r]}"; done
    for r in $(seq 0 $((WORLD - 1))); do
        local t
        t=$(tail -n 1 "$W/b.$cfg.$e.$r" | cut -d, -f4)
        max=$(awk -v a="$max" -v b="${t:-0}" 'BEGIN { print (b > a) ? b : a }')
    done
    echo "$max"
}

sum_metric() { # sum of a metric over the mounts
    local k=$1 r s=0 v
    for r in $(seq 0 $((NODES - 1))); do
        v=$(awk -v k="$k" '$1 == k { print $2 }' "$W/mnt$r/.clairfs/metrics")
        s=$((s + ${v:-0}))
    done
    echo $s
}

declare -A T PFSB PEERB OK FB
run_pfs() {
    local e dirs=()
    for r in $(seq 0 $((WORLD - 1))); do dirs+=("$W/pfs"); done
    for e in $(seq 0 $((EPOCHS - 1))); do T[pfs,$e]=$(epoch pfs "$e" "${dirs[@]}"); done
}

sum_metric_f() { # the same for a fractional metric (seconds)
    local k=$1 r
    for r in $(seq 0 $((NODES - 1))); do cat "$W/mnt$r/.clairfs/metrics"; done |
        awk -v k="$k" '$1 == k { s += $2 } END { printf "%.6f", s }'
}

# launch NP CFG OPTS: NP daemons under mpirun over TCP, each on its mount
# (ram and trainer options of OPTS); waits until every mount is ready and
# sets STARTUP to the seconds from mpirun to the last ready file.
launch() {
    local np=$1 cfg=$2 opts=$3 r t0
    rm -rf "$W"/idx*
    for r in $(seq 0 $((np - 1))); do mkdir -p "$W/mnt$r"; done
    t0=$(date +%s%N)
    mpirun -np "$np" --oversubscribe --mca pml ob1 --mca btl self,tcp \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
        "$CLAIRFS" -f -o "$opts,index=$W/idx{rank},model=$W/model.conf" \
        "$W/pfs" "$W/mnt{rank}" >"$W/clairfs.$cfg.log" 2>&1 &
    MPIPID=$!
    local ready=0
    for _ in $(seq 1200); do
        ready=1
        for r in $(seq 0 $((np - 1))); do [ -e "$W/mnt$r/.clairfs/ready" ] || ready=0; done
        [ $ready = 1 ] && break
        kill -0 "$MPIPID" 2>/dev/null || break
        sleep 0.05
    done
    STARTUP=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
    [ $ready = 1 ] || { echo "$cfg: mounts not ready"; cat "$W/clairfs.$cfg.log"; return 1; }
}

# unmount NP: every node's mount, then wait for mpirun.
unmount() {
    local r
    for r in $(seq 0 $(($1 - 1))); do fusermount3 -u "$W/mnt$r"; done
    wait "$MPIPID"
    MPIPID=
}

declare -A START COST
run_clairfs() {
    local cfg=$1 extra=$2 e r dirs=()
    for r in $(seq 0 $((NODES - 1))); do dirs+=("$W/mnt$r"); done
    launch "$NODES" "$cfg" "$TRAINER,ram=$RAM$extra" || return 1
    START[$cfg]=$STARTUP
    local pb=0 qb=0
    for e in $(seq 0 $((EPOCHS - 1))); do
        T[$cfg,$e]=$(epoch "$cfg" "$e" "${dirs[@]}")
        local p q
        p=$(sum_metric 'clairfs_fetch_bytes_total{from="pfs"}')
        q=$(sum_metric 'clairfs_fetch_bytes_total{from="peer"}')
        PFSB[$cfg,$e]=$((p - pb)) PEERB[$cfg,$e]=$((q - qb))
        pb=$p qb=$q
    done
    OK[$cfg]=$(sum_metric 'clairfs_peer_fetches_total{result="ok"}')
    FB[$cfg]=$(sum_metric 'clairfs_peer_fetches_total{result="fallback"}')
    local src n t
    for src in pfs peer; do
        n=$(sum_metric "clairfs_fetches_total{from=\"$src\"}")
        t=$(sum_metric_f "clairfs_fetch_seconds_total{from=\"$src\"}")
        COST[$cfg,$src]=$(awk -v n="$n" -v t="$t" 'BEGIN {
            if (n > 0) printf "%.2f ms (%d fetches)", 1000 * t / n, n; else printf "- (0 fetches)" }')
    done
    unmount "$NODES"
}

echo "dataset: $NFILES files, $((BYTES / 1048576)) MiB; $NODES nodes (MPI ranks over TCP), one"
echo "trainer rank each (clairfs-bench, 4 workers, batch $BATCH); ram per node $((RAM / 1048576)) MiB;"
echo "emulated PFS: clairfs-pfsemu ${PFS_OPTS:-defaults: 2 ms/open, 0.5 ms/read, 200 MiB/s shared}"
run_pfs
run_clairfs clairfs ""
run_clairfs no_peers ",no_peers"

echo
printf '| epoch | PFS directly | clairfs (peers) | clairfs no_peers | PFS MiB: peers / no_peers | peer MiB |\n'
printf '|------:|-------------:|----------------:|-----------------:|--------------------------:|---------:|\n'
for e in $(seq 0 $((EPOCHS - 1))); do
    printf '| %5d | %10.2f s | %13.2f s | %14.2f s | %11.1f / %-11.1f | %8.1f |\n' "$e" \
        "${T[pfs,$e]}" "${T[clairfs,$e]}" "${T[no_peers,$e]}" \
        "$(awk -v b="${PFSB[clairfs,$e]}" 'BEGIN { print b / 1048576 }')" \
        "$(awk -v b="${PFSB[no_peers,$e]}" 'BEGIN { print b / 1048576 }')" \
        "$(awk -v b="${PEERB[clairfs,$e]}" 'BEGIN { print b / 1048576 }')"
done
echo "peer fetches (all nodes, all epochs): ${OK[clairfs]} answered, ${FB[clairfs]} fell back to the PFS"
echo "per-file fetch cost (submission to completion, queueing included, all nodes and epochs):"
echo "  clairfs: PFS ${COST[clairfs,pfs]}, peer ${COST[clairfs,peer]}; no_peers: PFS ${COST[no_peers,pfs]}"
echo "start-up (mpirun to every mount ready): clairfs ${START[clairfs]} s, no_peers ${START[no_peers]} s ($NODES nodes)"
# Start-up alone for other node counts: the same dataset and options (world
# = nodes), mounted and unmounted, nothing read.
line="start-up by node count:"
for np in ${STARTUP_NODES:-2 4 8}; do
    launch "$np" "startup$np" "seed=$SEED,world=$np,batch=$BATCH,epochs=$EPOCHS,ram=$((BYTES / np * 11 / 10))" ||
        continue
    unmount "$np"
    line="$line $np nodes ${STARTUP} s;"
done
echo "${line%;}"
last=$((EPOCHS - 1))
awk -v p="${T[pfs,$last]}" -v c="${T[clairfs,$last]}" -v n="${T[no_peers,$last]}" 'BEGIN {
    printf "last epoch: clairfs %.1fx faster than the PFS directly, %.1fx faster than no_peers\n",
        p / c, n / c }'
