#!/usr/bin/python3
"""The index streams that the training libraries' samplers yield, per epoch and rank.

None of these libraries is installed on the test machines; torch is. So
each sampler below transcribes the library's own code - restructured and in
our words, but step for step the same behaviour, the same generator calls in
the same order - on top of the REAL torch classes it builds on (Generator,
randperm, RandomSampler, BatchSampler, DistributedSampler, DataLoader and
its iterators, whose iter() and _base_seed calls the libraries rely on), and
the loader is iterated as the library's training loop does. clairfs's C
models (`sampler=`, clairfs/sampler.h) are compared with these streams.

  detectron2      facebookresearch/detectron2 02b5c4e2 (2026-06-06):
                  data/samplers/distributed_sampler.py TrainingSampler,
                  data/common.py ToIterableDataset and
                  _shard_iterator_dataloader_worker, data/build.py
                  build_batch_data_loader (aspect_ratio_grouping=False).
  mmengine-infinite / mmengine / mmengine-noround
                  open-mmlab/mmengine 25434293 (2025-10-27):
                  dataset/sampler.py InfiniteSampler, DefaultSampler
                  (round_up True / False), hooks/sampler_seed_hook.py.
  torchdata / torchdata-workers
                  pytorch/data 088e4347 (2025-06-10):
                  stateful_dataloader/sampler.py RandomSampler,
                  _StatefulRandomSamplerIterator, BatchSampler,
                  _BatchSamplerIterator; stateful_dataloader.py builds
                  RandomSampler(dataset, generator=None) for shuffle=True
                  and reuses torch's _BaseDataLoaderIter.__init__/_reset.
  torchdata-0.8   pytorch/data v0.8.0 265d317a, v0.9.0 d4bb3e6f, v0.10.1
                  a4bed258 (the same code in the three): RandomSampler
                  seeded manual_seed(1) over torch's RandomSampler.__iter__,
                  BatchSampler whose __iter__ is a generator function. Not
                  a clairfs kind: torch-sampler with seed 1.
  ultralytics / ultralytics-ddp
                  ultralytics/ultralytics data/build.py 002363f1
                  (InfiniteDataLoader, _RepeatSampler, build_dataloader),
                  engine/trainer.py 00016300 (_do_train: set_epoch under DDP).
  hf-trainer / hf-trainer-global
                  huggingface/transformers <= 4.30 trainer.py
                  _get_train_sampler (one process) and get_train_dataloader.

Streams are split into clairfs epochs as the models define them: for the
infinite streams (detectron2, mmengine-infinite) epoch p is pass p, global
stream positions p*n .. p*n+n-1, rank r's i-th index being position r + i*W.

Module use:   orders(kind, n, world, seed, batch, drop_last_batch, epochs,
                     workers, persistent_workers, rng_offset) -> [epoch][rank] -> [int]
CLI use:      library_samplers.py --kind detectron2 --n 10 --world 2 --seed 0
              prints the clairfs list:FILE format, as torch_orders.py does.
Only /usr/bin/python3 (Debian's python3-torch) has torch on this machine.
"""
import itertools
import math
import sys

import torch
from torch.utils.data import DataLoader, IterableDataset, Sampler, get_worker_info
from torch.utils.data import BatchSampler as TorchBatchSampler
from torch.utils.data import DistributedSampler
from torch.utils.data import RandomSampler as TorchRandomSampler

from torch_orders import IndexDataset, format_list, stream_arguments

KINDS = ("detectron2", "mmengine-infinite", "mmengine", "mmengine-noround", "torchdata",
         "torchdata-workers", "torchdata-0.8", "ultralytics", "ultralytics-ddp", "hf-trainer", "hf-trainer-global")


def _collate(batch):
    return list(batch)


def _draw_words(words):
    """rng_offset: words of the global generator drawn before the loader is
    built (a model's construction); one random64 is two words."""
    assert words % 2 == 0
    for _ in range(words // 2):
        torch.empty((), dtype=torch.int64).random_()


# --- detectron2 / MMEngine InfiniteSampler ----------------------------------

class TrainingSampler(Sampler):
    """detectron2's TrainingSampler (shuffle=True); rank and world given
    instead of read from comm. MMEngine's InfiniteSampler is the same code
    except that its rank slice is made once, in __init__ (self.indices)."""

    def __init__(self, size, seed, rank, world_size, once=False):
        self._size, self._seed = size, int(seed)
        self._rank, self._world_size = rank, world_size
        self._once = self._indices_of_rank() if once else None

    def _infinite_indices(self):
        g = torch.Generator()
        g.manual_seed(self._seed)
        while True:
            yield from torch.randperm(self._size, generator=g).tolist()

    def _indices_of_rank(self):
        return itertools.islice(self._infinite_indices(), self._rank, None, self._world_size)

    def __iter__(self):
        if self._once is not None:
            yield from self._once
        else:
            yield from self._indices_of_rank()


def _roundrobin(*iterables):
    """detectron2's data/common.py _roundrobin (the itertools recipe)."""
    num_active = len(iterables)
    nexts = itertools.cycle(iter(it).__next__ for it in iterables)
    while num_active:
        try:
            for nxt in nexts:
                yield nxt()
        except StopIteration:
            num_active -= 1
            nexts = itertools.cycle(itertools.islice(nexts, num_active))


class ToIterableDataset(IterableDataset):
    """detectron2's ToIterableDataset(shard_sampler=True, shard_chunk_size=B):
    in DataLoader worker k of K, the sampler's chunks k, k+K, ... of B."""

    def __init__(self, dataset, sampler, shard_chunk_size):
        self.dataset, self.sampler, self.chunk = dataset, sampler, shard_chunk_size

    def __iter__(self):
        info = get_worker_info()
        if info is None or info.num_workers == 1:
            ids = iter(self.sampler)
        else:
            ids = _roundrobin(*[itertools.islice(self.sampler, info.id * self.chunk + c, None,
                                                 info.num_workers * self.chunk)
                                for c in range(self.chunk)])
        for idx in ids:
            yield self.dataset[idx]


def _infinite_rank(kind, ds, world, rank, seed, batch, workers, epochs):
    n = len(ds)
    want = sum(1 for q in range(rank, epochs * n, world))  # positions r + i*W < epochs*n
    if kind == "detectron2":
        sampler = TrainingSampler(n, seed, rank, world)
        # build_batch_data_loader without aspect-ratio grouping
        loader = DataLoader(ToIterableDataset(ds, sampler, batch), batch_size=batch,
                            drop_last=True, num_workers=workers, collate_fn=_collate)
        it = (i for b in loader for i in b)
    else:  # mmengine-infinite: the runner's loader over a map-style dataset
        sampler = TrainingSampler(n, seed, rank, world, once=True)
        loader = DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                            collate_fn=_collate)
        it = (i for b in loader for i in b)
    stream = list(itertools.islice(it, want))
    out = [[] for _ in range(epochs)]
    for i, idx in enumerate(stream):
        out[(rank + i * world) // n].append(idx)
    return out


# --- MMEngine DefaultSampler --------------------------------------------------

class DefaultSampler(Sampler):
    """MMEngine's DefaultSampler (shuffle=True), rank and world given."""

    def __init__(self, dataset, seed, rank, world_size, round_up=True):
        self.dataset, self.seed, self.rank, self.world_size = dataset, seed, rank, world_size
        self.epoch, self.round_up = 0, round_up
        if round_up:
            self.num_samples = math.ceil(len(dataset) / world_size)
            self.total_size = self.num_samples * world_size
        else:
            self.num_samples = math.ceil((len(dataset) - rank) / world_size)
            self.total_size = len(dataset)

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        indices = torch.randperm(len(self.dataset), generator=g).tolist()
        if self.round_up:
            indices = (indices * int(self.total_size / len(indices) + 1))[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.world_size])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


def _mmengine_rank(kind, ds, world, rank, seed, batch, drop_last_batch, epochs):
    sampler = DefaultSampler(ds, seed, rank, world, round_up=(kind == "mmengine"))
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, drop_last=drop_last_batch,
                        collate_fn=_collate)
    out = []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)  # DistSamplerSeedHook.before_train_epoch
        out.append([i for b in loader for i in b])
    return out


# --- torchdata StatefulDataLoader ----------------------------------------------

class _StatefulRandomSamplerIterator:
    """torchdata's: draws its randperm when made, stops at num_samples."""

    def __init__(self, sampler):
        self.sampler = sampler
        self.generator_state = sampler.generator.get_state()
        self.yielded, self.n = 0, len(sampler.data_source)
        self.num_samples = sampler.num_samples
        self.perm = self._get_perm()
        self.perm_index = 0

    def __iter__(self):
        return self

    def _get_perm(self):
        return torch.randperm(self.n, generator=self.sampler.generator).tolist()

    def __next__(self):
        if self.yielded == self.num_samples:
            raise StopIteration()
        if self.perm_index == len(self.perm):
            self.perm = self._get_perm()
            self.perm_index = 0
        val = self.perm[self.perm_index]
        self.perm_index += 1
        self.yielded += 1
        return val


class StatefulRandomSampler(Sampler):
    """torchdata's RandomSampler (replacement=False) since 0.11."""

    def __init__(self, data_source, generator=None):
        self.data_source = data_source
        if generator is None:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
            generator = torch.Generator()
            generator.manual_seed(seed)
        self.generator = generator

    @property
    def num_samples(self):
        return len(self.data_source)

    def __iter__(self):
        return _StatefulRandomSamplerIterator(self)

    def __len__(self):
        return self.num_samples


class _BatchSamplerIterator:
    """torchdata's: iter(sampler) at once, when the batch sampler is iter()ed."""

    def __init__(self, sampler, batch_size, drop_last):
        self.sampler_iter = iter(sampler)
        self.batch_size, self.drop_last = batch_size, drop_last

    def __iter__(self):
        return self

    def __next__(self):
        batch = []
        try:
            for _ in range(self.batch_size):
                batch.append(next(self.sampler_iter))
            return batch
        except StopIteration:
            if self.drop_last or len(batch) == 0:
                raise StopIteration
            return batch


class StatefulBatchSampler(TorchBatchSampler):
    def __iter__(self):
        return _BatchSamplerIterator(self.sampler, self.batch_size, self.drop_last)


def _torchdata(ds, seed, batch, drop_last_batch, epochs, workers, persistent, rng_offset):
    torch.manual_seed(seed)
    _draw_words(rng_offset)
    # StatefulDataLoader(ds, batch_size=B, shuffle=True, drop_last=...): its
    # __init__ (forked from torch's) builds these two; its iterators are
    # torch's _BaseDataLoaderIter underneath.
    sampler = StatefulRandomSampler(ds)
    bs = StatefulBatchSampler(sampler, batch, drop_last_batch)
    loader = DataLoader(ds, batch_sampler=bs, num_workers=workers,
                        persistent_workers=persistent, collate_fn=_collate)
    return [[i for b in loader for i in b] for _ in range(epochs)]


# --- torchdata 0.8 - 0.10 -----------------------------------------------------

class _LegacyRandomSamplerIterator:
    """0.8-0.10's: wraps torch's RandomSampler iterator (a generator
    function: nothing is drawn before the first next())."""

    def __init__(self, sampler, parent_iterator):
        self.sampler, self.parent_iterator = sampler, parent_iterator
        self.yielded = 0
        self.generator_state = sampler.generator.get_state()

    def __iter__(self):
        return self

    def __next__(self):
        val = next(self.parent_iterator)
        self.yielded += 1
        return val


class LegacyRandomSampler(TorchRandomSampler):
    """0.8-0.10's RandomSampler: without a generator, one seeded 1."""

    def __init__(self, data_source, generator=None):
        if generator is None:
            generator = torch.Generator()
            generator.manual_seed(1)
        super().__init__(data_source, generator=generator)

    def __iter__(self):
        return _LegacyRandomSamplerIterator(self, super().__iter__())


class LegacyBatchSampler(TorchBatchSampler):
    """0.8-0.10's BatchSampler (no state loaded): its iterator of the
    sampler made at once, remade only once samples were yielded; __iter__ a
    generator function."""

    def __init__(self, sampler, batch_size, drop_last):
        super().__init__(sampler, batch_size, drop_last)
        self.samples_yielded = 0
        self.sampler_iter = iter(sampler)

    def __iter__(self):
        if self.samples_yielded > 0:
            self.sampler_iter = iter(self.sampler)
            self.samples_yielded = 0
        if self.drop_last:
            while True:
                try:
                    batch = []
                    for _ in range(self.batch_size):
                        batch.append(next(self.sampler_iter))
                        self.samples_yielded += 1
                    yield batch
                except StopIteration:
                    break
        else:
            batch = []
            for idx in self.sampler_iter:
                self.samples_yielded += 1
                batch.append(idx)
                if len(batch) == self.batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch


def _torchdata_legacy(ds, batch, drop_last_batch, epochs, workers, persistent):
    # StatefulDataLoader(ds, batch_size=B, shuffle=True): RandomSampler(ds,
    # generator=None) and BatchSampler(sampler, B, drop_last)
    bs = LegacyBatchSampler(LegacyRandomSampler(ds), batch, drop_last_batch)
    loader = DataLoader(ds, batch_sampler=bs, num_workers=workers,
                        persistent_workers=persistent and workers > 0, collate_fn=_collate)
    return [[i for b in loader for i in b] for _ in range(epochs)]


# --- ultralytics ---------------------------------------------------------------

class _RepeatSampler:
    def __init__(self, sampler):
        self.sampler = sampler

    def __iter__(self):
        while True:
            yield from iter(self.sampler)


class InfiniteDataLoader(DataLoader):
    """ultralytics' (prefetch_factor is popped on torch < 2, as there)."""

    def __init__(self, *args, **kwargs):
        if not torch.__version__.startswith(("2", "3")):
            kwargs.pop("prefetch_factor", None)
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "batch_sampler", _RepeatSampler(self.batch_sampler))
        self.iterator = super().__iter__()

    def __len__(self):
        return len(self.batch_sampler.sampler)

    def __iter__(self):
        for _ in range(len(self)):
            yield next(self.iterator)


ULTRALYTICS_SEED = 6148914691236517205


def _ultralytics_rank(kind, ds, world, rank, seed, batch, drop_last_batch, workers, epochs):
    """build_dataloader + the trainer's epoch loop; RANK is -1 in one
    process. `seed` is the DistributedSampler's under DDP (0 in
    ultralytics); in one process the seed is ultralytics' own and `seed`
    must equal it."""
    ddp = kind == "ultralytics-ddp"
    batch = min(batch, len(ds))
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True,
                                 seed=seed) if ddp else None
    g = torch.Generator()
    g.manual_seed(ULTRALYTICS_SEED + (rank if ddp else -1))
    loader = InfiniteDataLoader(dataset=ds, batch_size=batch, shuffle=sampler is None,
                                num_workers=workers, sampler=sampler,
                                prefetch_factor=4 if workers > 0 else None,
                                collate_fn=_collate, generator=g,
                                drop_last=drop_last_batch and len(ds) % batch != 0)
    out = []
    for epoch in range(epochs):
        if ddp:
            loader.sampler.set_epoch(epoch)
        out.append([i for b in loader for i in b])
    return out


# --- Hugging Face Trainer <= 4.30, one process ------------------------------------

def _hf_trainer(ds, seed, batch, drop_last_batch, epochs, data_seed, rng_offset):
    torch.manual_seed(seed)  # set_seed(args.seed)
    _draw_words(rng_offset)
    generator = torch.Generator()  # _get_train_sampler, world_size <= 1
    if data_seed is None:
        s = int(torch.empty((), dtype=torch.int64).random_().item())
    else:
        s = data_seed
    generator.manual_seed(s)
    sampler = TorchRandomSampler(ds, generator=generator)
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, drop_last=drop_last_batch,
                        collate_fn=_collate)  # get_train_dataloader: no generator
    return [[i for b in loader for i in b] for _ in range(epochs)]


def orders(kind, n, world, seed, batch=1, drop_last_batch=False, epochs=1, workers=0,
           persistent_workers=False, rng_offset=0):
    """[epoch][rank] -> list of dataset indices that rank reads, in order."""
    ds = IndexDataset(n)
    one_process = kind in ("torchdata", "torchdata-workers", "torchdata-0.8", "ultralytics",
                           "hf-trainer",
                           "hf-trainer-global")
    if kind == "torchdata-workers" and workers == 0:
        workers = 2
    per_rank = []
    for r in range(world):
        if kind in ("detectron2", "mmengine-infinite"):
            per_rank.append(_infinite_rank(kind, ds, world, r, seed, batch, workers, epochs))
        elif kind in ("mmengine", "mmengine-noround"):
            per_rank.append(_mmengine_rank(kind, ds, world, r, seed, batch, drop_last_batch,
                                           epochs))
        elif r > 0 and one_process:
            per_rank.append(per_rank[0])  # every rank runs the same loader
        elif kind == "torchdata-0.8":
            per_rank.append(_torchdata_legacy(ds, batch, drop_last_batch, epochs, workers,
                                              persistent_workers))
        elif kind.startswith("torchdata"):
            per_rank.append(_torchdata(ds, seed, batch, drop_last_batch, epochs,
                                       workers if kind == "torchdata-workers" else 0,
                                       persistent_workers, rng_offset))
        elif kind.startswith("ultralytics"):
            per_rank.append(_ultralytics_rank(kind, ds, world, r, seed, batch, drop_last_batch,
                                              workers, epochs))
        elif kind.startswith("hf-trainer"):
            per_rank.append(_hf_trainer(ds, seed, batch, drop_last_batch, epochs,
                                        seed if kind == "hf-trainer" else None, rng_offset))
        else:
            raise ValueError("unknown kind %r (expected one of %s)" % (kind, ", ".join(KINDS)))
    return [[per_rank[r][e] for r in range(world)] for e in range(epochs)]


def main(argv=None):
    ap = stream_arguments(__doc__, KINDS)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--persistent-workers", action="store_true")
    ap.add_argument("--rng-offset", type=int, default=0)
    a = ap.parse_args(argv)
    streams = orders(a.kind, a.n, a.world, a.seed, a.batch, a.drop_last_batch, a.epochs,
                     a.workers, a.persistent_workers, a.rng_offset)
    sys.stdout.write(format_list(streams, a.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
