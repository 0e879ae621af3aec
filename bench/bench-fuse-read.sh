#!/usr/bin/env bash
# FUSE read-path experiment (figures in docs/read-path.md): how should clairfs hand cached bytes
# to the kernel?  Every way is measured side by side in one run against
# reading the same files from tmpfs directly (the ceiling) and bindfs.
#
# usage: bench/bench-fuse-read.sh [BENCH_FUSE_READ] [--reps N] [--files N]
#                                 [--size MEAN] [--threads T]
#
#   BENCH_FUSE_READ  the bench-fuse-read binary (default
#                    $CLAIRFS_BUILD/bench/bench-fuse-read, CLAIRFS_BUILD default
#                    <top>/build, configured with -Dbenchmarks=true)
#   --reps N         repetitions (default 3; medians are reported)
#   --files N, --size MEAN   the dataset (default 8000 files of 55-165 KB,
#                    ~0.88 GB, in a fresh tmpfs directory under BENCH_TMP,
#                    default /dev/shm)
#   --threads T      reader threads (default 4)
#
# The reader is `bench-fuse-read read` everywhere: T threads, files handed
# out in one shuffled order, each read whole with 64 KiB read(2)s.  Every
# FUSE configuration gets a fresh mount; pass 1 is its first read of every
# file after the mount, pass 2 the second.  A third, untimed pass checks
# every byte against the direct read.  The daemon's counters (opens and read
# requests that reached it) come from its stats file.  Ratios are time /
# direct time of the same pass (above 1 = slower).
#
#   direct      tmpfs, no FUSE
#   bindfs      bindfs over the tmpfs directory (high-level API)
#   bindfs_kc   bindfs -o kernel_cache
#   buf         fuse_reply_buf from process memory, keep_cache=0 (clairfs's
#               RAM tier today)
#   buf_sr      the same with FUSE_CAP_SPLICE_READ (requests read by splice)
#   data        fuse_reply_data, memory bufvec, no splice capability (writev)
#   data_vms    fuse_reply_data, memory bufvec, SPLICE_WRITE+MOVE (vmsplice)
#   splice      fuse_reply_data from an fd on the tmpfs file, SPLICE_WRITE+MOVE
#               (clairfs's SSD tier today)
#   splice_nm   the same without SPLICE_MOVE
#   kcache      fuse_reply_buf, keep_cache=1: the kernel caches after pass 1
#   store       every file staged into the page cache after mount with
#               fuse_lowlevel_notify_store, keep_cache=1, daemon copy freed;
#               then "store+inval": pass after notify_inval_inode of every file
#               (reads reach the daemon again, served from the source)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin=${CLAIRFS_BUILD:-$top/build}/bench/bench-fuse-read
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then bin=$1; shift; fi
reps=3 files=8000 size=110000 threads=4
while [ $# -gt 0 ]; do
    case $1 in
    --reps) reps=${2:?}; shift ;;
    --files) files=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --threads) threads=${2:?}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-fuse-read.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$bin" ] || { echo "bench-fuse-read.sh: $bin not built" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "bench-fuse-read.sh: no /dev/fuse" >&2; exit 77; }
have_bindfs=1; command -v bindfs >/dev/null || have_bindfs=0

tmp=$(mktemp -d "${BENCH_TMP:-/dev/shm}/bench-fuse-read.XXXXXX")
src=$tmp/src mnt=$tmp/mnt
mkdir "$mnt"
pid=""
cleanup() {
    if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true; fi
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin" gen -n "$files" -s "$size" "$src" >/dev/null
bytes=$(du -sb "$src" | cut -f1)
ref=$("$bin" read -j "$threads" --check "$src" | sed -n 's/.* sum //p')
echo "bench-fuse-read: $files files, $bytes bytes, $threads reader threads, $reps reps, kernel $(uname -r)"

# time of one timed pass over DIR (seconds), or fail
pass() { "$bin" read -j "$threads" "$1" | awk '/errors 0/ {print $3; ok=1} END {exit !ok}'; }
check() {
    local sum; sum=$("$bin" read -j "$threads" --check "$1" | sed -n 's/.* sum //p')
    [ "$sum" = "$ref" ] || { echo "bench-fuse-read.sh: WRONG BYTES through $2 ($sum != $ref)" >&2; exit 1; }
}
# field F of the last line tagged TAG in the stats file
field() { awk -v t="$2" -v f="$3" '$1 == t { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) v = kv[2] } } END { print v }' "$1"; }
# the Nth (1-based) line tagged snap: field F
snapf() { awk -v n="$2" -v f="$3" '$1 == "snap" && ++k == n { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) print kv[2] } }' "$1"; }
wait_for() { # wait_for CMD... : up to 60 s
    for _ in $(seq 600); do "$@" && return 0; kill -0 "$pid" 2>/dev/null || return 1; sleep 0.1; done
    return 1
}
ready() { grep -q '^ready' "$1" 2>/dev/null; }
count_gt() { [ "$(grep -c "^$1" "$2" || true)" -gt "$3" ]; }  # count_gt TAG FILE N
snap() { local n; n=$(grep -c '^snap' "$2" || true); kill -USR1 "$1"; wait_for count_gt snap "$2" "$n"; }
unmount() { fusermount3 -u "$mnt"; wait "$pid" 2>/dev/null || true; pid=""; }

declare -A T   # T[config,pass,rep] seconds
declare -A C   # C[config,what] daemon counters (last rep)
configs="direct"
[ $have_bindfs = 1 ] && configs="$configs bindfs bindfs_kc"
configs="$configs buf buf_sr data data_vms splice splice_nm kcache store"

serve_args() {
    case $1 in
    buf) echo "--mode buf" ;;
    buf_sr) echo "--mode buf --splice-read" ;;
    data) echo "--mode data" ;;
    data_vms) echo "--mode data --splice-write --splice-move" ;;
    splice) echo "--mode splice --splice-write --splice-move" ;;
    splice_nm) echo "--mode splice --splice-write" ;;
    kcache) echo "--mode kcache" ;;
    store) echo "--mode store" ;;
    esac
}

for rep in $(seq "$reps"); do
    for cfg in $configs; do
        case $cfg in
        direct)
            T[$cfg,1,$rep]=$(pass "$src"); T[$cfg,2,$rep]=$(pass "$src") ;;
        bindfs*)
            opt=""; [ $cfg = bindfs_kc ] && opt="-o kernel_cache"
            # shellcheck disable=SC2086
            bindfs -f $opt "$src" "$mnt" & pid=$!
            wait_for mountpoint -q "$mnt"
            T[$cfg,1,$rep]=$(pass "$mnt"); T[$cfg,2,$rep]=$(pass "$mnt")
            check "$mnt" "$cfg"
            unmount ;;
        *)
            st=$tmp/stats.$cfg.$rep
            # shellcheck disable=SC2046
            "$bin" serve $(serve_args $cfg) --stats "$st" "$src" "$mnt" & pid=$!
            wait_for ready "$st"
            T[$cfg,1,$rep]=$(pass "$mnt"); snap "$pid" "$st"
            T[$cfg,2,$rep]=$(pass "$mnt"); snap "$pid" "$st"
            check "$mnt" "$cfg"
            C[$cfg,opens1]=$(snapf "$st" 1 opens)
            C[$cfg,reads1]=$(( $(snapf "$st" 1 reads) - $(field "$st" ready reads) ))
            C[$cfg,opens2]=$(( $(snapf "$st" 2 opens) - $(snapf "$st" 1 opens) ))
            C[$cfg,reads2]=$(( $(snapf "$st" 2 reads) - $(snapf "$st" 1 reads) ))
            C[$cfg,rss]=$(snapf "$st" 2 rss)
            if [ $cfg = store ]; then
                # Drop every staged page, then read again: served by the daemon.
                n=$(grep -c '^inval' "$st" || true); kill -USR2 "$pid"
                wait_for count_gt inval "$st" "$n"
                snap "$pid" "$st"
                T[store+inval,1,$rep]=$(pass "$mnt"); snap "$pid" "$st"
                T[store+inval,2,$rep]=$(pass "$mnt"); snap "$pid" "$st"
                C[store+inval,opens1]=$(( $(snapf "$st" 4 opens) - $(snapf "$st" 3 opens) ))
                C[store+inval,reads1]=$(( $(snapf "$st" 4 reads) - $(snapf "$st" 3 reads) ))
                C[store+inval,opens2]=$(( $(snapf "$st" 5 opens) - $(snapf "$st" 4 opens) ))
                C[store+inval,reads2]=$(( $(snapf "$st" 5 reads) - $(snapf "$st" 4 reads) ))
                C[store+inval,rss]=$(snapf "$st" 5 rss)
                check "$mnt" "store after inval"
            fi
            unmount ;;
        esac
    done
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
med() { local c=$1 p=$2 vals=() r; for r in $(seq "$reps"); do vals+=("${T[$c,$p,$r]}"); done; median "${vals[@]}"; }
d1=$(med direct 1) d2=$(med direct 2)
echo
echo "Median of $reps; ratio = time / direct time of the same pass; opens/reads = requests that reached the daemon (last rep)"
printf '%-12s %9s %7s %9s %7s %7s %7s %7s %7s %9s\n' config pass1_s ratio pass2_s ratio opens1 reads1 opens2 reads2 rss_MiB
for cfg in $configs store+inval; do
    t1=$(med "$cfg" 1) t2=$(med "$cfg" 2)
    rss=${C[$cfg,rss]:-}; [ -n "$rss" ] && rss=$((rss / 1048576))
    printf '%-12s %9.4f %7.2f %9.4f %7.2f %7s %7s %7s %7s %9s\n' "$cfg" "$t1" \
        "$(awk -v a="$t1" -v b="$d1" 'BEGIN { print a / b }')" "$t2" \
        "$(awk -v a="$t2" -v b="$d2" 'BEGIN { print a / b }')" \
        "${C[$cfg,opens1]:--}" "${C[$cfg,reads1]:--}" "${C[$cfg,opens2]:--}" "${C[$cfg,reads2]:--}" "${rss:--}"
done

# --- staging cost: notify_store of the whole dataset, by chunk size.
echo
echo "Staging (notify_store of $bytes bytes after mount; cgroup = file pages charged to this memory cgroup)"
printf '%-22s %8s %9s %9s %8s %9s %9s %9s %11s %8s %9s\n' config lookup_s store_s cpu_s GB/s calls probe_rc rss_MiB rss_drop_MiB cg_MiB inval_s
stage() { # stage NAME SERVE-ARGS...
    local name=$1; shift
    local st=$tmp/stage.$name
    "$bin" serve --mode store "$@" --stats "$st" "$src" "$mnt" & pid=$!
    wait_for ready "$st"
    kill -USR2 "$pid"; wait_for grep -q '^inval' "$st"
    unmount
    local s; s=$(field "$st" staged store_s)
    printf '%-22s %8.3f %9.3f %9.3f %8.2f %9s %9s %9d %11d %8d %9.3f\n' "$name" \
        "$(field "$st" staged lookup_s)" "$s" "$(field "$st" staged store_cpu_s)" \
        "$(awk -v b="$(field "$st" staged bytes)" -v s="$s" 'BEGIN { print b / s / 1e9 }')" \
        "$(field "$st" staged calls)" "$(field "$st" staged probe_rc)" \
        $(( $(field "$st" staged rss_staged) / 1048576 )) $(( $(field "$st" staged rss_dropped) / 1048576 )) \
        $(( $(field "$st" staged cgroup_cache_delta) / 1048576 )) "$(field "$st" inval s)"
    [ "$(field "$st" staged errors)" = 0 ] || echo "  errors: $(field "$st" staged errors) first_err=$(field "$st" staged first_err)"
    echo "  inval: cgroup file pages $(( $(field "$st" inval cgroup_cache_delta) / 1048576 )) MiB"
}
stage chunk16K --chunk 16384
stage chunk128K --chunk 131072
stage chunk1M --chunk 1048576
stage chunk1M+splice_write --chunk 1048576 --splice-write
