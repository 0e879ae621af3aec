#!/usr/bin/python3
"""Live oracle: `clairfs-plan --print-order RANK EPOCH` against real PyTorch.

For fresh random cases (every sampler kind, world sizes, batch sizes, both
drop_lasts, small and large seeds, several epochs) on a random ImageFolder
tree, the paths clairfs-plan prints for each rank and epoch must equal the
indices that a real DataLoader yields (tests/golden/torch_orders.py, and for
hf-accelerate the transcription of accelerate's sampler onto real torch in
tests/golden/framework_orders.py) mapped through torchvision's
ImageFolder(root).samples.  Names avoid newlines
(the tool's -0 output is used all the same).  Exit 77 only when torch or
torchvision does not import.

    test_plan_oracle.py CLAIRFS_PLAN [CASES] [SEED]
"""
import os
import random
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
    from torchvision.datasets import ImageFolder
except Exception as e:  # the machine lacks PyTorch: skip
    print("SKIP: torch/torchvision do not import: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
import framework_orders  # noqa: E402
import torch_orders  # noqa: E402

PIECES = ["a", "b", "B", "z", "0", "9", "_", "-", " ", "x y", "\u00e9", "\u65e5", "~", "#"]
EXTS = [".jpg", ".JPG", ".jpeg", ".png", ".PnG", ".txt", "", ".webp", ".bmp", ".Jpeg"]
IMAGE = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def name(rng):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3))).strip(".") or "n"


def build(rng, root):
    for c in range(rng.randint(1, 4)):
        cls = os.path.join(root, "class%d_%s" % (c, name(rng)))
        os.makedirs(cls, exist_ok=True)
        dirs = [cls]
        for _ in range(rng.randint(0, 2)):
            d = os.path.join(rng.choice(dirs), name(rng))
            os.makedirs(d, exist_ok=True)
            dirs.append(d)
        # at least one image per class, or ImageFolder refuses the tree
        with open(os.path.join(cls, "first.jpg"), "wb") as f:
            f.write(b"x")
        for _ in range(rng.randint(0, 12)):
            p = os.path.join(rng.choice(dirs), name(rng) + rng.choice(EXTS))
            if not os.path.exists(p):
                with open(p, "wb") as f:
                    f.write(b"y" * rng.randint(0, 50))


def plan_order(tool, root, opts, rank, epoch):
    r = subprocess.run([tool, "-0", "-o", opts, "--print-order", str(rank), str(epoch), root],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("clairfs-plan -o %s --print-order %d %d failed: %s"
                           % (opts, rank, epoch, r.stderr.decode(errors="replace").strip()))
    out = r.stdout.split(b"\0")
    assert out[-1] == b"", "output does not end with a separator"
    return [os.fsdecode(p) for p in out[:-1]]


def main():
    tool = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("oracle seed %d, %d cases" % (seed, cases))
    failures = 0
    kinds = list(torch_orders.KINDS) + ["hf-accelerate"]
    for case in range(cases):
        with tempfile.TemporaryDirectory(prefix="clairfs-oracle-") as root:
            build(rng, root)
            samples = [os.path.relpath(p, root) for p, _ in ImageFolder(root).samples]
            n = len(samples)
            kind = kinds[case % len(kinds)]
            world = rng.randint(1, 4)
            batch = rng.choice([1, 2, 3, 5])
            drop_last = kind == "torch-ddp" and rng.random() < 0.4
            drop_last_batch = rng.random() < 0.3
            persistent = kind == "torch" and case % 6 == 1
            s = rng.choice([0, 1, 2**31 - 1, 2**32 + 5, rng.randrange(1 << 63)])
            epochs = 3
            if kind in framework_orders.KINDS:
                streams = framework_orders.orders(kind, n, world, s, batch=batch,
                                                  drop_last_batch=drop_last_batch, epochs=epochs)
            else:
                streams = torch_orders.orders(kind, n, world, s, batch=batch, drop_last=drop_last,
                                              drop_last_batch=drop_last_batch,
                                              persistent_workers=persistent, epochs=epochs)
            opts = "seed=%d,sampler=%s,world=%d,batch=%d" % (s, kind, world, batch)
            if drop_last:
                opts += ",drop_last"
            if drop_last_batch:
                opts += ",drop_last_batch"
            if persistent:
                opts += ",persistent_workers"
            for e in range(epochs):
                for r in range(world):
                    want = [samples[i] for i in streams[e][r]]
                    got = plan_order(tool, root, opts, r, e)
                    if got != want:
                        failures += 1
                        print("FAIL case %d (n=%d, %s) rank %d epoch %d:\n  want %r\n  got  %r"
                              % (case, n, opts, r, e, want[:20], got[:20]))
            print("case %d: n=%d %s: %d epochs x %d ranks compared" % (case, n, opts, epochs,
                                                                     world))
    if failures:
        print("%d mismatches (oracle seed %d)" % (failures, seed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
