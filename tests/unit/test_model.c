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
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 110000, 0), 0.001088,
                            1e-12);
    /* 1 ms + 1 MB at the SSD's 1 GB/s. */
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_SSD, 1000000, 0), 0.002, 1e-12);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, false), CFS_MODEL_PEER);
    /* A slow peer, or a node that does not exist: the PFS. */
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, true), CFS_MODEL_PFS);
    ck_assert_int_eq(cfs_model_choose(m, 4, CFS_TIER_RAM, 110000, 0, false), CFS_MODEL_PFS);
    cfs_model_destroy(m);
}
END_TEST

#define KEEP (1.0 - CFS_MODEL_DECAY)

/* The sums after a prior of lat and n samples of secs seconds, bytes each:
 * the latency they give at bandwidth bw. */
static double lat_after(double lat, int n, double secs, double bytes, double bw)
{
    double s = lat * CFS_MODEL_PRIOR, b = 0, c = CFS_MODEL_PRIOR;
    for (int i = 0; i < n; i++) {
        s = s * KEEP + secs;
        b = b * KEEP + bytes;
        c = c * KEEP + 1;
    }
    return (s - b / bw) / c;
}

START_TEST(measured_latency_moves_the_choice_and_probes_recover)
{
    struct cfs_model *m = make(2, 2);
    ck_assert_double_eq(cfs_model_measured_latency(m, 1), 0);
    /* 10.1 ms for 125000 B: 10 ms beyond the transfer, weighed against
     * the 1 ms prior's CFS_MODEL_PRIOR completions. */
    cfs_model_observe(m, 1, 125000, 0.0101);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1),
                            lat_after(0.001, 1, 0.0101, 125000, 1.25e9), 1e-12);
    ck_assert_double_gt(cfs_model_measured_latency(m, 1), 0.002);
    for (int i = 0; i < 200; i++)
        cfs_model_observe(m, 1, 0, 0.01);
    /* 10 ms against the PFS's 2.11 ms: beyond the margin. */
    ck_assert_double_gt(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 110000, 0),
                        CFS_MODEL_MARGIN * cfs_model_pfs_time(m, 110000));
    /* Node 0 is unaffected. */
    ck_assert_double_eq(cfs_model_measured_latency(m, 0), 0);
    int peer = 0;
    for (int i = 0; i < 2 * CFS_MODEL_PROBE_EVERY; i++)
        peer += cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, false) == CFS_MODEL_PEER;
    ck_assert_int_eq(peer, 2); /* the probes */
    /* Fast answers bring the peer back. */
    for (int i = 0; i < 300; i++)
        cfs_model_observe(m, 1, 110000, 0.0003);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, false), CFS_MODEL_PEER);
    cfs_model_destroy(m);
}
END_TEST

#define MS 1000000ull /* ns */

START_TEST(peer_service_leaves_out_the_queue)
{
    struct cfs_model *m = make(2, 1);
    /* A batch of 8 submitted at once and answered together 8 ms later (one
     * REPLY): the first was served for 8 ms, the seven behind it for
     * nothing beyond that; the queue is not counted as their latency. */
    for (int i = 0; i < 8; i++)
        cfs_model_peer_done(m, 1, 0, 0, 8 * MS);
    double s = 0.001 * CFS_MODEL_PRIOR, c = CFS_MODEL_PRIOR;
    for (int i = 0; i < 8; i++) {
        s = s * KEEP + (i == 0 ? 0.008 : 0);
        c = c * KEEP + 1;
    }
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), s / c, 1e-12);
    ck_assert_double_lt(cfs_model_measured_latency(m, 1), 0.002);
    /* The next batch, submitted at 4 ms (behind the first) and done at
     * 12 ms: served from the first batch's end, 4 ms. */
    cfs_model_peer_done(m, 1, 0, 4 * MS, 12 * MS);
    s = s * KEEP + 0.004;
    c = c * KEEP + 1;
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), s / c, 1e-12);
    /* Alone, a request is served from its submission: 3 ms. */
    cfs_model_peer_done(m, 1, 0, 100 * MS, 103 * MS);
    s = s * KEEP + 0.003;
    c = c * KEEP + 1;
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), s / c, 1e-12);
    /* The queue is added where the caller says it matters: each request
     * ahead holds the link for the mean service time. */
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 0, 10) -
                                cfs_model_peer_time(m, 1, CFS_TIER_RAM, 0, 0),
                            10 * s / c, 1e-12);
    /* A node that does not exist, or a completion before its submission:
     * nothing. */
    cfs_model_peer_done(m, 7, 0, 0, 2 * MS);
    cfs_model_peer_done(m, 0, 0, 5 * MS, 4 * MS);
    ck_assert_double_eq(cfs_model_measured_latency(m, 0), 0);
    cfs_model_destroy(m);
}
END_TEST

START_TEST(the_owner_keeps_its_files_within_the_margin)
{
    struct cfs_model *m = make(2, 1);
    /* The PFS: 1 MB in 12 ms at a 1 GB/s share is 11 ms of latency,
     * measured from the submission (its fetches run at once). */
    ck_assert_double_eq(cfs_model_pfs_latency(m), 0.002);
    cfs_model_pfs_done(m, 1000000, 0, 12 * MS);
    ck_assert_double_eq_tol(cfs_model_pfs_latency(m), lat_after(0.002, 1, 0.012, 1e6, 1e9),
                            1e-12);
    /* PFS fetches in flight together each count what they took. */
    struct cfs_model *q = make(2, 1);
    for (int i = 0; i < 50; i++)
        cfs_model_pfs_done(q, 0, 0, 30 * MS);
    ck_assert_double_eq_tol(cfs_model_pfs_latency(q), lat_after(0.002, 50, 0.03, 0, 1e9),
                            1e-12);
    cfs_model_destroy(q);

    /* A PFS at 3 ms and a peer at 5 ms (requests one second apart, each
     * served alone): slower, but within the margin, so every choice stays
     * with the owner. */
    for (int i = 0; i < 400; i++) {
        cfs_model_pfs_done(m, 0, 0, 3 * MS);
        cfs_model_peer_done(m, 1, 0, 1000 * MS * (uint64_t)i, 1000 * MS * (uint64_t)i + 5 * MS);
    }
    ck_assert_double_eq_tol(cfs_model_pfs_latency(m), 0.003, 1e-4);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), 0.005, 1e-4);
    int peer = 0;
    for (int i = 0; i < CFS_MODEL_PROBE_EVERY; i++)
        peer += cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, false) == CFS_MODEL_PEER;
    ck_assert_int_eq(peer, CFS_MODEL_PROBE_EVERY);
    /* A read the trainer waits on behind 100 requests to that peer (each
     * 5 ms): the PFS, but for the probe. */
    peer = 0;
    for (int i = 0; i < CFS_MODEL_PROBE_EVERY; i++)
        peer += cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 100, false) == CFS_MODEL_PEER;
    ck_assert_int_eq(peer, 1);
    /* A peer at 10 ms, beyond twice the PFS's: the PFS, but for the probes. */
    for (uint64_t i = 400; i < 800; i++)
        cfs_model_peer_done(m, 1, 0, 1000 * MS * i, 1000 * MS * i + 10 * MS);
    peer = 0;
    for (int i = 0; i < CFS_MODEL_PROBE_EVERY; i++)
        peer += cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, false) == CFS_MODEL_PEER;
    ck_assert_int_eq(peer, 1);
    /* The PFS loaded (every fetch 30 ms): the peer again. */
    for (int i = 0; i < 400; i++)
        cfs_model_pfs_done(m, 110000, 0, 30 * MS);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 110000, 0, false), CFS_MODEL_PEER);
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
    ck_assert_uint_eq(p.fixed & CFS_MODEL_FIXED_PFS_LATENCY, CFS_MODEL_FIXED_PFS_LATENCY);
    ck_assert_uint_eq(p.fixed & CFS_MODEL_FIXED_NET_LATENCY, 0);
    /* The file's PFS latency stays as given; the peers' is measured. */
    struct cfs_model *m = NULL;
    ck_assert_int_eq(cfs_model_create(&p, 2, 1, &m), 0);
    cfs_model_pfs_done(m, 0, 0, 1000 * MS);
    ck_assert_double_eq(cfs_model_pfs_latency(m), 0.05);
    cfs_model_peer_done(m, 1, 0, 0, 9 * MS);
    ck_assert_double_eq_tol(cfs_model_measured_latency(m, 1), lat_after(0.001, 1, 0.009, 0, 1),
                            1e-12);
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
    ck_assert_double_eq_tol(cfs_model_peer_time(m, 1, CFS_TIER_RAM, 0, 0), 0.0001, 1e-15);
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

/* Fetches of two sizes, each 3 ms + its bytes at 20 MB/s (what one fetch
 * sees of a PFS shared with other jobs): the model's PFS time is that line,
 * not the configured share's 1 GB/s. */
static void pfs_line_samples(struct cfs_model *m, int count)
{
    for (int i = 0; i < count; i++) {
        uint64_t bytes = i % 2 ? 500000 : 50000;
        uint64_t ns = 3 * MS + bytes * 1000000000ull / 20000000ull;
        cfs_model_pfs_done(m, bytes, 0, ns);
    }
}

START_TEST(pfs_bandwidth_and_latency_are_measured)
{
    struct cfs_model *m = make(2, 2);
    ck_assert_double_eq(cfs_model_pfs_bandwidth(m), 1e9); /* nothing measured: the share */
    pfs_line_samples(m, 15);
    ck_assert_double_eq(cfs_model_pfs_bandwidth(m), 1e9); /* too few to fit yet */
    pfs_line_samples(m, 49);
    ck_assert_double_eq_tol(cfs_model_pfs_bandwidth(m), 20e6, 1.0);
    ck_assert_double_eq_tol(cfs_model_pfs_latency(m), 0.003, 1e-9);
    ck_assert_double_eq_tol(cfs_model_pfs_time(m, 1000000), 0.003 + 0.05, 1e-9);
    /* A peer measured at 40 ms a file keeps 1 MB (the PFS: 53 ms), which
     * the mean PFS time split at the configured share (about 16 ms for
     * 1 MB) would have sent to the PFS. */
    for (int i = 0; i < 200; i++)
        cfs_model_observe(m, 1, 0, 0.04);
    ck_assert_int_eq(cfs_model_choose(m, 1, CFS_TIER_RAM, 1000000, 0, false), CFS_MODEL_PEER);
    cfs_model_destroy(m);

    /* Files all of one size: no slope to see, the share splits the time. */
    m = make(2, 2);
    for (int i = 0; i < 64; i++)
        cfs_model_pfs_done(m, 110000, 0, 30 * MS);
    ck_assert_double_eq(cfs_model_pfs_bandwidth(m), 1e9);
    cfs_model_destroy(m);

    /* A PFS bandwidth given in the model file is used as given. */
    struct cfs_model_params p;
    char err[256];
    cfs_model_defaults(&p);
    char *path = write_file("pfs_bw = 100M\n");
    ck_assert_int_eq(cfs_model_load(path, &p, err, sizeof(err)), 0);
    ck_assert_int_eq(cfs_model_create(&p, 2, 1, &m), 0);
    pfs_line_samples(m, 64);
    ck_assert_double_eq(cfs_model_pfs_bandwidth(m), 100.0 * 1024 * 1024);
    cfs_model_destroy(m);
    unlink(path);
    free(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, pfs_share_shrinks_with_clients);
    tcase_add_test(tc, peer_time_uses_the_slower_of_link_and_tier);
    tcase_add_test(tc, measured_latency_moves_the_choice_and_probes_recover);
    tcase_add_test(tc, peer_service_leaves_out_the_queue);
    tcase_add_test(tc, the_owner_keeps_its_files_within_the_margin);
    tcase_add_test(tc, config_file_overrides_and_errors_name_the_line);
    tcase_add_test(tc, pfs_bandwidth_and_latency_are_measured);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
