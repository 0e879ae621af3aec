#!/usr/bin/env bash
# End to end with real PyTorch: examples/train_ddp.py (ImageFolder,
# DistributedSampler(seed), set_epoch, DataLoader with 2 workers, gloo,
# 2 ranks, 3 epochs) once on the source and once on a clairfs mount given
# the same seed.  The mount must be invisible to the trainer and known in
# advance to clairfs:
#   - the two sample logs are identical (same files, same order per rank,
#     same bytes), and clairfs-plan predicts that order;
#   - every open was predicted (prediction hit = all reads, miss = 0);
#   - RAM holds the dataset, so epochs 2 and 3 read everything from RAM:
#     reads from ram >= the reads of epochs 2-3, all other sources together
#     <= the reads of epoch 1, every file crossed from the PFS exactly once,
#     and after the last epoch the RAM tier is empty (a file read for the
#     last time is dropped at once).
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh), CLAIRFS_TRAINER
# (examples/train_ddp.py) and, optional, CLAIRFS_PLAN (clairfs-plan).
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_TRAINER:?CLAIRFS_TRAINER must name examples/train_ddp.py}"

cfs_need_torch
cfs_setup

SEED=5 WORLD=2 EPOCHS=3 BATCH=16 WORKERS=2
src=$TMP/src
mnt=$TMP/mnt
# 13 x 31 = 403 files: odd, so the sampler pads each epoch to 404.
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 13 --files 31 --size lognormal:8K:0.8 \
    --max-size 64K --seed 3 "$src" || { fail "gendata"; cfs_finish; }

nfiles=$(find "$src" -type f | wc -l)
nbytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
maxpages=$(find "$src" -type f -printf '%s\n' | awk '{ p = int(($1 + 4095) / 4096); if (p > m) m = p } END { print m }')
per_epoch=$(( (nfiles + WORLD - 1) / WORLD * WORLD ))
total_reads=$((per_epoch * EPOCHS))
later_reads=$((per_epoch * (EPOCHS - 1)))
echo "dataset: $nfiles files, $nbytes bytes; $per_epoch reads per epoch, $total_reads in all"

# train DIR LOG: the trainer over DIR; a hung mount must not hang the test.
train() {
    local t0=$SECONDS
    timeout 120 "$TORCH_PY" "$CLAIRFS_TRAINER" --data "$1" --epochs "$EPOCHS" --seed "$SEED" \
        --batch "$BATCH" --workers "$WORKERS" --world "$WORLD" --log "$2" || return 1
    echo "trainer over $1: $((SECONDS - t0)) s"
}

check "trainer on the source" train "$src" "$TMP/source.log"
check "source log has one line per read" test "$(wc -l <"$TMP/source.log")" -eq "$total_reads"

if [ -n "${CLAIRFS_PLAN:-}" ]; then
    check "clairfs-plan --print-order predicts what torch read" bash -c '
        for e in $(seq 0 $(($3 - 1))); do for r in $(seq 0 $(($4 - 1))); do
            cmp -s <("$1" -o seed=$5,world=$4,batch=$6,epochs=$3 --print-order $r $e "$2") \
                   <(awk -v e=$e -v r=$r "\$1 == e && \$2 == r { print \$6 }" "$7") || exit 1
        done; done' _ "$CLAIRFS_PLAN" "$src" "$EPOCHS" "$WORLD" "$SEED" "$BATCH" "$TMP/source.log"
fi

# RAM for twice the dataset: room for everything.
cfs_mount "$src" "$mnt" "$TMP/daemon.log" \
    -o seed=$SEED,world=$WORLD,epochs=$EPOCHS,batch=$BATCH,ram=$((2 * nbytes / 1024 + 1024))K,index="$TMP/index" ||
    { fail "mount"; cfs_finish; }

check "trainer on the mount" train "$mnt" "$TMP/mount.log"
# Whether the kernel took the opens over (the default once all is staged,
# as root): the checks below hold either way.
grep -h "kernel_open:" "$TMP/daemon.log" || echo "every open reached clairfs"
check "the logs are identical (files, order per rank, bytes)" \
    diff -q "$TMP/source.log" "$TMP/mount.log"

m() { cfs_metric "$mnt" "$1"; }
cat "$mnt/.clairfs/stats"
ram=$(m 'clairfs_reads_total{source="ram"}')
ssd=$(m 'clairfs_reads_total{source="ssd"}')
peer=$(m 'clairfs_reads_total{source="peer"}')
pfs=$(m 'clairfs_reads_total{source="pfs"}')
hit=$(m 'clairfs_prediction_total{result="hit"}')
miss=$(m 'clairfs_prediction_total{result="miss"}')
fetched=$(m 'clairfs_fetch_bytes_total{from="pfs"}')
cached=$(m 'clairfs_cache_bytes{tier="ram"}')
echo "reads ram=$ram ssd=$ssd peer=$peer pfs=$pfs; prediction hit=$hit miss=$miss;" \
     "fetched from pfs=$fetched; ram holds $cached"

check "every read counted once: ram+ssd+peer+pfs = $total_reads" \
    test "$((ram + ssd + peer + pfs))" -eq "$total_reads"
check "no prediction miss" test "$miss" -eq 0
check "every open predicted: prediction hit = $total_reads" test "$hit" -eq "$total_reads"
check "epochs 2-3 from RAM: ram reads >= $later_reads" test "$ram" -ge "$later_reads"
check "only epoch 1 may read elsewhere: ssd+peer+pfs <= $per_epoch" \
    test "$((ssd + peer + pfs))" -le "$((total_reads - later_reads))"
# Staged pages the kernel reclaimed are read again from the source, a few
# pages per fallback open (test_pagecache.sh); nothing else is.
fallback=$(m clairfs_pagecache_fallback_reads_total)
check "each file fetched from the PFS once: $nbytes bytes (+ $fallback fallback opens' pages)" \
    test "$fetched" -ge "$nbytes" -a "$fetched" -le "$((nbytes + fallback * maxpages * 4096))"
check "files read for the last time are dropped: RAM tier holds 0 bytes" test "$cached" -eq 0

check "unmount is clean (daemon exits 0)" cfs_umount "$mnt"
cfs_finish
