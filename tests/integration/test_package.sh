#!/usr/bin/env bash
# The Debian package, built and used as a user would, without changing this
# machine.
#
# The tree's tracked files are copied into a temp dir and built there with
# dpkg-buildpackage (which writes the .deb next to the tree it builds, so
# never next to the repository).  The .deb must hold every user program and
# its man page; it is unpacked with `dpkg -x` into a scratch root instead of
# installed, and every program there answers --help, clairfs --version names
# the package's version, and every page renders without groff warnings.
#
# Then the fstab use: a line of type fuse.clairfs in a test fstab, mounted
# with `mount -T FSTAB MOUNTPOINT`.  mount(8) runs mount.fuse3, which runs
# `clairfs SOURCE MOUNTPOINT -o OPTIONS` through /bin/sh -- with PATH
# removed from the environment by mount(8), so the shell's standard path
# (/usr/local/bin, /usr/bin, ...) is what finds clairfs, as it finds
# /usr/bin/clairfs once the package is installed.  To put the scratch root's
# clairfs there without touching the machine, that stage runs in a private
# mount namespace where the scratch root's usr/bin is bind-mounted over
# /usr/local/bin; it checks that the daemon is the package's binary, that
# the mount serves the source's bytes, and unmounts with umount(8).
#
# SKIP (77) when dpkg-buildpackage or debhelper is missing; the fstab stage
# alone is skipped (with a line) without root, FUSE or mount.fuse3.
set -u
programs=(clairfs clairfs-plan clairfs-stat clairfs-bench clairfs-pfsemu clairfs-gendata)

# cmdline_has PID ARG: the process's argv holds ARG as one argument.
cmdline_has() {
    [ -r "/proc/$1/cmdline" ] && tr '\0' '\n' <"/proc/$1/cmdline" | grep -qxF -- "$2"
}

# daemon_of MNT: the PID of the clairfs serving MNT (by its argv), if any.
daemon_of() {
    local p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = /usr/local/bin/clairfs ] || continue
        cmdline_has "$p" "$1" && { echo "$p"; return 0; }
    done
    return 1
}

# The fstab stage, run as `test_package.sh --fstab-stage USR_BIN FSTAB SRC
# MNT` inside its own mount namespace: everything it mounts (the bind mount,
# the FUSE mount) exists only there, and is unmounted, with its daemon
# stopped by PID, before the namespace goes.
fstab_stage() {
    # Globals, not locals: the EXIT trap runs after this function returns.
    usr_bin=$1 fstab=$2 src=$3 mnt=$4 pid="" failures=0
    stage_cleanup() {
        if grep -qF " $mnt " /proc/self/mountinfo; then
            umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
        fi
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null
        fi
    }
    trap stage_cleanup EXIT
    trap 'exit 130' INT TERM
    mount --bind "$usr_bin" /usr/local/bin ||
        { echo "FAIL: cannot bind $usr_bin over /usr/local/bin in the namespace"; return 1; }
    local out
    if ! out=$(mount -T "$fstab" "$mnt" 2>&1); then
        echo "FAIL: mount -T $fstab $mnt: $out"
        return 1
    fi
    for _ in $(seq 300); do [ -e "$mnt/.clairfs/ready" ] && break; sleep 0.1; done
    pid=$(daemon_of "$mnt")
    if ! grep -F " $mnt ro," /proc/self/mountinfo | grep -q ' - fuse\.clairfs '; then
        echo "FAIL: $mnt is not a read-only fuse.clairfs mount"
        failures=$((failures + 1))
    fi
    if [ -n "$pid" ] && [ "$(stat -L -c %d:%i "/proc/$pid/exe")" = \
                          "$(stat -L -c %d:%i "$usr_bin/clairfs")" ]; then
        echo "ok: mount.fuse3 ran the package's clairfs (pid $pid) from the standard path"
    else
        echo "FAIL: no daemon from the package's clairfs serves $mnt"
        failures=$((failures + 1))
    fi
    [ -e "$mnt/.clairfs/ready" ] ||
        { echo "FAIL: $mnt/.clairfs/ready never appeared"; failures=$((failures + 1)); }
    if diff -r "$src" "$mnt" >/dev/null; then
        echo "ok: the fstab mount serves the source's bytes"
    else
        echo "FAIL: the fstab mount differs from the source"
        failures=$((failures + 1))
    fi
    if ! out=$(umount "$mnt" 2>&1); then
        echo "FAIL: umount $mnt: $out"
        failures=$((failures + 1))
    fi
    for _ in $(seq 100); do { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; } || break; sleep 0.1; done
    if grep -qF " $mnt " /proc/self/mountinfo || { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }; then
        echo "FAIL: umount left the mount or its daemon behind"
        failures=$((failures + 1))
    else
        echo "ok: umount ended the mount and its daemon"
    fi
    return $((failures > 0))
}

if [ "${1:-}" = --fstab-stage ]; then
    shift
    fstab_stage "$@"
    exit
fi

root=${CLAIRFS_SOURCE_ROOT:?CLAIRFS_SOURCE_ROOT must name the source tree}
for tool in dpkg-buildpackage dpkg-deb dh; do
    command -v "$tool" >/dev/null ||
        { echo "SKIP: $tool is missing (dpkg-dev and debhelper build the package)"; exit 77; }
done

TMP=$(mktemp -d /tmp/clairfs-package.XXXXXX)
chmod 755 "$TMP"
export CLAIRFS="$TMP/root/usr/bin/clairfs" CLAIRFS_GENDATA="$TMP/root/usr/bin/clairfs-gendata"
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
trap cfs_cleanup EXIT
trap 'exit 130' INT TERM

version=$(cd "$root" && dpkg-parsechangelog -S Version) ||
    { echo "FAIL: debian/changelog has no version"; exit 1; }
tree="$TMP/src/clairfs-$version"
mkdir -p "$tree"
# The tracked files as they are in the work tree (a release tree without
# git: everything but build directories).
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z | tar --null -T - --ignore-failed-read -cf -) | tar -xf - -C "$tree"
else
    (cd "$root" && tar --exclude='./build*' --exclude='./obj-*' --exclude=./.git -cf - .) |
        tar -xf - -C "$tree"
fi

if ! unmet=$(cd "$tree" && dpkg-checkbuilddeps 2>&1); then
    echo "FAIL: $unmet (tools/deps.sh installs them)"
    exit 1
fi

t0=$SECONDS
if ! (cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=2" \
      dpkg-buildpackage -b -us -uc -j2 >"$TMP/build.log" 2>&1); then
    tail -n 40 "$TMP/build.log"
    echo "FAIL: dpkg-buildpackage -b failed (log above)"
    exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb="$TMP/src/clairfs_${version}_${arch}.deb"
[ -f "$deb" ] || { echo "FAIL: no $deb after the build"; exit 1; }
echo "ok: dpkg-buildpackage built $(basename "$deb") ($((SECONDS - t0)) s)"

listing=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
for p in "${programs[@]}"; do
    grep -qx "\./usr/bin/$p" <<<"$listing" || fail "the package lacks /usr/bin/$p"
    grep -qx "\./usr/share/man/man1/$p\.1\.gz" <<<"$listing" ||
        fail "the package lacks the man page $p(1)"
done
echo "checked dpkg-deb -c for ${#programs[@]} programs and their man pages"
depends=$(dpkg-deb -f "$deb" Depends)
for d in fuse3 python3 libfuse3; do
    grep -q "\(^\|, \)$d\b" <<<"$depends" || fail "Depends lacks $d: $depends"
done

dpkg -x "$deb" "$TMP/root" || { echo "FAIL: dpkg -x $deb"; exit 1; }
bin="$TMP/root/usr/bin"
got=$("$bin/clairfs" --version)
check "clairfs --version names the package's version ($got)" \
    grep -q "^clairfs $version\b" <<<"$got"
for p in "${programs[@]}"; do
    check "$p --help" sh -c '"$1" --help | grep -q "^usage: "' sh "$bin/$p"
done
if command -v man >/dev/null; then
    for p in "${programs[@]}"; do
        page="$TMP/root/usr/share/man/man1/$p.1.gz"
        warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
        [ -f "$page" ] && [ -z "$warnings" ] && echo "ok: man -l $p.1.gz" ||
            fail "man -l $page: ${warnings:-missing}"
    done
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP (stage): the fstab mount needs root"
elif [ ! -c /dev/fuse ] || [ ! -x /sbin/mount.fuse3 ] || ! command -v unshare >/dev/null; then
    echo "SKIP (stage): no /dev/fuse, /sbin/mount.fuse3 or unshare for the fstab mount"
elif [ ! -d /usr/local/bin ]; then
    echo "SKIP (stage): no /usr/local/bin to stand in for the installed /usr/bin"
else
    "$bin/clairfs-gendata" --classes 3 --files 7 --size 4K --quiet "$TMP/data" ||
        fail "the package's clairfs-gendata"
    mkdir -p "$TMP/mnt"
    # README's fstab line, with the index and RAM tier kept in the test.
    echo "$TMP/data $TMP/mnt fuse.clairfs ro,seed=42,ram=16M,index=$TMP/index,noauto 0 0" \
        >"$TMP/fstab"
    timeout 120 unshare --mount --propagation private \
        "$BASH" "$0" --fstab-stage "$bin" "$TMP/fstab" "$TMP/data" "$TMP/mnt" ||
        fail "the fstab mount (lines above)"
fi
cfs_finish
