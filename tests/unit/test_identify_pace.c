/* The identification scans' pace and meter (identify_pace.c) with their
 * measurements given: the share of a core a window of scanning got, the
 * search budget over one epoch at the trainers' pace, when a scan is raised
 * on busy cores and when it stays idle past its budget, and that a thread
 * that could not come back from idle priority is never lowered.  What the pace
 * decides, never how a host's scheduler shared its CPU: every clock and
 * CPU time is the test's. */
#include <check.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/metrics.h"
#include "src/identify_i.h" /* the pace's and the meter's decisions, measurements given */

/* The meter's arithmetic, its clocks given: a window of at least a second
 * of scanning gives the thread's CPU seconds over it; scans less than a
 * second apart are one scan, sharing a window; after a pause a scan starts
 * a new window, nothing measured yet; without the thread's CPU clock
 * nothing is measured and no scan is said to run. */
START_TEST(the_meter_measures_a_window_of_scanning)
{
    struct ident_scan_meter m = {.has_clock = true, .share = -1};
    double share;
    ck_assert(!ident_meter_share_at(&m, 100.0, -1, &share));
    ck_assert(share < 0);
    ident_meter_scan_at(&m, true, 100.0, 5.0);
    ck_assert(!ident_meter_window_closes(&m, 100.5));
    ck_assert(ident_meter_share_at(&m, 100.5, -1, &share));
    ck_assert(share < 0); /* less than a window */
    ck_assert(ident_meter_window_closes(&m, 101.2));
    ck_assert(ident_meter_share_at(&m, 101.2, 5.6, &share));
    ck_assert_double_eq_tol(share, 0.5, 1e-9);
    ident_meter_scan_at(&m, false, 101.5, -1);
    ck_assert(!ident_meter_window_closes(&m, 103.0)); /* ended: no window runs */
    ck_assert(ident_meter_share_at(&m, 102.0, -1, &share)); /* within the gap: one scan */
    ck_assert_double_eq_tol(share, 0.5, 1e-9);
    ident_meter_scan_at(&m, true, 102.2, 5.9); /* the next attempt: the same window */
    ck_assert(ident_meter_share_at(&m, 102.4, 6.0, &share));
    ck_assert_double_eq_tol(share, 0.4 / 1.2, 1e-9);
    ident_meter_scan_at(&m, false, 103.0, -1);
    ck_assert(!ident_meter_share_at(&m, 104.5, -1, &share)); /* past the gap */
    ident_meter_scan_at(&m, true, 110.0, 8.0); /* after a pause: a new window */
    ck_assert(ident_meter_share_at(&m, 110.1, -1, &share));
    ck_assert(share < 0);
    ck_assert(ident_meter_share_at(&m, 111.0, 8.25, &share));
    ck_assert_double_eq_tol(share, 0.25, 1e-9);
    /* A raised spell: no window closes, the idle share stands; back at idle
     * priority a new window starts from then. */
    ident_meter_raised_at(&m, true, 111.2, 8.3);
    ck_assert(!ident_meter_window_closes(&m, 113.0));
    ck_assert(ident_meter_share_at(&m, 113.0, 10.3, &share));
    ck_assert_double_eq_tol(share, 0.25, 1e-9);
    ident_meter_raised_at(&m, false, 113.0, 10.3);
    ck_assert(!ident_meter_window_closes(&m, 113.5));
    ck_assert(ident_meter_share_at(&m, 114.0, 10.4, &share));
    ck_assert_double_eq_tol(share, 0.1, 1e-9);

    struct ident_scan_meter blind = {.has_clock = false, .share = -1};
    ident_meter_scan_at(&blind, true, 100.0, -1);
    ck_assert(!ident_meter_share_at(&blind, 100.5, -1, &share));
    ck_assert(share < 0);
}
END_TEST

/* The CPU seconds the scans may take at the normal priority: the budget's
 * share of the cores over the longer of the reading so far and one epoch
 * at its pace; nothing before a second of reading or without a budget. */
START_TEST(the_search_budget_counts_one_epoch_at_the_trainers_pace)
{
    /* ImageNet on 2 CPUs, 5000 opens in 4 s: an epoch of 1025 s */
    ck_assert_double_eq_tol(cfs_identify_search_allowance(0.03, 2, 1281167, 5000, 4.0),
                            0.03 * 2 * 1281167 * 4.0 / 5000, 1e-9);
    /* past the epoch, the reading itself */
    ck_assert_double_eq_tol(cfs_identify_search_allowance(0.03, 2, 1000, 5000, 100.0), 6.0, 1e-9);
    ck_assert(cfs_identify_search_allowance(0.03, 2, 1281167, 5000, 0.9) == 0);
    ck_assert(cfs_identify_search_allowance(0, 2, 1281167, 5000, 4.0) == 0);
    ck_assert(cfs_identify_search_allowance(0.03, 2, 1281167, 0, 4.0) == 0);
    /* raised within the allowance only where the cores are busy: at idle
     * priority the last probe got less than a quarter of a core; a raised
     * spell lasts seconds, then a probe */
    ck_assert(!cfs_identify_search_raise(0, 10, -1, -1));   /* no probe yet */
    ck_assert(cfs_identify_search_raise(0, 10, 0.08, -1));  /* busy cores */
    ck_assert(!cfs_identify_search_raise(0, 10, 0.38, -1)); /* idle time: the trainers wait */
    ck_assert(!cfs_identify_search_raise(10, 10, 0.08, -1)); /* spent */
    ck_assert(cfs_identify_search_raise(9, 10, -1, 5));     /* a spell */
    ck_assert(!cfs_identify_search_raise(9, 10, -1, 25));   /* then a probe */
    ck_assert(!cfs_identify_search_raise(10, 10, -1, 5));
}
END_TEST

/* The priorities the pace asked for, in order (its set_priority). */
static struct {
    int calls;
    bool raised[16];
    bool refuse; /* the change is refused (SCHED_IDLE not allowed, say) */
} asked;

static bool set_priority(bool raised)
{
    if (asked.calls < 16)
        asked.raised[asked.calls] = raised;
    asked.calls++;
    return !asked.refuse;
}

/* A scan's long part beginning at idle priority, the trainers' pace 40
 * opens in 1.6 s of an epoch of 100000 opens on 2 CPUs: an epoch of 4000 s,
 * an allowance of budget * 2 * 4000 CPU seconds. */
static void pace_init(struct ident_pace *pc, double budget, struct cfs_metrics *m)
{
    memset(pc, 0, sizeof(*pc));
    pc->budget = budget, pc->cores = 2, pc->n = 100000, pc->metrics = m;
    atomic_init(&pc->opens, 40);
    atomic_init(&pc->reading_us, 1600000);
    atomic_init(&pc->reset, false);
    pc->idle = true;
    pc->idle_share = -1;
    memset(&asked, 0, sizeof(asked));
}

/* One chunk t seconds into the scan's long part (the monotonic clock's
 * second 1000 + t), the thread's CPU seconds cpu: is the next chunk
 * raised? */
static bool chunk(struct ident_pace *pc, double t, double cpu)
{
    ident_pace_chunk_at(pc, 1000.0 + t, cpu, set_priority);
    return pc->raised;
}

/* Where the cores are busy (a probe at idle priority gets 0.005 of a
 * core), the scan runs raised after a probe of 2 s, for spells of 20 s
 * with a probe between, its raised CPU spent from the budget and counted
 * as normal priority, its idle CPU free and counted as idle; a probe that
 * finds idle time (half a core) keeps it at idle priority. */
START_TEST(the_search_runs_raised_on_busy_cores_within_its_budget)
{
    struct cfs_metrics m;
    cfs_metrics_init(&m);
    struct ident_pace pc;
    pace_init(&pc, 1.0, &m);
    ck_assert(!chunk(&pc, 0, 0));        /* the probe begins */
    ck_assert(!chunk(&pc, 1.0, 0.005));  /* a second of it: no share yet */
    ck_assert(chunk(&pc, IDENT_PACE_PROBE, 0.01)); /* 0.005 of a core: busy */
    ck_assert_int_eq(asked.calls, 1);
    ck_assert(asked.raised[0]);
    ck_assert(!pc.idle);
    ck_assert(chunk(&pc, 3.0, 1.01));    /* raised: a CPU second from the budget */
    ck_assert_double_eq_tol(pc.spent, 1.0, 1e-9);
    ck_assert(chunk(&pc, 2.0 + IDENT_PACE_SPELL - 0.5, 19.5));
    ck_assert_int_eq(asked.calls, 1);
    ck_assert(!chunk(&pc, 2.0 + IDENT_PACE_SPELL, 20.0)); /* the spell ends: a probe */
    ck_assert_int_eq(asked.calls, 2);
    ck_assert(!asked.raised[1]);
    ck_assert(pc.idle);
    ck_assert_double_eq_tol(pc.spent, 19.99, 1e-9);
    ck_assert(!chunk(&pc, 24.0, 21.0)); /* half a core at idle priority: the trainers wait */
    ck_assert(!chunk(&pc, 26.0, 22.0));
    ck_assert_int_eq(asked.calls, 2);
    ck_assert_double_eq_tol(pc.spent, 19.99, 1e-9); /* idle CPU costs nothing */
    ck_assert(!chunk(&pc, 27.0, 22.005));
    ck_assert(chunk(&pc, 28.0, 22.01)); /* busy again: raised again */
    ck_assert_int_eq(asked.calls, 3);
    ck_assert(asked.raised[2]);
    /* CPU by the priority it ran at: raised 2.0 .. 22.0, idle the rest */
    ck_assert_double_eq_tol((double)cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL), 19.99e9, 1e3);
    ck_assert_double_eq_tol((double)cfs_metrics_get(&m, CFS_M_SEARCH_NS_IDLE), 2.02e9, 1e3);
}
END_TEST

/* The budget spent, the scan goes back to idle priority and stays there on
 * busy cores, until a restart gives it its budget again; without a budget
 * it is never raised; a refused change leaves the pace as it was, to be
 * asked again at the next chunk. */
START_TEST(the_search_stays_idle_past_its_budget)
{
    struct ident_pace pc;
    pace_init(&pc, 0.0001, NULL); /* 0.8 CPU s */
    chunk(&pc, 0, 0);
    ck_assert(chunk(&pc, 2.0, 0.01));
    ck_assert(!chunk(&pc, 3.0, 1.01)); /* a CPU second: spent */
    ck_assert_int_eq(asked.calls, 2);
    ck_assert(!asked.raised[1]);
    for (int t = 5; t <= 15; t += 2) /* busy cores, probe after probe */
        ck_assert(!chunk(&pc, t, 1.01 + t * 0.001));
    ck_assert_int_eq(asked.calls, 2);
    atomic_store(&pc.reset, true); /* cfs_identify_restart */
    ck_assert(chunk(&pc, 17.0, 1.03));
    ck_assert_double_eq_tol(pc.spent, 0, 1e-9);
    ck_assert_int_eq(asked.calls, 3);

    pace_init(&pc, 0, NULL);
    for (int t = 0; t <= 30; t += 2)
        ck_assert(!chunk(&pc, t, t * 0.001));
    ck_assert_int_eq(asked.calls, 0);

    pace_init(&pc, 1.0, NULL);
    asked.refuse = true;
    chunk(&pc, 0, 0);
    ck_assert(!chunk(&pc, 2.0, 0.01)); /* refused: still idle */
    ck_assert(pc.idle);
    ck_assert_int_eq(asked.calls, 1);
    asked.refuse = false;
    ck_assert(chunk(&pc, 2.5, 0.011)); /* asked again */
    ck_assert_int_eq(asked.calls, 2);
}
END_TEST

/* A node's share of the head's scan (identify_split.c) and its own scan
 * draw on one budget, 2 CPU s here: the share, raised on busy cores, spends
 * 1.5 of it; the node's own scan, raised too, stops once the two have run
 * 2.1 s raised, and so does the share; a restart gives both the budget
 * again.  Every CPU second of both lands in the module's metric by the
 * priority it ran at.  Without a module (no such root on the node) a share
 * is never raised, and its CPU is still counted. */
START_TEST(a_share_scan_draws_on_the_nodes_budget)
{
    struct cfs_metrics m;
    cfs_metrics_init(&m);
    struct ident_pace pc, sh;
    pace_init(&pc, 2.0 / 8000, &m); /* 2 CPU s over an epoch of 4000 s on 2 CPUs */
    ident_pace_share_init(&sh, &pc, NULL);
    ck_assert_ptr_eq(sh.metrics, &m);
    ck_assert(!chunk(&sh, 0, 0));
    ck_assert(chunk(&sh, IDENT_PACE_PROBE, 0.01)); /* 0.005 of a core: busy */
    ck_assert(chunk(&sh, 3.0, 1.51));              /* 1.5 of 2 CPU s */
    ck_assert_double_eq_tol(sh.spent, 1.5, 1e-9);
    ck_assert_uint_eq(atomic_load(&pc.spent_ns), 1500000000u);
    ck_assert(!chunk(&pc, 0, 0));
    ck_assert(chunk(&pc, IDENT_PACE_PROBE, 0.01)); /* 0.5 CPU s left: raised */
    ck_assert(!chunk(&pc, 3.0, 0.61));              /* 2.1 of 2: spent */
    ck_assert_double_eq_tol(pc.spent, 0.6, 1e-9);
    ck_assert(!chunk(&sh, 4.0, 1.52)); /* the share stops there too */
    ck_assert(sh.idle && pc.idle);
    for (int t = 6; t <= 16; t += 2) { /* busy cores, probe after probe */
        ck_assert(!chunk(&pc, t, 0.61 + t * 0.001));
        ck_assert(!chunk(&sh, t, 1.52 + t * 0.001));
    }
    ck_assert_double_eq_tol((double)atomic_load(&pc.spent_ns), 2.11e9, 1e3);
    ck_assert_double_eq_tol((double)cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL), 2.11e9, 1e3);
    ck_assert_double_eq_tol((double)cfs_metrics_get(&m, CFS_M_SEARCH_NS_IDLE), 0.052e9, 1e3);
    atomic_store(&pc.reset, true); /* cfs_identify_restart */
    ck_assert(chunk(&pc, 17.0, 0.628)); /* its last probe said busy */
    ck_assert_uint_eq(atomic_load(&pc.spent_ns), 0);
    ck_assert(chunk(&sh, 18.0, 1.539));

    struct cfs_metrics alone;
    cfs_metrics_init(&alone);
    ident_pace_share_init(&sh, NULL, &alone);
    for (int t = 0; t <= 30; t += 2)
        ck_assert(!chunk(&sh, t, t * 0.001));
    ck_assert_double_eq_tol((double)cfs_metrics_get(&alone, CFS_M_SEARCH_NS_IDLE), 0.03e9, 1e3);
    ck_assert_uint_eq(cfs_metrics_get(&alone, CFS_M_SEARCH_NS_NORMAL), 0);
}
END_TEST

/* The module's thread goes to idle priority for a scan's long part and
 * back, except where it could not come back (an ordinary user's mount):
 * there it stays at the normal priority, since it plans under the data
 * path's locks, and the pace says idle for its workers to follow. */
START_TEST(a_thread_that_cannot_come_back_is_never_lowered)
{
    struct ident_pace pc;
    pace_init(&pc, 0.03, NULL);
    pc.keep_thread_normal = true;
    ident_pace_priority(&pc, true);
    ck_assert(pc.idle);
    ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);
    ident_pace_priority(&pc, false);
    ck_assert(!pc.idle);
    ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);

    pace_init(&pc, 0.03, NULL);
    ident_pace_priority(&pc, true);
    ck_assert_int_eq(sched_getscheduler(0), SCHED_IDLE);
    if (geteuid() == 0) { /* back only with CAP_SYS_NICE */
        ident_pace_priority(&pc, false);
        ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);
    }
}
END_TEST

static Suite *identify_pace_suite(void)
{
    Suite *s = suite_create("identify_pace");
    TCase *p = tcase_create("pace");
    tcase_add_test(p, the_meter_measures_a_window_of_scanning);
    tcase_add_test(p, the_search_budget_counts_one_epoch_at_the_trainers_pace);
    tcase_add_test(p, the_search_runs_raised_on_busy_cores_within_its_budget);
    tcase_add_test(p, the_search_stays_idle_past_its_budget);
    tcase_add_test(p, a_share_scan_draws_on_the_nodes_budget);
    tcase_add_test(p, a_thread_that_cannot_come_back_is_never_lowered);
    suite_add_tcase(s, p);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_pace_suite());
}
