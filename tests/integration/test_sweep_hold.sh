#!/usr/bin/env bash
# sweep=auto holds the sweep back while the order's search finds the cores
# busy, and only then.  Over the emulated PFS (512 KiB/s: the sweep of the
# dataset would take about 25 s; one fetch in flight, io_depth=1, so that
# the reader's opens do not queue behind eight of the sweep's), nothing
# registered, every core kept busy by spinning loops; a reader opens 32
# files of a random order (Python's,
# no torch shuffle: the search scans every seed, past its first ones at
# SCHED_IDLE, where the loops leave it nothing):
#  - sweep=on: never held (clairfs_sweep_held 0), the PFS keeps serving;
#    with search_budget=100 there (all the CPUs' time over the epoch the
#    reader's pace projects) the search runs at the normal priority once
#    its probe at idle priority found the cores busy: the log says so,
#    and clairfs_search_cpu_seconds_total{priority="normal"} grows while
#    the loops spin (how much is a benchmark's figure, printed);
#  - sweep=auto (the default), search_budget=3: clairfs_sweep_held turns
#    1, the log says how much of a core the search got, and once the
#    fetches in flight are done the PFS serves nothing more;
#  - an order registered through .clairfs/control: the sweep resumes
#    (clairfs_sweep_held 0, the log says the order is known) and the PFS
#    serves again.
# Whether the sweep resumes when the search gets a core again, and when
# the search's budget is spent, are decisions on shares the scheduler
# hands out: unit tests decide them on given shares (prefetch_adopt,
# identify_thread); here, only what the spinning loops make certain.
# Every byte read equals the source's.  Serial: the busy cores must be the
# loops'.
. "$(dirname "$0")/lib.sh"

: "${CLAIRFS_PFSEMU:?CLAIRFS_PFSEMU must name clairfs-pfsemu}"
cfs_setup
src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
m() { cfs_metric "$1" "$2"; }
pfs_bytes() { m "$1" 'clairfs_fetch_bytes_total{from="pfs"}'; }

# wait_log PATTERN FILE: FILE has a line matching PATTERN within 20 s.
wait_log() {
    for _ in $(seq 200); do
        grep -q "$1" "$2" && return 0
        sleep 0.1
    done
    return 1
}

# grows_metric MNT NAME: the metric passes its present value within 20 s.
grows_metric() {
    local a
    a=$(m "$1" "$2")
    for _ in $(seq 200); do
        sleep 0.1
        awk -v a="$a" -v b="$(m "$1" "$2")" 'BEGIN { exit !(b > a) }' && return 0
    done
    return 1
}

# settled MNT: the PFS bytes unchanged over a second (the fetches in flight
# are done), within 15 s.
settled() {
    local a b
    a=$(pfs_bytes "$1")
    for _ in $(seq 15); do
        sleep 1
        b=$(pfs_bytes "$1")
        [ "$a" = "$b" ] && return 0
        a=$b
    done
    return 1
}

# grows MNT: the PFS serves more bytes within 3 s.
grows() {
    local a
    a=$(pfs_bytes "$1")
    for _ in $(seq 30); do
        sleep 0.1
        [ "$(pfs_bytes "$1")" -gt "$a" ] && return 0
    done
    return 1
}

pfs=$TMP/pfs
cfs_pfsemu "$src" "$pfs" bandwidth=512K,latency_open=1ms || { fail "pfsemu"; cfs_finish; }
spinners=()
for _ in $(seq "$(nproc)"); do
    bash -c 'while :; do :; done' &
    spinners+=("$!")
    cfs_pids+=("$!")
done
echo "$(nproc) spinning loops"

mnt=$TMP/mnt-on
if cfs_mount "$pfs" "$mnt" "$TMP/d-on.log" \
    -o ram=64M,io_depth=1,sweep=on,search_budget=100,index="$TMP/ix-on"; then
    cfs_read_shuffled "$src" "$mnt" 0 32 >/dev/null || fail "sweep=on: 32 files equal the source's"
    # raised after its probe at idle priority (2 s) finds the cores busy,
    # where sweep=auto would hold: from then on its CPU at the normal
    # priority grows (at idle priority the loops would leave it nothing)
    check "search_budget=100: the search runs raised on busy cores (the log says so)" \
        wait_log "identify: the search runs at the normal priority within its budget" "$TMP/d-on.log"
    check "sweep=on: not held on busy cores" test "$(m "$mnt" clairfs_sweep_held)" = 0
    check "sweep=on: the PFS keeps serving" grows "$mnt"
    check "search_budget=100: its CPU at the normal priority grows" \
        grows_metric "$mnt" 'clairfs_search_cpu_seconds_total{priority="normal"}'
    echo "search_budget=100: the search's CPU s (a benchmark's figure, not checked):" \
        "normal $(m "$mnt" 'clairfs_search_cpu_seconds_total{priority="normal"}')," \
        "idle $(m "$mnt" 'clairfs_search_cpu_seconds_total{priority="idle"}')"
    check "search_budget=100: not spent" \
        bash -c "! grep -q 'budget is spent' '$TMP/d-on.log'"
    check "sweep=on: unmount" cfs_umount "$mnt"
    check "sweep=on: nothing logged of holding back" \
        bash -c "! grep -q 'sweep: held back' '$TMP/d-on.log'"
else
    fail "mount sweep=on"
fi

mnt=$TMP/mnt
if cfs_mount "$pfs" "$mnt" "$TMP/daemon.log" -o ram=64M,io_depth=1,search_budget=3,index="$TMP/index"; then
    cfs_read_shuffled "$src" "$mnt" 0 32 >/dev/null || fail "32 files equal the source's"
    check "busy cores: the sweep held back" cfs_wait_metric "$mnt" clairfs_sweep_held 1
    check "busy cores: the log says what the search got" \
        grep -Eq "sweep: held back: the order's search gets 0\.[0-4][0-9] of a core" \
        "$TMP/daemon.log"
    check "busy cores: the fetches in flight end" settled "$mnt"
    held=$(pfs_bytes "$mnt")
    sleep 3
    now=$(pfs_bytes "$mnt")
    echo "held: $held PFS bytes, 3 s later $now, dataset $TOTAL"
    check "busy cores: nothing fetched while held" test "$now" -eq "$held"
    # what ended a hold early, for whoever reads a failure
    [ "$now" -eq "$held" ] || grep -E "sweep:|identify:" "$TMP/daemon.log" >&2
    check "busy cores: the dataset not all fetched" test "$now" -lt "$TOTAL"

    kill "${spinners[@]}"
    wait "${spinners[@]}" 2>/dev/null
    check "an order registered: accepted" bash -c 'echo "seed 7" >"$1/.clairfs/control"' _ "$mnt"
    check "an order registered: the sweep resumes" cfs_wait_metric "$mnt" clairfs_sweep_held 0
    check "an order registered: the log says why" \
        grep -Eq "sweep: resumed after [0-9]+ s held back: the order is known" "$TMP/daemon.log"
    check "an order registered: the PFS serves again" grows "$mnt"
    cfs_read_shuffled "$src" "$mnt" 32 48 >/dev/null || fail "16 more files equal the source's"
    check "unmount" cfs_umount "$mnt"
else
    fail "mount"
fi

cfs_finish
