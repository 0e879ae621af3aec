#!/usr/bin/env bash
# The frameworks' samplers through a real mount: for each of lightning,
# hf-accelerate, torchvision-ra and timm-ra, a mount told the trainer's
# sampler serves rank 0 of world=2 while clairfs-bench replays that rank's
# stream for 2 epochs, every byte compared with the source. Every open must
# be one the plan predicted (exact counts: the framework's rank length times
# two epochs), none missed. A mount told a different sampler than the one
# replayed must miss, so the counts above say something.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}"
cfs_setup

src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
[ "$N" -eq 600 ] || fail "the small dataset has $N files, not 600"
m() { cfs_metric "$1" "$2"; }

# run NAME MOUNT_SAMPLER_OPTS TRAINER_SAMPLER_OPTS: mount, replay rank 0 of
# world=2 for 2 epochs verified; sets HIT, MISS, READS.
run() {
    local name=$1 mnt=$TMP/mnt-$1 common="seed=11,world=2,epochs=2,batch=8"
    cfs_mount "$src" "$mnt" "$TMP/d-$name.log" \
        -o "$common,$2,ranks=0-0,ram=64M,index=$TMP/ix-$name" || return 1
    cfs_replay "$src" "$mnt" "$common,$3" --rank 0 || { cfs_umount "$mnt"; return 1; }
    HIT=$(m "$mnt" 'clairfs_prediction_total{result="hit"}')
    MISS=$(m "$mnt" 'clairfs_prediction_total{result="miss"}')
    READS=$(($(m "$mnt" 'clairfs_reads_total{source="ram"}') + $(m "$mnt" 'clairfs_reads_total{source="pfs"}')))
    cfs_umount "$mnt"
}

# Reads of rank 0 per epoch, n=600, W=2, B=8: DistributedSampler 300;
# accelerate ceil(ceil(600/8)/2)*8 = 304; RA floor(600/256)*256/2 = 256.
case_no=0
for row in "lightning 300" "hf-accelerate 304" "torchvision-ra 256" "timm-ra 256" \
           "torchvision-ra,repetitions=2 256"; do
    set -- $row
    opts="sampler=$1"
    want=$((2 * $2))
    case_no=$((case_no + 1))
    if run "case$case_no" "$opts" "$opts"; then
        echo "$opts: $READS reads, hit $HIT, miss $MISS"
        check "$opts: every byte verified, $want reads" test "$READS" -eq "$want"
        check "$opts: every open predicted" test "$HIT" -eq "$want" -a "$MISS" -eq 0
    else
        fail "$opts: mount or verified replay ($(tail -3 "$TMP/bench.log" | tr '\n' ' '))"
    fi
done

# The mount models torch-ddp, the trainer is accelerate: the same seed and
# world, another order, so opens are missed.
if run wrong "sampler=torch-ddp" "sampler=hf-accelerate"; then
    echo "wrong model: $READS reads, hit $HIT, miss $MISS"
    check "wrong model: bytes still right, every read counted" test "$READS" -eq 608
    check "wrong model: misses" test "$MISS" -ge 60
else
    fail "wrong-model mount or replay"
fi

# A framework's own refusal is the mount's: one line, non-zero exit.
mkdir -p "$TMP/mnt-refuse"
cfs_refuse "lightning seed beyond seed_everything" "seed_everything" "$TMP/mnt-refuse" \
    -f -o seed=4294967296,sampler=lightning "$src" "$TMP/mnt-refuse"
cfs_finish
