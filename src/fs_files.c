/* Open, read and release: the part of the FUSE layer on the data path.  A
 * dataset file's bytes come from the data path (prefetch.h), which answers
 * from a cache tier or the source; a reply points into tier memory, or
 * splices from an SSD entry's file, so that a hit costs no copy here.
 * Control files are opened and read through fs_ctl.c.  Every open is a
 * reference-counted handle (fs_open.c).  Once -o kernel_open has switched
 * opens off (fs_kernel_open.c) a READ may come without a handle: the
 * kernel opened the file itself and did not find the pages, and the READ
 * is answered from a fresh snapshot (control files) or a handle opened
 * unseen (dataset files). */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clairfs/log.h"
#include "opener.h"

/* Logs a failed open of a source file once per file: a vanished or
 * unreadable file would otherwise flood the log at every retry. */
static void log_open_error_once(struct cfs_fs *fs, cfs_id id, const char *path, int err)
{
    if (fs->open_err_logged) {
        uint64_t bit = 1ull << (id % 64);
        if (atomic_fetch_or(&fs->open_err_logged[id / 64], bit) & bit)
            return;
    }
    cfs_warn("cannot open %s/%s: %s", fs->source, path, strerror(err));
}

/* A regular file through the data path. */
static void prefetch_open(fuse_req_t req, struct cfs_fs *fs, cfs_id id, struct fuse_file_info *fi)
{
    struct cfs_prefetch_file *f = NULL;
    pid_t tid = fuse_req_ctx(req)->pid;
    if (fs_open_served(fs, tid, id)) {
        /* Counted by the exact watch, which saw this open first. */
        /* Every file is staged (the watch starts only then): the kernel
         * serves the bytes, as it will once opens are off. */
        fi->fh = 0;
        fi->noflush = 1;
        fi->keep_cache = 1;
        fuse_reply_open(req, fi);
        return;
    }
    struct cfs_opener who;
    fs_opener_of(fs, tid, id, &who);
    int rc = cfs_prefetch_open_as(fs->prefetch, id, &who, &f);
    if (rc < 0) {
        char path[PATH_MAX];
        if (cfs_catalog_path(fs->catalog, id, path, sizeof(path)) >= 0)
            log_open_error_once(fs, id, path, -rc);
        fuse_reply_err(req, -rc);
        return;
    }
    struct fs_open *o = fs_open_new(fs, OPEN_DATA, f);
    if (!o) {
        cfs_prefetch_release(fs->prefetch, f);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)o;
    fi->noflush = 1;
    /* Staged: the page cache holds the bytes (counted against ram=).
     * Otherwise the kernel drops whatever it cached of the file at open. */
    fi->keep_cache = cfs_prefetch_keep_cache(f);
    if (fuse_reply_open(req, fi) != 0) {
        fs_open_put(fs, o); /* releases f */
    }
}

static void prefetch_read(fuse_req_t req, struct cfs_fs *fs, struct cfs_prefetch_file *f,
                          size_t size, off_t off)
{
    struct cfs_prefetch_extent x;
    char *scratch = NULL;
    if (cfs_prefetch_is_direct(f) && !(scratch = malloc(size ? size : 1))) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    int rc = off < 0 ? -EINVAL
                     : cfs_prefetch_read(fs->prefetch, f, (uint64_t)off, size, scratch, &x);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
    } else if (x.data || x.len == 0) {
        fuse_reply_buf(req, x.data, x.len); /* tier memory: no copy */
    } else {
        /* An SSD entry: splice from its file when the kernel allows. */
        struct fuse_bufvec bv = FUSE_BUFVEC_INIT(x.len);
        bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
        bv.buf[0].fd = x.fd;
        bv.buf[0].pos = (off_t)x.pos;
        fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    }
    free(scratch);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cfs_fs *fs = fs_of(req);
    if (is_ctl_ino(ino)) {
        fs_ctl_open(req, fs, ino, fi);
        return;
    }
    cfs_id id;
    const struct cfs_entry *e = entry_of(fs, ino, &id);
    if (!e) {
        fuse_reply_err(req, ESTALE);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (S_ISDIR(e->mode)) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    /* Only regular files get here (the kernel opens special files itself),
     * and the data path exists before the session loop starts. */
    if (!S_ISREG(e->mode)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    /* The exact watch's own open of the file it is told about (the event's
     * descriptor), before the kernel opens by itself: not the trainer's. */
    if (atomic_load_explicit(&fs->watching, memory_order_acquire) &&
        syscall(SYS_tgkill, getpid(), fuse_req_ctx(req)->pid, 0) == 0) {
        fi->fh = 0;
        fi->noflush = 1;
        fi->keep_cache = 1;
        fuse_reply_open(req, fi);
        return;
    }
    if (fs->kernel_open && fs_switch_opens_off(fs)) {
        pid_t tid = fuse_req_ctx(req)->pid;
        if (!atomic_load(&fs->watching)) {
            cfs_metrics_add(fs->metrics, CFS_M_READS_RAM, 1);
        } else if (atomic_load(&fs->watch_exact) && !fs_take_served(fs, tid, id)) {
            /* In flight before the marks: the watch never saw it. */
            struct cfs_opener who;
            fs_opener_of(fs, tid, id, &who);
            (void)cfs_prefetch_open_seen(fs->prefetch, id, &who);
        }
        fuse_reply_err(req, ENOSYS);
        return;
    }
    prefetch_open(req, fs, id, fi);
}

/* A READ without a handle: the kernel opened the file itself (opens are
 * off) and did not find the pages.  Control files render a snapshot per
 * READ; a dataset file's reclaimed pages come from the source. */
static void unopened_read(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino, size_t size,
                          off_t off)
{
    if (is_ctl_ino(ino)) {
        struct ctl_handle h = {.file = (enum cfs_ctl_file)(ino - CTL_FILE_INO(0))};
        fs_settle_watch(fs); /* the opens a reader made before are counted */
        int rc = ino == CTL_DIR_INO || h.file == CFS_CTL_CONTROL
                     ? -EBADF
                     : fs_ctl_snapshot(fs, &h);
        if (rc < 0)
            fuse_reply_err(req, -rc);
        else
            fs_ctl_read(req, &h, size, off);
        free(h.text);
        return;
    }
    cfs_id id;
    struct cfs_prefetch_file *f = NULL;
    int rc = entry_of(fs, ino, &id) ? cfs_prefetch_open_unseen(fs->prefetch, id, &f) : -ESTALE;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    cfs_metrics_add(fs->metrics, CFS_M_READ_REQUESTS, 1);
    prefetch_read(req, fs, f, size, off);
    cfs_prefetch_release(fs->prefetch, f);
}

bool fs_read_never_waits(struct cfs_fuse_ring_slot *slot, uint64_t fh)
{
    (void)slot;
    const struct fs_open *o = (const struct fs_open *)(uintptr_t)fh;
    /* A control file's snapshot waits for the open watch (fs_settle_watch). */
    return o && o->kind == OPEN_DATA && cfs_prefetch_read_in_memory(o->handle);
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                struct fuse_file_info *fi)
{
    (void)ino;
    struct cfs_fs *fs = fs_of(req);
    if (!fi->fh) {
        unopened_read(req, fs, ino, size, off);
        return;
    }
    struct fs_open *o = open_of(fi);
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    switch (o->kind) {
    case OPEN_CTL:
        fs_ctl_read(req, o->handle, size, off);
        break;
    case OPEN_DATA:
        cfs_metrics_add(fs->metrics, CFS_M_READ_REQUESTS, 1);
        prefetch_read(req, fs, o->handle, size, off);
        break;
    }
    fs_open_put(fs, o);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    if (fi->fh)
        fs_open_put(fs_of(req), open_of(fi));
    fuse_reply_err(req, 0);
}
