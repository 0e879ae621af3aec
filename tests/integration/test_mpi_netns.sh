#!/bin/bash
# A 2-node distributed mount across emulated network links (suite 'mpi'):
# the setup of bench/bench-mpi.sh, made by the same functions
# (bench/netns.sh): two network namespaces on a bridge, each veth shaped
# by tc, one orted per namespace, btl tcp only.  Checks:
#   - every file read on both nodes equals the source, byte for byte, twice
#     (the second pass reads the other node's share from it);
#   - peers were used (clairfs_fetch_bytes_total{from="peer"} > 0 on each
#     node), and those bytes crossed the links: what tc sent into node r
#     over its veth grew by at least node r's peer bytes (the namespaces
#     share no other path: a rank's loopback is its own);
#   - every node unmounts, mpirun exits 0, and nothing the setup made (the
#     namespaces, veths, bridge) is left.
# Environment: CLAIRFS, CLAIRFS_GENDATA (tests/meson.build).
# Exit 77 where mpirun is missing or network namespaces cannot be made
# (not root, no iproute2).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
unset LINK_RATE LINK_DELAY NET_TAG # the links of the defaults, whatever the caller set
. "$HERE/../../bench/netns.sh"
cfs_setup

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIPID=
netns_cleanup() {
    cfs_mpi_stop
    net_teardown
    cfs_cleanup
}
trap netns_cleanup EXIT

if ! net_setup 2; then
    echo "SKIP: cannot emulate the network here: $NET_ERROR"
    exit 77
fi
net_describe

# 400 files of 32 KiB, 12.5 MiB; each node's RAM holds 60 % of it, so
# every file has an owner that keeps it.
"$CLAIRFS_GENDATA" --classes 8 --files 50 --size 32K --quiet "$TMP/src"
DATASET=$(find "$TMP/src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
RAM=$((DATASET * 6 / 10))
mkdir -p "$TMP/m0" "$TMP/m1"
declare -A LINK0
for r in 0 1; do LINK0[$r]=$(net_qdisc_bytes "$(net_veth_host "$r")"); done

# shellcheck disable=SC2046
env --default-signal=INT timeout -k 5 150 mpirun -np 2 --oversubscribe $(net_mpi_args "$TMP") \
    "$CLAIRFS" -f -o "seed=7,world=2,epochs=2,ram=$RAM,index=$TMP/idx{rank}" \
    "$TMP/src" "$TMP/m{rank}" >"$TMP/mpi.log" 2>&1 &
MPIPID=$!
up=0
for _ in $(seq 300); do
    [ -e "$TMP/m0/.clairfs/ready" ] && [ -e "$TMP/m1/.clairfs/ready" ] && { up=1; break; }
    kill -0 "$MPIPID" 2>/dev/null || break
    sleep 0.1
done
if [ $up != 1 ]; then
    fail "the mounts did not come up over the emulated links: $(tail -5 "$TMP/mpi.log")"
    cfs_finish
fi

# compare_all: every file of the source on both mounts, byte for byte, and
# no other file (one reader process: a cmp per file spent 40 s a pass in
# forks on a loaded host).
compare_all() {
    "$PYTHON" - "$TMP/src" "$TMP/m0" "$TMP/m1" <<'EOF2'
import os, sys
src = sys.argv[1]
files = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
bad = 0
for node, mnt in enumerate(sys.argv[2:]):
    for rel in files:
        with open(os.path.join(src, rel), "rb") as a, open(os.path.join(mnt, rel), "rb") as b:
            if a.read() != b.read():
                print(f"node {node}: {rel} differs")
                bad = 1
    count = sum(len(fs) for _, _, fs in os.walk(mnt))
    if count != len(files):
        print(f"node {node}: {count} files, the source has {len(files)}")
        bad = 1
sys.exit(bad)
EOF2
}
check "both nodes: every file equals the source" compare_all
check "both nodes, again (the other node's share from it)" compare_all

for r in 0 1; do
    peer=$(cfs_metric "$TMP/m$r" 'clairfs_fetch_bytes_total{from="peer"}')
    link=$(($(net_qdisc_bytes "$(net_veth_host "$r")") - LINK0[$r]))
    echo "   node $r: ${peer:-0} peer bytes, $link bytes into it over its veth"
    [ "${peer:-0}" -gt 0 ] || fail "node $r fetched nothing from its peer"
    [ "$link" -ge "${peer:-0}" ] || fail "node $r: $link bytes on its link < ${peer:-0} peer bytes"
done

stop() {
    fusermount3 -u "$TMP/m0" && fusermount3 -u "$TMP/m1" || return 1
    wait "$MPIPID"
    local rc=$?
    MPIPID=
    return $rc
}
check "both nodes unmount and mpirun exits 0" stop
grep -q "node 0 of 2" "$TMP/mpi.log" || fail "no 'node 0 of 2' line: $(tail -3 "$TMP/mpi.log")"

made=$(net_ns 0)
net_teardown
left() { ip netns list | grep -q "^${made%0}" || ip link show "$NET_BRIDGE" >/dev/null 2>&1; }
left && fail "the namespaces or bridge outlived net_teardown"
cfs_finish
