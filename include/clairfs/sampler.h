/* Access-order models: bit-exact reproductions of the index streams that
 * PyTorch samplers and DataLoaders yield (docs/design.md, "The facts the
 * design rests on", fact 1).
 *
 * A sampler produces, per epoch, the *global* order of dataset indices;
 * trainer rank r of W reads the sub-stream cfs_sampler_rank_at(). Everything
 * here is pure computation: no FUSE, no MPI, no I/O except reading a
 * list:FILE (validated whole at creation, one epoch re-read per
 * cfs_sampler_compute_epoch()).
 *
 * The models, checked against real DataLoader iteration with torch 1.13
 * (tests/golden/, tests/integration/test_sampler_live.py):
 *
 *  torch-ddp      DataLoader(ds, batch_size=B, drop_last=drop_last_batch,
 *                 sampler=DistributedSampler(ds, W, r, shuffle=True, seed=S,
 *                 drop_last=drop_last)), set_epoch(e) before each epoch.
 *                 Epoch e is randperm(n) of a generator seeded S+e (only the
 *                 low 32 bits of S+e matter; torch raises if S+e >= 2^64,
 *                 compute_epoch() then returns -ERANGE). num_samples =
 *                 floor(n/W) with drop_last, ceil(n/W) without; the list is
 *                 padded by repeating its head (cyclically when W > n) or cut
 *                 to W*num_samples; rank r reads positions r, r+W, ...
 *  torch          DataLoader(ds, batch_size=B, shuffle=True, generator=g),
 *                 g = torch.Generator().manual_seed(S) made once; epoch e is
 *                 the (e+1)-th full iteration of that loader. Each epoch
 *                 draws from g: the iterator's _base_seed (one random64 = 2
 *                 words) when the iterator is created - every epoch, or only
 *                 in epoch 0 with persistent_workers (the iterator is then
 *                 reset, and _reset() draws nothing for a map-style
 *                 dataset) - then RandomSampler's randperm(n), whose
 *                 permutation is the epoch's order, then a second
 *                 randperm(n) that RandomSampler computes when the loader
 *                 exhausts it (`randperm(n)[:num_samples % n]`, empty). Every
 *                 rank runs the same loader, so every rank reads the same
 *                 full stream (world only says how many ranks there are).
 *                 A trainer that re-seeds g when it resumes starts again at
 *                 epoch 0 of this model.
 *  torch-global   torch.manual_seed(S); build the model (K = rng_offset
 *                 words of the global generator); DataLoader(ds,
 *                 batch_size=B, shuffle=True), no generator; each epoch may
 *                 draw G = rng_epoch_words words outside the loader. Epoch
 *                 e's iterator draws from the global generator its
 *                 _base_seed (random64, 2 words; every epoch, or only epoch
 *                 0 with persistent_workers), then RandomSampler.__iter__
 *                 draws one more random64 (`torch.empty((), int64).random_()`,
 *                 2 words: the 63 low bits of random64, so the SECOND word is
 *                 the low 32 bits) and seeds a private generator with it;
 *                 the epoch's order is that generator's randperm(n) (the
 *                 trailing empty randperm is private too). Then the epoch's
 *                 G words. So epoch e's private seed is word D+1 of the
 *                 stream seeded S, D = K + 2 + e*(4 + G) (K + 2 + e*(2 + G)
 *                 with persistent_workers); measured on
 *                 torch 1.13 with num_workers 0 and 2 (the workers' seeds are
 *                 drawn in the workers, not from the main generator). Every
 *                 rank reads the same full stream, as torch. clairfs/
 *                 rng_offset.h finds K and G from a few observed indices.
 *  torch-sampler  DataLoader(ds, batch_size=B, sampler=RandomSampler(ds,
 *                 generator=g)), loader given no generator: as torch, but
 *                 the loader's _base_seed comes from the global RNG, so g
 *                 sees only the two randperms per epoch (persistent_workers
 *                 changes nothing).
 *  list:FILE      explicit streams, format below. batch and drop_last_batch
 *                 are not applied: a list says exactly what each rank reads.
 *  lightning      not a kind but a name of torch-ddp (options.c): Lightning
 *                 (Lightning-AI/pytorch-lightning 7f0c3436, 2026-07-20,
 *                 trainer/connectors/data_connector.py) injects exactly
 *                 DistributedSampler(shuffle=True, seed=PL_GLOBAL_SEED, i.e.
 *                 seed_everything's seed, 0 without it) and its fit loop calls
 *                 set_epoch(e); seed_everything accepts only 0..2^32-1.
 *
 * The frameworks' samplers (src/sampler_framework.c says how each is laid
 * out; every one re-seeds a fresh generator per epoch, so they are
 * stateless like torch-ddp):
 *
 *  hf-accelerate  Hugging Face accelerate (16cb6eb8, 2026-07-24,
 *                 data_loader.py) with use_seedable_sampler=True, as
 *                 transformers' Trainer uses it: SeedableRandomSampler
 *                 re-seeds its generator with S+e (S = data_seed, or the
 *                 seed given to set_seed) and yields randperm(n); the
 *                 loader's BatchSampler cuts batches of B (drop_last =
 *                 drop_last_batch); BatchSamplerShard (split_batches=False,
 *                 even_batches=True) gives process r the batches k with
 *                 k % W == r. Without drop_last_batch the last partial batch
 *                 is completed, and the missing batches of the last round
 *                 made, from the first min(W*B, n) indices of the epoch
 *                 (repeated as needed), so every rank reads
 *                 ceil(ceil(n/B)/W)*B indices; with it, floor(floor(n/B)/W)*B.
 *  torchvision-ra torchvision references/classification/sampler.py RASampler
 *                 (pytorch/vision 775e7604): randperm(n) of a generator
 *                 seeded S+e, each index repeated R = repetitions times in
 *                 a row, padded from its head to ceil(n*R/W)*W, rank r takes
 *                 positions r, r+W, ... and keeps the first
 *                 floor(floor(n/256)*256/W) of them.
 *  timm-ra        timm's RepeatAugSampler (huggingface/pytorch-image-models
 *                 aa4b5850, 2026-08-08, timm/data/distributed_sampler.py,
 *                 defaults selected_round=256, selected_ratio=0, an integer
 *                 num_repeats): as torchvision-ra, but the generator is
 *                 seeded with the epoch alone - seed= does not change the
 *                 order (it still has to be given, as for every model).
 * The two RA samplers fail their own assertion when the padding exceeds the
 * repeated list (W > 2*n*R roughly); creation refuses that case. They have
 * no drop_last of their own; sampler drop_last only concerns torch-ddp.
 *
 * The training libraries' samplers (none is installed here: each was read at
 * the commit named and is transcribed onto real torch in
 * tests/golden/library_orders.py, which the oracle compares with these):
 *
 *  detectron2     facebookresearch/detectron2 02b5c4e2 (2026-06-06),
 *                 data/samplers/distributed_sampler.py TrainingSampler
 *                 (shuffle=True): a generator seeded S once yields randperm(n),
 *                 randperm(n), ... forever; rank r reads islice(stream, r,
 *                 None, W). S is cfg.SEED (its default -1 is manual_seed(-1),
 *                 i.e. seed=4294967295) or, without one, comm.shared_random_seed()
 *                 (rank 0's np.random.randint(2^31)). MMEngine's InfiniteSampler
 *                 (open-mmlab/mmengine 25434293, 2025-10-27, dataset/sampler.py;
 *                 sampler=mmengine-infinite) is the same code. There are no
 *                 epochs: "epoch" p is pass p, the p-th randperm, stream
 *                 positions p*n .. p*n+n-1, of which rank r reads those q with
 *                 q % W == r (so its length moves by one between passes when W
 *                 does not divide n). batch and drop_last_batch change nothing:
 *                 batches run across passes. build_detection_train_loader's
 *                 workers (ToIterableDataset, shard_chunk_size = batch) take
 *                 chunks of B of the rank's stream round-robin, as a
 *                 DataLoader deals its batches.
 *  mmengine       not a kind: MMEngine's DefaultSampler (round_up=True, the
 *                 default; same commit) is torch-ddp with drop_last=False:
 *                 seed + epoch, `(indices * (total/n + 1))[:total]` is the
 *                 same head-repeating padding, strided by rank; the runner's
 *                 DistSamplerSeedHook calls set_epoch(runner.epoch).
 *  mmengine-noround  DefaultSampler(round_up=False): the same permutation,
 *                 no padding: rank r reads perm[r], perm[r+W], ...,
 *                 ceil((n-r)/W) indices.
 *  torchdata      pytorch/data 088e4347 (2025-06-10; the seeding since
 *                 1277308b, torchdata 0.11), stateful_dataloader/:
 *                 StatefulDataLoader(ds, shuffle=True) without a generator
 *                 builds its own RandomSampler, whose generator is seeded, when
 *                 the loader is built, with one draw of the global generator
 *                 (int(torch.empty((), int64).random_()): after
 *                 torch.manual_seed(S) and rng_offset words, the low word of
 *                 the next random64). Every iter() of its batch sampler draws
 *                 randperm(n) at once, and the sampler stops after n indices
 *                 without a trailing randperm. num_workers=0: one iter() per
 *                 epoch. (0.8-0.10 - v0.8.0 265d317a, v0.9.0 d4bb3e6f,
 *                 v0.10.1 a4bed258 - seed their RandomSampler with 1 and
 *                 iterate torch's RandomSampler lazily under a lazy
 *                 BatchSampler: torch-sampler with seed=1, workers or not;
 *                 not a kind.)
 *  torchdata-workers  num_workers > 0: the iterator's __init__ and its
 *                 _reset(first_iter=True) each call iter(), so an epoch draws
 *                 two randperms and reads the second; with persistent_workers
 *                 only epoch 0 makes an iterator, later epochs _reset() once.
 *  ultralytics    ultralytics/ultralytics data/build.py 002363f1,
 *                 engine/trainer.py 00016300: InfiniteDataLoader(shuffle=True,
 *                 generator=g), g seeded 6148914691236517205 + RANK (RANK is
 *                 -1 in one process: seed=6148914691236517204), makes one
 *                 iterator for the run (its _base_seed: 2 words of g) and
 *                 repeats the batch sampler forever, an epoch being one
 *                 RandomSampler pass (randperm(n), then the trailing one): torch
 *                 with persistent_workers. drop_last_batch is the trainer's
 *                 drop_last: the loader drops `drop_last and n % batch != 0`,
 *                 batch being min(batch, n) (for ultralytics-ddp too). The
 *                 trainer's train_loader.reset() at close_mosaic (a new
 *                 iterator) is not modelled.
 *  ultralytics-ddp  under DDP: DistributedSampler(shuffle=True, seed 0 unless
 *                 changed) and set_epoch(epoch) at each epoch's start, but the
 *                 one iterator keeps prefetch_factor (4) x workers batches in
 *                 flight, so it builds epoch e's permutation during epoch e-1:
 *                 epoch e reads torch-ddp's epoch max(e-1, 0). Assumes workers
 *                 > 0 and 4 x workers <= the rank's batches per epoch (with no
 *                 workers it is torch-ddp).
 *  hf-trainer     not a kind: transformers' Trainer up to 4.30 in one process
 *                 with data_seed=S (_get_train_sampler) is torch-sampler:
 *                 RandomSampler(generator=g seeded S), the DataLoader given no
 *                 generator.
 *  hf-trainer-global  the same without data_seed: g is seeded with one draw of
 *                 the global generator when the train loader is built, as
 *                 torchdata's (after set_seed(S) and rng_offset words), then
 *                 two randperms per epoch as torch-sampler.
 *
 * Versions: every rule above was read in torch 1.13's Python sources and
 * checked live against Debian's torch 1.13; RandomSampler's trailing
 * randperm and DistributedSampler's padding read the same in the torch 2.x
 * sources consulted. randperm itself differs from torch 2.6 on only for
 * n >= 214748364 (enum cfs_randperm_algo).
 *
 * For all torch models, drop_last_batch keeps floor(len/B)*B indices of the
 * rank's stream (the DataLoader drops the last incomplete batch); the batch
 * size otherwise does not change the order. The sampler's drop_last only
 * concerns torch-ddp. The models assume each epoch's loader is iterated to
 * its end (a `for batch in loader` loop).
 *
 * list:FILE format (text; '#' starts a comment line; blank lines ignored):
 *
 *     clairfs-sampler-list world=W epochs=E [n=N]
 *     epoch 0 rank 0: 5 3 0 ...
 *     epoch 0 rank 1: 1 4 2 ...
 *     epoch 1 rank 0: ...
 *
 * The header comes first. Then, for every epoch 0..E-1 and every rank
 * 0..W-1, exactly one line "epoch E rank R:" followed by that rank's
 * indices in reading order, separated by blanks, on the same line. W must
 * equal the sampler's world, N (if given) the dataset length; every index
 * must be a decimal integer below the dataset length, and every rank of one
 * epoch must list the same number of indices (ranks step in lockstep).
 * Epoch e >= E reads listed epoch e % E (the list cycles, so a one-epoch
 * list describes a trainer that reads the same order every epoch).
 * tests/golden/torch_orders.py prints exactly this format. Errors name the
 * file and line ("FILE:LINE: ..."). */
#ifndef CLAIRFS_SAMPLER_H
#define CLAIRFS_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cfs_sampler_kind {
    CFS_SAMPLER_TORCH_DDP = 0, /* DistributedSampler(seed, shuffle=True) + set_epoch(e) */
    CFS_SAMPLER_TORCH,         /* DataLoader(shuffle=True, generator=g), g seeded once */
    CFS_SAMPLER_TORCH_SAMPLER, /* DataLoader(sampler=RandomSampler(generator=g)) */
    CFS_SAMPLER_LIST,          /* explicit per-epoch, per-rank index lists */
    CFS_SAMPLER_HF_ACCELERATE, /* accelerate's SeedableRandomSampler + BatchSamplerShard */
    CFS_SAMPLER_TORCHVISION_RA, /* torchvision references' RASampler, seeded S + e */
    CFS_SAMPLER_TIMM_RA,       /* timm's RepeatAugSampler, seeded e */
    CFS_SAMPLER_TORCH_GLOBAL,  /* DataLoader(shuffle=True), no generator: the global RNG */
    CFS_SAMPLER_DETECTRON2,    /* detectron2 TrainingSampler, MMEngine InfiniteSampler */
    CFS_SAMPLER_MMENGINE_NOROUND, /* MMEngine DefaultSampler(round_up=False) */
    CFS_SAMPLER_TORCHDATA,     /* torchdata StatefulDataLoader(shuffle=True), num_workers=0 */
    CFS_SAMPLER_TORCHDATA_WORKERS, /* the same with num_workers > 0 */
    CFS_SAMPLER_ULTRALYTICS,   /* ultralytics InfiniteDataLoader, one process */
    CFS_SAMPLER_ULTRALYTICS_DDP, /* ultralytics under DDP: set_epoch one epoch late */
    CFS_SAMPLER_HF_TRAINER_GLOBAL, /* transformers Trainer <= 4.30 without data_seed */
};
/* How many kinds there are (they are numbered from 0). */
#define CFS_SAMPLER_KINDS (CFS_SAMPLER_HF_TRAINER_GLOBAL + 1)

/* MT19937 as torch's CPUGeneratorImpl uses it. */
struct cfs_mt19937 {
    uint32_t state[624];
    int next;
};
/* torch.Generator().manual_seed(seed): only the low 32 bits matter. */
void cfs_mt19937_seed(struct cfs_mt19937 *mt, uint64_t seed);
/* CPUGeneratorImpl::random(): one word. */
uint32_t cfs_mt19937_next32(struct cfs_mt19937 *mt);
/* CPUGeneratorImpl::random64(): two words, the first in the high half. */
uint64_t cfs_mt19937_next64(struct cfs_mt19937 *mt);
/* Skip `words` 32-bit draws. */
void cfs_mt19937_discard(struct cfs_mt19937 *mt, uint64_t words);
/* The generator's two steps on a bare state, for code that works on
 * states, not draws (the seed search's jump tables): the twist that makes
 * the next 624 words, and the tempering of one word. */
void cfs_mt19937_twist_state(uint32_t state[624]);
uint32_t cfs_mt19937_temper(uint32_t y);

/* torch's CPU randperm changed for large n in torch 2.6 (PR 143682): from
 * n >= UINT32_MAX/20 = 214748364 it uses random64 and another shuffle. Below
 * that n every version draws the same permutation. */
enum cfs_randperm_algo {
    CFS_RANDPERM_CURRENT = 0, /* torch >= 2.6 (the default) */
    CFS_RANDPERM_LEGACY,      /* torch <= 2.5, e.g. Debian's 1.13: one algorithm for all n */
};

/* torch.randperm(n, generator=mt) on the CPU, into perm[0..n-1]. */
void cfs_torch_randperm(struct cfs_mt19937 *mt, uint32_t *perm, uint32_t n,
                        enum cfs_randperm_algo algo);
/* How many 32-bit words cfs_torch_randperm(n) draws. */
uint64_t cfs_torch_randperm_words(uint64_t n, enum cfs_randperm_algo algo);

struct cfs_sampler_params {
    enum cfs_sampler_kind kind;
    uint64_t seed;
    uint64_t n;       /* dataset length (number of indexed samples), 1..2^32-1 */
    uint32_t world;   /* num_replicas, >= 1 */
    uint32_t batch;   /* DataLoader batch_size, >= 1 */
    bool drop_last;   /* DistributedSampler(drop_last=...) */
    bool drop_last_batch; /* DataLoader(drop_last=...) */
    bool persistent_workers;
    const char *list_path; /* CFS_SAMPLER_LIST only */
    enum cfs_randperm_algo randperm; /* matters only for n >= 214748364 */
    /* torchvision-ra, timm-ra: how many times each index is repeated in a
     * row; 0 is the frameworks' default, 3. */
    uint32_t repetitions;
    /* torch-global: words of the global generator drawn after
     * torch.manual_seed(seed) and before the loader's first iterator (model
     * construction), and words drawn during each epoch outside the loader
     * (dropout on the CPU, ...). */
    uint64_t rng_offset;
    uint64_t rng_epoch_words;
};

struct cfs_sampler;

/* Returns 0 or -errno; on error a one-line message naming the option, or
 * the list file and line, is written to err. */
int cfs_sampler_create(const struct cfs_sampler_params *p, struct cfs_sampler **out, char *err,
                       size_t errlen);
void cfs_sampler_destroy(struct cfs_sampler *s);

/* Number of indices trainer rank `rank` reads in one epoch (after padding,
 * drop_last and drop_last_batch).  The same for every epoch except with
 * list:FILE, hence the epoch argument. */
uint64_t cfs_sampler_rank_len(const struct cfs_sampler *s, uint32_t epoch, uint32_t rank);

/* Compute the order of `epoch` (cost O(n); epochs of stateful models are
 * replayed from the last computed one, so iterate epochs upwards). Returns 0
 * or -errno. After it, cfs_sampler_rank_at() reads from that epoch.
 * On failure cfs_sampler_error() says why in one line. */
int cfs_sampler_compute_epoch(struct cfs_sampler *s, uint32_t epoch);

/* The i-th index that `rank` reads in the epoch last computed
 * (i < cfs_sampler_rank_len(s, epoch, rank)). */
uint32_t cfs_sampler_rank_at(const struct cfs_sampler *s, uint32_t rank, uint64_t i);

/* A direct view of the epoch last computed, for consumers that read every
 * rank's stream and cannot afford a call per index (the planner's sweep):
 * for the torch models, cfs_sampler_rank_at(s, r, i) ==
 * (*order)[(r * *rank_step + i * *stride) % *len], so a rank's stream is a
 * strided walk of one array and neighbouring ranks read neighbouring
 * entries (torch-ddp, mmengine-noround, ultralytics-ddp: rank_step 1, stride W; the
 * stateful kinds: rank_step 0, stride 1; the framework kinds and detectron2:
 * rank_step 1, stride W over an array of W * (longest rank_len) entries that
 * holds the ranks' streams interleaved). Returns 0, or -ENOTSUP for list:FILE (use rank_at) and
 * -ENODATA before any epoch was computed. */
int cfs_sampler_epoch_order(const struct cfs_sampler *s, const uint32_t **order, uint64_t *len,
                            uint64_t *rank_step, uint64_t *stride);

/* The message of the last failed cfs_sampler_compute_epoch(), or "". */
const char *cfs_sampler_error(const struct cfs_sampler *s);

/* The kind's sampler= name: "torch-ddp", "torch", "torch-sampler", "list",
 * "hf-accelerate", "torchvision-ra", "timm-ra", "torch-global", "detectron2",
 * "mmengine-noround", "torchdata", "torchdata-workers", "ultralytics",
 * "ultralytics-ddp" or "hf-trainer-global". */
const char *cfs_sampler_kind_name(enum cfs_sampler_kind kind);

#endif
