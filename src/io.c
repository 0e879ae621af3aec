/* The I/O engine's front end: request queues by priority, cancellation,
 * drain, and the choice of back end (see the essay in clairfs/io.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "io_i.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

/* Set on engine threads so that cfs_io_drain() from a callback fails
 * instead of waiting for itself. */
static _Thread_local bool in_callback;

static void list_push(struct cfs_io_list *l, struct cfs_io_req *r)
{
    r->next_ = NULL;
    r->prev_ = l->tail;
    if (l->tail)
        l->tail->next_ = r;
    else
        l->head = r;
    l->tail = r;
}

static void list_remove(struct cfs_io_list *l, struct cfs_io_req *r)
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
        list_remove(&io->cancelled, r);
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
            list_remove(&io->queue[c], r);
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
            list_remove(&io->queue[c], r);
            r->state_ = CFS_IO_ST_CANCELLED;
            list_push(&io->cancelled, r);
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

static bool req_valid(const struct cfs_io_req *r)
{
    if (!r || !r->done || (!r->buf && r->cap) || r->prio < 0 || r->prio >= CFS_IO_NPRIO)
        return false;
    if (r->path ? r->path[0] == '/' || r->path[0] == '\0' : r->fd < 0)
        return false;
    if ((r->flags & CFS_IO_RANGE) && r->cap == 0)
        return false;
    return r->flags <= CFS_IO_RANGE && r->cap < SIZE_MAX && r->offset <= INT64_MAX - r->cap - 1;
}

int cfs_io_submit(struct cfs_io *io, struct cfs_io_req *req)
{
    if (!req_valid(req))
        return -EINVAL;
    pthread_mutex_lock(&io->lock);
    if (io->stopping) {
        pthread_mutex_unlock(&io->lock);
        return -ESHUTDOWN;
    }
    req->res = 0;
    req->has_st = false; /* a resubmitted request must not keep an old identity */
    req->state_ = CFS_IO_ST_QUEUED;
    list_push(&io->queue[req->prio], req);
    io->outstanding++;
    io->ops->kick(io);
    pthread_mutex_unlock(&io->lock);
    return 0;
}

int cfs_io_cancel(struct cfs_io *io, struct cfs_io_req *req)
{
    int rc = -EBUSY;
    pthread_mutex_lock(&io->lock);
    if (req->state_ == CFS_IO_ST_QUEUED) {
        list_remove(&io->queue[req->prio], req);
        req->state_ = CFS_IO_ST_CANCELLED;
        list_push(&io->cancelled, req);
        io->ops->kick(io);
        rc = 0;
    }
    pthread_mutex_unlock(&io->lock);
    return rc;
}

int cfs_io_drain(struct cfs_io *io)
{
    if (in_callback)
        return -EDEADLK;
    pthread_mutex_lock(&io->lock);
    while (io->outstanding > 0)
        pthread_cond_wait(&io->idle, &io->lock);
    pthread_mutex_unlock(&io->lock);
    return 0;
}

enum cfs_io_kind cfs_io_kind(const struct cfs_io *io)
{
    return io->ops == &cfs_io_threads_ops ? CFS_IO_THREADS : CFS_IO_URING;
}

const char *cfs_io_describe(const struct cfs_io *io)
{
    return io->describe ? io->describe : io->ops->name;
}

const char *cfs_io_fallback_reason(const struct cfs_io *io)
{
    return io->has_fallback ? io->fallback : NULL;
}

/* FUSE files cannot be read without blocking, so io_uring hands every open
 * and read of them to its kernel workers; measured with bench/bench-io.c
 * over clairfs-pfsemu (2 ms per open, 200 MB/s), that engine fetched 106-116
 * MB/s where the thread pool reached the PFS's 208 MB/s (see io.h). */
static bool source_on_fuse(int source_fd)
{
    struct statfs sf;
    return fstatfs(source_fd, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

int cfs_io_create(const struct cfs_io_params *p, struct cfs_io **out, char *err, size_t errlen)
{
    char why[160] = "";
    int rc = -ENOMEM;
    struct cfs_io *io = calloc(1, sizeof(*io));
    if (!io) {
        snprintf(err, errlen, "io: out of memory");
        return rc;
    }
    io->p = *p;
    if (io->p.depth == 0)
        io->p.depth = 64;
    if (io->p.threads == 0)
        io->p.threads = io->p.depth < 32 ? io->p.depth : 32;
    pthread_mutex_init(&io->lock, NULL);
    pthread_cond_init(&io->idle, NULL);

    if (p->kind == CFS_IO_AUTO && source_on_fuse(p->source_fd)) {
        io->has_fallback = true;
        snprintf(io->fallback, sizeof(io->fallback),
                 "the source is a FUSE file system, where io_uring fetches at half the rate "
                 "of threads");
    } else if (p->kind != CFS_IO_THREADS) {
        const struct cfs_io_ops *uring = cfs_io_uring_backend();
        if (!uring) {
            rc = -ENOTSUP;
            snprintf(why, sizeof(why), "clairfs was built without liburing");
        } else {
            io->ops = uring;
            rc = uring->start(io, why, sizeof(why));
        }
        if (rc == 0)
            goto done;
        if (p->kind == CFS_IO_URING) {
            snprintf(err, errlen, "io=uring: %s", why);
            goto fail;
        }
        io->has_fallback = true;
        snprintf(io->fallback, sizeof(io->fallback), "io_uring unavailable (%s), using threads",
                 why);
        io->describe = NULL;
    }
    io->ops = &cfs_io_threads_ops;
    rc = io->ops->start(io, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, errlen, "io=threads: %s", why);
        goto fail;
    }
done:
    *out = io;
    return 0;
fail:
    pthread_cond_destroy(&io->idle);
    pthread_mutex_destroy(&io->lock);
    free(io);
    return rc;
}

void cfs_io_destroy(struct cfs_io *io)
{
    if (!io)
        return;
    pthread_mutex_lock(&io->lock);
    /* Atomic: back ends poll it without the lock between read steps. */
    __atomic_store_n(&io->stopping, true, __ATOMIC_RELAXED);
    cfs_io__cancel_all(io);
    io->ops->kick(io);
    pthread_mutex_unlock(&io->lock);
    io->ops->stop(io);
    pthread_cond_destroy(&io->idle);
    pthread_mutex_destroy(&io->lock);
    free(io);
}
