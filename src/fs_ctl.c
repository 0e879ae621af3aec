/* The part of the tree that is clairfs talking about itself: the control
 * namespace .clairfs/ (status, metrics and ready rendered by ctl.c at each
 * open, and control, the one writable file, whose commands go to ctl.c)
 * and the user.clairfs.state xattr that says where each regular file is
 * held.  Control inodes are never cached by the kernel (CTL_TIMEOUT 0):
 * ready appears and the metrics move while the mount lives.  Everything
 * else a write would change answers EROFS (fs.c). */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char state_xattr[] = "user.clairfs.state";

int fs_ctl_stat(const struct cfs_fs *fs, fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_uid = fs->owner_uid;
    st->st_gid = fs->owner_gid;
    st->st_mtim = st->st_atim = st->st_ctim = fs->start;
    if (ino == CTL_DIR_INO) {
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        return 0;
    }
    enum cfs_ctl_file f = (enum cfs_ctl_file)(ino - CTL_FILE_INO(0));
    if (!fs_ctl_file_visible(fs, f))
        return -ENOENT;
    /* Contents are rendered at open and served with direct_io, so the size
     * is reported as 0 and readers read to EOF. */
    st->st_mode = cfs_ctl_file_mode(f);
    st->st_nlink = 1;
    /* Once the kernel opens files itself (no direct_io), it reads no
     * further than the size: a bound the text never reaches.  The short
     * reply of the READ sets the kernel's size to the text's; the next
     * lookup (never cached) sets it back and drops the pages, so every
     * open reads a fresh snapshot. */
    if (f != CFS_CTL_CONTROL && atomic_load_explicit(&fs->opens_off, memory_order_relaxed))
        st->st_size = CTL_UNOPENED_SIZE;
    return 0;
}

fuse_ino_t fs_ctl_lookup(const struct cfs_fs *fs, const char *name)
{
    if (strcmp(name, "..") == 0)
        return FUSE_ROOT_ID;
    if (strcmp(name, ".") == 0)
        return CTL_DIR_INO;
    int f = cfs_ctl_file_lookup(name);
    if (f < 0 || !fs_ctl_file_visible(fs, (enum cfs_ctl_file)f))
        return 0;
    return CTL_FILE_INO(f);
}

/* The stats end with what is known of the read order (prefetch.h). */
static int append_order_line(struct cfs_fs *fs, struct ctl_handle *h)
{
    char line[400], roots[1024];
    cfs_prefetch_order_text(fs->prefetch, line, sizeof(line));
    /* Each dataset root's identification, before the order line (the
     * last line, whatever comes before it). */
    cfs_prefetch_roots_text(fs->prefetch, roots, sizeof(roots));
    char *text = NULL;
    int n = asprintf(&text, "%s%s%s%sorder:    %s\n", h->text, roots[0] ? "roots:    " : "", roots,
                     roots[0] ? "\n" : "", line);
    if (n < 0) {
        free(h->text);
        h->text = NULL;
        return -ENOMEM;
    }
    free(h->text);
    h->text = text;
    h->len = (size_t)n;
    return 0;
}

int fs_ctl_snapshot(struct cfs_fs *fs, struct ctl_handle *h)
{
    int rc = cfs_ctl_render(fs->ctl, h->file, &h->text, &h->len);
    if (rc == 0 && h->file == CFS_CTL_STATS && fs->prefetch)
        rc = append_order_line(fs, h);
    return rc;
}

void fs_ctl_open(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi)
{
    enum cfs_ctl_file f = (enum cfs_ctl_file)(ino - CTL_FILE_INO(0));
    int acc = fi->flags & O_ACCMODE;
    if (ino == CTL_DIR_INO) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    if (!fs_ctl_file_visible(fs, f)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if ((f == CFS_CTL_CONTROL) != (acc == O_WRONLY)) {
        fuse_reply_err(req, EACCES);
        return;
    }
    struct ctl_handle *h = calloc(1, sizeof(*h));
    if (!h) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    h->file = f;
    if (f != CFS_CTL_CONTROL) {
        /* One snapshot per open: a reader sees consistent figures however
         * many reads it takes. */
        int rc = fs_ctl_snapshot(fs, h);
        if (rc < 0) {
            free(h);
            fuse_reply_err(req, -rc);
            return;
        }
    }
    struct fs_open *o = fs_open_new(fs, OPEN_CTL, h);
    if (!o) {
        free(h->text);
        free(h);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)o;
    fi->direct_io = 1;
    fi->nonseekable = f == CFS_CTL_CONTROL;
    if (fuse_reply_open(req, fi) != 0)
        fs_open_put(fs, o); /* frees h */
}

void fs_ctl_read(fuse_req_t req, struct ctl_handle *h, size_t size, off_t off)
{
    if (h->file == CFS_CTL_CONTROL) {
        fuse_reply_err(req, EBADF);
        return;
    }
    if (off < 0 || (size_t)off >= h->len) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    size_t n = h->len - (size_t)off;
    fuse_reply_buf(req, h->text + off, n < size ? n : size);
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi)
{
    (void)off;
    (void)fi;
    struct cfs_fs *fs = fs_of(req);
    if (ino != CTL_FILE_INO(CFS_CTL_CONTROL)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    int rc = cfs_ctl_write(fs->ctl, buf, size);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_write(req, size);
}

/* Only `control` may be truncated, because a shell's `>` does that before
 * writing; every other attribute change is a write to a read-only tree. */
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi)
{
    (void)fi;
    struct cfs_fs *fs = fs_of(req);
    const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                      FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
    if (ino == CTL_FILE_INO(CFS_CTL_CONTROL) && (to_set & FUSE_SET_ATTR_SIZE) &&
        attr->st_size == 0 && (to_set & ~(FUSE_SET_ATTR_SIZE | times)) == 0) {
        struct stat st;
        fs_ctl_stat(fs, ino, &st);
        fuse_reply_attr(req, &st, CTL_TIMEOUT);
        return;
    }
    fuse_reply_err(req, EROFS);
}

/* ---- the state xattr */

static bool has_state_xattr(const struct cfs_fs *fs, fuse_ino_t ino, cfs_id *id)
{
    if (is_ctl_ino(ino))
        return false;
    const struct cfs_entry *e = entry_of(fs, ino, id);
    return e && S_ISREG(e->mode);
}

static void reply_xattr_value(fuse_req_t req, const char *value, size_t len, size_t size)
{
    if (size == 0)
        fuse_reply_xattr(req, len);
    else if (size < len)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, value, len);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct cfs_fs *fs = fs_of(req);
    cfs_id id;
    if (strcmp(name, state_xattr) != 0 || !has_state_xattr(fs, ino, &id)) {
        fuse_reply_err(req, ENODATA);
        return;
    }
    char state[32] = "pfs";
    if (fs->state_fn) {
        int rc = fs->state_fn(fs->state_arg, id, state, sizeof(state));
        if (rc < 0) {
            fuse_reply_err(req, -rc);
            return;
        }
    }
    reply_xattr_value(req, state, strlen(state), size);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct cfs_fs *fs = fs_of(req);
    cfs_id id;
    if (has_state_xattr(fs, ino, &id))
        reply_xattr_value(req, state_xattr, sizeof(state_xattr), size);
    else
        reply_xattr_value(req, "", 0, size);
}
