/* Cluster descriptions for clairfs-plan --env: the built-in presets and
 * the key = value file (format in include/clairfs/cluster_env.h).  Pure
 * apart from reading the file. */
#include "clairfs/cluster_env.h"
#include "clairfs/key_value_file.h"
#include "clairfs/options.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB 1e6 /* the papers' MB/s: decimal */
#define GIB (1024.0 * 1024 * 1024)

/* Lassen (LLNL), the machine of the NoPFS paper (Dryden et al.,
 * "Clairvoyant Prefetching for Distributed Machine Learning I/O", SC'21).
 * Where the paper or the NoPFS release gives no figure, the assumption is
 * stated with its reason. */
static void lassen(struct cfs_cluster_env *e)
{
    *e = (struct cfs_cluster_env){
        .name = "lassen",
        /* The paper's measured GPFS read bandwidth for 1, 2, 4 and 8
         * concurrent readers.  Beyond 8 readers it gives no figure: held at
         * 2870 MB/s (saturated), the pessimistic reading for a filesystem
         * shared with the rest of the machine. */
        .pfs_points = 4,
        .pfs_readers = {1, 2, 4, 8},
        .pfs_bw = {330 * MB, 730 * MB, 1540 * MB, 2870 * MB},
        /* Measured by reading files: the per-file cost is in the curve. */
        .pfs_latency = 0,
        /* NoPFS's released Lassen configuration: 24000 MB/s between nodes
         * (Lassen's dual-rail EDR InfiniBand, 2 x 12.5 GB/s). */
        .net_bw = 24000 * MB,
        /* Not given.  Assumed 10 us per request and reply: EDR's MPI
         * latency is about 1 us, plus the serving thread picking it up. */
        .net_latency = 10e-6,
        .in_flight = 64, /* clairfs's io_depth default */
        /* NoPFS's Lassen configuration runs 4 ranks per node, each with a
         * 1 GiB staging buffer and a 20 GiB memory class: 84 GiB of the
         * node's 256 GB, read at the 85800 MB/s it gives for 4 threads. */
        .ram = (uint64_t)(84 * GIB),
        .ram_bw = 85800 * MB,
        /* The same configuration's SSD class: 300 GiB per rank (1200 GiB of
         * the node's 1.6 TB NVMe), 3136 MB/s with 8 threads. */
        .ssd = (uint64_t)(1200 * GIB),
        .ssd_bw = 3136 * MB,
        /* Not given as a number.  Assumed ResNet-50 on one V100 at about
         * 400 samples/s (FP32 training): 2.5 ms per sample per rank. */
        .compute_per_sample = 2.5e-3,
        .ranks_per_node = 4, /* 4 V100 GPUs per node */
    };
}

int cfs_cluster_env_preset(const char *name, struct cfs_cluster_env *out)
{
    if (strcmp(name, "lassen") == 0) {
        lassen(out);
        return 0;
    }
    /* NoPFS's other Lassen configuration: the same without the SSD class
     * (the staging buffer and RAM only), where the aggregate cache is
     * smaller than ImageNet-22k up to 16 nodes. */
    if (strcmp(name, "lassen-ram") == 0) {
        lassen(out);
        snprintf(out->name, sizeof(out->name), "lassen-ram");
        out->ssd = 0;
        return 0;
    }
    return -ENOENT;
}

double cfs_cluster_env_pfs_bw(const struct cfs_cluster_env *e, uint32_t readers)
{
    uint32_t n = e->pfs_points;
    if (readers == 0 || n == 0)
        return 0;
    if (readers <= e->pfs_readers[0])
        return e->pfs_bw[0] * readers / e->pfs_readers[0];
    for (uint32_t i = 1; i < n; i++) {
        if (readers <= e->pfs_readers[i]) {
            double r0 = e->pfs_readers[i - 1], r1 = e->pfs_readers[i];
            double b0 = e->pfs_bw[i - 1], b1 = e->pfs_bw[i];
            return b0 + (b1 - b0) * (readers - r0) / (r1 - r0);
        }
    }
    return e->pfs_bw[n - 1];
}


/* "R:BW R:BW ..." */
static int parse_pfs_curve(char *v, struct cfs_cluster_env *e)
{
    uint32_t n = 0;
    for (char *save = NULL, *tok = strtok_r(v, " \t", &save); tok;
         tok = strtok_r(NULL, " \t", &save)) {
        char *colon = strchr(tok, ':'), *end;
        if (!colon || n == CFS_CLUSTER_ENV_POINTS)
            return -EINVAL;
        *colon = '\0';
        errno = 0;
        unsigned long r = strtoul(tok, &end, 10);
        double bw;
        if (*tok == '-' || end == tok || *end || errno || r == 0 || r > UINT32_MAX ||
            (n && r <= e->pfs_readers[n - 1]) || cfs_parse_quantity(colon + 1, true, &bw) < 0 || bw <= 0)
            return -EINVAL;
        e->pfs_readers[n] = (uint32_t)r;
        e->pfs_bw[n] = bw;
        n++;
    }
    if (n == 0)
        return -EINVAL;
    e->pfs_points = n;
    return 0;
}

enum kind { BW, SIZE, SECONDS, COUNT, CURVE };

static const struct key {
    const char *name;
    enum kind kind;
    bool required;
    const char *expect;
} keys[] = {
    {"pfs_bw", CURVE, true, "list of READERS:BANDWIDTH points, readers strictly increasing"},
    {"pfs_latency", SECONDS, false, "time in seconds"},
    {"net_bw", BW, true, "positive bandwidth in bytes/s (K/M/G/T suffix)"},
    {"net_latency", SECONDS, false, "time in seconds"},
    {"in_flight", COUNT, false, "count of 1 or more"},
    {"ram", SIZE, true, "size (K/M/G/T suffix)"},
    {"ssd", SIZE, false, "size (K/M/G/T suffix)"},
    {"ram_bw", BW, true, "positive bandwidth in bytes/s (K/M/G/T suffix)"},
    {"ssd_bw", BW, false, "positive bandwidth in bytes/s (K/M/G/T suffix)"},
    {"compute_per_sample", SECONDS, true, "time in seconds"},
    {"ranks_per_node", COUNT, false, "count of 1 or more"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* Stores value v of key k into e: 0 or -EINVAL. */
static int set_key(size_t k, char *v, struct cfs_cluster_env *e)
{
    const char *name = keys[k].name;
    double d;
    if (keys[k].kind == CURVE)
        return parse_pfs_curve(v, e);
    if (cfs_parse_quantity(v, keys[k].kind == BW || keys[k].kind == SIZE, &d) < 0)
        return -EINVAL;
    switch (keys[k].kind) {
    case BW:
        if (d <= 0)
            return -EINVAL;
        *(strcmp(name, "net_bw") == 0   ? &e->net_bw
          : strcmp(name, "ram_bw") == 0 ? &e->ram_bw
                                        : &e->ssd_bw) = d;
        return 0;
    case SIZE:
        if (d >= 18446744073709551616.0)
            return -EINVAL;
        *(strcmp(name, "ram") == 0 ? &e->ram : &e->ssd) = (uint64_t)d;
        return 0;
    case SECONDS:
        *(strcmp(name, "pfs_latency") == 0   ? &e->pfs_latency
          : strcmp(name, "net_latency") == 0 ? &e->net_latency
                                             : &e->compute_per_sample) = d;
        return 0;
    case COUNT:
        if (d < 1 || d > UINT32_MAX || d != floor(d))
            return -EINVAL;
        *(strcmp(name, "in_flight") == 0 ? &e->in_flight : &e->ranks_per_node) = (uint32_t)d;
        return 0;
    case CURVE:
        break;
    }
    return -EINVAL;
}

/* One line (comment stripped, trimmed, non-empty): 0 or -EINVAL with err. */
/* The description being read, and the keys given so far. */
struct env_reading {
    struct cfs_cluster_env e;
    bool seen[NKEYS];
};

static int env_key(const char *s, char *v, const char *path, unsigned lineno, void *arg,
                   char *err, size_t errlen)
{
    struct env_reading *r = arg;
    bool *seen = r->seen;
    struct cfs_cluster_env *e = &r->e;
    size_t k;
    for (k = 0; k < NKEYS && strcmp(keys[k].name, s) != 0; k++)
        ;
    if (k == NKEYS) {
        snprintf(err, errlen, "%s:%u: unknown key '%s'", path, lineno, s);
        return -EINVAL;
    }
    if (seen[k]) {
        snprintf(err, errlen, "%s:%u: %s given twice", path, lineno, s);
        return -EINVAL;
    }
    seen[k] = true;
    char value[256];
    snprintf(value, sizeof(value), "%s", v); /* for the message: parsing cuts v */
    if (set_key(k, v, e) < 0) {
        snprintf(err, errlen, "%s:%u: %s = %s: expected a %s", path, lineno, s, value,
                 keys[k].expect);
        return -EINVAL;
    }
    return 0;
}

/* What the keys must satisfy together. */
static int check_complete(const bool *seen, const struct cfs_cluster_env *e, const char *path,
                          char *err, size_t errlen)
{
    for (size_t k = 0; k < NKEYS; k++) {
        if (keys[k].required && !seen[k]) {
            snprintf(err, errlen, "%s: missing key %s", path, keys[k].name);
            return -EINVAL;
        }
    }
    if (e->ssd > 0 && !(e->ssd_bw > 0)) {
        snprintf(err, errlen, "%s: ssd = %llu needs ssd_bw", path, (unsigned long long)e->ssd);
        return -EINVAL;
    }
    return 0;
}

int cfs_cluster_env_load(const char *path, struct cfs_cluster_env *out, char *err, size_t errlen)
{
    struct env_reading r = {.e = {.in_flight = 64, .ranks_per_node = 1}};
    snprintf(r.e.name, sizeof(r.e.name), "%s", path);
    int rc = cfs_key_value_file_read(path, "env", env_key, &r, err, errlen);
    if (rc == 0)
        rc = check_complete(r.seen, &r.e, path, err, errlen);
    if (rc == 0)
        *out = r.e;
    return rc;
}

int cfs_cluster_env_get(const char *arg, struct cfs_cluster_env *out, char *err, size_t errlen)
{
    if (cfs_cluster_env_preset(arg, out) == 0)
        return 0;
    return cfs_cluster_env_load(arg, out, err, errlen);
}
