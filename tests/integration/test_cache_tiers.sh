#!/usr/bin/env bash
# The data path through a real mount, replayed by clairfs-bench like a
# DataLoader (4 workers, batch 8) with every byte verified:
#  - ram >= dataset: after the first epoch every read is a RAM hit (exact);
#  - ram = 30 %: no wrong byte, the RAM tier never above its bound (its peak
#    gauge, and samples during the run), hits at least what clairfs-plan's
#    simulator predicts, PFS bytes within 15 % of its Belady MIN;
#  - ram = 30 % over 8 epochs: planned 4 at a time, 6 read, all predicted;
#  - without seed, RAM for the dataset: the sweep stages all before a read;
#    RAM short: the sweep into free room only; no_sweep: reactive LRU,
#    nothing predicted;
#    io=threads as well;
#    io=auto over a FUSE source (clairfs-pfsemu) picks the thread pool;
#  - SSD tier: a remount serves epoch 0 from SSD; a flipped byte in an entry
#    is detected, counted and read from the source instead;
#  - kill -9 during prefetch, remount: consistent, warm where valid.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}" "${CLAIRFS_PLAN:?}" "${CLAIRFS_PFSEMU:?}"
cfs_setup

src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
TRAINER="batch=8"

bench() { cfs_replay "$src" "$@"; } # bench MNT OPTS [args]
m() { cfs_metric "$1" "$2"; }

# --- ram >= dataset, both io engines.
for io in auto threads; do
    mnt=$TMP/mnt-$io
    if ! cfs_mount "$src" "$mnt" "$TMP/d-$io.log" -o seed=5,epochs=3,$TRAINER,ram=64M,io=$io,index="$TMP/ix-$io"; then
        fail "mount io=$io"
        continue
    fi
    check "io=$io: epoch 0 verified" bench "$mnt" "seed=5,epochs=3,$TRAINER" --epochs 1
    ram0=$(m "$mnt" 'clairfs_reads_total{source="ram"}')
    pfs0=$(m "$mnt" 'clairfs_reads_total{source="pfs"}')
    check "io=$io: epoch 0 counted once per file" test $((ram0 + pfs0)) -eq $N
    check "io=$io: epochs 1-2 verified" bench "$mnt" "seed=5,start_epoch=1,epochs=3,$TRAINER" --epochs 2
    check "io=$io: epochs 1-2 all RAM hits" test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq $((ram0 + 2 * N))
    check "io=$io: no more pfs reads" test "$(m "$mnt" 'clairfs_reads_total{source="pfs"}')" -eq "$pfs0"
    # Staged pages the kernel reclaimed (test_pagecache.sh) are read again
    # from the source, a few pages per fallback open: nothing else is.
    fetched=$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
    fb=$(m "$mnt" clairfs_pagecache_fallback_reads_total)
    echo "io=$io: fetched $fetched of $TOTAL bytes; fallback opens $fb"
    check "io=$io: each file fetched once" \
        test "$fetched" -ge "$TOTAL" -a "$fetched" -le $((TOTAL + fb * MAXPAGES * 4096))
    check "io=$io: all predicted" test "$(m "$mnt" 'clairfs_prediction_total{result="hit"}')" -eq $((3 * N))
    check "io=$io: no misses" test "$(m "$mnt" 'clairfs_prediction_total{result="miss"}')" -eq 0
    check "io=$io: epoch 3 after the run" test "$(m "$mnt" clairfs_epoch)" -eq 3
    check "io=$io: RAM empty after the last reads" cfs_wait_metric "$mnt" 'clairfs_cache_bytes{tier="ram"}' 0
    check "io=$io: clean unmount" cfs_umount "$mnt"
done

# --- ram = 30 %: bound sampled during the run, hits vs the simulator.
RAM=$((TOTAL * 3 / 10))
mnt=$TMP/mnt-30
if cfs_mount "$src" "$mnt" "$TMP/d-30.log" -o seed=9,epochs=4,$TRAINER,ram=$RAM,index="$TMP/ix-30"; then
    # Stopped by a flag, not a signal: a killed loop can leave its reader
    # holding the metrics file open, and the unmount below would find the
    # mount busy.
    (while [ -e "$mnt/.clairfs/metrics" ] && [ ! -e "$TMP/stop-sampler" ]; do
        m "$mnt" 'clairfs_cache_bytes{tier="ram"}' || break
        sleep 0.01
    done >"$TMP/ram-samples") &
    sampler=$!
    check "ram=30%: 4 epochs, every byte right" bench "$mnt" "seed=9,epochs=4,$TRAINER"
    hits=$(m "$mnt" 'clairfs_reads_total{source="ram"}')
    pfs=$(m "$mnt" 'clairfs_reads_total{source="pfs"}')
    fetched=$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
    fb30=$(m "$mnt" clairfs_pagecache_fallback_reads_total)
    check "ram=30%: every read counted once" test $((hits + pfs)) -eq $((4 * N))
    peak=$(m "$mnt" 'clairfs_cache_peak_bytes{tier="ram"}')
    check "ram=30%: the RAM tier's peak ($peak) is within its bound $RAM and was used" \
        test "${peak:-0}" -le "$RAM" -a "${peak:-0}" -gt $((RAM / 2))
    touch "$TMP/stop-sampler"
    wait "$sampler" 2>/dev/null
    check "ram=30%: unmount" cfs_umount "$mnt"
    max=$(sort -n "$TMP/ram-samples" | tail -1)
    check "ram=30%: RAM tier sampled $(wc -l <"$TMP/ram-samples") times during the run, max $max <= $RAM" \
        test "${max:-0}" -le "$RAM"
    sim=$("$CLAIRFS_PLAN" --json -o seed=9,epochs=4,$TRAINER,ram=$RAM,index="$TMP/ix-30" "$src")
    read -r sim_hits sim_bytes < <("$PYTHON" -c '
import json, sys
eps = json.loads(sys.stdin.read())["simulation"]["policies"]["clairvoyant"]["epochs"]
print(sum(e["local_hits"] for e in eps), sum(e["pfs_bytes"] for e in eps))' <<<"$sim")
    echo "ram=30%: clairfs ram hits $hits (simulated clairvoyant $sim_hits), pfs bytes $fetched (simulated $sim_bytes)"
    check "ram=30%: hits >= the simulator's (prefetching only adds)" test "$hits" -ge "${sim_hits:-999999}"
    # The simulator counts a fetch as a fetch, ahead of the read or not
    # (sim.h): its PFS bytes are what Belady's MIN needs.  Prefetching takes
    # room early only as far as the readers' opens run ahead (4 workers
    # here, within 1 % measured; test_sim_agree.sh holds a reader without
    # workers to 5 % per epoch); and the kernel may reclaim staged pages.
    check "ram=30%: PFS bytes $fetched within 15 % of the simulator's ${sim_bytes:-?}" \
        test "$fetched" -le $(( ${sim_bytes:-0} * 115 / 100 + fb30 * MAXPAGES * 4096 ))
else
    fail "mount ram=30%"
fi

# --- ram = 30 % over 8 epochs: the plan covers a window of 4
# (run_config.h), and the prefetcher plans the next from its last epoch;
# a trainer reading on past the first window is predicted throughout.
mnt=$TMP/mnt-win
if cfs_mount "$src" "$mnt" "$TMP/d-win.log" -o seed=9,epochs=8,$TRAINER,ram=$RAM,index="$TMP/ix-win"; then
    check "window: the start line says 4 epochs of 8" grep -q "planned 4 epochs of 8" "$TMP/d-win.log"
    check "window: 6 epochs, every byte right" bench "$mnt" "seed=9,epochs=8,$TRAINER" --epochs 6
    check "window: all predicted" test "$(m "$mnt" 'clairfs_prediction_total{result="hit"}')" -eq $((6 * N))
    check "window: no misses" test "$(m "$mnt" 'clairfs_prediction_total{result="miss"}')" -eq 0
    check "window: epoch 6" test "$(m "$mnt" clairfs_epoch)" -eq 6
    check "window: unmount" cfs_umount "$mnt"
else
    fail "mount window"
fi

# --- no seed, RAM for the whole dataset: the sweep stages every file into
# RAM before the trainer asks (an epoch reads them all), no read waits for
# the source, nothing is predicted.
mnt=$TMP/mnt-sweep
if cfs_mount "$src" "$mnt" "$TMP/d-sweep.log" -o ram=64M,index="$TMP/ix-sweep"; then
    swept() { # every byte fetched and held in RAM (in whole pages)
        for _ in $(seq 400); do
            [ "$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')" -eq "$TOTAL" ] &&
                [ "$(m "$mnt" 'clairfs_cache_bytes{tier="ram"}')" -ge "$TOTAL" ] && return 0
            sleep 0.05
        done
        return 1
    }
    check "sweep: every file staged into RAM before any read" swept
    check "sweep: nothing read yet" test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq 0
    check "sweep: 2 epochs verified" bench "$mnt" "seed=5,epochs=2,$TRAINER"
    check "sweep: every read from RAM" test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq $((2 * N))
    check "sweep: none from the source" test "$(m "$mnt" 'clairfs_reads_total{source="pfs"}')" -eq 0
    # Staged pages the kernel reclaimed (memory pressure, or the proactive
    # reclaim of include/clairfs/prefetch.h's "Page cache", more of it on a
    # loaded host) are read again from the source and counted as such.
    check "sweep: each file fetched once, again only what the kernel reclaimed" test \
        "$(($(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}') - \
            $(m "$mnt" 'clairfs_pfs_bytes_total{reason="reclaimed"}')))" -eq "$TOTAL"
    check "sweep: prediction hit 0" test "$(m "$mnt" 'clairfs_prediction_total{result="hit"}')" -eq 0
    check "sweep: unmount" cfs_umount "$mnt"
else
    fail "mount without seed (sweep)"
fi
# RAM for 30 % of it: the sweep fills the free room only, nothing evicted.
mnt=$TMP/mnt-nosweep
if cfs_mount "$src" "$mnt" "$TMP/d-nosweep.log" -o ram=$RAM,index="$TMP/ix-nosweep"; then
    sleep 1
    swept=$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
    held=$(m "$mnt" 'clairfs_cache_bytes{tier="ram"}')
    echo "ram=30%, no seed: swept $swept bytes, RAM holds $held of $RAM"
    check "ram=30%, no seed: files staged before a read" test "$swept" -gt 0
    check "ram=30%, no seed: within the RAM tier" test "$held" -le "$RAM"
    check "ram=30%, no seed: no file fetched twice" \
        test "$(m "$mnt" 'clairfs_fetches_total{from="pfs"}')" -le "$N"
    check "ram=30%, no seed: nothing read yet" \
        test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq 0
    check "ram=30%, no seed: unmount" cfs_umount "$mnt"
else
    fail "mount ram=30% without seed"
fi

# --- no seed, no_sweep: reactive LRU, nothing predicted.
mnt=$TMP/mnt-lru
if cfs_mount "$src" "$mnt" "$TMP/d-lru.log" -o ram=64M,no_sweep,index="$TMP/ix-lru"; then
    check "no seed: 2 epochs verified" bench "$mnt" "seed=5,epochs=2,$TRAINER"
    check "no seed: epoch 0 from the source" test "$(m "$mnt" 'clairfs_reads_total{source="pfs"}')" -eq $N
    check "no seed: epoch 1 from RAM" test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq $N
    check "no seed: prediction hit 0" test "$(m "$mnt" 'clairfs_prediction_total{result="hit"}')" -eq 0
    check "no seed: prediction miss 0" test "$(m "$mnt" 'clairfs_prediction_total{result="miss"}')" -eq 0
    check "no seed: unmount" cfs_umount "$mnt"
else
    fail "mount without seed"
fi

# --- SSD tier: stage, remount warm, flip a byte.
ssd=$TMP/ssd
mnt=$TMP/mnt-ssd
SSDOPTS="seed=5,epochs=4,$TRAINER,ram=0,ssd=64M,ssd_dir=$ssd"
wait_fetched() { # wait_fetched MNT BYTES: until the prefetcher fetched BYTES
    for _ in $(seq 300); do
        [ "$(m "$1" 'clairfs_fetch_bytes_total{from="pfs"}')" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}
if cfs_mount "$src" "$mnt" "$TMP/d-ssd1.log" -o "$SSDOPTS"; then
    check "ssd: everything staged" wait_fetched "$mnt" "$TOTAL"
    check "ssd: unmount" cfs_umount "$mnt"
    check "ssd: $N entry files" test "$(find "$ssd/cache" -type f | wc -l)" -eq $N
    check "ssd: remount" cfs_mount "$src" "$mnt" "$TMP/d-ssd2.log" -o "$SSDOPTS"
    check "ssd: warm epoch 0 verified" bench "$mnt" "seed=5,epochs=4,$TRAINER" --epochs 1
    check "ssd: epoch 0 all from SSD" test "$(m "$mnt" 'clairfs_reads_total{source="ssd"}')" -eq $N
    check "ssd: nothing fetched" test "$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')" -eq 0
    check "ssd: unmount 2" cfs_umount "$mnt"
    victim=$(find "$ssd/cache" -type f | sort | head -1)
    "$PYTHON" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(50); b = f.read(1); f.seek(50); f.write(bytes([b[0] ^ 1]))' "$victim"
    check "ssd: remount after a flipped byte" cfs_mount "$src" "$mnt" "$TMP/d-ssd3.log" -o "$SSDOPTS"
    check "ssd: epoch 0 verified despite the flipped byte" bench "$mnt" "seed=5,epochs=4,$TRAINER" --epochs 1
    check "ssd: corruption counted" test "$(m "$mnt" clairfs_cache_checksum_failures_total)" -eq 1
    check "ssd: $((N - 1)) SSD reads" test "$(m "$mnt" 'clairfs_reads_total{source="ssd"}')" -eq $((N - 1))
    check "ssd: one read from the source" test "$(m "$mnt" 'clairfs_reads_total{source="pfs"}')" -eq 1
    check "ssd: unmount 3" cfs_umount "$mnt"
else
    fail "mount ssd"
fi

# --- kill -9 while prefetching from a slow source, then remount.
pfs=$TMP/pfs
cfs_pfsemu "$src" "$pfs" bandwidth=4M,latency_open=1ms || fail "pfsemu"
ssd=$TMP/ssd-kill
mnt=$TMP/mnt-kill
KOPTS="seed=5,epochs=4,$TRAINER,ram=0,ssd=64M,ssd_dir=$ssd,io_depth=8"
if cfs_mount "$pfs" "$mnt" "$TMP/d-k1.log" -o "$KOPTS"; then
    # io=auto over a FUSE source takes the thread pool (io.h).
    check "io=auto over FUSE: threads" grep -q "; io threads;" "$TMP/d-k1.log"
    check "kill: some staged" wait_fetched "$mnt" $((TOTAL / 4))
    kill -KILL "$CFS_PID"
    wait "$CFS_PID" 2>/dev/null
    fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt"
    check "kill: remount" cfs_mount "$pfs" "$mnt" "$TMP/d-k2.log" -o "$KOPTS"
    check "kill: epoch 0 verified after the crash" bench "$mnt" "seed=5,epochs=4,$TRAINER" --epochs 1
    warm=$(m "$mnt" 'clairfs_reads_total{source="ssd"}')
    echo "kill: $warm of $N reads served from entries that survived"
    check "kill: warm where valid" test "$warm" -gt 0
    check "kill: unmount" cfs_umount "$mnt"
fi
fusermount3 -u "$pfs"

cfs_finish
