/* clairfs-stat: an operator's live view of a mount, like iostat.
 *
 * It reads MOUNTPOINT/.clairfs/metrics (Prometheus text) every interval and
 * prints one line of rates over that interval: where the file reads came
 * from, the hit rate, stall, fetch bandwidth, cache occupancy and how well
 * the plan predicted the opens.  Interval 0 prints the cumulative totals
 * once instead, with exact counts, for scripts and tests.
 *
 * Rates divide by the measured time between two reads of the file, not by
 * the nominal interval, so a late wake-up does not inflate them.  Only the
 * C library is needed: the tool must run on a node with no Python.
 *
 * Several mount points (the nodes of a distributed mount that one host
 * sees: `{rank}` mount points of one job, or the nodes' mounts over a
 * shared file system) give one line a node each interval, a first column
 * naming the node by its place in the arguments, and a line `all` of the
 * cluster: its sums, its hit% and pred% over the sums, the least epoch (the
 * node behind).  That is what a Slurm job's user asks of the cluster: which
 * node reads from the PFS, which one is behind.  The line of one mount
 * point is unchanged, for the scripts that read it. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define HEADER_EVERY 20
#define MIB (1024.0 * 1024.0)

/* The metrics a line shows, in the order of enum fields. */
static const char *const field_keys[] = {
    "clairfs_reads_total{source=\"ram\"}",
    "clairfs_reads_total{source=\"ssd\"}",
    "clairfs_reads_total{source=\"peer\"}",
    "clairfs_reads_total{source=\"pfs\"}",
    "clairfs_stall_seconds_total",
    "clairfs_prediction_total{result=\"hit\"}",
    "clairfs_prediction_total{result=\"miss\"}",
    "clairfs_fetch_bytes_total{from=\"pfs\"}",
    "clairfs_fetch_bytes_total{from=\"peer\"}",
    "clairfs_cache_bytes{tier=\"ram\"}",
    "clairfs_cache_bytes{tier=\"ssd\"}",
    "clairfs_epoch",
};

enum field {
    F_RAM,
    F_SSD,
    F_PEER,
    F_PFS,
    F_STALL,
    F_PRED_HIT,
    F_PRED_MISS,
    F_FETCH_PFS,
    F_FETCH_PEER,
    F_CACHE_RAM,
    F_CACHE_SSD,
    F_EPOCH,
    F_COUNT
};

_Static_assert(sizeof(field_keys) / sizeof(field_keys[0]) == F_COUNT, "one key per field");

struct sample {
    double v[F_COUNT];
    double t; /* CLOCK_MONOTONIC seconds when read */
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads and parses the metrics file into s.  Returns 0, -errno when the
 * file cannot be read, or -EPROTO when it is not clairfs's metrics (the
 * reads family is missing). */
static int read_sample(const char *path, struct sample *s)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[1024];
    bool seen_reads = false;
    memset(s, 0, sizeof(*s));
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#')
            continue;
        char *sp = strrchr(line, ' ');
        if (!sp)
            continue;
        *sp = '\0';
        for (int i = 0; i < F_COUNT; i++) {
            if (strcmp(line, field_keys[i]) == 0) {
                s->v[i] = strtod(sp + 1, NULL);
                if (i <= F_PFS)
                    seen_reads = true;
            }
        }
    }
    int rc = ferror(f) ? -EIO : 0;
    fclose(f);
    s->t = now_mono();
    if (rc == 0 && !seen_reads)
        rc = -EPROTO;
    return rc;
}

/* "12.3" or "-" when there is nothing to divide by. */
static void percent(char *buf, size_t len, double part, double whole)
{
    if (whole > 0)
        snprintf(buf, len, "%.1f", 100.0 * part / whole);
    else
        snprintf(buf, len, "-");
}

static void clock_text(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%H:%M:%S", &tm);
}

#define MAX_MOUNTS 256

/* The node column of a line: nothing for one mount point. */
static void print_node(int nmounts, int node)
{
    if (nmounts < 2)
        return;
    if (node < 0)
        printf("%-4s ", "all");
    else
        printf("%-4d ", node);
}

/* The cluster's line: sums, the least epoch. */
static void sum_samples(const struct sample *s, int n, struct sample *out)
{
    memset(out, 0, sizeof(*out));
    for (int m = 0; m < n; m++) {
        for (int i = 0; i < F_COUNT; i++)
            out->v[i] += s[m].v[i];
        out->t += s[m].t / n;
    }
    out->v[F_EPOCH] = s[0].v[F_EPOCH];
    for (int m = 1; m < n; m++)
        if (s[m].v[F_EPOCH] < out->v[F_EPOCH])
            out->v[F_EPOCH] = s[m].v[F_EPOCH];
}

static void print_rates(const struct sample *a, const struct sample *b)
{
    double dt = b->t - a->t > 1e-9 ? b->t - a->t : 1e-9;
    double d[F_COUNT];
    for (int i = 0; i < F_COUNT; i++)
        d[i] = b->v[i] - a->v[i];
    double reads = d[F_RAM] + d[F_SSD] + d[F_PEER] + d[F_PFS];
    char tm[16], hit[16], pred[16];
    clock_text(tm, sizeof(tm));
    percent(hit, sizeof(hit), d[F_RAM] + d[F_SSD] + d[F_PEER], reads);
    percent(pred, sizeof(pred), d[F_PRED_HIT], d[F_PRED_HIT] + d[F_PRED_MISS]);
    printf("%-8s %5.0f %8.1f %8.1f %8.1f %8.1f %6s %7.3f %9.1f %9.1f %8.1f %8.1f %6s\n", tm,
           b->v[F_EPOCH], d[F_RAM] / dt, d[F_SSD] / dt, d[F_PEER] / dt, d[F_PFS] / dt, hit,
           d[F_STALL] / dt, d[F_FETCH_PFS] / MIB / dt, d[F_FETCH_PEER] / MIB / dt,
           b->v[F_CACHE_RAM] / MIB, b->v[F_CACHE_SSD] / MIB, pred);
}

static void print_totals(const struct sample *s)
{
    const double *v = s->v;
    double reads = v[F_RAM] + v[F_SSD] + v[F_PEER] + v[F_PFS];
    char tm[16], hit[16], pred[16];
    clock_text(tm, sizeof(tm));
    percent(hit, sizeof(hit), v[F_RAM] + v[F_SSD] + v[F_PEER], reads);
    percent(pred, sizeof(pred), v[F_PRED_HIT], v[F_PRED_HIT] + v[F_PRED_MISS]);
    printf("%-8s %5.0f %8.0f %8.0f %8.0f %8.0f %6s %9.3f %9.1f %9.1f %8.1f %8.1f %6s %8.0f %8.0f\n",
           tm, v[F_EPOCH], v[F_RAM], v[F_SSD], v[F_PEER], v[F_PFS], hit, v[F_STALL],
           v[F_FETCH_PFS] / MIB, v[F_FETCH_PEER] / MIB, v[F_CACHE_RAM] / MIB,
           v[F_CACHE_SSD] / MIB, pred, v[F_PRED_HIT], v[F_PRED_MISS]);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s MOUNTPOINT... [INTERVAL [COUNT]]\n"
            "\n"
            "Every INTERVAL seconds (default 1, fractions allowed) prints one line of\n"
            "MOUNTPOINT/.clairfs/metrics over that interval; stops after COUNT lines\n"
            "(default: until interrupted).  INTERVAL 0 prints the totals since the\n"
            "mount once instead (counts, seconds and MiB, plus prediction hit/miss).\n"
            "\n"
            "Columns: time, epoch, file reads/s by source (ram ssd peer pfs), hit%%\n"
            "(reads from ram, ssd or peer), stall seconds per second, MiB/s fetched from\n"
            "the PFS and from peers, MiB cached in RAM and on SSD, pred%% (opens the plan\n"
            "expected).\n"
            "\n"
            "Several MOUNTPOINTs (a distributed mount's nodes, listed by rank) print one\n"
            "line each, the first column the node's place in the list, then a line\n"
            "'all': the sums, hit%% and pred%% over them, the least epoch.  An argument\n"
            "naming a directory is a mount point; the numbers after them are INTERVAL\n"
            "and COUNT.\n",
            prog);
}

static void print_header(bool totals, int nmounts)
{
    if (nmounts > 1)
        printf("%-4s ", "node");
    if (totals)
        printf("%-8s %5s %8s %8s %8s %8s %6s %9s %9s %9s %8s %8s %6s %8s %8s\n", "time", "epoch",
               "ram", "ssd", "peer", "pfs", "hit%", "stall_s", "pfs_MiB", "peer_MiB", "ram_MiB",
               "ssd_MiB", "pred%", "pred_hit", "pred_mis");
    else
        printf("%-8s %5s %8s %8s %8s %8s %6s %7s %9s %9s %8s %8s %6s\n", "time", "epoch",
               "ram/s", "ssd/s", "peer/s", "pfs/s", "hit%", "stall/s", "pfsMiB/s", "peerMiB/s",
               "ram_MiB", "ssd_MiB", "pred%");
}

/* Sleeps until the monotonic time `until`; false when a signal asked to stop. */
static bool sleep_until(double until)
{
    struct timespec ts;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
    while (!interrupted) {
        int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        if (rc == 0)
            return !interrupted;
        if (rc != EINTR)
            return false;
    }
    return false;
}

/* Is arg a mount point to read (a directory), or the INTERVAL that ends
 * them?  A number is never taken for a directory of that name. */
static bool is_mount_arg(const char *arg)
{
    if (arg[0] == '-' || arg[strspn(arg, "0123456789.")] == '\0')
        return false;
    struct stat st;
    return stat(arg, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Every mount's sample into s[]; 0, or 1 after the one-line error. */
static int read_all(char (*paths)[4096], int nmounts, struct sample *s, bool first)
{
    for (int m = 0; m < nmounts; m++) {
        int rc = read_sample(paths[m], &s[m]);
        if (rc == 0)
            continue;
        if (first) {
            char mnt[4096];
            snprintf(mnt, sizeof(mnt), "%.*s",
                     (int)(strlen(paths[m]) - strlen("/.clairfs/metrics")), paths[m]);
            fprintf(stderr, "clairfs-stat: %s is not a clairfs mount (%s: %s)\n", mnt, paths[m],
                    rc == -EPROTO ? "no clairfs metrics" : strerror(-rc));
        } else {
            fprintf(stderr, "clairfs-stat: %s: %s (unmounted?)\n", paths[m], strerror(-rc));
        }
        return 1;
    }
    return 0;
}

/* One line a mount point, and the cluster's line when there are several;
 * prev NULL: the totals. */
static void print_lines(const struct sample *prev, const struct sample *cur, int nmounts)
{
    for (int m = 0; m < nmounts; m++) {
        print_node(nmounts, m);
        if (prev)
            print_rates(&prev[m], &cur[m]);
        else
            print_totals(&cur[m]);
    }
    if (nmounts < 2)
        return;
    struct sample a, b;
    sum_samples(cur, nmounts, &b);
    print_node(nmounts, -1);
    if (prev) {
        sum_samples(prev, nmounts, &a);
        print_rates(&a, &b);
    } else {
        print_totals(&b);
    }
}

int main(int argc, char **argv)
{
    static char paths[MAX_MOUNTS][4096];
    static struct sample prev[MAX_MOUNTS], cur[MAX_MOUNTS];
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout, argv[0]);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') {
        usage(stderr, argv[0]);
        return 2;
    }
    /* the first argument is a mount point whatever it names (the error
     * says what it is not), the following directories too */
    int nmounts = 1;
    while (nmounts < argc - 1 && is_mount_arg(argv[1 + nmounts]))
        nmounts++;
    if (nmounts > MAX_MOUNTS || argc - 1 - nmounts > 2) {
        usage(stderr, argv[0]);
        return 2;
    }
    int at = 1 + nmounts;
    double interval = 1.0;
    unsigned long long count = 0; /* 0: until interrupted */
    char *end;
    if (argc > at) {
        errno = 0;
        interval = strtod(argv[at], &end);
        if (errno || end == argv[at] || *end || !(interval >= 0) || interval > 86400) {
            fprintf(stderr, "clairfs-stat: interval %s: expected seconds from 0 to 86400\n",
                    argv[at]);
            return 2;
        }
    }
    if (argc > at + 1) {
        errno = 0;
        count = strtoull(argv[at + 1], &end, 10);
        if (errno || end == argv[at + 1] || *end || argv[at + 1][0] == '-' || count == 0) {
            fprintf(stderr, "clairfs-stat: count %s: expected a whole number >= 1\n", argv[at + 1]);
            return 2;
        }
    }

    for (int m = 0; m < nmounts; m++)
        if ((size_t)snprintf(paths[m], sizeof(paths[m]), "%s/.clairfs/metrics", argv[1 + m]) >=
            sizeof(paths[m])) {
            fprintf(stderr, "clairfs-stat: %s: path too long\n", argv[1 + m]);
            return 1;
        }
    if (read_all(paths, nmounts, prev, true))
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (interval == 0) {
        print_header(true, nmounts);
        print_lines(NULL, prev, nmounts);
        return 0;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* Wake-ups on a fixed grid, so the lines do not drift. */
    double next = prev[0].t;
    for (unsigned long long n = 0; count == 0 || n < count; n++) {
        if (n % HEADER_EVERY == 0)
            print_header(false, nmounts);
        next += interval;
        if (!sleep_until(next))
            break;
        if (read_all(paths, nmounts, cur, false))
            return 1;
        print_lines(prev, cur, nmounts);
        memcpy(prev, cur, sizeof(prev));
    }
    return 0;
}
