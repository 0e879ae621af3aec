/* The kernel side of page-cache staging (prefetch.h, "Page cache"): the
 * cfs_kernel_ops through which the data path stores a file's bytes into
 * the kernel's page cache, drops them, or asks them back, as FUSE
 * notifications over the session.  Kept apart from the operations because
 * it runs the other way round: the data path calls it from its own
 * threads, and only the answer to a retrieve arrives as an operation
 * (fs_op_retrieve_reply).  A store goes only into an inode the kernel
 * knows: the lookup counts kept by fs_names.c. */
#include "fs_i.h"

#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- page-cache staging: the kernel side (cfs_kernel_ops) --------------- */

static bool kernel_known(void *arg, cfs_id id)
{
    struct cfs_fs *fs = arg;
    return id < fs->nentries && atomic_load_explicit(&fs->nlookup[id], memory_order_acquire) > 0;
}

static int kernel_store(void *arg, cfs_id id, uint64_t off, const void *data, size_t len)
{
    struct cfs_fs *fs = arg;
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
    bv.buf[0].mem = (void *)data;
    /* Without NO_SPLICE libfuse vmsplices the bytes when splice writes are
     * on, and prints an error of its own for every refused store. */
    return fuse_lowlevel_notify_store(fs->se, (fuse_ino_t)id + 1, (off_t)off, &bv,
                                      FUSE_BUF_NO_SPLICE);
}

static int kernel_inval(void *arg, cfs_id id)
{
    struct cfs_fs *fs = arg;
    return fuse_lowlevel_notify_inval_inode(fs->se, (fuse_ino_t)id + 1, 0, 0);
}

/* Over FUSE's io_uring the kernel's answer to a retrieve (NOTIFY_REPLY)
 * waits for the ring entry's commit in the queue's table of requests in
 * flight, under the notify unique libfuse chose, and a commit finds its
 * request by that unique alone (fs/fuse/dev_uring.c
 * fuse_uring_commit_fetch, fuse_request_find).  libfuse 3.14 numbers
 * retrieves 1, 2, 3, ... (se->notify_ctr), the kernel its own requests
 * 2, 4, 6, ...: an even notify unique equal to a request in flight on the
 * same queue would have one commit take the other's entry.  Odd ones
 * never can, so under the ring an even unique is used up first on a
 * retrieve the kernel refuses at once (node id 0 names no inode: ENOENT,
 * which libfuse does not print), the next, odd, on the real one.  This
 * file makes every fuse_lowlevel_notify_retrieve call, under notify_mu,
 * so notify_next is libfuse's counter. */
static int kernel_retrieve(void *arg, cfs_id id, uint64_t off, size_t len, void *cookie)
{
    struct cfs_fs *fs = arg;
    pthread_mutex_lock(&fs->notify_mu);
    if (fs->notify_next % 2 == 0 && cfs_fuse_ring_asked(fs->ring_slot.ring)) {
        (void)fuse_lowlevel_notify_retrieve(fs->se, 0, 0, 0, NULL);
        fs->notify_next++;
    }
    int rc = fuse_lowlevel_notify_retrieve(fs->se, (fuse_ino_t)id + 1, len, (off_t)off, cookie);
    fs->notify_next++;
    pthread_mutex_unlock(&fs->notify_mu);
    return rc;
}

static size_t kernel_retrieve_max(void *arg)
{
    struct cfs_fs *fs = arg;
    size_t m = atomic_load(&fs->retrieve_max);
    if (!m)
        return 4096; /* before INIT nothing is staged: never asked */
    if (cfs_fuse_ring_asked(fs->ring_slot.ring)) {
        /* A ring entry's payload buffer holds the kernel's
         * max(max_write, max_pages pages) bytes, and the answer puts its
         * fuse_notify_retrieve_in ahead of the data there (fuse_ring.c,
         * op_size): a max_write chunk would not fit, and the kernel's copy
         * does not stop at the buffer's end (fuse_copy_fill's BUG_ON).  A
         * page less keeps the chunks page-aligned. */
        long ps = sysconf(_SC_PAGESIZE);
        size_t page = ps > 0 ? (size_t)ps : 4096, head = sizeof(struct fuse_notify_retrieve_in);
        m = m > page + head ? (m - head) / page * page : page;
    }
    return m;
}

/* The kernel's answer to kernel_retrieve, on a FUSE worker. */
void fs_op_retrieve_reply(fuse_req_t req, void *cookie, fuse_ino_t ino, off_t offset,
                          struct fuse_bufvec *bufv)
{
    (void)ino;
    size_t len = fuse_buf_size(bufv);
    if (bufv->count == 1 && !(bufv->buf[0].flags & FUSE_BUF_IS_FD)) {
        cfs_prefetch_retrieved(cookie, (uint64_t)offset, bufv->buf[0].mem, len);
    } else {
        /* In a pipe (splice): copy it out. */
        void *tmp = malloc(len ? len : 1);
        size_t got = 0;
        if (tmp) {
            struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
            dst.buf[0].mem = tmp;
            ssize_t n = fuse_buf_copy(&dst, bufv, 0);
            got = n > 0 ? (size_t)n : 0;
        }
        cfs_prefetch_retrieved(cookie, (uint64_t)offset, tmp, got);
        free(tmp);
    }
    fuse_reply_none(req);
}

static const struct cfs_kernel_ops kernel_ops = {
    .known = kernel_known, .store = kernel_store, .inval = kernel_inval,
    .retrieve = kernel_retrieve, .retrieve_max = kernel_retrieve_max,
};

const struct cfs_kernel_ops *cfs_fs_kernel_ops(struct cfs_fs *fs, struct fuse_session *se)
{
    fs->se = se;
    return &kernel_ops;
}
