#!/bin/sh
# Catalog figures: scan of a tree of N files (default 100000, 1000 class
# folders) on tmpfs vs. loading the stored copy from LMDB.  Prints figures,
# asserts nothing about time.
#   bench_catalog.sh CATALOG_DUMP [N]
set -eu
dump=$1
n=${2:-100000}
base=/dev/shm
[ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/cfs-bench-catalog.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
/usr/bin/env python3 - "$dir/src" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.mkdir(root)
classes = 1000 if n >= 1000 else 1
for c in range(classes):
    os.mkdir(os.path.join(root, "n%08d" % c))
for i in range(n):
    with open(os.path.join(root, "n%08d" % (i % classes), "img_%08d.JPEG" % i), "wb") as f:
        f.write(b"x" * (i % 7))
PY
# t ARGS...: the open's seconds; the process's peak resident KiB in $tmp_rss.
tmp_rss="$dir/rss"
t() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%M" -o "$tmp_rss" "$dump" -q "$@" 2>&1 | sed -n 's/.*open_seconds=\([0-9.]*\).*/\1/p'
    else
        echo 0 >"$tmp_rss"
        "$dump" -q "$@" 2>&1 | sed -n 's/.*open_seconds=\([0-9.]*\).*/\1/p'
    fi
}
scan=$(t -r "$dir/src"); scan_kib=$(cat "$tmp_rss")
save=$(t -r -i "$dir/ix" "$dir/src"); save_kib=$(cat "$tmp_rss")
load=$(t -i "$dir/ix" "$dir/src"); load_kib=$(cat "$tmp_rss")
"$dump" -q -i "$dir/ix" "$dir/src" 2>&1 | grep -q from_index=1 || { echo "stored catalog not reused"; exit 1; }
echo "catalog, $n files in $(( n >= 1000 ? 1000 : 1 )) folders on $base:"
echo "  scan (no index)       ${scan} s"
echo "  scan + store in LMDB  ${save} s"
echo "  load from LMDB        ${load} s"
awk -v s="$scan" -v l="$load" 'BEGIN { if (l > 0) printf "  load is %.1fx faster than scan\n", s / l }'
# Peak resident memory of the whole process (catalog_dump: the catalog and
# little else), per file: what a mount holds for its catalog.
rss() { awk -v w="$1" -v k="$2" -v n="$n" 'BEGIN { printf "  %-20s %7.1f MB  %6.1f\n", w, k / 1024, k * 1024 / n }'; }
if [ "$scan_kib" != 0 ]; then
    echo "peak resident memory of the process (MB; bytes a file):"
    rss "scan" "$scan_kib"
    rss "scan + store" "$save_kib"
    rss "load" "$load_kib"
fi
