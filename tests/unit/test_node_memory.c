/* The node's memory (node_memory.h), read from trees the test writes: a
 * machine of 512 GiB with 400 GiB available, alone, under a cgroup v2
 * limit (a Slurm job's), under a parent's tighter limit, under cgroup v1,
 * and a machine whose files are missing.  Exact byte counts throughout. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/node_memory.h"

#define GIB (1ull << 30)

static char root[PATH_MAX];

static void put(const char *rel, const char *text)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void fresh(void)
{
    snprintf(root, sizeof(root), "/tmp/clairfs-node-memory.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    put("proc/meminfo", "MemTotal:       536870912 kB\nMemFree:         1000 kB\n"
                        "MemAvailable:   419430400 kB\n");
}

static void cleanup(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

static void read_it(struct cfs_node_memory *m)
{
    char proc[PATH_MAX + 8], cg[PATH_MAX + 8];
    snprintf(proc, sizeof(proc), "%s/proc", root);
    snprintf(cg, sizeof(cg), "%s/cgroup", root);
    cfs_node_memory_read(proc, cg, m);
}

START_TEST(meminfo_alone)
{
    fresh();
    put("proc/self/cgroup", "0::/user.slice\n");
    put("cgroup/user.slice/memory.max", "max\n");
    struct cfs_node_memory m;
    read_it(&m);
    ck_assert_uint_eq(m.total, 512 * GIB);
    ck_assert_uint_eq(m.available, 400 * GIB);
    ck_assert(!m.limited);
    ck_assert_uint_eq(cfs_node_memory_usable(&m), 400 * GIB);
    cleanup();
}
END_TEST

START_TEST(cgroup_v2_limit_less_what_is_not_page_cache)
{
    fresh();
    put("proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_batch\n");
    /* 64 GiB for the job; it holds 10 GiB of which 6 GiB page cache. */
    put("cgroup/system.slice/slurmstepd.scope/job_7/memory.max", "68719476736\n");
    put("cgroup/system.slice/slurmstepd.scope/job_7/memory.current", "10737418240\n");
    put("cgroup/system.slice/slurmstepd.scope/job_7/memory.stat",
        "anon 4294967296\nfile 6442450944\nkernel 0\n");
    put("cgroup/system.slice/slurmstepd.scope/job_7/step_batch/memory.max", "max\n");
    struct cfs_node_memory m;
    read_it(&m);
    ck_assert(m.limited);
    ck_assert_uint_eq(m.cgroup_max, 64 * GIB);
    ck_assert_uint_eq(m.cgroup_room, 60 * GIB);
    ck_assert_str_eq(m.cgroup, "/system.slice/slurmstepd.scope/job_7");
    ck_assert_uint_eq(cfs_node_memory_usable(&m), 60 * GIB);
    cleanup();
}
END_TEST

START_TEST(the_tightest_ancestor_binds)
{
    fresh();
    put("proc/self/cgroup", "0::/a/b\n");
    put("cgroup/a/memory.max", "8589934592\n");     /* 8 GiB */
    put("cgroup/a/memory.current", "1073741824\n"); /* 1 GiB, none of it cache */
    put("cgroup/a/b/memory.max", "17179869184\n");  /* 16 GiB */
    struct cfs_node_memory m;
    read_it(&m);
    ck_assert(m.limited);
    ck_assert_uint_eq(m.cgroup_max, 8 * GIB);
    ck_assert_uint_eq(m.cgroup_room, 7 * GIB);
    ck_assert_str_eq(m.cgroup, "/a");
    cleanup();
}
END_TEST

START_TEST(cgroup_v1_memory_controller)
{
    fresh();
    put("proc/self/cgroup", "12:cpu,cpuacct:/slurm/uid_1/job_3\n"
                            "7:memory:/slurm/uid_1/job_3\n0::/\n");
    put("cgroup/memory/slurm/uid_1/job_3/memory.limit_in_bytes", "34359738368\n"); /* 32 GiB */
    put("cgroup/memory/slurm/uid_1/job_3/memory.usage_in_bytes", "3221225472\n"); /* 3 GiB */
    put("cgroup/memory/slurm/uid_1/job_3/memory.stat", "cache 2147483648\nrss 1073741824\n");
    put("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"); /* none */
    struct cfs_node_memory m;
    read_it(&m);
    ck_assert(m.limited);
    ck_assert_uint_eq(m.cgroup_max, 32 * GIB);
    ck_assert_uint_eq(m.cgroup_room, 31 * GIB);
    cleanup();
}
END_TEST

START_TEST(nothing_readable_is_unknown)
{
    fresh();
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/proc/meminfo", root);
    unlink(path);
    struct cfs_node_memory m;
    read_it(&m);
    ck_assert_uint_eq(m.total, 0);
    ck_assert(!m.limited);
    ck_assert_uint_eq(cfs_node_memory_usable(&m), 0);
    cleanup();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("node_memory");
    TCase *tc = tcase_create("read");
    tcase_add_test(tc, meminfo_alone);
    tcase_add_test(tc, cgroup_v2_limit_less_what_is_not_page_cache);
    tcase_add_test(tc, the_tightest_ancestor_binds);
    tcase_add_test(tc, cgroup_v1_memory_controller);
    tcase_add_test(tc, nothing_readable_is_unknown);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
