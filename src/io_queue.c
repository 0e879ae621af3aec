/* The engine's request queues and what every back end does with a
 * request: take the next one (a cancelled one first, then the oldest of
 * the highest class), complete it, and the read loop that decides how much
 * to read next and when a fetch is done.  Apart from the front end (io.c)
 * because both back ends (io_threads.c, io_uring.c) call these while the
 * front end calls the back ends through their ops: with the shared part
 * below both, calls go one way only (io.c -> back end -> io_queue.c). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "io_i.h"

/* Set on engine threads so that cfs_io_drain() from a callback fails
 * instead of waiting for itself. */
static _Thread_local bool in_callback;

bool cfs_io__in_callback(void)
{
    return in_callback;
}

void cfs_io__list_push(struct cfs_io_list *l, struct cfs_io_req *r)
{
    r->next_ = NULL;
    r->prev_ = l->tail;
    if (l->tail)
        l->tail->next_ = r;
    else
        l->head = r;
    l->tail = r;
}

void cfs_io__list_remove(struct cfs_io_list *l, struct cfs_io_req *r)
{
    if (r->prev_)
        r->prev_->next_ = r->next_;
    else
        l->head = r->next_;
    if (r->next_)
        r->next_->prev_ = r->prev_;
    else
        l->tail = r->prev_;
    r->next_ = r->prev_ = NULL;
}

struct cfs_io_req *cfs_io__next(struct cfs_io *io, bool can_start, bool *cancelled)
{
    struct cfs_io_req *r = io->cancelled.head;
    if (r) {
        cfs_io__list_remove(&io->cancelled, r);
        r->state_ = CFS_IO_ST_RUNNING;
        *cancelled = true;
        return r;
    }
    *cancelled = false;
    if (!can_start)
        return NULL;
    for (int c = 0; c < CFS_IO_NPRIO; c++) {
        r = io->queue[c].head;
        if (r) {
            cfs_io__list_remove(&io->queue[c], r);
            r->state_ = CFS_IO_ST_RUNNING;
            return r;
        }
    }
    return NULL;
}

void cfs_io__cancel_all(struct cfs_io *io)
{
    for (int c = 0; c < CFS_IO_NPRIO; c++) {
        struct cfs_io_req *r;
        while ((r = io->queue[c].head)) {
            cfs_io__list_remove(&io->queue[c], r);
            r->state_ = CFS_IO_ST_CANCELLED;
            cfs_io__list_push(&io->cancelled, r);
        }
    }
}

void cfs_io__complete(struct cfs_io *io, struct cfs_io_req *req, int64_t res)
{
    req->res = res;
    req->state_ = CFS_IO_ST_DONE;
    in_callback = true;
    req->done(req);
    in_callback = false;
    /* req may be gone now. */
    pthread_mutex_lock(&io->lock);
    if (--io->outstanding == 0)
        pthread_cond_broadcast(&io->idle);
    pthread_mutex_unlock(&io->lock);
}

/* A whole-file fetch reads up to cap + 1 bytes, the last into a scratch
 * byte, so that a file longer than the buffer shows. */
static uint64_t read_limit(const struct cfs_io_req *req)
{
    return (req->flags & CFS_IO_RANGE) ? req->cap : (uint64_t)req->cap + 1;
}

int cfs_io__iov(const struct cfs_io_req *req, uint64_t got, unsigned char *scratch,
                struct iovec iov[2], size_t *asked)
{
    uint64_t n = read_limit(req) - got;
    if (n > CFS_IO_CHUNK)
        n = CFS_IO_CHUNK;
    *asked = n;
    int cnt = 0;
    if (got < req->cap) {
        uint64_t in_buf = req->cap - got < n ? req->cap - got : n;
        iov[cnt++] = (struct iovec){(char *)req->buf + got, in_buf};
        n -= in_buf;
    }
    if (n > 0)
        iov[cnt++] = (struct iovec){scratch, 1};
    return cnt;
}

bool cfs_io__finished(const struct cfs_io_req *req, uint64_t got, int64_t last, size_t asked,
                      int64_t *res)
{
    if (!(req->flags & CFS_IO_RANGE) && got > req->cap) {
        *res = -EFBIG;
        return true;
    }
    *res = (int64_t)got;
    if (last == 0 || got == read_limit(req))
        return true;
    /* Short, and the catalog's size reached: that is EOF, skip the probe. */
    return (size_t)last < asked && req->size_hint == got;
}
