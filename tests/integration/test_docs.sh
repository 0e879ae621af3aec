#!/usr/bin/env bash
# The option table is the one source of truth: every -o option that
# `clairfs --help` lists must be documented in the man page and README, and
# docs/design.md's interface contract must list the same options and metric
# families.  Every user program has a man page that renders without warnings.
set -u
clairfs=${CLAIRFS:?CLAIRFS must name the clairfs binary}
root=${CLAIRFS_SOURCE_ROOT:?}
failures=0

options=$("$clairfs" --help | sed -n 's/^ *-o \([a-z_]*\).*/\1/p' | sort -u)
[ -n "$options" ] || { echo "FAIL: clairfs --help lists no -o options"; exit 1; }
for opt in $options; do
    grep -q "^\.BI\? $opt\b\|^\.B $opt\$\|^\.BI $opt=" "$root/man/clairfs.1" ||
        { echo "FAIL: -o $opt is missing from man/clairfs.1"; failures=$((failures + 1)); }
    grep -q "\`$opt[=\`]" "$root/README.md" ||
        { echo "FAIL: -o $opt is missing from README.md's option table"; failures=$((failures + 1)); }
    grep -q "\`$opt[=\`]" "$root/docs/design.md" ||
        { echo "FAIL: -o $opt is missing from docs/design.md's option table"; failures=$((failures + 1)); }
done
echo "checked $(echo "$options" | wc -l) options"

# Every metric family the daemon renders is in README's metrics table.
metrics=$(grep -o '"clairfs_[a-z_]*"' "$root/src/metrics.c" | tr -d '"' | sort -u)
for name in $metrics; do
    grep -q "\`$name\|\`clairfs_catalog_files\`, .*\`${name#clairfs_catalog}\`" "$root/README.md" ||
        { echo "FAIL: metric $name is missing from README.md"; failures=$((failures + 1)); }
    grep -q "^| \`$name\` |" "$root/docs/design.md" ||
        { echo "FAIL: metric $name is missing from docs/design.md's metric families"; failures=$((failures + 1)); }
done
echo "checked $(echo "$metrics" | wc -l) metric families"

# Every user program (the daemon and tools/clairfs-*) has a man page, and
# every page renders without warnings.
for prog in clairfs $(cd "$root/tools" && ls clairfs-* | sed 's/\.c$//'); do
    [ -f "$root/man/$prog.1" ] ||
        { echo "FAIL: $prog has no man page man/$prog.1"; failures=$((failures + 1)); }
done
if command -v man >/dev/null; then
    for page in "$root"/man/*.1; do
        warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
        [ -z "$warnings" ] ||
            { echo "FAIL: ${page#$root/} warnings: $warnings"; failures=$((failures + 1)); }
    done
    echo "checked $(ls "$root"/man/*.1 | wc -l) man pages"
fi
[ "$failures" -eq 0 ] && echo "ok: docs match the option table"
exit $((failures > 0))
