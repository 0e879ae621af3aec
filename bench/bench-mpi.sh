#!/bin/bash
# Distributed clairfs on one host, each node behind its own emulated
# network link: epoch times of a trainer replay (clairfs-bench, one trainer
# rank per node, every rank at once) for 2, 4 and 8 nodes over
#   pfs        the emulated PFS directly (clairfs-pfsemu over a copy in /tmp)
#   clairfs    one clairfs daemon per node under mpirun, sharing their caches
#              over MPI (ram per node = 1/NODES of the dataset + 10 %)
#   no_peers   the same daemons with -o no_peers (each node alone)
#   memory     the local-memory limit: the trainers on a tmpfs copy
#   clairfs_learnt  the daemons of clairfs with nothing registered (no seed=,
#              world=, batch=, epochs=, which clairfs registers): each node
#              identifies the replay's order
#              (torch's DistributedSampler, the mount's own sampler code)
#              from its rank's opens and the nodes agree on one plan.  The
#              mount tells readers apart by process (a DataLoader's workers
#              are processes) and clairfs-bench's workers are threads of one
#              process: with more than one, their races scramble the one
#              reader's order and nothing is identified.  Run it with
#              WORKERS=1 (every configuration then replays one worker).
# side by side, in one run, on the same dataset and emulated PFS.  The
# epoch time is the slowest rank's (synchronous training waits for it).
# Figures, not assertions.
#
#   bench/bench-mpi.sh [BUILD_DIR] [--nodes "2 4 8"] [--epochs E] [--files F]
#                      [--loopback] [--configs "pfs memory clairfs ..."]
#
# --files is per class (8 classes); --configs runs those named (default
# the first four; clairfs_learnt only when named).  With clairfs and
# clairfs_learnt both run, a table puts their epochs from 2 on side by
# side (what the learnt order costs once every node plans it) with the
# ratios learnt / registered, and each learnt run prints the nodes'
# agreement from their log, how many nodes identified the order and their
# predictions' hits and misses:
#   WORKERS=1 bench/bench-mpi.sh --nodes "2 4" --files 500 --epochs 4 \
#       --configs "pfs clairfs clairfs_learnt"
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
# of every clairfs process of the run) over the epoch's span, the wait per
# open, the opens by source, the FUSE read requests that reached the
# daemons, the per-file fetch time by source and clairfs_peer_late_total.
#
# Every rank runs all epochs back to back in one process, as a trainer
# does: a pause between epochs would let each cache stage the next epoch
# for free.
#
# Environment: COMPUTE (the trainer's compute seconds per batch, default 0:
# I/O bound), WORKERS (clairfs-bench's loader threads, default 4),
# LINK_RATE (tc rate, default 1gbit), LINK_DELAY (netem delay, default
# 50us, where the kernel has netem), PFS_OPTS (clairfs-pfsemu -o
# options; default its own: 2 ms per open, 0.5 ms per read, 200 MiB/s
# shared: at 2 nodes as fast as both links together; PFS_OPTS=bandwidth=52428800
# gives the job a quarter of it, a PFS shared as on a cluster), MODEL_PFS_BW,
# MODEL_PFS_LATENCY (given to the performance model, which measures both
# otherwise), BENCH_KEEP_LOGS (a directory the daemons' logs are copied to
# at exit), OMPI_* as usual.  As root the
# Open MPI run-as-root variables are set.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
NODE_COUNTS="2 4 8" EPOCHS=3 FILES=250 CLASSES=8 LOOPBACK=
CONFIGS="pfs memory clairfs no_peers"
while [ $# -gt 0 ]; do
    case $1 in
    --nodes) NODE_COUNTS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --loopback) LOOPBACK=1; shift ;;
    --configs) CONFIGS=$2; shift 2 ;;
    -*) echo "usage: $0 [BUILD_DIR] [--nodes \"2 4 8\"] [--epochs E] [--files F] [--loopback] [--configs \"pfs memory clairfs no_peers clairfs_learnt\"]" >&2
        exit 2 ;;
    *) BUILD=$1; shift ;;
    esac
done
for c in $CONFIGS; do
    case $c in
    pfs | memory | clairfs | no_peers | clairfs_learnt) ;;
    *) echo "unknown configuration $c (pfs memory clairfs no_peers clairfs_learnt)" >&2; exit 2 ;;
    esac
done
WORKERS=${WORKERS:-4}
wanted() { case " $CONFIGS " in *" $1 "*) return 0 ;; esac; return 1; }
wanted clairfs_learnt && [ "$WORKERS" -gt 1 ] &&
    echo "clairfs_learnt with $WORKERS loader threads: one reader to the mount, not identified (WORKERS=1)" >&2
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
    [ -n "${BENCH_KEEP_LOGS:-}" ] && mkdir -p "$BENCH_KEEP_LOGS" && cp "$W"/*.log "$BENCH_KEEP_LOGS"/ 2>/dev/null
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
# The model measures the PFS (its latency and the bandwidth a fetch sees)
# and the peers by their fetches; MODEL_PFS_BW or MODEL_PFS_LATENCY give the
# PFS's figures instead.
{
    [ -n "${MODEL_PFS_BW:-}" ] && printf 'pfs_bw = %s\npfs_client_bw = %s\n' "$MODEL_PFS_BW" "$MODEL_PFS_BW"
    [ -n "${MODEL_PFS_LATENCY:-}" ] && printf 'pfs_latency = %s\n' "$MODEL_PFS_LATENCY"
    :
} >"$W/model.conf"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# train N CFG HOOK DIR...: one training run of world N: every trainer rank
# at once, rank r on DIR r, every epoch back to back in one process, the
# ranks meeting at each epoch's end (clairfs-bench --barrier) as synchronous
# data-parallel training does.  (Each epoch used to be a fresh run after the
# last one's bookkeeping: the second or so between epochs let every cache
# stage the next epoch for free, which no trainer gives it.)  HOOK E, unless
# "-", runs as soon as every rank has ended epoch E, while they go on.  Sets
# T[N,CFG,E] to the slowest rank's epoch-E wall time; returns 1 when a rank
# failed.
train() {
    local n=$1 cfg=$2 hook=$3 r e=0 rc=0 alive p all bar=$W/bar.$1.$2
    shift 3
    local dirs=("$@") pids=()
    rm -rf "$bar" && mkdir -p "$bar"
    for ((r = 0; r < n; r++)); do
        "$BENCH" -o "seed=$SEED,world=$n,batch=$BATCH,epochs=$EPOCHS" --epochs "$EPOCHS" \
            ${COMPUTE:+--compute "$COMPUTE"} --rank "$r" --workers "$WORKERS" --barrier "$bar" \
            --csv "${dirs[$r]}" >"$W/b.$n.$cfg.$r" 2>&1 &
        pids+=($!)
    done
    while [ "$e" -lt "$EPOCHS" ]; do
        all=1
        for ((r = 0; r < n; r++)); do [ -e "$bar/epoch-$e.rank-$r" ] || { all=0; break; }; done
        if [ $all = 1 ]; then
            [ "$hook" = - ] || "$hook" "$e"
            e=$((e + 1))
            continue
        fi
        alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 1 ] || break
        sleep 0.005
    done
    for ((r = 0; r < n; r++)); do wait "${pids[$r]}" || rc=1; done
    [ "$e" = "$EPOCHS" ] || rc=1
    [ $rc = 0 ] || { echo "$n nodes, $cfg: a trainer rank failed:"; cat "$W"/b."$n.$cfg".*; }
    for ((e = 0; e < EPOCHS; e++)); do
        T[$n,$cfg,$e]=$(for ((r = 0; r < n; r++)); do cat "$W/b.$n.$cfg.$r"; done |
            awk -F, -v e="$e" '$3 == e && $4 + 0 > m { m = $4 + 0 } END { print m + 0 }')
    done
    return $rc
}

# The daemons' PIDs (the processes running $CLAIRFS on this run's PFS),
# found once per launch so that a snapshot reads only their stat files.
DPIDS=()
find_daemons() {
    mapfile -t DPIDS < <(pgrep -f -- "^$CLAIRFS .*$W/pfs ")
}

# A snapshot runs while the trainers read, on 2 busy cores: builtins only
# (a fork costs tens of ms there, and a late snapshot blurs the epochs).
# daemon_ticks: CPU ticks (utime + stime) the daemons used so far, into TICKS.
daemon_ticks() {
    local p line f
    TICKS=0
    for p in "${DPIDS[@]}"; do
        { read -r line <"/proc/$p/stat"; } 2>/dev/null || continue
        line=${line##*) } # fields 14 and 15 after the ")" that ends the command name
        read -ra f <<<"$line"
        TICKS=$((TICKS + f[11] + f[12]))
    done
}

# link_bytes: bytes sent into the nodes over their veths (the host ends'
# transmit counters: what left their tc qdiscs), into LINK.
link_bytes() {
    local r b
    LINK=0
    [ "$NET" = netns ] || return 0
    for ((r = 0; r < NET_NODES; r++)); do
        { read -r b <"/sys/class/net/cfh${NET_TAG}n$r/statistics/tx_bytes"; } 2>/dev/null || b=0
        LINK=$((LINK + b))
    done
}

# snapshot TAG: every mount's metrics, the daemons' CPU ticks, the link
# bytes and the time, now.
SNAP_N=0
snapshot() {
    local r m
    for ((r = 0; r < SNAP_N; r++)); do
        mapfile -t m <"$W/mnt$r/.clairfs/metrics"
        printf '%s\n' "${m[@]}" >"$W/snap.$1.$r"
    done
    daemon_ticks
    link_bytes
    printf '%s %s %s\n' "${EPOCHREALTIME/./}000" "$TICKS" "$LINK" >"$W/snap.$1.x"
}

# snap_sum TAG KEY: a metric summed over the mounts of snapshot TAG.
snap_sum() {
    local r
    for ((r = 0; r < SNAP_N; r++)); do cat "$W/snap.$1.$r"; done |
        awk -v k="$2" '$1 == k { s += $2 } END { printf "%.6f", s }'
}
snap_x() { awk -v i="$2" '{ print $i }' "$W/snap.$1.x"; } # TAG FIELD: 1 ns, 2 ticks, 3 link bytes
sub_i() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

TICK=$(getconf CLK_TCK)
declare -A T PFSB PEERB LINKB OK FB START COST CPU WAIT OPENS FMS RREQ SPAN LATE WHY LEARNT

# run_direct N CFG DIR: every rank of world N reads DIR (no clairfs).
run_direct() {
    local n=$1 cfg=$2 dir=$3 r dirs=()
    for ((r = 0; r < n; r++)); do dirs+=("$dir"); done
    train "$n" "$cfg" - "${dirs[@]}"
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
    find_daemons
}

# unmount N: every node's mount, then wait for mpirun.
unmount() {
    local r
    for r in $(seq 0 $(($1 - 1))); do fusermount3 -u "$W/mnt$r"; done
    wait "$MPIPID"
    MPIPID=
}

# run_clairfs N CFG OPTS: N nodes (mount options OPTS besides ram= and
# index=: the registered settings, or none), one training run, with the PFS, peer
# and link bytes of each epoch and what explains its time (deltas of the
# snapshots taken as each epoch ends; the ranks drift apart by a few
# batches, so an epoch's deltas are those up to its slowest rank's end).
run_clairfs() {
    local n=$1 cfg=$2 opts=$3 e r dirs=() a b src k t opens line o
    for ((r = 0; r < n; r++)); do dirs+=("$W/mnt$r"); done
    launch "$n" "$cfg" "${opts:+$opts,}ram=$((BYTES / n * 11 / 10)),log_level=info" ||
        return 1
    START[$n,$cfg]=$STARTUP
    SNAP_N=$n
    rm -f "$W"/snap.*
    snapshot b
    train "$n" "$cfg" snapshot "${dirs[@]}" || { unmount "$n"; return 1; }
    a=b
    for ((e = 0; e < EPOCHS; e++)); do
        b=$e
        SPAN[$n,$cfg,$e]=$(awk -v a="$(snap_x $a 1)" -v b="$(snap_x $b 1)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        CPU[$n,$cfg,$e]=$(awk -v a="$(snap_x $a 2)" -v b="$(snap_x $b 2)" -v k="$TICK" 'BEGIN { printf "%.2f", (b - a) / k }')
        LINKB[$n,$cfg,$e]=$(sub_i "$(snap_x $a 3)" "$(snap_x $b 3)")
        PFSB[$n,$cfg,$e]=$(sub_i "$(snap_sum $a 'clairfs_fetch_bytes_total{from="pfs"}')" \
            "$(snap_sum $b 'clairfs_fetch_bytes_total{from="pfs"}')")
        PEERB[$n,$cfg,$e]=$(sub_i "$(snap_sum $a 'clairfs_fetch_bytes_total{from="peer"}')" \
            "$(snap_sum $b 'clairfs_fetch_bytes_total{from="peer"}')")
        # opens by source, the wait per open, the per-file fetch time by source
        opens=0 line=
        for src in ram ssd peer pfs; do
            k="clairfs_reads_total{source=\"$src\"}"
            o=$(sub_i "$(snap_sum $a "$k")" "$(snap_sum $b "$k")")
            line="$line $o" opens=$((opens + o))
        done
        OPENS[$n,$cfg,$e]=${line# }
        RREQ[$n,$cfg,$e]=$(sub_i "$(snap_sum $a clairfs_read_requests_total)" "$(snap_sum $b clairfs_read_requests_total)")
        LATE[$n,$cfg,$e]=$(sub_i "$(snap_sum $a clairfs_peer_late_total)" "$(snap_sum $b clairfs_peer_late_total)")
        WAIT[$n,$cfg,$e]=$(awk -v a="$(snap_sum $a clairfs_stall_seconds_total)" \
            -v b="$(snap_sum $b clairfs_stall_seconds_total)" -v k="$opens" 'BEGIN {
            if (k > 0) printf "%.2f", 1000 * (b - a) / k; else printf "-" }')
        line=
        for src in pfs peer; do
            k=$(sub_i "$(snap_sum $a "clairfs_fetches_total{from=\"$src\"}")" \
                "$(snap_sum $b "clairfs_fetches_total{from=\"$src\"}")")
            line="$line $(awk -v k="$k" -v u="$(snap_sum $a "clairfs_fetch_seconds_total{from=\"$src\"}")" \
                -v t="$(snap_sum $b "clairfs_fetch_seconds_total{from=\"$src\"}")" 'BEGIN {
                if (k > 0) printf "%.1f", 1000 * (t - u) / k; else printf "-" }')"
        done
        FMS[$n,$cfg,$e]=${line# }
        # the PFS bytes by why no peer gave them (clairfs_pfs_bytes_total)
        line=
        for src in unheld unread slow model fallback reclaimed; do
            k="clairfs_pfs_bytes_total{reason=\"$src\"}"
            line="$line $(mib "$(sub_i "$(snap_sum $a "$k")" "$(snap_sum $b "$k")")")"
        done
        WHY[$n,$cfg,$e]=${line# }
        a=$b
    done
    snapshot end # after the run: what the prefetchers did after the last epoch too
    OK[$n,$cfg]=$(snap_sum end 'clairfs_peer_fetches_total{result="ok"}' | cut -d. -f1)
    FB[$n,$cfg]=$(snap_sum end 'clairfs_peer_fetches_total{result="fallback"}' | cut -d. -f1)
    for src in pfs peer; do
        k=$(snap_sum end "clairfs_fetches_total{from=\"$src\"}")
        t=$(snap_sum end "clairfs_fetch_seconds_total{from=\"$src\"}")
        COST[$n,$cfg,$src]=$(awk -v k="$k" -v t="$t" 'BEGIN {
            if (k > 0) printf "%.2f ms (%d)", 1000 * t / k, k; else printf "- (0)" }')
    done
    LEARNT[$n,$cfg]="order identified on $(snap_sum end clairfs_order_identified | cut -d. -f1) of $n nodes;
    predictions $(snap_sum end 'clairfs_prediction_total{result="hit"}' | cut -d. -f1) hit,
    $(snap_sum end 'clairfs_prediction_total{result="miss"}' | cut -d. -f1) missed; log:
$(grep -E 'order: (identified|nodes [0-9-]+ agree|.*contradict|.*drop)' "$W/clairfs.$n.$cfg.log" | sed 's/^/      /')"
    unmount "$n"
}

echo "dataset: $NFILES files, $(mib "$BYTES") MiB; trainer: clairfs-bench, one rank per node, $WORKERS workers,"
echo "batch $BATCH, compute ${COMPUTE:-0} s per batch; ram per node 1/nodes of the dataset + 10 %;"
echo "$EPOCHS epochs back to back in one run per rank, the ranks meeting at each epoch's end"
echo "emulated PFS: clairfs-pfsemu ${PFS_OPTS:-defaults: 2 ms/open, 0.5 ms/read, 200 MiB/s shared}"
if [ "$NET" = netns ]; then
    net_describe
    echo "MPI: one orted per namespace, btl tcp over the veths (no shared memory)"
else
    echo "network: none emulated, every rank on the host's loopback (btl tcp)"
fi
for n in $NODE_COUNTS; do
    echo "running $n nodes ..." >&2
    REG="seed=$SEED,world=$n,batch=$BATCH,epochs=$EPOCHS"
    ! wanted pfs || run_direct "$n" pfs "$W/pfs"
    ! wanted memory || run_direct "$n" memory "$MEM"
    ! wanted clairfs || run_clairfs "$n" clairfs "$REG" || continue
    ! wanted no_peers || run_clairfs "$n" no_peers "$REG,no_peers" || continue
    ! wanted clairfs_learnt || run_clairfs "$n" clairfs_learnt "" || continue
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
echo "/proc/PID/stat) over the epoch's span (from the previous epoch's end, or the trainers' start), the trainers' wait per open (clairfs_stall_seconds_total / opens), the opens"
echo "by source (ram ssd peer pfs), the FUSE read requests that reached the daemons (a file staged in"
echo "the page cache makes none), the per-file fetch time (pfs / peer, ms, submission to completion) and"
echo "the owned files peers asked for before their owner had begun them (clairfs_peer_late_total), and"
echo "the PFS MiB by why no peer gave them (clairfs_pfs_bytes_total: unheld unread slow model fallback reclaimed):"
printf '| nodes | epoch | config   | daemon CPU / span |  wait/open | opens ram ssd peer pfs | FUSE reads | fetch ms pfs / peer | late | PFS MiB by reason |\n'
printf '|------:|------:|:---------|------------------:|-----------:|:-----------------------|-----------:|:--------------------|-----:|:------------------|\n'
for n in $NODE_COUNTS; do
    for e in $(seq 0 $((EPOCHS - 1))); do
        for cfg in clairfs no_peers clairfs_learnt; do
            [ -n "${CPU[$n,$cfg,$e]:-}" ] || continue
            printf '| %5d | %5d | %-8s | %6s s / %6s s | %7s ms | %-22s | %10s | %-19s | %4s | %s |\n' "$n" "$e" "$cfg" \
                "${CPU[$n,$cfg,$e]}" "${SPAN[$n,$cfg,$e]}" "${WAIT[$n,$cfg,$e]}" "${OPENS[$n,$cfg,$e]}" "${RREQ[$n,$cfg,$e]}" \
                "$(echo "${FMS[$n,$cfg,$e]}" | sed 's| | / |')" "${LATE[$n,$cfg,$e]}" "${WHY[$n,$cfg,$e]}"
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

# Registered against learnt: the epochs from 2 on, by when every node plans
# the learnt order (identified in epoch 0, agreed, planned from epoch 1 or 2).
wanted clairfs && wanted clairfs_learnt && [ "$EPOCHS" -gt 2 ] && {
    echo
    echo "registered (seed=, world=, batch= given) against learnt (nothing registered), epochs 2-$last:"
    echo "epoch time (the slowest rank's) and PFS MiB (all nodes), learnt / registered (=: both"
    echo "read nothing from the PFS; -: the registered run read nothing, the learnt one some)"
    printf '| nodes | epoch | registered | learnt | ratio | PFS MiB registered | PFS MiB learnt | ratio |
'
    printf '|------:|------:|-----------:|-------:|------:|-------------------:|---------------:|------:|
'
    for n in $NODE_COUNTS; do
        for e in $(seq 2 "$last") sum; do
            if [ "$e" = sum ]; then
                tr=0 tl=0 br=0 bl=0
                for ((k = 2; k <= last; k++)); do
                    tr=$(awk -v a="$tr" -v b="$(v "$n,clairfs,$k")" 'BEGIN { print a + b }')
                    tl=$(awk -v a="$tl" -v b="$(v "$n,clairfs_learnt,$k")" 'BEGIN { print a + b }')
                    br=$((br + ${PFSB[$n,clairfs,$k]:-0})) bl=$((bl + ${PFSB[$n,clairfs_learnt,$k]:-0}))
                done
                label="2-$last"
            else
                tr=$(v "$n,clairfs,$e") tl=$(v "$n,clairfs_learnt,$e")
                br=${PFSB[$n,clairfs,$e]:-0} bl=${PFSB[$n,clairfs_learnt,$e]:-0} label=$e
            fi
            awk -v n="$n" -v e="$label" -v tr="$tr" -v tl="$tl" -v br="$br" -v bl="$bl" 'BEGIN {
                rt = tr + 0 > 0 ? sprintf("%.2f", tl / tr) : "-"
                rb = br + 0 > 0 ? sprintf("%.2f", bl / br) : (bl + 0 == 0 ? "=" : "-")
                printf "| %5s | %5s | %8.3f s | %4.3f s | %5s | %18.2f | %14.2f | %5s |\n",
                    n, e, tr, tl, rt, br / 1048576, bl / 1048576, rb }'
        done
    done
}
for n in $NODE_COUNTS; do
    [ -n "${LEARNT[$n,clairfs_learnt]:-}" ] && echo "  $n nodes, clairfs_learnt: ${LEARNT[$n,clairfs_learnt]}"
done
exit 0
