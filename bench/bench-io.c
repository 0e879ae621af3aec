/* bench-io: fetch N files of about SIZE bytes with each I/O back end and
 * with a naive open/read/close loop, side by side in one run.
 *
 *   bench-io [-n FILES] [-s SIZE] [-d DEPTH] [-t THREADS] [-r ROUNDS] [DIR]
 *
 * Without DIR the files are generated in a fresh directory under /dev/shm
 * (tmpfs: the figures are the engine's own overhead, not a disk's) and
 * removed at the end.  Also compares, on a bare ring, reads into registered
 * buffers (READ_FIXED) with plain reads into the same memory: the figure
 * behind the engine's choice not to register buffers. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/io.h"
#include "config.h"
#if HAVE_IO_URING
#include <liburing.h>
#endif

struct file {
    char name[32];
    uint64_t size;
    uint8_t *buf;
    struct cfs_io_req req;
};

static struct file *files;
static uint32_t nfiles;
static size_t cap;
static int srcfd;
static int bad;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_done(struct cfs_io_req *r)
{
    struct file *f = r->arg;
    if (r->res != (int64_t)f->size)
        __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
}

static double run_engine(enum cfs_io_kind kind, bool no_direct, uint32_t depth, uint32_t threads,
                         char *desc, size_t desclen)
{
    struct cfs_io_params p = {
        .kind = kind, .depth = depth, .threads = threads, .source_fd = srcfd, .no_direct = no_direct};
    struct cfs_io *io;
    char err[256];
    if (cfs_io_create(&p, &io, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench-io: %s\n", err);
        return -1;
    }
    snprintf(desc, desclen, "%s", cfs_io_describe(io));
    double t0 = now();
    for (uint32_t i = 0; i < nfiles; i++) {
        struct file *f = &files[i];
        f->req = (struct cfs_io_req){.path = f->name,
                                     .buf = f->buf,
                                     .cap = f->size,
                                     .size_hint = f->size,
                                     .prio = CFS_IO_PREFETCH,
                                     .done = on_done,
                                     .arg = f};
        if (cfs_io_submit(io, &f->req) < 0)
            bad++;
    }
    cfs_io_drain(io);
    double t = now() - t0;
    cfs_io_destroy(io);
    return t;
}

static double run_naive(void)
{
    double t0 = now();
    for (uint32_t i = 0; i < nfiles; i++) {
        struct file *f = &files[i];
        int fd = openat(srcfd, f->name, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, f->buf, f->size);
        if (n != (ssize_t)f->size)
            bad++;
        if (fd >= 0)
            close(fd);
    }
    return now() - t0;
}

#if HAVE_IO_URING
/* A bare ring, depth files at a time: open_direct -> read (fixed buffer or
 * not) -> close_direct, all linked, hard link on the read.  Nothing but the
 * buffer kind differs between the two runs. */
static double run_bare(uint32_t depth, bool fixed)
{
    struct io_uring ring;
    if (io_uring_queue_init(4 * depth, &ring, 0) < 0 ||
        io_uring_register_files_sparse(&ring, depth) < 0)
        return -1;
    struct iovec *iov = calloc(depth, sizeof(*iov));
    for (uint32_t k = 0; k < depth; k++)
        iov[k] = (struct iovec){files[k].buf, cap};
    if (fixed && io_uring_register_buffers(&ring, iov, depth) < 0) {
        io_uring_queue_exit(&ring);
        free(iov);
        return -1;
    }
    double t0 = now();
    for (uint32_t i = 0; i < nfiles; i += depth) {
        uint32_t n = nfiles - i < depth ? nfiles - i : depth;
        for (uint32_t k = 0; k < n; k++) {
            struct file *f = &files[i + k];
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_openat_direct(sqe, srcfd, f->name, O_RDONLY, 0, k);
            io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
            sqe = io_uring_get_sqe(&ring);
            if (fixed)
                io_uring_prep_read_fixed(sqe, (int)k, iov[k].iov_base, (unsigned)f->size, 0, (int)k);
            else
                io_uring_prep_read(sqe, (int)k, iov[k].iov_base, (unsigned)f->size, 0);
            io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK);
            io_uring_sqe_set_data64(sqe, i + k + 1);
            sqe = io_uring_get_sqe(&ring);
            io_uring_prep_close_direct(sqe, k);
            io_uring_sqe_set_data64(sqe, 0);
        }
        /* Wait for the closes too: the next batch reuses the slots. */
        io_uring_submit_and_wait(&ring, 2 * n);
        for (uint32_t k = 0; k < 2 * n; k++) {
            struct io_uring_cqe *cqe;
            io_uring_wait_cqe(&ring, &cqe);
            if (cqe->user_data ? cqe->res != (int)files[cqe->user_data - 1].size : cqe->res < 0)
                bad++;
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    double t = now() - t0;
    io_uring_queue_exit(&ring);
    free(iov);
    return t;
}
#endif

static void report(const char *name, double t, double base, uint64_t bytes)
{
    if (t < 0) {
        printf("  %-44s unavailable\n", name);
        return;
    }
    printf("  %-44s %8.3f s %10.0f files/s %8.1f MB/s  %5.2fx naive\n", name, t, nfiles / t,
           (double)bytes / t / 1e6, base / t);
}

static double best(double a, double b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int main(int argc, char **argv)
{
    uint64_t mean = 110000;
    uint32_t depth = 64, threads = 16, rounds = 3;
    nfiles = 8000;
    int c;
    while ((c = getopt(argc, argv, "n:s:d:t:r:")) != -1) {
        switch (c) {
        case 'n': nfiles = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 's': mean = strtoull(optarg, NULL, 0); break;
        case 'd': depth = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 't': threads = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 'r': rounds = (uint32_t)strtoul(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: bench-io [-n FILES] [-s SIZE] [-d DEPTH] [-t THREADS] "
                            "[-r ROUNDS] [DIR]\n");
            return 2;
        }
    }
    if (nfiles == 0 || depth == 0 || threads == 0 || rounds == 0 || mean < 16) {
        fprintf(stderr, "bench-io: counts and sizes must be positive\n");
        return 2;
    }
    char tmp[] = "/dev/shm/clairfs-bench-io-XXXXXX";
    const char *dir = optind < argc ? argv[optind] : NULL;
    bool generate = !dir;
    if (generate && !(dir = mkdtemp(tmp))) {
        fprintf(stderr, "bench-io: mkdtemp %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    srcfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (srcfd < 0) {
        fprintf(stderr, "bench-io: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    files = calloc(nfiles, sizeof(*files));
    cap = mean + mean / 5;
    uint64_t bytes = 0, x = 88172645463325252ull;
    uint8_t *chunk = malloc(cap);
    for (size_t i = 0; i < cap; i++)
        chunk[i] = (uint8_t)(i * 131 + 7);
    for (uint32_t i = 0; i < nfiles; i++) {
        struct file *f = &files[i];
        snprintf(f->name, sizeof(f->name), "d%02u/f%06u", i % 100, i);
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        f->size = mean - mean / 5 + x % (2 * (mean / 5) + 1); /* mean ± 20 % */
        bytes += f->size;
        f->buf = malloc(cap);
        memset(f->buf, 0, cap); /* fault the pages in before any timing */
        if (!generate)
            continue;
        char d[8];
        snprintf(d, sizeof(d), "d%02u", i % 100);
        mkdirat(srcfd, d, 0755);
        int fd = openat(srcfd, f->name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, chunk, f->size) != (ssize_t)f->size) {
            fprintf(stderr, "bench-io: cannot write %s/%s\n", dir, f->name);
            return 1;
        }
        close(fd);
    }
    free(chunk);

    printf("bench-io: %u files, %.1f MB in %s, depth %u, %u threads, best of %u rounds\n", nfiles,
           (double)bytes / 1e6, dir, depth, threads, rounds);
    double t_naive = -1, t_thr = -1, t_ud = -1, t_up = -1, t_bare = -1, t_fixed = -1;
    char d_thr[64] = "threads", d_ud[64] = "io_uring", d_up[64] = "io_uring";
    run_naive(); /* warm the page cache and dentries alike for everyone */
    for (uint32_t r = 0; r < rounds; r++) {
        t_naive = best(t_naive, run_naive());
        t_thr = best(t_thr, run_engine(CFS_IO_THREADS, false, depth, threads, d_thr, 64));
        t_ud = best(t_ud, run_engine(CFS_IO_URING, false, depth, threads, d_ud, 64));
        t_up = best(t_up, run_engine(CFS_IO_URING, true, depth, threads, d_up, 64));
#if HAVE_IO_URING
        t_bare = best(t_bare, run_bare(depth, false));
        t_fixed = best(t_fixed, run_bare(depth, true));
#endif
    }
    char name[96];
    report("naive open/read/close loop (1 thread)", t_naive, t_naive, bytes);
    snprintf(name, sizeof(name), "engine: %s x%u", d_thr, threads);
    report(name, t_thr, t_naive, bytes);
    snprintf(name, sizeof(name), "engine: %s", d_ud);
    report(name, t_ud, t_naive, bytes);
    snprintf(name, sizeof(name), "engine: %s", d_up);
    report(name, t_up, t_naive, bytes);
    report("bare ring, batches, plain buffers", t_bare, t_naive, bytes);
    report("bare ring, batches, registered buffers", t_fixed, t_naive, bytes);
    if (t_ud > 0 && t_thr > 0)
        printf("  io_uring engine / thread engine: %.2fx\n", t_thr / t_ud);
    if (t_bare > 0 && t_fixed > 0)
        printf("  registered / plain buffers: %.2fx\n", t_bare / t_fixed);

    if (generate) {
        for (uint32_t i = 0; i < nfiles; i++)
            unlinkat(srcfd, files[i].name, 0);
        for (uint32_t i = 0; i < 100 && i < nfiles; i++) {
            char d[8];
            snprintf(d, sizeof(d), "d%02u", i);
            unlinkat(srcfd, d, AT_REMOVEDIR);
        }
        rmdir(dir);
    }
    for (uint32_t i = 0; i < nfiles; i++)
        free(files[i].buf);
    free(files);
    close(srcfd);
    if (bad) {
        fprintf(stderr, "bench-io: %d fetches returned a wrong size\n", bad);
        return 1;
    }
    return 0;
}
