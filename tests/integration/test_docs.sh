#!/usr/bin/env bash
# The option table is the one source of truth: every -o option that
# `clairfs --help` lists has its own entry in the man page's option list
# (the reference) and its own row in docs/design.md's contract table, and
# they list no other; --help prints them in its four groups, one line each
# within 80 columns.  Every metric family src/metrics.c renders has its own
# row in docs/metrics.md and in docs/design.md's metric families, and they
# list no other.  README stays a few screens (at most 300 lines), links
# only to files that exist, and no page says a seed must be registered for
# prediction.  Every user program has a man page that renders without
# warnings.
set -u
clairfs=${CLAIRFS:?CLAIRFS must name the clairfs binary}
root=${CLAIRFS_SOURCE_ROOT:?}
failures=0

# table_rows FILE HEADER: the first cells of the markdown table whose header
# row starts with HEADER, one a line (an escaped "\|" inside a cell kept).
table_rows() {
    awk -v head="$2" '
        index($0, head) == 1 { on = 1; next }
        on && /^\|---/ { next }
        on && !/^\|/ { exit }
        on { gsub(/\\\|/, "\001"); split($0, c, "|"); gsub("\001", "|", c[2]); print c[2] }
    ' "$1"
}
# row_names: the names rows document, sorted: in each first cell the first
# `code` span and every span after a comma, up to its "=" or "{"
# (`io=auto` / `uring`, `io_depth=N` names io and io_depth, not uring), a
# span "_x" after `a_b` naming a_x (`clairfs_catalog_files`, `_dirs`).
row_names() {
    awk '{
        n = split($0, t, "`")
        first = ""
        for (i = 2; i <= n; i += 2) {
            if (i > 2 && index(t[i - 1], ",") == 0) continue
            s = t[i]; sub(/[={].*/, "", s)
            if (substr(s, 1, 1) == "_" && first != "") { b = first; sub(/_[a-z]*$/, "", b); s = b s }
            if (first == "") first = s
            print s
        }
    }' | sort -u
}
# man_options PAGE: the names of the .TP entries of the "Mount options"
# subsection (".B name" or ".BI name= VALUE").
man_options() {
    awk '/^\.SS Mount options/ { on = 1; next }
         on && /^\.S[HS]/ { exit }
         on && tp { s = $2; sub(/=.*/, "", s); print s }
         { tp = on && /^\.TP/ }' "$1" | sort -u
}
# same WHAT EXPECTED-LIST ACTUAL-LIST: the two sorted lists are equal; each
# name missing from the document, and each documented name that does not
# exist, is one failure.
same() {
    local what=$1 name
    for name in $(comm -23 <(echo "$2") <(echo "$3")); do
        echo "FAIL: $name has no row in $what"; failures=$((failures + 1))
    done
    for name in $(comm -13 <(echo "$2") <(echo "$3")); do
        echo "FAIL: $what has a row for $name, which does not exist"; failures=$((failures + 1))
    done
}

# Every -o option `clairfs --help` lists has its own row (an entry of the
# man page's option list, a row of the markdown tables): the option named
# in a row's meaning, or as a value of another option, is not documented.
options=$("$clairfs" --help | sed -n 's/^ *-o \([a-z_][a-z_]*\).*/\1/p' | sort -u)
[ "$(echo "$options" | wc -l)" -ge 30 ] ||
    { echo "FAIL: clairfs --help lists $(echo "$options" | wc -l) -o options"; exit 1; }
same "man/clairfs.1's Mount options" "$options" "$(man_options "$root/man/clairfs.1")"
same "docs/design.md's option table" "$options" \
    "$(table_rows "$root/docs/design.md" '| option | meaning |' | row_names)"
echo "checked $(echo "$options" | wc -l) options"

# --help: the four groups, in order, and every line of them within 80 columns.
help=$("$clairfs" --help)
groups=$(echo "$help" | grep -E '^[A-Z][^:]*:$|^Hints for' | sed 's/[ (:].*//' | tr '\n' ' ')
[ "$groups" = "General Tiers, Hints Tuning Debugging FUSE " ] ||
    { echo "FAIL: clairfs --help's headings: $groups"; failures=$((failures + 1)); }
long=$(echo "$help" | awk 'length > 80')
[ -z "$long" ] || { echo "FAIL: --help lines over 80 columns: $long"; failures=$((failures + 1)); }

# Every metric family the daemon renders has its row in docs/metrics.md's
# table and docs/design.md's metric families.
metrics=$(grep -o '"clairfs_[a-z_]*"' "$root/src/metrics.c" | tr -d '"' | sort -u)
[ "$(echo "$metrics" | wc -l)" -ge 20 ] ||
    { echo "FAIL: src/metrics.c names $(echo "$metrics" | wc -l) metric families"; exit 1; }
same "docs/metrics.md's table" "$metrics" "$(table_rows "$root/docs/metrics.md" '| metric | meaning |' | row_names)"
same "docs/design.md's metric families" "$metrics" \
    "$(table_rows "$root/docs/design.md" '| family | labels |' | row_names)"
echo "checked $(echo "$metrics" | wc -l) metric families"

# README: a few screens, and every relative link it gives names a file.
lines=$(wc -l <"$root/README.md")
[ "$lines" -le 300 ] || { echo "FAIL: README.md has $lines lines (at most 300)"; failures=$((failures + 1)); }
for link in $(grep -o '](\([a-z][^)#]*\))' "$root/README.md" | sed 's/^](//; s/)$//' | grep -v '^https\?:'); do
    [ -e "$root/$link" ] || { echo "FAIL: README.md links to $link, which does not exist"; failures=$((failures + 1)); }
done
# The mount learns the order by itself: no page, nor --help, may say a seed
# is needed to predict.
said=$( { "$clairfs" --help; cat "$root/README.md" "$root/man/clairfs.1" "$root"/docs/*.md \
    "$root"/examples/*.md; } | grep -inE 'predicts? nothing|without (a|it|the) seed[^.]*(predict|serves and caches)|seed (is|must be) (needed|required)|seed must be registered|needs? a seed')
[ -z "$said" ] || { echo "FAIL: a page says a seed is needed: $said"; failures=$((failures + 1)); }
echo "checked README ($lines lines) and the seed's wording"

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
