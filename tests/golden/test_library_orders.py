#!/usr/bin/python3
"""clairfs's timm, mmpretrain, ultralytics and ultralytics-cls orders against
the libraries' code (transcribed in library_orders.py), rooted at the source
and at a folder below it.

Each random tree is a dataset root as users keep one: train/ and val/
beside files of its own, and in them the traps the libraries handle each
their own way: digit runs (img2, img10, img02), upper-case extensions,
nested folders, files that are not images, empty class folders, hidden
files and folders, names that are only an extension (".jpg", "..jpg"), a
folder named like an image, links to files and folders, broken links, and
names that are not ASCII or not UTF-8.  For each tree, kind and root
(the source, then "train"), `catalog_dump -0 -r -o KIND:ROOT SOURCE` must
print the library's list (a library that raises: an empty list, the
mount's empty index).

timm's sort is stable over os.walk's order, the directory listing's, for
paths with equal natural keys ("img2" and "img02", "A.jpg" and "a.jpg");
clairfs breaks such ties bytewise (catalog_order.c), so the library's list
is compared with its tie groups put in bytewise order.

    test_library_orders.py CATALOG_DUMP [TREES] [SEED]
"""
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import library_orders  # noqa: E402

KINDS = ["timm", "mmpretrain", "ultralytics", "ultralytics-cls"]
# No upper-case non-ASCII letter and no non-ASCII digit: timm lowers and
# reads those as Python does, clairfs does not (a documented divergence).
PIECES = [b"img", b"2", b"10", b"02", b"a", b"A", b"b", b"B", b"z", b"_", b"-", b" ", b".",
          b"x y", b"\xc3\xa9", b"\xe6\x97\xa5", b"\xff", b"\x80", b"9"]
EXTS = [b".jpg", b".JPG", b".jpeg", b".Jpeg", b".png", b".PNG", b".txt", b"", b".ppm", b".pgm",
        b".tif", b".TIFF", b".webp", b".heic", b".jpg.bak", b".bmp", b".dng"]


def name(rng):
    n = b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.08:
        n = b"." + n  # hidden
    return n if n not in (b".", b"..") else n + b"a"


class Tree:
    def __init__(self, rng, root):
        self.rng, self.files, self.dirs = rng, [], []
        for top in (b"train", b"val"):
            d = os.path.join(root, top)
            os.mkdir(d)
            self.dirs.append(d)
            for _ in range(rng.randint(0, 5)):
                self.folder(d, 1)
        self.fill(root)
        self.links()

    def make_file(self, d, n):
        p = os.path.join(d, n)
        if not os.path.lexists(p):
            open(p, "wb").close()
            self.files.append(p)

    def fill(self, d):
        rng = self.rng
        for _ in range(rng.randint(0, 6)):
            self.make_file(d, name(rng) + rng.choice(EXTS))
        if rng.random() < 0.1:
            self.make_file(d, rng.choice([b".jpg", b"..jpg", b".PNG"]))

    def folder(self, parent, depth):
        rng = self.rng
        d = os.path.join(parent, name(rng) + (b".jpg" if rng.random() < 0.05 else b""))
        if os.path.lexists(d):
            return
        os.mkdir(d)
        self.dirs.append(d)
        if rng.random() < 0.15:
            return  # an empty folder: an empty class at depth 1
        self.fill(d)
        if depth < 3:
            for _ in range(rng.randint(0, 3 - depth)):
                self.folder(d, depth + 1)

    def links(self):
        # A folder link never closes a cycle (the libraries walk one until
        # ELOOP, clairfs keeps it a link): its target holds no folder link
        # and is not an ancestor of the link.
        rng, free = self.rng, set(self.dirs)
        for _ in range(rng.randint(0, 5)):
            where = rng.choice(self.dirs)
            p = os.path.join(where, name(rng) + rng.choice(EXTS))
            if os.path.lexists(p):
                continue
            kind = rng.random()
            if kind < 0.4 and self.files:
                os.symlink(os.path.relpath(rng.choice(self.files), where), p)
            elif kind < 0.7 and free:
                target = rng.choice(sorted(free))
                if (where + b"/").startswith(target + b"/"):
                    continue
                os.symlink(os.path.relpath(target, where), p)
                free = {d for d in free if not (where + b"/").startswith(d + b"/")}
            else:
                os.symlink(b"nowhere" + name(rng), p)


def dump(tool, source, spec):
    out = subprocess.run([tool, "-0", "-r", "-o", spec, source], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    if out.returncode != 0:
        return None, out.stderr.decode(errors="replace").strip()
    return out.stdout.split(b"\0")[:-1], ""


def library(kind, source, root):
    """The library's list as bytes paths relative to source ([] when it raises)."""
    top = os.path.join(source, root) if root else source
    try:
        paths = library_orders.order(kind, top)
    except (RuntimeError, FileNotFoundError, AssertionError):
        return []
    prefix = os.fsencode(root) + b"/" if root else b""
    got = [prefix + os.fsencode(p) for p in paths]
    if kind == "timm":  # ties in bytewise order (see above)
        keys = [library_orders.natural_key(os.path.join(top, p)) for p in paths]
        i = 0
        while i < len(got):
            j = i
            while j + 1 < len(got) and keys[j + 1] == keys[i]:
                j += 1
            got[i:j + 1] = sorted(got[i:j + 1])
            i = j + 1
    return got


def main():
    tool = sys.argv[1]
    trees = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 2026
    failures = compared = samples = 0
    for t in range(trees):
        rng = random.Random(seed * 1000 + t)
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "src")
            os.mkdir(source)
            Tree(rng, os.fsencode(source))
            for kind in KINDS:
                for root in ("", "train"):
                    spec = kind + (":" + root if root else "")
                    want = library(kind, source, root)
                    got, err = dump(tool, source, spec)
                    compared += 1
                    samples += len(want)
                    if got == want:
                        continue
                    failures += 1
                    print("tree %d (seed %d) order=%s differs%s" %
                          (t, seed * 1000 + t, spec, ": " + err if err else ""))
                    for i, (g, w) in enumerate(zip(got or [], want)):
                        if g != w:
                            print("  first difference at %d: clairfs %r library %r" % (i, g, w))
                            break
                    else:
                        print("  lengths: clairfs %d library %d" % (len(got or []), len(want)))
    print("%d orders compared (%d samples), %d differ" % (compared, samples, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
