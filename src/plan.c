/* The planner: one sweep over the epochs planned (a window of the run),
 * then the global assignment.  See clairfs/plan.h for the stream, the
 * assignment rule and next use.
 *
 * Why one sweep for all nodes: the sampler's cost is one permutation per
 * epoch, shared by every node, so counting every node's reads in the same
 * pass costs no extra permutations.
 *
 * Why sparse records: a node keeps a record (count and first epoch) of
 * each file it reads in the window and of no other (plan_i.h), so every
 * pass after the sweep (totals and best readers, each node's preference
 * sort and placement, the summaries) costs the records, which are the
 * window's reads at most, and not nodes x files: at 16 nodes of
 * ImageNet-22k a node reads a fifth of the files in a window of 4 epochs,
 * at 64 nodes a tenth in 6.  Each node's records are in file order, so
 * the passes that look at every node's record of a file walk all nodes'
 * records beside each other a block of files at a time.  These records
 * live only while the plan is built; what stays is a few bytes per file
 * for the planned node plus the owner map.
 *
 * Why a window of epochs (run_config.h), not the run: the sweep costs
 * every node's reads of every epoch planned, and the records grow with
 * them, so a 90-epoch plan of ImageNet-22k took 44 CPU s and 1.6 GB.  A
 * plan's decisions look ahead only as far as they need: Belady's evicts
 * first what is read farthest ahead, and a file the window does not read
 * again is farther than any it does; once a node reads twice its tiers in
 * distinct bytes within the window, such files are always at hand, and the
 * evictions inside the window are the whole run's but for which of them
 * goes first.  What a window changes is the frequency ranking of the
 * replicas and owners (counted over the window: on one node every file is
 * read once an epoch and the ranking falls to the first read anyway).
 * The next window is planned from the last epoch of this one, and keeps
 * the owners of the epoch the two share (plan_owners.c). */
#include "clairfs/plan.h"

#include "clairfs/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_i.h"

/* --- The default source: cfs_sampler. --- */

static int sampler_create(const void *cfg, void **state, char *err, size_t errlen)
{
    return cfs_sampler_create(cfg, (struct cfs_sampler **)state, err, errlen);
}
static void sampler_destroy(void *st)
{
    cfs_sampler_destroy(st);
}
static uint64_t sampler_rank_len(void *st, uint32_t e, uint32_t r)
{
    return cfs_sampler_rank_len(st, e, r);
}
static int sampler_compute(void *st, uint32_t e)
{
    return cfs_sampler_compute_epoch(st, e);
}
static uint32_t sampler_at(void *st, uint32_t r, uint64_t i)
{
    return cfs_sampler_rank_at(st, r, i);
}

const struct cfs_plan_source *plan_source(const struct cfs_plan_params *pp,
                                          struct cfs_plan_source *buf)
{
    if (pp->source)
        return pp->source;
    *buf = (struct cfs_plan_source){
        .create = sampler_create,
        .destroy = sampler_destroy,
        .rank_len = sampler_rank_len,
        .compute_epoch = sampler_compute,
        .rank_at = sampler_at,
        .cfg = &pp->sampler,
    };
    return buf;
}

void cfs_plan_default_ranks(uint32_t world, uint32_t nodes, uint32_t node,
                            struct cfs_rank_range *out)
{
    uint32_t base = world / nodes, extra = world % nodes;
    out->count = base + (node < extra);
    out->first = node * base + (node < extra ? node : extra);
}

/* --- Sorting (key, id) pairs by the low `bits` bits of key: LSD radix with
 * byte digits (256 buckets keep the scatter cache-friendly); stable, so
 * equal keys stay in index order, and a 64-bit key sorts as its low half
 * then its high half.  Keys are 32-bit: at ImageNet-22k scale (14.2 M
 * files) each key byte costs 14 MB twice over. --- */

static int radix_sort(uint32_t *key, uint32_t *id, uint64_t n, unsigned bits)
{
    uint32_t *k2 = malloc(n * sizeof(*k2) + 1);
    uint32_t *i2 = malloc(n * sizeof(*i2) + 1);
    int rc = -ENOMEM;
    if (!k2 || !i2)
        goto out;
    for (unsigned shift = 0; shift < bits; shift += 8) {
        uint64_t cnt[256] = {0};
        for (uint64_t i = 0; i < n; i++)
            cnt[(key[i] >> shift) & 0xFF]++;
        if (cnt[(n ? key[0] >> shift : 0) & 0xFF] == n)
            continue; /* one digit value: nothing moves */
        uint64_t sum = 0;
        for (unsigned d = 0; d < 256; d++) {
            uint64_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++) {
            uint64_t at = cnt[(key[i] >> shift) & 0xFF]++;
            k2[at] = key[i];
            i2[at] = id[i];
        }
        memcpy(key, k2, n * sizeof(*key));
        memcpy(id, i2, n * sizeof(*id));
    }
    rc = 0;
out:
    free(k2);
    free(i2);
    return rc;
}

/* --- Building (the sweep is plan_sweep.c). --- */

struct room {
    uint64_t ram, ssd;
};

static uint8_t place(struct room *r, uint64_t sz)
{
    if (sz <= r->ram) {
        r->ram -= sz;
        return CFS_TIER_RAM;
    }
    if (sz <= r->ssd) {
        r->ssd -= sz;
        return CFS_TIER_SSD;
    }
    return CFS_TIER_NONE;
}

/* The owned files grouped by owner (b->by_owner), in index order within a
 * group: one pass over the owner map for all nodes, so that each node's
 * placement finds its own files without reading the owner of every file. */
static int group_by_owner(const struct cfs_plan *p, struct plan_build *b)
{
    const uint64_t n = p->n;
    b->owned_start = calloc((size_t)p->nodes + 1, sizeof(*b->owned_start));
    if (!b->owned_start)
        return -ENOMEM;
    b->by_owner = b->key; /* free until the prefetch orders */
    for (uint64_t f = 0; f < n; f++)
        if (p->owner[f] != CFS_NODE_NONE)
            b->owned_start[p->owner[f] + 1]++;
    uint64_t most = 0; /* one node's owned files, sorted, go apart */
    for (uint32_t j = 0; j < p->nodes; j++) {
        uint64_t c = b->owned_start[j + 1];
        most = c > most ? c : most;
        b->owned_start[j + 1] += b->owned_start[j];
    }
    b->owned = malloc(most * sizeof(*b->owned) + 1);
    b->owned_rec = malloc(2 * most * sizeof(*b->owned_rec) + 1);
    b->owned_most = most;
    if (!b->owned || !b->owned_rec)
        return -ENOMEM;
    uint64_t *at = b->free_room; /* free once the owners are chosen */
    memcpy(at, b->owned_start, p->nodes * sizeof(*at));
    for (uint64_t f = 0; f < n; f++)
        if (p->owner[f] != CFS_NODE_NONE)
            b->by_owner[at[p->owner[f]]++] = (uint32_t)f;
    return 0;
}

/* Node j's records in its order of preference, equal ones by index, into
 * ids (record numbers, *m of them); its owned files into owned
 * (*mo) with its record of each in owned_rec: those it reads in the same
 * order, then those it never reads, by index.  Counting sorts on the
 * 16-bit preference: two passes over the node's records, and two over its
 * owned files (b->by_owner) beside them, both in file order, so that the
 * placement does not look up the owner of every file the node reads. */
static int sort_by_pref(struct plan_build *b, uint32_t j, uint32_t *ids, uint64_t *m, uint64_t *mo)
{
    const struct node_records *r = &b->rec[j];
    const uint32_t keys = 1u << 16;
    const uint32_t *mine = b->by_owner + b->owned_start[j];
    const uint64_t nmine = b->owned_start[j + 1] - b->owned_start[j];
    uint64_t *start = calloc(2 * (size_t)keys, sizeof(*start));
    if (!start)
        return -ENOMEM;
    uint64_t *own_start = start + keys;
    uint32_t *unsorted = b->owned_rec + b->owned_most; /* each owned file's record */
    for (uint64_t k = 0; k < r->len; k++)
        if (r->cnt[k])
            start[pref(rv(r, k))]++;
    /* Each owned file's record, by a walk beside the records. */
    for (uint64_t i = 0, k = 0; i < nmine; i++) {
        if (!r->file)
            k = mine[i]; /* dense */
        while (k < r->len && rec_file(r, k) < mine[i])
            k++;
        unsorted[i] =
            k < r->len && rec_file(r, k) == mine[i] && r->cnt[k] ? (uint32_t)k : NO_RECORD;
        if (unsorted[i] != NO_RECORD)
            own_start[pref(rv(r, k))]++;
    }
    uint64_t sum = 0, own_sum = 0;
    for (uint32_t k = 0; k < keys; k++) {
        uint64_t c = start[k], oc = own_start[k];
        start[k] = sum;
        own_start[k] = own_sum;
        sum += c;
        own_sum += oc;
    }
    *m = sum;
    for (uint64_t k = 0; k < r->len; k++)
        if (r->cnt[k])
            ids[start[pref(rv(r, k))]++] = (uint32_t)k;
    uint64_t unread = own_sum;
    for (uint64_t i = 0; i < nmine; i++) {
        uint32_t k = unsorted[i];
        uint64_t at = k != NO_RECORD ? own_start[pref(rv(r, k))]++ : unread++;
        b->owned[at] = mine[i];
        b->owned_rec[at] = k;
    }
    *mo = unread;
    free(start);
    return 0;
}

/* Reads ahead whose size is loaded early: a node that reads a large
 * dataset passes over most of its files once its tiers are nearly full, and
 * each is a cache miss on the sizes. */
#define SIZE_AHEAD 16

/* The file of the i-th of node r's records in ids, with what a later round
 * reads loaded early: the file number of a record 2 * SIZE_AHEAD on, and
 * the size and per-file byte (owner or static pinners) of the one
 * SIZE_AHEAD on, all at random since the records come in preference order. */
static inline uint32_t file_ahead(const struct cfs_plan *p, const struct node_records *r,
                                  const uint32_t *ids, uint64_t i, uint64_t m, const void *also,
                                  size_t also_size)
{
    if (r->file && i + 2 * SIZE_AHEAD < m)
        __builtin_prefetch(&r->file[ids[i + 2 * SIZE_AHEAD]]);
    if (i + SIZE_AHEAD < m) {
        uint32_t g = rec_file(r, ids[i + SIZE_AHEAD]);
        __builtin_prefetch(&p->sizes[g]);
        __builtin_prefetch((const char *)also + (size_t)g * also_size);
    }
    return rec_file(r, ids[i]);
}

/* One node's holdings: owned files, then replicas, in its order of
 * preference; and its NoPFS static set for the simulator. */
static int place_node(struct cfs_plan *p, struct plan_build *b, uint32_t j)
{
    struct node_records *r = &b->rec[j];
    uint64_t mr = 0, mo = 0;
    const uint32_t *owned = b->owned, *ids = b->ids;
    r->held = calloc(r->len / 64 + 1, sizeof(*r->held));
    if (!r->held)
        return -ENOMEM;
    int rc = sort_by_pref(b, j, b->ids, &mr, &mo);
    if (rc < 0)
        return rc;

    struct room room = {p->ram, p->ssd};
    for (uint64_t i = 0; i < mo; i++) {
        uint32_t f = owned[i];
        uint8_t t = place(&room, p->sizes[f]);
        if (t == CFS_TIER_NONE) { /* the two tiers fragment: give the file up */
            p->owner[f] = CFS_NODE_NONE;
            continue;
        }
        p->owner_tier[f] = t;
        if (j == p->node) {
            uint32_t k = b->owned_rec[i];
            p->tier[f] = t;
            if (b->total[f] > (k == NO_RECORD ? 0 : rec_count(r, k)))
                p->flags[f] |= PLAN_PEER_PINNED;
        }
    }
    for (uint64_t i = 0; i < mr; i++) {
        if (room.ram < b->min_size && room.ssd < b->min_size)
            break; /* nothing more fits */
        uint32_t f = file_ahead(p, r, ids, i, mr, p->owner, sizeof(*p->owner));
        if (p->owner[f] == j)
            continue;
        uint8_t t = place(&room, p->sizes[f]);
        if (t == CFS_TIER_NONE)
            continue;
        bit_set(r->held, ids[i]);
        if (j == p->node)
            p->tier[f] = t;
    }

    /* NoPFS: the node's most-read files up to its capacity, no coordination. */
    uint64_t left = p->ram + p->ssd;
    for (uint64_t i = 0; i < mr && left >= b->min_size; i++) {
        uint32_t f = file_ahead(p, r, ids, i, mr, p->static_pinners, sizeof(*p->static_pinners));
        if (p->sizes[f] > left)
            continue;
        left -= p->sizes[f];
        if (p->static_pinners[f] != UINT16_MAX)
            p->static_pinners[f]++;
        if (rec_epoch(r, ids[i]) < p->static_epoch[f])
            p->static_epoch[f] = (uint8_t)rec_epoch(r, ids[i]);
        if (j == p->node)
            p->flags[f] |= PLAN_STATIC;
    }
    return 0;
}

/* File f in node j's summary: c reads, held or not. */
static void summarise_file(struct cfs_plan *p, uint32_t j, uint32_t f, bool held, uint64_t c)
{
    struct cfs_plan_node_summary *s = &p->summary[j];
    const uint64_t sz = p->sizes[f];
    const uint32_t o = p->owner[f];
    bool remote = o != CFS_NODE_NONE && o != j;
    if (held) {
        uint8_t t = o == j ? p->owner_tier[f] : CFS_TIER_NONE;
        if (j == p->node)
            t = p->tier[f];
        else if (t == CFS_TIER_NONE)
            t = CFS_TIER_RAM; /* replicas' tier is not kept for other nodes */
        s->files[t]++;
        s->bytes[t] += sz;
        /* The first fetch, then every read is local. */
        if (remote)
            s->peer_read_bytes += sz;
        else
            s->pfs_read_bytes += sz;
        if (c)
            s->local_read_bytes += (c - 1) * sz;
    } else {
        s->files[CFS_TIER_NONE]++;
        s->bytes[CFS_TIER_NONE] += sz;
        if (remote)
            s->peer_read_bytes += c * sz;
        else
            s->pfs_read_bytes += c * sz;
    }
    s->reads += c;
    s->read_bytes += c * sz;
}

/* Every node's summary: the files each reads (its records) or owns (its
 * group of b->by_owner, which still holds the files it gave up).  Block by
 * block of files, node by node within a block, each from where the last
 * block left it: a file's size, owner and tiers stay in the cache for all
 * nodes (16 passes over them at 16 nodes were a tenth of a 14.2 M-file
 * plan), and a node costs nothing where it neither reads nor holds. */
enum { SUMMARY_BLOCK = 4096 };

static int summarise(struct cfs_plan *p, struct plan_build *b)
{
    const uint64_t n = p->n;
    uint64_t *next = calloc(2 * (size_t)p->nodes, sizeof(*next)); /* records, owned */
    if (!next)
        return -ENOMEM;
    for (uint32_t j = 0; j < p->nodes; j++) {
        memset(&p->summary[j], 0, sizeof(p->summary[j]));
        p->summary[j].ranks = p->ranks[j];
    }
    for (uint64_t f = 0; f < n; f++) {
        const uint32_t o = p->owner[f];
        if (o != CFS_NODE_NONE) {
            p->summary[o].owned_files++;
            p->summary[o].owned_bytes += p->sizes[f];
        }
    }
    for (uint64_t f0 = 0; f0 < n; f0 += SUMMARY_BLOCK) {
        const uint64_t f1 = n - f0 < SUMMARY_BLOCK ? n : f0 + SUMMARY_BLOCK;
        for (uint32_t j = 0; j < p->nodes; j++) {
            const struct node_records *r = &b->rec[j];
            const uint32_t *mine = b->by_owner + b->owned_start[j];
            const uint64_t nmine = b->owned_start[j + 1] - b->owned_start[j];
            uint64_t k = next[j], q = next[p->nodes + j];
            for (;;) {
                while (k < r->len && !r->cnt[k])
                    k++; /* dense, unread */
                uint32_t fr = k < r->len && rec_file(r, k) < f1 ? rec_file(r, k) : UINT32_MAX;
                uint32_t fo = q < nmine && mine[q] < f1 ? mine[q] : UINT32_MAX;
                if (fr == UINT32_MAX && fo == UINT32_MAX)
                    break;
                if (fr <= fo) { /* read, and perhaps owned */
                    q += fo == fr;
                    bool held = p->owner[fr] == j || bit_get(r->held, k);
                    summarise_file(p, j, fr, held, j == p->node ? p->count[fr] : rec_count(r, k));
                    k++;
                } else { /* owned, not read: held unless given up */
                    q++;
                    if (p->owner[fo] == j)
                        summarise_file(p, j, fo, true, j == p->node ? p->count[fo] : 0);
                }
            }
            next[j] = k;
            next[p->nodes + j] = q;
        }
    }
    free(next);
    return 0;
}

static int validate(const struct cfs_plan_params *pp, char *err, size_t errlen)
{
    if (pp->world == 0)
        return cfs_error_msg(err, errlen, -EINVAL, "option world=0: must be at least 1");
    if (pp->nodes == 0 || pp->node >= pp->nodes)
        return cfs_error_msg(err, errlen, -EINVAL, "node %u of %u: must be below the node count",
                             pp->node, pp->nodes);
    if (pp->epochs <= pp->start_epoch)
        return cfs_error_msg(err, errlen, -EINVAL, "option start_epoch=%u: must be below epochs=%u",
                             pp->start_epoch, pp->epochs);
    if (pp->n > UINT32_MAX - 1)
        return cfs_error_msg(err, errlen, -EOVERFLOW, "planner: %llu samples is too many",
                             (unsigned long long)pp->n);
    if (pp->ranks)
        for (uint32_t j = 0; j < pp->nodes; j++)
            if (cfs_rank_end(pp->ranks[j]) > pp->world)
                return cfs_error_msg(err, errlen, -EINVAL,
                                     "option ranks=%u-%u: ranks must be within 0..%u (world=%u)",
                                     pp->ranks[j].first, (uint32_t)cfs_rank_end(pp->ranks[j]) - 1,
                                     pp->world - 1, pp->world);
    return 0;
}

/* The planned node's first read of f in cluster time, from its position:
 * rel is the epoch whose stream holds it, len that stream's length. */
static uint64_t local_cluster_time(const struct cfs_plan *p, uint64_t pos)
{
    if (pos == CFS_POS_NEVER)
        return CFS_POS_NEVER;
    uint32_t lo = 0, hi = p->nepochs; /* epoch_start[lo] <= pos < epoch_start[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->epoch_start[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t start = p->epoch_start[lo];
    return cluster_time(lo, pos - start, p->epoch_start[lo + 1] - start);
}

/* The time a tier's file is wanted by: an owned file's first read by any
 * node, another file's first read by this node. */
static uint64_t first_time(const struct cfs_plan *p, const struct plan_build *b, uint32_t f)
{
    if (p->owner[f] != p->node)
        return local_cluster_time(p, p->first_use[f]);
    if (!p->total_count[f])
        return CFS_POS_NEVER;
    uint64_t rel = b->cluster_epoch ? b->cluster_epoch[f] : p->owner_epoch[f];
    return rel << 32 | b->cluster_first[f];
}

/* The prefetch order of each tier, in cluster time: an owned file by the
 * first read of any node (its peers ask for it from then on, whether or not
 * this node reads it sooner), any other by this node's first read; the
 * files nobody reads last, by index. */
static int prefetch_orders(struct cfs_plan *p, struct plan_build *b)
{
    const uint64_t n = p->n;
    for (int t = CFS_TIER_RAM; t <= CFS_TIER_SSD; t++) {
        uint64_t m = 0;
        for (uint64_t f = 0; f < n; f++)
            if (p->tier[f] == t)
                m++;
        p->order[t] = malloc(m * sizeof(uint32_t) + 1);
        if (!p->order[t])
            return -ENOMEM;
        uint64_t k = 0;
        for (uint64_t f = 0; f < n; f++)
            if (p->tier[f] == t) {
                b->key[k] = (uint32_t)first_time(p, b, (uint32_t)f);
                b->ids[k++] = (uint32_t)f;
            }
        int rc = radix_sort(b->key, b->ids, m, 32);
        for (uint64_t i = 0; rc == 0 && i < m; i++)
            b->key[i] = (uint32_t)(first_time(p, b, b->ids[i]) >> 32);
        if (rc == 0)
            rc = radix_sort(b->key, b->ids, m, 32);
        if (rc < 0)
            return rc;
        memcpy(p->order[t], b->ids, m * sizeof(uint32_t));
        p->order_len[t] = m;
    }
    return 0;
}

/* The plan's own arrays, each file's facts at "none", and each node's ranks. */
static int plan_arrays(struct cfs_plan *p, const struct cfs_plan_params *pp)
{
    const uint64_t n = p->n;
    p->ranks = calloc(p->nodes, sizeof(*p->ranks));
    p->summary = calloc(p->nodes, sizeof(*p->summary));
    p->epoch_start = calloc(p->nepochs + 1, sizeof(*p->epoch_start));
    p->count = calloc(n + 1, sizeof(*p->count));
    p->first_use = malloc(n * sizeof(*p->first_use) + 1);
    p->epochs_read = calloc(n * p->bm_bytes + 1, 1);
    p->tier = malloc(n + 1);
    p->flags = calloc(n + 1, 1);
    p->owner = malloc(n * sizeof(*p->owner) + 1);
    p->owner_tier = malloc(n + 1);
    p->owner_epoch = calloc(n + 1, sizeof(*p->owner_epoch));
    p->static_pinners = calloc(n + 1, sizeof(*p->static_pinners));
    p->static_epoch = malloc(n * sizeof(*p->static_epoch) + 1);
    if (!p->ranks || !p->summary || !p->epoch_start || !p->count || !p->first_use ||
        !p->epochs_read || !p->tier || !p->flags || !p->owner || !p->owner_tier ||
        !p->owner_epoch || !p->static_pinners || !p->static_epoch)
        return -ENOMEM;
    p->sizes = pp->sizes;
    memset(p->tier, CFS_TIER_NONE, n + 1);
    memset(p->owner_tier, CFS_TIER_NONE, n + 1);
    for (uint64_t f = 0; f < n; f++) {
        p->first_use[f] = CFS_POS_NEVER;
        p->owner[f] = CFS_NODE_NONE;
        p->static_epoch[f] = UINT8_MAX;
        p->dataset_bytes += p->sizes[f];
    }
    for (uint32_t j = 0; j < p->nodes; j++) {
        if (pp->ranks)
            p->ranks[j] = pp->ranks[j];
        else
            cfs_plan_default_ranks(p->world, p->nodes, j, &p->ranks[j]);
    }
    return 0;
}

/* The build's scratch arrays (freed by cfs_plan_create's exit) and the
 * dataset's smallest and largest file. */
static int build_arrays(const struct cfs_plan *p, struct plan_build *b)
{
    const uint64_t n = p->n;
    b->rec = calloc(p->nodes, sizeof(*b->rec));
    b->packed = p->nepochs <= PACKED_EPOCHS;
    b->total = calloc(n + 1, sizeof(*b->total));
    b->best = malloc(n * sizeof(*b->best) + 1);
    b->key = malloc(n * sizeof(*b->key) + 1);
    b->ids = malloc(n * sizeof(*b->ids) + 1);
    b->free_room = calloc(p->nodes, sizeof(*b->free_room));
    b->file_words = (n + 63) / 64;
    b->cluster_first = malloc(n * sizeof(*b->cluster_first) + 1);
    if (p->nepochs > CLUSTER_EPOCHS_IMPLIED)
        b->cluster_epoch = malloc(n * sizeof(*b->cluster_epoch) + 1);
    b->seen_before = calloc(b->file_words + 1, sizeof(*b->seen_before));
    b->seen_now = calloc(b->file_words + 1, sizeof(*b->seen_now));
    if (!b->rec || !b->total || !b->best || !b->key || !b->ids || !b->free_room ||
        !b->cluster_first || !b->seen_before || !b->seen_now ||
        (!b->cluster_epoch && p->nepochs > CLUSTER_EPOCHS_IMPLIED))
        return -ENOMEM;

    b->min_size = UINT64_MAX;
    for (uint64_t f = 0; f < n; f++) {
        b->min_size = p->sizes[f] < b->min_size ? p->sizes[f] : b->min_size;
        b->max_size = p->sizes[f] > b->max_size ? p->sizes[f] : b->max_size;
    }
    return 0;
}

/* The nodes' records, freed (b->rec itself stays, empty, till the end). */
static void free_records(uint32_t nodes, struct plan_build *b)
{
    for (uint32_t j = 0; b->rec && j < nodes; j++) {
        free(b->rec[j].file);
        free(b->rec[j].cnt);
        free(b->rec[j].fep);
        free(b->rec[j].held);
        b->rec[j] = (struct node_records){0};
    }
}

int cfs_plan_create(const struct cfs_plan_params *pp, struct cfs_plan **out, char *err,
                    size_t errlen)
{
    struct cfs_plan *p = NULL;
    struct plan_build b = {0};
    void *st = NULL;
    struct cfs_plan_source src = {0};
    int rc;

    *out = NULL;
    rc = validate(pp, err, errlen);
    if (rc < 0)
        return rc;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->params = *pp;
    p->params.sizes = NULL;
    p->params.ranks = NULL;
    p->params.prev = NULL; /* read while building only */
    p->src = plan_source(&p->params, &p->src_buf);
    src = *p->src;
    p->n = pp->n;
    p->world = pp->world;
    p->nodes = pp->nodes;
    p->node = pp->node;
    p->start_epoch = pp->start_epoch;
    p->nepochs = pp->epochs - pp->start_epoch;
    p->ram = pp->ram;
    p->ssd = pp->ssd;
    p->bm_bytes = (p->nepochs + 7) / 8;
    const uint64_t n = p->n;

    rc = plan_arrays(p, pp);
    if (rc < 0)
        goto fail;
    rc = p->src->create(p->src->cfg, &st, err, errlen);
    if (rc < 0)
        goto fail_reported;
    rc = build_arrays(p, &b);
    if (rc < 0)
        goto fail;
    rc = plan_sweep(p, &b, st, err, errlen);
    if (rc < 0)
        goto fail_reported;
    src.destroy(st); /* its epoch's permutation: the size of the dataset */
    st = NULL;
    rc = plan_assign_owners(p, &b, pp);
    if (rc < 0)
        goto fail;
    free(b.best); /* only the owners need it */
    b.best = NULL;
    rc = group_by_owner(p, &b);
    if (rc < 0)
        goto fail;
    for (uint32_t j = 0; j < p->nodes; j++) {
        rc = place_node(p, &b, j);
        if (rc < 0)
            goto fail;
    }
    rc = summarise(p, &b);
    if (rc < 0)
        goto fail;
    for (uint64_t f = 0; f < n; f++) {
        if (p->owner[f] != CFS_NODE_NONE)
            p->owned_bytes += p->sizes[f];
    }
    p->total_count = b.total;
    b.total = NULL;
    /* The records and holdings are summed up: the orders' sort needs room. */
    free_records(pp->nodes, &b);
    free(b.owned);
    free(b.owned_rec);
    b.owned = NULL;
    b.owned_rec = NULL;

    rc = prefetch_orders(p, &b);
    if (rc < 0)
        goto fail;
    rc = 0;
    *out = p;
    p = NULL;
    goto done;

fail:
    cfs_error_msg(err, errlen, rc, "planner: %s", strerror(-rc));
fail_reported:
done:
    if (st)
        src.destroy(st);
    free_records(pp->nodes, &b);
    free(b.rec);
    free(b.total);
    free(b.best);
    free(b.key);
    free(b.ids);
    free(b.free_room);
    free(b.owned);
    free(b.owned_rec);
    free(b.owned_start);
    free(b.cluster_first);
    free(b.cluster_epoch);
    free(b.seen_before);
    free(b.seen_now);
    cfs_plan_destroy(p);
    return rc;
}

void cfs_plan_destroy(struct cfs_plan *p)
{
    if (!p)
        return;
    free(p->ranks);
    free(p->summary);
    free(p->epoch_start);
    free(p->count);
    free(p->first_use);
    free(p->epochs_read);
    free(p->tier);
    free(p->flags);
    free(p->owner);
    free(p->owner_tier);
    free(p->owner_epoch);
    free(p->static_pinners);
    free(p->static_epoch);
    free(p->total_count);
    free(p->order[CFS_TIER_RAM]);
    free(p->order[CFS_TIER_SSD]);
    free(p);
}
