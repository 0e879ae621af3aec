/* The planner's sweep: every node's reads of every epoch, counted.
 *
 * This is the planner's cost at scale.  Each epoch is one permutation of
 * the dataset (the sampler's), split into the nodes' streams, and every
 * read counts in its node's record of the file.  A node keeps records of
 * the files it reads only (plan_i.h), in file order: with 16 nodes and a
 * window of 4 epochs a node reads a fifth of ImageNet-22k, and a record
 * for every file on every node made the passes after the sweep cost nodes
 * x files.  A node's epoch stream (torch-ddp: all of it; other sources in
 * runs of up to a dataset's length) is therefore sorted by file, stably,
 * and merged into its records in one sequential pass: the reads of a file
 * meet in stream order, and everything a read updates is a count or a
 * minimum over the stream's order (the first read is the one at the lowest
 * position), so the records are those of the stream order.  The sort is a
 * radix sort of two passes of 12 bits up to 16 M files, which streams
 * where counting in stream order missed the cache on nearly every read.
 * A node that may read a third of the files or more keeps dense records
 * (plan_i.h), counted in place: in file order from a torch-ddp node's
 * sorted stream, in stream order from a source's runs, which cost more to
 * sort than to count. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "plan_i.h"

/* rank r's s-th read is order[(r * rank_step + s * stride) % len]. */
struct epoch_view {
    const uint32_t *order;
    uint64_t len, rank_step, stride;
};

/* The sweep's buffers: a run of reads sorted by file (each the file in the
 * high half, its place in the run in the low: one array to scatter, not
 * two, a third faster), the radix sort's other half, the run gathered from
 * a source, and the spare records a merge writes (then swapped with the
 * node's). */
struct sweep_scratch {
    uint64_t *read, *read2;
    uint64_t cap;
    uint32_t *run;
    uint64_t run_cap;
    struct node_records spare;
    uint64_t *bucket; /* 1 << DIGIT_MAX */
    unsigned bits;    /* of the largest file index */
};

#define DIGIT_MAX 12

static int out_of_range(uint32_t e, uint32_t f, uint64_t n, char *err, size_t errlen)
{
    return cfs_error_msg(err, errlen, -ERANGE, "planner: epoch %u reads index %u of %llu", e, f,
                         (unsigned long long)n);
}

static int grow(void **a, uint64_t count, size_t size)
{
    void *q = realloc(*a, count * size + 1);
    if (!q)
        return -ENOMEM;
    *a = q;
    return 0;
}

/* fs[0..m) sorted by file, stably, into s->read (file << 32 | place in
 * fs): LSD radix over the bits of the largest index, in as few passes of
 * at most DIGIT_MAX bits as they take (2 for 16 M files). */
static int sort_run(struct sweep_scratch *s, const uint32_t *fs, uint64_t m)
{
    if (m > s->cap) {
        if (grow((void **)&s->read, m, sizeof(*s->read)) < 0 ||
            grow((void **)&s->read2, m, sizeof(*s->read2)) < 0)
            return -ENOMEM;
        s->cap = m;
    }
    const unsigned passes = (s->bits + DIGIT_MAX - 1) / DIGIT_MAX;
    const unsigned digit = passes ? (s->bits + passes - 1) / passes : 0;
    const uint64_t mask = ((uint64_t)1 << digit) - 1;
    /* Each pass reads one array and writes the other; the first reads fs.
     * An odd number of passes ends in s->read; an even one starts in
     * read2 so that it does too. */
    uint64_t *dst = passes % 2 ? s->read : s->read2;
    const uint64_t *src = NULL;
    for (unsigned k = 0, shift = 32; k < passes; k++, shift += digit) {
        uint64_t *cnt = s->bucket;
        memset(cnt, 0, (mask + 1) * sizeof(*cnt));
        if (src)
            for (uint64_t i = 0; i < m; i++)
                cnt[(src[i] >> shift) & mask]++;
        else
            for (uint64_t i = 0; i < m; i++)
                cnt[(fs[i] >> (shift - 32)) & mask]++;
        uint64_t sum = 0;
        for (uint64_t d = 0; d <= mask; d++) {
            uint64_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        if (src)
            for (uint64_t i = 0; i < m; i++)
                dst[cnt[(src[i] >> shift) & mask]++] = src[i];
        else
            for (uint64_t i = 0; i < m; i++)
                dst[cnt[(fs[i] >> (shift - 32)) & mask]++] = (uint64_t)fs[i] << 32 | i;
        src = dst;
        dst = dst == s->read ? s->read2 : s->read;
    }
    if (passes == 0) /* one file: nothing to sort by */
        for (uint64_t i = 0; i < m; i++)
            s->read[i] = (uint64_t)fs[i] << 32 | i;
    return 0;
}

/* What a run of node j's reads needs besides the reads: the node, the
 * relative epoch, the run's first read in the node's epoch stream of nlen
 * reads, and the planned node's position of the stream's first read. */
struct run_at {
    uint32_t j, rel;
    uint64_t at, nlen, pos;
    bool gathered; /* from count_gathered: runs of at most a dataset */
};

/* One read of file f, the i-th of its node's epoch stream, on the record
 * (*c, *e); the planned node's own arrays too (local) at position pos. */
static inline void count_read(struct cfs_plan *p, struct plan_build *b, uint8_t *c, uint8_t *e,
                              const struct run_at *ra, bool local, uint32_t f, uint64_t i)
{
    const uint32_t rel = ra->rel;
    if (*c == 0) { /* the node's first read of f (a read record counts 1 or more) */
        if (b->packed)
            *c = (uint8_t)(rel << 5); /* rel < PACKED_EPOCHS */
        else
            *e = (uint8_t)(rel > 255 ? 255 : rel);
        /* Epochs are swept in order: only a file nobody read in an
         * earlier epoch can get an earlier cluster time from this node. */
        if (!bit_get(b->seen_before, f)) {
            /* Within an epoch the low halves order the cluster times. */
            uint32_t t = (uint32_t)cluster_time(rel, i, ra->nlen);
            if (!bit_get(b->seen_now, f) || t < b->cluster_first[f]) {
                b->cluster_first[f] = t;
                if (b->cluster_epoch)
                    b->cluster_epoch[f] = rel;
            }
            bit_set(b->seen_now, f);
        }
    }
    if (b->packed ? (*c & PACKED_MAX) != PACKED_MAX : *c != 255)
        (*c)++;
    if (local) {
        p->count[f]++;
        if (p->first_use[f] == CFS_POS_NEVER)
            p->first_use[f] = ra->pos + i;
        p->epochs_read[(size_t)f * p->bm_bytes + rel / 8] |= (uint8_t)(1u << (rel % 8));
    }
}

/* r's records [k0, k) appended to o's at w; the new length. */
static uint64_t copy_records(struct node_records *o, uint64_t w, const struct node_records *r,
                             uint64_t k0, uint64_t k)
{
    if (k == k0)
        return w;
    memcpy(o->file + w, r->file + k0, (k - k0) * sizeof(*o->file));
    memcpy(o->cnt + w, r->cnt + k0, k - k0);
    if (o->fep)
        memcpy(o->fep + w, r->fep + k0, k - k0);
    return w + (k - k0);
}

#define PF_AHEAD 16

/* Node r's records made dense (plan_i.h): a record for every file, in
 * place of the sparse ones. */
static int make_dense(const struct cfs_plan *p, const struct plan_build *b, struct node_records *r)
{
    const uint64_t n = p->n;
    uint8_t *cnt = calloc(n + 1, 1);
    uint8_t *fep = b->packed ? NULL : malloc(n + 1);
    if (!cnt || (!b->packed && !fep)) {
        free(cnt);
        free(fep);
        return -ENOMEM;
    }
    for (uint64_t k = 0; k < r->len; k++) {
        cnt[r->file[k]] = r->cnt[k];
        if (fep)
            fep[r->file[k]] = r->fep[k];
    }
    free(r->file);
    free(r->cnt);
    free(r->fep);
    *r = (struct node_records){.cnt = cnt, .fep = fep, .len = n, .cap = n};
    return 0;
}

/* Node j's run fs[0..m) counted: sorted by file, then merged with the
 * node's records into the spare ones, which become the node's; or counted
 * in place when they are dense, as they become when they might pass a
 * third of the files. */
static int count_run(struct cfs_plan *p, struct plan_build *b, struct sweep_scratch *s,
                     const struct run_at *ra, const uint32_t *fs, uint64_t m)
{
    struct node_records *r = &b->rec[ra->j], *o = &s->spare;
    const bool local = ra->j == p->node;
    if (r->file || r->len == 0) { /* sparse (or none yet) */
        if ((r->len + m) * 3 > p->n && make_dense(p, b, r) < 0)
            return -ENOMEM;
    }
    const bool dense = !r->file && r->len;
    if (dense && ra->gathered) {
        /* A run of a source's reads, as long as the dataset: counted in
         * stream order, the counters loaded ahead, costs less than its
         * sort (a torch-ddp node's whole stream is sorted: its records are
         * then read in order). */
        for (uint64_t x = 0; x < m; x++) {
            if (x + PF_AHEAD < m)
                __builtin_prefetch(&r->cnt[fs[x + PF_AHEAD]], 1);
            count_read(p, b, &r->cnt[fs[x]], r->fep ? &r->fep[fs[x]] : &(uint8_t){0}, ra, local,
                       fs[x], ra->at + x);
        }
        return 0;
    }
    if (sort_run(s, fs, m) < 0)
        return -ENOMEM;
    if (dense) {
        for (uint64_t x = 0; x < m; x++) {
            const uint32_t f = (uint32_t)(s->read[x] >> 32);
            count_read(p, b, &r->cnt[f], r->fep ? &r->fep[f] : &(uint8_t){0}, ra, local, f,
                       ra->at + (uint32_t)s->read[x]);
        }
        return 0;
    }
    if (r->len + m > o->cap) {
        uint64_t cap = r->len + m;
        free(o->file);
        free(o->cnt);
        free(o->fep);
        o->file = malloc(cap * sizeof(*o->file) + 1);
        o->cnt = malloc(cap + 1);
        o->fep = b->packed ? NULL : malloc(cap + 1);
        o->cap = o->file && o->cnt && (b->packed || o->fep) ? cap : 0;
        if (!o->cap)
            return -ENOMEM;
    }
    uint64_t k = 0, w = 0;
    for (uint64_t x = 0; x < m;) {
        const uint32_t f = (uint32_t)(s->read[x] >> 32);
        uint64_t k0 = k; /* the records before f, copied as they are */
        while (k < r->len && r->file[k] < f)
            k++;
        w = copy_records(o, w, r, k0, k);
        uint8_t c = 0, e = 0; /* unread */
        if (k < r->len && r->file[k] == f) {
            c = r->cnt[k];
            e = b->packed ? 0 : r->fep[k];
            k++;
        }
        for (; x < m && (uint32_t)(s->read[x] >> 32) == f; x++)
            count_read(p, b, &c, &e, ra, local, f, ra->at + (uint32_t)s->read[x]);
        o->file[w] = f;
        o->cnt[w] = c;
        if (!b->packed)
            o->fep[w] = e;
        w++;
    }
    w = copy_records(o, w, r, k, r->len);
    struct node_records old = *r;
    *r = (struct node_records){
        .file = o->file, .cnt = o->cnt, .fep = o->fep, .len = w, .cap = o->cap};
    *o = (struct node_records){.file = old.file, .cnt = old.cnt, .fep = old.fep, .cap = old.cap};
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
                uint32_t r = cfs_rank_at(rr, l);
                if (s < len[r]) {
                    uint64_t q = row + r * v->rank_step;
                    o[k++] = v->order[q < v->len ? q : q % v->len];
                }
            }
            at[j] += k;
        }
    }
}

/* Reads fs[0..len) of node ra->j's epoch stream, from its read `base` on,
 * counted in runs of at most s->run_cap reads (a run's places are 32-bit). */
static int count_stream(struct cfs_plan *p, struct plan_build *b, struct sweep_scratch *s,
                        struct run_at *ra, const uint32_t *fs, uint64_t len, uint64_t base,
                        uint32_t e, char *err, size_t errlen)
{
    for (uint64_t done = 0; done < len;) {
        uint64_t m = len - done < s->run_cap ? len - done : s->run_cap;
        for (uint64_t x = 0; x < m; x++)
            if (fs[done + x] >= p->n)
                return out_of_range(e, fs[done + x], p->n, err, errlen);
        ra->at = base + done;
        if (count_run(p, b, s, ra, fs + done, m) < 0)
            return cfs_error_msg(err, errlen, -ENOMEM, "planner: %s", strerror(ENOMEM));
        done += m;
    }
    return 0;
}

/* Node j's reads of an epoch from a source without an epoch array, or a
 * stream not split by rows (torch: every rank reads the whole epoch):
 * gathered in lockstep order a run at a time. */
static int count_gathered(struct cfs_plan *p, struct plan_build *b, struct sweep_scratch *s,
                          struct run_at *ra, void *st, const struct epoch_view *v,
                          const uint64_t *len, uint32_t e, char *err, size_t errlen)
{
    struct cfs_rank_range rr = p->ranks[ra->j];
    uint64_t maxlen = 0;
    for (uint32_t l = 0; l < rr.count; l++)
        maxlen = len[cfs_rank_at(rr, l)] > maxlen ? len[cfs_rank_at(rr, l)] : maxlen;
    uint64_t sidx = 0, done = 0;
    uint32_t l = 0;
    while (sidx < maxlen) {
        uint64_t nb = 0;
        while (nb < s->run_cap && sidx < maxlen) {
            uint32_t r = cfs_rank_at(rr, l);
            if (sidx < len[r]) {
                if (v->order) {
                    uint64_t q = r * v->rank_step + sidx * v->stride;
                    s->run[nb++] = v->order[q < v->len ? q : q % v->len];
                } else {
                    s->run[nb++] = p->src->rank_at(st, r, sidx);
                }
            }
            if (++l == rr.count) {
                l = 0;
                sidx++;
            }
        }
        ra->gathered = true;
        int rc = count_stream(p, b, s, ra, s->run, nb, done, e, err, errlen);
        if (rc < 0)
            return rc;
        done += nb;
    }
    return 0;
}

/* The records cut to their length: a merge leaves up to an epoch's reads
 * of room behind them, written by earlier merges (its arrays were the
 * spare), and the owners' pass is the planner's peak. */
static void shrink_records(const struct cfs_plan *p, struct plan_build *b)
{
    for (uint32_t j = 0; j < p->nodes; j++) {
        struct node_records *r = &b->rec[j];
        void *q;
        if (r->len == r->cap)
            continue;
        if ((q = realloc(r->file, r->len * sizeof(*r->file) + 1)))
            r->file = q;
        if ((q = realloc(r->cnt, r->len + 1)))
            r->cnt = q;
        if (r->fep && (q = realloc(r->fep, r->len + 1)))
            r->fep = q;
        r->cap = r->len;
    }
}

static int scratch_init(const struct cfs_plan *p, struct sweep_scratch *s)
{
    while (s->bits < 32 && (p->n - 1) >> s->bits)
        s->bits++;
    s->run_cap = p->n > (1u << 16) ? p->n : 1u << 16;
    s->bucket = malloc(((size_t)1 << DIGIT_MAX) * sizeof(*s->bucket));
    return s->bucket ? 0 : -ENOMEM;
}

static void scratch_free(struct sweep_scratch *s)
{
    free(s->read);
    free(s->read2);
    free(s->run);
    free(s->spare.file);
    free(s->spare.cnt);
    free(s->spare.fep);
    free(s->bucket);
}

int plan_sweep(struct cfs_plan *p, struct plan_build *b, void *st, char *err, size_t errlen)
{
    uint64_t *len = calloc(p->world, sizeof(*len));
    uint64_t *at = calloc(p->nodes, sizeof(*at));
    uint64_t *nlen = calloc(p->nodes, sizeof(*nlen));
    uint32_t *streams = NULL;
    uint64_t streams_cap = 0;
    struct sweep_scratch s = {0};
    int rc = -ENOMEM;
    if (!len || !at || !nlen || scratch_init(p, &s) < 0) {
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
                uint64_t rl = len[cfs_rank_at(rr, l)];
                nlen[j] += rl;
                maxall = rl > maxall ? rl : maxall;
            }
            at[j] = total;
            total += nlen[j];
        }
        /* Only torch-ddp splits (its node streams together are one epoch;
         * torch's ranks each read all n, W times the memory); an empty epoch
         * has no streams to split (and no buffer yet). */
        const bool split = v.order && v.rank_step == 1 && total > 0;
        if (split) {
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
        } else if (!s.run) {
            s.run = malloc(s.run_cap * sizeof(*s.run));
            if (!s.run) {
                rc = cfs_error_msg(err, errlen, -ENOMEM, "planner: %s", strerror(ENOMEM));
                goto out;
            }
        }
        for (uint32_t j = 0; j < p->nodes; j++) {
            struct run_at ra = {.j = j, .rel = rel, .nlen = nlen[j], .pos = pos};
            if (split)
                rc = count_stream(p, b, &s, &ra, streams + at[j] - nlen[j], nlen[j], 0, e, err,
                                  errlen);
            else
                rc = count_gathered(p, b, &s, &ra, st, &v, len, e, err, errlen);
            if (rc < 0)
                goto out;
            if (j == p->node)
                pos += nlen[j];
        }
        memcpy(b->seen_before, b->seen_now, b->file_words * sizeof(uint64_t));
    }
    p->epoch_start[p->nepochs] = pos;
    shrink_records(p, b);
out:
    free(len);
    free(at);
    free(nlen);
    free(streams);
    scratch_free(&s);
    return rc;
}
