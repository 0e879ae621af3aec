/* The namespace the kernel walks: lookups, attributes, directory listings,
 * symlink targets and statfs, answered from the catalog (the source
 * directory only for a symlink's target and for statfs), so that walking
 * the tree never reaches the parallel filesystem.  The dataset does not
 * change during a mount, which is why every reply carries a day-long
 * timeout (CATALOG_TIMEOUT) and an absent name a negative entry: trainers
 * and Python imports probe the same names over and over.  The control
 * namespace's inodes are fs_ctl.c's; this file only routes to them.
 *
 * The one state kept here is the kernel's lookup count of each catalog
 * inode, because the page-cache stager (fs_pagecache.c) may store only
 * into an inode the kernel knows, and a FORGET down to zero tells the data
 * path that the kernel dropped a file together with its pages.  A count is
 * taken before its reply goes out and given back when the reply is refused
 * (reply_entry_counted). */
#include "fs_i.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static void entry_stat(const struct cfs_fs *fs, cfs_id id, const struct cfs_entry *e,
                       struct stat *st)
{
    (void)fs;
    memset(st, 0, sizeof(*st));
    st->st_ino = (ino_t)id + 1;
    st->st_mode = e->mode;
    st->st_nlink = e->nlink ? e->nlink : 1;
    st->st_uid = e->uid;
    st->st_gid = e->gid;
    st->st_size = (off_t)e->size;
    st->st_blocks = (blkcnt_t)((e->size + 511) / 512);
    st->st_mtim.tv_sec = e->mtime_sec;
    st->st_mtim.tv_nsec = e->mtime_nsec;
    /* The catalog keeps no atime or ctime; the mtime is the honest stand-in. */
    st->st_atim = st->st_mtim;
    st->st_ctim = st->st_mtim;
}

static int any_stat(const struct cfs_fs *fs, fuse_ino_t ino, struct stat *st)
{
    cfs_id id;
    if (is_ctl_ino(ino))
        return fs_ctl_stat(fs, ino, st);
    const struct cfs_entry *e = entry_of(fs, ino, &id);
    if (!e)
        return -ESTALE;
    entry_stat(fs, id, e, st);
    return 0;
}

static void fill_entry(const struct cfs_fs *fs, fuse_ino_t ino, struct fuse_entry_param *ep)
{
    memset(ep, 0, sizeof(*ep));
    ep->ino = ino;
    double t = is_ctl_ino(ino) ? CTL_TIMEOUT : CATALOG_TIMEOUT;
    ep->attr_timeout = t;
    ep->entry_timeout = t;
    any_stat(fs, ino, &ep->attr);
}

/* The kernel takes a lookup reference on ino (an entry reply it gets). */
static void looked_up(struct cfs_fs *fs, fuse_ino_t ino)
{
    if (ino >= 1 && ino - 1 < fs->nentries)
        atomic_fetch_add_explicit(&fs->nlookup[ino - 1], 1, memory_order_release);
}

/* A reference counted for a reply the kernel never got. */
static void not_looked_up(struct cfs_fs *fs, fuse_ino_t ino)
{
    if (ino >= 1 && ino - 1 < fs->nentries)
        atomic_fetch_sub_explicit(&fs->nlookup[ino - 1], 1, memory_order_relaxed);
}

/* Counted before the reply goes out: once the kernel has it, an OPEN and
 * its RELEASE can be answered on other threads, and a stager asking
 * kernel_known() in between must not take the inode for unknown (it would
 * skip the file, and nothing would queue it again).  A refused reply gives
 * the reference back. */
static int reply_entry_counted(fuse_req_t req, struct cfs_fs *fs,
                               const struct fuse_entry_param *ep)
{
    looked_up(fs, ep->ino);
    int rc = fuse_reply_entry(req, ep);
    if (rc != 0)
        not_looked_up(fs, ep->ino);
    return rc;
}

static void forget_one(struct cfs_fs *fs, fuse_ino_t ino, uint64_t n)
{
    if (ino < 1 || ino - 1 >= fs->nentries)
        return;
    _Atomic uint64_t *c = &fs->nlookup[ino - 1];
    uint64_t old = atomic_load_explicit(c, memory_order_relaxed);
    uint64_t next;
    do
        next = old > n ? old - n : 0;
    while (!atomic_compare_exchange_weak_explicit(c, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed));
    /* The kernel evicted the inode, and its page cache with it. */
    if (next == 0 && old > 0 && fs->prefetch)
        cfs_prefetch_forgot(fs->prefetch, (cfs_id)(ino - 1));
}

/* The catalog directory behind ino, or NULL once the reply is sent:
 * ESTALE for an inode that is no catalog entry, ENOTDIR for anything but a
 * directory. */
static const struct cfs_entry *dir_or_reply_err(fuse_req_t req, const struct cfs_fs *fs,
                                                fuse_ino_t ino, cfs_id *id)
{
    const struct cfs_entry *e = entry_of(fs, ino, id);
    if (!e || is_ctl_ino(ino)) {
        fuse_reply_err(req, e ? ENOTDIR : ESTALE);
        return NULL;
    }
    if (!S_ISDIR(e->mode)) {
        fuse_reply_err(req, ENOTDIR);
        return NULL;
    }
    return e;
}

/* ---- names ----------------------------------------------------------------- */

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct cfs_fs *fs = fs_of(req);
    struct fuse_entry_param ep;

    if (parent == FUSE_ROOT_ID && strcmp(name, CFS_CTL_DIRNAME) == 0) {
        fill_entry(fs, CTL_DIR_INO, &ep);
        fuse_reply_entry(req, &ep);
        return;
    }
    if (parent == CTL_DIR_INO) {
        /* Counted like any entry: only ".." (the root) has a count. */
        fuse_ino_t ino = fs_ctl_lookup(fs, name);
        if (!ino) {
            fuse_reply_err(req, ENOENT);
            return;
        }
        fill_entry(fs, ino, &ep);
        (void)reply_entry_counted(req, fs, &ep);
        return;
    }
    cfs_id dir;
    const struct cfs_entry *e = dir_or_reply_err(req, fs, parent, &dir);
    if (!e)
        return;
    cfs_id child;
    if (strcmp(name, ".") == 0)
        child = dir;
    else if (strcmp(name, "..") == 0)
        child = dir == 0 ? 0 : e->parent;
    else
        child = cfs_catalog_lookup(fs->catalog, dir, name);
    if (child == CFS_ID_NONE) {
        /* A negative entry: the kernel may remember that the name is absent
         * (trainers and Python imports probe many missing names). */
        memset(&ep, 0, sizeof(ep));
        ep.entry_timeout = CATALOG_TIMEOUT;
        fuse_reply_entry(req, &ep);
        return;
    }
    fill_entry(fs, (fuse_ino_t)child + 1, &ep);
    (void)reply_entry_counted(req, fs, &ep);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    forget_one(fs_of(req), ino, nlookup);
    fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct cfs_fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        forget_one(fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct cfs_fs *fs = fs_of(req);
    struct stat st;
    int rc = any_stat(fs, ino, &st);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &st, is_ctl_ino(ino) ? CTL_TIMEOUT : CATALOG_TIMEOUT);
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct cfs_fs *fs = fs_of(req);
    cfs_id id;
    const struct cfs_entry *e = entry_of(fs, ino, &id);
    if (!e || !S_ISLNK(e->mode)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    char path[PATH_MAX], target[PATH_MAX];
    int rc = cfs_catalog_path(fs->catalog, id, path, sizeof(path));
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    ssize_t n = readlinkat(fs->source_fd, path, target, sizeof(target) - 1);
    if (n < 0) {
        fuse_reply_err(req, errno);
        return;
    }
    target[n] = '\0';
    fuse_reply_readlink(req, target);
}

/* ---- directories ----------------------------------------------------------- */

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cfs_fs *fs = fs_of(req);
    cfs_id id;
    if (ino == CTL_DIR_INO) {
        fuse_reply_open(req, fi);
        return;
    }
    if (!dir_or_reply_err(req, fs, ino, &id))
        return;
    /* Listings never change: let the kernel keep them across opens. */
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

/* Directory offsets: entry k (0 ".", 1 "..", 2 + i the i-th child) is
 * followed by offset k + 1, so a resumed listing restarts at entry `off`. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    struct cfs_fs *fs = fs_of(req);
    cfs_id id = 0;
    const struct cfs_entry *dir = NULL;
    uint64_t nchildren;

    if (ino == CTL_DIR_INO) {
        nchildren = CFS_CTL_NFILES;
    } else {
        dir = entry_of(fs, ino, &id);
        if (!dir || !S_ISDIR(dir->mode)) {
            fuse_reply_err(req, dir ? ENOTDIR : ESTALE);
            return;
        }
        nchildren = dir->nchildren;
    }
    char *buf = malloc(size);
    /* readdirplus entries take lookup references (all but . and ..); an
     * entry is at least 128 bytes. */
    size_t nadded = 0;
    fuse_ino_t *added = plus ? malloc((size / 128 + 1) * sizeof(*added)) : NULL;
    if (!buf || (plus && !added)) {
        free(buf);
        free(added);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t pos = 0;
    for (uint64_t k = off < 0 ? 0 : (uint64_t)off; k < 2 + nchildren; k++) {
        const char *name;
        fuse_ino_t child;
        if (k == 0) {
            name = ".";
            child = ino;
        } else if (k == 1) {
            name = "..";
            child = dir ? (id == 0 ? FUSE_ROOT_ID : (fuse_ino_t)dir->parent + 1) : FUSE_ROOT_ID;
        } else if (!dir) {
            enum cfs_ctl_file f = (enum cfs_ctl_file)(k - 2);
            if (!fs_ctl_file_visible(fs, f))
                continue;
            name = cfs_ctl_file_name(f);
            child = CTL_FILE_INO(f);
        } else {
            cfs_id c = dir->first_child + (cfs_id)(k - 2);
            name = cfs_catalog_name(fs->catalog, c);
            /* The control namespace is never listed, and a source entry of
             * the same name is shadowed by it: listing one name that
             * resolves to another inode would confuse every tool. */
            if (id == 0 && strcmp(name, CFS_CTL_DIRNAME) == 0)
                continue;
            child = (fuse_ino_t)c + 1;
        }
        size_t rem = size - pos, n;
        if (plus) {
            struct fuse_entry_param ep;
            fill_entry(fs, child, &ep);
            n = fuse_add_direntry_plus(req, buf + pos, rem, name, &ep, (off_t)k + 1);
        } else {
            struct stat st = {.st_ino = child};
            if (any_stat(fs, child, &st) < 0)
                st.st_mode = S_IFDIR;
            n = fuse_add_direntry(req, buf + pos, rem, name, &st, (off_t)k + 1);
        }
        if (n > rem)
            break;
        pos += n;
        if (plus && k >= 2 && nadded < size / 128 + 1)
            added[nadded++] = child;
    }
    /* Counted before the reply, as reply_entry_counted() says why. */
    for (size_t i = 0; i < nadded; i++)
        looked_up(fs, added[i]);
    if (fuse_reply_buf(req, buf, pos) != 0)
        for (size_t i = 0; i < nadded; i++)
            not_looked_up(fs, added[i]);
    free(added);
    free(buf);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, false);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, true);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct cfs_fs *fs = fs_of(req);
    struct statvfs sv;
    if (fstatvfs(fs->source_fd, &sv) < 0) {
        fuse_reply_err(req, errno);
        return;
    }
    sv.f_flag |= ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}
