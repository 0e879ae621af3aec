#!/usr/bin/env bash
# Page-cache staging through a real mount (prefetch.h, "Page cache"), every
# byte verified by clairfs-bench --verify or compared with the source:
#  - ram >= dataset: every file is staged once; in epochs 1-2 every open
#    counts as a RAM read and no read request reaches the daemon but those
#    of fallback opens; after the last epoch every staged file was
#    invalidated and the RAM tier is empty;
#  - the kernel's own view (mmap + mincore of every file) holds the pages
#    clairfs_pagecache_bytes accounts for;
# The kernel may reclaim staged pages whenever it likes (these VMs run a
# DAMON pageout scheme that drops ~1 % of cold pages a minute), so the
# checks allow fallback opens, and bound them: a stager that stored nothing
# would make every staged open a fallback.
#  - pages the kernel drops (posix_fadvise DONTNEED) are read from the
#    source, counted as fallbacks, and the replies refill the page cache;
#  - ram = 30 %: staging and Belady eviction together stay within ram=;
#  - no seed (reactive LRU, no SSD tier): staged after each first read, the
#    second epoch served by the kernel; with an SSD tier nothing is staged;
#  - -o no_pagecache: nothing staged, every epoch's reads reach the daemon.
. "$(dirname "$0")/lib.sh"
: "${CLAIRFS_BENCH:?}"
cfs_setup

src=$TMP/src
cfs_small_dataset "$src" || { fail "gendata"; cfs_finish; }
TRAINER="batch=8"

bench() { cfs_replay "$src" "$@"; } # bench MNT OPTS [args]
m() { cfs_metric "$1" "$2"; }

# --- ram >= dataset: stage once, no round trip afterwards.
mnt=$TMP/mnt-full
if cfs_mount "$src" "$mnt" "$TMP/d-full.log" -o seed=5,epochs=3,$TRAINER,ram=64M,index="$TMP/ix-full"; then
    check "full: epoch 0 verified" bench "$mnt" "seed=5,epochs=3,$TRAINER" --epochs 1
    check "full: all $N files staged" cfs_wait_staged "$mnt" $N
    check "full: the page cache holds the whole RAM tier" \
        test "$(m "$mnt" clairfs_pagecache_bytes)" -eq $((PAGES * 4096)) -a \
        "$(m "$mnt" 'clairfs_cache_bytes{tier="ram"}')" -eq $((PAGES * 4096))
    req0=$(m "$mnt" clairfs_read_requests_total)
    ram0=$(m "$mnt" 'clairfs_reads_total{source="ram"}')
    fb0=$(m "$mnt" clairfs_pagecache_fallback_reads_total)
    check "full: epochs 1-2 verified" bench "$mnt" "seed=5,start_epoch=1,epochs=3,$TRAINER" --epochs 2
    req=$(($(m "$mnt" clairfs_read_requests_total) - req0))
    fb=$(($(m "$mnt" clairfs_pagecache_fallback_reads_total) - fb0))
    echo "full: epochs 1-2: $req read requests, $fb fallback opens of $((2 * N)) ($req0 requests in epoch 0)"
    check "full: epochs 1-2 sent read requests only for fallback opens" \
        test "$req" -le $((fb * MAXPAGES))
    check "full: fallback opens ($fb) are the exception" test "$fb" -le $((N / 5))
    check "full: epochs 1-2 counted as RAM reads" \
        test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq $((ram0 + 2 * N))
    check "full: each file staged once" test "$(m "$mnt" clairfs_pagecache_staged_total)" -eq $N
    # The kernel sends a file's RELEASE after the reader's close returned:
    # the drop at the last read's release lands a moment after the epoch.
    check "full: each file invalidated after its last read" \
        cfs_wait_metric "$mnt" clairfs_pagecache_invalidations_total $N
    check "full: nothing left staged" cfs_wait_metric "$mnt" clairfs_pagecache_bytes 0
    check "full: RAM tier empty" cfs_wait_metric "$mnt" 'clairfs_cache_bytes{tier="ram"}' 0
    fetched=$(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}')
    fball=$(m "$mnt" clairfs_pagecache_fallback_reads_total)
    check "full: fetched once ($fetched of $TOTAL bytes, plus the pages of $fball fallback opens)" \
        test "$fetched" -ge "$TOTAL" -a "$fetched" -le $((TOTAL + fball * MAXPAGES * 4096))
    check "full: clean unmount" cfs_umount "$mnt"
else
    fail "mount full"
fi

# --- the kernel's view, and pages it drops (epochs=100: the probes below
# --- move the trainer position, but never to a last read).
mnt=$TMP/mnt-truth
if cfs_mount "$src" "$mnt" "$TMP/d-truth.log" -o seed=5,epochs=100,$TRAINER,ram=64M,index="$TMP/ix-truth"; then
    check "truth: epoch 0 verified" bench "$mnt" "seed=5,epochs=100,$TRAINER" --epochs 1
    check "truth: all staged" cfs_wait_staged "$mnt" $N
    first=$(cd "$src" && find . -type f | sort | head -1)
    check "truth: a staged file's state is ram" \
        test "$(getfattr --only-values -n user.clairfs.state "$mnt/$first")" = ram
    # Every file opened (keep_cache: the open keeps the pages), mapped and
    # asked which of its pages are resident.
    resident=$("$PYTHON" - "$mnt" <<'EOF'
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
total = 0
for d, _, files in os.walk(sys.argv[1]):
    for name in files:
        fd = os.open(os.path.join(d, name), os.O_RDONLY)
        size = os.fstat(fd).st_size
        if size:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            pages = (size + 4095) // 4096
            vec = ctypes.create_string_buffer(pages)
            if addr in (None, ctypes.c_void_p(-1).value) or libc.mincore(addr, size, vec) != 0:
                sys.exit("mincore: " + os.strerror(ctypes.get_errno()))
            total += sum(b & 1 for b in vec.raw)
            libc.munmap(addr, size)
        os.close(fd)
print(total)
EOF
)
    check "truth: clairfs accounts for all $PAGES pages" \
        test "$(m "$mnt" clairfs_pagecache_bytes)" -eq $((PAGES * 4096))
    check "truth: the kernel holds $resident of them (>= 90 %; reclaim takes a few)" \
        test "${resident:-0}" -le "$PAGES" -a "${resident:-0}" -ge $((PAGES * 9 / 10))
    # Drop the pages of ten files behind clairfs's back, then read them.
    (cd "$src" && find . -type f | sort | head -10) >"$TMP/dropped"
    "$PYTHON" - "$mnt" "$TMP/dropped" <<'EOF'
import os, sys
for rel in open(sys.argv[2]).read().split():
    fd = os.open(os.path.join(sys.argv[1], rel), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
    req0=$(m "$mnt" clairfs_read_requests_total)
    same() { while read -r f; do cmp -s "$src/$f" "$mnt/$f" || return 1; done <"$TMP/dropped"; }
    check "truth: dropped pages read back byte for byte" same
    fb=$(m "$mnt" clairfs_pagecache_fallback_reads_total)
    check "truth: ten fallback reads counted ($fb)" test "$fb" -ge 10 -a "$fb" -le $((10 + N / 10))
    req1=$(m "$mnt" clairfs_read_requests_total)
    check "truth: they reached the daemon ($((req1 - req0)) requests)" test "$req1" -gt "$req0"
    check "truth: read again, byte for byte" same
    req2=$(m "$mnt" clairfs_read_requests_total)
    # Exactly none, unless reclaim strikes again within the moment.
    check "truth: the replies refilled the page cache ($((req2 - req1)) new requests)" \
        test $((req2 - req1)) -lt $((req1 - req0))
    dropped_bytes=$(cd "$src" && xargs stat -c %s <"$TMP/dropped" | awk '{s += $1} END {print s}')
    extra=$(($(m "$mnt" 'clairfs_fetch_bytes_total{from="pfs"}') - TOTAL))
    # A page may be asked twice (readahead racing a read, or reclaimed
    # again): 64 KiB of slack.
    check "truth: the source read once, and again for the dropped files ($extra bytes)" \
        test "$extra" -ge "$dropped_bytes" -a "$extra" -le $((dropped_bytes + 65536 + (fb - 10) * MAXPAGES * 4096))
    check "truth: clean unmount" cfs_umount "$mnt"
else
    fail "mount truth"
fi

# --- ram = 30 %: staging under Belady eviction stays within ram=.
RAM=$((TOTAL * 3 / 10))
mnt=$TMP/mnt-30
if cfs_mount "$src" "$mnt" "$TMP/d-30.log" -o seed=9,epochs=3,$TRAINER,ram=$RAM,index="$TMP/ix-30"; then
    (while [ -e "$mnt/.clairfs/metrics" ] && [ ! -e "$TMP/stop-sampler" ]; do
        awk '$1 == "clairfs_cache_bytes{tier=\"ram\"}" { r = $2 } $1 == "clairfs_pagecache_bytes" { p = $2 }
             END { print r + 0, p + 0 }' "$mnt/.clairfs/metrics" || break
        sleep 0.01
    done >"$TMP/samples") &
    sampler=$!
    check "ram=30%: 3 epochs, every byte right" bench "$mnt" "seed=9,epochs=3,$TRAINER"
    touch "$TMP/stop-sampler"
    wait "$sampler" 2>/dev/null
    check "ram=30%: files were staged" test "$(m "$mnt" clairfs_pagecache_staged_total)" -gt 0
    check "ram=30%: staged files were invalidated" \
        test "$(m "$mnt" clairfs_pagecache_invalidations_total)" -gt 0
    check "ram=30%: peak within $RAM" \
        test "$(m "$mnt" 'clairfs_cache_peak_bytes{tier="ram"}')" -le "$RAM"
    bad=$(awk -v cap="$RAM" '$1 > cap || $2 > $1 { n++ } END { print n + 0 }' "$TMP/samples")
    check "ram=30%: $(wc -l <"$TMP/samples") samples, staged <= tier <= $RAM in all ($bad bad)" \
        test "$bad" -eq 0
    echo "ram=30%: reads ram $(m "$mnt" 'clairfs_reads_total{source="ram"}') pfs $(m "$mnt" 'clairfs_reads_total{source="pfs"}') fallback $(m "$mnt" clairfs_pagecache_fallback_reads_total) misses $(m "$mnt" 'clairfs_prediction_total{result="miss"}')"
    check "ram=30%: every read counted once" \
        test $(($(m "$mnt" 'clairfs_reads_total{source="ram"}') + $(m "$mnt" 'clairfs_reads_total{source="pfs"}'))) -eq $((3 * N))
    check "ram=30%: clean unmount" cfs_umount "$mnt"
else
    fail "mount ram=30%"
fi

# --- no seed: the LRU cache is staged too, unless an SSD tier is there.
mnt=$TMP/mnt-lru
if cfs_mount "$src" "$mnt" "$TMP/d-lru.log" -o ram=64M,no_sweep,index="$TMP/ix-lru"; then
    check "lru: epoch 0 verified" bench "$mnt" "seed=5,epochs=2,$TRAINER" --epochs 1
    check "lru: every file read was staged" cfs_wait_staged "$mnt" $N
    req0=$(m "$mnt" clairfs_read_requests_total)
    fb0=$(m "$mnt" clairfs_pagecache_fallback_reads_total)
    check "lru: epoch 1 verified" bench "$mnt" "seed=5,start_epoch=1,epochs=2,$TRAINER" --epochs 1
    req=$(($(m "$mnt" clairfs_read_requests_total) - req0))
    fb=$(($(m "$mnt" clairfs_pagecache_fallback_reads_total) - fb0))
    check "lru: epoch 1 from RAM" test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -eq "$N"
    check "lru: epoch 1 sent read requests only for fallback opens ($req, $fb)" \
        test "$req" -le $((fb * MAXPAGES)) -a "$fb" -le $((N / 5))
    check "lru: nothing predicted" test "$(m "$mnt" 'clairfs_prediction_total{result="hit"}')" -eq 0
    check "lru: clean unmount" cfs_umount "$mnt"
else
    fail "mount without seed"
fi
mnt=$TMP/mnt-lru-ssd
if cfs_mount "$src" "$mnt" "$TMP/d-lru-ssd.log" -o ram=64M,ssd=64M,ssd_dir="$TMP/ssd-lru"; then
    check "lru+ssd: 2 epochs verified" bench "$mnt" "seed=5,epochs=2,$TRAINER"
    check "lru+ssd: nothing staged" test "$(m "$mnt" clairfs_pagecache_staged_total)" -eq 0
    check "lru+ssd: clean unmount" cfs_umount "$mnt"
else
    fail "mount without seed, with SSD"
fi

# --- no_pagecache: the tiers answer every read.
mnt=$TMP/mnt-off
if cfs_mount "$src" "$mnt" "$TMP/d-off.log" -o seed=5,epochs=2,$TRAINER,ram=64M,no_pagecache,index="$TMP/ix-off"; then
    check "off: 2 epochs verified" bench "$mnt" "seed=5,epochs=2,$TRAINER"
    check "off: nothing staged" test "$(m "$mnt" clairfs_pagecache_staged_total)" -eq 0
    check "off: every open read through the daemon" \
        test "$(m "$mnt" clairfs_read_requests_total)" -ge $((2 * N))
    check "off: epoch 1 from RAM" test "$(m "$mnt" 'clairfs_reads_total{source="ram"}')" -ge "$N"
    check "off: clean unmount" cfs_umount "$mnt"
else
    fail "mount no_pagecache"
fi

cfs_finish
