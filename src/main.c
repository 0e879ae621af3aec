/* clairfs: command line, checks, and the life of the mount.
 *
 * main() runs phases in order, each of which either succeeds or leaves a
 * one-line reason in d->err; one teardown undoes whatever the phases built,
 * in reverse.  Order matters so that a failed start never leaves anything
 * behind and the exit status tells the truth: parse and check every
 * argument, load the catalog, make the run configuration and the plan, and
 * only then mount; detach from the terminal (fuse_daemonize) only once the
 * mount is live, so the parent's exit status reports whether the mount
 * exists.  Every failure before that point is one line on stderr and exit
 * status 1.  The data path's threads and LMDB environment start after
 * fuse_daemonize (neither survives a fork).
 *
 * The mount is not made `ro` in the kernel although the tree is read-only:
 * a read-only mount would refuse writes to .clairfs/control too.  Every
 * write-type operation answers EROFS from fs.c instead; `-o ro` is still
 * accepted (and then control is read-only as well).
 *
 * Under mpirun each rank is one node of a distributed mount.  MPI is
 * initialised first, before any thread exists; the daemon stays in the
 * foreground (Open MPI does not support fork after MPI_Init; an info line
 * says so when -f was not given).  {rank} in MOUNTPOINT, ssd_dir and index
 * is the MPI rank.  The nodes meet twice before mounting (peer_startup.h):
 * after the run configuration (every node's status and trainer ranks, then
 * the agreement on catalog and configuration) and after the plan; a node
 * that fails attends the meetings left from its teardown, so that every
 * node exits non-zero with nothing mounted.  The peer thread starts once
 * the cache exists (it serves from it) and leaves before the cache goes;
 * MPI_Finalize comes last, and waits for every node. */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <fuse_opt.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "config.h"

#include "clairfs/catalog.h"
#include "clairfs/ctl.h"
#include "clairfs/index_check.h"
#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "clairfs/metrics_http.h"
#include "clairfs/node_memory.h"
#include "clairfs/options.h"
#include "clairfs/peer.h"
#include "clairfs/peer_startup.h"
#include "clairfs/prefetch.h"
#include "clairfs/roots.h"
#include "clairfs/run_config.h"
#include "clairfs/seed_search.h"
#include "cluster_order.h"
#include "cmdline.h"
#include "fs.h"
#include "fuse_ring.h"
#include "mountpoint.h"
#include "opener.h"
#include "privileges.h"

/* Checks that a path names an existing directory; resolves it. */
static int check_dir(const char *what, const char *path, char **resolved, char *err,
                     size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s %s: not a directory", what, path);
        return -1;
    }
    *resolved = realpath(path, NULL);
    if (!*resolved) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    return 0;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* index=DIR, else ssd_dir/index, else the user's cache directory plus a
 * hash of the source path, so that each dataset keeps its own catalog. */
static char *index_dir_for(const struct cfs_options *o, const char *source, int rank, char *err,
                           size_t errlen)
{
    char *dir = NULL, *base = NULL;
    if (o->index_dir)
        return cfs_options_expand_rank(o->index_dir, rank);
    if (o->ssd_dir) {
        char *ssd = cfs_options_expand_rank(o->ssd_dir, rank);
        if (ssd && asprintf(&dir, "%s/index", ssd) < 0)
            dir = NULL;
        free(ssd);
        return dir;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = asprintf(&base, "%s/clairfs", xdg);
    } else {
        if (!home || home[0] != '/') {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home) {
            snprintf(err, errlen, "no home directory for the index; give -o index=DIR");
            return NULL;
        }
        n = asprintf(&base, "%s/.cache/clairfs", home);
    }
    if (n < 0)
        return NULL;
    int rc = mkdir_p(base, 0700);
    if (rc == 0 && access(base, W_OK | X_OK) != 0)
        rc = -errno; /* there, but not this user's to write (a shared or read-only home) */
    if (rc < 0)
        snprintf(err, errlen, "index directory %s: %s; give -o index=DIR, a directory you can write",
                 base, strerror(-rc));
    else if (asprintf(&dir, "%s/%016llx", base,
                      (unsigned long long)XXH64(source, strlen(source), 0)) < 0)
        dir = NULL;
    free(base);
    return dir;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Workers waiting for a request: two more than the CPUs, at least 4, at
 * most 16.  Waiting workers queue on /dev/fuse in FIFO order, so each
 * request wakes the one that slept longest: with 16 waiting, a cached epoch
 * (an OPEN and a RELEASE per file, nothing else) cycled through all of them,
 * a cold thread per request.  Fewer than the requests in flight (the
 * readers that run at once, about one per CPU, plus the releases) make
 * libfuse end and start threads all the time: measured on 2 CPUs with 4
 * reader threads, 2 waiting started 58 threads per epoch, 3 a few, 4 one
 * per two epochs, and 4 took 0.109-0.113 s per cached epoch against
 * 0.129-0.136 s with 16 (docs/read-path.md).  Only idle workers are bounded:
 * an open that blocks on a fetch still gets a new worker behind it. */
static unsigned idle_workers(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN) + 2;
    return n < 4 ? 4u : n > 16 ? 16u : (unsigned)n;
}

static int run_session(struct fuse_session *se)
{
#if FUSE_USE_VERSION >= FUSE_MAKE_VERSION(3, 12)
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    if (!lc)
        return -ENOMEM;
    /* Data loaders run many workers; each blocked read holds a thread. */
    fuse_loop_cfg_set_max_threads(lc, 64);
    fuse_loop_cfg_set_idle_threads(lc, idle_workers());
    int rc = fuse_session_loop_mt(se, lc);
    fuse_loop_cfg_destroy(lc);
    return rc;
#else
    struct fuse_loop_config lc = {.clone_fd = 0, .max_idle_threads = idle_workers()};
    return fuse_session_loop_mt(se, &lc);
#endif
}

/* Everything the phases build; the teardown frees what is there. */
struct daemon {
    struct cmdline cl;
    struct fuse_args args;
    char err[1024];
    struct cfs_peer *peer;
    struct cfs_peer_startup *startup;
    int rank, nodes;
    char *source, *mountpoint, *ssd_dir, *index_dir;
    struct cfs_metrics metrics;
    struct cfs_metrics_http *http; /* metrics_listen=: bound before the mount */
    struct cfs_catalog *catalog;
    double catalog_secs;
    struct cfs_ctl *ctl;
    struct cfs_fs *fs;
    struct cfs_run_config run;
    int data_fd;
    struct cfs_prefetch *pf;
    struct cfs_openers *openers;
    struct cfs_roots *identify; /* order identification, one per dataset root */
    struct cfs_cluster_order *cluster; /* distributed, nothing registered: the nodes' agreement */
    double plan_secs;
    char *fsname, *mount_opts;
    struct fuse_session *se;
    struct cfs_fuse_ring *ring; /* what carries the session's requests */
    bool signals, mounted;
    const char *identify_off;  /* why the order is not learnt, or NULL */
    bool search_stays_idle;    /* the search cannot leave idle priority (check_privileges) */
};

/* A phase's result: go on, stop with status 0 (--help), or fail (d->err
 * says why, or is empty when the reason is already reported). */
enum { PHASE_OK = 0, PHASE_DONE = 1, PHASE_FAILED = -1 };

static int nomem(struct daemon *d)
{
    snprintf(d->err, sizeof(d->err), "out of memory");
    return PHASE_FAILED;
}

/* MPI first: before any thread, and it may take its own arguments. */
static int start_peers(struct daemon *d, int *argc, char ***argv)
{
    if (cfs_peer_init(argc, argv, &d->peer, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    d->rank = cfs_peer_rank(d->peer);
    d->nodes = cfs_peer_size(d->peer);
    if (d->peer) {
        char name[64];
        snprintf(name, sizeof(name), "clairfs[rank %d]", d->rank);
        cfs_log_init(name, LOG_INFO);
    }
    return cfs_peer_startup_create(d->peer, &d->startup, d->err, sizeof(d->err)) < 0
               ? PHASE_FAILED
               : PHASE_OK;
}

static int parse_command_line(struct daemon *d)
{
    struct cmdline *cl = &d->cl;
    int rc = cfs_cmdline_parse(&d->args, cl, d->err, sizeof(d->err));
    if (rc != 0)
        return rc > 0 ? PHASE_DONE : PHASE_FAILED;
    if (cl->debug)
        cfs_log_set_level(LOG_DEBUG);
    if (cl->opts.log_level >= 0) /* over -d's: its FUSE trace alone with log_level=info */
        cfs_log_set_level(cl->opts.log_level);
    if (d->peer && !cl->foreground) {
        cfs_info("running under MPI: staying in the foreground (Open MPI does not support "
                 "fork after MPI_Init)");
        cl->foreground = true;
    }
    return cfs_options_validate(&cl->opts, d->err, sizeof(d->err)) < 0 ? PHASE_FAILED : PHASE_OK;
}

/* What an ordinary user may not do, said once each (privileges.h). */
static int check_privileges(struct daemon *d)
{
    d->search_stays_idle = cfs_privileges_check(&d->cl.opts);
    return PHASE_OK;
}


/* SOURCE, MOUNTPOINT, the SSD tier's directory and the index directory. */
static int check_paths(struct daemon *d)
{
    const struct cfs_options *o = &d->cl.opts;
    int rc;
    if (check_dir("source", d->cl.source, &d->source, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    char *mp_expanded = cfs_options_expand_rank(d->cl.mountpoint, d->rank);
    if (!mp_expanded)
        return nomem(d);
    /* A dead FUSE mount left by a crashed daemon is named, or with -o
     * reclaim detached here (mountpoint.h). */
    rc = cfs_mountpoint_check(mp_expanded, d->source, o->reclaim, &d->mountpoint, d->err,
                              sizeof(d->err));
    free(mp_expanded);
    if (rc < 0)
        return PHASE_FAILED;
    /* The SSD tier's directory first: the default index lives inside it. */
    if (o->ssd_dir) {
        if (!(d->ssd_dir = cfs_options_expand_rank(o->ssd_dir, d->rank)))
            return nomem(d);
        if ((rc = mkdir_p(d->ssd_dir, 0700)) < 0) {
            snprintf(d->err, sizeof(d->err), "ssd_dir %s: %s", d->ssd_dir, strerror(-rc));
            return PHASE_FAILED;
        }
    }
    d->index_dir = index_dir_for(o, d->source, d->rank, d->err, sizeof(d->err));
    if (!d->index_dir)
        return d->err[0] ? PHASE_FAILED : nomem(d);
    /* The metrics port too: one in use must fail before anything is mounted. */
    if (o->metrics_listen &&
        cfs_metrics_http_bind(o->metrics_listen, d->rank, &d->http, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    return PHASE_OK;
}

/* The catalog, and the filesystem that serves it with its control files. */
static int load_catalog(struct daemon *d)
{
    const struct cfs_options *o = &d->cl.opts;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cfs_catalog_params cp = {
        .source = d->source,
        .order = o->order,
        .order_list = o->order_list,
        .order_root = o->order_root,
        .index_dir = d->index_dir,
        .rescan = o->rescan,
        /* Without a registered seed the order is optional: a tree it does not
         * fit mounts, every file served and cached (nothing to learn from). */
        .order_optional = !o->has_seed,
    };
    /* The index is only a cache: damage costs a rebuild, never the mount.
     * Checked here, before the first open and before any thread of ours. */
    char note[1024];
    if (cfs_index_recover(d->index_dir, note, sizeof(note)) != 0)
        cfs_warn("%s", note);
    int rc = cfs_catalog_open(&cp, &d->catalog, d->err, sizeof(d->err));
    if (rc < 0) {
        if (!d->err[0])
            snprintf(d->err, sizeof(d->err), "catalog of %s: %s", d->source, strerror(-rc));
        return PHASE_FAILED;
    }
    d->catalog_secs = seconds_since(&t0);
    cfs_metrics_set(&d->metrics, CFS_M_CATALOG_FILES, cfs_catalog_file_count(d->catalog));
    cfs_metrics_set(&d->metrics, CFS_M_CATALOG_DIRS, cfs_catalog_dir_count(d->catalog));
    cfs_metrics_set(&d->metrics, CFS_M_CATALOG_BYTES, cfs_catalog_total_bytes(d->catalog));
    cfs_metrics_set(&d->metrics, CFS_M_CATALOG_FROM_INDEX,
                    cfs_catalog_loaded_from_index(d->catalog));

    if (cfs_ctl_create(&d->metrics, &d->ctl) < 0)
        return nomem(d);
    if (cfs_openers_create("/proc", d->cl.opts.record_opens, &d->openers, d->err,
                           sizeof(d->err)) < 0)
        return PHASE_FAILED;
    struct cfs_fs_config fc = {
        .catalog = d->catalog,
        .source = d->source,
        .ctl = d->ctl,
        .metrics = &d->metrics,
        .owner_uid = getuid(),
        .owner_gid = getgid(),
        .splice_read = getenv("CLAIRFS_NO_SPLICE") == NULL,
        .kernel_open = !d->cl.opts.no_kernel_open,
        .kernel_open_uncounted = d->cl.opts.kernel_open,
        /* CLAIRFS_NO_OPEN_WATCH: the tests' way to run without it, as
         * where fanotify is refused. */
        .mountpoint = getenv("CLAIRFS_NO_OPEN_WATCH") ? NULL : d->mountpoint,
        .openers = d->openers,
    };
    return cfs_fs_create(&fc, &d->fs, d->err, sizeof(d->err)) < 0 ? PHASE_FAILED : PHASE_OK;
}

/* The dataset as the RAM tier charges it: every regular file rounded up to
 * the cache's 4 KiB pages (cache_i.h's cache_round), so that a default
 * tier "as large as the dataset" holds all of it. */
static uint64_t dataset_tier_bytes(const struct cfs_catalog *cat)
{
    uint64_t sum = 0;
    for (uint32_t id = 0; id < cfs_catalog_entry_count(cat); id++) {
        const struct cfs_entry *e = cfs_catalog_entry(cat, id);
        if (e && S_ISREG(e->mode))
            sum += (e->size + 4095) / 4096 * 4096;
    }
    return sum;
}

/* The run configuration, then the first meeting of the nodes: every node's
 * ranks, and the agreement on catalog and configuration. */
static int configure_run(struct daemon *d)
{
    struct cfs_node_memory memory;
    cfs_node_memory_read("/proc", "/sys/fs/cgroup", &memory);
    struct cfs_run_inputs in = {
        .opts = &d->cl.opts,
        .nsamples = cfs_catalog_sample_count(d->catalog),
        .nodes = (uint32_t)d->nodes,
        .node = (uint32_t)d->rank,
        .ssd_dir = d->ssd_dir,
        .memory = &memory,
        .dataset_bytes = dataset_tier_bytes(d->catalog),
    };
    if (cfs_run_config_make(&in, &d->run, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    if (d->run.ram_capped) /* before the mount: on the terminal, where ram= can be fixed */
        cfs_warn("%s", d->run.ram_note);
    return cfs_peer_startup_meet_config(d->startup, &d->run, cfs_catalog_hash(d->catalog),
                                        d->err, sizeof(d->err)) < 0
               ? PHASE_FAILED
               : PHASE_OK;
}

/* The data path: the plan is computed now, so that a bad seed, sampler or
 * tier fails before the mount; then the second meeting of the nodes. */
static int prepare_data_path(struct daemon *d)
{
    d->data_fd = open(d->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->data_fd < 0) {
        snprintf(d->err, sizeof(d->err), "source %s: %s", d->source, strerror(errno));
        return PHASE_FAILED;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cfs_prefetch_params pp = {
        .catalog = d->catalog, .run = &d->run, .opts = &d->cl.opts, .source_fd = d->data_fd,
        .ssd_dir = d->ssd_dir, .index_dir = d->index_dir, .metrics = &d->metrics,
        .progress = d->cl.foreground, .peer_ops = cfs_peer_ops_of(d->peer), .peer = d->peer,
    };
    if (cfs_prefetch_create(&pp, &d->pf, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    d->plan_secs = seconds_since(&t0);
    /* Every node has its plan, so every node will mount. */
    return cfs_peer_startup_meet_planned(d->startup, d->err, sizeof(d->err)) < 0 ? PHASE_FAILED
                                                                                : PHASE_OK;
}

/* The FUSE session, mounted, and the daemon detached once the mount is live. */
static int mount_session(struct daemon *d)
{
    struct cmdline *cl = &d->cl;
    /* libfuse parses -o lists itself, so a comma in the source path must be
     * escaped. */
    if (!cl->fsname && asprintf(&d->fsname, "clairfs:%s", d->source) < 0) {
        d->fsname = NULL;
        return nomem(d);
    }
    char subtype[300];
    snprintf(subtype, sizeof(subtype), "subtype=%s", cl->subtype ? cl->subtype : "clairfs");
    char fsname_opt[PATH_MAX + 64];
    snprintf(fsname_opt, sizeof(fsname_opt), "fsname=%s", cl->fsname ? cl->fsname : d->fsname);
    if (fuse_opt_add_opt_escaped(&d->mount_opts, fsname_opt) < 0 ||
        fuse_opt_add_opt(&d->mount_opts, subtype) < 0 ||
        fuse_opt_add_opt(&d->mount_opts, "default_permissions") < 0 ||
        (cl->opts.allow_other && fuse_opt_add_opt(&d->mount_opts, "allow_other") < 0) ||
        fuse_opt_add_arg(&d->args, "-o") < 0 || fuse_opt_add_arg(&d->args, d->mount_opts) < 0 ||
        (cl->debug && fuse_opt_add_arg(&d->args, "-d") < 0))
        return nomem(d);

    d->se = fuse_session_new(&d->args, cfs_fs_ops(), sizeof(*cfs_fs_ops()), d->fs);
    if (!d->se) {
        snprintf(d->err, sizeof(d->err), "cannot start a FUSE session");
        return PHASE_FAILED;
    }
    if (fuse_set_signal_handlers(d->se) != 0) {
        snprintf(d->err, sizeof(d->err), "cannot install signal handlers");
        return PHASE_FAILED;
    }
    d->signals = true;
    if (fuse_session_mount(d->se, d->mountpoint) != 0) {
        snprintf(d->err, sizeof(d->err), "cannot mount %s (is /dev/fuse available?)",
                 d->mountpoint);
        return PHASE_FAILED;
    }
    d->mounted = true;
    const struct cfs_fuse_ring_config ring = {
        .mode = cl->opts.fuse_io, .metrics = &d->metrics};
    if (cfs_fuse_ring_create(&ring, &d->ring) < 0)
        return nomem(d);
    if (cfs_fuse_ring_attach(d->ring, d->se, cfs_fs_ring_slot(d->fs)) < 0) {
        snprintf(d->err, sizeof(d->err), "cannot take the FUSE session's requests");
        return PHASE_FAILED;
    }
    if (fuse_daemonize(cl->foreground) != 0) {
        snprintf(d->err, sizeof(d->err), "cannot detach from the terminal");
        return PHASE_FAILED;
    }
    if (!cl->foreground)
        cfs_log_to_syslog();
    cfs_info("%s catalog of %s: %llu files, %llu directories, %llu bytes in %.3f s (index %s)",
             cfs_catalog_loaded_from_index(d->catalog) ? "loaded the" : "scanned the", d->source,
             (unsigned long long)cfs_catalog_file_count(d->catalog),
             (unsigned long long)cfs_catalog_dir_count(d->catalog),
             (unsigned long long)cfs_catalog_total_bytes(d->catalog), d->catalog_secs,
             d->index_dir);
    if (cfs_catalog_not_stored(d->catalog))
        cfs_warn("%s; serving without it (the next mount scans again)",
                 cfs_catalog_not_stored(d->catalog));
    if (cfs_catalog_order_fallback(d->catalog))
        cfs_info("no ImageFolder order at the mount's root (%s): its files numbered by sorted "
                 "path, so the datasets below it are still learnt",
                 cfs_catalog_order_fallback(d->catalog));
    if (cfs_catalog_order_unavailable(d->catalog))
        cfs_info("no index order (%s): every file is served and cached as it is read; "
                 "nothing is predicted without the order (order= names it)",
                 cfs_catalog_order_unavailable(d->catalog));
    return PHASE_OK;
}

static void log_started(const struct daemon *d)
{
    const struct cfs_run_config *run = &d->run;
    struct cfs_prefetch_stats pst;
    cfs_prefetch_stats(d->pf, &pst);
    char window[96] = "";
    if (pst.planned && pst.plan_end < run->epochs)
        snprintf(window, sizeof(window), " of %u (the next window from epoch %u)",
                 run->epochs - run->start_epoch, pst.plan_end - 1);
    if (pst.planned)
        cfs_info("planned %u epochs%s from seed %llu in %.3f s; io %s; ram %llu, ssd %llu bytes "
                 "(%llu SSD entries reused)",
                 pst.plan_end - pst.plan_start, window, (unsigned long long)run->sampler.seed,
                 d->plan_secs, pst.io_engine, (unsigned long long)pst.cache_capacity[0],
                 (unsigned long long)pst.cache_capacity[1], (unsigned long long)pst.loaded);
    else if (d->identify_off)
        cfs_info("order not registered and not learnt (identification: %s): a reactive cache; "
                 "io %s; ram %llu, ssd %llu bytes",
                 d->identify_off, pst.io_engine, (unsigned long long)pst.cache_capacity[0],
                 (unsigned long long)pst.cache_capacity[1]);
    else
        cfs_info("learning the read order from the opens (a reactive cache until it is known); "
                 "io %s; ram %llu, ssd %llu bytes",
                 pst.io_engine, (unsigned long long)pst.cache_capacity[0],
                 (unsigned long long)pst.cache_capacity[1]);
    if (run->ram_derived)
        cfs_info("ram tier %s (ram= sets it)", run->ram_note);
    if (d->search_stays_idle && !d->identify_off)
        cfs_info("search_budget: a thread leaves idle priority only with CAP_SYS_NICE or "
                 "RLIMIT_NICE 20, which uid %u lacks: the order's search stays at idle priority "
                 "once there (search_budget= has no effect)",
                 (unsigned)getuid());
    if (!d->identify_off) {
        unsigned usable = cfs_seed_usable_cpus(), opt = d->cl.opts.search_threads;
        cfs_info("identify: the seed search runs on %u threads (search_threads=%u; %u usable "
                 "CPUs)",
                 opt ? opt : usable, opt, usable);
    }
    if (d->http)
        cfs_info("metrics: http://%s/metrics (port %u)", d->cl.opts.metrics_listen,
                 cfs_metrics_http_port(d->http));
    if (d->peer)
        cfs_info("mounted %s at %s: node %d of %d, trainer ranks %u-%u%s%s", d->source,
                 d->mountpoint, d->rank, d->nodes, run->ranks.first, cfs_rank_last(run->ranks),
                 run->ranks.stride > 1 ? " dealt round robin" : "",
                 run->no_peers ? ", peers disabled (no_peers)" : "");
    else
        cfs_info("mounted %s at %s", d->source, d->mountpoint);
}

/* The identification, one per dataset root (clairfs/roots.h), behind the
 * data path's seam. */
static void identify_observe(void *arg, uint32_t sample, pid_t pid, pid_t ppid)
{
    cfs_roots_observe(((struct daemon *)arg)->identify, sample, pid, ppid);
}

static void identify_restart(void *arg)
{
    cfs_roots_restart(((struct daemon *)arg)->identify);
}

static enum cfs_identify_state identify_state(void *arg, struct cfs_identified *out)
{
    return cfs_roots_state(((struct daemon *)arg)->identify, out);
}

static bool identify_scan_share(void *arg, double *share)
{
    return cfs_roots_scan_share(((struct daemon *)arg)->identify, share);
}

/* The roots' clauses, then where the nodes' agreement stands. */
static void identify_text(void *arg, char *buf, size_t len)
{
    struct daemon *d = arg;
    cfs_roots_text(d->identify, buf, len);
    if (!d->cluster)
        return;
    char cluster[700];
    cfs_cluster_order_text(d->cluster, cluster, sizeof(cluster));
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "%scluster: %s", used ? "; " : "", cluster);
}

/* The opening thread: the nodes' agreed order stopped fitting this node's
 * opens (cluster_order.h). */
static void identify_refuse(void *arg, const char *root)
{
    struct daemon *d = arg;
    if (d->cluster)
        cfs_cluster_order_refuse_adopted(d->cluster, root);
}

static const struct cfs_identify_ops identify_ops = {
    .observe = identify_observe,
    .restart = identify_restart,
    .state = identify_state,
    .scan_share = identify_scan_share,
    .text = identify_text,
    .refuse = identify_refuse,
};

/* On a root's identification thread: predict what it found, or, on a
 * distributed mount, claim it to the other nodes (cluster_order.h). */
static void on_identified(void *arg, const struct cfs_root *root, const struct cfs_identified *id)
{
    struct daemon *d = arg;
    if (d->cluster) {
        cfs_cluster_order_identified(d->cluster, root, id);
        return;
    }
    char err[512];
    int rc = cfs_prefetch_adopt_at(d->pf, id, root->name, root->map, root->n, err, sizeof(err));
    if (rc == -EBUSY)
        cfs_info("order: %s", err);
    else if (rc < 0)
        cfs_warn("order: %s", err);
}

/* On a root's identification thread: another node's refinement does not
 * fit this node's opens. */
static void on_refused(void *arg, const struct cfs_root *root,
                       const struct cfs_sampler_params *hint, const char *why)
{
    struct daemon *d = arg;
    if (d->cluster)
        cfs_cluster_order_refused(d->cluster, root, hint, why);
}

/* On the head node's identification thread: its sets, for the other
 * nodes to scan shares of its range. */
static void on_split(void *arg, const struct cfs_root *root, const struct cfs_split_sets *sets)
{
    struct daemon *d = arg;
    if (d->cluster)
        cfs_cluster_order_split(d->cluster, root, sets);
}

/* The peer thread: another node's claim. */
static void agreement_note(void *arg, uint32_t src, const void *msg, size_t len)
{
    struct daemon *d = arg;
    if (d->cluster)
        cfs_cluster_order_note(d->cluster, src, msg, len);
}

/* A distributed mount with nothing registered learns the order with the
 * other nodes; before the peer thread, which hands it their claims. */
static int start_agreement(struct daemon *d)
{
    if (!d->run.distributed || d->run.seeded || d->cl.opts.no_identify)
        return PHASE_OK;
    struct cfs_cluster_order_params cp = {
        .node = (uint32_t)d->rank,
        .nodes = (uint32_t)d->nodes,
        .peer = d->peer,
        .pf = d->pf,
    };
    return cfs_cluster_order_create(&cp, &d->cluster, d->err, sizeof(d->err)) < 0 ? PHASE_FAILED
                                                                                  : PHASE_OK;
}

/* On the opening thread: an unshuffled pass (the evaluation after each
 * epoch) was named; predict it beside the training order. */
static void on_pass(void *arg, const struct cfs_root *root, uint32_t stride)
{
    struct daemon *d = arg;
    (void)cfs_prefetch_predict_pass(d->pf, root->name, root->map, root->n, stride);
}

/* Order identification, unless it is off or cannot help; a registered
 * seed is a hint it checks. */
static int start_identify(struct daemon *d)
{
    const char *off = NULL;
    if (d->cl.opts.no_identify) {
        off = "off (-o no_identify)";
    } else if (cfs_catalog_order_unavailable(d->catalog) ||
               cfs_catalog_sample_count(d->catalog) == 0) {
        off = "no index order";
    }
    if (off) {
        d->identify_off = off;
        cfs_prefetch_set_identify(d->pf, NULL, NULL, off);
        return PHASE_OK;
    }
    /* Roots below the mount's are derived from the opens only for the
     * default order: a registered one (order=KIND:ROOT) is the user's. */
    const char *root = d->cl.opts.order_root;
    struct cfs_roots_params rp = {
        .catalog = d->catalog,
        .derive = d->cl.opts.order == CFS_ORDER_IMAGEFOLDER && !(root && root[0]),
        .identify =
            {
                .algo = d->run.sampler.randperm,
                .hint = d->run.seeded ? &d->run.sampler : NULL,
                .hint_has_seed = d->run.seeded,
                .node = (uint32_t)d->rank,
                .nodes = (uint32_t)d->nodes,
                .search_budget = d->cl.opts.search_budget / 100.0,
                .search_threads = d->cl.opts.search_threads,
                .thread_stays_idle = d->search_stays_idle,
                .metrics = &d->metrics,
            },
        .on_identified = on_identified,
        .cb_arg = d,
        /* CLAIRFS_NO_EVAL_PREDICT: the pass is named, not predicted (the
         * benchmark's baseline). */
        .on_pass = getenv("CLAIRFS_NO_EVAL_PREDICT") ? NULL : on_pass,
        /* nothing registered on many nodes: the head splits its scan */
        .on_split = d->run.distributed && !d->run.seeded ? on_split : NULL,
        .on_refused = on_refused,
    };
    if (cfs_roots_create(&rp, &d->identify, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    if (d->cluster)
        cfs_cluster_order_set_roots(d->cluster, d->identify);
    cfs_prefetch_set_identify(d->pf, &identify_ops, d, NULL);
    return PHASE_OK;
}

/* The data path's threads, the peer thread, the page-cache stager, the
 * metrics server; then .clairfs/ready. */
static int start_serving(struct daemon *d)
{
    if (cfs_prefetch_start(d->pf, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    if (d->http && cfs_metrics_http_start(d->http, &d->metrics, d->err, sizeof(d->err)) < 0)
        return PHASE_FAILED;
    if (start_agreement(d) != PHASE_OK)
        return PHASE_FAILED;
    if (d->peer && d->run.distributed) {
        struct cfs_peer_params peerp = {
            .provide = cfs_prefetch_provide,
            .provide_arg = d->pf,
            .on_note = agreement_note,
            .note_arg = d,
            .timeout = d->cl.opts.peer_timeout,
        };
        if (cfs_peer_start(d->peer, &peerp, d->err, sizeof(d->err)) < 0)
            return PHASE_FAILED;
    }
    if (start_identify(d) != PHASE_OK)
        return PHASE_FAILED;
    cfs_fs_set_prefetch(d->fs, d->pf);
    if (cfs_prefetch_kernel_start(d->pf, cfs_fs_kernel_ops(d->fs, d->se), d->fs, d->err,
                                  sizeof(d->err)) < 0)
        return PHASE_FAILED;
    cfs_ctl_set_handler(d->ctl, cfs_prefetch_command, d->pf);
    log_started(d);
    /* The plan is computed and prefetching has started. */
    cfs_ctl_set_ready(d->ctl, true);
    return PHASE_OK;
}

/* Serves until unmounted or signalled: exit status 0 for a clean stop. */
static int serve(struct daemon *d)
{
    int rc = run_session(d->se);
    /* A positive value is the signal that ended the loop: a clean stop. */
    if (rc < 0)
        cfs_err("session ended with an error: %s", strerror(-rc));
    else
        cfs_info("unmounting %s", d->mountpoint);
    return rc < 0 ? 1 : 0;
}

/* Undoes the phases, whichever ran. */
static void teardown(struct daemon *d)
{
    /* A node that stops before a start-up meeting still attends it. */
    cfs_peer_startup_destroy(d->startup);
    cfs_metrics_http_destroy(d->http); /* no scrape reads a half-torn daemon */
    /* The peer thread asks the kernel for staged files until the peers
     * leave, far below: not past here (the answer would find nobody, and
     * the session and the ring go before the peers). */
    cfs_prefetch_retrieves_stop(d->pf);
    cfs_fuse_ring_stop(d->ring); /* as the /dev/fuse loop: no request is answered now */
    cfs_fs_stop_watch(d->fs);          /* it calls into the data path */
    /* The stager talks to the session: stop it first.  Blocked on the page
     * lock of a READ that no worker will answer any more, it is freed by
     * aborting the connection. */
    if (cfs_prefetch_kernel_stop(d->pf, 2.0) == -ETIMEDOUT) {
        cfs_warn("page cache: a store is blocked on an unanswered read; aborting the connection");
        cfs_fs_abort(d->se);
        (void)cfs_prefetch_kernel_stop(d->pf, -1);
    }
    if (d->mounted)
        fuse_session_unmount(d->se);
    if (d->signals)
        fuse_remove_signal_handlers(d->se);
    if (d->se)
        fuse_session_destroy(d->se);
    cfs_fuse_ring_destroy(d->ring);
    cfs_fs_destroy(d->fs);
    cfs_openers_destroy(d->openers);
    cfs_prefetch_stop(d->pf); /* its sweep asks the identification (scan_share) */
    cfs_cluster_order_stop(d->cluster); /* it hints to the roots, adopts their maps */
    cfs_roots_destroy(d->identify); /* no open observes now; it calls back no more */
    cfs_peer_leave(d->peer);    /* no more serving from, or fetching into, the cache */
    cfs_cluster_order_destroy(d->cluster); /* after the peers: no claim comes any more */
    cfs_prefetch_destroy(d->pf); /* after the session: no request is left */
    if (d->data_fd >= 0)
        close(d->data_fd);
    cfs_run_config_free(&d->run);
    cfs_ctl_destroy(d->ctl);
    cfs_catalog_destroy(d->catalog);
    free(d->mount_opts);
    free(d->fsname);
    free(d->ssd_dir);
    free(d->index_dir);
    free(d->mountpoint);
    free(d->source);
    cfs_cmdline_free(&d->cl);
    cfs_options_free(&d->cl.opts);
    fuse_opt_free_args(&d->args);
    cfs_peer_destroy(d->peer); /* MPI_Finalize: waits for every node (peer.h) */
}

int main(int argc, char **argv)
{
    static struct daemon d = {.data_fd = -1};
    int rc, status = 1;

    cfs_log_init(argv[0], LOG_INFO);
    cfs_options_init(&d.cl.opts);
    cfs_metrics_init(&d.metrics);
    /* The mount's life in order; the first phase that does not answer
     * PHASE_OK ends it, and teardown undoes whatever ran. */
    static int (*const phases[])(struct daemon *) = {
        parse_command_line, check_privileges, check_paths, load_catalog, configure_run,
        prepare_data_path,  mount_session, start_serving,
    };
    rc = start_peers(&d, &argc, &argv); /* MPI_Init may take its own arguments */
    d.args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
    for (size_t i = 0; rc == PHASE_OK && i < sizeof(phases) / sizeof(phases[0]); i++)
        rc = phases[i](&d);
    if (rc == PHASE_OK)
        status = serve(&d);
    else if (rc == PHASE_DONE)
        status = 0;
    else if (d.err[0])
        cfs_err("%s", d.err);
    teardown(&d);
    return status;
}
