/* Mount options (-o), one table for parsing, defaults, --help and the man
 * page.  Shared by the daemon, clairfs-plan and clairfs-bench, so the same
 * option means the same thing everywhere. */
#ifndef CLAIRFS_OPTIONS_H
#define CLAIRFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clairfs/catalog.h"
#include "clairfs/sampler.h"

/* The RAM tier without ram= where the node's memory is not known (the
 * tools that model a mount; the mount itself sizes it from the node:
 * run_config.h). */
#define CFS_RAM_FALLBACK (1ull << 30)

enum cfs_io_kind {
    CFS_IO_AUTO = 0, /* io_uring when the kernel allows, else threads */
    CFS_IO_URING,
    CFS_IO_THREADS,
};

/* What carries FUSE requests from the kernel (src/fuse_ring.h). */
enum cfs_fuse_io {
    CFS_FUSE_IO_AUTO = 0, /* io_uring where the kernel offers it and io_uring works */
    CFS_FUSE_IO_URING,    /* the same, but a warning where it cannot */
    CFS_FUSE_IO_DEVICE,   /* /dev/fuse only */
};

/* While no order is known, stage the files not yet read in index order
 * (prefetch_loop.c's sweep)? */
enum cfs_sweep_mode {
    CFS_SWEEP_AUTO = 0, /* yes, but held back while the order's scan finds the cores busy */
    CFS_SWEEP_ON,       /* yes, whatever the load */
    CFS_SWEEP_OFF,      /* never: a reactive LRU cache until the order is known */
};

struct cfs_options {
    bool has_seed;
    uint64_t seed;
    enum cfs_sampler_kind sampler;
    char *sampler_list; /* sampler=list:FILE */
    bool sampler_lightning; /* sampler=lightning: torch-ddp, seed within 0..2^32-1 */
    uint32_t repetitions; /* sampler=torchvision-ra, timm-ra */
    uint64_t rng_offset, rng_epoch_words; /* sampler=torch-global */
    enum cfs_randperm_algo randperm; /* torch=2.6 (default) or torch=legacy */
    uint32_t world;
    bool has_ranks;
    uint32_t rank_first, rank_last; /* inclusive */
    /* ranks=cyclic: node k of N serves ranks k, k + N, ... (as srun
     * --distribution=cyclic deals them) */
    bool ranks_cyclic;
    uint32_t batch;
    bool drop_last;
    bool drop_last_batch;
    bool persistent_workers;
    uint32_t epochs;
    uint32_t start_epoch;
    enum cfs_order order;
    char *order_list; /* order=list:FILE */
    char *order_root; /* order=KIND:ROOT (relative to the source) */
    uint64_t ram;
    bool has_ram; /* ram= given: else the run configuration sizes the tier from the node */
    uint64_t ssd;
    bool has_ssd;
    char *ssd_dir;
    char *index_dir;
    bool rescan;
    enum cfs_io_kind io;
    uint32_t io_depth;
    enum cfs_fuse_io fuse_io;
    uint32_t lookahead; /* files the prefetcher may run ahead of the trainers */
    double peer_timeout; /* seconds */
    bool no_peers;
    bool no_pagecache;   /* never stage files into the kernel page cache */
    /* Once all is staged, answer opens ENOSYS (FUSE no_open).  By default
     * only where every open can still be counted (open_watch.h);
     * kernel_open: even where not; no_kernel_open: never. */
    bool kernel_open;
    bool no_kernel_open;
    char *model_file;    /* model=FILE: performance model parameters (model.h) */
    char *metrics_listen; /* metrics_listen=HOST:PORT: GET /metrics (metrics_http.h) */
    bool allow_other;
    bool reclaim; /* detach a dead FUSE mount left on MOUNTPOINT, then mount */
    bool no_identify;   /* never learn the read order from the opens */
    enum cfs_sweep_mode sweep; /* sweep=; no_sweep is sweep=off */
    uint32_t search_budget; /* percent (identify.h's search_budget), default 3 */
    uint32_t search_threads; /* identify.h's search_threads; 0 (default): every usable core */
    char *record_opens; /* record_opens=FILE: "PID PPID PATH" per open (clairfs-plan --identify) */
    int log_level;      /* log_level=: a syslog level (LOG_ERR .. LOG_DEBUG); -1 unset */
};

/* Defaults for every option. */
void cfs_options_init(struct cfs_options *o);
void cfs_options_free(struct cfs_options *o);

/* Apply one option "key" or "key=value".  Returns 0, -ENOENT when the key is
 * not a clairfs option (the caller may hand it to FUSE), or -EINVAL with a
 * one-line message naming the option in err. */
int cfs_options_set(struct cfs_options *o, const char *kv, char *err, size_t errlen);
/* Apply a comma-separated list, as given to -o; unknown keys are errors. */
int cfs_options_parse_list(struct cfs_options *o, const char *list, char *err, size_t errlen);
/* Checks across options (ranks within world, start_epoch < epochs, ...). */
int cfs_options_validate(const struct cfs_options *o, char *err, size_t errlen);

/* Replace every "{rank}" in s with rank; returns a malloc'd string or NULL. */
char *cfs_options_expand_rank(const char *s, int rank);

/* The -o list for --help, one option a line, from the table. */
void cfs_options_print_help(FILE *f);

/* A non-negative finite number; with `scaled`, a K/M/G/T suffix (powers of
 * 1024, then an optional "i" and "B"); trailing blanks allowed.  -EINVAL if
 * bad.  The one parser of quantities: options, model= and --env files. */
int cfs_parse_quantity(const char *s, bool scaled, double *out);
/* "123", "4K", "1.5G", "10M" (powers of 1024) -> bytes.  -EINVAL if bad. */
int cfs_parse_size(const char *s, uint64_t *out);
/* Decimal unsigned integer with range check; -EINVAL / -ERANGE. */
int cfs_parse_u64(const char *s, uint64_t max, uint64_t *out);

/* Sampler parameters for a catalog of n samples. */
void cfs_options_sampler_params(const struct cfs_options *o, uint64_t n,
                                struct cfs_sampler_params *p);

#endif
