#!/usr/bin/env bash
# Security promises of a mount, checked as user `nobody` against a
# mount made by root (read-only is test_mount_serve.sh's):
#  - with allow_other, permissions are the source's (default_permissions):
#    a 0600 root file and a file under a 0700 root directory are EACCES for
#    nobody, a 0644 file reads with the right bytes;
#  - without allow_other, nobody cannot even stat the mount's files;
#  - .clairfs/control is writable by the mount's owner only (nobody: EACCES,
#    root: accepted);
#  - the SSD tier's entry files and the LMDB environment's files are 0600,
#    their directories 0700 — also when the daemon runs with umask 000.
. "$(dirname "$0")/lib.sh"
cfs_setup
if ! id nobody >/dev/null 2>&1; then
    echo "SKIP: no user nobody"
    exit 77
fi
as_nobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$@"; }

src=$TMP/src
mkdir -p "$src/c0" "$src/private"
head -c 30000 /dev/urandom >"$src/c0/public.jpg"
head -c 30000 /dev/urandom >"$src/c0/secret.jpg"
head -c 30000 /dev/urandom >"$src/private/hidden.jpg"
chmod 755 "$src" "$src/c0"
chmod 644 "$src/c0/public.jpg"
chmod 600 "$src/c0/secret.jpg"
chmod 700 "$src/private"

mnt=$TMP/mnt
cfs_mounts+=("$mnt") # mounted from a subshell (for its umask): clean up here
if (umask 000 && cfs_mount "$src" "$mnt" "$TMP/d1.log" \
        -o allow_other,seed=1,epochs=1,ram=0,ssd=8M,ssd_dir="$TMP/ssd"); then
    pid=$(cfs_pid_of_mount "$mnt") && cfs_pids+=("$pid")
    check "nobody reads a 0644 file, right bytes" \
        eval 'as_nobody cat "$mnt/c0/public.jpg" | cmp -s - "$src/c0/public.jpg"'
    check "nobody: a 0600 root file is EACCES" \
        grep -q "Permission denied" <(as_nobody cat "$mnt/c0/secret.jpg" 2>&1)
    check "nobody: a file under a 0700 root dir is EACCES" \
        grep -q "Permission denied" <(as_nobody cat "$mnt/private/hidden.jpg" 2>&1)
    check "root reads the 0600 file" cmp -s "$mnt/c0/secret.jpg" "$src/c0/secret.jpg"
    check "modes mirrored" test "$(stat -c %a "$mnt/c0/secret.jpg") $(stat -c %a "$mnt/private")" = "600 700"
    check "owner mirrored" test "$(stat -c %u:%g "$mnt/c0/public.jpg")" = "$(stat -c %u:%g "$src/c0/public.jpg")"
    check "nobody: control write is EACCES" \
        grep -q "Permission denied" <(as_nobody sh -c "echo 'epoch 0' > '$mnt/.clairfs/control'" 2>&1)
    check "root: control write accepted" sh -c "echo 'epoch 0' > '$mnt/.clairfs/control'"
    # Stage the SSD tier (the prefetcher does it from the plan).
    for _ in $(seq 200); do
        [ "$(find "$TMP/ssd/cache" -type f 2>/dev/null | wc -l)" -ge 3 ] && break
        sleep 0.05
    done
    check "SSD tier holds entries" test "$(find "$TMP/ssd/cache" -type f | wc -l)" -ge 3
    bad=$(find "$TMP/ssd" -type f ! -perm 600 -printf '%m %p\n'; find "$TMP/ssd" -type d ! -perm 700 -printf '%m %p\n')
    check "SSD entries + LMDB files 0600, dirs 0700 (umask 000)${bad:+: $bad}" test -z "$bad"
    check "LMDB environment present" test -f "$TMP/ssd/index/data.mdb" -a -f "$TMP/ssd/index/lock.mdb"
    check "nobody cannot list the SSD tier" eval '! as_nobody ls "$TMP/ssd/cache" >/dev/null 2>&1'
    check "unmount" eval 'fusermount3 -u "$mnt" && cfs_wait_unmounted "$mnt"'
    for _ in $(seq 100); do kill -0 "${pid:-0}" 2>/dev/null || break; sleep 0.1; done
    check "daemon exited" eval '! kill -0 "${pid:-0}" 2>/dev/null'
else
    fail "mount with allow_other"
fi

mnt=$TMP/mnt2
if cfs_mount "$src" "$mnt" "$TMP/d2.log" -o ram=8M,index="$TMP/ix2"; then
    check "without allow_other: nobody cannot stat a 0644 file" \
        grep -q "Permission denied" <(as_nobody stat "$mnt/c0/public.jpg" 2>&1)
    check "without allow_other: nobody cannot list the root" \
        eval '! as_nobody ls "$mnt" >/dev/null 2>&1'
    check "without allow_other: root still reads" cmp -s "$mnt/c0/public.jpg" "$src/c0/public.jpg"
    bad=$(find "$TMP/ix2" -type f ! -perm 600 -printf '%m %p\n'; find "$TMP/ix2" -type d ! -perm 700 -printf '%m %p\n')
    check "index= environment 0600 in a 0700 dir${bad:+: $bad}" test -z "$bad"
    check "unmount 2" cfs_umount "$mnt"
else
    fail "mount without allow_other"
fi
cfs_finish
