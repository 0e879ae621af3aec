/* clairfs-pfsemu: a read-only FUSE passthrough that behaves like a loaded
 * parallel filesystem, so clairfs's benefit shows on one machine.
 *
 * Three costs, each an option:
 *   - latency_open: every open(2) waits this long (a metadata server round
 *     trip); concurrent opens wait concurrently, as on a real PFS;
 *   - latency_read: every read request waits this long (an OST round trip);
 *     with direct_io each request is at most the kernel's FUSE request size
 *     (128 KiB to 1 MiB), so a small image costs one or two;
 *   - bandwidth: ONE cap shared by all readers.  Each read reserves its
 *     transfer time on a single virtual link (a FIFO pacer under a mutex):
 *     it finishes at max(now, link free) + bytes/bandwidth and sleeps until
 *     then.  An idle link earns no credit, so the long-run rate never
 *     exceeds the cap, whatever the number of readers;
 *   - latency_meta (default 0): every getattr (hence every path lookup) and
 *     readdir waits this long.
 * Files are opened with direct_io, so the kernel page cache never serves a
 * repeated read: every read pays the emulated cost.
 *
 * The high-level libfuse API keeps this a short path-based passthrough.
 * main() is fuse_main() spelled out, for two reasons: the multithreaded loop
 * gets max_threads=64 by default (libfuse 3.12+), so the emulator is not the
 * bottleneck of a deep prefetcher, and SIGTERM/SIGINT (libfuse makes the
 * loop return the signal number) end it with status 0 after the unmount. */
#ifdef PFSEMU_FUSE_312
#define FUSE_USE_VERSION 312
#else
#define FUSE_USE_VERSION 32
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/options.h"
#include "config.h"

#define DEFAULT_LATENCY_OPEN 0.002
#define DEFAULT_LATENCY_READ 0.0005
#define DEFAULT_LATENCY_META 0.0
#define DEFAULT_BANDWIDTH (200ull << 20)

struct emu {
    int srcfd;
    double latency_open, latency_read, latency_meta; /* seconds */
    double bandwidth;                                /* bytes/s, 0: unlimited */
    pthread_mutex_t link_lock;
    double link_free; /* CLOCK_MONOTONIC seconds when the link is next idle */
};

/* Command-line state, before the struct emu exists. */
struct cmdline {
    char *latency_open, *latency_read, *latency_meta, *bandwidth;
    char *source;
    int show_help;
    int show_version;
};

enum { KEY_HELP, KEY_VERSION };

#define EMU_OPT(t, f) {t, offsetof(struct cmdline, f), 0}
static const struct fuse_opt emu_opts[] = {
    EMU_OPT("latency_open=%s", latency_open),
    EMU_OPT("latency_read=%s", latency_read),
    EMU_OPT("latency_meta=%s", latency_meta),
    EMU_OPT("bandwidth=%s", bandwidth),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_END,
};

static struct emu *emu_of_context(void)
{
    return fuse_get_context()->private_data;
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void delay(double sec)
{
    if (sec > 0)
        sleep_until(now_sec() + sec);
}

/* The shared link: reserve bytes/bandwidth of transfer time, FIFO.  The
 * link may lag the clock by BURST seconds (a token bucket of BURST x
 * bandwidth bytes), so the gaps between one reader's requests (the FUSE
 * round trip) do not cut a lone sequential reader's rate below the cap. */
#define BURST 0.005

static void pace(struct emu *e, size_t bytes)
{
    if (e->bandwidth <= 0 || bytes == 0)
        return;
    pthread_mutex_lock(&e->link_lock);
    double now = now_sec();
    double start = e->link_free > now - BURST ? e->link_free : now - BURST;
    double done = start + (double)bytes / e->bandwidth;
    e->link_free = done;
    pthread_mutex_unlock(&e->link_lock);
    if (done > now)
        sleep_until(done);
}

/* "/a/b" -> "a/b", "/" -> "." for the *at() calls on the source fd. */
static const char *rel(const char *path)
{
    while (*path == '/')
        path++;
    return *path ? path : ".";
}

static void *emu_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    (void)conn;
    cfg->use_ino = 1;
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    return emu_of_context();
}

static int emu_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    /* By path even with fi: a directory's fh is a DIR *, not an fd. */
    (void)fi;
    struct emu *e = emu_of_context();
    delay(e->latency_meta);
    int rc = fstatat(e->srcfd, rel(path), st, AT_SYMLINK_NOFOLLOW);
    return rc < 0 ? -errno : 0;
}

static int emu_access(const char *path, int mask)
{
    struct emu *e = emu_of_context();
    if (mask & W_OK)
        return -EROFS;
    return faccessat(e->srcfd, rel(path), mask, 0) < 0 ? -errno : 0;
}

static int emu_readlink(const char *path, char *buf, size_t size)
{
    struct emu *e = emu_of_context();
    if (size == 0)
        return -EINVAL;
    ssize_t n = readlinkat(e->srcfd, rel(path), buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

static int emu_opendir(const char *path, struct fuse_file_info *fi)
{
    struct emu *e = emu_of_context();
    int fd = openat(e->srcfd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    fi->fh = (uint64_t)(uintptr_t)d;
    return 0;
}

/* Offsets are telldir() cookies, so a listing larger than one reply buffer
 * resumes where it stopped. */
static int emu_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
                       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)path;
    (void)flags;
    struct emu *e = emu_of_context();
    DIR *d = (DIR *)(uintptr_t)fi->fh;
    delay(e->latency_meta);
    seekdir(d, off);
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de)
            return errno ? -errno : 0;
        struct stat st = {.st_ino = de->d_ino, .st_mode = (mode_t)DTTOIF(de->d_type)};
        if (filler(buf, de->d_name, &st, telldir(d), 0))
            return 0;
    }
}

static int emu_releasedir(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    closedir((DIR *)(uintptr_t)fi->fh);
    return 0;
}

static int emu_open(const char *path, struct fuse_file_info *fi)
{
    struct emu *e = emu_of_context();
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
        return -EROFS;
    delay(e->latency_open);
    int fd = openat(e->srcfd, rel(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    return 0;
}

static int emu_read(const char *path, char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)path;
    struct emu *e = emu_of_context();
    delay(e->latency_read);
    ssize_t n = pread((int)fi->fh, buf, size, off);
    if (n < 0)
        return -errno;
    pace(e, (size_t)n);
    return (int)n;
}

static int emu_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int emu_statfs(const char *path, struct statvfs *st)
{
    (void)path;
    struct emu *e = emu_of_context();
    return fstatvfs(e->srcfd, st) < 0 ? -errno : 0;
}

static const struct fuse_operations emu_ops = {
    .init = emu_init,
    .getattr = emu_getattr,
    .access = emu_access,
    .readlink = emu_readlink,
    .opendir = emu_opendir,
    .readdir = emu_readdir,
    .releasedir = emu_releasedir,
    .open = emu_open,
    .read = emu_read,
    .release = emu_release,
    .statfs = emu_statfs,
};

static void usage(const char *prog)
{
    printf("usage: %s [-f] [-o OPT[,OPT...]] SOURCE MOUNTPOINT\n"
           "\n"
           "A read-only FUSE passthrough of SOURCE that behaves like a loaded parallel\n"
           "filesystem: latency per open and per read, one bandwidth cap for all readers.\n"
           "Reads bypass the page cache (direct_io), so every read pays the cost.\n"
           "\n"
           "Emulation options:\n"
           "    -o latency_open=SEC    wait per open (default 2ms)\n"
           "    -o latency_read=SEC    wait per read request (default 0.5ms)\n"
           "    -o latency_meta=SEC    wait per getattr/lookup and readdir (default 0)\n"
           "    -o bandwidth=BYTES     shared cap in bytes/s, K/M/G suffix (powers of 1024),\n"
           "                           0 = unlimited (default 200M)\n"
           "    SEC is seconds, or with a suffix: 2ms, 500us, 0.5s\n"
           "\n",
           prog);
}

/* "0.002", "2ms", "500us", "1s" -> seconds. */
static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || v > 3600)
        return -EINVAL;
    if (strcmp(end, "ms") == 0)
        v /= 1e3;
    else if (strcmp(end, "us") == 0)
        v /= 1e6;
    else if (strcmp(end, "") != 0 && strcmp(end, "s") != 0)
        return -EINVAL;
    *out = v;
    return 0;
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    struct cmdline *c = data;
    switch (key) {
    case KEY_HELP:
        c->show_help = 1;
        return 0;
    case KEY_VERSION:
        c->show_version = 1;
        return 1; /* fuse_parse_cmdline sees it too */
    case FUSE_OPT_KEY_NONOPT:
        if (!c->source) {
            c->source = strdup(arg);
            return c->source ? 0 : -1;
        }
        return 1; /* the mountpoint, for fuse_main */
    default:
        return 1;
    }
}

static int configure(struct emu *e, const struct cmdline *c)
{
    e->latency_open = DEFAULT_LATENCY_OPEN;
    e->latency_read = DEFAULT_LATENCY_READ;
    e->latency_meta = DEFAULT_LATENCY_META;
    e->bandwidth = (double)DEFAULT_BANDWIDTH;
    struct {
        const char *name, *value;
        double *slot;
    } lat[] = {{"latency_open", c->latency_open, &e->latency_open},
               {"latency_read", c->latency_read, &e->latency_read},
               {"latency_meta", c->latency_meta, &e->latency_meta}};
    for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
        if (lat[i].value && parse_seconds(lat[i].value, lat[i].slot) < 0) {
            fprintf(stderr, "clairfs-pfsemu: option %s=%s: expected seconds (e.g. 2ms)\n",
                    lat[i].name, lat[i].value);
            return -EINVAL;
        }
    }
    if (c->bandwidth) {
        uint64_t bw;
        if (cfs_parse_size(c->bandwidth, &bw) < 0) {
            fprintf(stderr,
                    "clairfs-pfsemu: option bandwidth=%s: expected bytes/s with K, M or G\n",
                    c->bandwidth);
            return -EINVAL;
        }
        e->bandwidth = (double)bw;
    }
    return 0;
}

/* fuse_main() without its exit status 8 for a signalled loop. */
static int run(struct fuse_args *args, struct emu *e)
{
    struct fuse_cmdline_opts opts;
    struct fuse *fuse = NULL;
    int rc = 1;

    if (fuse_parse_cmdline(args, &opts) != 0)
        return 1;
    if (opts.show_version) {
        printf("clairfs-pfsemu (clairfs) %s, FUSE library %s\n", CLAIRFS_VERSION,
               fuse_pkgversion());
        rc = 0;
        goto out;
    }
    if (opts.show_help) {
        fuse_cmdline_help();
        fuse_lib_help(args);
        rc = 0;
        goto out;
    }
    if (!opts.mountpoint) {
        fprintf(stderr, "clairfs-pfsemu: missing MOUNTPOINT (see --help)\n");
        goto out;
    }
    fuse = fuse_new(args, &emu_ops, sizeof(emu_ops), e);
    if (!fuse)
        goto out;
    if (fuse_mount(fuse, opts.mountpoint) != 0)
        goto out_destroy;
    if (fuse_daemonize(opts.foreground) != 0)
        goto out_unmount;
    struct fuse_session *se = fuse_get_session(fuse);
    if (fuse_set_signal_handlers(se) != 0)
        goto out_unmount;
    int res;
    if (opts.singlethread) {
        res = fuse_loop(fuse);
    } else {
#ifdef PFSEMU_FUSE_312
        struct fuse_loop_config *cfg = fuse_loop_cfg_create();
        if (!cfg) {
            fuse_remove_signal_handlers(se);
            goto out_unmount;
        }
        fuse_loop_cfg_set_clone_fd(cfg, (unsigned)opts.clone_fd);
        fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
        if (opts.max_idle_threads != UINT_MAX)
            fuse_loop_cfg_set_idle_threads(cfg, opts.max_idle_threads);
        res = fuse_loop_mt(fuse, cfg);
        fuse_loop_cfg_destroy(cfg);
#else
        struct fuse_loop_config cfg = {.clone_fd = opts.clone_fd,
                                       .max_idle_threads = opts.max_idle_threads};
        res = fuse_loop_mt(fuse, &cfg);
#endif
    }
    fuse_remove_signal_handlers(se);
    /* A positive result is the signal that ended the loop: a normal stop. */
    rc = res < 0 ? 1 : 0;
out_unmount:
    fuse_unmount(fuse);
out_destroy:
    fuse_destroy(fuse);
out:
    free(opts.mountpoint);
    return rc;
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct cmdline c = {0};
    struct emu e = {.srcfd = -1};
    int rc = 1;

    pthread_mutex_init(&e.link_lock, NULL);
    if (fuse_opt_parse(&args, &c, emu_opts, opt_proc) != 0)
        goto out;
#ifdef PFSEMU_FUSE_312
    /* Inserted first, so a max_threads given by the user overrides it. */
    if (fuse_opt_insert_arg(&args, 1, "-omax_threads=64") != 0)
        goto out;
#endif
    if (c.show_help) {
        usage(argv[0]);
        if (fuse_opt_add_arg(&args, "--help") != 0)
            goto out;
        rc = run(&args, &e);
        goto out;
    }
    if (c.show_version) {
        rc = run(&args, &e);
        goto out;
    }
    if (!c.source) {
        fprintf(stderr, "clairfs-pfsemu: missing SOURCE and MOUNTPOINT (see --help)\n");
        goto out;
    }
    if (configure(&e, &c) < 0)
        goto out;
    /* Opened now: the daemon changes to / when it detaches. */
    e.srcfd = open(c.source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (e.srcfd < 0) {
        fprintf(stderr, "clairfs-pfsemu: %s: %s\n", c.source, strerror(errno));
        goto out;
    }
    if (fuse_opt_add_arg(&args, "-oro") != 0 ||
        fuse_opt_add_arg(&args, "-ofsname=clairfs-pfsemu") != 0 ||
        fuse_opt_add_arg(&args, "-osubtype=clairfs-pfsemu") != 0)
        goto out;
    rc = run(&args, &e);
out:
    if (e.srcfd >= 0)
        close(e.srcfd);
    pthread_mutex_destroy(&e.link_lock);
    free(c.source);
    free(c.latency_open);
    free(c.latency_read);
    free(c.latency_meta);
    free(c.bandwidth);
    fuse_opt_free_args(&args);
    return rc;
}
