#!/usr/bin/env bash
# A real PyTorch DDP trainer (examples/train_ddp.py: ImageFolder,
# DistributedSampler, DataLoader worker processes, gloo, a one-layer model)
# over the dataset in local memory (tmpfs) and over clairfs mounts of that
# same directory, in one run: what the hit path costs a trainer whose data
# is all cached.  Epoch 1 is the cold one; the figure is the median of
# epochs 2..E per system and its ratio to tmpfs's, and the median of the
# ratios each round makes against its own tmpfs run (a pair shares the
# machine's load, which drifts between rounds).  Figures, no assertions.
#
# usage: bench/bench-ddp.sh [--build DIR] [--epochs E] [--reps R] [--trace]
#                           [--opts OPTS]...
#   --build DIR   meson build directory (default $CLAIRFS_BUILD or build)
#   --epochs E    epochs per training run (default 4)
#   --reps R      rounds, each one run on tmpfs then on every mount (default 2)
#   --opts OPTS   extra clairfs -o options of one configuration (repeatable;
#                 default one configuration, the defaults)
#   --trace       also record the kernel's fuse tracepoints (perf) over the
#                 cached epochs of the last round's run on each mount and
#                 print the requests of each type per cached epoch and per
#                 open; needs root and tracefs
#   --user        run the trainers and the mounts as an ordinary user, as on
#                 a cluster (created for the run and removed after;
#                 /dev/fuse made 0666 meanwhile, its mode restored); needs
#                 root; not with --trace
# Each mount also reports its daemon's CPU per cached epoch (from the end
# of epoch 1 to the trainer's exit; median over the rounds).
# Dataset: 2000 files of ~110 KB in 20 classes (clairfs-gendata, as
# bench.sh --quick) in BENCH_TMP (default /dev/shm); trainer: --world 2
# --workers 2 --batch 32 --seed 0; every clairfs run a fresh mount with the
# trainer's seed, ram= twice the dataset, ssd=0.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bench_name=bench-ddp reps=2
user=0 args=()
for a in "$@"; do if [ "$a" = --user ]; then user=1; else args+=("$a"); fi; done
set -- ${args[@]+"${args[@]}"}
. "$top/bench/trainer_bench_args.sh"
CLAIRFS=$build/clairfs
[ -x "$CLAIRFS" ] || { echo "bench-ddp: $CLAIRFS is not built" >&2; exit 1; }
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import torch, torchvision' 2>/dev/null || { echo "bench-ddp: needs torch and torchvision in $PYTHON" >&2; exit 1; }
if [ $trace -eq 1 ] && ! command -v perf >/dev/null; then echo "bench-ddp: --trace needs perf" >&2; exit 1; fi
if [ $user -eq 1 ] && { [ "$(id -u)" -ne 0 ] || [ $trace -eq 1 ]; }; then
    echo "bench-ddp: --user needs root, and not --trace (root cannot see a user's mount)" >&2
    exit 2
fi

. "$top/bench/fuse_trace.sh"
work= mnt= dpid= wpid= bench_user= fuse_mode=
run=() # the command prefix of the trainers and mounts: none, or the user's
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -n "$wpid" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null
    fuse_trace_stop
    if [ -n "$mnt" ] && grep -qF " $mnt " /proc/self/mountinfo; then
        fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt"
    fi
    [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
    [ -n "$work" ] && rm -rf --one-file-system "$work"
    [ -n "$fuse_mode" ] && chmod "$fuse_mode" /dev/fuse
    [ -n "$bench_user" ] && userdel "$bench_user" 2>/dev/null
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

work=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-benchddp.XXXXXX") || exit 1
src=$work/dataset
timeout 600 "$PYTHON" "$top/tools/clairfs-gendata" --classes 20 --files 100 --size lognormal:92K:0.6 \
    --max-size 2M --seed 1 --quiet "$src" || { echo "bench-ddp: clairfs-gendata failed" >&2; exit 1; }
kib=$(du -sk "$src" | cut -f1)
if [ $user -eq 1 ]; then
    bench_user=cfsbench$$
    useradd -M -d "$work" -s /bin/sh "$bench_user" || { bench_user=; echo "bench-ddp: useradd failed" >&2; exit 1; }
    chown -R "$bench_user:" "$work"
    fuse_mode=$(stat -c %a /dev/fuse)
    chmod 0666 /dev/fuse
    run=(setpriv --reuid "$bench_user" --regid "$(id -g "$bench_user")" --init-groups
        env -i HOME="$work" PATH=/usr/bin:/bin LANG=C.UTF-8)
fi
nfiles=$(find "$src" -type f | wc -l)
SEED=0 WORLD=2 BATCH=32 WORKERS=2 conn=()

# after_epoch1 LABEL TRACE: once the trainer has printed its first epoch,
# the daemon's CPU so far into $work/cpu0, and the trace started when TRACE
# is 1 (in the background: the trainer runs meanwhile).
after_epoch1() {
    while ! grep -q '^epoch' "$work/train.log" 2>/dev/null; do
        kill -0 "$dpid" 2>/dev/null || return 0
        sleep 0.02
    done
    proc_cpu "$dpid" >"$work/cpu0"
    if [ "$2" = 1 ]; then
        perf record -q -a -e fuse:fuse_request_send -e fuse:fuse_request_end -o "$work/perf$1.data" >/dev/null 2>&1 &
        echo $! >"$work/perf.pid"
        wait
    fi
}

# train LABEL DIR: one training run; its epoch times go to $work/samples.LABEL.
train() {
    : >"$work/train.log"
    ${run[@]+"${run[@]}"} timeout 900 "$PYTHON" "$top/examples/train_ddp.py" --data "$2" --epochs "$epochs" --seed $SEED \
        --batch $BATCH --workers $WORKERS --world $WORLD >"$work/train.log" 2>&1 ||
        { echo "bench-ddp: trainer failed on $1: $(tail -n 1 "$work/train.log")" >&2; exit 1; }
    awk -v r="$r" '$1 == "epoch" { print $2, $4, r }' "$work/train.log" >>"$work/samples.$1"
}

knob=/sys/module/fuse/parameters/enable_uring
echo "== $nfiles files, $((kib / 1024)) MiB; train_ddp.py --world $WORLD --workers $WORKERS, $epochs epochs x $reps rounds${bench_user:+, as the ordinary user $bench_user}; load $(cut -d' ' -f1-3 /proc/loadavg); FUSE over io_uring in the kernel: $(cat "$knob" 2>/dev/null || echo absent)"
for ((r = 1; r <= reps; r++)); do
    train tmpfs "$src"
    for ((c = 0; c < ${#configs[@]}; c++)); do
        mnt=$work/mnt
        ${run[@]+"${run[@]}"} mkdir -p "$mnt"
        rm -rf "$work/index"
        ${run[@]+"${run[@]}"} "$CLAIRFS" -f -o "seed=$SEED,world=$WORLD,batch=$BATCH,epochs=$epochs,ram=$((kib * 2))K,ssd=0,index=$work/index${configs[$c]:+,${configs[$c]}}" \
            "$src" "$mnt" >"$work/clairfs.log" 2>&1 &
        dpid=$!
        for _ in $(seq 600); do ${run[@]+"${run[@]}"} test -e "$mnt/.clairfs/ready" && break; sleep 0.05; done
        ${run[@]+"${run[@]}"} test -e "$mnt/.clairfs/ready" || { echo "bench-ddp: clairfs did not mount: $(tail -n 1 "$work/clairfs.log")" >&2; exit 1; }
        ${run[@]+"${run[@]}"} cat "$mnt/.clairfs/metrics" | awk '$1 == "clairfs_fuse_ring_queues" { print $2 }' >"$work/queues.$c"
        rm -f "$work/cpu0" "$work/perf.pid"
        after_epoch1 "$c" "$([ $trace -eq 1 ] && [ $r -eq "$reps" ] && echo 1)" &
        wpid=$!
        train "$c" "$mnt"
        [ -s "$work/perf.pid" ] && kill -INT "$(cat "$work/perf.pid")"
        wait "$wpid"
        wpid=
        [ -s "$work/cpu0" ] && awk -v a="$(cat "$work/cpu0")" -v b="$(proc_cpu "$dpid")" -v k=$((epochs - 1)) \
            'BEGIN { print (b - a) / k }' >>"$work/cpu.$c"
        [ -s "$work/perf.pid" ] && conn[$c]=$(fuse_conn "$mnt")
        ${run[@]+"${run[@]}"} fusermount3 -u "$mnt" || exit 1
        wait "$dpid"
        dpid= mnt=
    done
done
# stats LABEL: "median-of-epochs-2.. median-epoch-1"
stats() {
    awk -v first="$(awk 'NR == 1 { print $1 }' "$work/samples.$1")" '
        $1 == first { c[++nc] = $2; next } { w[++nw] = $2 }
        function med(a, n,   i, j, x) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END { printf "%.3f %.3f %d", med(w, nw), med(c, nc), nw }' "$work/samples.$1"
}
# paired LABEL: the ratio of each round's median of epochs 2.. to the tmpfs
# run of the same round (the machine's load drifts between rounds; a pair
# shares it), as "median min max" over the rounds.
paired() {
    awk -v first="$(awk 'NR == 1 { print $1 }' "$work/samples.tmpfs")" '
        function med(a, n,   i, j, x) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        function round_med(f, r,   k, n, v) { n = 0; for (k = 1; k <= ns[f]; k++) if (rd[f, k] == r) v[++n] = t[f, k]; return n ? med(v, n) : 0 }
        $1 != first { ns[FILENAME]++; t[FILENAME, ns[FILENAME]] = $2; rd[FILENAME, ns[FILENAME]] = $3; if ($3 > maxr) maxr = $3; seen[FILENAME] = 1 }
        END {
            for (f in seen) if (f ~ /samples\.tmpfs$/) b = f; else c = f
            for (r = 1; r <= maxr; r++) { x = round_med(b, r); y = round_med(c, r); if (x > 0 && y > 0) q[++n] = y / x }
            lo = hi = q[1]; for (i = 2; i <= n; i++) { if (q[i] < lo) lo = q[i]; if (q[i] > hi) hi = q[i] }
            if (n) printf "%.3f %.3f %.3f %d", med(q, n), lo, hi, n; else printf "0 0 0 0"
        }' "$work/samples.tmpfs" "$work/samples.$1"
}
read -r base cbase _ < <(stats tmpfs)
echo "== median epoch seconds (epochs 2..$epochs; epoch 1 apart), ratio to tmpfs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for l in tmpfs $(seq 0 $((${#configs[@]} - 1))); do
    read -r w c n < <(stats "$l")
    name=tmpfs
    [ "$l" = tmpfs ] || name="clairfs${configs[$l]:+ -o ${configs[$l]}}"
    awk -v l="$name" -v w="$w" -v c="$c" -v b="$base" -v cb="$cbase" -v n="$n" \
        'BEGIN { printf "  %-32s epochs 2+: %7.3f s x%.2f (%d)   epoch 1: %7.3f s x%.2f\n", l, w, w / b, n, c, c / cb }'
done
echo "== each round against its own tmpfs run (epochs 2..$epochs): median ratio, range over the rounds"
for ((c = 0; c < ${#configs[@]}; c++)); do
    read -r m lo hi n < <(paired "$c")
    printf "  %-32s x%.3f  (x%.3f .. x%.3f, %d rounds)\n" "clairfs${configs[$c]:+ -o ${configs[$c]}}" "$m" "$lo" "$hi" "$n"
done
for ((c = 0; c < ${#configs[@]}; c++)); do
    cpu=$(sort -n "$work/cpu.$c" 2>/dev/null | awk '{ v[NR] = $1 } END { if (NR) printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    q=$(cat "$work/queues.$c" 2>/dev/null)
    via=$([ "${q:-0}" -gt 0 ] && echo "io_uring, $q queues" || echo /dev/fuse)
    echo "== clairfs${configs[$c]:+ -o ${configs[$c]}} ($via): daemon CPU per cached epoch ${cpu:-?} s (median of $reps rounds)"
    [ -n "${conn[$c]:-}" ] && fuse_trace_report "$work/perf$c.data" "${conn[$c]}" $((epochs - 1)) "$nfiles"
done
exit 0
