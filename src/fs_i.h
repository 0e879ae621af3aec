/* Private to the FUSE layer (fs*.c): the filesystem's state and the inode
 * scheme its files speak.  Catalog entry id -> inode id + 1; the control
 * namespace at the top of the 64-bit inode space.
 *
 * Layers.  A file calls only files listed before it here, never one after
 * it, so that each can be read knowing only what is below it; the unit
 * test layers (tests/integration/test_layers.sh) holds the code to it from
 * the objects' symbols.  Bottom up:
 *   fs_open.c         the open file handles (fi->fh), reference-counted
 *   fs_ctl.c          .clairfs/ and the user.clairfs.state xattr
 *   fs_names.c        lookups, attributes, listings, statfs; lookup counts
 *   fs_kernel_open.c  -o kernel_open's switch and the open watch
 *   fs_pagecache.c    page-cache staging's notifications (cfs_kernel_ops)
 *   fs_files.c        open, read, release
 *   fs.c              the operations table, INIT, create and destroy
 *
 * fs_names.c, fs_kernel_open.c and fs_pagecache.c call none of each other;
 * fs.c reaches the others only through the table and the life cycle. */
#ifndef CLAIRFS_FS_I_H
#define CLAIRFS_FS_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "fs.h"
#include "fuse_ring.h"

/* The dataset does not change during a mount, so the kernel may keep names
 * and attributes for a day.  The control namespace changes (ready appears,
 * metrics grow), so its entries are never cached. */
#define CATALOG_TIMEOUT 86400.0
#define CTL_TIMEOUT 0.0
/* The size of a readable control file once opens are off (fs_ctl_stat). */
#define CTL_UNOPENED_SIZE (1 << 20)

/* Control namespace inodes: the directory, then one per file. */
#define CTL_DIR_INO ((fuse_ino_t)0xffffffffffffff00ull)
#define CTL_FILE_INO(f) (CTL_DIR_INO + 1 + (fuse_ino_t)(f))

struct cfs_fs {
    /* First: the session's I/O callbacks find their ring here (fuse_ring.h). */
    struct cfs_fuse_ring_slot ring_slot;
    const struct cfs_catalog *catalog;
    uint32_t nentries;
    char *source;
    int source_fd;
    struct cfs_ctl *ctl;
    struct cfs_metrics *metrics;
    uid_t owner_uid;
    gid_t owner_gid;
    bool splice_read;
    /* The most bytes one FUSE_NOTIFY_RETRIEVE answers (the connection's
     * max_write, known at INIT); 0 before. */
    _Atomic size_t retrieve_max;
    /* The notify unique libfuse gives the next retrieve (fs_pagecache.c):
     * every fuse_lowlevel_notify_retrieve call is made under notify_mu. */
    pthread_mutex_t notify_mu;
    uint64_t notify_next;
    bool kernel_open;       /* not -o no_kernel_open */
    bool kernel_open_uncounted; /* -o kernel_open: switch even without an exact watch */
    atomic_bool switch_refused; /* no exact watch, and not -o kernel_open: never switch */
    /* A watch started without fanotify's permission events (no
     * CAP_SYS_ADMIN): the default switches only while the readers can be
     * counted by their isatty(), checked before a watch is started again. */
    atomic_bool no_perm_events;
    /* The watch sees each open before it goes on (permission events): it
     * notes in served[] what it counted while FUSE still serves opens, and
     * the FUSE open skips counting it (the other way round otherwise). */
    atomic_bool watch_exact;
    atomic_bool opens_off;  /* an open was answered ENOSYS: the kernel opens files itself */
    char *mountpoint;       /* for the open watch, or NULL */
    /* The open watch, started at the switch under switch_mu, before
     * opens_off is set; NULL where it could not start.  watching is set
     * before its first mark: from then on an open still served through
     * FUSE (in flight at the switch) is noted in served[], and the watch
     * skips its event, so that no open counts twice. */
    pthread_mutex_t switch_mu;
    struct cfs_open_watch *watch;
    atomic_bool watching;
    /* Which sightings are one open (open_tally.h), or NULL (no switch):
     * before the switch it learns whether every FUSE open is followed by
     * its isatty(); if so the watch starts with notifications alone and
     * the opens are counted by their IOCTL (watch_tty), until a reader
     * without isatty() adds the permission events. */
    struct cfs_open_tally *tally;
    atomic_bool watch_tty;
    atomic_bool watch_tty_exact; /* the permission events added since */
    atomic_bool watch_tty_asked; /* they were asked for (once: refused without CAP_SYS_ADMIN) */
    atomic_bool watch_anonymous; /* its events name no reader (cfs_open_watch_anonymous) */
    pthread_mutex_t served_mu;
    struct fs_served_open {
        pid_t tid;
        uint32_t id;
        struct timespec at;
    } served[64];
    unsigned served_next;
    bool source_has_ctl_name; /* SOURCE/.clairfs exists and is shadowed */
    struct timespec start;
    cfs_fs_state_fn state_fn;
    void *state_arg;
    struct cfs_prefetch *prefetch; /* the data path, set before the session serves */
    struct cfs_openers *openers;   /* who opens (opener.h), or NULL */
    /* One bit per entry: an open of it failed and was logged already. */
    _Atomic uint64_t *open_err_logged;
    /* The kernel's lookup count of each catalog inode: a page-cache store
     * needs the inode known, and FORGET down to 0 means its pages are gone. */
    _Atomic uint64_t *nlookup;
    struct fuse_session *se; /* for the page-cache notifications */
    pthread_mutex_t opens_mu;
    struct fs_open *opens; /* every open handle (fs_open_new) */
};

/* An open control file: readable ones hold the text rendered at open. */
struct ctl_handle {
    enum cfs_ctl_file file;
    char *text;
    size_t len;
};

/* fi->fh of every open file.  The kernel sends RELEASE as soon as it has
 * taken the reply of the last READ, which can be before the thread that
 * wrote that reply has returned from writev/splice: freeing the bytes in
 * RELEASE would race with the replying thread's last look at them (ASan
 * reports exactly that).  So each read holds a reference, the open holds
 * one, and whichever ends last frees the handle. */
enum open_kind { OPEN_CTL, OPEN_DATA };

struct fs_open {
    _Atomic unsigned refs;
    enum open_kind kind;
    void *handle;               /* struct ctl_handle or cfs_prefetch_file */
    struct fs_open *prev, *next; /* cfs_fs.opens, under opens_mu */
};

/* --- The file handles (fs_open.c). --- */

/* A handle for handle (one reference), listed in fs->opens: a RELEASE the
 * kernel still had queued when the mount went away never arrives, and
 * cfs_fs_destroy() releases what is left.  NULL when out of memory. */
struct fs_open *fs_open_new(struct cfs_fs *fs, enum open_kind kind, void *handle);
/* Drops a reference; the last one releases the handle and unlists it. */
void fs_open_put(struct cfs_fs *fs, struct fs_open *o);
/* Opens are off: the data handles' pins on staged files end (no RELEASE
 * will come for them). */
void fs_open_unpin_all(struct cfs_fs *fs);
/* Releases every handle still listed, once the session has stopped. */
void fs_open_free_all(struct cfs_fs *fs);

static inline struct fs_open *open_of(const struct fuse_file_info *fi)
{
    return (struct fs_open *)(uintptr_t)fi->fh;
}

static inline struct cfs_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static inline bool is_ctl_ino(fuse_ino_t ino)
{
    return ino >= CTL_DIR_INO && ino <= CTL_FILE_INO(CFS_CTL_NFILES - 1);
}

/* The catalog entry behind ino, or NULL for anything else. */
static inline const struct cfs_entry *entry_of(const struct cfs_fs *fs, fuse_ino_t ino, cfs_id *id)
{
    if (ino == 0 || ino - 1 >= fs->nentries)
        return NULL;
    *id = (cfs_id)(ino - 1);
    return cfs_catalog_entry(fs->catalog, *id);
}

/* ready appears once the plan is computed and prefetching has started. */
static inline bool fs_ctl_file_visible(const struct cfs_fs *fs, enum cfs_ctl_file f)
{
    return f != CFS_CTL_READY || cfs_ctl_is_ready(fs->ctl);
}

/* --- The control namespace and the state xattr (fs_ctl.c). --- */

/* Attributes of a control inode; -ENOENT for ready before it exists. */
int fs_ctl_stat(const struct cfs_fs *fs, fuse_ino_t ino, struct stat *st);
/* The inode of `name` in .clairfs/ ("." and ".." included), 0 when absent. */
fuse_ino_t fs_ctl_lookup(const struct cfs_fs *fs, const char *name);
/* OPEN and READ of a control inode; the handle is an OPEN_CTL fs_open. */
/* The text of readable control file h->file into h->text and h->len (the
 * stats end with the order's lines): 0 or -errno. */
int fs_ctl_snapshot(struct cfs_fs *fs, struct ctl_handle *h);
void fs_ctl_open(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_ctl_read(fuse_req_t req, struct ctl_handle *h, size_t size, off_t off);
/* Operations: writes and truncation reach only .clairfs/control; the
 * user.clairfs.state xattr of regular files. */
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi);
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);

/* --- Names, attributes and listings (fs_names.c). --- */

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi);
void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_statfs(fuse_req_t req, fuse_ino_t ino);

/* --- -o kernel_open: the switch and the open watch (fs_kernel_open.c). --- */

struct cfs_opener;
/* Who opened entry id from thread tid, in *who ({0, 0} when nobody asks:
 * only while the order is learnt or the opens are recorded), and the
 * record of the open when record_opens= is on. */
void fs_opener_of(struct cfs_fs *fs, pid_t tid, cfs_id id, struct cfs_opener *who);
/* Notes an open served through FUSE while the watch starts, before its
 * reply: the watch skips its event. */
void fs_note_served(struct cfs_fs *fs, pid_t tid, cfs_id id);
/* Whether the watch noted (tid, id) (exact watch, fs_i.h), taking the note. */
bool fs_take_served(struct cfs_fs *fs, pid_t tid, cfs_id id);
/* A data open FUSE serves, before its reply: told to the tally, or noted
 * for the watch.  True when the exact watch counted it already. */
bool fs_open_served(struct cfs_fs *fs, pid_t tid, cfs_id id);
/* True once opens are off (the caller answers ENOSYS); switches them off,
 * starting the watch, once every file is in the page cache. */
bool fs_switch_opens_off(struct cfs_fs *fs);
/* Waits until every open the kernel made before now is counted; a no-op
 * before the switch. */
void fs_settle_watch(struct cfs_fs *fs);

/* --- Page-cache staging, the kernel side (fs_pagecache.c). --- */

/* The kernel's answer to a retrieve (cfs_kernel_ops.retrieve). */
void fs_op_retrieve_reply(fuse_req_t req, void *cookie, fuse_ino_t ino, off_t offset,
                          struct fuse_bufvec *bufv);

/* --- Open, read and release (fs_files.c). --- */

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* IOCTL: none is supported (ENOTTY); the isatty() after an open is a
 * sighting of that open (fs_kernel_open.c). */
void fs_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                 struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
                 size_t out_bufsz);
/* The ring's question (fuse_ring.h): a READ of fh answered from memory. */
bool fs_read_never_waits(struct cfs_fuse_ring_slot *slot, uint64_t fh);

#endif
