#!/usr/bin/python3
"""Live oracle: real PyTorch DataLoaders vs clairfs's sampler models.

    test_sampler_live.py SAMPLER_DUMP [SECONDS]

Draws fresh random cases (n, world, seed, batch, drop_last,
drop_last_batch, persistent_workers, 3-5 epochs) for every sampler kind,
iterates real DataLoaders (tests/golden/torch_orders.py) and compares their
index streams with `sampler_dump` byte for byte. Each case's torch output is
also fed back as list:FILE, which must reproduce it exactly. Set
CLAIRFS_ORACLE_SEED to replay a run; the seed is printed. Exit 77 only when
torch does not import.
"""
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import sampler_oracle  # noqa: E402 (beside this script)
try:
    import torch  # noqa: F401
    import torch_orders
except ImportError as e:
    print("SKIP: torch does not import (%s)" % e)
    sys.exit(77)

SEEDS = [0, 1, 2**31 - 1, 2**32 + 5, 2**63 + 12345]


def dump(exe, args):
    r = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("%s %s: exit %d: %s" % (exe, " ".join(args), r.returncode, r.stderr))
    return r.stdout


def random_case(rng, kind=None, persistent=None, num_workers=None):
    kind = kind or rng.choice(torch_orders.KINDS)
    if persistent is None:
        persistent = kind != "torch-ddp" and rng.random() < 0.15
    n = rng.choice([rng.randint(1, 20), rng.randint(21, 500), rng.randint(501, 5000)])
    world = rng.randint(1, 16) if kind == "torch-ddp" else rng.randint(1, 2)
    seed = rng.choice([rng.choice(SEEDS), rng.getrandbits(64) - 8, rng.getrandbits(31)])
    return dict(kind=kind, n=n, world=world, seed=seed, batch=rng.choice([1, 2, 3, 8, 32, 100]),
                drop_last=rng.random() < 0.5, drop_last_batch=rng.random() < 0.5,
                persistent_workers=persistent, epochs=rng.randint(3, 5), num_workers=num_workers)


def run_case(exe, c, tmpdir):
    streams = torch_orders.orders(c["kind"], c["n"], c["world"], c["seed"], c["batch"],
                                  c["drop_last"], c["drop_last_batch"], c["persistent_workers"],
                                  c["epochs"], c["num_workers"])
    want = torch_orders.format_list(streams, c["n"])
    args = ["--kind", c["kind"], "--n", str(c["n"]), "--world", str(c["world"]),
            "--seed", str(c["seed"]), "--batch", str(c["batch"]), "--epochs", str(c["epochs"])]
    args += ["--drop-last"] * c["drop_last"] + ["--drop-last-batch"] * c["drop_last_batch"]
    args += ["--persistent-workers"] * c["persistent_workers"]
    got = dump(exe, args)
    if got != want:
        return "model differs from torch: " + sampler_oracle.first_difference(want, got, "torch")
    path = os.path.join(tmpdir, "list.txt")
    with open(path, "w") as f:
        f.write(want)
    got = dump(exe, ["--list", path, "--n", str(c["n"]), "--world", str(c["world"]),
                     "--epochs", str(c["epochs"])])
    if got != want:
        return "list:FILE round trip differs: " + sampler_oracle.first_difference(
            want, got, "torch")
    return None


def main():
    if len(sys.argv) < 2:
        print("usage: test_sampler_live.py SAMPLER_DUMP [SECONDS]", file=sys.stderr)
        return 2
    exe = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 15.0
    seed = int(os.environ.get("CLAIRFS_ORACLE_SEED", random.SystemRandom().getrandbits(32)))
    print("oracle seed %d (CLAIRFS_ORACLE_SEED=%d replays this run), torch %s"
          % (seed, seed, torch.__version__))
    rng = random.Random(seed)
    # Every kind and loader pattern at least once, then random cases while
    # the time budget lasts.
    cases = [random_case(rng, "torch-ddp"), random_case(rng, "torch", False),
             random_case(rng, "torch-sampler", False), random_case(rng, "torch", True),
             random_case(rng, "torch-sampler", True), random_case(rng, "torch", False, 2)]
    start = time.monotonic()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        while cases or time.monotonic() - start < budget:
            c = cases.pop(0) if cases else random_case(rng)
            err = run_case(exe, c, tmpdir)
            if err:
                failed += 1
                print("FAIL %r\n%s" % (c, err))
            else:
                passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
