#!/usr/bin/python3
"""Live comparison of clairfs's index order with torchvision.

Builds random trees (nested folders, mixed-case extensions, non-image files,
names with spaces, unicode, newlines and bytes that are not UTF-8, links to
files and directories, broken links) and compares `catalog_dump -0` with
ImageFolder(root).samples, and `catalog_dump -0 -o sorted` with every
regular file by bytewise path.  Exit 77 when torchvision does not import.

    test_imagefolder_live.py CATALOG_DUMP [TREES] [SEED]
"""
import os
import random
import subprocess
import sys
import tempfile

try:
    from torchvision.datasets import ImageFolder
except Exception as e:  # the machine lacks torchvision: skip
    print("SKIP: torchvision does not import: %s" % e)
    sys.exit(77)

PIECES = [b"a", b"b", b"B", b"z", b"0", b"9", b"_", b"-", b" ", b".", b"x y", b"\xc3\xa9",
          b"\xe6\x97\xa5", b"\xef\xbc\xa1", b"\xff", b"\x80", b"\xed\xa0\x80", b"\xe2\x82",
          b"\n", b"\xf0\x9f\x98\x80", b"~", b"#"]
EXTS = [b".jpg", b".JPG", b".jpeg", b".png", b".PnG", b".txt", b"", b".webp", b".tiff",
        b".TIF", b".bmp", b".pgm", b".ppm", b".jpg.bak", b".Jpeg"]


def name(rng):
    n = b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
    return n if n not in (b".", b"..") else n + b"a"


def build(rng, root):
    dirs = []  # (path, has_links_below)
    files = []

    def fill(d, depth, allow_empty):
        made = 0
        for _ in range(rng.randint(0 if allow_empty else 1, 6)):
            p = os.path.join(d, name(rng) + rng.choice(EXTS))
            if os.path.lexists(p):
                continue
            open(p, "wb").close()
            files.append(p)
            made += 1
        if not allow_empty and not made:
            p = os.path.join(d, b"fallback.jpg")
            open(p, "wb").close()
            files.append(p)
        if depth < 3:
            for _ in range(rng.randint(0, 3 - depth)):
                sub = os.path.join(d, name(rng))
                if os.path.lexists(sub):
                    continue
                os.mkdir(sub)
                dirs.append(sub)
                fill(sub, depth + 1, True)

    for _ in range(rng.randint(1, 5)):
        cls = os.path.join(root, name(rng))
        if os.path.lexists(cls):
            continue
        os.mkdir(cls)
        dirs.append(cls)
        fill(cls, 1, False)
        # every class holds at least one image, else torchvision raises
        open(os.path.join(cls, b"guaranteed.jpg"), "wb").close()
    for _ in range(rng.randint(0, 2)):
        p = os.path.join(root, name(rng) + rng.choice(EXTS))
        if not os.path.lexists(p):
            open(p, "wb").close()
    # Links: to files, to directories, broken ones.  A directory link never
    # closes a cycle (clairfs keeps a cycle as a link where os.walk follows it
    # until ELOOP): its target holds no directory link below it and is not
    # an ancestor of the link.
    link_free = set(dirs)
    for _ in range(rng.randint(0, 5)):
        where = rng.choice(dirs) if dirs else root
        p = os.path.join(where, name(rng) + rng.choice(EXTS))
        if os.path.lexists(p):
            continue
        kind = rng.random()
        if kind < 0.4 and files:
            os.symlink(os.path.relpath(rng.choice(files), where), p)
        elif kind < 0.7 and link_free:
            target = rng.choice(sorted(link_free))
            if (where + b"/").startswith(target + b"/"):
                continue
            os.symlink(os.path.relpath(target, where), p)
            link_free = {d for d in link_free if not (where + b"/").startswith(d + b"/")}
        else:
            os.symlink(b"nowhere" + name(rng), p)


def dump(tool, root, *args):
    out = subprocess.run([tool, "-0", *args, root], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        raise RuntimeError("catalog_dump failed: %s" % out.stderr.decode(errors="replace"))
    return out.stdout.split(b"\0")[:-1]


def expected_sorted(root):
    rootb = os.fsencode(root)
    got = []
    for d, _, fs in os.walk(rootb, followlinks=True):
        for f in fs:
            p = os.path.join(d, f)
            if os.path.isfile(p):
                got.append(p[len(rootb) + 1:])
    return sorted(got)


def main():
    tool = sys.argv[1]
    trees = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 2024
    failures = 0
    samples = 0
    for t in range(trees):
        rng = random.Random(seed * 1000 + t)
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "root")
            os.mkdir(root)
            build(rng, os.fsencode(root))
            rootb = os.fsencode(root)
            want = [os.fsencode(p)[len(rootb) + 1:] for p, _ in ImageFolder(root).samples]
            got = dump(tool, root)
            samples += len(want)
            if got != want:
                failures += 1
                print("tree %d (seed %d): imagefolder order differs" % (t, seed * 1000 + t))
                for i, (g, w) in enumerate(zip(got, want)):
                    if g != w:
                        print("  first difference at %d: clairfs %r torchvision %r" % (i, g, w))
                        break
                else:
                    print("  lengths: clairfs %d torchvision %d" % (len(got), len(want)))
            if dump(tool, root, "-o", "sorted") != expected_sorted(root):
                failures += 1
                print("tree %d (seed %d): sorted order differs" % (t, seed * 1000 + t))
    print("%d trees, %d samples compared with torchvision" % (trees, samples))
    print("%d passed, %d failed" % (2 * trees - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
