#!/usr/bin/env bash
# A soak with faults: trainer-like readers read a clairfs mount epoch after
# epoch while faults are injected at random, and every byte read is compared
# with a pristine copy of the source.  A benchmark, not a CI test: it runs
# for minutes and its figures are the result.
#
# Each round mounts clairfs if it is not mounted (always with -o reclaim and
# the same ssd_dir and index, so a dead mount left by a killed daemon is
# taken over and the SSD tier is reused), reads one epoch with two trainer
# ranks (each a process of worker threads reading the files its sampler
# names, in order, as a DataLoader does), and injects at most one fault:
#   kill9         the daemon is killed with SIGKILL while the readers read
#   ssd_damage    bytes flipped in SSD entries between mounts
#   index_damage  4 KiB of random bytes at a random offset of data.mdb
#                 between mounts (a mount that then fails is counted, and a
#                 second failure resets the index, as an operator would)
#   ssd_full      the SSD tier's filesystem (a small tmpfs) filled up
#   source_vanish a class directory of the source moved away during the
#                 reads and moved back
#   remount       a clean unmount and mount (also when the planned epochs
#                 are used up)
# Read errors while a fault is live (ENOTCONN from the killed daemon, ENOENT
# for a vanished file) are expected and counted; wrong bytes and hung reads
# (an open or read over --hang seconds: the reader is killed) are failures.
#
# usage: tools/soak.sh [--minutes M] [--hang SEC] [--seed N] [--no-pfs] [--keep]
#   --minutes M  how long to inject faults (default 5)
#   --hang SEC   an open or read slower than this is a hung read (default 30)
#   --seed N     the fault schedule's seed (default: from the clock)
#   --no-pfs     mount the source directly, not through clairfs-pfsemu
#   --keep       keep the work directory (logs) at the end
# Environment: CLAIRFS_BUILD (build directory, default build), SOAK_TMP
# (where the work directory goes, default /tmp).  Needs root for the tmpfs
# of ssd_full (without it that fault is skipped).
# Exit status: 0 when no byte was wrong and no read hung, 1 otherwise, 2 for
# a usage or setup error.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-build}
case $build in /*) ;; *) build=$top/$build ;; esac
CLAIRFS=$build/clairfs PLAN=$build/clairfs-plan PFSEMU=$build/clairfs-pfsemu
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi

minutes=5 hang=30 seed=$(date +%s) use_pfs=1 keep=0
while [ $# -gt 0 ]; do
    case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --hang) hang=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --no-pfs) use_pfs=0; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for exe in "$CLAIRFS" "$PLAN" "$PFSEMU"; do
    [ -x "$exe" ] || { echo "soak: $exe missing (meson compile -C $build)" >&2; exit 2; }
done
command -v fusermount3 >/dev/null && [ -c /dev/fuse ] ||
    { echo "soak: needs /dev/fuse and fusermount3" >&2; exit 2; }
RANDOM=$seed

# The trainer: two ranks of a DDP job, batches of 8; the planned epochs
# (EPOCHS) are read in a cycle, each cycle one job (a clean remount).
EPOCHS=30 WORLD=2 BATCH=8 WORKERS=3
TRAINER="seed=7,world=$WORLD,batch=$BATCH"

# --- the work directory, and everything it holds undone at exit.
work=$(mktemp -d "${SOAK_TMP:-/tmp}/clairfs-soak.XXXXXX") || exit 2
src=$work/src ref=$work/ref pfs=$work/pfs mnt=$work/mnt tier=$work/tier
ssd=$tier/ssd index=$work/index away=$work/away log=$work/daemon.log
mkdir -p "$mnt" "$pfs" "$tier" "$away"
cfs_pid= pfs_pid= tier_tmpfs=0

is_mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
# detach MNT: every mount on it, live or dead, lazily.
detach() { while is_mounted "$1"; do fusermount3 -u -z "$1" 2>/dev/null || umount -l "$1" || break; done; }
cleanup() {
    [ -n "$cfs_pid" ] && kill -TERM "$cfs_pid" 2>/dev/null
    detach "$mnt"
    [ -n "$cfs_pid" ] && { sleep 0.5; kill -KILL "$cfs_pid" 2>/dev/null; wait "$cfs_pid" 2>/dev/null; }
    detach "$pfs"
    [ -n "$pfs_pid" ] && { kill -KILL "$pfs_pid" 2>/dev/null; wait "$pfs_pid" 2>/dev/null; }
    # a class directory moved away and not yet back
    for d in "$away"/*; do [ -e "$d" ] && mv "$d" "$src/"; done
    [ "$tier_tmpfs" = 1 ] && umount -l "$tier"
    if [ "$keep" = 1 ]; then echo "soak: work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the dataset, its pristine copy, and the trainer's orders.
"$PYTHON" "$top/tools/clairfs-gendata" --quiet --classes 16 --files 50 \
    --size lognormal:20K:0.5 --seed 5 "$src" || exit 2
cp -a "$src" "$ref"
for ((e = 0; e < EPOCHS; e++)); do
    for ((r = 0; r < WORLD; r++)); do
        "$PLAN" -o "$TRAINER,epochs=$EPOCHS" --no-sim --print-order "$r" "$e" "$ref" \
            >"$work/order.$r.$e" || exit 2
    done
done
# The SSD tier on a 32 MiB tmpfs, so that it can be filled; ssd=24M.
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=32M,mode=0700 clairfs-soak "$tier" 2>/dev/null; then
    tier_tmpfs=1
fi
mkdir -p "$ssd"
if [ "$use_pfs" = 1 ]; then
    "$PFSEMU" -f -o latency_open=1ms,latency_read=200us,bandwidth=200M "$src" "$pfs" \
        >"$work/pfsemu.log" 2>&1 &
    pfs_pid=$!
    for _ in $(seq 100); do is_mounted "$pfs" && break; sleep 0.1; done
    is_mounted "$pfs" || { echo "soak: clairfs-pfsemu did not mount" >&2; exit 2; }
    source_dir=$pfs
else
    source_dir=$src
fi

# --- the reader: one trainer rank, WORKERS threads, every byte compared.
cat >"$work/reader.py" <<'EOF'
import os, sys, threading, time
mnt, ref, order, workers, hang = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
paths = [p for p in open(order, "rb").read().split(b"\n") if p]
lock = threading.Lock()
st = {"files": 0, "bytes": 0, "errors": 0, "wrong_files": 0, "wrong_bytes": 0}
busy = {}  # worker -> (start of the current open/read, path)
nxt = [0]

def note(k, v=1):
    with lock:
        st[k] += v

def work(w):
    while True:
        with lock:
            i = nxt[0]; nxt[0] += 1
        if i >= len(paths):
            return
        p = paths[i]
        want = open(os.path.join(ref.encode(), p), "rb").read()
        got = []
        try:
            busy[w] = (time.monotonic(), p)
            fd = os.open(os.path.join(mnt.encode(), p), os.O_RDONLY)
            try:
                while True:
                    busy[w] = (time.monotonic(), p)
                    b = os.read(fd, 65536)
                    if not b:
                        break
                    got.append(b)
            finally:
                busy.pop(w, None)
                os.close(fd)
        except OSError as e:
            busy.pop(w, None)
            note("errors")
            sys.stderr.write("read error: %s: %s\n" % (p.decode(errors="replace"), os.strerror(e.errno)))
            continue
        data = b"".join(got)
        if data == want:
            note("files"); note("bytes", len(data))
        else:
            n = min(len(data), len(want))
            bad = sum(1 for a, b in zip(data[:n], want[:n]) if a != b) + abs(len(data) - len(want))
            note("wrong_files"); note("wrong_bytes", bad)
            note("bytes", n - (bad - abs(len(data) - len(want))))
            sys.stderr.write("WRONG: %s: %d of %d bytes differ\n" % (p.decode(errors="replace"), bad, len(want)))

def report(hung):
    print("files %d bytes %d errors %d wrong_files %d wrong_bytes %d hung %d" % (
        st["files"], st["bytes"], st["errors"], st["wrong_files"], st["wrong_bytes"], hung), flush=True)

ts = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(workers)]
for t in ts:
    t.start()
while any(t.is_alive() for t in ts):
    time.sleep(0.2)
    now = time.monotonic()
    for w, (t0, p) in list(busy.items()):
        if now - t0 > hang:
            sys.stderr.write("HUNG: %s: no answer in %.0f s\n" % (p.decode(errors="replace"), now - t0))
            with lock:
                report(1)
            os._exit(3)  # the blocked thread goes with the process
report(0)
EOF

# --- counters.
declare -A faults=([kill9]=0 [ssd_damage]=0 [index_damage]=0 [ssd_full]=0 [source_vanish]=0 [remount]=0)
mounts=0 jobs=0 mount_failures=0 start_crashes=0 index_resets=0 crashes=0 rounds=0
files=0 bytes=0 read_errors=0 wrong_files=0 wrong_bytes=0 hung=0
epoch=0 filled=0

# mount_clairfs: starts the daemon at epoch $epoch; returns non-zero if no
# mount came within 60 s (the daemon is then killed).
mount_clairfs() {
    echo "=== mount at epoch $epoch ($(date +%T))" >>"$log"
    "$CLAIRFS" -f -o "$TRAINER,epochs=$EPOCHS,start_epoch=$epoch,ram=2M,ssd=24M,ssd_dir=$ssd,index=$index,reclaim" \
        "$source_dir" "$mnt" >>"$log" 2>&1 &
    cfs_pid=$!
    for _ in $(seq 600); do
        [ -e "$mnt/.clairfs/ready" ] && is_mounted "$mnt" && return 0
        kill -0 "$cfs_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$cfs_pid" 2>/dev/null
    wait "$cfs_pid" 2>/dev/null
    # Killed by a signal of its own (SIGSEGV, SIGABRT), not by the wait's
    # SIGKILL above.
    local rc=$?
    [ "$rc" -gt 128 ] && [ "$rc" -ne 137 ] && start_crashes=$((start_crashes + 1))
    cfs_pid=
    return 1
}

# ensure_mounted: a mount, retried; a second failure resets the index.
ensure_mounted() {
    [ -n "$cfs_pid" ] && kill -0 "$cfs_pid" 2>/dev/null && return 0
    if [ -n "$cfs_pid" ]; then # died on its own: a crash
        wait "$cfs_pid" 2>/dev/null
        crashes=$((crashes + 1))
        echo "soak: the daemon died on its own (see $log)" >&2
        cfs_pid=
    fi
    local try
    for try in 1 2 3; do
        if mount_clairfs; then
            mounts=$((mounts + 1))
            return 0
        fi
        mount_failures=$((mount_failures + 1))
        echo "soak: mount failed (try $try, epoch $epoch): $(tail -n 1 "$log")" >&2
        if [ "$try" = 2 ]; then
            rm -rf "$index"
            index_resets=$((index_resets + 1))
        fi
    done
    return 1
}

# unmount_clairfs: a clean stop (SIGKILL after 20 s).
unmount_clairfs() {
    [ -n "$cfs_pid" ] || return 0
    fusermount3 -u "$mnt" 2>/dev/null || kill -TERM "$cfs_pid" 2>/dev/null
    for _ in $(seq 200); do kill -0 "$cfs_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$cfs_pid" 2>/dev/null
    wait "$cfs_pid" 2>/dev/null
    cfs_pid=
}

flip_ssd_entries() {
    local f size off
    mapfile -t ents < <(find "$ssd" -path "$ssd/index" -prune -o -type f -size +0 -print 2>/dev/null |
        shuf -n 3 --random-source=<(yes "$RANDOM"))
    for f in "${ents[@]}"; do
        size=$(stat -c %s "$f")
        off=$(( (RANDOM * 32768 + RANDOM) % size ))
        "$PYTHON" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))' "$f" "$off"
    done
}

damage_index() {
    local db=$index/data.mdb size off
    [ -f "$db" ] || return 1
    size=$(stat -c %s "$db")
    [ "$size" -gt 4096 ] || return 1
    off=$(( (RANDOM * 32768 + RANDOM) % (size - 4096) ))
    dd if=/dev/urandom of="$db" bs=1 count=4096 seek="$off" conv=notrunc status=none
}

# read_epoch: both ranks read epoch $epoch; FAULT_DURING runs alongside.
read_epoch() {
    local e=$epoch r pids=() out
    for ((r = 0; r < WORLD; r++)); do
        # The outer timeout is the backstop for a reader that cannot even
        # be killed by its own watchdog.
        timeout -s KILL $((hang * 20)) "$PYTHON" "$work/reader.py" "$mnt" "$ref" \
            "$work/order.$r.$e" "$WORKERS" "$hang" >"$work/reader.$r.out" 2>>"$work/reader.err" &
        pids+=($!)
    done
    [ -n "${1:-}" ] && "$1"
    for ((r = 0; r < WORLD; r++)); do
        wait "${pids[$r]}"
        local rc=$?
        out=$(tail -n 1 "$work/reader.$r.out")
        if [ "$rc" -eq 137 ] || [ -z "$out" ]; then
            hung=$((hung + 1))
            echo "soak: reader $r of epoch $epoch killed by the outer timeout" >&2
            continue
        fi
        set -- $out
        files=$((files + $2)) bytes=$((bytes + $4)) read_errors=$((read_errors + $6))
        wrong_files=$((wrong_files + $8)) wrong_bytes=$((wrong_bytes + ${10})) hung=$((hung + ${12}))
    done
}

during_kill9() {
    sleep "0.$((RANDOM % 9 + 1))"
    kill -KILL "$cfs_pid" 2>/dev/null
    wait "$cfs_pid" 2>/dev/null
    cfs_pid=
}

during_vanish() {
    local c
    c=$(printf 'n%04d' $((RANDOM % 16)))
    sleep "0.$((RANDOM % 5))"
    mv "$src/$c" "$away/$c" && sleep "0.$((RANDOM % 9 + 1))" && mv "$away/$c" "$src/$c"
}

summary() {
    local total=0 k
    for k in "${!faults[@]}"; do total=$((total + faults[$k])); done
    printf '\n== soak: %s min asked, %s s run, seed %s, %s rounds, %s epochs read per rank\n' \
        "$minutes" "$((SECONDS - soak_start))" "$seed" "$rounds" "$rounds"
    printf '%-28s %s\n' "faults injected" "$total" \
        "  kill -9 + remount" "${faults[kill9]}" \
        "  SSD entries damaged" "${faults[ssd_damage]}" \
        "  index pages damaged" "${faults[index_damage]}" \
        "  SSD directory full" "${faults[ssd_full]}" \
        "  source files vanished" "${faults[source_vanish]}" \
        "  clean remounts" "${faults[remount]}" \
        "remounts" "$((mounts - 1))" \
        "  of which new jobs" "$jobs" \
        "mount failures" "$mount_failures" \
        "  of which crashes (signal)" "$start_crashes" \
        "index resets (after two)" "$index_resets" \
        "daemon crashes (serving)" "$crashes" \
        "rebuilds (log: rebuil)" "$(grep -ci rebuil "$log")" \
        "files verified" "$files" \
        "bytes verified" "$bytes" \
        "read errors (under faults)" "$read_errors" \
        "wrong files" "$wrong_files" \
        "wrong bytes (goal 0)" "$wrong_bytes" \
        "hung reads (goal 0)" "$hung"
}

# --- the soak.
soak_start=$SECONDS
deadline=$((SECONDS + minutes * 60))
ensure_mounted || { echo "soak: the first mount failed:" >&2; tail -n 5 "$log" >&2; exit 2; }
while [ "$SECONDS" -lt "$deadline" ]; do
    rounds=$((rounds + 1))
    if [ "$filled" = 1 ]; then # the SSD tier had one round full
        rm -f "$tier/filler"
        filled=0
    fi
    during=
    case $((RANDOM % 8)) in
    0 | 1) faults[kill9]=$((faults[kill9] + 1)); during=during_kill9 ;;
    2) faults[source_vanish]=$((faults[source_vanish] + 1)); during=during_vanish ;;
    3)
        unmount_clairfs
        flip_ssd_entries
        faults[ssd_damage]=$((faults[ssd_damage] + 1))
        ;;
    4)
        unmount_clairfs
        damage_index && faults[index_damage]=$((faults[index_damage] + 1))
        ;;
    5)
        if [ "$tier_tmpfs" = 1 ]; then
            unmount_clairfs
            dd if=/dev/zero of="$tier/filler" bs=64K status=none 2>/dev/null
            filled=1
            faults[ssd_full]=$((faults[ssd_full] + 1))
        fi
        ;;
    6) unmount_clairfs; faults[remount]=$((faults[remount] + 1)) ;;
    *) ;;
    esac
    ensure_mounted || { echo "soak: no mount after three tries; giving up" >&2; gave_up=1; break; }
    read_epoch "$during"
    epoch=$((epoch + 1))
    if [ "$epoch" -eq "$EPOCHS" ]; then
        unmount_clairfs # the planned epochs are used up: the next job
        epoch=0 jobs=$((jobs + 1))
    fi
    printf '\rsoak: round %d, %d MiB verified, %d wrong bytes, %d hung, %d mount failures ' \
        "$rounds" $((bytes >> 20)) "$wrong_bytes" "$hung" "$mount_failures" >&2
done
echo >&2
unmount_clairfs
summary
# A soak that stopped early (three mounts in a row failed) did not soak.
[ "${gave_up:-0}" -eq 0 ] && [ "$wrong_bytes" -eq 0 ] && [ "$hung" -eq 0 ]
