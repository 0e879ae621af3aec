#!/usr/bin/python3
"""Live oracle: a real trainer on the global generator vs torch-global.

    test_rng_offset_live.py RNG_OFFSET_FIND SAMPLER_DUMP

Each case is the most common trainer: torch.manual_seed(S), a small
nn.Sequential built (its initialisation draws an unknown number K of
global-generator words), DataLoader(shuffle=True, num_workers=2) without a
generator, 3 epochs, with or without persistent_workers, with or without a
Dropout layer run on the CPU each batch (G words per epoch). The trainer
prints the index order of every epoch. rng_offset_find must recover K and G
from the first 8 indices of epochs 0 and 1 alone; sampler_dump --kind
torch-global with those K and G must then print all 3 epochs exactly, and
with K + 1 (or G + 1) must not. Exit 77 only when torch does not import.
"""
import subprocess
import sys

try:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except ImportError as e:
    print("SKIP: torch does not import (%s)" % e)
    sys.exit(77)

N = 1000
EPOCHS = 3
OBSERVED = 8


def build_model(dropout, wide):
    layers = [torch.nn.Linear(16, 1024 if wide else 32), torch.nn.ReLU()]
    if dropout:
        layers.append(torch.nn.Dropout(0.3))
    layers.append(torch.nn.Linear(1024 if wide else 32, 4))
    return torch.nn.Sequential(*layers)


def trainer(seed, persistent, dropout, wide):
    """The real run: returns each epoch's index order."""
    torch.manual_seed(seed)
    model = build_model(dropout, wide)
    model.train()
    features = torch.ones(N, 16)
    loader = DataLoader(TensorDataset(torch.arange(N)), batch_size=50, shuffle=True,
                        num_workers=2, persistent_workers=persistent)
    orders = []
    for _ in range(EPOCHS):
        order = []
        for (idx,) in loader:
            order += idx.tolist()
            with torch.no_grad():
                model(features[idx])
        orders.append(order)
    return orders


def run(args):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def model_orders(dump, seed, persistent, k, g):
    args = [dump, "--kind", "torch-global", "--n", str(N), "--seed", str(seed),
            "--rng-offset", str(k), "--rng-epoch-words", str(g), "--epochs", str(EPOCHS)]
    if persistent:
        args.append("--persistent-workers")
    orders = []
    for line in run(args).splitlines():
        if line.startswith("epoch "):
            orders.append([int(x) for x in line.split(":", 1)[1].split()])
    return orders


def main():
    if len(sys.argv) < 3:
        print("usage: test_rng_offset_live.py RNG_OFFSET_FIND SAMPLER_DUMP", file=sys.stderr)
        return 2
    finder, dump = sys.argv[1], sys.argv[2]
    failures = 0
    cases = [(seed, persistent, dropout, False)
             for seed, persistent, dropout in [(7, False, False), (7, True, False),
                                               (2**40 + 12345, False, True),
                                               (2**40 + 12345, True, True)]]
    cases.append((31337, False, True, True))  # a wider model: K beyond 16 000
    for seed, persistent, dropout, wide in cases:
        name = "seed=%d persistent_workers=%s dropout=%s wide=%s" % (seed, persistent, dropout,
                                                                     wide)
        real = trainer(seed, persistent, dropout, wide)
        args = [finder, "--seed", str(seed), "--n", str(N), "--max-offset", str(1 << 22),
                "--max-words", str(1 << 22),
                "--epoch0", " ".join(map(str, real[0][:OBSERVED])),
                "--epoch1", " ".join(map(str, real[1][:OBSERVED]))]
        if persistent:
            args.append("--persistent-workers")
        try:
            found = dict(line.split("=") for line in run(args).split())
        except RuntimeError as e:
            print("FAIL %s: %s" % (name, e))
            failures += 1
            continue
        k, g = int(found["rng_offset"]), int(found["rng_epoch_words"])
        if (g != 0) != dropout:
            print("FAIL %s: rng_epoch_words=%d, but dropout=%s" % (name, g, dropout))
            failures += 1
        predicted = model_orders(dump, seed, persistent, k, g)
        if predicted != real:
            bad = [e for e in range(EPOCHS) if e >= len(predicted) or predicted[e] != real[e]]
            print("FAIL %s: K=%d G=%d: epochs %s differ" % (name, k, g, bad))
            failures += 1
            continue
        # The comparison can fail: one word off either way is another order.
        if model_orders(dump, seed, persistent, k + 1, g) == real or \
                model_orders(dump, seed, persistent, k, g + 1) == real:
            print("FAIL %s: a wrong K or G reproduces the run too" % name)
            failures += 1
            continue
        print("ok   %s: rng_offset=%d rng_epoch_words=%d, %d epochs exact" % (name, k, g,
                                                                            EPOCHS))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
