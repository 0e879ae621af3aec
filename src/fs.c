/* The FUSE layer's top: the operations table, INIT, and the life cycle of
 * struct cfs_fs.  The operations live in files by what they are about
 * (fs_i.h gives the layer order): names and attributes (fs_names.c), open
 * and read (fs_files.c), the control namespace and the state xattr
 * (fs_ctl.c), the switch to the kernel's own opens (fs_kernel_open.c), the
 * page-cache notifications (fs_pagecache.c) and the file handles
 * (fs_open.c).  What stays here binds them into one session: the
 * capabilities asked for at INIT, EROFS for everything that would write
 * (the tree is read-only, so those answer without looking), and the state
 * they all share, made and freed once. */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/log.h"
#include "open_tally.h"

/* ---- init ---------------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct cfs_fs *fs = userdata;
    /* Inodes are a pure function of the catalog, so file handles handed out
     * for NFS export stay valid and "." / ".." lookups are answerable. */
    if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
        conn->want |= FUSE_CAP_EXPORT_SUPPORT;
    if (fs->splice_read && (conn->capable & FUSE_CAP_SPLICE_WRITE))
        conn->want |= FUSE_CAP_SPLICE_WRITE | (conn->capable & FUSE_CAP_SPLICE_MOVE);
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    /* Source files never change under the mount: no need for the kernel to
     * drop cached pages when it sees a new mtime. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    conn->time_gran = 1;
    /* The kernel answers a retrieve with at most max_write bytes. */
    atomic_store(&fs->retrieve_max, conn->max_write);
    /* Before no_open (Linux 4.20) ENOSYS would fail the open itself. */
    if (fs->kernel_open && !(conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) {
        fs->kernel_open = false;
        if (fs->kernel_open_uncounted)
            cfs_warn("kernel_open: this kernel cannot open files without asking the file "
                 "system (no FUSE no_open); every open reaches clairfs");
    }
    if (fs->source_has_ctl_name)
        cfs_warn("%s/" CFS_CTL_DIRNAME " is hidden by the control namespace of the same name",
                 fs->source);
}

/* ---- everything that would write ------------------------------------------- */

static void erofs_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t r)
{
    (void)p, (void)n, (void)m, (void)r;
    fuse_reply_err(req, EROFS);
}

static void erofs_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
    (void)p, (void)n, (void)m;
    fuse_reply_err(req, EROFS);
}

static void erofs_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
    (void)p, (void)n;
    fuse_reply_err(req, EROFS);
}

static void erofs_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n)
{
    (void)l, (void)p, (void)n;
    fuse_reply_err(req, EROFS);
}

static void erofs_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np,
                         const char *nn, unsigned int f)
{
    (void)p, (void)n, (void)np, (void)nn, (void)f;
    fuse_reply_err(req, EROFS);
}

static void erofs_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn)
{
    (void)i, (void)np, (void)nn;
    fuse_reply_err(req, EROFS);
}

static void erofs_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
                         struct fuse_file_info *fi)
{
    (void)p, (void)n, (void)m, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void erofs_setxattr(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s,
                           int f)
{
    (void)i, (void)n, (void)v, (void)s, (void)f;
    fuse_reply_err(req, EROFS);
}

static void erofs_removexattr(fuse_req_t req, fuse_ino_t i, const char *n)
{
    (void)i, (void)n;
    fuse_reply_err(req, EROFS);
}

static void erofs_fallocate(fuse_req_t req, fuse_ino_t i, int m, off_t o, off_t l,
                            struct fuse_file_info *fi)
{
    (void)i, (void)m, (void)o, (void)l, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void erofs_copy_file_range(fuse_req_t req, fuse_ino_t ii, off_t oi,
                                  struct fuse_file_info *fii, fuse_ino_t io, off_t oo,
                                  struct fuse_file_info *fio, size_t l, int f)
{
    (void)ii, (void)oi, (void)fii, (void)io, (void)oo, (void)fio, (void)l, (void)f;
    fuse_reply_err(req, EROFS);
}

static const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .retrieve_reply = fs_op_retrieve_reply,
    .lookup = fs_op_lookup,
    .forget = fs_op_forget,
    .forget_multi = fs_op_forget_multi,
    .getattr = fs_op_getattr,
    .setattr = fs_op_setattr,
    .readlink = fs_op_readlink,
    .mknod = erofs_mknod,
    .mkdir = erofs_mkdir,
    .unlink = erofs_unlink,
    .rmdir = erofs_unlink,
    .symlink = erofs_symlink,
    .rename = erofs_rename,
    .link = erofs_link,
    .open = fs_op_open,
    .read = fs_op_read,
    .write = fs_op_write,
    .release = fs_op_release,
    .ioctl = fs_op_ioctl,
    .opendir = fs_op_opendir,
    .readdir = fs_op_readdir,
    .readdirplus = fs_op_readdirplus,
    .releasedir = fs_op_releasedir,
    .statfs = fs_op_statfs,
    .setxattr = erofs_setxattr,
    .getxattr = fs_op_getxattr,
    .listxattr = fs_op_listxattr,
    .removexattr = erofs_removexattr,
    .create = erofs_create,
    .fallocate = erofs_fallocate,
    .copy_file_range = erofs_copy_file_range,
};

struct cfs_fuse_ring_slot *cfs_fs_ring_slot(struct cfs_fs *fs)
{
    return &fs->ring_slot;
}

const struct fuse_lowlevel_ops *cfs_fs_ops(void)
{
    return &fs_ops;
}

/* ---- life cycle ------------------------------------------------------------ */

int cfs_fs_create(const struct cfs_fs_config *cfg, struct cfs_fs **out, char *err, size_t errlen)
{
    int rc;
    struct cfs_fs *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return -ENOMEM;
    fs->source_fd = -1;
    fs->ring_slot.read_never_waits = fs_read_never_waits;
    pthread_mutex_init(&fs->opens_mu, NULL);
    pthread_mutex_init(&fs->notify_mu, NULL);
    fs->notify_next = 1; /* libfuse 3.14's first (fuse_session_new) */
    fs->catalog = cfg->catalog;
    fs->nentries = cfs_catalog_entry_count(cfg->catalog);
    fs->ctl = cfg->ctl;
    fs->metrics = cfg->metrics;
    fs->owner_uid = cfg->owner_uid;
    fs->owner_gid = cfg->owner_gid;
    fs->splice_read = cfg->splice_read;
    fs->kernel_open = cfg->kernel_open;
    fs->kernel_open_uncounted = cfg->kernel_open_uncounted;
    fs->openers = cfg->openers;
    pthread_mutex_init(&fs->switch_mu, NULL);
    pthread_mutex_init(&fs->served_mu, NULL);
    clock_gettime(CLOCK_REALTIME, &fs->start);

    fs->source = strdup(cfg->source);
    fs->mountpoint = cfg->mountpoint ? strdup(cfg->mountpoint) : NULL;
    if (!fs->source || (cfg->mountpoint && !fs->mountpoint)) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    fs->source_fd = open(cfg->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->source_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "source %s: %s", cfg->source, strerror(-rc));
        goto fail;
    }
    fs->open_err_logged = calloc((fs->nentries + 63) / 64 + 1, sizeof(*fs->open_err_logged));
    fs->nlookup = calloc(fs->nentries ? fs->nentries : 1, sizeof(*fs->nlookup));
    if (!fs->open_err_logged || !fs->nlookup) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (fs->kernel_open && fs->mountpoint && cfs_open_tally_create(&fs->tally) < 0) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    fs->source_has_ctl_name =
        fs->nentries > 0 && cfs_catalog_lookup(fs->catalog, 0, CFS_CTL_DIRNAME) != CFS_ID_NONE;
    *out = fs;
    return 0;
fail:
    cfs_fs_destroy(fs);
    return rc;
}

void cfs_fs_destroy(struct cfs_fs *fs)
{
    if (!fs)
        return;
    cfs_fs_stop_watch(fs);
    cfs_open_tally_destroy(fs->tally);
    pthread_mutex_destroy(&fs->switch_mu);
    pthread_mutex_destroy(&fs->served_mu);
    /* After the session: handles whose RELEASE the unmount dropped. */
    fs_open_free_all(fs);
    pthread_mutex_destroy(&fs->opens_mu);
    pthread_mutex_destroy(&fs->notify_mu);
    if (fs->source_fd >= 0)
        close(fs->source_fd);
    free(fs->open_err_logged);
    free((void *)fs->nlookup);
    free(fs->source);
    free(fs->mountpoint);
    free(fs);
}

void cfs_fs_abort(struct fuse_session *se)
{
    /* Closing the device aborts the connection: every request still
     * waiting fails, and the page locks of its READs are released.  /dev/null
     * takes the descriptor's number so that the session's own close later
     * cannot close somebody else's file. */
    int fd = fuse_session_fd(se);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0 && null >= 0)
        (void)dup2(null, fd);
    if (null >= 0)
        close(null);
}

void cfs_fs_set_prefetch(struct cfs_fs *fs, struct cfs_prefetch *pf)
{
    fs->prefetch = pf;
    if (pf)
        cfs_fs_set_state_hook(fs, cfs_prefetch_state, pf);
}

void cfs_fs_set_state_hook(struct cfs_fs *fs, cfs_fs_state_fn fn, void *arg)
{
    fs->state_fn = fn;
    fs->state_arg = arg;
}
