/* Access-order models: bit-exact reproductions of the index streams that
 * PyTorch samplers and DataLoaders yield (DESIGN.md fact 1).
 *
 * A sampler produces, per epoch, the *global* order of dataset indices;
 * trainer rank r of W reads the sub-stream cfs_sampler_rank_at(). Everything
 * here is pure computation: no FUSE, no MPI, no I/O except reading a
 * list:FILE once at creation. */
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
};

/* MT19937 as torch's CPUGeneratorImpl uses it. */
struct cfs_mt19937 {
    uint32_t state[624];
    int next;
};
void cfs_mt19937_seed(struct cfs_mt19937 *mt, uint64_t seed);
uint32_t cfs_mt19937_next32(struct cfs_mt19937 *mt);
uint64_t cfs_mt19937_next64(struct cfs_mt19937 *mt);

/* torch.randperm(n, generator=mt) on the CPU, into perm[0..n-1]; both of
 * torch's algorithms (small n and n >= 2^32/20). */
void cfs_torch_randperm(struct cfs_mt19937 *mt, uint32_t *perm, uint32_t n);

struct cfs_sampler_params {
    enum cfs_sampler_kind kind;
    uint64_t seed;
    uint64_t n;       /* dataset length (number of indexed samples) */
    uint32_t world;   /* num_replicas, >= 1 */
    uint32_t batch;   /* DataLoader batch_size, >= 1 */
    bool drop_last;   /* DistributedSampler(drop_last=...) */
    bool drop_last_batch; /* DataLoader(drop_last=...) */
    bool persistent_workers;
    const char *list_path; /* CFS_SAMPLER_LIST only */
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
 * or -errno. After it, cfs_sampler_rank_at() reads from that epoch. */
int cfs_sampler_compute_epoch(struct cfs_sampler *s, uint32_t epoch);

/* The i-th index that `rank` reads in the epoch last computed. */
uint32_t cfs_sampler_rank_at(const struct cfs_sampler *s, uint32_t rank, uint64_t i);

#endif
