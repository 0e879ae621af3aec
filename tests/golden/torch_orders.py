#!/usr/bin/python3
"""The index streams that real PyTorch DataLoaders yield, per epoch and rank.

Every stream comes from iterating a real torch.utils.data.DataLoader over a
dummy map-style dataset whose item i is i, epoch after epoch, exactly as a
trainer loop does (`for batch in loader`), one loader per trainer rank. The
sampler models (clairfs `sampler=`):

  torch-ddp      DataLoader(ds, batch_size=B, drop_last=drop_last_batch,
                 sampler=DistributedSampler(ds, num_replicas=W, rank=r,
                 shuffle=True, seed=S, drop_last=drop_last)); set_epoch(e)
  torch          DataLoader(ds, batch_size=B, shuffle=True, generator=g,
                 drop_last=drop_last_batch), g = Generator().manual_seed(S)
  torch-sampler  DataLoader(ds, batch_size=B, drop_last=drop_last_batch,
                 sampler=RandomSampler(ds, generator=g)), g as above
  torch-global   torch.manual_seed(S), a small model built (its initialisation
                 draws from the global generator), DataLoader(ds, batch_size=B,
                 shuffle=True) without a generator, the model's CPU dropout
                 run on every batch (world 1 only); --private-seeds FILE
                 writes "epoch E private seed P" for each epoch, P the seed
                 RandomSampler drew for its own generator (torch keeps its
                 low 32 bits)

persistent_workers=True needs worker processes (num_workers >= 1); without
it the loader runs in-process unless num_workers is given.

Module use:   orders(kind, n, world, seed, ...) -> [epoch][rank] -> [int]
CLI use:      torch_orders.py --kind torch --n 10 --world 2 --seed 0 --epochs 3
              prints the clairfs list:FILE format (clairfs/sampler.h):
                clairfs-sampler-list world=W epochs=E n=N
                epoch E rank R: i i i ...
Only /usr/bin/python3 (Debian's python3-torch) has torch on this machine.
"""
import argparse
import sys

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

KINDS = ("torch-ddp", "torch", "torch-sampler")


class IndexDataset(Dataset):
    """Item i is the integer i: the loader's output is its index stream."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def _collate(batch):
    # The identity: keeps the indices as ints, without building tensors.
    return list(batch)


def _rank_orders(kind, n, world, rank, seed, batch, drop_last, drop_last_batch,
                 persistent_workers, epochs, num_workers):
    ds = IndexDataset(n)
    common = dict(batch_size=batch, drop_last=drop_last_batch, collate_fn=_collate,
                  num_workers=num_workers, persistent_workers=persistent_workers)
    sampler = None
    if kind == "torch-ddp":
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True,
                                     seed=seed, drop_last=drop_last)
        loader = DataLoader(ds, sampler=sampler, **common)
    elif kind == "torch":
        g = torch.Generator()
        g.manual_seed(seed)
        loader = DataLoader(ds, shuffle=True, generator=g, **common)
    elif kind == "torch-sampler":
        g = torch.Generator()
        g.manual_seed(seed)
        loader = DataLoader(ds, sampler=RandomSampler(ds, generator=g), **common)
    else:
        raise ValueError("unknown sampler kind %r (expected one of %s)" % (kind, ", ".join(KINDS)))
    out = []
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        out.append([i for b in loader for i in b])
    del loader  # shuts persistent workers down
    return out


def global_orders(n, seed, batch=1, drop_last_batch=False, persistent_workers=False, epochs=1,
                  num_workers=None):
    """torch-global (above): ([epoch] -> [int], [epoch] -> private seed)."""
    if num_workers is None:
        num_workers = 1 if persistent_workers else 0
    drawn = []
    real = torch.Generator

    class Recording(real):
        """RandomSampler seeds the generator it makes with its draw."""

        def manual_seed(self, s):
            drawn.append(int(s))
            return super().manual_seed(s)

    torch.Generator = Recording
    try:
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                    torch.nn.Dropout(0.3), torch.nn.Linear(64, 4))
        loader = DataLoader(IndexDataset(n), batch_size=batch, shuffle=True,
                            drop_last=drop_last_batch, collate_fn=_collate,
                            num_workers=num_workers, persistent_workers=persistent_workers)
        out = []
        for _ in range(epochs):
            order = []
            for b in loader:
                order += b
                with torch.no_grad():
                    model(torch.ones(len(b), 16))
            out.append(order)
        del loader
    finally:
        torch.Generator = real
    if len(drawn) != epochs:
        raise RuntimeError("expected one private seed an epoch, saw %d" % len(drawn))
    return out, drawn


def orders(kind, n, world, seed, batch=1, drop_last=False, drop_last_batch=False,
           persistent_workers=False, epochs=1, num_workers=None):
    """[epoch][rank] -> list of dataset indices that rank reads, in order."""
    if num_workers is None:
        num_workers = 1 if persistent_workers else 0
    per_rank = [_rank_orders(kind, n, world, r, seed, batch, drop_last, drop_last_batch,
                             persistent_workers, epochs, num_workers)
                for r in range(world)]
    return [[per_rank[r][e] for r in range(world)] for e in range(epochs)]


def format_list(streams, n):
    """The clairfs list:FILE text for orders()'s result."""
    epochs, world = len(streams), len(streams[0])
    lines = ["clairfs-sampler-list world=%d epochs=%d n=%d" % (world, epochs, n)]
    for e, ranks in enumerate(streams):
        for r, s in enumerate(ranks):
            lines.append(("epoch %d rank %d: " % (e, r) + " ".join(map(str, s))).rstrip())
    return "\n".join(lines) + "\n"


def stream_arguments(doc, kinds):
    """The command line every transcription's main takes (--kind of kinds,
    --n, --world, --seed, --batch, --drop-last-batch, --epochs); each adds
    its own."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--kind", required=True, choices=kinds)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--drop-last-batch", action="store_true", help="DataLoader(drop_last=True)")
    ap.add_argument("--epochs", type=int, default=1)
    return ap


def main(argv=None):
    ap = stream_arguments(__doc__, KINDS + ("torch-global",))
    ap.add_argument("--drop-last", action="store_true", help="DistributedSampler(drop_last=True)")
    ap.add_argument("--persistent-workers", action="store_true")
    ap.add_argument("--num-workers", type=int, default=None)
    ap.add_argument("--private-seeds", metavar="FILE",
                    help="torch-global: write each epoch's private seed to FILE")
    a = ap.parse_args(argv)
    if a.kind == "torch-global":
        if a.world != 1:
            ap.error("torch-global: world 1 only")
        streams, drawn = global_orders(a.n, a.seed, a.batch, a.drop_last_batch,
                                       a.persistent_workers, a.epochs, a.num_workers)
        if a.private_seeds:
            with open(a.private_seeds, "w") as f:
                for e, p in enumerate(drawn):
                    f.write("epoch %d private seed %d\n" % (e, p))
        sys.stdout.write(format_list([[s] for s in streams], a.n))
        return 0
    streams = orders(a.kind, a.n, a.world, a.seed, a.batch, a.drop_last, a.drop_last_batch,
                     a.persistent_workers, a.epochs, a.num_workers)
    sys.stdout.write(format_list(streams, a.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
