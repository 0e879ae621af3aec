/* Which sightings are one open.  Once the kernel opens files itself
 * (fs_kernel_open.c), an open of a file by a reader's thread may be seen
 * up to three times, none of them alone both exact and free:
 *
 *   - PERM: the open watch's permission event (exact: the kernel never
 *     merges them; the opener waits for the daemon's answer);
 *   - TTY: the FUSE IOCTL (TCGETS) of the isatty() that Python's open()
 *     makes of every file it opens, right after the open (exact for such
 *     readers: each is a request; answered at once, never waited for by a
 *     fanotify reader);
 *   - NOTE: the watch's FAN_OPEN notification (free for the opener, read in
 *     batches, but the kernel merges a thread's opens of one file while
 *     the first is still queued);
 *   - SERVED: an open FUSE served while the watch started (counted there).
 *
 * The tally says of each sighting whether it is a new open (to count) or
 * one already counted: a TTY matches its thread's latest open of that file
 * not yet told by a TTY (a PERM or SERVED one, or a NOTE one of the last
 * second: a thread preempted between open and isatty); a NOTE matches
 * every open of the thread and file not yet noted (a merged notification
 * stands for all of them, since each was queued before it was read; in an
 * anonymous tally, the latest such open and those of its process).  An
 * open counted from a NOTE alone that no TTY follows within 100 ms is
 * a reader that does not call isatty() (cfs_open_tally_untold): its next
 * opens of one file may merge, so the watch needs its permission events
 * from then on.
 *
 * Before counting starts, the tally only learns whether the readers are
 * such: each FUSE OPEN (SERVED) followed by its thread's TTY of that file
 * before that thread's next open adds to a run of told opens, one without
 * resets it (cfs_open_tally_told_run).
 *
 * Opens older than KEEP_NS are forgotten (every sighting of one open comes
 * within that).  Thread safety: every call takes the tally's mutex. */
#ifndef CLAIRFS_OPEN_TALLY_H
#define CLAIRFS_OPEN_TALLY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cfs_open_sighting { CFS_OPEN_PERM, CFS_OPEN_TTY, CFS_OPEN_NOTE, CFS_OPEN_SERVED };

struct cfs_open_tally;

/* 0 or -ENOMEM. */
int cfs_open_tally_create(struct cfs_open_tally **out);
void cfs_open_tally_destroy(struct cfs_open_tally *t);

/* From now on sightings count (the watch is on); notes says whether the
 * watch reports opens as notifications (NOTE sightings will come);
 * anonymous, whether they name no reader (an ordinary user's watch,
 * cfs_open_watch_anonymous): every sighting is then one reader's, the
 * files alone telling opens apart (two readers' opens of one file within
 * a notification's lag may match each other's sightings), and the opens
 * FUSE served before whose TTY is still to come are moved to it.  A tid of
 * 0 (a reader the watch cannot name) is such a reader too. */
void cfs_open_tally_start(struct cfs_open_tally *t, bool notes, bool anonymous);
/* Whether start was called. */
bool cfs_open_tally_counting(struct cfs_open_tally *t);

/* A sighting of thread tid's open of FUSE node `node` at now_ns
 * (CLOCK_MONOTONIC): true when it is an open not counted before.  Before
 * start, only SERVED and TTY sightings are taken (for the run of told
 * opens) and the answer is false.  A NOTE's true must be followed by
 * cfs_open_tally_counted once the open is counted: its reader's TTY, which
 * the reader's next open follows, waits until then (the reader's opens
 * are counted in their order).  One NOTE is counted at a time (the
 * watch's thread). */
bool cfs_open_tally_seen(struct cfs_open_tally *t, enum cfs_open_sighting s, pid_t tid,
                         uint64_t node, uint64_t now_ns);
/* The same, with tid's process (0: not known), which an anonymous tally
 * keeps: the kernel merges one process's notifications of a file, so a
 * NOTE stands for the still unnoted opens of one process. */
bool cfs_open_tally_seen_by(struct cfs_open_tally *t, enum cfs_open_sighting s, pid_t tid,
                            pid_t proc, uint64_t node, uint64_t now_ns);
void cfs_open_tally_counted(struct cfs_open_tally *t);

/* True once, when an open counted from a NOTE alone has had no TTY for
 * 100 ms by now_ns: a reader that does not call isatty(); *tid is
 * its thread (0: not known), *node the file. */
bool cfs_open_tally_untold(struct cfs_open_tally *t, uint64_t now_ns, pid_t *tid,
                           uint64_t *node);

/* Whether opens counted from a NOTE alone wait for their TTY: untold may
 * say true later. */
bool cfs_open_tally_untold_pending(struct cfs_open_tally *t);

/* FUSE OPENs in a row, as of now, that their thread's TTY followed. */
uint64_t cfs_open_tally_told_run(struct cfs_open_tally *t);

#endif
