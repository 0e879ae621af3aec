#!/usr/bin/python3
"""Oracle: the training libraries' samplers (detectron2, MMEngine, torchdata,
ultralytics, the Hugging Face Trainer) against clairfs's models, bit for
bit, every rank.

    test_sampler_libraries.py SAMPLER_DUMP CLAIRFS_PLAN

The libraries are not installed; tests/golden/library_samplers.py transcribes
their sampler and loader code onto real torch (which is) and iterates real
DataLoaders over it. On a fixed grid - n in (1, 7, 256, 1003), world 1-4
where the library shards, batch (1, 3, 32), the loader's drop_last on and
off where the library has one, seeds 0 and 2^32+5, epochs (passes) 0-2,
rng_offset 0 and 2 for the drawn seeds, persistent workers for
torchdata-workers - the streams `sampler_dump` prints must equal the
transcription's exactly. Worker processes (the slow part) run on a few
cases: detectron2's sharded chunks, ultralytics-ddp's one-epoch lag (which
needs them), torchdata-workers, and torchdata 0.8-0.10 (seeded 1: compared
with torch-sampler seed=1). Then clairfs-plan must plan every new name
and refuse an unknown one in one line. Exit 77 only when torch does not
import.
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
    import library_samplers
except ImportError as e:
    print("SKIP: torch does not import (%s)" % e)
    sys.exit(77)

NS = (1, 7, 256, 1003)
WORLDS = (1, 2, 3, 4)
BATCHES = (1, 3, 32)
SEEDS = (0, 2**32 + 5)
EPOCHS = 3
ULTRALYTICS_SEED = library_samplers.ULTRALYTICS_SEED - 1  # RANK -1


def case(kind, n, world=1, batch=1, dlb=False, seed=0, workers=0, persistent=False, offset=0,
         dump_kind=None):
    return dict(kind=kind, n=n, world=world, batch=batch, drop_last_batch=dlb, seed=seed,
                workers=workers, persistent=persistent, rng_offset=offset,
                dump_kind=dump_kind or kind)


def cases():
    grid = list(itertools.product(NS, BATCHES, (False, True), SEEDS))
    for n, b, dlb, seed in grid:
        for w in WORLDS:
            # the infinite streams have no batches that end a pass
            if not dlb:
                yield case("detectron2", n, w, b, seed=seed)
                yield case("mmengine-infinite", n, w, b, seed=seed)
            yield case("mmengine", n, w, b, dlb, seed)
            yield case("mmengine-noround", n, w, b, dlb, seed)
        yield case("hf-trainer", n, 1, b, dlb, seed)
        yield case("ultralytics", n, 1, b, dlb, ULTRALYTICS_SEED)
        for off in (0, 2):
            yield case("torchdata", n, 1, b, dlb, seed, offset=off)
            yield case("hf-trainer-global", n, 1, b, dlb, seed, offset=off)
    # worker processes: a few cases each
    for n, w, b in ((50, 2, 4), (1003, 3, 32), (7, 4, 1)):
        yield case("detectron2", n, w, b, seed=3, workers=2)
    for pers, off in ((False, 0), (True, 0), (True, 2)):
        yield case("torchdata-workers", 50, 1, 3, False, 5, workers=2, persistent=pers,
                   offset=off)
    yield case("ultralytics", 50, 1, 4, seed=ULTRALYTICS_SEED, workers=2)
    # torchdata 0.8-0.10 is torch-sampler seeded 1, with workers or not
    for n, b, dlb, workers, pers in ((50, 3, False, 0, False), (50, 3, True, 2, False),
                                     (1003, 32, False, 2, True), (7, 1, False, 2, False)):
        yield case("torchdata-0.8", n, 1, b, dlb, 1, workers=workers, persistent=pers,
                   dump_kind="torch-sampler")
    # ultralytics-ddp needs workers, and prefetch (2 x 2 batches on torch 1,
    # 4 x 2 on torch 2) within the rank's batches per epoch
    for n, w, b, dlb, seed in ((50, 2, 3, False, 0), (1003, 4, 32, True, 0),
                               (256, 3, 1, False, 2**32 + 5), (100, 2, 7, True, 1)):
        yield case("ultralytics-ddp", n, w, b, dlb, seed=seed, workers=2)
    # with no workers ultralytics under DDP is torch-ddp
    yield case("ultralytics-ddp", 50, 2, 3, seed=0, workers=0, dump_kind="torch-ddp")


def run_case(exe, c):
    """None when clairfs and the library agree, else what differs."""
    streams = library_samplers.orders(c["kind"], c["n"], c["world"], c["seed"], c["batch"],
                                    c["drop_last_batch"], EPOCHS, c["workers"],
                                    c["persistent"], c["rng_offset"])
    want = library_samplers.format_list(streams, c["n"])
    args = ["--kind", c["dump_kind"], "--n", str(c["n"]), "--world", str(c["world"]),
            "--seed", str(c["seed"]), "--batch", str(c["batch"]), "--epochs", str(EPOCHS),
            "--rng-offset", str(c["rng_offset"])]
    args += ["--drop-last-batch"] * c["drop_last_batch"]
    args += ["--persistent-workers"] * c["persistent"]
    r = sampler_oracle.dump(exe, args)
    if r.returncode != 0:
        return "sampler_dump failed: %s" % r.stderr.strip()
    if r.stdout != want:
        return "model differs from the library: " + sampler_oracle.first_difference(
            want, r.stdout, 'library')
    return None


NAMES = ("detectron2", "mmengine", "mmengine-noround", "mmengine-infinite", "torchdata",
         "torchdata-workers", "ultralytics", "ultralytics-ddp", "hf-trainer", "hf-trainer-global")


def check_plan(plan):
    """clairfs-plan plans every name (a dataset of 3 files, world 2, 3 epochs)
    and refuses an unknown one in one line."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="clairfs-lib-") as root:
        os.makedirs(os.path.join(root, "c"))
        for f in ("a.jpg", "b.jpg", "c.jpg"):
            open(os.path.join(root, "c", f), "wb").close()
        for name in NAMES + ("nosuch",):
            opts = "sampler=%s,seed=1,world=2,epochs=3" % name
            r = subprocess.run([plan, "-o", opts, "--print-order", "0", "2", root],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=60)
            lines = r.stderr.strip().splitlines()
            if name == "nosuch":
                ok = r.returncode != 0 and len(lines) == 1 and "detectron2" in lines[0]
            else:
                ok = r.returncode == 0 and r.stdout.strip() != ""
            if not ok:
                failures += 1
                print("FAIL clairfs-plan -o %s: rc %d, stdout %r, stderr %r"
                      % (opts, r.returncode, r.stdout[:200], r.stderr))
    return failures


if __name__ == "__main__":
    sys.exit(sampler_oracle.main('test_sampler_libraries.py', torch.__version__, cases, run_case,
                                  check_plan))
