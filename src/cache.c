/* The cache core: the top of the cache module and its public API.
 *
 * It owns everything that has a lock or a policy: the id table and the
 * entry states, what each tier is charged, the eviction heaps' membership
 * and keys (next use, or LRU ticks), fetches and their waiters, readers'
 * pins, the queue of index records and when it is committed, and at create
 * the judgement of each stored entry against its source (the source
 * callback is asked here, never by the store).  The design is described at
 * the top of include/clairfs/cache.h.
 *
 * Layer order (src/cache_i.h): this file calls down into cache_kernel.c
 * (zombies of kernel-backed entries), cache_heap.c (the heaps as a data
 * structure) and cache_ssd.c (the SSD store: files and records, handed
 * plain ids, lengths, checksums and records); none of them calls back.
 * Slow store work (writing, verifying, committing) is done with mu
 * released, the entry flagged so no one else touches it meanwhile. */
#include "cache_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

_Static_assert(CACHE_REC_TIER_SSD == CFS_TIER_SSD, "the stored tier is the SSD tier");

/* ---- keys */

static void key_refresh(struct cfs_cache *c, struct centry *e)
{
    if (c->next_use)
        e->key = c->next_use(c->next_use_arg, e->id);
    else
        e->key = UINT64_MAX - ++c->tick; /* oldest use = largest key */
}

/* The heap top with a fresh key: a key refreshed upwards may hide a better
 * victim, so re-examine the new top a bounded number of times. */
static struct centry *heap_top_fresh(struct cfs_cache *c, struct cheap *h)
{
    for (int round = 0; h->n > 0 && c->next_use && round < 16; round++) {
        struct centry *e = h->a[0];
        uint64_t k = c->next_use(c->next_use_arg, e->id);
        if (k == e->key)
            break;
        e->key = k;
        cache_heap_down(h, 0);
    }
    return h->n ? h->a[0] : NULL;
}

/* ---- the record queue: changes to the SSD entries' index records, in the
 * order they happened, committed in batches by cfs_cache_sync() */

/* mu held.  A record that cannot be queued is lost: the entry is simply
 * not persistent. */
static void queue_record(struct cfs_cache *c, enum cfs_ssd_op_kind kind, const struct centry *e)
{
    if (!c->persist)
        return;
    if (c->nops == c->ops_cap) {
        size_t cap = c->ops_cap ? c->ops_cap * 2 : 64;
        struct cfs_ssd_op *ops = realloc(c->ops, cap * sizeof(*ops));
        if (!ops)
            return;
        c->ops = ops;
        c->ops_cap = cap;
    }
    struct cfs_ssd_op *op = &c->ops[c->nops++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->e.id = e->id;
    if (kind == CFS_SSD_PUT) {
        op->e.len = e->len;
        op->e.xxh = e->xxh;
        op->e.src_size = e->src.size;
        op->e.mtime_sec = e->src.mtime_sec;
        op->e.mtime_nsec = e->src.mtime_nsec;
        op->e.path_hash = e->src.path_hash;
    }
}

/* mu held.  The index refused a write (disk full, I/O error, a map it
 * cannot grow): the tier goes on serving what it holds and stops
 * persisting; the records already committed are judged again, like any,
 * at the next create, and files without one are orphans then. */
static void index_failed(struct cfs_cache *c, int rc)
{
    if (c->st.index_write_errors++ == 0)
        c->st.index_error = rc;
    c->persist = false;
    free(c->ops);
    c->ops = NULL;
    c->nops = c->ops_cap = 0;
}

int cfs_cache_sync(struct cfs_cache *c)
{
    struct cfs_ssd_op *ops;
    size_t nops;
    int rc;

    pthread_mutex_lock(&c->ix_mu); /* batches commit in queue order */
    pthread_mutex_lock(&c->mu);
    if (!c->persist) {
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&c->ix_mu);
        return 0;
    }
    ops = c->ops;
    nops = c->nops;
    c->ops = NULL;
    c->nops = c->ops_cap = 0;
    pthread_mutex_unlock(&c->mu);
    rc = cfs_ssd_commit(c->ssd, ops, nops);
    if (rc < 0) {
        pthread_mutex_lock(&c->mu);
        index_failed(c, rc);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_unlock(&c->ix_mu);
    free(ops);
    return rc;
}

/* ---- entry lifetime (mu held) */

static bool resident(const struct centry *e)
{
    return e->state == CFS_CACHE_RAM || e->state == CFS_CACHE_SSD;
}

/* Every increase of a tier's bytes goes through here, so the peak is exact. */
static void charge_tier(struct cfs_cache *c, enum cfs_tier tier, uint64_t bytes)
{
    c->st.bytes[tier] += bytes;
    if (c->st.bytes[tier] > c->st.peak[tier])
        c->st.peak[tier] = c->st.bytes[tier];
}

static void entry_free(struct cfs_cache *c, struct centry *e)
{
    if (e->flags & EF_KERNEL) {
        if (!(e->flags & EF_ZOMBIE))
            cache_zombify(c, e);
        return;
    }
    if (e->heap_pos >= 0)
        cache_heap_remove(&c->heap[e->tier], e);
    if (resident(e)) {
        c->st.entries[e->tier]--;
        c->st.bytes[e->tier] -= e->charge;
        c->members[e->tier]--;
        if (e->tier == CFS_TIER_SSD) {
            cfs_ssd_unlink(c->ssd, e->id);
            queue_record(c, CFS_SSD_DEL, e);
        }
    }
    if (e->fd >= 0)
        close(e->fd);
    if (c->slot[e->id] == e)
        c->slot[e->id] = NULL;
    free(e->buf);
    free(e);
}

/* A pin or a wait ended: the entry goes back to the heap, or away. */
static void entry_unref(struct cfs_cache *c, struct centry *e)
{
    if (e->pins || e->waiters)
        return;
    if (e->state == ST_FAILED) {
        free(e); /* already detached and unaccounted */
        return;
    }
    if (e->flags & EF_DOOMED) {
        entry_free(c, e);
        return;
    }
    if (resident(e) && e->heap_pos < 0) {
        key_refresh(c, e);
        cache_heap_push(&c->heap[e->tier], e);
    }
}

static pthread_cond_t *cond_of(struct cfs_cache *c, uint32_t id)
{
    return &c->cond[id % CACHE_NCOND];
}

static int insert_loaded(struct cfs_cache *c, struct centry *e)
{
    int rc = cache_heap_reserve(&c->heap[e->tier], c->members[e->tier] + 1);
    if (rc)
        return rc;
    c->slot[e->id] = e;
    c->members[e->tier]++;
    c->st.entries[e->tier]++;
    charge_tier(c, e->tier, e->charge);
    e->heap_pos = -1;
    key_refresh(c, e);
    cache_heap_push(&c->heap[e->tier], e);
    return 0;
}

static void trim_tier(struct cfs_cache *c, int tier)
{
    while (c->st.bytes[tier] > c->st.capacity[tier]) {
        struct centry *v = heap_top_fresh(c, &c->heap[tier]);
        if (!v)
            break;
        c->st.evictions[tier]++;
        entry_free(c, v);
    }
}

static int make_room(struct cfs_cache *c, int tier, uint64_t need, uint64_t new_key, unsigned flags,
                     struct centry **demoted);

/* A RAM victim that is needed again is worth an SSD copy, if the SSD tier
 * has room without evicting what is needed sooner (mu held). */
static bool demote(struct cfs_cache *c, struct centry *v)
{
    uint64_t charge = cache_round(v->len);
    if (!c->ssd || c->st.ssd_degraded || (c->next_use && v->key == UINT64_MAX) ||
        charge > c->st.capacity[CFS_TIER_SSD] ||
        cache_heap_reserve(&c->heap[CFS_TIER_SSD], c->members[CFS_TIER_SSD] + 1) ||
        make_room(c, CFS_TIER_SSD, charge, v->key, 0, NULL) != 0)
        return false;
    c->st.entries[CFS_TIER_RAM]--;
    c->st.bytes[CFS_TIER_RAM] -= v->charge;
    c->members[CFS_TIER_RAM]--;
    /* The RAM buffer becomes the staging buffer of an SSD fetch. */
    v->tier = CFS_TIER_SSD;
    v->state = CFS_CACHE_INFLIGHT;
    v->flags |= EF_DEMOTING;
    v->charge = charge;
    v->reserved = v->len;
    c->members[CFS_TIER_SSD]++;
    charge_tier(c, CFS_TIER_SSD, charge);
    c->st.staging_bytes += charge;
    c->st.inflight++;
    c->st.demotions++;
    return true;
}

/* Free room for need bytes in tier, or leave everything as it was.  With
 * demoted != NULL, RAM victims may move to the SSD tier instead of being
 * freed; they come back INFLIGHT on *demoted, for the caller to write once
 * mu is released. */
static int make_room(struct cfs_cache *c, int tier, uint64_t need, uint64_t new_key, unsigned flags,
                     struct centry **demoted)
{
    struct cheap *h = &c->heap[tier];
    /* Zombies' bytes are on their way out: do not evict more for them. */
    uint64_t used = c->st.bytes[tier] - (tier == CFS_TIER_RAM ? c->st.zombie_bytes : 0);
    uint64_t cap = c->st.capacity[tier];
    struct centry *freed = NULL;
    uint32_t nv = 0;
    int rc = 0;

    if (used + need <= cap)
        return c->st.bytes[tier] + need <= cap ? 0 : -EAGAIN;
    if (flags & CFS_CACHE_NO_EVICT)
        return -ENOSPC;
    if (c->scratch_cap < h->n) {
        struct centry **s = realloc(c->scratch, h->n * sizeof(*s));
        if (!s)
            return -ENOMEM;
        c->scratch = s;
        c->scratch_cap = h->n;
    }
    while (used + need > cap) {
        struct centry *v = heap_top_fresh(c, h);
        if (!v) {
            rc = -EAGAIN;
            break;
        }
        if (c->next_use && !(flags & CFS_CACHE_DEMAND) && v->key <= new_key) {
            c->st.refused++;
            rc = -ENOSPC;
            break;
        }
        cache_heap_remove(h, v);
        c->scratch[nv++] = v;
        used -= v->charge;
    }
    for (uint32_t i = 0; i < nv; i++) {
        struct centry *v = c->scratch[i];
        if (rc) {
            cache_heap_push(h, v);
        } else {
            c->st.evictions[tier]++;
            v->next_demote = freed;
            freed = v;
        }
    }
    /* scratch is free again: demote() may evict from the SSD tier. */
    while (freed) {
        struct centry *v = freed;
        freed = v->next_demote;
        if (!(v->flags & EF_KERNEL) && demoted && tier == CFS_TIER_RAM && demote(c, v)) {
            v->next_demote = *demoted;
            *demoted = v;
        } else {
            entry_free(c, v); /* a kernel victim turns zombie: still charged */
        }
    }
    if (rc == 0 && c->st.bytes[tier] + need > cap)
        rc = -EAGAIN; /* the room is there once the kernel has dropped the zombies' pages */
    return rc;
}

/* ---- warm restart: which stored entries the SSD tier serves again */

/* NULL: serve it; else the counter to blame. */
static uint64_t *judge(struct cfs_cache *c, const struct cfs_cache_params *p,
                       const struct cfs_ssd_stored *l)
{
    const struct cfs_ssd_entry *r = &l->e;
    struct cfs_cache_source now;

    if (!l->complete)
        return &c->st.incomplete;
    if (r->id >= c->nfiles || !p->source || p->source(p->source_arg, r->id, &now) != 0)
        return &c->st.stale;
    if (now.size != r->src_size || now.mtime_sec != r->mtime_sec ||
        now.mtime_nsec != r->mtime_nsec || now.path_hash != r->path_hash || r->len != r->src_size)
        return &c->st.stale;
    if (!cfs_ssd_file_holds(c->ssd, r->id, r->len))
        return &c->st.incomplete; /* lost or cut short by a crash */
    return NULL;
}

/* mu held.  Serve the stored entries that still describe their source (their
 * ids set in keep), forget the records of the others. */
static int load_stored(struct cfs_cache *c, const struct cfs_cache_params *p, uint8_t *keep)
{
    struct cfs_ssd_stored *v = NULL;
    size_t n = 0, ndel = 0;
    int rc = cfs_ssd_load(c->ssd, &v, &n);

    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct cfs_ssd_entry *r = &v[i].e;
        uint64_t *blame = judge(c, p, &v[i]);
        if (blame) {
            (*blame)++;
            if (ndel != i)
                v[ndel] = v[i]; /* compact the records to forget to the front */
            ndel++;
            continue;
        }
        struct centry *e = calloc(1, sizeof(*e));
        if (!e) {
            rc = -ENOMEM;
            break;
        }
        e->id = r->id;
        e->state = CFS_CACHE_SSD;
        e->tier = CFS_TIER_SSD;
        e->fd = -1;
        e->len = r->len;
        e->charge = cache_round(e->len);
        e->xxh = r->xxh;
        e->src = (struct cfs_cache_source){r->src_size, r->mtime_sec, r->mtime_nsec, r->path_hash};
        rc = insert_loaded(c, e);
        if (rc) {
            free(e);
            break;
        }
        keep[r->id / 8] |= (uint8_t)(1u << (r->id % 8));
        c->st.loaded++;
    }
    if (rc == 0)
        rc = cfs_ssd_forget(c->ssd, v, ndel);
    free(v);
    return rc;
}

/* Open the store, take back what it holds, and make the tier fit its
 * (possibly smaller) capacity. */
static int ssd_tier_open(struct cfs_cache *c, const struct cfs_cache_params *p, char *err,
                         size_t errlen)
{
    uint8_t *keep;
    int rc = cfs_ssd_open(p->ssd_dir, p->index, &c->ssd, err, errlen);

    if (rc)
        return rc;
    c->persist = cfs_ssd_persists(c->ssd);
    keep = calloc(c->nfiles / 8 + 1, 1);
    if (!keep) {
        snprintf(err, errlen, "cache: out of memory");
        return -ENOMEM;
    }
    /* Called before any other thread can see the cache; mu is taken because
     * the entry functions expect it held. */
    pthread_mutex_lock(&c->mu);
    rc = load_stored(c, p, keep);
    /* An index that cannot be read or written costs persistence, not the
     * mount: what was taken back is served, the rest of the files go. */
    if (rc < 0 && rc != -ENOMEM) {
        index_failed(c, rc);
        rc = 0;
    }
    if (rc == 0)
        rc = cfs_ssd_remove_orphans(c->ssd, keep, c->nfiles, &c->st.orphans);
    if (rc == 0)
        trim_tier(c, CFS_TIER_SSD);
    pthread_mutex_unlock(&c->mu);
    free(keep);
    if (rc == 0)
        (void)cfs_cache_sync(c); /* deletions of trimmed entries; a failure is counted */
    if (rc)
        snprintf(err, errlen, "cache index in %s: %s", p->ssd_dir, strerror(-rc));
    return rc;
}

/* ---- lifecycle */

int cfs_cache_create(const struct cfs_cache_params *p, struct cfs_cache **out, char *err,
                     size_t errlen)
{
    struct cfs_cache *c = NULL;
    int rc;

    *out = NULL;
    if (p->ssd_bytes && (!p->ssd_dir || !*p->ssd_dir)) {
        snprintf(err, errlen, "cache: an SSD tier needs ssd_dir");
        return -EINVAL;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        goto nomem;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->ix_mu, NULL);
    for (unsigned i = 0; i < CACHE_NCOND; i++)
        pthread_cond_init(&c->cond[i], NULL);
    c->nfiles = p->nfiles;
    c->slot = calloc(p->nfiles ? p->nfiles : 1, sizeof(*c->slot));
    c->seen = calloc(p->nfiles / 8 + 1, 1);
    if (!c->slot || !c->seen)
        goto nomem;
    c->st.capacity[CFS_TIER_RAM] = p->ram_bytes;
    c->st.capacity[CFS_TIER_SSD] = p->ssd_bytes;
    c->next_use = p->next_use;
    c->next_use_arg = p->next_use_arg;
    c->verify = p->ssd_verify;
    c->commit_batch = p->commit_batch ? p->commit_batch : 64;
    if (p->kernel_drop) {
        c->zq = malloc((p->nfiles ? p->nfiles : 1) * sizeof(*c->zq));
        if (!c->zq)
            goto nomem;
        c->kernel_drop = p->kernel_drop;
        c->kernel_drop_arg = p->kernel_drop_arg;
    }
    if (p->ssd_bytes) {
        rc = ssd_tier_open(c, p, err, errlen);
        if (rc)
            goto fail;
    }
    *out = c;
    return 0;
nomem:
    snprintf(err, errlen, "cache: out of memory for %u files", p->nfiles);
    rc = -ENOMEM;
fail:
    cfs_cache_destroy(c);
    return rc;
}

void cfs_cache_destroy(struct cfs_cache *c)
{
    if (!c)
        return;
    if (c->ssd)
        (void)cfs_cache_sync(c);
    for (uint32_t id = 0; c->slot && id < c->nfiles; id++) {
        struct centry *e = c->slot[id];
        if (!e)
            continue;
        if (e->fd >= 0)
            close(e->fd);
        free(e->buf);
        free(e); /* the files stay: they are the persistent tier */
    }
    cfs_ssd_close(c->ssd);
    for (int t = 0; t < CFS_TIER_COUNT; t++)
        free(c->heap[t].a);
    free(c->scratch);
    free(c->zq);
    free(c->slot);
    free(c->seen);
    free(c->ops);
    for (unsigned i = 0; i < CACHE_NCOND; i++)
        pthread_cond_destroy(&c->cond[i]);
    pthread_mutex_destroy(&c->ix_mu);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void cfs_cache_set_policy(struct cfs_cache *c, cfs_cache_next_use_fn fn, void *arg)
{
    pthread_mutex_lock(&c->mu);
    c->next_use = fn;
    c->next_use_arg = arg;
    c->st.lru = fn == NULL;
    for (int t = 0; t < CFS_TIER_COUNT; t++) {
        struct cheap *h = &c->heap[t];
        for (uint32_t i = 0; i < h->n; i++)
            key_refresh(c, h->a[i]);
        for (uint32_t i = h->n / 2; i-- > 0;)
            cache_heap_down(h, i);
    }
    pthread_mutex_unlock(&c->mu);
}

void cfs_cache_touch(struct cfs_cache *c, uint32_t id)
{
    pthread_mutex_lock(&c->mu);
    struct centry *e = id < c->nfiles ? c->slot[id] : NULL;
    if (e && e->heap_pos >= 0) {
        key_refresh(c, e);
        cache_heap_fix(&c->heap[e->tier], e);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ---- fetches */

static void write_demoted(struct cfs_cache *c, struct centry *list);

int cfs_cache_begin_fetch(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier,
                          unsigned flags, void **buf)
{
    struct centry *e = NULL, *demoted = NULL;
    uint64_t charge = cache_round(size);
    int rc = 0;

    if (!buf || (tier != CFS_TIER_RAM && tier != CFS_TIER_SSD))
        return -EINVAL;
    *buf = NULL;
    pthread_mutex_lock(&c->mu);
    if (id >= c->nfiles) {
        rc = -EINVAL;
    } else if (c->slot[id]) {
        rc = (c->slot[id]->flags & EF_DOOMED) ? -EBUSY : -EEXIST;
    } else if (tier == CFS_TIER_SSD && (!c->ssd || c->st.ssd_degraded)) {
        rc = -ENODEV;
    } else if (charge > c->st.capacity[tier]) {
        rc = -EFBIG;
    } else {
        rc = cache_heap_reserve(&c->heap[tier], c->members[tier] + 1);
        if (!rc) {
            uint64_t new_key = c->next_use ? c->next_use(c->next_use_arg, id) : 0;
            rc = make_room(c, tier, charge, new_key, flags, &demoted);
        }
        if (!rc && !(e = calloc(1, sizeof(*e))))
            rc = -ENOMEM;
    }
    if (rc) {
        pthread_mutex_unlock(&c->mu);
        write_demoted(c, demoted);
        return rc;
    }
    e->id = id;
    e->state = CFS_CACHE_INFLIGHT;
    e->tier = (uint8_t)tier;
    e->heap_pos = -1;
    e->fd = -1;
    e->reserved = size;
    e->charge = charge;
    c->slot[id] = e;
    c->members[tier]++;
    charge_tier(c, tier, charge);
    c->st.inflight++;
    if (tier == CFS_TIER_SSD)
        c->st.staging_bytes += charge;
    if (c->seen[id / 8] & (1u << (id % 8)))
        c->st.refetches++;
    pthread_mutex_unlock(&c->mu);
    write_demoted(c, demoted);

    /* Only this fetch touches e->buf until it completes. */
    e->buf = charge ? aligned_alloc(CACHE_PAGE, charge) : malloc(1);
    if (!e->buf) {
        (void)cfs_cache_complete_fetch(c, id, -ENOMEM, 0, NULL);
        return -ENOMEM;
    }
    *buf = e->buf;
    return 0;
}

static bool degrades_ssd(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT || rc == -EIO || rc == -EROFS;
}

/* End a fetch or a demotion (e INFLIGHT, owned by the caller). */
static int finish(struct cfs_cache *c, struct centry *e, int rc, uint64_t len,
                  const struct cfs_cache_source *src, bool demotion)
{
    uint32_t id = e->id;
    int wrc = 0;
    bool due;

    /* A short or overlong read would publish wrong bytes: refuse it. */
    if (rc == 0 && (!src || len > e->reserved))
        rc = -EINVAL;
    else if (rc == 0 && len != src->size)
        rc = -EIO;
    if (rc == 0 && !demotion) /* a demoted entry keeps the hash it was fetched with */
        e->xxh = XXH3_64bits(e->buf, len);
    if (rc == 0 && e->tier == CFS_TIER_SSD)
        rc = wrc = cfs_ssd_write(c->ssd, id, e->buf, len);

    pthread_mutex_lock(&c->mu);
    e->flags &= (uint8_t)~EF_DEMOTING;
    c->st.inflight--;
    if (e->tier == CFS_TIER_SSD) {
        c->st.staging_bytes -= e->charge;
        free(e->buf);
        e->buf = NULL;
    }
    if (rc) {
        if (wrc) {
            c->st.ssd_write_errors++;
            if (degrades_ssd(wrc))
                c->st.ssd_degraded = true;
        }
        c->st.bytes[e->tier] -= e->charge;
        c->members[e->tier]--;
        free(e->buf);
        e->buf = NULL;
        e->charge = 0;
        e->state = ST_FAILED;
        e->fetch_rc = demotion ? -ENOENT : rc; /* its readers simply refetch */
        c->slot[id] = NULL;
        pthread_cond_broadcast(cond_of(c, id));
        entry_unref(c, e);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    if (e->tier == CFS_TIER_SSD) {
        /* The file holds len bytes: charge its blocks, not the reservation. */
        uint64_t charge = cache_round(len);
        c->st.bytes[CFS_TIER_SSD] -= e->charge - charge;
        e->charge = charge;
        e->flags |= EF_VERIFIED; /* written from the hashed buffer */
    }
    struct cfs_cache_source s = *src; /* src may be &e->src */
    e->len = len;
    e->src = s;
    e->state = e->tier == CFS_TIER_SSD ? CFS_CACHE_SSD : CFS_CACHE_RAM;
    c->st.entries[e->tier]++;
    c->seen[id / 8] |= (uint8_t)(1u << (id % 8));
    if (e->tier == CFS_TIER_SSD)
        queue_record(c, CFS_SSD_PUT, e);
    pthread_cond_broadcast(cond_of(c, id));
    entry_unref(c, e);
    due = c->persist && c->nops >= c->commit_batch;
    pthread_mutex_unlock(&c->mu);
    if (due)
        (void)cfs_cache_sync(c); /* a failed batch only loses persistence */
    return 0;
}

int cfs_cache_complete_fetch(struct cfs_cache *c, uint32_t id, int rc, uint64_t len,
                             const struct cfs_cache_source *src)
{
    struct centry *e;

    pthread_mutex_lock(&c->mu);
    e = id < c->nfiles ? c->slot[id] : NULL;
    if (e && (e->state != CFS_CACHE_INFLIGHT || (e->flags & EF_DEMOTING)))
        e = NULL;
    pthread_mutex_unlock(&c->mu);
    if (!e)
        return -EINVAL;
    return finish(c, e, rc, len, src, false);
}

/* Write the RAM victims that make_room moved to the SSD tier. */
static void write_demoted(struct cfs_cache *c, struct centry *list)
{
    while (list) {
        struct centry *e = list;
        list = e->next_demote;
        e->next_demote = NULL;
        (void)finish(c, e, 0, e->len, &e->src, true); /* failures are counted */
    }
}

/* ---- readers */

/* mu held, e pinned SSD entry: open it (and verify) unless a pin already did. */
static int ssd_prepare(struct cfs_cache *c, struct centry *e)
{
    while (e->flags & EF_PREPARING)
        pthread_cond_wait(cond_of(c, e->id), &c->mu);
    if (e->flags & EF_DOOMED)
        return -ENOENT;
    if (e->fd >= 0)
        return 0;

    bool verify = c->verify == CFS_CACHE_VERIFY_EVERY_OPEN || !(e->flags & EF_VERIFIED);
    int fd = -1;
    e->flags |= EF_PREPARING;
    pthread_mutex_unlock(&c->mu);
    int rc = cfs_ssd_open_verified(c->ssd, e->id, e->len, e->xxh, verify, &fd);
    pthread_mutex_lock(&c->mu);
    e->flags &= (uint8_t)~EF_PREPARING;
    pthread_cond_broadcast(cond_of(c, e->id));
    if (rc) {
        /* Corrupt, truncated or vanished: never serve it, let it be refetched. */
        if (rc == -EBADMSG)
            c->st.checksum_failures++;
        e->flags |= EF_DOOMED;
        return -ENOENT;
    }
    e->fd = fd;
    e->flags |= EF_VERIFIED;
    return 0;
}

int cfs_cache_acquire(struct cfs_cache *c, uint32_t id, unsigned flags, struct cfs_cache_handle *h)
{
    struct centry *e;
    int rc = 0;

    memset(h, 0, sizeof(*h));
    h->fd = -1;
    pthread_mutex_lock(&c->mu);
    e = id < c->nfiles ? c->slot[id] : NULL;
    if (!e || (e->flags & EF_DOOMED)) {
        rc = -ENOENT;
        goto out;
    }
    if (e->state == CFS_CACHE_INFLIGHT) {
        if (!(flags & CFS_CACHE_WAIT)) {
            rc = -EAGAIN;
            goto out;
        }
        e->waiters++;
        while (e->state == CFS_CACHE_INFLIGHT)
            pthread_cond_wait(cond_of(c, id), &c->mu);
        e->waiters--;
        if (e->state == ST_FAILED) {
            rc = e->fetch_rc;
            entry_unref(c, e);
            goto out;
        }
    }
    e->pins++;
    if (e->heap_pos >= 0)
        cache_heap_remove(&c->heap[e->tier], e);
    if (e->flags & EF_DOOMED)
        rc = -ENOENT;
    else if (e->state == CFS_CACHE_SSD)
        rc = ssd_prepare(c, e);
    if (rc) {
        e->pins--;
        entry_unref(c, e);
        goto out;
    }
    h->id = id;
    h->tier = (enum cfs_tier)e->tier;
    h->data = e->state == CFS_CACHE_RAM ? e->buf : NULL;
    h->kernel = (e->flags & EF_KERNEL) != 0;
    h->fd = e->state == CFS_CACHE_SSD ? e->fd : -1;
    h->offset = 0;
    h->size = e->len;
    h->xxh3 = e->xxh;
    h->priv = e;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void cfs_cache_release(struct cfs_cache *c, struct cfs_cache_handle *h)
{
    struct centry *e = h->priv;
    if (!e)
        return;
    pthread_mutex_lock(&c->mu);
    if (--e->pins == 0 && e->fd >= 0) {
        close(e->fd); /* 1.3 M files cannot all keep an fd */
        e->fd = -1;
    }
    entry_unref(c, e);
    pthread_mutex_unlock(&c->mu);
    memset(h, 0, sizeof(*h));
    h->fd = -1;
}

int cfs_cache_drop(struct cfs_cache *c, uint32_t id)
{
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    struct centry *e = id < c->nfiles ? c->slot[id] : NULL;
    if (!e || (e->flags & EF_DOOMED)) {
        rc = -ENOENT;
    } else if (e->state == CFS_CACHE_INFLIGHT) {
        rc = -EBUSY;
    } else {
        e->flags |= EF_DOOMED;
        entry_unref(c, e);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

enum cfs_cache_state cfs_cache_state(struct cfs_cache *c, uint32_t id)
{
    enum cfs_cache_state s = CFS_CACHE_ABSENT;
    pthread_mutex_lock(&c->mu);
    struct centry *e = id < c->nfiles ? c->slot[id] : NULL;
    if (e && !(e->flags & EF_DOOMED))
        s = (enum cfs_cache_state)e->state;
    pthread_mutex_unlock(&c->mu);
    return s;
}

const char *cfs_cache_state_name(enum cfs_cache_state s)
{
    switch (s) {
    case CFS_CACHE_INFLIGHT:
        return "inflight";
    case CFS_CACHE_RAM:
        return "ram";
    case CFS_CACHE_SSD:
        return "ssd";
    case CFS_CACHE_ABSENT:
    default:
        return "pfs";
    }
}

void cfs_cache_stats(struct cfs_cache *c, struct cfs_cache_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    out->lru = c->next_use == NULL;
    pthread_mutex_unlock(&c->mu);
}
