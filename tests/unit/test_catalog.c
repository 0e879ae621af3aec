/* Catalog: id scheme, lookup, paths, every index order (ImageFolder against
 * torchvision's golden files), hashes, synthetic catalogs and bad sources;
 * the copy in LMDB is test_catalog_store.c. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog_fixture.h"
#include "check_run.h"
#include "clairfs/catalog.h"
#include "clairfs/index.h"

START_TEST(ids_are_breadth_first_sorted_and_contiguous)
{
    mkd("src");
    mkd("src/b");
    mkd("src/c");
    mkf("src/a.txt", "hello");
    mkf("src/b/y", "");
    mkf("src/b/x", "12");
    mkf("src/c/z", "");
    chmod(at("src/a.txt"), 0640);
    struct timespec ts[2] = {{1000, 5}, {1234567890, 123456789}};
    ck_assert_int_eq(utimensat(AT_FDCWD, at("src/a.txt"), ts, 0), 0);

    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, NULL, false);
    ck_assert_uint_eq(cfs_catalog_entry_count(c), 7);
    const char *names[] = {"", "a.txt", "b", "c", "x", "y", "z"};
    const char *paths[] = {"", "a.txt", "b", "c", "b/x", "b/y", "c/z"};
    const cfs_id parents[] = {CFS_ID_NONE, 0, 0, 0, 2, 2, 3};
    for (cfs_id i = 0; i < 7; i++) {
        ck_assert_str_eq(cfs_catalog_name(c, i), names[i]);
        ck_assert_str_eq(path_of(c, i), paths[i]);
        ck_assert_uint_eq(cfs_catalog_entry(c, i)->parent, parents[i]);
    }
    const struct cfs_entry *r = cfs_catalog_entry(c, 0), *b = cfs_catalog_entry(c, 2);
    ck_assert_uint_eq(r->first_child, 1);
    ck_assert_uint_eq(r->nchildren, 3);
    ck_assert_uint_eq(b->first_child, 4);
    ck_assert_uint_eq(b->nchildren, 2);
    ck_assert_uint_eq(cfs_catalog_entry(c, 3)->first_child, 6);
    ck_assert_uint_eq(cfs_catalog_entry(c, 3)->nchildren, 1);
    ck_assert(S_ISDIR(r->mode));

    const struct cfs_entry *a = cfs_catalog_entry(c, 1);
    struct stat st;
    ck_assert_int_eq(stat(at("src/a.txt"), &st), 0);
    ck_assert_uint_eq(a->size, 5);
    ck_assert_uint_eq(a->mode, S_IFREG | 0640);
    ck_assert_int_eq(a->mtime_sec, 1234567890);
    ck_assert_uint_eq(a->mtime_nsec, 123456789);
    ck_assert_uint_eq(a->uid, st.st_uid);
    ck_assert_uint_eq(a->gid, st.st_gid);
    ck_assert_uint_eq(a->nlink, 1);
    ck_assert_uint_eq(cfs_catalog_entry(c, 4)->size, 2);
    ck_assert_uint_eq(b->nlink, 2);
    ck_assert_ptr_null(cfs_catalog_entry(c, 7));

    ck_assert_uint_eq(cfs_catalog_file_count(c), 4);
    ck_assert_uint_eq(cfs_catalog_dir_count(c), 3);
    ck_assert_uint_eq(cfs_catalog_total_bytes(c), 7);
    ck_assert_uint_eq(cfs_catalog_skipped(c), 0);
    ck_assert(!cfs_catalog_loaded_from_index(c));
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(lookup_finds_every_child_and_nothing_else)
{
    mkd("src");
    char rel[64];
    for (int i = 0; i < 500; i++) {
        snprintf(rel, sizeof(rel), "src/f%03d", i * 2);
        mkf(rel, "");
    }
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, NULL, false);
    for (int i = 0; i < 1000; i++) {
        snprintf(rel, sizeof(rel), "f%03d", i);
        cfs_id id = cfs_catalog_lookup(c, 0, rel);
        if (i % 2)
            ck_assert_uint_eq(id, CFS_ID_NONE);
        else
            ck_assert_uint_eq(id, 1 + i / 2);
    }
    ck_assert_uint_eq(cfs_catalog_lookup(c, 0, ""), CFS_ID_NONE);
    ck_assert_uint_eq(cfs_catalog_lookup(c, 0, "f0000"), CFS_ID_NONE);
    ck_assert_uint_eq(cfs_catalog_lookup(c, 1, "x"), CFS_ID_NONE); /* a file */
    ck_assert_uint_eq(cfs_catalog_lookup(c, 9999, "f000"), CFS_ID_NONE);
    char small[8];
    ck_assert_int_eq(cfs_catalog_path(c, 1, small, 4), -ENAMETOOLONG);
    ck_assert_int_eq(cfs_catalog_path(c, 1, small, 5), 4);
    ck_assert_str_eq(small, "f000");
    ck_assert_int_eq(cfs_catalog_path(c, 0, small, 1), 0);
    ck_assert_str_eq(small, "");
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(sorted_order_is_bytewise_by_whole_path)
{
    mkd("src");
    mkd("src/a");
    mkd("src/a b");
    mkd("src/a/x");
    mkd("src/empty");
    mkf("src/a/x/1", "");
    mkf("src/a/2", "");
    mkf("src/a b/3", "");
    mkf("src/a-", "");
    mkf("src/a0", "");
    mkf("src/B", "");
    mkf("src/\xff", "");
    mkl("a0", "src/link-to-file");
    mkl("a", "src/link-to-dir");
    mkl("nowhere", "src/broken");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, NULL, false);
    ck_assert_str_eq(samples_str(c), "B|a b/3|a-|a/2|a/x/1|a0|link-to-dir/2|link-to-dir/x/1|"
                                     "link-to-file|\xff");
    ck_assert_uint_eq(cfs_catalog_file_count(c), 10);
    /* Not a sample: directories and the broken link. */
    cfs_id br = cfs_catalog_lookup(c, 0, "broken");
    ck_assert(S_ISLNK(cfs_catalog_entry(c, br)->mode));
    ck_assert_uint_eq(cfs_catalog_entry(c, br)->sample, CFS_NO_SAMPLE);
    ck_assert_uint_eq(cfs_catalog_entry(c, 0)->sample, CFS_NO_SAMPLE);
    cfs_catalog_destroy(c);
}
END_TEST

/* ---- ImageFolder golden files (tests/golden/gen_imagefolder_golden.py) ---- */

static size_t unescape(const char *s, char *out)
{
    size_t n = 0;
    while (*s) {
        if (s[0] == '\\' && s[1] == 'x') {
            char hex[3] = {s[2], s[3], 0};
            out[n++] = (char)strtol(hex, NULL, 16);
            s += 4;
        } else if (s[0] == '\\' && s[1] == '\\') {
            out[n++] = '\\';
            s += 2;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
    return n;
}

static void build_spec(const char *spec, const char *root)
{
    FILE *f = fopen(spec, "r");
    ck_assert_msg(f != NULL, "%s: %s", spec, strerror(errno));
    char line[4096], p[PATH_MAX], t[PATH_MAX], full[PATH_MAX + 512];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        char *f1 = strchr(line, '\t');
        ck_assert_ptr_nonnull(f1);
        *f1++ = '\0';
        char *f2 = strchr(f1, '\t');
        if (f2)
            *f2++ = '\0';
        unescape(f1, p);
        snprintf(full, sizeof(full), "%s/%s", root, p);
        int rc = 0;
        if (line[0] == 'd') {
            rc = mkdir(full, 0755);
        } else if (line[0] == 'f') {
            rc = open(full, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (rc >= 0)
                rc = close(rc);
        } else {
            ck_assert_ptr_nonnull(f2);
            unescape(f2, t);
            rc = symlink(t, full);
        }
        ck_assert_msg(rc == 0, "%s: %s: %s", spec, line, strerror(errno));
    }
    fclose(f);
}

static void check_golden(const char *name)
{
    const char *srcroot = getenv("CLAIRFS_SOURCE_ROOT");
    ck_assert_msg(srcroot != NULL, "CLAIRFS_SOURCE_ROOT not set");
    char spec[PATH_MAX], golden[PATH_MAX], root[512];
    snprintf(spec, sizeof(spec), "%s/tests/golden/imagefolder/%s.tree", srcroot, name);
    snprintf(golden, sizeof(golden), "%s/tests/golden/imagefolder/%s.golden", srcroot, name);
    snprintf(root, sizeof(root), "%s/%s", tmp, name);
    ck_assert_int_eq(mkdir(root, 0755), 0);
    build_spec(spec, root);

    struct cfs_catalog_params p = {.source = root, .order = CFS_ORDER_IMAGEFOLDER};
    struct cfs_catalog *c = NULL;
    char err[512] = "";
    int rc = cfs_catalog_open(&p, &c, err, sizeof(err));

    FILE *g = fopen(golden, "r");
    ck_assert_msg(g != NULL, "%s: %s", golden, strerror(errno));
    char line[4096], want[PATH_MAX];
    uint64_t i = 0;
    while (fgets(line, sizeof(line), g)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '!') {
            ck_assert_str_eq(line, "!FileNotFoundError");
            ck_assert_msg(rc == -ENOENT, "%s: torchvision raises, clairfs gave %d", name, rc);
            ck_assert_msg(strstr(err, "no image file") != NULL, "message: %s", err);
            fclose(g);
            return;
        }
        ck_assert_msg(rc == 0, "%s: %s", name, err);
        unescape(line, want);
        ck_assert_msg(i < cfs_catalog_sample_count(c), "%s: only %llu samples", name,
                      (unsigned long long)i);
        ck_assert_msg(strcmp(path_of(c, cfs_catalog_sample_entry(c, i)), want) == 0,
                      "%s: sample %llu is '%s', torchvision has '%s'", name,
                      (unsigned long long)i, path_of(c, cfs_catalog_sample_entry(c, i)), line);
        i++;
    }
    fclose(g);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), i);
    cfs_catalog_destroy(c);
}

START_TEST(imagefolder_matches_torchvision_nested)
{
    check_golden("nested");
}
END_TEST

START_TEST(imagefolder_matches_torchvision_names)
{
    check_golden("names");
}
END_TEST

START_TEST(imagefolder_matches_torchvision_symlinks)
{
    check_golden("symlinks");
}
END_TEST

START_TEST(imagefolder_class_without_images_is_an_error)
{
    check_golden("emptyclass");
}
END_TEST

START_TEST(imagefolder_without_classes_is_empty)
{
    mkd("src");
    mkf("src/a.jpg", "");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, NULL, false);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 0);
    ck_assert_uint_eq(cfs_catalog_file_count(c), 1);
    cfs_catalog_destroy(c);
}
END_TEST

/* ---- order=list ---- */

START_TEST(list_order_follows_the_file)
{
    mkd("src");
    mkd("src/d");
    mkf("src/d/a b", "");
    mkf("src/#x", "");
    mkf("src/z", "");
    mkf("list", "z\n\n./d//a b\n#x\nz");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_LIST, at("list"), NULL, false);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 4);
    const char *want[] = {"z", "d/a b", "#x", "z"};
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(path_of(c, cfs_catalog_sample_entry(c, (uint64_t)i)), want[i]);
    /* A repeated path keeps its first position. */
    ck_assert_uint_eq(cfs_catalog_entry(c, cfs_catalog_lookup(c, 0, "z"))->sample, 0);
    ck_assert_uint_eq(cfs_catalog_sample_entry(c, 4), CFS_ID_NONE);
    cfs_catalog_destroy(c);
}
END_TEST

static void assert_list_rejected(const char *content, int want_rc, const char *needle)
{
    mkf("list", content);
    struct cfs_catalog_params p = {
        .source = at("src"), .order = CFS_ORDER_LIST, .order_list = at("list")};
    struct cfs_catalog *c = NULL;
    char err[512] = "";
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), want_rc);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    ck_assert_msg(strstr(err, at("list")) != NULL, "message '%s' lacks the file", err);
    ck_assert_ptr_null(strchr(err, '\n'));
}

START_TEST(list_order_rejects_paths_not_in_source)
{
    mkd("src");
    mkd("src/d");
    mkf("src/d/f", "");
    assert_list_rejected("d/f\nd/f\nd/g\n", -ENOENT, "line 3: 'd/g' is not in the source");
    assert_list_rejected("d\n", -EISDIR, "line 1: 'd' is a directory");
    assert_list_rejected("d/f/x\n", -ENOENT, "line 1");
    struct cfs_catalog_params p = {.source = at("src"), .order = CFS_ORDER_LIST,
                                   .order_list = at("missing")};
    struct cfs_catalog *c = NULL;
    char err[512] = "";
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "missing"));
    p.order_list = NULL;
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -EINVAL);
}
END_TEST

/* ---- symlinks, odd names, bad sources ---- */

START_TEST(symlink_loops_stay_links)
{
    mkd("src");
    mkd("src/a");
    mkd("src/a/b");
    mkf("src/a/b/1.jpg", "x");
    mkl("..", "src/a/b/up.jpg");   /* to its parent's parent: a */
    mkl(".", "src/a/self");        /* to the directory holding it */
    mkl("../..", "src/a/b/root");  /* to the root */
    mkl("self-loop", "src/a/self-loop"); /* ELOOP: broken */
    mkl("../a", "src/a/b/c-to-a");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, NULL, false);
    cfs_id a = cfs_catalog_lookup(c, 0, "a"), b = cfs_catalog_lookup(c, a, "b");
    const char *loops[] = {"up.jpg", "root", "c-to-a"};
    for (int i = 0; i < 3; i++) {
        cfs_id id = cfs_catalog_lookup(c, b, loops[i]);
        ck_assert_uint_ne(id, CFS_ID_NONE);
        ck_assert_msg(S_ISLNK(cfs_catalog_entry(c, id)->mode), "%s not a link", loops[i]);
        ck_assert_uint_eq(cfs_catalog_entry(c, id)->nchildren, 0);
    }
    ck_assert(S_ISLNK(cfs_catalog_entry(c, cfs_catalog_lookup(c, a, "self"))->mode));
    ck_assert(S_ISLNK(cfs_catalog_entry(c, cfs_catalog_lookup(c, a, "self-loop"))->mode));
    /* up.jpg would be a directory to os.walk, so it is no sample. */
    ck_assert_str_eq(samples_str(c), "a/b/1.jpg");
    ck_assert_uint_eq(cfs_catalog_entry_count(c), 9);
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(links_present_their_targets)
{
    mkd("src");
    mkd("src/d");
    mkf("src/d/f", "12345");
    chmod(at("src/d/f"), 0600);
    mkl("d/f", "src/lf");
    mkl("d", "src/ld");
    mkl("nowhere", "src/broken");
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, NULL, false);
    const struct cfs_entry *lf = cfs_catalog_entry(c, cfs_catalog_lookup(c, 0, "lf"));
    ck_assert_uint_eq(lf->mode, S_IFREG | 0600);
    ck_assert_uint_eq(lf->size, 5);
    cfs_id ld = cfs_catalog_lookup(c, 0, "ld");
    ck_assert(S_ISDIR(cfs_catalog_entry(c, ld)->mode));
    ck_assert_uint_ne(cfs_catalog_lookup(c, ld, "f"), CFS_ID_NONE);
    const struct cfs_entry *br = cfs_catalog_entry(c, cfs_catalog_lookup(c, 0, "broken"));
    ck_assert(S_ISLNK(br->mode));
    ck_assert_uint_eq(br->size, strlen("nowhere"));
    ck_assert_str_eq(samples_str(c), "d/f|ld/f|lf");
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(odd_names_round_trip)
{
    const char *names[] = {"new\nline", "sp ace", "\xff\xfe", "caf\xc3\xa9", " ", "\t", "-", "\\"};
    mkd("src");
    char rel[64];
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        snprintf(rel, sizeof(rel), "src/%s", names[i]);
        mkf(rel, names[i]);
    }
    struct cfs_catalog *c = open_ok(at("src"), CFS_ORDER_SORTED, NULL, NULL, false);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 8);
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        cfs_id id = cfs_catalog_lookup(c, 0, names[i]);
        ck_assert_uint_ne(id, CFS_ID_NONE);
        ck_assert_str_eq(path_of(c, id), names[i]);
        ck_assert_uint_eq(cfs_catalog_entry(c, id)->size, strlen(names[i]));
    }
    ck_assert_str_eq(samples_str(c), "\t| |-|\\|caf\xc3\xa9|new\nline|sp ace|\xff\xfe");
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(empty_source_is_an_empty_catalog)
{
    mkd("src");
    for (int o = CFS_ORDER_IMAGEFOLDER; o <= CFS_ORDER_SORTED; o++) {
        struct cfs_catalog *c = open_ok(at("src"), (enum cfs_order)o, NULL, NULL, false);
        ck_assert_uint_eq(cfs_catalog_entry_count(c), 1);
        ck_assert_uint_eq(cfs_catalog_sample_count(c), 0);
        ck_assert_uint_eq(cfs_catalog_file_count(c), 0);
        ck_assert_uint_eq(cfs_catalog_dir_count(c), 1);
        ck_assert_uint_eq(cfs_catalog_entry(c, 0)->nchildren, 0);
        ck_assert_uint_eq(cfs_catalog_lookup(c, 0, "x"), CFS_ID_NONE);
        cfs_catalog_destroy(c);
    }
}
END_TEST

START_TEST(bad_sources_give_one_clear_line)
{
    struct cfs_catalog *c = (struct cfs_catalog *)1;
    char err[512] = "";
    struct cfs_catalog_params p = {.source = at("missing"), .order = CFS_ORDER_SORTED};
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err, "does not exist"));
    ck_assert_ptr_nonnull(strstr(err, at("missing")));
    mkf("file", "");
    p.source = at("file");
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -ENOTDIR);
    ck_assert_ptr_nonnull(strstr(err, "is not a directory"));
    p.index_dir = at("ix");
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -ENOTDIR);
    p.source = "";
    ck_assert_int_eq(cfs_catalog_open(&p, &c, err, sizeof(err)), -EINVAL);
}
END_TEST

/* Run as an unprivileged user (root reads everything), in a child. */
START_TEST(unreadable_directories_are_skipped_and_counted)
{
    mkd("src");
    mkd("src/open");
    mkd("src/shut");
    mkf("src/open/1", "");
    mkf("src/shut/2", "");
    ck_assert_int_eq(chmod(tmp, 0755), 0);
    ck_assert_int_eq(chmod(at("src/shut"), 0), 0);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
            _exit(3);
        struct cfs_catalog_params p = {.source = at("src"), .order = CFS_ORDER_SORTED};
        struct cfs_catalog *c = NULL;
        char err[256];
        if (cfs_catalog_open(&p, &c, err, sizeof(err)) < 0)
            _exit(4);
        unsigned long long v[3] = {cfs_catalog_skipped(c), cfs_catalog_sample_count(c),
                                   cfs_catalog_entry_count(c)};
        if (write(fds[1], v, sizeof(v)) != (ssize_t)sizeof(v))
            _exit(5);
        _exit(0);
    }
    close(fds[1]);
    unsigned long long v[3] = {0};
    ck_assert_int_eq(read(fds[0], v, sizeof(v)), (ssize_t)sizeof(v));
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_uint_eq(v[0], 1); /* "shut" */
    ck_assert_uint_eq(v[1], 1); /* "open/1" */
    ck_assert_uint_eq(v[2], 4); /* root, open, shut, open/1 */
}
END_TEST

/* ---- persistence ---- */

/* ---- hash, synthetic ---- */

START_TEST(hash_follows_content_and_order)
{
    mkd("src");
    mkd("src/c");
    mkf("src/c/1.jpg", "a");
    mkf("src/c/2.jpg", "b");
    struct cfs_catalog *a = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, NULL, false);
    struct cfs_catalog *b = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, NULL, false);
    ck_assert_uint_eq(cfs_catalog_hash(a), cfs_catalog_hash(b));
    cfs_catalog_destroy(b);
    mkf("list", "c/2.jpg\nc/1.jpg\n");
    b = open_ok(at("src"), CFS_ORDER_LIST, at("list"), NULL, false);
    ck_assert_uint_ne(cfs_catalog_hash(a), cfs_catalog_hash(b));
    cfs_catalog_destroy(b);
    mkf("src/c/2.jpg", "bigger");
    b = open_ok(at("src"), CFS_ORDER_IMAGEFOLDER, NULL, NULL, false);
    ck_assert_uint_ne(cfs_catalog_hash(a), cfs_catalog_hash(b));
    cfs_catalog_destroy(b);
    cfs_catalog_destroy(a);
}
END_TEST

START_TEST(synthetic_imagenet_scale)
{
    const uint64_t n = 1281167, mean = 110000;
    struct cfs_catalog *c;
    ck_assert_int_eq(cfs_catalog_synthetic(n, mean, &c), 0);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), n);
    ck_assert_uint_eq(cfs_catalog_file_count(c), n);
    ck_assert_uint_eq(cfs_catalog_entry_count(c), n + 1);
    uint64_t sum = 0, lo = UINT64_MAX, hi = 0, misplaced = 0;
    /* No ck_assert in the loop: each one is a message to Check's parent. */
    for (uint64_t i = 0; i < n; i++) {
        cfs_id id = cfs_catalog_sample_entry(c, i);
        misplaced += id != i + 1 || cfs_catalog_entry(c, id)->sample != i;
        uint64_t s = cfs_catalog_entry(c, id)->size;
        sum += s;
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    ck_assert_uint_eq(misplaced, 0);
    ck_assert_uint_eq(sum, cfs_catalog_total_bytes(c));
    ck_assert_uint_ge(lo, mean / 2);
    ck_assert_uint_lt(hi, mean / 2 + mean);
    ck_assert_uint_lt(lo, mean * 51 / 100);
    ck_assert_uint_gt(hi, mean * 149 / 100);
    ck_assert_uint_gt(sum / n, mean * 99 / 100);
    ck_assert_uint_lt(sum / n, mean * 101 / 100);
    ck_assert_str_eq(path_of(c, cfs_catalog_sample_entry(c, 0)), "0000000.jpg");
    ck_assert_str_eq(path_of(c, cfs_catalog_sample_entry(c, n - 1)), "1281166.jpg");
    ck_assert_uint_eq(cfs_catalog_lookup(c, 0, "0012345.jpg"), 12346);
    uint64_t h = cfs_catalog_hash(c);
    cfs_catalog_destroy(c);

    ck_assert_int_eq(cfs_catalog_synthetic_layout(n, mean, 1000, &c), 0);
    ck_assert_uint_eq(cfs_catalog_dir_count(c), 1001);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), n);
    /* 1281 files per class, the first 167 classes one more. */
    ck_assert_uint_eq(cfs_catalog_entry(c, 1)->nchildren, 1282);
    ck_assert_uint_eq(cfs_catalog_entry(c, 167)->nchildren, 1282);
    ck_assert_uint_eq(cfs_catalog_entry(c, 168)->nchildren, 1281);
    ck_assert_str_eq(path_of(c, cfs_catalog_sample_entry(c, 1282)), "c001/0001282.jpg");
    ck_assert_str_eq(path_of(c, cfs_catalog_sample_entry(c, n - 1)), "c999/1281166.jpg");
    cfs_id c5 = cfs_catalog_lookup(c, 0, "c005");
    ck_assert_uint_eq(c5, 6);
    cfs_id f = cfs_catalog_lookup(c, c5, "0006410.jpg");
    ck_assert_uint_ne(f, CFS_ID_NONE);
    ck_assert_uint_eq(cfs_catalog_entry(c, f)->sample, 6410);
    ck_assert_uint_ne(cfs_catalog_hash(c), h);
    cfs_catalog_destroy(c);

    ck_assert_int_eq(cfs_catalog_synthetic(0, mean, &c), 0);
    ck_assert_uint_eq(cfs_catalog_sample_count(c), 0);
    ck_assert_uint_eq(cfs_catalog_entry_count(c), 1);
    cfs_catalog_destroy(c);
}
END_TEST

static Suite *catalog_suite(void)
{
    Suite *s = suite_create("catalog");
    TCase *t = tcase_create("catalog");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, ids_are_breadth_first_sorted_and_contiguous);
    tcase_add_test(t, lookup_finds_every_child_and_nothing_else);
    tcase_add_test(t, sorted_order_is_bytewise_by_whole_path);
    tcase_add_test(t, imagefolder_matches_torchvision_nested);
    tcase_add_test(t, imagefolder_matches_torchvision_names);
    tcase_add_test(t, imagefolder_matches_torchvision_symlinks);
    tcase_add_test(t, imagefolder_class_without_images_is_an_error);
    tcase_add_test(t, imagefolder_without_classes_is_empty);
    tcase_add_test(t, list_order_follows_the_file);
    tcase_add_test(t, list_order_rejects_paths_not_in_source);
    tcase_add_test(t, symlink_loops_stay_links);
    tcase_add_test(t, links_present_their_targets);
    tcase_add_test(t, odd_names_round_trip);
    tcase_add_test(t, empty_source_is_an_empty_catalog);
    tcase_add_test(t, bad_sources_give_one_clear_line);
    tcase_add_test(t, unreadable_directories_are_skipped_and_counted);
    tcase_add_test(t, hash_follows_content_and_order);
    tcase_add_test(t, synthetic_imagenet_scale);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return cfs_check_run(catalog_suite());
}
