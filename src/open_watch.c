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
#define BATCH_GATHER_NS 2000000L

struct cfs_open_watch {
    int fan_fd;
    int stop_fd; /* eventfd: stop asked */
    cfs_open_watch_fn fn;
    void *arg;
    pthread_t thread;
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
    w->fn(w->arg, node, m->pid, (m->mask & FAN_OPEN) != 0, (m->mask & FAN_CLOSE_NOWRITE) != 0);
}

/* Wait for the next events, or for stop: true when stop was asked. */
static bool wait_events(struct cfs_open_watch *w, int timeout_ms)
{
    struct pollfd p[2] = {{.fd = w->fan_fd, .events = POLLIN}, {.fd = w->stop_fd, .events = POLLIN}};
    int n = poll(p, 2, timeout_ms);
    return n > 0 && (p[1].revents & POLLIN);
}

static void *watch_main(void *arg)
{
    struct cfs_open_watch *w = arg;
    /* Aligned for the metadata records the kernel writes into it. */
    struct fanotify_event_metadata buf[16384 / sizeof(struct fanotify_event_metadata)];
    for (;;) {
        if (wait_events(w, -1))
            break;
        ssize_t n = read(w->fan_fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            cfs_warn("open watch: reading events: %s; opens are no longer counted", strerror(errno));
            break;
        }
        for (const struct fanotify_event_metadata *m = buf; FAN_EVENT_OK(m, n);
             m = FAN_EVENT_NEXT(m, n))
            handle_event(w, m);
        /* A full buffer means more is waiting: read on at once. */
        if ((size_t)n < sizeof(buf) / 2) {
            struct timespec gather = {0, BATCH_GATHER_NS};
            nanosleep(&gather, NULL);
        }
    }
    return NULL;
}

int cfs_open_watch_start(cfs_open_watch_fn fn, void *arg, struct cfs_open_watch **out, char *err,
                         size_t errlen)
{
    *out = NULL;
    struct cfs_open_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        snprintf(err, errlen, "open watch: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    w->fn = fn;
    w->arg = arg;
    w->stop_fd = -1;
    int rc = 0;
    /* FAN_REPORT_TID: the thread, as a FUSE request names it, and fewer
     * merged events (one thread's, not one process's).  A mark a directory:
     * lift the per-group limit where allowed, else keep the default one. */
    unsigned flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID | FAN_REPORT_TID;
    w->fan_fd = fanotify_init(flags | FAN_UNLIMITED_MARKS, O_RDONLY | O_CLOEXEC);
    if (w->fan_fd < 0 && errno == EPERM)
        w->fan_fd = fanotify_init(flags, O_RDONLY | O_CLOEXEC);
    if (w->fan_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "open watch: fanotify_init: %s", strerror(errno));
        goto fail;
    }
    w->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (w->stop_fd < 0) {
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
    if (w->stop_fd >= 0)
        close(w->stop_fd);
    if (w->fan_fd >= 0)
        close(w->fan_fd);
    free(w);
    return rc;
}

int cfs_open_watch_dir(struct cfs_open_watch *w, const char *path, char *err, size_t errlen)
{
    if (fanotify_mark(w->fan_fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR,
                      FAN_OPEN | FAN_CLOSE_NOWRITE | FAN_EVENT_ON_CHILD, AT_FDCWD, path) == 0)
        return 0;
    int rc = -errno;
    snprintf(err, errlen, "open watch: fanotify_mark %s: %s", path, strerror(errno));
    return rc;
}

void cfs_open_watch_stop(struct cfs_open_watch *w)
{
    if (!w)
        return;
    uint64_t one = 1;
    if (write(w->stop_fd, &one, sizeof(one)) != sizeof(one))
        cfs_warn("open watch: cannot wake its thread: %s", strerror(errno));
    pthread_join(w->thread, NULL);
    close(w->stop_fd);
    close(w->fan_fd);
    free(w);
}

uint64_t cfs_open_watch_events(const struct cfs_open_watch *w)
{
    return w ? atomic_load(&w->events) : 0;
}

uint64_t cfs_open_watch_lost(const struct cfs_open_watch *w)
{
    return w ? atomic_load(&w->lost) : 0;
}
