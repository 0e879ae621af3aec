/* The eviction heaps of the cache tiers: one max-heap of entries per tier
 * on centry.key (larger goes first), each entry keeping its position so it
 * can be removed or re-keyed in place.
 *
 * Place in the cache module's layer order (src/cache_i.h): below the core
 * (src/cache.c), which computes the keys and decides who is a member; this
 * file only orders what it is given and calls nothing else. */
#include "cache_i.h"

#include <errno.h>
#include <stdlib.h>


static void heap_set(struct cheap *h, uint32_t i, struct centry *e)
{
    h->a[i] = e;
    e->heap_pos = (int32_t)i;
}

static void heap_up(struct cheap *h, uint32_t i)
{
    struct centry *e = h->a[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (h->a[parent]->key >= e->key)
            break;
        heap_set(h, i, h->a[parent]);
        i = parent;
    }
    heap_set(h, i, e);
}

void cache_heap_down(struct cheap *h, uint32_t i)
{
    struct centry *e = h->a[i];
    for (;;) {
        uint32_t l = 2 * i + 1, best = i;
        uint64_t bkey = e->key;
        if (l < h->n && h->a[l]->key > bkey) {
            best = l;
            bkey = h->a[l]->key;
        }
        if (l + 1 < h->n && h->a[l + 1]->key > bkey)
            best = l + 1;
        if (best == i)
            break;
        heap_set(h, i, h->a[best]);
        i = best;
    }
    heap_set(h, i, e);
}

void cache_heap_fix(struct cheap *h, struct centry *e)
{
    heap_up(h, (uint32_t)e->heap_pos);
    cache_heap_down(h, (uint32_t)e->heap_pos);
}

int cache_heap_reserve(struct cheap *h, uint64_t n)
{
    if (n <= h->cap)
        return 0;
    if (n > INT32_MAX)
        return -ENOMEM;
    uint32_t cap = h->cap ? h->cap : 64;
    while (cap < n)
        cap = cap > INT32_MAX / 2 ? INT32_MAX : cap * 2;
    struct centry **a = realloc(h->a, cap * sizeof(*a));
    if (!a)
        return -ENOMEM;
    h->a = a;
    h->cap = cap;
    return 0;
}

void cache_heap_push(struct cheap *h, struct centry *e)
{
    heap_set(h, h->n++, e);
    heap_up(h, h->n - 1);
}

void cache_heap_remove(struct cheap *h, struct centry *e)
{
    uint32_t i = (uint32_t)e->heap_pos;
    e->heap_pos = -1;
    h->n--;
    if (i == h->n)
        return;
    heap_set(h, i, h->a[h->n]);
    cache_heap_fix(h, h->a[i]);
}
