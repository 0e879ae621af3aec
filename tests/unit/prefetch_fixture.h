/* The data path's test fixture, shared by test_prefetch.c and
 * test_prefetch_adopt.c: a temporary source of NFILES files of known bytes,
 * its catalog, a prefetcher made as the mount makes it, and readers that
 * compare every byte. */
#ifndef CLAIRFS_TEST_PREFETCH_FIXTURE_H
#define CLAIRFS_TEST_PREFETCH_FIXTURE_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/catalog.h"
#include "clairfs/metrics.h"
#include "clairfs/options.h"
#include "clairfs/prefetch.h"
#include "clairfs/run_config.h"
#include "epoch_stream.h"

/* ---- the data path over a temporary source ---- */

#define NFILES 120

struct fixture {
    char src[64], ssd[64], idx[64];
    int srcfd;
    struct cfs_catalog *cat;
    uint64_t total;
};

static inline void fill_bytes(uint32_t i, unsigned char *buf, size_t len)
{
    uint32_t x = i * 2654435761u + 1;
    for (size_t k = 0; k < len; k++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[k] = (unsigned char)x;
    }
}

static inline size_t file_size(uint32_t i)
{
    return i == 7 ? 0 : 1000 + (i * 7919u) % 30000;
}

static inline void fixture_init(struct fixture *fx)
{
    memset(fx, 0, sizeof(*fx));
    strcpy(fx->src, "/tmp/cfs-pf-src-XXXXXX");
    strcpy(fx->ssd, "/tmp/cfs-pf-ssd-XXXXXX");
    strcpy(fx->idx, "/tmp/cfs-pf-idx-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx->src));
    ck_assert_ptr_nonnull(mkdtemp(fx->ssd));
    ck_assert_ptr_nonnull(mkdtemp(fx->idx));
    unsigned char *buf = malloc(40000);
    for (uint32_t i = 0; i < NFILES; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/f%04u.jpg", fx->src, i);
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fill_bytes(i, buf, file_size(i));
        ck_assert_uint_eq(fwrite(buf, 1, file_size(i), f), file_size(i));
        fclose(f);
        fx->total += file_size(i);
    }
    free(buf);
    struct cfs_catalog_params cp = {.source = fx->src, .order = CFS_ORDER_SORTED};
    char err[256] = "";
    ck_assert_msg(cfs_catalog_open(&cp, &fx->cat, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(cfs_catalog_sample_count(fx->cat), NFILES);
    fx->srcfd = open(fx->src, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fx->srcfd, 0);
}

static inline void rm_rf(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static inline void fixture_fini(struct fixture *fx)
{
    cfs_catalog_destroy(fx->cat);
    close(fx->srcfd);
    rm_rf(fx->src);
    rm_rf(fx->ssd);
    rm_rf(fx->idx);
}

/* The prefetcher of options `opts` over the fixture for node `node` of
 * `nodes`, its run configuration made as the mount makes it; p gives the
 * rest (metrics, index, peers).  Not started. */
static inline struct cfs_prefetch *create_pf(struct fixture *fx, const char *opts,
                                             uint32_t nodes, uint32_t node,
                                             struct cfs_prefetch_params p)
{
    struct cfs_options o;
    struct cfs_run_config run;
    char err[256] = "";
    cfs_options_init(&o);
    ck_assert_msg(cfs_options_parse_list(&o, opts, err, sizeof(err)) == 0, "%s", err);
    struct cfs_run_inputs in = {.opts = &o, .nsamples = cfs_catalog_sample_count(fx->cat),
                                .nodes = nodes, .node = node, .ssd_dir = o.ssd_dir};
    ck_assert_msg(cfs_run_config_make(&in, &run, err, sizeof(err)) == 0, "run: %s", err);
    p.catalog = fx->cat, p.run = &run, p.opts = &o, p.source_fd = fx->srcfd, p.ssd_dir = o.ssd_dir;
    struct cfs_prefetch *pf = NULL;
    ck_assert_msg(cfs_prefetch_create(&p, &pf, err, sizeof(err)) == 0,
                  "cfs_prefetch_create(%s): %s", opts, err);
    cfs_run_config_free(&run);
    cfs_options_free(&o);
    return pf;
}

static inline struct cfs_prefetch *make_pf(struct fixture *fx, const char *opts,
                                           struct cfs_metrics *m, const char *index_dir)
{
    char err[256] = "";
    cfs_metrics_init(m);
    struct cfs_prefetch_params p = {.metrics = m, .index_dir = index_dir};
    struct cfs_prefetch *pf = create_pf(fx, opts, 1, 0, p);
    int rc = cfs_prefetch_start(pf, err, sizeof(err));
    ck_assert_msg(rc == 0, "cfs_prefetch_start(%s): %s", opts, err);
    return pf;
}

/* A read through cfs_prefetch_read, as the FUSE layer makes it, copied
 * into buf (size bytes, also the scratch of a direct read) as its reply
 * would carry it: bytes read or -errno. */
static inline ssize_t read_into(struct cfs_prefetch *pf, struct cfs_prefetch_file *f, void *buf,
                                size_t size, uint64_t off)
{
    struct cfs_prefetch_extent x;
    int rc = cfs_prefetch_read(pf, f, off, size, buf, &x);
    if (rc)
        return rc;
    if (x.data) {
        if (x.data != buf)
            memcpy(buf, x.data, x.len);
        return (ssize_t)x.len;
    }
    size_t got = 0;
    while (got < x.len) {
        ssize_t n = pread(x.fd, (char *)buf + got, x.len - got, (off_t)(x.pos + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO; /* the entry was checked: it cannot be short */
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Open, read in 4 KiB pieces, compare every byte, release. */
static inline void read_check_as(struct cfs_prefetch *pf, const struct fixture *fx,
                                 uint32_t sample, const struct cfs_opener *who)
{
    cfs_id id = cfs_catalog_sample_entry(fx->cat, sample);
    const char *name = cfs_catalog_name(fx->cat, id);
    uint32_t i = (uint32_t)strtoul(name + 1, NULL, 10);
    size_t len = file_size(i);
    unsigned char *want = malloc(len + 1), *got = malloc(len + 4096);
    fill_bytes(i, want, len);
    struct cfs_prefetch_file *f = NULL;
    ck_assert_int_eq(cfs_prefetch_open_as(pf, id, who, &f), 0);
    ck_assert_uint_eq(cfs_prefetch_file_size(f), len);
    size_t off = 0;
    for (;;) {
        ssize_t n = read_into(pf, f, got + off, 4096, off);
        ck_assert_int_ge(n, 0);
        if (n == 0)
            break;
        off += (size_t)n;
    }
    ck_assert_uint_eq(off, len);
    ck_assert_msg(memcmp(want, got, len) == 0, "wrong bytes in %s", name);
    cfs_prefetch_release(pf, f);
    free(want);
    free(got);
}

static inline void read_check(struct cfs_prefetch *pf, const struct fixture *fx,
                              uint32_t sample)
{
    read_check_as(pf, fx, sample, NULL);
}

/* The node's stream of an epoch (world 1: the sampler's). */
static inline void replay_epoch(struct cfs_prefetch *pf, const struct fixture *fx,
                                uint64_t seed, uint32_t epoch)
{
    uint32_t *s = epoch_stream(NFILES, seed, epoch);
    for (uint32_t i = 0; i < NFILES; i++)
        read_check(pf, fx, s[i]);
    free(s);
}

static inline uint64_t mget(const struct cfs_metrics *m, enum cfs_metric id)
{
    return cfs_metrics_get(m, id);
}

#endif
