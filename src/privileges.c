/* What an ordinary user may do.  On a cluster the mount is not root's: it
 * goes through fusermount3, and fanotify (kernel_open's open watch),
 * umount2(MNT_DETACH) (reclaim) and a return from idle priority (the
 * order's search) need privileges a user lacks.  Each is probed here the
 * way the feature itself would be refused, so that the mount says once,
 * before it starts, what it does instead, rather than failing later or
 * silently doing less. */
#include "privileges.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clairfs/log.h"

/* /etc/fuse.conf's user_allow_other: what lets fusermount3 mount with
 * allow_other for a user other than root. */
static bool fuse_conf_allows_other(void)
{
    FILE *f = fopen("/etc/fuse.conf", "re");
    if (!f)
        return false;
    char line[256];
    bool yes = false;
    while (!yes && fgets(line, sizeof(line), f)) {
        char word[64];
        yes = sscanf(line, " %63s", word) == 1 && strcmp(word, "user_allow_other") == 0;
    }
    fclose(f);
    return yes;
}

/* Whether the effective capability set holds CAP (linux/capability.h's
 * number), from /proc/self/status: no libcap for two bits. */
static bool has_capability(int cap)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return false;
    char line[256];
    unsigned long long eff = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    return (eff >> cap) & 1;
}

#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYS_NICE_BIT 23

/* kernel_open's open watch: the last fanotify_init open_watch.c tries, tried. */
static bool open_watch_allowed(void)
{
    /* The watch's group as an ordinary user may have it: reporting
     * processes, not threads (FAN_REPORT_TID needs CAP_SYS_ADMIN). */
    int fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID,
                           O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != EPERM; /* another error is no privilege's: the switch reports it */
    close(fd);
    return true;
}

/* A thread at idle priority (the order's search, past its first seeds)
 * may return to the normal one only with CAP_SYS_NICE or an RLIMIT_NICE
 * that allows the nice value it had; the soft limit is raised to the hard
 * one where that is enough. */
static bool search_can_leave_idle(void)
{
    if (geteuid() == 0 || has_capability(CAP_SYS_NICE_BIT))
        return true;
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, 0);
    if (errno)
        return false;
    rlim_t need = (rlim_t)(20 - nice_now);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NICE, &rl) != 0)
        return false;
    if (rl.rlim_cur >= need)
        return true;
    if (rl.rlim_max < need)
        return false;
    rl.rlim_cur = need;
    return setrlimit(RLIMIT_NICE, &rl) == 0;
}

/* What an ordinary user may not do, said once each with what the mount
 * does instead: warnings for what the user asked for (on stderr, before
 * the mount), an info line at the mount for the defaults (log_started). */
bool cfs_privileges_check(struct cfs_options *o)
{
    unsigned uid = (unsigned)getuid();
    if (geteuid() != 0 && o->allow_other && !fuse_conf_allows_other()) {
        cfs_warn("allow_other: fusermount3 lets a user's mount admit other users only where "
                 "/etc/fuse.conf says user_allow_other, and it does not: mounting for uid %u "
                 "alone",
                 uid);
        o->allow_other = false;
    }
    if (o->kernel_open && !has_capability(CAP_SYS_ADMIN_BIT) && !open_watch_allowed())
        cfs_warn("kernel_open: its open watch (fanotify) is refused to uid %u (CAP_SYS_ADMIN, "
                 "or Linux >= 5.13 for an ordinary user): once every file is staged the kernel "
                 "opens files unseen, and reads, the epoch and the trainer's position stop "
                 "counting",
                 uid);
    if (geteuid() != 0 && o->reclaim)
        cfs_info("reclaim: umount2(MNT_DETACH) needs root; as uid %u a dead mount is detached "
                 "with fusermount3 -u -z, which detaches only this user's own mounts",
                 uid);
    return !o->no_identify && !search_can_leave_idle();
}

