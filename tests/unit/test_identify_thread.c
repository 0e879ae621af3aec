/* Order identification on the module's thread: opens simulated from the
 * exact sampler models (identify_fixture.h) are observed one by one as a
 * mount would; the thread identifies, restarts, refines with the next
 * epoch, learns torch-global one epoch at a time, and restarts its scan for
 * a late rank's readers but not for a later epoch's workers (the scans'
 * pace and meter, their clocks given: test_identify_pace.c).
 *
 * Why the threads' cases wait as they do.  They must pass on a loaded host
 * and fail when the behaviour breaks, so none sleeps to reach a phase: the
 * opens' times are a fake clock's (cfs_identify_params.now) that a case
 * steps past new_reader_seconds, and a case waits for what the module says
 * it has done (ident_progress_of: an attempt over these opens, its scans
 * past a seed, the thread settled).  Their waits poll with a guard against
 * a hang, never a bound on how long a step may take.  A restart is told
 * from a scan that went on by the seeds that scan passes after the open
 * (a cancelled one stops within a chunk), not by how long nothing came.
 *
 * Cost: the threads' cases wait for their scans to start, be cancelled or
 * find their seed (seconds each; the scans that must outlast a few epochs'
 * opens search the head's 2^20 seeds). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/metrics.h"
#include "clairfs/sampler.h"
#include "identify_fixture.h"
#include "identify_seen.h"
#include "src/identify_i.h" /* the pace's and the meter's decisions, measurements given */

static void on_split(void *arg, const struct cfs_split_sets *sets)
{
    struct seen *s = arg;
    s->split = *sets;
    __atomic_add_fetch(&s->splits, 1, __ATOMIC_SEQ_CST);
}

static enum cfs_identify_state wait_state(struct cfs_identify *id, enum cfs_identify_state want)
{
    enum cfs_identify_state st = cfs_identify_state(id, NULL);
    for (int i = 0; i < WAIT_POLLS && st != want; i++) {
        usleep(10000);
        st = cfs_identify_state(id, NULL);
    }
    return st;
}

/* The module's progress once an attempt over at least `opens` opens runs
 * with its scans past `scanned` seeds (or the guard: the caller asserts). */
static struct ident_progress wait_scan(struct cfs_identify *id, size_t opens, uint64_t scanned)
{
    struct ident_progress pr;
    ident_progress_of(id, &pr);
    for (int i = 0; i < WAIT_POLLS; i++) {
        if (pr.attempting && pr.opens >= opens && pr.scanned >= scanned)
            break;
        usleep(10000);
        ident_progress_of(id, &pr);
    }
    return pr;
}

/* A scan past its head: in its long part, at idle priority. */
#define IDLE_PART (IDENT_SCAN_HEAD_SEEDS + 1ull)

/* Seeds a scan passes after an open that did not cancel it: a cancelled
 * one stops within the chunk it is in (IDENT_PACE_CHUNK). */
#define WENT_ON_SEEDS (16ull * IDENT_PACE_CHUNK)

/* What became of the running attempt `was` after opens that may restart
 * it, `opens` of them observed in all: it went on over WENT_ON_SEEDS more
 * seeds (they did not cancel it), or an attempt over them all began (or
 * identified: they did), or neither before the guard. */
enum scan_after { SCAN_WENT_ON, SCAN_RESTARTED, SCAN_UNDECIDED };

static enum scan_after scan_after(struct cfs_identify *id, struct seen *seen,
                                  const struct ident_progress *was, size_t opens)
{
    for (int i = 0; i < WAIT_POLLS; i++) {
        struct ident_progress pr;
        ident_progress_of(id, &pr);
        if (pr.attempts == was->attempts && pr.scanned >= was->scanned + WENT_ON_SEEDS)
            return SCAN_WENT_ON;
        if ((pr.attempts != was->attempts && pr.opens >= opens) || calls_of(seen) > 0)
            return SCAN_RESTARTED;
        usleep(10000);
    }
    return SCAN_UNDECIDED;
}

START_TEST(the_thread_learns_and_restarts)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 31337,
                        .n = 10000,
                        .world = 2,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 200);
    struct seen seen = {0};
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    for (size_t i = 0; i < o.len; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_IDENTIFIED), CFS_IDENTIFY_IDENTIFIED);
    struct cfs_identified got;
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    /* the state turns before the callback runs (on the module's thread) */
    ck_assert_int_eq(wait_calls(&seen, 1), 1);
    ck_assert_uint_eq(got.sampler.seed, 31337);
    ck_assert_uint_eq(seen.id.sampler.world, 2);
    cfs_identify_restart(id);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    /* a sequential reader afterwards: not a shuffle */
    for (uint32_t i = 0; i < 64; i++)
        cfs_identify_observe(id, i, 5000, 999);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_NOT_A_SHUFFLE), CFS_IDENTIFY_NOT_A_SHUFFLE);
    ck_assert_int_eq(__atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST), 1);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* The trainer of the split scan's cases: torch-ddp seed 31337 over 10 000
 * samples, world 4, 2 ranks a node. */
static struct trainer split_trainer(void)
{
    return (struct trainer){.kind = CFS_SAMPLER_TORCH_DDP,
                            .seed = 31337,
                            .n = 10000,
                            .world = 4,
                            .batch = 8,
                            .workers = 2,
                            .ranks = 2,
                            .epochs = 1};
}

/* The head node of a split scan: its own range does not hold the seed
 * (another node's share does), so its scan finds nothing; the seed another
 * node's share passed is taken, checked against every open, identified. */
START_TEST(a_seed_from_another_nodes_share_is_verified)
{
    struct trainer t = split_trainer();
    struct opens o = simulate(&t, 400);
    struct seen seen = {0};
    struct cfs_identify_params p = params(t.n, t.seed + 100000, 4096);
    p.node = 0, p.nodes = 2;
    p.on_identified = on_identified;
    p.on_split = on_split;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    struct cfs_split_sets sets;
    ck_assert_int_eq(cfs_identify_split_sets_now(id, &sets), -ENOENT); /* no opens yet */
    for (size_t i = 0; i < 200; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_NOT_A_SHUFFLE), CFS_IDENTIFY_NOT_A_SHUFFLE);
    wait_settled(id);
    for (size_t i = 200; i < o.len; i++) /* a second attempt, at twice the opens */
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    wait_settled(id);
    ck_assert_int_eq(cfs_identify_split_sets_now(id, &sets), 0);
    ck_assert_uint_eq(sets.nfirst, 4);
    ck_assert_uint_eq(sets.seed_first, p.seed_first);
    ck_assert_uint_eq(sets.seed_count, 4096);
    uint64_t attempts = wait_settled(id).attempts;
    /* the head handed its sets on, once: the second attempt's were the
     * same (every reader's first two opens are in the first 200) */
    ck_assert_int_eq(__atomic_load_n(&seen.splits, __ATOMIC_SEQ_CST), 1);
    ck_assert_uint_ge(attempts, 2);
    ck_assert_mem_eq(&seen.split, &sets, sizeof(sets));
    /* passed a share, fits nothing: no attempt for it */
    ck_assert_int_eq(cfs_identify_take_candidate(id, 31338, 0), 0);
    ck_assert_uint_eq(wait_settled(id).attempts, attempts);
    ck_assert_int_eq(cfs_identify_take_candidate(id, 31337, 0), 1);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_IDENTIFIED), CFS_IDENTIFY_IDENTIFIED);
    ck_assert_int_eq(wait_calls(&seen, 1), 1);
    ck_assert_uint_eq(seen.id.sampler.seed, 31337);
    ck_assert_uint_eq(seen.id.sampler.world, 4);
    ck_assert_uint_eq(seen.id.rank_first, 0);
    ck_assert_uint_eq(seen.id.rank_count, 2);
    ck_assert_int_eq(cfs_identify_split_sets_now(id, &sets), -EALREADY);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* The head's scan of its own range (2^30 seeds without the seed) is in
 * its long part when a seed another share passed comes: one that fits
 * nothing leaves it running; the one that fits stops it and identifies. */
START_TEST(a_fitting_seed_from_another_share_stops_the_heads_scan)
{
    struct trainer t = split_trainer();
    struct opens o = simulate(&t, 200);
    struct seen seen = {0};
    struct cfs_identify_params p = params(t.n, 0, 0);
    p.seed_first = 31337 + 1000, p.seed_count = 1u << 30;
    p.node = 0, p.nodes = 2;
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (size_t i = 0; i < o.len; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    /* The attempt over the first IDENT_MIN_OPENS opens, or over all of
     * them, whichever the module's thread woke to: either is the head's
     * scan.  (Waiting for one over all of them waited out the guard, two
     * minutes, whenever the thread woke at the 32nd open: no attempt is
     * due while that scan of 2^30 seeds runs.) */
    struct ident_progress was = wait_scan(id, IDENT_MIN_OPENS, IDLE_PART);
    ck_assert(was.attempting && was.scanned >= IDLE_PART);
    ck_assert_int_eq(cfs_identify_take_candidate(id, 31338, 0), 0);
    struct ident_progress now;
    ident_progress_of(id, &now);
    ck_assert_uint_eq(now.attempts, was.attempts); /* the same scan goes on */
    ck_assert_int_eq(cfs_identify_take_candidate(id, 31337, 0), 1);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_IDENTIFIED), CFS_IDENTIFY_IDENTIFIED);
    ck_assert_int_eq(wait_calls(&seen, 1), 1);
    ck_assert_uint_eq(seen.id.sampler.seed, 31337);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* cfs_identify_scan_share on the module: nothing before a scan; a scan
 * once one runs (every seed of the range: seconds at least). */
struct passed_seeds {
    uint32_t seed[8];
    size_t n;
};

static bool keep_passed(void *arg, uint32_t seed, uint32_t skip)
{
    struct passed_seeds *ps = arg;
    (void)skip;
    if (ps->n < 8)
        ps->seed[ps->n++] = seed;
    return false;
}

/* Node 1's share of the head's sets, scanned on the mount (paced by its
 * own identification of the root, cfs_identify_split_scan_paced): the
 * seeds it passes are the unpaced scan's, the trainer's among them, and
 * its CPU is in the node's clairfs_search_cpu_seconds_total, where
 * nothing was before (the node's module had no opens to scan). */
START_TEST(a_share_scan_is_paced_and_counted_by_the_nodes_module)
{
    struct trainer t = split_trainer();
    struct opens o = simulate(&t, 200);
    struct cfs_identify_params head = params(t.n, 0, 0);
    head.seed_first = 0, head.seed_count = 1u << 15; /* node 1: 16384-32767 */
    head.node = 0, head.nodes = 2;
    struct cfs_split_sets sets;
    ck_assert_int_eq(cfs_identify_split_sets(&head, o.s, o.pid, o.ppid, o.len, &sets), 0);
    struct cfs_metrics m;
    cfs_metrics_init(&m);
    struct cfs_identify_params p = params(t.n, 0, 0);
    p.node = 1, p.nodes = 2;
    p.metrics = &m;
    p.search_budget = 0.03;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_SEARCH_NS_IDLE) +
                          cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL),
                      0);
    struct passed_seeds unpaced = {0}, paced = {0};
    static const struct cfs_seed_threads one_thread = {.threads = 1};
    ck_assert_int_eq(cfs_identify_split_scan(&sets, 1, 2, NULL, keep_passed, &unpaced, &one_thread),
                     0);
    ck_assert_int_eq(cfs_identify_split_scan_paced(id, NULL, &sets, 1, 2, NULL, keep_passed, &paced),
                     0);
    ck_assert_uint_ge(unpaced.n, 1);
    ck_assert_uint_eq(paced.n, unpaced.n);
    ck_assert_mem_eq(paced.seed, unpaced.seed, unpaced.n * sizeof(uint32_t));
    bool seed_passed = false;
    for (size_t i = 0; i < paced.n; i++)
        seed_passed |= paced.seed[i] == 31337;
    ck_assert(seed_passed);
    ck_assert_uint_gt(cfs_metrics_get(&m, CFS_M_SEARCH_NS_IDLE) +
                          cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL),
                      0);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

START_TEST(the_scans_share_of_a_core)
{
    struct cfs_identify_params p = params(100000, 0, 0);
    p.seed_first = 0, p.seed_count = 0;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    double share = 0;
    ck_assert(!cfs_identify_scan_share(id, &share));
    ck_assert(share < 0);
    for (uint32_t i = 0; i < 64; i++) /* no shuffle, but a scan tries every seed */
        cfs_identify_observe(id, (i * 7919u + 13) % 100000, 5000, 999);
    bool scanning = false;
    for (int i = 0; i < WAIT_POLLS && !scanning; i++) {
        scanning = cfs_identify_scan_share(id, &share);
        usleep(10000);
    }
    ck_assert(scanning);
    cfs_identify_destroy(id);
}
END_TEST

/* The range of the scans that must outlast a few epochs' opens: the
 * head's 2^20 seeds, all at the normal priority, a tenth of a second of a
 * core (about a second under ASan) against the microseconds of the opens.
 * Whether an open restarts a scan (identify.c note_reader) does not depend
 * on the scan's priority, and a scan that went on past its head, at idle
 * priority, would cost what the host leaves idle: on busy cores (the suite
 * runs two tests at once, beside whatever else the host runs) 2^26 seeds,
 * 2^24 under ASan, kept these two cases waiting for minutes. */
#define ACROSS_SEEDS IDENT_SCAN_HEAD_SEEDS

/* Three epochs of t, a node's epoch `per` opens: the first epoch's 32
 * opens start a scan of ACROSS_SEEDS seeds (t's seed at its end), the other
 * epochs' opens, each with new workers, come while it runs, `later`
 * seconds after the first (the module's clock); what the scan that began at
 * 32 opens identified, not a restart's. */
static struct cfs_identified scan_across_epochs(const struct trainer *t, size_t per,
                                                double new_reader_seconds, double later)
{
    struct opens o = simulate(t, 3 * per);
    ck_assert_uint_eq(o.len, 3 * per);
    ck_assert_int_ne(o.pid[per], o.pid[0]); /* new workers every epoch */
    struct seen seen = {0};
    struct cfs_identify_params p = {.n = t->n, .nodes = 1, .global_max_offset = 4096,
                                    .seed_first = 0, .seed_count = ACROSS_SEEDS,
                                    .new_reader_seconds = new_reader_seconds,
                                    .process_alive = no_process,
                                    .on_identified = on_identified, .cb_arg = &seen};
    struct fake_clock clock = {0};
    p.now = fake_now, p.now_arg = &clock;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (size_t i = 0; i < 32; i++) /* the first attempt's opens */
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    struct ident_progress pr = wait_scan(id, 32, 0); /* its scan has started */
    ck_assert(pr.attempting && pr.attempts == 1 && pr.opens == 32);
    fake_clock_advance(&clock, later);
    for (size_t i = 32; i < o.len; i++) /* the later epochs meanwhile */
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    /* Still the first scan (ACROSS_SEEDS against microseconds of opens):
     * else the case would have checked nothing. */
    ident_progress_of(id, &pr);
    ck_assert_msg(pr.attempting && pr.attempts == 1,
                  "the first scan no longer runs after the later epochs' opens");
    /* ten minutes' guard: the idle part of the scan on busy cores */
    for (int i = 0; i < 5 * WAIT_POLLS && calls_of(&seen) < 1; i++)
        usleep(10000);
    ck_assert_int_ge(calls_of(&seen), 1);
    ck_assert_uint_eq(seen.id.sampler.seed, t->seed);
    ck_assert_int_eq(seen.id.sampler.kind, t->kind);
    ck_assert_uint_eq(seen.id.opens, 32); /* the scan that began at 32 opens, not a restart */
    cfs_identify_destroy(id);
    opens_free(&o);
    return seen.id;
}

/* A scan that outlasts an epoch: the next epoch's new workers (readers
 * first seen after n opens) do not cancel it, so it ends and identifies
 * from the opens it started with.  Before, every epoch's new workers
 * restarted it from its first seed: at ImageNet's size on busy cores (the
 * scan at idle priority, minutes) it never ended. */
START_TEST(a_later_epochs_workers_do_not_restart_the_scan)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH,
                        .seed = ACROSS_SEEDS - 3, /* the end of the range: the scan's last seeds */
                        .n = 64,
                        .world = 1,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 1,
                        .epochs = 3};
    (void)scan_across_epochs(&t, 64, 0, 0); /* at once: n opens alone say "later" */
}
END_TEST

/* DDP ranks list the dataset each on its own after init_process_group;
 * one rank's workers can read a few batches ahead before the other's
 * start, and through a busy mount at ImageNet's size that is long past
 * new_reader_seconds.  The scan over the first rank's opens alone cannot
 * find the order (the epoch's head, rank 0's worker 0's, is missing); the
 * late rank - a reader whose parent no reader had - cancels it: the
 * head's first open, observed alone, restarts the scan, and the scans over
 * both ranks' opens find the seed at once.  Case 1: the late rank's
 * worker 1 opens first, its worker 0 (the head) 2.5 s later: a sibling
 * within new_reader_seconds (3 s) of its parent's first reader restarts
 * the scan too, the scan over worker 1's open having passed the seed.  The
 * seconds are the module's clock's, stepped by the case.  Before, the
 * first scan went on over all 2^32 seeds (minutes; in the mount a whole
 * scan's time wasted, once a second one).  Each restarting open leaves the
 * module's thread at the normal priority (observe_restarting). */
static const struct {
    double new_reader_seconds;
    double late;       /* rank 0's first open after rank 1's */
    bool head_later;   /* rank 0's worker 1 opens first */
    double head_after; /* and the head this long after it */
} late_cases[] = {{0.2, 0.5, false, 0}, {3.0, 3.5, true, 2.5}};

/* Threads of this process at SCHED_IDLE (policy 5: field 41 of
 * /proc/self/task/TID/stat): the module's thread in a scan's idle part. */
static int idle_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int idle = 0;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d))) {
        char path[300], line[1024];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* a thread that ended */
        char *got = fgets(line, sizeof(line), f);
        fclose(f);
        char *p = got ? strrchr(line, ')') : NULL;
        int field = 2; /* ")" ends field 2 */
        for (char *tok = p ? strtok(p + 1, " ") : NULL; tok; tok = strtok(NULL, " "))
            if (++field == 41) {
                idle += atoi(tok) == SCHED_IDLE;
                break;
            }
    }
    closedir(d);
    return idle;
}

/* observe() for an open that restarts the running scan, in its idle part:
 * the module's thread is back at the normal priority when observe returns
 * (on busy cores it would not run to see the cancellation).  Unless the
 * progress says it may have lowered itself again since - the cancelled
 * attempt ended and the next one passed its head - which a check that
 * lost the CPU to it for that long cannot tell apart.  Returns the
 * progress before the open. */
static struct ident_progress observe_restarting(struct cfs_identify *id, uint32_t s, pid_t pid,
                                                pid_t ppid)
{
    struct ident_progress was, now;
    ident_progress_of(id, &was);
    ck_assert(was.attempting && was.scanned >= IDLE_PART);
    int before = idle_threads();
    cfs_identify_observe(id, s, pid, ppid);
    int after = idle_threads();
    ident_progress_of(id, &now);
    if (before == 0)
        return was; /* SCHED_IDLE refused here: the module fell back to nice 19 */
    /* The module's thread, and the scan's workers (seed_threads.c) that it
     * raises once it runs and sees the cancellation: wait for that. */
    ck_assert_int_ge(before, 1);
    for (int i = 0; i < WAIT_POLLS && after > 0; i++) {
        if (now.attempts != was.attempts && now.scanned >= IDENT_SCAN_HEAD_SEEDS)
            break;
        usleep(10000);
        after = idle_threads();
        ident_progress_of(id, &now);
    }
    if (now.attempts == was.attempts || now.scanned < IDENT_SCAN_HEAD_SEEDS)
        ck_assert_int_eq(after, 0);
    return was;
}

START_TEST(a_late_ranks_first_open_restarts_the_scan)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 1000, /* the head of the range: found as soon as scanned */
                        .n = 10000,
                        .world = 2,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 400);
    struct opens late = {0};
    struct seen seen = {0};
    struct fake_clock clock = {0};
    struct cfs_identify_params p = {.n = t.n, .nodes = 1, .global_max_offset = 4096,
                                    .seed_first = 0, .seed_count = UINT32_MAX,
                                    .new_reader_seconds = late_cases[_i].new_reader_seconds,
                                    .process_alive = no_process,
                                    .now = fake_now, .now_arg = &clock,
                                    .on_identified = on_identified, .cb_arg = &seen};
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    size_t first = 0, other = SIZE_MAX;
    for (size_t i = 0; i < o.len; i++) { /* rank 1's workers first, 48 opens */
        if (o.ppid[i] == 1001 && first < 48) {
            cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
            first++;
        } else {
            if (other == SIZE_MAX && o.pid[i] == 2001)
                other = late.len; /* rank 0's worker 1's first open */
            push(&late, o.s[i], o.pid[i], o.ppid[i]);
        }
    }
    ck_assert_uint_eq(first, 48);
    ck_assert_uint_ne(other, SIZE_MAX);
    ck_assert_int_eq(late.pid[0], 2000); /* rank 0's worker 0: the head */
    /* the scan over rank 1's opens is in its idle part (past seed 1000) */
    struct ident_progress pr = wait_scan(id, 32, IDLE_PART);
    ck_assert(pr.attempting && pr.scanned >= IDLE_PART);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    fake_clock_advance(&clock, late_cases[_i].late); /* past new_reader_seconds */
    size_t observed = 48;
    if (late_cases[_i].head_later) {
        observe_restarting(id, late.s[other], late.pid[other], late.ppid[other]);
        observed++;
        /* that scan, without the head, has passed seed 1000 */
        pr = wait_scan(id, observed, IDLE_PART);
        ck_assert(pr.attempting && pr.opens == observed && pr.scanned >= IDLE_PART);
        fake_clock_advance(&clock, late_cases[_i].head_after);
    }
    /* The head's first open restarts the scan (had it not, the scan without
     * it would go on past seed 1000), and the scans with it find the seed. */
    struct ident_progress was = observe_restarting(id, late.s[0], late.pid[0], late.ppid[0]);
    observed++;
    ck_assert_msg(scan_after(id, &seen, &was, observed) == SCAN_RESTARTED,
                  "the head's first open did not restart the scan");
    for (size_t i = 1; i < late.len; i++)
        if (!late_cases[_i].head_later || i != other)
            cfs_identify_observe(id, late.s[i], late.pid[i], late.ppid[i]);
    ck_assert_int_ge(wait_calls(&seen, 1), 1);
    ck_assert_uint_eq(seen.id.sampler.seed, t.seed);
    ck_assert_uint_eq(seen.id.sampler.world, 2);
    ck_assert_uint_eq(seen.id.rank_count, 2);
    cfs_identify_destroy(id);
    opens_free(&late);
    opens_free(&o);
}
END_TEST

/* DDP without DataLoader workers: the ranks read themselves, siblings under
 * one launcher (pids 1000 + r, parent 999).  Rank 0, with the head, starts
 * long after rank 1 (past new_reader_seconds, 0.2 s here on the module's
 * clock; a minute in a mount).  Case 0: rank 1 still runs, so rank 0 is a
 * late rank: its first open restarts the scan, which finds the seed at
 * once (before, the scan over rank 1's opens alone went on over 2^32 seeds,
 * minutes).  Case 1: its sibling ended (a process per file, a later
 * epoch's workers): none of its opens restarts the scan, which goes on. */
static bool ranks_run(void *arg, pid_t pid)
{
    return *(const bool *)arg && (pid == 1000 || pid == 1001);
}

START_TEST(a_late_rank_without_workers_restarts_the_scan_while_its_sibling_runs)
{
    bool running = _i == 0;
    struct fake_clock clock = {0};
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 1000,
                        .n = 10000,
                        .world = 2,
                        .batch = 4,
                        .workers = 0,
                        .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 400);
    struct seen seen = {0};
    struct cfs_identify_params p = {.n = t.n, .nodes = 1, .global_max_offset = 4096,
                                    .seed_first = 0, .seed_count = UINT32_MAX,
                                    .new_reader_seconds = 0.2,
                                    .process_alive = ranks_run, .process_alive_arg = &running,
                                    .now = fake_now, .now_arg = &clock,
                                    .on_identified = on_identified, .cb_arg = &seen};
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    size_t rank1 = 0;
    for (size_t i = 0; i < o.len && rank1 < 48; i++)
        if (o.pid[i] == 1001) {
            cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
            rank1++;
        }
    ck_assert_uint_eq(rank1, 48);
    /* the scan over rank 1's opens is in its idle part (past seed 1000) */
    struct ident_progress was = wait_scan(id, 32, IDLE_PART);
    ck_assert(was.attempting && was.scanned >= IDLE_PART);
    fake_clock_advance(&clock, 0.5); /* past new_reader_seconds */
    size_t observed = 48;
    for (size_t i = 0; i < o.len; i++) {
        if (o.pid[i] != 1000)
            continue;
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
        if (++observed == 49 && running) /* its first open restarts the scan */
            ck_assert_msg(scan_after(id, &seen, &was, observed) == SCAN_RESTARTED,
                          "rank 0's first open did not restart the scan");
    }
    if (running) {
        ck_assert_int_ge(wait_calls(&seen, 1), 1);
        ck_assert_uint_eq(seen.id.sampler.seed, t.seed);
        ck_assert_uint_eq(seen.id.sampler.world, 2);
        ck_assert_uint_eq(seen.id.rank_count, 2);
    } else {
        ck_assert_msg(scan_after(id, &seen, &was, observed) == SCAN_WENT_ON,
                      "rank 0's opens restarted the scan");
        ck_assert_int_eq(calls_of(&seen), 0);
        ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_LEARNING);
    }
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* A node that runs 2 of 4 ranks reads n/2 files an epoch: the next
 * epoch's new workers come before n opens, but long after the first open
 * (here new_reader_seconds = 0.2 s; a minute in a mount), and do not
 * restart the scan either. */
START_TEST(a_partial_nodes_later_workers_do_not_restart_the_scan)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = ACROSS_SEEDS - 3,
                        .n = 64,
                        .world = 4,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 2,
                        .epochs = 3};
    struct cfs_identified id = scan_across_epochs(&t, 32, 0.2, 0.5);
    ck_assert_uint_eq(id.sampler.world, 4);
    ck_assert_uint_eq(id.rank_count, 2);
}
END_TEST

/* Epoch 0 of torch-sampler reads as torch-ddp at world 1 (the likelier);
 * its epoch 1 tells them apart and the module says so again. */
START_TEST(the_thread_refines_with_the_next_epoch)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_SAMPLER,
                        .seed = 2024,
                        .n = 200,
                        .world = 1,
                        .batch = 4,
                        .workers = 2,
                        .ranks = 1,
                        .persistent = true,
                        .epochs = 2};
    struct opens o = simulate(&t, 100000);
    ck_assert_uint_eq(o.len, 400);
    struct seen seen = {0};
    struct cfs_identify_params p = params(t.n, t.seed, 4096);
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    for (size_t i = 0; i < 200; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_eq(wait_state(id, CFS_IDENTIFY_IDENTIFIED), CFS_IDENTIFY_IDENTIFIED);
    ck_assert_int_eq(wait_calls(&seen, 1), 1);
    ck_assert_int_eq(seen.id.sampler.kind, CFS_SAMPLER_TORCH_DDP);
    ck_assert(seen.id.epoch_seed_only); /* nothing yet says the next epoch */
    ck_assert(!seen.id.per_epoch_global);
    for (size_t i = 200; i < o.len; i++)
        cfs_identify_observe(id, o.s[i], o.pid[i], o.ppid[i]);
    ck_assert_int_eq(wait_calls(&seen, 2), 2);
    struct cfs_identified got;
    ck_assert_int_eq(cfs_identify_state(id, &got), CFS_IDENTIFY_IDENTIFIED);
    ck_assert_int_eq(got.sampler.kind, CFS_SAMPLER_TORCH_SAMPLER);
    ck_assert_int_eq(seen.id.sampler.kind, CFS_SAMPLER_TORCH_SAMPLER);
    ck_assert(got.sampler.persistent_workers);
    ck_assert_uint_eq(got.sampler.seed, 2024);
    ck_assert_uint_eq(got.epoch, 1);
    ck_assert(!got.epoch_seed_only && !got.per_epoch_global);
    cfs_identify_destroy(id);
    opens_free(&o);
}
END_TEST

/* Four epochs of a trainer whose every epoch is the first randperm of a
 * private generator seeded seeds[e] (torch-global), each read by new
 * DataLoader workers. */
static void fresh_epochs(const uint32_t *seeds, uint32_t n, struct opens ep[4])
{
    for (uint32_t e = 0; e < 4; e++) {
        struct trainer t = {.kind = CFS_SAMPLER_TORCH_SAMPLER,
                            .seed = seeds[e],
                            .n = n,
                            .world = 1,
                            .batch = 8,
                            .workers = 2,
                            .ranks = 1,
                            .epochs = 1};
        ep[e] = simulate(&t, SIZE_MAX);
        ck_assert_uint_eq(ep[e].len, n);
        for (size_t i = 0; i < n; i++)
            ep[e].pid[i] += (pid_t)(100000 * e); /* this epoch's workers */
    }
}

/* torch-global without its seed: every epoch the first randperm of a
 * private generator seeded anew.  Epoch 0 reads as torch-ddp at world 1 and
 * says that epoch only; epoch 1 refutes it and fits a second fresh seed:
 * torch-global, learnt again from each epoch's first opens (DataLoader
 * workers, not persistent: new processes each epoch). */
START_TEST(torch_global_without_its_seed_epoch_by_epoch)
{
    const uint32_t center = 0x5eed0000u, n = 1500;
    const uint32_t seeds[] = {center - 20000, center + 7, center + 13000, center - 3};
    struct cfs_identify_params p = params(n, center, 1u << 16);
    struct seen seen = {0};
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    struct opens ep[4];
    fresh_epochs(seeds, n, ep);
    for (uint32_t e = 0; e < 4; e++) {
        /* the epoch's first batches, then the module's answer, then the rest */
        for (size_t i = 0; i < 96; i++)
            cfs_identify_observe(id, ep[e].s[i], ep[e].pid[i], ep[e].ppid[i]);
        ck_assert_int_eq(wait_calls(&seen, (int)e + 1), e + 1);
        struct cfs_identified got = seen.id;
        ck_assert_msg(got.epoch_seed_only, "epoch %u: %s", e, got.text);
        ck_assert_int_eq(got.sampler.kind, CFS_SAMPLER_TORCH_DDP);
        ck_assert_uint_eq(got.sampler.world, 1);
        ck_assert_uint_eq(got.epoch, e);
        /* torch-ddp reads seed + epoch: the epoch's private seed */
        ck_assert_uint_eq((uint32_t)(got.sampler.seed + e), seeds[e]);
        ck_assert_uint_eq(got.opens_before, (uint64_t)n * e);
        ck_assert_uint_eq(got.workers, 2);
        ck_assert(got.per_epoch_global == (e > 0));
        if (e > 0)
            ck_assert_msg(strstr(got.text, "torch-global (no seed registered) epoch") != NULL,
                          "%s", got.text);
        for (size_t i = 96; i < n; i++)
            cfs_identify_observe(id, ep[e].s[i], ep[e].pid[i], ep[e].ppid[i]);
    }
    /* a reader that is no shuffle afterwards: the window ends unidentified */
    for (uint32_t i = 0; i < 2 * n; i++)
        cfs_identify_observe(id, i % n, 7000, 999);
    ck_assert(wait_settled(id).settled); /* all it will do with them, done */
    ck_assert_int_eq(calls_of(&seen), 4);
    ck_assert_int_ne(cfs_identify_state(id, NULL), CFS_IDENTIFY_IDENTIFIED);
    cfs_identify_destroy(id);
    for (uint32_t e = 0; e < 4; e++)
        opens_free(&ep[e]);
}
END_TEST

/* The private seed torch-global's epoch e draws from the stream seeded S
 * (the definition, clairfs/rng_offset.h: the low half of the random64 at
 * word K + 2 + e (4 + G)). */
static uint32_t global_private_seed(uint64_t seed, uint64_t k, uint64_t g, uint32_t e)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    cfs_mt19937_discard(&mt, k + 2 + (uint64_t)e * (4 + g));
    return (uint32_t)cfs_mt19937_next64(&mt);
}

/* A torch-global trainer seeded S that draws K words before its loader
 * and G an epoch besides, nothing registered, on search_threads threads:
 * epochs 0, 1 and 2 are each learnt from their own opens (the scan's
 * ranges hold their private seeds); then the three private seeds name S,
 * K and G (`named` in the text): the whole run identified as torch-global,
 * whose epoch 3 is the trainer's, and no search follows.  Where G can be
 * told from L (g_exact) it is checked alone; else L + G. */
static void learn_whole_run(uint64_t seed, uint64_t k, uint64_t g, unsigned search_threads,
                            bool g_exact, const char *named)
{
    const uint32_t n = 1500;
    uint32_t priv[4];
    struct cfs_seed_range more[3];
    for (uint32_t e = 0; e < 4; e++)
        priv[e] = global_private_seed(seed, k, g, e);
    for (uint32_t e = 1; e < 4; e++)
        more[e - 1] = (struct cfs_seed_range){.first = priv[e] - (1u << 15), .count = 1u << 16};
    struct cfs_identify_params p = params(n, priv[0], 1u << 16);
    p.more_seeds = more;
    p.nmore_seeds = 3;
    p.search_threads = search_threads;
    struct seen seen = {0};
    p.on_identified = on_identified;
    p.cb_arg = &seen;
    struct cfs_identify *id;
    char err[256];
    ck_assert_int_eq(cfs_identify_create(&p, &id, err, sizeof(err)), 0);
    struct opens ep[4];
    fresh_epochs(priv, n, ep);
    for (uint32_t e = 0; e < 3; e++) {
        for (size_t i = 0; i < 96; i++)
            cfs_identify_observe(id, ep[e].s[i], ep[e].pid[i], ep[e].ppid[i]);
        ck_assert_int_ge(wait_calls(&seen, (int)e + 1), e + 1);
        for (size_t i = 96; i < n; i++)
            cfs_identify_observe(id, ep[e].s[i], ep[e].pid[i], ep[e].ppid[i]);
    }
    ck_assert_int_eq(wait_calls(&seen, 4), 4);
    struct cfs_identified got = seen.id;
    ck_assert_msg(got.sampler.kind == CFS_SAMPLER_TORCH_GLOBAL, "%s", got.text);
    ck_assert_uint_eq(got.sampler.seed, seed);
    ck_assert_uint_eq(got.sampler.rng_offset, k);
    if (g_exact) {
        ck_assert_uint_eq(got.sampler.rng_epoch_words, g);
        ck_assert(!got.sampler.persistent_workers);
    } else {
        ck_assert_uint_eq(got.sampler.rng_epoch_words + (got.sampler.persistent_workers ? 2 : 4),
                          g + 4);
    }
    ck_assert(!got.epoch_seed_only && !got.per_epoch_global && got.seed_high_known);
    ck_assert_uint_ge(got.epoch, 2);
    ck_assert_msg(strstr(got.text, named) != NULL, "%s", got.text);
    /* Its epoch 3 is the trainer's */
    struct cfs_sampler *smp = NULL;
    got.sampler.n = n;
    ck_assert_int_eq(cfs_sampler_create(&got.sampler, &smp, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(smp, 3), 0);
    uint32_t *perm = malloc(n * sizeof(*perm));
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, priv[3]);
    cfs_torch_randperm(&mt, perm, n, CFS_RANDPERM_CURRENT);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_uint_eq(cfs_sampler_rank_at(smp, 0, i), perm[i]);
    free(perm);
    cfs_sampler_destroy(smp);
    for (size_t i = 0; i < n; i++)
        cfs_identify_observe(id, ep[3].s[i], ep[3].pid[i], ep[3].ppid[i]);
    ck_assert(wait_settled(id).settled);
    ck_assert_int_eq(calls_of(&seen), 4);
    ck_assert_int_eq(cfs_identify_state(id, NULL), CFS_IDENTIFY_IDENTIFIED);
    cfs_identify_destroy(id);
    for (uint32_t e = 0; e < 4; e++)
        opens_free(&ep[e]);
}

/* timm's trainer at rank 1: torch.manual_seed(42 + 1), a model built (K
 * words), dropout (G words an epoch), DataLoader(shuffle=True): seed 43 is
 * in the table of seeds people use. */
START_TEST(torch_global_seed_from_the_table)
{
    learn_whole_run(43, 3000, 1000, 0, true, "a seed people use, from epochs 0-2");
}
END_TEST

/* A trainer that seeds torch with a number nobody uses (99991, outside the
 * table) and builds no model before its loader (K = 40 words): the table
 * names nothing, and the search of the 2^32 seeds that follows (from seed
 * 0, on search_threads 1 and 2: the same answer) finds S, K and L + G. */
START_TEST(torch_global_seed_from_the_full_range)
{
    learn_whole_run(99991, 40, 20, (unsigned)_i, false,
                    "a seed found among the 2^32, from epochs 0-2");
}
END_TEST

static Suite *identify_thread_suite(void)
{
    Suite *s = suite_create("identify_thread");
    TCase *t = tcase_create("thread");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, the_thread_learns_and_restarts);
    tcase_add_test(t, a_seed_from_another_nodes_share_is_verified);
    tcase_add_test(t, a_fitting_seed_from_another_share_stops_the_heads_scan);
    tcase_add_test(t, a_share_scan_is_paced_and_counted_by_the_nodes_module);
    tcase_add_test(t, the_scans_share_of_a_core);
    tcase_add_test(t, the_thread_refines_with_the_next_epoch);
    tcase_add_test(t, a_later_epochs_workers_do_not_restart_the_scan);
    tcase_add_test(t, a_partial_nodes_later_workers_do_not_restart_the_scan);
    tcase_add_loop_test(t, a_late_ranks_first_open_restarts_the_scan, 0,
                        sizeof(late_cases) / sizeof(late_cases[0]));
    tcase_add_loop_test(t, a_late_rank_without_workers_restarts_the_scan_while_its_sibling_runs,
                        0, 2);
    tcase_add_test(t, torch_global_without_its_seed_epoch_by_epoch);
    tcase_add_test(t, torch_global_seed_from_the_table);
    tcase_add_loop_test(t, torch_global_seed_from_the_full_range, 1, 3); /* 1 and 2 threads */
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_thread_suite());
}
