/* The FUSE low-level operations: the catalog and the control namespace
 * presented as a read-only filesystem.  Private to the daemon (it includes
 * the FUSE headers).  Names and attributes come from the catalog, file
 * bytes from the data path (prefetch.h), symlink targets and statfs from
 * the source directory, the control files from the ctl module (src/fs*.c;
 * fs_i.h says which file does what, and their layer order).
 *
 * Inodes need no table: a catalog entry's inode is its id + 1 (the root,
 * id 0, is FUSE_ROOT_ID), and the control namespace lives at the top of the
 * 64-bit space, where no catalog id (32 bits) can reach.  Since every inode
 * is a pure function of the catalog, any inode the kernel hands back (NFS
 * export) stays valid for the life of the mount.  Lookups are counted per
 * catalog inode all the same (8 bytes a file) for page-cache staging: a
 * store needs an inode the kernel knows, and a FORGET down to zero means
 * the kernel dropped the inode with its pages (prefetch.h, "Page cache"). */
#ifndef CLAIRFS_FS_H
#define CLAIRFS_FS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "clairfs/catalog.h"
#include "clairfs/ctl.h"
#include "clairfs/metrics.h"
#include "clairfs/prefetch.h"

struct cfs_fs_config {
    const struct cfs_catalog *catalog;
    const char *source; /* absolute path of SOURCE */
    struct cfs_ctl *ctl;
    struct cfs_metrics *metrics;
    uid_t owner_uid; /* owner of .clairfs/ and its files */
    gid_t owner_gid;
    /* Ask the kernel for splice writes, so that a reply from an SSD entry's
     * file (an fd in the reply buffer) is spliced into /dev/fuse instead of
     * copied through a user buffer. */
    bool splice_read;
    /* -o kernel_open: once the data path has every file in the page cache,
     * answer the next open with ENOSYS, so that the kernel opens files
     * itself from then on (no OPEN, RELEASE or FLUSH round trips). */
    bool kernel_open;
    /* -o kernel_open given: switch even where the open watch cannot count
     * every open (open_watch.h: permission events need CAP_SYS_ADMIN);
     * by default the opens then keep reaching clairfs. */
    bool kernel_open_uncounted;
    /* Where the filesystem is mounted: after the switch to kernel opens,
     * the opens are watched there (open_watch.h).  NULL: not watched, the
     * opens after the switch are not seen. */
    const char *mountpoint;
    /* Who opens (opener.h), for order identification and record_opens=;
     * NULL: nobody asks.  Not owned. */
    struct cfs_openers *openers;
};

/* The state shown by the user.clairfs.state xattr of a regular file ("ram",
 * "ssd", "peer:N", "pfs", "inflight"); written NUL-terminated into buf.
 * Returns 0 or -errno.  Without a hook every file is "pfs". */
typedef int (*cfs_fs_state_fn)(void *arg, cfs_id id, char *buf, size_t len);

struct cfs_fs;
struct cfs_fuse_ring_slot;

/* Opens the source directory; returns 0 or -errno with a message in err. */
int cfs_fs_create(const struct cfs_fs_config *cfg, struct cfs_fs **out, char *err, size_t errlen);
void cfs_fs_destroy(struct cfs_fs *fs);

/* Install before the session starts serving. */
void cfs_fs_set_state_hook(struct cfs_fs *fs, cfs_fs_state_fn fn, void *arg);

/* The data path (cache tiers, prefetcher) that serves every regular file's
 * bytes.  Required: install before the session starts serving; the
 * prefetcher also answers user.clairfs.state. */
void cfs_fs_set_prefetch(struct cfs_fs *fs, struct cfs_prefetch *pf);

/* The kernel side of page-cache staging over session se, for
 * cfs_prefetch_kernel_start(fs's prefetcher, ops, fs). */
const struct cfs_kernel_ops *cfs_fs_kernel_ops(struct cfs_fs *fs, struct fuse_session *se);
/* The session's userdata is fs; its I/O callbacks find their transport
 * here (fuse_ring.h: cfs_fuse_ring_attach). */
struct cfs_fuse_ring_slot *cfs_fs_ring_slot(struct cfs_fs *fs);
/* Abort the session's connection (a stager blocked on a READ nobody will
 * answer, at shutdown); the session stays valid for unmount and destroy. */
void cfs_fs_abort(struct fuse_session *se);

/* Stop watching the kernel's own opens (-o kernel_open), before the data
 * path is stopped; cfs_fs_destroy does it too. */
void cfs_fs_stop_watch(struct cfs_fs *fs);

/* The operations table; the session's userdata must be the struct cfs_fs. */
const struct fuse_lowlevel_ops *cfs_fs_ops(void);

#endif
