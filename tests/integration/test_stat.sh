#!/usr/bin/env bash
# clairfs-stat against a real mount: one header and COUNT lines, rates in
# the column of the reads done meanwhile, exact totals with interval 0, a header
# every 20 lines, exit 0 on SIGINT, a one-line error (exit 1) on a directory
# that is not a clairfs mount and when the mount goes away.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh) and CLAIRFS_STAT.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_STAT:?CLAIRFS_STAT must name clairfs-stat}"
cfs_setup

src=$TMP/src
mnt=$TMP/mnt
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 4 --files 30 --size 4K "$src" || { fail "gendata"; cfs_finish; }
cfs_mount "$src" "$mnt" "$TMP/daemon.log" -o no_sweep,index="$TMP/index" || { fail "mount"; cfs_finish; }

# totals FIELD: one column of the interval-0 line (6 = pfs reads).
totals() { "$CLAIRFS_STAT" "$mnt" 0 | awk -v f="$1" 'NR == 2 { print $f }'; }

# wait_header FILE: until clairfs-stat has taken its first sample.
wait_header() {
    for _ in $(seq 200); do
        grep -q '^time ' "$1" 2>/dev/null && return 0
        sleep 0.02
    done
    return 1
}

# --- errors: not a mount, bad arguments.
check "a plain directory: exit 1, one line naming it" bash -c '
    "$1" "$2" 1 1 >"$3.out" 2>"$3.err"; rc=$?
    [ $rc -eq 1 ] && [ ! -s "$3.out" ] && [ "$(wc -l <"$3.err")" -eq 1 ] &&
    grep -q "^clairfs-stat: $2 is not a clairfs mount" "$3.err"' _ "$CLAIRFS_STAT" "$src" "$TMP/plain"
check "bad interval and count: exit 2" bash -c '
    "$1" "$2" x 2>/dev/null; a=$?; "$1" "$2" -1 2>/dev/null; b=$?; "$1" "$2" 1 0 2>/dev/null; c=$?
    [ "$a $b $c" = "2 2 2" ]' _ "$CLAIRFS_STAT" "$mnt"

# --- totals: a header and one line of exact counts.
check "interval 0: header and one line of 15 columns" bash -c '
    out=$("$1" "$2" 0) && [ "$(echo "$out" | wc -l)" -eq 2 ] &&
    echo "$out" | awk "NR == 1 && \$1 == \"time\" && \$6 == \"pfs\" { h = 1 }
                       NR == 2 && NF == 15 && \$6 == 0 { l = 1 } END { exit !(h && l) }"' \
    _ "$CLAIRFS_STAT" "$mnt"

# --- 3 lines at 0.5 s while 40 files are read: the pfs column adds up.
pfs0=$(totals 6)
"$CLAIRFS_STAT" "$mnt" 0.5 3 >"$TMP/stat.out" 2>"$TMP/stat.err" &
stat_pid=$!
cfs_pids+=("$stat_pid")
wait_header "$TMP/stat.out" || fail "no header from clairfs-stat"
find "$mnt/n0000" "$mnt/n0001" -name '*.JPEG' | sort | head -n 40 | xargs cat >/dev/null
wait "$stat_pid"
check "clairfs-stat 0.5 3 exits 0" test $? -eq 0
pfs1=$(totals 6)
cat "$TMP/stat.out"
check "exactly 40 more pfs reads in the totals" test "$((pfs1 - pfs0))" -eq 40
check "one header and 3 lines of 13 columns" awk '
    NR == 1 { ok = ($1 == "time" && $6 == "pfs/s" && NF == 13) }
    NR > 1 { ok = ok && NF == 13 && $1 ~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/ }
    END { exit !(ok && NR == 4) }' "$TMP/stat.out"
# The 40 reads show as pfs reads and as nothing else.  How many a second
# each line says divides by the measured time between two samples, which
# the scheduler stretches or shrinks around the nominal 0.5 s: rate x 0.5
# summed over the lines is printed (about 40: counts per interval instead
# of rates would give 20, rates per 0.5 s 80), not checked.
check "the reads show as pfs reads only" awk '
    NR > 1 { n += $6 * 0.5; pfs += ($6 > 0); other += $3 + $4 + $5 }
    END { printf "pfs reads by the rates: %.2f\n", n; exit !(pfs > 0 && other == 0) }' "$TMP/stat.out"
check "hit% is 0.0 where there were reads, - where none" awk '
    NR > 1 { ok = ($6 > 0) ? ($7 == "0.0") : ($7 == "-"); if (!ok) bad++ }
    END { exit bad > 0 }' "$TMP/stat.out"

# --- a header every 20 lines.
check "25 lines at 0.01 s: 2 headers, 25 lines" bash -c '
    "$1" "$2" 0.01 25 >"$3" && [ "$(grep -c "^time " "$3")" -eq 2 ] && [ "$(wc -l <"$3")" -eq 27 ] &&
    [ "$(sed -n 22p "$3" | cut -d" " -f1)" = time ]' _ "$CLAIRFS_STAT" "$mnt" "$TMP/many.out"

# --- SIGINT ends an open-ended run with status 0.
"$CLAIRFS_STAT" "$mnt" 0.2 >"$TMP/int.out" &
int_pid=$!
cfs_pids+=("$int_pid")
wait_header "$TMP/int.out"
sleep 0.3
kill -INT "$int_pid"
wait "$int_pid"
check "SIGINT: exit 0" test $? -eq 0

# --- two mount points (a distributed mount's nodes on one host): one line
# each, node 0 and 1, and the line 'all' of their sums.
mnt2=$TMP/mnt2
first_pid=$CFS_PID
cfs_mount "$src" "$mnt2" "$TMP/daemon2.log" -o no_sweep,index="$TMP/index2" || fail "second mount"
find "$mnt2/n0002" -name '*.JPEG' | sort | head -n 10 | xargs cat >/dev/null
pfs_one=$(totals 6)
"$CLAIRFS_STAT" "$mnt" "$mnt2" 0 >"$TMP/nodes.out"
cat "$TMP/nodes.out"
check "two mounts, interval 0: a header, nodes 0 and 1, all; 16 columns" awk '
    NR == 1 { ok = ($1 == "node" && $2 == "time" && $7 == "pfs" && NF == 16) }
    NR > 1 { ok = ok && NF == 16 && $1 == (NR == 4 ? "all" : NR - 2) }
    END { exit !(ok && NR == 4) }' "$TMP/nodes.out"
check "each node's pfs reads, exact, and their sum" awk -v a="$pfs_one" '
    NR == 2 { x = $7 } NR == 3 { y = $7 } NR == 4 { z = $7 }
    END { exit !(x == a && y == 10 && z == a + 10) }' "$TMP/nodes.out"
check "two mounts at 0.1 s, 2 lines: a header and 3 lines each" bash -c '
    "$1" "$2" "$3" 0.1 2 >"$4" && [ "$(wc -l <"$4")" -eq 7 ] &&
    awk "NR > 1 { ok += (NF == 14) } END { exit ok != 6 }" "$4"' \
    _ "$CLAIRFS_STAT" "$mnt" "$mnt2" "$TMP/nodes_rates.out"
check "a second argument that is no mount: exit 1, one line naming it" bash -c '
    "$1" "$2" "$3" 0 >/dev/null 2>"$4"; [ $? -eq 1 ] && [ "$(wc -l <"$4")" -eq 1 ] &&
    grep -q "^clairfs-stat: $3 is not a clairfs mount" "$4"' _ "$CLAIRFS_STAT" "$mnt" "$src" \
    "$TMP/nodes.err"
check "second unmount is clean" cfs_umount "$mnt2"
CFS_PID=$first_pid

# --- the mount goes away under a running clairfs-stat: exit 1, a message.
"$CLAIRFS_STAT" "$mnt" 0.1 >"$TMP/gone.out" 2>"$TMP/gone.err" &
gone_pid=$!
cfs_pids+=("$gone_pid")
wait_header "$TMP/gone.out"
check "unmount is clean" cfs_umount "$mnt"
wait "$gone_pid"
check "unmounted under it: exit 1 with one line" bash -c '
    [ "$1" -eq 1 ] && [ "$(wc -l <"$2")" -eq 1 ] && grep -q "unmounted" "$2"' _ $? "$TMP/gone.err"
cfs_finish
