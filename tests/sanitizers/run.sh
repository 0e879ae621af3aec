#!/usr/bin/env bash
# The sanitizer, valgrind and fuzz stage of CI, after the normal suite
# (tools/test.sh runs it).  Four parts, each a clean pass or a failure of the whole stage:
#
#  asan      clang ASan+UBSan build (build-asan): the unit, mount and tools
#            suites; the FUSE daemons the mount tests start are that build's
#            clairfs, so they run instrumented too.  Every report of every
#            process goes to a log file (log_path), so a report from a daemon
#            whose exit status a test does not check still fails the stage.
#            LeakSanitizer is on; tests/sanitizers/lsan.supp lists the only
#            leaks tolerated, each with its reason.
#  tsan      ThreadSanitizer build (build-tsan): the concurrency tests (cache,
#            io, prefetch, metrics, ctl, loader; a test that does not exist
#            yet is skipped with a note) and a mount read by 8 threads, over
#            /dev/fuse and, where the kernel has it, over FUSE's io_uring.
#  valgrind  memcheck over a mount-read-unmount cycle of the normal build's
#            daemon (identification off: below): exit status 0, no error, no
#            definite leak.
#  fuzz      every libFuzzer target of tests/fuzz for CLAIRFS_FUZZ_SECONDS
#            (20) each, two at a time, from tests/fuzz/corpus (new inputs go
#            to a scratch copy; a crasher is left in the log's artifact path:
#            minimise it and keep it in tests/fuzz/crashers/<target>/).
#
# Environment: CLAIRFS_SAN_PARTS (default "asan tsan valgrind fuzz"),
# CLAIRFS_SAN_PREFIX (build directory prefix, default "build-"),
# CLAIRFS_BUILD (the normal build, default "build"), CLAIRFS_FUZZ_SECONDS,
# CLAIRFS_FUZZ_SEED (default 1; 0 = a random seed each run).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"

parts=${CLAIRFS_SAN_PARTS:-asan tsan valgrind fuzz}
prefix=${CLAIRFS_SAN_PREFIX:-build-}
normal=${CLAIRFS_BUILD:-build}
fuzz_seconds=${CLAIRFS_FUZZ_SECONDS:-20}
# A fixed seed keeps CI's fuzzing reproducible from run to run; set
# CLAIRFS_FUZZ_SEED=0 (libFuzzer: random) to explore beyond it.
fuzz_seed=${CLAIRFS_FUZZ_SEED:-1}
supp=$top/tests/sanitizers

# clang with its sanitizer and libFuzzer runtimes, valgrind.
tools/deps.sh sanitizers

scratch=$(mktemp -d /tmp/clairfs-sanitizers.XXXXXX)
# The fuzz targets' scratch files (an LMDB commit per input): tmpfs if any.
if [ -w /dev/shm ]; then scratch_shm=$(mktemp -d /dev/shm/clairfs-fuzz.XXXXXX); else scratch_shm=$scratch/shm; fi
trap 'rm -rf "$scratch" "$scratch_shm"' EXIT
failed=()
t_start=$SECONDS
# Instrumented code runs 2-5 times slower: stretch Check's per-test timeouts
# (meson's own are stretched with --timeout-multiplier).
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-3}

say() { printf '\n=== %s\n' "$*"; }
took() { echo "--- $1: $((SECONDS - $2)) s"; }

# sanitizer_reports DIR: prints every report written there; fails if any.
sanitizer_reports() {
    local f found=1
    for f in "$1"/*; do
        [ -s "$f" ] || continue
        echo "--- report $f" >&2
        cat "$f" >&2
        found=0
    done
    return $((1 - found))
}

# setup DIR ARGS...: configure DIR with clang unless it already is.
setup() {
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        CC=clang meson setup "$dir" -Db_lundef=false "$@" >"$scratch/setup-${dir##*/}.log" ||
            { cat "$scratch/setup-${dir##*/}.log" >&2; return 1; }
    fi
}

# test_exe DIR NAME: the program a meson test runs (its build target path).
test_exe() {
    meson introspect --tests "$1" | /usr/bin/env python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["name"] == sys.argv[1]:
        print(os.path.relpath(t["cmd"][0], sys.argv[2])); break
' "$2" "$1"
}

# ---- ASan + UBSan over the unit, mount and tools suites
run_asan() {
    local dir=${prefix}asan t0=$SECONDS logs=$scratch/asan-reports
    say "ASan+UBSan: $dir"
    setup "$dir" -Db_sanitize=address,undefined -Dfuzzing=true -Dc_args=-fsanitize=fuzzer-no-link ||
        return 1
    meson compile -C "$dir" >/dev/null || return 1
    mkdir -p "$logs"
    local rc=0
    ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:log_path=$logs/asan:log_exe_name=1" \
    LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan:log_exe_name=1" \
        meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 \
        --timeout-multiplier 3 --suite unit --suite mount --suite tools || rc=1
    sanitizer_reports "$logs" || rc=1
    took asan "$t0"
    return $rc
}

# ---- ThreadSanitizer over the concurrency tests and a multi-threaded mount
tsan_tests=(cache io prefetch metrics ctl loader)
run_tsan() {
    local dir=${prefix}tsan t0=$SECONDS logs=$scratch/tsan-reports rc=0
    say "ThreadSanitizer: $dir"
    setup "$dir" -Db_sanitize=thread -Dmpi=disabled || return 1
    local have=() targets=(clairfs) t exe
    for t in "${tsan_tests[@]}"; do
        exe=$(test_exe "$dir" "$t")
        if [ -z "$exe" ]; then
            echo "note: no meson test '$t' yet, skipped"
            continue
        fi
        have+=("$t")
        targets+=("$exe")
    done
    ninja -C "$dir" "${targets[@]}" >/dev/null || return 1
    mkdir -p "$logs"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:log_path=$logs/tsan:log_exe_name=1"
    meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 \
        --timeout-multiplier 4 "${have[@]}" || rc=1
    tests/sanitizers/mount_read.sh "$dir/clairfs" tools/clairfs-gendata 8 || rc=1
    # The same read with the requests over FUSE's io_uring (the ring
    # threads, the workers and their shared submission queues), where the
    # kernel has it: its switch is set for this read and restored.
    local knob=/sys/module/fuse/parameters/enable_uring was
    if [ -w "$knob" ]; then
        was=$(cat "$knob")
        echo 1 >"$knob"
        MOUNT_OPTS=fuse_io=uring tests/sanitizers/mount_read.sh "$dir/clairfs" tools/clairfs-gendata 8 ||
            rc=1
        [ "$was" = Y ] || echo 0 >"$knob"
    else
        echo "note: no FUSE over io_uring here; the ring's read under TSan skipped"
    fi
    unset TSAN_OPTIONS
    sanitizer_reports "$logs" || rc=1
    took tsan "$t0"
    return $rc
}

# ---- valgrind memcheck over a mount-read-unmount cycle
run_valgrind() {
    local t0=$SECONDS rc=0
    say "valgrind memcheck: $normal/clairfs"
    [ -f "$normal/build.ninja" ] || meson setup "$normal" >/dev/null
    meson compile -C "$normal" clairfs >/dev/null || return 1
    # io=threads: valgrind 3.19 holds its big lock across a blocking
    # io_uring_enter(), so an io_uring daemon deadlocks under it.
    # no_identify: the order's seed scans, one thread among valgrind's
    # serialised ones, made the cycle take 8-60 s instead of 4; that code
    # runs under ASan in the unit and mount suites.
    # no_kernel_open: the switch to the kernel's own opens marks the
    # mount's directories with fanotify_mark from a FUSE worker, and the
    # kernel asks the mount's STATFS for its fsid; valgrind holds its big
    # lock across that fanotify_mark, so no other worker could answer (a
    # hang).  The switch runs under ASan in the mount suite (kernel_open).
    MOUNT_OPTS=io=threads,no_identify,no_kernel_open tests/sanitizers/mount_read.sh "$normal/clairfs" tools/clairfs-gendata 2 \
        valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \
        --errors-for-leak-kinds=definite --suppressions="$supp/valgrind.supp" || rc=1
    took valgrind "$t0"
    return $rc
}

# ---- libFuzzer: each target a short run, two at a time
fuzz_one() {
    local dir=$1 t=$2 work=$scratch/fuzz/$2
    local shm=$scratch_shm/$t
    mkdir -p "$work/corpus" "$work/artifacts" "$shm"
    cp -r tests/fuzz/corpus/"$t"/. "$work/corpus/"
    if CLAIRFS_FUZZ_TMPDIR=$shm ASAN_OPTIONS="halt_on_error=1:detect_leaks=1" \
       UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
       "$dir/tests/fuzz/fuzz_$t" -seed="$fuzz_seed" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1; then
        echo "fuzz_$t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" |
            awk '{print $2}') runs, clean"
    else
        echo "fuzz_$t: FOUND SOMETHING; log $work/log:" >&2
        grep -v '^#' "$work/log" | tail -60 >&2
        ls -l "$work/artifacts" >&2
        cp -r "$work/artifacts" "$top/${prefix}asan/fuzz-artifacts-$t" 2>/dev/null || true
        return 1
    fi
}

run_fuzz() {
    local dir=${prefix}asan t0=$SECONDS rc=0 t
    say "libFuzzer: ${fuzz_seconds} s per target"
    setup "$dir" -Db_sanitize=address,undefined -Dfuzzing=true -Dc_args=-fsanitize=fuzzer-no-link ||
        return 1
    local targets=()
    for t in tests/fuzz/fuzz_*.c; do
        t=${t##*/fuzz_}
        targets+=("${t%.c}")
    done
    ninja -C "$dir" "${targets[@]/#/tests/fuzz/fuzz_}" >/dev/null || return 1
    local pids=() i
    for i in "${!targets[@]}"; do
        fuzz_one "$dir" "${targets[$i]}" &
        pids+=($!)
        if [ ${#pids[@]} -eq 2 ]; then
            wait "${pids[0]}" || rc=1
            pids=("${pids[1]}")
        fi
    done
    for i in "${pids[@]}"; do wait "$i" || rc=1; done
    took fuzz "$t0"
    return $rc
}

for p in $parts; do
    case $p in
    asan | tsan | valgrind | fuzz) "run_$p" || failed+=("$p") ;;
    *) echo "unknown part '$p'" >&2; exit 2 ;;
    esac
done

echo
echo "sanitizer stage: $((SECONDS - t_start)) s"
if [ ${#failed[@]} -ne 0 ]; then
    echo "sanitizer stage FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "sanitizer stage clean: $parts"
