#!/usr/bin/env bash
# The files of a module call down, never in a circle.  The files of one
# library share private state, so any of them can call any other, and a
# circle creeps in one convenient call at a time; once there, no file of it
# can be read or changed without the others in mind.
#
# Every static library and the daemon's own objects are checked: from
# their symbols (nm), "file A uses a symbol file B defines" must sort
# (tsort finds no loop).  A private header may also list its module's files
# bottom up in a "Layers." paragraph (as prefetch_i.h does, one
# " *   NAME.c  what it is" line each); then every call must go down that
# list, and the list must name exactly the files of the library it covers
# (of an executable's objects, which hold other modules too, a subset).
#
# Usage: test_layers.sh [HEADER_WITH_LAYERS ...] -- OBJECTS ...
# where each OBJECTS is a static library (.a) or a directory of objects.
set -u
headers=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do headers+=("$1"); shift; done
shift || { echo "usage: test_layers.sh [HEADER ...] -- OBJECTS ..."; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# "SYMBOL FILE" for what each member defines (-g --defined-only) or uses (-u).
symbols() {
    local what=$1; shift
    local set=$1; shift
    if [ -d "$set" ]; then set=("$set"/*.o); else set=("$set"); fi
    nm -A "$@" "${set[@]}" 2>/dev/null | awk -F: '{
        n = split($NF, w, " "); m = (NF > 2) ? $2 : $1
        sub(/.*\//, "", m); sub(/^src_/, "", m); sub(/\.c\.o$/, "", m)
        print w[n], m }' | sort -u >"$tmp/$what"
}

# "USER DEFINER SYMBOL" for each call from one file into another.
calls_of() {
    symbols defs "$1" -g --defined-only
    symbols uses "$1" -u
    join "$tmp/defs" "$tmp/uses" | awk '$2 != $3 { print $3, $2, $1 }' | sort -u
}

# "NAME RANK" for a header's Layers list, bottom up.
layers_of() {
    sed -n '/^ \* Layers\./,/^ \*$/p' "$1" | grep -o '^ \*   [a-z_]*\.c' |
        awk '{ sub(/\.c$/, "", $2); print $2, NR }' | sort
}

checked=0
for set in "$@"; do
    name=$(basename "$set")
    calls_of "$set" >"$tmp/calls"
    awk '{ print $2 }' "$tmp/defs" | sort -u >"$tmp/members"
    [ -s "$tmp/members" ] || { fail "$name: no objects read"; continue; }
    if ! loop=$(awk '{ print $1, $2 }' "$tmp/calls" | tsort 2>&1 >/dev/null); then
        fail "$name: its files call each other in a circle: $(grep -v 'input contains' <<<"$loop" |
            sed 's/^tsort: //' | sort -u | tr '\n' ' ')"
    fi
    for h in ${headers[@]+"${headers[@]}"}; do
        layers_of "$h" >"$tmp/rank"
        [ -s "$tmp/rank" ] || { fail "no Layers list in $h"; continue; }
        # The list covers the library holding its first file.
        grep -qx "$(head -1 "$tmp/rank" | cut -d' ' -f1)" "$tmp/members" || continue
        # A library is the module's alone; an executable's objects hold others.
        for f in $([ -d "$set" ] || join -v 1 "$tmp/members" "$tmp/rank"); do
            fail "$f.c is in $name but not in the Layers list of $h"
        done
        for f in $(join -v 2 "$tmp/members" <(cut -d' ' -f1 "$tmp/rank")); do
            fail "$f.c is in the Layers list of $h but not in $name"
        done
        while read -r user definer sym; do
            ru=$(awk -v f="$user" '$1 == f { print $2 }' "$tmp/rank")
            rd=$(awk -v f="$definer" '$1 == f { print $2 }' "$tmp/rank")
            [ -n "$ru" ] && [ -n "$rd" ] || continue # named above
            [ "$rd" -lt "$ru" ] || fail "$user.c calls $sym up in $definer.c (listed after it in $h)"
        done <"$tmp/calls"
    done
    checked=$((checked + 1))
done
echo "checked the calls between the files of $checked libraries"
[ "$failures" -eq 0 ]
