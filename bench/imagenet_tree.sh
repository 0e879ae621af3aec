# A tree shaped like ImageNet-1k's train split (sourced by the benches that
# mount one: bench-identify-imagenet-mount.sh, bench-mpi-agree.sh): 1000
# class folders, NAME.JPEG files that ImageFolder lists, each 64-256 bytes
# of filler (nothing decodes them).  At 1 281 167 files the classes hold
# 732 to 1300 (an ImageNet-like spread, not ImageNet's own counts); other
# sizes spread over the 1000 classes as evenly as they can.  On tmpfs a
# file costs an inode and a page: ~5 GiB at full size.
#
# imagenet_tree SRC FILES PYTHON: SRC holds the tree, made unless SRC.complete
# (beside it: a file in the tree would be in the catalog) says a former
# run made it; prints one "dataset:" line; false with a one-line error.
imagenet_tree() {
    local src=$1 files=$2 py=$3 avail need t0
    if [ -e "$src.complete" ]; then
        echo "dataset: $files files in $src (reused)"
    else
        avail=$(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo)
        need=$((files * 3 / 1000 + 512)) # MiB: ~1 KiB an inode, 4 KiB a page, and headroom
        [ "$avail" -ge "$need" ] ||
            { echo "imagenet_tree: $avail MiB available, the tree needs ~$need MiB" >&2; return 1; }
        rm -rf --one-file-system "$src"
        mkdir -p "$src" || return 1
        t0=$EPOCHREALTIME
        "$py" - "$src" "$files" <<'PY' || { echo "imagenet_tree: generating the tree failed" >&2; return 1; }
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
classes = 1000
if n == 1281167:
    # ImageNet-like: 934 classes of 1300, 66 from 732 to 1299 (sum 1 281 167)
    counts = [1300] * classes
    red = [round(732 + (1299 - 732) * i / 65) for i in range(66)]
    excess = sum(red) + 934 * 1300 - n
    for i in range(excess):
        red[1 + i % 64] -= 1
    for i, c in enumerate(red):
        counts[(i * 151 + 7) % classes] = c
else:
    counts = [n // classes + (i < n % classes) for i in range(classes)]
assert sum(counts) == n
rnd = random.Random(5)
blob = bytes(rnd.getrandbits(8) for _ in range(512))
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
for c in range(classes):
    wnid = "n%08d" % (1440764 + c * 4111)
    d = os.path.join(root, wnid)
    os.mkdir(d)
    for j in range(counts[c]):
        fd = os.open("%s/%s_%d.JPEG" % (d, wnid, j + 1), flags, 0o644)
        k = 64 + (j * 37 + c) % 193
        os.write(fd, blob[k:k * 2])
        os.close(fd)
PY
        touch "$src.complete"
        echo "dataset: $files files generated in $src in" \
            "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s" \
            "(load $(cut -d' ' -f1-3 /proc/loadavg))"
    fi
    [ "$(find "$src" -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq 1000 ] ||
        { echo "imagenet_tree: $src does not hold 1000 class folders" >&2; return 1; }
}
