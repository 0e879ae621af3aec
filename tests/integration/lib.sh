# Shared helpers for the mount tests; sourced by tests/integration/test_*.sh.
#
# Environment (set by tests/meson.build): CLAIRFS (the daemon),
# CLAIRFS_GENDATA (tools/clairfs-gendata).  Everything a test creates lives
# in one temp dir; everything it mounts or starts is unmounted or stopped by
# the EXIT trap, by mount point and by PID, also when the test fails.

set -u

: "${CLAIRFS:?CLAIRFS must name the clairfs binary}"
: "${CLAIRFS_GENDATA:?CLAIRFS_GENDATA must name tools/clairfs-gendata}"

# The system interpreter when there is one: version-manager shims on PATH
# cost most of a second per call.
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi

cfs_mounts=()  # mount points to unmount at exit
cfs_pids=()    # daemons to stop at exit
cfs_failures=0

cfs_cleanup() {
    local m p
    for m in "${cfs_mounts[@]}"; do
        if cfs_is_mounted "$m"; then
            fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
        fi
    done
    for p in "${cfs_pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null
            for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$p" 2>/dev/null
        fi
        wait "$p" 2>/dev/null
    done
    [ -n "${TMP:-}" ] && rm -rf "$TMP"
}

# SKIP (77) only when the machine truly lacks FUSE.
cfs_need_fuse() {
    if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
        echo "SKIP: no /dev/fuse or fusermount3"
        exit 77
    fi
}

cfs_setup() {
    cfs_need_fuse
    TMP=$(mktemp -d /tmp/clairfs-test.XXXXXX)
    chmod 755 "$TMP" # other users (nobody) must reach mounts inside it
    trap cfs_cleanup EXIT
    trap 'exit 130' INT TERM
}

fail() {
    echo "FAIL: $*" >&2
    cfs_failures=$((cfs_failures + 1))
}

# check DESCRIPTION COMMAND...: runs the command, records a failure if it fails.
check() {
    local what=$1 t0=$SECONDS
    shift
    if "$@"; then
        echo "ok: $what ($((SECONDS - t0)) s)"
    else
        fail "$what"
    fi
}

cfs_finish() {
    if [ "$cfs_failures" -ne 0 ]; then
        echo "$cfs_failures check(s) failed" >&2
        exit 1
    fi
    echo "all checks passed"
    exit 0
}

cfs_is_mounted() {
    awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# cfs_pfsemu SRC MNT OPTS: clairfs-pfsemu (CLAIRFS_PFSEMU) serving SRC on
# MNT with -o OPTS, stopped and unmounted at exit; waits (up to 5 s) until
# it is mounted.  Its log is $TMP/pfsemu.log.
cfs_pfsemu() {
    mkdir -p "$2"
    "$CLAIRFS_PFSEMU" -f -o "$3" "$1" "$2" >"$TMP/pfsemu.log" 2>&1 &
    cfs_pids+=("$!")
    cfs_mounts+=("$2")
    for _ in $(seq 100); do cfs_is_mounted "$2" && return 0; sleep 0.05; done
    return 1
}

# cfs_need_torch: exit 77 (SKIP) unless torch and torchvision import under
# TORCH_PY (Debian's /usr/bin/python3, where python3-torch installs).
cfs_need_torch() {
    TORCH_PY=${TORCH_PY:-/usr/bin/python3}
    "$TORCH_PY" -c 'import torch, torchvision' 2>/dev/null && return 0
    echo "SKIP: torch and torchvision do not import under $TORCH_PY"
    exit 77
}

# cfs_mount_count PATH: how many mounts sit on PATH.
cfs_mount_count() {
    awk -v m="$1" '$5 == m { n++ } END { print n + 0 }' /proc/self/mountinfo
}

# cfs_wait_mounted MNT [PID]: wait up to 30 s for the mount (and ready).
cfs_wait_mounted() {
    local mnt=$1 pid=${2:-}
    for _ in $(seq 600); do
        if cfs_is_mounted "$mnt" && [ -e "$mnt/.clairfs/ready" ]; then
            return 0
        fi
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.05
    done
    return 1
}

cfs_wait_unmounted() {
    local mnt=$1
    for _ in $(seq 200); do
        cfs_is_mounted "$mnt" || return 0
        sleep 0.05
    done
    return 1
}

# cfs_mount SRC MNT LOG [clairfs args...]: starts a foreground daemon with
# its log in LOG; sets CFS_PID.  Returns non-zero if the mount never came.
cfs_mount() {
    local src=$1 mnt=$2 log=$3
    shift 3
    mkdir -p "$mnt"
    # A non-interactive shell starts background jobs with SIGINT ignored, a
    # suite run under nohup has SIGHUP ignored, and libfuse (rightly) leaves
    # ignored signals alone: restore the defaults so that both reach the
    # daemon as they would from a terminal.
    env --default-signal=INT,HUP "$CLAIRFS" -f "$@" "$src" "$mnt" >"$log" 2>&1 &
    CFS_PID=$!
    cfs_pids+=("$CFS_PID")
    cfs_mounts+=("$mnt")
    if ! cfs_wait_mounted "$mnt" "$CFS_PID"; then
        echo "mount of $src at $mnt failed; log:" >&2
        cat "$log" >&2
        return 1
    fi
}

# cfs_umount MNT: fusermount3 -u and wait for the daemon CFS_PID; returns
# the daemon's exit status.
cfs_umount() {
    local mnt=$1 rc
    fusermount3 -u "$mnt" || return 1
    wait "$CFS_PID"
    rc=$?
    return $rc
}

# cfs_metric MNT|FILE 'name{labels}': the value from .clairfs/metrics, or
# from a copy of it.
cfs_metric() {
    local f=$1
    [ -f "$f" ] || f=$1/.clairfs/metrics
    awk -v k="$2" '$1 == k { print $2 }' "$f"
}

# cfs_wait_metric MNT 'name{labels}' VALUE: until the metric reads VALUE,
# up to 20 s (what the daemon does after a reader's close, such as a file
# dropped at its last read's release, lands a moment later).
cfs_wait_metric() {
    for _ in $(seq 200); do
        [ "$(cfs_metric "$1" "$2")" = "$3" ] && return 0
        sleep 0.1
    done
    return 1
}

# cfs_wait_staged MNT COUNT: until the mount has staged COUNT files into
# the page cache, up to 15 s.
cfs_wait_staged() {
    for _ in $(seq 300); do
        [ "$(cfs_metric "$1" clairfs_pagecache_staged_total)" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}

# cfs_mpi_stop: the MPI tests' exit: the nodes' mounts ($TMP/m*) unmounted
# and the mpirun MPIPID, given 5 s to end by itself, stopped.
cfs_mpi_stop() {
    local m
    for m in "$TMP"/m*; do
        [ -d "$m" ] && cfs_is_mounted "$m" && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    if [ -n "${MPIPID:-}" ] && kill -0 "$MPIPID" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$MPIPID" 2>/dev/null || break; sleep 0.1; done
        kill "$MPIPID" 2>/dev/null
        wait "$MPIPID" 2>/dev/null
    fi
}

# cfs_refuse WHAT TEXT WATCH CLAIRFS-ARGS...: clairfs with those arguments
# must fail (not time out) with exactly one stderr line holding TEXT, and
# leave the mounts on WATCH as they were.
cfs_refuse() {
    local what=$1 want=$2 watch=$3
    shift 3
    local before after rc lines
    before=$(cfs_mount_count "$watch")
    timeout -k 5 20 "$CLAIRFS" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    after=$(cfs_mount_count "$watch")
    lines=$(wc -l <"$TMP/err")
    # 124: timed out; 137: killed after it (a refusal never takes that long).
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ "$lines" -eq 1 ] &&
        [ "$before" = "$after" ] &&
        grep -qF -- "$want" "$TMP/err"; then
        echo "ok: $what: $(cat "$TMP/err")"
    else
        fail "$what: exit $rc, $lines stderr line(s), mounts $before -> $after: $(cat "$TMP/err")"
    fi
}

# cfs_ssd_fault_setup: what the SSD-tier fault scripts share: a 300-file
# dataset in $src (sizes around 16 KiB, $TOTAL bytes, N=300), the trainer
# TRAINER; cfs_ssd_fault_bench MNT [args] replays it with clairfs-bench
# --verify (every byte compared).  Needs CLAIRFS_BENCH.
cfs_ssd_fault_setup() {
    src=$TMP/src
    "$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 10 --files 30 --size lognormal:16K:0.5 \
        --seed 11 "$src" || { fail "gendata"; return 1; }
    N=300
    TOTAL=$(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
    TRAINER="seed=4,epochs=2,batch=8"
}
cfs_ssd_fault_bench() {
    local mnt=$1
    shift
    "$CLAIRFS_BENCH" -o "$TRAINER" --workers 4 --verify "$src" "$@" "$mnt" >>"$TMP/bench.log" 2>&1
}

# cfs_wait_ssd MNT BYTES: wait up to 20 s until the SSD tier holds BYTES
# and every file's entry is complete (a fetch in flight is charged before it
# lands: an open would wait for it and count a read from the source).
cfs_wait_ssd() {
    for _ in $(seq 400); do
        if [ "$(cfs_metric "$1" 'clairfs_cache_bytes{tier="ssd"}')" -ge "$2" ] &&
            [ -z "$(find "$1" -type f -exec getfattr --absolute-names -n user.clairfs.state {} + \
                2>/dev/null | grep '^user.clairfs.state=' | grep -v '="ssd"$')" ]; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# cfs_pid_of_mount MNT: the PID of the clairfs daemon whose argv ends in MNT
# (for a daemon that detached itself).
cfs_pid_of_mount() {
    local mnt=$1 d last
    for d in /proc/[0-9]*; do
        [ -r "$d/cmdline" ] || continue
        last=$(tr '\0' '\n' 2>/dev/null <"$d/cmdline" | tail -n 1)
        if [ "$last" = "$mnt" ] && [ "$(readlink "$d/exe" 2>/dev/null)" = "$(readlink -f "$CLAIRFS")" ]; then
            echo "${d#/proc/}"
            return 0
        fi
    done
    return 1
}

# cfs_small_dataset DIR: the 600-file tree (20 classes x 30, ~14 MB) of the
# data-path tests.  Sets N (files), TOTAL (bytes), PAGES (4 KiB pages, each
# file rounded up) and MAXPAGES (pages of the largest file).
cfs_small_dataset() {
    "$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 20 --files 30 --size lognormal:20K:0.5 \
        --seed 3 "$1" || return 1
    N=$(find "$1" -type f | wc -l)
    read -r TOTAL PAGES MAXPAGES < <(find "$1" -type f -printf '%s\n' | awk '
        { s += $1; p = int(($1 + 4095) / 4096); n += p; if (p > m) m = p }
        END { print s, n, m }')
}

# cfs_read_shuffled SRC MNT FROM TO: opens files FROM..TO-1 of one random
# order of SRC's files (Python's, no torch shuffle) on MNT, 10 ms apart,
# each compared with SRC's; prints the next file's relative path when TO is
# short of the end.
cfs_read_shuffled() {
    "$PYTHON" - "$@" <<'EOF'
import os, random, sys, time
src, mnt, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
files = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, fs in os.walk(src) for f in fs)
random.Random(7).shuffle(files)
for rel in files[lo:hi]:
    with open(os.path.join(mnt, rel), "rb") as a, open(os.path.join(src, rel), "rb") as b:
        if a.read() != b.read():
            sys.exit(f"differs: {rel}")
    time.sleep(0.01)
if hi < len(files):
    print(files[hi])
EOF
}

# cfs_replay SRC MNT OPTS [clairfs-bench args]: replay OPTS's trainer on MNT
# like a DataLoader (4 workers, prefetch factor 2), every byte compared with
# SRC; the output goes to $TMP/bench.log.  Needs CLAIRFS_BENCH.
cfs_replay() {
    local src=$1 mnt=$2 opts=$3
    shift 3
    "$CLAIRFS_BENCH" -o "$opts" --workers 4 --prefetch-factor 2 --verify "$src" "$@" "$mnt" \
        >>"$TMP/bench.log" 2>&1
}
