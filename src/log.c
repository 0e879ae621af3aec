/* The project's one log sink (clairfs/log.h): stderr with the program's
 * name until the daemon detaches, syslog after, filtered by one level.
 * Also the one-line error messages that library modules hand back instead
 * of logging (cfs_error_msg): a module returns -errno and a message, and
 * only the caller that can act on the failure decides whether it is worth
 * a log line.  A message loses its line breaks, because a name in it (a
 * path, an option value) comes from the user and must not forge a second
 * log line. */
#include "clairfs/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Process-wide sink settings.  They are set once at start-up (and by tests
 * through cfs_log_init), so they are plain atomics rather than a context
 * object threaded through every module. */
static _Atomic int log_max_level = LOG_NOTICE;
static _Atomic int log_use_syslog;
static char log_progname[64] = "clairfs";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void cfs_log_init(const char *progname, int max_level)
{
    if (progname) {
        const char *slash = strrchr(progname, '/');
        snprintf(log_progname, sizeof(log_progname), "%s", slash ? slash + 1 : progname);
    }
    atomic_store(&log_max_level, max_level);
    atomic_store(&log_use_syslog, 0);
}

void cfs_log_set_level(int max_level)
{
    atomic_store(&log_max_level, max_level);
}

int cfs_log_level(void)
{
    return atomic_load(&log_max_level);
}

void cfs_log_to_syslog(void)
{
    openlog(log_progname, LOG_PID, LOG_DAEMON);
    atomic_store(&log_use_syslog, 1);
}

void cfs_vlog(int level, const char *fmt, va_list ap)
{
    if (level > atomic_load(&log_max_level))
        return;
    if (atomic_load(&log_use_syslog)) {
        vsyslog(level, fmt, ap);
        return;
    }
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%s: %s\n", log_progname, line);
    pthread_mutex_unlock(&log_lock);
}

void cfs_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cfs_vlog(level, fmt, ap);
    va_end(ap);
}

void cfs_verror_msg(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (!err || errlen == 0)
        return;
    vsnprintf(err, errlen, fmt, ap);
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = '?';
}

int cfs_error_msg(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cfs_verror_msg(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}
