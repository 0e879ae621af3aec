/* FUSE over io_uring on libfuse 3.14's custom I/O (fuse_ring.h says why
 * and what).  The kernel's side is Linux's fs/fuse/dev_uring.c: each ring
 * entry is a header (the request's fuse_in_header, its opcode's own header,
 * and the entry's commit id and payload size) and a payload buffer; a
 * REGISTER command hands an entry to the kernel, which completes it with a
 * request; COMMIT_AND_FETCH returns the reply in the same buffers and hands
 * the entry back.  The ring is ready, and the kernel sends requests there
 * instead of /dev/fuse, once every possible CPU's queue has an entry.
 *
 * libfuse decodes a request from one contiguous buffer (header, opcode
 * header, payload), so each entry's payload buffer starts a page into its
 * allocation and the two headers are copied into the page before it: the
 * payload itself is never copied.  The filesystem's handlers reply before
 * they return (fs.h); the reply reaches the session's writev (or
 * splice_send, for a reply spliced from an SSD entry's file;
 * fuse_ring_io.c) on the thread that dispatched the request, which the
 * thread-local ring_current names, so that a reply is matched to its entry
 * without a table.  Only a queue's own thread submits to its ring (see
 * ring_submit_cmd). */
#include "fuse_ring_i.h"

#if RING_BUILT
/* The size of an opcode's own header ahead of its payload on the ring
 * (the kernel's in_args[0]), or -1 for an opcode this module does not
 * know (answered ENOSYS). */
static int op_size(unsigned opcode)
{
    switch (opcode) {
    case FUSE_LOOKUP:
    case FUSE_READLINK:
    case FUSE_SYMLINK:
    case FUSE_UNLINK:
    case FUSE_RMDIR:
    case FUSE_STATFS:
    case FUSE_REMOVEXATTR:
        return 0; /* the kernel sends an empty header ahead of the names */
    case FUSE_GETATTR:
        return sizeof(struct fuse_getattr_in);
    case FUSE_SETATTR:
        return sizeof(struct fuse_setattr_in);
    case FUSE_MKNOD:
        return sizeof(struct fuse_mknod_in);
    case FUSE_MKDIR:
        return sizeof(struct fuse_mkdir_in);
    case FUSE_RENAME:
        return sizeof(struct fuse_rename_in);
    case FUSE_RENAME2:
        return sizeof(struct fuse_rename2_in);
    case FUSE_LINK:
        return sizeof(struct fuse_link_in);
    case FUSE_OPEN:
    case FUSE_OPENDIR:
        return sizeof(struct fuse_open_in);
    case FUSE_READ:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
        return sizeof(struct fuse_read_in);
    case FUSE_WRITE:
        return sizeof(struct fuse_write_in);
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
        return sizeof(struct fuse_release_in);
    case FUSE_FSYNC:
    case FUSE_FSYNCDIR:
        return sizeof(struct fuse_fsync_in);
    case FUSE_SETXATTR:
        return FUSE_COMPAT_SETXATTR_IN_SIZE; /* no FUSE_SETXATTR_EXT asked */
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
        return sizeof(struct fuse_getxattr_in);
    case FUSE_FLUSH:
        return sizeof(struct fuse_flush_in);
    case FUSE_GETLK:
    case FUSE_SETLK:
    case FUSE_SETLKW:
        return sizeof(struct fuse_lk_in);
    case FUSE_ACCESS:
        return sizeof(struct fuse_access_in);
    case FUSE_CREATE:
        return sizeof(struct fuse_create_in);
    case FUSE_BMAP:
        return sizeof(struct fuse_bmap_in);
    case FUSE_IOCTL:
        return sizeof(struct fuse_ioctl_in);
    case FUSE_POLL:
        return sizeof(struct fuse_poll_in);
    case FUSE_NOTIFY_REPLY:
        /* A retrieve's answer: the kernel sends it with an empty header
         * (fs/fuse/dev.c fuse_retrieve: fuse_set_zero_arg0, in_args[1] the
         * fuse_notify_retrieve_in, in_args[2] the pages), so on the ring
         * op_in is left as the entry's previous request had it and the
         * fuse_notify_retrieve_in leads the payload, as it follows the
         * in-header over /dev/fuse.  Taking op_in for it handed libfuse a
         * stale READ's offset and size and the data 40 bytes late: every
         * retrieve over the ring was lost. */
        return 0;
    case FUSE_FALLOCATE:
        return sizeof(struct fuse_fallocate_in);
    case FUSE_LSEEK:
        return sizeof(struct fuse_lseek_in);
    case FUSE_COPY_FILE_RANGE:
        return sizeof(struct fuse_copy_file_range_in);
    default:
        return -1;
    }
}

/* Requests whose handlers never wait for I/O: answered on the ring's
 * thread.  The rest may wait for the PFS or the source. */
static bool answered_inline(unsigned opcode)
{
    switch (opcode) {
    case FUSE_IOCTL:
    case FUSE_GETATTR:
    case FUSE_LOOKUP:
    case FUSE_FLUSH:
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_STATFS:
    case FUSE_ACCESS:
    case FUSE_OPENDIR:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
        return true;
    default:
        return false;
    }
}

/* A READ the filesystem answers from memory (a RAM tier's bytes): the
 * hand-off to a worker and back would cost more than the copy. */
static bool read_never_waits(const struct cfs_fuse_ring *r, const struct ring_ent *e)
{
    struct cfs_fuse_ring_slot *slot = r->slot;
    if (!slot || !slot->read_never_waits)
        return false;
    struct fuse_read_in rin;
    memcpy(&rin, e->hdr->op_in, sizeof(rin));
    return slot->read_never_waits(slot, rin.fh);
}

#endif

_Thread_local struct ring_current ring_current;
/* The queue whose ring thread this is: the only thread that submits to
 * that ring. */
static _Thread_local struct ring_queue *ring_thread_of;

/* ---- the ring ------------------------------------------------------------- */

#if RING_BUILT

static unsigned possible_cpus(void)
{
    /* The kernel keeps a queue for every possible CPU (nr_cpu_ids). */
    unsigned last = 0;
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    if (f) {
        char line[256];
        if (fgets(line, sizeof(line), f)) {
            char *dash = strrchr(line, '-'), *comma = strrchr(line, ',');
            const char *tail = dash && (!comma || dash > comma) ? dash + 1 : comma ? comma + 1 : line;
            last = (unsigned)strtoul(tail, NULL, 10);
        }
        fclose(f);
    } else {
        long n = sysconf(_SC_NPROCESSORS_CONF);
        last = n > 0 ? (unsigned)n - 1 : 0;
    }
    return last + 1;
}

static void prep_cmd(struct ring_ent *e, struct io_uring_sqe *sqe, unsigned cmd)
{
    memset(sqe, 0, 128); /* SQE128: the command area is the second half */
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->flags = IOSQE_FIXED_FILE;
    sqe->fd = 0; /* the registered /dev/fuse */
    sqe->cmd_op = cmd;
    io_uring_sqe_set_data(sqe, e);
    struct ring_cmd_req *req = (struct ring_cmd_req *)sqe->cmd;
    req->qid = (uint16_t)e->q->qid;
    req->commit_id = cmd == RING_CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
    if (cmd == RING_CMD_REGISTER) {
        sqe->addr = (uint64_t)(uintptr_t)e->iov;
        sqe->len = 2;
    }
    e->last_cmd = cmd;
}

/* Queues `cmd` for entry e.  Only the ring's own thread submits: the
 * kernel hands an entry's next request over in a task_work of the thread
 * that submitted its command, and a worker may be blocked in a request on
 * this very mount (the open watch's marks), which would then never come.
 * A worker's command waits in the SQ and wakes the ring thread.  Returns 0
 * or -EIO (no SQE: cannot happen while each entry holds at most one). */
int ring_submit_cmd(struct ring_ent *e, unsigned cmd)
{
    struct ring_queue *q = e->q;
    pthread_mutex_lock(&q->sq_mu);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    if (sqe)
        prep_cmd(e, sqe, cmd);
    pthread_mutex_unlock(&q->sq_mu);
    if (!sqe) {
        cfs_err("FUSE ring %u: no submission entry left for a reply", q->qid);
        return -EIO;
    }
    if (ring_thread_of != q && eventfd_write(q->wake_fd, 1) < 0)
        cfs_warn("FUSE ring %u: cannot wake its thread: %s", q->qid, strerror(errno));
    return 0;
}

/* The answer that ends a retrieve's NOTIFY_REPLY, which wants none: its
 * unique is the notify unique libfuse chose, and the kernel checks a
 * commit's unique with FUSE_INT_REQ_BIT masked off
 * (fuse_uring_out_header_has_err), so an odd one can never match and logs
 * "unique mismatch".  The error is checked first and ends the request
 * without a word, and fuse_retrieve_end ignores it: the data was taken. */
#define NOTIFY_REPLY_DONE (-ENOENT)

static void commit_empty(struct ring_ent *e, int error)
{
    struct fuse_out_header *out = (struct fuse_out_header *)e->hdr->in_out;
    out->unique = e->unique;
    out->error = error;
    out->len = sizeof(*out);
    e->hdr->ent.payload_sz = 0;
    (void)ring_submit_cmd(e, RING_CMD_COMMIT_AND_FETCH);
}

/* libfuse decodes and the filesystem answers; a request answered with no
 * reply (a retrieve's data) still hands its entry back. */
static void dispatch(struct cfs_fuse_ring *r, struct ring_ent *e)
{
    ring_current.e = e;
    ring_current.replied = false;
    fuse_session_process_buf(r->se, &e->buf);
    bool replied = ring_current.replied;
    ring_current.e = NULL;
    if (!replied)
        commit_empty(e, e->opcode == FUSE_NOTIFY_REPLY ? NOTIFY_REPLY_DONE : 0);
}

static void *pool_main(void *arg)
{
    struct cfs_fuse_ring *r = arg;
    pthread_setname_np(pthread_self(), "cfs-fuse-pool");
    pthread_mutex_lock(&r->pool_mu);
    for (;;) {
        r->idle++;
        while (!r->jobs && !r->pool_stop)
            pthread_cond_wait(&r->pool_cv, &r->pool_mu);
        r->idle--;
        struct ring_ent *e = r->jobs;
        if (!e)
            break; /* stopping, nothing left */
        r->jobs = e->next_job;
        if (!r->jobs)
            r->jobs_tail = NULL;
        r->njobs--;
        pthread_mutex_unlock(&r->pool_mu);
        dispatch(r, e);
        atomic_fetch_sub(&e->q->handed_off, 1);
        pthread_mutex_lock(&r->pool_mu);
    }
    pthread_mutex_unlock(&r->pool_mu);
    return NULL;
}

/* A worker takes e; a new one starts when none is free for it (up to POOL_MAX),
 * as libfuse's loop starts a thread, so that a request that blocks never
 * holds back the one that would unblock it. */
static void hand_off(struct cfs_fuse_ring *r, struct ring_ent *e)
{
    atomic_fetch_add(&e->q->handed_off, 1);
    pthread_mutex_lock(&r->pool_mu);
    e->next_job = NULL;
    if (r->jobs_tail)
        r->jobs_tail->next_job = e;
    else
        r->jobs = e;
    r->jobs_tail = e;
    /* Counted against the jobs queued, not the workers idle: a burst of
     * hand-offs finds a worker idle that has not woken to take the first. */
    if (++r->njobs > r->idle && r->nworkers < POOL_MAX &&
        pthread_create(&r->workers[r->nworkers], NULL, pool_main, r) == 0)
        r->nworkers++;
    pthread_cond_signal(&r->pool_cv);
    pthread_mutex_unlock(&r->pool_mu);
}

/* A request arrived in entry e: make it one buffer and answer it. */
static void take_request(struct cfs_fuse_ring *r, struct ring_ent *e)
{
    struct fuse_in_header in;
    memcpy(&in, e->hdr->in_out, sizeof(in));
    e->commit_id = e->hdr->ent.commit_id;
    e->unique = in.unique;
    e->opcode = in.opcode;
    ring_count(r, CFS_M_FUSE_REQUESTS_RING, 1);
    int opsz = op_size(in.opcode);
    size_t payload = e->hdr->ent.payload_sz;
    if (opsz < 0 || payload > r->payload_cap) {
        commit_empty(e, opsz < 0 ? -ENOSYS : -EIO);
        return;
    }
    if (in.opcode == FUSE_NOTIFY_REPLY && payload < sizeof(struct fuse_notify_retrieve_in)) {
        /* Not the layout above: libfuse would read past the payload. */
        cfs_err("FUSE ring %u: a retrieve's answer without its header (%zu bytes)", e->q->qid,
                payload);
        commit_empty(e, NOTIFY_REPLY_DONE);
        return;
    }
    size_t head = sizeof(in) + (size_t)opsz;
    char *start = e->payload - head;
    in.len = (uint32_t)(head + payload);
    memcpy(start, &in, sizeof(in));
    memcpy(start + sizeof(in), e->hdr->op_in, (size_t)opsz);
    e->buf = (struct fuse_buf){.size = head + payload, .mem = start};
    if (answered_inline(in.opcode) || (in.opcode == FUSE_READ && read_never_waits(r, e)))
        dispatch(r, e);
    else
        hand_off(r, e);
}

/* The poll of the workers' wake-ups, multishot; false without an SQE. */
static bool arm_wake(struct ring_queue *q)
{
    pthread_mutex_lock(&q->sq_mu);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    if (sqe) {
        io_uring_prep_poll_multishot(sqe, q->wake_fd, POLLIN);
        io_uring_sqe_set_data(sqe, &q->wake_fd);
    }
    pthread_mutex_unlock(&q->sq_mu);
    return sqe != NULL;
}

/* Returns false when the queue's thread should end. */
static bool take_completion(struct cfs_fuse_ring *r, struct ring_queue *q, struct io_uring_cqe *cqe)
{
    struct ring_ent *e = io_uring_cqe_get_data(cqe);
    if (!e)
        return false; /* the eventfd: stop */
    if ((void *)e == (void *)&q->wake_fd) {
        eventfd_t n;
        (void)eventfd_read(q->wake_fd, &n);
        /* Multishot: rearmed by the kernel unless it says otherwise. */
        if (!(cqe->flags & IORING_CQE_F_MORE))
            arm_wake(q);
        return true; /* the loop submits what the workers queued */
    }
    if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
        (void)ring_submit_cmd(e, e->last_cmd);
        return true;
    }
    if (cqe->res < 0) {
        /* ENOTCONN, ENODEV: the connection is gone (unmount); anything
         * else ends the queue, and its CPU's requests wait on the others
         * no more: the kernel then fails them, so say it. */
        if (cqe->res != -ENOTCONN && cqe->res != -ENODEV)
            cfs_err("FUSE ring %u: the kernel refused an entry: %s", q->qid, strerror(-cqe->res));
        return false;
    }
    take_request(r, e);
    return true;
}

static void pin_to_cpu(unsigned cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    /* A CPU outside this process's set (a cgroup's cpuset) sends no
     * requests; its queue need not run there. */
    (void)sched_setaffinity(0, sizeof(set), &set);
}

static void *queue_main(void *arg)
{
    struct ring_queue *q = arg;
    struct cfs_fuse_ring *r = q->r;
    char name[16];
    snprintf(name, sizeof(name), "cfs-ring%u", q->qid);
    pthread_setname_np(pthread_self(), name);
    pin_to_cpu(q->qid);
    ring_thread_of = q;
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc;
        if (atomic_load(&q->handed_off) == 0) {
            /* No worker holds an entry: this thread alone touches the SQ,
             * and one system call commits the replies and waits. */
            rc = io_uring_submit_and_wait(&q->ring, 1);
            rc = rc < 0 ? rc : io_uring_peek_cqe(&q->ring, &cqe);
        } else {
            /* Workers queue commands meanwhile: submit under their lock. */
            pthread_mutex_lock(&q->sq_mu);
            io_uring_submit(&q->ring);
            pthread_mutex_unlock(&q->sq_mu);
            rc = io_uring_wait_cqe(&q->ring, &cqe);
        }
        if (rc == -EINTR || rc == -EAGAIN)
            continue;
        if (rc < 0) {
            cfs_err("FUSE ring %u: %s", q->qid, strerror(-rc));
            break;
        }
        unsigned head, seen = 0;
        bool go_on = true;
        io_uring_for_each_cqe(&q->ring, head, cqe)
        {
            seen++;
            if (!(go_on = take_completion(r, q, cqe)))
                break;
        }
        io_uring_cq_advance(&q->ring, seen);
        if (!go_on)
            break;
    }
    /* Replies made on the way out still reach the kernel. */
    pthread_mutex_lock(&q->sq_mu);
    ring_thread_of = NULL;
    io_uring_submit(&q->ring);
    pthread_mutex_unlock(&q->sq_mu);
    return NULL;
}

static int queue_setup(struct cfs_fuse_ring *r, struct ring_queue *q)
{
    q->eventfd = eventfd(0, EFD_CLOEXEC);
    q->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->eventfd < 0 || q->wake_fd < 0)
        return -errno;
    struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE,
                                .cq_entries = 4 * (r->depth + 2)};
    /* An SQE per entry, the stop's poll and the wake-ups' poll. */
    int rc = io_uring_queue_init_params(r->depth + 2, &q->ring, &p);
    if (rc < 0)
        return rc;
    q->ring_ok = true;
    if ((rc = io_uring_register_files(&q->ring, &r->fd, 1)) < 0)
        return rc;
    if (!(q->ents = calloc(r->depth, sizeof(*q->ents))))
        return -ENOMEM;
    for (unsigned i = 0; i < r->depth; i++) {
        struct ring_ent *e = &q->ents[i];
        e->q = q;
        e->hdr = aligned_alloc(r->page, r->page);
        e->area = aligned_alloc(r->page, r->page + r->payload_cap);
        if (!e->hdr || !e->area)
            return -ENOMEM;
        memset(e->hdr, 0, sizeof(*e->hdr));
        e->payload = e->area + r->page;
        e->iov[0] = (struct iovec){.iov_base = e->hdr, .iov_len = sizeof(*e->hdr)};
        e->iov[1] = (struct iovec){.iov_base = e->payload, .iov_len = r->payload_cap};
        struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
        if (!sqe)
            return -EIO;
        prep_cmd(e, sqe, RING_CMD_REGISTER);
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    if (!sqe)
        return -EIO;
    io_uring_prep_poll_add(sqe, q->eventfd, POLLIN);
    io_uring_sqe_set_data(sqe, NULL);
    if (!arm_wake(q))
        return -EIO;
    rc = io_uring_submit(&q->ring);
    return rc < 0 ? rc : 0;
}

/* After the INIT reply that asked for the ring: every CPU's queue, then
 * the workers.  A queue that cannot start leaves the kernel's ring unready:
 * requests stay on /dev/fuse, as the log says. */
void ring_start(struct cfs_fuse_ring *r)
{
    r->nqueues = possible_cpus();
    r->queues = calloc(r->nqueues, sizeof(*r->queues));
    if (!r->queues) {
        atomic_store(&r->state, RING_FAILED);
        cfs_warn("FUSE requests stay on /dev/fuse: out of memory for the io_uring queues");
        return;
    }
    for (unsigned i = 0; i < r->nqueues; i++) {
        r->queues[i].r = r;
        r->queues[i].qid = i;
        r->queues[i].eventfd = -1;
        r->queues[i].wake_fd = -1;
        pthread_mutex_init(&r->queues[i].sq_mu, NULL);
    }
    atomic_store(&r->state, RING_STARTED);
    if (!r->cfg.depth) {
        unsigned d = IN_FLIGHT / r->nqueues;
        r->depth = d < DEPTH_MIN ? DEPTH_MIN : d > DEPTH_MAX ? DEPTH_MAX : d;
    }
    int rc = 0;
    unsigned qid = 0;
    for (; rc == 0 && qid < r->nqueues; qid++) {
        struct ring_queue *q = &r->queues[qid];
        if ((rc = queue_setup(r, q)) < 0)
            break;
        if (pthread_create(&q->thread, NULL, queue_main, q) != 0) {
            rc = -EAGAIN;
            break;
        }
        q->thread_started = true;
    }
    if (rc < 0) {
        atomic_store(&r->state, RING_FAILED);
        cfs_warn("FUSE requests stay on /dev/fuse: io_uring queue %u of %u cannot start: %s", qid,
                 r->nqueues, strerror(-rc));
        return;
    }
    if (r->cfg.metrics)
        cfs_metrics_set(r->cfg.metrics, CFS_M_FUSE_RING_QUEUES, r->nqueues);
    cfs_info("FUSE requests over io_uring: %u CPU queues of %u", r->nqueues, r->depth);
}

void ring_probe(struct cfs_fuse_ring *r)
{
    struct io_uring ring;
    struct io_uring_params p = {.flags = IORING_SETUP_SQE128};
    int rc = io_uring_queue_init_params(2, &ring, &p);
    if (rc < 0) {
        snprintf(r->why_not, sizeof(r->why_not), "io_uring is not available here (%s)",
                 strerror(-rc));
        return;
    }
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    r->io_uring_works = probe && io_uring_opcode_supported(probe, IORING_OP_URING_CMD);
    if (!r->io_uring_works)
        snprintf(r->why_not, sizeof(r->why_not), "io_uring here has no commands for devices");
    if (probe)
        io_uring_free_probe(probe);
    io_uring_queue_exit(&ring);
}

#else /* !RING_BUILT */

void ring_start(struct cfs_fuse_ring *r)
{
    (void)r;
}
void ring_probe(struct cfs_fuse_ring *r)
{
    snprintf(r->why_not, sizeof(r->why_not), "this build has no io_uring");
}

#endif

/* ---- life cycle ------------------------------------------------------------ */

int cfs_fuse_ring_create(const struct cfs_fuse_ring_config *cfg, struct cfs_fuse_ring **out)
{
    struct cfs_fuse_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->cfg = *cfg;
    r->depth = cfg->depth ? cfg->depth : DEPTH_MIN;
    r->fd = -1;
    long page = sysconf(_SC_PAGESIZE);
    r->page = page > 0 ? (size_t)page : 4096;
    pthread_mutex_init(&r->pool_mu, NULL);
    pthread_cond_init(&r->pool_cv, NULL);
    atomic_init(&r->state, RING_OFF);
    atomic_init(&r->asked, false);
    if (cfg->mode != CFS_FUSE_IO_DEVICE)
        ring_probe(r);
    *out = r;
    return 0;
}


bool cfs_fuse_ring_asked(const struct cfs_fuse_ring *r)
{
    return r && atomic_load(&r->asked);
}

void cfs_fuse_ring_stop(struct cfs_fuse_ring *r)
{
    if (!r || atomic_load(&r->state) == RING_OFF)
        return;
    for (unsigned i = 0; i < r->nqueues; i++) {
        struct ring_queue *q = &r->queues[i];
        if (!q->thread_started)
            continue;
        uint64_t one = 1;
        if (write(q->eventfd, &one, sizeof(one)) != sizeof(one))
            cfs_warn("FUSE ring %u: cannot wake its thread: %s", q->qid, strerror(errno));
        pthread_join(q->thread, NULL);
        q->thread_started = false;
    }
    /* The workers finish what they hold; no new work comes now. */
    pthread_mutex_lock(&r->pool_mu);
    r->pool_stop = true;
    pthread_cond_broadcast(&r->pool_cv);
    pthread_mutex_unlock(&r->pool_mu);
    /* No hand-off comes now (the ring threads have ended): nworkers is final. */
    for (unsigned i = 0; i < r->nworkers; i++)
        pthread_join(r->workers[i], NULL);
    r->nworkers = 0;
#if RING_BUILT
    /* The replies the workers made after their ring's thread ended. */
    for (unsigned i = 0; i < r->nqueues; i++) {
        struct ring_queue *q = &r->queues[i];
        if (!q->ring_ok)
            continue;
        pthread_mutex_lock(&q->sq_mu);
        io_uring_submit(&q->ring);
        pthread_mutex_unlock(&q->sq_mu);
    }
#endif
    atomic_store(&r->state, RING_OFF);
}

void cfs_fuse_ring_destroy(struct cfs_fuse_ring *r)
{
    if (!r)
        return;
    cfs_fuse_ring_stop(r);
    for (unsigned i = 0; r->queues && i < r->nqueues; i++) {
        struct ring_queue *q = &r->queues[i];
#if RING_BUILT
        if (q->ring_ok)
            io_uring_queue_exit(&q->ring);
#endif
        if (q->eventfd >= 0)
            close(q->eventfd);
        if (q->wake_fd >= 0)
            close(q->wake_fd);
        for (unsigned k = 0; q->ents && k < r->depth; k++) {
            free(q->ents[k].hdr);
            free(q->ents[k].area);
        }
        free(q->ents);
        pthread_mutex_destroy(&q->sq_mu);
    }
    free(r->queues);
    pthread_mutex_destroy(&r->pool_mu);
    pthread_cond_destroy(&r->pool_cv);
    free(r);
}
