/* The index's health check at mount: is the LMDB environment in DIR one
 * this clairfs may open, and if not, move it aside so that it is rebuilt.
 *
 * LMDB checksums nothing and answers some corrupt structures with an
 * assertion (abort) or a wild read (SIGSEGV, SIGBUS), so an environment
 * that a bad sector touched cannot be opened in the daemon to find out.
 * cfs_index_check() opens it read-only in a short-lived child process and
 * walks every database and every record with cursors: keys in order, every
 * value inside the file, the free list's page numbers in range and unique,
 * and every page of the file either in a tree or free.  A failed
 * assertion, a signal or a wrong answer in the child is damage; the
 * daemon's own process never touches the suspect pages.  Call it before
 * the process opens the environment and before it has threads of its own
 * (the child only reads and _exits: under MPI that is still fork-safe with
 * glibc, but nothing in the child may use MPI).
 *
 * The environment records its format in database "meta", key "format"
 * (written by cfs_index_open); another value is an environment of another
 * clairfs and is treated like damage: moved aside and rebuilt.  An
 * environment without that record (older than it) is opened as before:
 * every record in it carries its own version and is judged by its reader. */
#ifndef CLAIRFS_INDEX_CHECK_H
#define CLAIRFS_INDEX_CHECK_H

#include <stddef.h>

/* The value of meta/"format" that this clairfs writes and accepts. */
#define CFS_INDEX_FORMAT "clairfs-index 1"

/* Check the environment in dir (a missing dir or data.mdb is sound: there is
 * nothing to trust yet).  0: sound; -EBADMSG: damaged; -EPROTO: written by
 * another clairfs format; both with the reason in why (e.g. "MDB_CORRUPTED
 * in cache records").  Another -errno when it could not be checked (the
 * normal open then reports it). */
int cfs_index_check(const char *dir, char *why, size_t whylen);

/* cfs_index_check(), and on damage or another format: the environment's
 * files moved to DIR.damaged (replacing the copy an earlier rebuild left
 * there, so at most one is kept; removed when they cannot be moved), so
 * that the next open starts an empty one.  0: sound, nothing done; 1: moved
 * aside, with one line in note saying so, for the caller to log; -errno
 * with the reason in note when it could not be checked or moved. */
int cfs_index_recover(const char *dir, char *note, size_t notelen);

#endif
