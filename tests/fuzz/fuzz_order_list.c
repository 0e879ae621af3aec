/* Fuzz target: order=list:FILE (src/catalog_order.c) through
 * cfs_catalog_open over a small source tree made once per process.  The
 * input is the list file.  Invariants, from include/clairfs/catalog.h: the
 * open returns 0 or -errno with a message; an accepted list has at most
 * one sample per non-empty line, every sample is a non-directory, and an
 * entry's `sample` is the first position that names it. */
#include "fuzz_common.h"

#include <sys/stat.h>

#include "clairfs/catalog.h"

static char source[512];

static void make_tree(void)
{
    static const char *const dirs[] = {"a", "a/sub", "b", "#c"};
    static const char *const files[] = {"a/1.jpg", "a/2.jpg", "a/sub/3.jpg", "b/x.txt",
                                        "top",     "#c/#h",   "sp ace",      "b/\xff\xfe"};
    char p[1024];
    fuzz_path(source, sizeof(source), "src");
    if (mkdir(source, 0755) < 0)
        abort();
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", source, dirs[i]);
        if (mkdir(p, 0755) < 0)
            abort();
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", source, files[i]);
        fuzz_write_file(p, files[i], strlen(files[i]));
    }
    snprintf(p, sizeof(p), "%s/ln", source);
    if (symlink("a/1.jpg", p) < 0)
        abort();
    snprintf(p, sizeof(p), "%s/broken", source);
    if (symlink("nowhere", p) < 0)
        abort();
    snprintf(p, sizeof(p), "%s/a/up", source);
    if (symlink("..", p) < 0) /* a loop back to an ancestor */
        abort();
}

static size_t nonempty_lines(const uint8_t *d, size_t n)
{
    size_t lines = 0, len = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '\n') {
            lines += len > 0;
            len = 0;
        } else {
            len++;
        }
    }
    return lines + (len > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    if (!source[0])
        make_tree();
    char list[512];
    fuzz_path(list, sizeof(list), "order.list");
    fuzz_write_file(list, data, size);

    struct cfs_catalog_params p = {
        .source = source,
        .order = CFS_ORDER_LIST,
        .order_list = list,
    };
    struct cfs_catalog *c = NULL;
    char err[512];
    err[0] = '\0';
    int rc = cfs_catalog_open(&p, &c, err, sizeof(err));
    if (rc < 0) {
        FUZZ_CHECK(rc == -ENOENT || rc == -EISDIR || rc == -EINVAL || rc == -ENOMEM ||
                   rc == -ENOTDIR || rc == -ENAMETOOLONG || rc == -ELOOP);
        FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof(err)) != NULL);
        return 0;
    }
    uint64_t ns = cfs_catalog_sample_count(c);
    uint32_t ne = cfs_catalog_entry_count(c);
    FUZZ_CHECK(ns <= nonempty_lines(data, size));
    char path[4096];
    for (uint64_t s = 0; s < ns; s++) {
        cfs_id id = cfs_catalog_sample_entry(c, s);
        FUZZ_CHECK(id < ne);
        const struct cfs_entry *e = cfs_catalog_entry(c, id);
        FUZZ_CHECK(!S_ISDIR(e->mode));
        FUZZ_CHECK(e->sample <= s && cfs_catalog_sample_entry(c, e->sample) == id);
        /* The path resolves back to the same entry. */
        int len = cfs_catalog_path(c, id, path, sizeof(path));
        FUZZ_CHECK(len > 0);
        cfs_id at = 0;
        for (char *save = NULL, *tok = strtok_r(path, "/", &save); tok;
             tok = strtok_r(NULL, "/", &save))
            at = cfs_catalog_lookup(c, at, tok);
        FUZZ_CHECK(at == id);
    }
    cfs_catalog_destroy(c);
    return 0;
}
