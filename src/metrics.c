/* The mount's counters and gauges (clairfs/metrics.h) and their two
 * renderings, Prometheus text for .clairfs/metrics and the one-screen
 * summary for .clairfs/stats.  Everything about a metric but its value is
 * one row of metric_table: its Prometheus family, labels, type, unit, help
 * and place on the stats screen, so that adding a figure is one enum value
 * and one row, and the two renderings cannot disagree on what a slot is.
 * Rendering works on a snapshot, so one rendering never shows two reads of
 * the same slot; it writes through a memstream, whose failure shows only
 * at fclose. */
#include "clairfs/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum metric_type { COUNTER, GAUGE };

/* How a value is shown: as is, as bytes, nanoseconds shown as seconds, or
 * a 0/1 flag shown as no/yes on the stats screen. */
enum metric_unit { U_COUNT, U_BYTES, U_NS, U_FLAG };

struct metric_def {
    const char *name;   /* Prometheus family; rows of one family are adjacent */
    const char *labels; /* "" or e.g. source="pfs" */
    enum metric_type type;
    enum metric_unit unit;
    const char *help;        /* per family; the first row's text is used */
    const char *stats_group; /* a line of the stats screen; adjacent rows share it */
    const char *stats_item;  /* "" when the group has a single value */
};

static const struct metric_def metric_table[CFS_M_COUNT] = {
    [CFS_M_CATALOG_FILES] = {"clairfs_catalog_files", "", GAUGE, U_COUNT,
                             "Regular files in the catalog.", "catalog", "files"},
    [CFS_M_CATALOG_DIRS] = {"clairfs_catalog_dirs", "", GAUGE, U_COUNT,
                            "Directories in the catalog.", "catalog", "dirs"},
    [CFS_M_CATALOG_BYTES] = {"clairfs_catalog_bytes", "", GAUGE, U_BYTES,
                             "Bytes of the regular files in the catalog.", "catalog", "bytes"},
    [CFS_M_CATALOG_FROM_INDEX] = {"clairfs_catalog_loaded_from_index", "", GAUGE, U_FLAG,
                                  "1 when the catalog was loaded from the index, 0 when scanned.",
                                  "catalog", "from_index"},
    [CFS_M_READS_RAM] = {"clairfs_reads_total", "source=\"ram\"", COUNTER, U_COUNT,
                         "File reads (one per open) by where the bytes came from.",
                         "reads", "ram"},
    [CFS_M_READS_SSD] = {"clairfs_reads_total", "source=\"ssd\"", COUNTER, U_COUNT, NULL, "reads",
                         "ssd"},
    [CFS_M_READS_PEER] = {"clairfs_reads_total", "source=\"peer\"", COUNTER, U_COUNT, NULL,
                          "reads", "peer"},
    [CFS_M_READS_PFS] = {"clairfs_reads_total", "source=\"pfs\"", COUNTER, U_COUNT, NULL, "reads",
                         "pfs"},
    [CFS_M_STALL_NS] = {"clairfs_stall_seconds_total", "", COUNTER, U_NS,
                        "Time reads waited for data.", "stall", ""},
    [CFS_M_PREDICTION_HIT] = {"clairfs_prediction_total", "result=\"hit\"", COUNTER, U_COUNT,
                              "Opened files that the plan expected now (hit) or not (miss), "
                              "or that no order in force covers (unplanned): the training "
                              "order's, and phase=\"validation\" an evaluation pass's.",
                              "predict", "hit"},
    [CFS_M_PREDICTION_MISS] = {"clairfs_prediction_total", "result=\"miss\"", COUNTER, U_COUNT,
                               NULL, "predict", "miss"},
    [CFS_M_PREDICTION_UNPLANNED] = {"clairfs_prediction_total", "result=\"unplanned\"", COUNTER,
                                    U_COUNT, NULL, "predict", "unplanned"},
    [CFS_M_PREDICTION_EVAL_HIT] = {"clairfs_prediction_total",
                                   "phase=\"validation\",result=\"hit\"", COUNTER, U_COUNT, NULL,
                                   "predict", "val_hit"},
    [CFS_M_PREDICTION_EVAL_MISS] = {"clairfs_prediction_total",
                                    "phase=\"validation\",result=\"miss\"", COUNTER, U_COUNT,
                                    NULL, "predict", "val_miss"},
    [CFS_M_FETCH_BYTES_PFS] = {"clairfs_fetch_bytes_total", "from=\"pfs\"", COUNTER, U_BYTES,
                               "Bytes fetched, by source.", "fetched", "pfs"},
    [CFS_M_FETCH_BYTES_PEER] = {"clairfs_fetch_bytes_total", "from=\"peer\"", COUNTER, U_BYTES,
                                NULL, "fetched", "peer"},
    [CFS_M_CACHE_BYTES_RAM] = {"clairfs_cache_bytes", "tier=\"ram\"", GAUGE, U_BYTES,
                               "Bytes held in each cache tier.", "cache", "ram"},
    [CFS_M_CACHE_BYTES_SSD] = {"clairfs_cache_bytes", "tier=\"ssd\"", GAUGE, U_BYTES, NULL,
                               "cache", "ssd"},
    [CFS_M_EPOCH] = {"clairfs_epoch", "", GAUGE, U_COUNT, "The trainers' current epoch.", "epoch",
                     ""},
    [CFS_M_CHECKSUM_FAILURES] = {"clairfs_cache_checksum_failures_total", "", COUNTER, U_COUNT,
                                 "Cache entries found corrupt (then refetched).", "corrupt", ""},
    [CFS_M_PEER_FETCH_OK] = {"clairfs_peer_fetches_total", "result=\"ok\"", COUNTER, U_COUNT,
                             "Fetches asked from a peer: answered (ok), or read from the PFS "
                             "after all (fallback: not held, slow peer, bad checksum).",
                             "peer", "ok"},
    [CFS_M_PEER_FETCH_FALLBACK] = {"clairfs_peer_fetches_total", "result=\"fallback\"", COUNTER,
                                   U_COUNT, NULL, "peer", "fallback"},
    [CFS_M_PEER_SERVED_FILES] = {"clairfs_peer_served_files_total", "", COUNTER, U_COUNT,
                                 "Files sent to other nodes.", "peer", "served"},
    [CFS_M_SOURCE_CHANGED] = {"clairfs_source_changed_total", "", COUNTER, U_COUNT,
                              "Source files found changed under the mount (not served unless "
                              "already cached: ESTALE).",
                              "changed", ""},
    [CFS_M_CACHE_PEAK_RAM] = {"clairfs_cache_peak_bytes", "tier=\"ram\"", GAUGE, U_BYTES,
                              "The most bytes each cache tier has held since the mount.",
                              "peak", "ram"},
    [CFS_M_CACHE_PEAK_SSD] = {"clairfs_cache_peak_bytes", "tier=\"ssd\"", GAUGE, U_BYTES, NULL,
                              "peak", "ssd"},
    [CFS_M_PAGECACHE_BYTES] = {"clairfs_pagecache_bytes", "", GAUGE, U_BYTES,
                               "RAM-tier bytes held as kernel page cache (staged; part of "
                               "clairfs_cache_bytes{tier=\"ram\"}).",
                               "pagecache", "bytes"},
    [CFS_M_PAGECACHE_STAGED] = {"clairfs_pagecache_staged_total", "", COUNTER, U_COUNT,
                                "Files stored into the kernel page cache ahead of their reads.",
                                "pagecache", "staged"},
    [CFS_M_PAGECACHE_INVALIDATED] = {"clairfs_pagecache_invalidations_total", "", COUNTER,
                                     U_COUNT,
                                     "Staged files whose pages clairfs dropped (evicted, or "
                                     "read for the last time).",
                                     "pagecache", "dropped"},
    [CFS_M_PAGECACHE_FALLBACK] = {"clairfs_pagecache_fallback_reads_total", "", COUNTER, U_COUNT,
                                  "Opens of a staged file whose reads still reached clairfs "
                                  "(the kernel had reclaimed pages): served from the source.",
                                  "pagecache", "fallback"},
    [CFS_M_READ_REQUESTS] = {"clairfs_read_requests_total", "", COUNTER, U_COUNT,
                             "FUSE read requests on dataset files (page-cache hits send none).",
                             "requests", ""},
    [CFS_M_INDEX_WRITE_ERRORS] = {"clairfs_index_write_errors_total", "", COUNTER, U_COUNT,
                                  "Writes of the SSD tier's records that the index refused (disk "
                                  "full, I/O error): the tier then serves without persisting.",
                                  "index", "write_errors"},
    [CFS_M_FETCHES_PFS] = {"clairfs_fetches_total", "from=\"pfs\"", COUNTER, U_COUNT,
                           "Completed fetches, by source (a peer's answer that was not the "
                           "bytes counts as the PFS fetch that follows).",
                           "fetches", "pfs"},
    [CFS_M_FETCHES_PEER] = {"clairfs_fetches_total", "from=\"peer\"", COUNTER, U_COUNT, NULL,
                            "fetches", "peer"},
    [CFS_M_FETCH_NS_PFS] = {"clairfs_fetch_seconds_total", "from=\"pfs\"", COUNTER, U_NS,
                            "Time of the completed fetches from submission to completion, "
                            "queueing included, by source: divided by clairfs_fetches_total, "
                            "the cost of one file from each.",
                            "fetchtime", "pfs"},
    [CFS_M_FETCH_NS_PEER] = {"clairfs_fetch_seconds_total", "from=\"peer\"", COUNTER, U_NS,
                             NULL, "fetchtime", "peer"},
    [CFS_M_ORDER_IDENTIFIED] = {"clairfs_order_identified", "", GAUGE, U_FLAG,
                                "1 once the trainers' read order was identified from their "
                                "opens (or a registered one confirmed by them), 0 while "
                                "learning or after a contradiction; with root=, each dataset "
                                "root the opens found (\".\" the mount's own): a seeded "
                                "shuffle or an unshuffled pass identified there.",
                                "order", "identified"},
    [CFS_M_SWEEP_HELD] = {"clairfs_sweep_held", "", GAUGE, U_FLAG,
                          "1 while the sweep (the files not yet read, staged in index order "
                          "while no order is known) holds back because the order's search "
                          "gets less than half a core: the cores are busy (sweep=auto).",
                          "order", "sweep_held"},
    [CFS_M_SEARCH_NS_NORMAL] = {"clairfs_search_cpu_seconds_total", "priority=\"normal\"",
                                COUNTER, U_NS,
                                "CPU time of the order's seed scans (the identification's "
                                "thread), by the priority they ran at: normal (their first "
                                "seeds, the checks of candidates, and what search_budget= "
                                "allows while the cores are busy) or idle (SCHED_IDLE: what "
                                "everything else leaves).",
                                "search", "normal"},
    [CFS_M_SEARCH_NS_IDLE] = {"clairfs_search_cpu_seconds_total", "priority=\"idle\"", COUNTER,
                              U_NS, NULL, "search", "idle"},
    [CFS_M_PEER_LATE] = {"clairfs_peer_late_total", "", COUNTER, U_COUNT,
                         "Owned files a peer asked for before this node had begun fetching "
                         "them (fetched then, the reply held back until they arrive).",
                         "owner", "late"},
    [CFS_M_PAGECACHE_RETRIEVES] = {"clairfs_pagecache_retrieved_total", "result=\"asked\"",
                                   COUNTER, U_COUNT,
                                   "Staged owned files read back from the kernel page cache "
                                   "for a peer (asked), and those the kernel no longer held "
                                   "whole (short: the peer read the PFS).",
                                   "retrieve", "asked"},
    [CFS_M_PAGECACHE_RETRIEVE_SHORT] = {"clairfs_pagecache_retrieved_total", "result=\"short\"",
                                        COUNTER, U_COUNT, NULL, "retrieve", "short"},
    [CFS_M_PFS_BYTES_UNHELD] = {"clairfs_pfs_bytes_total", "reason=\"unheld\"", COUNTER, U_BYTES,
                                "The bytes read from the PFS, by why no peer gave them: no "
                                "other node holds the file (unheld), its owner has not read it "
                                "yet (unread), is marked slow (slow), the performance model "
                                "chose the PFS (model), the owner was asked and did not give "
                                "them (fallback), the kernel dropped a staged file's pages "
                                "(reclaimed).  They add up to clairfs_fetch_bytes_total"
                                "{from=\"pfs\"}.",
                                "pfs_why", "unheld"},
    [CFS_M_PFS_BYTES_UNREAD] = {"clairfs_pfs_bytes_total", "reason=\"unread\"", COUNTER, U_BYTES,
                                NULL, "pfs_why", "unread"},
    [CFS_M_PFS_BYTES_SLOW] = {"clairfs_pfs_bytes_total", "reason=\"slow\"", COUNTER, U_BYTES,
                              NULL, "pfs_why", "slow"},
    [CFS_M_PFS_BYTES_MODEL] = {"clairfs_pfs_bytes_total", "reason=\"model\"", COUNTER, U_BYTES,
                               NULL, "pfs_why", "model"},
    [CFS_M_PFS_BYTES_FALLBACK] = {"clairfs_pfs_bytes_total", "reason=\"fallback\"", COUNTER,
                                  U_BYTES, NULL, "pfs_why", "fallback"},
    [CFS_M_PFS_BYTES_RECLAIMED] = {"clairfs_pfs_bytes_total", "reason=\"reclaimed\"", COUNTER,
                                   U_BYTES, NULL, "pfs_why", "reclaimed"},
    [CFS_M_FUSE_REQUESTS_DEVICE] = {"clairfs_fuse_requests_total", "transport=\"dev\"", COUNTER,
                                    U_COUNT,
                                    "FUSE requests, by what carried them from the kernel: "
                                    "/dev/fuse (dev) or the io_uring queue of the CPU they were "
                                    "made on (io_uring; fuse_io=).",
                                    "fuse", "dev"},
    [CFS_M_FUSE_REQUESTS_RING] = {"clairfs_fuse_requests_total", "transport=\"io_uring\"",
                                  COUNTER, U_COUNT, NULL, "fuse", "io_uring"},
    [CFS_M_FUSE_RING_QUEUES] = {"clairfs_fuse_ring_queues", "", GAUGE, U_COUNT,
                                "CPU queues of FUSE over io_uring registered with the kernel "
                                "(0: every request over /dev/fuse).",
                                "fuse", "queues"},
};

void cfs_metrics_init(struct cfs_metrics *m)
{
    for (size_t i = 0; i < CFS_M_COUNT; i++)
        atomic_init(&m->v[i], 0);
    for (size_t i = 0; i < CFS_METRICS_ROOTS; i++)
        atomic_init(&m->root_identified[i], 0);
    atomic_init(&m->nroots, 0);
}

int cfs_metrics_root_add(struct cfs_metrics *m, const char *root)
{
    unsigned k = atomic_load_explicit(&m->nroots, memory_order_relaxed);
    if (k == CFS_METRICS_ROOTS)
        return -ENOSPC;
    snprintf(m->root_name[k], sizeof(m->root_name[k]), "%s", root);
    atomic_store_explicit(&m->root_identified[k], 0, memory_order_relaxed);
    atomic_store_explicit(&m->nroots, k + 1, memory_order_release); /* the name first */
    return (int)k;
}

void cfs_metrics_snapshot(const struct cfs_metrics *m, struct cfs_metrics_snapshot *s)
{
    for (size_t i = 0; i < CFS_M_COUNT; i++)
        s->v[i] = cfs_metrics_get(m, (enum cfs_metric)i);
    struct cfs_metrics *w = (struct cfs_metrics *)m;
    s->nroots = atomic_load_explicit(&w->nroots, memory_order_acquire);
    for (unsigned i = 0; i < s->nroots; i++) {
        memcpy(s->root_name[i], m->root_name[i], sizeof(s->root_name[i]));
        s->root_identified[i] = atomic_load_explicit(&w->root_identified[i], memory_order_relaxed);
    }
}

/* A label value as the exposition format quotes it: \, " and newline
 * escaped. */
static void label_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

/* The roots' series of clairfs_order_identified, after its own (the family's
 * rows are adjacent); none before an open found a root. */
static void render_roots(FILE *f, const struct cfs_metrics_snapshot *s)
{
    for (unsigned i = 0; i < s->nroots; i++) {
        fputs("clairfs_order_identified{root=\"", f);
        label_value(f, s->root_name[i]);
        fprintf(f, "\"} %" PRIu64 "\n", s->root_identified[i]);
    }
}

const char *cfs_metrics_name(enum cfs_metric id)
{
    return (unsigned)id < CFS_M_COUNT ? metric_table[id].name : NULL;
}

const char *cfs_metrics_labels(enum cfs_metric id)
{
    return (unsigned)id < CFS_M_COUNT ? metric_table[id].labels : NULL;
}

void cfs_metrics_format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", bytes);
        return;
    }
    double v = (double)bytes;
    size_t u = 0;
    v /= 1024;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
}

/* Both renderings write through a memstream; a failed write shows up as a
 * failed fclose. */
static int finish(FILE *f, char **out)
{
    if (fclose(f) != 0) {
        free(*out);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

int cfs_metrics_render_prometheus(const struct cfs_metrics_snapshot *s, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = open_memstream(out, len);
    if (!f)
        return -ENOMEM;
    const char *family = NULL;
    for (size_t i = 0; i < CFS_M_COUNT; i++) {
        const struct metric_def *d = &metric_table[i];
        if (!family || strcmp(family, d->name) != 0) {
            family = d->name;
            fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name,
                    d->type == COUNTER ? "counter" : "gauge");
        }
        if (d->labels[0])
            fprintf(f, "%s{%s} ", d->name, d->labels);
        else
            fprintf(f, "%s ", d->name);
        if (d->unit == U_NS)
            fprintf(f, "%" PRIu64 ".%09" PRIu64 "\n", s->v[i] / 1000000000u,
                    s->v[i] % 1000000000u);
        else
            fprintf(f, "%" PRIu64 "\n", s->v[i]);
        if (i == CFS_M_ORDER_IDENTIFIED)
            render_roots(f, s);
    }
    return finish(f, out);
}

static void stats_value(FILE *f, const struct metric_def *d, uint64_t v)
{
    char buf[32];
    switch (d->unit) {
    case U_COUNT:
        fprintf(f, "%" PRIu64, v);
        break;
    case U_BYTES:
        cfs_metrics_format_bytes(v, buf, sizeof(buf));
        fputs(buf, f);
        break;
    case U_NS:
        fprintf(f, "%.3f s", (double)v / 1e9);
        break;
    case U_FLAG:
        fputs(v ? "yes" : "no", f);
        break;
    }
}

int cfs_metrics_render_stats(const struct cfs_metrics_snapshot *s, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = open_memstream(out, len);
    if (!f)
        return -ENOMEM;
    const char *group = NULL;
    for (size_t i = 0; i < CFS_M_COUNT; i++) {
        const struct metric_def *d = &metric_table[i];
        bool new_line = !group || strcmp(group, d->stats_group) != 0;
        if (new_line) {
            if (group)
                fputc('\n', f);
            group = d->stats_group;
            fprintf(f, "%-10s", d->stats_group);
        } else {
            fputs("  ", f);
        }
        if (d->stats_item[0])
            fprintf(f, "%s ", d->stats_item);
        stats_value(f, d, s->v[i]);
    }
    if (group)
        fputc('\n', f);
    return finish(f, out);
}
