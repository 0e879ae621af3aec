#!/usr/bin/env bash
# The mount learns the frameworks' read orders by itself, below a dataset
# root with the validation pass beside it.  Each sampler gets a fresh mount
# with nothing registered (no sampler=, seed=, world=) of an ImageNet-shaped
# tree of real JPEG files (ROOT/train/<class>/*.JPEG, ROOT/val/..., a few
# files at the root: identify_jpeg_dataset) and a real torch DataLoader
# (identify_trainer.py: ImageFolder(MNT/train), each image decoded with PIL,
# num_workers=2, batch 8, 4 epochs, the classification reference's
# evaluate() over ImageFolder(MNT/val) after every epoch, a pause after
# epoch 0 until the mount says it identified the order) whose sampler is
# the transcription of the framework's own code in
# tests/golden/framework_orders.py:
#   hf-accelerate   SeedableRandomSampler(data_seed=17) under
#                   BatchSamplerShard, world 2 (gloo, in step as DDP)
#   torchvision-ra  RASampler(seed=100003, repetitions=3), world 2; each
#                   file opened up to 3 times an epoch, by one or two ranks
#   timm-ra         RepeatAugSampler (seeded with the epoch), world 1: its
#                   one rank's workers open each file 3 times in a row;
#                   identified as timm-ra at epoch 0 (its seed is the epoch)
#   lightning       the DistributedSampler Lightning injects after
#                   seed_everything(4242), world 2: identified as torch-ddp
# Each must end with clairfs_order_identified 1, `order: identified train:
# KIND` in the stats, at least the opens of epochs 1-3 predicted, at most
# 1 % of the predicted opens missed, and every byte the trainer got equal to
# the source's; and the order named from epoch 0's first opens, within the
# epoch: each rank pauses at its 8th batch of epoch 0 until the mount names
# the order (--identify-by-step), so that what is checked is which opens
# named it, not whether the search outran a loader on a loaded host (the
# seeds here are below 2^20, which a scan covers at the normal priority).
# (torchvision-ra with a seed below 4096 reads exactly as timm-ra and is
# named so: src/identify_frameworks.c.)  Beside the training order, the
# validation pass as test_identify_roots.sh checks it
# (identify_validation_checks): named (`val: sequential, world=W`), its
# passes of epochs 1-3 predicted hits, none of its opens counted as a
# training hit or miss, no file read from the source twice, the training
# order never dropped.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds a trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
# The RA samplers read floor(3000/256)*256 = 2816 entries of train/'s 3000
# an epoch, 939 distinct files.
identify_jpeg_dataset

identify_more_checks() {
    identify_validation_checks "$1" "$2" "$3" "$TMP/$1.rank" "$TMP/$1.snap.0" "$TMP/$1.daemon.log"
}

# pattern KIND WORLD SEED [IDENTIFIED-AS]: one trainer run on a fresh mount.
pattern() {
    identify_pattern "$1" "$1" "$2" "$3" "train: ${4:-$1}" --identify-by-step 8 "${ROOT_ARGS[@]}" \
        --snapshot "$TMP/$1.snap.{rank}"
    local at per
    at=$(sed -n 's/.*identify: .* after \([0-9]*\) opens in .*/\1/p' "$TMP/$1.daemon.log" | head -1)
    per=$(($(cat "$TMP/$1".rank*.log | wc -l) / EPOCHS))
    check "$1: identified within epoch 0 (after ${at:-no} opens of its $per)" \
        test "${at:-$per}" -lt "$per"
}

pattern hf-accelerate 2 17
pattern torchvision-ra 2 100003
pattern timm-ra 1 0
pattern lightning 2 4242 torch-ddp
cfs_finish
