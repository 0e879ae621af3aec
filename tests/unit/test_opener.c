/* Who opens (src/opener.c): the process and parent of a thread id read
 * from a /proc of the test's own (TID/status files), cached: a second look
 * up of the same thread reads nothing, another thread reads once; a thread
 * that is gone is unknown and not cached; the real /proc gives this
 * process's own pid and parent; the record has one "PID PPID PATH" line
 * per call; an unwritable record is a one-line error. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "src/opener.h"

static void write_status(const char *proc, int tid, int tgid, int ppid)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%d", proc, tid);
    ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
    snprintf(path, sizeof(path), "%s/%d/status", proc, tid);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    /* The fields around them as the kernel writes them. */
    fprintf(f, "Name:\tpt_data_worker\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\n"
               "Ngid:\t0\nPid:\t%d\nPPid:\t%d\nTracerPid:\t0\n",
            tgid, tid, ppid);
    fclose(f);
}

static void rm_rf(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(lookup_is_cached_per_thread)
{
    char proc[] = "/tmp/cfs-opener-XXXXXX", err[256];
    ck_assert_ptr_nonnull(mkdtemp(proc));
    write_status(proc, 1201, 1200, 900); /* a second thread of process 1200 */
    write_status(proc, 1300, 1300, 1200); /* a DataLoader worker of 1200 */
    struct cfs_openers *o = NULL;
    ck_assert_msg(cfs_openers_create(proc, NULL, &o, err, sizeof(err)) == 0, "%s", err);
    ck_assert(!cfs_openers_recording(o));
    struct cfs_opener who;
    cfs_openers_lookup(o, 1201, &who);
    ck_assert_int_eq(who.pid, 1200);
    ck_assert_int_eq(who.ppid, 900);
    ck_assert_uint_eq(cfs_openers_proc_reads(o), 1);
    for (int i = 0; i < 100; i++) {
        cfs_openers_lookup(o, 1201, &who);
        ck_assert_int_eq(who.pid, 1200);
    }
    ck_assert_uint_eq(cfs_openers_proc_reads(o), 1);
    cfs_openers_lookup(o, 1300, &who);
    ck_assert_int_eq(who.pid, 1300);
    ck_assert_int_eq(who.ppid, 1200);
    ck_assert_uint_eq(cfs_openers_proc_reads(o), 2);
    /* Gone (no status): unknown, and asked again next time. */
    cfs_openers_lookup(o, 4444, &who);
    ck_assert_int_eq(who.pid, 0);
    ck_assert_int_eq(who.ppid, 0);
    cfs_openers_lookup(o, 4444, &who);
    ck_assert_uint_eq(cfs_openers_proc_reads(o), 4);
    /* Another pid namespace: FUSE says 0; nothing read. */
    cfs_openers_lookup(o, 0, &who);
    ck_assert_int_eq(who.pid, 0);
    ck_assert_uint_eq(cfs_openers_proc_reads(o), 4);
    /* Entries expire: a reused thread id is read again after a second. */
    write_status(proc, 1300, 1300, 1);
    usleep(1100 * 1000);
    cfs_openers_lookup(o, 1300, &who);
    ck_assert_int_eq(who.ppid, 1);
    ck_assert_uint_eq(cfs_openers_proc_reads(o), 5);
    cfs_openers_destroy(o);
    rm_rf(proc);
}
END_TEST

START_TEST(real_proc_names_this_process)
{
    char err[256];
    struct cfs_openers *o = NULL;
    ck_assert_int_eq(cfs_openers_create("/proc", NULL, &o, err, sizeof(err)), 0);
    struct cfs_opener who;
    cfs_openers_lookup(o, getpid(), &who);
    ck_assert_int_eq(who.pid, getpid());
    ck_assert_int_eq(who.ppid, getppid());
    cfs_openers_destroy(o);
}
END_TEST

START_TEST(record_writes_one_line_per_open)
{
    char dir[] = "/tmp/cfs-opener-rec-XXXXXX", path[300], err[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/opens.txt", dir);
    struct cfs_openers *o = NULL;
    ck_assert_msg(cfs_openers_create("/proc", path, &o, err, sizeof(err)) == 0, "%s", err);
    ck_assert(cfs_openers_recording(o));
    cfs_openers_record(o, &(struct cfs_opener){1300, 1200}, "train/n01/a b.jpg");
    cfs_openers_record(o, &(struct cfs_opener){0, 0}, "val/x.jpg");
    cfs_openers_destroy(o);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[256] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    ck_assert_str_eq(text, "1300 1200 train/n01/a b.jpg\n0 0 val/x.jpg\n");
    /* A record that cannot be written fails the mount in one line. */
    snprintf(path, sizeof(path), "%s/no/such/dir/opens.txt", dir);
    ck_assert_int_eq(cfs_openers_create("/proc", path, &o, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_null(o);
    ck_assert_msg(strstr(err, "record_opens=") && !strchr(err, '\n'), "%s", err);
    rm_rf(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("opener");
    TCase *tc = tcase_create("opener");
    tcase_add_test(tc, lookup_is_cached_per_thread);
    tcase_add_test(tc, real_proc_names_this_process);
    tcase_add_test(tc, record_writes_one_line_per_open);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
