/* The kernel side of page-cache staging (prefetch.h, "Page cache"): the
 * cfs_kernel_ops through which the data path stores a file's bytes into
 * the kernel's page cache, drops them, or asks them back, as FUSE
 * notifications over the session.  Kept apart from the operations because
 * it runs the other way round: the data path calls it from its own
 * threads, and only the answer to a retrieve arrives as an operation
 * (fs_op_retrieve_reply).  A store goes only into an inode the kernel
 * knows: the lookup counts kept by fs_names.c. */
#include "fs_i.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

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

static int kernel_retrieve(void *arg, cfs_id id, uint64_t off, size_t len, void *cookie)
{
    struct cfs_fs *fs = arg;
    return fuse_lowlevel_notify_retrieve(fs->se, (fuse_ino_t)id + 1, len, (off_t)off, cookie);
}

static size_t kernel_retrieve_max(void *arg)
{
    struct cfs_fs *fs = arg;
    size_t m = atomic_load(&fs->retrieve_max);
    return m ? m : 4096; /* before INIT nothing is staged: never asked */
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
