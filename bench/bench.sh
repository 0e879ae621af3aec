#!/usr/bin/env bash
# The side-by-side benchmark behind docs/performance.md: one trainer replay (clairfs-bench,
# 4 DataLoader workers, batches of 32, a training step per batch) over every
# way of reaching a generated ImageNet-like dataset, in one run:
#
#   tmpfs directly           the dataset in memory: the limit
#   bindfs over tmpfs        what a plain FUSE passthrough costs
#   emulated PFS directly    clairfs-pfsemu over the tmpfs copy (2 ms per open,
#                            0.5 ms per read, 200 MiB/s shared): a trainer today
#   parallel copy, then train  stage-in: STAGEIN_JOBS parallel cp from the
#                            emulated PFS to node-local tmpfs (its time is the
#                            row's setup), then the trainer on the copy
#   rclone mount             --vfs-cache-mode full over the emulated PFS, cache
#                            dir on tmpfs capped at the RAM budget: the reactive
#                            caching FUSE people use for this
#   clairfs, no seed         over the emulated PFS, ram= the RAM budget
#   clairfs, seed            the same, told the trainer's sampler seed
#
# epochs 1-3, RAM budget 100 % and 50 % of the dataset per node, 1 node and
# 4 nodes (4 concurrent readers, one per trainer rank of world=4; clairfs as
# `mpirun -np 4 clairfs` with a mount per rank, rclone as one mount per node,
# the uncached baselines as 4 readers of one directory), and a pure-I/O
# variant (no compute) on 1 node.  Prints a table of epoch times with the
# ratio to the limit and the speedup over the PFS, writes CSV and a PNG plot
# to the output directory and, for a complete run, the committed copy in
# docs/bench/ (latest.png, latest.csv, latest.md) and the figures in the
# docs/performance.md.
#
# usage: bench/bench.sh [--quick] [--out DIR] [options]
#   --quick          2000 files (~250 MB) instead of 8000 (~0.9 GB)
#   --out DIR        results (default BUILD/bench-results, else /tmp)
#   --build DIR      meson build directory (default $CLAIRFS_BUILD or build)
#   --compute SEC    training step per batch (default: calibrated so that the
#                    compute of an epoch is half the PFS's pure-I/O epoch)
#   --only REGEX     run only the configurations whose id matches (ids look
#                    like n1-train-clairfs-seed-r50); implies --no-docs
#   --no-docs        leave docs/bench/ and docs/performance.md alone
# Environment: BENCH_PFS (clairfs-pfsemu -o options, default its defaults),
# BENCH_TMP (a tmpfs directory for the dataset, mounts and caches, default
# /dev/shm), BENCH_TIMEOUT (seconds per configuration, default from the
# calibration), BENCH_MPIRUN_ARGS (extra mpirun arguments), STAGEIN_JOBS
# (parallel cp processes per node of the stage-in row, default 16),
# BENCH_CLAIRFS_OPTS (extra clairfs -o options of the clairfs rows, e.g.
# kernel_open).
#
# A configuration that fails (a tool missing, a mount that never comes, a
# reader that errs or times out) gets "n/a (reason)" in its row; the table
# goes on.  Everything a configuration starts is stopped before the next
# one, and everything at all on exit, Ctrl-C or TERM.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
STAGEIN_JOBS=${STAGEIN_JOBS:-16}
cmdline="bench/bench.sh${*:+ $*}"

quick=0 out= build=${CLAIRFS_BUILD:-build} compute_arg= only= docs=1
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --compute) compute_arg=${2:?--compute needs seconds}; shift 2 ;;
    --only) only=${2:?--only needs a regex}; docs=0; shift 2 ;;
    --no-docs) docs=0; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac

SEED=42 BATCH=32 WORKERS=4 EPOCHS=3 NODES4=4
MOUNT_TIMEOUT=60
if [ $quick -eq 1 ]; then CLASSES=20 FILES=100; else CLASSES=40 FILES=200; fi
# Lognormal with median 92 KiB: mean ~110 KiB, as ImageNet's JPEGs.
SIZE_SPEC=lognormal:92K:0.6
PFS_OPTS=${BENCH_PFS:-}
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi

say() { printf '== %s\n' "$*" >&2; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }

# --- what is running; cleanup undoes all of it, by mount point and by PID.
work= mounts=() pids=() started=$(now) load0=$(cut -d' ' -f1-3 /proc/loadavg)
is_mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
mount_count() { awk -v m="$1" '$5 == m { n++ } END { print n + 0 }' /proc/self/mountinfo; }
unmount() { # every mount stacked on $1 (a broken mpirun run may stack several)
    local i
    for i in 1 2 3 4 5 6 7 8; do
        is_mounted "$1" || return 0
        timeout 10 fusermount3 -u "$1" 2>/dev/null || timeout 10 fusermount3 -u -z "$1" 2>/dev/null
    done
    ! is_mounted "$1"
}
stop_pid() { # TERM after a grace period for a clean exit, then KILL
    local p=$1 i
    kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null; return 0; }
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$p" 2>/dev/null
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    return 0
}
stop_all() { # unmount (newest first: clairfs before the PFS under it), then the PIDs
    local i
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do unmount "${mounts[$i]}"; done
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[$i]}"; done
    mounts=() pids=()
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_all
    if [ -n "$work" ] && [ -d "$work" ]; then
        if grep -qF " $work/" /proc/self/mountinfo; then
            echo "bench: something is still mounted under $work; left it in place" >&2
        else
            rm -rf --one-file-system "$work"
        fi
    fi
    [ $rc -ne 0 ] && echo "bench: stopped (status $rc); everything it started is cleaned up" >&2
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_mount MNT PID SECS [FILE]: until MNT is mounted (and MNT/FILE exists)
# while PID lives.
wait_mount() {
    local mnt=$1 pid=$2 secs=$3 file=${4:-} i
    for ((i = 0; i < secs * 20; i++)); do
        if is_mounted "$mnt" && { [ -z "$file" ] || [ -e "$mnt/$file" ]; }; then return 0; fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
# last_words LOG: for an n/a reason, the first line of LOG that reads like
# an error, else its last line; paths inside the work directory shortened.
last_words() {
    local l
    l=$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | grep -viE '^(\[|-----|mpirun|primary job|process name|exit code|a non-zero)')
    { grep -iE 'error|fail|cannot|can.t|refus|already|invalid|denied|not |no such|unknown' <<<"$l" || tail -n 1 <<<"$l"; } |
        head -n 1 | sed "s|$work/run/[^/]*/||g; s|$work/||g" | cut -c1-120 | tr -d '|\t'
}

# --- build and tools
say "build: $build"
if [ ! -f "$build/build.ninja" ]; then
    timeout 300 meson setup "$build" >/dev/null || { echo "bench: meson setup $build failed" >&2; exit 1; }
fi
if ! timeout 900 meson compile -C "$build" clairfs clairfs-pfsemu clairfs-bench >"/tmp/bench-build.$$.log" 2>&1; then
    echo "bench: building failed (log /tmp/bench-build.$$.log); using the binaries there are" >&2
else
    rm -f "/tmp/bench-build.$$.log"
fi
CLAIRFS=$build/clairfs PFSEMU=$build/clairfs-pfsemu BENCH=$build/clairfs-bench
for b in "$PFSEMU" "$BENCH"; do
    [ -x "$b" ] || { echo "bench: $b is not built" >&2; exit 1; }
done
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "bench: needs /dev/fuse and fusermount3" >&2; exit 1; }
if [ -z "$out" ]; then
    if [ -d "$build" ]; then out=$build/bench-results; else out=/tmp/clairfs-bench-results; fi
fi
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
rm -f "$out"/bench.csv "$out"/bench.md "$out"/bench.png "$out"/n[0-9]*-*.log # an earlier run's

# --- a tmpfs work directory: the dataset there is "in memory", the limit.
base=${BENCH_TMP:-/dev/shm}
work=$(mktemp -d "$base/clairfs-benchsuite.XXXXXX") || exit 1
chmod 755 "$work"
fstype=$(stat -f -c %T "$work")
[ "$fstype" = tmpfs ] || say "warning: $work is $fstype, not tmpfs: the 'limit' row is not memory"
src=$work/dataset
say "generating $((CLASSES * FILES)) files ($SIZE_SPEC) in $src"
timeout 600 "$PYTHON" "$top/tools/clairfs-gendata" --classes $CLASSES --files $FILES --size $SIZE_SPEC \
    --max-size 2M --seed 1 --quiet "$src" || { echo "bench: clairfs-gendata failed" >&2; exit 1; }
nfiles=$(find "$src" -type f | wc -l)
dsbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", s }')
dsmib=$(awk -v b="$dsbytes" 'BEGIN { printf "%.0f", b / 1048576 }')
say "dataset: $nfiles files, $dsmib MiB"
avail_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ "$((avail_kib * 1024))" -lt "$((dsbytes * 10))" ]; then
    say "warning: $((avail_kib / 1024)) MiB available; the 4-node rows at 100 % RAM hold ~9 copies of the dataset"
fi
rclone_conf=$work/rclone.conf
: >"$rclone_conf" # rclone reads no user config: the :local: remote needs none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_args=(--oversubscribe --mca pml ob1 --mca btl self,vader,tcp
             --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
# shellcheck disable=SC2206
[ -n "${BENCH_MPIRUN_ARGS:-}" ] && mpirun_args+=($BENCH_MPIRUN_ARGS)

# --- one configuration
declare -A LABEL=([tmpfs]="tmpfs directly (limit)" [bindfs]="bindfs over tmpfs"
    [pfs]="emulated PFS directly" [stagein]="stage-in: parallel copy, then train"
    [rclone]="rclone mount, vfs full"
    [clairfs]="clairfs, no seed" [clairfs-seed]="clairfs, seed")
rows=$work/rows.tsv
: >"$rows"
compute=0
tmo=${BENCH_TIMEOUT:-300}

# row ID GROUP SYS NODES PCT VARIANT STATUS SETUP E1 E2 E3 S1 S2 S3 NOTE
row() { local IFS=$'\t'; echo "$*" >>"$rows"; }

# start_pfs DIR: a fresh emulated PFS over the dataset at DIR/pfs (sets pfs).
start_pfs() {
    pfs=$1/pfs
    mkdir -p "$pfs"
    "$PFSEMU" -f ${PFS_OPTS:+-o "$PFS_OPTS"} "$src" "$pfs" >"$1/pfsemu.log" 2>&1 &
    pids+=($!) mounts+=("$pfs")
    wait_mount "$pfs" $! 30
}

# run_config ID SYS NODES PCT VARIANT: mount, replay, unmount, record a row.
run_config() {
    local id=$1 sys=$2 nodes=$3 pct=$4 variant=$5
    local group=n$nodes-$variant dir=$work/run/$id
    local c=$compute ram_kib r i p f rc reason= setup t0 mpipid= note=
    local -a dirs=() bpids=() opts=()
    [ "$variant" = io ] && c=0
    [ -n "$only" ] && ! [[ $id =~ $only ]] && return 0
    local tc=$SECONDS
    mkdir -p "$dir"
    ram_kib=$((dsbytes * pct / 100 / 1024))
    say "$id: ${LABEL[$sys]}, $nodes node(s)$([ "$pct" -gt 0 ] && echo ", RAM $pct %"), compute ${c}s/batch"

    # n/a ID REASON: the row, after stopping whatever this configuration started.
    na() {
        stop_all
        say "$id: n/a ($1)"
        for f in "$dir"/*.log; do [ -e "$f" ] && cp "$f" "$out/$id.${f##*/}"; done
        row "$id" "$group" "$sys" "$nodes" "$pct" "$variant" "n/a" "" "" "" "" "" "" "" "$1"
    }

    if ! start_pfs "$dir"; then na "clairfs-pfsemu did not mount: $(last_words "$dir/pfsemu.log")"; return; fi
    t0=$(now)
    case $sys in
    tmpfs | pfs)
        for ((r = 0; r < nodes; r++)); do dirs+=("$([ "$sys" = tmpfs ] && echo "$src" || echo "$pfs")"); done
        ;;
    stagein)
        # What HPC users do instead: copy the dataset from the PFS to
        # node-local memory at job start (STAGEIN_JOBS parallel cp, every node
        # its own copy, all from the one PFS at once), then train from it.
        # The copy is the row's setup time.  The directories first: parallel
        # `cp --parents` creating the same one race, and the loser fails
        # with "File exists".
        local -a cpids=()
        for ((r = 0; r < nodes; r++)); do
            mkdir -p "$dir/copy$r"
            (cd "$pfs" && find . -type d -print0 | (cd "$dir/copy$r" && xargs -0 -r mkdir -p) &&
                find . -type f -print0 |
                xargs -0 -r -n 64 -P "$STAGEIN_JOBS" cp --parents -t "$dir/copy$r") \
                >"$dir/stagein$r.log" 2>&1 &
            cpids+=($!) pids+=($!)
            dirs+=("$dir/copy$r")
        done
        for p in "${cpids[@]}"; do
            wait "$p" || { na "the parallel copy failed: $(last_words "$dir/stagein0.log")"; return; }
        done
        ;;
    bindfs)
        command -v bindfs >/dev/null || { na "bindfs not installed (tools/deps.sh)"; return; }
        mkdir -p "$dir/mnt"
        bindfs -f -o ro "$src" "$dir/mnt" >"$dir/bindfs.log" 2>&1 &
        pids+=($!) mounts+=("$dir/mnt")
        wait_mount "$dir/mnt" $! $MOUNT_TIMEOUT || { na "bindfs did not mount: $(last_words "$dir/bindfs.log")"; return; }
        for ((r = 0; r < nodes; r++)); do dirs+=("$dir/mnt"); done
        ;;
    rclone)
        command -v rclone >/dev/null || { na "rclone not installed (apt-get install rclone)"; return; }
        for ((r = 0; r < nodes; r++)); do
            mkdir -p "$dir/mnt$r" "$dir/rcache$r"
            # A poll interval of 2 s (default 1 min) so that the size cap holds
            # within an epoch; rclone evicts only when it polls.
            RCLONE_CONFIG=$rclone_conf rclone mount ":local:$pfs" "$dir/mnt$r" --read-only \
                --vfs-cache-mode full --cache-dir "$dir/rcache$r" --vfs-cache-max-size "${ram_kib}K" \
                --vfs-cache-poll-interval 2s --log-file "$dir/rclone$r.log" --log-level NOTICE \
                >>"$dir/rclone$r.log" 2>&1 &
            pids+=($!) mounts+=("$dir/mnt$r")
            dirs+=("$dir/mnt$r")
        done
        for ((r = 0; r < nodes; r++)); do
            wait_mount "$dir/mnt$r" "${pids[$((${#pids[@]} - nodes + r))]}" $MOUNT_TIMEOUT ||
                { na "rclone mount $r did not come up: $(last_words "$dir/rclone$r.log")"; return; }
        done
        ;;
    clairfs | clairfs-seed)
        [ -x "$CLAIRFS" ] || { na "clairfs is not built"; return; }
        opts=("world=$nodes" "batch=$BATCH" "epochs=$EPOCHS" "ram=${ram_kib}K" "ssd=0" "index=$dir/index{rank}")
        [ -n "${BENCH_CLAIRFS_OPTS:-}" ] && opts+=("$BENCH_CLAIRFS_OPTS")
        [ "$sys" = clairfs-seed ] && opts=("seed=$SEED" "${opts[@]}")
        local o
        o=$(IFS=,; echo "${opts[*]}")
        if [ "$nodes" -eq 1 ]; then
            mkdir -p "$dir/mnt0"
            "$CLAIRFS" -f -o "$o" "$pfs" "$dir/mnt0" >"$dir/clairfs.log" 2>&1 &
            pids+=($!) mounts+=("$dir/mnt0")
            wait_mount "$dir/mnt0" $! $MOUNT_TIMEOUT .clairfs/ready ||
                { na "clairfs did not mount: $(last_words "$dir/clairfs.log")"; return; }
        else
            command -v mpirun >/dev/null || { na "mpirun not installed"; return; }
            for ((r = 0; r < nodes; r++)); do mkdir -p "$dir/mnt$r"; mounts+=("$dir/mnt$r"); done
            mpirun -np "$nodes" "${mpirun_args[@]}" "$CLAIRFS" -f -o "$o" "$pfs" "$dir/mnt{rank}" \
                >"$dir/clairfs.log" 2>&1 &
            mpipid=$!
            pids+=("$mpipid")
            # One deadline for all ranks; ranks that mount on top of each
            # other (no {rank} substitution) fail the row at once.
            local missing=() stacked= deadline=$((SECONDS + MOUNT_TIMEOUT))
            while :; do
                missing=() stacked=
                for ((r = 0; r < nodes; r++)); do
                    is_mounted "$dir/mnt$r" && [ -e "$dir/mnt$r/.clairfs/ready" ] || missing+=("$r")
                    [ "$(mount_count "$dir/mnt$r")" -gt 1 ] &&
                        stacked="; $(mount_count "$dir/mnt$r") mounts stacked on rank $r's mount point"
                done
                [ ${#missing[@]} -eq 0 ] || [ -n "$stacked" ] || [ $SECONDS -ge $deadline ] && break
                kill -0 "$mpipid" 2>/dev/null || break
                sleep 0.1
            done
            # The ranks are mpirun's children: stop them by PID too should
            # mpirun itself need a KILL.
            for p in $(pgrep -P "$mpipid" 2>/dev/null); do pids+=("$p"); done
            if [ ${#missing[@]} -gt 0 ] || [ -n "$stacked" ]; then
                local why
                if [ -n "$stacked" ]; then
                    why="the daemons mounted on top of each other (${stacked#; }), {rank} was not the MPI rank"
                else
                    if kill -0 "$mpipid" 2>/dev/null; then
                        why="no mount for rank(s) $(IFS=,; echo "${missing[*]}") in ${MOUNT_TIMEOUT}s"
                    else
                        why="exited: $(last_words "$dir/clairfs.log")"
                    fi
                fi
                na "mpirun -np $nodes: $why"
                return
            fi
        fi
        for ((r = 0; r < nodes; r++)); do dirs+=("$dir/mnt$r"); done
        ;;
    esac
    setup=$(since "$t0")

    # The readers: one per trainer rank, concurrently, each with a time limit.
    for ((r = 0; r < nodes; r++)); do
        timeout -k 5 "$tmo" "$BENCH" -o "seed=$SEED,world=$nodes,batch=$BATCH" --rank "$r" \
            --workers $WORKERS --epochs $EPOCHS --compute "$c" --csv --label "$id" "${dirs[$r]}" \
            >"$dir/bench$r.csv" 2>"$dir/bench$r.log" &
        bpids+=($!) pids+=($!)
    done
    for ((r = 0; r < nodes; r++)); do
        wait "${bpids[$r]}"
        rc=$?
        if [ $rc -ne 0 ] && [ -z "$reason" ]; then
            if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then reason="reader timed out after $tmo s"
            else reason="reader rank $r failed: $(last_words "$dir/bench$r.log")"; fi
        fi
    done
    if [[ $sys == clairfs* ]]; then # what the daemons did, summed over the nodes
        note=$(for ((r = 0; r < nodes; r++)); do cat "$dir/mnt$r/.clairfs/metrics" 2>/dev/null; done | awk '
            $1 ~ /^clairfs_reads_total/ { split($1, a, "\""); rd[a[2]] += $2 }
            $1 ~ /prediction_total\{result="miss"/ { miss += $2 }
            $1 ~ /fetch_bytes_total\{from="pfs"/ { pf += $2 }
            END { printf "reads ram %d, ssd %d, peer %d, pfs %d; fetched from PFS %.0f MiB; prediction misses %d",
                  rd["ram"], rd["ssd"], rd["peer"], rd["pfs"], pf / 1048576, miss }')
    fi
    stop_all
    rm -rf "$dir"/rcache* "$dir"/index* "$dir"/copy* # memory back for the next configuration
    if [ -n "$reason" ]; then na "$reason"; return; fi

    # Per epoch: the slowest rank's wall and stall; every sample read once.
    local expect=$(((nfiles + nodes - 1) / nodes * nodes)) line
    line=$(cat "$dir"/bench*.csv | awk -F, -v E=$EPOCHS -v want="$expect" '
        $3 ~ /^[0-9]+$/ { e = $3; if ($4 > w[e]) w[e] = $4; if ($5 > s[e]) s[e] = $5; f[e] += $8 }
        END {
            for (e = 0; e < E; e++) {
                if (!(e in w)) { print "missing epoch " e + 1; exit }
                if (f[e] != want) { print "epoch " e + 1 " read " f[e] " files, expected " want; exit }
            }
            for (e = 0; e < E; e++) printf "%s%.3f", (e ? "\t" : "ok\t"), w[e]
            for (e = 0; e < E; e++) printf "\t%.3f", s[e]
        }')
    case $line in
    ok*) row "$id" "$group" "$sys" "$nodes" "$pct" "$variant" ok "$setup" $(echo "${line#ok}") "$note"
         say "$id: setup ${setup}s, epochs $(echo "$line" | cut -f2-4 | tr '\t' ' ') ($((SECONDS - tc)) s in all)" ;;
    *) na "${line:-no output from the readers}" ;;
    esac
}

# --- calibration: the PFS's pure-I/O epoch sets the compute per batch.
sys_list=(tmpfs bindfs pfs stagein rclone clairfs clairfs-seed)
only_saved=$only only=
tmo=${BENCH_TIMEOUT:-600}
run_config n1-io-pfs pfs 1 0 io
only=$only_saved
# The fastest of its epochs: the least disturbed by other load on the machine.
pfs_epoch=$(awk -F'\t' '$1 == "n1-io-pfs" && $7 == "ok" { m = $9; if ($10 < m) m = $10; if ($11 < m) m = $11
    printf "%.3f", m }' "$rows")
nbatches=$(((nfiles + BATCH - 1) / BATCH))
if [ -z "$pfs_epoch" ]; then
    # No measurement: transfer time at the emulator's default 200 MiB/s.
    pfs_epoch=$(awk -v b="$dsbytes" 'BEGIN { printf "%.3f", b / (200 * 1048576) }')
    say "calibration failed; assuming a PFS epoch of ${pfs_epoch}s (200 MiB/s)"
fi
if [ -n "$compute_arg" ]; then compute=$compute_arg
else compute=$(awk -v t="$pfs_epoch" -v n="$nbatches" 'BEGIN { printf "%.4f", 0.5 * t / n }'); fi
# A configuration may take many PFS epochs (rclone's first epoch: ~8): the
# limit only stops a hang.
tmo=${BENCH_TIMEOUT:-$(awk -v t="$pfs_epoch" 'BEGIN { printf "%d", 120 + 60 * t }')}
say "PFS pure-I/O epoch ${pfs_epoch}s; compute ${compute}s per batch of $BATCH ($nbatches batches per epoch on 1 node); ${tmo}s per configuration"

for sys in tmpfs bindfs rclone clairfs clairfs-seed; do
    case $sys in rclone | clairfs*) run_config "n1-io-$sys-r100" $sys 1 100 io ;; *) run_config "n1-io-$sys" $sys 1 0 io ;; esac
done
for nodes in 1 $NODES4; do
    for sys in "${sys_list[@]}"; do
        case $sys in
        rclone | clairfs*) for pct in 100 50; do run_config "n$nodes-train-$sys-r$pct" $sys $nodes $pct train; done ;;
        *) run_config "n$nodes-train-$sys" $sys $nodes 0 train ;;
        esac
    done
done
total_s=$(since "$started")
# Rows in the order of the systems above (the calibration ran first), 100 % before 50 %.
awk -F'\t' '{ k = index(" tmpfs bindfs pfs stagein rclone clairfs clairfs-seed ", " " $3 " "); printf "%03d %03d\t%s\n", k, 100 - $5, $0 }' "$rows" |
    sort -s -k1,2 | cut -f2- >"$rows.sorted" && mv "$rows.sorted" "$rows"

# --- report: the table (text or markdown), CSV, plot.
# table FORMAT: ratios on the total (setup + epochs) against the limit and
# the PFS of the same group (nodes, variant).
table() {
    awk -F'\t' -v fmt="$1" -v compute="$compute" '
    function label(s) {
        if (s == "tmpfs") return "tmpfs directly (limit)"
        if (s == "bindfs") return "bindfs over tmpfs"
        if (s == "pfs") return "emulated PFS directly"
        if (s == "stagein") return "stage-in: parallel copy, then train"
        if (s == "rclone") return "rclone mount --vfs-cache-mode full"
        if (s == "clairfs") return "clairfs, no seed"
        return "clairfs, seed"
    }
    function title(g) {
        split(g, p, "-")
        return (p[1] == "n1" ? "1 node" : substr(p[1], 2) " nodes (" substr(p[1], 2) " concurrent readers)") \
               (p[2] == "io" ? ", pure I/O (no compute)" : ", trainer (compute " compute " s per batch)")
    }
    { n++; for (i = 1; i <= NF; i++) v[n, i] = $i
      if ($7 == "ok") { tot = $8 + $9 + $10 + $11; T[n] = tot
          if ($3 == "tmpfs") lim[$2] = tot; if ($3 == "pfs") pfs[$2] = tot } }
    END {
        order[1] = "n1-train"; order[2] = "n4-train"; order[3] = "n1-io"
        for (k = 1; k <= 3; k++) {
            g = order[k]; shown = 0
            for (r = 1; r <= n; r++) {
                if (v[r, 2] != g) continue
                if (!shown++) {
                    if (fmt == "md") {
                        printf "\n**%s**\n\n| configuration | RAM | setup s | epoch 1 s | epoch 2 s | epoch 3 s | total s | × limit | speedup vs PFS |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", title(g)
                    } else {
                        printf "\n%s\n%-36s %5s %8s %8s %8s %8s %8s %8s %8s\n", title(g), "configuration", "RAM",
                               "setup", "epoch 1", "epoch 2", "epoch 3", "total", "x limit", "vs PFS"
                    }
                }
                ram = v[r, 5] > 0 ? v[r, 5] "%" : "-"
                if (v[r, 7] != "ok") {
                    if (fmt == "md") printf "| %s | %s | n/a (%s) |||||||\n", label(v[r, 3]), ram, v[r, 15]
                    else printf "%-36s %5s   n/a (%s)\n", label(v[r, 3]), ram, v[r, 15]
                    continue
                }
                xl = (g in lim) ? sprintf("%.2f", T[r] / lim[g]) : "?"
                xp = (g in pfs) ? sprintf("%.2fx", pfs[g] / T[r]) : "?"
                if (fmt == "md")
                    printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", label(v[r, 3]), ram,
                           v[r, 8], v[r, 9], v[r, 10], v[r, 11], T[r], xl, xp
                else
                    printf "%-36s %5s %8.2f %8.2f %8.2f %8.2f %8.2f %8s %8s\n", label(v[r, 3]), ram,
                           v[r, 8], v[r, 9], v[r, 10], v[r, 11], T[r], xl, xp
            }
        }
    }' "$rows"
}

{
    echo "config,system,nodes,ram_pct,variant,compute_s_per_batch,status,setup_s,epoch,wall_s,stall_s,x_limit,pfs_speedup,note"
    awk -F'\t' -v compute="$compute" '
    { n++; for (i = 1; i <= NF; i++) v[n, i] = $i
      if ($7 == "ok") for (e = 1; e <= 3; e++) {
          if ($3 == "tmpfs") lim[$2, e] = $(8 + e); if ($3 == "pfs") pfs[$2, e] = $(8 + e) } }
    END {
        for (r = 1; r <= n; r++) {
            c = v[r, 6] == "io" ? 0 : compute; note = v[r, 15]; gsub(/"/, "\"\"", note)
            if (v[r, 7] != "ok") {
                printf "%s,%s,%s,%s,%s,%s,n/a,,,,,,,\"%s\"\n", v[r, 1], v[r, 3], v[r, 4], v[r, 5], v[r, 6], c, note
                continue
            }
            for (e = 1; e <= 3; e++) {
                w = v[r, 8 + e]; g = v[r, 2]
                xl = ((g, e) in lim) && lim[g, e] > 0 ? sprintf("%.3f", w / lim[g, e]) : ""
                xp = ((g, e) in pfs) && w > 0 ? sprintf("%.3f", pfs[g, e] / w) : ""
                printf "%s,%s,%s,%s,%s,%s,ok,%s,%d,%s,%s,%s,%s,\"%s\"\n", v[r, 1], v[r, 3], v[r, 4], v[r, 5],
                       v[r, 6], c, v[r, 8], e, w, v[r, 11 + e], xl, xp, note
            }
        }
    }' "$rows"
} >"$out/bench.csv"

date_s=$(date -u '+%Y-%m-%d %H:%M UTC')
mem_gib=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
machine="$(nproc) CPUs (${cpu:-unknown}), $mem_gib GiB RAM, Linux $(uname -r)"
rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$top" diff --quiet HEAD -- src include 2>/dev/null || rev="$rev + uncommitted changes"
pfs_desc=${PFS_OPTS:-"defaults: latency_open=2ms, latency_read=0.5ms, bandwidth=200M"}

# plot: epoch times, a panel per group, a cluster of 3 bars per configuration.
plot_ok=0
if command -v gnuplot >/dev/null; then
    for g in n1-train n4-train n1-io; do
        awk -F'\t' -v g="$g" '$2 == g {
            s = $3; if (s == "pfs") s = "PFS"; if (s == "clairfs-seed") s = "clairfs+seed"
            if ($5 > 0) s = s " " $5 "%"
            if ($7 == "ok") printf "%s\t%s\t%s\t%s\n", s, $9, $10, $11
            else printf "%s (n/a)\t0\t0\t0\n", s }' "$rows" >"$work/plot-$g.tsv"
    done
    cat >"$work/plot.gp" <<EOF
set terminal pngcairo size 1400,1300 font ",10" noenhanced
set output "$out/bench.png"
set datafile separator "\t"
set datafile missing "NaN"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set ylabel "epoch time (s)"
set xtics scale 0 rotate by -25 offset -1,0
set key top right
set multiplot layout 3,1 title "clairfs-bench: $nfiles files, $dsmib MiB, batch $BATCH, $WORKERS workers; emulated PFS ($pfs_desc) — $date_s"
EOF
    t1="1 node, trainer (compute $compute s per batch)"
    t4="$NODES4 nodes, trainer ($NODES4 concurrent readers, one per rank)"
    t0="1 node, pure I/O"
    for g in n1-train:"$t1" n4-train:"$t4" n1-io:"$t0"; do
        f=$work/plot-${g%%:*}.tsv
        if [ -s "$f" ]; then
            printf 'set title "%s"\nplot "%s" using 2:xtic(1) title "epoch 1", "" using 3 title "epoch 2", "" using 4 title "epoch 3"\n' \
                "${g#*:}" "$f" >>"$work/plot.gp"
        fi
    done
    echo "unset multiplot" >>"$work/plot.gp"
    if timeout 60 gnuplot "$work/plot.gp" 2>"$work/gnuplot.log"; then plot_ok=1
    else say "gnuplot failed: $(last_words "$work/gnuplot.log")"; fi
else
    say "no gnuplot (tools/deps.sh gnuplot-nox): no plot"
fi

notes=$(awk -F'\t' '$3 ~ /^clairfs/ && $7 == "ok" && $15 != "" { printf "- `%s`: %s\n", $1, $15 }' "$rows")
{
    echo "# clairfs benchmark: epoch times side by side"
    echo
    echo "- date: $date_s; clairfs $rev; run took $(awk -v s="$total_s" 'BEGIN { printf "%.0f", s }') s"
    echo "- machine: $machine; load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo "- command: \`$cmdline\`"
    echo "- dataset: $nfiles files in $CLASSES class folders, $dsmib MiB (clairfs-gendata --size $SIZE_SPEC), on tmpfs"
    echo "- emulated PFS: clairfs-pfsemu over the tmpfs copy ($pfs_desc; direct_io, so nothing is in the page cache)"
    echo "- trainer: clairfs-bench, torch DistributedSampler(seed=$SEED), batch $BATCH, $WORKERS workers, prefetch_factor 2;"
    echo "  compute ${compute} s per batch = half the PFS's pure-I/O epoch (its fastest, ${pfs_epoch} s) over $nbatches batches;"
    echo "  the same per-batch compute on 4 nodes, where each rank has a quarter of the batches"
    echo
    echo "Times are wall seconds; an epoch is the slowest rank's. \"setup\" is mount until ready (clairfs: catalog"
    echo "scan and plan), \"total\" is setup plus the 3 epochs, \"× limit\" is total / total on tmpfs (1.00 = as fast"
    echo "as memory) and \"speedup vs PFS\" is the PFS's total / total, both in the same group. RAM is the cache"
    echo "budget per node as a share of the dataset: clairfs \`ram=\` (with \`ssd=0\`), rclone"
    echo "\`--vfs-cache-max-size\` on a tmpfs cache dir. Every configuration gets a fresh emulated PFS, fresh mounts,"
    echo "an empty cache and index. The tmpfs files are in memory anyway; FUSE mounts without \`kernel_cache\`"
    echo "drop their page cache on every open."
    table md
    if [ -n "$notes" ]; then
        echo
        echo "clairfs's own counters (all nodes, all epochs):"
        echo
        echo "$notes"
    fi
} >"$out/bench.md"

echo
echo "clairfs benchmark — $nfiles files, $dsmib MiB; $machine"
echo "emulated PFS: $pfs_desc; compute $compute s per batch; run took $(awk -v s="$total_s" 'BEGIN { printf "%.0f", s }') s"
table text
echo
echo "results: $out/bench.csv, $out/bench.md$([ $plot_ok -eq 1 ] && echo ", $out/bench.png")"

# --- the committed copy and docs/performance.md's figures (complete runs only)
if [ $docs -eq 1 ]; then
    mkdir -p "$top/docs/bench"
    cp "$out/bench.csv" "$top/docs/bench/latest.csv"
    cp "$out/bench.md" "$top/docs/bench/latest.md"
    [ $plot_ok -eq 1 ] && cp "$out/bench.png" "$top/docs/bench/latest.png"
    readme=$top/docs/performance.md
    if grep -q '^<!-- bench:begin -->' "$readme" && grep -q '^<!-- bench:end -->' "$readme"; then
        {
            echo "Latest run ($date_s, $machine), \`$cmdline\`:"
            table md | sed '/^\*\*.*pure I\/O/,$d'
            echo
            echo "Pure-I/O rows and clairfs's counters: [bench/latest.md](bench/latest.md)."
        } >"$work/readme-block"
        awk -v blk="$work/readme-block" '
            /^<!-- bench:begin -->/ { print; while ((getline l < blk) > 0) print l; skip = 1; next }
            /^<!-- bench:end -->/ { skip = 0 }
            !skip' "$readme" >"$work/README.new" && cat "$work/README.new" >"$readme"
    fi
    echo "updated docs/bench/latest.{csv,md$([ $plot_ok -eq 1 ] && echo ,png)} and docs/performance.md's figures"
fi
exit 0
