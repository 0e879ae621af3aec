/* Index orders rooted below the source (order=KIND:ROOT) and built for any
 * directory by cfs_catalog_order_at(): a dataset root with train/ and val/
 * and files of its own, the roots that cannot be built and why, the mount's
 * root errors, the stored copy's root, and each library's traps on one
 * fixed tree (the random trees against the libraries' code are the golden
 * test library-orders). */
#include <check.h>

#include "catalog_fixture.h"
#include "check_run.h"
#include "clairfs/catalog.h"

/* SRC: the layout users keep, with files at the root and an empty class. */
static void dataset_tree(void)
{
    mkd("src");
    mkf("src/README.jpg", "");
    mkf("src/labels.txt", "");
    mkd("src/train");
    mkd("src/train/dog");
    mkd("src/train/cat");
    mkf("src/train/cat/c2.jpg", "");
    mkf("src/train/cat/c10.JPG", "");
    mkf("src/train/cat/notes.txt", "");
    mkd("src/train/cat/more");
    mkf("src/train/cat/more/m.png", "");
    mkf("src/train/dog/d.jpeg", "");
    mkd("src/val");
    mkd("src/val/cat");
    mkf("src/val/cat/v.jpg", "");
    mkd("src/val/empty");
    mkd("src/flat");
    mkf("src/flat/a.jpg", "");
}

static struct cfs_catalog *open_at(const char *root, enum cfs_order order, bool optional,
                                   const char *index, int want_rc, char *err, size_t errlen)
{
    struct cfs_catalog_params p = {.source = at("src"),
                                   .order = order,
                                   .order_root = root,
                                   .index_dir = index,
                                   .order_optional = optional};
    struct cfs_catalog *c = NULL;
    err[0] = '\0';
    int rc = cfs_catalog_open(&p, &c, err, errlen);
    ck_assert_msg(rc == want_rc, "order root '%s': %d (%s), want %d", root, rc, err, want_rc);
    ck_assert_ptr_nonnull(strchr(err, '\n') == NULL ? err : NULL);
    return c;
}

/* The order at relative path `dir` as "p1|p2|...", or the answer's code. */
static const char *order_str(const struct cfs_catalog *c, enum cfs_order kind, const char *dir,
                             int *rc)
{
    static char buf[4096];
    char why[512] = "";
    cfs_id *s = NULL;
    uint64_t n = 99;
    cfs_id root = cfs_catalog_resolve(c, dir);
    ck_assert_uint_ne(root, CFS_ID_NONE);
    *rc = cfs_catalog_order_at(c, kind, root, &s, &n, why, sizeof(why));
    buf[0] = '\0';
    if (*rc != 0) {
        ck_assert_ptr_null(s);
        ck_assert_uint_eq(n, 0);
        ck_assert_msg(why[0] && !strchr(why, '\n'), "no one-line reason: '%s'", why);
        snprintf(buf, sizeof(buf), "%s", why);
        return buf;
    }
    ck_assert_uint_ge(n, 1);
    for (uint64_t i = 0; i < n; i++) {
        if (i)
            strcat(buf, "|");
        strcat(buf, path_of(c, s[i]));
    }
    free(s);
    return buf;
}

static void assert_order(const struct cfs_catalog *c, enum cfs_order kind, const char *dir,
                         const char *want)
{
    int rc;
    const char *got = order_str(c, kind, dir, &rc);
    ck_assert_msg(rc == 0, "order=%s:%s not built: %d %s", cfs_order_name(kind), dir, rc, got);
    ck_assert_str_eq(got, want);
}

static void assert_unbuildable(const struct cfs_catalog *c, enum cfs_order kind, const char *dir,
                               int want_rc, const char *needle)
{
    int rc;
    const char *why = order_str(c, kind, dir, &rc);
    ck_assert_msg(rc == want_rc, "order=%s:%s gave %d (%s), want %d", cfs_order_name(kind), dir, rc,
                  why, want_rc);
    ck_assert_msg(strstr(why, needle), "reason '%s' lacks '%s'", why, needle);
}

START_TEST(imagefolder_rooted_at_train)
{
    dataset_tree();
    char err[512];
    struct cfs_catalog *c = open_at("train", CFS_ORDER_IMAGEFOLDER, false, NULL, 0, err, 512);
    ck_assert_str_eq(samples_str(c),
                     "train/cat/c10.JPG|train/cat/c2.jpg|train/cat/more/m.png|train/dog/d.jpeg");
    /* The same code, asked directly, for the mount's root and the others. */
    assert_order(c, CFS_ORDER_IMAGEFOLDER, "train", samples_str(c));
    assert_order(c, CFS_ORDER_IMAGEFOLDER, "./train/", samples_str(c));
    ck_assert_uint_eq(cfs_catalog_resolve(c, "train/.."), CFS_ID_NONE); /* not special */
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(roots_that_cannot_be_built)
{
    dataset_tree();
    char err[512];
    struct cfs_catalog *c = open_at("", CFS_ORDER_SORTED, false, NULL, 0, err, 512);
    /* A folder of files without classes, an empty folder, a class without
     * images: not buildable, never an error. */
    assert_unbuildable(c, CFS_ORDER_IMAGEFOLDER, "flat", CFS_ORDER_EMPTY, "no class folder");
    assert_unbuildable(c, CFS_ORDER_IMAGEFOLDER, "val/empty", CFS_ORDER_EMPTY, "'val/empty'");
    assert_unbuildable(c, CFS_ORDER_IMAGEFOLDER, "val", CFS_ORDER_NOT_BUILDABLE, "'empty'");
    /* At the source val/empty is a folder inside class val: no error. */
    assert_order(c, CFS_ORDER_IMAGEFOLDER, "",
                 "flat/a.jpg|train/cat/c10.JPG|train/cat/c2.jpg|train/cat/more/m.png|"
                 "train/dog/d.jpeg|val/cat/v.jpg");
    assert_unbuildable(c, CFS_ORDER_TIMM, "val/empty", CFS_ORDER_EMPTY, "no sample");
    assert_unbuildable(c, CFS_ORDER_MMPRETRAIN, "flat", CFS_ORDER_EMPTY, "no sample");
    /* ultralytics-cls allows the empty class. */
    assert_order(c, CFS_ORDER_ULTRALYTICS_CLS, "val", "val/cat/v.jpg");
    /* Not a directory; not an order of entries. */
    cfs_id *s = (cfs_id *)1;
    uint64_t n = 1;
    char why[256];
    cfs_id file = cfs_catalog_resolve(c, "flat/a.jpg");
    ck_assert_int_eq(cfs_catalog_order_at(c, CFS_ORDER_TIMM, file, &s, &n, why, sizeof(why)),
                     -ENOTDIR);
    ck_assert_int_eq(cfs_catalog_order_at(c, CFS_ORDER_TIMM, 12345, &s, &n, why, sizeof(why)),
                     -ENOTDIR);
    ck_assert_int_eq(cfs_catalog_order_at(c, CFS_ORDER_LIST, 0, &s, &n, why, sizeof(why)), -EINVAL);
    ck_assert_ptr_null(s);
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(mount_root_must_be_a_directory_of_the_source)
{
    dataset_tree();
    char err[512];
    open_at("nope", CFS_ORDER_IMAGEFOLDER, false, NULL, -ENOENT, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(err, "order=imagefolder:nope: 'nope' is not a directory"));
    open_at("flat/a.jpg", CFS_ORDER_TIMM, false, NULL, -ENOTDIR, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(err, "order=timm:flat/a.jpg"));
    /* A class without images below the root: an error, as at the source. */
    open_at("val", CFS_ORDER_IMAGEFOLDER, false, NULL, -ENOENT, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(err, "no image file"));
    /* Without a seed the order is optional: the tree opens, orderless. */
    struct cfs_catalog *c = open_at("nope", CFS_ORDER_IMAGEFOLDER, true, NULL, 0, err, 512);
    ck_assert_ptr_nonnull(strstr(cfs_catalog_order_unavailable(c), "'nope' is not a directory"));
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 0);
    cfs_catalog_destroy(c);
    /* A folder where the order finds nothing is an empty index. */
    c = open_at("flat", CFS_ORDER_IMAGEFOLDER, false, NULL, 0, err, sizeof(err));
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 0);
    ck_assert_ptr_null(cfs_catalog_order_unavailable(c));
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(stored_copy_keeps_the_root)
{
    dataset_tree();
    mkl("..", "src/train/cat/up.jpg"); /* a loop: a directory to os.walk, no sample */
    char err[512];
    struct cfs_catalog *c = open_at("train", CFS_ORDER_TIMM, false, at("ix"), 0, err, 512);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    char want[4096];
    snprintf(want, sizeof(want), "%s", samples_str(c));
    ck_assert_str_eq(want, "train/cat/c2.jpg|train/cat/c10.JPG|train/cat/more/m.png|"
                           "train/dog/d.jpeg");
    uint64_t h = cfs_catalog_hash(c);
    cfs_catalog_destroy(c);
    c = open_at("train", CFS_ORDER_TIMM, false, at("ix"), 0, err, 512);
    ck_assert(cfs_catalog_loaded_from_index(c));
    ck_assert_str_eq(samples_str(c), want);
    ck_assert_uint_eq(cfs_catalog_hash(c), h);
    /* The loaded copy still knows the loop: the same orders as a scan. */
    assert_order(c, CFS_ORDER_IMAGEFOLDER, "train",
                 "train/cat/c10.JPG|train/cat/c2.jpg|train/cat/more/m.png|train/dog/d.jpeg");
    cfs_catalog_destroy(c);
    /* Another root is another order: scanned again, stored again. */
    c = open_at("val", CFS_ORDER_TIMM, false, at("ix"), 0, err, 512);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    ck_assert_str_eq(samples_str(c), "val/cat/v.jpg");
    cfs_catalog_destroy(c);
    c = open_at("", CFS_ORDER_TIMM, false, at("ix"), 0, err, 512);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    ck_assert_str_eq(samples_str(c), "flat/a.jpg|README.jpg|train/cat/c2.jpg|train/cat/c10.JPG|"
                                     "train/cat/more/m.png|train/dog/d.jpeg|val/cat/v.jpg");
    cfs_catalog_destroy(c);
}
END_TEST

/* One tree with each library's traps (digit runs, case, hidden names, a
 * folder named like an image, non-images, an empty class, a broken link),
 * each order written out by hand from the rules in catalog_order.c. */
START_TEST(each_library_handles_its_traps)
{
    const char *dirs[] = {"", "b", "a", ".h", "a/img10", "a/img2", "a/x.jpg", NULL};
    const char *files[] = {"top.png",    "a/img10.jpg", "a/img2.jpg",     "a/IMG3.PNG",
                           "a/.hid.jpg", "a/..jpg",     "a/p.ppm",        "a/t.tiff",
                           "a/w.webp",   "a/n.txt",     "a/img10/z.jpg",  "a/img2/z.jpg",
                           "b/k.heic",   ".h/q.jpg",    "a/x.jpg/in.jpg", "a/img2 b.jpg",
                           "a/Jpeg",     NULL};
    char rel[PATH_MAX];
    for (int i = 0; dirs[i]; i++) {
        snprintf(rel, sizeof(rel), "src/%s", dirs[i]);
        mkd(rel);
    }
    for (int i = 0; files[i]; i++) {
        snprintf(rel, sizeof(rel), "src/%s", files[i]);
        mkf(rel, "");
    }
    mkl("nowhere", "src/a/broken.jpg");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, NULL, false);
    assert_order(c, CFS_ORDER_TIMM, "",
                 ".h/q.jpg|a/.hid.jpg|a/broken.jpg|a/img2 b.jpg|a/img2.jpg|a/img2/z.jpg|"
                 "a/IMG3.PNG|a/img10.jpg|a/img10/z.jpg|a/x.jpg/in.jpg|top.png");
    assert_order(c, CFS_ORDER_MMPRETRAIN, "",
                 ".h/q.jpg|a/IMG3.PNG|a/img10.jpg|a/img10/z.jpg|a/img2 b.jpg|a/img2.jpg|"
                 "a/img2/z.jpg|a/p.ppm|a/x.jpg/in.jpg");
    assert_order(c, CFS_ORDER_ULTRALYTICS, "",
                 "a/IMG3.PNG|a/img10.jpg|a/img10/z.jpg|a/img2 b.jpg|a/img2.jpg|a/img2/z.jpg|"
                 "a/t.tiff|a/w.webp|a/x.jpg/in.jpg|b/k.heic|top.png");
    assert_order(c, CFS_ORDER_ULTRALYTICS_CLS, "",
                 ".h/q.jpg|a/..jpg|a/.hid.jpg|a/IMG3.PNG|a/img10.jpg|a/img2 b.jpg|a/img2.jpg|"
                 "a/t.tiff|a/w.webp|a/img10/z.jpg|a/img2/z.jpg|a/x.jpg/in.jpg");
    assert_unbuildable(c, CFS_ORDER_IMAGEFOLDER, "", CFS_ORDER_NOT_BUILDABLE, "'b'");
    assert_order(c, CFS_ORDER_IMAGEFOLDER, "a", "a/img10/z.jpg|a/img2/z.jpg|a/x.jpg/in.jpg");
    cfs_catalog_destroy(c);
}
END_TEST

/* order= names: what options.c, clairfs-plan and catalog_dump parse. */
START_TEST(order_values_parse)
{
    enum cfs_order k = CFS_ORDER_SORTED;
    const char *arg = NULL;
    ck_assert_int_eq(cfs_order_parse("imagefolder", &k, &arg), 0);
    ck_assert_int_eq(k, CFS_ORDER_IMAGEFOLDER);
    ck_assert_str_eq(arg, "");
    ck_assert_int_eq(cfs_order_parse("ultralytics-cls:data/train", &k, &arg), 0);
    ck_assert_int_eq(k, CFS_ORDER_ULTRALYTICS_CLS);
    ck_assert_str_eq(arg, "data/train");
    ck_assert_int_eq(cfs_order_parse("list:a:b", &k, &arg), 0);
    ck_assert_int_eq(k, CFS_ORDER_LIST);
    ck_assert_str_eq(arg, "a:b");
    k = CFS_ORDER_TIMM;
    ck_assert_int_eq(cfs_order_parse("list", &k, &arg), -EINVAL);
    ck_assert_int_eq(cfs_order_parse("list:", &k, &arg), -EINVAL);
    ck_assert_int_eq(cfs_order_parse("timmy:train", &k, &arg), -EINVAL);
    ck_assert_int_eq(cfs_order_parse("", &k, &arg), -EINVAL);
    ck_assert_int_eq(k, CFS_ORDER_TIMM); /* untouched on error */
    for (int i = 0; i < CFS_ORDER_KINDS; i++) {
        ck_assert_int_eq(cfs_order_parse(cfs_order_name((enum cfs_order)i), &k, &arg),
                         i == CFS_ORDER_LIST ? -EINVAL : 0);
        ck_assert_ptr_nonnull(strstr(CFS_ORDER_NAMES, cfs_order_name((enum cfs_order)i)));
    }
}
END_TEST

static Suite *catalog_order_suite(void)
{
    Suite *s = suite_create("catalog_order");
    TCase *t = tcase_create("order");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, imagefolder_rooted_at_train);
    tcase_add_test(t, roots_that_cannot_be_built);
    tcase_add_test(t, mount_root_must_be_a_directory_of_the_source);
    tcase_add_test(t, stored_copy_keeps_the_root);
    tcase_add_test(t, each_library_handles_its_traps);
    tcase_add_test(t, order_values_parse);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(catalog_order_suite());
}
