#!/usr/bin/env bash
# examples/slurm-clairfs.sh as a real Slurm job: a local cluster (munged,
# slurmctld, and one slurmd per node name, two node names on this host) is
# started here, the job script is submitted with sbatch unchanged, and:
#   - clairfs is mounted on both nodes (one MPI job, mpirun inside the
#     allocation) before the trainer starts, the trainer (examples/
#     train_ddp.py, 2 ranks, one per node, srun) reads exactly the files,
#     order and bytes it reads from the source;
#   - every mount is unmounted and every daemon gone when the job ends, also
#     when the trainer fails (the job's exit status is the trainer's) and
#     when the job is cancelled while it trains.
# Slurm's daemons are stopped by PID at exit.  SKIP (77) only where Slurm or
# munge is not installed or does not start.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh), CLAIRFS_TRAINER.
# Slurm's daemons listen on every interface: run the whole test in a network
# namespace of its own, with loopback and a private veth pair only, so
# nothing it starts is reachable from outside this machine.
if [ -z "${CLAIRFS_SLURM_NETNS:-}" ] && command -v unshare >/dev/null &&
    unshare --net true 2>/dev/null; then
    # A veth pair inside it, one end with a private address:
    # getaddrinfo(AI_ADDRCONFIG), which Slurm binds with, finds nothing on
    # loopback alone.
    exec env CLAIRFS_SLURM_NETNS=1 unshare --net bash -c 'ip link set lo up &&
        ip link add cfs0 type veth peer name cfs1 && ip addr add 10.254.0.1/24 dev cfs0 &&
        ip link set cfs0 up && ip link set cfs1 up && exec "$@"' _ "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_TRAINER:?CLAIRFS_TRAINER must name examples/train_ddp.py}"
[ -n "${CLAIRFS_SLURM_NETNS:-}" ] || echo "note: no network namespace here: Slurm's ports are open on every interface"
JOB_SCRIPT=$(cd "$(dirname "$CLAIRFS_TRAINER")" && pwd)/slurm-clairfs.sh

for p in munged slurmctld slurmd sbatch srun mpirun; do
    command -v "$p" >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
cfs_need_torch
cfs_setup

# A free TCP port base (4 consecutive ports) for slurmctld and the slurmds.
port_free() { ! ss -Htan "sport = :$1" | grep -q .; }
base=
for _ in $(seq 50); do
    b=$((20000 + RANDOM % 20000))
    port_free "$b" && port_free $((b + 1)) && port_free $((b + 2)) && port_free $((b + 3)) &&
        { base=$b; break; }
done
[ -n "$base" ] || { fail "no free ports"; cfs_finish; }

S=$TMP/slurm
mkdir -p "$S/state" "$S/munge"
chmod 700 "$S/munge"
head -c 1024 /dev/urandom >"$S/munge/key"
chmod 400 "$S/munge/key"
cat >"$S/slurm.conf" <<EOF
ClusterName=clairfs-test
SlurmctldHost=localhost
SlurmctldPort=$base
AuthType=auth/munge
AuthInfo=socket=$S/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=cfs1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 1)) CPUs=2 RealMemory=1000
NodeName=cfs2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 2)) CPUs=2 RealMemory=1000
PartitionName=test Nodes=cfs1,cfs2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$S/slurm.conf

# daemon PIDFILE CMD...: start a forking daemon, remember its PID for the trap.
daemon() {
    local pidfile=$1
    shift
    "$@" >>"$S/daemons.out" 2>&1 || return 1
    for _ in $(seq 100); do [ -s "$pidfile" ] && break; sleep 0.05; done
    [ -s "$pidfile" ] || return 1
    cfs_pids+=("$(cat "$pidfile")")
}
skip_slurm() {
    echo "SKIP: $1 does not start here:"
    tail -n 5 "$S"/*.log "$S/daemons.out" 2>/dev/null
    exit 77
}
daemon "$S/munge/pid" munged --key-file="$S/munge/key" --socket="$S/munge/socket" \
    --pid-file="$S/munge/pid" --log-file="$S/munge/log" --seed-file="$S/munge/seed" -f ||
    skip_slurm munged
daemon "$S/slurmctld.pid" slurmctld -i || skip_slurm slurmctld
daemon "$S/slurmd-cfs1.pid" slurmd -N cfs1 || skip_slurm "slurmd -N cfs1"
daemon "$S/slurmd-cfs2.pid" slurmd -N cfs2 || skip_slurm "slurmd -N cfs2"
for _ in $(seq 100); do
    [ "$(sinfo -h -o '%T' -p test 2>/dev/null | sort -u)" = idle ] && break
    sleep 0.1
done
[ "$(sinfo -h -o '%T' -p test 2>/dev/null | sort -u)" = idle ] || skip_slurm "the 2-node cluster"
echo "slurm: 2 nodes idle (ports $base-$((base + 2)))"

src=$TMP/src
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 6 --files 21 --size lognormal:8K:0.5 \
    --max-size 32K --seed 9 "$src" || { fail "gendata"; cfs_finish; }
SEED=7 EPOCHS=2 BATCH=8 WORKERS=2
check "trainer on the source" timeout 120 "$TORCH_PY" "$CLAIRFS_TRAINER" --data "$src" \
    --epochs $EPOCHS --seed $SEED --batch $BATCH --workers $WORKERS --world 2 --log "$TMP/source.log"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp \
    OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# submit NAME [VAR=VALUE...]: sbatch the job script as it is (the GPU and
# CPU counts of its header overridden to fit this host), wait for its end
# (at most 300 s); 0 when the job completed, 1 when it failed or was
# cancelled.  The job's state is polled every 0.2 s: sbatch --wait polls at
# intervals growing to 10 s, and spent more than a minute of this test
# after jobs that had ended.
submit() {
    local name=$1 id state=
    shift
    id=$(env "$@" DATA="$src" MNT="$TMP/mnt-$name-{rank}" SSD="$TMP/ssd-$name" CLAIRFS="$CLAIRFS" \
        GPUS_PER_NODE=1 SEED=$SEED EPOCHS=$EPOCHS BATCH=$BATCH WORKERS=$WORKERS RAM=64M \
        TRAINER_LAUNCH=srun CLAIRFS_LAUNCH=mpirun MASTER_PORT=$((base + 3)) \
        sbatch --parsable --nodes=2 --cpus-per-task=1 --gpus-per-node=0 \
        --job-name="clairfs-$name" -o "$TMP/job-$name.out" "$JOB_SCRIPT") || return 1
    id=${id%%;*}
    [ -n "$id" ] || return 1
    for _ in $(seq 1500); do
        # COMPLETING: ended, its processes not all gone yet.
        state=$(scontrol -o show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*')
        case ${state#JobState=} in
        "" | PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED | REQUEUED*) sleep 0.2 ;;
        *) break ;;
        esac
    done
    echo "job $name ($id): ${state:-no state}"
    [ "$state" = JobState=COMPLETED ]
}
no_mounts_left() {
    ! grep -q "$TMP/mnt-$1" /proc/self/mountinfo &&
        ! pgrep -f -- "$TMP/mnt-$1" >/dev/null
}

submit ok TRAINER="$CLAIRFS_TRAINER" PYTHON="$TORCH_PY" TRAINER_ARGS="--log $TMP/job.log"
status=$?
echo "--- job output"; cat "$TMP/job-ok.out"; echo "---"
check "the job succeeded" test "$status" -eq 0
check "clairfs was ready on both nodes before training" grep -q "clairfs ready on 2 nodes" "$TMP/job-ok.out"
check "the trainer read what it reads from the source (files, order, bytes)" \
    cmp "$TMP/source.log" "$TMP/job.log"
check "both nodes served reads" test "$(grep -c 'clairfs_reads_total' "$TMP/job-ok.out")" -eq 2
check "every mount unmounted, every daemon gone" no_mounts_left ok

# A trainer that reads a file through the mount and fails.
cat >"$TMP/failing-trainer.sh" <<'EOF'
data=
while [ $# -gt 0 ]; do [ "$1" = --data ] && data=$2; shift; done
head -c 100 "$(find "$data" -type f | head -n 1)" >/dev/null || exit 9
exit 3
EOF
submit fail TRAINER="$TMP/failing-trainer.sh" PYTHON=/bin/bash
status=$?
echo "--- job output"; cat "$TMP/job-fail.out"; echo "---"
check "a failing trainer fails the job" test "$status" -ne 0
check "the trainer ran against a ready mount" grep -q "trainer exit status 3" "$TMP/job-fail.out"
check "every mount unmounted after the failure, every daemon gone" no_mounts_left fail

# A job cancelled while it trains (scancel: SIGTERM to the batch script).
printf 'touch "%s"\nexec sleep 120\n' "$TMP/training" >"$TMP/slow-trainer.sh"
submit cancel TRAINER="$TMP/slow-trainer.sh" PYTHON=/bin/bash &
job_pid=$!
for _ in $(seq 600); do [ -e "$TMP/training" ] && break; sleep 0.1; done
check "the cancelled job was training" test -e "$TMP/training"
scancel --name=clairfs-cancel
wait "$job_pid"
echo "--- job output"; cat "$TMP/job-cancel.out"; echo "---"
check "every mount unmounted after scancel, every daemon gone" no_mounts_left cancel
cfs_finish
