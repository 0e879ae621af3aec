#!/bin/bash
# Distributed mounts under mpirun (suite 'mpi'):
#   test_mpi_mount.sh SCENARIO
#   files   -np 2 (shared memory) and -np 4 (TCP): every file on every mount
#           equals the source; one node unmounts while the others serve.
#   epochs  -np 2 and -np 4: ram = 1/N of the dataset + 10 %, one trainer rank
#           per node replaying its DistributedSampler order concurrently;
#           from epoch 2 on >= 95 % of reads from RAM or a peer and PFS bytes
#           per epoch <= 10 % of the dataset (metrics between epochs).
#   epochs_ring  the epochs with -o fuse_io=uring where the kernel offers
#           FUSE over io_uring (skipped where it does not): every mount's
#           requests on its CPU queues, and no retrieve for a peer short
#           (clairfs_pagecache_retrieved_total{result="short"} 0 on every
#           node; the answer's layout on the ring once lost them all).
#   stop    SIGSTOP of one rank mid-epoch: the other node's epoch completes
#           (from the PFS, after the peer timeout); after SIGCONT its reads
#           come from the peer again.
#   agree   mismatched seed or dataset: every rank names the difference,
#           exits non-zero, nothing mounted.
#   placement  aggregate RAM >= the dataset: -np 2 (ram = 60 % of it each)
#           and -np 4 (30 % each), TCP: every file has an owner that holds
#           it from its first use, so after epoch 0 the cluster reads at most
#           5 % of the dataset per epoch from the PFS (sum of the nodes'
#           clairfs_fetch_bytes_total{from="pfs"} deltas), every read
#           verified against the source, and clairfs-plan --nodes N
#           (clairvoyant) predicts the PFS bytes of every epoch within 5 %
#           of the dataset.
#   measured  aggregate RAM 110 % of the dataset (ram = 1/N of it + 10 %
#           each), -np 2 and -np 4 over TCP, the source behind clairfs-pfsemu
#           (2 ms per open) and the model given only its bandwidth, so that
#           the PFS's latency and the peers' are both measured: after epoch 0
#           the cluster reads at most 5 % of the dataset per epoch from the
#           PFS (sum of the nodes' clairfs_fetch_bytes_total{from="pfs"}
#           deltas), every read verified against the source, and on every
#           node clairfs_pfs_bytes_total's reasons add up to those bytes.
#   windows -np 2, ram = 40 % of the dataset a node, 8 epochs: the plan
#           covers 4 epochs at a time (run_config.c), so each node switches
#           windows twice (at epochs 3 and 6, each when its own trainer gets
#           there); every read verified against the source, the peers
#           serve every epoch, and no peer fetch falls back to the PFS
#           (clairfs_peer_fetches_total{result="fallback"} is 0 on both).
#   idle    -np 2 (shared memory, then TCP), mounted and unread: each
#           daemon's threads sleep as the code says (the peer thread 5 ms at
#           a time and never spins, the prefetcher 1 s, the others until
#           asked): their voluntary context switches over 3 s, per thread
#           (the CPU they cost is a benchmark's figure, not checked).
# Environment: CLAIRFS, CLAIRFS_GENDATA, CLAIRFS_BENCH, CLAIRFS_PLAN,
# CLAIRFS_PFSEMU (tests/meson.build); CLAIRFS_MPI_OPTS, options added to
# every mount's (fuse_io=device, ...).
# Exit 77 when mpirun or FUSE is missing.
set -u
SCENARIO=${1:?scenario}
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?CLAIRFS_BENCH must name clairfs-bench}"
: "${CLAIRFS_PLAN:?CLAIRFS_PLAN must name clairfs-plan}"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
cfs_setup

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Loopback only, so that TCP does not probe every interface.
MPI_COMMON="--oversubscribe --mca pml ob1 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
VADER="--mca btl self,vader"
TCP="--mca btl self,tcp"
MPIPID=
STOPPED=

mpi_cleanup() {
    [ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
    cfs_mpi_stop
    cfs_cleanup
}
trap mpi_cleanup EXIT

# 400 files of 16 KiB (whole 4 KiB pages: the RAM tier's bytes are exact).
"$CLAIRFS_GENDATA" --classes 8 --files 50 --size 16K --quiet "$TMP/src"
DATASET=$(find "$TMP/src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
EPOCHS=4
# The emulated PFS here is a local directory, faster than any network: the
# model is told what a loaded PFS costs, as a real deployment would.
printf 'pfs_latency = 0.05   # a shared PFS under load\npfs_bw = 1G\n' >"$TMP/model.conf"

# start NP TRANSPORT OPTS: mpirun the daemons (foreground, log in
# $TMP/mpi.log) on $SOURCE, wait for every mount's ready file.
SOURCE=$TMP/src
start() {
    local np=$1 transport=$2 opts=$3 r
    opts="$opts${CLAIRFS_MPI_OPTS:+,$CLAIRFS_MPI_OPTS}"
    for r in $(seq 0 $((np - 1))); do mkdir -p "$TMP/m$r"; done
    # shellcheck disable=SC2086
    env --default-signal=INT timeout -k 5 150 mpirun -np "$np" $MPI_COMMON $transport \
        "$CLAIRFS" -o "$opts" "$SOURCE" "$TMP/m{rank}" >"$TMP/mpi.log" 2>&1 &
    MPIPID=$!
    for _ in $(seq 300); do
        local ready=1
        for r in $(seq 0 $((np - 1))); do
            [ -e "$TMP/m$r/.clairfs/ready" ] || ready=0
        done
        [ $ready = 1 ] && return 0
        kill -0 "$MPIPID" 2>/dev/null || break
        sleep 0.1
    done
    echo "the mounts did not come up; log:"
    cat "$TMP/mpi.log"
    return 1
}

# stop NP: unmount every node, wait for mpirun; its status.
stop() {
    local np=$1 r rc
    for r in $(seq 0 $((np - 1))); do
        cfs_is_mounted "$TMP/m$r" && fusermount3 -u "$TMP/m$r"
    done
    wait "$MPIPID"
    rc=$?
    MPIPID=
    return $rc
}

metric() { cfs_metric "$1" "$2"; }

# bench R EPOCH NP MNT: replay trainer rank R's epoch on MNT, verifying bytes.
bench() {
    timeout 120 "$CLAIRFS_BENCH" -o "seed=7,world=$3,epochs=$EPOCHS,start_epoch=$2" --epochs 1 \
        --rank "$1" --verify "$TMP/src" --workers 2 --csv "$4" >"$TMP/bench.$1.$2" 2>&1
}

# epoch_on_all NP E: every rank's epoch E at once, as the ranks of one job.
epoch_on_all() {
    local np=$1 e=$2 r pids=()
    for r in $(seq 0 $((np - 1))); do
        bench "$r" "$e" "$np" "$TMP/m$r" &
        pids+=($!)
    done
    for r in $(seq 0 $((np - 1))); do
        wait "${pids[$r]}" || fail "-np $np epoch $e rank $r: $(tail -2 "$TMP/bench.$r.$e")"
    done
}

# pfs_since NP: the PFS bytes the nodes fetched since the last call (the
# caller's prev_pfs holds each node's count then, none before the first
# call, and is moved on), summed in pfs_total and listed per node in pfs_per.
pfs_since() {
    local np=$1 r b
    pfs_total=0 pfs_per=""
    for r in $(seq 0 $((np - 1))); do
        b=$(metric "$TMP/m$r" 'clairfs_fetch_bytes_total{from="pfs"}')
        local before=${prev_pfs[$r]:-0} # none yet: the mount's start
        pfs_per="$pfs_per $((b - before))"
        pfs_total=$((pfs_total + b - before))
        prev_pfs[$r]=$b
    done
}

# share_of_dataset BYTES: BYTES as a percentage of the dataset, one decimal.
share_of_dataset() {
    echo "$((1000 * $1 / DATASET / 10)).$((1000 * $1 / DATASET % 10))"
}

compare_all() {
    local np=$1 r
    for r in $(seq 0 $((np - 1))); do
        diff -r "$TMP/src" "$TMP/m$r" >"$TMP/diff" 2>&1 ||
            { fail "mount $r differs from the source: $(head -3 "$TMP/diff")"; return 1; }
    done
}

scenario_files() {
    local np transport
    for cfg in "2 $VADER" "4 $TCP"; do
        np=${cfg%% *}
        transport=${cfg#* }
        start "$np" "$transport" "seed=7,world=$np,epochs=$EPOCHS,ram=1M,index=$TMP/idx{rank}" ||
            { fail "-np $np: start"; continue; }
        check "-np $np ($transport): every file on every mount equals the source" compare_all "$np"
        # A second pass reads what the first cached, some of it via peers.
        check "-np $np: again, from the tiers and peers" compare_all "$np"
        # The last node leaves first; the others keep serving.
        local last=$((np - 1))
        fusermount3 -u "$TMP/m$last"
        check "-np $np: node 0 still serves every file after node $last left" \
            diff -r "$TMP/src" "$TMP/m0"
        grep -q "peers: rank $last left" "$TMP/mpi.log" ||
            fail "-np $np: node 0 did not see node $last leave"
        check "-np $np: every node unmounts and mpirun exits 0" stop "$np"
        grep -q "node 0 of $np" "$TMP/mpi.log" || fail "-np $np: no 'node 0 of $np' line"
        rm -rf "$TMP"/idx*
    done
}

scenario_epochs() {
    local np transport e r
    for cfg in "2 $VADER" "4 $TCP"; do
        np=${cfg%% *}
        transport=${cfg#* }
        local ram=$((DATASET / np * 11 / 10))
        start "$np" "$transport" \
            "seed=7,world=$np,epochs=$EPOCHS,ram=$ram,index=$TMP/idx{rank},model=$TMP/model.conf" ||
            { fail "-np $np: start"; continue; }
        declare -A prev_local prev_all prev_pfs
        for r in $(seq 0 $((np - 1))); do
            prev_local[$r]=0 prev_all[$r]=0 prev_pfs[$r]=0
        done
        for e in $(seq 0 $((EPOCHS - 1))); do
            epoch_on_all "$np" "$e"
            for r in $(seq 0 $((np - 1))); do
                local m="$TMP/m$r" ram peer ssd pfs pfsb
                ram=$(metric "$m" 'clairfs_reads_total{source="ram"}')
                ssd=$(metric "$m" 'clairfs_reads_total{source="ssd"}')
                peer=$(metric "$m" 'clairfs_reads_total{source="peer"}')
                pfs=$(metric "$m" 'clairfs_reads_total{source="pfs"}')
                pfsb=$(metric "$m" 'clairfs_fetch_bytes_total{from="pfs"}')
                local loc=$((ram + ssd + peer)) all=$((ram + ssd + peer + pfs))
                local dl=$((loc - prev_local[$r])) da=$((all - prev_all[$r]))
                local dp=$((pfsb - prev_pfs[$r]))
                echo "   -np $np epoch $e node $r: $dl of $da reads from RAM/SSD/peer," \
                     "$dp PFS bytes ($((100 * dp / DATASET)) % of the dataset)"
                if [ "$e" -ge 2 ]; then
                    [ $((100 * dl)) -ge $((95 * da)) ] && [ "$da" -gt 0 ] ||
                        fail "-np $np epoch $e node $r: only $dl of $da reads from RAM or a peer"
                    [ $((10 * dp)) -le "$DATASET" ] ||
                        fail "-np $np epoch $e node $r: $dp PFS bytes > 10 % of $DATASET"
                fi
                prev_local[$r]=$loc prev_all[$r]=$all prev_pfs[$r]=$pfsb
            done
        done
        local ok
        ok=$(metric "$TMP/m0" 'clairfs_peer_fetches_total{result="ok"}')
        [ "${ok:-0}" -gt 0 ] || fail "-np $np: node 0 fetched nothing from its peers"
        # Owned files are staged in the page cache like the others, and
        # served to peers from there (the bytes above were compared).
        local asked=0 short=0 staged=0
        for r in $(seq 0 $((np - 1))); do
            asked=$((asked + $(metric "$TMP/m$r" 'clairfs_pagecache_retrieved_total{result="asked"}')))
            short=$((short + $(metric "$TMP/m$r" 'clairfs_pagecache_retrieved_total{result="short"}')))
            staged=$((staged + $(metric "$TMP/m$r" 'clairfs_pagecache_staged_total')))
        done
        echo "   -np $np: $staged files staged, $asked read back from the page cache for peers," \
             "$short of them short"
        [ "$asked" -gt 0 ] || fail "-np $np: no owned file was served from the page cache"
        if [ -n "${RING_CHECK:-}" ]; then
            for r in $(seq 0 $((np - 1))); do
                [ "$(metric "$TMP/m$r" clairfs_fuse_ring_queues)" -gt 0 ] ||
                    fail "-np $np node $r: its requests did not come over io_uring"
            done
            [ "$short" -eq 0 ] ||
                fail "-np $np: $short of $asked retrieves for peers short over io_uring"
        fi
        check "-np $np: every node unmounts and mpirun exits 0" stop "$np"
        rm -rf "$TMP"/idx*
        unset prev_local prev_all prev_pfs
    done
}

# sim_pfs_bytes NP RAM: the simulator's PFS bytes of each epoch (clairvoyant,
# all nodes), one per line.
sim_pfs_bytes() {
    "$CLAIRFS_PLAN" -o "seed=7,world=$1,epochs=$EPOCHS,ram=$2,ssd=0" --nodes "$1" --json \
        "$TMP/src" | "$PYTHON" -c '
import json, sys
for e in json.load(sys.stdin)["simulation"]["policies"]["clairvoyant"]["epochs"]:
    print(e["pfs_bytes"])'
}

scenario_placement() {
    local np e r
    for np in 2 4; do
        local ram=$((DATASET * 6 / 10 / (np / 2)))
        local sim
        mapfile -t sim < <(sim_pfs_bytes "$np" "$ram")
        [ "${#sim[@]}" -eq "$EPOCHS" ] || { fail "-np $np: clairfs-plan gave ${#sim[@]} epochs"; continue; }
        start "$np" "$TCP" \
            "seed=7,world=$np,epochs=$EPOCHS,ram=$ram,ssd=0,index=$TMP/idx{rank},model=$TMP/model.conf" ||
            { fail "-np $np: start"; continue; }
        declare -A prev_pfs
        for e in $(seq 0 $((EPOCHS - 1))); do
            epoch_on_all "$np" "$e"
            pfs_since "$np"
            local total=$pfs_total diff=$((pfs_total - sim[e]))
            diff=${diff#-}
            echo "   -np $np epoch $e: PFS bytes mount $total ($(share_of_dataset "$total") %" \
                 "of the dataset; per node:$pfs_per), simulator ${sim[e]}"
            [ "$e" -eq 0 ] || [ $((20 * total)) -le "$DATASET" ] ||
                fail "-np $np epoch $e: $total PFS bytes > 5 % of the dataset ($DATASET)"
            [ $((20 * diff)) -le "$DATASET" ] ||
                fail "-np $np epoch $e: mount $total and simulator ${sim[e]} PFS bytes differ by more than 5 % of the dataset"
        done
        check "-np $np: every file on every mount equals the source" compare_all "$np"
        check "-np $np: every node unmounts and mpirun exits 0" stop "$np"
        rm -rf "$TMP"/idx*
        unset prev_pfs
    done
}

scenario_measured() {
    : "${CLAIRFS_PFSEMU:?CLAIRFS_PFSEMU must name clairfs-pfsemu}"
    local np e r
    # The emulated PFS's defaults: 2 ms per open, 0.5 ms per read, 200 MiB/s
    # shared.  The model is told the bandwidth, as bench/bench-mpi.sh does;
    # the latencies, the PFS's and the peers', are what the fetches measure.
    cfs_pfsemu "$TMP/src" "$TMP/pfs" "" || { fail "clairfs-pfsemu did not mount"; return; }
    printf 'pfs_bw = 200M\npfs_client_bw = 200M\n' >"$TMP/measured.conf"
    SOURCE=$TMP/pfs
    for np in 2 4; do
        local ram=$((DATASET / np * 11 / 10))
        start "$np" "$TCP" \
            "seed=7,world=$np,epochs=$EPOCHS,ram=$ram,ssd=0,index=$TMP/idx{rank},model=$TMP/measured.conf" ||
            { fail "-np $np: start"; continue; }
        declare -A prev_pfs
        for e in $(seq 0 $((EPOCHS - 1))); do
            epoch_on_all "$np" "$e"
            pfs_since "$np"
            local total=$pfs_total why
            for r in $(seq 0 $((np - 1))); do
                # Every PFS byte has its reason.
                why=$(awk '$1 ~ /^clairfs_pfs_bytes_total\{/ { s += $2 } END { print s + 0 }' \
                    "$TMP/m$r/.clairfs/metrics")
                [ "$why" -eq "${prev_pfs[$r]}" ] ||
                    fail "-np $np epoch $e node $r: clairfs_pfs_bytes_total adds up to $why, not ${prev_pfs[$r]}"
            done
            echo "   -np $np epoch $e: PFS bytes $total ($(share_of_dataset "$total") %" \
                 "of the dataset; per node:$pfs_per)"
            [ "$e" -eq 0 ] || [ $((20 * total)) -le "$DATASET" ] ||
                fail "-np $np epoch $e: $total PFS bytes > 5 % of the dataset ($DATASET)"
        done
        local r0
        for r0 in $(seq 0 $((np - 1))); do
            echo "   -np $np node $r0: PFS bytes by reason:" \
                "$(awk -F'[{}"= ]+' '$1 == "clairfs_pfs_bytes_total" { printf " %s %s", $3, $4 }' \
                    "$TMP/m$r0/.clairfs/metrics")"
        done
        check "-np $np: every file on every mount equals the source" compare_all "$np"
        check "-np $np: every node unmounts and mpirun exits 0" stop "$np"
        rm -rf "$TMP"/idx*
        unset prev_pfs
    done
    SOURCE=$TMP/src
}

# The PID of the daemon that is MPI rank R.
rank_pid() {
    local p
    for p in $(pgrep -x clairfs); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" &&
            tr '\0' '\n' <"/proc/$p/cmdline" | grep -qF "$TMP/m{rank}"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

scenario_stop() {
    local ram=$((DATASET / 2 * 11 / 10))
    start 2 "$VADER" \
        "seed=7,world=2,epochs=$EPOCHS,ram=$ram,index=$TMP/idx{rank},model=$TMP/model.conf,peer_timeout=1" ||
        { fail "start"; return; }
    local e pids
    for e in 0 1; do
        bench 0 $e 2 "$TMP/m0" & pids=$!
        bench 1 $e 2 "$TMP/m1" || fail "epoch $e rank 1"
        wait $pids || fail "epoch $e rank 0"
    done
    local ok0 fb0 ok1 fb1 ok2
    ok0=$(metric "$TMP/m0" 'clairfs_peer_fetches_total{result="ok"}')
    fb0=$(metric "$TMP/m0" 'clairfs_peer_fetches_total{result="fallback"}')
    STOPPED=$(rank_pid 1) || { fail "no PID for rank 1"; return; }
    kill -STOP "$STOPPED"
    # Node 0 alone through epoch 2: what node 1 owns comes from the PFS
    # once node 1 is marked slow (peer_timeout=1).
    local t0=$SECONDS
    check "epoch 2 on node 0 completes, verified, while node 1 is stopped" bench 0 2 2 "$TMP/m0"
    echo "   epoch 2 on node 0 took $((SECONDS - t0)) s with node 1 stopped"
    fb1=$(metric "$TMP/m0" 'clairfs_peer_fetches_total{result="fallback"}')
    ok1=$(metric "$TMP/m0" 'clairfs_peer_fetches_total{result="ok"}')
    [ "$fb1" -gt "$fb0" ] || fail "no peer fetch fell back to the PFS while node 1 was stopped"
    grep -q "slow\|timed out\|did not answer" "$TMP/mpi.log" ||
        echo "   (no slow-peer line in the log)"
    kill -CONT "$STOPPED"
    STOPPED=
    # Node 1 catches up on epoch 2; then both run epoch 3 and node 0's
    # fetches reach node 1 again (after the back-off, or at once when
    # node 1's late replies unmark it).
    bench 1 2 2 "$TMP/m1" || fail "epoch 2 rank 1 after SIGCONT"
    sleep 2.5
    bench 0 3 2 "$TMP/m0" & pids=$!
    bench 1 3 2 "$TMP/m1" || fail "epoch 3 rank 1"
    wait $pids || fail "epoch 3 rank 0 after SIGCONT"
    ok2=$(metric "$TMP/m0" 'clairfs_peer_fetches_total{result="ok"}')
    echo "   node 0 peer fetches: $ok0 before the stop, $ok1 during, $ok2 after SIGCONT"
    [ "$ok2" -gt "$ok1" ] || fail "node 0 did not fetch from node 1 again after SIGCONT"
    check "both nodes unmount and mpirun exits 0" stop 2
    cat "$TMP/mpi.log" | grep -i "peer" | sed 's/^/   log: /' | head -5
}

scenario_windows() {
    local e r ok fb oks=""
    EPOCHS=8
    local ram=$((DATASET * 4 / 10))
    start 2 "$VADER" \
        "seed=7,world=2,epochs=$EPOCHS,ram=$ram,ssd=0,index=$TMP/idx{rank},model=$TMP/model.conf,log_level=debug" ||
        { fail "start"; return; }
    for e in $(seq 0 $((EPOCHS - 1))); do
        # The epochs two windows share, one node through it before the
        # other starts it: the first on the next window's plan while the
        # other is still on the last one's (node 0 first at 3, node 1 at 6).
        case $e in
        3) bench 0 3 2 "$TMP/m0" && bench 1 3 2 "$TMP/m1" || fail "epoch 3" ;;
        6) bench 1 6 2 "$TMP/m1" && bench 0 6 2 "$TMP/m0" || fail "epoch 6" ;;
        *) epoch_on_all 2 "$e" ;;
        esac
        ok=0 fb=0
        for r in 0 1; do
            ok=$((ok + $(metric "$TMP/m$r" 'clairfs_peer_fetches_total{result="ok"}')))
            fb=$((fb + $(metric "$TMP/m$r" 'clairfs_peer_fetches_total{result="fallback"}')))
        done
        echo "   epoch $e: peer fetches ok $ok, fallback $fb (both nodes, since the mount)"
        oks="$oks $ok"
        [ "$fb" -eq 0 ] || fail "epoch $e: $fb peer fetches fell back to the PFS"
    done
    # Each node planned the windows from epochs 3 and 6 itself.
    local w3 w6
    w3=$(grep -c "planned the window from epoch 3 " "$TMP/mpi.log")
    w6=$(grep -c "planned the window from epoch 6 " "$TMP/mpi.log")
    [ "$w3" -eq 2 ] && [ "$w6" -eq 2 ] ||
        fail "windows from epoch 3 and 6 planned $w3 and $w6 times, not 2 and 2"
    # The peers served in every window (the cumulative counts grow in the
    # last epoch of each).
    read -r -a okv <<<"$oks"
    [ "${okv[1]}" -gt 0 ] && [ "${okv[4]}" -gt "${okv[3]}" ] && [ "${okv[7]}" -gt "${okv[6]}" ] ||
        fail "the peers did not serve in every window (ok after each epoch:$oks)"
    check "every file on every mount equals the source" compare_all 2
    check "both nodes unmount and mpirun exits 0" stop 2
}

# expect_disagree WHAT PATTERN ARGS...: MPMD mpirun; every rank names it.
expect_disagree() {
    local what=$1 pattern=$2 rc n
    shift 2
    mkdir -p "$TMP/m0" "$TMP/m1"
    # shellcheck disable=SC2086
    timeout -k 5 60 mpirun $MPI_COMMON $VADER "$@" >"$TMP/agree.log" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$what: mpirun exited $rc"
    n=$(grep -c "the nodes disagree, not mounting: .*$pattern" "$TMP/agree.log")
    [ "$n" -eq 2 ] || { fail "$what: $n of 2 ranks named it"; cat "$TMP/agree.log"; }
    cfs_is_mounted "$TMP/m0" && fail "$what: m0 mounted"
    cfs_is_mounted "$TMP/m1" && fail "$what: m1 mounted"
    echo "ok: $what: $(grep -m1 'disagree' "$TMP/agree.log")"
}

scenario_agree() {
    local base="world=2,epochs=4,ram=1M"
    expect_disagree "mismatched seed" "seed differs: rank 0 has 7, rank 1 has 8" \
        -np 1 "$CLAIRFS" -o "seed=7,$base,index=$TMP/ia0" "$TMP/src" "$TMP/m0" : \
        -np 1 "$CLAIRFS" -o "seed=8,$base,index=$TMP/ia1" "$TMP/src" "$TMP/m1"
    cp -a "$TMP/src" "$TMP/src2"
    echo "another file" >"$TMP/src2/n0000/extra.JPEG"
    expect_disagree "mismatched dataset" "dataset differs" \
        -np 1 "$CLAIRFS" -o "seed=7,$base,index=$TMP/ib0" "$TMP/src" "$TMP/m0" : \
        -np 1 "$CLAIRFS" -o "seed=7,$base,index=$TMP/ib1" "$TMP/src2" "$TMP/m1"
    # A node that cannot start at all (missing mountpoint) stops the others.
    rmdir "$TMP/m1"
    timeout -k 5 60 mpirun -np 2 $MPI_COMMON $VADER "$CLAIRFS" -o "seed=7,$base,index=$TMP/ic{rank}" \
        "$TMP/src" "$TMP/m{rank}" >"$TMP/agree.log" 2>&1
    local rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "missing mountpoint on rank 1: mpirun exited $rc"
    grep -q "rank 1\].*mountpoint" "$TMP/agree.log" || fail "rank 1 did not name its mountpoint"
    grep -q "rank 0\].*1: that node could not start" "$TMP/agree.log" ||
        { fail "rank 0 did not name rank 1"; cat "$TMP/agree.log"; }
    cfs_is_mounted "$TMP/m0" && fail "m0 mounted although rank 1 failed"
    echo "ok: a node that cannot start stops every node: $(grep -m1 'could not start' "$TMP/agree.log")"
}

# voluntary PID: one line per thread of PID, "TID NAME N": N the times it
# went to sleep so far (voluntary context switches; involuntary ones are the
# scheduler's doing, not the thread's).
voluntary() {
    local t
    for t in /proc/"$1"/task/*; do
        awk -v tid="${t##*/}" -v name="$(cat "$t/comm" 2>/dev/null)" \
            '$1 == "voluntary_ctxt_switches:" { print tid, name, $2 }' "$t/status" 2>/dev/null
    done
}

# An unread node sleeps: its peer thread, idle past DEEP_IDLE_AFTER_NS
# (0.2 s), sleeps IDLE_DEEP_MAX_NS (5 ms) at a time, and never spins (it
# sleeps at all); the prefetcher, with nothing to fetch, 1 s at a time; no
# other thread wakes by itself.  Counted per thread over a span: at most one
# wake-up per sleep, plus a few at the span's ends.
scenario_idle() {
    local transport r pid t0 ms
    for transport in "$VADER" "$TCP"; do
        start 2 "$transport" "seed=7,world=2,epochs=$EPOCHS,ram=1M,index=$TMP/idx{rank}" ||
            { fail "$transport: start"; continue; }
        sleep 1 # past start-up and DEEP_IDLE_AFTER_NS
        local pids=()
        t0=$(date +%s%N)
        for r in 0 1; do
            pid=$(rank_pid $r) || { fail "$transport: no PID for rank $r"; continue 2; }
            pids+=("$pid")
            voluntary "$pid" | sort >"$TMP/sleeps.$r.0"
        done
        sleep 3
        for r in 0 1; do
            voluntary "${pids[$r]}" | sort >"$TMP/sleeps.$r.1"
            ms=$((($(date +%s%N) - t0) / 1000000))
            join "$TMP/sleeps.$r.0" "$TMP/sleeps.$r.1" | awk -v ms="$ms" -v what="idle ($transport) rank $r" '
                { n = $5 - $3; peer += $2 == "cfs-peer"; print "   " what " " $2 ": slept " n " times in " ms " ms" }
                $2 == "cfs-peer" && !(n >= 1 && n <= ms / 5 + 25) { print "FAIL: " what ": cfs-peer slept " n " times in " ms " ms (one 5 ms sleep at a time: 1 to " int(ms / 5 + 25) ")"; bad = 1 }
                $2 == "cfs-prefetch" && n > ms / 1000 + 5 { print "FAIL: " what ": cfs-prefetch woke " n " times in " ms " ms"; bad = 1 }
                $2 != "cfs-peer" && $2 != "cfs-prefetch" && n > 5 { print "FAIL: " what ": thread " $1 " " $2 " woke " n " times in " ms " ms"; bad = 1 }
                END { if (peer != 1) { print "FAIL: " what ": " peer " cfs-peer threads"; bad = 1 }; exit bad }' ||
                fail "idle ($transport) rank $r: a thread woke more often than its sleeps allow"
        done
        check "idle ($transport): every node unmounts and mpirun exits 0" stop 2
        rm -rf "$TMP"/idx*
    done
}

# The epochs over FUSE's io_uring, where the kernel offers it.
scenario_epochs_ring() {
    local knob=/sys/module/fuse/parameters/enable_uring
    if [ "$(cat "$knob" 2>/dev/null)" != Y ]; then
        echo "SKIP: the kernel offers no FUSE over io_uring ($knob is not Y; as root: echo Y > $knob)"
        exit 77
    fi
    CLAIRFS_MPI_OPTS="fuse_io=uring${CLAIRFS_MPI_OPTS:+,$CLAIRFS_MPI_OPTS}" RING_CHECK=1 scenario_epochs
}

case $SCENARIO in
idle) scenario_idle ;;
windows) scenario_windows ;;
placement) scenario_placement ;;
measured) scenario_measured ;;
files) scenario_files ;;
epochs) scenario_epochs ;;
epochs_ring) scenario_epochs_ring ;;
stop) scenario_stop ;;
agree) scenario_agree ;;
*) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
cfs_finish
