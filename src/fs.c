/* The FUSE low-level operations over the catalog: names, attributes,
 * directory listings, symlinks and statfs from the catalog and the source
 * directory; open and read of regular files through the data path
 * (prefetch.h), which answers from a cache tier or the source; EROFS for
 * everything that would write.  The control namespace and the state xattr
 * are fs_ctl.c's.
 *
 * Each open file's handle is reference-counted (fs_i.h, struct fs_open):
 * the kernel may send RELEASE before the thread that replied to the last
 * READ has let go of the bytes.  Lookups of catalog inodes are counted, so
 * that the page-cache stager stores only into inodes the kernel knows and
 * learns (FORGET to zero) when the kernel dropped one with its pages. */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/log.h"
#include "open_watch.h"
#include "opener.h"

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
        cfs_warn("kernel_open: this kernel cannot open files without asking the file "
                 "system (no FUSE no_open); every open reaches clairfs");
    }
    if (fs->source_has_ctl_name)
        cfs_warn("%s/" CFS_CTL_DIRNAME " is hidden by the control namespace of the same name",
                 fs->source);
}

/* ---- names ----------------------------------------------------------------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
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
    const struct cfs_entry *e = entry_of(fs, parent, &dir);
    if (!e || is_ctl_ino(parent)) {
        fuse_reply_err(req, e ? ENOTDIR : ESTALE);
        return;
    }
    if (!S_ISDIR(e->mode)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
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

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    forget_one(fs_of(req), ino, nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct cfs_fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        forget_one(fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
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

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cfs_fs *fs = fs_of(req);
    cfs_id id;
    if (ino == CTL_DIR_INO) {
        fuse_reply_open(req, fi);
        return;
    }
    const struct cfs_entry *e = entry_of(fs, ino, &id);
    if (!e || is_ctl_ino(ino)) {
        fuse_reply_err(req, e ? ENOTDIR : ESTALE);
        return;
    }
    if (!S_ISDIR(e->mode)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

/* ---- files ------------------------------------------------------------------ */

/* Who opened entry id (process and parent), and the record of it: the
 * opener costs a table look-up (a /proc read once a second per thread), so
 * only while the order is learnt, or recorded. */
static void opener_of(struct cfs_fs *fs, pid_t tid, cfs_id id, struct cfs_opener *who)
{
    *who = (struct cfs_opener){0, 0};
    bool record = cfs_openers_recording(fs->openers);
    if (record || (fs->openers && cfs_prefetch_learning(fs->prefetch)))
        cfs_openers_lookup(fs->openers, tid, who);
    if (record) {
        char path[PATH_MAX];
        if (cfs_catalog_path(fs->catalog, id, path, sizeof(path)) >= 0)
            cfs_openers_record(fs->openers, who, path);
    }
}

/* An open served through FUSE while the open watch starts: its event is
 * to be skipped (fs_i.h). */
static void note_served(struct cfs_fs *fs, pid_t tid, cfs_id id)
{
    pthread_mutex_lock(&fs->served_mu);
    struct fs_served_open *s = &fs->served[fs->served_next++ % 64];
    s->tid = tid;
    s->id = id;
    clock_gettime(CLOCK_MONOTONIC, &s->at);
    pthread_mutex_unlock(&fs->served_mu);
}

/* Whether the watch's open event (tid, id) is one served through FUSE: a
 * note of the last 100 ms (an open's event follows its reply within
 * microseconds; an older note is of an open whose directory was not
 * marked yet, which sent no event, and must not hide the same thread's
 * next open of that file), taken once. */
static bool was_served(struct cfs_fs *fs, pid_t tid, cfs_id id)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    bool found = false;
    pthread_mutex_lock(&fs->served_mu);
    for (unsigned i = 0; i < 64 && !found; i++) {
        struct fs_served_open *s = &fs->served[i];
        int64_t age_ns = (int64_t)(now.tv_sec - s->at.tv_sec) * 1000000000 +
                         (now.tv_nsec - s->at.tv_nsec);
        if (s->tid == tid && s->id == id && s->tid != 0 && age_ns < 100000000) {
            s->tid = 0;
            found = true;
        }
    }
    pthread_mutex_unlock(&fs->served_mu);
    return found;
}

/* An open or close the kernel made without asking (open_watch.h). */
static void watched_open(void *arg, uint64_t node, pid_t tid, bool opened, bool closed)
{
    struct cfs_fs *fs = arg;
    cfs_id id;
    if (is_ctl_ino((fuse_ino_t)node) || !entry_of(fs, (fuse_ino_t)node, &id))
        return;
    if (opened && !was_served(fs, tid, id)) {
        struct cfs_opener who;
        opener_of(fs, tid, id, &who);
        (void)cfs_prefetch_open_seen(fs->prefetch, id, &who);
    }
    if (closed)
        cfs_prefetch_close_seen(fs->prefetch, id);
}

/* The open watch over every directory of the mount, or NULL with the
 * reason in err.  Each mark looks its directory up through the mount, so
 * this runs in a FUSE worker while others answer those lookups. */
static struct cfs_open_watch *watch_every_dir(struct cfs_fs *fs, char *err, size_t errlen)
{
    struct cfs_open_watch *w;
    if (!fs->mountpoint) {
        snprintf(err, errlen, "open watch: off");
        return NULL;
    }
    if (cfs_open_watch_start(watched_open, fs, &w, err, errlen) < 0)
        return NULL;
    size_t base = strlen(fs->mountpoint);
    char path[PATH_MAX];
    if (base + 2 > sizeof(path)) {
        snprintf(err, errlen, "open watch: %s: %s", fs->mountpoint, strerror(ENAMETOOLONG));
        goto fail;
    }
    memcpy(path, fs->mountpoint, base);
    for (cfs_id id = 0; id < fs->nentries; id++) {
        const struct cfs_entry *e = cfs_catalog_entry(fs->catalog, id);
        if (!e || !S_ISDIR(e->mode))
            continue;
        path[base] = '/';
        if (cfs_catalog_path(fs->catalog, id, path + base + 1, sizeof(path) - base - 1) < 0) {
            snprintf(err, errlen, "open watch: a directory's path: %s", strerror(ENAMETOOLONG));
            goto fail;
        }
        if (cfs_open_watch_dir(w, path, err, errlen) < 0)
            goto fail;
    }
    return w;
fail:
    cfs_open_watch_stop(w);
    return NULL;
}

/* -o kernel_open: true once every file is in the page cache.  The first
 * ENOSYS makes the kernel stop sending OPEN (and with it RELEASE; FLUSH
 * stops at the first close, which libfuse answers ENOSYS): from then on a
 * cached epoch costs no round trip.  The opens are then seen afterwards by
 * the open watch, started before the first ENOSYS so that it sees every
 * open the kernel makes by itself: each counts a read and moves the
 * trainer's position, and a file read for the last time is dropped at its
 * close, as before the switch.  Where the watch cannot start (fanotify
 * needs CAP_SYS_ADMIN) clairfs no longer sees opens: neither the trainer's
 * position nor the per-open counts move and no file is dropped after its
 * last read (unmount or the kernel's reclaim frees them); the opens in
 * flight at the switch are still answered ENOSYS and counted here.  Opens
 * served through FUSE while the watch starts are counted by that path and
 * their events skipped (note_served). */
static bool switch_opens_off(struct cfs_fs *fs)
{
    if (atomic_load_explicit(&fs->opens_off, memory_order_acquire))
        return true;
    if (!cfs_prefetch_all_staged(fs->prefetch))
        return false;
    /* One open switches; the others meanwhile are served as before, since
     * the marks may need lookups that only a free FUSE worker can answer. */
    if (pthread_mutex_trylock(&fs->switch_mu) != 0)
        return false;
    if (!atomic_load(&fs->opens_off)) {
        char err[PATH_MAX + 128];
        atomic_store(&fs->watching, true);
        fs->watch = watch_every_dir(fs, err, sizeof(err));
        atomic_store(&fs->watching, fs->watch != NULL);
        if (fs->watch)
            cfs_info("kernel_open: every file is in the page cache; the kernel opens files "
                     "without asking clairfs from now on (opens are counted as the mount "
                     "sees them afterwards)");
        else
            cfs_info("kernel_open: every file is in the page cache; the kernel opens files "
                     "without asking clairfs from now on (reads are no longer counted per "
                     "open: %s)",
                     err);
        atomic_store_explicit(&fs->opens_off, true, memory_order_release);
    }
    pthread_mutex_unlock(&fs->switch_mu);
    return true;
}

/* Every open the kernel made before now is counted (open_watch.h); a
 * no-op before the switch. */
static void settle_watch(struct cfs_fs *fs)
{
    if (!atomic_load_explicit(&fs->opens_off, memory_order_acquire))
        return;
    pthread_mutex_lock(&fs->switch_mu);
    cfs_open_watch_sync(fs->watch, 0.5);
    pthread_mutex_unlock(&fs->switch_mu);
}

void cfs_fs_stop_watch(struct cfs_fs *fs)
{
    if (!fs)
        return;
    pthread_mutex_lock(&fs->switch_mu);
    if (fs->watch)
        cfs_info("open watch: %" PRIu64 " opens and closes seen, %" PRIu64 " overflows",
                 cfs_open_watch_events(fs->watch), cfs_open_watch_lost(fs->watch));
    cfs_open_watch_stop(fs->watch);
    fs->watch = NULL;
    pthread_mutex_unlock(&fs->switch_mu);
}

/* A regular file through the data path. */
static void prefetch_open(fuse_req_t req, struct cfs_fs *fs, cfs_id id, struct fuse_file_info *fi)
{
    struct cfs_prefetch_file *f = NULL;
    struct cfs_opener who;
    pid_t tid = fuse_req_ctx(req)->pid;
    opener_of(fs, tid, id, &who);
    if (atomic_load_explicit(&fs->watching, memory_order_acquire))
        note_served(fs, tid, id); /* before the reply, which the event follows */
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

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
    if (fs->kernel_open && switch_opens_off(fs)) {
        if (!atomic_load(&fs->watching)) /* else the watch counts it */
            cfs_metrics_add(fs->metrics, CFS_M_READS_RAM, 1);
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
        settle_watch(fs); /* the opens a reader made before are counted */
        int rc = ino == CTL_DIR_INO || h.file == CFS_CTL_CONTROL
                     ? -EBADF
                     : cfs_ctl_render(fs->ctl, h.file, &h.text, &h.len);
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

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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

struct fs_open *fs_open_new(struct cfs_fs *fs, enum open_kind kind, void *handle)
{
    struct fs_open *o = malloc(sizeof(*o));
    if (!o)
        return NULL;
    atomic_init(&o->refs, 1);
    o->kind = kind;
    o->handle = handle;
    o->prev = NULL;
    pthread_mutex_lock(&fs->opens_mu);
    o->next = fs->opens;
    if (fs->opens)
        fs->opens->prev = o;
    fs->opens = o;
    pthread_mutex_unlock(&fs->opens_mu);
    return o;
}

static void open_free(struct cfs_fs *fs, struct fs_open *o)
{
    switch (o->kind) {
    case OPEN_CTL:
        fs_ctl_handle_free(o->handle);
        break;
    case OPEN_DATA:
        cfs_prefetch_release(fs->prefetch, o->handle);
        break;
    }
    free(o);
}

void fs_open_put(struct cfs_fs *fs, struct fs_open *o)
{
    if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_lock(&fs->opens_mu);
    if (o->prev)
        o->prev->next = o->next;
    else
        fs->opens = o->next;
    if (o->next)
        o->next->prev = o->prev;
    pthread_mutex_unlock(&fs->opens_mu);
    open_free(fs, o);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    if (fi->fh)
        fs_open_put(fs_of(req), open_of(fi));
    fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
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

static void op_retrieve_reply(fuse_req_t req, void *cookie, fuse_ino_t ino, off_t offset,
                              struct fuse_bufvec *bufv);

static const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .retrieve_reply = op_retrieve_reply,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = fs_op_setattr,
    .readlink = op_readlink,
    .mknod = erofs_mknod,
    .mkdir = erofs_mkdir,
    .unlink = erofs_unlink,
    .rmdir = erofs_unlink,
    .symlink = erofs_symlink,
    .rename = erofs_rename,
    .link = erofs_link,
    .open = op_open,
    .read = op_read,
    .write = fs_op_write,
    .release = op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .statfs = op_statfs,
    .setxattr = erofs_setxattr,
    .getxattr = fs_op_getxattr,
    .listxattr = fs_op_listxattr,
    .removexattr = erofs_removexattr,
    .create = erofs_create,
    .fallocate = erofs_fallocate,
    .copy_file_range = erofs_copy_file_range,
};

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
    pthread_mutex_init(&fs->opens_mu, NULL);
    fs->catalog = cfg->catalog;
    fs->nentries = cfs_catalog_entry_count(cfg->catalog);
    fs->ctl = cfg->ctl;
    fs->metrics = cfg->metrics;
    fs->owner_uid = cfg->owner_uid;
    fs->owner_gid = cfg->owner_gid;
    fs->splice_read = cfg->splice_read;
    fs->kernel_open = cfg->kernel_open;
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
    pthread_mutex_destroy(&fs->switch_mu);
    pthread_mutex_destroy(&fs->served_mu);
    /* After the session: handles whose RELEASE the unmount dropped. */
    for (struct fs_open *o = fs->opens, *next; o; o = next) {
        next = o->next;
        open_free(fs, o);
    }
    pthread_mutex_destroy(&fs->opens_mu);
    if (fs->source_fd >= 0)
        close(fs->source_fd);
    free(fs->open_err_logged);
    free((void *)fs->nlookup);
    free(fs->source);
    free(fs->mountpoint);
    free(fs);
}

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
static void op_retrieve_reply(fuse_req_t req, void *cookie, fuse_ino_t ino, off_t offset,
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
