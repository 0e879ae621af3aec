#!/bin/bash
# clairfs-plan --env: the epoch table on a small synthetic shape, and its
# bad input.  What must hold whatever the numbers: per epoch after the
# first, clairvoyant PFS bytes <= static <= no cache; every epoch takes at
# least its no-I/O lower bound; with aggregate RAM >= the dataset the
# clairvoyant policy reads nothing from the PFS after epoch 0.  What is
# known exactly: no cache reads the dataset once per epoch (world divides
# it), the lower bound is samples per rank x compute_per_sample, and a
# sampled run (--sample) stands for the dataset it names.  Bad input: a
# non-zero exit, nothing on stdout, one line on stderr naming the option
# or FILE:LINE.  No FUSE needed.
#
# usage: test_plan_table.sh PATH/TO/clairfs-plan
set -u
PLAN=${1:-${CLAIRFS_PLAN:-}}
[ -n "$PLAN" ] || { echo "usage: test_plan_table.sh clairfs-plan" >&2; exit 2; }
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
T=$(mktemp -d /tmp/clairfs-plan-table.XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME=$T/home XDG_CACHE_HOME=$T/cache
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# 2000 files of 55-165 KB (about 220 MB); 150 MiB of RAM per node: one node
# holds part of it, two or four hold all of it.
ENV=$T/small.env
cat >"$ENV" <<'EOF'
# a small cluster: the PFS saturates at 4 readers
pfs_bw = 1:100M 2:150M 4:200M
net_bw = 1G
net_latency = 1e-5
ram = 150M
ram_bw = 10G
compute_per_sample = 0.001
ranks_per_node = 1
EOF
SHAPE=(--synthetic 2000 -o seed=7,epochs=4)

if ! "$PLAN" --env "$ENV" --table 2,4 "${SHAPE[@]}" --json >"$T/table.json" 2>"$T/err"; then
    fail "--json table: $(cat "$T/err")"
fi
"$PYTHON" - "$T/table.json" <<'EOF' || fail "table invariants (above)"
import json, sys
t = json.load(open(sys.argv[1]))
bad = []
ds = t["dataset"]
if ds["files"] != 2000 or ds["simulated_files"] != 2000 or ds["epochs"] != 4:
    bad.append(f"dataset {ds}")
rows = {(r["nodes"], r["policy"]): r for r in t["rows"]}
if sorted(rows) != sorted((n, p) for n in (2, 4)
                          for p in ("nocache", "lru", "static", "clairvoyant")):
    bad.append(f"rows {sorted(rows)}")
for n in (2, 4):
    noc, st, cv = rows[n, "nocache"], rows[n, "static"], rows[n, "clairvoyant"]
    for e in range(4):
        # No cache reads every file once per epoch: exactly the dataset.
        if noc["epochs"][e]["pfs_bytes"] != ds["bytes"]:
            bad.append(f"{n} nodes epoch {e}: nocache {noc['epochs'][e]['pfs_bytes']} "
                       f"!= {ds['bytes']}")
        for r in rows[n, "nocache"], rows[n, "lru"], st, cv:
            x = r["epochs"][e]
            # 2000 / n ranks x 1 ms, and never faster than that.
            if abs(x["compute"] - 2.0 / n) > 1e-9 or x["time"] < x["compute"]:
                bad.append(f"{n} {r['policy']} epoch {e}: {x}")
        if e == 0:
            continue
        c, s, o = (r["epochs"][e]["pfs_bytes"] for r in (cv, st, noc))
        if not c <= s <= o:
            bad.append(f"{n} nodes epoch {e}: pfs clairvoyant {c} static {s} nocache {o}")
        # Aggregate RAM (n x 150 MiB) >= the dataset: nothing from the PFS.
        if c > 0.001 * ds["bytes"]:
            bad.append(f"{n} nodes epoch {e}: clairvoyant still reads {c} from the PFS")
    if noc["epoch_time_after"] < noc["no_io_time_after"] or noc["pfs_bytes_epoch0"] <= 0:
        bad.append(f"{n} nodes nocache {noc}")
    # The PFS alone: 220 MB at 150 or 200 MB/s is over a second, far above
    # the 1 or 0.5 s of compute: bound by the PFS.
    if noc["epochs"][1]["bound"] != "pfs" or noc["epochs"][1]["readers"] != n:
        bad.append(f"{n} nodes nocache epoch 1: {noc['epochs'][1]}")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# The sampled model: 2000 files simulated for 4000, everything doubled;
# the lower bound is 4000 / 2 ranks x 1 ms.
if "$PLAN" --env "$ENV" --nodes 2 --synthetic 4000 --sample 2000 -o seed=7,epochs=2 --json \
        >"$T/sampled.json" 2>"$T/err"; then
    "$PYTHON" - "$T/table.json" "$T/sampled.json" <<'EOF' || fail "sampled model (above)"
import json, sys
full, s = (json.load(open(p)) for p in sys.argv[1:])
bad = []
if s["dataset"]["files"] != 4000 or s["dataset"]["simulated_files"] != 2000:
    bad.append(f"dataset {s['dataset']}")
if s["dataset"]["bytes"] != 2 * full["dataset"]["bytes"]:
    bad.append(f"bytes {s['dataset']['bytes']} != 2 x {full['dataset']['bytes']}")
noc = [r for r in s["rows"] if r["policy"] == "nocache"][0]
if noc["pfs_bytes_epoch0"] != s["dataset"]["bytes"] or abs(noc["no_io_time_after"] - 2.0) > 1e-9:
    bad.append(f"nocache {noc}")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
else
    fail "--sample: $(cat "$T/err")"
fi

# The text table: two header lines, the column line, 4 policies x 2 groups.
if "$PLAN" --env "$ENV" --table 2,4 "${SHAPE[@]}" >"$T/table.txt" 2>"$T/err"; then
    rows=$(awk '$1 ~ /^[0-9]+$/' "$T/table.txt" | wc -l)
    [ "$rows" = 8 ] || fail "text table has $rows rows, want 8: $(cat "$T/table.txt")"
    head -1 "$T/table.txt" | grep -q "^cluster $ENV: 1 ranks/node" ||
        fail "text header: $(head -1 "$T/table.txt")"
else
    fail "text table: $(cat "$T/err")"
fi
# The preset runs (one small group).
"$PLAN" --env lassen --nodes 2 --synthetic 800 -o seed=1,epochs=2 >"$T/lassen.txt" 2>"$T/err" &&
    grep -q '^cluster lassen: 4 ranks/node' "$T/lassen.txt" || fail "--env lassen: $(cat "$T/err")"

# --- Bad input: exit 1 or 2, no stdout, one stderr line with the text.
expect_error() {
    local want=$1
    shift
    "$PLAN" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 0 ] || [ -s "$T/out" ] || [ "$(wc -l <"$T/err")" != 1 ] ||
        ! grep -qF -- "$want" "$T/err"; then
        fail "$* -> rc $rc, stdout $(wc -c <"$T/out") bytes, stderr: $(cat "$T/err") (want: $want)"
    fi
}
printf 'pfs_bw = 1:1M\nnet_bw = fast\n' >"$T/bad.env"
expect_error "$T/bad.env:2: net_bw = fast: expected a positive bandwidth" \
    --env "$T/bad.env" "${SHAPE[@]}"
expect_error "env $T/none.env: No such file or directory" --env "$T/none.env" "${SHAPE[@]}"
expect_error "--table and --sample are for --env" --table 2 "${SHAPE[@]}"
expect_error "--table 2,0: expected up to 16 node counts" --env lassen --table 2,0 "${SHAPE[@]}"
expect_error "--table 2,,x: expected" --env lassen --table 2,,x "${SHAPE[@]}"
expect_error "--sample 3000: needs --synthetic with at least as many files" \
    --env lassen --sample 3000 "${SHAPE[@]}"
expect_error "--sample 0: expected a file count" --env lassen --sample 0 "${SHAPE[@]}"
expect_error "--env prints the epoch table" --env lassen --nodes 2 --node 1 "${SHAPE[@]}"
expect_error "--env prints the epoch table" --env lassen --synthetic 100 -o seed=1,no_peers

[ $failures -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "plan_table: ok"
