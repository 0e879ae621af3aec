#!/usr/bin/env bash
# An ordinary user's mount, as on a cluster node: a user created for the
# test (removed after), /dev/fuse given the mode distributions ship (0666,
# its own mode restored after), and as that user, through fusermount3:
#   - `clairfs SRC MNT` with nothing registered: the mount is the user's
#     (user_id=UID in /proc/self/mountinfo), the index in ~/.cache/clairfs;
#   - a real torch trainer (identify_trainer.py: ImageFolder, shuffle=True
#     with a seeded generator, 4 epochs, every item's bytes compared with
#     the source's) through it: the order is identified
#     (clairfs_order_identified 1, the stats' `order: identified torch`),
#     epochs 1-3 predicted with at most 1 % missed; once every file is
#     staged the kernel opens files itself, each open counted by the
#     isatty() of Python's open() (no permission events for a user);
#   - .clairfs/stats read by the user; the unmount with fusermount3 -u, the
#     daemon's exit 0;
#   - a second mount with allow_other, kernel_open, reclaim and ram=1000T:
#     each privilege the user lacks (judged here by the same probes:
#     /etc/fuse.conf, fanotify_init, ulimit -e) is exactly one log line, and
#     ram= is cut with exactly one warning;
#   - with ~/.cache not the user's to write, the mount fails: exit 1, one
#     stderr line naming index=, nothing mounted.
# Everything started is stopped by PID, everything mounted unmounted, also
# on failure.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: creating a user needs root"; exit 77; }
command -v useradd >/dev/null && command -v setpriv >/dev/null ||
    { echo "SKIP: no useradd or setpriv"; exit 77; }
cfs_need_torch
cfs_setup

user=cfsuser$$
fuse_mode=$(stat -c %a /dev/fuse)
restore() {
    cfs_cleanup
    chmod "$fuse_mode" /dev/fuse
    id "$user" >/dev/null 2>&1 && userdel "$user" 2>/dev/null
}
trap restore EXIT
useradd -M -d "$TMP/home" -s /bin/bash "$user" || { fail "useradd"; cfs_finish; }
uid=$(id -u "$user")
mkdir -p "$TMP/home" "$TMP/work"
chown "$user:" "$TMP/home" "$TMP/work"
chmod 0666 /dev/fuse

# as_user CMD...: CMD as the user, exec'd (its PID is $! when backgrounded).
as_user() {
    setpriv --reuid "$uid" --regid "$(id -g "$user")" --init-groups \
        env -i HOME="$TMP/home" PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"
}

# Whether the user may start a fanotify group of notifications reporting
# file handles (FAN_REPORT_FID, Linux >= 5.13 for a user; the open watch's
# group as a user has it, naming processes): 1 where it is refused (EPERM).
fan=$(as_user "$PYTHON" -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.fanotify_init(0x1 | 0x2 | 0x200, os.O_RDONLY | 0o2000000)
print(1 if fd < 0 and ctypes.get_errno() == 1 else 0)')

. "$(dirname "$0")/identify_lib.sh"
identify_dataset
mnt=$TMP/work/mnt
as_user mkdir -p "$mnt"

# --- the mount, nothing registered.
as_user "$CLAIRFS" -f "$src" "$mnt" >"$TMP/daemon.log" 2>&1 &
pid=$!
cfs_pids+=("$pid")
cfs_mounts+=("$mnt")
for _ in $(seq 600); do
    cfs_is_mounted "$mnt" && as_user test -e "$mnt/.clairfs/ready" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
cat "$TMP/daemon.log"
check "the user's mount is live" cfs_is_mounted "$mnt"
check "mounted through fusermount3 as uid $uid (user_id=$uid)" \
    bash -c 'awk -v m="$1" '\''$5 == m'\'' /proc/self/mountinfo | grep -q "user_id=$2[, ]\|user_id=$2$"' _ "$mnt" "$uid"
check "the index is in the user's ~/.cache/clairfs" \
    test "$(stat -c %U "$TMP/home/.cache/clairfs")" = "$user"
check "the RAM tier's origin is logged once" test "$(grep -c 'ram tier .*the dataset.s size' "$TMP/daemon.log")" -eq 1

# --- a real trainer, nothing registered.
as_user timeout 600 "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind torch --seed 23 \
    --world 1 --rank 0 --epochs $EPOCHS --batch $BATCH --workers $WORKERS --pause "$PAUSE" \
    --port 0 --log "$TMP/work/trainer.log" >"$TMP/trainer.out" 2>&1
rc=$?
tail -3 "$TMP/trainer.out"
check "the trainer ran $EPOCHS epochs with the source's bytes" test "$rc" -eq 0
as_user cat "$mnt/.clairfs/stats" >"$TMP/stats" 2>&1
as_user cat "$mnt/.clairfs/metrics" >"$TMP/metrics" 2>&1
cat "$TMP/stats"
metric() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/metrics"; }
opens=$(wc -l <"$TMP/work/trainer.log")
per_epoch=$((opens / EPOCHS))
hit=$(metric 'clairfs_prediction_total{result="hit"}')
miss=$(metric 'clairfs_prediction_total{result="miss"}')
echo "$opens opens; predicted hit=$hit miss=$miss"
check "the user reads .clairfs/stats" grep -qE '^catalog +files 3000 ' "$TMP/stats"
check "clairfs_order_identified 1" test "$(metric clairfs_order_identified)" = 1
check "the stats say identified torch" grep -q '^order: *identified torch ' "$TMP/stats"
check "epochs 1-3 predicted: hit+miss >= $((3 * per_epoch))" \
    test "$((${hit:-0} + ${miss:-0}))" -ge "$((3 * per_epoch))"
check "at most 1 % missed ($miss of $((hit + miss)))" test "$((miss * 100))" -le "$((hit + miss))"
# Once every file is staged, the opens go to the kernel and are counted by
# the isatty() of Python's open(), without permission events: every one.
reads=0
for s in ram ssd peer pfs; do reads=$((reads + $(metric "clairfs_reads_total{source=\"$s\"}"))); done
if [ "$fan" = 0 ]; then
    check "switched to the kernel's own opens, counted by their isatty()" \
        grep -q '^clairfs: kernel_open: .*each one by the isatty() that follows it' "$TMP/daemon.log"
    check "every open counted once ($reads of $opens)" test "$reads" -eq "$opens"
    # A reader without isatty() (cat): a user's watch cannot add permission
    # events, so its opens are counted by their notifications.
    list() { (cd "$1" && find . -path ./.clairfs -prune -o -type f -print | sort); }
    list "$src" >"$TMP/list"
    as_user bash -c 'cd "$1" && xargs cat' _ "$mnt" <"$TMP/list" >"$TMP/cat.mnt"
    (cd "$src" && xargs cat) <"$TMP/list" >"$TMP/cat.src"
    check "cat reads every file as the user" cmp "$TMP/cat.mnt" "$TMP/cat.src"
    as_user cat "$mnt/.clairfs/metrics" >"$TMP/metrics" 2>&1
    was=$reads reads=0
    for s in ram ssd peer pfs; do reads=$((reads + $(metric "clairfs_reads_total{source=\"$s\"}"))); done
    check "cat's opens counted ($((reads - was)) of $(wc -l <"$TMP/list"))" \
        test "$((reads - was))" -eq "$(wc -l <"$TMP/list")"
    # Said once, with the first reason: that reader, or cat's sorted order
    # dropping the trainer's, which is then learnt again.
    said='^clairfs: open watch: .*, and opens may count out of order or, one reader.s of one file, once'
    for _ in $(seq 50); do grep -q "$said" "$TMP/daemon.log" && break; sleep 0.1; done # 100 ms for its TTY
    grep '^clairfs: open watch: ' "$TMP/daemon.log"
    check "counting without permission events from then on, said once" \
        test "$(grep -c "$said" "$TMP/daemon.log")" -eq 1
else
    check "no fanotify for the user: opens keep reaching clairfs (1 line)" \
        test "$(grep -c '^clairfs: every file is in the page cache, but opens keep reaching' "$TMP/daemon.log")" -eq 1
fi
check "the user unmounts with fusermount3 -u" as_user fusermount3 -u "$mnt"
wait "$pid"
check "the daemon exits 0" test $? -eq 0

# --- what the user may not do: one line each, and what happens instead.
small=$TMP/small
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 2 --files 5 "$small"
as_user "$CLAIRFS" -f -o allow_other,kernel_open,reclaim,ram=1000T "$small" "$mnt" \
    >"$TMP/priv.log" 2>&1 &
pid=$!
cfs_pids+=("$pid")
for _ in $(seq 600); do
    cfs_is_mounted "$mnt" && as_user test -e "$mnt/.clairfs/ready" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
cat "$TMP/priv.log"
check "the mount with privileged options is live" cfs_is_mounted "$mnt"
lines() { grep -c "$1" "$TMP/priv.log"; }
if grep -qx '[[:space:]]*user_allow_other[[:space:]]*' /etc/fuse.conf 2>/dev/null; then want=0; else want=1; fi
check "allow_other without user_allow_other: $want line(s)" test "$(lines '^clairfs: allow_other: ')" -eq $want
[ $want -eq 0 ] || check "allow_other dropped: no allow_other in the mount's options" \
    bash -c '! awk -v m="$1" '\''$5 == m'\'' /proc/self/mountinfo | grep -q allow_other' _ "$mnt"
check "kernel_open without fanotify: $fan line(s)" test "$(lines '^clairfs: kernel_open: its open watch')" -eq "$fan"
check "reclaim as a user: 1 line" test "$(lines '^clairfs: reclaim: umount2')" -eq 1
if [ "$(as_user bash -c 'ulimit -e')" -lt 20 ]; then nice=1; else nice=0; fi
check "the search's priority without CAP_SYS_NICE: $nice line(s)" \
    test "$(lines '^clairfs: search_budget: a thread leaves idle priority')" -eq $nice
check "ram=1000T: one warning, cut to 90 %" test "$(lines '^clairfs: ram=1000.0 TiB is more than .*: using .*, 90 % of it$')" -eq 1
check "the user unmounts it" as_user fusermount3 -u "$mnt"
wait "$pid"

# --- ~/.cache not the user's to write: one line naming index=.
mkdir -p "$TMP/home2/.cache"
chmod 755 "$TMP/home2" "$TMP/home2/.cache" # root's
before=$(cfs_mount_count "$mnt")
setpriv --reuid "$uid" --regid "$(id -g "$user")" --init-groups \
    env -i HOME="$TMP/home2" PATH=/usr/bin:/bin timeout 30 "$CLAIRFS" "$small" "$mnt" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
check "an unwritable ~/.cache: exit 1" test "$rc" -eq 1
check "one stderr line naming index=" \
    bash -c '[ "$(wc -l <"$1")" -eq 1 ] && grep -q "give -o index=DIR" "$1"' _ "$TMP/err"
check "nothing mounted" test "$(cfs_mount_count "$mnt")" = "$before"
cfs_finish
