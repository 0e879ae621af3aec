#!/bin/bash
# clairfs-plan --identify against real PyTorch: the index streams real
# DataLoaders yield (tests/golden/torch_orders.py; the frameworks' samplers
# from tests/golden/framework_orders.py) become recorded opens -
# each rank's batches dealt to its workers as torch deals them (batch b to
# worker b mod num_workers), the workers' opens interleaved, as "PID PPID
# PATH" lines - and must be identified with the exact seed, world, batch
# and workers; a sequential list, a real order with its head cut off, and
# a path the catalog lacks are refused with exit 1 / exit 2.  A torch-global
# trainer without a seed (torch.manual_seed, a model built, shuffle=True
# without a generator) is identified epoch by epoch, each line naming the
# private seed real torch drew for that epoch.  detectron2's stream (world
# 7, across its first pass) is identified offline too.  The searched
# seeds are a window around the true one (--seeds; ranges of all 2^32
# seeds are the unit test's, begun near their seed, and the benchmark's).
# A trainer on ImageFolder(SOURCE/train), with a validation pass over
# SOURCE/val in its record, is identified as its root's order, the line
# naming the root; one on timm's dataset of SOURCE/train as timm's order,
# one on YOLODataset(SOURCE/images/train) as ultralytics' order there.  Exits 77 without torch.
#
# usage: test_plan_identify.sh PATH/TO/clairfs-plan
set -u
PLAN=${1:-${CLAIRFS_PLAN:-}}
[ -n "$PLAN" ] || { echo "usage: test_plan_identify.sh clairfs-plan" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "SKIP: no torch in $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/clairfs-plan-identify.XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME=$T/home XDG_CACHE_HOME=$T/cache
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
N=3000

# The synthetic catalog's paths in index order, through an identity list.
{ echo "clairfs-sampler-list world=1 epochs=1 n=$N"
  printf 'epoch 0 rank 0:'; seq 0 $((N - 1)) | tr '\n' ' '; echo; } >"$T/identity.list"
"$PLAN" --synthetic $N -o seed=0,sampler=list:"$T/identity.list" --print-order 0 0 \
    >"$T/paths" || { echo "FAIL: cannot list the synthetic paths" >&2; exit 1; }

# record KIND SEED WORLD BATCH WORKERS EPOCHS [torch_orders args]: opens as
# PID PPID PATH.  Ranks are pids 1000 + r (parent 999); worker w of rank r
# is 2000 + 100 r + w (+ 10000 per epoch unless persistent), parent 1000 + r.
record() {
    local kind=$1 seed=$2 world=$3 batch=$4 workers=$5 epochs=$6
    shift 6
    local nw=() script=torch_orders.py
    [ "$workers" -gt 0 ] && nw=(--num-workers "$workers")
    case $kind in # the frameworks' samplers: their loaders have no workers to choose
    hf-accelerate | torchvision-ra | timm-ra | lightning) script=framework_orders.py nw=() ;;
    detectron2 | ultralytics-ddp) script=library_samplers.py nw=() ;; # ranks reading alone
    esac
    "$PYTHON" "$ROOT/tests/golden/$script" --kind "$kind" --n $N --world "$world" \
        --seed "$seed" --batch "$batch" --epochs "$epochs" "${nw[@]}" "$@" >"$T/orders" ||
        return 1
    "$PYTHON" - "$T/orders" "${PATHS:-$T/paths}" "$batch" "$workers" "$*" <<'PY'
import sys
orders, paths, batch, workers, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
persistent = "--persistent-workers" in extra
path = open(paths).read().split("\n")
streams = {}
for line in open(orders):
    if not line.startswith("epoch"):
        continue
    head, _, rest = line.partition(":")
    _, e, _, r = head.split()
    streams[(int(e), int(r))] = [int(x) for x in rest.split()]
out = []
for e in sorted({e for e, _ in streams}):
    readers = []
    for (ee, r), s in sorted(streams.items()):
        if ee != e:
            continue
        if workers == 0:
            readers.append((1000 + r, 999, s))
            continue
        for w in range(workers):
            mine = [x for b in range(w, (len(s) + batch - 1) // batch, workers)
                    for x in s[b * batch:(b + 1) * batch]]
            pid = 2000 + 100 * r + w + (0 if persistent else 10000 * e)
            readers.append((pid, 1000 + r, mine))
    at = [0] * len(readers)
    while any(at[i] < len(rd[2]) for i, rd in enumerate(readers)):
        for i, (pid, ppid, s) in enumerate(readers):
            if at[i] < len(s):
                out.append("%d %d %s" % (pid, ppid, path[s[at[i]]]))
                at[i] += 1
print("\n".join(out))
PY
}

# expect DESCRIPTION WANTED-LINE FILE SEED: identified with exactly that line.
expect() {
    local what=$1 want=$2 file=$3 seed=$4 got rc
    got=$("$PLAN" --synthetic $N --identify "$file" --seeds $((seed - 2000)):4096 2>"$T/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -s "$T/err" ]; then
        echo "ok: $what: $got"
    else
        fail "$what: exit $rc, got '$got', wanted '$want' $(cat "$T/err")"
    fi
}

record torch-ddp 123456 2 4 2 1 >"$T/ddp" || { fail "torch_orders.py torch-ddp"; }
head -400 "$T/ddp" >"$T/ddp400"
expect "torch-ddp, 2 ranks x 2 workers" \
    "torch-ddp seed=123456 (low 32 bits) world=2 batch=4 workers=2 epoch 0 after 400 opens in 0 s" \
    "$T/ddp400" 123456

record torch 987654 1 8 3 2 --persistent-workers >"$T/torch" || fail "torch_orders.py torch"
expect "torch, persistent workers, 2 epochs" \
    "torch seed=987654 (low 32 bits) world=1 batch=8 workers=3 epoch 1 after $((2 * N)) opens in 0 s" \
    "$T/torch" 987654
# Paths alone (one reader): a loader without workers.
record torch-sampler 4242 1 16 0 1 >"$T/ts" || fail "torch_orders.py torch-sampler"
cut -d' ' -f3- "$T/ts" | head -100 >"$T/ts_paths"
expect "paths only, torch-sampler's epoch 0 (reads as torch-ddp world 1)" \
    "torch-ddp seed=4242 (low 32 bits) world=1 batch=1 workers=0 epoch 0 after 100 opens in 0 s" \
    "$T/ts_paths" 4242

# The frameworks' samplers (tests/golden/framework_orders.py): accelerate's
# batches dealt round robin to the ranks; torchvision's RASampler (each file
# three times); Lightning's injected
# DistributedSampler, which is torch-ddp under another name.
record hf-accelerate 55555 2 8 2 1 >"$T/acc" || fail "framework_orders.py hf-accelerate"
head -400 "$T/acc" >"$T/acc400"
expect "hf-accelerate, 2 ranks x 2 workers" \
    "hf-accelerate seed=55555 (low 32 bits) world=2 batch=8 workers=2 epoch 0 after 400 opens in 0 s" \
    "$T/acc400" 55555
record torchvision-ra 200000 2 8 2 1 >"$T/ra" || fail "framework_orders.py torchvision-ra"
head -400 "$T/ra" >"$T/ra400"
expect "torchvision-ra, every file 3 times, 2 ranks x 2 workers" \
    "torchvision-ra seed=200000 (low 32 bits) world=2 batch=8 workers=2 epoch 0 after 400 opens in 0 s" \
    "$T/ra400" 200000
record lightning 31337 2 4 2 1 >"$T/pl" || fail "framework_orders.py lightning"
head -400 "$T/pl" >"$T/pl400"
expect "lightning (seed_everything(31337)), 2 ranks x 2 workers: torch-ddp" \
    "torch-ddp seed=31337 (low 32 bits) world=2 batch=4 workers=2 epoch 0 after 400 opens in 0 s" \
    "$T/pl400" 31337

# The libraries' samplers (tests/golden/library_samplers.py), ranks without
# workers: detectron2's stream over two passes of n (odd world: 3000 is no
# multiple of 7, so the rank that reads pass 1's first index is not rank 0),
# named only past its first pass; ultralytics under DDP without workers
# prefetches nothing across set_epoch and reads torch-ddp's order, named so.
record detectron2 777777 7 1 0 2 >"$T/d2" || fail "library_samplers.py detectron2"
expect "detectron2, 7 ranks, across its first pass" \
    "detectron2 seed=777777 (low 32 bits) world=7 batch=1 workers=0 epoch 1 after $((2 * N)) opens in 0 s" \
    "$T/d2" 777777
record ultralytics-ddp 0 2 1 0 2 >"$T/uddp" || fail "library_samplers.py ultralytics-ddp"
expect "ultralytics-ddp without workers, 2 ranks, epochs 0 and 1: torch-ddp" \
    "torch-ddp seed=0 (low 32 bits) world=2 batch=1 workers=0 epoch 1 after $((2 * N)) opens in 0 s" \
    "$T/uddp" 2000

# torch-global without a seed (torch.manual_seed(S), a model built,
# DataLoader(shuffle=True) without a generator): every epoch the first
# randperm of a private generator seeded by a draw from the global one.  No
# one order explains the record; each epoch is identified from its own
# opens, and its private seed must be the one real torch drew (torch_orders.py
# --private-seeds).  --seeds gives a window around each epoch's seed.
# global_case DESCRIPTION SEED EPOCHS [torch_orders args]: sets want (the
# lines expected) and seeds (the --seeds argument) from $T/private.
global_case() {
    local what=$1 seed=$2 epochs=$3
    shift 3
    record torch-global "$seed" 1 8 2 "$epochs" --private-seeds "$T/private" "$@" \
        >"$T/global" || { fail "$what: torch_orders.py torch-global"; return 1; }
    local lines
    lines=$("$PYTHON" - "$T/private" $N <<'PY'
import sys
low = [int(line.split()[4]) % 2**32 for line in open(sys.argv[1])]
for e, p in enumerate(low):
    print("torch-global (no seed registered) epoch %d's private seed=%d (low 32 bits) batch=8 "
          "workers=2 after %s opens in 0 s" % (e, p, sys.argv[2]))
print(",".join("%d:4096" % min(max(p - 2000, 0), 2**32 - 4096) for p in low))
PY
) || { fail "$what: private seeds"; return 1; }
    want=$(echo "$lines" | sed '$d')
    seeds=$(echo "$lines" | tail -1)
}
# expect_lines DESCRIPTION STATUS FILE: the output is exactly $want, exit STATUS.
expect_lines() {
    local what=$1 status=$2 file=$3 got rc
    got=$("$PLAN" --synthetic $N --identify "$file" --seeds "$seeds" 2>"$T/err")
    rc=$?
    if [ $rc -eq "$status" ] && [ "$got" = "$want" ] && [ ! -s "$T/err" ]; then
        echo "ok: $what:"
        echo "$got" | sed 's/^/    /'
    else
        fail "$what: exit $rc (wanted $status), got '$got', wanted '$want' $(cat "$T/err")"
    fi
}
if global_case "torch-global, 3 epochs" 612 3; then
    expect_lines "torch-global without a seed, 3 epochs, each its own private seed" 0 "$T/global"
    # the record cut inside epoch 2, 20 opens in: too few to say, left out
    head -$((2 * N + 20)) "$T/global" >"$T/global_cut"
    want=$(echo "$want" | head -2)
    expect_lines "torch-global, epoch 2 cut after 20 opens: epochs 0 and 1" 0 "$T/global_cut"
    # epoch 2 replaced by a sequential pass: epochs 0 and 1, then why not 2
    { head -$((2 * N)) "$T/global"; head -300 "$T/paths" | sed 's/^/7000 999 /'; } \
        >"$T/global_seq"
    want=$(printf '%s\nepoch 2: no known torch order fits these 300 opens' "$want")
    expect_lines "torch-global, then a sequential pass" 1 "$T/global_seq"
    # epoch 0 alone reads as torch-ddp at world 1 (the mount plans it so)
    head -$N "$T/global" >"$T/global_one"
    p0=$(($(awk 'NR == 1 { print $5 }' "$T/private") & 0xffffffff))
    want="torch-ddp seed=$p0 (low 32 bits) world=1 batch=8 workers=2 epoch 0 after $N opens in 0 s"
    expect_lines "torch-global's epoch 0 alone: torch-ddp at world 1" 0 "$T/global_one"
fi
if global_case "torch-global, persistent workers" 2718281828 2 --persistent-workers; then
    expect_lines "torch-global without a seed, persistent workers, 2 epochs" 0 "$T/global"
fi

# A dataset root below the source: SOURCE/train (30 classes of 100 files,
# the same n) beside SOURCE/val, read as ImageFolder(SOURCE/train) by
# torch-ddp, then a sequential validation pass over val.  Found as the
# mount finds it, or registered with order=imagefolder:train: the line
# names the root, and the validation opens are no part of it.
tree=$T/tree
"$PYTHON" - "$tree" <<'PY' || fail "the train/val tree"
import os, sys
root = sys.argv[1]
for part, classes, per in (("train", 30, 100), ("val", 2, 50)):
    for c in range(classes):
        d = os.path.join(root, part, "n%04d" % c)
        os.makedirs(d)
        for i in range(per):
            open(os.path.join(d, "%s_%05d.JPEG" % (part, c * per + i)), "w").close()
open(os.path.join(root, "LICENSE"), "w").close()
PY
(cd "$tree" && find train -type f | LC_ALL=C sort) >"$T/train_paths"
PATHS=$T/train_paths record torch-ddp 777 2 4 2 1 >"$T/tddp" || fail "torch_orders.py train/"
{ head -400 "$T/tddp"; (cd "$tree" && find val -type f | LC_ALL=C sort) | sed 's/^/3000 1000 /'; } \
    >"$T/train_val"
want="train: torch-ddp seed=777 (low 32 bits) world=2 batch=4 workers=2 epoch 0 after 400 opens in 0 s"
for opts in "" "-o order=imagefolder:train,world=2,batch=4"; do
    # shellcheck disable=SC2086 # opts: words on purpose
    got=$("$PLAN" $opts --identify "$T/train_val" --seeds 0:4096 "$tree" 2>"$T/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -s "$T/err" ]; then
        echo "ok: a root below the source${opts:+ ($opts)}: $got"
    else
        fail "a root below the source${opts:+ ($opts)}: exit $rc, got '$got', wanted '$want'" \
            "$(cat "$T/err")"
    fi
done

# The same root in timm's order (unpadded numbers: c2 before c10, img2
# before img10 in its natural order only), the paths from the transcription
# of tests/golden/library_orders.py: found with the library named.
tt=$T/timm_tree
"$PYTHON" - "$tt" "$ROOT/tests/golden" >"$T/timm_paths" <<'PY' || fail "the timm tree"
import os, sys
root = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import library_orders
for c in range(30):
    d = os.path.join(root, "train", "c%d" % c)
    os.makedirs(d)
    for i in range(1, 101):
        open(os.path.join(d, "img%d.JPEG" % i), "w").close()
os.makedirs(os.path.join(root, "val", "a"))
open(os.path.join(root, "val", "a", "1.jpg"), "w").close()
for p in library_orders.order("timm", os.path.join(root, "train")):
    print("train/" + p)
PY
PATHS=$T/timm_paths record torch-ddp 777 2 4 2 1 >"$T/timm_ddp" || fail "torch_orders.py timm"
head -400 "$T/timm_ddp" >"$T/timm_rec"
want="train: torch-ddp seed=777 (low 32 bits) world=2 order=timm batch=4 workers=2 epoch 0 after 400 opens in 0 s"
got=$("$PLAN" --identify "$T/timm_rec" --seeds 0:4096 "$tt" 2>"$T/err")
rc=$?
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -s "$T/err" ]; then
    echo "ok: timm's order of a root below the source: $got"
else
    fail "timm's order: exit $rc, got '$got', wanted '$want'" "$(cat "$T/err")"
fi

# A detection dataset: the sorted glob of images/train (YOLODataset), with
# images/val beside it, so images/ reads as an ImageFolder of two classes:
# the record's first opens all lie in images/train, which is its root.
dt=$T/det_tree
"$PYTHON" - "$dt" "$ROOT/tests/golden" >"$T/det_paths" <<'PY' || fail "the detection tree"
import os, sys
root = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import library_orders
for part, n in (("train", 3000), ("val", 40)):
    os.makedirs(os.path.join(root, "images", part))
    for i in range(1, n + 1):
        open(os.path.join(root, "images", part, "img%d.jpg" % i), "w").close()
for p in library_orders.order("ultralytics", os.path.join(root, "images", "train")):
    print("images/train/" + p)
PY
PATHS=$T/det_paths record torch-ddp 777 2 4 2 1 >"$T/det_ddp" || fail "torch_orders.py detection"
head -400 "$T/det_ddp" >"$T/det_rec"
want="images/train: torch-ddp seed=777 (low 32 bits) world=2 order=ultralytics batch=4 workers=2 epoch 0 after 400 opens in 0 s"
got=$("$PLAN" --identify "$T/det_rec" --seeds 0:4096 "$dt" 2>"$T/err")
rc=$?
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -s "$T/err" ]; then
    echo "ok: a detection dataset's images/train: $got"
else
    fail "a detection dataset: exit $rc, got '$got', wanted '$want'" "$(cat "$T/err")"
fi

# refused DESCRIPTION FILE STATUS SUBSTRING
refused() {
    local what=$1 file=$2 status=$3 want=$4 rc
    "$PLAN" --synthetic $N --identify "$file" --seeds 0:65536 >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq "$status" ] && grep -qF -- "$want" "$T/out" "$T/err" &&
        [ "$(cat "$T/out" "$T/err" | wc -l)" -eq 1 ]; then
        echo "ok: $what refused (exit $rc)"
    else
        fail "$what: exit $rc, $(cat "$T/out" "$T/err")"
    fi
}
head -300 "$T/paths" >"$T/seq"
refused "a sequential list" "$T/seq" 1 "no known torch order fits these 300 opens"
cut -d' ' -f3- "$T/ts" | sed -n '20,400p' >"$T/cut"
refused "a real order without its head" "$T/cut" 1 "no known torch order fits"
{ head -3 "$T/seq"; echo "no/such/file.jpg"; } >"$T/missing"
refused "a path outside the catalog" "$T/missing" 2 "missing:4: no/such/file.jpg: not a sample"
refused "an unreadable file" "$T/nonexistent" 2 "--identify $T/nonexistent"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
