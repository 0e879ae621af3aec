#!/usr/bin/env bash
# The prefetcher's files call down, never in a circle.  They share one
# struct, so any of them can call any other, and a circle creeps in one
# convenient call at a time; once there, no file of it can be read or
# changed without the others in mind.  prefetch_i.h lists the files bottom
# up ("Layers"): here every symbol one file of the library uses from
# another must come from a file listed before it (which also rules out any
# circle), and the list must name exactly the library's files.
# Args: the prefetch library (libcfs-prefetch.a) and its prefetch_i.h.
set -u
lib=${1:?usage: test_prefetch_layers.sh LIBCFS_PREFETCH_A PREFETCH_I_H}
header=${2:?usage: test_prefetch_layers.sh LIBCFS_PREFETCH_A PREFETCH_I_H}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "prefetch_open 8": each listed file and its place, bottom up.
sed -n '/^ \* Layers\./,/^ \*$/p' "$header" | grep -o '^ \*   prefetch[a-z_]*\.c' |
    awk '{ sub(/\.c$/, "", $2); print $2, NR }' | sort >"$tmp/rank"
[ -s "$tmp/rank" ] || { echo "FAIL: no Layers list in $header"; exit 1; }

# "SYMBOL FILE" for what each member defines, and for what it uses.
symbols() {
    nm -A "$@" "$lib" | awk -F: '{
        n = split($3, w, " "); m = $2
        sub(/.*\//, "", m); sub(/^src_/, "", m); sub(/\.c\.o$/, "", m)
        print w[n], m }' | sort -u
}
symbols -g --defined-only >"$tmp/defs" || { echo "FAIL: nm $lib"; exit 1; }
symbols -u >"$tmp/uses"

failures=0
# The list against the library's files.
awk '{ print $2 }' "$tmp/defs" | sort -u >"$tmp/members"
for f in $(join -v 1 "$tmp/members" "$tmp/rank"); do
    echo "FAIL: $f.c is in the library but not in the Layers list of $header"
    failures=$((failures + 1))
done
for f in $(join -v 2 "$tmp/members" <(awk '{ print $1 }' "$tmp/rank")); do
    echo "FAIL: $f.c is in the Layers list of $header but not in the library"
    failures=$((failures + 1))
done

# "USER DEFINER SYMBOL" for each call from one file into another.
join "$tmp/defs" "$tmp/uses" | awk '$2 != $3 { print $3, $2, $1 }' | sort >"$tmp/calls"
edges=0
while read -r user definer sym; do
    edges=$((edges + 1))
    ru=$(awk -v f="$user" '$1 == f { print $2 }' "$tmp/rank")
    rd=$(awk -v f="$definer" '$1 == f { print $2 }' "$tmp/rank")
    [ -n "$ru" ] && [ -n "$rd" ] || continue # named above
    if [ "$rd" -ge "$ru" ]; then
        echo "FAIL: $user.c calls $sym up in $definer.c (listed after it in $header)"
        failures=$((failures + 1))
    fi
done <"$tmp/calls"
echo "checked $edges calls between $(wc -l <"$tmp/members") files"
[ "$failures" -eq 0 ]
