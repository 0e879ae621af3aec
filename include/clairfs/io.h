/* The I/O engine: fetch whole files (or byte ranges) from the source
 * directory into buffers the caller owns, many at a time.
 *
 * Design.  A fetch is a request the caller fills in and keeps alive until
 * its completion callback has run (an intrusive struct, as with aio's iocb:
 * the prefetcher embeds it in its own fetch record, so the engine never
 * allocates per request).  The front end (io.c) owns what both back ends
 * share: one FIFO per priority class, the count of outstanding requests for
 * cfs_io_drain(), cancellation and shutdown.  A back end only takes the next
 * request when it has room, so the queues are where priority acts: a demand
 * miss submitted behind ten thousand queued prefetches is the next request
 * started, and waits at most for the `depth` fetches already in flight.
 *
 * Back ends sit behind a small ops struct chosen at creation:
 * - io_uring: one engine thread owns the ring.  A fetch is openat into a
 *   registered (sparse) file table slot linked to a read with IOSQE_FIXED_FILE,
 *   then close_direct: no syscall per step, and one io_uring_enter submits
 *   the steps of many fetches.  Kernels without direct descriptors get plain
 *   openat, read and close SQEs, one step after the other.  Submitters wake
 *   the engine through an eventfd that the ring itself reads.
 * - threads: N workers doing openat + pread loop + close.  Always built; it
 *   is the fallback when io_uring is missing or refused (seccomp, sysctl
 *   kernel.io_uring_disabled), io=auto's choice for a source on FUSE (see
 *   cfs_io_create), and io=threads forces it.
 *
 * Reading.  A whole-file fetch reads into buf[0..cap) plus one scratch byte:
 * if the file still has a byte after cap bytes, the result is -EFBIG (the
 * buffer then holds the first cap bytes) instead of a silent truncation.  A
 * file that shrank gives the bytes actually read; callers compare that with
 * the size they expected (the catalog's).  A read that returns fewer bytes
 * than asked is followed by another read until one returns 0, except when
 * the total already equals size_hint: the catalog's size confirmed, so the
 * EOF probe would only cost a syscall or an SQE per file.  Large files are
 * read in chunks of CFS_IO_CHUNK bytes.
 *
 * Identity.  A whole-file fetch that read its bytes also reports the file's
 * identity as observed after its last read (req->st, req->has_st): the
 * caller compares it with the catalog, since a file modified while it was
 * read gives a mix of old and new bytes of the right length, which only
 * the changed mtime/ctime tells apart.  After the read, not before: any
 * write that changed bytes we read bumped the mtime before we read them.
 * Threads: fstat of the open fd before close.  io_uring: an IORING_OP_STATX
 * queued when the last read completes (statx runs in io_uring's worker
 * threads, so the engine thread never blocks on a slow source's getattr):
 * on the fd with AT_EMPTY_PATH for plain descriptors, hard-linked before
 * the close; on (source dirfd, path) for direct descriptors, which statx
 * cannot name — the file at the path then, which differs from the one read
 * only when it was replaced, and then its identity differs too.  Both use
 * the kernel's ordinary attribute validity: a network or FUSE source may
 * answer from its attribute cache (attr_timeout), which can hide a change
 * made within that window.  Range reads report nothing.
 *
 * Registered buffers are not used: buffers belong to the caller (cache
 * tiers), and for buffered reads the kernel copies from the page cache
 * either way; fixed buffers only save pinning user pages, which is what
 * O_DIRECT needs, not page-cache reads.  Measured with bench/bench-io.c
 * (8000 files of ~110 KB on tmpfs, same ring, same linked open/read/close):
 * READ_FIXED ran at 0.55-0.8x the speed of plain READ into the same memory.
 *
 * On page-cached data io_uring runs reads inline in the engine thread, so
 * its gain is fewer syscalls, not parallel copies; against a slow source
 * (the PFS) its gain is depth fetches in flight from one thread.
 *
 * Threads.  cfs_io_submit() and cfs_io_cancel() may be called from any
 * thread, including from a completion callback (a prefetcher refills from
 * its callbacks).  Callbacks run on engine threads, never with an engine
 * lock held, and must not block for long: they delay other completions. */
#ifndef CLAIRFS_IO_H
#define CLAIRFS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/options.h" /* enum cfs_io_kind */

/* Largest single read; bigger files are read in several steps. */
#define CFS_IO_CHUNK (4u << 20)
#define CFS_IO_SIZE_UNKNOWN UINT64_MAX

enum cfs_io_prio {
    CFS_IO_DEMAND = 0, /* a reader is waiting: goes before every queued prefetch */
    CFS_IO_PREFETCH,
    CFS_IO_NPRIO,
};

enum cfs_io_flags {
    /* Read [offset, offset + cap) and stop there, fewer bytes at EOF; without
     * it the request is a whole-file fetch (from offset to EOF) and a file
     * longer than cap fails with -EFBIG. */
    CFS_IO_RANGE = 1u << 0,
};

struct cfs_io_req;
typedef void (*cfs_io_done_fn)(struct cfs_io_req *req);

/* A source file's identity (see "Identity" above). */
struct cfs_io_stat {
    uint64_t size;
    int64_t mtime_sec, ctime_sec;
    uint32_t mtime_nsec, ctime_nsec;
    uint64_t ino, dev;
};

struct cfs_io_req {
    /* Filled in by the caller; untouched by the engine. */
    const char *path; /* relative to the source dirfd; NULL: read `fd` */
    int fd;           /* open file to read when path is NULL (not closed) */
    uint32_t flags;   /* enum cfs_io_flags */
    enum cfs_io_prio prio;
    uint64_t offset;
    void *buf;
    size_t cap;
    uint64_t size_hint; /* expected bytes from offset to EOF, or CFS_IO_SIZE_UNKNOWN */
    cfs_io_done_fn done;
    void *arg;

    /* Valid in done(): bytes read, or -errno (-ENOENT, -EACCES, -EFBIG,
     * -ECANCELED, ...).  After done() returns the engine does not touch
     * the request again, so done() may free or reuse it. */
    int64_t res;
    /* Valid in done() when has_st: a whole-file fetch with res >= 0 whose
     * file could be stat'ed after its last read (see "Identity"). */
    struct cfs_io_stat st;
    bool has_st;

    /* Engine-private. */
    struct cfs_io_req *next_, *prev_;
    uint32_t state_;
};

struct cfs_io_params {
    enum cfs_io_kind kind;
    uint32_t depth;   /* fetches in flight (io_uring); 0: 64 */
    int source_fd;    /* directory that request paths are relative to */
    uint32_t threads; /* workers of the thread back end; 0: min(depth, 32) */
    bool no_direct;   /* io_uring: skip direct descriptors (tests the plain path) */
};

struct cfs_io;

/* Start an engine.  kind=auto takes threads for a source on FUSE (where
 * io_uring runs every open and read in its kernel workers and fetched at
 * about half the thread pool's rate from an emulated PFS), else tries
 * io_uring (ring set-up and a probe of the opcodes used) and falls back to
 * threads, leaving the reason in
 * cfs_io_fallback_reason(); kind=uring fails with -ENOTSUP (or the ring's
 * error) and a one-line message in err when io_uring is unusable. */
int cfs_io_create(const struct cfs_io_params *p, struct cfs_io **out, char *err, size_t errlen);

/* Cancel every queued request, let the in-flight ones finish or stop them
 * at their next step (-ECANCELED), run every callback exactly once, join the
 * engine threads.  Must not be called from a callback.  Accepts NULL. */
void cfs_io_destroy(struct cfs_io *io);

/* Which back end runs: CFS_IO_URING or CFS_IO_THREADS. */
enum cfs_io_kind cfs_io_kind(const struct cfs_io *io);
/* "io_uring (direct descriptors)", "io_uring", "threads". */
const char *cfs_io_describe(const struct cfs_io *io);
/* Why kind=auto ended on threads (for the log), or NULL. */
const char *cfs_io_fallback_reason(const struct cfs_io *io);

/* Queue a request.  0: done() will be called exactly once.  -EINVAL for a
 * malformed request, -ESHUTDOWN once destroy has begun; then done() is not
 * called. */
int cfs_io_submit(struct cfs_io *io, struct cfs_io_req *req);

/* Withdraw a request that has not started.  0: done() will be called with
 * -ECANCELED (from an engine thread, soon).  -EBUSY: already running or
 * finishing; its done() comes with the real result.  The caller must know
 * that req was submitted and done() has not returned yet. */
int cfs_io_cancel(struct cfs_io *io, struct cfs_io_req *req);

/* Run req in the calling thread exactly as the thread back end would (paths
 * relative to source_fd), without an engine and without calling done():
 * for a caller that would only block until the engine finished it, so the
 * two thread hand-offs are saved.  Fills res, st and has_st. */
void cfs_io_run_sync(int source_fd, struct cfs_io_req *req);

/* Wait until every submitted request's callback has returned (requests
 * submitted meanwhile included).  -EDEADLK from a callback. */
int cfs_io_drain(struct cfs_io *io);

#endif
