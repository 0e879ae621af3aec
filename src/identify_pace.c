/* The scans' priority and budget, and the share of a core they get.
 *
 * Why idle priority.  A scan over 2^32 seeds is a CPU minute; the trainer
 * it learns from must not wait for it.  So past its head (identify_scan.c)
 * a scan runs at SCHED_IDLE, as the seed search does: a core that
 * something leaves idle serves it at no cost.  But where the trainers keep
 * every core busy that is next to nothing (6 % of a core beside an
 * ImageNet loader on 2 cores), and the scan would outlast the epoch.
 *
 * Why a budget.  search_budget lets the scan run at the normal priority
 * while the CPU time spent so is below that share of the cores over the
 * trainers' first epoch, projected from their pace
 * (cfs_identify_search_allowance): a long epoch pays a known few percent
 * for its order.  The budget is spent only while running raised.  Between
 * chunks of IDENT_PACE_CHUNK seeds the module thread charges its CPU time
 * to the priority it ran at (the metrics) and picks the next chunk's.
 *
 * Why only on busy cores.  Raised only where the trainers compute on
 * every core (cfs_identify_search_raise).  At idle priority the scan gets
 * what they leave idle, measured over probes of IDENT_PACE_PROBE seconds;
 * from a quarter of a core up the host has idle time - the trainers wait,
 * for their storage most likely - and a raised scan would gain little CPU
 * while every wake-up in their chain of short-lived threads (loader
 * workers, FUSE requests, fetches) queued behind it: 2050 files/s fell to
 * 417 over an emulated PFS.  A raised spell ends after IDENT_PACE_SPELL
 * seconds for another probe at idle priority, as the trainers may have
 * moved on.
 *
 * One budget for the node's scans of a root.  On a distributed mount a
 * node also scans a share of the head node's range (identify_split.c),
 * on the agreement's thread: CPU the node spends on the same search.  Its
 * pace draws on the module's (budget_of): the trainers' pace measured
 * there, and one count of the CPU run raised (spent_ns) that both add to
 * and both stop at, so the node's own scan and its share together stay
 * within search_budget; its CPU is counted in the same metric.  It runs on
 * a thread of its own, which the pace moves with its workers.
 *
 * The decisions (ident_pace_chunk_at, ident_meter_share_at) take their
 * measurements - the clocks' readings, the priority's change - as
 * arguments, so what the pace decides is tested with them given, never by
 * how a host's scheduler shared its CPU.
 *
 * The meter.  The data path's sweep holds back while a scan runs on busy
 * cores (cfs_identify_scan_share).  A window is at least SCAN_WINDOW
 * seconds of scanning; scans less than SCAN_GAP apart (a restart for a new
 * reader, the next attempt) share one, and count as one scan to the
 * caller.  A raised spell is not measured: the scan's share then is what
 * the normal priority wins against the trainers, not what they leave idle
 * (two raised workers beside two busy trainers got a whole core, and the
 * sweep resumed on busy cores); the last idle window's share stands.  The
 * meter has its own lock, a leaf: the data path asks without waiting for
 * the module's. */
#include <string.h>

#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/seed_search.h"
#include "clairfs/thread_priority.h"
#include "identify_i.h"

#define SCAN_WINDOW 1.0
#define SCAN_GAP 1.0

/* --- The scans' share of a core. ------------------------------------------ */

/* The module thread's CPU seconds and its scans' workers' (their CPU is
 * the scan's as much as its own). */
static double meter_cpu(struct ident_scan_meter *m)
{
    double cpu = ident_clock_sec(m->clock);
    return cpu < 0 ? cpu : cpu + (double)atomic_load(&m->workers_ns) * 1e-9;
}

void ident_meter_scan_at(struct ident_scan_meter *m, bool begin, double now, double cpu)
{
    if (begin && m->has_clock && (m->scan_end == 0 || now - m->scan_end > SCAN_GAP)) {
        m->t0 = now; /* after a pause: a new window, nothing measured yet */
        m->cpu0 = cpu;
        m->share = -1;
    }
    m->scanning = begin;
    if (!begin)
        m->scan_end = now;
}

void ident_meter_scan(struct ident_scan_meter *m, bool begin)
{
    if (!m)
        return; /* offline */
    double now = ident_clock_sec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&m->mu);
    double cpu = begin && m->has_clock ? meter_cpu(m) : -1;
    ident_meter_scan_at(m, begin, now, cpu);
    pthread_mutex_unlock(&m->mu);
}

bool ident_meter_window_closes(const struct ident_scan_meter *m, double now)
{
    return m->scanning && !m->raised && now - m->t0 >= SCAN_WINDOW;
}

void ident_meter_raised_at(struct ident_scan_meter *m, bool raised, double now, double cpu)
{
    m->raised = raised;
    if (!raised) /* a new window, at idle priority */
        m->t0 = now, m->cpu0 = cpu;
}

bool ident_meter_share_at(struct ident_scan_meter *m, double now, double cpu, double *share)
{
    bool scanning = m->has_clock &&
                    (m->scanning || (m->scan_end > 0 && now - m->scan_end <= SCAN_GAP));
    if (ident_meter_window_closes(m, now)) {
        m->share = cpu >= 0 ? (cpu - m->cpu0) / (now - m->t0) : -1;
        m->t0 = now;
        m->cpu0 = cpu;
    }
    *share = m->share;
    return scanning;
}

bool cfs_identify_scan_share(struct cfs_identify *id, double *share)
{
    struct ident_scan_meter *m = &id->meter;
    double now = ident_clock_sec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&m->mu);
    /* the thread's CPU clock is read only where a window closes: at most
     * once a second (clairfs/identify.h) */
    double cpu = ident_meter_window_closes(m, now) ? meter_cpu(m) : -1;
    bool scanning = ident_meter_share_at(m, now, cpu, share);
    pthread_mutex_unlock(&m->mu);
    return scanning;
}

/* --- The scans' priority within the budget. ------------------------------- */

double cfs_identify_search_allowance(double budget, unsigned cores, uint64_t n, uint64_t opens,
                                     double reading)
{
    if (budget <= 0 || cores == 0 || opens == 0 || reading < IDENT_PACE_MIN_READING)
        return 0;
    double epoch = reading * (double)n / (double)opens;
    return budget * cores * (epoch > reading ? epoch : reading);
}

bool cfs_identify_search_raise(double spent, double allow, double idle_share, double raised_for)
{
    if (spent >= allow)
        return false;
    if (raised_for >= 0)
        return raised_for < IDENT_PACE_SPELL;
    return idle_share >= 0 && idle_share < CFS_IDENTIFY_IDLE_ENOUGH;
}

/* The pace whose budget pc's raised CPU is spent from. */
static struct ident_pace *budget_owner(struct ident_pace *pc)
{
    return pc->budget_of ? pc->budget_of : pc;
}

/* CPU seconds spent raised from pc's budget, by every scan drawing on it. */
static double budget_spent(struct ident_pace *pc)
{
    return (double)atomic_load(&budget_owner(pc)->spent_ns) * 1e-9;
}

void ident_pace_charge_at(struct ident_pace *pc, double cpu)
{
    double d = cpu - pc->cpu_mark;
    if (cpu < 0 || d <= 0)
        return;
    pc->cpu_mark = cpu;
    if (pc->raised) {
        pc->spent += d;
        atomic_fetch_add(&budget_owner(pc)->spent_ns, (uint64_t)(d * 1e9));
    }
    if (pc->metrics)
        cfs_metrics_add(pc->metrics, pc->idle ? CFS_M_SEARCH_NS_IDLE : CFS_M_SEARCH_NS_NORMAL,
                        (uint64_t)(d * 1e9));
}

/* The module thread's CPU seconds and its scans' workers'. */
static double pace_cpu(const struct ident_pace *pc)
{
    double cpu = ident_clock_sec(CLOCK_THREAD_CPUTIME_ID);
    return cpu < 0 ? cpu : cpu + pc->workers_cpu;
}

void ident_pace_charge(struct ident_pace *pc)
{
    ident_pace_charge_at(pc, pace_cpu(pc));
}

void ident_pace_priority(struct ident_pace *pc, bool idle)
{
    ident_pace_charge(pc);
    if (pc->keep_thread_normal)
        ; /* the workers follow pc->idle (ident_pace_chunk) */
    else if (idle)
        (void)cfs_thread_lower_priority();
    else
        (void)cfs_thread_normal_priority();
    pc->idle = idle;
    pc->raised = false;
    pc->probe_wall = 0; /* a probe measures a scan's long part alone */
}

/* At idle priority, the probe of the share of a core the scan gets: one
 * begins where none runs, and one that has lasted IDENT_PACE_PROBE seconds
 * gives idle_share and begins the next. */
static void pace_probe(struct ident_pace *pc, double now)
{
    if (pc->raised)
        return;
    if (pc->probe_wall <= 0) {
        pc->probe_wall = now, pc->probe_cpu = pc->cpu_mark;
    } else if (now - pc->probe_wall >= IDENT_PACE_PROBE) {
        pc->idle_share = (pc->cpu_mark - pc->probe_cpu) / (now - pc->probe_wall);
        pc->probe_wall = now, pc->probe_cpu = pc->cpu_mark;
    }
}

/* Should the next chunk run raised, at monotonic second now (*allow: the
 * budget's CPU seconds)? */
static bool wants_raised(struct ident_pace *pc, double now, double *allow)
{
    pace_probe(pc, now);
    const struct ident_pace *of = budget_owner(pc);
    uint64_t opens = atomic_load(&of->opens);
    double reading = (double)atomic_load(&of->reading_us) * 1e-6;
    *allow = cfs_identify_search_allowance(pc->budget, pc->cores, pc->n, opens, reading);
    return cfs_identify_search_raise(budget_spent(pc), *allow, pc->idle_share,
                                     pc->raised ? now - pc->raised_at : -1);
}

/* The thread now runs raised or not (its priority changed at now). */
static void switched(struct ident_pace *pc, bool raise, double now, double allow)
{
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
    } else if (!raise && budget_spent(pc) >= allow && !pc->said_spent) {
        pc->said_spent = true;
        cfs_info("identify: the search's budget is spent (%.1f CPU s at the normal priority): "
                 "back at idle priority", budget_spent(pc));
    } else {
        cfs_debug("identify: the search runs at %s priority (%.1f of %.1f CPU s of its budget "
                  "spent; at idle priority it got %.2f of a core)",
                  raise ? "the normal" : "idle", budget_spent(pc), allow, share);
    }
}

void ident_pace_chunk_at(struct ident_pace *pc, double now, double cpu,
                         bool (*set_priority)(bool raised))
{
    if (atomic_exchange(&pc->reset, false)) {
        pc->spent = 0, pc->said_raised = pc->said_spent = false;
        atomic_store(&pc->spent_ns, 0);
    }
    ident_pace_charge_at(pc, cpu);
    double allow;
    bool raise = wants_raised(pc, now, &allow);
    if (raise == pc->raised || !set_priority(raise))
        return;
    switched(pc, raise, now, allow);
}

unsigned ident_pace_threads(const struct ident_pace *pc, unsigned configured)
{
    if (pc->keep_thread_normal && (configured ? configured : cfs_seed_usable_cpus()) < 2)
        return 2;
    return configured;
}

/* The module thread at the normal priority (raised) or idle: false when
 * the change was refused (the lowering fell through to "normal"). */
static bool set_thread_priority(bool raised)
{
    return raised ? cfs_thread_normal_priority() >= 0
                  : strcmp(cfs_thread_lower_priority(), "normal") != 0;
}

/* Where the module thread stays at the normal priority: only its workers
 * move, and once idle they cannot come back either. */
static bool set_workers_priority(bool raised)
{
    return !raised;
}

void ident_pace_chunk(struct ident_pace *pc, struct ident_scan_meter *m,
                      struct cfs_seed_workers *w)
{
    double d = cfs_seed_workers_cpu_take(w);
    pc->workers_cpu += d;
    if (m && d > 0)
        atomic_fetch_add(&m->workers_ns, (uint64_t)(d * 1e9));
    bool was_raised = pc->raised;
    ident_pace_chunk_at(pc, ident_clock_sec(CLOCK_MONOTONIC), pace_cpu(pc),
                        pc->keep_thread_normal ? set_workers_priority : set_thread_priority);
    if (m && pc->raised != was_raised) {
        pthread_mutex_lock(&m->mu);
        ident_meter_raised_at(m, pc->raised, ident_clock_sec(CLOCK_MONOTONIC),
                              m->has_clock ? meter_cpu(m) : -1);
        pthread_mutex_unlock(&m->mu);
    }
    /* the workers follow the module thread: raised or idle together (a
     * no-op where they already run so) */
    (void)cfs_seed_workers_priority(w, pc->idle);
}

void ident_pace_share_init(struct ident_pace *pc, struct ident_pace *of,
                           struct cfs_metrics *metrics)
{
    memset(pc, 0, sizeof(*pc));
    atomic_init(&pc->opens, 0);
    atomic_init(&pc->reading_us, 0);
    atomic_init(&pc->reset, false);
    atomic_init(&pc->spent_ns, 0);
    /* set before the module's thread started, never changed */
    pc->budget = of ? of->budget : 0;
    pc->cores = of ? of->cores : 1;
    pc->n = of ? of->n : 0;
    pc->metrics = of ? of->metrics : metrics;
    pc->budget_of = of;
    pc->idle = true;
    pc->idle_share = -1;
}
