/* The thread-pool back end: N workers, each running one fetch at a time
 * with blocking openat + preadv loop + close.  Workers take requests from
 * the front end's queues, so priorities and cancellation behave as with
 * io_uring; the pool size plays the role of the ring's depth. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io_i.h"

struct threads_be {
    pthread_cond_t work;
    uint32_t n;
    pthread_t tid[];
};

/* One request, start to end, in the calling thread: openat, the read loop,
 * fstat, close.  `stopping` (may be NULL) is polled between chunks. */
static int64_t run_request(int source_fd, const bool *stopping, struct cfs_io_req *req)
{
    int fd = req->fd;
    if (req->path) {
        do
            fd = openat(source_fd, req->path, O_RDONLY | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0)
            return -errno;
    }
    unsigned char scratch;
    uint64_t got = 0;
    int64_t res;
    for (;;) {
        struct iovec iov[2];
        size_t asked;
        int cnt = cfs_io__iov(req, got, &scratch, iov, &asked);
        ssize_t n = preadv(fd, iov, cnt, (off_t)(req->offset + got));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            res = -errno;
            break;
        }
        got += (uint64_t)n;
        if (cfs_io__finished(req, got, n, asked, &res))
            break;
        /* Unlocked read: a stale value only delays the stop by one chunk. */
        if (stopping && __atomic_load_n(stopping, __ATOMIC_RELAXED)) {
            res = -ECANCELED;
            break;
        }
    }
    struct stat st;
    if (cfs_io__wants_stat(req, res) && fstat(fd, &st) == 0) {
        req->st = (struct cfs_io_stat){
            .size = (uint64_t)st.st_size, .mtime_sec = st.st_mtim.tv_sec,
            .mtime_nsec = (uint32_t)st.st_mtim.tv_nsec, .ctime_sec = st.st_ctim.tv_sec,
            .ctime_nsec = (uint32_t)st.st_ctim.tv_nsec, .ino = st.st_ino, .dev = st.st_dev,
        };
        req->has_st = true;
    }
    if (req->path)
        close(fd);
    return res;
}

static int64_t fetch(struct cfs_io *io, struct cfs_io_req *req)
{
    return run_request(io->p.source_fd, &io->stopping, req);
}

void cfs_io_run_sync(int source_fd, struct cfs_io_req *req)
{
    req->has_st = false;
    req->res = run_request(source_fd, NULL, req);
}

static void *worker(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-io");
    struct cfs_io *io = arg;
    struct threads_be *be = io->be;
    pthread_mutex_lock(&io->lock);
    for (;;) {
        bool cancelled;
        struct cfs_io_req *req = cfs_io__next(io, true, &cancelled);
        if (!req) {
            if (io->stopping)
                break;
            pthread_cond_wait(&be->work, &io->lock);
            continue;
        }
        pthread_mutex_unlock(&io->lock);
        cfs_io__complete(io, req, cancelled ? -ECANCELED : fetch(io, req));
        pthread_mutex_lock(&io->lock);
    }
    pthread_mutex_unlock(&io->lock);
    return NULL;
}

static void threads_kick(struct cfs_io *io)
{
    struct threads_be *be = io->be;
    if (io->stopping)
        pthread_cond_broadcast(&be->work);
    else
        pthread_cond_signal(&be->work);
}

static void threads_stop(struct cfs_io *io)
{
    struct threads_be *be = io->be;
    for (uint32_t i = 0; i < be->n; i++)
        pthread_join(be->tid[i], NULL);
    pthread_cond_destroy(&be->work);
    free(be);
    io->be = NULL;
}

static int threads_start(struct cfs_io *io, char *why, size_t whylen)
{
    uint32_t want = io->p.threads;
    struct threads_be *be = calloc(1, sizeof(*be) + want * sizeof(pthread_t));
    if (!be) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    pthread_cond_init(&be->work, NULL);
    io->be = be;
    for (; be->n < want; be->n++) {
        int rc = pthread_create(&be->tid[be->n], NULL, worker, io);
        if (rc != 0) {
            snprintf(why, whylen, "cannot start worker thread: %s", strerror(rc));
            pthread_mutex_lock(&io->lock);
            io->stopping = true;
            pthread_cond_broadcast(&be->work);
            pthread_mutex_unlock(&io->lock);
            threads_stop(io);
            io->stopping = false;
            return -rc;
        }
    }
    return 0;
}

const struct cfs_io_ops cfs_io_threads_ops = {
    .name = "threads",
    .start = threads_start,
    .kick = threads_kick,
    .stop = threads_stop,
};
