#!/usr/bin/python3
"""Oracle: the frameworks' samplers (accelerate, torchvision, timm, Lightning)
against clairfs's models, bit for bit, every rank.

    test_sampler_frameworks.py SAMPLER_DUMP CLAIRFS_PLAN

The frameworks are not installed; tests/golden/framework_orders.py
transcribes their sampler code onto real torch (which is), and iterates real
DataLoaders over it. For a fixed grid - n in (1, 7, 256, 1000, 1003), world
1-4, batch (1, 3, 32), the loader's drop_last on and off, epochs 0-2, seeds
0 and 2^32+5, repetitions 2 and 3 for the RA samplers - the streams
`sampler_dump` prints must equal the transcription's exactly. Where a
framework itself refuses (RA padding beyond its repeated list, Lightning's
seed bound or a drop_last it never sets) clairfs must refuse with one line
and a non-zero exit. Exit 77 only when torch does not import.
"""
import itertools
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import sampler_oracle  # noqa: E402 (beside this script)
try:
    import torch
    import framework_orders
except ImportError as e:
    print("SKIP: torch does not import (%s)" % e)
    sys.exit(77)

NS = (1, 7, 256, 1000, 1003)
WORLDS = (1, 2, 3, 4)
BATCHES = (1, 3, 32)
SEEDS = (0, 2**32 + 5)
EPOCHS = 3


def cases():
    for kind in framework_orders.KINDS:
        reps = (2, 3) if kind.endswith("-ra") else (3,)
        for n, w, b, dlb, seed, r in itertools.product(NS, WORLDS, BATCHES, (False, True),
                                                       SEEDS, reps):
            yield dict(kind=kind, n=n, world=w, batch=b, drop_last_batch=dlb, seed=seed,
                       repetitions=r)
    # the RA padding assertion, which clairfs must refuse too
    for kind in ("torchvision-ra", "timm-ra"):
        yield dict(kind=kind, n=1, world=8, batch=1, drop_last_batch=False, seed=0,
                   repetitions=2)


def run_case(exe, c):
    """None when clairfs and the framework agree, else what differs."""
    args = ["--kind", c["kind"], "--n", str(c["n"]), "--world", str(c["world"]),
            "--seed", str(c["seed"]), "--batch", str(c["batch"]), "--epochs", str(EPOCHS),
            "--repetitions", str(c["repetitions"])]
    args += ["--drop-last-batch"] * c["drop_last_batch"]
    try:
        streams = framework_orders.orders(c["kind"], c["n"], c["world"], c["seed"], c["batch"],
                                          False, c["drop_last_batch"], c["repetitions"], EPOCHS)
    except (AssertionError, ValueError, RuntimeError) as e:
        refused = "%s: %s" % (type(e).__name__, e)
        if c["kind"] == "lightning":
            # seed_everything's bound; clairfs-plan's option check is below
            if c["seed"] > 2**32 - 1 and "not in bounds" in str(e):
                return None
            return "the transcription refuses: " + refused
        r = sampler_oracle.dump(exe, args)
        if r.returncode == 0 or len(r.stderr.strip().splitlines()) != 1:
            return "the framework refuses (%s), clairfs does not say so in one line: rc %d, %r" % (
                refused, r.returncode, r.stderr)
        return None
    want = framework_orders.format_list(streams, c["n"])
    r = sampler_oracle.dump(exe, args)
    if r.returncode != 0:
        return "sampler_dump failed: %s" % r.stderr.strip()
    if r.stdout != want:
        return "model differs from the framework: " + sampler_oracle.first_difference(
            want, r.stdout, 'framework')
    return None


def check_refusals(plan):
    """Lightning's own limits as clairfs-plan's option errors: one line, rc != 0."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="clairfs-fw-") as root:
        os.makedirs(os.path.join(root, "c"))
        open(os.path.join(root, "c", "a.jpg"), "wb").close()
        for opts, word in (("sampler=lightning,seed=%d" % (2**32 + 5), "seed_everything"),
                           ("sampler=lightning,seed=1,drop_last", "drop_last"),
                           ("sampler=timm-ra,seed=0,repetitions=0", "repetitions"),
                           ("sampler=torchvision-ra,seed=%d,epochs=2" % (2**64 - 1), "seed")):
            r = subprocess.run([plan, "-o", opts, "--print-order", "0", "0", root],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=60)
            lines = r.stderr.strip().splitlines()
            if r.returncode == 0 or len(lines) != 1 or word not in lines[0]:
                failures += 1
                print("FAIL clairfs-plan -o %s: rc %d, stderr %r" % (opts, r.returncode, r.stderr))
        # and the framework agrees that the seed is out of its bounds
        try:
            framework_orders.seed_everything(2**32 + 5)
            failures += 1
            print("FAIL the transcribed seed_everything accepts 2^32+5")
        except ValueError:
            pass
    return failures


if __name__ == "__main__":
    sys.exit(sampler_oracle.main('test_sampler_frameworks.py', torch.__version__, cases, run_case,
                                  check_refusals))
