#!/usr/bin/env bash
# What `meson install` puts in place, checked in a staging directory: the
# six user programs in bindir (each answering --help from there) and one man
# page each in mandir/man1 (each rendering without groff warnings), and
# nothing else in either.  The fast check of the install rules; the Debian
# package (test_package.sh) is built from the same rules.
set -u
build=${CLAIRFS_BUILD_ROOT:?CLAIRFS_BUILD_ROOT must name the build directory}
bindir=${CLAIRFS_BINDIR:?} mandir=${CLAIRFS_MANDIR:?}
programs=(clairfs clairfs-plan clairfs-stat clairfs-bench clairfs-pfsemu clairfs-gendata)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

dest=$(mktemp -d /tmp/clairfs-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT

# --no-rebuild: meson test has built the programs, and a rebuild from inside
# a test would contend with the running one for the build directory.
if ! out=$(meson install -C "$build" --no-rebuild --destdir "$dest" 2>&1); then
    echo "$out" | tail -n 20
    echo "FAIL: meson install --destdir failed"
    exit 1
fi

want_bin=$(printf '%s\n' "${programs[@]}" | sort)
want_man=$(printf '%s.1\n' "${programs[@]}" | sort)
got_bin=$(ls "$dest$bindir" 2>/dev/null | sort)
got_man=$(ls "$dest$mandir/man1" 2>/dev/null | sort)
words() { tr '\n' ' ' <<<"$1"; }
[ "$got_bin" = "$want_bin" ] ||
    fail "$bindir holds [$(words "$got_bin")], expected [$(words "$want_bin")]"
[ "$got_man" = "$want_man" ] ||
    fail "$mandir/man1 holds [$(words "$got_man")], expected [$(words "$want_man")]"

for p in "${programs[@]}"; do
    exe="$dest$bindir/$p"
    if [ -x "$exe" ] && "$exe" --help | grep -q '^usage: '; then
        echo "ok: $bindir/$p --help"
    else
        fail "$bindir/$p is missing, not executable, or --help failed"
    fi
done
if command -v man >/dev/null; then
    for p in "${programs[@]}"; do
        page="$dest$mandir/man1/$p.1"
        [ -f "$page" ] || continue
        warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
        [ -z "$warnings" ] && echo "ok: man -l $p.1" || fail "man -l $p.1: $warnings"
    done
fi

[ "$failures" -eq 0 ] && echo "ok: meson install puts ${#programs[@]} programs and their man pages in place"
exit $((failures > 0))
