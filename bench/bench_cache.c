/* The cache hit path, measured: acquire + read the whole file + release, for
 * RAM entries and for SSD entries verified on every open or on first use
 * only.  Prints figures and ratios; asserts nothing about time.
 *   bench_cache [FILES [SIZE]]   (default 1000 files of 110 000 bytes) */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/cache.h"
#include "clairfs/index.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static uint64_t size_g;
static int same_source(void *arg, uint32_t id, struct cfs_cache_source *out)
{
    (void)arg;
    *out = (struct cfs_cache_source){size_g, 1, 0, id};
    return 0;
}

static int fill(struct cfs_cache *c, uint32_t n, uint64_t size, enum cfs_tier tier)
{
    for (uint32_t id = 0; id < n; id++) {
        void *buf;
        int rc = cfs_cache_begin_fetch(c, id, size, tier, CFS_CACHE_DEMAND, &buf);
        if (rc)
            return rc;
        memset(buf, (int)id, size);
        struct cfs_cache_source s = {size, 1, 0, id};
        rc = cfs_cache_complete_fetch(c, id, 0, size, &s);
        if (rc)
            return rc;
    }
    return 0;
}

/* Seconds per pass over all files, best of 3 passes. */
static double pass(struct cfs_cache *c, uint32_t n, uint64_t size, char *scratch)
{
    double best = 1e9;
    for (int round = 0; round < 3; round++) {
        double t0 = now();
        for (uint32_t id = 0; id < n; id++) {
            struct cfs_cache_handle h;
            if (cfs_cache_acquire(c, id, 0, &h) != 0) {
                fprintf(stderr, "bench_cache: file %u missing\n", id);
                exit(1);
            }
            if (h.data)
                memcpy(scratch, h.data, size);
            else if (pread(h.fd, scratch, size, (off_t)h.offset) != (ssize_t)size)
                exit(1);
            cfs_cache_release(c, &h);
        }
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000;
    uint64_t size = argc > 2 ? strtoull(argv[2], NULL, 10) : 110000;
    char dir[] = "/tmp/cfs-bench-cache.XXXXXX", ixdir[64], err[256];
    struct cfs_index *ix = NULL;
    struct cfs_cache *c = NULL;
    char *scratch = malloc(size);
    int rc = 1;

    size_g = size;
    if (!scratch || !mkdtemp(dir))
        return 1;
    snprintf(ixdir, sizeof(ixdir), "%s/index", dir);
    uint64_t cap = (uint64_t)n * ((size + 4095) / 4096 * 4096);
    struct cfs_cache_params p = {.nfiles = n,
                                 .ram_bytes = cap,
                                 .ssd_bytes = cap,
                                 .ssd_dir = dir,
                                 .source = same_source,
                                 .commit_batch = 256};
    if (cfs_index_open(ixdir, &ix, err, sizeof(err)) || (p.index = ix, 0) ||
        cfs_cache_create(&p, &c, err, sizeof(err)) || fill(c, n, size, CFS_TIER_RAM)) {
        fprintf(stderr, "bench_cache: %s\n", err);
        goto out;
    }
    double ram = pass(c, n, size, scratch);
    cfs_cache_destroy(c);
    c = NULL;

    double t0 = now();
    if (cfs_cache_create(&p, &c, err, sizeof(err)) || fill(c, n, size, CFS_TIER_SSD) ||
        cfs_cache_sync(c))
        goto out;
    double write = now() - t0;
    double every = pass(c, n, size, scratch);
    cfs_cache_destroy(c);
    c = NULL;
    p.ssd_verify = CFS_CACHE_VERIFY_FIRST_USE;
    t0 = now();
    if (cfs_cache_create(&p, &c, err, sizeof(err)))
        goto out;
    double load = now() - t0;
    (void)pass(c, n, size, scratch); /* the first use verifies */
    double first = pass(c, n, size, scratch);

    double mb = (double)n * (double)size / 1e6;
    printf("cache hit path, %u files of %llu bytes (page-cache warm), per file:\n", n,
           (unsigned long long)size);
    printf("  RAM acquire+memcpy+release      %8.2f us  %7.0f MB/s  1.00x\n", ram / n * 1e6,
           mb / ram);
    printf("  SSD verify-first-use + pread    %8.2f us  %7.0f MB/s  %.2fx RAM\n", first / n * 1e6,
           mb / first, first / ram);
    printf("  SSD verify-every-open + pread   %8.2f us  %7.0f MB/s  %.2fx RAM, %.2fx first-use\n",
           every / n * 1e6, mb / every, every / ram, every / first);
    printf("  SSD write+commit %.1f us/file; warm restart load %.1f us/file\n", write / n * 1e6,
           load / n * 1e6);
    rc = 0;
out:
    cfs_cache_destroy(c);
    cfs_index_close(ix);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(scratch);
    return rc;
}
