/* The daemon's command line (cmdline.h).  libfuse's fuse_opt walks it; every
 * -o word is offered to clairfs's option table first, then to the lists of
 * what the kernel and libfuse's mount understand (kept in the fuse_args for
 * fuse_session_mount) and of what only mount(8) and fstab mean (dropped),
 * so that the same line works typed, from fstab through mount.fuse3, and
 * from a job script; anything else is an error naming the word, before
 * anything is mounted. */
#include "cmdline.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"



enum { KEY_HELP, KEY_VERSION, KEY_FOREGROUND, KEY_DEBUG };

static const struct fuse_opt cmdline_spec[] = {
    FUSE_OPT_KEY("-h", KEY_HELP),       FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_KEY("-f", KEY_FOREGROUND), FUSE_OPT_KEY("-d", KEY_DEBUG),
    FUSE_OPT_KEY("debug", KEY_DEBUG),   FUSE_OPT_END,
};

/* Options that the kernel or libfuse's mount understand: handed on. */
static const char *const fuse_passthrough[] = {
    "ro",          "rw",          "dev",          "nodev",     "suid",       "nosuid",
    "exec",        "noexec",      "atime",        "noatime",   "relatime",   "norelatime",
    "strictatime", "nostrictatime", "diratime",   "nodiratime", "lazytime",  "nolazytime",
    "sync",        "async",       "dirsync",      "default_permissions",      "allow_root",
    "auto_unmount", NULL,
};
static const char *const fuse_passthrough_prefix[] = {
    "max_read=", "context=", "fscontext=", "defcontext=", "rootcontext=", NULL,
};
/* Options meant for mount(8) and fstab, not for the filesystem: accepted and
 * dropped, so that an fstab line works. */
static const char *const fstab_only[] = {
    "auto", "noauto", "user", "users", "nouser", "owner", "group", "defaults", "_netdev",
    "nofail", NULL,
};
static const char *const fstab_only_prefix[] = {"x-", "comment=", NULL};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static bool has_prefix_in(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strncmp(s, *list, strlen(*list)) == 0)
            return true;
    return false;
}

static int replace(char **slot, const char *value)
{
    free(*slot);
    *slot = strdup(value);
    return *slot ? 0 : -1;
}

/* fuse_opt callback: returns 1 to keep arg for libfuse, 0 to drop it, -1 to
 * fail (with cl->err set). */
static int cmdline_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    struct cmdline *cl = data;
    int rc;

    switch (key) {
    case KEY_HELP:
        cl->help = true;
        return 0;
    case KEY_VERSION:
        cl->version = true;
        return 0;
    case KEY_FOREGROUND:
        cl->foreground = true;
        return 0;
    case KEY_DEBUG:
        cl->debug = cl->foreground = true;
        return 0;
    case FUSE_OPT_KEY_NONOPT:
        cl->nargs++;
        if (cl->nargs == 1)
            return replace(&cl->source, arg);
        if (cl->nargs == 2)
            return replace(&cl->mountpoint, arg);
        snprintf(cl->err, sizeof(cl->err), "unexpected argument '%s' (" CFS_USAGE ")", arg);
        return -1;
    case FUSE_OPT_KEY_OPT:
        break;
    default:
        return -1;
    }
    if (arg[0] == '-') {
        snprintf(cl->err, sizeof(cl->err), "unknown argument '%s' (see --help)", arg);
        return -1;
    }
    rc = cfs_options_set(&cl->opts, arg, cl->err, sizeof(cl->err));
    if (rc == 0)
        return 0; /* allow_other reaches libfuse from mount_session, once checked */
    if (rc != -ENOENT) {
        if (rc == -ENOMEM)
            snprintf(cl->err, sizeof(cl->err), "out of memory");
        return -1;
    }
    if (strncmp(arg, "fsname=", 7) == 0)
        return replace(&cl->fsname, arg + 7);
    if (strncmp(arg, "subtype=", 8) == 0)
        return replace(&cl->subtype, arg + 8);
    if (in_list(fuse_passthrough, arg) || has_prefix_in(fuse_passthrough_prefix, arg))
        return 1;
    if (in_list(fstab_only, arg) || has_prefix_in(fstab_only_prefix, arg))
        return 0;
    snprintf(cl->err, sizeof(cl->err), "unknown option '%s' (see --help)", arg);
    return -1;
}

static void print_help(void)
{
    printf(CFS_USAGE "\n\n"
           "Serves the directory SOURCE read-only at MOUNTPOINT, learns from the opens the\n"
           "order a PyTorch trainer reads its files in, and stages each file into RAM (or\n"
           "an SSD directory) before it is read.  Nothing needs to be given:\n"
           "    clairfs SOURCE MOUNTPOINT\n\n"
           "General options:\n"
           "    -h, --help             print this help and exit\n"
           "    -V, --version          print the version and exit\n"
           "    -f                     stay in the foreground (log to stderr)\n"
           "    -d, -o debug           foreground, debug log and FUSE request trace\n"
           "    -o OPT[,OPT...]        mount options, below\n\n");
    cfs_options_print_help(stdout);
    printf("\nFUSE and mount options:\n"
           "    allow_root             let root read a mount of another user\n"
           "    default_permissions    always on: the kernel checks the source's modes\n"
           "    fsname=NAME            source name in /proc/mounts (default clairfs:SOURCE)\n"
           "    subtype=NAME           type in /proc/mounts is fuse.NAME (default clairfs)\n"
           "    auto_unmount           unmount when the daemon dies\n"
           "    max_read=N             largest read request\n"
           "    ro                     read-only mount; .clairfs/control then refuses writes\n"
           "    rw, [no]dev, [no]suid, [no]exec, [no|rel|strict]atime, [no]diratime,\n"
           "    [no]lazytime, sync, async, dirsync       as in mount(8)\n"
           "    auto, noauto, user, users, owner, group, defaults, _netdev, nofail, x-*,\n"
           "    comment=*              fstab options, ignored\n");
}

int cfs_cmdline_parse(struct fuse_args *args, struct cmdline *cl, char *err, size_t errlen)
{
    if (fuse_opt_parse(args, cl, cmdline_spec, cmdline_proc) < 0) {
        /* fuse_opt reports its own errors (e.g. -o without a value). */
        snprintf(err, errlen, "%s", cl->err);
        return -1;
    }
    if (cl->help) {
        print_help();
        return 1;
    }
    if (cl->version) {
        printf("clairfs %s (libfuse %s)\n", CLAIRFS_VERSION, fuse_pkgversion());
        return 1;
    }
    if (cl->nargs < 2) {
        snprintf(err, errlen, "%s", cl->nargs ? "missing MOUNTPOINT (" CFS_USAGE ")" : CFS_USAGE);
        return -1;
    }
    return 0;
}

void cfs_cmdline_free(struct cmdline *cl)
{
    free(cl->source);
    free(cl->mountpoint);
    free(cl->fsname);
    free(cl->subtype);
    cl->source = cl->mountpoint = cl->fsname = cl->subtype = NULL;
}
