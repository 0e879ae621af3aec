#!/bin/bash
# clairfs-plan's command line, bad input and good paths: every bad option,
# list file or SOURCE gives a non-zero exit, nothing on stdout and exactly
# one line on stderr that names the option, or the file and line; and the
# good paths give exactly the output known by construction (--print-order
# through a list sampler on a hand-built ImageFolder tree, --json keys and
# figures, --synthetic, no_peers planning each node alone).  No FUSE, no
# torch needed.
#
# usage: test_plan_cli.sh PATH/TO/clairfs-plan
set -u
PLAN=${1:-${CLAIRFS_PLAN:-}}
[ -n "$PLAN" ] || { echo "usage: test_plan_cli.sh clairfs-plan" >&2; exit 2; }
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
T=$(mktemp -d /tmp/clairfs-plan-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
# The user's cache dir (where the mount's default index lives) points into
# $T: nothing may appear there (checked at the end).
export HOME=$T/home XDG_CACHE_HOME=$T/cache
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# --- The tree.  ImageFolder order (classes sorted; sorted(os.walk) by full
# --- path; sorted names; image extensions only, any case):
#   0 cat/a.jpg (100 B)   1 cat/b.PNG (200)   2 cat/c.jpeg (300)
#   3 dog/x.jpg (400)     4 dog/y.jpg (500)   5 dog/sub/z.png (600)
# dog/notes.txt and README.txt are served but have no index.
DS=$T/ds
mkdir -p "$DS/cat" "$DS/dog/sub"
k=0
for f in cat/a.jpg cat/b.PNG cat/c.jpeg dog/x.jpg dog/y.jpg dog/sub/z.png; do
    k=$((k + 1))
    head -c $((k * 100)) /dev/zero >"$DS/$f"
done
echo "not an image" >"$DS/dog/notes.txt"
echo "readme" >"$DS/README.txt"
IDX="index=$T/idx"

# A valid list: world=1, two epochs (epoch 1 repeats an index; lists may).
good=$T/good.list
cat >"$good" <<'EOF'
# written by hand: epoch 0 reads every sample once, epoch 1 four reads
clairfs-sampler-list world=1 epochs=2 n=6

epoch 0 rank 0: 5 0 3 1 4 2
epoch 1 rank 0: 2 2 0 4
EOF

# bad DESCRIPTION EXPECTED-SUBSTRING ARGS...: clairfs-plan ARGS must fail
# with empty stdout and one stderr line containing EXPECTED-SUBSTRING.
bad() {
    local what=$1 want=$2 rc lines
    shift 2
    "$PLAN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    lines=$(wc -l <"$T/err")
    if [ "$rc" -eq 0 ]; then
        fail "$what: exit 0"
    elif [ "$rc" -ge 126 ]; then
        fail "$what: exit $rc (crash?): $(cat "$T/err")"
    elif [ "$lines" -ne 1 ] || [ "$(wc -c <"$T/err")" -le 1 ]; then
        fail "$what: $lines stderr lines: $(cat "$T/err")"
    elif ! grep -qF -- "$want" "$T/err"; then
        fail "$what: stderr does not name '$want': $(cat "$T/err")"
    elif [ -s "$T/out" ]; then
        fail "$what: output on stdout: $(head -c 200 "$T/out")"
    else
        echo "ok: $what -> $(cat "$T/err")"
    fi
}

# list NAME CONTENT: write list file $T/NAME.list.
list() { printf '%s' "$2" >"$T/$1.list"; }

# --- options
bad "seed not a number" "seed=abc" -o seed=abc,$IDX "$DS"
bad "seed negative" "seed=-1" -o seed=-1,$IDX "$DS"
bad "seed hex" "seed=0x10" -o seed=0x10,$IDX "$DS"
bad "seed >= 2^64" "seed=18446744073709551616" -o seed=18446744073709551616,$IDX "$DS"
bad "seed + last epoch >= 2^64" "seed=18446744073709551615" \
    -o seed=18446744073709551615,epochs=2,$IDX "$DS"
bad "seed + --print-order epoch >= 2^64" "seed=18446744073709551610" \
    -o seed=18446744073709551610,$IDX --print-order 0 6 "$DS"
bad "seed empty" "seed" -o seed=,$IDX "$DS"
bad "seed missing" "seed=N is required" -o $IDX "$DS"
bad "world=0" "world=0" -o seed=1,world=0,$IDX "$DS"
bad "world not a number" "world=two" -o seed=1,world=two,$IDX "$DS"
bad "ranks beyond world" "ranks=0-2" -o seed=1,world=2,ranks=0-2,$IDX "$DS"
bad "ranks entirely outside world" "ranks=4-5" -o seed=1,world=4,ranks=4-5,$IDX "$DS"
bad "ranks reversed" "ranks=1-0" -o seed=1,world=2,ranks=1-0,$IDX "$DS"
bad "ranks not numbers" "ranks=a-b" -o seed=1,world=2,ranks=a-b,$IDX "$DS"
bad "batch=0" "batch=0" -o seed=1,batch=0,$IDX "$DS"
bad "epochs=0" "epochs=0" -o seed=1,epochs=0,$IDX "$DS"
bad "epochs < start_epoch" "start_epoch=3" -o seed=1,epochs=2,start_epoch=3,$IDX "$DS"
bad "epochs = start_epoch" "start_epoch=2" -o seed=1,epochs=2,start_epoch=2,$IDX "$DS"
bad "unknown -o option" "bogus=3" -o seed=1,bogus=3,$IDX "$DS"
bad "bad size suffix" "ram=12Q" -o seed=1,ram=12Q,$IDX "$DS"
bad "unknown sampler" "sampler=foo" -o seed=1,sampler=foo,$IDX "$DS"
bad "unknown order" "order=random" -o seed=1,order=random,$IDX "$DS"

# --- command line
bad "unknown long option" "--bogus" --bogus -o seed=1,$IDX "$DS"
bad "unknown short option" "-x" -x -o seed=1,$IDX "$DS"
bad "-o without its value" "-o" "$DS" -o
bad "--json with a value" "--json=3" --json=3 -o seed=1,$IDX "$DS"
bad "--nodes 0" "--nodes 0" --nodes 0 -o seed=1,$IDX "$DS"
bad "--node beyond --nodes" "--node 2" --nodes 2 --node 2 -o seed=1,$IDX "$DS"
bad "--print-order rank >= world" "--print-order 2" --print-order 2 0 -o seed=1,world=2,$IDX "$DS"
bad "--print-order rank not a number" "--print-order x" --print-order x 0 -o seed=1,$IDX "$DS"
bad "--print-order epoch not a number" "--print-order 0 y" --print-order 0 y -o seed=1,$IDX "$DS"
bad "--print-order epoch >= 2^32" "--print-order 0 4294967296" \
    --print-order 0 4294967296 -o seed=1,$IDX "$DS"
bad "--synthetic 0" "--synthetic 0" --synthetic 0 -o seed=1
bad "--synthetic with a SOURCE" "--synthetic" --synthetic 10 -o seed=1 "$DS"
bad "--mean-size bad" "--mean-size 3X" --synthetic 10 --mean-size 3X -o seed=1
bad "no SOURCE" "SOURCE" -o seed=1,$IDX
bad "two SOURCEs" "SOURCE" -o seed=1,$IDX "$DS" "$DS"

# --- SOURCE
bad "nonexistent SOURCE" "$T/nope" -o seed=1,$IDX "$T/nope"
bad "SOURCE is a file" "$DS/README.txt" -o seed=1,$IDX "$DS/README.txt"

# --- sampler=list:FILE (format: include/clairfs/sampler.h); FILE:LINE named.
list n7 $'clairfs-sampler-list world=1 epochs=1 n=7\nepoch 0 rank 0: 0 1\n'
bad "list: header n differs from the dataset" "$T/n7.list:1:" -o seed=1,$IDX,sampler=list:"$T/n7.list" "$DS"
list w2 $'clairfs-sampler-list world=2 epochs=1\nepoch 0 rank 0: 0 1\nepoch 0 rank 1: 2 3\n'
bad "list: header world differs from world=" "$T/w2.list:1:" -o seed=1,$IDX,sampler=list:"$T/w2.list" "$DS"
list lockstep $'clairfs-sampler-list world=2 epochs=1\nepoch 0 rank 0: 5 4 3\nepoch 0 rank 1: 2 1\n'
bad "list: ranks with different counts" "$T/lockstep.list:3:" \
    -o seed=1,world=2,$IDX,sampler=list:"$T/lockstep.list" "$DS"
list extra $'clairfs-sampler-list world=1 epochs=1\nepoch 0 rank 0: 0 1\nepoch 1 rank 0: 2 3\n'
bad "list: more epochs than the header" "$T/extra.list:3:" -o seed=1,$IDX,sampler=list:"$T/extra.list" "$DS"
list dup $'clairfs-sampler-list world=1 epochs=1\nepoch 0 rank 0: 0 1\nepoch 0 rank 0: 2 3\n'
bad "list: a rank listed twice" "$T/dup.list:3:" -o seed=1,$IDX,sampler=list:"$T/dup.list" "$DS"
list oor $'clairfs-sampler-list world=1 epochs=1\n\nepoch 0 rank 0: 5 4 6\n'
bad "list: index out of range" "$T/oor.list:3:" -o seed=1,$IDX,sampler=list:"$T/oor.list" "$DS"
list huge $'clairfs-sampler-list world=1 epochs=1\nepoch 0 rank 0: 99999999999999999999\n'
bad "list: index beyond 2^64" "$T/huge.list:2:" -o seed=1,$IDX,sampler=list:"$T/huge.list" "$DS"
list nonnum $'clairfs-sampler-list world=1 epochs=1\n# comment\nepoch 0 rank 0: 5 x 3\n'
bad "list: non-numeric index" "$T/nonnum.list:3:" -o seed=1,$IDX,sampler=list:"$T/nonnum.list" "$DS"
list neg $'clairfs-sampler-list world=1 epochs=1\nepoch 0 rank 0: 5 -1 3\n'
bad "list: negative index" "$T/neg.list:2:" -o seed=1,$IDX,sampler=list:"$T/neg.list" "$DS"
list gap $'clairfs-sampler-list world=1 epochs=3\nepoch 0 rank 0: 0 1\nepoch 2 rank 0: 1 2\n'
bad "list: missing epoch in the middle" "$T/gap.list:3:" -o seed=1,$IDX,sampler=list:"$T/gap.list" "$DS"
list short $'clairfs-sampler-list world=1 epochs=2\nepoch 0 rank 0: 0 1\n'
bad "list: missing last epoch" "$T/short.list:2:" -o seed=1,$IDX,sampler=list:"$T/short.list" "$DS"
list norank $'clairfs-sampler-list world=2 epochs=1\nepoch 0 rank 0: 0 1\n'
bad "list: missing rank" "$T/norank.list:2:" -o seed=1,world=2,$IDX,sampler=list:"$T/norank.list" "$DS"
list nohdr $'epoch 0 rank 0: 0 1\n'
bad "list: no header" "$T/nohdr.list:1:" -o seed=1,$IDX,sampler=list:"$T/nohdr.list" "$DS"
bad "list: file missing" "$T/absent.list" -o seed=1,$IDX,sampler=list:"$T/absent.list" "$DS"
bad "list: error also with --print-order" "$T/oor.list:3:" \
    --print-order 0 0 -o seed=1,$IDX,sampler=list:"$T/oor.list" "$DS"

# --- order=list:FILE
printf 'cat/a.jpg\ndog/nope.jpg\n' >"$T/order.bad"
bad "order=list: path not in the source" "$T/order.bad line 2" \
    -o seed=1,$IDX,order=list:"$T/order.bad" "$DS"
bad "order=list: file missing" "$T/order.absent" -o seed=1,$IDX,order=list:"$T/order.absent" "$DS"

# --- good paths, exact output
# ok DESCRIPTION EXPECTED-STDOUT ARGS...
ok() {
    local what=$1 want=$2 rc
    shift 2
    "$PLAN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -ne 0 ] || [ -s "$T/err" ]; then
        fail "$what: exit $rc: $(cat "$T/err")"
    elif [ "$(cat "$T/out")" != "$want" ]; then
        fail "$what: got"$'\n'"$(cat "$T/out")"$'\n'"expected"$'\n'"$want"
    else
        echo "ok: $what"
    fi
}
e0=$'dog/sub/z.png\ncat/a.jpg\ndog/x.jpg\ncat/b.PNG\ndog/y.jpg\ncat/c.jpeg'
e1=$'cat/c.jpeg\ncat/c.jpeg\ncat/a.jpg\ndog/y.jpg'
ok "--print-order 0 0, list sampler on ImageFolder" "$e0" \
    --print-order 0 0 -o seed=1,$IDX,sampler=list:"$good" "$DS"
ok "--print-order 0 1" "$e1" --print-order 0 1 -o seed=1,$IDX,sampler=list:"$good" "$DS"
ok "--print-order 0 2 cycles to the list's epoch 0" "$e0" \
    --print-order 0 2 -o seed=1,$IDX,sampler=list:"$good" "$DS"
# -0: the same paths, NUL-terminated.
"$PLAN" -0 --print-order 0 1 -o seed=1,$IDX,sampler=list:"$good" "$DS" >"$T/out0" 2>"$T/err"
[ "$(tr '\0' '\n' <"$T/out0")" = "$e1" ] && [ "$(tr -cd '\0' <"$T/out0" | wc -c)" -eq 4 ] &&
    [ "$(tr -cd '\n' <"$T/out0" | wc -c)" -eq 0 ] && echo "ok: -0" || fail "-0: $(od -c "$T/out0" | head -3)"
# world=2: rank 1 reads its own line.
list two $'clairfs-sampler-list world=2 epochs=1 n=6\nepoch 0 rank 0: 0 1 2\nepoch 0 rank 1: 5 3 3\n'
ok "--print-order 1 0 with world=2" $'dog/sub/z.png\ndog/x.jpg\ndog/x.jpg' \
    --print-order 1 0 -o seed=1,world=2,$IDX,sampler=list:"$T/two.list" "$DS"
# order=list maps index i to line i+1 of the file.
printf 'dog/notes.txt\ncat/a.jpg\n' >"$T/order.good"
list o2 $'clairfs-sampler-list world=1 epochs=1 n=2\nepoch 0 rank 0: 1 0 1\n'
ok "order=list: + sampler=list:" $'cat/a.jpg\ndog/notes.txt\ncat/a.jpg' \
    --print-order 0 0 -o seed=1,$IDX,order=list:"$T/order.good",sampler=list:"$T/o2.list" "$DS"
# torch-ddp, world=1: a permutation of exactly the six indexed files.
"$PLAN" --print-order 0 3 -o seed=42,$IDX "$DS" 2>"$T/err" | sort >"$T/perm"
[ "$(cat "$T/perm")" = "$(printf '%s\n' "$e0" | sort)" ] && [ ! -s "$T/err" ] &&
    echo "ok: torch-ddp order is a permutation of the indexed files" ||
    fail "torch-ddp permutation: $(cat "$T/perm" "$T/err")"

# --json parses and has the expected keys and figures (list sampler: 6 + 4 reads).
if "$PLAN" --json -o seed=1,epochs=2,$IDX,sampler=list:"$good" "$DS" >"$T/json" 2>"$T/err" &&
    [ ! -s "$T/err" ] && "$PYTHON" -m json.tool "$T/json" >/dev/null; then
    echo "ok: --json parses (json.tool)"
    "$PYTHON" - "$T/json" <<'EOF' || fail "--json content"
import json, sys
d = json.load(open(sys.argv[1]))
def eq(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, expected {want!r}")
eq("top keys", sorted(d), ["dataset", "nodes", "simulation"])
eq("dataset", d["dataset"], {"files": 6, "bytes": 2100, "epochs": 2, "owned_bytes": 2100})
eq("nodes", len(d["nodes"]), 1)
n = d["nodes"][0]
for k in ["node", "rank_first", "rank_count", "reads", "read_bytes", "ram_files", "ram_bytes",
          "ssd_files", "ssd_bytes", "unheld_files", "owned_files", "owned_bytes",
          "local_read_bytes", "peer_read_bytes", "pfs_read_bytes", "pfs_bytes_per_epoch"]:
    if k not in n:
        sys.exit(f"node key {k} missing")
# epoch 0: every file once (2100 B); epoch 1: c, c, a, y = 300+300+100+500.
eq("node reads", (n["node"], n["rank_first"], n["rank_count"], n["reads"], n["read_bytes"]),
   (0, 0, 1, 10, 3300))
eq("ram tier holds all", (n["ram_files"], n["ram_bytes"], n["unheld_files"]), (6, 2100, 0))
eq("pfs bytes", n["pfs_read_bytes"], 2100)
sim = d["simulation"]
eq("policies", sorted(sim["policies"]), ["clairvoyant", "lru", "nocache", "static"])
for name, pol in sim["policies"].items():
    eq(name + " keys", sorted(pol), ["epochs", "hit_rate", "hit_rate_after_first_epoch",
                                     "peer_rate_after_first_epoch"])
    eq(name + " epochs", [(e["epoch"], e["reads"], e["read_bytes"]) for e in pol["epochs"]],
       [(0, 6, 2100), (1, 4, 1200)])
nc = sim["policies"]["nocache"]
eq("nocache hit rate", nc["hit_rate"], 0)
eq("nocache pfs bytes", [e["pfs_bytes"] for e in nc["epochs"]], [2100, 1200])
# Everything fits in the default 1G RAM tier: after epoch 0 the clairvoyant
# policy hits every read.
eq("clairvoyant after e0", sim["policies"]["clairvoyant"]["hit_rate_after_first_epoch"], 1)
EOF
    [ $? -eq 0 ] && echo "ok: --json keys and figures"
else
    fail "--json: $(cat "$T/err"; head -c 300 "$T/json")"
fi

# --synthetic 1000: no SOURCE; plan, table, json and a full permutation.
if "$PLAN" --synthetic 1000 --mean-size 4K -o seed=3,epochs=3,ram=1M >"$T/syn" 2>"$T/err" &&
    [ ! -s "$T/err" ] && head -n 1 "$T/syn" | grep -q '^dataset: 1000 files, ' &&
    grep -qE '^clairvoyant +[0-9.]+%' "$T/syn"; then
    echo "ok: --synthetic 1000"
else
    fail "--synthetic 1000: $(cat "$T/err"; head -5 "$T/syn")"
fi
"$PLAN" --synthetic 1000 --json --no-sim -o seed=3,epochs=3 >"$T/synj" 2>"$T/err" &&
    "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dataset"]["files"] == 1000 and d["dataset"]["epochs"] == 3 and d["nodes"][0]["reads"] == 3000 and "simulation" not in d, d' "$T/synj" &&
    echo "ok: --synthetic 1000 --json --no-sim" || fail "--synthetic --json: $(cat "$T/err")"
n=$("$PLAN" --synthetic 1000 --print-order 0 1 -o seed=3 2>"$T/err" | sort -u | wc -l)
[ "$n" -eq 1000 ] && [ ! -s "$T/err" ] && echo "ok: --synthetic --print-order: 1000 distinct paths" ||
    fail "--synthetic --print-order: $n distinct: $(cat "$T/err")"

# ssd_dir= without ssd=: the SSD tier is half the free space of ssd_dir, as
# the mount sizes it (ram=0, so the SSD tier holds the whole dataset), and a
# missing ssd_dir is one line naming it.
mkdir -p "$T/ssd"
if "$PLAN" --synthetic 100 --mean-size 1K --json --no-sim -o seed=3,epochs=2,ram=0,ssd_dir="$T/ssd" \
        >"$T/ssdj" 2>"$T/err" && [ ! -s "$T/err" ] &&
    "$PYTHON" -c 'import json,sys; n=json.load(open(sys.argv[1]))["nodes"][0]; assert n["ssd_files"] == 100 and n["ram_files"] == 0, n' "$T/ssdj"; then
    echo "ok: ssd_dir without ssd= plans an SSD tier of half the free space"
else
    fail "ssd_dir without ssd=: $(cat "$T/err"; head -c 300 "$T/ssdj")"
fi
bad "ssd_dir missing" "ssd_dir $T/nossd" --synthetic 10 -o seed=1,ssd_dir="$T/nossd"

# no_peers: each node plans alone, for its block of ranks, as its mount
# does: node 1 of 2 (world=4) is the one-node plan of ranks=2-3, row and
# simulation alike, and nothing is read from a peer.
A='seed=3,epochs=3,world=4,ram=2M'
if "$PLAN" --synthetic 500 --json --nodes 2 --node 1 -o "$A,no_peers" >"$T/np" 2>"$T/err" &&
    "$PLAN" --synthetic 500 --json -o "$A,ranks=2-3" >"$T/np1" 2>>"$T/err" && [ ! -s "$T/err" ] &&
    "$PYTHON" - "$T/np" "$T/np1" <<'PY'
import json, sys
alone, one = (json.load(open(f)) for f in sys.argv[1:3])
a, o = alone["nodes"], one["nodes"]
assert len(a) == 1 and a[0]["node"] == 1 and a[0]["peer_read_bytes"] == 0, a
a[0]["node"] = 0
assert a == o, (a, o)
assert alone["simulation"]["policies"] == one["simulation"]["policies"], "simulation differs"
PY
then
    echo "ok: no_peers plans each node alone with its block of ranks"
else
    fail "no_peers per node: $(cat "$T/err"; head -c 300 "$T/np")"
fi

# ranks=cyclic: node k of 2 plans ranks k and k + 2 of world 4 (srun
# --distribution=cyclic), every read of the run once across the nodes.
if "$PLAN" --synthetic 500 --json --no-sim --nodes 2 -o "$A,ranks=cyclic" >"$T/cyc" 2>"$T/err" &&
    "$PYTHON" - "$T/cyc" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))["nodes"]
got = [(x["node"], x["rank_first"], x["rank_count"], x["rank_stride"], x["reads"]) for x in n]
assert got == [(0, 0, 2, 2, 750), (1, 1, 2, 2, 750)], got
PY
then
    echo "ok: ranks=cyclic plans node k's ranks k, k + 2"
else
    fail "ranks=cyclic: $(cat "$T/err"; head -c 300 "$T/cyc")"
fi

# The catalog went where index= said, and nothing into the user's cache dir
# or home: clairfs-plan writes an index only where index= names one, and
# without it (--synthetic, and this run on SOURCE) keeps the catalog in memory.
"$PLAN" --print-order 0 0 -o seed=1,sampler=list:"$good" "$DS" >"$T/out" 2>"$T/err" &&
    [ "$(cat "$T/out")" = "$e0" ] || fail "SOURCE without index=: $(cat "$T/err")"
[ -s "$T/idx/data.mdb" ] && echo "ok: the catalog's index is in index=" ||
    fail "index=$T/idx holds no data.mdb: $(ls -A "$T/idx" 2>&1)"
if [ -e "$T/home" ] || [ -e "$T/cache" ]; then
    fail "written into HOME or XDG_CACHE_HOME: $(find "$T/home" "$T/cache" 2>/dev/null | head)"
else
    echo "ok: nothing written into HOME or XDG_CACHE_HOME"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
