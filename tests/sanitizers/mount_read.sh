#!/usr/bin/env bash
# One mount-read-unmount cycle for tests/sanitizers/run.sh: a daemon run
# under a sanitizer build or under a wrapper (valgrind), THREADS reader
# threads that read every file twice in their own order and compare every
# byte with the source, then fusermount3 -u.  Exits with the daemon's exit
# status (the wrapper's --error-exitcode included), 1 for wrong bytes or a
# mount that never came.
#
# Usage: mount_read.sh CLAIRFS GENDATA THREADS [WRAPPER ARGS...]
# MOUNT_OPTS (environment): more -o options for the daemon.
set -u
clairfs=$1 gendata=$2 threads=$3
shift 3
wrapper=("$@")
py=/usr/bin/python3
[ -x "$py" ] || py=python3

tmp=$(mktemp -d /tmp/clairfs-san.XXXXXX)
pid=
dev= # minor device number of the FUSE connection, once mounted
cleanup() {
    if awk -v m="$tmp/mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; then
        fusermount3 -u "$tmp/mnt" 2>/dev/null || fusermount3 -u -z "$tmp/mnt" 2>/dev/null
    fi
    # A daemon that hangs leaves a connection nobody answers: abort it so
    # that nothing touching the mount point blocks.
    local conn
    for conn in /sys/fs/fuse/connections/*; do
        [ -n "$dev" ] && [ "${conn##*/}" = "$dev" ] && echo 1 >"$conn/abort" 2>/dev/null
    done
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        sleep 2
        kill -KILL "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$py" "$gendata" --quiet --classes 4 --files 25 --size uniform:1K-96K --seed 11 "$tmp/src" || exit 1
mkdir "$tmp/mnt"
env --default-signal=INT "${wrapper[@]}" "$clairfs" -f \
    -o order=sorted,index="$tmp/index"${MOUNT_OPTS:+,$MOUNT_OPTS} \
    "$tmp/src" "$tmp/mnt" >"$tmp/daemon.log" 2>&1 &
pid=$!
ready=0
for _ in $(seq 1200); do # 120 s: valgrind starts slowly
    # Probe the mount from a killable child: a daemon that never answers
    # would block a plain [ -e ] forever.
    if [ -z "$dev" ]; then
        dev=$(awk -v m="$tmp/mnt" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo)
    fi
    if [ -n "$dev" ] && (timeout -s KILL 5 test -e "$tmp/mnt/.clairfs/ready") 2>/dev/null; then
        ready=1
        break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ $ready -ne 1 ]; then
    echo "mount_read: the mount never came; daemon log:" >&2
    cat "$tmp/daemon.log" >&2
    exit 1
fi

"$py" - "$tmp/src" "$tmp/mnt" "$threads" <<'PY'
import os, random, sys, threading
src, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(os.path.relpath(os.path.join(r, f), src)
               for r, _, fs in os.walk(src) for f in fs)
want = {}
for f in files:
    with open(os.path.join(src, f), "rb") as h:
        want[f] = h.read()
bad = []
def reader(k):
    order = files[:]
    random.Random(k).shuffle(order)
    for f in order + order:
        with open(os.path.join(mnt, f), "rb") as h:
            got = h.read()
        if got != want[f]:
            bad.append(f)
ts = [threading.Thread(target=reader, args=(k,)) for k in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(f"mount_read: {n} threads read {len(files)} files twice each, {len(bad)} wrong")
sys.exit(1 if bad else 0)
PY
read_rc=$?

fusermount3 -u "$tmp/mnt" || { echo "mount_read: fusermount3 -u failed" >&2; exit 1; }
wait "$pid"
rc=$?
pid=
if [ $rc -ne 0 ] || [ $read_rc -ne 0 ]; then
    echo "mount_read: daemon exit status $rc, readers $read_rc; daemon log:" >&2
    cat "$tmp/daemon.log" >&2
    [ $rc -ne 0 ] && exit $rc
    exit 1
fi
grep -E 'definitely lost|ERROR SUMMARY' "$tmp/daemon.log" || true
exit 0
