/* Owned files served from the page cache: an owner stages the files it
 * owns into the kernel's page cache like any other (its own trainer then
 * reads them without a FUSE request), and a peer's request for one is
 * answered with the bytes the kernel gives back (FUSE_NOTIFY_RETRIEVE).
 *
 * Before, owned files were kept out of the page cache so that their bytes
 * stayed in the tier's buffer for peers, and every read of them by the
 * owner's own trainer went through the daemon: in bench-mpi that was most
 * of the daemons' CPU and the slowest epochs (2 nodes, epoch 0: 2.4-2.8 s of
 * daemon CPU, against 1.0 s with owned files staged).
 *
 * A retrieval is asynchronous: the provider (peer thread) asks the kernel
 * and answers -EAGAIN, the peer layer holds the reply back and asks again
 * (peer_defer.c), and the kernel's answer arrives on a FUSE worker
 * (cfs_prefetch_retrieved).  Pages the kernel dropped (memory pressure)
 * make a short answer: the file is "not held" and the peer reads the PFS.
 * The peer checks the bytes against the entry's xxh3, which the cache kept
 * when it staged them.
 *
 * A retrieval keeps its entry pinned until it is handed over or given up:
 * an unpinned kernel entry may be evicted meanwhile, its pages invalidated
 * before the kernel's answer, which then comes back short (a peer fetch
 * fell back to the PFS about one run in eight of mpi_mount_windows).
 *
 * Locking: retrieve_mu guards the list; a leaf (nothing is taken under it,
 * the kernel is asked with it released, a pin is let go after it).  kernel_mu is held while the
 * kernel is asked (only the peer thread asks, so it never waits but for
 * cfs_prefetch_retrieves_stop): the kernel's answer never needs it. */
#include "prefetch_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/cache.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/peer.h"
#include "clairfs/prefetch.h"

/* Retrievals under way or answered and not yet handed to the peer layer:
 * beyond this, "not held" (each holds a file's bytes). */
#define RETRIEVALS_MAX 256u

enum retrieval_state { RETRIEVAL_ASKED, RETRIEVAL_DONE, RETRIEVAL_SHORT };

struct pf_retrieval {
    struct pf_retrieval *next;
    struct cfs_prefetch *pf;
    uint32_t id;
    enum retrieval_state state;
    unsigned chunks_left; /* kernel answers still to come */
    size_t chunk;         /* bytes asked a time (retrieve_max when asked) */
    uint64_t size, got, xxh3;
    char *buf;
    struct cfs_cache_handle h; /* the staged entry's pin */
};

/* Without retrieve_mu (the pin goes back to the cache). */
static void retrieval_free(struct pf_retrieval *r)
{
    cfs_cache_release(r->pf->cache, &r->h);
    free(r->buf);
    free(r);
}

/* Unlink r from the list (retrieve_mu held). */
static void unlink_retrieval(struct cfs_prefetch *pf, struct pf_retrieval *r)
{
    for (struct pf_retrieval **p = &pf->retrievals; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            pf->nretrievals--;
            return;
        }
}

static void retrieved_release(void *arg, struct cfs_peer_view *v)
{
    (void)v;
    retrieval_free(arg);
}

/* Ask the kernel for every chunk of r (r->chunks_left of them); false when
 * it refused the first, so that no answer will come. */
static bool ask_kernel(struct cfs_prefetch *pf, struct pf_retrieval *r)
{
    const struct cfs_kernel_ops *k = atomic_load(&pf->kops);
    size_t chunk = r->chunk;
    unsigned n = (unsigned)((r->size + chunk - 1) / chunk);
    for (unsigned i = 0; i < n; i++) {
        uint64_t off = (uint64_t)i * chunk;
        size_t len = r->size - off < chunk ? (size_t)(r->size - off) : chunk;
        if (k->retrieve(pf->kops_arg, r->id, off, len, r) == 0)
            continue;
        /* The chunks not asked for will never be answered. */
        pthread_mutex_lock(&pf->retrieve_mu);
        r->chunks_left -= n - i;
        r->state = RETRIEVAL_SHORT;
        pthread_mutex_unlock(&pf->retrieve_mu);
        return i > 0;
    }
    return true;
}

bool pf_retrieve_possible(const struct cfs_prefetch *pf)
{
    const struct cfs_kernel_ops *k = atomic_load(&pf->kops);
    return k && k->retrieve && k->retrieve_max && !pf->opts.no_pagecache;
}

int pf_retrieve_provide(struct cfs_prefetch *pf, uint32_t id, struct cfs_cache_handle *h,
                        struct cfs_peer_view *v)
{
    uint64_t size = h->size;
    if (!pf_retrieve_possible(pf) || size == 0) {
        cfs_cache_release(pf->cache, h);
        return -ENOENT;
    }
    pthread_mutex_lock(&pf->retrieve_mu);
    struct pf_retrieval *r = pf->retrievals;
    while (r && r->id != id)
        r = r->next;
    if (r && r->chunks_left > 0) {
        pthread_mutex_unlock(&pf->retrieve_mu);
        cfs_cache_release(pf->cache, h); /* the retrieval in flight holds one */
        return -EAGAIN;
    }
    if (r) {
        /* Answered: hand the bytes over, or say "not held". */
        unlink_retrieval(pf, r);
        pthread_mutex_unlock(&pf->retrieve_mu);
        cfs_cache_release(pf->cache, h);
        if (r->state != RETRIEVAL_DONE || r->got != r->size) {
            cfs_metrics_add(pf->m, CFS_M_PAGECACHE_RETRIEVE_SHORT, 1);
            retrieval_free(r);
            return -ENOENT;
        }
        *v = (struct cfs_peer_view){
            .data = r->buf, .fd = -1, .len = r->size, .xxh3 = r->xxh3, .has_xxh3 = true,
            .release = retrieved_release, .release_arg = r, .priv = r,
        };
        return 0;
    }
    struct pf_retrieval *old = NULL;
    if (pf->nretrievals >= RETRIEVALS_MAX) {
        /* Answers the peer layer gave up waiting for: drop one. */
        old = pf->retrievals;
        while (old && old->chunks_left > 0)
            old = old->next;
        if (!old) {
            pthread_mutex_unlock(&pf->retrieve_mu);
            cfs_cache_release(pf->cache, h);
            return -ENOENT;
        }
        unlink_retrieval(pf, old);
    }
    pthread_mutex_unlock(&pf->retrieve_mu);
    if (old)
        retrieval_free(old);
    r = calloc(1, sizeof(*r));
    if (r)
        r->buf = malloc(size);
    if (!r || !r->buf) {
        free(r);
        cfs_cache_release(pf->cache, h);
        return -ENOENT;
    }
    r->pf = pf;
    r->id = id;
    r->size = size;
    r->xxh3 = h->xxh3;
    r->h = *h; /* the pin is the retrieval's from here */
    r->state = RETRIEVAL_ASKED;
    /* The session and the kops' argument stay while kernel_mu is held
     * and retrieves_off is not set (cfs_prefetch_retrieves_stop). */
    pthread_mutex_lock(&pf->kernel_mu);
    if (pf->retrieves_off) {
        pthread_mutex_unlock(&pf->kernel_mu);
        retrieval_free(r);
        return -ENOENT;
    }
    /* One chunk size for the asking and the answers (it depends on what
     * carries the answers: fs_pagecache.c). */
    r->chunk = atomic_load(&pf->kops)->retrieve_max(pf->kops_arg);
    /* In the list before the kernel is asked: its answer may come first. */
    pthread_mutex_lock(&pf->retrieve_mu);
    r->chunks_left = (unsigned)((size + r->chunk - 1) / r->chunk);
    r->next = pf->retrievals;
    pf->retrievals = r;
    pf->nretrievals++;
    pthread_mutex_unlock(&pf->retrieve_mu);
    cfs_metrics_add(pf->m, CFS_M_PAGECACHE_RETRIEVES, 1);
    bool asked = ask_kernel(pf, r);
    pthread_mutex_unlock(&pf->kernel_mu);
    if (!asked) {
        pthread_mutex_lock(&pf->retrieve_mu);
        unlink_retrieval(pf, r);
        pthread_mutex_unlock(&pf->retrieve_mu);
        cfs_metrics_add(pf->m, CFS_M_PAGECACHE_RETRIEVE_SHORT, 1);
        retrieval_free(r);
        return -ENOENT;
    }
    return -EAGAIN;
}

void cfs_prefetch_retrieved(void *cookie, uint64_t off, const void *data, size_t len)
{
    struct pf_retrieval *r = cookie;
    struct cfs_prefetch *pf = r->pf;
    pthread_mutex_lock(&pf->retrieve_mu);
    if (off <= r->size && len <= r->size - off) {
        memcpy(r->buf + off, data, len);
        r->got += len;
    }
    /* A chunk shorter than asked: the kernel had dropped a page. */
    uint64_t want = r->size - off < r->chunk ? r->size - off : r->chunk;
    if (len != want)
        r->state = RETRIEVAL_SHORT;
    if (r->chunks_left > 0 && --r->chunks_left == 0 && r->state == RETRIEVAL_ASKED)
        r->state = RETRIEVAL_DONE;
    pthread_mutex_unlock(&pf->retrieve_mu);
}

void cfs_prefetch_retrieves_stop(struct cfs_prefetch *pf)
{
    if (!pf)
        return;
    pthread_mutex_lock(&pf->kernel_mu);
    pf->retrieves_off = true;
    pthread_mutex_unlock(&pf->kernel_mu);
}

void pf_retrieve_destroy(struct cfs_prefetch *pf)
{
    /* The session is over: no answer can come any more. */
    while (pf->retrievals) {
        struct pf_retrieval *r = pf->retrievals;
        pf->retrievals = r->next;
        retrieval_free(r);
    }
    pf->nretrievals = 0;
}
