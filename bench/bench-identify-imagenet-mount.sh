#!/usr/bin/env bash
# Time to identify a real trainer's order at ImageNet-1k's size INSIDE a
# mount, with the 2^32 seed search at idle priority beside the running
# trainer (bench-identify-torch.sh times the same search offline, at full
# priority, without a trainer).
#
# The dataset is a tree shaped like ImageNet-1k's train split on tmpfs
# (bench/imagenet_tree.sh): 1000 class folders, 1 281 167 files in all,
# each 64-256 bytes of filler that ImageFolder lists and nothing decodes.  Per row one fresh mount (nothing registered: no seed=,
# no sampler options; ram= the whole tree; a fresh index=), timed from the
# mount to .clairfs/ready (the catalog scan), then a torch trainer through
# it: torchvision ImageFolder(MNT, loader=read the bytes), DataLoader(
# shuffle=True, generator=g seeded S, batch 32, 4 workers) (torch), or two
# rank processes with DistributedSampler(world 2, seed=S) meeting at every
# step over gloo as DDP's all-reduce would (torch-ddp), reading each file
# whole, until the mount reports the order identified (.clairfs/metrics
# clairfs_order_identified 1) and --after seconds more, and at least
# --window seconds from the first open, at most --cap (epoch after epoch:
# set_epoch(e) for torch-ddp).  Printed per row:
# mount to ready; the trainer's start to its first open (torch import and
# ImageFolder's listing through the mount); first open to identified as
# seen from outside (polled every second) and as the mount's log says it
# ("after N opens in T s") and how long after that line it said it predicts
# the order (the adoption's first plan; the log's lines are time-stamped as
# they come); the CPU seconds the mount's SCHED_IDLE threads
# (the search) had by then; the trainer's files/s while the search ran,
# after it, and over the first --window seconds from the first open (the
# same window for every row: a small seed, found at once, against a full
# search); and where the CPU went from the first open to the
# identification, in cores: the mount (the search apart), the emulator
# (--pfs), the rest (the trainer) and idle.  Figures, not assertions.
#
# Where the trainer reads the tree directly (the default) its main process,
# 4 workers and the mount keep both cores busy: the search at idle
# priority gets what they leave (10-15 % of a core).  A job's epoch 0 on a
# cluster waits for its PFS instead (the reason to mount clairfs); --pfs
# puts clairfs-pfsemu between the tree and the mount, so that the epoch is
# paced by the emulated PFS, as there.  The files are 64-256 bytes, so the
# PFS's rate in files/s is its bandwidth over ~160 bytes: bandwidth=480000
# is ~3000 files/s, what a node's share of a PFS serves of ImageNet's
# 110 KiB JPEGs at ~330 MB/s.
#
# usage: bench/bench-identify-imagenet-mount.sh [--build DIR] [--rows "ROW ..."]
#            [--cache DIR] [--cap S] [--after S] [--window S] [--files N]
#   --rows     KIND:SEED ... with KIND torch or torch-ddp (default
#              "torch:7 torch:4000000000 torch-ddp:4000000000")
#   --cache    keep the generated tree in DIR/imagenet-N and reuse it there
#              (default: generated in the work directory, removed at exit)
#   --cap      stop a trainer this long after its first open even if
#              nothing was identified (default 900)
#   --after    keep training this long after the identification (default 60)
#   --window   every row trains at least this long from its first open, and
#              its files/s over it is printed (default 180)
#   --files    dataset size (default 1281167; smaller sizes for a quick try,
#              spread over 1000 classes as evenly as possible)
#   --pfs OPTS mount the tree through clairfs-pfsemu -o OPTS (e.g.
#              latency_open=0.002,bandwidth=480000) and clairfs over that
#   --work US  each item costs the trainer's worker US microseconds of CPU
#              after its read (a JPEG's decode and augmentation: ~1500 on
#              one of these cores), so that the loader, not the tree, keeps
#              the cores busy: the search beside a CPU-bound trainer
#              (default 0)
# Environment: BENCH_TMP (default /dev/shm), BENCH_KEEP=1 (keep the work
# directory: the daemons' logs, the trainers' progress, named on the last
# line), BENCH_MOUNT_OPTS (more mount options, @K standing for the row's
# number: record_opens=/tmp/opens-@K keeps each row's opens for
# clairfs-plan --identify), BENCH_RANK0_DELAY (torch-ddp: rank 0 builds its
# DataLoader this many seconds after rank 1, so that rank 1's workers read
# their prefetched batches first and rank 0 is the late rank, the head of
# the epoch's order opening last; default 0).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-build} rows="torch:7 torch:4000000000 torch-ddp:4000000000"
cache= cap=900 after=60 window=180 files=1281167 pfs_opts= work=0
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --rows) rows=${2:?}; shift 2 ;;
    --cache) cache=${2:?}; shift 2 ;;
    --cap) cap=${2:?}; shift 2 ;;
    --after) after=${2:?}; shift 2 ;;
    --window) window=${2:?}; shift 2 ;;
    --files) files=${2:?}; shift 2 ;;
    --pfs) pfs_opts=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-identify-imagenet-mount: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$cap" "$after" "$window" "$work"; do
    case $v in
    '' | *[!0-9]*) echo "bench-identify-imagenet-mount: --cap, --after, --window and --work take whole numbers, not $v" >&2; exit 2 ;;
    esac
done
export BENCH_WORK_US=$work
for row in $rows; do
    case $row in
    torch:[0-9]* | torch-ddp:[0-9]*) ;;
    *) echo "bench-identify-imagenet-mount: bad row $row (KIND:SEED, KIND torch or torch-ddp)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
CLAIRFS=$build/clairfs PFSEMU=$build/clairfs-pfsemu TORCH_PY=/usr/bin/python3
[ -x "$CLAIRFS" ] || { echo "bench-identify-imagenet-mount: $CLAIRFS is not built" >&2; exit 1; }
[ -z "$pfs_opts" ] || [ -x "$PFSEMU" ] || { echo "bench-identify-imagenet-mount: $PFSEMU is not built" >&2; exit 1; }
"$TORCH_PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "bench-identify-imagenet-mount: torch and torchvision do not import under $TORCH_PY" >&2; exit 1; }
command -v fusermount3 >/dev/null || { echo "bench-identify-imagenet-mount: no fusermount3" >&2; exit 1; }

bench_name=bench-identify-imagenet-mount
. "$top/bench/mount_cleanup.sh"
now() { echo "$EPOCHREALTIME"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

work=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-benchimagenet.XXXXXX") || exit 1

# ---- the tree ----
src=${cache:+$cache/imagenet-$files}
src=${src:-$work/imagenet-$files}
. "$top/bench/imagenet_tree.sh"
imagenet_tree "$src" "$files" "$TORCH_PY" || exit 1
nbytes=$(du -sb --apparent-size "$src" | cut -f1)
# What clairfs mounts: the tree, or the emulated PFS over it.
under=$src epid=
if [ -n "$pfs_opts" ]; then
    under=$work/pfs
    mkdir -p "$under"
    "$PFSEMU" -f -o "$pfs_opts" "$src" "$under" >"$work/pfsemu.log" 2>&1 &
    epid=$!
    pids+=($epid)
    mnts+=("$under")
    for _ in $(seq 50); do mountpoint -q "$under" && break; sleep 0.1; done
    mountpoint -q "$under" ||
        { echo "bench-identify-imagenet-mount: clairfs-pfsemu did not mount:" >&2; tail -3 "$work/pfsemu.log" >&2; exit 1; }
fi

# ---- the trainer ----
cat >"$work/trainer.py" <<'PY'
import os, sys, time
import torch
from torch.utils.data import DataLoader, DistributedSampler
from torchvision.datasets import ImageFolder

root, kind, seed, world, rank, out, stop, cap, port = sys.argv[1:]
seed, world, rank, cap = int(seed), int(world), int(rank), float(cap)
t_start = time.time()
if world > 1:
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + port, world_size=world,
                            rank=rank)


WORK = int(os.environ.get("BENCH_WORK_US", "0")) * 1e-6


def read(path):
    with open(path, "rb") as f:
        size = len(f.read())
    if WORK:  # a decode's CPU (--work)
        until = time.process_time() + WORK
        while time.process_time() < until:
            pass
    return size


class Bytes(ImageFolder):
    """ImageFolder's index, each item the file's length: read whole, not decoded.
    A worker's first item notes the time (a file per worker) before it opens."""
    first = False

    def __getitem__(self, i):
        if not self.first:
            self.first = True
            with open("%s.first.%d" % (out, os.getpid()), "w") as f:
                f.write("%.6f\n" % time.time())
        return read(self.samples[i][0])


ds = Bytes(root, loader=read)
if rank == 0 and world > 1:
    time.sleep(float(os.environ.get("BENCH_RANK0_DELAY", "0")))
t_listed = time.time()
common = dict(batch_size=32, num_workers=4, collate_fn=list)
if kind == "torch":
    g = torch.Generator()
    g.manual_seed(seed)
    loader = DataLoader(ds, shuffle=True, generator=g, **common)
else:
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed)
    sampler.set_epoch(0)
    loader = DataLoader(ds, sampler=sampler, **common)
n, last, epoch, stopped = 0, 0.0, 0, False
with open(out, "w") as p:
    p.write("start %.6f listed %.6f samples %d\n" % (t_start, t_listed, len(ds)))
    while not stopped:  # epochs until told to stop
        if kind != "torch":
            sampler.set_epoch(epoch)
        for b, items in enumerate(loader):
            n += len(items)
            if world > 1:  # DDP's gradient all-reduce: the ranks step together
                dist.all_reduce(torch.zeros(4))
            t = time.time()
            if t - last >= 0.5:
                p.write("%.6f %d\n" % (t, n))
                p.flush()
                last = t
            if b % 16 == 0:
                flag = torch.tensor([1 if os.path.exists(stop) or t - t_listed > cap else 0])
                if world > 1:
                    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item():
                    stopped = True
                    break
        epoch += 1
    p.write("%.6f %d\nend %d epochs\n" % (time.time(), n, epoch))
del loader
if world > 1:
    dist.destroy_process_group()
PY

# The polling loop below forks nothing but its sleep: at 2 Hz its awk, cat
# and command substitutions took ~15 % of a core here, CPU the search at
# idle priority would otherwise have had.  Times in it are integer
# microseconds (usec, from $EPOCHREALTIME).
usec() { REPLY=${1/./}; REPLY=$((10#$REPLY)); }
# stamp: stdin to stdout, each line after the time it came ($EPOCHREALTIME)
stamp() {
    local line
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done
}
# metric_of MNT NAME: REPLY := the metric's value (empty without it)
metric_of() {
    local k v
    REPLY=
    while read -r k v; do [ "$k" = "$2" ] && { REPLY=$v; return; }; done \
        <"$1/.clairfs/metrics" 2>/dev/null
}
# stat_of FILE: STAT := the fields of a /proc stat file after the command
# name (STAT[0] the state, STAT[11] + STAT[12] the CPU ticks, STAT[16] the
# nice value, STAT[38] the policy); false when it is gone
stat_of() {
    local line
    { read -r line <"$1"; } 2>/dev/null || return 1
    STAT=(${line##*) })
}
# sample_idle PID: for each of PID's threads at SCHED_IDLE (policy 5) or
# nice 19 - the search's - its CPU ticks so far, kept per TID (a thread
# that ended keeps its last figure)
declare -A ticks
sample_idle() {
    local f tid
    for f in /proc/"$1"/task/*/stat; do
        stat_of "$f" || continue # a thread that ended
        if [ "${STAT[38]}" = 5 ] || [ "${STAT[16]}" = 19 ]; then
            tid=${f%/stat}
            ticks[${tid##*/}]=$((STAT[11] + STAT[12]))
        fi
    done
}
idle_cpu() {
    local tot=0 v
    for v in "${ticks[@]}"; do tot=$((tot + v)); done
    awk -v t="$tot" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }'
}
# proc_ticks PID: REPLY := the process's CPU ticks so far, every thread (0
# without it)
proc_ticks() {
    REPLY=0
    [ -n "$1" ] && stat_of "/proc/$1/stat" && REPLY=$((STAT[11] + STAT[12]))
    return 0
}
# cpu_snap MOUNT_PID: REPLY := "busy idle mount emulator" CPU ticks so far
# (the host's from /proc/stat; the mount's and the emulator's processes,
# every thread), read without a fork
cpu_snap() {
    local line m
    local -a c
    read -r line </proc/stat
    c=($line)
    proc_ticks "$1"; m=$REPLY
    proc_ticks "$epid"
    REPLY="$((c[1] + c[2] + c[3] + c[6] + c[7] + c[8])) $((c[4] + c[5])) $m $REPLY"
}
# cpu_split SNAP0 SNAP1 SEARCH_S: where the CPU went between two snapshots,
# in cores: the mount (its search apart), the emulator, the rest (the
# trainer and anything else) and idle
cpu_split() {
    awk -v a="$1" -v b="$2" -v srch="$3" -v hz="$(getconf CLK_TCK)" -v cpus="$(nproc)" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        busy = y[1] - x[1]; idle = y[2] - x[2]; m = y[3] - x[3]; e = y[4] - x[4]
        t = (busy + idle) / cpus / hz; if (t <= 0) { print "-"; exit }
        printf "mount %.2f (search %.2f), emulator %.2f, rest %.2f, idle %.2f cores over %.0f s",
            m / hz / t, srch / t, e / hz / t, (busy - m - e) / hz / t, idle / hz / t, t }'
}
# first_open K: REPLY := the earliest first-open time the trainers of row K
# wrote (empty before any)
first_open() {
    local f t best= bu=0
    REPLY=
    for f in "$work"/progress-$1.*.first.*; do
        { read -r t <"$f"; } 2>/dev/null && [ -n "$t" ] || continue # none yet: the glob
        usec "$t"
        if [ -z "$best" ] || [ "$REPLY" -lt "$bu" ]; then best=$t bu=$REPLY; fi
    done
    REPLY=$best
}
# rate FILE FROM TO: files/s the trainer read between two times (progress lines)
rate() {
    awk -v a="$2" -v b="$3" 'BEGIN { ta = tb = a; na = nb = 0 }
        NF == 2 && $1 ~ /^[0-9.]+$/ {
            if ($1 <= a) { ta = $1; na = $2 } if ($1 <= b) { tb = $1; nb = $2 } }
        END { if (tb - ta >= 5) printf "%.0f", (nb - na) / (tb - ta); else printf "-" }' "$1"
}

results=()
k=0
for row in $rows; do
    k=$((k + 1))
    kind=${row%%:*} seed=${row#*:} mnt=$work/mnt-$k
    world=1
    [ "$kind" = torch-ddp ] && world=2
    mkdir -p "$mnt"
    # the RAM tier holds the tree: a page (4 KiB) a file at least, and room
    opts="ram=$((files * 5 / 1024 + nbytes / 1048576 + 256))M,index=$work/index-$k"
    opts+=${BENCH_MOUNT_OPTS:+,${BENCH_MOUNT_OPTS//@K/$k}}
    t_mount=$(now) load_start=$(load)
    # each line of the mount's log stamped with the time it was written
    "$CLAIRFS" -f -o "$opts" "$under" "$mnt" > >(stamp >"$work/clairfs-$k.log") 2>&1 &
    dpid=$!
    pids+=($dpid)
    mnts+=("$mnt")
    until [ -e "$mnt/.clairfs/ready" ]; do
        kill -0 $dpid 2>/dev/null ||
            { echo "bench-identify-imagenet-mount: clairfs exited before ready ($row):" >&2; tail -5 "$work/clairfs-$k.log" >&2; exit 1; }
        sleep 0.2
    done
    t_ready=$(now)
    echo "$row: mount to ready $(sub "$t_ready" "$t_mount") s (load $(load)); training"
    tpids=()
    for ((r = 0; r < world; r++)); do
        "$TORCH_PY" "$work/trainer.py" "$mnt" "$kind" "$seed" $world $r "$work/progress-$k.$r" \
            "$work/stop-$k" "$cap" $((29500 + k)) >"$work/trainer-$k.$r.out" 2>&1 &
        tpids+=($!)
        pids+=($!)
    done
    t_first= t_id= cpu_id= t_stop= snap_first= snap_last= cpu_first=0
    ticks=()
    window_us=$((window * 1000000)) cap_us=$((cap * 1000000)) after_us=$((after * 1000000))
    while :; do
        sleep 1
        alive=0
        for p in "${tpids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 1 ] || break
        t=$EPOCHREALTIME
        usec "$t"; t_us=$REPLY
        sample_idle $dpid
        if [ -z "$t_first" ]; then
            first_open $k; t_first=$REPLY
            [ -z "$t_first" ] || { usec "$t_first"; first_us=$REPLY; cpu_snap $dpid; snap_first=$REPLY cpu_first=$(idle_cpu); }
            continue
        fi
        if [ -z "$t_id" ]; then
            cpu_snap $dpid; snap_last=$REPLY
            metric_of "$mnt" clairfs_order_identified
            if [ "$REPLY" = 1 ]; then
                t_id=$t id_us=$t_us cpu_id=$(idle_cpu) load_id=$(load)
                echo "$row: identified $(sub "$t_id" "$t_first") s after the first open (load $load_id)"
            fi
        fi
        if [ -z "$t_stop" ]; then
            since=$((t_us - first_us))
            if [ $since -ge $cap_us ] ||
                { [ $since -ge $window_us ] && [ -n "$t_id" ] && [ $((t_us - id_us)) -ge $after_us ]; }; then
                t_stop=$t stop_us=$t_us
                touch "$work/stop-$k"
            fi
        elif [ $((t_us - stop_us)) -gt 120000000 ]; then
            echo "bench-identify-imagenet-mount: the trainer did not stop ($row); killing it" >&2
            for p in "${tpids[@]}"; do kill "$p" 2>/dev/null; done
        fi
    done
    for p in "${tpids[@]}"; do wait "$p" || echo "bench-identify-imagenet-mount: trainer $p exited $? ($row):" \
        "$(tail -3 "$work"/trainer-$k.*.out)" >&2; done
    [ -n "$t_id" ] || cpu_id=$(idle_cpu)
    load_end=$(load)
    order=$(grep '^order:' "$mnt/.clairfs/stats" 2>/dev/null | head -1)
    search=$(grep '^search ' "$mnt/.clairfs/stats" 2>/dev/null | head -1)
    logline=$(grep -h 'after [0-9]* opens in' "$work/clairfs-$k.log" | head -1)
    adopted=$(grep -h 'order: identified .*; predicting it' "$work/clairfs-$k.log" | head -1)
    fusermount3 -u "$mnt" || fusermount3 -u -z "$mnt"
    wait $dpid 2>/dev/null
    p0=$work/progress-$k.0
    [ -n "$t_first" ] || { echo "bench-identify-imagenet-mount: no trainer opened a file ($row):" >&2; tail -5 "$work"/trainer-$k.*.out >&2; exit 1; }
    read -r _ ts _ tl _ nsamples <"$p0"
    t_end=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { t = $1 } END { print t }' "$p0")
    # files/s: rank 0's, times the world (the ranks step together)
    mul() { [ "$1" = - ] && echo - || echo $(($1 * world)); }
    if [ -n "$t_id" ]; then
        during=$(mul "$(rate "$p0" "$t_first" "$t_id")") post=$(mul "$(rate "$p0" "$t_id" "$t_end")")
        ident=$(sub "$t_id" "$t_first")
    else
        during=$(mul "$(rate "$p0" "$t_first" "$t_end")") post=- ident=">$(sub "$t_end" "$t_first")"
    fi
    win=$(mul "$(rate "$p0" "$t_first" "$(awk -v a="$t_first" -v w="$window" 'BEGIN { printf "%.6f", a + w }')")")
    mounts=$(echo "$logline" | sed -n 's/.*after \([0-9]*\) opens in \([0-9]*\) s.*/\1 opens, \2 s/p')
    results+=("$(printf '%-10s %10s %6s %7s %6s %8s %18s %8s %8s %8s   %s' "$kind" "$seed" \
        "$(sub "$t_ready" "$t_mount")" "$(sub "$t_first" "$ts")" "$ident" "$cpu_id" "${mounts:--}" \
        "$during" "$post" "$win" "$load_start / ${load_id:-$load_end}")")
    if [ -n "$logline" ]; then echo "$row: ${logline#* }"; else echo "$row: no identification logged"; fi
    [ -z "$logline" ] || [ -z "$adopted" ] ||
        echo "$row: predicting $(sub "${adopted%% *}" "${logline%% *}") s after the log named the order"
    echo "$row: ${order:-no order line}"
    echo "$row: the search's CPU by priority: ${search#search }"
    upto="the end"
    [ -z "$t_id" ] || upto="the identification"
    [ -z "$snap_last" ] || echo "$row: CPU from the first open to $upto: $(cpu_split \
        "$snap_first" "$snap_last" "$(awk -v c="$cpu_id" -v s="$cpu_first" 'BEGIN { print c - s }')")"
    echo "$row: $nsamples samples listed in $(sub "$tl" "$ts") s; stopped at $(sub "$t_end" "$t_first") s (load $load_end)"
    unset load_id
done

echo
read_from="read from tmpfs"
[ -z "$pfs_opts" ] || read_from="read through clairfs-pfsemu -o $pfs_opts"
echo "dataset: $files files, $((nbytes / 1024)) KiB, in 1000 class folders; $(nproc) CPUs; window ${window} s; $read_from"
printf '%-10s %10s %6s %7s %6s %8s %18s %8s %8s %8s   %s\n' sampler seed ready "1st-op" ident \
    "idle-cpu" "mount says" "f/s srch" "f/s aft" "f/s win" "load at mount / identified"
for r in "${results[@]}"; do echo "$r"; done
