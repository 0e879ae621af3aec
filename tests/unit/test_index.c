/* The LMDB wrapper: permissions, the record API, errno translation, map
 * growth on MDB_MAP_FULL with concurrent readers. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/index.h"

static char tmp[256];
static char ixdir[512];

static void setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp, sizeof(tmp), "%s/cfs-index-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    snprintf(ixdir, sizeof(ixdir), "%s/ix", tmp);
}

static void teardown(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    ck_assert_int_eq(system(cmd), 0);
}

static struct cfs_index *open_ok(void)
{
    struct cfs_index *ix = NULL;
    char err[256] = "";
    int rc = cfs_index_open(ixdir, &ix, err, sizeof(err));
    ck_assert_msg(rc == 0, "open: %d %s", rc, err);
    return ix;
}

static void put_str(struct cfs_index_txn *t, const char *db, const char *k, const char *v)
{
    ck_assert_int_eq(cfs_index_put(t, db, k, strlen(k), v, strlen(v)), 0);
}

static void assert_get(struct cfs_index_txn *t, const char *db, const char *k, const char *want)
{
    const void *v;
    size_t len;
    int rc = cfs_index_get(t, db, k, strlen(k), &v, &len);
    if (!want) {
        ck_assert_int_eq(rc, -ENOENT);
        return;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(len, strlen(want));
    ck_assert_int_eq(memcmp(v, want, len), 0);
}

START_TEST(environment_is_private)
{
    struct cfs_index *ix = open_ok();
    struct stat st;
    ck_assert_int_eq(stat(ixdir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);
    char p[600];
    snprintf(p, sizeof(p), "%s/data.mdb", ixdir);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    snprintf(p, sizeof(p), "%s/lock.mdb", ixdir);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    cfs_index_close(ix);
    cfs_index_close(NULL);
}
END_TEST

START_TEST(bad_directory_is_one_line)
{
    struct cfs_index *ix = (struct cfs_index *)1;
    char err[256] = "", p[600];
    snprintf(p, sizeof(p), "%s/no/such/dir", tmp);
    ck_assert_int_eq(cfs_index_open(p, &ix, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_null(ix);
    ck_assert_ptr_nonnull(strstr(err, p));
    snprintf(p, sizeof(p), "%s/file", tmp);
    FILE *f = fopen(p, "w");
    fclose(f);
    ck_assert_int_eq(cfs_index_open(p, &ix, err, sizeof(err)), -ENOTDIR);
}
END_TEST

struct seen {
    char keys[64];
    int calls, stop_at;
};

static int visit(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct seen *s = arg;
    (void)v;
    ck_assert_uint_eq(vl, 1);
    strncat(s->keys, k, kl);
    return ++s->calls == s->stop_at ? 42 : 0;
}

START_TEST(records_put_get_del_foreach_drop)
{
    struct cfs_index *ix = open_ok();
    struct cfs_index_txn *t;
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    put_str(t, "cache", "b", "2");
    put_str(t, "cache", "a", "1");
    put_str(t, "cache", "c", "3");
    put_str(t, "brand-new", "k", "v");
    assert_get(t, "cache", "a", "1"); /* a transaction sees its own writes */
    ck_assert_int_eq(cfs_index_commit(t), 0);

    ck_assert_int_eq(cfs_index_begin(ix, false, &t), 0);
    assert_get(t, "cache", "b", "2");
    assert_get(t, "cache", "zz", NULL);
    assert_get(t, "brand-new", "k", "v");
    assert_get(t, "never-made", "k", NULL);
    ck_assert_int_eq(cfs_index_put(t, "cache", "x", 1, "y", 1), -EBADF);
    struct seen s = {.stop_at = 0};
    ck_assert_int_eq(cfs_index_foreach(t, "cache", visit, &s), 0);
    ck_assert_str_eq(s.keys, "abc");
    struct seen s2 = {.stop_at = 2};
    ck_assert_int_eq(cfs_index_foreach(t, "cache", visit, &s2), 42);
    ck_assert_str_eq(s2.keys, "ab");
    struct seen s3 = {.stop_at = 0};
    ck_assert_int_eq(cfs_index_foreach(t, "never-made", visit, &s3), 0);
    ck_assert_int_eq(s3.calls, 0);
    cfs_index_abort(t);

    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    ck_assert_int_eq(cfs_index_del(t, "cache", "b", 1), 0);
    ck_assert_int_eq(cfs_index_del(t, "cache", "b", 1), -ENOENT);
    ck_assert_int_eq(cfs_index_drop(t, "brand-new"), 0);
    ck_assert_int_eq(cfs_index_commit(t), 0);

    /* An aborted write leaves nothing behind. */
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    put_str(t, "cache", "d", "4");
    put_str(t, "aborted-db", "k", "v");
    cfs_index_abort(t);
    cfs_index_close(ix);

    ix = open_ok();
    ck_assert_int_eq(cfs_index_begin(ix, false, &t), 0);
    assert_get(t, "cache", "a", "1");
    assert_get(t, "cache", "b", NULL);
    assert_get(t, "cache", "c", "3");
    assert_get(t, "cache", "d", NULL);
    assert_get(t, "brand-new", "k", NULL);
    assert_get(t, "aborted-db", "k", NULL);
    ck_assert_int_eq(cfs_index_commit(t), 0);
    cfs_index_abort(NULL);
    cfs_index_close(ix);
}
END_TEST

#define BIG (1u << 20)

static void fill(unsigned char *buf, unsigned k)
{
    for (unsigned i = 0; i < BIG; i += 4096)
        buf[i] = (unsigned char)(k + i / 4096);
}

static bool big_ok(struct cfs_index_txn *t, unsigned k)
{
    char key[16];
    const void *v;
    size_t len;
    snprintf(key, sizeof(key), "big%05u", k);
    if (cfs_index_get(t, "cache", key, strlen(key), &v, &len) < 0 || len != BIG)
        return false;
    for (unsigned i = 0; i < BIG; i += 4096)
        if (((const unsigned char *)v)[i] != (unsigned char)(k + i / 4096))
            return false;
    return true;
}

struct reader {
    struct cfs_index *ix;
    volatile bool stop;
    int rounds, bad;
};

/* Short read transactions while the writer grows the map. */
static void *read_loop(void *arg)
{
    struct reader *r = arg;
    while (!r->stop) {
        struct cfs_index_txn *t;
        if (cfs_index_begin(r->ix, false, &t) < 0) {
            r->bad++;
            continue;
        }
        const void *v;
        size_t len;
        int rc = cfs_index_get(t, "meta", "marker", 6, &v, &len);
        if (rc != 0 || len != 2 || memcmp(v, "ok", 2) != 0)
            r->bad++;
        cfs_index_abort(t);
        r->rounds++;
    }
    return NULL;
}

START_TEST(map_grows_when_full)
{
    struct cfs_index *ix = open_ok();
    struct cfs_index_txn *t;
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    put_str(t, "meta", "marker", "ok");
    ck_assert_int_eq(cfs_index_commit(t), 0);

    struct reader r = {.ix = ix};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_loop, &r), 0);

    /* 100 MiB in one transaction and 16 MiB in another: well past the
     * initial 64 MiB map, without cfs_index_reserve(). */
    unsigned char *buf = calloc(1, BIG);
    char key[16];
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    for (unsigned k = 0; k < 100; k++) {
        fill(buf, k);
        snprintf(key, sizeof(key), "big%05u", k);
        ck_assert_int_eq(cfs_index_put(t, "cache", key, strlen(key), buf, BIG), 0);
    }
    ck_assert_int_eq(cfs_index_commit(t), 0);
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    for (unsigned k = 100; k < 116; k++) {
        fill(buf, k);
        snprintf(key, sizeof(key), "big%05u", k);
        ck_assert_int_eq(cfs_index_put(t, "cache", key, strlen(key), buf, BIG), 0);
    }
    ck_assert_int_eq(cfs_index_commit(t), 0);
    r.stop = true;
    pthread_join(th, NULL);
    ck_assert_int_eq(r.bad, 0);
    ck_assert_int_gt(r.rounds, 0);
    cfs_index_close(ix);

    ix = open_ok();
    ck_assert_int_eq(cfs_index_begin(ix, false, &t), 0);
    unsigned bad = 0;
    for (unsigned k = 0; k < 116; k++)
        bad += !big_ok(t, k);
    ck_assert_uint_eq(bad, 0);
    cfs_index_abort(t);
    /* Reserve ahead of a write: nothing to grow then. */
    ck_assert_int_eq(cfs_index_reserve(ix, 64u << 20), 0);
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    fill(buf, 7);
    ck_assert_int_eq(cfs_index_put(t, "cache", "big00007", 8, buf, BIG), 0);
    ck_assert_int_eq(cfs_index_commit(t), 0);
    free(buf);
    cfs_index_close(ix);
}
END_TEST

START_TEST(garbage_file_is_an_error_not_a_crash)
{
    ck_assert_int_eq(mkdir(ixdir, 0700), 0);
    char p[600];
    snprintf(p, sizeof(p), "%s/data.mdb", ixdir);
    FILE *f = fopen(p, "w");
    for (int i = 0; i < 20000; i++)
        fputc(i * 7, f);
    fclose(f);
    struct cfs_index *ix;
    char err[256] = "";
    int rc = cfs_index_open(ixdir, &ix, err, sizeof(err));
    ck_assert_int_eq(rc, -EIO);
    ck_assert_ptr_nonnull(strstr(err, ixdir));
}
END_TEST

static Suite *index_suite(void)
{
    Suite *s = suite_create("index");
    TCase *t = tcase_create("index");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, environment_is_private);
    tcase_add_test(t, bad_directory_is_one_line);
    tcase_add_test(t, records_put_get_del_foreach_drop);
    tcase_add_test(t, map_grows_when_full);
    tcase_add_test(t, garbage_file_is_an_error_not_a_crash);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(index_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
