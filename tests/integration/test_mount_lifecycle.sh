#!/usr/bin/env bash
# The life of a mount: daemonized start returns only once the mount is live;
# its threads are named by role; SIGTERM, SIGINT, SIGHUP and fusermount3 -u
# all unmount cleanly; a remount reuses the catalog stored in the index; the
# default index location.
. "$(dirname "$0")/lib.sh"
cfs_setup

src=$TMP/src
mnt=$TMP/mnt
mkdir -p "$mnt"
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 5 --files 40 --size 1K "$src" || fail "gendata"

# --- daemonized: the parent returns 0 only with the mount already live.
"$CLAIRFS" -o index="$TMP/index" "$src" "$mnt" >"$TMP/bg.out" 2>&1
rc=$?
cfs_mounts+=("$mnt")
check "daemonized start exits 0" test "$rc" -eq 0
check "... with the mount already live and ready" bash -c '
    grep -q " $1 fuse.clairfs " /proc/mounts && [ -e "$1/.clairfs/ready" ]' _ "$mnt"
check "... and silent" test ! -s "$TMP/bg.out"
pid=$(cfs_pid_of_mount "$mnt")
if [ -n "$pid" ]; then
    cfs_pids+=("$pid")
    check "the daemon serves" cmp -s "$src/n0002/img_000085.JPEG" "$mnt/n0002/img_000085.JPEG"
    # Named by role (docs/design.md, "Threads"), as top -H and perf show them.
    check "its threads are named by role" bash -c '
        names=" $(sort -u /proc/$1/task/*/comm | tr "\n" " ")"
        for n in clairfs cfs-prefetch cfs-finisher cfs-stager cfs-identify; do
            [[ $names == *" $n "* ]] || { echo "no $n among:$names"; exit 1; }
        done
        [[ $names == *" cfs-io-uring "* || $names == *" cfs-io "* ]]' _ "$pid"
    kill -TERM "$pid"
    check "SIGTERM to the daemon unmounts" cfs_wait_unmounted "$mnt"
    check "... and the daemon exits" bash -c 'for i in $(seq 100); do kill -0 $1 2>/dev/null || exit 0; sleep 0.05; done; exit 1' _ "$pid"
else
    fail "no daemon process found for $mnt"
fi

# --- foreground: each signal stops the loop, unmounts and exits 0.
for sig in TERM INT HUP; do
    if cfs_mount "$src" "$mnt" "$TMP/fg-$sig.log" -o index="$TMP/index"; then
        kill -"$sig" "$CFS_PID"
        wait "$CFS_PID"
        rc=$?
        check "SIG$sig: exit 0 (got $rc)" test "$rc" -eq 0
        check "SIG$sig: unmounted" bash -c '! grep -q " $1 " /proc/mounts' _ "$mnt"
    else
        fail "foreground mount for SIG$sig"
    fi
done

# --- the catalog is stored and reused.
if cfs_mount "$src" "$mnt" "$TMP/first.log" -o rescan,index="$TMP/reuse"; then
    check "first mount scans (loaded_from_index 0)" test "$(cfs_metric "$mnt" clairfs_catalog_loaded_from_index)" = 0
    check "... and logs the scan" grep -q "scanned the catalog of $src: 200 files" "$TMP/first.log"
    check "unmount" cfs_umount "$mnt"
else
    fail "first mount"
fi
check "the index directory is private (0700)" test "$(stat -c %a "$TMP/reuse")" = 700
if cfs_mount "$src" "$mnt" "$TMP/second.log" -o index="$TMP/reuse"; then
    check "remount reuses the stored catalog (loaded_from_index 1)" test "$(cfs_metric "$mnt" clairfs_catalog_loaded_from_index)" = 1
    check "... and logs it" grep -q "loaded the catalog of $src: 200 files" "$TMP/second.log"
    check "... and serves the same bytes" cmp -s "$src/n0004/img_000199.JPEG" "$mnt/n0004/img_000199.JPEG"
    check "unmount" cfs_umount "$mnt"
else
    fail "second mount"
fi
if cfs_mount "$src" "$mnt" "$TMP/rescan.log" -o rescan,index="$TMP/reuse"; then
    check "-o rescan scans again" test "$(cfs_metric "$mnt" clairfs_catalog_loaded_from_index)" = 0
    check "unmount" cfs_umount "$mnt"
fi
echo new >"$src/n0001/added.JPEG"
if cfs_mount "$src" "$mnt" "$TMP/changed.log" -o index="$TMP/reuse"; then
    check "a changed source is scanned again" test "$(cfs_metric "$mnt" clairfs_catalog_loaded_from_index) $(cfs_metric "$mnt" clairfs_catalog_files)" = "0 201"
    check "unmount" cfs_umount "$mnt"
fi

# --- default index location: $XDG_CACHE_HOME/clairfs/<hash of the source>.
export XDG_CACHE_HOME=$TMP/xdg
if cfs_mount "$src" "$mnt" "$TMP/xdg.log"; then
    check "default index under XDG_CACHE_HOME/clairfs/<16 hex>" bash -c '
        ls "$1/clairfs" | grep -qxE "[0-9a-f]{16}"' _ "$XDG_CACHE_HOME"
    check "unmount" cfs_umount "$mnt"
fi
unset XDG_CACHE_HOME

# --- {rank} in the mount point (rank 0 without MPI) and in index=.
mkdir -p "$TMP/node0"
if cfs_mount "$src" "$TMP/node0" "$TMP/rank.log" -o index="$TMP/idx{rank}"; then
    check "{rank} expands to 0 in index=" test -d "$TMP/idx0"
    check "unmount" cfs_umount "$TMP/node0"
fi

# --- as mount(8) and /etc/fstab start it: mount.fuse3 runs "PROGRAM#SOURCE"
# (an fstab line "SOURCE MNT fuse.clairfs OPTS" does the same with clairfs
# from PATH) and passes -o after the positional arguments.
mount_fuse=$(command -v mount.fuse3 || true)
if [ -n "$mount_fuse" ]; then
    cfs_mounts+=("$mnt")
    if mount -t fuse "$CLAIRFS#$src" "$mnt" -o "seed=7,ram=8M,index=$TMP/fstab,noauto,_netdev" \
        2>"$TMP/fstab.err"; then
        check "mount -t fuse PROGRAM#SOURCE serves the source" \
            cmp -s "$src/n0004/img_000199.JPEG" "$mnt/n0004/img_000199.JPEG"
        check "... and unmounts" cfs_umount "$mnt"
    else
        fail "mount -t fuse: $(head -n1 "$TMP/fstab.err")"
    fi
    check "mount(8) with a bad option fails with one line, nothing mounted" bash -c '
        ! mount -t fuse "$1#$2" "$3" -o seed=x 2>"$4" && [ "$(wc -l <"$4")" = 1 ] &&
        grep -q "seed=x" "$4" && ! grep -q " $3 " /proc/mounts' _ "$CLAIRFS" "$src" "$mnt" "$TMP/fstab-bad.err"
fi

check "nothing of ours left mounted" bash -c '! grep -q " $1/" /proc/mounts' _ "$TMP"
cfs_finish
