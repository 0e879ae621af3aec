/* FUSE over io_uring for a libfuse that has no API for it (Debian 12's
 * 3.14), beside libfuse's own /dev/fuse loop.
 *
 * A request read from /dev/fuse costs the daemon a thread's wake-up and two
 * system calls, and the trainer the wait for both; a request on the ring of
 * the CPU it was issued on is answered by the thread pinned there, with one
 * io_uring_enter that commits the reply and fetches the next request.  On a
 * cached epoch the requests that remain are those only the daemon can
 * answer (Python's isatty() IOCTL per open, a GETATTR now and then), so
 * their round trip is the hit path's cost (docs/design.md, "FUSE
 * transport").
 *
 * The module takes the session's I/O (fuse_session_custom_io): it sees the
 * kernel's INIT, asks for FUSE_OVER_IO_URING in the reply when the kernel
 * offers it (Linux >= 6.14 with /sys/module/fuse/parameters/enable_uring
 * set) and io_uring works here, then registers one queue per possible CPU.
 * Requests that cannot block (IOCTL, GETATTR, LOOKUP, FLUSH, RELEASE,
 * STATFS, directories, and a READ the filesystem answers from memory) are
 * answered on the ring's thread; the others (OPEN, other READs, xattrs,
 * ...) go to a pool of workers, so that a READ waiting for the PFS holds
 * one worker, not a CPU's queue.  Either way libfuse
 * decodes the request and the filesystem's handler replies before it
 * returns; the reply lands in the ring entry instead of /dev/fuse.
 * FORGET, INTERRUPT and notifications stay on /dev/fuse, as do all requests
 * when the kernel or io_uring says no (one info line says why). */
#ifndef CLAIRFS_FUSE_RING_H
#define CLAIRFS_FUSE_RING_H

#include <fuse_lowlevel.h>

#include "clairfs/metrics.h"
#include "clairfs/options.h" /* enum cfs_fuse_io */

struct cfs_fuse_ring;

/* libfuse hands the I/O callbacks only the session's userdata (the
 * filesystem's state), which must begin with this slot: attach fills ring,
 * the filesystem read_never_waits. */
struct cfs_fuse_ring_slot {
    struct cfs_fuse_ring *ring;
    /* Whether a READ of open file fh is answered from memory, never
     * waiting (it is then answered on the ring's thread, without a
     * worker's hand-off); NULL: every READ goes to a worker.  Called on the
     * ring's thread while fh is open (the kernel releases a file after its
     * last READ). */
    bool (*read_never_waits)(struct cfs_fuse_ring_slot *slot, uint64_t fh);
};

struct cfs_fuse_ring_config {
    enum cfs_fuse_io mode;
    unsigned depth; /* requests in flight per CPU queue; 0: 64 over the queues, 8 to 32 each */
    struct cfs_metrics *metrics; /* request counts; not owned */
};

/* The module, not yet attached.  With CFS_FUSE_IO_DEVICE, or where this
 * build or io_uring cannot, requests stay on /dev/fuse; only allocation
 * fails (-ENOMEM). */
int cfs_fuse_ring_create(const struct cfs_fuse_ring_config *cfg, struct cfs_fuse_ring **out);

/* Takes the I/O of mounted session se, whose userdata begins with `slot`,
 * before its loop starts: returns 0 or -errno (libfuse refused). */
int cfs_fuse_ring_attach(struct cfs_fuse_ring *r, struct fuse_session *se,
                         struct cfs_fuse_ring_slot *slot);

/* Whether the INIT reply asked for the ring (false for r NULL): requests,
 * a retrieve's answer among them, may come over it from then on (or stay
 * on /dev/fuse, if its queues fail to start).  Set before the kernel sees
 * the reply, so before any lookup, hence before any retrieve. */
bool cfs_fuse_ring_asked(const struct cfs_fuse_ring *r);

/* Stops the ring's threads and its workers (each finishes the request in
 * hand); after the session loop ended, before the session is destroyed. */
void cfs_fuse_ring_stop(struct cfs_fuse_ring *r);
void cfs_fuse_ring_destroy(struct cfs_fuse_ring *r);

#endif
