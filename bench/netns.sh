# A private network per node on one host, for the distributed benchmark
# (bench/bench-mpi.sh) and its smoke test (tests/integration/test_mpi_netns.sh).
# Sourced, not run.
#
# With every MPI rank on one host, Open MPI's TCP transport goes over
# loopback and a peer read costs a memory copy, nothing like a network.
# Here each node gets its own network namespace, joined to a bridge in the
# host namespace by a veth pair, and every link is shaped by tc in both
# directions (tbf at LINK_RATE; netem delay LINK_DELAY where the kernel has
# sch_netem — kernels built without it get the rate alone, said in one
# line by net_describe), with an MTU of LINK_MTU (default 9000, the jumbo
# frames of cluster Ethernet: with 1500 every node's 2-core share went to
# the kernel's per-packet work, which a real NIC's offloads do not cost).
#
# mpirun treats the namespaces as hosts: a hostfile names them, and its
# remote-shell agent (what would be ssh) starts each node's orted inside
# its namespace with `nsenter --net`.  So every node has its own daemon and
# PMIx server on its own loopback (PMIx 4 meets its clients over 127.0.0.1
# TCP, which does not cross namespaces), ranks meet over the veths (btl
# tcp, no shared memory), and mpirun reaches the orteds at the bridge's
# address.  nsenter changes the network namespace only (`ip netns exec`
# would also give a private mount namespace, hiding the FUSE mounts from
# the trainers), so the emulated PFS and the mounts stay shared.
#
# Names carry a per-run tag, so concurrent runs do not collide; everything
# made is recorded and removed by net_teardown (idempotent, for EXIT traps).
#
#   net_setup N          namespaces 0..N-1 on NET_SUBNET (node r at .r+1,
#                        the host at .254); returns non-zero (NET_ERROR says
#                        why) where namespaces cannot be made
#   net_mpi_args DIR [N] writes DIR/hosts (the first N nodes, default all)
#                        and DIR/agent; prints the mpirun arguments that
#                        start rank r in namespace r and keep MPI on the links
#   net_qdisc_bytes DEV [NS] bytes the root qdisc of DEV (in NS) has sent
#   net_describe         one line: links, shaping, what could not be emulated
#   net_teardown         stops what still runs in the namespaces (by PID),
#                        removes namespaces, veths and bridge

LINK_RATE=${LINK_RATE:-1gbit}
LINK_DELAY=${LINK_DELAY:-50us}
LINK_MTU=${LINK_MTU:-9000}
NET_TAG=${NET_TAG:-$(printf '%x' $(($$ % 65536)))}
# A subnet per run too: the host holds an address on each run's bridge.
NET_NET=10.77.$((0x$NET_TAG % 250))
NET_SUBNET=$NET_NET.0/24
NET_BRIDGE=cfb$NET_TAG
NET_NODES=0
NET_MADE=()     # namespaces made, for net_teardown
NET_BRIDGE_MADE=
NET_DELAY_NOTE=
NET_ERROR=

net_ns() { echo "cfs${NET_TAG}n$1"; }
net_veth_host() { echo "cfh${NET_TAG}n$1"; }

net_setup() {
    local n=$1 r ns hv
    NET_ERROR=
    if [ "$(id -u)" != 0 ]; then NET_ERROR="network namespaces need root"; return 1; fi
    command -v ip >/dev/null && command -v tc >/dev/null && command -v nsenter >/dev/null ||
        { NET_ERROR="no ip, tc or nsenter (iproute2, util-linux)"; return 1; }
    tc_rate_bps "$LINK_RATE" >/dev/null || return 1
    ip link add "$NET_BRIDGE" type bridge 2>/dev/null ||
        { NET_ERROR="cannot create a bridge (ip link add type bridge)"; return 1; }
    NET_BRIDGE_MADE=1
    ip addr add "$NET_NET.254/24" dev "$NET_BRIDGE" && ip link set "$NET_BRIDGE" up ||
        { NET_ERROR="cannot configure bridge $NET_BRIDGE"; return 1; }
    for r in $(seq 0 $((n - 1))); do
        ns=$(net_ns "$r") hv=$(net_veth_host "$r")
        ip netns add "$ns" 2>/dev/null || { NET_ERROR="cannot create network namespace $ns"; return 1; }
        NET_MADE+=("$ns")
        ip link add "$hv" type veth peer name eth0 netns "$ns" ||
            { NET_ERROR="cannot create veth pair $hv"; return 1; }
        ip link set "$hv" mtu "$LINK_MTU" master "$NET_BRIDGE" up &&
            ip -n "$ns" link set eth0 mtu "$LINK_MTU" &&
            ip -n "$ns" link set lo up &&
            ip -n "$ns" addr add "$NET_NET.$((r + 1))/24" dev eth0 &&
            ip -n "$ns" link set eth0 up || { NET_ERROR="cannot configure $ns"; return 1; }
        net_shape "$hv" && net_shape eth0 "$ns" ||
            { NET_ERROR="${NET_ERROR:-tc cannot shape $hv at $LINK_RATE}"; return 1; }
    done
    NET_NODES=$n
}

net_mpi_args() {
    local dir=$1 n=${2:-$NET_NODES} r
    for r in $(seq 0 $((n - 1))); do echo "$(net_ns "$r") slots=1"; done >"$dir/hosts"
    # ssh would run the command line it is given in a shell on the host.
    # Each node's orted keeps its session directory under DIR/ompi/NODE:
    # the orteds share one /tmp and start at once, and creating the same
    # job-family directory together failed now and then ("File exists",
    # orte_session_dir failed, the mounts never came up).
    printf '%s\n' '#!/bin/sh' 'host=$1' 'shift' \
        "mkdir -p \"$dir/ompi/\$host\" || exit 1" \
        "OMPI_MCA_orte_tmpdir_base=\"$dir/ompi/\$host\"; export OMPI_MCA_orte_tmpdir_base" \
        'exec nsenter --net="/run/netns/$host" -- /bin/sh -c "$*"' >"$dir/agent"
    chmod +x "$dir/agent"
    # The daemons share the host's name (one UTS namespace), which can
    # leave ORTE's routing tree without a path to one of them ("no-path",
    # seen once in CI): every daemon talks to mpirun directly instead.
    # rtc_hwloc_vmhole=none: an orted here once crashed writing its shared
    # topology into the "biggest" hole it found (hwloc_shmem_topology_write,
    # SIGSEGV at a stack address) while other MPI jobs ran; without it
    # each rank reads the topology itself.
    echo "--hostfile $dir/hosts --mca plm_rsh_agent $dir/agent --mca routed direct" \
        "--mca rtc_hwloc_vmhole none" \
        "--mca pml ob1 --mca btl self,tcp" \
        "--mca btl_tcp_if_include $NET_SUBNET --mca oob_tcp_if_include $NET_SUBNET"
}

# net_shape DEV [NS]: tbf at LINK_RATE (a burst of 2 ms of the rate, at
# least 64 KiB so that one GSO packet passes), under netem's delay where
# there is netem; otherwise NET_DELAY_NOTE says the delay is not emulated.
net_shape() {
    local dev=$1 ns=${2:-} tcx=(tc)
    [ -n "$ns" ] && tcx=(ip netns exec "$ns" tc)
    local bps burst
    bps=$(tc_rate_bps "$LINK_RATE") || return 1
    burst=$((bps / 8 / 500))
    [ "$burst" -lt 65536 ] && burst=65536
    if [ -n "$LINK_DELAY" ] && [ "$LINK_DELAY" != 0 ] &&
        "${tcx[@]}" qdisc add dev "$dev" root handle 1: netem delay "$LINK_DELAY" 2>/dev/null; then
        "${tcx[@]}" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$LINK_RATE" \
            burst "$burst" latency 50ms || return 1
    else
        [ -n "$LINK_DELAY" ] && [ "$LINK_DELAY" != 0 ] &&
            NET_DELAY_NOTE="LINK_DELAY $LINK_DELAY not emulated (this kernel has no sch_netem; veth latency only)"
        "${tcx[@]}" qdisc add dev "$dev" root handle 1: tbf rate "$LINK_RATE" \
            burst "$burst" latency 50ms || return 1
    fi
}

# tc_rate_bps RATE: tc's rate syntax (bit, kbit, mbit, gbit) in bits per
# second.
tc_rate_bps() {
    local r=${1,,} n u
    n=${r%%[a-z]*}
    u=${r#"$n"}
    case $u in
    bit | "") echo "$n" ;;
    kbit) echo $((n * 1000)) ;;
    mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;;
    *) NET_ERROR="LINK_RATE=$1: use bit, kbit, mbit or gbit"; return 1 ;;
    esac
}

# net_qdisc_bytes DEV [NS]: bytes the root qdisc of DEV has sent.
net_qdisc_bytes() {
    local tcx=(tc)
    [ -n "${2:-}" ] && tcx=(ip netns exec "$2" tc)
    "${tcx[@]}" -s qdisc show dev "$1" |
        awk '$1 == "qdisc" { root = ($0 ~ / root /) } root && $1 == "Sent" { print $2; exit }'
}

net_describe() {
    local d=
    [ -n "$LINK_DELAY" ] && [ "$LINK_DELAY" != 0 ] && [ -z "$NET_DELAY_NOTE" ] &&
        d="netem delay $LINK_DELAY + "
    echo "network: $NET_NODES namespaces on bridge $NET_BRIDGE ($NET_SUBNET), each veth (MTU $LINK_MTU) ${d}tbf $LINK_RATE both ways${NET_DELAY_NOTE:+; $NET_DELAY_NOTE}"
}

net_teardown() {
    local r p
    # Only what this run started lives in its namespaces (an orted left by
    # a killed mpirun, say).
    for r in "${!NET_MADE[@]}"; do
        for p in $(ip netns pids "${NET_MADE[$r]}" 2>/dev/null); do kill "$p" 2>/dev/null; done
    done
    for r in "${!NET_MADE[@]}"; do
        ip link del "$(net_veth_host "$r")" 2>/dev/null
        ip netns del "${NET_MADE[$r]}" 2>/dev/null
    done
    [ -n "$NET_BRIDGE_MADE" ] && ip link del "$NET_BRIDGE" 2>/dev/null
    NET_MADE=() NET_BRIDGE_MADE= NET_NODES=0
}
