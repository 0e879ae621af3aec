/* The switch to the kernel's own opens (by default where every open is
 * counted; -o kernel_open also where not, -o no_kernel_open never) that,
 * once every file is in the page cache, lets the kernel open files without
 * asking (the first OPEN answered ENOSYS), and the open watch (open_watch.h, fanotify) through which
 * clairfs still sees those opens afterwards.  It is a file of its own
 * because it is the part of the FUSE layer about the opens FUSE no longer
 * sends: who opened (opener.h), the watch over every directory of the
 * mount, and the note of the opens served through FUSE while the watch
 * starts (fs_i.h, served[]), so that none counts twice.  The open path
 * (fs_files.c) asks it whether to switch and tells it what it served; a
 * control file's snapshot first waits for the opens already made
 * (fs_settle_watch), so that a reader sees its own opens counted. */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#include "clairfs/log.h"
#include "open_tally.h"
#include "open_watch.h"
#include "opener.h"

/* FUSE opens in a row followed by their isatty() before the switch counts
 * opens by them (fs_i.h, tally). */
#define TOLD_RUN_MIN 64

/* Who opened entry id (process and parent), and the record of it: the
 * opener costs a table look-up (a /proc read once a second per thread), so
 * only while the order is learnt, or recorded. */
void fs_opener_of(struct cfs_fs *fs, pid_t tid, cfs_id id, struct cfs_opener *who)
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
void fs_note_served(struct cfs_fs *fs, pid_t tid, cfs_id id)
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
bool fs_take_served(struct cfs_fs *fs, pid_t tid, cfs_id id)
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

/* An open counted: its reads and the trainer's position. */
static void count_open(struct cfs_fs *fs, pid_t tid, cfs_id id)
{
    struct cfs_opener who;
    fs_opener_of(fs, tid, id, &who);
    (void)cfs_prefetch_open_seen(fs->prefetch, id, &who);
}

static uint64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Tells the tally that thread tid saw open `id` as s.  Where the watch
 * names no reader, with tid's process: the kernel merges one process's
 * notifications (a /proc read a second per thread, opener.h). */
static bool tally_seen(struct cfs_fs *fs, enum cfs_open_sighting s, pid_t tid, cfs_id id)
{
    struct cfs_opener who = {tid, 0};
    if (atomic_load_explicit(&fs->watch_anonymous, memory_order_relaxed))
        cfs_openers_lookup(fs->openers, tid, &who);
    return cfs_open_tally_seen_by(fs->tally, s, tid, who.pid, id, monotonic_ns());
}

/* An exact watch's open, before the kernel goes on with it and before it
 * is counted (watched_open): while FUSE may still be asked (the watch
 * starting, the opens in flight at the switch), the note tells that open
 * it is counted here; counted by their isatty(), the tally hears of it
 * before its IOCTL can come. */
static void watched_open_noted(void *arg, uint64_t node, pid_t tid)
{
    struct cfs_fs *fs = arg;
    cfs_id id;
    if (is_ctl_ino((fuse_ino_t)node) || !entry_of(fs, (fuse_ino_t)node, &id))
        return;
    if (atomic_load_explicit(&fs->watch_tty, memory_order_relaxed))
        (void)cfs_open_tally_seen(fs->tally, CFS_OPEN_PERM, tid, id, monotonic_ns());
    else
        fs_note_served(fs, tid, id);
}

/* The watch's tick, while opens are counted by their isatty(): a reader
 * that makes none was seen (an open its notification alone told, no TTY
 * after it), whose opens of one file may merge, or the order is being
 * learnt again (an order dropped), which needs the opens in the order they
 * were made: every open waits for the watch from now on.  Asks to be
 * called again while such an open waits for its TTY. */
static unsigned watch_untold(void *arg, struct cfs_open_watch *w)
{
    struct cfs_fs *fs = arg;
    pid_t tid;
    uint64_t id;
    if (!atomic_load_explicit(&fs->watch_tty, memory_order_relaxed) ||
        atomic_load_explicit(&fs->watch_tty_asked, memory_order_relaxed))
        return 0;
    char why[PATH_MAX + 64];
    if (cfs_prefetch_learning(fs->prefetch)) {
        snprintf(why, sizeof(why), "the read order is being learnt");
    } else if (cfs_open_tally_untold(fs->tally, monotonic_ns(), &tid, &id)) {
        char path[PATH_MAX];
        if (cfs_catalog_path(fs->catalog, (cfs_id)id, path, sizeof(path)) < 0)
            snprintf(path, sizeof(path), "(entry %" PRIu64 ")", id);
        if (tid)
            snprintf(why, sizeof(why), "thread %d opened %s without isatty()", (int)tid, path);
        else /* an ordinary user's watch names no reader */
            snprintf(why, sizeof(why), "a reader opened %s without isatty()", path);
    } else {
        return cfs_open_tally_untold_pending(fs->tally) ? 50 : 0; /* the TTY may still come */
    }
    char err[PATH_MAX + 128];
    int rc = cfs_open_watch_go_exact(w, err, sizeof(err));
    atomic_store(&fs->watch_tty_exact, rc == 0);
    atomic_store(&fs->watch_tty_asked, true);
    if (rc == 0)
        cfs_info("open watch: %s; every open is now counted as it is made (fanotify "
                 "permission events)",
                 why);
    else
        cfs_warn("open watch: %s, and opens may count out of order or, one reader's of one "
                 "file, once: %s",
                 why, err);
    return 0;
}

/* An open or close the kernel made without asking (open_watch.h). */
static void watched_open(void *arg, const struct cfs_open_watch_event *ev)
{
    struct cfs_fs *fs = arg;
    cfs_id id;
    if (is_ctl_ino((fuse_ino_t)ev->node) || !entry_of(fs, (fuse_ino_t)ev->node, &id))
        return;
    if (atomic_load_explicit(&fs->watch_tty, memory_order_relaxed)) {
        /* A permission event was told to the tally before its answer. */
        if (ev->opened && ev->perm) {
            count_open(fs, ev->tid, id);
        } else if (ev->opened && !atomic_load_explicit(&fs->watch_tty_exact, memory_order_relaxed) &&
                   cfs_open_tally_seen(fs->tally, CFS_OPEN_NOTE, ev->tid, id, monotonic_ns())) {
            /* Once every open is a permission event the notifications add
             * nothing, and could count one again: a permission event's open
             * is told before its notification is queued, and an earlier
             * notification of that thread and file read meanwhile would
             * take it for one of its own (one in 6 000, measured). */
            count_open(fs, ev->tid, id);
            cfs_open_tally_counted(fs->tally);
        }
        if (ev->closed)
            cfs_prefetch_close_seen(fs->prefetch, id);
        return;
    }
    bool exact = atomic_load_explicit(&fs->watch_exact, memory_order_relaxed);
    if (ev->opened && (exact || !fs_take_served(fs, ev->tid, id)))
        count_open(fs, ev->tid, id);
    if (ev->closed)
        cfs_prefetch_close_seen(fs->prefetch, id);
}

bool fs_open_served(struct cfs_fs *fs, pid_t tid, cfs_id id)
{
    /* Before the switch: does every open's isatty() follow it?  After the
     * tally starts, its IOCTL and its notification match it.  Told in
     * either case: the tally may start between this and its IOCTL. */
    if (fs->tally)
        (void)tally_seen(fs, CFS_OPEN_SERVED, tid, id);
    if (!atomic_load_explicit(&fs->watching, memory_order_acquire) ||
        atomic_load(&fs->watch_tty))
        return false;
    if (atomic_load(&fs->watch_exact))
        return fs_take_served(fs, tid, id);
    fs_note_served(fs, tid, id); /* before the reply, which the event follows */
    return false;
}

void fs_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                 struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
                 size_t out_bufsz)
{
    (void)arg, (void)fi, (void)flags, (void)in_buf, (void)in_bufsz, (void)out_bufsz;
    struct cfs_fs *fs = fs_of(req);
    cfs_id id;
    const struct cfs_entry *e;
    /* isatty(): the tally's sighting of the open it follows; counted here
     * once the watch counts opens by them.  Switched with the permission
     * events from the start, the tally never counts: nothing to tell it. */
    bool tally_listens = fs->tally && (atomic_load(&fs->watch_tty) ||
                                       !atomic_load_explicit(&fs->opens_off, memory_order_acquire));
    if (cmd == TCGETS && tally_listens && !is_ctl_ino(ino) && (e = entry_of(fs, ino, &id)) &&
        S_ISREG(e->mode)) {
        pid_t tid = fuse_req_ctx(req)->pid;
        if (tally_seen(fs, CFS_OPEN_TTY, tid, id) &&
            atomic_load(&fs->watch_tty))
            count_open(fs, tid, id);
    }
    fuse_reply_err(req, ENOTTY);
}

/* Whether the opens can be counted by their isatty(): every FUSE open of
 * a long run was followed by its thread's (Python's open() makes one), and
 * the order is not being learnt: the IOCTLs are answered by several
 * threads, which may count two readers' opens the other way round, and the
 * identification reads the order of the readers' first opens of an
 * epoch. */
static bool tty_countable(struct cfs_fs *fs)
{
    return fs->tally && cfs_open_tally_told_run(fs->tally) >= TOLD_RUN_MIN &&
           !cfs_prefetch_learning(fs->prefetch);
}

/* The open watch over every directory of the mount, or NULL with the
 * reason in err and *later set where a later open may switch (the readers
 * not countable by their isatty() yet, without permission events).  Each
 * mark looks its directory up through the mount, so this runs in a FUSE
 * worker while others answer those lookups. */
static struct cfs_open_watch *watch_every_dir(struct cfs_fs *fs, char *err, size_t errlen,
                                              bool *later)
{
    struct cfs_open_watch *w;
    *later = false;
    if (!fs->mountpoint) {
        snprintf(err, errlen, "open watch: off");
        return NULL;
    }
    /* Counted by their isatty(), the watch's notifications telling the
     * opens of a reader that makes none, and no opener waits for the
     * watch.  Without CAP_SYS_ADMIN that is the only exact count there is;
     * a reader without isatty() seen later is then counted by its
     * notifications, which may merge (watch_untold). */
    bool tty = tty_countable(fs);
    const struct cfs_open_watch_hooks hooks = {
        .fn = watched_open, .noted = watched_open_noted, .tick = watch_untold, .arg = fs};
    if (cfs_open_watch_start(&hooks, tty, &w, err, errlen) < 0)
        return NULL;
    atomic_store(&fs->watch_anonymous, cfs_open_watch_anonymous(w));
    bool can_be_exact = cfs_open_watch_can_be_exact(w);
    if (!can_be_exact)
        atomic_store(&fs->no_perm_events, true);
    if (!can_be_exact && !tty && !fs->kernel_open_uncounted) {
        snprintf(err, errlen, "%s",
                 fs->tally && cfs_open_tally_told_run(fs->tally) >= TOLD_RUN_MIN
                     ? "the read order is known"
                     : "every reader calls isatty() on the files it opens, as Python's open() "
                       "does");
        *later = true;
        goto fail;
    }
    if (tty) {
        /* Before the first mark: the opens FUSE serves meanwhile are told. */
        cfs_open_tally_start(fs->tally, true, cfs_open_watch_anonymous(w));
        atomic_store(&fs->watch_tty, true);
    }
    atomic_store(&fs->watch_exact, cfs_open_watch_exact(w));
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
    atomic_store(&fs->watch_tty, false);
    cfs_open_watch_stop(w);
    return NULL;
}

/* True once every file is in the page cache.  The first ENOSYS makes the
 * kernel stop sending OPEN (and with it RELEASE, even for the files it
 * opened through clairfs before: fs_open_unpin_all; FLUSH stops at the
 * first close, which libfuse answers ENOSYS): from then on a
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
 * their events skipped (fs_note_served). */
bool fs_switch_opens_off(struct cfs_fs *fs)
{
    if (atomic_load_explicit(&fs->opens_off, memory_order_acquire))
        return true;
    if (atomic_load_explicit(&fs->switch_refused, memory_order_relaxed) ||
        !cfs_prefetch_all_staged(fs->prefetch))
        return false;
    /* Without permission events, known from a watch started before: only
     * readers counted by their isatty(), checked before starting another. */
    if (atomic_load_explicit(&fs->no_perm_events, memory_order_relaxed) &&
        !fs->kernel_open_uncounted && !tty_countable(fs))
        return false;
    /* One open switches; the others meanwhile are served as before, since
     * the marks may need lookups that only a free FUSE worker can answer. */
    if (pthread_mutex_trylock(&fs->switch_mu) != 0)
        return false;
    if (atomic_load(&fs->switch_refused)) {
        pthread_mutex_unlock(&fs->switch_mu);
        return false;
    }
    if (!atomic_load(&fs->opens_off)) {
        char err[PATH_MAX + 128];
        bool later;
        bool said = atomic_load(&fs->no_perm_events);
        atomic_store(&fs->watching, true);
        fs->watch = watch_every_dir(fs, err, sizeof(err), &later);
        atomic_store(&fs->watching, fs->watch != NULL);
        if (!fs->watch && !fs->kernel_open_uncounted) {
            /* The default: the kernel's own opens only where each counts. */
            if (later && !said) /* once: the readers may change */
                cfs_info("every file is in the page cache, but opens keep reaching clairfs "
                         "until %s (without CAP_SYS_ADMIN the kernel's own opens are "
                         "counted by their isatty() alone; -o kernel_open switches anyway)",
                         err);
            else if (!later)
                cfs_info("every file is in the page cache, but opens keep reaching clairfs "
                         "(%s; -o kernel_open switches anyway)",
                         err);
            if (!later)
                atomic_store(&fs->switch_refused, true);
            pthread_mutex_unlock(&fs->switch_mu);
            return false;
        }
        if (fs->watch)
            cfs_info("kernel_open: every file is in the page cache; the kernel opens files "
                     "without asking clairfs from now on (opens are counted as the mount "
                     "sees them%s)",
                     atomic_load(&fs->watch_tty)     ? ", each one by the isatty() that follows it"
                     : atomic_load(&fs->watch_exact) ? ", each one"
                                                     : " afterwards");
        else
            cfs_info("kernel_open: every file is in the page cache; the kernel opens files "
                     "without asking clairfs from now on (reads are no longer counted per "
                     "open: %s)",
                     err);
        atomic_store_explicit(&fs->opens_off, true, memory_order_release);
        fs_open_unpin_all(fs);
    }
    pthread_mutex_unlock(&fs->switch_mu);
    return true;
}

/* Every open the kernel made before now is counted (open_watch.h); a
 * no-op before the switch.  The bound is for a watch that is stuck, not
 * slow: a busy host's thread takes seconds over a reader's thousands of
 * queued opens, or over the drop of an order (and the next one's plan)
 * that one of them asked for, and a metrics read right after cat's
 * 3 000 opens found 2 999 counted with 0.5 s. */
void fs_settle_watch(struct cfs_fs *fs)
{
    if (!atomic_load_explicit(&fs->opens_off, memory_order_acquire))
        return;
    pthread_mutex_lock(&fs->switch_mu);
    cfs_open_watch_sync(fs->watch, 10.0);
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
