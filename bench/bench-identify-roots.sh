#!/usr/bin/env bash
# A dataset root below the mount's, measured: the tree is ImageNet-shaped
# (ROOT/train/<1000 classes>/*.JPEG, ROOT/val/<classes>/*.JPEG, a few
# files at ROOT), mounted with nothing registered, and a torch trainer
# reads ImageFolder(MNT/train) (the bytes of each file, not decoded).
#
# Part 1, per --files N: from the first open below train/ to identified.
# One process, DataLoader(shuffle=True, generator=g seeded --seed, batch
# 32, 2 workers), reading until the mount's
# clairfs_order_identified{root="train"} is 1 (at most --cap s).  Printed:
# the mount's own figure (its log's "identify: root train (N samples):
# ... after K opens in T s", counted from the root's first open), and the
# same seen from outside (the trainer's first item to the gauge, polled
# every 0.2 s), with the opens the trainer had made by then.
#
# Part 2: the training epochs' wall time with the validation pass
# predicted against the same run with it unpredicted
# (CLAIRFS_NO_EVAL_PREDICT=1: named, not predicted), side by side: the
# same tree (train/ of --files' first N, val/ of --val files), each mount
# fresh over clairfs-pfsemu (--pfs, a loaded PFS's cost per open), the
# same trainer: --epochs epochs of the shuffled training order, each
# followed by the classification reference's evaluate() (ImageFolder(MNT/
# val), SequentialSampler, batch 32, 2 fresh workers), pausing after epoch
# 0 until the order is identified (at most 120 s, not counted).  Printed
# per row (unpredicted, predicted, for each --ram): each epoch's training
# and evaluation seconds, the sum over
# epochs 1.. (what prediction changes), the validation hits, and the PFS
# reads.  Figures, not assertions.
#
# usage: bench/bench-identify-roots.sh [--build DIR] [--files "N ..."] [--val N]
#            [--epochs E] [--seed S] [--cap S] [--pfs OPTS] [--ram "SIZE ..."]
#            [--cache DIR] [--no-part1] [--no-part2]
#   --files  training set sizes for part 1 (default "10000 1281167"); part 2
#            uses the first
#   --val    validation files (default 2000)
#   --pfs    clairfs-pfsemu options for part 2 (default
#            latency_open=0.002,latency_read=0.0005,bandwidth=200000000)
#   --cache  keep part 1's trees in DIR/roots-N and reuse them there (a
#            1 281 167-file tree takes minutes to write and to remove)
#   --ram    part 2's ram= values, a pair of rows each (default "2G 24M": the
#            whole tree, and about half the training files' 4 KiB pages
#            beside the validation set's at the default sizes)
# Environment: BENCH_TMP (default /tmp: a 1 281 167-file tree is ~5 GB of
# tmpfs pages), BENCH_KEEP=1 (keep the work directory).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache= build=${CLAIRFS_BUILD:-build} files="10000 1281167" val=2000 epochs=4 seed=7 cap=600
pfs_opts=latency_open=0.002,latency_read=0.0005,bandwidth=200000000 part1=1 part2=1 rams="2G 24M"
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --files) files=${2:?}; shift 2 ;;
    --val) val=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --seed) seed=${2:?}; shift 2 ;;
    --cap) cap=${2:?}; shift 2 ;;
    --pfs) pfs_opts=${2:?}; shift 2 ;;
    --ram) rams=${2:?}; shift 2 ;;
    --cache) cache=${2:?}; shift 2 ;;
    --no-part1) part1=0; shift ;;
    --no-part2) part2=0; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-identify-roots: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for v in $files "$val" "$epochs" "$seed" "$cap"; do
    case $v in
    '' | *[!0-9]*) echo "bench-identify-roots: whole numbers expected, not $v" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
CLAIRFS=$build/clairfs PFSEMU=$build/clairfs-pfsemu PY=/usr/bin/python3
for b in "$CLAIRFS" "$PFSEMU"; do
    [ -x "$b" ] || { echo "bench-identify-roots: $b is not built" >&2; exit 1; }
done
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "bench-identify-roots: torch and torchvision do not import under $PY" >&2; exit 1; }

bench_name=bench-identify-roots
. "$top/bench/mount_cleanup.sh"
work=$(mktemp -d "${BENCH_TMP:-/tmp}/clairfs-benchroots.XXXXXX") || exit 1

# tree DIR NTRAIN NVAL: train/ over 1000 classes, val/ over 50, LICENSE.
tree() {
    "$PY" - "$@" <<'PY'
import os, sys
root, ntrain, nval = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
blob = bytes(range(256)) * 2
for part, n, classes in (("train", ntrain, 1000), ("val", nval, 50)):
    for c in range(classes):
        wnid = "n%08d" % (1440764 + c * 4111)
        d = os.path.join(root, part, wnid)
        os.makedirs(d)
        for j in range(n // classes + (c < n % classes)):
            fd = os.open("%s/%s_%d.JPEG" % (d, wnid, j + 1), flags, 0o644)
            k = 64 + (j * 37 + c) % 193
            os.write(fd, blob[k:k * 2])
            os.close(fd)
with open(os.path.join(root, "LICENSE"), "w") as f:
    f.write("synthetic\n")
PY
}

# mount_at SRC MNT LOG RAM [ENV...]: clairfs with nothing registered but ram=.
mount_at() {
    local src=$1 mnt=$2 log=$3 ram=$4
    shift 4
    mkdir -p "$mnt"
    env "$@" "$CLAIRFS" -f -o ram="$ram",index="$mnt.index" "$src" "$mnt" >"$log" 2>&1 &
    pids+=($!)
    mnts+=("$mnt")
    for _ in $(seq 600); do [ -e "$mnt/.clairfs/ready" ] && return 0; sleep 0.5; done
    echo "bench-identify-roots: $mnt did not mount:" >&2
    tail -3 "$log" >&2
    return 1
}
metric() { awk -v k="$2" '$1 == k { print $2 }' "$1/.clairfs/metrics"; }

cat >"$work/trainer.py" <<'PY'
import os, sys, time
import torch
from torch.utils.data import DataLoader, SequentialSampler
from torchvision.datasets import ImageFolder

mnt, seed, epochs, mode, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]


def read(path):
    with open(path, "rb") as f:
        return len(f.read())


def metric(name):
    with open(os.path.join(mnt, ".clairfs/metrics")) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == name:
                return v.strip()
    return None


def ident():
    return metric('clairfs_order_identified{root="train"}') == "1"


class Stamped(ImageFolder):
    def __getitem__(self, i):
        if not hasattr(self, "first"):
            self.first = True
            with open("%s.first.%d" % (out, os.getpid()), "w") as f:
                f.write("%.6f\n" % time.time())
        return read(self.samples[i][0])


train = Stamped(os.path.join(mnt, "train"), loader=read)
g = torch.Generator()
g.manual_seed(seed)
loader = DataLoader(train, shuffle=True, generator=g, batch_size=32, num_workers=2,
                    collate_fn=list)
log = open(out, "w")
if mode == "identify":  # part 1: until identified
    n, t0 = 0, time.time()
    while True:
        for items in loader:
            n += len(items)
            if ident() or time.time() - t0 > epochs:
                log.write("identified %.6f opens %d %s\n" % (time.time(), n, ident()))
                sys.exit(0)
val = ImageFolder(os.path.join(mnt, "val"), loader=read)
for e in range(epochs):
    t = time.time()
    for items in loader:
        pass
    t_train = time.time() - t
    t = time.time()
    for items in DataLoader(val, sampler=SequentialSampler(val), batch_size=32, num_workers=2,
                            collate_fn=list):
        pass
    t_eval = time.time() - t
    log.write("epoch %d train %.3f eval %.3f\n" % (e, t_train, t_eval))
    log.flush()
    if e == 0:
        t = time.time()
        while not ident() and time.time() - t < 120:
            time.sleep(0.2)
PY

if [ "$part1" = 1 ]; then
    echo "== from the first open below train/ to identified (torch, seed $seed, 2 workers)"
    printf '%-9s %-44s %-24s %s\n' files "the mount's log" "seen from outside" "load"
    for n in $files; do
        src=${cache:+$cache/roots-$n} mnt=$work/mnt-$n
        src=${src:-$work/tree-$n}
        if [ ! -e "$src.complete" ]; then
            rm -rf --one-file-system "$src"
            tree "$src" "$n" 100 || { echo "bench-identify-roots: the tree failed" >&2; exit 1; }
            touch "$src.complete" # beside the tree: a file in it would be in the catalog
        fi
        mount_at "$src" "$mnt" "$work/mount-$n.log" 2G || exit 1
        "$PY" "$work/trainer.py" "$mnt" "$seed" "$cap" identify "$work/ident-$n" ||
            echo "bench-identify-roots: the trainer failed at n=$n" >&2
        first=$(cat "$work/ident-$n".first.* 2>/dev/null | sort -n | head -1)
        read -r _ t_id _ opens ok <"$work/ident-$n"
        line=$(grep -o 'identify: root train ([0-9]* samples): .*' "$work/mount-$n.log" | head -1)
        said=$(echo "$line" | grep -o 'after [0-9]* opens in [0-9.]* s')
        printf '%-9s %-44s %-24s %s\n' "$n" "${said:-not identified}" \
            "$(awk -v a="$t_id" -v b="$first" 'BEGIN { printf "%.1f s", a - b }'), $opens opens" \
            "$(cut -d' ' -f1 /proc/loadavg) ($ok)"
        fusermount3 -u "$mnt"
        rm -rf --one-file-system "$mnt.index"
        [ -n "$cache" ] || rm -rf --one-file-system "$src"
    done
fi

if [ "$part2" = 1 ]; then
    n=${files%% *}
    src=$work/tree2 under=$work/pfs
    tree "$src" "$n" "$val" || exit 1
    mkdir -p "$under"
    "$PFSEMU" -f -o "$pfs_opts" "$src" "$under" >"$work/pfsemu.log" 2>&1 &
    pids+=($!)
    mnts+=("$under")
    for _ in $(seq 50); do mountpoint -q "$under" && break; sleep 0.1; done
    echo "== validation predicted or not: train/ $n files, val/ $val, $epochs epochs, pfsemu $pfs_opts"
    for ram in $rams; do
    for how in unpredicted predicted; do
        row=$how-$ram mnt=$work/mnt-$how-$ram env=()
        [ "$how" = unpredicted ] && env=(CLAIRFS_NO_EVAL_PREDICT=1)
        mount_at "$under" "$mnt" "$work/mount-$row.log" "$ram" "${env[@]}" || exit 1
        "$PY" "$work/trainer.py" "$mnt" "$seed" "$epochs" epochs "$work/epochs-$row" ||
            echo "bench-identify-roots: the trainer failed ($row)" >&2
        sum=$(awk '$2 > 0 { s += $4 + $6 } END { printf "%.2f", s }' "$work/epochs-$row")
        evals=$(awk '$2 > 0 { s += $6 } END { printf "%.2f", s }' "$work/epochs-$row")
        printf '%-16s %s\n' "$row" "$(awk '{ printf "e%d %s+%s  ", $2, $4, $6 }' "$work/epochs-$row")"
        printf '%-16s epochs 1-%d: %s s (evaluation %s s); validation hit %s miss %s; pfs reads %s\n' \
            "" $((epochs - 1)) "$sum" "$evals" \
            "$(metric "$mnt" 'clairfs_prediction_total{phase="validation",result="hit"}')" \
            "$(metric "$mnt" 'clairfs_prediction_total{phase="validation",result="miss"}')" \
            "$(metric "$mnt" 'clairfs_reads_total{source="pfs"}')"
        fusermount3 -u "$mnt"
    done
    done
fi
