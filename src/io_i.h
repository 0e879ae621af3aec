/* Private to the I/O engine: the front end's state and the back-end ops. */
#ifndef CLAIRFS_IO_I_H
#define CLAIRFS_IO_I_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include "clairfs/io.h"
#include "config.h"

enum cfs_io_state {
    CFS_IO_ST_IDLE = 0,
    CFS_IO_ST_QUEUED,
    CFS_IO_ST_CANCELLED, /* on the cancelled list, callback pending */
    CFS_IO_ST_RUNNING,
    CFS_IO_ST_DONE,
};

struct cfs_io_list {
    struct cfs_io_req *head, *tail;
};

struct cfs_io_ops {
    const char *name;
    /* Start threads; on failure a one-line reason in why, nothing to undo. */
    int (*start)(struct cfs_io *io, char *why, size_t whylen);
    /* New work or a cancellation is queued; called with io->lock held. */
    void (*kick)(struct cfs_io *io);
    /* io->stopping is set: finish, join threads, free the back end. */
    void (*stop)(struct cfs_io *io);
};

struct cfs_io {
    const struct cfs_io_ops *ops;
    void *be; /* back-end state */
    struct cfs_io_params p;
    const char *describe;
    char fallback[160];
    bool has_fallback;

    pthread_mutex_t lock;
    pthread_cond_t idle;             /* outstanding reached 0 */
    struct cfs_io_list queue[CFS_IO_NPRIO];
    struct cfs_io_list cancelled;    /* withdrawn, callback pending */
    uint64_t outstanding;            /* submitted, callback not yet returned */
    bool stopping;
};

/* --- io_queue.c: the queues, shared by the front end and the back ends. --- */

/* Under io->lock: append r to l, or take it out of l. */
void cfs_io__list_push(struct cfs_io_list *l, struct cfs_io_req *r);
void cfs_io__list_remove(struct cfs_io_list *l, struct cfs_io_req *r);
/* True on a thread inside a request's callback (cfs_io_drain() refuses). */
bool cfs_io__in_callback(void);
/* Under io->lock: the next request to act on.  A cancelled one first (its
 * callback is due, *cancelled is set), then, if can_start, the oldest
 * request of the highest class, marked running.  NULL when none. */
struct cfs_io_req *cfs_io__next(struct cfs_io *io, bool can_start, bool *cancelled);
/* Under io->lock: move every queued request to the cancelled list. */
void cfs_io__cancel_all(struct cfs_io *io);
/* Without io->lock: set res, run the callback, account for it. */
void cfs_io__complete(struct cfs_io *io, struct cfs_io_req *req, int64_t res);

/* The read loop, shared so both back ends decide alike.  A request has
 * read `got` bytes so far.  cfs_io__iov() describes the next read (into buf
 * and, for a whole-file fetch reaching cap, the scratch byte) and returns
 * the iovec count; after a read of `asked` bytes returned `last` >= 0 (got
 * already counting it), cfs_io__finished() says whether the request is done
 * and with which result. */
int cfs_io__iov(const struct cfs_io_req *req, uint64_t got, unsigned char *scratch,
                struct iovec iov[2], size_t *asked);
bool cfs_io__finished(const struct cfs_io_req *req, uint64_t got, int64_t last, size_t asked,
                      int64_t *res);

/* A fetch that ended with res reports its file's identity (see
 * "Identity" in clairfs/io.h): whole-file fetches that read. */
static inline bool cfs_io__wants_stat(const struct cfs_io_req *req, int64_t res)
{
    return res >= 0 && !(req->flags & CFS_IO_RANGE);
}

/* --- The back ends (io_threads.c, io_uring.c). --- */

extern const struct cfs_io_ops cfs_io_threads_ops;
#if HAVE_IO_URING
extern const struct cfs_io_ops cfs_io_uring_ops;
static inline const struct cfs_io_ops *cfs_io_uring_backend(void)
{
    return &cfs_io_uring_ops;
}
#else
/* Built without liburing: callers see "not supported", no #ifdef needed. */
static inline const struct cfs_io_ops *cfs_io_uring_backend(void)
{
    return NULL;
}
#endif

#endif
