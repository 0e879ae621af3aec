/* What the catalog's unit tests share: a temp directory per test (setup,
 * teardown), building trees in it, opening a catalog that must open, and
 * the sample order as one string. */
#ifndef CLAIRFS_TEST_CATALOG_FIXTURE_H
#define CLAIRFS_TEST_CATALOG_FIXTURE_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/catalog.h"

static char tmp[256];

static __attribute__((unused)) void setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    ck_assert_int_lt(snprintf(tmp, sizeof(tmp), "%s/cfs-catalog-XXXXXX", base), (int)sizeof(tmp));
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static __attribute__((unused)) void teardown(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s'; rm -rf '%s'", tmp, tmp);
    ck_assert_int_eq(system(cmd), 0);
}

static __attribute__((unused)) char *at(const char *rel)
{
    static char buf[4][PATH_MAX];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], PATH_MAX, "%s/%s", tmp, rel);
    return buf[k];
}

static __attribute__((unused)) void mkd(const char *rel)
{
    ck_assert_msg(mkdir(at(rel), 0755) == 0, "mkdir %s: %s", rel, strerror(errno));
}

static __attribute__((unused)) void mkf(const char *rel, const char *content)
{
    int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
    ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

static __attribute__((unused)) void mkl(const char *target, const char *rel)
{
    ck_assert_msg(symlink(target, at(rel)) == 0, "symlink %s: %s", rel, strerror(errno));
}

static __attribute__((unused)) struct cfs_catalog *open_ok(const char *src, enum cfs_order order, const char *list,
                                   const char *index, bool rescan)
{
    struct cfs_catalog_params p = {
        .source = src, .order = order, .order_list = list, .index_dir = index, .rescan = rescan};
    struct cfs_catalog *c = NULL;
    char err[512] = "";
    int rc = cfs_catalog_open(&p, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "open %s: %d %s", src, rc, err);
    return c;
}

static __attribute__((unused)) char *path_of(const struct cfs_catalog *c, cfs_id id)
{
    static char buf[PATH_MAX];
    ck_assert_int_ge(cfs_catalog_path(c, id, buf, sizeof(buf)), 0);
    return buf;
}

/* Samples as one string "p1|p2|...", for exact comparison. */
static __attribute__((unused)) char *samples_str(const struct cfs_catalog *c)
{
    static char buf[1 << 16];
    buf[0] = '\0';
    for (uint64_t i = 0; i < cfs_catalog_sample_count(c); i++) {
        cfs_id id = cfs_catalog_sample_entry(c, i);
        ck_assert_uint_eq(cfs_catalog_entry(c, id)->sample, i);
        if (i)
            strcat(buf, "|");
        strcat(buf, path_of(c, id));
    }
    return buf;
}

#endif
