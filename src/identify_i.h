/* Private to order identification: the split between the module
 * (identify.c: observations, the thread, the seed scans), the
 * verification of one candidate seed against every observed open
 * (identify_verify.c) and the frameworks' samplers as hypotheses of it
 * (identify_frameworks.c). */
#ifndef CLAIRFS_IDENTIFY_I_H
#define CLAIRFS_IDENTIFY_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clairfs/identify.h"

/* Opens of one process, in order. */
struct ident_reader {
    pid_t pid, ppid;
    uint32_t *s;
    size_t len, cap;
};

/* The observations grouped by process, readers in order of first open. */
struct ident_readers {
    struct ident_reader *r;
    size_t nr;
    uint64_t opens;
};

/* Groups samples[i] by pids[i] (NULL: one reader).  0 or -ENOMEM. */
int ident_group(const uint32_t *samples, const pid_t *pids, const pid_t *ppids, size_t count,
                struct ident_readers *out);
void ident_readers_free(struct ident_readers *rd);

/* A false identification stays below 2^-40 when the evidence of a fit, in
 * bits, reaches this much plus log2 of the candidate seeds tried (see
 * identify_verify.c for the argument). */
#define IDENT_SAFETY_BITS 40.0
#define IDENT_HYPOTHESIS_BITS 12.0 /* at most 4096 hypotheses a seed */
#define IDENT_MIN_OPENS 32

/* Verdict on one candidate: generator seed seed32 (mod 2^32) drawing
 * skip_words before the first randperm, the head of the stream at randperm
 * position p0.  Returns 1 when a hypothesis explains every open with at
 * least need_bits of evidence (*out filled), 0 when one explains every
 * open with less (*bits says how much), -ENOENT when none does, -ENOMEM. */
int ident_verify(const struct cfs_identify_params *p, const struct ident_readers *rd,
                 uint32_t seed32, uint32_t skip_words, uint32_t p0, double need_bits,
                 struct cfs_identified *out, double *bits);

/* The same against a full sampler configuration (torch-global: seed S,
 * rng_offset, rng_epoch_words; world and batch are found as above), from
 * randperm position 0.  Refused (-ENOTSUP) above the dense n. */
int ident_verify_model(const struct cfs_identify_params *p, const struct ident_readers *rd,
                       const struct cfs_sampler_params *model, double need_bits,
                       struct cfs_identified *out, double *bits);

/* --- torch-global (identify_global.c). ---------------------------------- */

/* The opens as observed, in order. */
struct ident_obs {
    const uint32_t *s;
    const pid_t *pids, *ppids;
    size_t len;
};

/* What is known of a torch-global trainer between attempts. */
struct ident_global {
    bool found;       /* rng_offset known (and the loader's schedule) */
    bool words_known; /* rng_epoch_words known */
    bool persistent;
    uint64_t offset, words;
    uint32_t batch, workers, ranks;
    bool told; /* "not found within K <= ..." was logged */
};

/* The registered seed S read as torch-global: 1 identified (*out), 0 a fit
 * short of evidence, -ENOENT no torch-global order of S fits, -ECANCELED,
 * -errno.  g carries the offset found from one attempt to the next. */
int ident_global_attempt(const struct cfs_identify_params *p, const struct ident_obs *obs,
                         const atomic_bool *cancel, double need_bits, struct ident_global *g,
                         struct cfs_identified *out);

/* Candidates the torch-global searches may try for p (0 when they do not
 * apply): counted in the evidence demanded. */
double ident_global_candidates(const struct cfs_identify_params *p);

/* " rng_offset=K rng_epoch_words=G" for a torch-global id, else "". */
void ident_global_describe(const struct cfs_identified *id, char *buf, size_t len);

/* One hypothesis of how the opens follow from a candidate's epochs. */
struct ident_hyp {
    enum cfs_sampler_kind kind;
    bool persistent, drop_last, drop_last_batch;
    uint32_t world, batch, workers, p0;
    uint64_t rank_len; /* indices a rank reads in an epoch */
};

#define IDENT_MAX_WORLD 64 /* the largest world a hypothesis guesses */

/* --- The frameworks' samplers (identify_frameworks.c). --- */

/* Ranks read disjoint parts of one permutation per epoch, drawn from a
 * generator seeded afresh: torch-ddp and the frameworks' samplers. */
bool ident_sharded(enum cfs_sampler_kind kind);
/* For h of a framework kind (hf-accelerate, torchvision-ra): the indices
 * a rank reads per epoch; the permutation position of rank r's index j;
 * the (rank, index) pairs that read position q, at most
 * ident_fw_choices(h) of them, into r[] and j[]. */
uint64_t ident_fw_rank_len(const struct ident_hyp *h, uint64_t n);
uint32_t ident_fw_position(const struct ident_hyp *h, uint64_t n, uint32_t r, uint64_t j);
size_t ident_fw_places(const struct ident_hyp *h, uint64_t n, uint32_t q, uint32_t *r, uint64_t *j);
uint32_t ident_fw_choices(const struct ident_hyp *h);
#define IDENT_FW_MAX_CHOICES 3

/* The reader that opened the epoch's first permutation entry: pos(arg, i)
 * is the position of its open i (i < len) in the candidate's epoch 0
 * (UINT32_MAX where unknown; pos(arg, 0) = 0); a registered batch (0:
 * none). */
struct ident_fw_head {
    uint32_t (*pos)(void *arg, size_t i);
    void *arg;
    size_t len;
    uint64_t n;
    uint32_t hint_batch;
    /* The epoch-0 positions of the first opens of the head's siblings
     * (readers with its parent: its rank's other workers), which say B and
     * T while the head has not finished its first batch. */
    const uint32_t *sibling_first;
    size_t nsiblings;
};
/* The framework hypotheses (kind, world, batch, workers) these opens
 * allow, at most max; drop_last variants are the caller's. */
size_t ident_fw_hypotheses(const struct ident_fw_head *hd, struct ident_hyp *out, size_t max);

/* Workers 1 .. k of a rank start at w times one stride (torch-ddp's and
 * accelerate's batches, in their own units): the least of starts[0 .. k)
 * when each is a distinct multiple 1 .. k of it, else 0. */
uint32_t ident_stride_of_starts(const uint32_t *starts, size_t k);
/* Is a torchvision-ra fit with candidate seed seed32 to be named timm-ra
 * (seed32 is then the epoch the observation began in)? */
bool ident_fw_timm(uint32_t seed32, const struct cfs_sampler_params *hint);

#endif
