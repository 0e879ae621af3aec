#!/bin/bash
# Distributed clairfs on one host, each node behind its own emulated
# network link: epoch times of a trainer replay (clairfs-bench, one trainer
# rank per node, every rank at once) for 2, 4 and 8 nodes over
#   pfs        the emulated PFS directly (clairfs-pfsemu over a copy in /tmp)
#   clairfs    one clairfs daemon per node under mpirun, sharing their caches
#              over MPI (ram per node = 1/NODES of the dataset + 10 %)
#   no_peers   the same daemons with -o no_peers (each node alone)
#   memory     the local-memory limit: the trainers on a tmpfs copy
# side by side, in one run, on the same dataset and emulated PFS.  The
# epoch time is the slowest rank's (synchronous training waits for it).
# Figures, not assertions.
#
#   bench/bench-mpi.sh [BUILD_DIR] [--nodes "2 4 8"] [--epochs E] [--files F]
#                      [--loopback]
#
# Each node is a network namespace joined to a bridge by a veth pair shaped
# with tc (bench/netns.sh): Open MPI runs one orted per namespace and its
# ranks talk over TCP across the links, never shared memory.  The bytes tc
# counted on the links are printed next to the peer bytes clairfs counted.
# Where namespaces cannot be made (not root, no iproute2) or with
# --loopback, the ranks share the host's loopback, as said in one line.
#
# Also printed per node count: the per-file cost of a fetch from the PFS and
# from a peer (clairfs_fetch_seconds_total / clairfs_fetches_total) and the
# start-up time (mpirun to every mount's ready file); and per configuration
# and epoch what explains the times: the daemons' CPU seconds (utime+stime
# of every clairfs process of the run) over the epoch's step, the wait per
# open, the opens by source, the FUSE read requests that reached the
# daemons, the per-file fetch time by source and clairfs_peer_late_total.
#
# Environment: LINK_RATE (tc rate, default 1gbit), LINK_DELAY (netem delay,
# default 50us, where the kernel has netem), PFS_OPTS (clairfs-pfsemu -o
# options; default its own: 2 ms per open, 0.5 ms per read, 200 MiB/s
# shared), MODEL_PFS_BW, MODEL_PFS_LATENCY (the performance model's), OMPI_*
# as usual.  As root the Open MPI run-as-root variables are set.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
NODE_COUNTS="2 4 8" EPOCHS=3 FILES=250 CLASSES=8 LOOPBACK=
while [ $# -gt 0 ]; do
    case $1 in
    --nodes) NODE_COUNTS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --loopback) LOOPBACK=1; shift ;;
    -*) echo "usage: $0 [BUILD_DIR] [--nodes \"2 4 8\"] [--epochs E] [--files F] [--loopback]" >&2
        exit 2 ;;
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
. "$ROOT/bench/netns.sh"

W=$(mktemp -d /tmp/clairfs-bench-mpi.XXXXXX)
MEM=$(mktemp -d /dev/shm/clairfs-bench-mpi.XXXXXX)
PFSPID= MPIPID=
cleanup() {
    local m
    for m in "$W"/mnt* "$W/pfs"; do
        mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    if [ -n "$MPIPID" ]; then
        for _ in $(seq 50); do kill -0 "$MPIPID" 2>/dev/null || break; sleep 0.1; done
        kill "$MPIPID" 2>/dev/null
        wait "$MPIPID" 2>/dev/null
    fi
    [ -n "$PFSPID" ] && { kill "$PFSPID" 2>/dev/null; wait "$PFSPID" 2>/dev/null; }
    net_teardown
    rm -rf "$W" "$MEM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

MAXN=0
for n in $NODE_COUNTS; do [ "$n" -gt "$MAXN" ] && MAXN=$n; done
NET=netns
tc_rate_bps "$LINK_RATE" >/dev/null || { echo "$NET_ERROR" >&2; exit 2; }
if [ -n "$LOOPBACK" ]; then
    NET=loopback
elif ! net_setup "$MAXN"; then
    echo "no emulated network ($NET_ERROR): ranks over the host's loopback instead"
    net_teardown
    NET=loopback
fi

"$PYTHON" "$ROOT/tools/clairfs-gendata" --classes "$CLASSES" --files "$FILES" --size imagenet \
    --quiet "$W/src"
cp -a "$W/src/." "$MEM/"
BYTES=$(du -sb "$W/src" | cut -f1)
NFILES=$((CLASSES * FILES))
mkdir -p "$W/pfs"
"$PFSEMU" -f ${PFS_OPTS:+-o "$PFS_OPTS"} "$W/src" "$W/pfs" >"$W/pfsemu.log" 2>&1 &
PFSPID=$!
for _ in $(seq 100); do mountpoint -q "$W/pfs" && break; sleep 0.1; done
mountpoint -q "$W/pfs" || { echo "pfsemu did not mount"; cat "$W/pfsemu.log"; exit 1; }

SEED=3 BATCH=16
# The model told the emulated PFS's shared bandwidth (clairfs-pfsemu's
# default, or MODEL_PFS_BW when PFS_OPTS changes it); the latencies of the
# PFS and of the peers are measured by the fetches (MODEL_PFS_LATENCY fixes
# the PFS's instead).
{
    printf 'pfs_bw = %s\npfs_client_bw = %s\n' "${MODEL_PFS_BW:-200M}" "${MODEL_PFS_BW:-200M}"
    [ -n "${MODEL_PFS_LATENCY:-}" ] && printf 'pfs_latency = %s\n' "$MODEL_PFS_LATENCY"
} >"$W/model.conf"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# epoch N CONFIG E DIR...: epoch E of every trainer rank of world N at
# once, rank r on DIR r; prints the slowest rank's wall time.
epoch() {
    local n=$1 cfg=$2 e=$3 r pids=() max=0 t
    shift 3
    local dirs=("$@")
    for r in $(seq 0 $((n - 1))); do
        "$BENCH" -o "seed=$SEED,world=$n,batch=$BATCH,epochs=$EPOCHS,start_epoch=$e" --epochs 1 \
            --rank "$r" --workers 4 --csv "${dirs[$r]}" >"$W/b.$n.$cfg.$e.$r" 2>&1 &
        pids+=($!)
    done
    for r in $(seq 0 $((n - 1))); do wait "${pids[$r]}"; done
    for r in $(seq 0 $((n - 1))); do
        t=$(tail -n 1 "$W/b.$n.$cfg.$e.$r" | cut -d, -f4)
        max=$(awk -v a="$max" -v b="${t:-0}" 'BEGIN { print (b > a) ? b : a }')
    done
    echo "$max"
}

sum_metric() { # N KEY: sum of a metric over the N mounts
    local n=$1 k=$2 r s=0 v
    for r in $(seq 0 $((n - 1))); do
        v=$(awk -v k="$k" '$1 == k { print $2 }' "$W/mnt$r/.clairfs/metrics")
        s=$((s + ${v:-0}))
    done
    echo $s
}

sum_metric_f() { # the same for a fractional metric (seconds)
    local n=$1 k=$2 r
    for r in $(seq 0 $((n - 1))); do cat "$W/mnt$r/.clairfs/metrics"; done |
        awk -v k="$k" '$1 == k { s += $2 } END { printf "%.6f", s }'
}

# daemon_cpu: CPU seconds (utime + stime) used so far by every clairfs
# daemon of this run (the processes running $CLAIRFS on this run's PFS).
TICK=$(getconf CLK_TCK)
daemon_cpu() {
    local d t=0 c
    for d in /proc/[0-9]*; do
        c=$( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
        case $c in "$CLAIRFS "*"$W/pfs "*) ;; *) continue ;; esac
        # fields 14 and 15 after the ")" that ends the command name
        t=$((t + $( { sed 's/.*) //' "$d/stat"; } 2>/dev/null | awk '{ print $12 + $13 + 0 }')))
    done
    awk -v t="$t" -v k="$TICK" 'BEGIN { printf "%.2f", t / k }'
}

declare -A T PFSB PEERB LINKB OK FB START COST CPU WAIT OPENS FMS RREQ SPAN LATE
# run_direct N CFG DIR: every rank of world N reads DIR (no clairfs).
run_direct() {
    local n=$1 cfg=$2 dir=$3 e r dirs=()
    for r in $(seq 0 $((n - 1))); do dirs+=("$dir"); done
    for e in $(seq 0 $((EPOCHS - 1))); do T[$n,$cfg,$e]=$(epoch "$n" "$cfg" "$e" "${dirs[@]}"); done
}

# launch N CFG OPTS: N daemons under mpirun, each on its mount, over the
# emulated links (or loopback); waits until every mount is ready and sets
# STARTUP to the seconds from mpirun to the last ready file.
launch() {
    local n=$1 cfg=$2 opts=$3 r t0 transport
    if [ "$NET" = netns ]; then
        transport=$(net_mpi_args "$W" "$n")
    else
        transport="--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
    fi
    rm -rf "$W"/idx*
    for r in $(seq 0 $((n - 1))); do mkdir -p "$W/mnt$r"; done
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    mpirun -np "$n" --oversubscribe $transport \
        "$CLAIRFS" -f -o "$opts,index=$W/idx{rank},model=$W/model.conf" \
        "$W/pfs" "$W/mnt{rank}" >"$W/clairfs.$n.$cfg.log" 2>&1 &
    MPIPID=$!
    local ready=0
    for _ in $(seq 1200); do
        ready=1
        for r in $(seq 0 $((n - 1))); do [ -e "$W/mnt$r/.clairfs/ready" ] || ready=0; done
        [ $ready = 1 ] && break
        kill -0 "$MPIPID" 2>/dev/null || break
        sleep 0.05
    done
    STARTUP=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
    [ $ready = 1 ] || { echo "$n nodes, $cfg: mounts not ready"; cat "$W/clairfs.$n.$cfg.log"; return 1; }
}

# unmount N: every node's mount, then wait for mpirun.
unmount() {
    local r
    for r in $(seq 0 $(($1 - 1))); do fusermount3 -u "$W/mnt$r"; done
    wait "$MPIPID"
    MPIPID=
}

link_bytes() { [ "$NET" = netns ] && net_bytes_to_nodes || echo 0; }

# run_clairfs N CFG EXTRA: N nodes, every epoch, with the PFS, peer and link
# bytes of each epoch (deltas of the nodes' counters and of tc's).
run_clairfs() {
    local n=$1 cfg=$2 extra=$3 e r dirs=() p q l
    for r in $(seq 0 $((n - 1))); do dirs+=("$W/mnt$r"); done
    launch "$n" "$cfg" "seed=$SEED,world=$n,batch=$BATCH,epochs=$EPOCHS,ram=$((BYTES / n * 11 / 10))$extra" ||
        return 1
    START[$n,$cfg]=$STARTUP
    local pb=0 qb=0 lb cb c sb=0 s src o k t rb=0 lt=0
    local -A ob kb tb
    for src in ram ssd peer pfs; do ob[$src]=0 kb[$src]=0 tb[$src]=0; done
    lb=$(link_bytes)
    cb=$(daemon_cpu)
    local w0 w1
    w0=$(date +%s%N)
    for e in $(seq 0 $((EPOCHS - 1))); do
        T[$n,$cfg,$e]=$(epoch "$n" "$cfg" "$e" "${dirs[@]}")
        c=$(daemon_cpu)
        w1=$(date +%s%N)
        SPAN[$n,$cfg,$e]=$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        w0=$w1
        p=$(sum_metric "$n" 'clairfs_fetch_bytes_total{from="pfs"}')
        q=$(sum_metric "$n" 'clairfs_fetch_bytes_total{from="peer"}')
        l=$(link_bytes)
        s=$(sum_metric_f "$n" 'clairfs_stall_seconds_total')
        PFSB[$n,$cfg,$e]=$((p - pb)) PEERB[$n,$cfg,$e]=$((q - qb)) LINKB[$n,$cfg,$e]=$((l - lb))
        CPU[$n,$cfg,$e]=$(awk -v a="$cb" -v b="$c" 'BEGIN { printf "%.2f", b - a }')
        # opens by source, the wait per open, the per-file fetch time by source
        local opens=0 line=
        for src in ram ssd peer pfs; do
            o=$(sum_metric "$n" "clairfs_reads_total{source=\"$src\"}")
            line="$line $((o - ob[$src]))"
            opens=$((opens + o - ob[$src]))
            ob[$src]=$o
        done
        OPENS[$n,$cfg,$e]=${line# }
        o=$(sum_metric "$n" 'clairfs_read_requests_total')
        RREQ[$n,$cfg,$e]=$((o - rb)) rb=$o
        o=$(sum_metric "$n" 'clairfs_peer_late_total')
        LATE[$n,$cfg,$e]=$((o - lt)) lt=$o
        WAIT[$n,$cfg,$e]=$(awk -v a="$sb" -v b="$s" -v k="$opens" 'BEGIN {
            if (k > 0) printf "%.2f", 1000 * (b - a) / k; else printf "-" }')
        line=
        for src in pfs peer; do
            k=$(sum_metric "$n" "clairfs_fetches_total{from=\"$src\"}")
            t=$(sum_metric_f "$n" "clairfs_fetch_seconds_total{from=\"$src\"}")
            line="$line $(awk -v k="$((k - kb[$src]))" -v t="$t" -v u="${tb[$src]}" 'BEGIN {
                if (k > 0) printf "%.1f", 1000 * (t - u) / k; else printf "-" }')"
            kb[$src]=$k tb[$src]=$t
        done
        FMS[$n,$cfg,$e]=${line# }
        pb=$p qb=$q lb=$l cb=$c sb=$s
    done
    OK[$n,$cfg]=$(sum_metric "$n" 'clairfs_peer_fetches_total{result="ok"}')
    FB[$n,$cfg]=$(sum_metric "$n" 'clairfs_peer_fetches_total{result="fallback"}')
    local src k t
    for src in pfs peer; do
        k=$(sum_metric "$n" "clairfs_fetches_total{from=\"$src\"}")
        t=$(sum_metric_f "$n" "clairfs_fetch_seconds_total{from=\"$src\"}")
        COST[$n,$cfg,$src]=$(awk -v k="$k" -v t="$t" 'BEGIN {
            if (k > 0) printf "%.2f ms (%d)", 1000 * t / k, k; else printf "- (0)" }')
    done
    unmount "$n"
}

echo "dataset: $NFILES files, $(mib "$BYTES") MiB; trainer: clairfs-bench, one rank per node, 4 workers,"
echo "batch $BATCH; ram per node 1/nodes of the dataset + 10 %; epochs $EPOCHS"
echo "emulated PFS: clairfs-pfsemu ${PFS_OPTS:-defaults: 2 ms/open, 0.5 ms/read, 200 MiB/s shared}"
if [ "$NET" = netns ]; then
    net_describe
    echo "MPI: one orted per namespace, btl tcp over the veths (no shared memory)"
else
    echo "network: none emulated, every rank on the host's loopback (btl tcp)"
fi
for n in $NODE_COUNTS; do
    echo "running $n nodes ..." >&2
    run_direct "$n" pfs "$W/pfs"
    run_direct "$n" memory "$MEM"
    run_clairfs "$n" clairfs "" || continue
    run_clairfs "$n" no_peers ",no_peers" || continue
done

v() { [ -n "${T[$1]:-}" ] && printf '%.3f' "${T[$1]}" || echo n/a; }
echo
printf '| nodes | epoch | PFS directly | clairfs (peers) | clairfs no_peers | local memory | PFS MiB: peers / no_peers | peer MiB | link MiB |\n'
printf '|------:|------:|-------------:|----------------:|-----------------:|-------------:|--------------------------:|---------:|---------:|\n'
for n in $NODE_COUNTS; do
    for e in $(seq 0 $((EPOCHS - 1))); do
        printf '| %5d | %5d | %10s s | %13s s | %14s s | %10s s | %11s / %-11s | %8s | %8s |\n' "$n" "$e" \
            "$(v "$n,pfs,$e")" "$(v "$n,clairfs,$e")" "$(v "$n,no_peers,$e")" "$(v "$n,memory,$e")" \
            "$(mib "${PFSB[$n,clairfs,$e]:-0}")" "$(mib "${PFSB[$n,no_peers,$e]:-0}")" \
            "$(mib "${PEERB[$n,clairfs,$e]:-0}")" \
            "$([ "$NET" = netns ] && mib "${LINKB[$n,clairfs,$e]:-0}" || echo -)"
    done
done
[ "$NET" = netns ] &&
    echo "(link MiB: bytes tc sent into the nodes over their veths during the epoch, MPI and TCP headers" &&
    echo " included; peer MiB: clairfs_fetch_bytes_total{from=\"peer\"} deltas, all nodes)"
echo
echo "why: per configuration and epoch, the CPU seconds all clairfs daemons used (utime+stime from"
echo "/proc/PID/stat) over the span of the epoch's step (the trainers' start-up included), the trainers' wait per open (clairfs_stall_seconds_total / opens), the opens"
echo "by source (ram ssd peer pfs), the FUSE read requests that reached the daemons (a file staged in"
echo "the page cache makes none), the per-file fetch time (pfs / peer, ms, submission to completion) and"
echo "the owned files peers asked for before their owner had begun them (clairfs_peer_late_total):"
printf '| nodes | epoch | config   | daemon CPU / span |  wait/open | opens ram ssd peer pfs | FUSE reads | fetch ms pfs / peer | late |\n'
printf '|------:|------:|:---------|------------------:|-----------:|:-----------------------|-----------:|:--------------------|-----:|\n'
for n in $NODE_COUNTS; do
    for e in $(seq 0 $((EPOCHS - 1))); do
        for cfg in clairfs no_peers; do
            [ -n "${CPU[$n,$cfg,$e]:-}" ] || continue
            printf '| %5d | %5d | %-8s | %6s s / %6s s | %7s ms | %-22s | %10s | %-19s | %4s |\n' "$n" "$e" "$cfg" \
                "${CPU[$n,$cfg,$e]}" "${SPAN[$n,$cfg,$e]}" "${WAIT[$n,$cfg,$e]}" "${OPENS[$n,$cfg,$e]}" "${RREQ[$n,$cfg,$e]}" \
                "$(echo "${FMS[$n,$cfg,$e]}" | sed 's| | / |')" "${LATE[$n,$cfg,$e]}"
        done
    done
done
echo
echo "per-file fetch cost (submission to completion, queueing included, all nodes and epochs),"
echo "peer fetches answered / fallen back to the PFS, start-up (mpirun to every mount ready):"
for n in $NODE_COUNTS; do
    echo "  $n nodes: clairfs PFS ${COST[$n,clairfs,pfs]:-n/a}, peer ${COST[$n,clairfs,peer]:-n/a};" \
        "no_peers PFS ${COST[$n,no_peers,pfs]:-n/a}; peer fetches ${OK[$n,clairfs]:-?} / ${FB[$n,clairfs]:-?};" \
        "start-up ${START[$n,clairfs]:-n/a} s (no_peers ${START[$n,no_peers]:-n/a} s)"
done
last=$((EPOCHS - 1))
for n in $NODE_COUNTS; do
    awk -v n="$n" -v p="$(v "$n,pfs,$last")" -v c="$(v "$n,clairfs,$last")" \
        -v q="$(v "$n,no_peers,$last")" -v m="$(v "$n,memory,$last")" 'BEGIN {
        if (c + 0 <= 0 || m + 0 <= 0) exit
        printf "last epoch, %d nodes: speed-up of clairfs over the PFS directly %.2fx, over no_peers %.2fx; clairfs takes %.2fx the local-memory time\n",
            n, p / c, q / c, c / m }'
done
