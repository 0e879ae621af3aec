#!/usr/bin/env bash
# The mount at its own optimum: with the seed registered and the tiers
# holding half the dataset, the PFS bytes the mount fetches in each epoch
# after the first are those of clairfs-plan's clairvoyant simulation for the
# same options, within 5 %:
#  - ram = half the dataset;
#  - ram = a quarter and ssd = a quarter (RAM victims move to the SSD tier).
# The reader is clairfs-bench with no workers, one epoch a run: the
# simulator replays the stream in order, a reader that reorders its opens
# makes the mount's fetches depend on timing (a read that arrives before its
# prefetch).  The bytes the kernel reclaimed from staged files and the mount
# read again are no choice of the policy: taken out and printed.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}" "${CLAIRFS_PLAN:?}"
cfs_setup

src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
E=4 # the shortest window a plan covers (run_config.h), all that clairfs-plan simulates
TRAINER="seed=9,batch=16,epochs=$E"
m() { cfs_metric "$1" "$2"; }

# sim_epochs OPTS: the simulator's PFS bytes of each epoch, one a line.
sim_epochs() {
    "$CLAIRFS_PLAN" --json -o "$1" "$src" | "$PYTHON" -c '
import json, sys
for e in json.load(sys.stdin)["simulation"]["policies"]["clairvoyant"]["epochs"]:
    print(e["pfs_bytes"])'
}

# agree NAME CAPACITY: one mount, E epochs, each compared with the simulator.
agree() {
    local name=$1 cap=$2 mnt=$TMP/mnt-$1 e got want prev=0 prev_rec=0 bytes rec
    local opts="$TRAINER,$cap,index=$TMP/ix-$name"
    if ! cfs_mount "$src" "$mnt" "$TMP/d-$name.log" -o "$opts"; then
        fail "$name: mount"
        return
    fi
    mapfile -t want < <(sim_epochs "$opts")
    check "$name: the simulator gives $E epochs" test "${#want[@]}" -eq $E
    for e in $(seq 0 $((E - 1))); do
        if ! "$CLAIRFS_BENCH" -o "$TRAINER,start_epoch=$e" --workers 0 --epochs 1 \
            --verify "$src" "$mnt" >>"$TMP/bench.log" 2>&1; then
            fail "$name: epoch $e read and verified"
            continue
        fi
        bytes=$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
        rec=$(m "$mnt" 'clairfs_pfs_bytes_total{reason="reclaimed"}')
        got=$((bytes - prev - (rec - prev_rec)))
        echo "$name epoch $e: mount $got PFS bytes (and $((rec - prev_rec)) reclaimed), simulator ${want[e]:-?}"
        prev=$bytes prev_rec=$rec
        [ "$e" -eq 0 ] && continue # the mount prefetches epoch 1 during it
        check "$name epoch $e: mount $got within 5 % of the simulator's ${want[e]:-?}" \
            test $((got * 100)) -ge $((${want[e]:-0} * 95)) -a $((got * 100)) -le $((${want[e]:-0} * 105))
    done
    check "$name: every read counted once" test \
        $(($(m "$mnt" 'clairfs_reads_total{source="ram"}') + $(m "$mnt" 'clairfs_reads_total{source="ssd"}') + \
            $(m "$mnt" 'clairfs_reads_total{source="pfs"}'))) -eq $((E * N))
    check "$name: unmount" cfs_umount "$mnt"
}

agree ram "ram=$((TOTAL / 2))"
agree ssd "ram=$((TOTAL / 4)),ssd=$((TOTAL / 4)),ssd_dir=$TMP/ssd"
cfs_finish
