/* bench-fuse-read: the FUSE read-path experiment behind the kernel page
 * cache as clairfs's RAM tier (docs/read-path.md has the figures).
 *
 *   bench-fuse-read gen   [-n FILES] [-s MEAN] [--seed S] DIR
 *   bench-fuse-read read  [-j THREADS] [-p PASSES] [--shuffle SEED] [--check] DIR
 *   bench-fuse-read serve [--mode M] [--stats FILE] [--splice-write] [--splice-move]
 *                         [--splice-read] [--chunk BYTES] [--keep-copy] SRC MOUNTPOINT
 *
 * gen writes FILES files of MEAN/2 .. 3*MEAN/2 bytes (a flat directory) whose
 * bytes are a function of the seed.  read reads every file of DIR whole with
 * THREADS threads (64 KiB read(2)s into a reused buffer, files handed out in
 * one shuffled order) and prints one line per pass; the same reader measures
 * every file system.  serve mounts SRC (flat, regular files) read-only and
 * answers reads in one of five ways:
 *
 *   buf     fuse_reply_buf from a copy in process memory, keep_cache=0 (what
 *           clairfs does for its RAM tier)
 *   data    fuse_reply_data with a memory bufvec (with --splice-write libfuse
 *           vmsplices it into /dev/fuse instead of writev)
 *   splice  fuse_reply_data with FUSE_BUF_IS_FD from an fd per file held open
 *           on SRC (what clairfs does for an SSD-tier entry)
 *   kcache  as buf, but keep_cache=1: the kernel keeps what the first read
 *           brought in (bindfs -o kernel_cache)
 *   store   after mount a thread looks up every file (a store needs the inode
 *           in the kernel's inode cache) and pushes its bytes into the page
 *           cache with fuse_lowlevel_notify_store; opens reply keep_cache=1;
 *           then the daemon frees its copy (unless --keep-copy).  Reads that
 *           still arrive (pages evicted or invalidated) are served by pread
 *           from SRC: the data path must survive eviction.
 *
 * Counters go to the stats FILE as one key=value line per event: "ready"
 * once mounted (and staged, in store mode), and a "snap" line on SIGUSR1
 * (opens, reads, read bytes, fallback reads, lookups, forgets, RSS, page
 * cache).  SIGUSR2 drops every file's pages (fuse_lowlevel_notify_inval_inode)
 * and writes an "inval" line.  bench/bench-fuse-read.sh drives all of it.
 *
 * This file holds the commands that make and read the data set (gen, read)
 * and main; bench-fuse-read-serve.c holds the file system (serve). */
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


/* ---- helpers shared by the three commands ------------------------------- */

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cpu_now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the regular files in dir (flat). */
int list_files(const char *dir, char ***names_out, uint32_t *n_out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    char **names = NULL;
    uint32_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            char **nn = realloc(names, cap * sizeof(*names));
            if (!nn) {
                rc = -ENOMEM;
                goto out;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = -ENOMEM;
            goto out;
        }
        n++;
    }
    qsort(names, n, sizeof(*names), cmp_str);
out:
    closedir(d);
    if (rc < 0) {
        while (n)
            free(names[--n]);
        free(names);
        return rc;
    }
    *names_out = names;
    *n_out = n;
    return 0;
}

/* ---- gen ---------------------------------------------------------------- */

int cmd_gen(int argc, char **argv)
{
    uint32_t n = 8000;
    uint64_t mean = 110000, seed = 1;
    static const struct option lo[] = {{"seed", required_argument, NULL, 'S'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "n:s:", lo, NULL)) != -1) {
        switch (c) {
        case 'n': n = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 's': mean = strtoull(optarg, NULL, 0); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        default: return 2;
        }
    }
    if (optind + 1 != argc || mean < 2) {
        fprintf(stderr, "usage: bench-fuse-read gen [-n FILES] [-s MEAN] [--seed S] DIR\n");
        return 2;
    }
    const char *dir = argv[optind];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gen: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    uint8_t *buf = malloc(mean * 2);
    if (!buf)
        return 1;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s = seed * 1000003ull + i;
        size_t size = (size_t)(mean / 2 + splitmix(&s) % (mean + 1));
        for (size_t o = 0; o < size; o += 8) {
            uint64_t v = splitmix(&s);
            memcpy(buf + o, &v, size - o < 8 ? size - o : 8);
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/f%06" PRIu32 ".bin", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, size, f) != size || fclose(f) != 0) {
            fprintf(stderr, "gen: %s: %s\n", path, strerror(errno));
            free(buf);
            return 1;
        }
        total += size;
    }
    free(buf);
    printf("gen: %" PRIu32 " files, %" PRIu64 " bytes in %s\n", n, total, dir);
    return 0;
}

/* ---- read --------------------------------------------------------------- */

struct reader {
    int dirfd;
    char **names;
    uint32_t *order;
    uint32_t n;
    bool check;
    atomic_uint next;
    atomic_uint_fast64_t bytes;
    atomic_uint_fast64_t sum; /* order-independent: a sum of per-file hashes */
    atomic_int errors;
};

/* A word-at-a-time FNV-style hash: fast enough to check every byte of a
 * pass, and reads are 64 KiB multiples until the tail, so word boundaries
 * fall at the same file offsets on every file system. */
static uint64_t hash_bytes(uint64_t h, const char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

static void *reader_thread(void *arg)
{
    struct reader *r = arg;
    char *buf = malloc(READ_BUF);
    if (!buf) {
        atomic_fetch_add(&r->errors, 1);
        return NULL;
    }
    for (;;) {
        unsigned k = atomic_fetch_add(&r->next, 1);
        if (k >= r->n)
            break;
        const char *name = r->names[r->order[k]];
        int fd = openat(r->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            atomic_fetch_add(&r->errors, 1);
            continue;
        }
        uint64_t h = 1469598103934665603ull, got = 0;
        ssize_t m;
        while ((m = read(fd, buf, READ_BUF)) > 0) {
            got += (uint64_t)m;
            if (r->check)
                h = hash_bytes(h, buf, (size_t)m);
        }
        if (m < 0)
            atomic_fetch_add(&r->errors, 1);
        close(fd);
        atomic_fetch_add(&r->bytes, got);
        if (r->check)
            atomic_fetch_add(&r->sum, h ^ (got * 0x9e3779b97f4a7c15ull));
    }
    free(buf);
    return NULL;
}

int cmd_read(int argc, char **argv)
{
    unsigned threads = 4, passes = 1;
    uint64_t shuffle = 1;
    bool check = false;
    static const struct option lo[] = {
        {"shuffle", required_argument, NULL, 'S'}, {"check", no_argument, NULL, 'c'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "j:p:", lo, NULL)) != -1) {
        switch (c) {
        case 'j': threads = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'p': passes = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'S': shuffle = strtoull(optarg, NULL, 0); break;
        case 'c': check = true; break;
        default: return 2;
        }
    }
    if (optind + 1 != argc || threads == 0 || threads > 256) {
        fprintf(stderr, "usage: bench-fuse-read read [-j THREADS] [-p PASSES] "
                        "[--shuffle SEED] [--check] DIR\n");
        return 2;
    }
    struct reader r = {.check = check};
    int rc = list_files(argv[optind], &r.names, &r.n);
    if (rc < 0) {
        fprintf(stderr, "read: %s: %s\n", argv[optind], strerror(-rc));
        return 1;
    }
    r.dirfd = open(argv[optind], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    r.order = malloc((r.n ? r.n : 1) * sizeof(*r.order));
    if (r.dirfd < 0 || !r.order) {
        fprintf(stderr, "read: %s: %s\n", argv[optind], strerror(errno));
        return 1;
    }
    /* One shuffled order (Fisher-Yates), like a trainer's sampler. */
    for (uint32_t i = 0; i < r.n; i++)
        r.order[i] = i;
    uint64_t s = shuffle;
    for (uint32_t i = r.n; i > 1; i--) {
        uint32_t j = (uint32_t)(splitmix(&s) % i), t = r.order[i - 1];
        r.order[i - 1] = r.order[j];
        r.order[j] = t;
    }
    int status = 0;
    for (unsigned p = 0; p < passes; p++) {
        pthread_t tid[256];
        atomic_store(&r.next, 0);
        atomic_store(&r.bytes, 0);
        atomic_store(&r.sum, 0);
        double t0 = now();
        unsigned started = 0;
        for (; started < threads; started++)
            if (pthread_create(&tid[started], NULL, reader_thread, &r) != 0)
                break;
        for (unsigned i = 0; i < started; i++)
            pthread_join(tid[i], NULL);
        double dt = now() - t0;
        printf("pass %u: %.4f s %" PRIu64 " bytes %u files errors %d", p + 1, dt,
               (uint64_t)atomic_load(&r.bytes), r.n, atomic_load(&r.errors));
        if (check)
            printf(" sum %016" PRIx64, (uint64_t)atomic_load(&r.sum));
        printf("\n");
        if (atomic_load(&r.errors) || started == 0)
            status = 1;
    }
    close(r.dirfd);
    for (uint32_t i = 0; i < r.n; i++)
        free(r.names[i]);
    free(r.names);
    free(r.order);
    return status;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "gen") == 0)
        return cmd_gen(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "read") == 0)
        return cmd_read(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    fprintf(stderr, "usage: bench-fuse-read gen|read|serve ... (see the comment at the top)\n");
    return 2;
}
