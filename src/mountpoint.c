/* The mount point's checks (mountpoint.h): the mount table read from
 * /proc/self/mountinfo, since stat cannot tell a dead FUSE mount from any
 * other unreachable directory and a live mount from a plain one; the lazy
 * detach of a dead FUSE mount for -o reclaim. */
#include "mountpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/log.h"

/* Mounts stacked on one point, each dead, that a reclaim detaches at most. */
#define MAX_DETACHES 8
/* How long a FUSE mount's daemon has to answer statfs: a dead one fails at
 * once, so this only bounds the wait on a live one that is stuck. */
#define STATFS_WAIT_SECONDS 2
/* How long a killed probe child may take to go before it is left to init. */
#define REAP_MS 200

extern char **environ;

/* One field of /proc/self/mountinfo into out, undoing the octal escapes of
 * space, tab, newline and backslash; returns the text after the field. */
static const char *mountinfo_field(const char *p, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *p && *p != ' ' && *p != '\n'; p++) {
        char c = *p;
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
            c = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        }
        if (n + 1 < outlen)
            out[n++] = c;
    }
    out[n] = '\0';
    return p;
}

/* Whether `path` (absolute, resolved) is a mount point per
 * /proc/self/mountinfo: 1 mounted, with the type of the topmost mount (the
 * last line) in fstype; 0 not; -errno when the table cannot be read. */
static int mountinfo_lookup(const char *path, char *fstype, size_t fslen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    while (getline(&line, &cap, f) > 0) {
        /* id parent major:minor root MOUNTPOINT options [optional...] - TYPE ... */
        const char *p = line;
        for (int field = 0; field < 4 && p; field++) {
            p = strchr(p, ' ');
            if (p)
                p++;
        }
        if (!p)
            continue;
        char mp[PATH_MAX];
        p = mountinfo_field(p, mp, sizeof(mp));
        if (strcmp(mp, path) != 0)
            continue;
        found = 1;
        const char *sep = strstr(p, " - ");
        if (sep)
            mountinfo_field(sep + 3, fstype, fslen);
        else
            snprintf(fstype, fslen, "?");
    }
    free(line);
    fclose(f);
    return found;
}

/* The absolute path of a mount point that cannot be stat'ed: the resolved
 * parent and the last component.  NULL when there is none (".", "..", "/")
 * or the parent does not resolve. */
static char *resolve_unreachable(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return NULL;
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *slash = strrchr(buf, '/');
    const char *base = slash ? slash + 1 : buf;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return NULL;
    const char *parent = ".";
    if (slash == buf)
        parent = "/";
    else if (slash) {
        *slash = '\0';
        parent = buf;
    }
    char *rparent = realpath(parent, NULL);
    char *out = NULL;
    if (rparent && asprintf(&out, "%s/%s", strcmp(rparent, "/") == 0 ? "" : rparent, base) < 0)
        out = NULL;
    free(rparent);
    return out;
}

/* fusermount3 -u -z MP, its output silenced (the caller reports once). */
static int fusermount_detach(const char *mp)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -ENOMEM;
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"fusermount3", "-u", "-z", (char *)mp, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "fusermount3", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -rc;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

/* Lazy unmount: umount2 as root (in a namespace where root may not
 * unmount, fusermount3 still can), fusermount3 otherwise. */
static int detach_dead(const char *mp, char *err, size_t errlen)
{
    int rc = -EPERM;
    if (geteuid() == 0)
        rc = umount2(mp, MNT_DETACH) == 0 ? 0 : -errno;
    if (rc == -EPERM)
        rc = fusermount_detach(mp);
    if (rc < 0)
        return cfs_error_msg(err, errlen, rc,
                             "mountpoint %s: a dead FUSE mount that cannot be detached (%s); "
                             "run fusermount3 -u -z %s as its owner",
                             mp, rc == -EPERM ? "fusermount3 -u -z failed" : strerror(-rc), mp);
    return 0;
}

static bool is_dead(int e)
{
    return e == ENOTCONN || e == ECONNABORTED;
}

/* What a FUSE mount's daemon must answer itself: statfs is never served
 * from cached attributes (stat may be, for as long as the dead daemon's
 * attribute timeout said), and a dead connection fails it at once.  No
 * answer within the wait is a live daemon, however slow: not dead.  The
 * statfs runs in a child process, not a thread: a request handed to a
 * stopped daemon over FUSE's io_uring is already sent, and its asker cannot
 * be killed until the daemon answers, so a thread stuck there would keep
 * this process from exiting.  A child still waiting is killed (over
 * /dev/fuse a request not yet read dies with it, and so does its hold on
 * the mount, which an unmount right after would find busy) and reaped if
 * it goes within REAP_MS; one stuck on a ring is left to init. */
static bool fuse_mount_is_dead(const char *mp)
{
    pid_t child = fork();
    if (child < 0)
        return false; /* not known to be dead */
    if (child == 0) {
        /* The raw system call: after a fork of a threaded process only
         * async-signal-safe code may run, and a sanitizer's statfs is not. */
        struct statfs sf;
        long rc = syscall(SYS_statfs, mp, &sf);
        _exit(rc < 0 ? (errno & 0xff) : 0);
    }
    struct timespec start, now, pause = {0, 2000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int status;
        pid_t got = waitpid(child, &status, WNOHANG);
        if (got == child)
            return WIFEXITED(status) && is_dead(WEXITSTATUS(status));
        if (got < 0 && errno != EINTR)
            return false;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= STATFS_WAIT_SECONDS) {
            kill(child, SIGKILL);
            for (int i = 0; i < REAP_MS / 2 && waitpid(child, &status, WNOHANG) == 0; i++)
                nanosleep(&pause, NULL);
            return false;
        }
        nanosleep(&pause, NULL);
    }
}

/* The resolved mount point in *mp: 1 when it is a dead FUSE mount, 0 when
 * not, or a negative errno with the message in err. */
static int look_at(const char *path, char **mp, char *err, size_t errlen)
{
    struct stat st;
    int e = 0;
    *mp = NULL;
    if (stat(path, &st) < 0)
        e = errno;
    else if (!S_ISDIR(st.st_mode))
        return cfs_error_msg(err, errlen, -ENOTDIR, "mountpoint %s: not a directory", path);
    else if (!(*mp = realpath(path, NULL)))
        e = errno;
    if (e && !(is_dead(e) && (*mp = resolve_unreachable(path))))
        return cfs_error_msg(err, errlen, -e, "mountpoint %s: %s", path, strerror(e));
    char fstype[64] = "";
    int mounted = mountinfo_lookup(*mp, fstype, sizeof(fstype));
    if (mounted == 1 && strncmp(fstype, "fuse", 4) == 0 && (e || fuse_mount_is_dead(*mp)))
        return 1;
    if (e)
        return cfs_error_msg(err, errlen, -e, "mountpoint %s: %s", path, strerror(e));
    return 0;
}

int cfs_mountpoint_check(const char *path, const char *source, bool reclaim, char **resolved,
                         char *err, size_t errlen)
{
    char *mp = NULL;
    int rc, detached = 0;
    *resolved = NULL;
    while ((rc = look_at(path, &mp, err, errlen)) == 1) {
        if (!reclaim)
            rc = cfs_error_msg(err, errlen, -ENOTCONN,
                               "mountpoint %s: a dead FUSE mount (its daemon is gone): run "
                               "fusermount3 -u -z %s, or mount with -o reclaim",
                               mp, mp);
        else if (detached == MAX_DETACHES)
            rc = cfs_error_msg(err, errlen, -ENOTCONN,
                               "mountpoint %s: still a dead FUSE mount after detaching %d", mp,
                               detached);
        else if ((rc = detach_dead(mp, err, errlen)) == 0)
            cfs_info("mountpoint %s: detached a dead FUSE mount (-o reclaim)", mp);
        if (rc < 0)
            goto out;
        detached++;
        free(mp);
        mp = NULL;
    }
    if (rc < 0)
        goto out;
    char fstype[64];
    int mounted = mountinfo_lookup(mp, fstype, sizeof(fstype));
    if (mounted < 0) {
        /* No /proc: a mount point differs in device from its parent. */
        char parent[PATH_MAX + 4];
        struct stat a, b;
        snprintf(parent, sizeof(parent), "%s/..", mp);
        mounted = stat(mp, &a) == 0 && stat(parent, &b) == 0 &&
                  (a.st_dev != b.st_dev || a.st_ino == b.st_ino);
    }
    size_t sl = strlen(source);
    if (mounted)
        rc = cfs_error_msg(err, errlen, -EBUSY, "mountpoint %s: already a mount point", mp);
    else if (strncmp(mp, source, sl) == 0 && (mp[sl] == '/' || mp[sl] == '\0' || sl == 1))
        rc = cfs_error_msg(err, errlen, -EINVAL, "mountpoint %s: inside the source %s", mp,
                           source);
out:
    if (rc < 0)
        free(mp);
    else
        *resolved = mp;
    return rc;
}
