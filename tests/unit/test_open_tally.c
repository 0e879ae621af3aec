/* Which sightings are one open (src/open_tally.c): before counting, the
 * run of FUSE opens their isatty() followed; Python readers counted by
 * their TTY with the notification covering each (merged ones too, late
 * ones too, a busy reader's ring wrapping and growing, a clock read
 * before another's; a TTY waits while its
 * notification's open is being counted); a thread preempted between open and isatty counted once; a
 * reader without isatty() counted by its notifications and told once as
 * untold; permission events exact with the TTY and the notification
 * matching them; threads apart; forgotten after two seconds; the latest
 * 1 000 threads kept; an ordinary user's watch, which names no reader. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "check_run.h"
#include "src/open_tally.h"

#define MS 1000000ull

static struct cfs_open_tally *tally_new(void)
{
    struct cfs_open_tally *t;
    ck_assert_int_eq(cfs_open_tally_create(&t), 0);
    return t;
}

/* Whether an open a NOTE alone counted is untold by now_ms. */
static bool untold_at(struct cfs_open_tally *t, uint64_t now_ms)
{
    pid_t tid;
    uint64_t node;
    return cfs_open_tally_untold(t, now_ms * MS, &tid, &node);
}

/* The opens counted of sightings s[0..n) of thread tid on nodes node[],
 * the i-th at at[i] ms. */
static int counted(struct cfs_open_tally *t, int n, const enum cfs_open_sighting *s,
                   const uint64_t *node, const uint64_t *at_ms, pid_t tid)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        if (cfs_open_tally_seen(t, s[i], tid, node[i], at_ms[i] * MS)) {
            c++;
            if (s[i] == CFS_OPEN_NOTE)
                cfs_open_tally_counted(t);
        }
    return c;
}

START_TEST(told_run_before_counting)
{
    struct cfs_open_tally *t = tally_new();
    ck_assert(!cfs_open_tally_counting(t));
    for (uint64_t f = 1; f <= 10; f++) {
        ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_SERVED, 7, f, f * MS));
        ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 7, f, f * MS + 10));
    }
    ck_assert_uint_eq(cfs_open_tally_told_run(t), 10);
    /* Another thread's TTY, or one of another file, tells nothing. */
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_SERVED, 7, 11, 20 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 8, 11, 20 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 7, 12, 20 * MS));
    ck_assert_uint_eq(cfs_open_tally_told_run(t), 10);
    /* Its next open: the last one went without isatty(). */
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_SERVED, 7, 13, 21 * MS));
    ck_assert_uint_eq(cfs_open_tally_told_run(t), 0);
    /* Counting starts between an open FUSE served and its TTY: the TTY is
     * that open's; one told before the start is no more. */
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_SERVED, 8, 14, 22 * MS));
    cfs_open_tally_start(t, true, false);
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 8, 14, 23 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 7, 10, 24 * MS));
    cfs_open_tally_destroy(t);
}
END_TEST

START_TEST(tty_reader_counted_once_per_open)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, true, false);
    ck_assert(cfs_open_tally_counting(t));
    /* TTY then its notification; a merged notification of two opens of
     * file 2; a notification read before its TTY (preempted); file 1
     * again later: a new open. */
    const enum cfs_open_sighting s[] = {CFS_OPEN_TTY,  CFS_OPEN_NOTE, CFS_OPEN_TTY,
                                        CFS_OPEN_TTY,  CFS_OPEN_NOTE, CFS_OPEN_NOTE,
                                        CFS_OPEN_TTY,  CFS_OPEN_TTY,  CFS_OPEN_NOTE};
    const uint64_t node[] = {1, 1, 2, 2, 2, 3, 3, 1, 1};
    const uint64_t at[] = {0, 2, 3, 4, 5, 6, 9, 10, 12};
    ck_assert_int_eq(counted(t, 9, s, node, at, 100), 5);
    ck_assert(!untold_at(t, 500));
    cfs_open_tally_destroy(t);
}
END_TEST

/* A busy reader: 6 000 opens in 3 s, each TTY first, its notification
 * read later, LAG opens behind (some merged over two opens of one file):
 * 8 behind, and 1 500 (750 ms late, past a ring of 1 024, which grows);
 * past two seconds the oldest are forgotten.  Every open counted once,
 * each notification matching its own, nothing untold. */
static void busy_reader(uint64_t lag)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, true, false);
    enum { OPENS = 6000 };
    const uint64_t LAG = lag;
    int c = 0;
    for (uint64_t i = 0; i < OPENS + LAG; i++) {
        uint64_t at = i * MS / 2;
        /* Every 100th file is opened twice in a row (one merged note). */
        uint64_t node = i % 100 == 1 ? i - 1 : i;
        if (i < OPENS)
            c += cfs_open_tally_seen(t, CFS_OPEN_TTY, 5, node, at);
        if (i >= LAG && (i - LAG) % 100 != 1) {
            uint64_t late = i - LAG;
            if (cfs_open_tally_seen(t, CFS_OPEN_NOTE, 5, late, at)) {
                cfs_open_tally_counted(t);
                c++;
            }
        }
    }
    ck_assert_int_eq(c, OPENS);
    /* The notification of an open not yet made counts it (a reader
     * without isatty()), and is untold once its 100 ms are past. */
    uint64_t end_ms = (OPENS + LAG) / 2;
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 5, 99999, end_ms * MS));
    cfs_open_tally_counted(t);
    ck_assert(untold_at(t, end_ms + 200));
    cfs_open_tally_destroy(t);
}

START_TEST(busy_reader_ring_grows_and_wraps)
{
    busy_reader(8);
    busy_reader(1500);
}
END_TEST

/* A TTY whose caller read the clock before the notification's did, but
 * took the tally after it: the same open, and nothing untold. */
START_TEST(clock_read_before_the_mutex)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, true, false);
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 5, 1, 10 * MS));
    cfs_open_tally_counted(t);
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 5, 1, 10 * MS - 3));
    ck_assert(!untold_at(t, 5));
    ck_assert(!untold_at(t, 500));
    cfs_open_tally_destroy(t);
}
END_TEST

struct tty_call {
    struct cfs_open_tally *t;
    atomic_bool returned;
    bool counted;
};

static void *tty_call(void *arg)
{
    struct tty_call *c = arg;
    c->counted = cfs_open_tally_seen(c->t, CFS_OPEN_TTY, 9, 4, 1 * MS);
    atomic_store(&c->returned, true);
    return NULL;
}

/* The TTY of an open a NOTE is counting waits until it is counted: the
 * reader's next open cannot be counted before it. */
START_TEST(tty_waits_for_the_note_counting)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, true, false);
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 9, 4, 1 * MS));
    struct tty_call c = {.t = t};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tty_call, &c), 0);
    usleep(50000);
    ck_assert(!atomic_load(&c.returned));
    cfs_open_tally_counted(t);
    pthread_join(th, NULL);
    ck_assert(atomic_load(&c.returned));
    ck_assert(!c.counted);
    cfs_open_tally_destroy(t);
}
END_TEST

START_TEST(reader_without_isatty_is_untold_once)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, true, false);
    for (uint64_t f = 1; f <= 5; f++) {
        ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 200, f, f * MS));
        cfs_open_tally_counted(t);
    }
    /* Another notification of the same file: another open (the first was
     * read before it, or it would have merged). */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 200, 5, 6 * MS));
    cfs_open_tally_counted(t);
    pid_t tid = 0;
    uint64_t node = 0;
    ck_assert(!cfs_open_tally_untold(t, 50 * MS, &tid, &node));
    ck_assert(cfs_open_tally_untold(t, 150 * MS, &tid, &node));
    ck_assert_int_eq(tid, 200);
    ck_assert_uint_eq(node, 1);
    ck_assert(!cfs_open_tally_untold(t, 160 * MS, &tid, &node));
    /* A TTY much later is another open (the notification's was long
     * counted). */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 200, 1, 1500 * MS));
    cfs_open_tally_destroy(t);
}
END_TEST

START_TEST(permission_events_are_exact)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, false, false);
    /* Each PERM counts, its TTY never; no notifications are expected. */
    const enum cfs_open_sighting s[] = {CFS_OPEN_PERM, CFS_OPEN_TTY, CFS_OPEN_PERM,
                                        CFS_OPEN_TTY,  CFS_OPEN_PERM, CFS_OPEN_PERM};
    const uint64_t node[] = {1, 1, 1, 1, 2, 2};
    const uint64_t at[] = {0, 1, 2, 3, 4, 5};
    ck_assert_int_eq(counted(t, 6, s, node, at, 300), 4);
    cfs_open_tally_destroy(t);

    /* Added to notifications (the watch made exact): all three sightings
     * of one open count once; an open served through FUSE the same. */
    t = tally_new();
    cfs_open_tally_start(t, true, false);
    const enum cfs_open_sighting s2[] = {CFS_OPEN_PERM, CFS_OPEN_TTY,  CFS_OPEN_NOTE,
                                         CFS_OPEN_PERM, CFS_OPEN_NOTE, CFS_OPEN_SERVED,
                                         CFS_OPEN_TTY,  CFS_OPEN_NOTE};
    const uint64_t node2[] = {1, 1, 1, 2, 2, 3, 3, 3};
    const uint64_t at2[] = {0, 1, 2, 3, 4, 5, 6, 7};
    ck_assert_int_eq(counted(t, 8, s2, node2, at2, 301), 3);
    ck_assert(!untold_at(t, 1000));
    cfs_open_tally_destroy(t);
}
END_TEST

START_TEST(threads_apart_and_forgotten)
{
    struct cfs_open_tally *t = tally_new();
    cfs_open_tally_start(t, true, false);
    /* Two threads open the same file: two opens. */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 1, 9, 0));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 2, 9, 1 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 2, 9, 2 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 1, 9, 2 * MS));
    /* An open kept past two seconds is forgotten: a notification then
     * counts (none comes that late). */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 1, 10, 3 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 1, 10, 2100 * MS));
    cfs_open_tally_counted(t);
    /* More threads than slots: the latest 1 000 keep their own. */
    for (pid_t tid = 1000; tid < 3000; tid++)
        ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, tid, 5, 3000 * MS + (uint64_t)tid));
    for (pid_t tid = 2000; tid < 3000; tid++)
        ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, tid, 5, 3001 * MS));
    cfs_open_tally_destroy(t);
}
END_TEST

/* Opens before the start come before the watch's first mark: no
 * notification comes for them.  One FUSE served while the marks went in
 * may have one, within a batch; a notification of that file long after is
 * another open's (cat after the trainer), not that one's. */
START_TEST(served_opens_and_their_notes)
{
    struct cfs_open_tally *t = tally_new();
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_SERVED, 5, 2, 0));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 5, 2, 1 * MS));
    cfs_open_tally_start(t, true, false);
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 5, 2, 20 * MS));
    cfs_open_tally_counted(t);
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_SERVED, 5, 3, 30 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 5, 3, 31 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_SERVED, 5, 4, 32 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 5, 4, 40 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 5, 3, 900 * MS));
    cfs_open_tally_counted(t);
    cfs_open_tally_destroy(t);
}
END_TEST

/* An ordinary user's watch names no reader (tid 0): every sighting is
 * one reader's, files alone telling opens apart.  An open FUSE served
 * before the start, whose TTY comes after, is still that open's. */
START_TEST(anonymous_readers)
{
    struct cfs_open_tally *t = tally_new();
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_SERVED, 10, 4, 0));
    cfs_open_tally_start(t, true, true);
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 10, 4, 1 * MS));
    /* Two readers' TTYs, then the notifications naming nobody. */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 11, 5, 2 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 12, 6, 2 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 6, 3 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 5, 3 * MS));
    /* A notification before its TTY, then the TTY: one open. */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 7, 4 * MS));
    cfs_open_tally_counted(t);
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 13, 7, 5 * MS));
    /* Two readers open one file before either notification is read:
     * the kernel merges no two processes' events, so each notification
     * is one open. */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 14, 9, 6 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 15, 9, 7 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 9, 30 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 9, 31 * MS));
    /* One process's two opens of a file, merged into one notification:
     * the next notification of that file is another open. */
    ck_assert(cfs_open_tally_seen_by(t, CFS_OPEN_TTY, 16, 16, 10, 40 * MS));
    ck_assert(cfs_open_tally_seen_by(t, CFS_OPEN_TTY, 16, 16, 10, 41 * MS));
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 10, 60 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 10, 80 * MS));
    cfs_open_tally_counted(t);
    ck_assert(!cfs_open_tally_seen_by(t, CFS_OPEN_TTY, 17, 17, 10, 85 * MS));
    ck_assert(!untold_at(t, 200));
    /* A reader without isatty(): untold once, its thread not known. */
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 8, 300 * MS));
    cfs_open_tally_counted(t);
    pid_t tid = 99;
    uint64_t node = 0;
    ck_assert(cfs_open_tally_untold(t, 500 * MS, &tid, &node));
    ck_assert_int_eq(tid, 0);
    ck_assert_uint_eq(node, 8);
    cfs_open_tally_destroy(t);

    /* A root watch's notification of a reader in another pid namespace
     * (tid 0) is a reader of its own, not a free slot. */
    t = tally_new();
    cfs_open_tally_start(t, true, false);
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 1, 0));
    cfs_open_tally_counted(t);
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_NOTE, 0, 1, 1 * MS));
    cfs_open_tally_counted(t);
    ck_assert(!cfs_open_tally_seen(t, CFS_OPEN_TTY, 0, 1, 2 * MS));
    ck_assert(cfs_open_tally_seen(t, CFS_OPEN_TTY, 40, 1, 2 * MS));
    cfs_open_tally_destroy(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("open_tally");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, told_run_before_counting);
    tcase_add_test(tc, tty_reader_counted_once_per_open);
    tcase_add_test(tc, busy_reader_ring_grows_and_wraps);
    tcase_add_test(tc, clock_read_before_the_mutex);
    tcase_add_test(tc, tty_waits_for_the_note_counting);
    tcase_add_test(tc, reader_without_isatty_is_untold_once);
    tcase_add_test(tc, permission_events_are_exact);
    tcase_add_test(tc, threads_apart_and_forgotten);
    tcase_add_test(tc, served_opens_and_their_notes);
    tcase_add_test(tc, anonymous_readers);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
