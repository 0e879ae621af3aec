#!/usr/bin/env bash
# The cache benchmark: clairfs over an emulated PFS (clairfs-pfsemu: 2 ms
# per open, 200 MB/s shared) against the same reader on the PFS directly, on
# local memory and on bindfs, all measured side by side in one run.  Prints
# figures and ratios, asserts nothing.
#
#   bench/bench-cache.sh [--quick] [BUILD_DIR]
#
# Reader: clairfs-bench, 4 workers, batch 32, prefetch factor 2, files read
# whole.  Dataset: ~8000 ImageNet-sized files (~0.9 GB; --quick: 2000).
#  (a) I/O-bound trainer (compute per epoch ~ half the PFS transfer time),
#      ram >= dataset: epoch 0 vs the PFS directly, epochs >= 1 vs local memory.
#  (b) pure I/O, everything cached: clairfs vs bindfs over local memory, vs
#      bindfs -o kernel_cache (pass 2) and vs local memory itself.
#  (c) ram = 50 %: PFS bytes per epoch / dataset, stall vs the same mount
#      without seed (reactive LRU).
#  (d) peak RSS of the daemon vs ram + 64 MiB + 200 B/file; the page cache
#      clairfs staged counts against ram (it is part of the RAM tier), so
#      the figure is peak RSS + staged bytes.
#  (e) no seed (reactive LRU), ram >= dataset, the source in local memory:
#      a cold and two warm passes, staged and with -o no_pagecache, and the
#      daemon's peak RSS (staging makes the tier's buffers transient).
# (a) and (b) also run with -o no_pagecache (reads answered from the tier's
# memory by the daemon) to show what staging into the page cache buys.
set -u
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
B=${1:-build}
B=$(cd "$B" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLAIRFS=$B/clairfs BENCH=$B/clairfs-bench PFSEMU=$B/clairfs-pfsemu
PY=/usr/bin/python3; [ -x $PY ] || PY=python3
for x in "$CLAIRFS" "$BENCH" "$PFSEMU"; do [ -x "$x" ] || { echo "missing $x (build first)"; exit 1; }; done

T=$(mktemp -d /dev/shm/clairfs-bench.XXXXXX 2>/dev/null || mktemp -d /tmp/clairfs-bench.XXXXXX)
mounts=() pids=()
cleanup() {
    for m in "${mounts[@]}"; do fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null; done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ $quick = 1 ]; then classes=20; else classes=80; fi
src=$T/data # in /dev/shm when possible: "local memory"
echo "generating $((classes * 100)) files ..."
$PY "$ROOT/tools/clairfs-gendata" --quiet --classes $classes --files 100 --size imagenet --seed 1 "$src"
N=$(find "$src" -type f | wc -l)
TOTAL=$(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
MB=$((TOTAL / 1000000))
# compute per epoch = half the PFS transfer time at 200 MB/s, per batch of 32
COMPUTE=$(awk -v t="$TOTAL" -v n="$N" 'BEGIN { printf "%.4f", t / 200e6 / 2 / (n / 32) }')
echo "dataset: $N files, $MB MB; compute per batch (a): $COMPUTE s"

wait_mount() { for _ in $(seq 400); do [ -e "$1/$2" ] && return 0; sleep 0.05; done; return 1; }
start_pfs() { # start_pfs MNT
    mkdir -p "$1"
    "$PFSEMU" -f -o latency_open=2ms,bandwidth=200M "$src" "$1" >"$T/pfsemu.log" 2>&1 &
    pids+=($!); mounts+=("$1")
    wait_mount "$1" "$(ls "$src" | head -1)"
}
CFS_PID=
start_cfs() { # start_cfs SRC MNT OPTS
    mkdir -p "$2"
    "$CLAIRFS" -f -o "$3" "$1" "$2" >>"$T/clairfs.log" 2>&1 &
    CFS_PID=$!
    pids+=($CFS_PID); mounts+=("$2")
    wait_mount "$2" .clairfs/ready
}
stop() { fusermount3 -u "$1"; sleep 0.2; }
# run LABEL DIR EPOCHS COMPUTE [trainer opts]: CSV lines into $T/runs.csv
run() {
    local label=$1 dir=$2 ep=$3 comp=$4 opts=${5:-seed=11,batch=32,epochs=$3}
    "$BENCH" -o "$opts" --workers 4 --prefetch-factor 2 --compute "$comp" --epochs "$ep" \
        --csv --label "$label" "$dir" >>"$T/runs.csv"
}
wall() { awk -F, -v l="$1" -v e="$2" '$1 == l && $3 == e { print $4 }' "$T/runs.csv"; }
stall() { awk -F, -v l="$1" -v e="$2" '$1 == l && $3 == e { print $5 }' "$T/runs.csv"; }
metric() { awk -v k="$2" '$1 == k { print $2 }' "$1/.clairfs/metrics"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
rss_hwm() { awk '/VmHWM/ { print $2 * 1024 }' "/proc/$1/status"; }

pfs=$T/pfs; start_pfs "$pfs" || { echo "pfsemu failed"; exit 1; }
cat "$src"/*/* >/dev/null # page cache warm: "local memory"

# (a) I/O-bound trainer, ram >= dataset.
run pfs-a "$pfs" 1 "$COMPUTE"
run local-a "$src" 2 "$COMPUTE"
cfs=$T/cfs-a; start_cfs "$pfs" "$cfs" "seed=11,batch=32,epochs=3,ram=$((TOTAL * 2))"
run cfs-a "$cfs" 3 "$COMPUTE"
rss_a=$(rss_hwm "$CFS_PID") pc_a=$(metric "$cfs" 'clairfs_cache_peak_bytes{tier="ram"}')
fb_a=$(metric "$cfs" clairfs_pagecache_fallback_reads_total)
stop "$cfs"
start_cfs "$pfs" "$cfs" "seed=11,batch=32,epochs=3,ram=$((TOTAL * 2)),no_pagecache"
run cfs-a-nopc "$cfs" 3 "$COMPUTE"
stop "$cfs"
# (b) pure I/O on the same, fully cached mount (epoch 3 of a 5-epoch plan).
start_cfs "$pfs" "$cfs" "seed=11,batch=32,epochs=5,ram=$((TOTAL * 2))"
run cfs-b-warm "$cfs" 2 0 "seed=11,batch=32,epochs=5"
run cfs-b "$cfs" 2 0 "seed=11,batch=32,start_epoch=2,epochs=5"
rss_b=$(rss_hwm "$CFS_PID") pc_b=$(metric "$cfs" clairfs_pagecache_bytes)
req_b=$(metric "$cfs" clairfs_read_requests_total)
stop "$cfs"
start_cfs "$pfs" "$cfs" "seed=11,batch=32,epochs=5,ram=$((TOTAL * 2)),no_pagecache"
run cfs-b-nopc-warm "$cfs" 2 0 "seed=11,batch=32,epochs=5"
run cfs-b-nopc "$cfs" 2 0 "seed=11,batch=32,start_epoch=2,epochs=5"
req_bn=$(metric "$cfs" clairfs_read_requests_total)
stop "$cfs"
run local-b "$src" 2 0
have_bindfs=0
if command -v bindfs >/dev/null; then
    have_bindfs=1
    bf=$T/bindfs; mkdir -p "$bf"; bindfs "$src" "$bf" && mounts+=("$bf")
    run bindfs-b "$bf" 2 0; fusermount3 -u "$bf"
    bindfs -o kernel_cache "$src" "$bf"
    run bindfs-kc-b "$bf" 2 0; fusermount3 -u "$bf"
fi
# (c) ram = 50 %, with and without seed.
half=$((TOTAL / 2))
cfs=$T/cfs-c; start_cfs "$pfs" "$cfs" "seed=11,batch=32,epochs=3,ram=$half"
run cfs-c "$cfs" 3 "$COMPUTE"
bytes_c=$(metric "$cfs" 'clairfs_fetch_bytes_total{from="pfs"}')
mstall_c=$(metric "$cfs" clairfs_stall_seconds_total)
rss_c=$(rss_hwm "$CFS_PID") pc_c=$(metric "$cfs" 'clairfs_cache_peak_bytes{tier="ram"}')
stop "$cfs"
start_cfs "$pfs" "$cfs" "batch=32,ram=$half"
run lru-c "$cfs" 3 "$COMPUTE"
bytes_l=$(metric "$cfs" 'clairfs_fetch_bytes_total{from="pfs"}')
mstall_l=$(metric "$cfs" clairfs_stall_seconds_total)
stop "$cfs"

# (e) no seed, source in local memory.
cfs=$T/cfs-e
start_cfs "$src" "$cfs" "batch=32,ram=$((TOTAL * 2))"
run cfs-e "$cfs" 3 0
rss_e=$(rss_hwm "$CFS_PID")
stop "$cfs"
start_cfs "$src" "$cfs" "batch=32,ram=$((TOTAL * 2)),no_pagecache"
run cfs-e-nopc "$cfs" 3 0
rss_en=$(rss_hwm "$CFS_PID")
stop "$cfs"

echo
echo "== (a) I/O-bound trainer (compute $COMPUTE s/batch), ram >= dataset"
printf "%-34s %8s %8s\n" "" "wall_s" "ratio"
printf "%-34s %8s\n" "PFS directly, epoch 0" "$(wall pfs-a 0)"
printf "%-34s %8s %8s\n" "clairfs epoch 0 / PFS" "$(wall cfs-a 0)" "$(ratio "$(wall cfs-a 0)" "$(wall pfs-a 0)")"
printf "%-34s %8s\n" "local memory, epoch 1" "$(wall local-a 1)"
for e in 1 2; do
    printf "%-34s %8s %8s\n" "clairfs epoch $e / local" "$(wall cfs-a $e)" "$(ratio "$(wall cfs-a $e)" "$(wall local-a 1)")"
    printf "%-34s %8s %8s\n" "  no_pagecache epoch $e / local" "$(wall cfs-a-nopc $e)" "$(ratio "$(wall cfs-a-nopc $e)" "$(wall local-a 1)")"
done
printf "%-34s %8s\n" "clairfs epoch 0, no_pagecache / PFS" "$(ratio "$(wall cfs-a-nopc 0)" "$(wall pfs-a 0)")"
echo "page-cache fallback opens (kernel reclaimed staged pages): $fb_a of $((3 * N))"
printf "%-34s %8s\n" "clairfs epoch 2 / PFS" "$(ratio "$(wall cfs-a 2)" "$(wall pfs-a 0)")"
echo
echo "== (b) pure I/O, everything cached (second pass)"
lb=$(wall local-b 1) cb=$(wall cfs-b 3)
printf "%-34s %8s %10s\n" "" "wall_s" "files/s"
printf "%-34s %8s %10.0f\n" "local memory" "$lb" "$(awk -v w="$lb" -v n="$N" 'BEGIN{print n/w}')"
if [ $have_bindfs = 1 ]; then
    printf "%-34s %8s\n" "bindfs" "$(wall bindfs-b 1)"
    printf "%-34s %8s\n" "bindfs -o kernel_cache" "$(wall bindfs-kc-b 1)"
fi
printf "%-34s %8s %10.0f\n" "clairfs (epoch 3, all RAM)" "$cb" "$(awk -v w="$cb" -v n="$N" 'BEGIN{print n/w}')"
cbn=$(wall cfs-b-nopc 3)
printf "%-34s %8s %10.0f\n" "clairfs -o no_pagecache" "$cbn" "$(awk -v w="$cbn" -v n="$N" 'BEGIN{print n/w}')"
[ $have_bindfs = 1 ] && echo "clairfs throughput / bindfs: $(ratio "$(wall bindfs-b 1)" "$cb")x;  / bindfs kernel_cache: $(ratio "$(wall bindfs-kc-b 1)" "$cb")x;  no_pagecache / bindfs: $(ratio "$(wall bindfs-b 1)" "$cbn")x"
echo "clairfs throughput / local memory: $(ratio "$lb" "$cb")x;  no_pagecache: $(ratio "$lb" "$cbn")x;  staging / no_pagecache: $(ratio "$cbn" "$cb")x"
echo "READ requests that reached the daemon over the 4 epochs: staged $req_b, no_pagecache $req_bn"
echo
echo "== (c) ram = 50 % of the dataset, 3 epochs, I/O-bound trainer"
echo "PFS bytes per epoch / dataset: clairfs $(awk -v b="$bytes_c" -v t="$TOTAL" 'BEGIN{printf "%.3f", b/3/t}'), reactive LRU $(awk -v b="$bytes_l" -v t="$TOTAL" 'BEGIN{printf "%.3f", b/3/t}')"
echo "after epoch 0 only: clairfs $(awk -v b="$bytes_c" -v t="$TOTAL" 'BEGIN{printf "%.3f", (b-t)/2/t}'), LRU $(awk -v b="$bytes_l" -v t="$TOTAL" 'BEGIN{printf "%.3f", (b-t)/2/t}')"
sc=0 sl=0
for e in 0 1 2; do sc=$(awk -v a=$sc -v b="$(stall cfs-c $e)" 'BEGIN{print a+b}'); sl=$(awk -v a=$sl -v b="$(stall lru-c $e)" 'BEGIN{print a+b}'); done
echo "trainer stall (bench): clairfs $sc s, LRU $sl s, ratio $(ratio "$sc" "$sl");  clairfs_stall_seconds_total: $mstall_c vs $mstall_l"
echo
echo "== (e) no seed (reactive LRU), ram >= dataset, source in local memory: pure I/O"
printf "%-34s %8s %8s %8s %10s\n" "" "cold_s" "warm_s" "warm_s" "peak_RSS"
printf "%-34s %8s %8s %8s %7d MiB\n" "clairfs" "$(wall cfs-e 0)" "$(wall cfs-e 1)" "$(wall cfs-e 2)" $((rss_e / 1048576))
printf "%-34s %8s %8s %8s %7d MiB\n" "clairfs -o no_pagecache" "$(wall cfs-e-nopc 0)" "$(wall cfs-e-nopc 1)" "$(wall cfs-e-nopc 2)" $((rss_en / 1048576))
[ $have_bindfs = 1 ] && printf "%-34s %8s %8s\n" "bindfs (b)" "$(wall bindfs-b 0)" "$(wall bindfs-b 1)"
echo "cold pass: staged / no_pagecache $(ratio "$(wall cfs-e 0)" "$(wall cfs-e-nopc 0)");  / bindfs $(ratio "$(wall cfs-e 0)" "$(wall bindfs-b 0)")"
echo
echo "== (d) peak RSS + RAM tier vs ram + 64 MiB + 200 B/file"
# The RAM tier's peak (buffers and staged pages) plus the peak RSS counts the
# buffers twice: an upper bound of what clairfs holds.
for x in "a $rss_a $((TOTAL * 2)) $pc_a" "c $rss_c $half $pc_c"; do
    set -- $x
    bound=$(( $3 + 64 * 1048576 + 200 * N ))
    echo "($1) peak RSS $(( $2 / 1048576 )) MiB + RAM tier peak $(( $4 / 1048576 )) MiB, dataset $((TOTAL / 1048576)) MiB, bound $(( bound / 1048576 )) MiB: $(ratio "$(( $2 + $4 ))" "$bound") of the bound (ram=$(( $3 / 1048576 )) MiB)"
done
echo "(b) peak RSS $(( rss_b / 1048576 )) MiB with $(( pc_b / 1048576 )) MiB of the RAM tier staged in the page cache"
echo
echo "raw CSV:"
awk 'NR == 1 || !/^label,/' "$T/runs.csv"
