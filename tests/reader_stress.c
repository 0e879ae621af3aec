/* reader_stress: hammer a clairfs mount from many threads and compare every
 * byte read with the source directory.  Used by the load, soak and fault
 * tests (tests/integration/test_load_*.sh, test_fault_*.sh).
 *
 *   reader_stress [options] MOUNT SOURCE
 *
 * Modes (one per run):
 *   default        whole-file reads: every epoch each regular file under
 *                  SOURCE is read once through MOUNT, in a per-epoch
 *                  shuffled order shared by --threads threads, read(2) in
 *                  --read-size chunks, compared with the source's bytes;
 *   --random N     N preads in total of --min..--max bytes at random
 *                  offsets of random files, each compared with the same
 *                  range of the source file;
 *   --open-all N   raise RLIMIT_NOFILE, hold N descriptors open on the
 *                  mount at once (files cycled), then read and verify
 *                  every one and close them all.
 *
 * --tolerate E1,E2,...: these errno names (EIO, ENOTCONN, ECONNABORTED,
 * ECANCELED, ESTALE, ENOENT) are counted as "refused", not as failures (a SIGTERM
 * with reads in flight); wrong bytes are always a failure.  --duration S
 * stops the default mode after S seconds (an epoch cut short counts).
 *
 * Output: one line "files F reads R bytes B mismatches M errors E refused
 * X seconds T"; exit 0 when M == E == 0, 1 on a mismatch, 2 on another
 * error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct file {
    char *path; /* relative */
    uint64_t size;
};

static struct {
    const char *mnt, *src;
    int mntfd, srcfd;
    struct file *files;
    size_t nfiles, cap;
    unsigned threads, epochs;
    size_t read_size;
    uint64_t random_reads, open_all;
    size_t min_read, max_read;
    uint64_t seed;
    double duration;
    int tolerate[16];
    int ntolerate;
    bool quiet;

    /* shared progress */
    uint32_t *order;
    atomic_uint_fast64_t next;
    atomic_uint_fast64_t nfiles_done, nreads, nbytes, mismatches, errors, refused;
    double t_end;
} g = {.threads = 4, .epochs = 1, .read_size = 64 * 1024, .min_read = 1024,
       .max_read = 8192, .seed = 1};

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *src_root_for_walk;

static int walk_cb(const char *fpath, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !S_ISREG(st->st_mode))
        return 0;
    if (g.nfiles == g.cap) {
        g.cap = g.cap ? 2 * g.cap : 1024;
        g.files = realloc(g.files, g.cap * sizeof(*g.files));
        if (!g.files)
            return -1;
    }
    const char *rel = fpath + strlen(src_root_for_walk);
    while (*rel == '/')
        rel++;
    g.files[g.nfiles].path = strdup(rel);
    g.files[g.nfiles].size = (uint64_t)st->st_size;
    g.nfiles++;
    return 0;
}

static bool tolerated(int err)
{
    for (int i = 0; i < g.ntolerate; i++)
        if (g.tolerate[i] == err)
            return true;
    return false;
}

static void report_error(const char *what, const char *path, int err)
{
    if (tolerated(err)) {
        atomic_fetch_add(&g.refused, 1);
        return;
    }
    if (atomic_fetch_add(&g.errors, 1) < 10)
        fprintf(stderr, "reader_stress: %s %s: %s\n", what, path, strerror(err));
}

static void report_mismatch(const char *path, uint64_t off, size_t len, const char *why)
{
    if (atomic_fetch_add(&g.mismatches, 1) < 10)
        fprintf(stderr, "reader_stress: WRONG BYTES %s at %" PRIu64 "+%zu: %s\n", path, off, len,
                why);
}

static ssize_t pread_full(int fd, char *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Read the open mount fd to EOF in read_size chunks and compare with the
 * source.  Returns false after reporting. */
static bool verify_fd(int fd, const struct file *f, char *buf, char *ref)
{
    int sfd = openat(g.srcfd, f->path, O_RDONLY | O_CLOEXEC);
    if (sfd < 0) {
        report_error("open source", f->path, errno);
        return false;
    }
    uint64_t off = 0;
    bool ok = true;
    for (;;) {
        ssize_t n = read(fd, buf, g.read_size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            report_error("read", f->path, errno);
            ok = false;
            break;
        }
        atomic_fetch_add(&g.nreads, 1);
        ssize_t m = pread_full(sfd, ref, (size_t)(n ? n : 1), off);
        if (m < 0) {
            report_error("read source", f->path, (int)-m);
            ok = false;
            break;
        }
        if (n == 0) {
            if (m != 0) {
                report_mismatch(f->path, off, 0, "EOF through the mount before the source's");
                ok = false;
            }
            break;
        }
        if (m != n || memcmp(buf, ref, (size_t)n) != 0) {
            report_mismatch(f->path, off, (size_t)n, m != n ? "source is shorter" : "differs");
            ok = false;
            break;
        }
        off += (uint64_t)n;
        atomic_fetch_add(&g.nbytes, (uint64_t)n);
    }
    close(sfd);
    return ok;
}

static void *whole_main(void *arg)
{
    (void)arg;
    char *buf = malloc(g.read_size), *ref = malloc(g.read_size);
    uint64_t total = (uint64_t)g.nfiles * g.epochs;
    for (;;) {
        if (g.duration > 0 && now_sec() > g.t_end)
            break;
        uint64_t k = atomic_fetch_add(&g.next, 1);
        if (k >= total)
            break;
        const struct file *f = &g.files[g.order[k]];
        int fd = openat(g.mntfd, f->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            report_error("open", f->path, errno);
            continue;
        }
        if (verify_fd(fd, f, buf, ref))
            atomic_fetch_add(&g.nfiles_done, 1);
        close(fd);
    }
    free(buf);
    free(ref);
    return NULL;
}

static void *random_main(void *arg)
{
    uint64_t rs = g.seed * 1000003u + (uint64_t)(uintptr_t)arg;
    char *buf = malloc(g.max_read), *ref = malloc(g.max_read);
    int *mfd = calloc(g.nfiles, sizeof(int)), *sfd = calloc(g.nfiles, sizeof(int));
    for (size_t i = 0; i < g.nfiles; i++)
        mfd[i] = sfd[i] = -1;
    for (;;) {
        uint64_t k = atomic_fetch_add(&g.next, 1);
        if (k >= g.random_reads)
            break;
        size_t i = (size_t)(rng_next(&rs) % g.nfiles);
        const struct file *f = &g.files[i];
        if (mfd[i] < 0) {
            mfd[i] = openat(g.mntfd, f->path, O_RDONLY | O_CLOEXEC);
            sfd[i] = openat(g.srcfd, f->path, O_RDONLY | O_CLOEXEC);
            if (mfd[i] < 0 || sfd[i] < 0) {
                report_error("open", f->path, errno);
                continue;
            }
        }
        size_t len = g.min_read + (size_t)(rng_next(&rs) % (g.max_read - g.min_read + 1));
        uint64_t off = f->size ? rng_next(&rs) % f->size : 0;
        ssize_t n = pread_full(mfd[i], buf, len, off);
        if (n < 0) {
            report_error("pread", f->path, (int)-n);
            continue;
        }
        ssize_t m = pread_full(sfd[i], ref, len, off);
        atomic_fetch_add(&g.nreads, 1);
        if (m != n || memcmp(buf, ref, (size_t)n) != 0)
            report_mismatch(f->path, off, len, m != n ? "length differs" : "differs");
        else
            atomic_fetch_add(&g.nbytes, (uint64_t)n);
    }
    for (size_t i = 0; i < g.nfiles; i++) {
        if (mfd[i] >= 0)
            close(mfd[i]);
        if (sfd[i] >= 0)
            close(sfd[i]);
    }
    free(mfd);
    free(sfd);
    free(buf);
    free(ref);
    return NULL;
}

static int run_open_all(void)
{
    struct rlimit rl;
    uint64_t want = g.open_all + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = want;
        if (rl.rlim_max < want)
            rl.rlim_max = want; /* needs CAP_SYS_RESOURCE */
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            fprintf(stderr, "reader_stress: RLIMIT_NOFILE %" PRIu64 ": %s\n", want,
                    strerror(errno));
            return 2;
        }
    }
    int *fds = malloc(g.open_all * sizeof(int));
    char *buf = malloc(g.read_size), *ref = malloc(g.read_size);
    uint64_t opened = 0;
    for (uint64_t k = 0; k < g.open_all; k++) {
        const struct file *f = &g.files[k % g.nfiles];
        fds[k] = openat(g.mntfd, f->path, O_RDONLY | O_CLOEXEC);
        if (fds[k] < 0)
            report_error("open", f->path, errno);
        else
            opened++;
    }
    printf("open-all: %" PRIu64 " descriptors open at once\n", opened);
    fflush(stdout);
    if (getenv("READER_STRESS_HOLD")) /* the test samples the daemon meanwhile */
        sleep((unsigned)atoi(getenv("READER_STRESS_HOLD")));
    for (uint64_t k = 0; k < g.open_all; k++) {
        if (fds[k] < 0)
            continue;
        if (verify_fd(fds[k], &g.files[k % g.nfiles], buf, ref))
            atomic_fetch_add(&g.nfiles_done, 1);
        close(fds[k]);
    }
    free(fds);
    free(buf);
    free(ref);
    return 0;
}

static int errno_of(const char *name)
{
    static const struct {
        const char *name;
        int err;
    } t[] = {{"EIO", EIO},       {"ENOTCONN", ENOTCONN}, {"ECONNABORTED", ECONNABORTED},
             {"ESTALE", ESTALE}, {"ENOENT", ENOENT},     {"EINTR", EINTR},
             {"EBADF", EBADF},   {"ENODEV", ENODEV},     {"ECANCELED", ECANCELED}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (strcmp(t[i].name, name) == 0)
            return t[i].err;
    return 0;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--threads N] [--epochs E] [--read-size B] [--duration S]\n"
            "       [--random N [--min B] [--max B]] [--open-all N] [--seed S]\n"
            "       [--tolerate ERR,...] [--quiet] MOUNT SOURCE\n",
            argv0);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"threads", required_argument, NULL, 't'}, {"epochs", required_argument, NULL, 'e'},
        {"read-size", required_argument, NULL, 'r'}, {"random", required_argument, NULL, 'R'},
        {"min", required_argument, NULL, 'm'},     {"max", required_argument, NULL, 'M'},
        {"open-all", required_argument, NULL, 'O'}, {"seed", required_argument, NULL, 's'},
        {"tolerate", required_argument, NULL, 'T'}, {"duration", required_argument, NULL, 'd'},
        {"quiet", no_argument, NULL, 'q'},         {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': g.threads = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'e': g.epochs = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'r': g.read_size = strtoul(optarg, NULL, 0); break;
        case 'R': g.random_reads = strtoull(optarg, NULL, 0); break;
        case 'm': g.min_read = strtoul(optarg, NULL, 0); break;
        case 'M': g.max_read = strtoul(optarg, NULL, 0); break;
        case 'O': g.open_all = strtoull(optarg, NULL, 0); break;
        case 's': g.seed = strtoull(optarg, NULL, 0); break;
        case 'd': g.duration = strtod(optarg, NULL); break;
        case 'q': g.quiet = true; break;
        case 'T': {
            char *s = strdup(optarg), *save = NULL;
            for (char *tok = strtok_r(s, ",", &save); tok && g.ntolerate < 16;
                 tok = strtok_r(NULL, ",", &save)) {
                int e = errno_of(tok);
                if (!e) {
                    fprintf(stderr, "reader_stress: unknown errno name %s\n", tok);
                    return 2;
                }
                g.tolerate[g.ntolerate++] = e;
            }
            free(s);
            break;
        }
        default: usage(argv[0]); return 2;
        }
    }
    if (argc - optind != 2 || g.threads == 0 || g.read_size == 0 || g.min_read == 0 ||
        g.max_read < g.min_read) {
        usage(argv[0]);
        return 2;
    }
    g.mnt = argv[optind];
    g.src = argv[optind + 1];
    g.mntfd = open(g.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    g.srcfd = open(g.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g.mntfd < 0 || g.srcfd < 0) {
        fprintf(stderr, "reader_stress: cannot open %s or %s: %s\n", g.mnt, g.src,
                strerror(errno));
        return 2;
    }
    src_root_for_walk = g.src;
    if (nftw(g.src, walk_cb, 64, FTW_PHYS) != 0 || g.nfiles == 0) {
        fprintf(stderr, "reader_stress: no regular files under %s\n", g.src);
        return 2;
    }

    double t0 = now_sec();
    g.t_end = t0 + g.duration;
    int rc = 0;
    if (g.open_all) {
        rc = run_open_all();
    } else {
        void *(*fn)(void *) = g.random_reads ? random_main : whole_main;
        if (!g.random_reads) {
            /* Every epoch a fresh shuffle, like a trainer's sampler. */
            g.order = malloc((size_t)g.nfiles * g.epochs * sizeof(*g.order));
            uint64_t rs = g.seed;
            for (unsigned e = 0; e < g.epochs; e++) {
                uint32_t *o = g.order + (size_t)e * g.nfiles;
                for (size_t i = 0; i < g.nfiles; i++)
                    o[i] = (uint32_t)i;
                for (size_t i = g.nfiles - 1; i > 0; i--) {
                    size_t j = (size_t)(rng_next(&rs) % (i + 1));
                    uint32_t t = o[i];
                    o[i] = o[j];
                    o[j] = t;
                }
            }
        }
        pthread_t *th = calloc(g.threads, sizeof(*th));
        for (unsigned i = 0; i < g.threads; i++)
            pthread_create(&th[i], NULL, fn, (void *)(uintptr_t)i);
        for (unsigned i = 0; i < g.threads; i++)
            pthread_join(th[i], NULL);
        free(th);
    }
    double dt = now_sec() - t0;
    printf("files %" PRIu64 " reads %" PRIu64 " bytes %" PRIu64 " mismatches %" PRIu64
           " errors %" PRIu64 " refused %" PRIu64 " seconds %.2f\n",
           (uint64_t)atomic_load(&g.nfiles_done), (uint64_t)atomic_load(&g.nreads),
           (uint64_t)atomic_load(&g.nbytes), (uint64_t)atomic_load(&g.mismatches),
           (uint64_t)atomic_load(&g.errors), (uint64_t)atomic_load(&g.refused), dt);
    if (atomic_load(&g.mismatches))
        return 1;
    if (atomic_load(&g.errors) || rc)
        return 2;
    return 0;
}
