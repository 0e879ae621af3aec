/* The LMDB wrapper: permissions, the record API, errno translation, map
 * growth on MDB_MAP_FULL with concurrent readers. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/index.h"
#include "clairfs/index_check.h"

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

/* ---- the health check at mount (index_check.h) */

/* An environment with a structure to damage: 600 small records over many
 * leaf pages, and a blob on overflow pages. */
static void fill_env(void)
{
    struct cfs_index *ix = open_ok();
    struct cfs_index_txn *t;
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    for (int i = 0; i < 600; i++) {
        char k[16], v[64];
        snprintf(k, sizeof(k), "%08d", i);
        memset(v, 'a' + i % 26, sizeof(v));
        ck_assert_int_eq(cfs_index_put(t, "cache", k, strlen(k), v, sizeof(v)), 0);
    }
    static char blob[40000];
    memset(blob, 'b', sizeof(blob));
    ck_assert_int_eq(cfs_index_put(t, "catalog", "entries", 7, blob, sizeof(blob)), 0);
    ck_assert_int_eq(cfs_index_commit(t), 0);
    cfs_index_close(ix);
}

static off_t data_size(void)
{
    char path[600];
    struct stat st;
    snprintf(path, sizeof(path), "%s/data.mdb", ixdir);
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_size;
}

/* 4 KiB of pseudo-random bytes (xorshift from seed) at off in data.mdb. */
static void scribble(off_t off, uint64_t seed)
{
    char path[600];
    unsigned char buf[4096];
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    snprintf(path, sizeof(path), "%s/data.mdb", ixdir);
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), off), (ssize_t)sizeof(buf));
    close(fd);
}

START_TEST(check_passes_a_sound_environment)
{
    char why[256];
    ck_assert_int_eq(cfs_index_check(ixdir, why, sizeof(why)), 0); /* none yet */
    fill_env();
    ck_assert_msg(cfs_index_check(ixdir, why, sizeof(why)) == 0, "sound env: %s", why);
    ck_assert_int_eq(cfs_index_recover(ixdir, why, sizeof(why)), 0);
}
END_TEST

/* Every page of the file damaged in turn: the verdict is sound (a free
 * page, or bytes only a record's own check can see) or -EBADMSG, never an
 * abort of this process; the structural pages are caught. */
START_TEST(check_catches_damage_without_dying)
{
    char why[256], cmd[2000];
    fill_env();
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s.good'", ixdir, ixdir);
    ck_assert_int_eq(system(cmd), 0);
    off_t size = data_size();
    int caught = 0, pages = 0;
    for (off_t off = 0; off < size; off += 4096, pages++) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s.good' '%s'", ixdir, ixdir, ixdir);
        ck_assert_int_eq(system(cmd), 0);
        scribble(off, (uint64_t)off + 1);
        int rc = cfs_index_check(ixdir, why, sizeof(why));
        ck_assert_msg(rc == 0 || rc == -EBADMSG, "page %lld: %d %s", (long long)off / 4096, rc,
                      why);
        if (off == 0 || off == 8192 || off == size - 4096 || off == size / 2 / 4096 * 4096)
            fprintf(stderr, "page %lld: %d %s\n", (long long)off / 4096, rc, why);
        caught += rc == -EBADMSG;
    }
    /* The meta pages, the roots and the leaves of 600 records. */
    ck_assert_msg(caught >= 4, "%d of %d damaged pages caught", caught, pages);
}
END_TEST

START_TEST(check_catches_a_truncated_file)
{
    char path[600], why[256];
    fill_env();
    snprintf(path, sizeof(path), "%s/data.mdb", ixdir);
    ck_assert_int_eq(truncate(path, data_size() / 2), 0);
    ck_assert_int_eq(cfs_index_check(ixdir, why, sizeof(why)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(why, "truncated"));
    ck_assert_int_eq(truncate(path, 100), 0);
    ck_assert_int_eq(cfs_index_check(ixdir, why, sizeof(why)), -EBADMSG);
}
END_TEST

START_TEST(check_refuses_another_format)
{
    char why[256];
    struct cfs_index *ix = open_ok();
    struct cfs_index_txn *t;
    const void *v;
    size_t len;
    ck_assert_int_eq(cfs_index_begin(ix, false, &t), 0);
    ck_assert_int_eq(cfs_index_get(t, "meta", "format", 6, &v, &len), 0);
    ck_assert_uint_eq(len, strlen(CFS_INDEX_FORMAT));
    cfs_index_abort(t);
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    put_str(t, "meta", "format", "clairfs-index 99");
    ck_assert_int_eq(cfs_index_commit(t), 0);
    cfs_index_close(ix);
    ck_assert_int_eq(cfs_index_check(ixdir, why, sizeof(why)), -EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "clairfs-index 99"));
}
END_TEST

/* Damage moved aside to DIR.damaged, one copy however often; the directory
 * then opens as a new, empty environment. */
START_TEST(recover_moves_damage_aside_once)
{
    char note[1024], path[700];
    struct stat st;
    for (int round = 0; round < 2; round++) {
        fill_env();
        scribble(8192, 7); /* the first page after the meta pages: a root */
        scribble(data_size() / 2 / 4096 * 4096, 8);
        ck_assert_int_eq(cfs_index_recover(ixdir, note, sizeof(note)), 1);
        ck_assert_msg(strstr(note, "is damaged (") && strstr(note, ".damaged, rebuilding"),
                      "%s", note);
        snprintf(path, sizeof(path), "%s.damaged/data.mdb", ixdir);
        ck_assert_int_eq(stat(path, &st), 0);
        snprintf(path, sizeof(path), "%s/data.mdb", ixdir);
        ck_assert_int_eq(stat(path, &st), -1);
    }
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "test $(ls '%s.damaged' | wc -l) -le 2", ixdir);
    ck_assert_int_eq(system(cmd), 0);
    struct cfs_index *ix = open_ok();
    struct cfs_index_txn *t;
    ck_assert_int_eq(cfs_index_begin(ix, false, &t), 0);
    assert_get(t, "cache", "00000001", NULL);
    cfs_index_abort(t);
    cfs_index_close(ix);
    ck_assert_int_eq(cfs_index_check(ixdir, note, sizeof(note)), 0);
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
    tcase_add_test(t, check_passes_a_sound_environment);
    tcase_add_test(t, check_catches_damage_without_dying);
    tcase_add_test(t, check_catches_a_truncated_file);
    tcase_add_test(t, check_refuses_another_format);
    tcase_add_test(t, recover_moves_damage_aside_once);
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
