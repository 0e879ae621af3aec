/* The I/O engine: every case runs on each back end (loop index = config):
 * threads, io_uring with direct descriptors, io_uring with plain fds. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/io.h"
#include "src/io_i.h" /* the queue's lock and a request's state (the priority cases) */

static const struct {
    enum cfs_io_kind kind;
    bool no_direct;
    const char *name;
} cfgs[] = {
    {CFS_IO_THREADS, false, "threads"},
    {CFS_IO_URING, false, "uring-direct"},
    {CFS_IO_URING, true, "uring-plain"},
};
#define NCFG ((int)(sizeof(cfgs) / sizeof(cfgs[0])))

static bool uring_ok;      /* set in main, before Check forks */
static char uring_why[256];

/* --- A scratch source directory, removed after each test. */

static char dir[256];
static int dirfd_ = -1;

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/clairfs-io-XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    chmod(dir, 0755); /* readable after a test drops root */
    dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dirfd_, 0);
}

static void teardown(void)
{
    char cmd[300];
    close(dirfd_);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static uint8_t byte_of(uint32_t file, uint64_t off)
{
    uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)file << 40);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (uint8_t)(x >> 32);
}

static void fill(uint8_t *b, uint32_t file, uint64_t n, uint64_t from)
{
    for (uint64_t i = 0; i < n; i++)
        b[i] = byte_of(file, from + i);
}

static void make_file(const char *name, uint32_t file, uint64_t size)
{
    int fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    uint8_t *b = malloc(1 << 20);
    for (uint64_t off = 0; off < size;) {
        uint64_t n = size - off < (1 << 20) ? size - off : (1 << 20);
        fill(b, file, n, off);
        ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
        off += n;
    }
    free(b);
    close(fd);
}

/* Every byte of buf against file `file` from `from`. */
static void check_bytes(const uint8_t *buf, uint32_t file, uint64_t n, uint64_t from)
{
    for (uint64_t i = 0; i < n; i++)
        if (buf[i] != byte_of(file, from + i))
            ck_abort_msg("file %u byte %llu differs", file, (unsigned long long)(from + i));
}

static struct cfs_io *engine(int cfg, uint32_t depth)
{
    if (cfgs[cfg].kind == CFS_IO_URING && !uring_ok)
        return NULL;
    struct cfs_io_params p = {.kind = cfgs[cfg].kind,
                              .depth = depth,
                              .source_fd = dirfd_,
                              .threads = depth,
                              .no_direct = cfgs[cfg].no_direct};
    struct cfs_io *io = NULL;
    char err[256] = "";
    int rc = cfs_io_create(&p, &io, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", cfgs[cfg].name, err);
    ck_assert_int_eq(cfs_io_kind(io), cfgs[cfg].kind);
    return io;
}

#define ENGINE_OR_SKIP(io, depth)                                                                  \
    struct cfs_io *io = engine(_i, depth);                                                         \
    if (!io) {                                                                                     \
        printf("SKIP %s/%s: io_uring unavailable: %s\n", __func__, cfgs[_i].name, uring_why);      \
        return;                                                                                    \
    }

/* --- Requests with a completion record. */

struct fetch {
    struct cfs_io_req req;
    uint32_t file;
    int calls;
    int64_t res;
    int order; /* completion position */
};

static int completions;

static void on_done(struct cfs_io_req *r)
{
    struct fetch *f = r->arg;
    f->res = r->res;
    f->order = __atomic_fetch_add(&completions, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&f->calls, 1, __ATOMIC_SEQ_CST);
}

static void prep(struct fetch *f, const char *path, uint32_t file, size_t cap, uint64_t hint)
{
    memset(f, 0, sizeof(*f));
    f->file = file;
    f->req = (struct cfs_io_req){.path = path,
                                 .fd = -1,
                                 .prio = CFS_IO_PREFETCH,
                                 .buf = cap ? malloc(cap) : NULL,
                                 .cap = cap,
                                 .size_hint = hint,
                                 .done = on_done,
                                 .arg = f};
    f->res = INT64_MIN;
}

/* --- Cases. */

START_TEST(whole_files_of_edge_sizes)
{
    static const uint64_t sizes[] = {0, 1, 4095, 4096, (1 << 20) + 3, 64ull << 20};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    char names[N][16];
    for (int k = 0; k < N; k++) {
        snprintf(names[k], sizeof(names[k]), "f%d", k);
        make_file(names[k], (uint32_t)k, sizes[k]);
    }
    ENGINE_OR_SKIP(io, 4);
    /* Exact buffer with the catalog's size; a larger buffer with no hint. */
    struct fetch f[2 * N];
    for (int k = 0; k < N; k++) {
        prep(&f[k], names[k], (uint32_t)k, sizes[k], sizes[k]);
        prep(&f[N + k], names[k], (uint32_t)k, sizes[k] + 100, CFS_IO_SIZE_UNKNOWN);
    }
    for (int k = 0; k < 2 * N; k++)
        ck_assert_int_eq(cfs_io_submit(io, &f[k].req), 0);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    for (int k = 0; k < 2 * N; k++) {
        ck_assert_int_eq(f[k].calls, 1);
        ck_assert_msg(f[k].res == (int64_t)sizes[k % N], "%s: size %llu read %lld",
                      cfgs[_i].name, (unsigned long long)sizes[k % N], (long long)f[k].res);
        check_bytes(f[k].req.buf, f[k].file, sizes[k % N], 0);
        free(f[k].req.buf);
    }
    cfs_io_destroy(io);
}
END_TEST

START_TEST(many_small_files_at_depth_64)
{
    enum { N = 5000 };
    struct fetch *f = calloc(N, sizeof(*f));
    char(*names)[16] = calloc(N, 16);
    uint64_t *size = calloc(N, sizeof(*size));
    for (uint32_t k = 0; k < N; k++) {
        snprintf(names[k], 16, "s%u", k);
        size[k] = (k * 7919u) % 9000;
        make_file(names[k], k, size[k]);
    }
    ENGINE_OR_SKIP(io, 64);
    for (uint32_t k = 0; k < N; k++) {
        /* Half know their size, half read to EOF into a roomier buffer. */
        bool hint = k % 2 == 0;
        prep(&f[k], names[k], k, hint ? size[k] : 9000, hint ? size[k] : CFS_IO_SIZE_UNKNOWN);
        f[k].req.prio = k % 3 == 0 ? CFS_IO_DEMAND : CFS_IO_PREFETCH;
        ck_assert_int_eq(cfs_io_submit(io, &f[k].req), 0);
    }
    ck_assert_int_eq(cfs_io_drain(io), 0);
    for (uint32_t k = 0; k < N; k++) {
        ck_assert_int_eq(f[k].calls, 1);
        ck_assert_int_eq(f[k].res, (int64_t)size[k]);
        check_bytes(f[k].req.buf, k, size[k], 0);
        free(f[k].req.buf);
    }
    cfs_io_destroy(io);
    free(f);
    free(names);
    free(size);
}
END_TEST

START_TEST(errors_stay_with_their_request)
{
    make_file("a", 1, 5000);
    make_file("secret", 2, 100);
    make_file("b", 3, 7000);
    ck_assert_int_eq(mkdirat(dirfd_, "d", 0755), 0);
    ck_assert_int_eq(fchmodat(dirfd_, "secret", 0, 0), 0);
    /* Root reads anything: drop to nobody (this is Check's forked child),
     * who owns the scratch directory so that teardown can still empty it. */
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(dir, 65534, 65534), 0);
        ck_assert_int_eq(setresuid(65534, 65534, 65534), 0);
    }
    ENGINE_OR_SKIP(io, 8);
    struct fetch f[5];
    prep(&f[0], "a", 1, 5000, 5000);
    prep(&f[1], "missing", 0, 100, 100);
    prep(&f[2], "secret", 2, 100, 100);
    prep(&f[3], "d", 0, 100, CFS_IO_SIZE_UNKNOWN);
    prep(&f[4], "b", 3, 7000, 7000);
    for (int k = 0; k < 5; k++)
        ck_assert_int_eq(cfs_io_submit(io, &f[k].req), 0);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    ck_assert_int_eq(f[0].res, 5000);
    check_bytes(f[0].req.buf, 1, 5000, 0);
    ck_assert_int_eq(f[1].res, -ENOENT);
    ck_assert_int_eq(f[2].res, -EACCES);
    ck_assert_int_eq(f[3].res, -EISDIR);
    ck_assert_int_eq(f[4].res, 7000);
    check_bytes(f[4].req.buf, 3, 7000, 0);
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(f[k].calls, 1);
        free(f[k].req.buf);
    }
    cfs_io_destroy(io);
}
END_TEST

START_TEST(sizes_that_disagree_are_reported)
{
    make_file("k", 7, 1000);
    make_file("big", 8, (5u << 20) + 17); /* more than one chunk */
    ENGINE_OR_SKIP(io, 4);
    struct fetch f[9];
    prep(&f[0], "k", 7, 999, 1000);                  /* longer than the buffer */
    prep(&f[1], "k", 7, 999, 999);                   /* catalog stale, file grew */
    prep(&f[2], "k", 7, 1000, 2000);                 /* catalog stale, file shrank */
    prep(&f[3], "k", 7, 4000, 500);                  /* grew, still fits */
    prep(&f[4], "k", 7, 500, CFS_IO_SIZE_UNKNOWN);   /* range */
    f[4].req.flags = CFS_IO_RANGE;
    f[4].req.offset = 100;
    prep(&f[5], "k", 7, 500, CFS_IO_SIZE_UNKNOWN);   /* range across EOF */
    f[5].req.flags = CFS_IO_RANGE;
    f[5].req.offset = 900;
    prep(&f[6], "big", 8, 5u << 20, CFS_IO_SIZE_UNKNOWN);
    prep(&f[7], "k", 7, 0, 0);                       /* zero-size buffer, file not empty */
    prep(&f[8], "k", 7, 800, 800);                   /* the rest from an offset */
    f[8].req.offset = 200;
    for (int k = 0; k < 9; k++)
        ck_assert_int_eq(cfs_io_submit(io, &f[k].req), 0);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    ck_assert_int_eq(f[0].res, -EFBIG);
    check_bytes(f[0].req.buf, 7, 999, 0);
    ck_assert_int_eq(f[1].res, -EFBIG);
    ck_assert_int_eq(f[2].res, 1000);
    check_bytes(f[2].req.buf, 7, 1000, 0);
    ck_assert_int_eq(f[3].res, 1000);
    check_bytes(f[3].req.buf, 7, 1000, 0);
    ck_assert_int_eq(f[4].res, 500);
    check_bytes(f[4].req.buf, 7, 500, 100);
    ck_assert_int_eq(f[5].res, 100);
    check_bytes(f[5].req.buf, 7, 100, 900);
    ck_assert_int_eq(f[6].res, -EFBIG);
    check_bytes(f[6].req.buf, 8, 5u << 20, 0);
    ck_assert_int_eq(f[7].res, -EFBIG);
    ck_assert_int_eq(f[8].res, 800);
    check_bytes(f[8].req.buf, 7, 800, 200);
    for (int k = 0; k < 9; k++)
        free(f[k].req.buf);
    cfs_io_destroy(io);
}
END_TEST

START_TEST(reads_an_open_fd)
{
    make_file("o", 9, 70000);
    int fd = openat(dirfd_, "o", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ENGINE_OR_SKIP(io, 4);
    struct fetch f;
    prep(&f, NULL, 9, 70000, 70000);
    f.req.fd = fd;
    ck_assert_int_eq(cfs_io_submit(io, &f.req), 0);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    ck_assert_int_eq(f.res, 70000);
    check_bytes(f.req.buf, 9, 70000, 0);
    /* The engine did not close the caller's fd. */
    ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
    close(fd);
    free(f.req.buf);
    cfs_io_destroy(io);
}
END_TEST

/* The identity reported after a whole-file fetch is the file's, as fstat
 * sees it; a rewrite shows in the next fetch's mtime; range reads and
 * failed fetches report none. */
static void assert_identity(const struct fetch *f, const struct stat *st, const char *what)
{
    ck_assert_msg(f->req.has_st, "%s: no identity", what);
    ck_assert_uint_eq(f->req.st.size, (uint64_t)st->st_size);
    ck_assert_int_eq(f->req.st.mtime_sec, st->st_mtim.tv_sec);
    ck_assert_uint_eq(f->req.st.mtime_nsec, (uint32_t)st->st_mtim.tv_nsec);
    ck_assert_int_eq(f->req.st.ctime_sec, st->st_ctim.tv_sec);
    ck_assert_uint_eq(f->req.st.ctime_nsec, (uint32_t)st->st_ctim.tv_nsec);
    ck_assert_uint_eq(f->req.st.ino, (uint64_t)st->st_ino);
    ck_assert_uint_eq(f->req.st.dev, (uint64_t)st->st_dev);
}

START_TEST(reports_the_identity_after_the_read)
{
    make_file("id", 11, 300000);
    make_file("big", 12, (5u << 20) + 5); /* several reads */
    struct stat st, bst;
    ck_assert_int_eq(fstatat(dirfd_, "id", &st, 0), 0);
    ck_assert_int_eq(fstatat(dirfd_, "big", &bst, 0), 0);
    int fd = openat(dirfd_, "id", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ENGINE_OR_SKIP(io, 4);
    struct fetch f[6];
    prep(&f[0], "id", 11, 300000, 300000);
    prep(&f[1], "big", 12, (5u << 20) + 5, CFS_IO_SIZE_UNKNOWN);
    prep(&f[2], NULL, 11, 300000, 300000); /* the caller's fd */
    f[2].req.fd = fd;
    prep(&f[3], "id", 11, 1000, CFS_IO_SIZE_UNKNOWN); /* range: no identity */
    f[3].req.flags = CFS_IO_RANGE;
    prep(&f[4], "missing", 0, 100, 100);
    prep(&f[5], "id", 11, 1000, 300000); /* -EFBIG: no identity */
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(cfs_io_submit(io, &f[k].req), 0);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    ck_assert_int_eq(f[0].res, 300000);
    assert_identity(&f[0], &st, "path");
    ck_assert_int_eq(f[1].res, (5 << 20) + 5);
    assert_identity(&f[1], &bst, "big");
    ck_assert_int_eq(f[2].res, 300000);
    assert_identity(&f[2], &st, "fd");
    ck_assert_int_eq(f[3].res, 1000);
    ck_assert(!f[3].req.has_st);
    ck_assert_int_eq(f[4].res, -ENOENT);
    ck_assert(!f[4].req.has_st);
    ck_assert_int_eq(f[5].res, -EFBIG);
    ck_assert(!f[5].req.has_st);

    /* Rewrite in place, same size, until the file system shows a new mtime
     * (timestamps may be as coarse as a clock tick). */
    struct stat nst = st;
    uint8_t *b = malloc(300000);
    fill(b, 13, 300000, 0);
    int wfd = openat(dirfd_, "id", O_WRONLY | O_CLOEXEC);
    ck_assert_int_ge(wfd, 0);
    for (int tries = 0; tries < 200 && nst.st_mtim.tv_sec == st.st_mtim.tv_sec &&
                        nst.st_mtim.tv_nsec == st.st_mtim.tv_nsec;
         tries++) {
        usleep(2000);
        ck_assert_int_eq(pwrite(wfd, b, 300000, 0), 300000);
        ck_assert_int_eq(fstat(wfd, &nst), 0);
    }
    close(wfd);
    free(b);
    ck_assert_msg(nst.st_mtim.tv_sec != st.st_mtim.tv_sec ||
                      nst.st_mtim.tv_nsec != st.st_mtim.tv_nsec,
                  "the file system never changed the mtime");
    /* A request reused after its callback reports the new identity. */
    ck_assert_int_eq(cfs_io_submit(io, &f[0].req), 0);
    ck_assert_int_eq(cfs_io_submit(io, &f[2].req), 0);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    ck_assert_int_eq(f[0].res, 300000);
    check_bytes(f[0].req.buf, 13, 300000, 0);
    assert_identity(&f[0], &nst, "path after rewrite");
    assert_identity(&f[2], &nst, "fd after rewrite");
    ck_assert(f[0].req.st.mtime_sec != st.st_mtim.tv_sec ||
              f[0].req.st.mtime_nsec != (uint32_t)st.st_mtim.tv_nsec);
    for (int k = 0; k < 6; k++)
        free(f[k].req.buf);
    close(fd);
    cfs_io_destroy(io);
}
END_TEST

/* --- Priority: the first prefetch to complete submits a demand request
 * from its callback; the demand must overtake the queued prefetches. */

enum { PRIO_N = 400 };
static struct fetch prio_f[PRIO_N + 1];
static struct cfs_io *prio_io;
static int prio_submitted_at = -1;
static int prio_done_while_queued; /* prefetches completed with the demand still queued */

static void on_prefetch_done(struct cfs_io_req *r)
{
    on_done(r);
    pthread_mutex_lock(&prio_io->lock);
    if (prio_f[PRIO_N].req.state_ == CFS_IO_ST_QUEUED)
        prio_done_while_queued++;
    pthread_mutex_unlock(&prio_io->lock);
    int expected = -1;
    int now = __atomic_load_n(&completions, __ATOMIC_SEQ_CST);
    if (__atomic_compare_exchange_n(&prio_submitted_at, &expected, now, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        ck_assert_int_eq(cfs_io_submit(prio_io, &prio_f[PRIO_N].req), 0);
}

static void run_priority(int cfg, uint32_t depth)
{
    completions = 0;
    prio_submitted_at = -1;
    prio_done_while_queued = 0;
    for (uint32_t k = 0; k < 8; k++) {
        char name[16];
        snprintf(name, sizeof(name), "p%u", k);
        make_file(name, k, 65536);
    }
    prio_io = engine(cfg, depth);
    if (!prio_io) {
        printf("SKIP priority/%s: io_uring unavailable: %s\n", cfgs[cfg].name, uring_why);
        return;
    }
    static char names[8][16];
    for (uint32_t k = 0; k < 8; k++)
        snprintf(names[k], sizeof(names[k]), "p%u", k);
    for (uint32_t k = 0; k <= PRIO_N; k++) {
        prep(&prio_f[k], names[k % 8], k % 8, 65536, 65536);
        prio_f[k].req.done = on_prefetch_done;
    }
    prio_f[PRIO_N].req.prio = CFS_IO_DEMAND;
    prio_f[PRIO_N].req.done = on_done;
    for (uint32_t k = 0; k < PRIO_N; k++)
        ck_assert_int_eq(cfs_io_submit(prio_io, &prio_f[k].req), 0);
    ck_assert_int_eq(cfs_io_drain(prio_io), 0);
    for (uint32_t k = 0; k <= PRIO_N; k++) {
        ck_assert_int_eq(prio_f[k].calls, 1);
        ck_assert_int_eq(prio_f[k].res, 65536);
        check_bytes(prio_f[k].req.buf, k % 8, 65536, 0);
        free(prio_f[k].req.buf);
    }
    int pos = prio_f[PRIO_N].order;
    printf("%s depth %u: demand submitted after %d completions, taken after %d more, "
           "completed %d-th of %d\n",
           cfgs[cfg].name, depth, prio_submitted_at, prio_done_while_queued, pos + 1, PRIO_N + 1);
    /* Queued behind the prefetches, the demand would wait for all of them.
     * Taken first, it waits at most for the fetches already running, other
     * than the one whose callback submitted it: each finishes and the next
     * take is the demand's.  When it then completes is the scheduler's
     * (under ThreadSanitizer on a loaded host a worker holding it was
     * descheduled while 216 others completed), so the order asserted is the
     * queue's. */
    ck_assert_int_le(prio_done_while_queued, (int)depth - 1);
    if (depth == 1) /* one fetch at a time: the demand is strictly next */
        ck_assert_int_eq(pos, prio_submitted_at);
    cfs_io_destroy(prio_io);
}

START_TEST(demand_overtakes_queued_prefetches_depth_1)
{
    run_priority(_i, 1);
}
END_TEST

START_TEST(demand_overtakes_queued_prefetches_depth_8)
{
    run_priority(_i, 8);
}
END_TEST

/* --- Cancellation: with one fetch at a time, the first callback withdraws
 * every even request still queued (all of them are). */

enum { CAN_N = 100 };
static struct fetch can_f[CAN_N];
static struct cfs_io *can_io;
static int can_rc[CAN_N];
static int can_all_submitted;

static void on_first_done(struct cfs_io_req *r)
{
    on_done(r);
    /* Let the test thread queue them all first (this blocks the only
     * engine thread, so nothing else starts meanwhile). */
    while (!__atomic_load_n(&can_all_submitted, __ATOMIC_SEQ_CST))
        sched_yield();
    can_rc[0] = cfs_io_cancel(can_io, r); /* finished: too late */
    ck_assert_int_eq(cfs_io_drain(can_io), -EDEADLK);
    for (int k = 2; k < CAN_N; k += 2)
        can_rc[k] = cfs_io_cancel(can_io, &can_f[k].req);
}

START_TEST(cancel_withdraws_queued_requests)
{
    make_file("c", 4, 3000);
    completions = 0;
    can_all_submitted = 0;
    can_io = engine(_i, 1);
    if (!can_io) {
        printf("SKIP cancel/%s: io_uring unavailable: %s\n", cfgs[_i].name, uring_why);
        return;
    }
    for (int k = 0; k < CAN_N; k++)
        prep(&can_f[k], "c", 4, 3000, 3000);
    can_f[0].req.done = on_first_done;
    for (int k = 0; k < CAN_N; k++)
        ck_assert_int_eq(cfs_io_submit(can_io, &can_f[k].req), 0);
    __atomic_store_n(&can_all_submitted, 1, __ATOMIC_SEQ_CST);
    ck_assert_int_eq(cfs_io_drain(can_io), 0);
    ck_assert_int_eq(can_rc[0], -EBUSY);
    for (int k = 0; k < CAN_N; k++) {
        ck_assert_int_eq(can_f[k].calls, 1);
        if (k > 0 && k % 2 == 0) {
            ck_assert_int_eq(can_rc[k], 0);
            ck_assert_int_eq(can_f[k].res, -ECANCELED);
        } else {
            ck_assert_int_eq(can_f[k].res, 3000);
            check_bytes(can_f[k].req.buf, 4, 3000, 0);
        }
        free(can_f[k].req.buf);
    }
    cfs_io_destroy(can_io);
}
END_TEST

/* --- Destroy with thousands queued and some in flight, a 64 MiB one
 * among them: every callback once, each result either complete or
 * -ECANCELED; submitting from a callback during destroy is refused. */

static struct cfs_io *dtor_io;
static int dtor_refused;
static int dtor_submitted;

static void on_dtor_done(struct cfs_io_req *r)
{
    on_done(r);
    /* Hold the engine until everything is queued, so that destroy finds
     * queued requests as well as running ones. */
    while (!__atomic_load_n(&dtor_submitted, __ATOMIC_SEQ_CST))
        sched_yield();
    if (r->res == -ECANCELED) {
        struct cfs_io_req again = *r;
        if (cfs_io_submit(dtor_io, &again) == -ESHUTDOWN)
            __atomic_fetch_add(&dtor_refused, 1, __ATOMIC_SEQ_CST);
    }
}

START_TEST(destroy_completes_every_request_once)
{
    enum { N = 3000 };
    make_file("x", 5, 20000);
    make_file("huge", 6, 64u << 20);
    dtor_refused = 0;
    dtor_submitted = 0;
    dtor_io = engine(_i, 8);
    if (!dtor_io) {
        printf("SKIP destroy/%s: io_uring unavailable: %s\n", cfgs[_i].name, uring_why);
        return;
    }
    struct fetch *f = calloc(N, sizeof(*f));
    for (int k = 0; k < N; k++) {
        if (k == 1)
            prep(&f[k], "huge", 6, 64u << 20, 64u << 20);
        else
            prep(&f[k], "x", 5, 20000, 20000);
        f[k].req.done = on_dtor_done;
        ck_assert_int_eq(cfs_io_submit(dtor_io, &f[k].req), 0);
    }
    __atomic_store_n(&dtor_submitted, 1, __ATOMIC_SEQ_CST);
    cfs_io_destroy(dtor_io);
    int cancelled = 0;
    for (int k = 0; k < N; k++) {
        ck_assert_int_eq(f[k].calls, 1);
        if (f[k].res == -ECANCELED) {
            cancelled++;
        } else {
            uint64_t size = k == 1 ? 64u << 20 : 20000;
            ck_assert_int_eq(f[k].res, (int64_t)size);
            check_bytes(f[k].req.buf, f[k].file, size, 0);
        }
        free(f[k].req.buf);
    }
    ck_assert_int_eq(dtor_refused, cancelled);
    ck_assert_int_gt(cancelled, 0);
    printf("%s: destroy cancelled %d of %d\n", cfgs[_i].name, cancelled, N);
    free(f);
}
END_TEST

START_TEST(malformed_requests_are_refused)
{
    ENGINE_OR_SKIP(io, 2);
    char buf[8];
    struct cfs_io_req r = {.path = "/etc/passwd", .buf = buf, .cap = 8, .done = on_done};
    ck_assert_int_eq(cfs_io_submit(io, &r), -EINVAL);
    r.path = "";
    ck_assert_int_eq(cfs_io_submit(io, &r), -EINVAL);
    r.path = "a";
    r.done = NULL;
    ck_assert_int_eq(cfs_io_submit(io, &r), -EINVAL);
    r.done = on_done;
    r.prio = CFS_IO_NPRIO;
    ck_assert_int_eq(cfs_io_submit(io, &r), -EINVAL);
    r.prio = CFS_IO_DEMAND;
    r.path = NULL;
    r.fd = -1;
    ck_assert_int_eq(cfs_io_submit(io, &r), -EINVAL);
    ck_assert_int_eq(cfs_io_drain(io), 0);
    cfs_io_destroy(io);
    cfs_io_destroy(NULL);
}
END_TEST

/* --- The synchronous path (a waiting reader runs its own fetch). */

START_TEST(run_sync_reads_like_the_engine)
{
    static const uint64_t sizes[] = {0, 1, 4096, (1u << 20) + 3, (5u << 20) + 1};
    for (uint32_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "s%u", i);
        make_file(name, i, sizes[i]);
        uint8_t *buf = malloc(sizes[i] + 1), *want = malloc(sizes[i] + 1);
        fill(want, i, sizes[i], 0);
        struct cfs_io_req r = {.path = name, .fd = -1, .buf = buf, .cap = sizes[i],
                               .size_hint = sizes[i]};
        cfs_io_run_sync(dirfd_, &r);
        ck_assert_int_eq(r.res, (int64_t)sizes[i]);
        ck_assert(memcmp(buf, want, sizes[i]) == 0);
        struct stat st;
        ck_assert_int_eq(fstatat(dirfd_, name, &st, 0), 0);
        ck_assert(r.has_st);
        ck_assert_uint_eq(r.st.size, sizes[i]);
        ck_assert_uint_eq(r.st.ino, st.st_ino);
        ck_assert_int_eq(r.st.mtime_sec, st.st_mtim.tv_sec);
        if (sizes[i] > 0) { /* a buffer one byte short: -EFBIG, not truncation */
            r.cap = sizes[i] - 1;
            r.size_hint = CFS_IO_SIZE_UNKNOWN;
            cfs_io_run_sync(dirfd_, &r);
            ck_assert_int_eq(r.res, -EFBIG);
            ck_assert(!r.has_st);
        }
        free(buf);
        free(want);
    }
    uint8_t b[8];
    struct cfs_io_req r = {.path = "missing", .fd = -1, .buf = b, .cap = sizeof(b),
                           .size_hint = CFS_IO_SIZE_UNKNOWN};
    cfs_io_run_sync(dirfd_, &r);
    ck_assert_int_eq(r.res, -ENOENT);
    ck_assert(!r.has_st);
}
END_TEST

/* --- Back-end selection. */

START_TEST(kind_selection_and_fallback)
{
    struct cfs_io *io;
    char err[256] = "";
    struct cfs_io_params p = {.kind = CFS_IO_AUTO, .source_fd = dirfd_};
    ck_assert_int_eq(cfs_io_create(&p, &io, err, sizeof(err)), 0);
    printf("auto: %s%s%s\n", cfs_io_describe(io), cfs_io_fallback_reason(io) ? ": " : "",
           cfs_io_fallback_reason(io) ? cfs_io_fallback_reason(io) : "");
    ck_assert_int_eq(cfs_io_kind(io), uring_ok ? CFS_IO_URING : CFS_IO_THREADS);
    ck_assert(uring_ok == (cfs_io_fallback_reason(io) == NULL));
    if (uring_ok)
        ck_assert_str_eq(cfs_io_describe(io), "io_uring (direct descriptors)");
    cfs_io_destroy(io);

    p.kind = CFS_IO_THREADS;
    ck_assert_int_eq(cfs_io_create(&p, &io, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_io_kind(io), CFS_IO_THREADS);
    ck_assert_ptr_null(cfs_io_fallback_reason(io));
    ck_assert_str_eq(cfs_io_describe(io), "threads");
    cfs_io_destroy(io);

    /* A ring the kernel refuses (more entries than IORING_MAX_ENTRIES):
     * forced io_uring fails with a message, auto falls back and says why. */
    p.kind = CFS_IO_URING;
    p.depth = 100000;
    p.threads = 2;
    io = NULL;
    ck_assert_int_lt(cfs_io_create(&p, &io, err, sizeof(err)), 0);
    ck_assert_ptr_null(io);
    ck_assert_msg(strncmp(err, "io=uring: ", 10) == 0, "message '%s'", err);
    ck_assert_ptr_null(strchr(err, '\n'));
    p.kind = CFS_IO_AUTO;
    ck_assert_int_eq(cfs_io_create(&p, &io, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_io_kind(io), CFS_IO_THREADS);
    ck_assert_ptr_nonnull(cfs_io_fallback_reason(io));
    printf("auto with an impossible ring: %s\n", cfs_io_fallback_reason(io));
    cfs_io_destroy(io);
}
END_TEST

int main(void)
{
    /* Is io_uring usable here?  Forced-uring cases skip, loudly, if not. */
    struct cfs_io_params p = {.kind = CFS_IO_URING, .source_fd = AT_FDCWD, .depth = 2};
    struct cfs_io *io = NULL;
    uring_ok = cfs_io_create(&p, &io, uring_why, sizeof(uring_why)) == 0;
    cfs_io_destroy(io);
    if (!uring_ok)
        printf("SKIP io_uring cases: %s\n", uring_why);

    Suite *s = suite_create("io");
    TCase *tc = tcase_create("engine");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, whole_files_of_edge_sizes, 0, NCFG);
    tcase_add_loop_test(tc, many_small_files_at_depth_64, 0, NCFG);
    tcase_add_loop_test(tc, errors_stay_with_their_request, 0, NCFG);
    tcase_add_loop_test(tc, sizes_that_disagree_are_reported, 0, NCFG);
    tcase_add_loop_test(tc, reads_an_open_fd, 0, NCFG);
    tcase_add_loop_test(tc, reports_the_identity_after_the_read, 0, NCFG);
    tcase_add_loop_test(tc, demand_overtakes_queued_prefetches_depth_1, 0, NCFG);
    tcase_add_loop_test(tc, demand_overtakes_queued_prefetches_depth_8, 0, NCFG);
    tcase_add_loop_test(tc, cancel_withdraws_queued_requests, 0, NCFG);
    tcase_add_loop_test(tc, destroy_completes_every_request_once, 0, NCFG);
    tcase_add_loop_test(tc, malformed_requests_are_refused, 0, NCFG);
    tcase_add_test(tc, kind_selection_and_fallback);
    tcase_add_test(tc, run_sync_reads_like_the_engine);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
