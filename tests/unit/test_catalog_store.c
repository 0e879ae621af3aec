/* The catalog's copy in LMDB: reused until a directory or the list file
 * changes, rescanned when damaged or unreadable, shared with an open
 * index, and the copy of a catalog without an index order. */
#include "catalog_fixture.h"
#include "check_run.h"
#include "clairfs/index.h"

static void poke(const char *ixdir, const char *key, const void *val, size_t len)
{
    struct cfs_index *ix;
    struct cfs_index_txn *t;
    char err[256];
    ck_assert_int_eq(cfs_index_open(ixdir, &ix, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_index_begin(ix, true, &t), 0);
    if (val)
        ck_assert_int_eq(cfs_index_put(t, "catalog", key, strlen(key), val, len), 0);
    else
        ck_assert_int_eq(cfs_index_del(t, "catalog", key, strlen(key)), 0);
    ck_assert_int_eq(cfs_index_commit(t), 0);
    cfs_index_close(ix);
}

/* A mount without a seed needs no order: a tree that is no ImageFolder
 * still opens, every file an entry, numbered by sorted path with the
 * reason ImageFolder's order did not build; its stored copy serves the
 * next such open and never one that needs the order. */
START_TEST(optional_order_opens_any_tree)
{
    mkd("src");
    mkd("src/cls");
    mkd("src/deep");
    mkf("src/cls/1.jpg", "a");
    mkf("src/deep/notes.txt", "bb");
    char ix[PATH_MAX], err[512] = "";
    strcpy(ix, at("ix"));
    struct cfs_catalog_params p = {.source = at("src"), .order = CFS_ORDER_IMAGEFOLDER,
                                   .index_dir = ix, .order_optional = true};
    struct cfs_catalog *c = NULL;
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "");
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 2);
    ck_assert_uint_eq(cfs_catalog_file_count(c), 2);
    ck_assert_ptr_null(cfs_catalog_order_unavailable(c));
    ck_assert_ptr_nonnull(strstr(cfs_catalog_order_fallback(c), "class folder 'deep'"));
    ck_assert_uint_eq(cfs_catalog_entry(c, cfs_catalog_resolve(c, "cls/1.jpg"))->sample, 0);
    ck_assert_uint_eq(cfs_catalog_entry(c, cfs_catalog_resolve(c, "deep/notes.txt"))->sample, 1);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    uint64_t hash = cfs_catalog_hash(c);
    cfs_catalog_destroy(c);

    /* Stored, and reused as it is, reason included. */
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), 0);
    ck_assert(cfs_catalog_loaded_from_index(c));
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 2);
    ck_assert_uint_eq(cfs_catalog_hash(c), hash);
    ck_assert_ptr_nonnull(strstr(cfs_catalog_order_fallback(c), "class folder 'deep'"));
    cfs_catalog_destroy(c);

    /* An open that needs the order does not take the stored copy: it scans
     * and fails with the order's own message. */
    p.order_optional = false;
    c = NULL;
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err, "class folder 'deep' holds no image file"));

    /* An order that fits keeps its samples and has no reason. */
    p.order = CFS_ORDER_SORTED;
    p.order_optional = true;
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 2);
    ck_assert_ptr_null(cfs_catalog_order_unavailable(c));
    ck_assert_ptr_null(cfs_catalog_order_fallback(c));
    cfs_catalog_destroy(c);

    /* A list that is not there, optional: no order either. */
    p.order = CFS_ORDER_LIST;
    p.order_list = at("missing.txt");
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 0);
    ck_assert_ptr_nonnull(cfs_catalog_order_unavailable(c));
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(stored_catalog_is_reused_until_a_directory_changes)
{
    mkd("src");
    mkd("src/c");
    mkd("src/c/deep");
    mkf("src/c/1.jpg", "a");
    mkf("src/c/deep/2.jpg", "bb");
    char ix[PATH_MAX];
    strcpy(ix, at("ix"));
    struct cfs_catalog *c1 = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
    ck_assert(!cfs_catalog_loaded_from_index(c1));
    struct stat st;
    ck_assert_int_eq(stat(ix, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);
    ck_assert_int_eq(stat(at("ix/data.mdb"), &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);

    struct cfs_catalog *c2 = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
    ck_assert(cfs_catalog_loaded_from_index(c2));
    ck_assert_uint_eq(cfs_catalog_hash(c2), cfs_catalog_hash(c1));
    ck_assert_uint_eq(cfs_catalog_entry_count(c2), 5);
    ck_assert_uint_eq(cfs_catalog_total_bytes(c2), 3);
    ck_assert_str_eq(samples_str(c2), "c/1.jpg|c/deep/2.jpg");
    ck_assert_uint_eq(cfs_catalog_entry(c2, 3)->size, cfs_catalog_entry(c1, 3)->size);
    cfs_catalog_destroy(c2);

    /* rescan forces a scan, whose result is stored again. */
    c2 = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, true);
    ck_assert(!cfs_catalog_loaded_from_index(c2));
    cfs_catalog_destroy(c2);
    /* Another order is another catalog. */
    c2 = open_ok(at("src"), CFS_ORDER_SORTED, NULL, ix, false);
    ck_assert(!cfs_catalog_loaded_from_index(c2));
    cfs_catalog_destroy(c2);
    c2 = open_ok(at("src"), CFS_ORDER_SORTED, NULL, ix, false);
    ck_assert(cfs_catalog_loaded_from_index(c2));
    cfs_catalog_destroy(c2);

    /* A file added in a nested directory changes only that directory. */
    mkf("src/c/deep/3.jpg", "");
    c2 = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
    ck_assert(!cfs_catalog_loaded_from_index(c2));
    ck_assert_str_eq(samples_str(c2), "c/1.jpg|c/deep/2.jpg|c/deep/3.jpg");
    ck_assert_uint_ne(cfs_catalog_hash(c2), cfs_catalog_hash(c1));
    cfs_catalog_destroy(c2);
    c2 = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
    ck_assert(cfs_catalog_loaded_from_index(c2));
    ck_assert_str_eq(samples_str(c2), "c/1.jpg|c/deep/2.jpg|c/deep/3.jpg");
    cfs_catalog_destroy(c2);
    cfs_catalog_destroy(c1);
}
END_TEST

START_TEST(list_file_change_means_rescan)
{
    mkd("src");
    mkf("src/a", "");
    mkf("src/b", "");
    mkf("list", "a\nb\n");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_LIST, at("list"), at("ix"), false);
    cfs_catalog_destroy(c);
    c = open_ok(at("src"), CFS_ORDER_LIST, at("list"), at("ix"), false);
    ck_assert(cfs_catalog_loaded_from_index(c));
    ck_assert_str_eq(samples_str(c), "a|b");
    cfs_catalog_destroy(c);
    mkf("list", "b\na\n");
    struct timespec ts[2] = {{1, 0}, {1, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, at("list"), ts, 0), 0);
    c = open_ok(at("src"), CFS_ORDER_LIST, at("list"), at("ix"), false);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    ck_assert_str_eq(samples_str(c), "b|a");
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(corrupt_store_means_rescan)
{
    mkd("src");
    mkd("src/c");
    mkf("src/c/1.jpg", "");
    mkf("src/c/2.jpg", "");
    char ix[PATH_MAX];
    strcpy(ix, at("ix"));
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
    uint64_t h = cfs_catalog_hash(c);
    cfs_catalog_destroy(c);
    /* Each damage: a scan with the right result, then the repaired copy is
     * reused. */
    static const char junk[300] = "garbage";
    struct {
        const char *key;
        const void *val;
        size_t len;
    } damage[] = {{"entries", junk, sizeof(junk)}, {"names", junk, 3}, {"samples", junk, 4},
                  {"meta", junk, 8},   {"meta", junk, sizeof(junk)}, {"entries", NULL, 0},
                  {"meta", NULL, 0}};
    for (size_t i = 0; i < sizeof(damage) / sizeof(*damage); i++) {
        poke(ix, damage[i].key, damage[i].val, damage[i].len);
        c = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
        ck_assert_msg(!cfs_catalog_loaded_from_index(c), "damage %zu not seen", i);
        ck_assert_msg(cfs_catalog_hash(c) == h, "damage %zu: other hash", i);
        ck_assert_str_eq(samples_str(c), "c/1.jpg|c/2.jpg");
        cfs_catalog_destroy(c);
        c = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
        ck_assert(cfs_catalog_loaded_from_index(c));
        cfs_catalog_destroy(c);
    }
    /* A stored version from the future: same layout, other number. */
    struct cfs_index *x;
    struct cfs_index_txn *t;
    char err[256];
    const void *v;
    size_t len;
    ck_assert_int_eq(cfs_index_open(ix, &x, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_index_begin(x, false, &t), 0);
    ck_assert_int_eq(cfs_index_get(t, "catalog", "meta", 4, &v, &len), 0);
    char *meta = malloc(len);
    memcpy(meta, v, len);
    cfs_index_abort(t);
    cfs_index_close(x);
    meta[4] = 99; /* the version field follows the magic */
    poke(ix, "meta", meta, len);
    free(meta);
    c = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, ix, false);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(unreadable_environment_is_replaced)
{
    mkd("src");
    mkf("src/a", "");
    mkd("ix");
    mkf("ix/data.mdb", "this is not an LMDB file, not even close; it is much too short anyway"
                       "................................................................");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, at("ix"), false);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    ck_assert_str_eq(samples_str(c), "a");
    cfs_catalog_destroy(c);
    c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, at("ix"), false);
    ck_assert(cfs_catalog_loaded_from_index(c));
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(an_open_index_can_be_shared)
{
    mkd("src");
    mkf("src/a", "");
    struct cfs_index *ix;
    char err[256];
    ck_assert_int_eq(cfs_index_open(at("ix"), &ix, err, sizeof(err)), 0);
    struct cfs_catalog_params p = {.source = at("src"), .order = CFS_ORDER_SORTED,
                                   .index_dir = at("ix"), .index = ix};
    struct cfs_catalog *c;
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), 0);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    cfs_catalog_destroy(c);
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), 0);
    ck_assert(cfs_catalog_loaded_from_index(c));
    cfs_catalog_destroy(c);
    cfs_index_close(ix);
}
END_TEST

static Suite *catalog_store_suite(void)
{
    Suite *s = suite_create("catalog_store");
    TCase *t = tcase_create("store");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, optional_order_opens_any_tree);
    tcase_add_test(t, stored_catalog_is_reused_until_a_directory_changes);
    tcase_add_test(t, list_file_change_means_rescan);
    tcase_add_test(t, corrupt_store_means_rescan);
    tcase_add_test(t, unreadable_environment_is_replaced);
    tcase_add_test(t, an_open_index_can_be_shared);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(catalog_store_suite());
}
