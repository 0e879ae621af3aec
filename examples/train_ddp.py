#!/usr/bin/env python3
"""A small PyTorch DDP trainer whose data pipeline is the one clairfs predicts:
ImageFolder over --data, DistributedSampler(seed, shuffle=True) with
set_epoch(e) every epoch, a DataLoader with worker processes, gloo.  Nothing
in it knows about clairfs: point --data at the source or at a mount.

The files are not decoded as images (the generated datasets are random
bytes): a loader passed to ImageFolder reads each file whole and turns its
bytes into a 256-bin histogram, which a one-layer model learns to classify.
The enumeration and order of files are ImageFolder's own.

    train_ddp.py --data DIR [--epochs 3] [--seed 0] [--batch 32]
                 [--workers 2] [--world 2] [--log FILE]

Ranks: under torchrun (RANK, WORLD_SIZE, MASTER_ADDR... set) this process is
one rank; otherwise it starts --world ranks itself (forked, so torch is
imported once) that rendezvous through a file store.

--log FILE: every sample each rank received, one line each,
    EPOCH RANK POS CRC32 SIZE PATH
sorted by (epoch, rank, pos), POS being the sample's position in the rank's
sampler stream for that epoch and PATH relative to --data (backslash-escaped
where not printable).  CRC32 and SIZE are of the bytes the loader read in the
worker, so two runs with equal logs read the same files, in the same order
per rank, with the same contents.  Each epoch also checks that the stream it
received is the sampler's.

Rank 0 prints one line per epoch: "epoch E wall SECONDS samples N loss L".
"""
import argparse
import os
import signal
import sys
import tempfile
import time
import zlib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from torchvision.datasets import ImageFolder


def histogram_loader(path):
    """ImageFolder's loader: the file's bytes as a byte histogram, plus what
    the log records about the bytes (runs in the DataLoader worker)."""
    with open(path, "rb") as f:
        data = f.read()
    if data:
        counts = torch.bincount(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                minlength=256)
        hist = counts.float() / len(data)
    else:
        hist = torch.zeros(256)
    return hist, zlib.crc32(data), len(data)


class Indexed(Dataset):
    """Passes the dataset index along with each sample, so the training loop
    knows which file it got; ImageFolder's enumeration is untouched."""

    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, index):
        (hist, crc, size), target = self.inner[index]
        return hist, target, index, crc, size


def escape(rel):
    return rel.encode("unicode_escape", "backslashreplace").decode("ascii")


def run_rank(rank, world, args, init_method):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    folder = ImageFolder(args.data, loader=histogram_loader)
    dataset = Indexed(folder)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, seed=args.seed,
                                 shuffle=True)
    # Workers forked once, not every epoch: a fork while the last epoch's
    # queue threads are still exiting can leave the child blocked for good in
    # CPython 3.11's PyOS_AfterFork_Child (seen once in the Slurm job test).
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                        sampler=sampler, persistent_workers=args.workers > 0)
    model = DistributedDataParallel(torch.nn.Linear(256, len(folder.classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = torch.nn.CrossEntropyLoss()
    root = os.path.abspath(args.data)

    lines = []
    for epoch in range(args.start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        expected = list(iter(sampler))
        t0 = time.monotonic()
        pos = 0
        total = torch.zeros(2)
        for hist, target, index, crc, size in loader:
            opt.zero_grad()
            loss = loss_fn(model(hist), target)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(target), len(target)])
            for i, c, s in zip(index.tolist(), crc.tolist(), size.tolist()):
                if i != expected[pos]:
                    raise RuntimeError("rank %d epoch %d: sample %d is index %d, the sampler said %d"
                                       % (rank, epoch, pos, i, expected[pos]))
                rel = os.path.relpath(folder.samples[i][0], root)
                lines.append((epoch, rank, pos, "%08x" % c, s, escape(rel)))
                pos += 1
        if pos != len(expected):
            raise RuntimeError("rank %d epoch %d: %d samples, the sampler has %d"
                               % (rank, epoch, pos, len(expected)))
        dist.all_reduce(total)
        wall = time.monotonic() - t0
        if rank == 0:
            print("epoch %d wall %.3f samples %d loss %.4f"
                  % (epoch, wall, int(total[1]), total[0] / max(total[1], 1)), flush=True)

    if args.log:
        part = "%s.rank%d" % (args.log, rank)
        with open(part, "w") as f:
            f.writelines("%d %d %d %s %d %s\n" % l for l in lines)
        dist.barrier()
        if rank == 0:
            merged = []
            for r in range(world):
                p = "%s.rank%d" % (args.log, r)
                with open(p) as f:
                    for l in f:
                        e, rk, ps, rest = l.split(" ", 3)
                        merged.append(((int(e), int(rk), int(ps)), l))
                os.unlink(p)
            merged.sort(key=lambda x: x[0])
            with open(args.log, "w") as f:
                f.writelines(l for _, l in merged)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="ImageFolder root (the source or a mount)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs to train (default 3)")
    ap.add_argument("--start-epoch", type=int, default=0,
                    help="first epoch, as when resuming (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="DistributedSampler seed (default 0)")
    ap.add_argument("--batch", type=int, default=32, help="batch size per rank (default 32)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader num_workers (default 2)")
    ap.add_argument("--world", type=int, default=2,
                    help="ranks to start when not under torchrun (default 2)")
    ap.add_argument("--log", help="write every sample each rank received to FILE")
    args = ap.parse_args()
    if not os.path.isdir(args.data):
        sys.exit("train_ddp.py: --data %s: not a directory" % args.data)
    if args.world < 1 or args.batch < 1 or args.workers < 0:
        sys.exit("train_ddp.py: --world and --batch must be >= 1, --workers >= 0")

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        run_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env://")
        return
    # SIGTERM (a timeout, a job scheduler) must take the ranks down too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    store = tempfile.mkdtemp(prefix="train_ddp.")
    ctx = None
    try:
        # Fork: the ranks inherit the imported torch instead of importing it again.
        ctx = mp.start_processes(run_rank, args=(args.world, args, "file://" + store + "/rendezvous"),
                                 nprocs=args.world, start_method="fork", join=False)
        while not ctx.join():
            pass
    finally:
        for p in ctx.processes if ctx else []:
            if p.is_alive():
                p.terminate()
                p.join()
        for n in os.listdir(store):
            os.unlink(os.path.join(store, n))
        os.rmdir(store)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
