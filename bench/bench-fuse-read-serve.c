/* bench-fuse-read serve: a read-only low-level FUSE file system over a flat
 * source directory that answers reads in one of five ways (buf, data,
 * splice, kcache, store), with the counters and signals the driver script
 * reads; the modes are described at the top of bench-fuse-read.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench-fuse-read.h"

/* ---- serve -------------------------------------------------------------- */

enum mode { MODE_BUF, MODE_DATA, MODE_SPLICE, MODE_KCACHE, MODE_STORE };
static const char *const mode_names[] = {"buf", "data", "splice", "kcache", "store"};

struct file {
    char *name;
    size_t size;
    uint8_t *_Atomic mem; /* NULL once dropped (store mode) or never loaded (splice) */
    int fd;               /* splice mode: held open on SRC */
};

struct srv {
    enum mode mode;
    bool splice_write, splice_move, splice_read, keep_copy;
    size_t chunk;
    const char *mountpoint;
    int srcfd;
    FILE *stats;
    pthread_mutex_t stats_lock;
    struct fuse_session *se;
    struct file *files;
    uint32_t n;
    time_t start;
    atomic_bool got_init;
    /* Readers of files[].mem hold it shared; dropping the copies takes it
     * exclusively, so a read racing the drop never touches freed memory. */
    pthread_rwlock_t mem_lock;
    atomic_uint_fast64_t opens, reads, read_bytes, fallback_reads, lookups, forgets;
};

static int cmp_name_file(const void *key, const void *elem)
{
    return strcmp(key, ((const struct file *)elem)->name);
}

static struct srv *srv_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static struct file *file_of(struct srv *s, fuse_ino_t ino)
{
    return ino >= FIRST_INO && ino - FIRST_INO < s->n ? &s->files[ino - FIRST_INO] : NULL;
}

static void file_stat(struct srv *s, fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_mtime = st->st_atime = st->st_ctime = s->start;
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        return;
    }
    const struct file *f = file_of(s, ino);
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)f->size;
    st->st_blocks = (blkcnt_t)((f->size + 511) / 512);
}

/* Resident memory of this process, in bytes. */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A "Key: N kB" line of /proc/meminfo, in bytes. */
static uint64_t meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10) * 1024;
            break;
        }
    if (f)
        fclose(f);
    return v;
}

/* memory.stat of this process's memory cgroup (v1, else v2), or "". */
static void cgroup_stat_path(char *path, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024];
    path[0] = '\0';
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!cg)
            continue;
        *cg++ = '\0';
        if (strcmp(ctl + 1, "memory") == 0) {
            snprintf(path, len, "/sys/fs/cgroup/memory%s/memory.stat", cg);
            break;
        }
        if (ctl[1] == '\0' && !path[0]) /* v2 unified: keep looking for v1 */
            snprintf(path, len, "/sys/fs/cgroup%s/memory.stat", cg);
    }
    if (f)
        fclose(f);
}

/* File-backed memory (page cache, tmpfs included) charged to our memory
 * cgroup: v1 "cache", v2 "file"; 0 when unknown. */
static uint64_t cgroup_cache(void)
{
    char path[1200], line[256];
    cgroup_stat_path(path, sizeof(path));
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    uint64_t v = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "cache ", 6) == 0 || strncmp(line, "file ", 5) == 0) {
            v = strtoull(strchr(line, ' ') + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static void stats_line(struct srv *s, const char *fmt, ...)
{
    if (!s->stats)
        return;
    pthread_mutex_lock(&s->stats_lock);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(s->stats, fmt, ap);
    va_end(ap);
    fputc('\n', s->stats);
    fflush(s->stats);
    pthread_mutex_unlock(&s->stats_lock);
}

static void stats_snap(struct srv *s, const char *tag)
{
    stats_line(s,
               "%s opens=%" PRIu64 " reads=%" PRIu64 " read_bytes=%" PRIu64
               " fallback_reads=%" PRIu64 " lookups=%" PRIu64 " forgets=%" PRIu64
               " rss=%" PRIu64 " cached=%" PRIu64 " cgroup_cache=%" PRIu64,
               tag, (uint64_t)s->opens, (uint64_t)s->reads, (uint64_t)s->read_bytes,
               (uint64_t)s->fallback_reads, (uint64_t)s->lookups, (uint64_t)s->forgets,
               rss_bytes(), meminfo("Cached"), cgroup_cache());
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct srv *s = userdata;
    if (s->splice_write && (conn->capable & FUSE_CAP_SPLICE_WRITE))
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (s->splice_move && (conn->capable & FUSE_CAP_SPLICE_MOVE))
        conn->want |= FUSE_CAP_SPLICE_MOVE;
    if (s->splice_read && (conn->capable & FUSE_CAP_SPLICE_READ))
        conn->want |= FUSE_CAP_SPLICE_READ;
    else
        conn->want &= ~FUSE_CAP_SPLICE_READ;
    /* The files never change: a getattr must not drop the pages. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    stats_line(s, "init proto=%u.%u max_write=%u max_read=%u max_readahead=%u want=0x%x",
               conn->proto_major, conn->proto_minor, conn->max_write, conn->max_read,
               conn->max_readahead, conn->want);
    atomic_store(&s->got_init, true);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct srv *s = srv_of(req);
    if (parent != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct file *f = bsearch(name, s->files, s->n, sizeof(*s->files), cmp_name_file);
    if (!f) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param ep = {.ino = FIRST_INO + (fuse_ino_t)(f - s->files),
                                  .attr_timeout = TIMEOUT, .entry_timeout = TIMEOUT};
    file_stat(s, ep.ino, &ep.attr);
    atomic_fetch_add(&s->lookups, 1);
    fuse_reply_entry(req, &ep);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    (void)ino;
    (void)nlookup;
    atomic_fetch_add(&srv_of(req)->forgets, 1);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct srv *s = srv_of(req);
    (void)fi;
    if (ino != FUSE_ROOT_ID && !file_of(s, ino)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct stat st;
    file_stat(s, ino, &st);
    fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    struct srv *s = srv_of(req);
    (void)fi;
    if (ino != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    char *buf = malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t pos = 0;
    /* Offsets: 0 and 1 are "." and "..", 2 + i is file i. */
    for (off_t k = off; k < (off_t)s->n + 2; k++) {
        struct stat st = {.st_mode = k < 2 ? S_IFDIR : S_IFREG};
        const char *name = k == 0 ? "." : k == 1 ? ".." : s->files[k - 2].name;
        st.st_ino = k < 2 ? FUSE_ROOT_ID : FIRST_INO + (fuse_ino_t)(k - 2);
        size_t need = fuse_add_direntry(req, buf + pos, size - pos, name, &st, k + 1);
        if (need > size - pos)
            break;
        pos += need;
    }
    fuse_reply_buf(req, buf, pos);
    free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct srv *s = srv_of(req);
    if (!file_of(s, ino)) {
        fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY) {
        fuse_reply_err(req, EROFS);
        return;
    }
    atomic_fetch_add(&s->opens, 1);
    fi->keep_cache = s->mode == MODE_KCACHE || s->mode == MODE_STORE;
    fi->noflush = 1;
    fuse_reply_open(req, fi);
}

/* A read whose bytes are no longer in memory: the kernel evicted or we
 * invalidated the staged pages.  Served from the source, as a tier miss. */
static void read_fallback(fuse_req_t req, struct srv *s, struct file *f, size_t size, off_t off)
{
    atomic_fetch_add(&s->fallback_reads, 1);
    int fd = openat(s->srcfd, f->name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fuse_reply_err(req, errno);
        return;
    }
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
    bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    bv.buf[0].fd = fd;
    bv.buf[0].pos = off;
    fuse_reply_data(req, &bv, FUSE_BUF_NO_SPLICE);
    close(fd);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct srv *s = srv_of(req);
    struct file *f = file_of(s, ino);
    (void)fi;
    if (!f || off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    size_t n = (size_t)off >= f->size ? 0 : f->size - (size_t)off;
    if (n > size)
        n = size;
    atomic_fetch_add(&s->reads, 1);
    atomic_fetch_add(&s->read_bytes, n);
    pthread_rwlock_rdlock(&s->mem_lock);
    uint8_t *mem = atomic_load(&f->mem);
    if (s->mode == MODE_SPLICE) {
        struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
        bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
        bv.buf[0].fd = f->fd;
        bv.buf[0].pos = off;
        fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    } else if (!mem) {
        read_fallback(req, s, f, n, off);
    } else if (s->mode == MODE_DATA) {
        struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
        bv.buf[0].mem = mem + off;
        fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    } else {
        fuse_reply_buf(req, (const char *)mem + off, n);
    }
    pthread_rwlock_unlock(&s->mem_lock);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs sv = {.f_bsize = 4096, .f_frsize = 4096, .f_namemax = 255};
    fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops srv_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .getattr = op_getattr,
    .readdir = op_readdir,
    .open = op_open,
    .read = op_read,
    .statfs = op_statfs,
};

/* Stages every file into the kernel page cache.  A store needs the inode in
 * the kernel (ENOENT otherwise), so each file is looked up first, by a stat
 * through the mount from this thread (never from inside a request: the
 * lookup is answered by the loop's threads). */
static void *stager(void *arg)
{
    struct srv *s = arg;
    int mfd = open(s->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mfd < 0) {
        stats_line(s, "error open_mount=%d", errno);
        return NULL;
    }
    /* Stores need the session initialised (libfuse answers -ENOSYS before);
     * the kernel may not have processed INIT's reply yet, which only makes
     * the probe below fail the same way (no inode yet). */
    for (int i = 0; i < 10000 && !atomic_load(&s->got_init); i++)
        usleep(1000);
    /* Before the first lookup: what a store of an unknown inode returns. */
    struct fuse_bufvec probe = FUSE_BUFVEC_INIT(s->files[0].size < 4096 ? s->files[0].size : 4096);
    probe.buf[0].mem = s->files[0].mem;
    int probe_rc = fuse_lowlevel_notify_store(s->se, FIRST_INO, 0, &probe, 0);

    double t0 = now();
    for (uint32_t i = 0; i < s->n; i++) {
        struct stat st;
        if (fstatat(mfd, s->files[i].name, &st, 0) != 0)
            stats_line(s, "error lookup %s errno=%d", s->files[i].name, errno);
    }
    double t_lookup = now() - t0;

    uint64_t rss0 = rss_bytes(), cached0 = meminfo("Cached"), cg0 = cgroup_cache();
    double c0 = cpu_now(CLOCK_THREAD_CPUTIME_ID), p0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
    t0 = now();
    uint64_t bytes = 0, calls = 0;
    int errs = 0, first_err = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        struct file *f = &s->files[i];
        for (size_t off = 0; off < f->size; off += s->chunk) {
            size_t len = f->size - off < s->chunk ? f->size - off : s->chunk;
            struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
            bv.buf[0].mem = f->mem + off;
            int rc = fuse_lowlevel_notify_store(s->se, FIRST_INO + i, (off_t)off, &bv, 0);
            calls++;
            if (rc < 0) {
                if (!errs++)
                    first_err = rc;
                break;
            }
            bytes += len;
        }
    }
    double t_store = now() - t0;
    double c_store = cpu_now(CLOCK_THREAD_CPUTIME_ID) - c0;
    double p_store = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - p0;
    uint64_t rss1 = rss_bytes(), cached1 = meminfo("Cached"), cg1 = cgroup_cache();
    if (!s->keep_copy) {
        pthread_rwlock_wrlock(&s->mem_lock);
        for (uint32_t i = 0; i < s->n; i++) {
            uint8_t *m = atomic_exchange(&s->files[i].mem, NULL);
            free(m);
        }
        pthread_rwlock_unlock(&s->mem_lock);
        malloc_trim(0);
    }
    stats_line(s,
               "staged probe_rc=%d lookup_s=%.4f store_s=%.4f store_cpu_s=%.4f "
               "store_proc_cpu_s=%.4f bytes=%" PRIu64 " calls=%" PRIu64 " errors=%d first_err=%d "
               "rss_before=%" PRIu64 " rss_staged=%" PRIu64 " rss_dropped=%" PRIu64
               " cached_delta=%" PRId64 " cgroup_cache_delta=%" PRId64,
               probe_rc, t_lookup, t_store, c_store, p_store, bytes, calls, errs, first_err, rss0,
               rss1, rss_bytes(), (int64_t)(cached1 - cached0), (int64_t)(cg1 - cg0));
    close(mfd);
    stats_snap(s, "ready");
    return NULL;
}

/* SIGUSR1: a snapshot of the counters; SIGUSR2: drop every file's pages. */
static void *signal_thread(void *arg)
{
    struct srv *s = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGUSR1) {
            stats_snap(s, "snap");
            continue;
        }
        uint64_t cached0 = meminfo("Cached"), cg0 = cgroup_cache();
        double t0 = now();
        int errs = 0, first_err = 0;
        for (uint32_t i = 0; i < s->n; i++) {
            int rc = fuse_lowlevel_notify_inval_inode(s->se, FIRST_INO + i, 0, 0);
            if (rc < 0 && !errs++)
                first_err = rc;
        }
        stats_line(s, "inval s=%.4f errors=%d first_err=%d cached_delta=%" PRId64
                      " cgroup_cache_delta=%" PRId64,
                   now() - t0, errs, first_err, (int64_t)(meminfo("Cached") - cached0),
                   (int64_t)(cgroup_cache() - cg0));
    }
    return NULL;
}

static int load_source(struct srv *s, const char *src)
{
    char **names;
    int rc = list_files(src, &names, &s->n);
    if (rc < 0)
        return rc;
    if (s->n == 0) {
        free(names);
        return -ENOENT;
    }
    s->files = calloc(s->n, sizeof(*s->files));
    if (!s->files) {
        for (uint32_t i = 0; i < s->n; i++)
            free(names[i]);
        free(names);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        struct file *f = &s->files[i];
        f->name = names[i];
        f->fd = openat(s->srcfd, f->name, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (f->fd < 0 || fstat(f->fd, &st) != 0)
            return -errno;
        f->size = (size_t)st.st_size;
        if (s->mode == MODE_SPLICE)
            continue; /* the fd is the tier entry */
        uint8_t *m = malloc(f->size ? f->size : 1);
        if (!m || pread(f->fd, m, f->size, 0) != (ssize_t)f->size)
            return m ? -EIO : -ENOMEM;
        atomic_store(&f->mem, m);
        close(f->fd);
        f->fd = -1;
    }
    free(names);
    return 0;
}

static void free_source(struct srv *s)
{
    for (uint32_t i = 0; s->files && i < s->n; i++) {
        free(s->files[i].name);
        free(atomic_load(&s->files[i].mem));
        if (s->files[i].fd >= 0)
            close(s->files[i].fd);
    }
    free(s->files);
}

int cmd_serve(int argc, char **argv)
{
    struct srv s = {.mode = MODE_BUF, .chunk = 128 * 1024, .srcfd = -1,
                    .stats_lock = PTHREAD_MUTEX_INITIALIZER,
                    .mem_lock = PTHREAD_RWLOCK_INITIALIZER, .start = time(NULL)};
    const char *stats_path = NULL;
    static const struct option lo[] = {{"mode", required_argument, NULL, 'm'},
                                       {"stats", required_argument, NULL, 'o'},
                                       {"chunk", required_argument, NULL, 'c'},
                                       {"splice-write", no_argument, NULL, 'W'},
                                       {"splice-move", no_argument, NULL, 'M'},
                                       {"splice-read", no_argument, NULL, 'R'},
                                       {"keep-copy", no_argument, NULL, 'k'},
                                       {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': {
            int m = -1;
            for (int i = 0; i < 5; i++)
                if (strcmp(optarg, mode_names[i]) == 0)
                    m = i;
            if (m < 0) {
                fprintf(stderr, "serve: unknown mode '%s'\n", optarg);
                return 2;
            }
            s.mode = (enum mode)m;
            break;
        }
        case 'o': stats_path = optarg; break;
        case 'c': s.chunk = strtoull(optarg, NULL, 0); break;
        case 'W': s.splice_write = true; break;
        case 'M': s.splice_move = true; break;
        case 'R': s.splice_read = true; break;
        case 'k': s.keep_copy = true; break;
        default: return 2;
        }
    }
    if (optind + 2 != argc || s.chunk == 0) {
        fprintf(stderr, "usage: bench-fuse-read serve [--mode buf|data|splice|kcache|store] "
                        "[--stats FILE] [--splice-write] [--splice-move] [--splice-read] "
                        "[--chunk BYTES] [--keep-copy] SRC MOUNTPOINT\n");
        return 2;
    }
    const char *src = argv[optind];
    s.mountpoint = argv[optind + 1];
    int status = 1;
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    pthread_t sig_tid, stage_tid;
    bool sig_started = false, stage_started = false;

    /* One fd per file in splice mode: 8 000 files need a higher limit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (stats_path && !(s.stats = fopen(stats_path, "a"))) {
        fprintf(stderr, "serve: %s: %s\n", stats_path, strerror(errno));
        return 1;
    }
    s.srcfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = s.srcfd < 0 ? -errno : load_source(&s, src);
    if (rc < 0) {
        fprintf(stderr, "serve: %s: %s\n", src, strerror(-rc));
        goto out;
    }
    /* The signal thread takes SIGUSR1/2; every other thread blocks them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    if (fuse_opt_add_arg(&args, argv[0]) != 0 ||
        fuse_opt_add_arg(&args, "-ofsname=bench-fuse-read,default_permissions") != 0)
        goto out;
    s.se = fuse_session_new(&args, &srv_ops, sizeof(srv_ops), &s);
    if (!s.se)
        goto out;
    if (fuse_set_signal_handlers(s.se) != 0)
        goto out_session;
    if (fuse_session_mount(s.se, s.mountpoint) != 0)
        goto out_signals;
    sig_started = pthread_create(&sig_tid, NULL, signal_thread, &s) == 0;
    if (s.mode == MODE_STORE) {
        stage_started = pthread_create(&stage_tid, NULL, stager, &s) == 0;
    } else {
        stats_snap(&s, "ready");
    }
#if FUSE_USE_VERSION >= FUSE_MAKE_VERSION(3, 12)
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(lc, 64);
    fuse_loop_cfg_set_idle_threads(lc, 16);
    rc = fuse_session_loop_mt(s.se, lc);
    fuse_loop_cfg_destroy(lc);
#else
    struct fuse_loop_config lc = {.clone_fd = 0, .max_idle_threads = 16};
    rc = fuse_session_loop_mt(s.se, &lc);
#endif
    status = rc == 0 ? 0 : 1;
    if (stage_started)
        pthread_join(stage_tid, NULL);
    stats_snap(&s, "exit");
    fuse_session_unmount(s.se);
out_signals:
    fuse_remove_signal_handlers(s.se);
out_session:
    if (sig_started) {
        pthread_cancel(sig_tid);
        pthread_join(sig_tid, NULL);
    }
    fuse_session_destroy(s.se);
out:
    fuse_opt_free_args(&args);
    free_source(&s);
    if (s.srcfd >= 0)
        close(s.srcfd);
    if (s.stats)
        fclose(s.stats);
    return status;
}
