#!/bin/sh
# The peer module under mpirun (suite 'mpi'): test_peer_mpi.sh TEST_PEER SCENARIO
# Scenarios: local, basic, agree, stop, stagger, bench (the benchmark).
# Each runs over shared memory (btl self,vader) and TCP (btl self,tcp) where
# it matters.  Exit 77 when mpirun is missing.
set -u
EXE=$1
SCENARIO=$2
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI 4.1: the ob1 PML with explicit BTLs; loopback only, so that TCP
# does not probe every interface.
COMMON="--oversubscribe --mca pml ob1 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
TMP=$(mktemp -d)
MPIPID=
cleanup() {
    if [ -n "$MPIPID" ]; then
        kill -CONT "$(cat "$TMP/victim.pid" 2>/dev/null)" 2>/dev/null
        kill "$MPIPID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
fail=0

# run NP BTL ARGS...: output in $TMP/out, status in $rc.  A hard limit keeps
# a hang from stalling the suite (a hang is a failure).
run() {
    np=$1; btl=$2; shift 2
    timeout -k 5 60 mpirun -np "$np" $COMMON --mca btl "$btl" "$EXE" "$@" >"$TMP/out" 2>&1
    rc=$?
}

expect_ok() {
    if [ "$rc" -ne 0 ]; then
        echo "FAIL ($1): exit $rc"; cat "$TMP/out"; fail=1
    else
        echo "ok   ($1)"; grep -v '^$' "$TMP/out" | sed 's/^/     /'
    fi
}

case $SCENARIO in
local)
    # Single node: no mpirun, no MPI_Init.
    env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK "$EXE" local || fail=1
    ;;
basic)
    for btl in self,vader self,tcp; do
        for np in 2 4; do
            run $np $btl basic 300
            expect_ok "basic -np $np $btl"
            n=$(grep -c "fetched and verified" "$TMP/out")
            [ "$n" -eq "$np" ] || { echo "FAIL: $n of $np ranks reported"; fail=1; }
        done
    done
    ;;
agree)
    run 4 self,vader agree seed 1
    [ "$rc" -ne 0 ] || { echo "FAIL: seed mismatch exited 0"; fail=1; }
    n=$(grep -cF "seed differs: ranks 0,2,3 have 42, rank 1 has 43" "$TMP/out")
    [ "$n" -eq 4 ] || { echo "FAIL: $n of 4 ranks named the seed"; cat "$TMP/out"; fail=1; }
    echo "ok   (seed mismatch: exit $rc, message on all 4 ranks)"
    run 2 self,tcp agree dataset 0
    [ "$rc" -ne 0 ] || { echo "FAIL: dataset mismatch exited 0"; fail=1; }
    n=$(grep -cF "dataset differs (catalog hash 1234abcd5678efff on rank 0, 1234abcd5678ef00 on rank 1)" "$TMP/out")
    [ "$n" -eq 2 ] || { echo "FAIL: $n of 2 ranks named the dataset"; cat "$TMP/out"; fail=1; }
    echo "ok   (dataset mismatch: exit $rc, message on both ranks)"
    run 3 self,vader agree none 0
    expect_ok "agreement"
    ;;
stop)
    for btl in self,vader self,tcp; do
        rm -f "$TMP"/victim.pid "$TMP"/ready "$TMP"/stopped "$TMP"/timedout.* "$TMP"/continued
        timeout -k 5 60 mpirun -np 3 $COMMON --mca btl $btl "$EXE" stop "$TMP" >"$TMP/out" 2>&1 &
        MPIPID=$!
        ok=1
        for i in $(seq 300); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
        victim=$(cat "$TMP/victim.pid" 2>/dev/null)
        if [ -e "$TMP/ready" ] && [ -n "$victim" ]; then
            kill -STOP "$victim"
            touch "$TMP/stopped"
            for i in $(seq 300); do
                [ -e "$TMP/timedout.0" ] && [ -e "$TMP/timedout.2" ] && break; sleep 0.05
            done
            kill -CONT "$victim"
            touch "$TMP/continued"
        else
            ok=0
        fi
        wait $MPIPID; rc=$?; MPIPID=
        [ $ok -eq 1 ] || { echo "FAIL: the run never got ready"; rc=1; }
        expect_ok "stop -np 3 $btl"
    done
    ;;
stagger)
    for btl in self,vader self,tcp; do
        start=$(date +%s.%N)
        run 4 $btl stagger 200
        expect_ok "stagger -np 4 $btl ($(echo "$(date +%s.%N) - $start" | bc) s)"
    done
    ;;
bench)
    for btl in self,vader self,tcp; do
        run 2 $btl bench 1000 "btl $btl"
        cat "$TMP/out"
        [ "$rc" -eq 0 ] || fail=1
    done
    ;;
*)
    echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
exit $fail
