/* Kernel-backed RAM entries: a RAM entry whose bytes the prefetcher's stager
 * stored into the kernel's page cache gives up its buffer (kernelize), and
 * when evicted or dropped turns zombie, still charged, until the stager has
 * invalidated its pages (take_kernel_drops, kernel_dropped) or the kernel
 * forgot the inode (kernel_forgot).  The protocol is "Kernel page cache" at
 * the top of include/clairfs/cache.h.
 *
 * Place in the cache module's layer order (src/cache_i.h): below the core
 * (src/cache.c), which turns its victims into zombies through
 * cache_zombify(); above the heaps.  Nothing here calls into cache.c. */
#include "cache_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cache_zombify(struct cfs_cache *c, struct centry *e)
{
    if (e->heap_pos >= 0)
        cache_heap_remove(&c->heap[e->tier], e);
    e->flags |= EF_DOOMED | EF_ZOMBIE;
    c->st.entries[e->tier]--;
    c->st.kernel_entries--;
    c->st.zombie_bytes += e->charge;
    c->zq[c->zq_n++] = e->id;
    c->kernel_drop(c->kernel_drop_arg);
}

/* Free a kernel entry or zombie whose pages are gone. */
static void kernel_entry_free(struct cfs_cache *c, struct centry *e)
{
    if (e->heap_pos >= 0)
        cache_heap_remove(&c->heap[e->tier], e);
    if (e->flags & EF_ZOMBIE)
        c->st.zombie_bytes -= e->charge;
    else {
        c->st.entries[e->tier]--;
        c->st.kernel_entries--;
    }
    c->st.kernel_bytes -= e->charge;
    c->st.bytes[e->tier] -= e->charge;
    c->members[e->tier]--;
    if (c->slot[e->id] == e)
        c->slot[e->id] = NULL;
    free(e);
}

int cfs_cache_kernelize(struct cfs_cache *c, struct cfs_cache_handle *h)
{
    struct centry *e = h->priv;
    void *buf = NULL;
    int rc = -EBUSY;
    pthread_mutex_lock(&c->mu);
    if (e && c->zq && e->state == CFS_CACHE_RAM && e->pins == 1 &&
        !(e->flags & (EF_DOOMED | EF_KERNEL))) {
        buf = e->buf;
        e->buf = NULL;
        e->flags |= EF_KERNEL;
        c->st.kernel_entries++;
        c->st.kernel_bytes += e->charge;
        h->data = NULL;
        h->kernel = true;
        rc = 0;
    }
    pthread_mutex_unlock(&c->mu);
    free(buf);
    return rc;
}

size_t cfs_cache_take_kernel_drops(struct cfs_cache *c, uint32_t *ids, size_t max)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->zq_n < max ? c->zq_n : max;
    c->zq_n -= (uint32_t)n;
    memcpy(ids, c->zq + c->zq_n, n * sizeof(*ids));
    pthread_mutex_unlock(&c->mu);
    return n;
}

void cfs_cache_kernel_dropped(struct cfs_cache *c, uint32_t id)
{
    pthread_mutex_lock(&c->mu);
    struct centry *e = id < c->nfiles ? c->slot[id] : NULL;
    if (e && (e->flags & EF_ZOMBIE))
        kernel_entry_free(c, e);
    pthread_mutex_unlock(&c->mu);
}

void cfs_cache_kernel_forgot(struct cfs_cache *c, uint32_t id)
{
    pthread_mutex_lock(&c->mu);
    struct centry *e = id < c->nfiles ? c->slot[id] : NULL;
    /* A zombie's id stays queued; its invalidation finds nothing to free. */
    if (e && (e->flags & EF_KERNEL) && e->pins == 0 && e->waiters == 0)
        kernel_entry_free(c, e);
    pthread_mutex_unlock(&c->mu);
}
