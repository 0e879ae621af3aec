#include <errno.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/metrics.h"

static const char expected_prometheus[] =
    "# HELP clairfs_catalog_files Regular files in the catalog.\n"
    "# TYPE clairfs_catalog_files gauge\n"
    "clairfs_catalog_files 1281167\n"
    "# HELP clairfs_catalog_dirs Directories in the catalog.\n"
    "# TYPE clairfs_catalog_dirs gauge\n"
    "clairfs_catalog_dirs 1001\n"
    "# HELP clairfs_catalog_bytes Bytes of the regular files in the catalog.\n"
    "# TYPE clairfs_catalog_bytes gauge\n"
    "clairfs_catalog_bytes 146900000000\n"
    "# HELP clairfs_catalog_loaded_from_index 1 when the catalog was loaded from the index, 0 "
    "when scanned.\n"
    "# TYPE clairfs_catalog_loaded_from_index gauge\n"
    "clairfs_catalog_loaded_from_index 1\n"
    "# HELP clairfs_reads_total File reads (one per open) by where the bytes came from.\n"
    "# TYPE clairfs_reads_total counter\n"
    "clairfs_reads_total{source=\"ram\"} 10\n"
    "clairfs_reads_total{source=\"ssd\"} 20\n"
    "clairfs_reads_total{source=\"peer\"} 30\n"
    "clairfs_reads_total{source=\"pfs\"} 18446744073709551615\n"
    "# HELP clairfs_stall_seconds_total Time reads waited for data.\n"
    "# TYPE clairfs_stall_seconds_total counter\n"
    "clairfs_stall_seconds_total 12.000000345\n"
    "# HELP clairfs_prediction_total Opened files that the plan expected now (hit) or not "
    "(miss), or that no order in force covers (unplanned): the training order's, and "
    "phase=\"validation\" an evaluation pass's.\n"
    "# TYPE clairfs_prediction_total counter\n"
    "clairfs_prediction_total{result=\"hit\"} 7\n"
    "clairfs_prediction_total{result=\"miss\"} 3\n"
    "clairfs_prediction_total{result=\"unplanned\"} 2\n"
    "clairfs_prediction_total{phase=\"validation\",result=\"hit\"} 5\n"
    "clairfs_prediction_total{phase=\"validation\",result=\"miss\"} 0\n"
    "# HELP clairfs_fetch_bytes_total Bytes fetched, by source.\n"
    "# TYPE clairfs_fetch_bytes_total counter\n"
    "clairfs_fetch_bytes_total{from=\"pfs\"} 4096\n"
    "clairfs_fetch_bytes_total{from=\"peer\"} 0\n"
    "# HELP clairfs_cache_bytes Bytes held in each cache tier.\n"
    "# TYPE clairfs_cache_bytes gauge\n"
    "clairfs_cache_bytes{tier=\"ram\"} 1073741824\n"
    "clairfs_cache_bytes{tier=\"ssd\"} 1536\n"
    "# HELP clairfs_epoch The trainers' current epoch.\n"
    "# TYPE clairfs_epoch gauge\n"
    "clairfs_epoch 4\n"
    "# HELP clairfs_cache_checksum_failures_total Cache entries found corrupt (then refetched).\n"
    "# TYPE clairfs_cache_checksum_failures_total counter\n"
    "clairfs_cache_checksum_failures_total 2\n"
    "# HELP clairfs_peer_fetches_total Fetches asked from a peer: answered (ok), or read from the "
    "PFS after all (fallback: not held, slow peer, bad checksum).\n"
    "# TYPE clairfs_peer_fetches_total counter\n"
    "clairfs_peer_fetches_total{result=\"ok\"} 0\n"
    "clairfs_peer_fetches_total{result=\"fallback\"} 0\n"
    "# HELP clairfs_peer_served_files_total Files sent to other nodes.\n"
    "# TYPE clairfs_peer_served_files_total counter\n"
    "clairfs_peer_served_files_total 0\n"
    "# HELP clairfs_source_changed_total Source files found changed under the mount (not served "
    "unless already cached: ESTALE).\n"
    "# TYPE clairfs_source_changed_total counter\n"
    "clairfs_source_changed_total 5\n"
    "# HELP clairfs_cache_peak_bytes The most bytes each cache tier has held since the mount.\n"
    "# TYPE clairfs_cache_peak_bytes gauge\n"
    "clairfs_cache_peak_bytes{tier=\"ram\"} 2147483648\n"
    "clairfs_cache_peak_bytes{tier=\"ssd\"} 0\n"
    "# HELP clairfs_pagecache_bytes RAM-tier bytes held as kernel page cache (staged; part of "
    "clairfs_cache_bytes{tier=\"ram\"}).\n"
    "# TYPE clairfs_pagecache_bytes gauge\n"
    "clairfs_pagecache_bytes 786432\n"
    "# HELP clairfs_pagecache_staged_total Files stored into the kernel page cache ahead of their "
    "reads.\n"
    "# TYPE clairfs_pagecache_staged_total counter\n"
    "clairfs_pagecache_staged_total 9\n"
    "# HELP clairfs_pagecache_invalidations_total Staged files whose pages clairfs dropped "
    "(evicted, or read for the last time).\n"
    "# TYPE clairfs_pagecache_invalidations_total counter\n"
    "clairfs_pagecache_invalidations_total 6\n"
    "# HELP clairfs_pagecache_fallback_reads_total Opens of a staged file whose reads still "
    "reached clairfs (the kernel had reclaimed pages): served from the source.\n"
    "# TYPE clairfs_pagecache_fallback_reads_total counter\n"
    "clairfs_pagecache_fallback_reads_total 1\n"
    "# HELP clairfs_read_requests_total FUSE read requests on dataset files (page-cache hits send "
    "none).\n"
    "# TYPE clairfs_read_requests_total counter\n"
    "clairfs_read_requests_total 44\n"
    "# HELP clairfs_index_write_errors_total Writes of the SSD tier's records that the index "
    "refused (disk full, I/O error): the tier then serves without persisting.\n"
    "# TYPE clairfs_index_write_errors_total counter\n"
    "clairfs_index_write_errors_total 3\n"
    "# HELP clairfs_fetches_total Completed fetches, by source (a peer's answer that was not the "
    "bytes counts as the PFS fetch that follows).\n"
    "# TYPE clairfs_fetches_total counter\n"
    "clairfs_fetches_total{from=\"pfs\"} 8\n"
    "clairfs_fetches_total{from=\"peer\"} 2\n"
    "# HELP clairfs_fetch_seconds_total Time of the completed fetches from submission to "
    "completion, queueing included, by source: divided by clairfs_fetches_total, the cost of one "
    "file from each.\n"
    "# TYPE clairfs_fetch_seconds_total counter\n"
    "clairfs_fetch_seconds_total{from=\"pfs\"} 1.500000000\n"
    "clairfs_fetch_seconds_total{from=\"peer\"} 0.250000000\n"
    "# HELP clairfs_order_identified 1 once the trainers' read order was identified from their "
    "opens (or a registered one confirmed by them), 0 while learning or after a contradiction; "
    "with root=, each dataset root the opens found (\".\" the mount's own): a seeded shuffle or an "
    "unshuffled pass identified there.\n"
    "# TYPE clairfs_order_identified gauge\n"
    "clairfs_order_identified 1\n"
    "# HELP clairfs_sweep_held 1 while the sweep (the files not yet read, staged in index order "
    "while no order is known) holds back because the order's search gets less than half a core: "
    "the cores are busy (sweep=auto).\n"
    "# TYPE clairfs_sweep_held gauge\n"
    "clairfs_sweep_held 1\n"
    "# HELP clairfs_search_cpu_seconds_total CPU time of the order's seed scans (the "
    "identification's thread), by the priority they ran at: normal (their first seeds, the "
    "checks of candidates, and what search_budget= allows while the cores are busy) or idle "
    "(SCHED_IDLE: what everything else leaves).\n"
    "# TYPE clairfs_search_cpu_seconds_total counter\n"
    "clairfs_search_cpu_seconds_total{priority=\"normal\"} 2.500000000\n"
    "clairfs_search_cpu_seconds_total{priority=\"idle\"} 61.000000000\n"
    "# HELP clairfs_peer_late_total Owned files a peer asked for before this node had begun "
    "fetching them (fetched then, the reply held back until they arrive).\n"
    "# TYPE clairfs_peer_late_total counter\n"
    "clairfs_peer_late_total 0\n"
    "# HELP clairfs_pagecache_retrieved_total Staged owned files read back from the kernel page "
    "cache for a peer (asked), and those the kernel no longer held whole (short: the peer read "
    "the PFS).\n"
    "# TYPE clairfs_pagecache_retrieved_total counter\n"
    "clairfs_pagecache_retrieved_total{result=\"asked\"} 7\n"
    "clairfs_pagecache_retrieved_total{result=\"short\"} 1\n"
    "# HELP clairfs_pfs_bytes_total The bytes read from the PFS, by why no peer gave them: no "
    "other node holds the file (unheld), its owner has not read it yet (unread), is marked slow "
    "(slow), the performance model chose the PFS (model), the owner was asked and did not give "
    "them (fallback), the kernel dropped a staged file's pages (reclaimed).  They add up to "
    "clairfs_fetch_bytes_total{from=\"pfs\"}.\n"
    "# TYPE clairfs_pfs_bytes_total counter\n"
    "clairfs_pfs_bytes_total{reason=\"unheld\"} 1024\n"
    "clairfs_pfs_bytes_total{reason=\"unread\"} 0\n"
    "clairfs_pfs_bytes_total{reason=\"slow\"} 0\n"
    "clairfs_pfs_bytes_total{reason=\"model\"} 2048\n"
    "clairfs_pfs_bytes_total{reason=\"fallback\"} 512\n"
    "clairfs_pfs_bytes_total{reason=\"reclaimed\"} 512\n"
    "# HELP clairfs_fuse_requests_total FUSE requests, by what carried them from the kernel: "
    "/dev/fuse (dev) or the io_uring queue of the CPU they were made on (io_uring; fuse_io=).\n"
    "# TYPE clairfs_fuse_requests_total counter\n"
    "clairfs_fuse_requests_total{transport=\"dev\"} 3\n"
    "clairfs_fuse_requests_total{transport=\"io_uring\"} 1770\n"
    "# HELP clairfs_fuse_ring_queues CPU queues of FUSE over io_uring registered with the kernel "
    "(0: every request over /dev/fuse).\n"
    "# TYPE clairfs_fuse_ring_queues gauge\n"
    "clairfs_fuse_ring_queues 2\n";

static const char expected_stats[] =
    "catalog   files 1281167  dirs 1001  bytes 137 GiB  from_index yes\n"
    "reads     ram 10  ssd 20  peer 30  pfs 18446744073709551615\n"
    "stall     12.000 s\n"
    "predict   hit 7  miss 3  unplanned 2  val_hit 5  val_miss 0\n"
    "fetched   pfs 4.00 KiB  peer 0 B\n"
    "cache     ram 1.00 GiB  ssd 1.50 KiB\n"
    "epoch     4\n"
    "corrupt   2\n"
    "peer      ok 0  fallback 0  served 0\n"
    "changed   5\n"
    "peak      ram 2.00 GiB  ssd 0 B\n"
    "pagecache bytes 768 KiB  staged 9  dropped 6  fallback 1\n"
    "requests  44\n"
    "index     write_errors 3\n"
    "fetches   pfs 8  peer 2\n"
    "fetchtime pfs 1.500 s  peer 0.250 s\n"
    "order     identified yes  sweep_held yes\n"
    "search    normal 2.500 s  idle 61.000 s\n"
    "owner     late 0\n"
    "retrieve  asked 7  short 1\n"
    "pfs_why   unheld 1.00 KiB  unread 0 B  slow 0 B  model 2.00 KiB  fallback 512 B  reclaimed 512 B\n"
    "fuse      dev 3  io_uring 1770  queues 2\n";

static void fill(struct cfs_metrics *m)
{
    cfs_metrics_init(m);
    cfs_metrics_set(m, CFS_M_CATALOG_FILES, 1281167);
    cfs_metrics_set(m, CFS_M_CATALOG_DIRS, 1001);
    cfs_metrics_set(m, CFS_M_CATALOG_BYTES, 146900000000ull);
    cfs_metrics_set(m, CFS_M_CATALOG_FROM_INDEX, 1);
    cfs_metrics_add(m, CFS_M_READS_RAM, 10);
    cfs_metrics_add(m, CFS_M_READS_SSD, 20);
    cfs_metrics_add(m, CFS_M_READS_PEER, 30);
    cfs_metrics_add(m, CFS_M_READS_PFS, UINT64_MAX - 1);
    cfs_metrics_add(m, CFS_M_READS_PFS, 1);
    cfs_metrics_add(m, CFS_M_STALL_NS, 12000000345ull);
    cfs_metrics_add(m, CFS_M_PREDICTION_HIT, 7);
    cfs_metrics_add(m, CFS_M_PREDICTION_MISS, 3);
    cfs_metrics_add(m, CFS_M_PREDICTION_UNPLANNED, 2);
    cfs_metrics_add(m, CFS_M_PREDICTION_EVAL_HIT, 5);
    cfs_metrics_add(m, CFS_M_FETCH_BYTES_PFS, 4096);
    cfs_metrics_set(m, CFS_M_CACHE_BYTES_RAM, 1ull << 30);
    cfs_metrics_set(m, CFS_M_CACHE_BYTES_SSD, 1536);
    cfs_metrics_set(m, CFS_M_EPOCH, 3);
    cfs_metrics_set(m, CFS_M_EPOCH, 4);
    cfs_metrics_set(m, CFS_M_CHECKSUM_FAILURES, 2);
    cfs_metrics_add(m, CFS_M_SOURCE_CHANGED, 5);
    cfs_metrics_set(m, CFS_M_CACHE_PEAK_RAM, 2ull << 30);
    cfs_metrics_set(m, CFS_M_PAGECACHE_BYTES, 768u << 10);
    cfs_metrics_add(m, CFS_M_PAGECACHE_STAGED, 9);
    cfs_metrics_add(m, CFS_M_PAGECACHE_INVALIDATED, 6);
    cfs_metrics_add(m, CFS_M_PAGECACHE_FALLBACK, 1);
    cfs_metrics_add(m, CFS_M_READ_REQUESTS, 44);
    cfs_metrics_add(m, CFS_M_INDEX_WRITE_ERRORS, 3);
    cfs_metrics_add(m, CFS_M_FETCHES_PFS, 8);
    cfs_metrics_add(m, CFS_M_FETCHES_PEER, 2);
    cfs_metrics_add(m, CFS_M_FETCH_NS_PFS, 1500000000ull);
    cfs_metrics_add(m, CFS_M_FETCH_NS_PEER, 250000000ull);
    cfs_metrics_set(m, CFS_M_ORDER_IDENTIFIED, 1);
    cfs_metrics_set(m, CFS_M_SWEEP_HELD, 1);
    cfs_metrics_add(m, CFS_M_SEARCH_NS_NORMAL, 2500000000ull);
    cfs_metrics_add(m, CFS_M_SEARCH_NS_IDLE, 61000000000ull);
    cfs_metrics_add(m, CFS_M_PAGECACHE_RETRIEVES, 7);
    cfs_metrics_add(m, CFS_M_PAGECACHE_RETRIEVE_SHORT, 1);
    cfs_metrics_add(m, CFS_M_PFS_BYTES_UNHELD, 1024);
    cfs_metrics_add(m, CFS_M_PFS_BYTES_MODEL, 2048);
    cfs_metrics_add(m, CFS_M_PFS_BYTES_FALLBACK, 512);
    cfs_metrics_add(m, CFS_M_PFS_BYTES_RECLAIMED, 512);
    cfs_metrics_add(m, CFS_M_FUSE_REQUESTS_DEVICE, 3);
    cfs_metrics_add(m, CFS_M_FUSE_REQUESTS_RING, 1770);
    cfs_metrics_set(m, CFS_M_FUSE_RING_QUEUES, 2);
}

START_TEST(prometheus_text_is_exact)
{
    struct cfs_metrics m;
    struct cfs_metrics_snapshot s;
    char *out;
    size_t len;
    fill(&m);
    cfs_metrics_snapshot(&m, &s);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&s, &out, &len), 0);
    ck_assert_str_eq(out, expected_prometheus);
    ck_assert_uint_eq(len, strlen(expected_prometheus));
    free(out);
}
END_TEST

START_TEST(stats_screen_is_exact)
{
    struct cfs_metrics m;
    struct cfs_metrics_snapshot s;
    char *out;
    size_t len;
    fill(&m);
    cfs_metrics_snapshot(&m, &s);
    ck_assert_int_eq(cfs_metrics_render_stats(&s, &out, &len), 0);
    ck_assert_str_eq(out, expected_stats);
    ck_assert_uint_eq(len, strlen(expected_stats));
    free(out);
}
END_TEST

START_TEST(zero_metrics_render_zeros)
{
    struct cfs_metrics m;
    struct cfs_metrics_snapshot s;
    char *out;
    size_t len;
    cfs_metrics_init(&m);
    cfs_metrics_snapshot(&m, &s);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&s, &out, &len), 0);
    ck_assert_ptr_nonnull(strstr(out, "\nclairfs_stall_seconds_total 0.000000000\n"));
    ck_assert_ptr_nonnull(strstr(out, "\nclairfs_reads_total{source=\"pfs\"} 0\n"));
    free(out);
}
END_TEST

START_TEST(every_family_has_help_and_type_once)
{
    struct cfs_metrics m;
    struct cfs_metrics_snapshot s;
    char *out;
    size_t len;
    cfs_metrics_init(&m);
    cfs_metrics_snapshot(&m, &s);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&s, &out, &len), 0);
    for (int i = 0; i < CFS_M_COUNT; i++) {
        char help[128], type[128];
        snprintf(help, sizeof(help), "# HELP %s ", cfs_metrics_name(i));
        snprintf(type, sizeof(type), "# TYPE %s ", cfs_metrics_name(i));
        const char *h = strstr(out, help);
        ck_assert_msg(h != NULL, "%s lacks HELP", cfs_metrics_name(i));
        ck_assert_msg(strstr(h + 1, help) == NULL, "%s has two HELP lines", cfs_metrics_name(i));
        ck_assert_msg(strstr(out, type) != NULL, "%s lacks TYPE", cfs_metrics_name(i));
    }
    ck_assert_str_eq(cfs_metrics_name(CFS_M_READS_PFS), "clairfs_reads_total");
    ck_assert_str_eq(cfs_metrics_labels(CFS_M_READS_PFS), "source=\"pfs\"");
    ck_assert_str_eq(cfs_metrics_labels(CFS_M_EPOCH), "");
    free(out);
}
END_TEST

/* The roots' series of clairfs_order_identified: one a root named, in the
 * order named, right after the unlabelled one, its label value quoted;
 * none before a root; the seventeenth root refused. */
START_TEST(roots_render_one_series_each)
{
    struct cfs_metrics m;
    struct cfs_metrics_snapshot s;
    char *out;
    size_t len;
    cfs_metrics_init(&m);
    cfs_metrics_snapshot(&m, &s);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&s, &out, &len), 0);
    ck_assert_ptr_null(strstr(out, "clairfs_order_identified{"));
    free(out);
    ck_assert_int_eq(cfs_metrics_root_add(&m, "train"), 0);
    ck_assert_int_eq(cfs_metrics_root_add(&m, "val \"2\""), 1);
    cfs_metrics_root_set(&m, 0, 1);
    cfs_metrics_snapshot(&m, &s);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&s, &out, &len), 0);
    ck_assert_ptr_nonnull(strstr(out, "\nclairfs_order_identified 0\n"
                                      "clairfs_order_identified{root=\"train\"} 1\n"
                                      "clairfs_order_identified{root=\"val \\\"2\\\"\"} 0\n"
                                      "# HELP clairfs_sweep_held "));
    free(out);
    for (int i = 2; i < CFS_METRICS_ROOTS; i++)
        ck_assert_int_eq(cfs_metrics_root_add(&m, "x"), i);
    ck_assert_int_eq(cfs_metrics_root_add(&m, "y"), -ENOSPC);
}
END_TEST

START_TEST(bytes_format_for_people)
{
    char b[32];
    cfs_metrics_format_bytes(0, b, sizeof(b));
    ck_assert_str_eq(b, "0 B");
    cfs_metrics_format_bytes(1023, b, sizeof(b));
    ck_assert_str_eq(b, "1023 B");
    cfs_metrics_format_bytes(1024, b, sizeof(b));
    ck_assert_str_eq(b, "1.00 KiB");
    cfs_metrics_format_bytes(110 * 1024 + 512, b, sizeof(b));
    ck_assert_str_eq(b, "110 KiB");
    cfs_metrics_format_bytes(25ull << 20, b, sizeof(b));
    ck_assert_str_eq(b, "25.0 MiB");
    cfs_metrics_format_bytes(UINT64_MAX, b, sizeof(b));
    ck_assert_str_eq(b, "16.0 EiB");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("render");
    tcase_add_test(tc, prometheus_text_is_exact);
    tcase_add_test(tc, stats_screen_is_exact);
    tcase_add_test(tc, zero_metrics_render_zeros);
    tcase_add_test(tc, every_family_has_help_and_type_once);
    tcase_add_test(tc, bytes_format_for_people);
    tcase_add_test(tc, roots_render_one_series_each);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
