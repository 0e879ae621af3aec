/* One log sink for the whole project, with syslog levels.
 *
 * Library modules return -errno and leave the reporting to the caller that
 * can act on it; only the daemon, the tools and long-running threads (the
 * prefetcher, the peer server) log.  Until cfs_log_to_syslog() is called the
 * sink is stderr, prefixed with the program name. */
#ifndef CLAIRFS_LOG_H
#define CLAIRFS_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <syslog.h>

void cfs_log_init(const char *progname, int max_level);
void cfs_log_set_level(int max_level);
int cfs_log_level(void);
/* Switch to syslog(3); used once the daemon has detached from its terminal. */
void cfs_log_to_syslog(void);

void cfs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cfs_vlog(int level, const char *fmt, va_list ap);

/* A message for the caller to report (one line: line breaks that a name
 * in it carries become '?'), and rc back: `return cfs_error_msg(err, errlen,
 * -EINVAL, "option %s: ...", name);`.  err may be NULL. */
int cfs_error_msg(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cfs_verror_msg(char *err, size_t errlen, const char *fmt, va_list ap);

#define cfs_err(...) cfs_log(LOG_ERR, __VA_ARGS__)
#define cfs_warn(...) cfs_log(LOG_WARNING, __VA_ARGS__)
#define cfs_info(...) cfs_log(LOG_INFO, __VA_ARGS__)
#define cfs_debug(...)                                                                             \
    do {                                                                                           \
        if (cfs_log_level() >= LOG_DEBUG)                                                          \
            cfs_log(LOG_DEBUG, __VA_ARGS__);                                                       \
    } while (0)

#endif
