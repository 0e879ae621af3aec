#!/usr/bin/env bash
# A mount serves a generated tree exactly: bytes, metadata, listings, odd
# names, links, empty and >4 GiB files; .clairfs is hidden but works;
# every write answers EROFS; metrics count what was read.
. "$(dirname "$0")/lib.sh"
cfs_setup

src=$TMP/src
mnt=$TMP/mnt
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 20 --files 150 --size lognormal:6K:0.8 --max-size 256K \
    --seed 7 --odd-names --nested --extras "$src" || { fail "gendata"; cfs_finish; }
# Sparse > 4 GiB file with a marker past 4 GiB, and a 0-byte image.
big=$src/n0001/big.bin
truncate -s 5G "$big"
printf 'CLAIRFS-MARKER-4G' | dd of="$big" bs=1 seek=$((4 * 1024 * 1024 * 1024 + 4096 + 7)) conv=notrunc status=none
touch -d @1600000000 "$big"
: >"$src/n0002/zero.JPEG"

# no_sweep: nothing is staged before the reads counted below.
# ram=1G: the >4 GiB file is read through, not fetched whole into a RAM
# tier the machine's default would size for it.
cfs_mount "$src" "$mnt" "$TMP/daemon.log" -o order=sorted,no_sweep,ram=1G,index="$TMP/index" ||
    { fail "mount"; cfs_finish; }

# --- reads are counted: exactly k files read through the fresh mount.
check "7 file reads counted as source=pfs" "$PYTHON" - "$src" "$mnt" <<'EOF'
import os, sys
src, mnt = sys.argv[1], sys.argv[2]
names = sorted(n for n in os.listdir(os.path.join(src, "n0003")) if n.endswith(".JPEG"))[:7]
for n in names:
    with open(os.path.join(mnt, "n0003", n), "rb") as f:
        while f.read(65536):
            pass
with open(os.path.join(mnt, ".clairfs", "metrics")) as f:
    m = dict(l.rsplit(" ", 1) for l in f.read().splitlines() if not l.startswith("#"))
want = sum(os.path.getsize(os.path.join(src, "n0003", n)) for n in names)
ok = m['clairfs_reads_total{source="pfs"}'] == "7" and int(m['clairfs_fetch_bytes_total{from="pfs"}']) == want
if not ok:
    print(m, want)
sys.exit(0 if ok else 1)
EOF

# --- catalog figures are exact (symlinks followed, as the catalog does).
check "catalog figures match the source" "$PYTHON" - "$src" "$mnt" <<'EOF'
import os, stat, sys
src, mnt = sys.argv[1], sys.argv[2]
files = dirs = size = 0
for root, ds, fs in os.walk(src, followlinks=True):
    dirs += 1
    for n in fs:
        try:
            st = os.stat(os.path.join(root, n))
        except OSError:
            continue  # broken link or loop: kept as a symlink
        if stat.S_ISREG(st.st_mode):
            files += 1
            size += st.st_size
with open(os.path.join(mnt, ".clairfs", "metrics")) as f:
    m = dict(l.rsplit(" ", 1) for l in f.read().splitlines() if not l.startswith("#"))
got = (int(m["clairfs_catalog_files"]), int(m["clairfs_catalog_dirs"]), int(m["clairfs_catalog_bytes"]))
print("catalog", got, "source", (files, dirs, size))
sys.exit(0 if got == (files, dirs, size) and m["clairfs_catalog_loaded_from_index"] == "0" else 1)
EOF

# --- every entry: bytes, metadata and listings equal the source's.
check "bytes, metadata and listings of every entry" "$PYTHON" - "$src" "$mnt" <<'EOF'
import os, stat, sys
src, mnt = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
bad = []
nfiles = 0
def meta(st):
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid, st.st_gid, st.st_nlink)
for root, ds, fs in os.walk(src, followlinks=True):
    rel = os.path.relpath(root, src)
    mroot = os.path.normpath(os.path.join(mnt, rel))
    listing = sorted(os.listdir(mroot))
    if listing != sorted(ds + fs):
        bad.append(("listing", rel, listing, sorted(ds + fs)))
    for n in ds + fs:
        s, m = os.path.join(root, n), os.path.join(mroot, n)
        try:
            sst = os.stat(s)
        except OSError:
            sst = os.lstat(s)  # a broken link or a loop stays a link
        mst = os.lstat(m)
        if meta(sst) != meta(mst):
            bad.append(("meta", m, meta(sst), meta(mst)))
        if stat.S_ISLNK(sst.st_mode):
            if os.readlink(s) != os.readlink(m):
                bad.append(("readlink", m))
        elif stat.S_ISREG(sst.st_mode) and sst.st_size < (1 << 30):
            nfiles += 1
            with open(s, "rb") as a, open(m, "rb") as b:
                if a.read() != b.read():
                    bad.append(("bytes", m))
print("compared", nfiles, "files;", len(bad), "differences")
for b in bad[:10]:
    print(b)
sys.exit(1 if bad or nfiles < 3000 else 0)
EOF

check "cmp agrees on a sample of files" bash -c '
    cd "$1" && find . -type f -name "img_*0.JPEG" -size -1M | head -n 100 |
    while IFS= read -r f; do cmp -s "$f" "$2/$f" || exit 1; done' _ "$src" "$mnt"
check "ls -ln of a class folder matches" bash -c '
    diff <(cd "$1/n0005" && ls -ln --time-style=full-iso | grep -v ^total) \
         <(cd "$2/n0005" && ls -ln --time-style=full-iso | grep -v ^total)' _ "$src" "$mnt"

# --- large and empty files.
check ">4 GiB sparse file: size and bytes past 4 GiB" "$PYTHON" - "$mnt/n0001/big.bin" <<'EOF'
import os, sys
off = 4 * 1024**3 + 4096 + 7
with open(sys.argv[1], "rb") as f:
    f.seek(off - 3)
    got = f.read(23)
    f.seek(5 * 1024**3 - 10)
    tail = f.read(100)
ok = os.stat(sys.argv[1]).st_size == 5 * 1024**3 and got == b"\0\0\0CLAIRFS-MARKER-4G\0\0\0" and tail == b"\0" * 10
sys.exit(0 if ok else 1)
EOF
check "0-byte file reads empty" test "$(wc -c <"$mnt/n0002/zero.JPEG")" -eq 0 -a -f "$mnt/n0002/zero.JPEG"

# --- links.
check "symlink loop: readlink works, open gives ELOOP" bash -c '
    [ "$(readlink "$1/loop_a")" = loop_b ] && ! cat "$1/loop_a" 2>/dev/null &&
    cat "$1/loop_a" 2>&1 | grep -q "Too many levels of symbolic links"' _ "$mnt"
check "link to a class folder is a folder" test -d "$mnt/link_to_class" -a ! -L "$mnt/link_to_class"

# --- the control namespace.
check ".clairfs is not in the root listing" bash -c '! ls -a "$1" | grep -qx .clairfs' _ "$mnt"
check ".clairfs not listed by Python either (readdirplus)" "$PYTHON" -c '
import os, sys; sys.exit(".clairfs" in os.listdir(sys.argv[1]) or ".clairfs" in [e.name for e in os.scandir(sys.argv[1])])' "$mnt"
check ".clairfs lists its four files" test "$(ls "$mnt/.clairfs" | tr '\n' ' ')" = "control metrics ready stats "
check "cat metrics shows the families" bash -c 'cat "$1/.clairfs/metrics" | grep -c "^# TYPE clairfs_" | grep -qx 31' _ "$mnt"
check "metrics parse as Prometheus text" "$PYTHON" - "$mnt/.clairfs/metrics" <<'EOF'
import re, sys
sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*\})? [0-9]+(\.[0-9]+)?$')
text = open(sys.argv[1]).read()
ok = text.endswith("\n")
for l in text.splitlines():
    if l.startswith("# HELP ") or l.startswith("# TYPE "):
        continue
    ok = ok and bool(sample.match(l))
sys.exit(0 if ok else 1)
EOF
check "stats is readable" grep -q '^reads .*pfs' "$mnt/.clairfs/stats"
check "control: epoch 3 sets clairfs_epoch" bash -c 'echo "epoch 3" >"$1/.clairfs/control" && [ "$(awk "\$1==\"clairfs_epoch\"{print \$2}" "$1/.clairfs/metrics")" = 3 ]' _ "$mnt"
check "control: a bad command is EINVAL" bash -c '
    err=$( (echo "bogus 1" >"$1/.clairfs/control") 2>&1 ) && exit 1
    case $err in *"Invalid argument"*) exit 0 ;; *) exit 1 ;; esac' _ "$mnt"
check "metrics are not writable" bash -c '! (echo x >"$1/.clairfs/metrics") 2>/dev/null' _ "$mnt"

# --- xattrs.
# The file was read above, so the reactive cache (no seed) holds it in RAM.
check "user.clairfs.state is ram after a read; other names ENODATA" "$PYTHON" - "$mnt" <<'EOF'
import errno, os, sys
f = os.path.join(sys.argv[1], "n0000", "img_000000.JPEG")
ok = os.getxattr(f, "user.clairfs.state") == b"ram" and os.listxattr(f) == ["user.clairfs.state"]
for path, name in ((f, "user.other"), (os.path.dirname(f), "user.clairfs.state")):
    try:
        os.getxattr(path, name)
        ok = False
    except OSError as e:
        ok = ok and e.errno == errno.ENODATA
sys.exit(0 if ok else 1)
EOF
if command -v getfattr >/dev/null; then
    check "getfattr -n user.clairfs.state" bash -c 'getfattr --absolute-names --only-values -n user.clairfs.state "$1/n0000/img_000000.JPEG" | grep -qx ram' _ "$mnt"
fi

# --- every write-type operation is EROFS.
check "writes, creates, mkdir, rename, unlink, chmod, truncate, xattrs: EROFS" "$PYTHON" - "$mnt" <<'EOF'
import errno, os, sys
m = sys.argv[1]
f = os.path.join(m, "n0000", "img_000000.JPEG")
d = os.path.join(m, "n0000")
ops = {
    "open w": lambda: open(f, "wb"),
    "open a": lambda: open(f, "ab"),
    "open r+": lambda: open(f, "r+b"),
    "create": lambda: open(os.path.join(d, "new.jpg"), "wb"),
    "O_CREAT|O_EXCL": lambda: os.open(os.path.join(d, "new2"), os.O_CREAT | os.O_EXCL | os.O_WRONLY),
    "mkdir": lambda: os.mkdir(os.path.join(d, "newdir")),
    "rmdir": lambda: os.rmdir(os.path.join(m, "empty_dir", "empty_sub")),
    "rename": lambda: os.rename(f, f + ".x"),
    "unlink": lambda: os.unlink(f),
    "symlink": lambda: os.symlink("x", os.path.join(d, "ln")),
    "link": lambda: os.link(f, os.path.join(d, "hard")),
    "chmod": lambda: os.chmod(f, 0o600),
    "chown": lambda: os.chown(f, 1, 1),
    "utime": lambda: os.utime(f, (1, 1)),
    "truncate": lambda: os.truncate(f, 0),
    "setxattr": lambda: os.setxattr(f, "user.x", b"1"),
    "setxattr state": lambda: os.setxattr(f, "user.clairfs.state", b"ram"),
    "removexattr": lambda: os.removexattr(f, "user.clairfs.state"),
    "mknod": lambda: os.mkfifo(os.path.join(d, "fifo")),
}
bad = []
for name, op in ops.items():
    try:
        op()
        bad.append((name, "succeeded"))
    except OSError as e:
        if e.errno != errno.EROFS:
            bad.append((name, errno.errorcode.get(e.errno)))
print(bad)
sys.exit(1 if bad else 0)
EOF
check "shell redirection into a file fails" bash -c '! (echo x >"$1/n0000/img_000000.JPEG") 2>/dev/null' _ "$mnt"
check "statfs mirrors the source" bash -c '[ "$(stat -f -c "%b %S" "$1")" = "$(stat -f -c "%b %S" "$2")" ]' _ "$src" "$mnt"
check "fsname and type in /proc/mounts" grep -q "^clairfs:$src $mnt fuse.clairfs " /proc/mounts

check "unmount is clean (daemon exits 0)" cfs_umount "$mnt"
check "nothing left mounted" bash -c '! grep -q " $1 " /proc/mounts' _ "$mnt"
cfs_finish
