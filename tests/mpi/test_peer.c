/* The peer module under mpirun (driven by tests/integration/test_peer_mpi.sh).
 *
 * Every rank "holds" the files id % size == rank: deterministic bytes derived
 * from the id, in RAM or (id % 3 == 1) in a temp file served by fd + offset,
 * given out by a fake provider that also plays the failure cases:
 *   id % 17 == 5   not held          -> the requester gets -ENOENT
 *   id % 23 == 7   checksum lies     -> -EIO
 *   id % 29 == 3   requested with cap = size - 1 and no size hint -> -EFBIG
 *   id % 5 == 0    requested without a size hint (cap 128 KiB)
 *
 * Modes:
 *   local                 without mpirun: single node, agreement messages
 *   basic NFILES          every rank fetches every other rank's files, then
 *                         leaves with requests in flight
 *   agree seed|dataset|none BADRANK   the agreement check
 *   stop DIR              rank 1 is SIGSTOPped by the script (timeouts)
 *   stagger NFILES        ranks leave at different times while others fetch
 *   bench NFILES          peer fetch vs a RAM hit (memcpy), figures only */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "clairfs/log.h"
#include "clairfs/options.h"
#include "clairfs/peer.h"
#include "clairfs/run_config.h"

static int failures;
static int my_rank;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", my_rank, __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- The synthetic dataset. --- */

static uint64_t bench_size; /* bench: every file this size */

static uint64_t file_size(uint32_t id)
{
    return bench_size ? bench_size : 100000 + (uint64_t)id * 7919 % 20000;
}

static void file_fill(uint32_t id, unsigned char *buf, uint64_t len)
{
    uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
    }
}

static bool is_notheld(uint32_t id) { return !bench_size && id % 17 == 5; }
static bool is_liar(uint32_t id) { return !bench_size && id % 23 == 7; }
static bool is_ssd(uint32_t id) { return !bench_size && id % 3 == 1; }
static bool is_efbig(uint32_t id) { return !bench_size && id % 29 == 3; }
static bool is_nohint(uint32_t id) { return !bench_size && id % 5 == 0; }

static int64_t expected_res(uint32_t id)
{
    if (is_notheld(id))
        return -ENOENT;
    if (is_efbig(id))
        return -EFBIG;
    if (is_liar(id))
        return -EIO;
    return (int64_t)file_size(id);
}

/* --- The provider: what this rank holds. --- */

struct holder {
    uint32_t nfiles;
    unsigned char **ram; /* by id, NULL when not held in RAM */
    uint64_t *ssd_off;   /* by id */
    int ssd_fd;
    atomic_uint_fast64_t pins, releases;
};

static void holder_release(void *arg, struct cfs_peer_view *v)
{
    struct holder *h = arg;
    (void)v;
    atomic_fetch_add(&h->releases, 1);
}

static int holder_provide(void *arg, uint32_t id, struct cfs_peer_view *v)
{
    struct holder *h = arg;
    if (id >= h->nfiles || is_notheld(id))
        return -ENOENT;
    if (h->ram[id])
        v->data = h->ram[id];
    else if (h->ssd_off[id] != UINT64_MAX) {
        v->fd = h->ssd_fd;
        v->offset = h->ssd_off[id];
    } else {
        return -ENOENT;
    }
    v->len = file_size(id);
    /* The RAM ones carry the checksum as the cache would; SSD ones let the
     * server compute it.  A liar gives a wrong one either way. */
    if (h->ram[id] || is_liar(id)) {
        unsigned char *tmp = h->ram[id] ? NULL : malloc(v->len);
        if (tmp)
            file_fill(id, tmp, v->len);
        v->xxh3 = XXH3_64bits(h->ram[id] ? h->ram[id] : tmp, v->len);
        free(tmp);
        v->has_xxh3 = true;
    }
    if (is_liar(id))
        v->xxh3 ^= 1;
    v->release = holder_release;
    v->release_arg = h;
    atomic_fetch_add(&h->pins, 1);
    return 0;
}

static int holder_init(struct holder *h, uint32_t nfiles, int rank, int size)
{
    memset(h, 0, sizeof(*h));
    h->nfiles = nfiles;
    h->ram = calloc(nfiles, sizeof(*h->ram));
    h->ssd_off = malloc(nfiles * sizeof(*h->ssd_off));
    char path[] = "/tmp/test_peer_ssd.XXXXXX";
    h->ssd_fd = mkstemp(path);
    if (!h->ram || !h->ssd_off || h->ssd_fd < 0)
        return -1;
    unlink(path);
    uint64_t off = 0;
    for (uint32_t id = 0; id < nfiles; id++) {
        h->ssd_off[id] = UINT64_MAX;
        if ((int)(id % (uint32_t)size) != rank)
            continue;
        uint64_t len = file_size(id);
        unsigned char *buf = malloc(len);
        if (!buf)
            return -1;
        file_fill(id, buf, len);
        if (is_ssd(id)) {
            if (pwrite(h->ssd_fd, buf, len, (off_t)off) != (ssize_t)len)
                return -1;
            h->ssd_off[id] = off;
            off += len + 4096; /* not at offset 0 and not packed: offsets matter */
            free(buf);
        } else {
            h->ram[id] = buf;
        }
    }
    return 0;
}

static void holder_free(struct holder *h)
{
    for (uint32_t id = 0; id < h->nfiles; id++)
        free(h->ram[id]);
    free(h->ram);
    free(h->ssd_off);
    if (h->ssd_fd >= 0)
        close(h->ssd_fd);
}

/* --- The client side: a set of requests and a completion counter. --- */

struct fetch {
    struct cfs_peer_req req;
    struct fetch_set *set;
    bool accepted, done;
};

struct fetch_set {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint32_t outstanding, callbacks;
    struct fetch *f;
    uint32_t n;
};

static void fetch_done(struct cfs_peer_req *r)
{
    struct fetch *f = r->arg;
    struct fetch_set *s = f->set;
    pthread_mutex_lock(&s->lock);
    if (f->done)
        fprintf(stderr, "rank %d: FAIL: done() twice for id %u\n", my_rank, r->id);
    f->done = true;
    s->callbacks++;
    s->outstanding--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void set_init(struct fetch_set *s, uint32_t n)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->f = calloc(n, sizeof(*s->f));
    s->n = n;
}

static void set_free(struct fetch_set *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        free(s->f[i].req.buf);
    free(s->f);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

/* Prepare request i of the set for file id on node. */
static void set_prepare(struct fetch_set *s, uint32_t i, uint32_t node, uint32_t id)
{
    struct fetch *f = &s->f[i];
    uint64_t len = file_size(id);
    f->set = s;
    f->accepted = f->done = false;
    f->req.node = node;
    f->req.id = id;
    f->req.size_hint = len;
    f->req.cap = len;
    if (is_nohint(id)) {
        f->req.size_hint = CFS_PEER_SIZE_UNKNOWN;
        f->req.cap = 128 << 10;
    }
    if (is_efbig(id)) {
        f->req.size_hint = CFS_PEER_SIZE_UNKNOWN;
        f->req.cap = len - 1;
    }
    free(f->req.buf);
    f->req.buf = malloc(f->req.cap);
    memset(f->req.buf, 0xEE, f->req.cap);
    f->req.done = fetch_done;
    f->req.arg = f;
    f->req.res = 12345;
}

/* Submit [first, first+n) keeping at most depth outstanding; returns how
 * many were accepted.  Rejections keep their submit code in res. */
static uint32_t set_submit(struct cfs_peer *p, struct fetch_set *s, uint32_t first, uint32_t n,
                           uint32_t depth)
{
    uint32_t accepted = 0;
    for (uint32_t i = first; i < first + n; i++) {
        pthread_mutex_lock(&s->lock);
        while (s->outstanding >= depth)
            pthread_cond_wait(&s->cond, &s->lock);
        s->outstanding++;
        pthread_mutex_unlock(&s->lock);
        int rc = cfs_peer_submit(p, &s->f[i].req);
        if (rc == 0) {
            s->f[i].accepted = true;
            accepted++;
        } else {
            s->f[i].req.res = rc;
            pthread_mutex_lock(&s->lock);
            s->outstanding--;
            pthread_mutex_unlock(&s->lock);
        }
    }
    return accepted;
}

static void set_wait(struct fetch_set *s)
{
    pthread_mutex_lock(&s->lock);
    while (s->outstanding)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* The result of request i is `want` (success: every byte compared). */
static bool verify(struct fetch *f, int64_t want)
{
    if (f->req.res != want) {
        CHECK(f->req.res == want, "id %u from %u: res %lld, want %lld", f->req.id, f->req.node,
              (long long)f->req.res, (long long)want);
        return false;
    }
    if (want < 0)
        return true;
    unsigned char *ref = malloc((size_t)want);
    file_fill(f->req.id, ref, (uint64_t)want);
    bool ok = memcmp(ref, f->req.buf, (size_t)want) == 0;
    free(ref);
    CHECK(ok, "id %u from %u: bytes differ", f->req.id, f->req.node);
    return ok;
}

/* Files of node `node` among [0, nfiles). */
static uint32_t files_of(uint32_t node, uint32_t size, uint32_t nfiles, uint32_t *ids)
{
    uint32_t n = 0;
    for (uint32_t id = node; id < nfiles; id += size)
        ids[n++] = id;
    return n;
}

static int start_peer(struct cfs_peer *p, struct holder *h, double timeout, double backoff)
{
    char err[256] = "";
    struct cfs_peer_params pp = {.provide = holder_provide, .provide_arg = h, .timeout = timeout,
                                 .backoff = backoff};
    int rc = cfs_peer_start(p, &pp, err, sizeof(err));
    CHECK(rc == 0, "cfs_peer_start: %s", err);
    return rc;
}

/* Fetch every file of every other node (in one set, so batches mix). */
static uint32_t fetch_all_others(struct cfs_peer *p, uint32_t nfiles, uint32_t depth,
                                 uint32_t *oks)
{
    uint32_t size = (uint32_t)cfs_peer_size(p), rank = (uint32_t)cfs_peer_rank(p);
    struct fetch_set s;
    set_init(&s, nfiles);
    uint32_t n = 0;
    for (uint32_t id = 0; id < nfiles; id++)
        if (id % size != rank)
            set_prepare(&s, n++, id % size, id);
    uint32_t acc = set_submit(p, &s, 0, n, depth);
    set_wait(&s);
    CHECK(acc == n, "accepted %u of %u", acc, n);
    CHECK(s.callbacks == acc, "callbacks %u, accepted %u", s.callbacks, acc);
    uint32_t good = 0;
    for (uint32_t i = 0; i < n; i++)
        good += verify(&s.f[i], expected_res(s.f[i].req.id)) && s.f[i].req.res >= 0;
    *oks = good;
    set_free(&s);
    return n;
}

/* --- Modes. --- */

static int mode_basic(struct cfs_peer *p, uint32_t nfiles)
{
    int size = cfs_peer_size(p), rank = cfs_peer_rank(p);
    struct holder h;
    if (holder_init(&h, nfiles, rank, size) < 0 || start_peer(p, &h, 5.0, 0) < 0)
        return 1;
    /* Every server is up before the clock of the first request runs. */
    MPI_Barrier(MPI_COMM_WORLD);

    uint32_t oks = 0;
    uint32_t n = fetch_all_others(p, nfiles, 512, &oks);
    uint32_t want_ok = 0;
    for (uint32_t id = 0; id < nfiles; id++)
        want_ok += (int)(id % (uint32_t)size) != rank && expected_res(id) >= 0;
    CHECK(oks == want_ok, "successful fetches %u, want %u", oks, want_ok);

    /* Bad requests are refused without a callback. */
    struct cfs_peer_req bad = {.node = (uint32_t)rank, .id = 0, .buf = &bad, .cap = 1,
                               .done = fetch_done};
    CHECK(cfs_peer_submit(p, &bad) == -EINVAL, "submit to self");
    bad.node = (uint32_t)size;
    CHECK(cfs_peer_submit(p, &bad) == -EINVAL, "submit to a rank out of range");
    bad.node = (uint32_t)((rank + 1) % size);
    bad.done = NULL;
    CHECK(cfs_peer_submit(p, &bad) == -EINVAL, "submit without done");

    struct cfs_peer_stats st;
    cfs_peer_get_stats(p, &st);
    CHECK(st.fetched == want_ok, "stats.fetched %llu", (unsigned long long)st.fetched);
    CHECK(st.checksum_failures > 0, "no checksum failure counted");
    CHECK(st.batches_sent < n, "%llu batches for %u requests: not batched",
          (unsigned long long)st.batches_sent, n);

    /* Every rank has served everyone before anyone leaves. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* Leave with requests in flight: every accepted request gets exactly
     * one callback, with the file or -ECANCELED / -EHOSTDOWN. */
    struct fetch_set s;
    set_init(&s, nfiles);
    uint32_t m = 0;
    for (uint32_t id = 0; id < nfiles; id++)
        if ((int)(id % (uint32_t)size) != rank)
            set_prepare(&s, m++, id % (uint32_t)size, id);
    uint32_t acc = set_submit(p, &s, 0, m, UINT32_MAX);
    cfs_peer_leave(p);
    CHECK(s.callbacks == acc, "after leave: %u callbacks for %u accepted", s.callbacks, acc);
    uint32_t cancelled = 0;
    for (uint32_t i = 0; i < m; i++) {
        int64_t r = s.f[i].req.res;
        if (!s.f[i].accepted) {
            CHECK(r == -EHOSTDOWN, "refused with %lld", (long long)r);
        } else if (r == -ECANCELED || r == -EHOSTDOWN) {
            cancelled++;
        } else {
            verify(&s.f[i], expected_res(s.f[i].req.id));
        }
    }
    CHECK(cfs_peer_submit(p, &s.f[0].req) == -ESHUTDOWN, "submit after leave");
    CHECK(atomic_load(&h.pins) == atomic_load(&h.releases), "pins %llu, releases %llu",
          (unsigned long long)atomic_load(&h.pins), (unsigned long long)atomic_load(&h.releases));
    printf("rank %d: %u fetched and verified (%u expected failures), %llu served (%llu via SSD "
           "bounce), leave: %u in flight, %u cancelled\n",
           rank, oks, n - oks, (unsigned long long)st.served,
           (unsigned long long)st.ssd_bounces, acc, cancelled);
    set_free(&s);
    holder_free(&h);
    return failures ? 1 : 0;
}

/* The run configuration of options o for one node without an SSD tier
 * (no statvfs): what the agreement and the hash are made from. */
static void config_of(const struct cfs_options *o, struct cfs_run_config *c)
{
    struct cfs_run_inputs in = {.opts = o, .nodes = 1, .node = 0};
    char err[256] = "";
    if (cfs_run_config_make(&in, c, err, sizeof(err)) < 0) {
        fprintf(stderr, "run configuration: %s\n", err);
        exit(1);
    }
}

static void agreement_of(const struct cfs_options *o, uint64_t catalog_hash,
                         struct cfs_peer_agreement *out)
{
    struct cfs_run_config c;
    config_of(o, &c);
    cfs_peer_agreement_from_config(out, &c, catalog_hash);
    cfs_run_config_free(&c);
}

static uint64_t config_hash_of(const struct cfs_options *o)
{
    struct cfs_run_config c;
    config_of(o, &c);
    uint64_t h = cfs_peer_config_hash(&c);
    cfs_run_config_free(&c);
    return h;
}

static int mode_agree(struct cfs_peer *p, const char *what, int bad)
{
    struct cfs_options o;
    cfs_options_init(&o);
    o.has_seed = true;
    o.seed = 42;
    o.world = 4;
    uint64_t cat = 0x1234abcd5678ef00ull;
    if (cfs_peer_rank(p) == bad && strcmp(what, "seed") == 0)
        o.seed = 43;
    if (cfs_peer_rank(p) == bad && strcmp(what, "dataset") == 0)
        cat ^= 0xff;
    struct cfs_peer_agreement a;
    agreement_of(&o, cat, &a);
    char err[512] = "";
    int rc = cfs_peer_agree(p, &a, err, sizeof(err));
    cfs_options_free(&o);
    if (rc < 0) {
        fprintf(stderr, "rank %d: %s\n", cfs_peer_rank(p), err);
        return 1;
    }
    printf("rank %d: agreed\n", cfs_peer_rank(p));
    return 0;
}

static bool file_exists(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void file_touch(const char *dir, const char *name, const char *content)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputs(content, f);
        fclose(f);
        rename(tmp, path);
    }
}

static bool wait_file(const char *dir, const char *name, double secs)
{
    double end = now_s() + secs;
    while (!file_exists(dir, name)) {
        if (now_s() > end)
            return false;
        usleep(10000);
    }
    return true;
}

/* Fetch ids[0..n) from node and verify them all.  Under a heavily loaded
 * host a live peer can miss the 2 s timeout; such requests (-ETIMEDOUT,
 * also refused while the peer is marked slow) are retried up to `tries`
 * times, counted in *retried; every other result must be right at once. */
static void fetch_verify(struct cfs_peer *p, uint32_t node, const uint32_t *ids, uint32_t n,
                         int tries, uint32_t *retried)
{
    struct fetch_set s;
    set_init(&s, n);
    bool *todo = calloc(n, sizeof(*todo));
    for (uint32_t i = 0; i < n; i++)
        todo[i] = true;
    for (int t = 0; t <= tries; t++) {
        uint32_t left = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!todo[i])
                continue;
            set_prepare(&s, i, node, ids[i]);
            set_submit(p, &s, i, 1, 256);
        }
        set_wait(&s);
        for (uint32_t i = 0; i < n; i++) {
            if (!todo[i])
                continue;
            if (s.f[i].req.res == -ETIMEDOUT && t < tries) {
                left++;
                continue;
            }
            verify(&s.f[i], expected_res(ids[i]));
            todo[i] = false;
        }
        if (!left)
            break;
        *retried += left;
        usleep(200000);
    }
    free(todo);
    set_free(&s);
}

/* Rank 1 is stopped by the script; the others check the timeout path. */
static int mode_stop(struct cfs_peer *p, const char *dir)
{
    const double timeout = 2.0;
    const uint32_t nfiles = 300, victim = 1;
    uint32_t retried = 0;
    int size = cfs_peer_size(p), rank = cfs_peer_rank(p);
    struct holder h;
    if (size < 3 || holder_init(&h, nfiles, rank, size) < 0 || start_peer(p, &h, timeout, 60.0) < 0)
        return 1;
    uint32_t ids[300], nv = files_of(victim, (uint32_t)size, nfiles, ids);
    uint32_t other = rank == 0 ? 2 : 0, oids[300];
    uint32_t no = files_of(other, (uint32_t)size, nfiles, oids);

    if ((uint32_t)rank == victim) {
        char pid[32];
        snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        file_touch(dir, "victim.pid", pid);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if ((uint32_t)rank != victim)
        fetch_verify(p, victim, ids, nv, 3, &retried);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        file_touch(dir, "ready", "");

    if ((uint32_t)rank != victim) {
        CHECK(wait_file(dir, "stopped", 20), "the script did not stop rank 1");
        /* Phase 2: the victim is stopped.  Requests to it time out, those to
         * a live rank in the same run still succeed. */
        struct fetch_set s, so;
        set_init(&s, nv);
        set_init(&so, no);
        for (uint32_t i = 0; i < nv; i++)
            set_prepare(&s, i, victim, ids[i]);
        for (uint32_t i = 0; i < no; i++)
            set_prepare(&so, i, other, oids[i]);
        double t0 = now_s();
        uint32_t acc = set_submit(p, &s, 0, nv, UINT32_MAX);
        set_submit(p, &so, 0, no, UINT32_MAX);
        set_wait(&s);
        double el = now_s() - t0;
        CHECK(acc == nv, "accepted %u of %u", acc, nv);
        for (uint32_t i = 0; i < nv; i++)
            verify(&s.f[i], -ETIMEDOUT);
        /* A hang guard, not a performance check. */
        CHECK(el >= 0.5 * timeout && el < timeout + 8.0, "timed out after %.2f s", el);
        /* The back-off (60 s) outlasts the stop: the victim stays marked
         * until its late replies arrive after SIGCONT. */
        CHECK(cfs_peer_node_state(p, victim) == CFS_PEER_SLOW, "victim not marked slow");
        struct fetch_set ff;
        set_init(&ff, 1);
        set_prepare(&ff, 0, victim, ids[0]);
        CHECK(cfs_peer_submit(p, &ff.f[0].req) == -ETIMEDOUT, "no fail-fast while slow");
        set_free(&ff);
        set_wait(&so);
        uint32_t other_timeouts = 0;
        for (uint32_t i = 0; i < no; i++) {
            if (so.f[i].req.res == -ETIMEDOUT)
                other_timeouts++; /* load: fetched again below */
            else
                verify(&so.f[i], expected_res(oids[i]));
        }
        if (other_timeouts)
            fetch_verify(p, other, oids, no, 3, &retried);
        printf("rank %d: %u requests to the stopped rank timed out after %.2f s (timeout %.1f)\n",
               rank, nv, el, timeout);
        char name[32];
        snprintf(name, sizeof(name), "timedout.%d", rank);
        file_touch(dir, name, "");
        CHECK(wait_file(dir, "continued", 20), "the script did not continue rank 1");

        /* Phase 3: after SIGCONT the victim answers again. */
        double t1 = now_s();
        bool back = false;
        while (!back && now_s() - t1 < 15) {
            set_prepare(&s, 0, victim, ids[1]);
            if (set_submit(p, &s, 0, 1, 1) == 1) {
                set_wait(&s);
                back = s.f[0].req.res >= 0;
            }
            if (!back)
                usleep(50000);
        }
        CHECK(back, "the victim did not come back");
        CHECK(cfs_peer_node_state(p, victim) == CFS_PEER_UP, "victim state %d",
              (int)cfs_peer_node_state(p, victim));
        fetch_verify(p, victim, ids, nv, 3, &retried);
        printf("rank %d: rank 1 back %.2f s after SIGCONT, all %u of its files fetched again "
               "(%u retries after load timeouts)\n",
               rank, now_s() - t1, nv, retried);
        set_free(&s);
        set_free(&so);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    cfs_peer_leave(p);
    CHECK(atomic_load(&h.pins) == atomic_load(&h.releases), "pins %llu, releases %llu",
          (unsigned long long)atomic_load(&h.pins), (unsigned long long)atomic_load(&h.releases));
    holder_free(&h);
    return failures ? 1 : 0;
}

/* Rank r leaves after about r * 0.4 s; the others go on fetching from
 * everybody and must see only right bytes, expected failures and
 * -EHOSTDOWN (refused or answered) for the ranks that left. */
static int mode_stagger(struct cfs_peer *p, uint32_t nfiles)
{
    int size = cfs_peer_size(p), rank = cfs_peer_rank(p);
    struct holder h;
    if (holder_init(&h, nfiles, rank, size) < 0 || start_peer(p, &h, 5.0, 0) < 0)
        return 1;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s(), stay = 0.4 * rank;
    uint32_t rounds = 0, verified = 0, hostdown = 0;
    struct fetch_set s;
    set_init(&s, nfiles);
    do {
        uint32_t n = 0;
        for (uint32_t id = 0; id < nfiles; id++)
            if ((int)(id % (uint32_t)size) != rank)
                set_prepare(&s, n++, id % (uint32_t)size, id);
        set_submit(p, &s, 0, n, 256);
        set_wait(&s);
        for (uint32_t i = 0; i < n; i++) {
            int64_t r = s.f[i].req.res;
            if (r == -EHOSTDOWN) {
                hostdown++;
                CHECK(cfs_peer_node_state(p, s.f[i].req.node) == CFS_PEER_GONE,
                      "-EHOSTDOWN from rank %u that did not leave", s.f[i].req.node);
            } else {
                verified += verify(&s.f[i], expected_res(s.f[i].req.id));
            }
        }
        rounds++;
    } while (now_s() - t0 < stay);
    if (rank == size - 1) {
        /* The last one must have seen everybody else leave. */
        double t1 = now_s();
        bool all_gone = false;
        while (!all_gone && now_s() - t1 < 5) {
            all_gone = true;
            for (int r = 0; r < size - 1; r++)
                all_gone &= cfs_peer_node_state(p, (uint32_t)r) == CFS_PEER_GONE;
            usleep(10000);
        }
        CHECK(all_gone, "not every other rank is marked gone");
    }
    double tl = now_s();
    cfs_peer_leave(p);
    printf("rank %d: %u rounds, %u results verified, %u -EHOSTDOWN, left after %.2f s (leave "
           "took %.3f s)\n",
           rank, rounds, verified, hostdown, tl - t0, now_s() - tl);
    CHECK(atomic_load(&h.pins) == atomic_load(&h.releases), "pins %llu, releases %llu",
          (unsigned long long)atomic_load(&h.pins), (unsigned long long)atomic_load(&h.releases));
    set_free(&s);
    holder_free(&h);
    return failures ? 1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Rank 1 serves nfiles of 110 KiB from RAM, rank 0 measures. */
static int mode_bench(struct cfs_peer *p, uint32_t nfiles, const char *label)
{
    bench_size = 110u << 10;
    int size = cfs_peer_size(p), rank = cfs_peer_rank(p);
    struct holder h;
    uint32_t all = nfiles * (uint32_t)size;
    if (size != 2 || holder_init(&h, all, rank, size) < 0 || start_peer(p, &h, 5.0, 0) < 0)
        return 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        uint32_t *ids = malloc(nfiles * sizeof(*ids));
        uint32_t n = files_of(1, 2, all, ids);
        const int passes = 3;
        double mb = (double)n * (double)bench_size / 1e6;

        /* Baseline: a RAM hit copies a cached file (this rank's own, all
         * different) into the reader's buffer (all different). */
        struct fetch_set s;
        set_init(&s, n);
        for (uint32_t i = 0; i < n; i++)
            set_prepare(&s, i, 1, ids[i]);
        double t = now_s();
        for (int k = 0; k < passes; k++)
            for (uint32_t i = 0; i < n; i++)
                memcpy(s.f[i].req.buf, h.ram[2 * i], bench_size);
        double ram_us = (now_s() - t) / (passes * n) * 1e6;

        /* Latency: one request at a time. */
        double *lat = malloc(n * sizeof(*lat));
        for (uint32_t i = 0; i < n; i++) {
            double a = now_s();
            set_submit(p, &s, i, 1, 1);
            set_wait(&s);
            lat[i] = (now_s() - a) * 1e6;
            CHECK(s.f[i].req.res == (int64_t)bench_size, "res %lld", (long long)s.f[i].req.res);
        }
        qsort(lat, n, sizeof(*lat), cmp_double);
        /* Throughput: everything at depth 256, batched. */
        double best = 0;
        for (int k = 0; k < passes; k++) {
            for (uint32_t i = 0; i < n; i++)
                set_prepare(&s, i, 1, ids[i]);
            t = now_s();
            set_submit(p, &s, 0, n, 256);
            set_wait(&s);
            double mbs = mb / (now_s() - t);
            best = mbs > best ? mbs : best;
        }
        for (uint32_t i = 0; i < n; i++)
            verify(&s.f[i], (int64_t)bench_size);
        double ram_mbs = (double)bench_size / ram_us;
        printf("peer fetch, %u files of %llu bytes, %s\n", n, (unsigned long long)bench_size,
               label);
        printf("  RAM hit (memcpy):  %8.1f us/file  %9.0f MB/s\n", ram_us, ram_mbs);
        printf("  peer, one at a time: p50 %8.1f us  p99 %8.1f us  (%.0fx a RAM hit)\n",
               lat[n / 2], lat[n * 99 / 100], lat[n / 2] / ram_us);
        printf("  peer, depth 256 batched: %9.0f MB/s  %8.0f files/s  (%.1f%% of memcpy "
               "bandwidth)\n",
               best, best * 1e6 / (double)bench_size, 100.0 * best / ram_mbs);
        free(lat);
        free(ids);
        set_free(&s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    cfs_peer_leave(p);
    holder_free(&h);
    return failures ? 1 : 0;
}

/* Without mpirun: one node, no MPI; and the messages of the agreement. */
static int mode_local(void)
{
    struct cfs_peer *p = (struct cfs_peer *)1;
    char err[512];
    CHECK(!cfs_peer_launched(), "run this mode without mpirun");
    CHECK(cfs_peer_init(NULL, NULL, &p, err, sizeof(err)) == 0 && p == NULL, "single node");
    CHECK(cfs_peer_rank(NULL) == 0 && cfs_peer_size(NULL) == 1, "rank/size of one node");
    struct cfs_peer_agreement a[4];
    CHECK(cfs_peer_agree(NULL, &a[0], err, sizeof(err)) == 0, "agree alone");

    struct cfs_options o;
    cfs_options_init(&o);
    o.has_seed = true;
    o.seed = 42;
    for (int r = 0; r < 4; r++)
        agreement_of(&o, 0xabcdef, &a[r]);
    CHECK(cfs_peer_agreement_compare(a, 4, err, sizeof(err)) == 0, "equal: %s", err);
    uint64_t h0 = config_hash_of(&o);
    a[1].seed = 43;
    CHECK(cfs_peer_agreement_compare(a, 2, err, sizeof(err)) == -EINVAL, "seed");
    CHECK(strcmp(err, "seed differs: rank 0 has 42, rank 1 has 43") == 0, "got '%s'", err);
    CHECK(cfs_peer_agreement_compare(a, 4, err, sizeof(err)) == -EINVAL, "seed 4");
    CHECK(strcmp(err, "seed differs: ranks 0,2,3 have 42, rank 1 has 43") == 0, "got '%s'", err);
    struct cfs_peer_agreement b[6];
    for (int r = 0; r < 6; r++)
        agreement_of(&o, 1, &b[r]);
    b[0].world = b[4].world = 8;
    CHECK(cfs_peer_agreement_compare(b, 6, err, sizeof(err)) == -EINVAL, "world");
    CHECK(strcmp(err, "world differs: ranks 0,4 have 8, ranks 1-3,5 have 1") == 0, "got '%s'",
          err);
    a[3].has_seed = 0;
    a[3].seed = 0;
    a[2].catalog_hash = 0x1234;
    a[0].drop_last = 1;
    CHECK(cfs_peer_agreement_compare(a, 4, err, sizeof(err)) == -EINVAL, "three");
    CHECK(strcmp(err, "dataset differs (catalog hash 0000000000abcdef on ranks 0,1,3, "
                      "0000000000001234 on rank 2); seed differs: ranks 0,2 have 42, rank 1 "
                      "has 43, rank 3 has none; drop_last differs: rank 0 has on, ranks 1-3 "
                      "have off") == 0,
          "got '%s'", err);
    o.seed = 43;
    CHECK(config_hash_of(&o) != h0, "configuration hash ignores the seed");
    o.seed = 42;
    o.no_peers = true; /* not plan-relevant */
    CHECK(config_hash_of(&o) == h0, "configuration hash depends on no_peers");
    o.sampler = CFS_SAMPLER_TORCH;
    agreement_of(&o, 1, &a[0]);
    agreement_of(&o, 1, &a[1]);
    a[1].sampler = CFS_SAMPLER_TORCH_DDP;
    a[1].ram = 1 << 20;
    cfs_peer_agreement_compare(a, 2, err, sizeof(err));
    CHECK(strcmp(err, "sampler differs: rank 0 has torch, rank 1 has torch-ddp; ram differs: "
                      "rank 0 has 1073741824, rank 1 has 1048576") == 0,
          "got '%s'", err);
    /* repetitions= is plan-relevant for the RA samplers only. */
    o.sampler = CFS_SAMPLER_TIMM_RA;
    agreement_of(&o, 1, &a[0]);
    o.repetitions = 2;
    agreement_of(&o, 1, &a[1]);
    cfs_peer_agreement_compare(a, 2, err, sizeof(err));
    CHECK(strcmp(err, "repetitions differs: rank 0 has 3, rank 1 has 2") == 0, "got '%s'", err);
    o.sampler = CFS_SAMPLER_HF_ACCELERATE;
    uint64_t h2 = config_hash_of(&o);
    o.repetitions = 3;
    CHECK(config_hash_of(&o) == h2, "hf-accelerate's configuration hash counts repetitions");
    cfs_options_free(&o);
    if (!failures)
        printf("local: single node without MPI, agreement messages OK\n");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    cfs_log_init("test_peer", LOG_WARNING);
    if (argc < 2) {
        fprintf(stderr, "usage: test_peer local|basic|agree|stop|stagger|bench ...\n");
        return 2;
    }
    if (strcmp(argv[1], "local") == 0)
        return mode_local();

    struct cfs_peer *p = NULL;
    char err[512] = "";
    if (!cfs_peer_launched()) {
        fprintf(stderr, "test_peer %s: run under mpirun\n", argv[1]);
        return 2;
    }
    if (cfs_peer_init(&argc, &argv, &p, err, sizeof(err)) < 0) {
        fprintf(stderr, "test_peer: %s\n", err);
        return 1;
    }
    my_rank = cfs_peer_rank(p);
    int rc = 2;
    if (strcmp(argv[1], "basic") == 0 && argc > 2)
        rc = mode_basic(p, (uint32_t)atoi(argv[2]));
    else if (strcmp(argv[1], "agree") == 0 && argc > 3)
        rc = mode_agree(p, argv[2], atoi(argv[3]));
    else if (strcmp(argv[1], "stop") == 0 && argc > 2)
        rc = mode_stop(p, argv[2]);
    else if (strcmp(argv[1], "stagger") == 0 && argc > 2)
        rc = mode_stagger(p, (uint32_t)atoi(argv[2]));
    else if (strcmp(argv[1], "bench") == 0 && argc > 2)
        rc = mode_bench(p, (uint32_t)atoi(argv[2]), argc > 3 ? argv[3] : "");
    else
        fprintf(stderr, "test_peer: bad arguments\n");
    if (rc == 0 && failures)
        rc = 1;
    cfs_peer_destroy(p);
    return rc;
}
