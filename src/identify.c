/* Order identification (clairfs/identify.h): the observations, the
 * background thread, and the seed scans that find candidates for
 * identify_verify.c to judge.
 *
 * Why a scan over sets.  The identifier does not know which process reads
 * the head of the stream, nor the world or batch size.  But the head's
 * first entry, randperm position p0 (0; on node k of a torch-ddp run with
 * L ranks a node, k * L), is the first open of some reader: worker 0 of
 * rank p0, or the rank itself without workers.  Position p0 + 1 is that
 * reader's second open (stride 1: the torch models, a world of one, a
 * batch of one sample per worker...) or the first open of another reader
 * (rank p0 + 1, or worker 1 of a batch-1 loader).  So one pass over the
 * seeds with the set constraint of clairfs/seed_search.h - randperm[p0] in
 * {first opens}, randperm[p0 + 1] in {first and second opens} - covers
 * every hypothesis at once; about 2^32 R 2R / n^2 seeds pass for R readers
 * (ImageNet: none or one besides the real one), each verified against all
 * opens.  Skips 0 and 2 share the pass (the filter computes the first four
 * words of every seed).
 *
 * The frameworks' samplers keep the constraint but for one word.  An
 * accelerate rank reads whole batches: randperm[0] is worker 0 of rank 0's
 * first open, randperm[1] its second (B >= 2) or the first of rank 1 or
 * worker 1 (B = 1), as above.  The RA samplers repeat every value R times
 * in a row and deal the repeated list to the ranks: entries 0 .. R-1 are
 * randperm[0], entry R is randperm[1].  randperm[0] is still a first open
 * (entry 0: rank 0's), but a reader can open randperm[0] twice before
 * randperm[1] (world 1: entries 0, 1, 2 are its first three opens).  The
 * reader of entry R, though, reads entries in increasing order and all of
 * its entries below R hold randperm[0]: randperm[1] is its first or its
 * second DISTINCT open.  So the second set takes, per reader, the first open
 * and the first open that differs from it.  For the torch models that is
 * the second open whenever it differs from the first, and when it does not
 * the set only grows: no seed the old constraint passed is lost, the sets
 * keep at most two values a reader (the filter's pass rate is the same) and
 * it is still one scan for every model.
 *
 * The thread tries when IDENT_MIN_OPENS opens are in, keeps the
 * candidates that fit with too little evidence and re-verifies them as
 * opens arrive (cheap), and scans again only when none still fits or the
 * opens fit nothing (then after they doubled: a scan costs minutes of idle
 * CPU).  Its scans run at SCHED_IDLE, as the seed search does, but for
 * their first 2^20 seeds (and a registered seed's span): those and its
 * checks of kept candidates run at the normal priority (milliseconds, and
 * the data path waits for them). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/identify.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/seed_search.h"
#include "clairfs/thread_priority.h"
#include "identify_i.h"

/* Opens kept for verification: an ImageNet epoch (1 281 167) and the next
 * epoch's first opens, where what the first epoch left open shows (the
 * pages are touched only as opens come). */
#define MAX_OBS (1u << 21)
#define MAX_KEEP 16
#define HINT_SPAN 1024u        /* seeds tried from a registered one: a resumed run's epochs */
#define NEW_READER_RESTARTS 64 /* readers whose first open restarts a scan */
/* Scans in a row that fit nothing before the module stops searching (until
 * cfs_identify_restart): opens 32, 64, ... 4096 without a seed, enough for
 * any trainer whose head is a torch shuffle; one with a registered seed,
 * whose scan only says what the opens fit instead.  A reader that is no
 * shuffle (a threaded loader in one process, a sequential pass) would
 * otherwise cost a scan of minutes each time its opens doubled. */
#define FRUITLESS_SCANS 8u
#define FRUITLESS_SCANS_HINTED 1u
#define RANKS_CHECK 8u         /* opens to the next check while ranks are missing */
#define SCAN_HEAD_SEEDS (1u << 20) /* scanned at the normal priority (attempt_all) */

struct cand {
    uint32_t seed, skip, p0;
};

/* The share of a core the module thread's scans get (cfs_identify_scan_share).
 * A window is at least SCAN_WINDOW seconds of scanning; scans less than
 * SCAN_GAP apart (a restart for a new reader, the next attempt) share one,
 * and count as one scan to the caller.  Its own lock, a leaf: the data
 * path asks without waiting for the module's. */
#define SCAN_WINDOW 1.0
#define SCAN_GAP 1.0
struct scan_meter {
    pthread_mutex_t mu;
    clockid_t clock; /* the module thread's CPU time */
    bool has_clock;
    bool scanning;
    double scan_end;   /* monotonic seconds */
    double t0, cpu0;   /* the window's start, the thread's CPU time then */
    double share;      /* of the last window; -1 before one */
};

/* The scans' priority and budget.  Past their head the scans run at
 * SCHED_IDLE; where the trainers keep every core busy that is next to
 * nothing (6 % of a core beside an ImageNet loader on 2 cores), and the
 * 2^32 seeds (a CPU minute) would outlast the epoch.  search_budget lets
 * them run at the normal priority while the CPU time spent so is below
 * that share of the cores over the trainers' first epoch, projected from
 * their pace (cfs_identify_search_allowance): a long epoch pays a known
 * few percent for its order.  The budget is spent only while running
 * raised, and a core that something leaves idle serves the scan at idle
 * priority at no cost.  Between chunks of PACE_CHUNK seeds the module
 * thread charges its CPU time to the priority it ran at (the metrics) and
 * picks the next chunk's.
 *
 * Raised only where the trainers compute on every core
 * (cfs_identify_search_raise).  At idle priority the scan gets what they
 * leave idle, measured over probes of PACE_PROBE seconds; from a quarter
 * of a core up the host has idle time - the trainers wait, for their
 * storage most likely - and a raised scan would gain little CPU while
 * every wake-up in their chain of short-lived threads (loader workers,
 * FUSE requests, fetches) queued behind it: 2050 files/s fell to 417 over
 * an emulated PFS.  A raised spell ends after PACE_SPELL seconds for
 * another probe at idle priority, as the trainers may have moved on. */
#define PACE_CHUNK (1ull << 16) /* ~1 ms of a core: under a second at idle on busy cores */
#define PACE_GAP 1.0            /* seconds between opens counted as reading, at most */
#define PACE_MIN_READING 1.0    /* seconds of reading before a pace is known */
#define PACE_PROBE 2.0          /* seconds at idle priority that measure its share */
#define PACE_SPELL 20.0         /* seconds raised between probes */
struct search_pace {
    double budget;
    unsigned cores;
    uint64_t n;
    struct cfs_metrics *metrics;
    /* Stored under the module's lock (observe, restart), read by the thread. */
    _Atomic uint64_t opens;
    _Atomic uint64_t reading_us;
    atomic_bool reset; /* a restart: nothing of the budget spent yet */
    /* The module thread's own. */
    bool idle;       /* the priority it runs at */
    bool raised;     /* in a scan's long part, at the normal priority */
    double cpu_mark; /* its CPU time when last charged */
    double spent;    /* CPU seconds run raised */
    bool said_raised, said_spent;
    double probe_wall, probe_cpu; /* the idle probe's start (monotonic, thread CPU); 0: none */
    double idle_share;            /* of a core at idle priority, the last probe's; -1: none */
    double raised_at;             /* monotonic seconds the raised spell began */
};

/* torch-global without a seed (clairfs/identify.h): the window of one
 * epoch's opens that the module learns from. */
enum { EPOCHS_OFF, EPOCHS_TRYING, EPOCHS_ON };
struct ident_epochs {
    unsigned stage;     /* TRYING: one fresh seed's epoch was refuted by the next */
    uint32_t epoch;     /* the trainer's epoch the window holds */
    uint64_t per;       /* opens an epoch */
    uint64_t before;    /* opens observed before the window (since the restart) */
};

struct cfs_identify {
    struct cfs_identify_params p;
    struct cfs_sampler_params hint;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    uint32_t *samples; /* under lock */
    pid_t *pids, *ppids;
    size_t len, next_attempt;
    uint64_t generation;
    bool stop;
    struct timespec first_open;
    double last_open; /* under lock: monotonic seconds of the last open, 0 before one */
    enum cfs_identify_state state;
    struct cfs_identified result;
    atomic_bool cancel;
    pthread_t thread;
    struct cand keep[MAX_KEEP]; /* under lock: fits short of evidence */
    size_t nkeep;
    pid_t readers[NEW_READER_RESTARTS]; /* under lock: the first readers seen */
    pid_t reader_parents[NEW_READER_RESTARTS]; /* and their parents */
    double reader_seen[NEW_READER_RESTARTS];   /* and when, seconds after first_open */
    uint32_t reader_first[NEW_READER_RESTARTS]; /* and the sample each opened first */
    bool reader_two[NEW_READER_RESTARTS];      /* and whether a second distinct one */
    bool reader_restarts[NEW_READER_RESTARTS]; /* and whether its opens restart a scan */
    size_t nreaders;
    bool attempting; /* under lock: the thread works on a snapshot */
    unsigned fruitless; /* under lock: scans in a row that found nothing fitting */
    struct ident_global global; /* under lock: a torch-global trainer's offsets */
    struct cand win;            /* under lock: the candidate of the last identification */
    struct ident_epochs epochs; /* under lock */
    struct scan_meter meter;
    struct search_pace pace;
};

/* --- Grouping the observations. ------------------------------------------ */

static int reader_push(struct ident_reader *r, uint32_t sample)
{
    if (r->len == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        uint32_t *s = realloc(r->s, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        r->s = s, r->cap = cap;
    }
    r->s[r->len++] = sample;
    return 0;
}

int ident_group(const uint32_t *samples, const pid_t *pids, const pid_t *ppids, size_t count,
                struct ident_readers *out)
{
    memset(out, 0, sizeof(*out));
    size_t cap = 0, hcap = 64;
    size_t *slot = NULL; /* pid hash -> reader index + 1 */
    int rc = -ENOMEM;
    if (!(slot = calloc(hcap, sizeof(*slot))))
        goto fail;
    for (size_t i = 0; i < count; i++) {
        pid_t pid = pids ? pids[i] : 0;
        size_t h = ((uint32_t)pid * 0x9e3779b1u) & (hcap - 1);
        while (slot[h] && out->r[slot[h] - 1].pid != pid)
            h = (h + 1) & (hcap - 1);
        if (!slot[h]) {
            if (out->nr == cap) {
                size_t nc = cap ? 2 * cap : 8;
                struct ident_reader *r = realloc(out->r, nc * sizeof(*r));
                if (!r)
                    goto fail;
                out->r = r, cap = nc;
            }
            out->r[out->nr] = (struct ident_reader){.pid = pid, .ppid = ppids ? ppids[i] : 0};
            slot[h] = ++out->nr;
            if (2 * out->nr > hcap) { /* rehash */
                size_t nh = 2 * hcap;
                size_t *ns = calloc(nh, sizeof(*ns));
                if (!ns)
                    goto fail;
                for (size_t k = 0; k < out->nr; k++) {
                    size_t g = ((uint32_t)out->r[k].pid * 0x9e3779b1u) & (nh - 1);
                    while (ns[g])
                        g = (g + 1) & (nh - 1);
                    ns[g] = k + 1;
                }
                free(slot);
                slot = ns, hcap = nh;
                h = ((uint32_t)pid * 0x9e3779b1u) & (hcap - 1);
                while (out->r[slot[h] - 1].pid != pid)
                    h = (h + 1) & (hcap - 1);
            }
        }
        if (reader_push(&out->r[slot[h] - 1], samples[i]) < 0)
            goto fail;
        out->opens++;
    }
    free(slot);
    return 0;
fail:
    free(slot);
    ident_readers_free(out);
    return rc;
}

void ident_readers_free(struct ident_readers *rd)
{
    for (size_t i = 0; rd->r && i < rd->nr; i++)
        free(rd->r[i].s);
    free(rd->r);
    memset(rd, 0, sizeof(*rd));
}

/* --- The scans' share of a core. ------------------------------------------ */

static double clock_sec(clockid_t clock)
{
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* On the module's thread, around each scan. */
static void meter_scan(struct scan_meter *m, bool begin)
{
    if (!m)
        return; /* offline */
    double now = clock_sec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&m->mu);
    if (begin && m->has_clock && (m->scan_end == 0 || now - m->scan_end > SCAN_GAP)) {
        m->t0 = now; /* after a pause: a new window, nothing measured yet */
        m->cpu0 = clock_sec(m->clock);
        m->share = -1;
    }
    m->scanning = begin;
    if (!begin)
        m->scan_end = now;
    pthread_mutex_unlock(&m->mu);
}

bool cfs_identify_scan_share(struct cfs_identify *id, double *share)
{
    struct scan_meter *m = &id->meter;
    double now = clock_sec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&m->mu);
    bool scanning = m->has_clock &&
                    (m->scanning || (m->scan_end > 0 && now - m->scan_end <= SCAN_GAP));
    if (m->scanning && now - m->t0 >= SCAN_WINDOW) {
        double cpu = clock_sec(m->clock);
        m->share = cpu >= 0 ? (cpu - m->cpu0) / (now - m->t0) : -1;
        m->t0 = now;
        m->cpu0 = cpu;
    }
    *share = m->share;
    pthread_mutex_unlock(&m->mu);
    return scanning;
}

double cfs_identify_search_allowance(double budget, unsigned cores, uint64_t n, uint64_t opens,
                                     double reading)
{
    if (budget <= 0 || cores == 0 || opens == 0 || reading < PACE_MIN_READING)
        return 0;
    double epoch = reading * (double)n / (double)opens;
    return budget * cores * (epoch > reading ? epoch : reading);
}

/* On the module thread: its CPU time since the last charge, to the
 * priority it ran at. */
static void pace_charge(struct search_pace *pc)
{
    double cpu = clock_sec(CLOCK_THREAD_CPUTIME_ID);
    double d = cpu - pc->cpu_mark;
    if (cpu < 0 || d <= 0)
        return;
    pc->cpu_mark = cpu;
    if (pc->raised)
        pc->spent += d;
    if (pc->metrics)
        cfs_metrics_add(pc->metrics, pc->idle ? CFS_M_SEARCH_NS_IDLE : CFS_M_SEARCH_NS_NORMAL,
                        (uint64_t)(d * 1e9));
}

/* On the module thread: run at idle priority from now, or at the normal
 * one (outside the budget: the head of a scan, the checks). */
static void pace_priority(struct search_pace *pc, bool idle)
{
    pace_charge(pc);
    if (idle)
        (void)cfs_thread_lower_priority();
    else
        (void)cfs_thread_normal_priority();
    pc->idle = idle;
    pc->raised = false;
    pc->probe_wall = 0; /* a probe measures a scan's long part alone */
}

bool cfs_identify_search_raise(double spent, double allow, double idle_share, double raised_for)
{
    if (spent >= allow)
        return false;
    if (raised_for >= 0)
        return raised_for < PACE_SPELL;
    return idle_share >= 0 && idle_share < CFS_IDENTIFY_IDLE_ENOUGH;
}

/* Before each chunk of a scan's long part: at idle priority, the probe of
 * the share of a core it gets; raised while the budget lasts and the
 * cores are busy (cfs_identify_search_raise). */
static void pace_chunk(struct search_pace *pc)
{
    if (atomic_exchange(&pc->reset, false))
        pc->spent = 0, pc->said_raised = pc->said_spent = false;
    pace_charge(pc);
    double now = clock_sec(CLOCK_MONOTONIC);
    if (!pc->raised && pc->probe_wall <= 0) {
        pc->probe_wall = now, pc->probe_cpu = pc->cpu_mark;
    } else if (!pc->raised && now - pc->probe_wall >= PACE_PROBE) {
        pc->idle_share = (pc->cpu_mark - pc->probe_cpu) / (now - pc->probe_wall);
        pc->probe_wall = now, pc->probe_cpu = pc->cpu_mark;
    }
    uint64_t opens = atomic_load(&pc->opens);
    double reading = (double)atomic_load(&pc->reading_us) * 1e-6;
    double allow = cfs_identify_search_allowance(pc->budget, pc->cores, pc->n, opens, reading);
    bool raise = cfs_identify_search_raise(pc->spent, allow, pc->idle_share,
                                           pc->raised ? now - pc->raised_at : -1);
    if (raise == pc->raised)
        return;
    if (raise ? cfs_thread_normal_priority() < 0
              : strcmp(cfs_thread_lower_priority(), "normal") == 0)
        return;
    pc->raised = raise;
    pc->idle = !raise;
    double share = pc->idle_share;
    if (raise) {
        pc->raised_at = now;
    } else {
        pc->probe_wall = now, pc->probe_cpu = pc->cpu_mark;
        pc->idle_share = -1; /* the next spell waits for a probe */
    }
    if (raise && !pc->said_raised) {
        pc->said_raised = true;
        cfs_info("identify: the search runs at the normal priority within its budget: up to "
                 "%.1f CPU s (search_budget=%.0f %% of %u CPUs over an epoch of %.0f s at the "
                 "trainers' pace; at idle priority it got %.2f of a core: the cores are busy)",
                 allow, pc->budget * 100, pc->cores, allow / (pc->budget * pc->cores), share);
    } else if (!raise && pc->spent >= allow && !pc->said_spent) {
        pc->said_spent = true;
        cfs_info("identify: the search's budget is spent (%.1f CPU s at the normal priority): "
                 "back at idle priority", pc->spent);
    } else {
        cfs_debug("identify: the search runs at %s priority (%.1f of %.1f CPU s of its budget "
                  "spent; at idle priority it got %.2f of a core)",
                  raise ? "the normal" : "idle", pc->spent, allow, share);
    }
}

/* --- One attempt over a set of observations. ----------------------------- */

struct attempt {
    const struct cfs_identify_params *p;
    const struct ident_readers *rd;
    const atomic_bool *cancel;
    struct scan_meter *meter; /* NULL offline */
    struct search_pace *pace; /* NULL offline */
    bool paced;               /* a scan's long part: its chunks paced */
    double need_bits;
    uint32_t p0;
    int rc; /* 1 identified, -errno */
    struct cfs_identified *out;
    struct cand win;            /* what identified */
    struct cfs_identified near; /* the best fit short of evidence */
    double near_bits;
    struct cand keep[MAX_KEEP];
    size_t nkeep;
    uint64_t fits;
    bool scanning; /* candidates come from a scan (not the kept ones) */
    bool global_win; /* the outcome is identify_global.c's */
    size_t readers;  /* processes among the opens (for the debug log) */
};

static bool on_candidate(void *arg, uint32_t seed, uint32_t skip)
{
    struct attempt *a = arg;
    struct cfs_identified id;
    double bits;
    int rc = ident_verify(a->p, a->rd, seed, skip, a->p0, a->need_bits, &id, &bits);
    if (rc == 1) {
        *a->out = id;
        a->win = (struct cand){seed, skip, a->p0};
        a->rc = 1;
        return true;
    }
    if (rc == 0) {
        if (a->fits++ == 0 || bits > a->near_bits)
            a->near = id, a->near_bits = bits;
        if (a->nkeep < MAX_KEEP)
            a->keep[a->nkeep++] = (struct cand){seed, skip, a->p0};
        /* A fit short of evidence ends the scan: the next opens confirm or
         * refute it in microseconds, where the rest of the range costs
         * minutes.  The evidence demanded counts every seed of the range
         * as tried, so stopping early only demands more than needed. */
        return a->scanning;
    } else if (rc != -ENOENT) {
        a->rc = rc;
        return true;
    }
    return false;
}

static int set_bits(uint64_t **first, uint64_t **second, const struct ident_readers *rd, uint64_t n)
{
    *first = calloc((n + 63) / 64, sizeof(uint64_t));
    *second = calloc((n + 63) / 64, sizeof(uint64_t));
    if (!*first || !*second)
        return -ENOMEM;
    for (size_t i = 0; i < rd->nr; i++) {
        const struct ident_reader *r = &rd->r[i];
        if (r->len == 0)
            continue;
        uint32_t v = r->s[0];
        (*first)[v / 64] |= 1ull << (v % 64);
        (*second)[v / 64] |= 1ull << (v % 64);
        /* the second DISTINCT open (the top comment says why) */
        for (size_t k = 1; k < r->len; k++)
            if (r->s[k] != v) {
                v = r->s[k];
                (*second)[v / 64] |= 1ull << (v % 64);
                break;
            }
    }
    return 0;
}

/* The head positions to scan: 0 (every torch model, node 0 of torch-ddp)
 * and node * L when the registered world says how many ranks a node has. */
static size_t head_positions(const struct cfs_identify_params *p, uint32_t *pos)
{
    size_t k = 0;
    pos[k++] = 0;
    if (p->nodes > 1 && p->node > 0 && p->hint && p->hint->world >= p->nodes) {
        uint64_t at = (uint64_t)p->node * (p->hint->world / p->nodes);
        if (at + 2 <= 30 && at + 1 < p->n)
            pos[k++] = (uint32_t)at;
    }
    return k;
}

/* Scans [first, first + count) for every head position. */
static int scan(struct attempt *a, const uint64_t *fs, const uint64_t *ss, uint32_t first,
                uint64_t count)
{
    uint32_t heads[2];
    size_t nh = head_positions(a->p, heads);
    for (size_t h = 0; h < nh && a->rc == 0; h++) {
        static const uint32_t both[] = {0, 2}, ddp_only[] = {0};
        struct cfs_seed_set_problem sp = {.n = a->p->n,
                                          .algo = a->p->algo,
                                          .pos = heads[h],
                                          .skips = heads[h] ? ddp_only : both,
                                          .nskips = heads[h] ? 1 : 2,
                                          .first = fs,
                                          .second = ss};
        a->p0 = heads[h];
        meter_scan(a->meter, true);
        /* In chunks where paced; a candidate that stops the search stops
         * the chunks too (on_candidate: a fit, short of evidence or not). */
        int rc = 0;
        for (uint64_t done = 0; done < count && rc == 0 && a->rc == 0;) {
            uint64_t step = a->paced && count - done > PACE_CHUNK ? PACE_CHUNK : count - done;
            uint64_t searched, fits = a->fits;
            if (a->paced)
                pace_chunk(a->pace);
            rc = cfs_seed_search_set(&sp, first + (uint32_t)done, step, a->cancel, on_candidate,
                                     a, &searched);
            if (a->scanning && a->fits > fits)
                break;
            if (a->cancel && atomic_load(a->cancel))
                break;
            done += step;
        }
        meter_scan(a->meter, false);
        if (rc < 0)
            return rc;
        if (a->cancel && atomic_load(a->cancel))
            return -ECANCELED;
    }
    return a->rc < 0 ? a->rc : 0;
}

/* n = 1: every order reads sample 0; nothing to learn, nothing to get wrong. */
static void trivial(const struct cfs_identify_params *p, const struct ident_readers *rd,
                    struct cfs_identified *out)
{
    memset(out, 0, sizeof(*out));
    out->sampler =
        (struct cfs_sampler_params){.kind = CFS_SAMPLER_TORCH_SAMPLER,
                                    .n = 1,
                                    .batch = 1,
                                    .randperm = p->algo,
                                    .world = p->hint && p->hint->world ? p->hint->world : 1};
    out->rank_count = 1;
    out->opens = rd->opens;
}

double cfs_identify_evidence_needed(const struct cfs_identify_params *p)
{
    uint64_t count = p->seed_count ? p->seed_count : 1ull << 32;
    for (size_t i = 0; i < p->nmore_seeds; i++)
        count += p->more_seeds[i].count;
    size_t nh = head_positions(p, (uint32_t[2]){0});
    /* every seed of the range with both skips, per head position, plus a
     * hinted seed's span and the candidates kept from an earlier attempt */
    double tried =
        (double)count * 2.0 * (double)nh + 2.0 * HINT_SPAN + MAX_KEEP + ident_global_candidates(p);
    return log2(tried) + IDENT_HYPOTHESIS_BITS + IDENT_SAFETY_BITS;
}

/* The registered seed as torch-global's (identify_global.c): 1, 0 (a fit
 * short of evidence, kept in g), -ENOENT (none), -errno. */
static int global_step(struct attempt *a, const struct ident_obs *obs, struct ident_global *g)
{
    int rc = ident_global_attempt(a->p, obs, a->cancel, a->need_bits, g, a->out);
    if (rc == 1 || rc == 0)
        a->global_win = true;
    if (rc == 1)
        a->rc = 1;
    if (rc == 0)
        a->fits = 1, a->near = *a->out, a->near_bits = a->out->evidence_bits;
    return rc;
}

/* Fills out (or a "why not" text in out) from observations obs (grouped:
 * rd), g what is known of a torch-global trainer.  1 identified, 0 not
 * (out->text says why), -errno. */
static int attempt_all(const struct cfs_identify_params *p, const struct ident_obs *obs,
                       const struct ident_readers *rd, const atomic_bool *cancel,
                       struct scan_meter *meter, struct search_pace *pace,
                       const struct cand *keep, size_t nkeep,
                       bool kept_only, struct ident_global *g, struct attempt *a,
                       struct cfs_identified *out)
{
    memset(a, 0, sizeof(*a));
    a->p = p, a->rd = rd, a->cancel = cancel, a->meter = meter, a->pace = pace, a->out = out;
    if (p->n == 1 && rd->opens > 0) {
        trivial(p, rd, out);
        return 1;
    }
    uint64_t count = p->seed_count ? p->seed_count : 1ull << 32;
    a->need_bits = cfs_identify_evidence_needed(p);
    bool global_tried = g->found;
    if (g->found) {
        int grc = global_step(a, obs, g);
        if (grc != -ENOENT)
            return grc;
    }
    for (size_t i = 0; i < nkeep && a->rc == 0; i++) {
        a->p0 = keep[i].p0;
        on_candidate(a, keep[i].seed, keep[i].skip);
    }
    if (a->rc != 0 || (nkeep && a->fits) || kept_only)
        return a->rc;
    a->fits = 0, a->nkeep = 0;
    a->scanning = true;
    /* On the module's thread (cancel given) a scan takes minutes and
     * yields to the trainer.  The rest - waking up for an epoch's first
     * opens, checking the kept candidates - takes milliseconds and decides
     * what the data path predicts: a SCHED_IDLE thread would wait seconds
     * for a busy core just to start it, so the thread sleeps at the normal
     * priority and drops it only for the long part of a scan.  A registered
     * seed's span and the range's first SCAN_HEAD_SEEDS seeds (the seeds
     * people pick; ~10 ms) are scanned before that: a trainer whose loader
     * keeps every core busy starves a SCHED_IDLE thread for its whole
     * epoch 0, and its seed would wait for the epoch's end. */
    uint64_t *fs = NULL, *ss = NULL;
    int rc = p->n >= 2 && rd->nr > 0 ? set_bits(&fs, &ss, rd, p->n) : -ENOENT;
    if (rc == 0 && p->hint && p->hint_has_seed)
        rc = scan(a, fs, ss, (uint32_t)p->hint->seed, HINT_SPAN);
    if (rc == 0 && a->rc == 0 && !a->fits && !global_tried) {
        /* with a registered seed, a walk of the global stream (idle) */
        if (pace && p->hint_has_seed)
            pace_priority(pace, true);
        rc = global_step(a, obs, g);
        rc = rc == -ENOENT ? 0 : rc < 0 ? rc : a->rc != 0 || a->fits ? -ENOENT : 0;
    }
    /* Lowered only where the long part begins: a SCHED_IDLE thread that
     * meant to raise itself again soon could wait for a core first. */
    uint64_t head = count < SCAN_HEAD_SEEDS ? count : SCAN_HEAD_SEEDS;
    if (rc == 0 && a->rc == 0 && pace) {
        pace_priority(pace, false);
        rc = scan(a, fs, ss, p->seed_first, head);
    } else {
        head = 0;
    }
    if (pace)
        pace_priority(pace, true);
    a->paced = pace != NULL;
    if (rc == 0 && a->rc == 0 && count > head)
        rc = scan(a, fs, ss, p->seed_first + (uint32_t)head, count - head);
    for (size_t i = 0; i < p->nmore_seeds && rc == 0 && a->rc == 0 && !a->fits; i++)
        rc = scan(a, fs, ss, p->more_seeds[i].first, p->more_seeds[i].count);
    a->paced = false;
    free(fs);
    free(ss);
    if (pace)
        pace_priority(pace, false);
    if (rc == -ENOENT)
        rc = 0;
    return rc < 0 ? rc : a->rc;
}

/* --- What was identified, in words. ----------------------------------------- */

/* Seeds from the generator's low 32 bits, the registered seed's high bits
 * when its low bits agree; the registered values the opens contradict. */
static void finish(const struct cfs_identify_params *p, struct cfs_identified *id, double seconds,
                   bool log_contradiction)
{
    const struct cfs_sampler_params *h = p->hint;
    char note[160] = "";
    id->seconds = seconds;
    id->seed_high_known = false;
    uint32_t low = (uint32_t)id->sampler.seed;
    enum cfs_sampler_kind kind = id->sampler.kind;
    if (kind == CFS_SAMPLER_TIMM_RA) {
        /* seeded by the epoch: no seed to recover (identify_frameworks.c) */
        id->seed_high_known = true;
    } else if (h && p->hint_has_seed && p->n > 1) {
        uint32_t k = low - (uint32_t)h->seed;
        bool ddp = kind == CFS_SAMPLER_TORCH_DDP || kind == CFS_SAMPLER_HF_ACCELERATE ||
                   kind == CFS_SAMPLER_TORCHVISION_RA;
        if (k == 0 || (ddp && k < HINT_SPAN)) {
            /* seeded S + e, resumed at epoch k: seed S + k epoch 0 is S epoch k */
            id->sampler.seed = h->seed;
            id->epoch += k;
            id->seed_high_known = true;
        } else {
            snprintf(note + strlen(note), sizeof(note) - strlen(note),
                     "; registered seed=%llu contradicted", (unsigned long long)h->seed);
        }
    }
    if (h && h->kind != id->sampler.kind && h->kind != CFS_SAMPLER_LIST)
        snprintf(note + strlen(note), sizeof(note) - strlen(note),
                 "; registered sampler=%s contradicted", cfs_sampler_kind_name(h->kind));
    if (h && h->world && h->world != id->sampler.world)
        snprintf(note + strlen(note), sizeof(note) - strlen(note),
                 "; registered world=%u contradicted", h->world);
    if (h && id->workers && h->batch && h->batch != id->sampler.batch)
        snprintf(note + strlen(note), sizeof(note) - strlen(note),
                 "; registered batch=%u contradicted", h->batch);
    char global[96];
    ident_global_describe(id, global, sizeof(global));
    char ranks[48] = ""; /* only some ranks opened here (yet) */
    if (id->rank_count && id->rank_count < id->sampler.world)
        snprintf(ranks, sizeof(ranks), " (ranks %u-%u here)", id->rank_first,
                 id->rank_first + id->rank_count - 1);
    if (id->per_epoch_global) {
        snprintf(id->text, sizeof(id->text),
                 "torch-global (no seed registered) epoch %u's private seed=%u (low 32 bits) "
                 "batch=%u workers=%u after %llu opens in %.0f s%s",
                 id->epoch, (uint32_t)(id->sampler.seed + id->epoch), id->sampler.batch,
                 id->workers, (unsigned long long)id->opens, seconds, note);
        return;
    }
    snprintf(id->text, sizeof(id->text),
             "%s seed=%llu%s%s world=%u%s batch=%u workers=%u epoch %u after %llu opens in %.0f s%s",
             cfs_sampler_kind_name(id->sampler.kind), (unsigned long long)id->sampler.seed,
             id->seed_high_known || p->n == 1 ? "" : " (low 32 bits)", global, id->sampler.world,
             ranks,
             id->sampler.batch, id->workers, id->epoch, (unsigned long long)id->opens, seconds,
             note);
    if (note[0] && log_contradiction)
        cfs_warn("identify: the opens fit %s", id->text);
}

static void not_identified(const struct attempt *a, uint64_t opens, struct cfs_identified *out)
{
    memset(out, 0, sizeof(*out));
    out->opens = opens;
    if (a->fits && a->near_bits >= a->need_bits) /* short of IDENT_MIN_OPENS only */
        snprintf(out->text, sizeof(out->text),
                 "%llu opens fit %s seed=%llu (low 32 bits) with %.0f bits of evidence, but "
                 "identification waits for %d opens",
                 (unsigned long long)opens, cfs_sampler_kind_name(a->near.sampler.kind),
                 (unsigned long long)a->near.sampler.seed, a->near_bits, IDENT_MIN_OPENS);
    else if (a->fits)
        snprintf(out->text, sizeof(out->text),
                 "%llu opens fit %s seed=%llu (low 32 bits) but give %.0f of the %.0f bits of "
                 "evidence needed",
                 (unsigned long long)opens, cfs_sampler_kind_name(a->near.sampler.kind),
                 (unsigned long long)a->near.sampler.seed, a->near_bits, a->need_bits);
    else
        snprintf(out->text, sizeof(out->text), "no known torch order fits these %llu opens",
                 (unsigned long long)opens);
}

int cfs_identify_offline(const struct cfs_identify_params *p, const uint32_t *samples,
                         const pid_t *pids, const pid_t *ppids, size_t count,
                         struct cfs_identified *out, char *err, size_t errlen)
{
    if (p->n == 0 || p->n > UINT32_MAX) {
        snprintf(err, errlen, "identify: a dataset of %llu samples: must be 1..%u",
                 (unsigned long long)p->n, UINT32_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < count; i++)
        if (samples[i] >= p->n) {
            snprintf(err, errlen, "identify: open %zu is sample %u, beyond the %llu samples", i,
                     samples[i], (unsigned long long)p->n);
            return -EINVAL;
        }
    struct ident_readers rd;
    int rc = ident_group(samples, pids, ppids, count, &rd);
    struct attempt *a = rc == 0 ? malloc(sizeof(*a)) : NULL;
    if (!a) {
        ident_readers_free(&rd);
        snprintf(err, errlen, "identify: out of memory for %zu opens", count);
        return -ENOMEM;
    }
    struct ident_obs obs = {samples, pids, ppids, count};
    struct ident_global g = {0};
    rc = attempt_all(p, &obs, &rd, NULL, NULL, NULL, NULL, 0, false, &g, a, out);
    if (rc == 1) {
        finish(p, out, 0, false);
        rc = 0;
    } else if (rc == 0) {
        not_identified(a, rd.opens, out);
        rc = -ENOENT;
    } else {
        snprintf(err, errlen, "identify: %s", strerror(-rc));
    }
    free(a);
    ident_readers_free(&rd);
    return rc;
}

/* --- The module and its thread. -------------------------------------------- */

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Under the lock: the running attempt stops at its next check of cancel.
 * Its thread may be in a scan's idle part: on cores that a trainer (or
 * anything else) keeps busy, a SCHED_IDLE thread would not run to see the
 * flag for seconds, and a minute was seen on a loaded host - while the
 * attempt that should replace it waits.  So it is put back at the normal
 * priority, where it finishes the chunk it is in (8192 seeds) and starts
 * the next attempt; that lowers it again where its long part begins. */
static void cancel_attempt(struct cfs_identify *id)
{
    atomic_store(&id->cancel, true);
    if (id->attempting)
        (void)cfs_thread_normal_priority_of(id->thread);
}

/* One attempt on a snapshot of the observations; called without the lock. */
static int attempt_snapshot(struct cfs_identify *id, const uint32_t *s, const pid_t *pids,
                            const pid_t *ppids, size_t len, const struct cand *keep, size_t nkeep,
                            bool kept_only, struct ident_global *g, struct cfs_identified *out,
                            struct attempt *a)
{
    struct ident_readers rd;
    int rc = ident_group(s, pids, ppids, len, &rd);
    if (rc < 0)
        return rc;
    struct ident_obs obs = {s, pids, ppids, len};
    rc = attempt_all(&id->p, &obs, &rd, &id->cancel, &id->meter, &id->pace, keep, nkeep,
                     kept_only, g, a, out);
    pace_charge(&id->pace); /* the checks too, at the normal priority */
    a->readers = rd.nr;
    ident_readers_free(&rd);
    return rc;
}

/* Under the lock: the outcome of an attempt over `len` opens. */
static void record_outcome(struct cfs_identify *id, int rc, const struct attempt *a, size_t len)
{
    if (rc == 1) {
        /* Keep checking as opens come: a later epoch can tell apart what
         * epoch 0 could not (torch-ddp at world 1 and torch-sampler,
         * persistent workers or not), from the same seed, cheaply. */
        id->state = CFS_IDENTIFY_IDENTIFIED;
        id->keep[0] = a->win;
        id->win = a->global_win ? (struct cand){0, UINT32_MAX, 0} : a->win;
        id->nkeep = a->global_win ? 0 : 1; /* a torch-global fit is kept in id->global */
        id->next_attempt = len + len / 4 + IDENT_MIN_OPENS;
        /* What epoch 0 leaves open shows in the next epoch's first batches:
         * check there too, before the data path has mispredicted for long
         * (observations begin at an epoch's start). */
        uint64_t per = a->out->epoch_opens;
        if (per) {
            /* the first epoch start after the last open seen (len itself
             * when that open ended an epoch: a trainer paused there) */
            uint64_t past = (len + per - 1) / per * per + IDENT_MIN_OPENS;
            if (past < id->next_attempt)
                id->next_attempt = past;
        }
        /* Fewer ranks than the world: some have not opened yet (or run on
         * other nodes), and their opens miss until a check finds them
         * (same_order); check sooner, still geometrically (a node that
         * holds only some ranks must not pay a check every few opens). */
        const struct cfs_identified *o = a->out;
        uint64_t soon = len + RANKS_CHECK + len / 16;
        if (o->rank_count < o->sampler.world && soon < id->next_attempt)
            id->next_attempt = soon;
        return;
    }
    if (rc < 0 && rc != -ECANCELED)
        cfs_warn("identify: %s; trying again when the opens have doubled", strerror(-rc));
    id->nkeep = a->nkeep;
    memcpy(id->keep, a->keep, a->nkeep * sizeof(*a->keep));
    bool fits = rc == 0 && a->fits;
    id->state = fits || rc < 0 ? CFS_IDENTIFY_LEARNING : CFS_IDENTIFY_NOT_A_SHUFFLE;
    /* a fit short of evidence is re-verified cheaply; a scan costs minutes;
     * one cancelled for a new reader's first open starts again at once */
    id->next_attempt = rc == -ECANCELED ? len : fits ? len + IDENT_MIN_OPENS : 2 * len;
    if (fits)
        id->fruitless = 0;
    else if (rc == 0 &&
             ++id->fruitless >= (id->p.hint_has_seed ? FRUITLESS_SCANS_HINTED : FRUITLESS_SCANS)) {
        cfs_info("identify: %zu opens fit no torch shuffle after %u scans; searching no more "
                 "until the order is reset",
                 len, id->fruitless);
        id->next_attempt = SIZE_MAX;
    }
}

/* Would the planner read the same from a and b?  The ranks count: one
 * rank's workers can open a few batches before the next rank's start (the
 * first opens show ranks 0 of 2), and the ranks seen later must reach the
 * planner. */
static bool same_order(const struct cfs_identified *a, const struct cfs_identified *b)
{
    const struct cfs_sampler_params *x = &a->sampler, *y = &b->sampler;
    return x->kind == y->kind && x->seed == y->seed && x->world == y->world &&
           x->batch == y->batch && x->drop_last == y->drop_last &&
           x->drop_last_batch == y->drop_last_batch &&
           x->persistent_workers == y->persistent_workers && a->workers == b->workers &&
           x->rng_offset == y->rng_offset && x->rng_epoch_words == y->rng_epoch_words &&
           a->epoch_words_known == b->epoch_words_known && a->rank_first == b->rank_first &&
           a->rank_count == b->rank_count && a->epoch_seed_only == b->epoch_seed_only;
}

/* --- torch-global without a seed: one epoch at a time. --------------------- */

/* A fit that is one fresh generator's first randperm: what torch-global
 * reads each epoch, and what torch-ddp at world 1 or torch-sampler read in
 * the epoch identified; nothing registered to say which. */
static bool fresh_epoch(const struct cfs_identify_params *p, const struct cfs_identified *o,
                        struct cand win)
{
    enum cfs_sampler_kind k = o->sampler.kind;
    return !p->hint_has_seed && p->nodes <= 1 && win.skip == 0 && win.p0 == 0 &&
           o->sampler.world == 1 && o->epoch == 0 && o->epoch_opens > 0 &&
           o->opens <= o->epoch_opens &&
           (k == CFS_SAMPLER_TORCH_DDP || k == CFS_SAMPLER_TORCH_SAMPLER);
}

/* Under the lock: the first readers of the window, as note_reader keeps
 * them (a scan is restarted for a new reader, not for one already in). */
static void readers_of_window(struct cfs_identify *id)
{
    id->nreaders = 0;
    for (size_t i = 0; i < id->len && id->nreaders < NEW_READER_RESTARTS; i++) {
        size_t k = 0;
        while (k < id->nreaders && id->readers[k] != id->pids[i])
            k++;
        if (k == id->nreaders) {
            id->readers[id->nreaders] = id->pids[i];
            id->reader_seen[id->nreaders] = 0; /* the window's start */
            id->reader_first[id->nreaders] = id->samples[i];
            id->reader_two[id->nreaders] = false;
            id->reader_restarts[id->nreaders] = true;
            id->reader_parents[id->nreaders++] = id->ppids[i];
        } else if (id->samples[i] != id->reader_first[k]) {
            id->reader_two[k] = true;
        }
    }
}

/* Under the lock: the observations become the window of opens [from, len)
 * for the trainer's epoch `epoch`; learning starts again on them. */
static void window_from(struct cfs_identify *id, size_t from, uint32_t epoch)
{
    memmove(id->samples, id->samples + from, (id->len - from) * sizeof(*id->samples));
    memmove(id->pids, id->pids + from, (id->len - from) * sizeof(*id->pids));
    memmove(id->ppids, id->ppids + from, (id->len - from) * sizeof(*id->ppids));
    id->epochs.before += from;
    id->epochs.epoch = epoch;
    id->len -= from;
    id->generation++;
    id->state = CFS_IDENTIFY_LEARNING;
    id->next_attempt = id->len > IDENT_MIN_OPENS ? id->len : IDENT_MIN_OPENS;
    id->nkeep = 0;
    id->fruitless = 0;
    clock_gettime(CLOCK_MONOTONIC, &id->first_open);
    readers_of_window(id);
}

/* On the thread, after an attempt over s[0, len) that refuted the
 * identification: if that was one fresh epoch and it explains the first
 * epoch_opens opens, the rest is the next epoch's, to be scanned alone.
 * Takes and returns with the lock held. */
static bool try_next_epoch(struct cfs_identify *id, const uint32_t *s, const pid_t *pids,
                           const pid_t *ppids, size_t len)
{
    const struct cfs_identified *r = &id->result;
    uint64_t per = r->epoch_opens;
    struct cand win = id->win;
    if (!r->epoch_seed_only || r->per_epoch_global || !fresh_epoch(&id->p, r, win) || len < per ||
        per > MAX_OBS / 2 || id->epochs.stage != EPOCHS_OFF)
        return false;
    uint64_t gen = id->generation;
    struct cfs_identify_params p = id->p;
    pthread_mutex_unlock(&id->lock);
    struct ident_readers rd;
    struct cfs_identified fit;
    double bits;
    int rc = ident_group(s, pids, ppids, per, &rd);
    if (rc == 0) {
        rc = ident_verify(&p, &rd, win.seed, win.skip, win.p0, 0.0, &fit, &bits);
        ident_readers_free(&rd);
    }
    pthread_mutex_lock(&id->lock);
    if (rc < 0 || gen != id->generation || id->len < per)
        return false;
    id->epochs = (struct ident_epochs){
        .stage = EPOCHS_TRYING, .per = per, .before = id->epochs.before};
    window_from(id, per, r->epoch + 1);
    cfs_info("identify: epoch %u does not continue the order of epoch %u (%s): learning it "
             "from its own opens",
             id->epochs.epoch, r->epoch, r->text);
    return true;
}

/* A fresh epoch's fit, out, named as torch-global's epoch e: planned as the
 * torch-ddp epoch that reads it (seeded seed + e: this epoch's seed). */
static void as_epoch_global(struct cfs_identified *out, uint32_t e)
{
    out->epoch_seed_only = true;
    out->per_epoch_global = true;
    out->sampler.kind = CFS_SAMPLER_TORCH_DDP;
    out->sampler.seed = (uint32_t)((uint32_t)out->sampler.seed - e);
    out->sampler.persistent_workers = false;
    out->epoch = e;
}

/* On the thread, the lock held: out fits the current observations.  In a
 * window, a fresh epoch is torch-global's (named so, planned as the
 * torch-ddp epoch that reads it); anything else ends the windows. */
static void epoch_fit(struct cfs_identify *id, struct cfs_identified *out, struct cand win)
{
    out->opens_before = id->epochs.before;
    bool fresh = fresh_epoch(&id->p, out, win);
    out->epoch_seed_only = fresh;
    if (id->epochs.stage == EPOCHS_OFF)
        return;
    if (!fresh) {
        id->epochs.stage = EPOCHS_OFF;
        return;
    }
    id->epochs.stage = EPOCHS_ON;
    as_epoch_global(out, id->epochs.epoch);
}

/* Under the lock, from observe: the window holds a whole epoch and one
 * more open came: the next window starts with it.  One that ends
 * unidentified ends the windows (too short an epoch for a scan, or no
 * longer torch-global: learning goes on over every open). */
static void epoch_roll(struct cfs_identify *id)
{
    if (id->state != CFS_IDENTIFY_IDENTIFIED) {
        id->epochs.stage = EPOCHS_OFF;
        return;
    }
    if (id->attempting)
        cancel_attempt(id);
    window_from(id, id->len, id->epochs.epoch + 1);
}

/* Offline: the attempt over opens [from, from + len) of a record alone.  1
 * identified (out), 0 not (out->text says why), -errno. */
static int offline_window(const struct cfs_identify_params *p, const uint32_t *s,
                          const pid_t *pids, const pid_t *ppids, size_t from, size_t len,
                          struct attempt *a, struct cfs_identified *out)
{
    struct ident_obs obs = {s + from, pids ? pids + from : NULL, ppids ? ppids + from : NULL,
                            len};
    struct ident_readers rd;
    int rc = ident_group(obs.s, obs.pids, obs.ppids, len, &rd);
    if (rc < 0)
        return rc;
    struct ident_global g = {0};
    rc = attempt_all(p, &obs, &rd, NULL, NULL, NULL, NULL, 0, false, &g, a, out);
    if (rc == 0)
        not_identified(a, rd.opens, out);
    ident_readers_free(&rd);
    return rc;
}

/* Offline: opens [from, from + len) as torch-global's epoch e, a fresh
 * generator's first randperm.  1 (out named so), 0 not (out->text), -errno. */
static int offline_epoch(const struct cfs_identify_params *p, const uint32_t *s,
                         const pid_t *pids, const pid_t *ppids, size_t from, size_t len,
                         uint32_t e, struct attempt *a, struct cfs_identified *out)
{
    int rc = offline_window(p, s, pids, ppids, from, len, a, out);
    if (rc != 1)
        return rc;
    if (!fresh_epoch(p, out, a->win)) {
        char was[sizeof(out->text)];
        finish(p, out, 0, false);
        memcpy(was, out->text, sizeof(was));
        snprintf(out->text, sizeof(out->text), "its opens fit %.200s, not a fresh generator's",
                 was);
        return 0;
    }
    as_epoch_global(out, e);
    out->opens_before = from;
    finish(p, out, 0, false);
    return 1;
}

int cfs_identify_offline_epochs(const struct cfs_identify_params *p, const uint32_t *samples,
                                const pid_t *pids, const pid_t *ppids, size_t count,
                                cfs_identify_cb each, void *arg, struct cfs_identified *out,
                                char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->opens = count;
    snprintf(out->text, sizeof(out->text), "no known torch order fits these %zu opens", count);
    if (p->hint_has_seed || p->nodes > 1 || p->n < 2 || p->n > UINT32_MAX ||
        count < IDENT_MIN_OPENS)
        return -ENOENT;
    for (size_t i = 0; i < count; i++)
        if (samples[i] >= p->n) {
            snprintf(err, errlen, "identify: open %zu is sample %u, beyond the %llu samples", i,
                     samples[i], (unsigned long long)p->n);
            return -EINVAL;
        }
    struct attempt *a = malloc(sizeof(*a));
    struct ident_readers rd = {0};
    if (!a) {
        snprintf(err, errlen, "identify: out of memory for %zu opens", count);
        return -ENOMEM;
    }
    /* Epoch 0 from its head, as the mount finds it: 32 opens, doubled
     * while they fit nothing (or too little); short of the whole record,
     * which the caller found no one order explains. */
    struct cfs_identified first;
    int rc = 0;
    for (size_t head = IDENT_MIN_OPENS; head < count && rc == 0; head *= 2)
        rc = offline_window(p, samples, pids, ppids, 0, head, a, &first);
    uint64_t per = rc == 1 ? first.epoch_opens : 0;
    if (rc < 0)
        goto fail;
    if (rc == 0 || !fresh_epoch(p, &first, a->win) || per >= count) {
        rc = -ENOENT; /* not one fresh epoch, or nothing after it */
        goto out;
    }
    /* ... that explains its whole epoch, as the mount checks before it
     * learns the next epoch alone (try_next_epoch) */
    struct cand win = a->win;
    double bits;
    if ((rc = ident_group(samples, pids, ppids, per, &rd)) < 0)
        goto fail;
    rc = ident_verify(p, &rd, win.seed, win.skip, win.p0, cfs_identify_evidence_needed(p),
                      &first, &bits);
    if (rc < 0 && rc != -ENOENT)
        goto fail;
    if (rc != 1 || !fresh_epoch(p, &first, win)) {
        rc = -ENOENT;
        goto out;
    }
    as_epoch_global(&first, 0);
    finish(p, &first, 0, false);
    /* Every later epoch alone; the second names torch-global. */
    int found = 1;
    uint32_t e = 1;
    for (uint64_t from = per; from < count && count - from >= IDENT_MIN_OPENS; from += per, e++) {
        struct cfs_identified cur;
        size_t len = count - from < per ? count - from : per;
        rc = offline_epoch(p, samples, pids, ppids, from, len, e, a, &cur);
        if (rc < 0)
            goto fail;
        if (rc == 0) {
            if (found > 1)
                snprintf(out->text, sizeof(out->text), "epoch %u: %.200s", e, cur.text);
            break;
        }
        if (found++ == 1 && each)
            each(arg, &first);
        if (each)
            each(arg, &cur);
        *out = cur;
    }
    rc = rc == 1 && found > 1 ? found : -ENOENT;
    goto out;
fail:
    snprintf(err, errlen, "identify: %s", strerror(-rc));
out:
    ident_readers_free(&rd);
    free(a);
    return rc;
}

static void *identify_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-identify");
    struct cfs_identify *id = arg;
    struct attempt *a = malloc(sizeof(*a)); /* scans yield (attempt_all) */
    id->pace.cpu_mark = clock_sec(CLOCK_THREAD_CPUTIME_ID);
    pthread_mutex_lock(&id->lock);
    while (!id->stop) {
        if (id->len < id->next_attempt || !a) {
            pthread_cond_wait(&id->wake, &id->lock);
            continue;
        }
        uint64_t gen = id->generation;
        size_t len = id->len;
        atomic_store(&id->cancel, false);
        id->attempting = true;
        uint32_t *s = malloc(len * sizeof(*s));
        pid_t *pids = malloc(len * sizeof(*pids)), *ppids = malloc(len * sizeof(*ppids));
        if (s && pids && ppids) {
            memcpy(s, id->samples, len * sizeof(*s));
            memcpy(pids, id->pids, len * sizeof(*pids));
            memcpy(ppids, id->ppids, len * sizeof(*ppids));
        }
        struct cand keep[MAX_KEEP];
        size_t nkeep = id->nkeep;
        memcpy(keep, id->keep, nkeep * sizeof(*keep));
        struct ident_global global = id->global;
        double seconds = 0;
        /* One fresh epoch's fit checked past its end: if the kept seed
         * fails there, the next epoch is learnt alone (try_next_epoch)
         * rather than scanned together with the last. */
        bool kept_only = id->state == CFS_IDENTIFY_IDENTIFIED && id->result.epoch_seed_only &&
                         !id->result.per_epoch_global && id->epochs.stage == EPOCHS_OFF &&
                         len > id->result.epoch_opens;
        pthread_mutex_unlock(&id->lock);
        struct cfs_identified out;
        a->readers = 0;
        int rc = s && pids && ppids ? attempt_snapshot(id, s, pids, ppids, len, keep, nkeep,
                                                       kept_only, &global, &out, a)
                                    : -ENOMEM;
        pthread_mutex_lock(&id->lock);
        id->attempting = false;
        bool current = gen == id->generation && !id->stop;
        bool was = id->state == CFS_IDENTIFY_IDENTIFIED;
        if (current && rc != 1 && rc != -ECANCELED && was &&
            try_next_epoch(id, s, pids, ppids, len))
            current = false; /* the next epoch is learnt alone */
        free(s);
        free(pids);
        free(ppids);
        cfs_debug("identify: attempt over %zu opens of %zu readers (%zu kept%s): %s%s after %.2f s",
                  len, a->readers, nkeep, kept_only ? ", kept only" : "",
                  rc == 1 ? "identified" : rc == -ECANCELED ? "cancelled" : rc < 0 ? strerror(-rc)
                  : a->fits ? "fits, short of evidence" : "nothing fits",
                  current ? "" : " (the observations were reset meanwhile)", since(&id->first_open));
        if (!current)
            continue; /* restarted meanwhile: the observations are gone */
        id->global = global;
        seconds = since(&id->first_open);
        record_outcome(id, rc, a, len);
        if (kept_only && rc == 0 && !a->fits)
            id->next_attempt = len; /* not the next epoch's: scan them all at once */
        if (rc != 1)
            continue;
        epoch_fit(id, &out, a->win);
        struct cfs_identified quiet = out;
        finish(&id->p, &quiet, seconds, false);
        if (was && same_order(&id->result, &quiet))
            continue; /* confirmed by the new opens */
        finish(&id->p, &out, seconds, true);
        id->result = out;
        pthread_mutex_unlock(&id->lock);
        cfs_info("identify: %s", out.text);
        if (id->p.on_identified)
            id->p.on_identified(id->p.cb_arg, &out);
        pthread_mutex_lock(&id->lock);
    }
    pthread_mutex_unlock(&id->lock);
    free(a);
    return NULL;
}

/* The CPUs this process may run on. */
static unsigned online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

int cfs_identify_create(const struct cfs_identify_params *p, struct cfs_identify **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    if (p->n == 0 || p->n > UINT32_MAX) {
        snprintf(err, errlen, "identify: a dataset of %llu samples: must be 1..%u",
                 (unsigned long long)p->n, UINT32_MAX);
        return -EINVAL;
    }
    struct cfs_identify *id = calloc(1, sizeof(*id));
    if (!id)
        goto oom;
    id->p = *p;
    if (p->hint) {
        id->hint = *p->hint;
        id->hint.list_path = NULL;
        id->p.hint = &id->hint;
    }
    id->next_attempt = IDENT_MIN_OPENS;
    atomic_init(&id->cancel, false);
    id->samples = malloc(MAX_OBS * sizeof(*id->samples));
    id->pids = malloc(MAX_OBS * sizeof(*id->pids));
    id->ppids = malloc(MAX_OBS * sizeof(*id->ppids));
    if (!id->samples || !id->pids || !id->ppids)
        goto oom;
    pthread_mutex_init(&id->lock, NULL);
    pthread_cond_init(&id->wake, NULL);
    pthread_mutex_init(&id->meter.mu, NULL);
    id->meter.share = -1;
    id->pace.idle_share = -1;
    id->pace.budget = p->search_budget;
    id->pace.cores = p->cores ? p->cores : online_cpus();
    id->pace.n = p->n;
    id->pace.metrics = p->metrics;
    int rc = -pthread_create(&id->thread, NULL, identify_thread, id);
    if (rc < 0) {
        snprintf(err, errlen, "identify: cannot start its thread: %s", strerror(-rc));
        pthread_mutex_destroy(&id->meter.mu);
        pthread_cond_destroy(&id->wake);
        pthread_mutex_destroy(&id->lock);
        goto fail;
    }
    /* Read by other threads (cfs_identify_scan_share): without it the
     * scans' share is never measured and nothing holds back for it. */
    pthread_mutex_lock(&id->meter.mu);
    id->meter.has_clock = pthread_getcpuclockid(id->thread, &id->meter.clock) == 0;
    pthread_mutex_unlock(&id->meter.mu);
    *out = id;
    return 0;
oom:
    snprintf(err, errlen, "identify: out of memory for %u observations", MAX_OBS);
fail:
    if (id) {
        free(id->samples);
        free(id->pids);
        free(id->ppids);
    }
    free(id);
    return -ENOMEM;
}

void cfs_identify_destroy(struct cfs_identify *id)
{
    if (!id)
        return;
    pthread_mutex_lock(&id->lock);
    id->stop = true;
    cancel_attempt(id);
    pthread_cond_signal(&id->wake);
    pthread_mutex_unlock(&id->lock);
    pthread_join(id->thread, NULL);
    pthread_mutex_destroy(&id->meter.mu);
    pthread_cond_destroy(&id->wake);
    pthread_mutex_destroy(&id->lock);
    free(id->samples);
    free(id->pids);
    free(id->ppids);
    free(id);
}

static bool process_alive(const struct cfs_identify *id, pid_t pid)
{
    if (id->p.process_alive)
        return id->p.process_alive(id->p.process_alive_arg, pid);
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Under the lock: does a reader with parent ppid, other than pid, still
 * run? */
static bool sibling_alive(const struct cfs_identify *id, pid_t pid, pid_t ppid)
{
    for (size_t i = 0; i < id->nreaders; i++)
        if (id->reader_parents[i] == ppid && id->readers[i] != pid &&
            process_alive(id, id->readers[i]))
            return true;
    return false;
}

/* Under the lock: the running scan is cancelled (and started again with
 * the opens so far), or the next attempt comes with the next open. */
static void restart_scan(struct cfs_identify *id)
{
    if (id->attempting)
        cancel_attempt(id);
    else if (id->len >= IDENT_MIN_OPENS && id->next_attempt > id->len + 1)
        id->next_attempt = id->len + 1;
}

/* Under the lock: reader i opened `sample`.  Its second distinct open
 * joins the scan's second set as its first open joins the first
 * (randperm[p0 + 1] is the head's second open when its batch holds two
 * samples or more), so a scan begun while the head had opened once cannot
 * pass its true seed - and no new reader may come to cancel it: seen as
 * accelerate's head slow to its second open while three workers read 31
 * files, the scan at idle priority then waiting for the loader's epoch to
 * end.  It restarts the scan as the reader's first open did, once. */
static void note_second(struct cfs_identify *id, size_t i, uint32_t sample)
{
    if (id->reader_two[i] || sample == id->reader_first[i])
        return;
    id->reader_two[i] = true;
    if (!id->reader_restarts[i] || id->state == CFS_IDENTIFY_IDENTIFIED || id->len >= id->p.n)
        return;
    restart_scan(id);
}

/* Under the lock: a reader's first open changes the sets a scan filters
 * with (another rank whose first open is randperm[1], say), so a scan
 * started without it can pass over the true seed; it is cancelled and
 * started again with the new reader, for the first readers only (a shell
 * loop that runs one process per file must not restart scans forever) and
 * only within the first n opens (not for a later epoch's workers); so is
 * its second distinct open (note_second). */
static void note_reader(struct cfs_identify *id, uint32_t sample, pid_t pid, pid_t ppid)
{
    for (size_t i = 0; i < id->nreaders; i++)
        if (id->readers[i] == pid) {
            note_second(id, i, sample);
            return; /* every open but a reader's first two: nothing more */
        }
    if (id->nreaders == NEW_READER_RESTARTS)
        return;
    double now = since(&id->first_open), parent_first = now;
    for (size_t i = 0; i < id->nreaders; i++)
        if (id->reader_parents[i] == ppid && id->reader_seen[i] < parent_first)
            parent_first = id->reader_seen[i];
    size_t r = id->nreaders++;
    id->readers[r] = pid;
    id->reader_seen[r] = now;
    id->reader_parents[r] = ppid;
    id->reader_first[r] = sample;
    id->reader_two[r] = false;
    id->reader_restarts[r] = false; /* unless its first open restarts the scan */
    if (id->state == CFS_IDENTIFY_IDENTIFIED)
        return; /* checked as the opens come */
    /* First seen after a dataset's worth of opens (n: one epoch of every
     * rank on this node, or more), the reader is a later epoch's - the
     * DataLoader's new workers - and its first open is not the head of the
     * epoch the running scan filters with.  Cancelling for it would throw
     * the scan away at every epoch's start: at ImageNet's size on busy
     * cores the scan at idle priority outlasts an epoch and would never
     * end.  A node that runs only some of the ranks reads fewer than n
     * files an epoch, so a reader first seen a minute after its parent's
     * first reader (new_reader_seconds) does not restart it either: a
     * later epoch's workers are the same ranks' children.  A rank can
     * start late (DDP ranks meet in init_process_group, then each lists
     * the dataset on its own, 10 s and more for ImageNet through a busy
     * mount, while the first rank's workers read ahead), and a scan
     * without its workers' first opens cannot find the order: the
     * epoch's head is one of them.  So a reader of a new parent restarts
     * the scan at any time in the first epoch, and so do its siblings
     * within the minute after it (the worker with the head need not open
     * first).  Past the minute a sibling that still runs says the same: a
     * later epoch's workers start after their rank's last ones ended (a
     * DataLoader joins its workers at the epoch's end), where ranks
     * without workers - siblings under one launcher - run side by side,
     * and one that starts minutes late holds the head as much as a late
     * rank's workers do.  The next attempt takes the reader in. */
    double late = id->p.new_reader_seconds > 0 ? id->p.new_reader_seconds
                                               : CFS_IDENTIFY_NEW_READER_SECONDS;
    if (id->len >= id->p.n || (now - parent_first > late && !sibling_alive(id, pid, ppid)))
        return;
    id->reader_restarts[r] = true;
    restart_scan(id);
}

void cfs_identify_observe(struct cfs_identify *id, uint32_t sample, pid_t pid, pid_t ppid)
{
    if (sample >= id->p.n)
        return; /* not an indexed sample of this order */
    pthread_mutex_lock(&id->lock);
    if (id->epochs.stage != EPOCHS_OFF && id->len == id->epochs.per)
        epoch_roll(id); /* this open begins the next epoch */
    if (id->len < MAX_OBS) {
        if (id->len == 0)
            clock_gettime(CLOCK_MONOTONIC, &id->first_open);
        /* the trainers' pace, for the search's budget only (absolute
         * times: an epoch's window moves first_open) */
        if (id->pace.budget > 0) {
            double now = clock_sec(CLOCK_MONOTONIC);
            double gap = id->last_open > 0 && now > id->last_open ? now - id->last_open : 0;
            id->last_open = now;
            atomic_fetch_add(&id->pace.reading_us,
                             (uint64_t)((gap < PACE_GAP ? gap : PACE_GAP) * 1e6));
            atomic_fetch_add(&id->pace.opens, 1);
        }
        note_reader(id, sample, pid, ppid);
        id->samples[id->len] = sample;
        id->pids[id->len] = pid;
        id->ppids[id->len] = ppid;
        if (++id->len == id->next_attempt)
            pthread_cond_signal(&id->wake);
    }
    pthread_mutex_unlock(&id->lock);
}

void cfs_identify_restart(struct cfs_identify *id)
{
    pthread_mutex_lock(&id->lock);
    id->len = 0;
    id->generation++;
    id->state = CFS_IDENTIFY_LEARNING;
    id->next_attempt = IDENT_MIN_OPENS;
    id->fruitless = 0;
    id->nkeep = 0;
    id->nreaders = 0;
    memset(&id->result, 0, sizeof(id->result));
    memset(&id->global, 0, sizeof(id->global));
    memset(&id->epochs, 0, sizeof(id->epochs));
    atomic_store(&id->pace.opens, 0);
    atomic_store(&id->pace.reading_us, 0);
    id->last_open = 0;
    atomic_store(&id->pace.reset, true);
    cancel_attempt(id);
    pthread_mutex_unlock(&id->lock);
}

enum cfs_identify_state cfs_identify_state(struct cfs_identify *id, struct cfs_identified *out)
{
    pthread_mutex_lock(&id->lock);
    enum cfs_identify_state st = id->state;
    if (out && st == CFS_IDENTIFY_IDENTIFIED)
        *out = id->result;
    pthread_mutex_unlock(&id->lock);
    return st;
}
