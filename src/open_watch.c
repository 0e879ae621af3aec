/* Opens seen without a round trip: a fanotify watch of the mount
 * (open_watch.h). */
#include "open_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/log.h"

/* After a batch, let the next one gather for this long: a cached epoch
 * opens a file every few microseconds, and a wake-up per open would cost
 * the daemon what the round trips did.  The trainer's position lags by at
 * most this much, which matters little once every file is staged. */
#define BATCH_GATHER_MS 2

struct cfs_open_watch {
    int fan_fd;
    int perm_fd; /* FAN_OPEN_PERM, one event per open; -1 where refused */
    bool notes_open;         /* fan_fd's marks report opens too (FAN_OPEN) */
    bool anonymous;          /* fan_fd names no opener (an ordinary user's) */
    atomic_bool perm_marked; /* perm_fd's marks are set: every open waits */
    char **dirs;             /* the directories watched, for cfs_open_watch_go_exact */
    size_t ndirs, dirs_cap;
    int wake_fd; /* eventfd: a sync or the stop asked */
    struct cfs_open_watch_hooks hooks;
    pthread_t thread;
    pthread_mutex_t mu; /* guards what follows; cv: done moved */
    pthread_cond_t cv;
    uint64_t asked, done; /* syncs asked, and answered by a drain */
    bool stop;
    _Atomic uint64_t events, lost;
};

/* FUSE's file handle (fuse_encode_fh): the node id, high word first,
 * then the generation. */
#define FUSE_FILEID_INO64_GEN 0x81

static bool node_of(const struct fanotify_event_metadata *m, uint64_t *node)
{
    const char *p = (const char *)m + m->metadata_len, *end = (const char *)m + m->event_len;
    while (p + sizeof(struct fanotify_event_info_header) <= end) {
        const struct fanotify_event_info_header *hdr = (const void *)p;
        if (hdr->len == 0 || p + hdr->len > end)
            return false;
        if (hdr->info_type == FAN_EVENT_INFO_TYPE_FID) {
            const struct fanotify_event_info_fid *fid = (const void *)p;
            const struct file_handle *fh = (const void *)fid->handle;
            if (fh->handle_type != FUSE_FILEID_INO64_GEN || fh->handle_bytes < 8)
                return false;
            uint32_t w[2];
            memcpy(w, fh->f_handle, sizeof(w));
            *node = (uint64_t)w[0] << 32 | w[1];
            return true;
        }
        p += hdr->len;
    }
    return false;
}

static void handle_event(struct cfs_open_watch *w, const struct fanotify_event_metadata *m)
{
    if (m->mask & FAN_Q_OVERFLOW) {
        if (atomic_fetch_add(&w->lost, 1) == 0)
            cfs_warn("open watch: the kernel's event queue overflowed; opens made meanwhile "
                     "are not counted");
        return;
    }
    uint64_t node;
    if ((m->mask & FAN_ONDIR) || !node_of(m, &node))
        return;
    atomic_fetch_add_explicit(&w->events, 1, memory_order_relaxed);
    const struct cfs_open_watch_event ev = {.node = node,
                                            .tid = m->pid,
                                            .opened = (m->mask & FAN_OPEN) != 0,
                                            .closed = (m->mask & FAN_CLOSE_NOWRITE) != 0};
    w->hooks.fn(w->hooks.arg, &ev);
}

/* The FUSE node id of descriptor fd, from its file handle: unlike fstat,
 * never a GETATTR round trip. */
static bool node_of_fd(int fd, uint64_t *node)
{
    union {
        struct file_handle fh;
        char bytes[sizeof(struct file_handle) + 32];
    } h;
    h.fh.handle_bytes = 32;
    int mount_id;
    if (name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0 ||
        h.fh.handle_type != FUSE_FILEID_INO64_GEN || h.fh.handle_bytes < 8)
        return false;
    uint32_t word[2];
    memcpy(word, h.fh.f_handle, sizeof(word));
    *node = (uint64_t)word[0] << 32 | word[1];
    return true;
}

/* A permission event's open, answered and waiting for the callback. */
/* One permission event: the opener waits until it is answered, so the
 * note and the callback run first (what they note is in place before the
 * open goes on) and the answer follows at once.  Answering a read's
 * events before their callbacks measured no faster (bench-hit 1.92x to
 * 1.88x tmpfs), and its faster loaders left identify_libraries'
 * refinements less time before their misses dropped the order.  The
 * event's descriptor names the file (directories send none: FAN_ONDIR is
 * not asked). */
static void handle_perm_event(struct cfs_open_watch *w, const struct fanotify_event_metadata *m)
{
    if (m->fd < 0)
        return;
    uint64_t node;
    if ((m->mask & FAN_OPEN_PERM) && node_of_fd(m->fd, &node)) {
        if (w->hooks.noted)
            w->hooks.noted(w->hooks.arg, node, m->pid);
        atomic_fetch_add_explicit(&w->events, 1, memory_order_relaxed);
        const struct cfs_open_watch_event ev = {
            .node = node, .tid = m->pid, .opened = true, .perm = true};
        w->hooks.fn(w->hooks.arg, &ev);
    }
    struct fanotify_response r = {.fd = m->fd, .response = FAN_ALLOW};
    if (write(w->perm_fd, &r, sizeof(r)) != sizeof(r))
        cfs_warn("open watch: answering an open: %s", strerror(errno));
    close(m->fd);
}

/* Hands every event queued on fd to handle: 0, or -errno of a read error,
 * which ends the watch.  Permission events (perm_fd) are answered there,
 * notifications (fan_fd) counted. */
static int drain(struct cfs_open_watch *w, int fd,
                 void (*handle)(struct cfs_open_watch *, const struct fanotify_event_metadata *))
{
    if (fd < 0)
        return 0;
    /* Aligned for the metadata records the kernel writes into it. */
    struct fanotify_event_metadata buf[16384 / sizeof(struct fanotify_event_metadata)];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        for (const struct fanotify_event_metadata *m = buf; FAN_EVENT_OK(m, n);
             m = FAN_EVENT_NEXT(m, n))
            handle(w, m);
        /* A short read took every event queued: no read for EAGAIN. */
        if ((size_t)n < sizeof(buf) - FAN_EVENT_METADATA_LEN - 256)
            return 0;
    }
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One loop for both groups, each polled only when it has work.  A
 * permission event is answered as soon as it comes: its opener waits.
 * The notifications (closes, and the merging watch's opens) are read at
 * most every BATCH_GATHER_MS, so that a cached epoch's thousands of closes
 * cost tens of wake-ups; a sync or the stop reads them at once.  Per open
 * that leaves one poll, one read, the node id, the answer and the close
 * of the event's descriptor. */
static void *watch_main(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-open-watch");
    struct cfs_open_watch *w = arg;
    uint64_t due = 0;     /* when the notifications may be read next */
    uint64_t tick_at = 0; /* when the tick wants to run at the latest; 0: never */
    int rc = 0;
    for (;;) {
        uint64_t now = now_ns();
        bool notes_due = now >= due;
        struct pollfd p[3] = {{.fd = w->wake_fd, .events = POLLIN},
                              {.fd = w->perm_fd, .events = POLLIN},
                              {.fd = notes_due ? w->fan_fd : -1, .events = POLLIN}};
        uint64_t wake_at = notes_due ? tick_at : tick_at && tick_at < due ? tick_at : due;
        int timeout = !wake_at ? -1 : wake_at <= now ? 0 : (int)((wake_at - now + 999999) / 1000000);
        if (poll(p, 3, timeout) < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        bool woken = p[0].revents & POLLIN;
        uint64_t asked = 0;
        if (woken) {
            uint64_t wakes;
            if (read(w->wake_fd, &wakes, sizeof(wakes)) < 0 && errno != EAGAIN)
                cfs_warn("open watch: its wake-up: %s", strerror(errno));
            pthread_mutex_lock(&w->mu);
            bool stop = w->stop;
            asked = w->asked;
            pthread_mutex_unlock(&w->mu);
            if (stop)
                break;
        }
        if (woken || (p[1].revents & POLLIN))
            rc = drain(w, w->perm_fd, handle_perm_event);
        if (rc == 0 && (woken || (p[2].revents & POLLIN))) {
            rc = drain(w, w->fan_fd, handle_event);
            due = now_ns() + BATCH_GATHER_MS * 1000000u;
        }
        if (rc < 0)
            break;
        if (w->hooks.tick) {
            unsigned ms = w->hooks.tick(w->hooks.arg, w);
            tick_at = ms ? now_ns() + (uint64_t)ms * 1000000u : 0;
        }
        if (woken) {
            /* Every event queued before those syncs were asked is handled. */
            pthread_mutex_lock(&w->mu);
            w->done = asked;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
        }
    }
    if (rc < 0)
        cfs_warn("open watch: reading events: %s; opens are no longer counted", strerror(-rc));
    pthread_mutex_lock(&w->mu);
    w->done = UINT64_MAX; /* no sync waits for a thread that has ended */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void wake(struct cfs_open_watch *w)
{
    uint64_t one = 1;
    if (write(w->wake_fd, &one, sizeof(one)) != sizeof(one))
        cfs_warn("open watch: cannot wake its thread: %s", strerror(errno));
}

/* The deadline `seconds` from now on the condition variable's clock. */
static struct timespec deadline_in(double seconds)
{
    struct timespec d;
    clock_gettime(CLOCK_MONOTONIC, &d);
    d.tv_sec += (time_t)seconds;
    d.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (d.tv_nsec >= 1000000000L) {
        d.tv_sec++;
        d.tv_nsec -= 1000000000L;
    }
    return d;
}

void cfs_open_watch_sync(struct cfs_open_watch *w, double timeout)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    uint64_t target = ++w->asked;
    pthread_mutex_unlock(&w->mu);
    wake(w);
    struct timespec deadline = deadline_in(timeout);
    pthread_mutex_lock(&w->mu);
    while (w->done < target && pthread_cond_timedwait(&w->cv, &w->mu, &deadline) == 0)
        ;
    pthread_mutex_unlock(&w->mu);
}

int cfs_open_watch_start(const struct cfs_open_watch_hooks *hooks, bool notes_first,
                         struct cfs_open_watch **out, char *err, size_t errlen)
{
    *out = NULL;
    struct cfs_open_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        snprintf(err, errlen, "open watch: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    w->hooks = *hooks;
    w->wake_fd = -1;
    w->perm_fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    /* FAN_REPORT_TID: the thread, as a FUSE request names it, and fewer
     * merged events (one thread's, not one process's).  A mark a directory:
     * lift the per-group limit where allowed, else keep the default one. */
    unsigned flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID | FAN_REPORT_TID;
    w->fan_fd = fanotify_init(flags | FAN_UNLIMITED_MARKS, O_RDONLY | O_CLOEXEC);
    if (w->fan_fd < 0 && errno == EPERM)
        w->fan_fd = fanotify_init(flags, O_RDONLY | O_CLOEXEC);
    if (w->fan_fd < 0 && errno == EPERM) {
        /* An ordinary user's group (Linux >= 5.13): no FAN_REPORT_TID, and
         * the kernel names the opener only where it is this process. */
        w->fan_fd = fanotify_init(flags & ~(unsigned)FAN_REPORT_TID, O_RDONLY | O_CLOEXEC);
        w->anonymous = w->fan_fd >= 0;
    }
    if (w->fan_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "open watch: fanotify_init: %s", strerror(errno));
        goto fail;
    }
    /* Permission events are never merged, so each open is one event; they
     * need CAP_SYS_ADMIN and cannot report file handles, so the event
     * carries a descriptor.  Refused: the opens come as FAN_OPEN above. */
    w->perm_fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_TID |
                                   FAN_UNLIMITED_MARKS | FAN_UNLIMITED_QUEUE,
                               O_RDONLY | O_CLOEXEC | O_LARGEFILE);
    w->notes_open = notes_first || w->perm_fd < 0;
    atomic_init(&w->perm_marked, !w->notes_open);
    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->wake_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "open watch: eventfd: %s", strerror(errno));
        goto fail;
    }
    rc = -pthread_create(&w->thread, NULL, watch_main, w);
    if (rc) {
        snprintf(err, errlen, "open watch: thread: %s", strerror(-rc));
        goto fail;
    }
    *out = w;
    return 0;
fail:
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->fan_fd >= 0)
        close(w->fan_fd);
    if (w->perm_fd >= 0)
        close(w->perm_fd);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return rc;
}

static int mark_perm(struct cfs_open_watch *w, const char *path)
{
    return fanotify_mark(w->perm_fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR,
                         FAN_OPEN_PERM | FAN_EVENT_ON_CHILD, AT_FDCWD, path);
}

int cfs_open_watch_dir(struct cfs_open_watch *w, const char *path, char *err, size_t errlen)
{
    if (w->ndirs == w->dirs_cap) {
        size_t cap = w->dirs_cap ? w->dirs_cap * 2 : 64;
        char **dirs = realloc(w->dirs, cap * sizeof(*dirs));
        if (!dirs) {
            snprintf(err, errlen, "open watch: %s", strerror(ENOMEM));
            return -ENOMEM;
        }
        w->dirs = dirs;
        w->dirs_cap = cap;
    }
    if (!(w->dirs[w->ndirs] = strdup(path))) {
        snprintf(err, errlen, "open watch: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    w->ndirs++;
    /* Closes first: every open the permission mark sees has its close seen
     * (the last read's close drops the file). */
    uint64_t open = w->notes_open ? FAN_OPEN : 0;
    if (fanotify_mark(w->fan_fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR,
                      open | FAN_CLOSE_NOWRITE | FAN_EVENT_ON_CHILD, AT_FDCWD, path) < 0 ||
        (atomic_load(&w->perm_marked) && mark_perm(w, path) < 0)) {
        int rc = -errno;
        snprintf(err, errlen, "open watch: fanotify_mark %s: %s", path, strerror(errno));
        return rc;
    }
    return 0;
}

int cfs_open_watch_go_exact(struct cfs_open_watch *w, char *err, size_t errlen)
{
    if (atomic_load(&w->perm_marked))
        return 0;
    if (w->perm_fd < 0) {
        snprintf(err, errlen, "fanotify's permission events need CAP_SYS_ADMIN");
        return -EPERM;
    }
    for (size_t i = 0; i < w->ndirs; i++)
        if (mark_perm(w, w->dirs[i]) < 0) {
            int rc = -errno;
            snprintf(err, errlen, "open watch: fanotify_mark %s: %s", w->dirs[i],
                     strerror(errno));
            return rc;
        }
    atomic_store(&w->perm_marked, true);
    /* The opens made before the marks were in place have their
     * notifications queued by now: the caller hears of them before it
     * takes every open as a permission event. */
    int rc = drain(w, w->fan_fd, handle_event);
    if (rc < 0) {
        snprintf(err, errlen, "open watch: reading events: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

void cfs_open_watch_stop(struct cfs_open_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_mutex_unlock(&w->mu);
    wake(w);
    pthread_join(w->thread, NULL);
    close(w->wake_fd);
    close(w->fan_fd);
    if (w->perm_fd >= 0)
        close(w->perm_fd); /* an opener still waiting is let through */
    for (size_t i = 0; i < w->ndirs; i++)
        free(w->dirs[i]);
    free(w->dirs);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

uint64_t cfs_open_watch_events(const struct cfs_open_watch *w)
{
    return w ? atomic_load(&w->events) : 0;
}

bool cfs_open_watch_exact(const struct cfs_open_watch *w)
{
    return w && atomic_load(&w->perm_marked);
}

bool cfs_open_watch_anonymous(const struct cfs_open_watch *w)
{
    return w && w->anonymous;
}

bool cfs_open_watch_can_be_exact(const struct cfs_open_watch *w)
{
    return w && w->perm_fd >= 0;
}

uint64_t cfs_open_watch_lost(const struct cfs_open_watch *w)
{
    return w ? atomic_load(&w->lost) : 0;
}
