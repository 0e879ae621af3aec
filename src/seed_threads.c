/* The set search over several threads (clairfs/seed_search.h,
 * cfs_seed_search_set_threads), and any other scan of a seed range the same
 * way (cfs_seed_scan_threads: rng_range.c's search of the run's global
 * seed).
 *
 * Why threads.  One core scans the 2^32 seeds of an ImageNet-sized
 * dataset in about a minute and a half; a training node has 32 to 128
 * cores, most of them idle while its GPUs compute.  Each seed is tested
 * on its own, so the range splits without any shared state but the
 * answer.
 *
 * How the range is split.  Into chunks of SEED_CHUNK seeds (about a
 * millisecond of a core at ImageNet size), which the workers take in
 * order from one counter: a worker that its core's other work holds up
 * (at SCHED_IDLE it runs only where nothing else wants the core) delays
 * one chunk, not a share of the range fixed in advance.
 *
 * Why the answer is the same for any number of threads.  A worker keeps
 * the seeds its chunk passes; the calling thread hands them to found()
 * chunk after chunk, in seed order, as one thread would have, and stops
 * where found() says so.  Workers run at most WINDOW_PER_THREAD chunks a
 * thread ahead of what was handed over, which bounds what is kept.  The
 * seeds examined past a stop do not count: *searched is what one thread
 * would report.
 *
 * The caller's pace.  pace() runs on the calling thread between chunks:
 * it may read the workers' CPU time (each adds its thread's CPU clock
 * after every chunk) and move all of them between idle and normal
 * priority together (identify_pace.c's budget).
 *
 * Cancellation.  The calling thread waits for the next chunk at most
 * CANCEL_POLL_MS at a time and looks at *cancel; once set, the workers
 * stop at their next chunk and, as a thread at SCHED_IDLE on busy cores
 * may wait seconds to run at all, are raised to the normal priority to
 * get there. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid, pthread_setname_np, sched_getaffinity */
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/seed_search.h"
#include "clairfs/thread_priority.h"
#include "seed_kernel.h"

#define SEED_CHUNK (1ull << 16)
#define WINDOW_PER_THREAD 4
#define CANCEL_POLL_MS 10
#define MAX_THREADS 1024u

struct hit {
    uint32_t seed, skip;
};

/* One chunk's seeds that passed, kept until the calling thread hands
 * them over. */
struct slot {
    bool done;
    int rc;
    uint64_t searched;
    struct hit *hits;
    size_t nhits, cap;
};

struct cfs_seed_workers {
    const struct cfs_seed_scan *scan;
    uint32_t first;
    uint64_t count, chunk, nchunks;
    pthread_mutex_t mu;
    pthread_cond_t work;  /* a chunk was handed over, or stop */
    pthread_cond_t ready; /* a chunk is done */
    uint64_t next;        /* the next chunk to take */
    uint64_t delivered;   /* chunks handed over */
    unsigned window;
    struct slot *slots; /* chunk k in slots[k % window] */
    atomic_bool stop;
    _Atomic uint64_t cpu_ns; /* the workers' CPU time not yet taken */
    bool idle;               /* the priority the workers run at */
    unsigned n, started;
    pthread_t *thread;
    pid_t *tid; /* 0 until the worker runs */
    struct worker *arg;
};

struct worker {
    struct cfs_seed_workers *w;
    unsigned i;
};

/* --- The host's CPUs. ------------------------------------------------------ */

/* The cgroup v2 quota, in CPUs rounded up; 0 where none is set or it
 * cannot be read. */
static unsigned cgroup_cpus(void)
{
    char line[512], path[600];
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return 0;
    path[0] = 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = 0;
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max", line + 3);
        }
    fclose(f);
    f = path[0] ? fopen(path, "re") : NULL;
    if (!f)
        return 0;
    unsigned long long quota = 0, period = 0;
    char q[32];
    if (fscanf(f, "%31s %llu", q, &period) == 2 && strcmp(q, "max") != 0)
        quota = strtoull(q, NULL, 10);
    fclose(f);
    return quota && period ? (unsigned)((quota + period - 1) / period) : 0;
}

unsigned cfs_seed_usable_cpus(void)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set)
                                                             : online > 0 ? (unsigned)online : 1;
    unsigned quota = cgroup_cpus();
    if (quota && quota < n)
        n = quota;
    return n ? n : 1;
}

/* --- The workers. ------------------------------------------------------------ */

static bool keep_hit(void *arg, uint32_t seed, uint32_t skip)
{
    struct slot *s = arg;
    if (s->nhits == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct hit *h = realloc(s->hits, cap * sizeof(*h));
        if (!h) {
            s->rc = -ENOMEM;
            return true;
        }
        s->hits = h, s->cap = cap;
    }
    s->hits[s->nhits++] = (struct hit){seed, skip};
    return false;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The priority this worker should run at, applied by itself as it starts
 * (w->mu held): the pool's may have changed before it ran. */
static void take_priority(struct cfs_seed_workers *w, unsigned i)
{
    w->tid[i] = gettid();
    if (w->idle)
        (void)cfs_thread_lower_priority();
}

static void *worker_main(void *arg)
{
    struct worker *me = arg;
    struct cfs_seed_workers *w = me->w;
    pthread_setname_np(pthread_self(), "cfs-seed-scan");
    uint64_t cpu_mark = thread_cpu_ns();
    pthread_mutex_lock(&w->mu);
    take_priority(w, me->i);
    for (;;) {
        while (!atomic_load(&w->stop) && w->next < w->nchunks &&
               w->next >= w->delivered + w->window)
            pthread_cond_wait(&w->work, &w->mu);
        if (atomic_load(&w->stop) || w->next >= w->nchunks)
            break;
        uint64_t k = w->next++;
        struct slot *s = &w->slots[k % w->window];
        pthread_mutex_unlock(&w->mu);
        uint64_t off = k * w->chunk, len = w->count - off < w->chunk ? w->count - off : w->chunk;
        int rc = w->scan->scan(w->scan->problem, w->first + (uint32_t)off, len, &w->stop,
                               keep_hit, s, &s->searched);
        if (rc < 0)
            s->rc = rc;
        uint64_t cpu = thread_cpu_ns();
        atomic_fetch_add(&w->cpu_ns, cpu - cpu_mark);
        cpu_mark = cpu;
        pthread_mutex_lock(&w->mu);
        s->done = true;
        pthread_cond_signal(&w->ready);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int cfs_seed_workers_priority(struct cfs_seed_workers *w, bool idle)
{
    int rc = 0;
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    if (w->idle != idle) {
        w->idle = idle;
        for (unsigned i = 0; i < w->started; i++) {
            if (!w->tid[i])
                continue; /* it applies w->idle itself as it starts */
            int r = idle ? cfs_thread_lower_priority_of(w->thread[i], w->tid[i])
                         : cfs_thread_normal_priority_of(w->thread[i]);
            if (r < 0 && rc == 0)
                rc = r;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

double cfs_seed_workers_cpu_take(struct cfs_seed_workers *w)
{
    return w ? (double)atomic_exchange(&w->cpu_ns, 0) * 1e-9 : 0;
}

static void workers_free(struct cfs_seed_workers *w)
{
    for (uint64_t k = 0; k < w->window && w->slots; k++)
        free(w->slots[k].hits);
    free(w->slots);
    free(w->thread);
    free(w->tid);
    free(w->arg);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->ready);
    pthread_mutex_destroy(&w->mu);
}

/* Stops and joins the workers started. */
static void workers_stop(struct cfs_seed_workers *w)
{
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, true);
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 0; i < w->started; i++)
        pthread_join(w->thread[i], NULL);
    pthread_mutex_lock(&w->mu);
    w->started = 0; /* no priority for threads that are gone */
    pthread_mutex_unlock(&w->mu);
}

static int workers_start(struct cfs_seed_workers *w, const struct cfs_seed_scan *scan,
                         uint32_t first, uint64_t count, uint64_t chunk, unsigned n, bool idle)
{
    *w = (struct cfs_seed_workers){.scan = scan, .first = first, .count = count, .chunk = chunk,
                                   .nchunks = (count + chunk - 1) / chunk, .idle = idle, .n = n,
                                   .window = n * WINDOW_PER_THREAD};
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->ready, NULL);
    atomic_init(&w->stop, false);
    atomic_init(&w->cpu_ns, 0);
    w->slots = calloc(w->window, sizeof(*w->slots));
    w->thread = calloc(n, sizeof(*w->thread));
    w->tid = calloc(n, sizeof(*w->tid));
    w->arg = calloc(n, sizeof(*w->arg));
    if (!w->slots || !w->thread || !w->tid || !w->arg)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        w->arg[i] = (struct worker){w, i};
        int rc = -pthread_create(&w->thread[i], NULL, worker_main, &w->arg[i]);
        if (rc < 0)
            return w->started ? 0 : rc; /* fewer workers: the same answer */
        pthread_mutex_lock(&w->mu);
        w->started++;
        pthread_mutex_unlock(&w->mu);
    }
    return 0;
}

/* --- Handing the chunks over in seed order. --------------------------------- */

/* Seeds one thread reports examined when found() stopped it at seed:
 * through the end of the seed's block (the scan's step; for the set
 * search WIDE_BLOCK, forward_set's, or 1, the inside-out replay's). */
static uint64_t searched_at_stop(const struct cfs_seed_scan *scan, uint32_t first,
                                 uint64_t count, uint32_t seed)
{
    uint64_t off = (uint32_t)(seed - first), block = scan->block ? scan->block : 1;
    uint64_t end = (off / block + 1) * block;
    return end < count ? end : count;
}

/* Waits for chunk w->delivered (w->mu held): false when *cancel was set
 * first. */
static bool wait_next(struct cfs_seed_workers *w, const _Atomic bool *cancel)
{
    struct slot *s = &w->slots[w->delivered % w->window];
    while (!s->done) {
        if (cancel && atomic_load(cancel))
            return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += CANCEL_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&w->ready, &w->mu, &ts);
    }
    return true;
}

struct deliver {
    cfs_seed_set_found found;
    void *arg;
    const struct cfs_seed_threads *t;
    uint64_t searched;
    int rc;
};

/* Hands over the chunks as they complete, in order, until the range
 * ends, found() stops, *cancel or an error. */
static void deliver_all(struct cfs_seed_workers *w, const _Atomic bool *cancel, struct deliver *d)
{
    const struct cfs_seed_threads *t = d->t;
    uint64_t pace_every = t->every ? t->every * w->n : 0, since = 0;
    pthread_mutex_lock(&w->mu);
    while (w->delivered < w->nchunks) {
        if (!wait_next(w, cancel))
            break;
        struct slot *s = &w->slots[w->delivered % w->window];
        pthread_mutex_unlock(&w->mu);
        uint64_t off = w->delivered * w->chunk, got = s->searched;
        bool stop = s->rc < 0 || got < (w->count - off < w->chunk ? w->count - off : w->chunk);
        d->rc = s->rc;
        for (size_t i = 0; i < s->nhits && d->rc == 0; i++)
            if (d->found(d->arg, s->hits[i].seed, s->hits[i].skip)) {
                got = searched_at_stop(w->scan, w->first, w->count, s->hits[i].seed) - off;
                stop = true;
                break;
            }
        d->searched += got;
        if (t->progress)
            atomic_fetch_add(t->progress, got);
        since += got;
        if (!stop && t->pace && pace_every && since >= pace_every) {
            since = 0;
            t->pace(t->pace_arg, w);
        }
        pthread_mutex_lock(&w->mu);
        s->done = false, s->nhits = 0, s->rc = 0, s->searched = 0;
        w->delivered++;
        pthread_cond_broadcast(&w->work);
        if (stop || (cancel && atomic_load(cancel)))
            break;
    }
    pthread_mutex_unlock(&w->mu);
}

/* --- The search. --------------------------------------------------------------- */

/* found() as given, remembering that it stopped the search. */
struct inline_found {
    cfs_seed_set_found found;
    void *arg;
    bool stopped;
};

static bool inline_hit(void *arg, uint32_t seed, uint32_t skip)
{
    struct inline_found *f = arg;
    return f->stopped = f->found(f->arg, seed, skip);
}

/* One thread: the range in chunks of t->every on the calling thread, pace()
 * before each. */
static int search_inline(const struct cfs_seed_scan *scan, uint32_t first, uint64_t count,
                         const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                         uint64_t *searched, const struct cfs_seed_threads *t)
{
    int rc = 0;
    *searched = 0;
    struct inline_found f = {found, arg, false};
    uint64_t step = t->pace && t->every ? t->every : count;
    for (uint64_t done = 0; done < count && rc == 0;) {
        uint64_t len = count - done < step ? count - done : step, got;
        if (t->pace)
            t->pace(t->pace_arg, NULL);
        rc = scan->scan(scan->problem, first + (uint32_t)done, len, cancel, inline_hit, &f, &got);
        *searched += got;
        if (t->progress)
            atomic_fetch_add(t->progress, got);
        if (f.stopped || got < len)
            break;
        done += len;
    }
    return rc;
}

int cfs_seed_scan_threads(const struct cfs_seed_scan *scan, uint32_t first, uint64_t count,
                          const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                          uint64_t *searched, const struct cfs_seed_threads *t)
{
    uint64_t chunk = scan->chunk ? scan->chunk : SEED_CHUNK;
    unsigned n = t->threads ? t->threads : cfs_seed_usable_cpus();
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    if ((count + chunk - 1) / chunk < n)
        n = (unsigned)((count + chunk - 1) / chunk);
    if (n <= 1)
        return search_inline(scan, first, count, cancel, found, arg, searched, t);
    struct cfs_seed_workers w;
    int rc = workers_start(&w, scan, first, count, chunk, n, t->idle);
    struct deliver d = {.found = found, .arg = arg, .t = t};
    if (rc == 0) {
        if (t->pace)
            t->pace(t->pace_arg, &w);
        deliver_all(&w, cancel, &d);
        if (cancel && atomic_load(cancel)) {
            atomic_store(&w.stop, true);
            (void)cfs_seed_workers_priority(&w, false); /* to run and see it */
        }
    }
    workers_stop(&w);
    if (rc == 0 && t->pace)
        t->pace(t->pace_arg, &w); /* the workers' last CPU time */
    workers_free(&w);
    *searched = d.searched;
    return rc < 0 ? rc : d.rc;
}

static int set_scan(const void *problem, uint32_t first, uint64_t count,
                    const _Atomic bool *cancel, cfs_seed_set_found found, void *arg,
                    uint64_t *searched)
{
    return cfs_seed_search_set(problem, first, count, cancel, found, arg, searched);
}

int cfs_seed_search_set_threads(const struct cfs_seed_set_problem *p, uint32_t first,
                                uint64_t count, const _Atomic bool *cancel,
                                cfs_seed_set_found found, void *arg, uint64_t *searched,
                                const struct cfs_seed_threads *t)
{
    /* inside-out: every seed a replay of 2n words, a chunk of one seed */
    bool replay = p->algo == CFS_RANDPERM_CURRENT && p->n >= RANDPERM_LARGE_N;
    struct cfs_seed_scan scan = {.scan = set_scan,
                                 .problem = p,
                                 .chunk = replay ? 1 : SEED_CHUNK,
                                 .block = replay ? 1 : WIDE_BLOCK};
    uint64_t none;
    int rc = cfs_seed_search_set(p, first, 0, NULL, found, arg, &none); /* validates p */
    if (rc < 0) {
        *searched = 0;
        return rc;
    }
    return cfs_seed_scan_threads(&scan, first, count, cancel, found, arg, searched, t);
}
