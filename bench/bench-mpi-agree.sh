#!/usr/bin/env bash
# Time from the first open to the agreed plan on a distributed mount of
# ImageNet-1k's size, nothing registered (no seed=, world=, batch=): the
# nodes identify the order from their own ranks' opens, exchange their
# claims over MPI and adopt one plan.  identify_share (meson test
# --benchmark) times the same steps offline, on opens it is handed; this
# bench times them live, through mounts under mpirun, with the catalog,
# the FUSE opens, the DataLoader workers' races and the peers' messages in
# the way.
#
# The tree is ImageNet-1k's shape on tmpfs (bench/imagenet_tree.sh: 1000
# class folders, 1 281 167 files of 64-256 bytes).  Per row, NODES clairfs
# daemons under mpirun (shared memory and loopback, one host), each on its
# own mount of the tree, and a torch DDP job of world NODES x RANKS: rank r
# reads node r / RANKS's mount (the block of ranks torchrun --nnodes and
# Slurm's block distribution give), through a DataLoader over
# DistributedSampler(world, rank, seed=SEED, shuffle=True) at epoch 0,
# batch 32, 2 workers, each item a file read whole.  Each rank computes
# ImageFolder's sample list (torchvision's make_dataset) on the tree itself
# rather than through its mount, so that a million FUSE lookups do not
# delay it, then waits until every rank has listed, so that all nodes'
# first opens come together.  The ranks read until every node has logged
# its plan of the agreed order ("order: identified ...; predicting it") or
# --opens files each, or --cap seconds.
#
# Printed per node: mount to ready (the catalog scan), the node's first
# open (its ranks' workers note it, a file each, just before they open) to
# the identification, to the agreement and to its plan adopted as its log
# says them (each log line stamped with the time it came through mpirun;
# the plan of 1.28 M samples comes after the agreement), the opens the
# identification needed, what the node's log says of the agreement (its
# own figure: the seconds after the first claim it heard or made), and its
# peak memory (VmHWM).  Figures, not assertions; not part of the test suite.
#
# usage: bench/bench-mpi-agree.sh [--build DIR] [--rows "NODES:RANKS:SEED ..."]
#            [--files N] [--cache DIR] [--opens N] [--cap S]
#   --rows   nodes, ranks a node and the sampler's seed per row (default
#            "2:1:0 2:2:0": world 2, one rank a node; world 4, two a node;
#            seed 0, DistributedSampler's default)
#   --files  dataset size (default 1281167)
#   --cache  keep the generated tree in DIR/imagenet-N and reuse it there
#            (default: generated in the work directory, removed at exit)
#   --opens  a rank stops after this many files (default 1000000)
#   --cap    a row stops this long after its first open (default 240)
# Environment: BENCH_TMP (default /dev/shm), BENCH_KEEP=1 (keep the work
# directory: the logs and the ranks' notes), OMPI_* as usual; as root the
# Open MPI run-as-root variables are set.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-build} rows="2:1:0 2:2:0" files=1281167 cache= opens=1000000 cap=240
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --rows) rows=${2:?}; shift 2 ;;
    --files) files=${2:?}; shift 2 ;;
    --cache) cache=${2:?}; shift 2 ;;
    --opens) opens=${2:?}; shift 2 ;;
    --cap) cap=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-mpi-agree: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$files" "$opens" "$cap"; do
    case $v in
    '' | *[!0-9]*) echo "bench-mpi-agree: --files, --opens and --cap take whole numbers, not $v" >&2; exit 2 ;;
    esac
done
for row in $rows; do
    [[ $row =~ ^[1-9][0-9]*:[1-9][0-9]*:[0-9]+$ ]] ||
        { echo "bench-mpi-agree: bad row $row (NODES:RANKS:SEED)" >&2; exit 2; }
done
case $build in /*) ;; *) build=$top/$build ;; esac
CLAIRFS=$build/clairfs TORCH_PY=/usr/bin/python3
[ -x "$CLAIRFS" ] || { echo "bench-mpi-agree: $CLAIRFS is not built" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "bench-mpi-agree: no mpirun" >&2; exit 1; }
command -v fusermount3 >/dev/null || { echo "bench-mpi-agree: no fusermount3" >&2; exit 1; }
"$TORCH_PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "bench-mpi-agree: torch and torchvision do not import under $TORCH_PY" >&2; exit 1; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_COMMON="--oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo"

bench_name=bench-mpi-agree
. "$top/bench/mount_cleanup.sh"
sub() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%.2f", a - b }'; }
# stamp: stdin to stdout, each line after the time it came ($EPOCHREALTIME)
stamp() {
    local line
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done
}

work=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-benchagree.XXXXXX") || exit 1
src=${cache:+$cache/imagenet-$files}
src=${src:-$work/imagenet-$files}
. "$top/bench/imagenet_tree.sh"
imagenet_tree "$src" "$files" "$TORCH_PY" || exit 1

# ---- a rank: ImageFolder's samples, DistributedSampler, DataLoader ----
cat >"$work/rank.py" <<'PY'
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes, make_dataset

src, mnt, seed, world, rank, out, go, stop, cap = sys.argv[1:]
seed, world, rank, cap = int(seed), int(world), int(rank), int(cap)
_, class_to_idx = find_classes(src)
paths = [mnt + p[len(src):] for p, _ in make_dataset(src, class_to_idx, IMG_EXTENSIONS)]


class Files(Dataset):
    """ImageFolder's samples read whole through the mount; a worker's first
    item notes the time (a file per worker) before it opens."""
    first = False

    def __len__(self):
        return len(paths)

    def __getitem__(self, i):
        if not self.first:
            self.first = True
            with open("%s.first.%d" % (out, os.getpid()), "w") as f:
                f.write("%.6f\n" % time.time())
        with open(paths[i], "rb") as f:
            return len(f.read())


ds = Files()
sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed)
sampler.set_epoch(0)
loader = DataLoader(ds, sampler=sampler, batch_size=32, num_workers=2, collate_fn=list)
open(out + ".listed", "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
n = 0
for items in loader:
    n += len(items)
    if n >= cap or os.path.exists(stop):
        break
with open(out, "w") as f:
    f.write("%d %d\n" % (len(ds), n))
PY

# first_open GLOB: REPLY := the earliest time noted in the files GLOB names
first_open() {
    local f t
    REPLY=
    for f in $1; do
        { read -r t <"$f"; } 2>/dev/null || continue
        [ -z "$REPLY" ] || awk -v a="$t" -v b="$REPLY" 'BEGIN { exit !(a < b) }' && REPLY=$t
    done
}
# line_time LOG NODE PATTERN: REPLY := the stamp of node NODE's first log
# line matching PATTERN (after "clairfs[rank NODE]: "), REST := the line
REST=
line_time() {
    local l
    l=$(grep -m1 -E "^[0-9.]+ clairfs\[rank $2\]: $3" "$1")
    REPLY=${l%% *} REST=${l#* }
}
PLANNED="order: identified .*; predicting it"
all_planned() {
    local j
    for ((j = 0; j < $2; j++)); do
        grep -qE "clairfs\[rank $j\]: $PLANNED" "$1" || return 1
    done
}

results=()
k=0
for row in $rows; do
    k=$((k + 1))
    IFS=: read -r nodes per seed <<<"$row"
    world=$((nodes * per))
    for ((j = 0; j < nodes; j++)); do mkdir -p "$work/m$k-$j"; mnts+=("$work/m$k-$j"); done
    log=$work/clairfs-$k.log
    t_mount=$EPOCHREALTIME
    # shellcheck disable=SC2086
    mpirun -np "$nodes" $MPI_COMMON "$CLAIRFS" -f \
        -o "ram=1G,index=$work/index-$k-{rank},log_level=info" "$src" "$work/m$k-{rank}" \
        > >(stamp >"$log") 2>&1 &
    mpid=$!
    pids+=($mpid)
    t_ready=()
    while [ ${#t_ready[@]} -lt "$nodes" ]; do
        kill -0 $mpid 2>/dev/null ||
            { echo "bench-mpi-agree: mpirun exited before the mounts were ready ($row):" >&2; tail -5 "$log" >&2; exit 1; }
        for ((j = 0; j < nodes; j++)); do
            [ -z "${t_ready[j]:-}" ] && [ -e "$work/m$k-$j/.clairfs/ready" ] && t_ready[j]=$EPOCHREALTIME
        done
        sleep 0.2
    done
    echo "$row: every mount ready $(sub "$EPOCHREALTIME" "$t_mount") s after mpirun; $world ranks listing"
    rpids=()
    for ((r = 0; r < world; r++)); do
        "$TORCH_PY" "$work/rank.py" "$src" "$work/m$k-$((r / per))" "$seed" "$world" "$r" \
            "$work/rank-$k.$r" "$work/go-$k" "$work/stop-$k" "$opens" >"$work/rank-$k.$r.out" 2>&1 &
        rpids+=($!)
        pids+=($!)
    done
    for ((r = 0; r < world; r++)); do
        until [ -e "$work/rank-$k.$r.listed" ]; do
            kill -0 "${rpids[r]}" 2>/dev/null ||
                { echo "bench-mpi-agree: rank $r exited before listing ($row):" >&2; tail -3 "$work/rank-$k.$r.out" >&2; exit 1; }
            sleep 0.1
        done
    done
    touch "$work/go-$k"
    t_go=$EPOCHREALTIME
    planned=no
    while :; do
        sleep 0.2
        alive=0
        for p in "${rpids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        all_planned "$log" "$nodes" && { planned=yes; break; }
        [ $alive = 1 ] || break
        [ "$(sub "$EPOCHREALTIME" "$t_go" | cut -d. -f1)" -lt "$cap" ] || break
    done
    touch "$work/stop-$k"
    for ((r = 0; r < world; r++)); do wait "${rpids[r]}" || echo "bench-mpi-agree: rank $r exited $? ($row)" >&2; done
    hwm=() # each daemon's, by its MPI rank (the node)
    for p in $(pgrep -f -- "^$CLAIRFS .* $work/m$k-"); do
        j=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
        [ -n "$j" ] && hwm[j]=$(awk '/VmHWM/ { printf "%.0f MiB", $2 / 1024 }' "/proc/$p/status")
    done
    for ((j = 0; j < nodes; j++)); do fusermount3 -u "$work/m$k-$j" || fusermount3 -u -z "$work/m$k-$j"; done
    wait $mpid
    first_open "$work/rank-$k.*.first.*"
    t_first_all=$REPLY
    for ((j = 0; j < nodes; j++)); do
        first_open "$work/rank-$k.$((j * per)).first.*"
        t_first=$REPLY
        for ((r = j * per + 1; r < (j + 1) * per; r++)); do
            first_open "$work/rank-$k.$r.first.*"
            [ -n "$REPLY" ] && awk -v a="$REPLY" -v b="$t_first" 'BEGIN { exit !(a < b) }' && t_first=$REPLY
        done
        line_time "$log" "$j" "identify: .* after [0-9]+ opens in"
        t_id=$REPLY id_opens=$(echo "$REST" | sed -n 's/.* after \([0-9]*\) opens in .*/\1/p')
        line_time "$log" "$j" "order: nodes 0-[0-9]+ agree"
        t_ag=$REPLY says=$(echo "$REST" | sed -n 's/.*agree: \(.*\)$/\1/p')
        line_time "$log" "$j" "$PLANNED"
        t_pl=$REPLY
        read -r _ n_read <"$work/rank-$k.$((j * per))" 2>/dev/null || n_read=-
        results+=("$(printf '%-9s %4d %7s %7s %7s %8s %7s %8s %7s %6s %8s   %s' "$row" "$j" \
            "$(sub "${t_ready[j]}" "$t_mount")" "$(sub "$t_id" "$t_first")" "$(sub "$t_ag" "$t_first")" \
            "$(sub "$t_ag" "$t_first_all")" "$(sub "$t_pl" "$t_first")" "$(sub "$t_pl" "$t_first_all")" \
            "${id_opens:--}" "$n_read" "${hwm[j]:--}" "${says:-no agreement}")")
    done
    echo "$row: planned on every node: $planned; load $(cut -d' ' -f1-3 /proc/loadavg)"
    grep -E 'identify:|order:' "$log" | cut -d' ' -f2- | sed "s/^/$row: /"
    rm -rf "$work"/index-$k-*
done

echo
echo "dataset: $files files in 1000 class folders; $(nproc) CPUs; DistributedSampler, batch 32, 2 workers a rank"
echo "times in s from the node's first open (its ranks' workers note it) to its log's lines"
echo "(identified, agreed, planned: its plan adopted), and (any) from the first open on any node;"
echo "opens: the identification's, as logged; read: the files the node's first rank read in all;"
echo "hwm: the daemon's peak resident memory; ready: mpirun to the node's mount ready"
printf '%-9s %4s %7s %7s %7s %8s %7s %8s %7s %6s %8s   %s\n' row node ready ident agreed "agr(any)" \
    planned "pl(any)" opens read hwm "the log's agreement"
for r in "${results[@]}"; do echo "$r"; done
