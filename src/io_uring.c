/* The io_uring back end.  One engine thread owns the ring; nobody else
 * touches it, so the ring needs no lock and one io_uring_enter submits the
 * steps of many fetches and waits for the next completions.
 *
 * Each fetch in flight holds a slot (0..depth-1).  With direct descriptors
 * the slot number is also the fetch's index in the registered file table,
 * which is what lets openat and the first read be linked: the read names
 * the file by the slot before the open has run.  The chain stops there on
 * purpose.  A whole-file read asks one byte more than the buffer holds, so
 * it is "short" on every file that fits, and a short read severs a soft
 * link; a hard-linked close would run before we know whether the file needs
 * another read (a large file, a short read, a changed file).  So the close
 * is a separate SQE, queued once the result is known and submitted with the
 * next batch; the callback does not wait for it.
 *
 * A whole-file fetch that read its bytes then takes one more step: a STATX
 * of the file (its identity after the last read, see clairfs/io.h), with
 * the close in the same batch, and the callback runs once both are done.
 *
 * Without direct descriptors (or with no_direct) the steps are plain
 * openat, then readv on the returned fd, then close: the same number of
 * SQEs, one more trip through the engine per fetch.
 *
 * Submitters wake the engine by writing an eventfd that the ring keeps a
 * read armed on, and only while the engine sleeps in io_uring_enter. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "io_i.h"

enum op { OP_OPEN = 1, OP_READ, OP_CLOSE, OP_WAKE, OP_STAT };
#define UD(slot, op) (((uint64_t)(slot) << 8) | (op))
#define UD_WAKE UD(0, OP_WAKE)

enum step { STEP_FREE = 0, STEP_OPEN, STEP_READ, STEP_STAT, STEP_CLOSE };

struct slot {
    struct cfs_io_req *req; /* NULL once the callback has been run */
    enum step step;
    int pending; /* CQEs still to come for this step */
    int fd;      /* plain fd, or the slot number for a direct descriptor */
    bool fixed;  /* fd is a direct descriptor */
    bool opened; /* we opened it: close when done */
    bool retry;  /* the read said -EAGAIN/-EINTR */
    int err;
    uint64_t got;
    int64_t last;
    size_t asked;
    struct iovec iov[2];
    unsigned char scratch;
    int64_t res;      /* STEP_STAT: the fetch's result, reported after the stat */
    struct statx stx; /* STEP_STAT */
};

struct uring_be {
    struct io_uring ring;
    pthread_t tid;
    int efd;
    uint64_t efd_buf;
    bool sleeping; /* under io->lock */
    bool direct;
    uint32_t depth;
    uint32_t inflight;
    uint32_t nfree;
    uint32_t *free; /* stack of free slot numbers */
    struct slot *slots;
    char describe[64];
};

static struct io_uring_sqe *get_sqe(struct uring_be *be)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&be->ring);
    if (!sqe) {
        /* The SQ is sized for every slot's steps; make room anyway. */
        io_uring_submit(&be->ring);
        sqe = io_uring_get_sqe(&be->ring);
    }
    return sqe;
}

static void arm_wake(struct uring_be *be)
{
    struct io_uring_sqe *sqe = get_sqe(be);
    io_uring_prep_read(sqe, be->efd, &be->efd_buf, sizeof(be->efd_buf), 0);
    io_uring_sqe_set_data64(sqe, UD_WAKE);
}

static void prep_read(struct uring_be *be, uint32_t i, unsigned extra_flags)
{
    struct slot *s = &be->slots[i];
    int cnt = cfs_io__iov(s->req, s->got, &s->scratch, s->iov, &s->asked);
    struct io_uring_sqe *sqe = get_sqe(be);
    if (cnt == 1) /* READ skips importing an iovec */
        io_uring_prep_read(sqe, s->fd, s->iov[0].iov_base, (unsigned)s->iov[0].iov_len,
                           s->req->offset + s->got);
    else
        io_uring_prep_readv(sqe, s->fd, s->iov, (unsigned)cnt, s->req->offset + s->got);
    io_uring_sqe_set_flags(sqe, (s->fixed ? IOSQE_FIXED_FILE : 0) | extra_flags);
    io_uring_sqe_set_data64(sqe, UD(i, OP_READ));
    s->step = STEP_READ;
    s->pending++;
}

static void start(struct cfs_io *io, struct uring_be *be, struct cfs_io_req *req)
{
    uint32_t i = be->free[--be->nfree];
    struct slot *s = &be->slots[i];
    *s = (struct slot){.req = req, .fd = req->fd};
    be->inflight++;
    if (!req->path) {
        prep_read(be, i, 0);
        return;
    }
    struct io_uring_sqe *sqe = get_sqe(be);
    s->opened = true;
    s->pending = 1;
    s->step = STEP_OPEN;
    if (be->direct) {
        /* O_CLOEXEC is meaningless for (and refused with) direct descriptors. */
        io_uring_prep_openat_direct(sqe, io->p.source_fd, req->path, O_RDONLY, 0, i);
        io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK);
        io_uring_sqe_set_data64(sqe, UD(i, OP_OPEN));
        s->fd = (int)i;
        s->fixed = true;
        prep_read(be, i, 0);
    } else {
        io_uring_prep_openat(sqe, io->p.source_fd, req->path, O_RDONLY | O_CLOEXEC, 0);
        io_uring_sqe_set_data64(sqe, UD(i, OP_OPEN));
    }
}

static void release(struct uring_be *be, uint32_t i)
{
    be->slots[i].step = STEP_FREE;
    be->free[be->nfree++] = i;
    be->inflight--;
}

static void prep_close(struct uring_be *be, uint32_t i)
{
    struct slot *s = &be->slots[i];
    struct io_uring_sqe *sqe = get_sqe(be);
    if (s->fixed)
        io_uring_prep_close_direct(sqe, (unsigned)i);
    else
        io_uring_prep_close(sqe, s->fd);
    io_uring_sqe_set_data64(sqe, UD(i, OP_CLOSE));
}

/* The read is over with result res: stat the file, and close it if we
 * opened it.  A plain fd is stat'ed through itself, so the close is
 * hard-linked after the STATX (it runs whatever the STATX answers); a
 * direct descriptor cannot be named by statx: the path, beside the close. */
static void start_stat(struct cfs_io *io, struct uring_be *be, uint32_t i, int64_t res)
{
    struct slot *s = &be->slots[i];
    /* Both SQEs in one submission: a link must not be cut by get_sqe's
     * flush of a full queue. */
    if (io_uring_sq_space_left(&be->ring) < 2)
        io_uring_submit(&be->ring);
    struct io_uring_sqe *sqe = get_sqe(be);
    if (s->fixed)
        io_uring_prep_statx(sqe, io->p.source_fd, s->req->path, 0, STATX_BASIC_STATS, &s->stx);
    else
        io_uring_prep_statx(sqe, s->fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &s->stx);
    io_uring_sqe_set_data64(sqe, UD(i, OP_STAT));
    s->res = res;
    s->step = STEP_STAT;
    s->pending = 1;
    if (s->opened) {
        if (!s->fixed)
            io_uring_sqe_set_flags(sqe, IOSQE_IO_HARDLINK);
        prep_close(be, i);
        s->pending = 2;
    }
}

static void take_stat(struct slot *s)
{
    const unsigned need = STATX_SIZE | STATX_MTIME | STATX_CTIME | STATX_INO;
    const struct statx *x = &s->stx;
    if ((x->stx_mask & need) != need)
        return;
    s->req->st = (struct cfs_io_stat){
        .size = x->stx_size, .mtime_sec = x->stx_mtime.tv_sec,
        .mtime_nsec = x->stx_mtime.tv_nsec, .ctime_sec = x->stx_ctime.tv_sec,
        .ctime_nsec = x->stx_ctime.tv_nsec, .ino = x->stx_ino,
        .dev = makedev(x->stx_dev_major, x->stx_dev_minor),
    };
    s->req->has_st = true;
}

/* Every CQE of the slot's current step has arrived: take the next step. */
static void advance(struct cfs_io *io, struct uring_be *be, uint32_t i)
{
    struct slot *s = &be->slots[i];
    int64_t res;
    if (s->step == STEP_CLOSE) {
        release(be, i);
        return;
    }
    if (s->step == STEP_STAT) {
        struct cfs_io_req *req = s->req;
        s->req = NULL;
        release(be, i);
        cfs_io__complete(io, req, s->res);
        return;
    }
    if (s->err) {
        res = s->err;
    } else if (s->step == STEP_OPEN) {
        prep_read(be, i, 0); /* plain mode: the fd is known now */
        return;
    } else if (s->retry) {
        s->retry = false;
        prep_read(be, i, 0);
        return;
    } else if (!cfs_io__finished(s->req, s->got, s->last, s->asked, &res)) {
        if (!__atomic_load_n(&io->stopping, __ATOMIC_RELAXED)) {
            prep_read(be, i, 0);
            return;
        }
        res = -ECANCELED;
    }
    if (cfs_io__wants_stat(s->req, res)) {
        start_stat(io, be, i, res);
        return;
    }
    struct cfs_io_req *req = s->req;
    s->req = NULL;
    if (s->opened) {
        prep_close(be, i);
        s->step = STEP_CLOSE;
        s->pending = 1;
    } else {
        release(be, i);
    }
    cfs_io__complete(io, req, res);
}

static void handle(struct cfs_io *io, struct uring_be *be, uint64_t ud, int res)
{
    uint32_t i = (uint32_t)(ud >> 8);
    struct slot *s = &be->slots[i];
    switch (ud & 0xff) {
    case OP_WAKE:
        arm_wake(be);
        return;
    case OP_OPEN:
        if (res < 0) {
            s->err = res;
            s->opened = false;
        } else if (!s->fixed) {
            s->fd = res;
        }
        break;
    case OP_READ:
        if (res == -ECANCELED && s->err)
            break; /* the linked open failed; its error stands */
        if (res == -EAGAIN || res == -EINTR)
            s->retry = true;
        else if (res < 0)
            s->err = res;
        else {
            s->last = res;
            s->got += (uint64_t)res;
        }
        break;
    case OP_STAT:
        if (res == 0)
            take_stat(s); /* else no identity: the caller decides */
        break;
    case OP_CLOSE:
        break; /* read-only files: nothing to lose on a failed close */
    }
    if (--s->pending == 0)
        advance(io, be, i);
}

static void *engine(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-io-uring");
    struct cfs_io *io = arg;
    struct uring_be *be = io->be;
    arm_wake(be);
    for (;;) {
        struct cfs_io_req *cancelled = NULL, **tail = &cancelled;
        pthread_mutex_lock(&io->lock);
        for (;;) {
            bool c;
            struct cfs_io_req *r = cfs_io__next(io, be->nfree > 0 && !io->stopping, &c);
            if (!r)
                break;
            if (c) {
                *tail = r;
                tail = &r->next_;
            } else {
                start(io, be, r);
            }
        }
        if (cancelled) {
            /* Their callbacks may submit, and stopping may be complete
             * after them: look at the queues again before sleeping. */
            pthread_mutex_unlock(&io->lock);
            while (cancelled) {
                struct cfs_io_req *r = cancelled;
                cancelled = r->next_;
                cfs_io__complete(io, r, -ECANCELED);
            }
            continue;
        }
        if (io->stopping && be->inflight == 0) {
            pthread_mutex_unlock(&io->lock);
            break;
        }
        __atomic_store_n(&be->sleeping, true, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&io->lock);
        int rc = io_uring_submit_and_wait(&be->ring, 1);
        /* Awake: callbacks submitting from here need not write the eventfd.
         * Unlocked, as a stale true only costs one spare wake-up; it is set
         * to true under the lock, after the queues were seen empty. */
        __atomic_store_n(&be->sleeping, false, __ATOMIC_RELAXED);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            /* Cannot happen with a sane ring; do not spin. */
            usleep(1000);
        }
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&be->ring, head, cqe)
        {
            handle(io, be, cqe->user_data, cqe->res);
            n++;
        }
        io_uring_cq_advance(&be->ring, n);
    }
    return NULL;
}

static void uring_kick(struct cfs_io *io)
{
    struct uring_be *be = io->be;
    if (__atomic_load_n(&be->sleeping, __ATOMIC_RELAXED)) {
        __atomic_store_n(&be->sleeping, false, __ATOMIC_RELAXED);
        uint64_t one = 1;
        /* Fails only if the counter would overflow: then a wake-up is pending. */
        (void)!write(be->efd, &one, sizeof(one));
    }
}

static void free_be(struct uring_be *be, bool ring)
{
    if (ring)
        io_uring_queue_exit(&be->ring);
    if (be->efd >= 0)
        close(be->efd);
    free(be->slots);
    free(be->free);
    free(be);
}

static void uring_stop(struct cfs_io *io)
{
    struct uring_be *be = io->be;
    pthread_join(be->tid, NULL);
    free_be(be, true);
    io->be = NULL;
}

static bool probe_ops(struct io_uring *ring, char *why, size_t whylen)
{
    static const struct {
        int op;
        const char *name;
    } need[] = {
        {IORING_OP_OPENAT, "OPENAT"},
        {IORING_OP_READV, "READV"},
        {IORING_OP_READ, "READ"},
        {IORING_OP_CLOSE, "CLOSE"},
        {IORING_OP_STATX, "STATX"},
    };
    struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
    if (!probe) {
        snprintf(why, whylen, "kernel cannot probe io_uring opcodes");
        return false;
    }
    bool ok = true;
    for (size_t k = 0; k < sizeof(need) / sizeof(need[0]) && ok; k++) {
        if (!io_uring_opcode_supported(probe, need[k].op)) {
            snprintf(why, whylen, "kernel lacks IORING_OP_%s", need[k].name);
            ok = false;
        }
    }
    io_uring_free_probe(probe);
    return ok;
}

/* Direct descriptors need a sparse file table (5.19), openat/close into it
 * (5.15), and a linked read that resolves the slot only when it runs (file
 * assignment deferred to issue time): try all three on the source directory
 * itself.  Reading a directory gives -EISDIR; -EBADF means the read looked
 * the slot up before the open had filled it. */
static bool probe_direct(struct cfs_io *io, struct uring_be *be)
{
    static char byte;
    if (io_uring_register_files_sparse(&be->ring, be->depth) < 0)
        return false;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&be->ring);
    io_uring_prep_openat_direct(sqe, io->p.source_fd, ".", O_RDONLY | O_DIRECTORY, 0, 0);
    io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK);
    io_uring_sqe_set_data64(sqe, 0);
    sqe = io_uring_get_sqe(&be->ring);
    io_uring_prep_read(sqe, 0, &byte, 1, 0);
    io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK);
    io_uring_sqe_set_data64(sqe, 1);
    sqe = io_uring_get_sqe(&be->ring);
    io_uring_prep_close_direct(sqe, 0);
    io_uring_sqe_set_data64(sqe, 2);
    static const int want[3] = {0, -EISDIR, 0};
    bool ok = io_uring_submit_and_wait(&be->ring, 3) == 3;
    for (int k = 0; k < 3; k++) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&be->ring, &cqe) < 0) {
            ok = false;
            break;
        }
        ok = ok && cqe->user_data < 3 && cqe->res == want[cqe->user_data];
        io_uring_cqe_seen(&be->ring, cqe);
    }
    if (!ok)
        io_uring_unregister_files(&be->ring);
    return ok;
}

static int uring_start(struct cfs_io *io, char *why, size_t whylen)
{
    int rc = -ENOMEM;
    bool ring = false;
    struct uring_be *be = calloc(1, sizeof(*be));
    if (!be) {
        snprintf(why, whylen, "out of memory");
        return rc;
    }
    be->efd = -1;
    be->depth = io->p.depth;
    be->slots = calloc(be->depth, sizeof(*be->slots));
    be->free = calloc(be->depth, sizeof(*be->free));
    if (!be->slots || !be->free) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < be->depth; i++)
        be->free[i] = be->depth - 1 - i;
    be->nfree = be->depth;

    /* Room for every slot's open + read and the wake-up read. */
    rc = io_uring_queue_init(2 * be->depth + 2, &be->ring, 0);
    if (rc < 0) {
        snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-rc));
        goto fail;
    }
    ring = true;
    if (!probe_ops(&be->ring, why, whylen)) {
        rc = -ENOTSUP;
        goto fail;
    }
    be->direct = !io->p.no_direct && probe_direct(io, be);
    snprintf(be->describe, sizeof(be->describe), "io_uring (%s descriptors%s)",
             be->direct ? "direct" : "plain",
             be->direct || io->p.no_direct ? "" : ", kernel lacks direct ones");
    be->efd = eventfd(0, EFD_CLOEXEC);
    if (be->efd < 0) {
        rc = -errno;
        snprintf(why, whylen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    io->be = be;
    rc = -pthread_create(&be->tid, NULL, engine, io);
    if (rc < 0) {
        snprintf(why, whylen, "cannot start engine thread: %s", strerror(-rc));
        io->be = NULL;
        goto fail;
    }
    io->describe = be->describe;
    return 0;
fail:
    free_be(be, ring);
    return rc;
}

const struct cfs_io_ops cfs_io_uring_ops = {
    .name = "io_uring",
    .start = uring_start,
    .kick = uring_kick,
    .stop = uring_stop,
};
