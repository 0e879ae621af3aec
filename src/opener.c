/* Who opens a file: the thread-id cache over /proc and the open record
 * (design at the top of opener.h). */
#include "opener.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/log.h"

/* A power of two; more threads than this open files only on hosts with
 * more DataLoader workers than any trainer runs: they then share slots. */
#define SLOTS 1024u
#define TTL_NS 1000000000ull

struct slot {
    pid_t tid, pid, ppid;
    uint64_t expires;
};

struct cfs_openers {
    char *proc;
    pthread_mutex_t mu;
    struct slot slots[SLOTS];
    atomic_uint_fast64_t proc_reads;
    pthread_mutex_t record_mu;
    FILE *record;
    char *record_path;
};

static uint64_t coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cfs_openers_create(const char *proc, const char *record_path, struct cfs_openers **out,
                       char *err, size_t errlen)
{
    struct cfs_openers *o = calloc(1, sizeof(*o));
    *out = NULL;
    if (!o || !(o->proc = strdup(proc)) ||
        (record_path && !(o->record_path = strdup(record_path)))) {
        snprintf(err, errlen, "openers: out of memory");
        cfs_openers_destroy(o);
        return -ENOMEM;
    }
    pthread_mutex_init(&o->mu, NULL);
    pthread_mutex_init(&o->record_mu, NULL);
    if (record_path) {
        int fd = open(record_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || !(o->record = fdopen(fd, "w"))) {
            int rc = -errno;
            snprintf(err, errlen, "record_opens=%s: %s", record_path, strerror(errno));
            if (fd >= 0)
                close(fd);
            cfs_openers_destroy(o);
            return rc;
        }
    }
    *out = o;
    return 0;
}

void cfs_openers_destroy(struct cfs_openers *o)
{
    if (!o)
        return;
    if (o->record && fclose(o->record) != 0)
        cfs_warn("record_opens=%s: %s", o->record_path, strerror(errno));
    if (o->proc) {
        pthread_mutex_destroy(&o->mu);
        pthread_mutex_destroy(&o->record_mu);
    }
    free(o->record_path);
    free(o->proc);
    free(o);
}

/* Tgid and PPid of tid from PROC/tid/status: 0, or -errno. */
static int read_status(const struct cfs_openers *o, pid_t tid, pid_t *pid, pid_t *ppid)
{
    char path[256], buf[2048];
    snprintf(path, sizeof(path), "%s/%d/status", o->proc, (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int rc = n < 0 ? -errno : 0;
    close(fd);
    if (rc)
        return rc;
    buf[n] = '\0';
    const char *tg = strstr(buf, "\nTgid:"), *pp = strstr(buf, "\nPPid:");
    if (!tg || !pp)
        return -EINVAL;
    *pid = (pid_t)strtol(tg + 6, NULL, 10);
    *ppid = (pid_t)strtol(pp + 6, NULL, 10);
    return 0;
}

void cfs_openers_lookup(struct cfs_openers *o, pid_t tid, struct cfs_opener *out)
{
    *out = (struct cfs_opener){0, 0};
    if (tid <= 0)
        return;
    struct slot *s = &o->slots[((uint32_t)tid * 2654435761u >> 16) % SLOTS];
    uint64_t now = coarse_now_ns();
    pthread_mutex_lock(&o->mu);
    bool hit = s->tid == tid && s->expires > now;
    if (hit)
        *out = (struct cfs_opener){s->pid, s->ppid};
    pthread_mutex_unlock(&o->mu);
    if (hit)
        return;
    /* Outside the lock: the read takes microseconds; two threads missing
     * the same slot at once both read, and agree. */
    atomic_fetch_add_explicit(&o->proc_reads, 1, memory_order_relaxed);
    pid_t pid = 0, ppid = 0;
    if (read_status(o, tid, &pid, &ppid) < 0)
        return; /* gone already: unknown, and not cached */
    pthread_mutex_lock(&o->mu);
    *s = (struct slot){.tid = tid, .pid = pid, .ppid = ppid, .expires = now + TTL_NS};
    pthread_mutex_unlock(&o->mu);
    *out = (struct cfs_opener){pid, ppid};
}

uint64_t cfs_openers_proc_reads(struct cfs_openers *o)
{
    return atomic_load(&o->proc_reads);
}

bool cfs_openers_recording(const struct cfs_openers *o)
{
    return o && o->record;
}

void cfs_openers_record(struct cfs_openers *o, const struct cfs_opener *who, const char *path)
{
    pthread_mutex_lock(&o->record_mu);
    if (o->record && (fprintf(o->record, "%d %d %s\n", (int)who->pid, (int)who->ppid, path) < 0 ||
                      fflush(o->record) != 0)) {
        cfs_warn("record_opens=%s: %s; not recording any more", o->record_path, strerror(errno));
        fclose(o->record);
        o->record = NULL;
    }
    pthread_mutex_unlock(&o->record_mu);
}
