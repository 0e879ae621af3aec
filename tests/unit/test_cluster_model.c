/* The cluster description (its presets, its file format, good and bad) and
 * the epoch-time model of clairfs-plan --env, on cases small enough to
 * compute by hand: every expected number below is worked out in the
 * comment next to it. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/cluster_env.h"
#include "clairfs/epoch_model.h"

static char tmpdir[] = "/tmp/clairfs-cluster-model.XXXXXX";

/* Writes text to a fresh file under tmpdir; the path in a static buffer. */
static const char *write_env(const char *text)
{
    static char path[256];
    static int k;
    snprintf(path, sizeof(path), "%s/env%d", tmpdir, k++);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* An env for the model's cases: PFS 100 B/s alone, 150 B/s for two. */
static struct cfs_cluster_env small_env(void)
{
    return (struct cfs_cluster_env){
        .pfs_points = 2,
        .pfs_readers = {1, 2},
        .pfs_bw = {100, 150},
        .pfs_latency = 1,
        .net_bw = 1000,
        .net_latency = 0.5,
        .in_flight = 2,
        .ram = 1000,
        .ssd = 1000,
        .ram_bw = 10000,
        .ssd_bw = 100,
        .compute_per_sample = 0.1,
        .ranks_per_node = 1,
    };
}

START_TEST(lassen_preset_is_the_published_curve)
{
    struct cfs_cluster_env e;
    ck_assert_int_eq(cfs_cluster_env_preset("lassen", &e), 0);
    ck_assert_str_eq(e.name, "lassen");
    ck_assert_uint_eq(e.ranks_per_node, 4);
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 0), 0);
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 1), 330e6);
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 2), 730e6);
    /* Between 2 (730) and 4 (1540): halfway, 1135; between 4 and 8
     * (2870): 6 is halfway, 2205. */
    ck_assert_double_eq_tol(cfs_cluster_env_pfs_bw(&e, 3), 1135e6, 1e-3);
    ck_assert_double_eq_tol(cfs_cluster_env_pfs_bw(&e, 6), 2205e6, 1e-3);
    /* Saturated beyond the last point. */
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 8), 2870e6);
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 256), 2870e6);
    ck_assert_uint_eq(e.ram, 84ull << 30);
    ck_assert_uint_eq(e.ssd, 1200ull << 30);
    ck_assert_int_eq(cfs_cluster_env_preset("lassen-ram", &e), 0);
    ck_assert_str_eq(e.name, "lassen-ram");
    ck_assert_uint_eq(e.ram, 84ull << 30);
    ck_assert_uint_eq(e.ssd, 0);
    ck_assert_int_eq(cfs_cluster_env_preset("summit", &e), -ENOENT);
}
END_TEST

START_TEST(env_file_good)
{
    const char *path = write_env("# a cluster\n"
                                 "pfs_bw = 4:400 8:1K   # two points\n"
                                 "\n"
                                 "  net_bw=24000e6\n"
                                 "net_latency = 1e-5\n"
                                 "pfs_latency = 0.002\n"
                                 "in_flight = 8\n"
                                 "ram = 2G\n"
                                 "ssd = 1TiB\n"
                                 "ram_bw = 10G\n"
                                 "ssd_bw = 3136e6\n"
                                 "compute_per_sample = 0.0025\n"
                                 "ranks_per_node = 4\n");
    struct cfs_cluster_env e;
    char err[256] = "";
    ck_assert_int_eq(cfs_cluster_env_get(path, &e, err, sizeof(err)), 0);
    ck_assert_str_eq(e.name, path);
    ck_assert_uint_eq(e.pfs_points, 2);
    ck_assert_uint_eq(e.pfs_readers[1], 8);
    ck_assert_double_eq(e.pfs_bw[1], 1024);
    ck_assert_double_eq(e.net_bw, 24000e6);
    ck_assert_double_eq(e.net_latency, 1e-5);
    ck_assert_double_eq(e.pfs_latency, 0.002);
    ck_assert_uint_eq(e.in_flight, 8);
    ck_assert_uint_eq(e.ram, 2ull << 30);
    ck_assert_uint_eq(e.ssd, 1ull << 40);
    ck_assert_double_eq(e.ram_bw, 10.0 * (1u << 30));
    ck_assert_double_eq(e.compute_per_sample, 0.0025);
    ck_assert_uint_eq(e.ranks_per_node, 4);
    /* Below the first point: proportional to the readers (400 * 2/4);
     * between 4 and 8: 6 is halfway from 400 to 1024. */
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 2), 200);
    ck_assert_double_eq(cfs_cluster_env_pfs_bw(&e, 6), 712);
    /* Defaults of the optional keys. */
    path = write_env("pfs_bw = 1:1M\nnet_bw = 1G\nram = 1G\nram_bw = 1G\n"
                     "compute_per_sample = 0\n");
    ck_assert_int_eq(cfs_cluster_env_load(path, &e, err, sizeof(err)), 0);
    ck_assert_uint_eq(e.in_flight, 64);
    ck_assert_uint_eq(e.ranks_per_node, 1);
    ck_assert_uint_eq(e.ssd, 0);
    ck_assert_double_eq(e.net_latency, 0);
}
END_TEST

/* The file's text is `base` with `line` appended as line 6. */
static void expect_bad(const char *line, const char *message)
{
    static const char base[] = "pfs_bw = 1:1M\nnet_bw = 1G\nram = 1G\nram_bw = 1G\n"
                               "compute_per_sample = 0.001\n";
    char text[512], want[512], err[256] = "";
    snprintf(text, sizeof(text), "%s%s\n", base, line);
    const char *path = write_env(text);
    struct cfs_cluster_env e = {.ram = 42};
    ck_assert_int_eq(cfs_cluster_env_load(path, &e, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:6: %s", path, message);
    ck_assert_str_eq(err, want);
    ck_assert_uint_eq(e.ram, 42); /* untouched on error */
    ck_assert_ptr_null(strchr(err, '\n'));
}

START_TEST(env_file_bad)
{
    expect_bad("ram_bw", "expected key = value");
    expect_bad("gpu_bw = 1G", "unknown key 'gpu_bw'");
    expect_bad("net_bw = 2G", "net_bw given twice");
    expect_bad("ssd_bw = -1", "ssd_bw = -1: expected a positive bandwidth in bytes/s "
                              "(K/M/G/T suffix)");
    expect_bad("ssd_bw = 0", "ssd_bw = 0: expected a positive bandwidth in bytes/s "
                             "(K/M/G/T suffix)");
    expect_bad("ssd = 3Q", "ssd = 3Q: expected a size (K/M/G/T suffix)");
    expect_bad("net_latency = fast", "net_latency = fast: expected a time in seconds");
    expect_bad("in_flight = 0", "in_flight = 0: expected a count of 1 or more");
    expect_bad("ranks_per_node = 2.5", "ranks_per_node = 2.5: expected a count of 1 or more");

    /* The curve: increasing readers, R:BW tokens, positive bandwidths. */
    char err[256] = "", want[512];
    struct cfs_cluster_env e;
    static const char *curves[] = {"1:10 1:20", "2:10 1:20", "4",     "0:10",
                                   "x:10",      "2:0",       "-1:10", ""};
    for (size_t i = 0; i < sizeof(curves) / sizeof(curves[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text), "net_bw = 1G\npfs_bw = %s\n", curves[i]);
        const char *path = write_env(text);
        ck_assert_int_eq(cfs_cluster_env_load(path, &e, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want),
                 "%s:2: pfs_bw = %s: expected a list of READERS:BANDWIDTH points, "
                 "readers strictly increasing",
                 path, curves[i]);
        ck_assert_str_eq(err, want);
    }

    /* Missing keys name the file. */
    const char *path = write_env("net_bw = 1G\nram = 1G\nram_bw = 1G\ncompute_per_sample = 1\n");
    ck_assert_int_eq(cfs_cluster_env_load(path, &e, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s: missing key pfs_bw", path);
    ck_assert_str_eq(err, want);
    path = write_env("pfs_bw = 1:1M\nnet_bw = 1G\nram = 1G\nram_bw = 1G\n"
                     "compute_per_sample = 1\nssd = 1G\n");
    ck_assert_int_eq(cfs_cluster_env_load(path, &e, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s: ssd = 1073741824 needs ssd_bw", path);
    ck_assert_str_eq(err, want);
    /* Not a preset, not a file. */
    ck_assert_int_eq(cfs_cluster_env_get("/nonexistent/env", &e, err, sizeof(err)), -ENOENT);
    ck_assert_str_eq(err, "env /nonexistent/env: No such file or directory");
}
END_TEST

START_TEST(node_io_is_its_slowest_source)
{
    struct cfs_cluster_env e = small_env();
    enum cfs_epoch_bound b;
    /* PFS: 300 B at 100 B/s = 3 s, plus 3 reads x 1 s latency over 2 in
     * flight = 1.5 s: 4.5.  NIC: 300 / 1000 = 0.3 s. */
    struct cfs_epoch_node a = {.samples = 10, .pfs_reads = 3, .pfs_bytes = 300};
    ck_assert_double_eq_tol(cfs_epoch_node_io(&e, &a, 100, &b), 4.5, 1e-12);
    ck_assert_int_eq(b, CFS_EPOCH_PFS);
    /* NIC: 500 / 1000 + 4 x 0.5 / 2 = 1.5 s; SSD: (300 + 500) x 0.5 / 100
     * = 4 s; RAM: 400 / 10000 = 0.04 s. */
    struct cfs_epoch_node n = {.samples = 20,
                               .local_reads = 3,
                               .local_bytes = 300,
                               .peer_reads = 4,
                               .peer_bytes = 500,
                               .ssd_fraction = 0.5};
    ck_assert_double_eq_tol(cfs_epoch_node_io(&e, &n, 100, &b), 4.0, 1e-12);
    ck_assert_int_eq(b, CFS_EPOCH_SSD);
    /* A slow link makes the NIC the bound: 500 / 100 + 1 = 6 s. */
    e.net_bw = 100;
    ck_assert_double_eq_tol(cfs_epoch_node_io(&e, &n, 100, &b), 6.0, 1e-12);
    ck_assert_int_eq(b, CFS_EPOCH_NET);
    /* Nothing read: no time. */
    struct cfs_epoch_node idle = {0};
    ck_assert_double_eq(cfs_epoch_node_io(&e, &idle, 0, &b), 0);
}
END_TEST

START_TEST(epoch_is_max_of_compute_and_slowest_node)
{
    struct cfs_cluster_env e = small_env();
    struct cfs_epoch_time t;
    struct cfs_epoch_node nodes[2] = {
        {.samples = 10, .pfs_reads = 3, .pfs_bytes = 300},
        {.samples = 20,
         .local_reads = 3,
         .local_bytes = 300,
         .peer_reads = 4,
         .peer_bytes = 500,
         .ssd_fraction = 0.5},
    };
    /* One PFS reader: it gets all 100 B/s, 4.5 s (above); node 1 needs 4 s;
     * compute: the longest node, 20 samples x 0.1 s = 2 s. */
    cfs_epoch_model(&e, nodes, 2, &t);
    ck_assert_uint_eq(t.readers, 1);
    ck_assert_double_eq(t.pfs_share, 100);
    ck_assert_double_eq_tol(t.compute, 2.0, 1e-12);
    ck_assert_double_eq_tol(t.io, 4.5, 1e-12);
    ck_assert_double_eq_tol(t.total, 4.5, 1e-12);
    ck_assert_uint_eq(t.slowest, 0);
    ck_assert_int_eq(t.bound, CFS_EPOCH_PFS);
    /* Both read the PFS: 150 B/s shared, 75 each.  Node 0: 300 / 75 + 1.5
     * = 5.5 s; node 1: 150 / 75 + 1 x 1 / 2 = 2.5 s PFS, SSD still 4 s. */
    nodes[1].pfs_reads = 1;
    nodes[1].pfs_bytes = 150;
    cfs_epoch_model(&e, nodes, 2, &t);
    ck_assert_uint_eq(t.readers, 2);
    ck_assert_double_eq(t.pfs_share, 75);
    ck_assert_double_eq_tol(t.total, 5.5, 1e-12);
    ck_assert_uint_eq(t.slowest, 0);
    /* Compute-bound: 1 s per sample, 20 s > 5.5 s. */
    e.compute_per_sample = 1;
    cfs_epoch_model(&e, nodes, 2, &t);
    ck_assert_double_eq_tol(t.total, 20.0, 1e-12);
    ck_assert_double_eq_tol(t.io, 5.5, 1e-12);
    ck_assert_int_eq(t.bound, CFS_EPOCH_COMPUTE);
    ck_assert_str_eq(cfs_epoch_bound_name(t.bound), "compute");
    /* Nothing from the PFS anywhere: no readers, the tiers and compute. */
    nodes[0] = (struct cfs_epoch_node){.samples = 1, .local_bytes = 100};
    nodes[1].pfs_reads = 0;
    nodes[1].pfs_bytes = 0;
    e.compute_per_sample = 0.1;
    cfs_epoch_model(&e, nodes, 2, &t);
    ck_assert_uint_eq(t.readers, 0);
    ck_assert_double_eq_tol(t.total, 4.0, 1e-12);
    ck_assert_uint_eq(t.slowest, 1);
    ck_assert_int_eq(t.bound, CFS_EPOCH_SSD);
}
END_TEST

START_TEST(ssd_fraction_fills_ram_first)
{
    struct cfs_cluster_env e = small_env(); /* 1000 RAM + 1000 SSD */
    ck_assert_double_eq(cfs_epoch_ssd_fraction(&e, 500), 0);
    ck_assert_double_eq(cfs_epoch_ssd_fraction(&e, 1000), 0);
    ck_assert_double_eq_tol(cfs_epoch_ssd_fraction(&e, 1500), 500.0 / 1500, 1e-15);
    ck_assert_double_eq(cfs_epoch_ssd_fraction(&e, 5000), 0.5); /* holds 2000 */
    e.ssd = 0;
    ck_assert_double_eq(cfs_epoch_ssd_fraction(&e, 5000), 0);
}
END_TEST

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("cluster_model");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, lassen_preset_is_the_published_curve);
    tcase_add_test(tc, env_file_good);
    tcase_add_test(tc, env_file_bad);
    tcase_add_test(tc, node_io_is_its_slowest_source);
    tcase_add_test(tc, epoch_is_max_of_compute_and_slowest_node);
    tcase_add_test(tc, ssd_fraction_fills_ram_first);
    suite_add_tcase(s, tc);
    int rc = cfs_check_run(s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = EXIT_FAILURE;
    return rc;
}
