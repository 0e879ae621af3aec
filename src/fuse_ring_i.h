/* What fuse_ring.c (the ring: queues, their threads, the workers) and
 * fuse_ring_io.c (the session's I/O: INIT, replies) share; fuse_ring.h
 * says what the module does. */
#ifndef CLAIRFS_FUSE_RING_I_H
#define CLAIRFS_FUSE_RING_I_H

#include "fuse_ring.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clairfs/log.h"

#if defined(HAVE_IO_URING) && HAVE_IO_URING && FUSE_MINOR_VERSION >= 14
#define RING_BUILT 1
#include <liburing.h>
#include <sys/eventfd.h>
#else
#define RING_BUILT 0
#endif

/* The kernel's ABI (include/uapi/linux/fuse.h, protocol 7.42), which
 * Debian 12's headers predate. */
#define RING_IN_OUT_SIZE 128
#define RING_OP_SIZE 128
#define INIT_FLAGS2_OVER_IO_URING (1u << 9) /* FUSE_OVER_IO_URING, bit 41 */
#define INIT_FUSE_STATX 52
#define RING_CMD_REGISTER 1
#define RING_CMD_COMMIT_AND_FETCH 2
#define ENABLE_URING_KNOB "/sys/module/fuse/parameters/enable_uring"

struct ring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};

struct ring_req_header {
    char in_out[RING_IN_OUT_SIZE]; /* fuse_in_header, then fuse_out_header */
    char op_in[RING_OP_SIZE];      /* the opcode's own header */
    struct ring_ent_in_out ent;
};

struct ring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

enum ring_state { RING_OFF, RING_STARTED, RING_FAILED };

/* Requests in flight over all queues, and the workers for those that may
 * wait: libfuse's /dev/fuse loop runs up to 64 threads (main.c), and a
 * request blocked in the daemon holds its entry as it held a thread there,
 * so a node's queues hold as many. */
#define IN_FLIGHT 64
#define POOL_MAX 64
#define DEPTH_MIN 8
#define DEPTH_MAX 32

struct ring_queue;

struct ring_ent {
    struct ring_queue *q;
    struct ring_req_header *hdr; /* a page of its own */
    char *area;                  /* one page for the copied headers, then the payload */
    char *payload;
    struct iovec iov[2];
    unsigned last_cmd;
    unsigned opcode; /* of the request in hand */
    uint64_t commit_id, unique;
    struct fuse_buf buf; /* the request, contiguous, for libfuse */
    struct ring_ent *next_job;
};

struct ring_queue {
    struct cfs_fuse_ring *r;
    unsigned qid;
    pthread_t thread;
    bool thread_started;
    int eventfd;   /* the stop */
    int wake_fd;   /* a worker's reply waits to be submitted */
    bool ring_ok;
#if RING_BUILT
    struct io_uring ring;
#endif
    pthread_mutex_t sq_mu;      /* the submission queue: ring thread and workers */
    atomic_uint handed_off;     /* entries a worker holds: the SQ is shared meanwhile */
    struct ring_ent *ents;
};

struct cfs_fuse_ring {
    struct cfs_fuse_ring_config cfg;
    struct fuse_session *se;
    struct cfs_fuse_ring_slot *slot; /* the filesystem's: read_never_waits */
    int fd;
    bool io_uring_works; /* probed at creation */
    char why_not[160];   /* io_uring's refusal, for the INIT line */
    uint64_t init_unique;
    atomic_bool init_seen, offered, init_answered;
    atomic_bool asked; /* the INIT reply asks for the ring (cfs_fuse_ring_asked) */
    size_t payload_cap, page;
    unsigned nqueues, depth;
    struct ring_queue *queues;
    atomic_int state;
    /* The workers that answer what may wait. */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    struct ring_ent *jobs, *jobs_tail;
    bool pool_stop;
    unsigned idle;             /* workers waiting for a job */
    unsigned njobs;            /* entries queued for them */
    pthread_t workers[POOL_MAX];
    unsigned nworkers;
};

/* The request this thread is answering, and whether its reply went out
 * (fuse_ring.c sets it around libfuse's decoding; the replies in
 * fuse_ring_io.c match it). */
struct ring_current {
    struct ring_ent *e;
    bool replied;
};
extern _Thread_local struct ring_current ring_current;

static inline void ring_count(struct cfs_fuse_ring *r, enum cfs_metric m, uint64_t n)
{
    if (r->cfg.metrics)
        cfs_metrics_add(r->cfg.metrics, m, n);
}

/* After the INIT reply that asked for the ring: every CPU's queue, then
 * the workers as they are needed (a no-op without io_uring). */
void ring_start(struct cfs_fuse_ring *r);
/* Whether this process may run io_uring device commands (r->io_uring_works,
 * else r->why_not says why). */
void ring_probe(struct cfs_fuse_ring *r);
#if RING_BUILT
/* Queues command cmd (RING_CMD_*) for entry e: 0, or -EIO. */
int ring_submit_cmd(struct ring_ent *e, unsigned cmd);
#endif

#endif
