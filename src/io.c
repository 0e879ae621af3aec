/* The I/O engine's front end: submission, cancellation, drain, and the
 * choice of back end (see the essay in clairfs/io.h).  The queues
 * themselves, and what a back end does with a request, are io_queue.c's:
 * this file sits above the back ends and picks one, and they sit above
 * io_queue.c, so that no call goes back up. */
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
    cfs_io__list_push(&io->queue[req->prio], req);
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
        cfs_io__list_remove(&io->queue[req->prio], req);
        req->state_ = CFS_IO_ST_CANCELLED;
        cfs_io__list_push(&io->cancelled, req);
        io->ops->kick(io);
        rc = 0;
    }
    pthread_mutex_unlock(&io->lock);
    return rc;
}

int cfs_io_drain(struct cfs_io *io)
{
    if (cfs_io__in_callback())
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
