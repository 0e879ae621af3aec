/* Who opens a file: the FUSE request names the calling thread; order
 * identification needs its process and that process's parent (DataLoader
 * workers are children of their trainer rank's process).  Read from
 * /proc/TID/status ("Tgid:" and "PPid:") and cached per thread id in a
 * small table, because opens are hot and a process's parent stays what it
 * was while it lives.  Thread ids are reused, so an entry expires after a
 * second: a thread id reused within one second by another process of
 * another parent (the kernel hands pids out in increasing order up to
 * pid_max first) is mislabelled for at most that second.
 *
 * The optional record (-o record_opens=FILE) writes "PID PPID PATH" per
 * open, the format clairfs-plan --identify reads, to look at a job's order
 * after the fact.
 *
 * Thread safety: every function may be called from any thread, except
 * create/destroy. */
#ifndef CLAIRFS_OPENER_H
#define CLAIRFS_OPENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clairfs/prefetch.h"

struct cfs_openers;

/* proc: the /proc to read ("/proc"; tests give a tree of their own).
 * record_path: the record's file (truncated), or NULL.  0 or -errno with a
 * one-line message in err. */
int cfs_openers_create(const char *proc, const char *record_path, struct cfs_openers **out,
                       char *err, size_t errlen);
void cfs_openers_destroy(struct cfs_openers *o);

/* The process and parent of thread tid (0: unknown, e.g. another pid
 * namespace; then both are 0). */
void cfs_openers_lookup(struct cfs_openers *o, pid_t tid, struct cfs_opener *out);
/* /proc reads so far (the cache's misses), for tests and benchmarks. */
uint64_t cfs_openers_proc_reads(struct cfs_openers *o);

bool cfs_openers_recording(const struct cfs_openers *o);
/* One line of the record; a write error is logged once and ends it. */
void cfs_openers_record(struct cfs_openers *o, const struct cfs_opener *who, const char *path);

#endif
