/* The cache simulator: one walk over the planned node's stream, the four
 * policies of clairfs/sim.h updated side by side at every access.
 *
 * A client of the planner like any other: what it needs of a file (its
 * size, whether the node pins it for its peers or for itself, who else pins
 * it and since when) it asks through clairfs/plan.h, so that the plan's
 * layout can change without the simulator noticing. */
#include "clairfs/sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define NONE32 UINT32_MAX

const char *cfs_sim_policy_name(enum cfs_sim_policy policy)
{
    switch (policy) {
    case CFS_SIM_NOCACHE: return "nocache";
    case CFS_SIM_LRU: return "lru";
    case CFS_SIM_STATIC: return "static";
    case CFS_SIM_CLAIRVOYANT: return "clairvoyant";
    case CFS_SIM_POLICIES: break;
    }
    return "?";
}

int cfs_sim_result_init(struct cfs_sim_result *r, const struct cfs_plan *p)
{
    memset(r, 0, sizeof(*r));
    r->charge_granule = 1;
    r->start_epoch = cfs_plan_start_epoch(p);
    r->nepochs = cfs_plan_epoch_count(p);
    for (int i = 0; i < CFS_SIM_POLICIES; i++) {
        r->epoch[i] = calloc(r->nepochs, sizeof(struct cfs_sim_epoch));
        if (!r->epoch[i]) {
            cfs_sim_result_free(r);
            return -ENOMEM;
        }
    }
    return 0;
}

void cfs_sim_result_free(struct cfs_sim_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < CFS_SIM_POLICIES; i++) {
        free(r->epoch[i]);
        r->epoch[i] = NULL;
    }
}

struct cfs_sim_epoch cfs_sim_sum(const struct cfs_sim_result *r, enum cfs_sim_policy policy,
                                 uint32_t from)
{
    struct cfs_sim_epoch s = {0};
    for (uint32_t e = from; e < r->nepochs; e++) {
        const struct cfs_sim_epoch *x = &r->epoch[policy][e];
        s.reads += x->reads;
        s.read_bytes += x->read_bytes;
        s.local_hits += x->local_hits;
        s.local_bytes += x->local_bytes;
        s.peer_reads += x->peer_reads;
        s.peer_bytes += x->peer_bytes;
        s.pfs_reads += x->pfs_reads;
        s.pfs_bytes += x->pfs_bytes;
    }
    return s;
}

/* --- LRU: the reads in order, oldest first, and each cached file's latest
 * among them; an older read of a file is stale and skipped when it comes
 * up for eviction.  The oldest live read is the least recently used file,
 * as at the tail of a linked list, but a read writes one file's slot and
 * appends, where a list rewrote two links at the file and one at its
 * neighbours (random places in arrays of the dataset's size); the reads
 * kept are compacted when the array fills, and it grows when they fill
 * half of it. --- */

struct lru {
    uint32_t *reads;            /* files, oldest read first */
    uint64_t oldest, len, room; /* live reads in [oldest, len) of room */
    uint32_t *latest;           /* file -> its latest read's slot, NONE32 when not cached */
    uint64_t used, cap;
};

static int lru_append(struct lru *l, uint32_t f)
{
    if (l->len == l->room) {
        uint64_t k = 0;
        for (uint64_t i = l->oldest; i < l->len; i++) {
            uint32_t g = l->reads[i];
            if (l->latest[g] == i) {
                l->reads[k] = g;
                l->latest[g] = (uint32_t)k++;
            }
        }
        l->oldest = 0;
        l->len = k;
        if (k >= l->room / 2) {
            uint64_t room = 2 * l->room;
            uint32_t *grown = room < NONE32 ? realloc(l->reads, room * sizeof(*grown)) : NULL;
            if (!grown)
                return -ENOMEM;
            l->reads = grown;
            l->room = room;
        }
    }
    l->latest[f] = (uint32_t)l->len;
    l->reads[l->len++] = f;
    return 0;
}

/* The least recently used file, out of the cache. */
static uint32_t lru_evict(struct lru *l)
{
    for (;;) {
        uint32_t g = l->reads[l->oldest];
        if (l->latest[g] == l->oldest++) {
            l->latest[g] = NONE32;
            return g;
        }
    }
}

/* --- MIN: a max-heap of cached files by next use.  The key lives beside
 * its file in the heap's slot, not in an array of the dataset's size: the
 * heap holds what fits in the tiers (610 K of 14.2 M files for ImageNet-22k
 * on 16 nodes), and a swap touches one place instead of two. --- */

struct minheap {
    uint32_t *heap;  /* files */
    uint64_t *key;   /* slot -> its file's next use */
    uint32_t *at;    /* file -> heap slot, NONE32 when not cached */
    uint64_t len;
    uint64_t used, cap;
};

static void heap_swap(struct minheap *h, uint64_t i, uint64_t j)
{
    uint32_t a = h->heap[i], b = h->heap[j];
    uint64_t ka = h->key[i];
    h->heap[i] = b;
    h->heap[j] = a;
    h->key[i] = h->key[j];
    h->key[j] = ka;
    h->at[b] = (uint32_t)i;
    h->at[a] = (uint32_t)j;
}

static bool heap_above(const struct minheap *h, uint64_t i, uint64_t j)
{
    /* Farther next use on top; ties by the larger index, so runs are exact. */
    return h->key[i] > h->key[j] || (h->key[i] == h->key[j] && h->heap[i] > h->heap[j]);
}

static void heap_up(struct minheap *h, uint64_t i)
{
    while (i > 0 && heap_above(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(struct minheap *h, uint64_t i)
{
    for (;;) {
        uint64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->len && heap_above(h, l, m))
            m = l;
        if (r < h->len && heap_above(h, r, m))
            m = r;
        if (m == i)
            return;
        heap_swap(h, i, m);
        i = m;
    }
}

static void heap_remove_top(struct minheap *h)
{
    uint32_t f = h->heap[0];
    h->len--;
    if (h->len) {
        h->heap[0] = h->heap[h->len];
        h->key[0] = h->key[h->len];
        h->at[h->heap[0]] = 0;
        heap_down(h, 0);
    }
    h->at[f] = NONE32;
}

static void heap_insert(struct minheap *h, uint32_t f, uint64_t key)
{
    h->heap[h->len] = f;
    h->key[h->len] = key;
    h->at[f] = (uint32_t)h->len;
    h->len++;
    heap_up(h, h->len - 1);
}

static void heap_rekey(struct minheap *h, uint32_t f, uint64_t key)
{
    uint64_t i = h->at[f], old = h->key[i];
    h->key[i] = key;
    if (key > old)
        heap_up(h, i);
    else
        heap_down(h, i);
}

static void count(struct cfs_sim_epoch *e, int where, uint64_t sz)
{
    e->reads++;
    e->read_bytes += sz;
    if (where == 0) {
        e->local_hits++;
        e->local_bytes += sz;
    } else if (where == 1) {
        e->peer_reads++;
        e->peer_bytes += sz;
    } else {
        e->pfs_reads++;
        e->pfs_bytes += sz;
    }
}

enum { LOCAL = 0, PEER = 1, PFS = 2 };

/* What a file takes of the capacity: its size rounded up to the granule, as
 * the mount's tiers charge whole pages (a 20 KB file holds 24 KiB of RAM). */
static uint64_t charge_of(uint64_t size, uint64_t granule)
{
    return granule > 1 ? (size + granule - 1) / granule * granule : size;
}

int cfs_sim_run(const struct cfs_plan *p, struct cfs_sim_result *r, char *err, size_t errlen)
{
    const uint64_t n = cfs_plan_sample_count(p);
    const uint32_t start_epoch = cfs_plan_start_epoch(p), node = cfs_plan_node(p);
    struct cfs_plan_walk *w = NULL;
    struct lru lru = {.room = 1u << 16, .cap = cfs_plan_capacity(p)};
    struct minheap h = {0};
    uint8_t *seen = NULL; /* bit0: static set fetched */
    const uint64_t granule = r->charge_granule;
    int rc = -ENOMEM;

    if (r->nepochs != cfs_plan_epoch_count(p) || r->start_epoch != start_epoch) {
        if (err && errlen)
            snprintf(err, errlen, "simulator: result and plan cover different epochs");
        return -EINVAL;
    }
    lru.reads = malloc(lru.room * sizeof(uint32_t));
    lru.latest = malloc(n * sizeof(uint32_t) + 1);
    h.heap = malloc(n * sizeof(uint32_t) + 1);
    h.at = malloc(n * sizeof(uint32_t) + 1);
    h.key = malloc(n * sizeof(uint64_t) + 1);
    seen = calloc(n + 1, 1);
    if (!lru.reads || !lru.latest || !h.heap || !h.at || !h.key || !seen)
        goto fail;
    memset(lru.latest, 0xFF, n * sizeof(uint32_t));
    memset(h.at, 0xFF, n * sizeof(uint32_t));
    h.cap = cfs_plan_capacity(p);
    uint64_t pinned = 0;
    for (uint64_t f = 0; f < n; f++)
        if (cfs_plan_peer_pinned(p, (uint32_t)f))
            pinned += charge_of(cfs_plan_file_size(p, (uint32_t)f), granule);
    h.cap = pinned > h.cap ? 0 : h.cap - pinned;

    rc = cfs_plan_walk_create(p, &w, err, errlen);
    if (rc < 0)
        goto out;
    struct cfs_plan_access a;
    while ((rc = cfs_plan_walk_next(w, &a)) == 1) {
        uint32_t f = a.sample;
        uint64_t sz = cfs_plan_file_size(p, f), charge = charge_of(sz, granule);
        uint32_t rel = a.epoch - start_epoch;

        if (a.new_epoch) /* keys beyond the old window are now exact */
            for (uint64_t i = 0; i < h.len; i++)
                h.key[i] = cfs_plan_walk_next_use(w, h.heap[i], NULL);
        if (a.new_epoch)
            for (uint64_t i = h.len / 2; i-- > 0;)
                heap_down(&h, i);

        count(&r->epoch[CFS_SIM_NOCACHE][rel], PFS, sz);

        /* LRU */
        if (lru.latest[f] != NONE32) {
            if ((rc = lru_append(&lru, f)) < 0)
                break;
            count(&r->epoch[CFS_SIM_LRU][rel], LOCAL, sz);
        } else {
            count(&r->epoch[CFS_SIM_LRU][rel], PFS, sz);
            if (charge <= lru.cap) {
                while (lru.used + charge > lru.cap)
                    lru.used -= charge_of(cfs_plan_file_size(p, lru_evict(&lru)), granule);
                if ((rc = lru_append(&lru, f)) < 0)
                    break;
                lru.used += charge;
            }
        }

        /* Static pinning (NoPFS). */
        int where;
        bool earlier_pinner =
            cfs_plan_static_pinners(p, f) > 0 && cfs_plan_static_pinner_epoch(p, f) < rel;
        if (cfs_plan_static_pinned(p, f)) {
            where = (seen[f] & 1) ? LOCAL : earlier_pinner ? PEER : PFS;
            seen[f] |= 1;
        } else if (earlier_pinner) {
            where = PEER;
        } else {
            where = PFS;
        }
        count(&r->epoch[CFS_SIM_STATIC][rel], where, sz);

        /* Clairvoyant. */
        if (cfs_plan_peer_pinned(p, f)) {
            where = rel <= cfs_plan_owner_epoch(p, f) ? PFS : LOCAL;
        } else {
            uint64_t next = cfs_plan_walk_next_use(w, f, NULL);
            if (h.at[f] != NONE32) {
                where = LOCAL;
                if (next == CFS_POS_NEVER) { /* read for the last time: drop */
                    heap_rekey(&h, f, CFS_POS_NEVER);
                    heap_remove_top(&h);
                    h.used -= charge;
                } else {
                    heap_rekey(&h, f, next);
                }
            } else {
                uint32_t o = cfs_plan_owner(p, f, NULL);
                where = (o != CFS_NODE_NONE && o != node && cfs_plan_owner_epoch(p, f) < rel)
                            ? PEER
                            : PFS;
                if (next != CFS_POS_NEVER && charge <= h.cap) {
                    /* Evict farther entries until f fits; bypass if it cannot. */
                    while (h.used + charge > h.cap && h.len && h.key[0] > next) {
                        uint32_t t = h.heap[0];
                        heap_remove_top(&h);
                        h.used -= charge_of(cfs_plan_file_size(p, t), granule);
                    }
                    if (h.used + charge <= h.cap) {
                        heap_insert(&h, f, next);
                        h.used += charge;
                    }
                }
            }
        }
        count(&r->epoch[CFS_SIM_CLAIRVOYANT][rel], where, sz);
    }
    if (rc < 0 && err && errlen)
        snprintf(err, errlen, "simulator: %s", strerror(-rc));
    goto out;
fail:
    if (err && errlen)
        snprintf(err, errlen, "simulator: %s", strerror(-rc));
out:
    cfs_plan_walk_destroy(w);
    free(lru.reads);
    free(lru.latest);
    free(h.heap);
    free(h.at);
    free(h.key);
    free(seen);
    return rc < 0 ? rc : 0;
}
