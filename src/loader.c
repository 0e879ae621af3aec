/* The DataLoader emulation behind clairfs-bench (clairfs/loader.h): a
 * trainer rank's stream cut into batches and loaded by worker threads in
 * the order PyTorch's multiprocessing loader opens files, so that a
 * benchmark shows clairfs the interleaving a real trainer makes.  No I/O
 * here: the caller's fetch callback does it.
 *
 * One lock over the whole loader, a condition per worker to wake it and
 * one for the main loop: the state is a handful of counters (what was
 * sent, what was received, which batches are done), and the round robin
 * makes a worker's queue a counter too (below), so there are no queues to
 * keep in step with PyTorch's, only its arithmetic. */
#include "clairfs/loader.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* A worker needs no queue of its own: with the round robin, the batches it
 * is sent are w, w+T, w+2T, ... in that order, so "the next batch in my
 * queue" is a counter and "my queue is not empty" is counter < send_idx.
 * The batches between rcvd_idx and send_idx (at most P*T) each own a slot
 * of the ring `done`, indexed by batch % (P*T): batch k+P*T is not sent
 * before k has been received, so a slot is never shared. */

struct slot {
    bool done;
    int rc;
};

struct worker {
    struct cfs_loader *l;
    uint32_t id;
    pthread_t thread;
    pthread_cond_t wake; /* a batch was sent to this worker, or stop */
    bool started;
};

struct cfs_loader {
    struct cfs_loader_params p;
    cfs_loader_fetch_fn fetch;
    cfs_loader_trace_fn trace;
    void *arg;

    pthread_mutex_t lock;
    pthread_cond_t arrived; /* a batch finished (main waits on it) */
    struct worker *workers;
    struct slot *ring;
    uint32_t window; /* P*T */

    /* Epoch state, under lock. */
    const uint32_t *stream;
    uint64_t n, nbatches;
    uint64_t send_idx, rcvd_idx;
    uint64_t generation; /* bumped per epoch: workers restart their counter */
    uint32_t busy;       /* workers inside a batch */
    bool cancel;         /* epoch abandoned: start no more batches */
    bool stop;
};

uint64_t cfs_loader_batch_count(uint64_t n, uint32_t batch, bool drop_last)
{
    if (batch == 0)
        return 0;
    return drop_last ? n / batch : (n + batch - 1) / batch;
}

uint32_t cfs_loader_batch_worker(uint64_t k, uint32_t workers)
{
    return workers ? (uint32_t)(k % workers) : CFS_LOADER_MAIN;
}

/* Samples of batch k, in stream order; the first error ends the batch as an
 * exception in a PyTorch worker ends its fetch. */
static int load_batch(struct cfs_loader *l, const uint32_t *stream, uint64_t n, uint64_t k,
                      uint32_t worker)
{
    uint64_t first = k * l->p.batch;
    uint64_t end = first + l->p.batch < n ? first + l->p.batch : n;
    for (uint64_t i = first; i < end; i++) {
        int rc = l->fetch(l->arg, worker, k, stream[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void *worker_main(void *argp)
{
    pthread_setname_np(pthread_self(), "cfs-loader");
    struct worker *w = argp;
    struct cfs_loader *l = w->l;
    uint64_t generation = 0, next = 0;

    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        if (generation != l->generation) {
            generation = l->generation;
            next = w->id;
        }
        if (l->cancel || next >= l->send_idx) {
            pthread_cond_wait(&w->wake, &l->lock);
            continue;
        }
        uint64_t k = next;
        const uint32_t *stream = l->stream;
        uint64_t n = l->n;
        l->busy++;
        pthread_mutex_unlock(&l->lock);

        int rc = load_batch(l, stream, n, k, w->id);

        pthread_mutex_lock(&l->lock);
        l->busy--;
        struct slot *s = &l->ring[k % l->window];
        s->done = true;
        s->rc = rc;
        next = k + l->p.workers;
        pthread_cond_broadcast(&l->arrived);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* _try_put_index(): send the next batch, if any, round robin. Under lock. */
static void try_put(struct cfs_loader *l)
{
    if (l->send_idx >= l->nbatches)
        return;
    uint64_t k = l->send_idx++;
    uint32_t w = cfs_loader_batch_worker(k, l->p.workers);
    l->ring[k % l->window].done = false;
    if (l->trace)
        l->trace(l->arg, CFS_LOADER_SEND, k, w);
    pthread_cond_signal(&l->workers[w].wake);
}

int cfs_loader_create(const struct cfs_loader_params *p, cfs_loader_fetch_fn fetch,
                      cfs_loader_trace_fn trace, void *arg, struct cfs_loader **out)
{
    if (p->batch == 0 || (p->workers > 0 && p->prefetch == 0) || !fetch)
        return -EINVAL;
    if (p->workers > 0 && (uint64_t)p->prefetch * p->workers > UINT32_MAX)
        return -EINVAL;
    int rc = -ENOMEM;
    struct cfs_loader *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->p = *p;
    l->fetch = fetch;
    l->trace = trace;
    l->arg = arg;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->arrived, NULL);
    if (p->workers == 0) {
        *out = l;
        return 0;
    }
    l->window = p->prefetch * p->workers;
    l->ring = calloc(l->window, sizeof(*l->ring));
    l->workers = calloc(p->workers, sizeof(*l->workers));
    if (!l->ring || !l->workers)
        goto fail;
    for (uint32_t i = 0; i < p->workers; i++) {
        struct worker *w = &l->workers[i];
        w->l = l;
        w->id = i;
        pthread_cond_init(&w->wake, NULL);
    }
    for (uint32_t i = 0; i < p->workers; i++) {
        rc = -pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i]);
        if (rc < 0)
            goto fail;
        l->workers[i].started = true;
    }
    *out = l;
    return 0;
fail:
    cfs_loader_destroy(l);
    return rc;
}

void cfs_loader_destroy(struct cfs_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    for (uint32_t i = 0; l->workers && i < l->p.workers; i++)
        pthread_cond_signal(&l->workers[i].wake);
    pthread_mutex_unlock(&l->lock);
    for (uint32_t i = 0; l->workers && i < l->p.workers; i++) {
        if (l->workers[i].started)
            pthread_join(l->workers[i].thread, NULL);
        pthread_cond_destroy(&l->workers[i].wake);
    }
    pthread_cond_destroy(&l->arrived);
    pthread_mutex_destroy(&l->lock);
    free(l->workers);
    free(l->ring);
    free(l);
}

int cfs_loader_start_epoch(struct cfs_loader *l, const uint32_t *stream, uint64_t n)
{
    pthread_mutex_lock(&l->lock);
    l->cancel = true;
    while (l->busy > 0)
        pthread_cond_wait(&l->arrived, &l->lock);
    l->cancel = false;
    l->stream = stream;
    l->n = n;
    l->nbatches = cfs_loader_batch_count(n, l->p.batch, l->p.drop_last);
    l->send_idx = l->rcvd_idx = 0;
    l->generation++;
    if (l->p.workers > 0)
        for (uint32_t i = 0; i < l->window; i++)
            try_put(l);
    pthread_mutex_unlock(&l->lock);
    return 0;
}

/* _SingleProcessDataLoaderIter: draw the batch, load it here, return it. */
static int next_in_caller(struct cfs_loader *l, uint64_t *batch)
{
    if (l->rcvd_idx >= l->nbatches)
        return 0;
    uint64_t k = l->rcvd_idx++;
    if (l->trace)
        l->trace(l->arg, CFS_LOADER_SEND, k, CFS_LOADER_MAIN);
    int rc = load_batch(l, l->stream, l->n, k, CFS_LOADER_MAIN);
    if (l->trace)
        l->trace(l->arg, CFS_LOADER_YIELD, k, CFS_LOADER_MAIN);
    *batch = k;
    return rc < 0 ? rc : 1;
}

int cfs_loader_next(struct cfs_loader *l, uint64_t *batch)
{
    if (l->p.workers == 0)
        return next_in_caller(l, batch);

    pthread_mutex_lock(&l->lock);
    if (l->rcvd_idx >= l->nbatches) {
        pthread_mutex_unlock(&l->lock);
        return 0;
    }
    uint64_t k = l->rcvd_idx;
    struct slot *s = &l->ring[k % l->window];
    while (!s->done)
        pthread_cond_wait(&l->arrived, &l->lock);
    int rc = s->rc;
    /* _process_data: count it received, send the next, then hand it over. */
    l->rcvd_idx++;
    try_put(l);
    if (l->trace)
        l->trace(l->arg, CFS_LOADER_YIELD, k, cfs_loader_batch_worker(k, l->p.workers));
    pthread_mutex_unlock(&l->lock);
    *batch = k;
    return rc < 0 ? rc : 1;
}
