#!/usr/bin/python3
"""A trainer rank for test_identify_mount.sh: a real torch DataLoader over an
ImageFolder on the mount, nothing registered with clairfs.

Each item is a file's SHA-1 (ImageFolder's loader reads it whole), compared
in the trainer with the same file under --src: one wrong byte and the rank
exits 1.  After epoch 0 the rank pauses until the mount says it has
identified the order (clairfs_order_identified 1 in .clairfs/metrics), at
most --pause seconds, as a trainer that evaluates between epochs would.
With --world above 1 the ranks meet as DistributedDataParallel's do
(torch.distributed over gloo, --port on 127.0.0.1): once before the first
epoch and at every step (the gradients' all-reduce), so no rank runs ahead.

Patterns (clairfs/sampler.h):
  torch-ddp      DataLoader(sampler=DistributedSampler(ds, W, rank, seed=S)),
                 set_epoch(e) before each epoch
  torch          DataLoader(shuffle=True, generator=g), g seeded S once
  torch-sampler  DataLoader(sampler=RandomSampler(ds, generator=g))
  torch-global   torch.manual_seed(S), a small model built (K words of the
                 global generator), DataLoader(shuffle=True) without a
                 generator, the model's CPU dropout run each step (G words
                 an epoch)

--train-dir SUB trains on ImageFolder(MNT/SUB) (a folder below the mount's
root); --val-dir SUB then runs the torchvision classification reference's
evaluate() after every epoch: ImageFolder(MNT/SUB) read in order
(DistributedSampler(shuffle=False) at world > 1, else SequentialSampler) by
fresh DataLoader workers of the same rank, its opens logged as "E R I" in
LOG.val.
--decode decodes each file as an image with PIL (the default loader's open
and read, then the reference's eval transforms), besides its digest.
--order KIND numbers the training folder's samples as a library's dataset
does (timm's ImageDataset, ultralytics' YOLODataset, ...: the transcriptions
of tests/golden/library_orders.py, run on the mount) instead of ImageFolder.
"""
import argparse
import hashlib
import itertools
import os
import random
import re
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler
from torchvision.datasets import ImageFolder


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def decode_digest(path):
    """pil_loader's open and read, the image decoded and transformed; the
    digest of the bytes it read."""
    import io
    from PIL import Image
    from torchvision import transforms
    with open(path, "rb") as f:
        data = f.read()
    img = Image.open(io.BytesIO(data)).convert("RGB")
    transforms.Compose([transforms.Resize(8), transforms.CenterCrop(8),
                        transforms.ToTensor()])(img)
    return hashlib.sha1(data).hexdigest()


class Indexed(Dataset):
    """(index, digest) of the folder's item: the trainer knows what it got."""

    def __init__(self, folder):
        self.folder = folder

    def __len__(self):
        return len(self.folder)

    def __getitem__(self, i):
        return i, self.folder[i][0]


class LibraryFolder(Dataset):
    """A library's dataset over root: its samples in the library's index
    order (tests/golden/library_orders.py), each item (loader(path), 0)."""

    def __init__(self, kind, root, loader):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "golden"))
        import library_orders
        self.samples = [(os.path.join(root, p), 0) for p in library_orders.order(kind, root)]
        self.loader = loader

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.loader(self.samples[i][0]), 0


def collate(batch):
    return list(batch)


def order_line(mnt):
    try:
        with open(os.path.join(mnt, ".clairfs", "stats")) as f:
            for line in f:
                if line.startswith("order:"):
                    return line
    except OSError:
        pass
    return ""


def wait_epoch_order(args, epoch):
    """--pause-epochs: wait until the mount names this epoch's private seed
    (torch-global without a registered seed), or the run's seed (a seed
    people use: every epoch known), at most --pause seconds."""
    t0 = time.monotonic()
    want = (f"epoch {epoch}'s private seed=", "a seed people use")
    while not any(w in order_line(args.data) for w in want) and \
            time.monotonic() - t0 < args.pause:
        time.sleep(0.5)
    print(f"rank {args.rank}: paused {time.monotonic() - t0:.1f} s in epoch {epoch}: "
          f"{order_line(args.data).strip()}", flush=True)
    if epoch == 1:
        snapshot(args)


def wait_order(args, epoch, step):
    """--wait-order: pause at --wait-order-at until the stats' order line
    matches the pattern, at most --pause seconds."""
    t0 = time.monotonic()
    while not re.search(args.wait_order, order_line(args.data)) and \
            time.monotonic() - t0 < args.pause:
        time.sleep(0.05)
    print(f"rank {args.rank}: paused {time.monotonic() - t0:.1f} s at step {step} of epoch "
          f"{epoch}: {order_line(args.data).strip()}", flush=True)


def snapshot(args):
    if args.snapshot:
        with open(os.path.join(args.data, ".clairfs", "metrics")) as f, \
                open(args.snapshot.replace("{rank}", str(args.rank)), "w") as out:
            out.write(f.read())


def identified(mnt):
    """The mount predicts the order (clairfs_order_identified 1), or has
    identified one epoch's order that ended with it (the stats' order line
    says identified; the gauge is 0 until the next epoch's)."""
    if re.match(r"order:\s*identified", order_line(mnt)):
        return True
    try:
        with open(os.path.join(mnt, ".clairfs", "metrics")) as f:
            for line in f:
                if line.startswith("clairfs_order_identified "):
                    return line.split()[1] == "1"
    except OSError:
        pass
    return False


FRAMEWORK_KINDS = ("hf-accelerate", "torchvision-ra", "timm-ra", "lightning")


def framework_loader(args, ds, common):
    """--kind hf-accelerate, torchvision-ra, timm-ra, lightning: the
    frameworks' samplers as tests/golden/framework_orders.py transcribes them
    (imported, not copied): accelerate's SeedableRandomSampler(data_seed=S)
    under BatchSamplerShard (prepare_data_loader(use_seedable_sampler=True)),
    torchvision's RASampler(seed=S), timm's RepeatAugSampler (seeded with the
    epoch), each index 3 times for the RA two, and the DistributedSampler
    Lightning injects after seed_everything(S); set_epoch(e) before each
    epoch, as for torch-ddp."""
    from torch.utils.data import BatchSampler
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
    import framework_orders as fo
    if args.kind == "hf-accelerate":
        # prepare_data_loader(use_seedable_sampler=True), data_seed=S
        sampler = fo.SeedableRandomSampler(ds, generator=torch.Generator(), data_seed=args.seed)
        shard = fo.BatchSamplerShard(BatchSampler(sampler, args.batch, False), args.world,
                                     args.rank)
        common = {k: v for k, v in common.items() if k != "batch_size"}
        return DataLoader(ds, batch_sampler=shard, **common), sampler
    if args.kind == "lightning":
        fo.seed_everything(args.seed)
        user = DataLoader(ds, batch_size=args.batch, shuffle=True)
        sampler = fo.get_distributed_sampler(user, shuffle=True, num_replicas=args.world,
                                             rank=args.rank)
        return DataLoader(ds, sampler=sampler, **common), sampler
    if args.kind == "torchvision-ra":
        sampler = fo.RASampler(ds, args.world, args.rank, seed=args.seed, repetitions=3)
    else:
        sampler = fo.RepeatAugSampler(ds, args.world, args.rank, num_repeats=3)
    return DataLoader(ds, sampler=sampler, **common), sampler


LIBRARY_KINDS = ("detectron2", "mmengine-infinite", "mmengine", "mmengine-noround", "torchdata",
                 "torchdata-workers", "ultralytics",
                 "ultralytics-ddp", "hf-trainer", "hf-trainer-global")


def library_loader(args, ds, common):
    """--kind detectron2, mmengine, mmengine-noround, torchdata, ultralytics,
    hf-trainer, hf-trainer-global: the training libraries' samplers and
    loaders as tests/golden/library_samplers.py transcribes them (imported):
    detectron2's TrainingSampler(seed=S) under ToIterableDataset (workers take
    chunks of the batch round-robin), one iterator for the run, an epoch
    being one pass of the stream's n indices; MMEngine's InfiniteSampler (the
    same stream) under a DataLoader of the map-style dataset; its DefaultSampler
    (round_up True / False) with set_epoch; torchdata's StatefulDataLoader
    (shuffle=True) after torch.manual_seed(S) (torchdata-workers: the same,
    insisting on workers); ultralytics' InfiniteDataLoader
    in one process (its generator seeded 6148914691236517204; S unused), or
    under DDP over DistributedSampler(seed=S) with set_epoch;
    the Trainer's RandomSampler(generator=g), g seeded data_seed=S or, for
    hf-trainer-global, one draw of the global generator after set_seed(S).
    Returns the loader, the sampler to set_epoch (or None) and the batches an
    epoch takes from an infinite loader (0: the loader's own epochs)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
    import library_samplers as ls
    n = len(ds)
    if args.kind == "detectron2":
        sampler = ls.TrainingSampler(n, args.seed, args.rank, args.world)
        loader = DataLoader(ls.ToIterableDataset(ds, sampler, args.batch), batch_size=args.batch,
                            drop_last=True, num_workers=args.workers, collate_fn=collate)
        return loader, None, (n + args.world * args.batch - 1) // (args.world * args.batch)
    if args.kind == "mmengine-infinite":
        sampler = ls.TrainingSampler(n, args.seed, args.rank, args.world, once=True)
        loader = DataLoader(ds, batch_size=args.batch, sampler=sampler,
                            num_workers=args.workers, collate_fn=collate)
        return loader, None, (n + args.world * args.batch - 1) // (args.world * args.batch)
    if args.kind.startswith("mmengine"):
        sampler = ls.DefaultSampler(ds, args.seed, args.rank, args.world,
                                    round_up=args.kind == "mmengine")
        return DataLoader(ds, sampler=sampler, **common), sampler, 0
    if args.kind.startswith("torchdata"):
        if args.kind == "torchdata-workers" and args.workers == 0:
            sys.exit("--kind torchdata-workers: needs --workers > 0")
        torch.manual_seed(args.seed)
        sampler = ls.StatefulRandomSampler(ds)
        bs = ls.StatefulBatchSampler(sampler, args.batch, False)
        common = {k: v for k, v in common.items() if k != "batch_size"}
        return DataLoader(ds, batch_sampler=bs, **common), None, 0
    if args.kind.startswith("ultralytics"):
        ddp = args.kind == "ultralytics-ddp"
        sampler = DistributedSampler(ds, num_replicas=args.world, rank=args.rank, shuffle=True,
                                     seed=args.seed) if ddp else None
        g = torch.Generator()
        g.manual_seed(ls.ULTRALYTICS_SEED + (args.rank if ddp else -1))
        common = {k: v for k, v in common.items() if k != "persistent_workers"}
        return ls.InfiniteDataLoader(dataset=ds, shuffle=not ddp, sampler=sampler, generator=g,
                                     prefetch_factor=4 if args.workers else None,
                                     **common), sampler, 0
    torch.manual_seed(args.seed)  # set_seed(args.seed)
    g = torch.Generator()
    g.manual_seed(args.seed if args.kind == "hf-trainer"
                  else int(torch.empty((), dtype=torch.int64).random_().item()))
    return DataLoader(ds, sampler=RandomSampler(ds, generator=g), **common), None, 0


class CustomSampler(RandomSampler):
    """--kind custom: a sampler of the user's own, shaped as the libraries'
    streams but no torch shuffle: one Python random.Random(S) for the run,
    random.shuffle'd passes back to back (Mersenne Twister too, drawn
    otherwise than randperm)."""

    def __init__(self, ds, seed):
        super().__init__(ds)
        self.rng = random.Random(seed)

    def __iter__(self):
        perm = list(range(len(self.data_source)))
        self.rng.shuffle(perm)
        return iter(perm)


def make_loader(args, ds):
    common = dict(batch_size=args.batch, num_workers=args.workers, collate_fn=collate,
                  persistent_workers=args.persistent)
    g = torch.Generator()
    g.manual_seed(args.seed)
    if args.kind == "torch-ddp":
        sampler = DistributedSampler(ds, num_replicas=args.world, rank=args.rank, shuffle=True,
                                     seed=args.seed)
        return DataLoader(ds, sampler=sampler, **common), sampler
    if args.kind == "torch":
        return DataLoader(ds, shuffle=True, generator=g, **common), None
    if args.kind == "torch-global":
        torch.manual_seed(args.seed)
        args.model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                         torch.nn.Dropout(0.3), torch.nn.Linear(64, 4))
        return DataLoader(ds, shuffle=True, **common), None
    if args.kind in FRAMEWORK_KINDS:
        return framework_loader(args, ds, common)
    if args.kind in LIBRARY_KINDS:
        loader, sampler, args.infinite = library_loader(args, ds, common)
        return loader, sampler
    if args.kind == "custom":
        return DataLoader(ds, sampler=CustomSampler(ds, args.seed), **common), None
    return DataLoader(ds, sampler=RandomSampler(ds, generator=g), **common), None


def settle_feeders(args):
    """Before DataLoader workers are forked again: let the queue feeder
    threads of the loaders already shut down end.  Python 3.11.2 deadlocks
    a child forked while another thread's state is being deleted (the child
    waits forever in PyOS_AfterFork_Child), which hung a worker of epoch 1
    once.  A persistent or endless loader keeps its own feeders alive: not
    waited for."""
    if args.persistent or args.infinite:
        return
    for t in threading.enumerate():
        if t.name == "QueueFeederThread":
            t.join(timeout=2.0)


def evaluate(args, epoch):
    """The validation pass after an epoch: the reference's evaluate() over
    --val-dir, unshuffled, in fresh workers; the bytes checked."""
    from torch.utils.data import SequentialSampler
    root = os.path.join(args.data, args.val_dir)
    folder = ImageFolder(root, loader=decode_digest if args.decode else digest)
    ds = Indexed(folder)
    sampler = (DistributedSampler(ds, num_replicas=args.world, rank=args.rank, shuffle=False)
               if args.world > 1 else SequentialSampler(ds))
    loader = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                        collate_fn=collate)
    settle_feeders(args)
    with open(args.log + ".val", "a") as log:
        for batch in loader:
            for i, got in batch:
                rel = os.path.relpath(folder.samples[i][0], args.data)
                if got != digest(os.path.join(args.src, rel)):
                    print(f"rank {args.rank}: wrong bytes in {rel}", file=sys.stderr)
                    return False
                log.write(f"{epoch} {args.rank} {i}\n")
    if args.world > 1:
        # the reference's metric_logger.synchronize_between_processes()
        dist.all_reduce(torch.zeros(1))
    return True


def wait_identified(args, where):
    """Pause until the mount says it identified the order, at most --pause
    seconds, as a trainer that evaluates would."""
    t0 = time.monotonic()
    while not identified(args.data) and time.monotonic() - t0 < args.pause:
        time.sleep(0.5 if where == "after epoch 0" else 0.05)
    print(f"rank {args.rank}: paused {time.monotonic() - t0:.1f} s {where}, "
          f"identified={identified(args.data)}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the mount")
    ap.add_argument("--src", required=True, help="the source, to compare bytes with")
    ap.add_argument("--kind", required=True,
                    choices=["torch-ddp", "torch", "torch-sampler", "torch-global",
                             *FRAMEWORK_KINDS, *LIBRARY_KINDS, "custom"])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--persistent", action="store_true", help="persistent_workers=True")
    ap.add_argument("--pause", type=float, default=300, help="most seconds to wait after epoch 0")
    ap.add_argument("--wait-order", help="a pattern the stats' order line must match at "
                    "--wait-order-at before the trainer goes on (at most --pause seconds)")
    ap.add_argument("--wait-order-at", type=lambda v: [int(x) for x in v.split(":")],
                    default=[1, 4], help="EPOCH:STEP of --wait-order (default 1:4)")
    ap.add_argument("--identify-by-step", type=int, default=-1,
                    help="also pause at this step of epoch 0 until the order is identified: "
                         "whether epoch 0's first opens name it, whatever the search's pace")
    ap.add_argument("--batches", type=int, default=0,
                    help="read only each epoch's first N batches (0: all): a dataset too large "
                    "to read whole in a test")
    ap.add_argument("--log", required=True, help="'epoch rank index' per item")
    ap.add_argument("--snapshot", help="copy .clairfs/metrics here when epoch 1 starts "
                    "(with --pause-epochs: when epoch 1's order is known); {rank} in it is "
                    "the rank")
    ap.add_argument("--epoch-snapshots", help="copy .clairfs/metrics to PREFIX.E at the end "
                    "of each epoch E, before any pause")
    ap.add_argument("--pause-epochs", action="store_true",
                    help="from epoch 1 on, pause after each epoch's first batch until the mount "
                    "names that epoch's private seed (an epoch long enough for the search)")
    ap.add_argument("--step-seconds", type=float, default=0,
                    help="sleep this long a step (the wait for a GPU's step)")
    ap.add_argument("--slow-steps", type=int, default=0,
                    help="only the first N steps of each epoch sleep --step-seconds (0: every "
                    "step): the steps around an identification, where the opens' pace bounds "
                    "the misses; the rest at the loader's pace")
    ap.add_argument("--reseed", type=lambda v: [int(x) for x in v.split(":")],
                    help="EPOCH:SEED: from this epoch on the sampler draws from SEED (a rank "
                    "restarted with another seed: the order learnt stops fitting its opens)")
    ap.add_argument("--port", type=int, default=29500, help="rendezvous port (world > 1)")
    ap.add_argument("--train-dir", default="", help="train on this folder of the mount")
    ap.add_argument("--val-dir", help="evaluate on this folder of the mount after every epoch")
    ap.add_argument("--decode", action="store_true", help="decode the images with PIL")
    ap.add_argument("--order", help="a library's index order of the training folder (timm, "
                    "mmpretrain, ultralytics, ultralytics-cls)")
    args = ap.parse_args()
    args.infinite = 0
    if args.world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                                world_size=args.world, rank=args.rank)

    loader_fn = decode_digest if args.decode else digest
    root = os.path.join(args.data, args.train_dir)
    folder = (LibraryFolder(args.order, root, loader_fn) if args.order
              else ImageFolder(root, loader=loader_fn))
    rel = [os.path.relpath(p, args.data) for p, _ in folder.samples]
    want = {}
    loader, sampler = make_loader(args, Indexed(folder))
    step = torch.zeros(1)
    if args.world > 1:
        dist.barrier()
    stream = iter(loader) if args.infinite else None
    with open(args.log, "w") as log:
        for epoch in range(args.epochs):
            if sampler is not None:
                if args.reseed and epoch == args.reseed[0]:
                    sampler.seed = args.reseed[1]  # DistributedSampler: seed + epoch
                sampler.set_epoch(epoch)
            t_epoch = time.monotonic()
            settle_feeders(args)
            batches = itertools.islice(stream, args.infinite) if stream is not None else loader
            if args.batches:
                batches = itertools.islice(batches, args.batches)
            for step_i, batch in enumerate(batches):
                if args.pause_epochs and epoch > 0 and step_i == 1:
                    wait_epoch_order(args, epoch)
                if epoch == 0 and step_i == args.identify_by_step:
                    wait_identified(args, "at step %d of epoch 0" % step_i)
                if args.wait_order and [epoch, step_i] == args.wait_order_at:
                    wait_order(args, epoch, step_i)
                if args.world > 1:
                    dist.all_reduce(step)  # the step's gradients
                if args.kind == "torch-global":
                    with torch.no_grad():  # Dropout on the CPU: the global generator
                        args.model(torch.ones(len(batch), 16))
                if args.step_seconds and (not args.slow_steps or step_i < args.slow_steps):
                    time.sleep(args.step_seconds)
                for i, got in batch:
                    if i not in want:
                        want[i] = digest(os.path.join(args.src, rel[i]))
                    if got != want[i]:
                        print(f"rank {args.rank}: wrong bytes in {rel[i]}", file=sys.stderr)
                        return 1
                    log.write(f"{epoch} {args.rank} {i}\n")
            print(f"rank {args.rank}: epoch {epoch} {time.monotonic() - t_epoch:.3f} s", flush=True)
            if args.epoch_snapshots:
                with open(os.path.join(args.data, ".clairfs", "metrics")) as f, \
                        open(f"{args.epoch_snapshots}.{epoch}", "w") as out:
                    out.write(f.read())
            print(f"rank {args.rank}: clock at epoch {epoch}'s end {time.time():.3f}", flush=True)
            if args.val_dir and not evaluate(args, epoch):
                return 1
            if epoch == 0:
                wait_identified(args, "after epoch 0")
                if not args.pause_epochs:
                    snapshot(args)
    if args.world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
