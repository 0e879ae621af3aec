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
    cfs_model_observe(m, 1, 125000, 0.0101, 1);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.002125, 1e-12);
    /* Eight requests in flight over 80 ms: 10 ms each, the same sample. */
    cfs_model_observe(m, 1, 0, 0.08, 8);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.002125 + (0.01 - 0.002125) / 8,
                            1e-12);
    for (int i = 0; i < 40; i++)
        cfs_model_observe(m, 1, 0, 0.01, 1);
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
        cfs_model_observe(m, 1, 110000, 0.0003, 1);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, false), CFS_MODEL_PEER);
    cfs_model_destroy(m);
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
    tcase_add_test(tc, config_file_overrides_and_errors_name_the_line);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
