#!/usr/bin/python3
"""Generate the ImageFolder golden files from the tree specs.

For every tests/golden/imagefolder/NAME.tree this builds the tree in a
temporary directory and writes NAME.golden: torchvision's
ImageFolder(root).samples as relative paths, one a line, each byte outside
printable ASCII (and the backslash) written as \\xHH.  When torchvision
raises, the file holds one line "!ExceptionName".  test_catalog.c builds the
same trees from the same specs and compares clairfs's index order with these
files.

Run with Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14):
    /usr/bin/python3 tests/golden/gen_imagefolder_golden.py
"""
import os
import re
import sys
import tempfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "imagefolder")


def unescape(field):
    """'\\xHH' -> byte, '\\\\' -> backslash; the rest as UTF-8."""
    out = bytearray()
    i = 0
    raw = field.encode()
    while i < len(raw):
        if raw[i:i + 2] == b"\\x":
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
        elif raw[i:i + 2] == b"\\\\":
            out.append(0x5C)
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return bytes(out)


def escape(path):
    return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else "\\x%02x" % b for b in path)


def build(spec_file, root):
    """Create the tree of spec_file under root (bytes paths throughout)."""
    rootb = os.fsencode(root)
    with open(spec_file, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            fields = line.split("\t")
            kind, path = fields[0], os.path.join(rootb, unescape(fields[1]))
            if kind == "d":
                os.mkdir(path)
            elif kind == "f":
                open(path, "wb").close()
            elif kind == "l":
                os.symlink(unescape(fields[2]), path)
            else:
                raise ValueError("%s: bad kind %r" % (spec_file, kind))


def samples(root):
    from torchvision.datasets import ImageFolder
    ds = ImageFolder(root)
    rootb = os.fsencode(root)
    return [os.fsencode(p)[len(rootb) + 1:] for p, _ in ds.samples]


def main():
    for name in sorted(os.listdir(HERE)):
        if not name.endswith(".tree"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "root")
            os.mkdir(root)
            build(os.path.join(HERE, name), root)
            try:
                lines = [escape(p) for p in samples(root)]
            except Exception as e:  # what torchvision raises is the golden result
                lines = ["!" + type(e).__name__]
        out = os.path.join(HERE, re.sub(r"\.tree$", ".golden", name))
        with open(out, "w", encoding="ascii") as f:
            f.write("".join(l + "\n" for l in lines))
        print("%s: %d lines" % (out, len(lines)))


if __name__ == "__main__":
    sys.exit(main())
