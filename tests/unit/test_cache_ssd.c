/* The cache's SSD tier and persistence: entries that survive a restart,
 * a crash mid-write (kill -9) that leaves nothing servable incomplete,
 * corrupt and changed entries, the SSD bound at restart, a full SSD, no
 * index, demotion of RAM victims, and both bounds under concurrency.  The
 * helpers shared with test_cache.c are cache_fixture.h. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clairfs/cache.h"
#include "clairfs/index.h"
#include "src/cache_ssd.h" /* the record layout, to craft a crashed index */

#include "cache_fixture.h"
#include "check_run.h"

/* ---- SSD tier and persistence */

struct src_table {
    uint64_t size[32];
    struct cfs_cache_source override[32];
    bool overridden[32];
};

static int table_source(void *arg, uint32_t id, struct cfs_cache_source *out)
{
    struct src_table *t = arg;
    if (id >= 32 || t->size[id] == 0)
        return -ENOENT;
    *out = t->overridden[id] ? t->override[id] : src_of(id, t->size[id]);
    return 0;
}

struct ssd_env {
    struct cfs_index *ix;
    struct cfs_cache *c;
    struct src_table src;
};

static int ssd_open(struct ssd_env *env, uint64_t ssd_bytes, enum cfs_cache_verify verify,
                    unsigned batch)
{
    char path[300], err[256];
    struct cfs_cache_params p = {.nfiles = 32,
                                 .ram_bytes = 8 * PAGE,
                                 .ssd_bytes = ssd_bytes,
                                 .ssd_dir = tmpdir,
                                 .source = table_source,
                                 .source_arg = &env->src,
                                 .ssd_verify = verify,
                                 .commit_batch = batch};
    snprintf(path, sizeof(path), "%s/index", tmpdir);
    ck_assert_int_eq(cfs_index_open(path, &env->ix, err, sizeof(err)), 0);
    p.index = env->ix;
    int rc = cfs_cache_create(&p, &env->c, err, sizeof(err));
    ck_assert_msg(rc == 0, "create: %s", err);
    return rc;
}

static void ssd_close(struct ssd_env *env)
{
    cfs_cache_destroy(env->c);
    cfs_index_close(env->ix);
    env->c = NULL;
    env->ix = NULL;
}

static void entry_path(uint32_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/cache/%08x", tmpdir, id);
}

static uint64_t round_page(uint64_t n)
{
    return (n + PAGE - 1) / PAGE * PAGE;
}

static uint64_t fsize(uint32_t id)
{
    return 3000 + id * 1111u;
}

START_TEST(ssd_entries_survive_a_restart)
{
    struct ssd_env env = {0};
    make_tmpdir();
    for (uint32_t id = 0; id < 10; id++)
        env.src.size[id] = fsize(id);
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 4);
    for (uint32_t id = 0; id < 10; id++)
        ck_assert_int_eq(put(env.c, id, fsize(id), CFS_TIER_SSD), 0);
    ck_assert_int_eq(put(env.c, 10, 500, CFS_TIER_RAM), 0);
    ck_assert_int_eq(check_bytes(env.c, 3, fsize(3)), 0);
    struct stat sb;
    char path[300];
    entry_path(3, path, sizeof(path));
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0600);
    ck_assert_uint_eq((uint64_t)sb.st_size, fsize(3));
    struct cfs_cache_stats st;
    cfs_cache_stats(env.c, &st);
    uint64_t ssd_bytes = st.bytes[CFS_TIER_SSD];
    ck_assert_uint_eq(st.entries[CFS_TIER_SSD], 10);
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_int_eq(cfs_cache_drop(env.c, 9), 0); /* dropped: gone for good */
    ssd_close(&env);

    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_FIRST_USE, 4);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 9);
    ck_assert_uint_eq(st.orphans, 0);
    ck_assert_uint_eq(st.incomplete, 0);
    ck_assert_uint_eq(st.stale, 0);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], ssd_bytes - round_page(fsize(9)));
    expect_states(env.c, "sssssssss---");
    ck_assert_str_eq(cfs_cache_state_name(CFS_CACHE_SSD), "ssd");
    for (uint32_t id = 0; id < 9; id++)
        ck_assert_int_eq(check_bytes(env.c, id, fsize(id)), 0);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.checksum_failures, 0);
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

static int count_entry_files(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/cache", tmpdir);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static bool entry_exists(uint32_t id)
{
    char path[300];
    entry_path(id, path, sizeof(path));
    return access(path, F_OK) == 0;
}

static void write_file(const char *path, uint64_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    char *b = calloc(1, len + 1);
    ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
    free(b);
    close(fd);
}

static void put_record(struct cfs_index *ix, uint32_t id, uint8_t state, uint64_t len)
{
    struct cache_rec r = {.magic = CACHE_REC_MAGIC,
                          .version = CACHE_REC_VERSION,
                          .state = state,
                          .tier = CFS_TIER_SSD,
                          .len = len};
    struct cfs_cache_source s = src_of(id, len);
    r.src_size = s.size;
    r.mtime_sec = s.mtime_sec;
    r.mtime_nsec = s.mtime_nsec;
    r.path_hash = s.path_hash;
    unsigned char key[4] = {(unsigned char)(id >> 24), (unsigned char)(id >> 16),
                            (unsigned char)(id >> 8), (unsigned char)id};
    struct cfs_index_txn *t;
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    ck_assert_int_eq(cfs_index_put(t, "cache", key, 4, &r, sizeof(r)), 0);
    ck_assert_int_eq(cfs_index_commit(t), 0);
}

START_TEST(kill_9_leaves_nothing_servable_that_is_incomplete)
{
    make_tmpdir();
    struct ssd_env env = {0};
    for (uint32_t id = 0; id < 10; id++)
        env.src.size[id] = fsize(id);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* The crashing mount: three committed entries, two written but not
         * yet recorded, a temp file mid-write, an INFLIGHT record with a
         * partial file, a COMPLETE record whose file was cut short. */
        char path[300];
        ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1000);
        for (uint32_t id = 0; id < 3; id++)
            if (put(env.c, id, fsize(id), CFS_TIER_SSD))
                _exit(2);
        if (cfs_cache_sync(env.c))
            _exit(3);
        for (uint32_t id = 3; id < 5; id++)
            if (put(env.c, id, fsize(id), CFS_TIER_SSD))
                _exit(4);
        snprintf(path, sizeof(path), "%s/cache/%08x.tmp", tmpdir, 5u);
        write_file(path, 100);
        put_record(env.ix, 6, CACHE_REC_INFLIGHT, fsize(6));
        entry_path(6, path, sizeof(path));
        write_file(path, 200);
        put_record(env.ix, 7, CACHE_REC_COMPLETE, fsize(7));
        entry_path(7, path, sizeof(path));
        write_file(path, fsize(7) - 1);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(count_entry_files(), 8);

    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1000);
    struct cfs_cache_stats st;
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 3);
    ck_assert_uint_eq(st.incomplete, 2);
    ck_assert_uint_eq(st.orphans, 5); /* 3, 4, 5.tmp, 6, 7 */
    ck_assert_uint_eq(st.stale, 0);
    expect_states(env.c, "sss-------");
    ck_assert_int_eq(count_entry_files(), 3);
    for (uint32_t id = 3; id < 8; id++)
        ck_assert(!entry_exists(id));
    for (uint32_t id = 0; id < 3; id++)
        ck_assert_int_eq(check_bytes(env.c, id, fsize(id)), 0);
    struct cfs_cache_handle h;
    ck_assert_int_eq(cfs_cache_acquire(env.c, 7, 0, &h), -ENOENT);
    ck_assert_int_eq(put(env.c, 7, fsize(7), CFS_TIER_SSD), 0);
    ssd_close(&env);

    /* The recovery was committed: the next open finds a clean index. */
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1000);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 4);
    ck_assert_uint_eq(st.incomplete + st.orphans + st.stale, 0);
    expect_states(env.c, "sss----s--");
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

static void flip_byte(uint32_t id, off_t off)
{
    char path[300];
    uint8_t b;
    entry_path(id, path, sizeof(path));
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

START_TEST(corrupt_ssd_entry_is_detected_counted_and_absent)
{
    make_tmpdir();
    struct ssd_env env = {0};
    struct cfs_cache_stats st;
    for (uint32_t id = 0; id < 4; id++)
        env.src.size[id] = fsize(id);

    /* In a session, verifying on every open. */
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 1);
    for (uint32_t id = 0; id < 4; id++)
        ck_assert_int_eq(put(env.c, id, fsize(id), CFS_TIER_SSD), 0);
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), 0);
    flip_byte(0, 1234);
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), -ENOENT);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.checksum_failures, 1);
    ck_assert_int_eq(cfs_cache_state(env.c, 0), CFS_CACHE_ABSENT);
    ck_assert(!entry_exists(0));
    ck_assert_int_eq(put(env.c, 0, fsize(0), CFS_TIER_SSD), 0); /* refetched */
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), 0);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.refetches, 1);
    ssd_close(&env);

    /* After a restart, verifying on first use only. */
    flip_byte(2, 0);
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_FIRST_USE, 1);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 4); /* length is right: only the checksum can tell */
    ck_assert_int_eq(check_bytes(env.c, 1, fsize(1)), 0);
    ck_assert_int_eq(check_bytes(env.c, 2, fsize(2)), -ENOENT);
    ck_assert_int_eq(check_bytes(env.c, 2, fsize(2)), -ENOENT);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.checksum_failures, 1);
    expect_states(env.c, "ss-s");
    ssd_close(&env);

    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_FIRST_USE, 1);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 3);
    expect_states(env.c, "ss-s");
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

START_TEST(changed_source_invalidates_stored_entries)
{
    make_tmpdir();
    struct ssd_env env = {0};
    struct cfs_cache_stats st;
    for (uint32_t id = 0; id < 6; id++)
        env.src.size[id] = fsize(id);
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    for (uint32_t id = 0; id < 6; id++)
        ck_assert_int_eq(put(env.c, id, fsize(id), CFS_TIER_SSD), 0);
    ssd_close(&env);

    env.src.overridden[1] = true;
    env.src.override[1] = src_of(1, fsize(1));
    env.src.override[1].mtime_sec++;
    env.src.overridden[2] = true;
    env.src.override[2] = src_of(2, fsize(2));
    env.src.override[2].mtime_nsec++;
    env.src.size[3] = fsize(3) + 1;
    env.src.overridden[4] = true;
    env.src.override[4] = src_of(4, fsize(4));
    env.src.override[4].path_hash ^= 1; /* another file got this id */
    env.src.size[5] = 0;                /* gone from the catalog */
    ssd_open(&env, 1 << 20, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 1);
    ck_assert_uint_eq(st.stale, 5);
    ck_assert_uint_eq(st.orphans, 5);
    expect_states(env.c, "s-----");
    ck_assert_int_eq(count_entry_files(), 1);
    ck_assert_int_eq(check_bytes(env.c, 0, fsize(0)), 0);
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

START_TEST(ssd_bound_holds_and_shrinks_at_restart)
{
    make_tmpdir();
    struct ssd_env env = {0};
    struct cfs_cache_stats st;
    for (uint32_t id = 0; id < 8; id++)
        env.src.size[id] = 4000 + id;
    ssd_open(&env, 4 * PAGE, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    for (uint32_t id = 0; id < 6; id++) {
        ck_assert_int_eq(put(env.c, id, 4000 + id, CFS_TIER_SSD), 0);
        cfs_cache_stats(env.c, &st);
        ck_assert_uint_le(st.bytes[CFS_TIER_SSD], 4 * PAGE);
    }
    ck_assert_uint_eq(st.evictions[CFS_TIER_SSD], 2);
    expect_states(env.c, "--ssss");
    ck_assert_int_eq(count_entry_files(), 4);
    ssd_close(&env);

    ssd_open(&env, 2 * PAGE, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], 2 * PAGE);
    ck_assert_uint_eq(st.entries[CFS_TIER_SSD], 2);
    ck_assert_int_eq(count_entry_files(), 2);
    ssd_close(&env);
    ssd_open(&env, 2 * PAGE, CFS_CACHE_VERIFY_EVERY_OPEN, 64);
    cfs_cache_stats(env.c, &st);
    ck_assert_uint_eq(st.loaded, 2);
    ssd_close(&env);
    remove_tmpdir();
}
END_TEST

START_TEST(full_ssd_degrades_the_tier)
{
    /* A 64 KiB tmpfs in a private mount namespace: gone when we exit. */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        fprintf(stderr, "full_ssd_degrades_the_tier: no mount namespace, not checked\n");
        return;
    }
    make_tmpdir();
    ck_assert_int_eq(mount("tmpfs", tmpdir, "tmpfs", 0, "size=64k,mode=0700"), 0);
    struct cfs_cache_params p = {
        .nfiles = 16, .ram_bytes = 16 * PAGE, .ssd_bytes = 1 << 20, .ssd_dir = tmpdir};
    struct cfs_cache *c;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    int rc = 0;
    uint32_t id;
    for (id = 0; id < 16 && rc == 0; id++)
        rc = put(c, id, 20000, CFS_TIER_SSD);
    ck_assert_int_eq(rc, -ENOSPC);
    uint32_t failed = id - 1;
    ck_assert_uint_ge(failed, 1);
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert(st.ssd_degraded);
    ck_assert_uint_eq(st.ssd_write_errors, 1);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], failed * round_page(20000));
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_int_eq(cfs_cache_state(c, failed), CFS_CACHE_ABSENT);
    ck_assert_int_eq(put(c, failed, 20000, CFS_TIER_SSD), -ENODEV);
    ck_assert_int_eq(put(c, failed, 20000, CFS_TIER_RAM), 0);
    for (id = 0; id < failed; id++)
        ck_assert_int_eq(check_bytes(c, id, 20000), 0);
    ck_assert_int_eq(check_bytes(c, failed, 20000), 0);
    cfs_cache_destroy(c);
    umount(tmpdir);
    remove_tmpdir();
}
END_TEST

START_TEST(ssd_without_index_starts_empty)
{
    make_tmpdir();
    struct cfs_cache_params p = {
        .nfiles = 8, .ram_bytes = PAGE, .ssd_bytes = 1 << 20, .ssd_dir = tmpdir};
    struct cfs_cache *c;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(put(c, 1, 5000, CFS_TIER_SSD), 0);
    ck_assert_int_eq(check_bytes(c, 1, 5000), 0);
    cfs_cache_destroy(c);
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    struct cfs_cache_stats st;
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.orphans, 1);
    ck_assert_uint_eq(st.loaded, 0);
    ck_assert_int_eq(cfs_cache_state(c, 1), CFS_CACHE_ABSENT);
    cfs_cache_destroy(c);
    p.ssd_dir = NULL;
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "ssd_dir"));
    cfs_cache_destroy(NULL);
    remove_tmpdir();
}
END_TEST

START_TEST(ram_victims_needed_again_move_to_ssd)
{
    make_tmpdir();
    uint64_t table[] = {10, 20, 5, 2, 1, 30};
    memcpy(next_use_table, table, sizeof(table));
    struct cfs_cache_params p = {.nfiles = 8,
                                 .ram_bytes = 2 * PAGE,
                                 .ssd_bytes = 2 * PAGE,
                                 .ssd_dir = tmpdir,
                                 .next_use = table_next_use};
    struct cfs_cache *c;
    struct cfs_cache_stats st;
    char err[256];
    ck_assert_int_eq(cfs_cache_create(&p, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(put(c, 0, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 1, PAGE, CFS_TIER_RAM), 0);
    ck_assert_int_eq(put(c, 2, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "rsr");
    struct cfs_cache_handle h;
    ck_assert_int_eq(cfs_cache_acquire(c, 1, 0, &h), 0);
    ck_assert_int_eq(h.tier, CFS_TIER_SSD);
    cfs_cache_release(c, &h);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0); /* evicts 0 (10) to SSD */
    expect_states(c, "ssrr");
    ck_assert_int_eq(cfs_cache_drop(c, 3), 0);
    ck_assert_int_eq(put(c, 4, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "ssr-r");
    /* 2 (5) leaves RAM for 5; on SSD it displaces 1 (20), not 0 (10). */
    ck_assert_int_eq(put_flags(c, 5, PAGE, CFS_TIER_RAM, CFS_CACHE_DEMAND), 0);
    expect_states(c, "s-s-rr");
    /* A victim never used again is not worth an SSD copy. */
    next_use_table[4] = UINT64_MAX;
    cfs_cache_touch(c, 4);
    ck_assert_int_eq(put(c, 3, PAGE, CFS_TIER_RAM), 0);
    expect_states(c, "s-sr-r");
    cfs_cache_stats(c, &st);
    ck_assert_uint_eq(st.demotions, 3);
    ck_assert_uint_eq(st.evictions[CFS_TIER_RAM], 4);
    ck_assert_uint_eq(st.evictions[CFS_TIER_SSD], 1);
    ck_assert_uint_eq(st.bytes[CFS_TIER_RAM], 2 * PAGE);
    ck_assert_uint_eq(st.bytes[CFS_TIER_SSD], 2 * PAGE);
    ck_assert_uint_eq(st.staging_bytes, 0);
    ck_assert_uint_eq(st.inflight, 0);
    const uint32_t alive[] = {0, 2, 3, 5};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(check_bytes(c, alive[i], PAGE), 0);
    cfs_cache_destroy(c);
    remove_tmpdir();
}
END_TEST

START_TEST(both_bounds_hold_with_concurrent_threads_and_demotion)
{
    run_concurrent(60 * PAGE);
}
END_TEST

static Suite *cache_ssd_suite(void)
{
    Suite *s = suite_create("cache_ssd");
    TCase *t = tcase_create("ssd");
    tcase_add_test(t, ssd_entries_survive_a_restart);
    tcase_add_test(t, kill_9_leaves_nothing_servable_that_is_incomplete);
    tcase_add_test(t, corrupt_ssd_entry_is_detected_counted_and_absent);
    tcase_add_test(t, changed_source_invalidates_stored_entries);
    tcase_add_test(t, ssd_bound_holds_and_shrinks_at_restart);
    tcase_add_test(t, full_ssd_degrades_the_tier);
    tcase_add_test(t, ssd_without_index_starts_empty);
    tcase_add_test(t, ram_victims_needed_again_move_to_ssd);
    tcase_add_test(t, both_bounds_hold_with_concurrent_threads_and_demotion);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(cache_ssd_suite());
}
