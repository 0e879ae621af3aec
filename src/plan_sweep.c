/* The planner's sweep: every node's reads of every epoch, counted.
 *
 * This is the planner's cost at scale.  Each epoch is one permutation of
 * the dataset (the sampler's), split into the nodes' streams, and every read
 * updates its node's count of the file (a byte, plan_i.h): for ImageNet-22k
 * on 16 nodes, 14.2 M reads an epoch into 16 arrays of 14 MB.  Taken in
 * stream order those updates miss the cache nearly every time; a node's
 * whole epoch stream (torch-ddp) is therefore first partitioned by file
 * range, stably, into blocks whose records fit in the cache, and counted
 * block by block.  Everything a read updates is a count or a minimum over
 * the stream's order (the first read is the one at the lowest position),
 * and the partition keeps stream order within a block, so the records are
 * those of the stream order.  Other sources are counted in stream order,
 * a block of reads at a time, with the counters prefetched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "plan_i.h"

#define SWEEP_BLOCK 256

/* rank r's s-th read is order[(r * rank_step + s * stride) % len]. */
struct epoch_view {
    const uint32_t *order;
    uint64_t len, rank_step, stride;
};

/* Count read i of node j's epoch stream (nlen reads), of file f, at
 * stream position pos (kept for the planned node only). */
static inline void count_read(struct cfs_plan *p, struct plan_build *b, uint8_t *cnt,
                              uint8_t *fep, uint32_t rel, bool local, uint32_t f, uint64_t i,
                              uint64_t nlen, uint64_t pos)
{
    uint8_t c = cnt[f];
    if (c == 0) {
        if (fep)
            fep[f] = (uint8_t)(rel > 255 ? 255 : rel);
        else
            c = (uint8_t)(rel << 5); /* packed (plan_i.h): rel < PACKED_EPOCHS */
        /* Epochs are swept in order: only a file nobody read in an
         * earlier epoch can get an earlier cluster time from this node. */
        if (!bit_get(b->seen_before, f)) {
            /* Within an epoch the low halves order the cluster times. */
            uint32_t t = (uint32_t)cluster_time(rel, i, nlen);
            if (!bit_get(b->seen_now, f) || t < b->cluster_first[f]) {
                b->cluster_first[f] = t;
                if (b->cluster_epoch)
                    b->cluster_epoch[f] = rel;
            }
            bit_set(b->seen_now, f);
        }
    }
    if (fep ? c != 255 : (c & PACKED_MAX) != PACKED_MAX)
        cnt[f] = (uint8_t)(c + 1);
    if (local) {
        p->count[f]++;
        if (p->first_use[f] == CFS_POS_NEVER)
            p->first_use[f] = pos;
        p->epochs_read[(size_t)f * p->bm_bytes + rel / 8] |= (uint8_t)(1u << (rel % 8));
    }
}

static int out_of_range(uint32_t e, uint32_t f, uint64_t n, char *err, size_t errlen)
{
    return cfs_error_msg(err, errlen, -ERANGE, "planner: epoch %u reads index %u of %llu", e, f,
                         (unsigned long long)n);
}

/* Count one run of node j's reads, in stream order; the run starts at read
 * `at` of the node's epoch stream of nlen reads.  The counter loads are
 * cache misses: prefetching PF_AHEAD reads ahead lets them overlap. */
#define PF_AHEAD 16

static int count_run(struct cfs_plan *p, struct plan_build *b, uint32_t j, uint32_t e, uint32_t rel,
                     const uint32_t *fs, uint64_t nf, uint64_t at, uint64_t nlen, uint64_t *pos,
                     char *err, size_t errlen)
{
    const uint64_t n = p->n;
    uint8_t *cnt = b->cnt + (size_t)j * n, *fep = b->fep ? b->fep + (size_t)j * n : NULL;
    const bool local = j == p->node;
    for (uint64_t i = 0; i < nf && i < PF_AHEAD; i++)
        if (fs[i] < n)
            __builtin_prefetch(&cnt[fs[i]], 1);
    for (uint64_t i = 0; i < nf; i++) {
        if (i + PF_AHEAD < nf) {
            uint32_t g = fs[i + PF_AHEAD];
            if (g < n) {
                __builtin_prefetch(&cnt[g], 1);
                if (local) {
                    __builtin_prefetch(&p->count[g], 1);
                    __builtin_prefetch(&p->first_use[g], 1);
                    __builtin_prefetch(&p->epochs_read[(size_t)g * p->bm_bytes + rel / 8], 1);
                }
            }
        }
        if (fs[i] >= n)
            return out_of_range(e, fs[i], n, err, errlen);
        count_read(p, b, cnt, fep, rel, local, fs[i], at + i, nlen, *pos + i);
    }
    if (local)
        *pos += nf;
    return 0;
}

/* A node's epoch stream partitioned by file range: block k holds the reads
 * of files [k << BLOCK_SHIFT, (k + 1) << BLOCK_SHIFT), whose records (2
 * bytes a file; the planned node's arrays, about 30) fit in the cache. */
#define BLOCK_SHIFT 16

struct partition {
    uint32_t *file, *index; /* the reads, block after block, and their place */
    uint64_t cap;
    uint64_t *start;        /* per block, then one past the last */
    uint64_t nblocks;
};

/* Count node j's whole epoch stream fs[0..nlen), block by block. */
static int count_stream(struct cfs_plan *p, struct plan_build *b, struct partition *pt, uint32_t j,
                        uint32_t e, uint32_t rel, const uint32_t *fs, uint64_t nlen, uint64_t *pos,
                        char *err, size_t errlen)
{
    const uint64_t n = p->n;
    if (pt->nblocks < 2 || nlen > UINT32_MAX) /* one block: nothing to gain */
        return count_run(p, b, j, e, rel, fs, nlen, 0, nlen, pos, err, errlen);
    if (nlen > pt->cap) {
        uint32_t *nf = realloc(pt->file, nlen * sizeof(*nf));
        if (nf)
            pt->file = nf;
        uint32_t *ni = nf ? realloc(pt->index, nlen * sizeof(*ni)) : NULL;
        if (!ni)
            return cfs_error_msg(err, errlen, -ENOMEM, "planner: %s", strerror(ENOMEM));
        pt->index = ni;
        pt->cap = nlen;
    }
    memset(pt->start, 0, (pt->nblocks + 1) * sizeof(*pt->start));
    for (uint64_t i = 0; i < nlen; i++) {
        if (fs[i] >= n)
            return out_of_range(e, fs[i], n, err, errlen);
        pt->start[(fs[i] >> BLOCK_SHIFT) + 1]++;
    }
    for (uint64_t k = 1; k <= pt->nblocks; k++)
        pt->start[k] += pt->start[k - 1];
    for (uint64_t i = 0; i < nlen; i++) {
        uint64_t at = pt->start[fs[i] >> BLOCK_SHIFT]++;
        pt->file[at] = fs[i];
        pt->index[at] = (uint32_t)i;
    }
    uint8_t *cnt = b->cnt + (size_t)j * n, *fep = b->fep ? b->fep + (size_t)j * n : NULL;
    const bool local = j == p->node;
    for (uint64_t at = 0; at < nlen; at++)
        count_read(p, b, cnt, fep, rel, local, pt->file[at], pt->index[at], nlen,
                   *pos + pt->index[at]);
    if (local)
        *pos += nlen;
    return 0;
}

/* torch-ddp through the default source: rank r's s-th read is
 * order[(r + s*W) % len], so the node streams of step s are runs of row s.
 * Reading the rows in order and scattering each node's run into its own
 * stream (out, offsets off[j]) is one sequential pass over the epoch; the
 * per-node strided walks it replaces missed the cache on nearly every row. */
static void split_rows(const struct cfs_plan *p, const struct epoch_view *v, const uint64_t *len,
                       uint64_t maxlen, uint32_t *out, uint64_t *at)
{
    for (uint64_t s = 0; s < maxlen; s++) {
        uint64_t row = s * v->stride;
        for (uint32_t j = 0; j < p->nodes; j++) {
            struct cfs_rank_range rr = p->ranks[j];
            uint32_t *o = out + at[j];
            uint32_t k = 0;
            for (uint32_t l = 0; l < rr.count; l++) {
                uint32_t r = rr.first + l;
                if (s < len[r]) {
                    uint64_t q = row + r * v->rank_step;
                    o[k++] = v->order[q < v->len ? q : q % v->len];
                }
            }
            at[j] += k;
        }
    }
}

int plan_sweep(struct cfs_plan *p, struct plan_build *b, void *st, char *err, size_t errlen)
{
    uint32_t blk[SWEEP_BLOCK];
    uint64_t *len = calloc(p->world, sizeof(*len));
    uint64_t *at = calloc(p->nodes, sizeof(*at));
    uint64_t *nlen = calloc(p->nodes, sizeof(*nlen));
    uint32_t *streams = NULL;
    uint64_t streams_cap = 0;
    struct partition pt = {.nblocks = (p->n >> BLOCK_SHIFT) + 1};
    pt.start = calloc(pt.nblocks + 1, sizeof(*pt.start));
    int rc = -ENOMEM;
    if (!len || !at || !nlen || !pt.start) {
        cfs_error_msg(err, errlen, rc, "planner: %s", strerror(-rc));
        goto out;
    }
    rc = 0;
    uint64_t pos = 0;
    for (uint32_t rel = 0; rel < p->nepochs; rel++) {
        uint32_t e = p->start_epoch + rel;
        rc = p->src->compute_epoch(st, e);
        if (rc < 0) {
            cfs_error_msg(err, errlen, rc, "planner: cannot compute epoch %u: %s", e,
                          strerror(-rc));
            goto out;
        }
        for (uint32_t r = 0; r < p->world; r++)
            len[r] = p->src->rank_len(st, e, r);
        /* The default source's torch models: read the epoch's array
         * directly, without a call (and torch-ddp's modulo) per read. */
        struct epoch_view v = {0};
        if (p->src == &p->src_buf &&
            cfs_sampler_epoch_order(st, &v.order, &v.len, &v.rank_step, &v.stride) < 0)
            v.order = NULL;
        p->epoch_start[rel] = pos;
        uint64_t total = 0, maxall = 0;
        for (uint32_t j = 0; j < p->nodes; j++) {
            struct cfs_rank_range rr = p->ranks[j];
            nlen[j] = 0;
            for (uint32_t l = 0; l < rr.count; l++) {
                nlen[j] += len[rr.first + l];
                maxall = len[rr.first + l] > maxall ? len[rr.first + l] : maxall;
            }
            at[j] = total;
            total += nlen[j];
        }
        /* Only torch-ddp splits (its node streams together are one epoch;
         * torch's ranks each read all n, W times the memory); an empty epoch
         * has no streams to split (and no buffer yet). */
        if (v.order && v.rank_step == 1 && total > 0) {
            if (total > streams_cap) {
                uint32_t *ns = realloc(streams, total * sizeof(*streams));
                if (!ns) {
                    rc = cfs_error_msg(err, errlen, -ENOMEM, "planner: %s", strerror(ENOMEM));
                    goto out;
                }
                streams = ns;
                streams_cap = total;
            }
            split_rows(p, &v, len, maxall, streams, at);
            for (uint32_t j = 0; j < p->nodes; j++) {
                rc = count_stream(p, b, &pt, j, e, rel, streams + at[j] - nlen[j], nlen[j],
                                  &pos, err, errlen);
                if (rc < 0)
                    goto out;
            }
            memcpy(b->seen_before, b->seen_now, b->held_words * sizeof(uint64_t));
            continue;
        }
        for (uint32_t j = 0; j < p->nodes; j++) {
            struct cfs_rank_range rr = p->ranks[j];
            uint64_t maxlen = 0;
            for (uint32_t l = 0; l < rr.count; l++)
                maxlen = len[rr.first + l] > maxlen ? len[rr.first + l] : maxlen;
            /* Gather a block of the node's reads in lockstep order. */
            uint64_t s = 0, done = 0;
            uint32_t l = 0;
            while (s < maxlen) {
                uint32_t nb = 0;
                while (nb < SWEEP_BLOCK && s < maxlen) {
                    uint32_t r = rr.first + l;
                    if (s < len[r]) {
                        if (v.order) {
                            uint64_t q = r * v.rank_step + s * v.stride;
                            blk[nb++] = v.order[q < v.len ? q : q % v.len];
                        } else {
                            blk[nb++] = p->src->rank_at(st, r, s);
                        }
                    }
                    if (++l == rr.count) {
                        l = 0;
                        s++;
                    }
                }
                rc = count_run(p, b, j, e, rel, blk, nb, done, nlen[j], &pos, err, errlen);
                if (rc < 0)
                    goto out;
                done += nb;
            }
        }
        memcpy(b->seen_before, b->seen_now, b->held_words * sizeof(uint64_t));
    }
    p->epoch_start[p->nepochs] = pos;
out:
    free(len);
    free(at);
    free(nlen);
    free(streams);
    free(pt.file);
    free(pt.index);
    free(pt.start);
    return rc;
}
