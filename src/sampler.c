/* Access-order models (see clairfs/sampler.h for what each one reproduces).
 *
 * One epoch at a time: the sampler holds one permutation of n (or one
 * epoch of a list), never all epochs. torch-ddp and its kin (mmengine-noround,
 * ultralytics-ddp) are stateless - epoch e is a pure function of seed + e.
 * The stateful kinds (torch, torch-sampler, torch-global, torchdata,
 * torchdata-workers, ultralytics, hf-trainer-global) draw from one generator
 * for the whole run, so the generator is kept just past the last computed
 * epoch; a later epoch skips the epochs in between by discarding exactly the
 * words they would draw (no permutation needed), an earlier one replays
 * from a fresh seed. What differs between them is only which words an epoch
 * draws around the permutation it reads, and how the generator is seeded:
 * that schedule is below, one function per question. Either way memory stays
 * O(n). The frameworks' samplers (src/sampler_framework.c) are stateless too
 * and keep their epoch laid out rank by rank in `view`; detectron2's
 * infinite stream (src/sampler_infinite.c) keeps its pass there the same
 * way. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "sampler_i.h"

struct cfs_sampler {
    struct cfs_sampler_params p;
    char *list_path;
    uint64_t num_samples; /* per rank, before drop_last_batch */
    uint64_t rank_len;    /* per rank, after drop_last_batch */
    uint32_t *buf;        /* the epoch's permutation of n, or list epoch */
    uint32_t *view;       /* framework kinds: the ranks' streams interleaved */
    struct cfs_framework_layout layout; /* framework kinds */
    uint64_t *list_start; /* list: where each rank starts in buf */
    struct cfs_sampler_list *list;
    struct cfs_mt19937 mt; /* stateful kinds, detectron2: at the start of epoch gen_epoch */
    uint64_t gen_epoch;
    /* The generator at the start of the lowest epoch asked for so far: a
     * planner that walks start_epoch..E-1 once per node restarts here, not
     * at epoch 0. */
    struct cfs_mt19937 ckpt;
    uint64_t ckpt_epoch;
    bool have_ckpt;
    int64_t cur_epoch; /* epoch in buf, -1 none */
    char err[320];
};

/* The generator at the start of epoch 0: torch-global's trainer has drawn
 * rng_offset words of the global generator (model construction) first. The
 * drawn-seed kinds then seed their sampler's own generator with the next
 * `int(torch.empty((), int64).random_())`, a random64 masked to 63 bits of
 * which manual_seed keeps the low 32. */
static void stateful_start(struct cfs_sampler *s)
{
    cfs_mt19937_seed(&s->mt, s->p.seed);
    if (s->p.kind == CFS_SAMPLER_TORCH_GLOBAL || cfs_drawn_seed_kind(s->p.kind))
        cfs_mt19937_discard(&s->mt, s->p.rng_offset);
    if (cfs_drawn_seed_kind(s->p.kind))
        cfs_mt19937_seed(&s->mt, cfs_mt19937_next64(&s->mt) & INT64_MAX);
    s->gen_epoch = 0;
}

int cfs_sampler_create(const struct cfs_sampler_params *p, struct cfs_sampler **out, char *err,
                       size_t errlen)
{
    struct cfs_sampler *s = NULL;
    int rc = -EINVAL;

    *out = NULL;
    if (p->world == 0) {
        snprintf(err, errlen, "option world=0: must be at least 1");
        goto fail;
    }
    if (p->batch == 0) {
        snprintf(err, errlen, "option batch=0: must be at least 1");
        goto fail;
    }
    if (p->n == 0 || p->n > UINT32_MAX) {
        snprintf(err, errlen, "sampler: dataset of %llu samples: must be 1..%u",
                 (unsigned long long)p->n, UINT32_MAX);
        goto fail;
    }
    if (p->randperm != CFS_RANDPERM_CURRENT && p->randperm != CFS_RANDPERM_LEGACY) {
        snprintf(err, errlen, "sampler: unknown randperm algorithm %d", (int)p->randperm);
        goto fail;
    }
    if ((unsigned)p->kind >= CFS_SAMPLER_KINDS || (p->kind == CFS_SAMPLER_LIST && !p->list_path)) {
        snprintf(err, errlen, "option sampler: unknown kind or list without a file");
        goto fail;
    }
    rc = -ENOMEM;
    s = calloc(1, sizeof(*s));
    if (!s)
        goto oom;
    s->p = *p;
    s->p.list_path = NULL;
    s->cur_epoch = -1;
    if (p->kind == CFS_SAMPLER_LIST) {
        if (!(s->list_path = strdup(p->list_path)))
            goto oom;
        s->p.list_path = s->list_path;
        rc = cfs_sampler_list_open(p->list_path, p->n, p->world, &s->list, err, errlen);
        if (rc < 0)
            goto fail;
        uint64_t total = cfs_sampler_list_max_epoch_total(s->list);
        rc = -ENOMEM;
        s->buf = malloc((total ? total : 1) * sizeof(*s->buf));
        s->list_start = malloc(p->world * sizeof(*s->list_start));
        if (!s->buf || !s->list_start)
            goto oom;
    } else if (cfs_framework_kind(p->kind)) {
        rc = cfs_framework_layout(p, &s->layout, err, errlen);
        if (rc < 0)
            goto fail;
        rc = -ENOMEM;
        s->rank_len = s->layout.rank_len;
        s->buf = malloc(p->n * sizeof(*s->buf));
        s->view = s->layout.separate_view
                      ? malloc((s->layout.view_len ? s->layout.view_len : 1) * sizeof(*s->view))
                      : s->buf;
        if (!s->buf || !s->view)
            goto oom;
    } else if (p->kind == CFS_SAMPLER_DETECTRON2) {
        /* calloc: the last row's entries past a shorter rank are never
         * written, nor read. */
        s->layout.view_len = cfs_infinite_view_len(p);
        s->buf = malloc(p->n * sizeof(*s->buf));
        s->view = calloc(s->layout.view_len, sizeof(*s->view));
        if (!s->buf || !s->view)
            goto oom;
        cfs_mt19937_seed(&s->mt, p->seed);
    } else {
        if (p->kind == CFS_SAMPLER_TORCH_DDP || p->kind == CFS_SAMPLER_ULTRALYTICS_DDP)
            s->num_samples = p->drop_last ? p->n / p->world : (p->n + p->world - 1) / p->world;
        else
            s->num_samples = p->n;
        uint64_t b = p->batch;
        bool drop = p->drop_last_batch;
        if (p->kind == CFS_SAMPLER_ULTRALYTICS || p->kind == CFS_SAMPLER_ULTRALYTICS_DDP) {
            /* build_dataloader: batch = min(batch, len(dataset)), and the
             * loader drops only when `drop_last and len(dataset) % batch`. */
            b = b < p->n ? b : p->n;
            drop = drop && p->n % b != 0;
        }
        s->rank_len = drop ? s->num_samples / b * b : s->num_samples;
        s->buf = malloc(p->n * sizeof(*s->buf));
        if (!s->buf)
            goto oom;
        stateful_start(s);
    }
    *out = s;
    return 0;
oom:
    snprintf(err, errlen, "sampler: out of memory for a dataset of %llu samples",
             (unsigned long long)p->n);
fail:
    cfs_sampler_destroy(s);
    return rc;
}

void cfs_sampler_destroy(struct cfs_sampler *s)
{
    if (!s)
        return;
    cfs_sampler_list_close(s->list);
    if (s->view != s->buf)
        free(s->view);
    free(s->buf);
    free(s->list_start);
    free(s->list_path);
    free(s);
}

uint64_t cfs_sampler_rank_len(const struct cfs_sampler *s, uint32_t epoch, uint32_t rank)
{
    if (s->list)
        return cfs_sampler_list_len(s->list, epoch % cfs_sampler_list_epochs(s->list), rank);
    if (s->p.kind == CFS_SAMPLER_DETECTRON2)
        return cfs_infinite_rank_len(&s->p, epoch, rank);
    if (s->p.kind == CFS_SAMPLER_MMENGINE_NOROUND) {
        /* No padding: rank r's share of n is ceil((n - r) / W), or none. */
        uint64_t len = rank < s->p.n ? (s->p.n - rank + s->p.world - 1) / s->p.world : 0;
        return s->p.drop_last_batch ? len / s->p.batch * s->p.batch : len;
    }
    return s->rank_len;
}

/* The loader iterator's _base_seed: one random64 from g when the iterator is
 * created (every epoch, or only the first with persistent workers, or only
 * once for ultralytics' InfiniteDataLoader, which keeps one iterator for
 * the run). */
static uint64_t base_seed_words(const struct cfs_sampler *s, uint64_t epoch)
{
    if (s->p.kind == CFS_SAMPLER_ULTRALYTICS)
        return epoch == 0 ? 2 : 0;
    if (s->p.kind != CFS_SAMPLER_TORCH && s->p.kind != CFS_SAMPLER_TORCH_GLOBAL)
        return 0;
    return (!s->p.persistent_workers || epoch == 0) ? 2 : 0;
}

/* Words drawn in an epoch before the permutation it reads: the base seed,
 * and torchdata-workers' dropped permutation (its iterator's __init__ and
 * _reset(first_iter=True) each iter() the batch sampler, which draws at
 * once; with persistent workers only epoch 0 makes an iterator). */
static uint64_t pre_words(const struct cfs_sampler *s, uint64_t epoch, uint64_t rp)
{
    uint64_t w = base_seed_words(s, epoch);
    if (s->p.kind == CFS_SAMPLER_TORCHDATA_WORKERS && (!s->p.persistent_workers || epoch == 0))
        w += rp;
    return w;
}

/* Words drawn after it: torch's RandomSampler computes randperm(n)[:0] when
 * the loader exhausts it; torchdata's stops at num_samples without one. */
static uint64_t post_words(const struct cfs_sampler *s, uint64_t rp)
{
    bool torchdata = s->p.kind == CFS_SAMPLER_TORCHDATA ||
                     s->p.kind == CFS_SAMPLER_TORCHDATA_WORKERS;
    return torchdata ? 0 : rp;
}

/* Words of the run's generator one whole epoch draws. torch-global's
 * permutations come from private generators: the global one sees only the
 * private seed (a random64) and the epoch's words outside the loader. */
static uint64_t epoch_words(const struct cfs_sampler *s, uint64_t epoch, uint64_t rp)
{
    if (s->p.kind == CFS_SAMPLER_TORCH_GLOBAL)
        return base_seed_words(s, epoch) + 2 + s->p.rng_epoch_words;
    return pre_words(s, epoch, rp) + rp + post_words(s, rp);
}

/* The epoch's permutation into buf, from the generator at the epoch's start,
 * leaving the generator at the next epoch's start. */
static void draw_epoch(struct cfs_sampler *s, uint64_t epoch, uint64_t rp)
{
    cfs_mt19937_discard(&s->mt, pre_words(s, epoch, rp));
    if (s->p.kind == CFS_SAMPLER_TORCH_GLOBAL) {
        /* RandomSampler: generator.manual_seed(int(empty(int64).random_())),
         * a random64 masked to 63 bits; manual_seed keeps its low 32. */
        struct cfs_mt19937 private_gen;
        cfs_mt19937_seed(&private_gen, cfs_mt19937_next64(&s->mt) & INT64_MAX);
        cfs_torch_randperm(&private_gen, s->buf, (uint32_t)s->p.n, s->p.randperm);
        cfs_mt19937_discard(&s->mt, s->p.rng_epoch_words);
        return;
    }
    cfs_torch_randperm(&s->mt, s->buf, (uint32_t)s->p.n, s->p.randperm);
    cfs_mt19937_discard(&s->mt, post_words(s, rp));
}

static int compute_stateful(struct cfs_sampler *s, uint32_t epoch)
{
    uint64_t rp = cfs_torch_randperm_words(s->p.n, s->p.randperm);
    if (s->gen_epoch > epoch) {
        if (s->have_ckpt && s->ckpt_epoch <= epoch) {
            s->mt = s->ckpt;
            s->gen_epoch = s->ckpt_epoch;
        } else {
            stateful_start(s);
        }
    }
    for (; s->gen_epoch < epoch; s->gen_epoch++)
        cfs_mt19937_discard(&s->mt, epoch_words(s, s->gen_epoch, rp));
    if (!s->have_ckpt || epoch < s->ckpt_epoch) {
        s->ckpt = s->mt;
        s->ckpt_epoch = epoch;
        s->have_ckpt = true;
    }
    draw_epoch(s, epoch, rp);
    s->gen_epoch = (uint64_t)epoch + 1;
    return 0;
}

/* torch-ddp's kin: randperm(n) of a generator seeded seed + e, where
 * ultralytics-ddp's e is the epoch before (its loader builds epoch e's
 * permutation while epoch e-1 runs, before set_epoch(e)). */
static int compute_ddp(struct cfs_sampler *s, uint32_t epoch)
{
    uint32_t e = s->p.kind == CFS_SAMPLER_ULTRALYTICS_DDP && epoch > 0 ? epoch - 1 : epoch;
    if (s->p.seed + e < s->p.seed) {
        snprintf(s->err, sizeof(s->err),
                 "seed=%llu + epoch %u exceeds 2^64-1: torch's manual_seed would fail",
                 (unsigned long long)s->p.seed, e);
        return -ERANGE;
    }
    cfs_mt19937_seed(&s->mt, s->p.seed + e);
    cfs_torch_randperm(&s->mt, s->buf, (uint32_t)s->p.n, s->p.randperm);
    return 0;
}

int cfs_sampler_compute_epoch(struct cfs_sampler *s, uint32_t epoch)
{
    int rc = 0;
    s->err[0] = '\0';
    if (s->cur_epoch == (int64_t)epoch)
        return 0;
    s->cur_epoch = -1;
    switch (s->p.kind) {
    case CFS_SAMPLER_TORCH_DDP:
    case CFS_SAMPLER_MMENGINE_NOROUND:
    case CFS_SAMPLER_ULTRALYTICS_DDP:
        rc = compute_ddp(s, epoch);
        break;
    case CFS_SAMPLER_TORCH:
    case CFS_SAMPLER_TORCH_SAMPLER:
    case CFS_SAMPLER_TORCH_GLOBAL:
    case CFS_SAMPLER_TORCHDATA:
    case CFS_SAMPLER_TORCHDATA_WORKERS:
    case CFS_SAMPLER_ULTRALYTICS:
    case CFS_SAMPLER_HF_TRAINER_GLOBAL:
        rc = compute_stateful(s, epoch);
        break;
    case CFS_SAMPLER_DETECTRON2:
        cfs_infinite_pass(&s->p, &s->mt, &s->gen_epoch, epoch, s->buf, s->view);
        break;
    case CFS_SAMPLER_LIST: {
        uint32_t le = epoch % cfs_sampler_list_epochs(s->list);
        uint64_t at = 0;
        for (uint32_t r = 0; r < s->p.world; r++) {
            s->list_start[r] = at;
            at += cfs_sampler_list_len(s->list, le, r);
        }
        rc = cfs_sampler_list_load(s->list, le, s->buf, s->err, sizeof(s->err));
        break;
    }
    case CFS_SAMPLER_HF_ACCELERATE:
    case CFS_SAMPLER_TORCHVISION_RA:
    case CFS_SAMPLER_TIMM_RA:
        rc = cfs_framework_epoch(&s->p, &s->layout, epoch, s->buf, s->view, s->err,
                                 sizeof(s->err));
        break;
    }
    if (rc == 0)
        s->cur_epoch = epoch;
    return rc;
}

uint32_t cfs_sampler_rank_at(const struct cfs_sampler *s, uint32_t rank, uint64_t i)
{
    if (cfs_ddp_kind(s->p.kind)) /* padding repeats the list from its head: perm[j % n] */
        return s->buf[(rank + i * s->p.world) % s->p.n];
    if (s->p.kind == CFS_SAMPLER_LIST)
        return s->buf[s->list_start[rank] + i];
    if (s->view) /* the frameworks' kinds, detectron2 */
        return s->view[rank + i * s->p.world];
    return s->buf[i];
}

int cfs_sampler_epoch_order(const struct cfs_sampler *s, const uint32_t **order, uint64_t *len,
                            uint64_t *rank_step, uint64_t *stride)
{
    if (s->p.kind == CFS_SAMPLER_LIST)
        return -ENOTSUP;
    if (s->cur_epoch < 0)
        return -ENODATA;
    if (s->view) {
        *order = s->view;
        *len = s->layout.view_len;
        *rank_step = 1;
        *stride = s->p.world;
        return 0;
    }
    *order = s->buf;
    *len = s->p.n;
    *rank_step = cfs_ddp_kind(s->p.kind) ? 1 : 0;
    *stride = cfs_ddp_kind(s->p.kind) ? s->p.world : 1;
    return 0;
}

const char *cfs_sampler_error(const struct cfs_sampler *s)
{
    return s->err;
}
