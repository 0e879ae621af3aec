/* Private to the sampler module: the list:FILE reader (src/sampler_list.c),
 * the frameworks' samplers (src/sampler_framework.c), the infinite stream
 * (src/sampler_infinite.c) and the kinds' facts (src/sampler_kind.c), all
 * below src/sampler.c. */
#ifndef CLAIRFS_SAMPLER_I_H
#define CLAIRFS_SAMPLER_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/sampler.h"

struct cfs_sampler_list;

/* Reads and validates the whole file (format in clairfs/sampler.h) keeping
 * only where each (epoch, rank) line starts and its length. */
int cfs_sampler_list_open(const char *path, uint64_t n, uint32_t world,
                          struct cfs_sampler_list **out, char *err, size_t errlen);
void cfs_sampler_list_close(struct cfs_sampler_list *l);
uint32_t cfs_sampler_list_epochs(const struct cfs_sampler_list *l);
/* Length of (epoch, rank), epoch < cfs_sampler_list_epochs(). */
uint64_t cfs_sampler_list_len(const struct cfs_sampler_list *l, uint32_t epoch, uint32_t rank);
/* The largest total over the ranks of one epoch: the buffer load needs. */
uint64_t cfs_sampler_list_max_epoch_total(const struct cfs_sampler_list *l);
/* Reads epoch `epoch` into buf, rank after rank (rank r starts at the sum of
 * the lengths of ranks < r). */
int cfs_sampler_list_load(struct cfs_sampler_list *l, uint32_t epoch, uint32_t *buf, char *err,
                          size_t errlen);

/* The kinds' families (sampler_kind.c). hf-accelerate, torchvision-ra,
 * timm-ra: */
bool cfs_framework_kind(enum cfs_sampler_kind kind);
/* torch-ddp, mmengine-noround, ultralytics-ddp: randperm(n) of seed + epoch
 * (ultralytics-ddp: of the epoch before), rank r reading r, r+W, ... */
bool cfs_ddp_kind(enum cfs_sampler_kind kind);
/* One generator across the run: torch, torch-sampler, torch-global,
 * torchdata, torchdata-workers, ultralytics, hf-trainer-global. */
bool cfs_stateful_kind(enum cfs_sampler_kind kind);
/* Those whose generator is seeded by one draw of the global generator
 * seeded S: torchdata, torchdata-workers, hf-trainer-global. */
bool cfs_drawn_seed_kind(enum cfs_sampler_kind kind);

/* How a framework kind's epoch is laid out: every rank reads rank_len
 * indices; the epoch array holds view_len = W * rank_len of them,
 * interleaved (view[i * W + r] is rank r's i-th), in an array of its own
 * when separate_view, else over the n-entry permutation. */
struct cfs_framework_layout {
    uint64_t rank_len;
    uint64_t view_len;
    bool separate_view;
};

/* Checks p (world, batch, n already valid) for what the framework itself
 * refuses; 0 or -EINVAL with a one-line message. */
int cfs_framework_layout(const struct cfs_sampler_params *p, struct cfs_framework_layout *out,
                         char *err, size_t errlen);

/* Epoch `epoch` into view; perm is n entries of room for the permutation
 * (the same array as view when !separate_view). 0, or -ERANGE when seed +
 * epoch does not fit torch's manual_seed. */
int cfs_framework_epoch(const struct cfs_sampler_params *p, const struct cfs_framework_layout *l,
                        uint32_t epoch, uint32_t *perm, uint32_t *view, char *err, size_t errlen);

/* detectron2 (sampler_infinite.c): pass p is the p-th randperm of the
 * stream. Indices rank r reads of pass p: */
uint64_t cfs_infinite_rank_len(const struct cfs_sampler_params *p, uint32_t pass, uint32_t rank);
/* Entries of the interleaved layout of a pass: W * ceil(n / W). */
uint64_t cfs_infinite_view_len(const struct cfs_sampler_params *p);
/* Pass `pass` into view (view[i * W + r] is rank r's i-th index), perm being
 * n entries of room. mt is the stream's generator at the start of pass
 * *at_pass; it is replayed from the seed when pass is below that, and left
 * at the start of pass + 1. */
void cfs_infinite_pass(const struct cfs_sampler_params *p, struct cfs_mt19937 *mt,
                       uint64_t *at_pass, uint32_t pass, uint32_t *perm, uint32_t *view);

#endif
