#!/usr/bin/env bash
# The mount learns the training libraries' read orders by itself.  Each
# gets a fresh mount with nothing registered and a real torch DataLoader
# (identify_trainer.py: ImageFolder, num_workers=2, batch 8, 4 epochs or
# passes, a pause after the first until the mount says it identified the
# order) over the library's sampler and loader as transcribed in
# tests/golden/library_samplers.py:
#   detectron2   TrainingSampler(seed=S) at world 2: one generator's
#                randperms back to back, rank r every 2nd index from r,
#                the workers' chunks of 8 dealt round-robin across the
#                passes; identified as detectron2 (MMEngine's
#                InfiniteSampler is the same code)
#   mmengine-infinite  MMEngine's InfiniteSampler, the same stream under a
#                DataLoader of the map-style dataset (one iterator for the
#                run), world 2: identified as detectron2
#   mmengine     DefaultSampler(round_up=True) at world 2: torch-ddp's order
#   ultralytics  InfiniteDataLoader in one process, its generator seeded
#                6148914691236517204 (found before the scan: a constant)
#   ultralytics-ddp  the same at world 2 over DistributedSampler(seed 0),
#                whose set_epoch takes effect one epoch late (the one
#                iterator has built the next epoch's order already): named
#                torch-ddp in epoch 0, refined at epoch 1's first opens
#   hf-trainer-global  the Trainer (<= 4.30) without data_seed: its
#                sampler's generator seeded by one draw of the global
#                generator; identified as torch-sampler with that seed
#                (set_seed(2004) draws 927685: among the seeds scanned at
#                the normal priority, so the test does not wait on an idle
#                scan of the whole range)
#   torchdata    StatefulDataLoader(shuffle=True) without workers after
#                manual_seed(2004): its sampler's generator seeded by the
#                same draw, one randperm an epoch and none trailing:
#                detectron2's stream at world 1 and named so
#   torchdata-workers  the same loader with 2 workers after manual_seed(3407):
#                an epoch's permutation is its generator's second (and
#                fourth, sixth...), which no seed scan reaches; found by the
#                walk of the seeds people use (3407 is one, the loader built
#                first: K = 0) and named torchdata-workers
# Each must end with clairfs_order_identified 1, `order: identified KIND`,
# the opens of passes 1-3 predicted and at most 1 % of the predicted opens
# missed, every byte the trainer got equal to the source's.  Beside them a
# custom sampler (identify_trainer.py --kind custom: random.shuffle'd passes
# of one random.Random for the run, read by persistent workers, the shape of
# the libraries' streams) must never be identified, as any kind.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE
# (identify_lib.sh); CLAIRFS_LIBRARIES, the patterns to run (all).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
identify_dataset

# The custom sampler's mount searches its opens (at idle priority, past the
# seeds the trainers' searches find first) while the trainers run.
readers=(custom)
custom_reader() {
    "$TORCH_PY" "$TRAINER" --data "$mnt" --src "$src" --kind custom --seed 7 --epochs 3 \
        --batch $BATCH --workers $WORKERS --persistent --pause 0 --log "$TMP/custom.rank0.log"
}
reader_start custom "" custom_reader
deadline=$((SECONDS + 40))

want=${CLAIRFS_LIBRARIES:-detectron2 mmengine-infinite mmengine ultralytics ultralytics-ddp hf-trainer-global torchdata torchdata-workers}
# pattern KIND WORLD SEED IDENTIFIED-AS [TRAINER ARGS...]
pattern() {
    case " $want " in *" $1 "*) identify_pattern "$1" "$@" ;; esac
}

pattern detectron2 2 1234567 detectron2
pattern mmengine-infinite 2 777 detectron2
pattern mmengine 2 321 torch-ddp
pattern ultralytics 1 0 ultralytics
pattern ultralytics-ddp 2 0 ultralytics-ddp
pattern hf-trainer-global 1 2004 torch-sampler
pattern torchdata 1 2004 detectron2 --workers 0
pattern torchdata-workers 1 3407 torchdata-workers
readers_end "$deadline"
cfs_finish
