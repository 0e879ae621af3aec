/* catalog_dump: print a source's index order as relative paths, one per
 * line (or NUL-terminated with -0), for golden and live comparisons with
 * torchvision.
 *
 *   catalog_dump [-o ORDER] [-i INDEX_DIR] [-r] [-0] [-q] [-s] SOURCE
 *
 * ORDER is any order= value (KIND, KIND:ROOT, list:FILE; default
 * imagefolder).  When the order cannot be built the one-line reason is
 * printed on stderr and the exit is 1 (never a partial list).
 * -r rescan, -q print nothing but the summary, -s summary on stderr: entries,
 * samples, skipped, whether the index was reused, the hash and the open
 * time.  Exit 1 with the catalog's one-line error on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/catalog.h"

int main(int argc, char **argv)
{
    struct cfs_catalog_params p = {.order = CFS_ORDER_IMAGEFOLDER};
    char sep = '\n';
    bool quiet = false, summary = false;
    int opt;
    while ((opt = getopt(argc, argv, "o:i:r0qs")) != -1) {
        switch (opt) {
        case 'o': {
            const char *arg;
            if (cfs_order_parse(optarg, &p.order, &arg) < 0) {
                fprintf(stderr, "catalog_dump: unknown order '%s'\n", optarg);
                return 2;
            }
            if (p.order == CFS_ORDER_LIST)
                p.order_list = arg;
            else
                p.order_root = arg;
            break;
        }
        case 'i':
            p.index_dir = optarg;
            break;
        case 'r':
            p.rescan = true;
            break;
        case '0':
            sep = '\0';
            break;
        case 'q':
            quiet = true;
            break;
        case 's':
            summary = true;
            break;
        default:
            fprintf(stderr, "usage: catalog_dump [-o ORDER] [-i INDEX] [-r] [-0] [-q] [-s] SOURCE\n");
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: catalog_dump [-o ORDER] [-i INDEX] [-r] [-0] [-q] [-s] SOURCE\n");
        return 2;
    }
    p.source = argv[optind];

    struct cfs_catalog *c;
    char err[512];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = cfs_catalog_open(&p, &c, err, sizeof(err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc < 0) {
        fprintf(stderr, "catalog_dump: %s\n", err);
        return 1;
    }
    static char path[1 << 16];
    uint64_t n = cfs_catalog_sample_count(c);
    for (uint64_t i = 0; i < n && !quiet; i++) {
        int len = cfs_catalog_path(c, cfs_catalog_sample_entry(c, i), path, sizeof(path));
        if (len < 0) {
            fprintf(stderr, "catalog_dump: sample %llu: path too long\n", (unsigned long long)i);
            cfs_catalog_destroy(c);
            return 1;
        }
        fwrite(path, 1, (size_t)len, stdout);
        putchar(sep);
    }
    if (summary || quiet)
        fprintf(stderr,
                "entries=%u samples=%llu files=%llu dirs=%llu bytes=%llu skipped=%llu "
                "from_index=%d hash=%016llx open_seconds=%.6f\n",
                cfs_catalog_entry_count(c), (unsigned long long)n,
                (unsigned long long)cfs_catalog_file_count(c),
                (unsigned long long)cfs_catalog_dir_count(c),
                (unsigned long long)cfs_catalog_total_bytes(c),
                (unsigned long long)cfs_catalog_skipped(c), cfs_catalog_loaded_from_index(c),
                (unsigned long long)cfs_catalog_hash(c),
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    cfs_catalog_destroy(c);
    return 0;
}
