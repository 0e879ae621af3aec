#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/model.h"

static struct cfs_model *make(uint32_t nodes, uint32_t clients)
{
    struct cfs_model_params p;
    struct cfs_model *m = NULL;
    cfs_model_defaults(&p);
    ck_assert_int_eq(cfs_model_create(&p, nodes, clients, &m), 0);
    return m;
}

START_TEST(pfs_share_shrinks_with_clients)
{
    struct cfs_model *one = make(4, 1), *four = make(4, 4);
    /* 2 ms + 110000 B at min(1 GB/s per client, 2 GB/s / clients). */
    ck_assert_double_eq_tol(cfs_model_pfs_time(one, 110000), 0.00211, 1e-12);
    ck_assert_double_eq_tol(cfs_model_pfs_time(four, 110000), 0.00222, 1e-12);
    cfs_model_destroy(one);
    cfs_model_destroy(four);
}
END_TEST

START_TEST(peer_time_uses_the_slower_of_link_and_tier)
{
    struct cfs_model *m = make(4, 4);
    /* 1 ms + 110000 B at 1.25 GB/s (RAM's 10 GB/s is faster). */
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 110000), 0.001088,
                            1e-12);
    /* 1 ms + 1 MB at the SSD's 1 GB/s. */
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_SSD, 1000000), 0.002, 1e-12);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, false), CFS_MODEL_PEER);
    /* A slow peer, or a node that does not exist: the PFS. */
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, true), CFS_MODEL_PFS);
    ck_assert_int_eq(cfs_model_choose(m, 4, CFS_TIER_RAM, 110000, false), CFS_MODEL_PFS);
    cfs_model_destroy(m);
}
END_TEST

START_TEST(measured_latency_moves_the_choice_and_probes_recover)
{
    struct cfs_model *m = make(2, 2);
    ck_assert_double_eq(cfs_model_measured_latency(m, 1), 0);
    /* 10.1 ms for 125000 B: 10 ms beyond the transfer; the mean moves 1/8
     * of the way from the 1 ms prior. */
    cfs_model_observe(m, 1, 125000, 0.0101);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.002125, 1e-12);
    cfs_model_observe(m, 1, 0, 0.01);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.002125 + (0.01 - 0.002125) / 8,
                            1e-12);
    for (int i = 0; i < 40; i++)
        cfs_model_observe(m, 1, 0, 0.01);
    ck_assert_double_gt(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 110000),
                        cfs_model_pfs_time(m, 110000));
    /* Node 0 is unaffected. */
    ck_assert_double_eq(cfs_model_measured_latency(m, 0), 0);
    int peer = 0;
    for (int i = 0; i < 2 * CFS_MODEL_PROBE_EVERY; i++)
        peer += cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, false) == CFS_MODEL_PEER;
    ck_assert_int_eq(peer, 2); /* the probes */
    /* Fast answers bring the peer back. */
    for (int i = 0; i < 60; i++)
        cfs_model_observe(m, 1, 110000, 0.0003);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, false), CFS_MODEL_PEER);
    cfs_model_destroy(m);
}
END_TEST

#define MS 1000000ull /* ns */

START_TEST(completions_measure_what_each_fetch_took)
{
    struct cfs_model *m = make(2, 1);
    /* A peer fetch of 125000 B submitted at 1 s, done 10.1 ms later: 10 ms
     * beyond the transfer at 1.25 GB/s, 1/8 of the way from the 1 ms prior. */
    cfs_model_peer_done(m, 1, 125000, 1000 * MS, 1000 * MS + 10100000);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.002125, 1e-12);
    /* A batch of eight answered together after 2 ms: each took 2 ms, the
     * last one included (no in-flight count to divide by). */
    struct cfs_model *b = make(2, 1);
    for (int i = 0; i < 8; i++)
        cfs_model_peer_done(b, 1, 0, 0, 2 * MS);
    double want = 0.001;
    for (int i = 0; i < 8; i++)
        want += (0.002 - want) / 8;
    ck_assert_double_eq_tol(cfs_model_measured_latency(b, 1), want, 1e-12);
    /* A node that does not exist, or a completion before its submission:
     * nothing. */
    cfs_model_peer_done(b, 7, 0, 0, 2 * MS);
    cfs_model_peer_done(b, 0, 0, 5 * MS, 5 * MS);
    ck_assert_double_eq(cfs_model_measured_latency(b, 0), 0);

    /* The PFS: 1 MB in 12 ms at a 1 GB/s share is 11 ms of latency; the
     * mean moves 1/8 of the way from the configured 2 ms. */
    ck_assert_double_eq(cfs_model_pfs_latency(m), 0.002);
    cfs_model_pfs_done(m, 1000000, 0, 12 * MS);
    ck_assert_double_eq_tol(cfs_model_pfs_latency(m), 0.003125, 1e-12);
    ck_assert_double_eq_tol(cfs_model_pfs_time(m, 110000), 0.003125 + 0.00011, 1e-12);
    /* A fast PFS (0.3 ms per open) against a peer measured at 10 ms: the
     * PFS wins, but for the probes. */
    for (int i = 0; i < 100; i++) {
        cfs_model_pfs_done(m, 0, 0, 300000);
        cfs_model_peer_done(m, 1, 0, 0, 10 * MS);
    }
    ck_assert_double_eq_tol(cfs_model_pfs_latency(m), 0.0003, 1e-6);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.01, 1e-6);
    int peer = 0;
    for (int i = 0; i < CFS_MODEL_PROBE_EVERY; i++)
        peer += cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, false) == CFS_MODEL_PEER;
    ck_assert_int_eq(peer, 1);
    /* The PFS loaded (its queue makes every fetch 30 ms): the peer again. */
    for (int i = 0; i < 60; i++)
        cfs_model_pfs_done(m, 110000, 0, 30 * MS);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, false), CFS_MODEL_PEER);
    cfs_model_destroy(m);
    cfs_model_destroy(b);
}
END_TEST

static char *write_file(const char *text)
{
    char *path = strdup("/tmp/clairfs-model-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

START_TEST(config_file_overrides_and_errors_name_the_line)
{
    struct cfs_model_params p, before;
    char err[256], want[512];
    cfs_model_defaults(&p);
    char *path = write_file("# a loaded PFS\npfs_latency = 0.05   # seconds\n\n net_bw=10G\n");
    ck_assert_int_eq(cfs_model_load(path, &p, err, sizeof(err)), 0);
    ck_assert_double_eq(p.pfs_latency, 0.05);
    ck_assert_double_eq(p.net_bw, 10.0 * 1024 * 1024 * 1024);
    ck_assert_double_eq(p.pfs_bw, 2e9); /* untouched */
    ck_assert_uint_eq(p.fixed & CFS_MODEL_FIXED_PFS_LATENCY, CFS_MODEL_FIXED_PFS_LATENCY);
    ck_assert_uint_eq(p.fixed & CFS_MODEL_FIXED_NET_LATENCY, 0);
    /* The file's PFS latency stays as given; the peers' is measured. */
    struct cfs_model *m = NULL;
    ck_assert_int_eq(cfs_model_create(&p, 2, 1, &m), 0);
    cfs_model_pfs_done(m, 0, 0, 1000 * MS);
    ck_assert_double_eq(cfs_model_pfs_latency(m), 0.05);
    cfs_model_peer_done(m, 1, 0, 0, 9 * MS);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.002, 1e-12);
    cfs_model_destroy(m);
    unlink(path);
    free(path);

    /* A net_latency in the file: the peers are not measured either. */
    struct cfs_model_params q;
    cfs_model_defaults(&q);
    path = write_file("net_latency = 0.0001\n");
    ck_assert_int_eq(cfs_model_load(path, &q, err, sizeof(err)), 0);
    ck_assert_uint_eq(q.fixed, CFS_MODEL_FIXED_NET_LATENCY);
    ck_assert_int_eq(cfs_model_create(&q, 2, 1, &m), 0);
    cfs_model_peer_done(m, 1, 0, 0, 9 * MS);
    ck_assert_double_eq(cfs_model_measured_latency(m, 1), 0);
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 0), 0.0001, 1e-15);
    cfs_model_destroy(m);
    unlink(path);
    free(path);

    before = p;
    path = write_file("ram_bw = 5G\nfoo = 1\n");
    ck_assert_int_eq(cfs_model_load(path, &p, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:2: unknown key 'foo'", path);
    ck_assert_str_eq(err, want);
    ck_assert_mem_eq(&p, &before, sizeof(p)); /* all or nothing */
    unlink(path);
    free(path);

    path = write_file("pfs_bw = -3\n");
    ck_assert_int_eq(cfs_model_load(path, &p, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:1: pfs_bw = -3: expected a positive bandwidth", path);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    unlink(path);
    free(path);

    path = write_file("net_latency\n");
    ck_assert_int_eq(cfs_model_load(path, &p, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:1: expected key = value", path);
    ck_assert_str_eq(err, want);
    unlink(path);
    free(path);

    ck_assert_int_eq(cfs_model_load("/nonexistent/model", &p, err, sizeof(err)), -ENOENT);
    ck_assert_str_eq(err, "model /nonexistent/model: No such file or directory");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, pfs_share_shrinks_with_clients);
    tcase_add_test(tc, peer_time_uses_the_slower_of_link_and_tier);
    tcase_add_test(tc, measured_latency_moves_the_choice_and_probes_recover);
    tcase_add_test(tc, completions_measure_what_each_fetch_took);
    tcase_add_test(tc, config_file_overrides_and_errors_name_the_line);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
