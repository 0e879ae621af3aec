/* The DataLoader emulation: one trainer rank's index stream, cut into
 * batches and loaded by worker threads in exactly the order PyTorch's
 * _MultiProcessingDataLoaderIter (torch/utils/data/dataloader.py, 1.13) uses.
 *
 * What PyTorch does, and therefore what this module does:
 *   - batch k holds stream[k*B .. k*B+B) (the last one shorter, or dropped
 *     with drop_last) and goes to worker k % T: the worker queue cycle is a
 *     round robin that restarts at worker 0 every epoch (_reset);
 *   - P*T batches are sent when the epoch starts; afterwards one more is sent
 *     each time the main loop receives a batch, *before* the batch is handed
 *     to the caller (_process_data calls _try_put_index first);
 *   - each worker loads its batches one after the other, in the order they
 *     were sent, and the samples of a batch in stream order;
 *   - the main loop receives batches strictly in batch order (the reorder
 *     buffer, _task_info): batch k is returned only after k-1 was.
 * So the order in which files are opened interleaves across workers the way
 * the real loader's does.  Workers are threads, not processes: the I/O
 * pattern is what matters here.  With T = 0 the caller's thread loads each
 * batch inside cfs_loader_next(), as _SingleProcessDataLoaderIter does.
 *
 * Worker threads persist across epochs; like PyTorch's, their assignment
 * restarts at worker 0 in every epoch either way. */
#ifndef CLAIRFS_LOADER_H
#define CLAIRFS_LOADER_H

#include <stdbool.h>
#include <stdint.h>

/* The worker id the fetch callback sees when T = 0 (the main thread). */
#define CFS_LOADER_MAIN UINT32_MAX

struct cfs_loader_params {
    uint32_t batch;    /* batch_size, >= 1 */
    uint32_t workers;  /* num_workers; 0 loads in the caller's thread */
    uint32_t prefetch; /* prefetch_factor, >= 1 (ignored when workers = 0) */
    bool drop_last;    /* DataLoader(drop_last=True) */
};

/* Load one sample.  Runs in worker `worker`'s thread (or the caller's when
 * T = 0), for the samples of a batch in order.  A negative return ends the
 * batch; cfs_loader_next() returns it when that batch's turn comes. */
typedef int (*cfs_loader_fetch_fn)(void *arg, uint32_t worker, uint64_t batch, uint32_t index);

enum cfs_loader_event {
    CFS_LOADER_SEND,  /* batch handed to a worker's queue */
    CFS_LOADER_YIELD, /* batch returned to the caller of cfs_loader_next() */
};
/* Observes the main loop's decisions, in the caller's thread and in order
 * (tests compare them with PyTorch's). */
typedef void (*cfs_loader_trace_fn)(void *arg, enum cfs_loader_event ev, uint64_t batch,
                                    uint32_t worker);

struct cfs_loader;

/* Batches in an epoch of n samples. */
uint64_t cfs_loader_batch_count(uint64_t n, uint32_t batch, bool drop_last);
/* The worker that loads batch k (k % T; CFS_LOADER_MAIN when T = 0). */
uint32_t cfs_loader_batch_worker(uint64_t k, uint32_t workers);

/* Starts the T worker threads.  trace may be NULL.  Returns 0 or -errno
 * (-EINVAL for a zero batch or prefetch factor). */
int cfs_loader_create(const struct cfs_loader_params *p, cfs_loader_fetch_fn fetch,
                      cfs_loader_trace_fn trace, void *arg, struct cfs_loader **out);
/* Stops the workers after the batch each is loading.  Accepts NULL. */
void cfs_loader_destroy(struct cfs_loader *l);

/* Begin an epoch over stream[0..n), which must stay valid until the epoch
 * ends or the next cfs_loader_start_epoch().  An unfinished previous epoch is
 * abandoned: its batches not yet started are dropped, running ones are
 * waited for.  Sends the first P*T batches. */
int cfs_loader_start_epoch(struct cfs_loader *l, const uint32_t *stream, uint64_t n);

/* Wait for the next batch in order.  Returns 1 and its number in *batch, 0
 * when the epoch is done, or the batch's fetch error (the batch still
 * counts as received, as PyTorch re-raises it from __next__). */
int cfs_loader_next(struct cfs_loader *l, uint64_t *batch);

#endif
