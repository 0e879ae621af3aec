#!/usr/bin/env bash
# The mount learns the read order by itself.  Each pattern gets a fresh
# mount with nothing registered (no seed=, no world=) and a real torch
# DataLoader (identify_trainer.py: ImageFolder, num_workers=2, 4 epochs,
# a pause after epoch 0 until the mount says it identified the order):
#   torch-ddp      two trainer processes, DistributedSampler world 2, in
#                  step as DDP keeps them (torch.distributed, gloo)
#   torch          shuffle=True, generator=g; without and with
#                  persistent_workers
#   torch-sampler  sampler=RandomSampler(generator=g)
# Each must end with clairfs_order_identified 1, `order: identified` in
# the stats, at least the opens of epochs 1-3 predicted and at most 1 % of
# the predicted opens missed (nothing is predicted before identification),
# and every byte the trainer got equal to the source's.
#
# Beside them, from the start, readers that are no torch shuffle, each on a
# fresh mount, all three at once: every file in sorted order (twice, 16
# files per child process), find | xargs cat, and Python reading in
# random.shuffle order (three passes): the order is never identified (the
# gauge stays 0, the stats never say identified) in the 40 s from their
# start (their mounts search meanwhile, past the first seeds at idle
# priority) and every byte is right.
#
# Environment: CLAIRFS, CLAIRFS_GENDATA (lib.sh); CLAIRFS_IDENTIFY_PAUSE, the
# most seconds a trainer waits for identification after epoch 0 (300).
. "$(dirname "$0")/lib.sh"

cfs_need_torch
cfs_setup
. "$(dirname "$0")/identify_lib.sh"
identify_dataset

# pattern NAME KIND WORLD SEED [--persistent]: one trainer run on a fresh mount.
pattern() { identify_pattern "$1" "$2" "$3" "$4" "$2" ${5:+"$5"}; }
m() { cfs_metric "$1" "$2"; }

sequential() {
    # Sorted order, twice, each batch of 16 files read by a child process
    # of its own, as DataLoader workers are children of their trainer (a
    # cmp per file cost 2 minutes of forks on a loaded host).
    "$PYTHON" - "$src" "$mnt" <<'EOF'
import os, sys
src, mnt = sys.argv[1], sys.argv[2]
files = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, fs in os.walk(src) for f in fs)
for _ in range(2):
    for i in range(0, len(files), 16):
        pid = os.fork()
        if pid == 0:
            for rel in files[i:i + 16]:
                with open(os.path.join(mnt, rel), "rb") as a, open(os.path.join(src, rel), "rb") as b:
                    if a.read() != b.read():
                        print(f"differs: {rel}", file=sys.stderr)
                        os._exit(1)
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            sys.exit(1)
EOF
}
find_xargs() {
    (cd "$mnt" && find . -type f) >"$TMP/list"
    test "$(wc -l <"$TMP/list")" -eq "$nfiles" || return 1
    cmp <(cd "$mnt" && tr '\n' '\0' <"$TMP/list" | xargs -0 cat) \
        <(cd "$src" && tr '\n' '\0' <"$TMP/list" | xargs -0 cat)
}
shuffled() {
    "$PYTHON" - "$src" "$mnt" <<'EOF'
import os, random, sys
src, mnt = sys.argv[1], sys.argv[2]
files = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, fs in os.walk(src) for f in fs)
rng = random.Random(7)
for _ in range(3):
    rng.shuffle(files)
    for rel in files:
        with open(os.path.join(mnt, rel), "rb") as a, open(os.path.join(src, rel), "rb") as b:
            if a.read() != b.read():
                sys.exit(f"differs: {rel}")
EOF
}

readers=(sequential find-xargs shuffled)
# log_level=debug shows each attempt of the identification; warning hides
# the lines that say what the mount does (checked below).  The attempts are
# looked for on the shuffled reader's mount, whose search runs for its whole
# read: the sequential reader's pass is told 64 opens in, which stops its
# search, on a loaded host before its first attempt ran.
reader_start sequential "" sequential
reader_start find-xargs log_level=warning find_xargs
reader_start shuffled log_level=debug shuffled
deadline=$((SECONDS + 40))

# The trainers run while those mounts search: their seeds are among the
# first a search tries, at normal priority, where the readers' searches,
# past theirs, run at SCHED_IDLE.
pattern ddp torch-ddp 2 17
pattern torch torch 1 23
pattern torch-persistent torch 1 29 --persistent
pattern sampler torch-sampler 1 31

readers_end "$deadline"
check "log_level=debug: the identification's attempts are logged" \
    grep -Eq "identify: attempt over [0-9]+ opens of " "$TMP/shuffled.daemon.log"
check "the default level logs what the mount does, not the attempts" bash -c \
    'grep -q "^clairfs: mounted " "$1" && ! grep -q "identify: attempt over" "$1"' \
    _ "$TMP/sequential.daemon.log"
check "log_level=warning: not even that" bash -c '! grep -q "mounted " "$1"' \
    _ "$TMP/find-xargs.daemon.log"
cfs_finish
