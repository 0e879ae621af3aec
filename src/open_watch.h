/* Opens seen without a round trip.  Once the switch to the kernel's own
 * opens (by default where every open counts, fs_kernel_open.c) has set the
 * connection's FUSE no_open, the kernel opens files without asking
 * clairfs, so nothing of an open reaches the daemon.  The open watch gets
 * them back afterwards, off the reader's path: a fanotify group reporting
 * file handles, an inode mark on every directory of the mount for the
 * opens and closes (FAN_OPEN, FAN_CLOSE_NOWRITE) of its children, and one
 * thread that reads the events in batches and hands each to a callback
 * with the file's FUSE node id and the opener's thread.
 *
 * Why this shape: an event is queued by the open itself (no wake-up of the
 * daemon per open while a batch is being read).  A FUSE file handle is the
 * node id, so no descriptor is opened per event.  Mount and filesystem
 * marks are refused on FUSE (its fsid is 0), and so are descriptor events'
 * path references a mount must not hold: a queued event with a descriptor
 * pins the mount, and an unmount right after the last read would fail
 * with EBUSY.  Inode marks pin only the directories' inodes.
 *
 * Identical events of one thread on one file that are still queued are
 * merged by the kernel: two opens of a file by one thread before the watch
 * has read the first would count once.  Without CAP_SYS_ADMIN the group
 * cannot report threads (FAN_REPORT_TID), and the kernel names the opener
 * only where it is the watch's own process: the events name no reader
 * (cfs_open_watch_anonymous).  So where allowed (CAP_SYS_ADMIN)
 * the opens come instead as permission events (FAN_OPEN_PERM) of a second
 * group, which the kernel never merges: the opener waits for the answer,
 * one wake-up of the watch's thread for the opens that arrive together,
 * still far less than the OPEN, RELEASE and FLUSH round trips it
 * replaces.  The thread answers them as they come and reads the
 * notifications (the closes) at most every 2 ms, so a permission event
 * costs one poll, one read, the node id, the answer and a close.  Those events carry a descriptor (permission events
 * cannot report handles), held only until the answer, while the opener
 * holds the mount anyway.  The queue holds 16384 events; an overflow is
 * logged once and the events lost are not counted.
 *
 * Thread safety: the callback runs on the watch's thread only; sync from
 * any thread; start, watch_dir and stop from one thread at a time. */
#ifndef CLAIRFS_OPEN_WATCH_H
#define CLAIRFS_OPEN_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cfs_open_watch;

/* One event: node is the file's FUSE node id, tid the opener's thread (as
 * a FUSE request's pid), 0 where the kernel does not tell (a reader in
 * another pid namespace; any other process's for an anonymous watch); opened and closed may both be set (a merged event: the open came
 * first); perm: a permission event's open (exactly one open). */
struct cfs_open_watch_event {
    uint64_t node;
    pid_t tid;
    bool opened, closed, perm;
};
typedef void (*cfs_open_watch_fn)(void *arg, const struct cfs_open_watch_event *ev);
/* An exact watch's open (cfs_open_watch_exact), before the callback hears
 * of it; both run while the opener waits. */
typedef void (*cfs_open_watch_note_fn)(void *arg, uint64_t node, pid_t tid);

/* What the watch's thread calls, each with arg. */
struct cfs_open_watch_hooks {
    cfs_open_watch_fn fn;
    cfs_open_watch_note_fn noted; /* NULL: none */
    /* After every wake-up of the thread (NULL: none); returns in how many
     * milliseconds it wants to be called again at the latest, 0: only at
     * the next wake-up. */
    unsigned (*tick)(void *arg, struct cfs_open_watch *w);
    void *arg;
};

/* The group and its thread, watching nothing yet.  notes_first: the opens
 * come as notifications (FAN_OPEN, merged as said above) until
 * cfs_open_watch_go_exact, where the caller counts them exactly by other
 * means (open_tally.h); else as permission events where allowed.  0, or
 * -errno with a one-line message in err. */
int cfs_open_watch_start(const struct cfs_open_watch_hooks *hooks, bool notes_first,
                         struct cfs_open_watch **out, char *err, size_t errlen);
/* Watch the regular files directly in directory path (the caller's
 * directories through the mount).  0, or -errno with a one-line message. */
int cfs_open_watch_dir(struct cfs_open_watch *w, const char *path, char *err, size_t errlen);
/* Returns once every event queued before the call has been handed to the
 * callback, or after timeout seconds: what a reader did before is then
 * counted (the metrics and stats files call it).  NULL is accepted. */
void cfs_open_watch_sync(struct cfs_open_watch *w, double timeout);
/* Stops the thread after the events already read; NULL is accepted. */
void cfs_open_watch_stop(struct cfs_open_watch *w);
/* Whether every open is one event (permission events, CAP_SYS_ADMIN):
 * then no open is merged, and each opener waits for the watch's thread to
 * see it (the note and the callback run before the open goes on). */
bool cfs_open_watch_exact(const struct cfs_open_watch *w);
/* Whether permission events are allowed (the group exists). */
bool cfs_open_watch_can_be_exact(const struct cfs_open_watch *w);
/* Whether the events name no reader: an ordinary user's group, which the
 * kernel tells only its own process's pid (FAN_REPORT_TID, and the others'
 * pids, need CAP_SYS_ADMIN). */
bool cfs_open_watch_anonymous(const struct cfs_open_watch *w);
/* Adds the permission events to a notes_first watch, on every directory
 * watched, then hands the notifications queued meanwhile to the callback;
 * the notifications of opens go on.  From the callback's thread
 * (the marks look the directories up through the mount: never from a
 * thread that answers FUSE requests).  0, or -errno with a one-line
 * message. */
int cfs_open_watch_go_exact(struct cfs_open_watch *w, char *err, size_t errlen);
/* Events handed to the callback, and queue overflows. */
uint64_t cfs_open_watch_events(const struct cfs_open_watch *w);
uint64_t cfs_open_watch_lost(const struct cfs_open_watch *w);

#endif
