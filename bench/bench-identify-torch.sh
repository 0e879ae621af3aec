#!/usr/bin/env bash
# What identifying a real trainer's order costs at ImageNet's size:
# `clairfs-plan --identify` over all 2^32 seeds on the first opens of epoch 0
# of a real torch DataLoader (batch 32, 4 workers: batch b to worker b mod
# 4, the workers' opens interleaved, as "PID PPID PATH" lines), over a
# --synthetic catalog of N files (no files needed).  Per size and seed:
# the opens needed (32, the least identification waits for, doubled until
# it identifies) and the wall time of that identification.  A seed near the
# end of the range (4000000000: the scan runs upwards from 0, 93 % of the
# 2^32 seeds) shows the full search; a small one (7) the usual case of a
# seed found at once.  Rows: DataLoader(shuffle=True, generator=g) at every
# size, DistributedSampler(seed=S) at world 1 at the largest.  Figures, not
# assertions; one identification runs at a time, at full priority.
#
# usage: bench/bench-identify-torch.sh [--build DIR] [--sizes N,N,...]
#            [--seeds S,S,...] [--kinds K,K]
#   --sizes   default 10000,100000,1281167
#   --seeds   default 7,4000000000
#   --kinds   the rows: torch (every size), torch-ddp (the largest); default
#             both.  torch-ddp alone is an unseeded epoch of torch-global
#             (a fresh generator's first randperm, as the mount learns
#             each epoch of a trainer that never seeds torch)
# The search runs on the CPUs this process may use: under `taskset -c 0`
# one thread, `taskset -c 0,1` two.
# Environment: BENCH_TMP (default /dev/shm).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CLAIRFS_BUILD:-build} sizes=10000,100000,1281167 seeds=7,4000000000 only=
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --sizes) sizes=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --kinds) only=,${2:?},; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-identify-torch: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
PLAN=$build/clairfs-plan TORCH_PY=/usr/bin/python3
[ -x "$PLAN" ] || { echo "bench-identify-torch: $PLAN is not built" >&2; exit 1; }
"$TORCH_PY" -c 'import torch' 2>/dev/null ||
    { echo "bench-identify-torch: torch does not import under $TORCH_PY" >&2; exit 1; }
work=$(mktemp -d "${BENCH_TMP:-/dev/shm}/clairfs-benchtorch.XXXXXX") || exit 1
trap 'rm -rf --one-file-system "$work"' EXIT
export HOME=$work/home XDG_CACHE_HOME=$work/cache
OPENS=512

# record KIND N SEED PATHS: the first $OPENS opens of epoch 0.
record() {
    "$TORCH_PY" - "$@" $OPENS <<'PY' 2>/dev/null
import sys
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

kind, n, seed, paths, opens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
batch, workers = 32, 4


class Indices(Dataset):
    def __len__(self):
        return n

    def __getitem__(self, i):
        return i


common = dict(batch_size=batch, num_workers=workers, collate_fn=list)
if kind == "torch":
    g = torch.Generator()
    g.manual_seed(seed)
    loader = DataLoader(Indices(), shuffle=True, generator=g, **common)
else:
    sampler = DistributedSampler(Indices(), num_replicas=1, rank=0, shuffle=True, seed=seed)
    sampler.set_epoch(0)
    loader = DataLoader(Indices(), sampler=sampler, **common)
stream = []
for b in loader:  # the loader's own batches, until every worker has enough
    stream += b
    if len(stream) >= opens + workers * batch:
        break
del loader
path = open(paths).read().split("\n")
readers = [[x for b in range(w, len(stream) // batch, workers)
            for x in stream[b * batch:(b + 1) * batch]] for w in range(workers)]
out = []
for j in range(max(map(len, readers))):
    out += ["%d 1000 %s" % (2000 + w, path[r[j]]) for w, r in enumerate(readers) if j < len(r)]
print("\n".join(out[:opens]))
PY
}

printf '%-8s %-10s %10s %6s %8s   %s\n' n sampler seed opens "s" "identified"
for n in ${sizes//,/ }; do
    { echo "clairfs-sampler-list world=1 epochs=1 n=$n"
      printf 'epoch 0 rank 0:'; seq 0 $((n - 1)) | tr '\n' ' '; echo; } >"$work/identity"
    "$PLAN" --synthetic "$n" -o seed=0,sampler=list:"$work/identity" --print-order 0 0 \
        >"$work/paths" || { echo "bench-identify-torch: no synthetic paths for $n" >&2; exit 1; }
    kinds=torch
    [ "$n" = "${sizes##*,}" ] && kinds="torch torch-ddp"
    for kind in $kinds; do
        [ -z "$only" ] || [ "${only#*,"$kind",}" != "$only" ] || continue
        for seed in ${seeds//,/ }; do
            record "$kind" "$n" "$seed" "$work/paths" >"$work/rec" ||
                { echo "bench-identify-torch: torch failed ($kind $n $seed)" >&2; exit 1; }
            for k in 32 64 128 256 512; do
                head -$k "$work/rec" >"$work/head"
                t0=$EPOCHREALTIME
                out=$("$PLAN" --synthetic "$n" --identify "$work/head" 2>&1)
                rc=$?
                t=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
                [ $rc -ne 1 ] && break
            done
            [ $rc -eq 0 ] || out="not identified (exit $rc): $out"
            printf '%-8s %-10s %10s %6s %8s   %s\n' "$n" "$kind" "$seed" "$k" "$t" "$out"
        done
    done
done
