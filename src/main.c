/* clairfs: command line, checks, and the life of the mount.
 *
 * Order matters so that a failed start never leaves anything behind and the
 * exit status tells the truth: parse and check every argument, load the
 * catalog, and only then mount; detach from the terminal (fuse_daemonize)
 * only once the mount is live, so the parent's exit status reports whether
 * the mount exists.  Every failure before that point is one line on stderr
 * and exit status 1.
 *
 * The mount is not made `ro` in the kernel although the tree is read-only:
 * a read-only mount would refuse writes to .clairfs/control too.  Every
 * write-type operation answers EROFS from fs.c instead; `-o ro` is still
 * accepted (and then control is read-only as well).
 *
 * Under mpirun (issue 5) each rank is one node of a distributed mount.  MPI
 * is initialised first, before any thread exists; the daemon stays in the
 * foreground (Open MPI does not support fork after MPI_Init; an info line
 * says so when -f was not given).  {rank} in MOUNTPOINT, ssd_dir and index
 * is the MPI rank.  The nodes then meet twice, with one MPI_Allgather each
 * (start_exchange): after the catalog (every node's status and trainer
 * ranks, followed by the agreement check of catalog and options), and after
 * the plan.  A node that fails before a meeting still attends it (from the
 * exit path) with a failed status, so that no node waits forever in a
 * collective and every node exits non-zero, nothing mounted.  The peer
 * thread starts once the cache exists (it serves from it) and leaves before
 * the cache goes; MPI_Finalize comes last, and waits for every node. */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <fuse_opt.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "config.h"

#include "clairfs/catalog.h"
#include "clairfs/ctl.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/options.h"
#include "clairfs/peer.h"
#include "clairfs/plan.h"
#include "clairfs/prefetch.h"
#include "fs.h"

#define USAGE "usage: clairfs [-f] [-d] [-o OPT[,OPT...]] SOURCE MOUNTPOINT"

struct cmdline {
    struct cfs_options opts;
    char *source;
    char *mountpoint;
    int nargs; /* positional arguments seen */
    bool foreground, debug, help, version;
    char *fsname, *subtype; /* given by the user, else ours */
    char err[512];
};

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
        snprintf(cl->err, sizeof(cl->err), "unexpected argument '%s' (" USAGE ")", arg);
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
        return strcmp(arg, "allow_other") == 0 ? 1 : 0;
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
    printf(USAGE "\n\n"
           "Serves the directory SOURCE read-only at MOUNTPOINT and prefetches the files a\n"
           "PyTorch trainer will read, in the order its sampler will read them.\n\n"
           "General options:\n"
           "    -h, --help             print this help and exit\n"
           "    -V, --version          print the version and exit\n"
           "    -f                     stay in the foreground (log to stderr)\n"
           "    -d, -o debug           foreground, debug log and FUSE request trace\n"
           "    -o OPT[,OPT...]        mount options, below\n\n"
           "clairfs options:\n");
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

/* The mount point of `path` (absolute, resolved) per /proc/self/mountinfo:
 * 1 mounted, 0 not, -errno when the table cannot be read. */
static int mountinfo_has(const char *path)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    while (!found && getline(&line, &cap, f) > 0) {
        /* id parent major:minor root MOUNTPOINT ...; octal escapes for
         * space, tab, newline and backslash. */
        char *p = line;
        for (int field = 0; field < 4 && p; field++) {
            p = strchr(p, ' ');
            if (p)
                p++;
        }
        if (!p)
            continue;
        char mp[PATH_MAX];
        size_t n = 0;
        for (; *p && *p != ' ' && n + 1 < sizeof(mp); p++) {
            if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
                mp[n++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                p += 3;
            } else {
                mp[n++] = *p;
            }
        }
        mp[n] = '\0';
        found = strcmp(mp, path) == 0;
    }
    free(line);
    fclose(f);
    return found;
}

/* Checks that a path names an existing directory; resolves it. */
static int check_dir(const char *what, const char *path, char **resolved, char *err,
                     size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s %s: not a directory", what, path);
        return -1;
    }
    *resolved = realpath(path, NULL);
    if (!*resolved) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    return 0;
}

static int check_mountpoint(const char *mp, const char *source, char *err, size_t errlen)
{
    int mounted = mountinfo_has(mp);
    if (mounted < 0) {
        /* No /proc: a mount point differs in device from its parent. */
        char parent[PATH_MAX + 4];
        struct stat a, b;
        snprintf(parent, sizeof(parent), "%s/..", mp);
        mounted = stat(mp, &a) == 0 && stat(parent, &b) == 0 &&
                  (a.st_dev != b.st_dev || a.st_ino == b.st_ino);
    }
    if (mounted) {
        snprintf(err, errlen, "mountpoint %s: already a mount point", mp);
        return -1;
    }
    size_t sl = strlen(source);
    if (strncmp(mp, source, sl) == 0 && (mp[sl] == '/' || mp[sl] == '\0' || sl == 1)) {
        snprintf(err, errlen, "mountpoint %s: inside the source %s", mp, source);
        return -1;
    }
    return 0;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* index=DIR, else ssd_dir/index, else the user's cache directory plus a
 * hash of the source path, so that each dataset keeps its own catalog. */
static char *index_dir_for(const struct cfs_options *o, const char *source, int rank, char *err,
                           size_t errlen)
{
    char *dir = NULL, *base = NULL;
    if (o->index_dir)
        return cfs_options_expand_rank(o->index_dir, rank);
    if (o->ssd_dir) {
        char *ssd = cfs_options_expand_rank(o->ssd_dir, rank);
        if (ssd && asprintf(&dir, "%s/index", ssd) < 0)
            dir = NULL;
        free(ssd);
        return dir;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = asprintf(&base, "%s/clairfs", xdg);
    } else {
        if (!home || home[0] != '/') {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home) {
            snprintf(err, errlen, "no home directory for the index; give -o index=DIR");
            return NULL;
        }
        n = asprintf(&base, "%s/.cache/clairfs", home);
    }
    if (n < 0)
        return NULL;
    int rc = mkdir_p(base, 0700);
    if (rc < 0)
        snprintf(err, errlen, "index directory %s: %s (give -o index=DIR)", base, strerror(-rc));
    else if (asprintf(&dir, "%s/%016llx", base,
                      (unsigned long long)XXH64(source, strlen(source), 0)) < 0)
        dir = NULL;
    free(base);
    return dir;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* One node's word at a start-up meeting of the nodes. */
struct node_word {
    uint32_t failed;
    uint32_t first, count; /* the trainer ranks it serves */
};

#define START_MEETINGS 2

/* Meeting number *met of the nodes: every node's word in all (size
 * entries).  0 when every node is fine, -ECANCELED when one is not (err
 * names them), -EIO. */
static int start_exchange(struct cfs_peer *peer, int *met, const struct node_word *mine,
                          struct node_word *all, char *err, size_t errlen)
{
    int n = cfs_peer_size(peer);
    (*met)++;
    int rc = cfs_peer_allgather(peer, mine, sizeof(*mine), all, err, errlen);
    if (rc < 0)
        return rc;
    size_t pos = 0;
    int bad = 0;
    for (int r = 0; r < n; r++) {
        if (!all[r].failed)
            continue;
        int k = snprintf(err + pos, errlen - pos, "%s%d", bad ? "," : "", r);
        if (k > 0 && (size_t)k < errlen - pos)
            pos += (size_t)k;
        bad++;
    }
    if (!bad)
        return 0;
    if (mine->failed)
        err[0] = '\0'; /* this node has said why */
    else
        snprintf(err + pos, errlen - pos, ": %s could not start (see %s messages); not mounting",
                 bad == 1 ? "that node" : "those nodes", bad == 1 ? "its" : "their");
    return -ECANCELED;
}

static int run_session(struct fuse_session *se)
{
#if FUSE_USE_VERSION >= FUSE_MAKE_VERSION(3, 12)
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    if (!lc)
        return -ENOMEM;
    /* Data loaders run many workers; each blocked read holds a thread. */
    fuse_loop_cfg_set_max_threads(lc, 64);
    fuse_loop_cfg_set_idle_threads(lc, 16);
    int rc = fuse_session_loop_mt(se, lc);
    fuse_loop_cfg_destroy(lc);
    return rc;
#else
    struct fuse_loop_config lc = {.clone_fd = 0, .max_idle_threads = 16};
    return fuse_session_loop_mt(se, &lc);
#endif
}

int main(int argc, char **argv)
{
    struct fuse_args args;
    struct cmdline cl = {0};
    char err[1024] = "";
    char *source = NULL, *mountpoint = NULL, *index_dir = NULL, *mount_opts = NULL;
    char *fsname = NULL;
    struct cfs_catalog *catalog = NULL;
    struct cfs_ctl *ctl = NULL;
    struct cfs_fs *fs = NULL;
    struct cfs_prefetch *pf = NULL;
    char *ssd_dir = NULL;
    int data_fd = -1;
    struct fuse_session *se = NULL;
    struct cfs_metrics metrics;
    bool signals = false, mounted = false;
    int status = 1, rc;
    struct cfs_peer *peer = NULL;
    int rank = 0, nodes = 1, met = 0;
    struct node_word word = {0}, *words = NULL;
    struct cfs_rank_range *node_ranks = NULL;

    cfs_log_init(argv[0], LOG_INFO);
    /* MPI first: before any thread, and it may take its own arguments. */
    if (cfs_peer_init(&argc, &argv, &peer, err, sizeof(err)) < 0) {
        cfs_err("%s", err);
        return 1;
    }
    rank = cfs_peer_rank(peer);
    nodes = cfs_peer_size(peer);
    if (peer) {
        char name[64];
        snprintf(name, sizeof(name), "clairfs[rank %d]", rank);
        cfs_log_init(name, LOG_INFO);
        if (!(words = calloc((size_t)nodes, sizeof(*words))) ||
            !(node_ranks = calloc((size_t)nodes, sizeof(*node_ranks)))) {
            cfs_err("out of memory");
            free(words);
            cfs_peer_destroy(peer);
            return 1;
        }
    }
    args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
    cfs_options_init(&cl.opts);
    cfs_metrics_init(&metrics);

    if (fuse_opt_parse(&args, &cl, cmdline_spec, cmdline_proc) < 0) {
        /* fuse_opt reports its own errors (e.g. -o without a value). */
        if (cl.err[0])
            cfs_err("%s", cl.err);
        goto out;
    }
    if (cl.help) {
        print_help();
        status = 0;
        goto out;
    }
    if (cl.version) {
        printf("clairfs %s (libfuse %s)\n", CLAIRFS_VERSION, fuse_pkgversion());
        status = 0;
        goto out;
    }
    if (cl.nargs < 2) {
        cfs_err("%s", cl.nargs ? "missing MOUNTPOINT (" USAGE ")" : USAGE);
        goto out;
    }
    if (cl.debug)
        cfs_log_set_level(LOG_DEBUG);
    if (peer && !cl.foreground) {
        cfs_info("running under MPI: staying in the foreground (Open MPI does not support "
                 "fork after MPI_Init)");
        cl.foreground = true;
    }
    if (cfs_options_validate(&cl.opts, err, sizeof(err)) < 0)
        goto fail;

    if (check_dir("source", cl.source, &source, err, sizeof(err)) < 0)
        goto fail;
    char *mp_expanded = cfs_options_expand_rank(cl.mountpoint, rank);
    if (!mp_expanded)
        goto nomem;
    rc = check_dir("mountpoint", mp_expanded, &mountpoint, err, sizeof(err));
    free(mp_expanded);
    if (rc < 0 || check_mountpoint(mountpoint, source, err, sizeof(err)) < 0)
        goto fail;
    /* The SSD tier's directory first: the default index lives inside it. */
    if (cl.opts.ssd_dir) {
        if (!(ssd_dir = cfs_options_expand_rank(cl.opts.ssd_dir, rank)))
            goto nomem;
        if ((rc = mkdir_p(ssd_dir, 0700)) < 0) {
            snprintf(err, sizeof(err), "ssd_dir %s: %s", ssd_dir, strerror(-rc));
            goto fail;
        }
    }
    index_dir = index_dir_for(&cl.opts, source, rank, err, sizeof(err));
    if (!index_dir) {
        if (!err[0])
            goto nomem;
        goto fail;
    }

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cfs_catalog_params cp = {
        .source = source,
        .order = cl.opts.order,
        .order_list = cl.opts.order_list,
        .index_dir = index_dir,
        .rescan = cl.opts.rescan,
    };
    rc = cfs_catalog_open(&cp, &catalog, err, sizeof(err));
    if (rc < 0) {
        if (!err[0])
            snprintf(err, sizeof(err), "catalog of %s: %s", source, strerror(-rc));
        goto fail;
    }
    double catalog_secs = seconds_since(&t0);
    bool from_index = cfs_catalog_loaded_from_index(catalog);
    cfs_metrics_set(&metrics, CFS_M_CATALOG_FILES, cfs_catalog_file_count(catalog));
    cfs_metrics_set(&metrics, CFS_M_CATALOG_DIRS, cfs_catalog_dir_count(catalog));
    cfs_metrics_set(&metrics, CFS_M_CATALOG_BYTES, cfs_catalog_total_bytes(catalog));
    cfs_metrics_set(&metrics, CFS_M_CATALOG_FROM_INDEX, from_index);

    if (cfs_ctl_create(&metrics, &ctl) < 0)
        goto nomem;
    struct cfs_fs_config fc = {
        .catalog = catalog,
        .source = source,
        .ctl = ctl,
        .metrics = &metrics,
        .owner_uid = getuid(),
        .owner_gid = getgid(),
        .splice_read = getenv("CLAIRFS_NO_SPLICE") == NULL,
    };
    if (cfs_fs_create(&fc, &fs, err, sizeof(err)) < 0)
        goto fail;

    if (peer) {
        /* First meeting: everyone's status and trainer ranks, then the
         * agreement on catalog and options. */
        struct cfs_rank_range mine;
        if (cl.opts.has_ranks)
            mine = (struct cfs_rank_range){cl.opts.rank_first,
                                           cl.opts.rank_last - cl.opts.rank_first + 1};
        else
            cfs_plan_default_ranks(cl.opts.world, (uint32_t)nodes, (uint32_t)rank, &mine);
        word = (struct node_word){0, mine.first, mine.count};
        if (start_exchange(peer, &met, &word, words, err, sizeof(err)) < 0)
            goto fail;
        for (int r = 0; r < nodes; r++)
            node_ranks[r] = (struct cfs_rank_range){words[r].first, words[r].count};
        struct cfs_peer_agreement agreement;
        cfs_peer_agreement_fill(&agreement, &cl.opts, cfs_catalog_hash(catalog));
        char why[768];
        rc = cfs_peer_agree(peer, &agreement, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, sizeof(err), "the nodes disagree, not mounting: %s", why);
            goto fail;
        }
    }

    /* The data path: options checked and the plan computed now, so that a
     * bad seed, sampler or tier fails before the mount; its threads and the
     * LMDB environment come after fuse_daemonize (neither survives a fork). */
    data_fd = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (data_fd < 0) {
        snprintf(err, sizeof(err), "source %s: %s", source, strerror(errno));
        goto fail;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cfs_prefetch_params pp = {
        .catalog = catalog, .opts = &cl.opts, .source_fd = data_fd, .ssd_dir = ssd_dir,
        .index_dir = index_dir, .metrics = &metrics, .progress = cl.foreground,
        .peer_ops = cfs_peer_ops_of(peer), .peer = peer, .node_ranks = peer ? node_ranks : NULL,
    };
    if (cfs_prefetch_create(&pp, &pf, err, sizeof(err)) < 0)
        goto fail;
    double plan_secs = seconds_since(&t0);
    /* Second meeting: every node has its plan, so every node will mount. */
    if (peer && start_exchange(peer, &met, &word, words, err, sizeof(err)) < 0)
        goto fail;

    /* libfuse parses -o lists itself, so a comma in the source path must be
     * escaped. */
    if (!cl.fsname && asprintf(&fsname, "clairfs:%s", source) < 0)
        goto nomem;
    char subtype[300];
    snprintf(subtype, sizeof(subtype), "subtype=%s", cl.subtype ? cl.subtype : "clairfs");
    char fsname_opt[PATH_MAX + 64];
    snprintf(fsname_opt, sizeof(fsname_opt), "fsname=%s", cl.fsname ? cl.fsname : fsname);
    if (fuse_opt_add_opt_escaped(&mount_opts, fsname_opt) < 0 ||
        fuse_opt_add_opt(&mount_opts, subtype) < 0 ||
        fuse_opt_add_opt(&mount_opts, "default_permissions") < 0 ||
        fuse_opt_add_arg(&args, "-o") < 0 || fuse_opt_add_arg(&args, mount_opts) < 0 ||
        (cl.debug && fuse_opt_add_arg(&args, "-d") < 0))
        goto nomem;

    se = fuse_session_new(&args, cfs_fs_ops(), sizeof(*cfs_fs_ops()), fs);
    if (!se) {
        snprintf(err, sizeof(err), "cannot start a FUSE session");
        goto fail;
    }
    if (fuse_set_signal_handlers(se) != 0) {
        snprintf(err, sizeof(err), "cannot install signal handlers");
        goto fail;
    }
    signals = true;
    if (fuse_session_mount(se, mountpoint) != 0) {
        snprintf(err, sizeof(err), "cannot mount %s (is /dev/fuse available?)", mountpoint);
        goto fail;
    }
    mounted = true;
    if (fuse_daemonize(cl.foreground) != 0) {
        snprintf(err, sizeof(err), "cannot detach from the terminal");
        goto fail;
    }
    if (!cl.foreground)
        cfs_log_to_syslog();
    cfs_info("%s catalog of %s: %llu files, %llu directories, %llu bytes in %.3f s (index %s)",
             from_index ? "loaded the" : "scanned the", source,
             (unsigned long long)cfs_catalog_file_count(catalog),
             (unsigned long long)cfs_catalog_dir_count(catalog),
             (unsigned long long)cfs_catalog_total_bytes(catalog), catalog_secs, index_dir);
    if (cfs_prefetch_start(pf, err, sizeof(err)) < 0)
        goto fail;
    if (peer && nodes > 1 && !cl.opts.no_peers) {
        struct cfs_peer_params peerp = {
            .provide = cfs_prefetch_provide, .provide_arg = pf, .timeout = cl.opts.peer_timeout,
        };
        if (cfs_peer_start(peer, &peerp, err, sizeof(err)) < 0)
            goto fail;
    }
    cfs_fs_set_prefetch(fs, pf);
    if (cfs_prefetch_kernel_start(pf, cfs_fs_kernel_ops(fs, se), fs, err, sizeof(err)) < 0)
        goto fail;
    cfs_ctl_set_handler(ctl, cfs_prefetch_command, pf);
    struct cfs_prefetch_stats pst;
    cfs_prefetch_stats(pf, &pst);
    if (pst.planned)
        cfs_info("planned %u epochs from seed %llu in %.3f s; io %s; ram %llu, ssd %llu bytes "
                 "(%llu SSD entries reused)",
                 cl.opts.epochs - cl.opts.start_epoch, (unsigned long long)cl.opts.seed, plan_secs,
                 pst.io_engine, (unsigned long long)pst.cache_capacity[0],
                 (unsigned long long)pst.cache_capacity[1], (unsigned long long)pst.loaded);
    else
        cfs_info("no seed: reactive LRU caching; io %s; ram %llu, ssd %llu bytes", pst.io_engine,
                 (unsigned long long)pst.cache_capacity[0],
                 (unsigned long long)pst.cache_capacity[1]);
    /* The plan is computed and prefetching has started. */
    cfs_ctl_set_ready(ctl, true);
    if (peer)
        cfs_info("mounted %s at %s: node %d of %d, trainer ranks %u-%u%s", source, mountpoint,
                 rank, nodes, node_ranks[rank].first,
                 node_ranks[rank].first + node_ranks[rank].count - 1,
                 cl.opts.no_peers ? ", peers disabled (no_peers)" : "");
    else
        cfs_info("mounted %s at %s", source, mountpoint);

    rc = run_session(se);
    /* A positive value is the signal that ended the loop: a clean stop. */
    if (rc < 0)
        cfs_err("session ended with an error: %s", strerror(-rc));
    else
        cfs_info("unmounting %s", mountpoint);
    status = rc < 0 ? 1 : 0;
    goto out;

nomem:
    snprintf(err, sizeof(err), "out of memory");
fail:
    if (err[0])
        cfs_err("%s", err);
out:
    /* A node that stops before a start-up meeting still attends it, so
     * that the others learn it and no collective waits forever. */
    word.failed = 1;
    while (peer && met < START_MEETINGS) {
        char ignored[256];
        if (start_exchange(peer, &met, &word, words, ignored, sizeof(ignored)) == -EIO)
            break;
    }
    /* The stager talks to the session: stop it first.  Blocked on the page
     * lock of a READ that no worker will answer any more, it is freed by
     * aborting the connection. */
    if (cfs_prefetch_kernel_stop(pf, 2.0) == -ETIMEDOUT) {
        cfs_warn("page cache: a store is blocked on an unanswered read; aborting the connection");
        cfs_fs_abort(se);
        (void)cfs_prefetch_kernel_stop(pf, -1);
    }
    if (mounted)
        fuse_session_unmount(se);
    if (signals)
        fuse_remove_signal_handlers(se);
    if (se)
        fuse_session_destroy(se);
    cfs_fs_destroy(fs);
    cfs_peer_leave(peer); /* no more serving from, or fetching into, the cache */
    cfs_prefetch_destroy(pf); /* after the session: no request is left */
    if (data_fd >= 0)
        close(data_fd);
    free(ssd_dir);
    cfs_ctl_destroy(ctl);
    cfs_catalog_destroy(catalog);
    free(mount_opts);
    free(fsname);
    free(index_dir);
    free(mountpoint);
    free(source);
    free(cl.source);
    free(cl.mountpoint);
    free(cl.fsname);
    free(cl.subtype);
    cfs_options_free(&cl.opts);
    fuse_opt_free_args(&args);
    free(words);
    free(node_ranks);
    cfs_peer_destroy(peer); /* MPI_Finalize: waits for every node (peer.h) */
    return status;
}
