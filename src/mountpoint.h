/* The mount point: whether MOUNTPOINT can take a new mount, and the reclaim
 * of a dead FUSE mount left on it.  Private to the daemon.
 *
 * A daemon that dies without unmounting (kill -9, a crash, an MPI job torn
 * down) leaves its mount in the table with no one to answer it: every
 * access, stat included, fails with ENOTCONN until it is unmounted.  A job
 * script that retries must not meet an opaque "Transport endpoint is not
 * connected", so such a mount point is named for what it is, with the fix;
 * and with -o reclaim it is detached (lazily: a process still inside the
 * dead tree keeps it until it leaves) and the new mount takes its place.
 * Only a dead FUSE mount is ever detached: a live mount, ours or anyone
 * else's, stays an error. */
#ifndef CLAIRFS_MOUNTPOINT_H
#define CLAIRFS_MOUNTPOINT_H

#include <stdbool.h>
#include <stddef.h>

/* Checks path (MOUNTPOINT, {rank} already replaced) for a mount of source
 * (resolved): an existing directory, no live mount on it, not inside the
 * source.  A dead FUSE mount on it is an error naming the fix, or, with
 * reclaim, is detached first.  On success *resolved is the absolute path
 * (malloc'd).  Returns 0, or a negative errno with one line in err. */
int cfs_mountpoint_check(const char *path, const char *source, bool reclaim, char **resolved,
                         char *err, size_t errlen);

#endif
