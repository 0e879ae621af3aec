#!/usr/bin/python3
"""The index streams that the training frameworks' samplers yield, per epoch and rank.

The frameworks themselves are not installed on the test machines; torch is.
So each sampler below transcribes the framework's own code - restructured and
in our words, but step for step the same behaviour - on top of the REAL
torch classes it builds on (torch.Generator, torch.randperm, RandomSampler,
BatchSampler, DistributedSampler, DataLoader), and the loader is iterated
epoch after epoch as the framework's training loop does. clairfs's C models
(`sampler=`, clairfs/sampler.h) are compared with these streams.

  hf-accelerate   huggingface/accelerate 16cb6eb8 (2026-07-24),
                  src/accelerate/data_loader.py: SeedableRandomSampler,
                  BatchSamplerShard._iter_with_no_split (split_batches=False,
                  even_batches=True), DataLoaderShard.set_epoch/__iter__;
                  prepare_data_loader(use_seedable_sampler=True), the path
                  transformers' Trainer takes.
  torchvision-ra  pytorch/vision 775e7604,
                  references/classification/sampler.py: RASampler.
  timm-ra         huggingface/pytorch-image-models aa4b5850 (2026-08-08),
                  timm/data/distributed_sampler.py: RepeatAugSampler
                  (selected_round=256, selected_ratio=0).
  lightning       Lightning-AI/pytorch-lightning 7f0c3436 (2026-07-20):
                  trainer/connectors/data_connector.py _get_distributed_sampler,
                  fabric/utilities/seed.py seed_everything,
                  fabric/utilities/data.py _set_sampler_epoch (called by the
                  fit loop with the epochs processed so far).

Module use:   orders(kind, n, world, seed, batch, drop_last, drop_last_batch,
                     repetitions, epochs) -> [epoch][rank] -> [int]
CLI use:      framework_orders.py --kind hf-accelerate --n 10 --world 2 --seed 0
              prints the clairfs list:FILE format, as torch_orders.py does.
Only /usr/bin/python3 (Debian's python3-torch) has torch on this machine.
"""
import math
import os
import sys

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler, Sampler

from torch_orders import IndexDataset, format_list, stream_arguments

KINDS = ("hf-accelerate", "torchvision-ra", "timm-ra", "lightning")


def _collate(batch):
    return list(batch)


# --- accelerate -------------------------------------------------------------

class SeedableRandomSampler(RandomSampler):
    """accelerate's RandomSampler whose generator is re-seeded at every
    __iter__ with initial_seed + epoch, then counts its own epochs."""

    def __init__(self, *args, data_seed=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial_seed = data_seed if data_seed is not None else torch.random.initial_seed()
        self.epoch = 0

    def __iter__(self):
        if self.generator is None:
            self.generator = torch.Generator()
            self.generator.manual_seed(self.initial_seed)
        self.generator.manual_seed(self.epoch + self.initial_seed)
        yield from super().__iter__()  # torch's own RandomSampler.__iter__
        self.set_epoch(self.epoch + 1)

    def set_epoch(self, epoch):
        self.epoch = epoch


class BatchSamplerShard(BatchSampler):
    """accelerate's shard of a BatchSampler, split_batches=False: process p
    of P takes the batches idx % P == p, yielding only once every process of
    the round has a full batch; with even_batches and not drop_last the
    round is completed from the first P batches' indices."""

    def __init__(self, batch_sampler, num_processes, process_index, even_batches=True):
        self.batch_sampler = batch_sampler
        self.num_processes = num_processes
        self.process_index = process_index
        self.even_batches = even_batches
        self.batch_size = batch_sampler.batch_size
        self.drop_last = batch_sampler.drop_last

    def __len__(self):
        full, rest = divmod(len(self.batch_sampler), self.num_processes)
        return full if rest == 0 or self.drop_last else full + 1

    def __iter__(self):
        procs, me, size = self.num_processes, self.process_index, self.batch_size
        head = []          # the first `procs` batches' indices, for the tail
        pending = None     # this process's batch of the current round
        idx, batch = -1, []
        for idx, batch in enumerate(self.batch_sampler):
            if not self.drop_last and idx < procs:
                head += batch
            if idx % procs == me:
                pending = batch
            if idx % procs == procs - 1 and len(batch) == size:
                yield pending
                pending = None
        if self.drop_last or not head:
            return
        if not self.even_batches:
            if pending:
                yield pending
            return
        if pending and len(pending) == size:
            yield pending
        while len(head) < procs * size:  # fewer indices than one round
            head += head
        if len(batch) == size:  # the last batch went out with its round
            batch = []
            idx += 1
        taken = 0
        while idx % procs != 0 or len(batch) > 0:
            upto = taken + size - len(batch)
            batch += head[taken:upto]
            if idx % procs == me:
                yield batch
            taken = upto
            batch = []
            idx += 1


def _accelerate_rank(ds, world, rank, seed, batch, drop_last_batch, epochs):
    # The user's DataLoader(shuffle=True) as a Trainer builds it, then
    # prepare_data_loader: its RandomSampler replaced by the seedable one
    # (data_seed unset: torch.random.initial_seed(), i.e. set_seed's seed)
    # and the batch sampler sharded.
    torch.manual_seed(seed)
    user = DataLoader(ds, batch_size=batch, shuffle=True, drop_last=drop_last_batch)
    sampler = SeedableRandomSampler(user.sampler.data_source, replacement=False,
                                    num_samples=user.sampler._num_samples,
                                    generator=getattr(user.sampler, "generator", torch.Generator()),
                                    data_seed=None)
    shard = BatchSamplerShard(BatchSampler(sampler, batch, drop_last_batch), world, rank)
    loader = DataLoader(ds, batch_sampler=shard, collate_fn=_collate)
    out = []
    for epoch in range(epochs):
        # DataLoaderShard.__iter__ calls set_epoch(self.iteration), which
        # reaches the sampler under the batch sampler.
        sampler.set_epoch(epoch)
        out.append([i for b in loader for i in b])
    return out


# --- torchvision / timm: repeated augmentation ------------------------------

class RASampler(Sampler):
    """torchvision's references RASampler (shuffle=True)."""

    def __init__(self, dataset, num_replicas, rank, seed=0, repetitions=3):
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.seed, self.repetitions = 0, seed, repetitions
        self.num_samples = int(math.ceil(len(dataset) * float(repetitions) / num_replicas))
        self.total_size = self.num_samples * num_replicas
        self.num_selected_samples = int(math.floor(len(dataset) // 256 * 256 / num_replicas))

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=g).tolist()
        order = [x for x in order for _ in range(self.repetitions)]
        order += order[:self.total_size - len(order)]
        assert len(order) == self.total_size
        mine = order[self.rank:self.total_size:self.num_replicas]
        assert len(mine) == self.num_samples
        return iter(mine[:self.num_selected_samples])

    def __len__(self):
        return self.num_selected_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


class RepeatAugSampler(Sampler):
    """timm's RepeatAugSampler (shuffle=True, integer num_repeats): the
    generator is seeded with the epoch alone."""

    def __init__(self, dataset, num_replicas, rank, num_repeats=3, selected_round=256,
                 selected_ratio=0):
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.num_repeats, self.epoch = num_repeats, 0
        self.num_samples = int(math.ceil(len(dataset) * num_repeats / num_replicas))
        self.total_size = self.num_samples * num_replicas
        selected_ratio = selected_ratio or num_replicas
        if selected_round:
            self.num_selected_samples = int(math.floor(
                len(dataset) // selected_round * selected_round / selected_ratio))
        else:
            self.num_selected_samples = int(math.ceil(len(dataset) / selected_ratio))

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.epoch)
        order = torch.randperm(len(self.dataset), generator=g)
        if isinstance(self.num_repeats, float) and not self.num_repeats.is_integer():
            raise ValueError("a non-integer num_repeats is not modelled by clairfs")
        order = torch.repeat_interleave(order, repeats=int(self.num_repeats), dim=0).tolist()
        pad = self.total_size - len(order)
        if pad > 0:
            order += order[:pad]
        assert len(order) == self.total_size
        mine = order[self.rank:self.total_size:self.num_replicas]
        assert len(mine) == self.num_samples
        return iter(mine[:self.num_selected_samples])

    def __len__(self):
        return self.num_selected_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


def _ra_rank(kind, ds, world, rank, seed, batch, drop_last_batch, repetitions, epochs):
    if kind == "torchvision-ra":
        sampler = RASampler(ds, world, rank, seed=seed, repetitions=repetitions)
    else:  # timm's create_loader: the seed plays no part in the order
        sampler = RepeatAugSampler(ds, world, rank, num_repeats=repetitions)
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, drop_last=drop_last_batch,
                        collate_fn=_collate)
    out = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # both training scripts do, before each epoch
        out.append([i for b in loader for i in b])
    return out


# --- Lightning --------------------------------------------------------------

MAX_SEED_VALUE = 4294967295  # seed_everything: numpy's uint32 range


def seed_everything(seed):
    """The part of Lightning's seed_everything the sampler sees."""
    seed = int(seed)
    if not (0 <= seed <= MAX_SEED_VALUE):
        raise ValueError("%d is not in bounds, numpy accepts from 0 to %d" % (seed, MAX_SEED_VALUE))
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    torch.manual_seed(seed)
    return seed


def get_distributed_sampler(dataloader, shuffle, overfit_batches=0, **kwargs):
    """_get_distributed_sampler for the fit stage: a RandomSampler (the user's
    shuffle=True) is replaced by a DistributedSampler over the dataset."""
    kwargs["shuffle"] = shuffle and not overfit_batches
    kwargs.setdefault("seed", int(os.getenv("PL_GLOBAL_SEED", 0)))
    assert isinstance(dataloader.sampler, RandomSampler)
    return DistributedSampler(dataloader.dataset, **kwargs)


def set_sampler_epoch(dataloader, epoch):
    """_set_sampler_epoch: every distinct sampler of the loader gets it."""
    objects = {}
    if getattr(dataloader, "sampler", None) is not None:
        objects[id(dataloader.sampler)] = dataloader.sampler
    batch_sampler = getattr(dataloader, "batch_sampler", None)
    if batch_sampler is not None and getattr(batch_sampler, "sampler", None) is not None:
        objects[id(batch_sampler.sampler)] = batch_sampler.sampler
    for obj in objects.values():
        if callable(getattr(obj, "set_epoch", None)):
            obj.set_epoch(epoch)


def _lightning_rank(ds, world, rank, seed, batch, drop_last_batch, epochs):
    seed_everything(seed)
    user = DataLoader(ds, batch_size=batch, shuffle=True, drop_last=drop_last_batch)
    # DDPStrategy.distributed_sampler_kwargs: num_replicas and rank only, so
    # the injected sampler keeps DistributedSampler's drop_last=False.
    sampler = get_distributed_sampler(user, shuffle=True, num_replicas=world, rank=rank)
    # _update_dataloader re-instantiates the loader with the sampler.
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, drop_last=drop_last_batch,
                        collate_fn=_collate)
    out = []
    for epoch in range(epochs):
        set_sampler_epoch(loader, epoch)  # epoch_progress.current.processed
        out.append([i for b in loader for i in b])
    return out


def orders(kind, n, world, seed, batch=1, drop_last=False, drop_last_batch=False,
           repetitions=3, epochs=1):
    """[epoch][rank] -> list of dataset indices that rank reads, in order.
    drop_last is the sampler's (torch-ddp's): none of these samplers has one
    a user can set, so it must be False."""
    if drop_last:
        raise ValueError("%s: the sampler has no drop_last a user can set" % kind)
    ds = IndexDataset(n)
    per_rank = []
    for r in range(world):
        if kind == "hf-accelerate":
            per_rank.append(_accelerate_rank(ds, world, r, seed, batch, drop_last_batch, epochs))
        elif kind in ("torchvision-ra", "timm-ra"):
            per_rank.append(_ra_rank(kind, ds, world, r, seed, batch, drop_last_batch,
                                     repetitions, epochs))
        elif kind == "lightning":
            per_rank.append(_lightning_rank(ds, world, r, seed, batch, drop_last_batch, epochs))
        else:
            raise ValueError("unknown kind %r (expected one of %s)" % (kind, ", ".join(KINDS)))
    return [[per_rank[r][e] for r in range(world)] for e in range(epochs)]


def main(argv=None):
    ap = stream_arguments(__doc__, KINDS)
    ap.add_argument("--repetitions", type=int, default=3)
    a = ap.parse_args(argv)
    streams = orders(a.kind, a.n, a.world, a.seed, a.batch, False, a.drop_last_batch,
                     a.repetitions, a.epochs)
    sys.stdout.write(format_list(streams, a.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
