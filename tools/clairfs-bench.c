/* clairfs-bench: replay a trainer's reads over a directory and time them.
 *
 * The order is the trainer's: the dataset index order of the catalog
 * (order=) and one trainer rank's sampler stream (seed=, sampler=, world=,
 * batch=, ... via the same option table and sampler code as the mount), or
 * an explicit --order-file.  The stream is cut into batches and loaded by T
 * worker threads exactly as PyTorch's multiprocessing DataLoader dispatches
 * them (loader.h), each file read whole like an image decoder does, with an
 * optional compute time per batch.  Per epoch it reports wall time, stall
 * (time the training loop waited for its next batch), files/s and MiB/s. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/catalog.h"
#include "clairfs/loader.h"
#include "clairfs/options.h"
#include "clairfs/run_config.h"
#include "clairfs/sampler.h"

/* A growable per-worker buffer: the whole file, then the source's copy. */
struct buf {
    char *data;
    size_t cap;
};

struct bench {
    int dirfd;
    int verifyfd; /* -1 without --verify */
    size_t read_size;
    char **paths; /* item id -> relative path */
    uint32_t npaths;
    struct buf *bufs; /* [workers + 1]: the last for the main thread (T = 0) */
    struct buf *vbufs;
    uint32_t workers;
    atomic_uint_fast64_t files, bytes, mismatches;
};

struct order_file {
    uint64_t *epoch_start; /* epoch k is items [epoch_start[k], epoch_start[k+1]) */
    uint32_t nepochs;
};

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_sec(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Read fd to its end into b, read_size bytes per read(2) like a decoder's
 * buffered reads.  Returns the length or -errno. */
static ssize_t slurp(int fd, struct buf *b, size_t read_size)
{
    size_t len = 0;
    for (;;) {
        if (b->cap - len < read_size) {
            size_t cap = b->cap ? b->cap * 2 : read_size * 4;
            while (cap - len < read_size)
                cap *= 2;
            char *d = realloc(b->data, cap);
            if (!d)
                return -ENOMEM;
            b->data = d;
            b->cap = cap;
        }
        ssize_t n = read(fd, b->data + len, read_size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return (ssize_t)len;
        len += (size_t)n;
    }
}

static ssize_t read_file(int dirfd, const char *path, struct buf *b, size_t read_size)
{
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = slurp(fd, b, read_size);
    close(fd);
    return n;
}

/* The worker's job for one sample: open, read whole, close (and compare). */
static int fetch(void *arg, uint32_t worker, uint64_t batch, uint32_t item)
{
    (void)batch;
    struct bench *bn = arg;
    uint32_t slot = worker == CFS_LOADER_MAIN ? bn->workers : worker;
    const char *path = bn->paths[item];
    ssize_t n = read_file(bn->dirfd, path, &bn->bufs[slot], bn->read_size);
    if (n < 0) {
        fprintf(stderr, "clairfs-bench: %s: %s\n", path, strerror((int)-n));
        return (int)n;
    }
    atomic_fetch_add(&bn->files, 1);
    atomic_fetch_add(&bn->bytes, (uint64_t)n);
    if (bn->verifyfd >= 0) {
        ssize_t m = read_file(bn->verifyfd, path, &bn->vbufs[slot], 1 << 20);
        if (m < 0) {
            fprintf(stderr, "clairfs-bench: --verify: %s: %s\n", path, strerror((int)-m));
            return (int)m;
        }
        if (m != n || memcmp(bn->bufs[slot].data, bn->vbufs[slot].data, (size_t)n) != 0) {
            fprintf(stderr, "clairfs-bench: %s differs from the --verify copy (%zd vs %zd bytes)\n",
                    path, n, m);
            atomic_fetch_add(&bn->mismatches, 1);
        }
    }
    return 0;
}

/* Relative paths, one a line; an empty or '#' line ends an epoch. */
static int load_order_file(const char *file, struct bench *bn, struct order_file *of)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "clairfs-bench: --order-file %s: %s\n", file, strerror(errno));
        return -errno;
    }
    int rc = -ENOMEM;
    size_t cap = 0, ecap = 0;
    char *line = NULL;
    size_t llen = 0;
    ssize_t n;
    bool open_epoch = false;
    while ((n = getline(&line, &llen, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#') {
            open_epoch = false;
            continue;
        }
        if (!open_epoch) {
            if (of->nepochs + 2 > ecap) {
                ecap = ecap ? ecap * 2 : 8;
                uint64_t *e = realloc(of->epoch_start, ecap * sizeof(*e));
                if (!e)
                    goto out;
                of->epoch_start = e;
            }
            of->epoch_start[of->nepochs++] = bn->npaths;
            open_epoch = true;
        }
        if (bn->npaths == UINT32_MAX) {
            rc = -EFBIG;
            goto out;
        }
        if (bn->npaths == cap) {
            cap = cap ? cap * 2 : 1024;
            char **p = realloc(bn->paths, cap * sizeof(*p));
            if (!p)
                goto out;
            bn->paths = p;
        }
        const char *rel = line;
        while (*rel == '/')
            rel++;
        if (!(bn->paths[bn->npaths] = strdup(rel)))
            goto out;
        bn->npaths++;
    }
    if (of->nepochs == 0) {
        fprintf(stderr, "clairfs-bench: --order-file %s: no paths\n", file);
        rc = -EINVAL;
        goto out;
    }
    of->epoch_start[of->nepochs] = bn->npaths;
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* Item ids are sample numbers: paths[] is the catalog's index order. */
static int load_catalog_paths(const char *dir, const struct cfs_options *o, struct bench *bn,
                              uint64_t *total_bytes)
{
    struct cfs_catalog_params cp = {
        .source = dir, .order = o->order, .order_list = o->order_list,
        .order_root = o->order_root, .index_dir = NULL};
    struct cfs_catalog *c = NULL;
    char err[512] = "";
    char path[4096];
    int rc = cfs_catalog_open(&cp, &c, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "clairfs-bench: %s\n", err[0] ? err : strerror(-rc));
        return rc;
    }
    uint64_t n = cfs_catalog_sample_count(c);
    if (n == 0 || n > UINT32_MAX) {
        fprintf(stderr, "clairfs-bench: %s: %s\n", dir,
                n ? "too many samples" : "no samples in this order (order=sorted?)");
        rc = -EINVAL;
        goto out;
    }
    rc = -ENOMEM;
    bn->paths = calloc(n, sizeof(*bn->paths));
    if (!bn->paths)
        goto out;
    *total_bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        cfs_id id = cfs_catalog_sample_entry(c, i);
        int len = cfs_catalog_path(c, id, path, sizeof(path));
        if (len < 0) {
            rc = len;
            goto out;
        }
        if (!(bn->paths[i] = strdup(path)))
            goto out;
        bn->npaths = (uint32_t)(i + 1);
        *total_bytes += cfs_catalog_entry(c, id)->size;
    }
    rc = 0;
out:
    cfs_catalog_destroy(c);
    return rc;
}

struct epoch_stats {
    double wall, stall, first;
    uint64_t files, bytes, batches;
};

static int run_epoch(struct bench *bn, struct cfs_loader *l, const uint32_t *stream, uint64_t n,
                     double compute, struct epoch_stats *st)
{
    uint64_t files0 = atomic_load(&bn->files), bytes0 = atomic_load(&bn->bytes);
    double t0 = now_sec();
    int rc = cfs_loader_start_epoch(l, stream, n);
    if (rc < 0)
        return rc;
    memset(st, 0, sizeof(*st));
    uint64_t k;
    for (;;) {
        double w0 = now_sec();
        rc = cfs_loader_next(l, &k);
        double waited = now_sec() - w0;
        if (rc <= 0)
            break;
        if (st->batches == 0)
            st->first = now_sec() - t0;
        st->stall += waited;
        st->batches++;
        sleep_sec(compute);
    }
    st->wall = now_sec() - t0;
    st->files = atomic_load(&bn->files) - files0;
    st->bytes = atomic_load(&bn->bytes) - bytes0;
    return rc;
}

static void print_epoch(bool csv, const char *label, uint32_t rank, uint32_t epoch,
                        const struct epoch_stats *st)
{
    double mib = (double)st->bytes / (1024.0 * 1024.0);
    double fps = st->wall > 0 ? (double)st->files / st->wall : 0;
    double mibps = st->wall > 0 ? mib / st->wall : 0;
    if (csv)
        printf("%s,%u,%u,%.4f,%.4f,%.4f,%llu,%llu,%llu,%.1f,%.2f\n", label, rank, epoch, st->wall,
               st->stall, st->first, (unsigned long long)st->batches,
               (unsigned long long)st->files, (unsigned long long)st->bytes, fps, mibps);
    else
        printf("%5u %9.3f %9.3f %7.1f%% %9.3f %9llu %10.1f %9.1f %9.2f\n", epoch, st->wall,
               st->stall, st->wall > 0 ? 100.0 * st->stall / st->wall : 0, st->first,
               (unsigned long long)st->files, mib, fps, mibps);
    fflush(stdout);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [options] DIR\n"
            "\n"
            "Replays a PyTorch trainer's reads over DIR: one rank's sampler stream, batches\n"
            "handed to worker threads as torch's DataLoader does, each file read whole.\n"
            "Prints per epoch: wall time, stall (the training loop waiting for data), time\n"
            "to the first batch, files, MiB, files/s and MiB/s.\n"
            "\n"
            "  -o OPT[,OPT...]        the trainer, as for the mount: seed= (default 0),\n"
            "                         sampler=, world=, batch=, drop_last, drop_last_batch,\n"
            "                         start_epoch=, epochs=, order=, persistent_workers,\n"
            "                         repetitions=, rng_offset=, rng_epoch_words=\n"
            "  --rank R               trainer rank whose stream to replay (default: the first\n"
            "                         of ranks=, else 0)\n"
            "  --order-file FILE      replay these relative paths instead (one a line; an empty\n"
            "                         or '#' line starts the next epoch; epochs cycle)\n"
            "  --workers T            DataLoader num_workers, threads here (default 4; 0 = load\n"
            "                         in the main loop)\n"
            "  --prefetch-factor P    DataLoader prefetch_factor (default 2)\n"
            "  --compute SEC          time the training step takes per batch (default 0)\n"
            "  --epochs E             epochs to replay (default: epochs= if given, else 1)\n"
            "  --read-size SIZE       bytes per read(2) (default 64K, PIL's ImageFile.MAXBLOCK)\n"
            "  --verify SRC           compare every file read with SRC/<same path>\n"
            "  --catalog DIR          list the dataset from DIR, a copy of the tree (default:\n"
            "                         DIR itself, as a trainer's dataset class does)\n"
            "  --csv                  CSV: label,rank,epoch,wall_s,stall_s,first_batch_s,\n"
            "                         batches,files,bytes,files_per_s,mib_per_s\n"
            "  --label NAME           the CSV label column (default: DIR)\n"
            "  --barrier DIR          after each epoch wait for every rank of world= to end it,\n"
            "                         as synchronous data-parallel training does (the ranks of\n"
            "                         one run share DIR; rank R's end of epoch E is the file\n"
            "                         DIR/epoch-E.rank-R)\n"
            "  -h, --help\n"
            "\n"
            "Trainer options (-o):\n",
            prog);
    cfs_options_print_help(f);
}

enum {
    OPT_RANK = 256,
    OPT_ORDER_FILE,
    OPT_WORKERS,
    OPT_PREFETCH,
    OPT_COMPUTE,
    OPT_EPOCHS,
    OPT_READ_SIZE,
    OPT_VERIFY,
    OPT_CATALOG,
    OPT_CSV,
    OPT_LABEL,
    OPT_BARRIER,
};

static const struct option long_opts[] = {
    {"rank", required_argument, NULL, OPT_RANK},
    {"order-file", required_argument, NULL, OPT_ORDER_FILE},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"prefetch-factor", required_argument, NULL, OPT_PREFETCH},
    {"compute", required_argument, NULL, OPT_COMPUTE},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"read-size", required_argument, NULL, OPT_READ_SIZE},
    {"verify", required_argument, NULL, OPT_VERIFY},
    {"catalog", required_argument, NULL, OPT_CATALOG},
    {"csv", no_argument, NULL, OPT_CSV},
    {"label", required_argument, NULL, OPT_LABEL},
    {"barrier", required_argument, NULL, OPT_BARRIER},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_uint(const char *opt, const char *v, uint64_t max, uint64_t *out)
{
    int rc = cfs_parse_u64(v, max, out);
    if (rc < 0)
        fprintf(stderr, "clairfs-bench: %s %s: expected a whole number up to %llu\n", opt, v,
                (unsigned long long)max);
    return rc;
}

/* Did the -o list name epochs= itself (the table's default is 100)? */
static bool names_epochs(const char *list)
{
    for (const char *p = list; p && *p;) {
        if (strncmp(p, "epochs=", 7) == 0)
            return true;
        p = strchr(p, ',');
        if (p)
            p++;
    }
    return false;
}

/* The command line, and what the replay derives from it. */
struct bench_cli {
    struct cfs_options o;
    uint64_t rank, workers, prefetch, epochs;
    bool has_rank, csv, epochs_in_list;
    double compute;
    const char *dir, *order_file, *verify, *label;
    const char *barrier; /* --barrier DIR, or NULL */
    const char *catalog; /* where the tree is listed: NULL = dir */
};

/* One option of getopt_long: 0, 1 for --help (printed), -1 (reported). */
static int parse_one(struct bench_cli *c, struct bench *bn, int opt, const char *prog)
{
    char err[512] = "";
    uint64_t v;
    switch (opt) {
    case 'o':
        if (cfs_options_parse_list(&c->o, optarg, err, sizeof(err)) < 0) {
            fprintf(stderr, "clairfs-bench: %s\n", err);
            return -1;
        }
        c->epochs_in_list |= names_epochs(optarg);
        return 0;
    case OPT_RANK:
        c->has_rank = true;
        return parse_uint("--rank", optarg, UINT32_MAX - 1, &c->rank) < 0 ? -1 : 0;
    case OPT_ORDER_FILE:
        c->order_file = optarg;
        return 0;
    case OPT_WORKERS:
        return parse_uint("--workers", optarg, 1024, &c->workers) < 0 ? -1 : 0;
    case OPT_PREFETCH:
        if (parse_uint("--prefetch-factor", optarg, 1024, &c->prefetch) < 0)
            return -1;
        if (c->prefetch == 0) {
            fprintf(stderr, "clairfs-bench: --prefetch-factor must be at least 1\n");
            return -1;
        }
        return 0;
    case OPT_COMPUTE: {
        char *end;
        c->compute = strtod(optarg, &end);
        if (*end || end == optarg || !isfinite(c->compute) || c->compute < 0 ||
            c->compute > 3600) {
            fprintf(stderr, "clairfs-bench: --compute %s: expected seconds >= 0\n", optarg);
            return -1;
        }
        return 0;
    }
    case OPT_EPOCHS:
        if (parse_uint("--epochs", optarg, UINT32_MAX, &c->epochs) < 0)
            return -1;
        if (c->epochs == 0) {
            fprintf(stderr, "clairfs-bench: --epochs must be at least 1\n");
            return -1;
        }
        return 0;
    case OPT_READ_SIZE:
        if (cfs_parse_size(optarg, &v) < 0 || v == 0 || v > (1u << 30)) {
            fprintf(stderr, "clairfs-bench: --read-size %s: expected 1 byte to 1G\n", optarg);
            return -1;
        }
        bn->read_size = (size_t)v;
        return 0;
    case OPT_VERIFY:
        c->verify = optarg;
        return 0;
    case OPT_CATALOG:
        c->catalog = optarg;
        return 0;
    case OPT_CSV:
        c->csv = true;
        return 0;
    case OPT_LABEL:
        c->label = optarg;
        return 0;
    case OPT_BARRIER:
        c->barrier = optarg;
        return 0;
    case 'h':
        usage(stdout, prog);
        return 1;
    default:
        fprintf(stderr, "Try '%s --help'.\n", prog);
        return -1;
    }
}

/* Options and DIR, then the checks across them: 0, 1 (--help), -1. */
static int parse_command_line(struct bench_cli *c, struct bench *bn, int argc, char **argv)
{
    char err[512] = "";
    int opt, rc;
    while ((opt = getopt_long(argc, argv, "o:h", long_opts, NULL)) != -1)
        if ((rc = parse_one(c, bn, opt, argv[0])) != 0)
            return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "clairfs-bench: expected one DIR (see --help)\n");
        return -1;
    }
    c->dir = argv[optind];
    if (!c->label)
        c->label = c->dir;
    struct cfs_options *o = &c->o;
    /* epochs= is the trainer's total: replay start_epoch .. epochs-1. */
    if (!c->epochs_in_list)
        o->epochs = (uint32_t)(o->start_epoch + (c->epochs ? c->epochs : 1) > UINT32_MAX
                                   ? UINT32_MAX
                                   : o->start_epoch + (c->epochs ? c->epochs : 1));
    if (cfs_options_validate(o, err, sizeof(err)) < 0) {
        fprintf(stderr, "clairfs-bench: %s\n", err);
        return -1;
    }
    if (c->epochs == 0)
        c->epochs = o->epochs - o->start_epoch;
    if (!c->has_rank && o->has_ranks)
        c->rank = o->rank_first;
    if (!c->order_file && c->rank >= o->world) {
        fprintf(stderr, "clairfs-bench: --rank %llu: must be below world=%u\n",
                (unsigned long long)c->rank, o->world);
        return -1;
    }
    return 0;
}

static int open_dirs(const struct bench_cli *c, struct bench *bn)
{
    bn->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bn->dirfd < 0) {
        fprintf(stderr, "clairfs-bench: %s: %s\n", c->dir, strerror(errno));
        return -1;
    }
    if (c->verify) {
        bn->verifyfd = open(c->verify, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (bn->verifyfd < 0) {
            fprintf(stderr, "clairfs-bench: --verify %s: %s\n", c->verify, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* The order to replay: the --order-file, or the catalog's paths and the
 * trainer's sampler, from the run configuration as the mount makes it. */
static int load_order(const struct bench_cli *c, struct bench *bn, struct order_file *of,
                      struct cfs_sampler **sampler, uint64_t *dataset_bytes)
{
    if (c->order_file)
        return load_order_file(c->order_file, bn, of);
    if (load_catalog_paths(c->catalog ? c->catalog : c->dir, &c->o, bn, dataset_bytes) < 0)
        return -1;
    char err[512] = "";
    struct cfs_run_config run;
    struct cfs_run_inputs in = {.opts = &c->o, .nsamples = bn->npaths, .nodes = 1, .node = 0};
    int rc = cfs_run_config_make(&in, &run, err, sizeof(err));
    if (rc == 0) {
        rc = cfs_sampler_create(&run.sampler, sampler, err, sizeof(err));
        cfs_run_config_free(&run);
    }
    if (rc < 0) {
        fprintf(stderr, "clairfs-bench: %s\n", err[0] ? err : strerror(-rc));
        return -1;
    }
    return 0;
}

static void print_header(const struct bench_cli *c, const struct bench *bn,
                         const struct order_file *of, uint64_t dataset_bytes, double t_setup)
{
    if (c->csv) {
        printf("label,rank,epoch,wall_s,stall_s,first_batch_s,batches,files,bytes,files_per_s,"
               "mib_per_s\n");
        return;
    }
    if (c->order_file)
        printf("clairfs-bench: %s, %u paths in %u epoch(s) from %s\n", c->dir, bn->npaths,
               of->nepochs, c->order_file);
    else
        printf("clairfs-bench: %s, %u samples (%.1f MiB), sampler=%s seed=%llu world=%u "
               "rank=%llu; catalog in %.2fs\n",
               c->dir, bn->npaths, (double)dataset_bytes / (1024.0 * 1024.0),
               cfs_sampler_kind_name(c->o.sampler), (unsigned long long)c->o.seed, c->o.world,
               (unsigned long long)c->rank, t_setup);
    printf("batch=%u workers=%llu prefetch_factor=%llu compute=%.3fs read_size=%zu%s\n",
           c->o.batch, (unsigned long long)c->workers, (unsigned long long)c->prefetch,
           c->compute, bn->read_size, c->verify ? " verify" : "");
    printf("%5s %9s %9s %8s %9s %9s %10s %9s %9s\n", "epoch", "wall_s", "stall_s", "stall",
           "first_s", "files", "MiB", "files/s", "MiB/s");
}

/* Epoch `epoch`'s stream of item ids into *stream (n of them). */
static int epoch_stream(const struct bench_cli *c, const struct order_file *of,
                        struct cfs_sampler *sampler, uint32_t epoch, uint32_t **stream,
                        uint64_t *n)
{
    free(*stream);
    *stream = NULL;
    if (c->order_file) {
        uint32_t k = epoch % of->nepochs;
        *n = of->epoch_start[k + 1] - of->epoch_start[k];
        if (!(*stream = malloc(*n * sizeof(**stream))))
            return -ENOMEM;
        for (uint64_t j = 0; j < *n; j++)
            (*stream)[j] = (uint32_t)(of->epoch_start[k] + j);
        return 0;
    }
    int rc = cfs_sampler_compute_epoch(sampler, epoch);
    if (rc < 0) {
        fprintf(stderr, "clairfs-bench: epoch %u: %s\n", epoch, cfs_sampler_error(sampler));
        return rc;
    }
    *n = cfs_sampler_rank_len(sampler, epoch, (uint32_t)c->rank);
    if (!(*stream = malloc((*n ? *n : 1) * sizeof(**stream))))
        return -ENOMEM;
    for (uint64_t j = 0; j < *n; j++)
        (*stream)[j] = cfs_sampler_rank_at(sampler, (uint32_t)c->rank, j);
    return 0;
}

/* --barrier: mark this rank's end of epoch and wait for every rank's.  A
 * rank that died must not hang the others for ever: after BARRIER_TIMEOUT
 * seconds the epoch fails. */
#define BARRIER_TIMEOUT 600.0
static int epoch_barrier(const struct bench_cli *c, uint32_t epoch)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/epoch-%u.rank-%llu", c->barrier, epoch,
             (unsigned long long)c->rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "clairfs-bench: --barrier: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    close(fd);
    double deadline = now_sec() + BARRIER_TIMEOUT;
    for (uint32_t r = 0; r < c->o.world;) {
        snprintf(path, sizeof(path), "%s/epoch-%u.rank-%u", c->barrier, epoch, r);
        if (access(path, F_OK) == 0) {
            r++;
            continue;
        }
        if (now_sec() > deadline) {
            fprintf(stderr, "clairfs-bench: --barrier: rank %u did not end epoch %u in %.0f s\n",
                    r, epoch, BARRIER_TIMEOUT);
            return -1;
        }
        sleep_sec(0.0005);
    }
    return 0;
}

/* Replays every epoch and prints each, then the total: 0 or -1. */
static int replay(const struct bench_cli *c, struct bench *bn, struct cfs_loader *loader,
                  const struct order_file *of, struct cfs_sampler *sampler,
                  struct epoch_stats *total)
{
    uint32_t *stream = NULL;
    int rc = 0;
    for (uint64_t i = 0; i < c->epochs && rc == 0; i++) {
        uint32_t epoch = (uint32_t)(c->o.start_epoch + i);
        uint64_t n = 0;
        rc = epoch_stream(c, of, sampler, epoch, &stream, &n);
        if (rc == -ENOMEM)
            fprintf(stderr, "clairfs-bench: out of memory\n");
        if (rc < 0)
            break;
        struct epoch_stats st;
        rc = run_epoch(bn, loader, stream, n, c->compute, &st);
        if (rc < 0) {
            fprintf(stderr, "clairfs-bench: epoch %u stopped: %s\n", epoch, strerror(-rc));
            break;
        }
        print_epoch(c->csv, c->label, (uint32_t)c->rank, epoch, &st);
        if (c->barrier && epoch_barrier(c, epoch) < 0) {
            rc = -1;
            break;
        }
        total->wall += st.wall;
        total->stall += st.stall;
        total->files += st.files;
        total->bytes += st.bytes;
        total->batches += st.batches;
    }
    free(stream);
    if (rc < 0)
        return -1;
    if (!c->csv && c->epochs > 1) {
        printf("%5s %9.3f %9.3f %7.1f%% %9s %9llu %10.1f %9.1f %9.2f\n", "all", total->wall,
               total->stall, total->wall > 0 ? 100.0 * total->stall / total->wall : 0, "-",
               (unsigned long long)total->files, (double)total->bytes / (1024.0 * 1024.0),
               total->wall > 0 ? (double)total->files / total->wall : 0,
               total->wall > 0 ? (double)total->bytes / (1024.0 * 1024.0) / total->wall : 0);
    }
    return 0;
}

/* --verify: every file read identical to the other directory's copy. */
static int report_verify(const struct bench_cli *c, const struct bench *bn,
                         const struct epoch_stats *total)
{
    if (!c->verify)
        return 0;
    uint64_t bad = atomic_load(&bn->mismatches);
    if (bad) {
        fprintf(stderr, "clairfs-bench: %llu file reads differed from %s\n",
                (unsigned long long)bad, c->verify);
        return -1;
    }
    if (!c->csv)
        printf("verify: %llu file reads identical to %s\n", (unsigned long long)total->files,
               c->verify);
    return 0;
}

static int start_loader(const struct bench_cli *c, struct bench *bn, struct cfs_loader **loader)
{
    bn->workers = (uint32_t)c->workers;
    bn->bufs = calloc(c->workers + 1, sizeof(*bn->bufs));
    bn->vbufs = calloc(c->workers + 1, sizeof(*bn->vbufs));
    if (!bn->bufs || !bn->vbufs) {
        fprintf(stderr, "clairfs-bench: out of memory\n");
        return -1;
    }
    struct cfs_loader_params lp = {.batch = c->o.batch,
                                   .workers = (uint32_t)c->workers,
                                   .prefetch = (uint32_t)c->prefetch,
                                   .drop_last = c->o.drop_last_batch};
    int rc = cfs_loader_create(&lp, fetch, NULL, bn, loader);
    if (rc < 0) {
        fprintf(stderr, "clairfs-bench: cannot start the workers: %s\n", strerror(-rc));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_cli c = {.workers = 4, .prefetch = 2};
    struct bench bn = {.dirfd = -1, .verifyfd = -1, .read_size = 64 * 1024};
    struct order_file of = {0};
    struct cfs_sampler *sampler = NULL;
    struct cfs_loader *loader = NULL;
    struct epoch_stats total = {0};
    uint64_t dataset_bytes = 0;
    int rc;

    cfs_options_init(&c.o);
    rc = parse_command_line(&c, &bn, argc, argv);
    if (rc == 1) {
        rc = 0; /* --help */
    } else if (rc == 0 && open_dirs(&c, &bn) == 0) {
        double t_setup = now_sec();
        rc = load_order(&c, &bn, &of, &sampler, &dataset_bytes);
        t_setup = now_sec() - t_setup;
        if (rc == 0)
            rc = start_loader(&c, &bn, &loader);
        if (rc == 0) {
            print_header(&c, &bn, &of, dataset_bytes, t_setup);
            rc = replay(&c, &bn, loader, &of, sampler, &total);
        }
        if (rc == 0)
            rc = report_verify(&c, &bn, &total);
    } else {
        rc = -1;
    }
    cfs_loader_destroy(loader);
    cfs_sampler_destroy(sampler);
    for (uint32_t i = 0; bn.bufs && i <= bn.workers; i++)
        free(bn.bufs[i].data);
    for (uint32_t i = 0; bn.vbufs && i <= bn.workers; i++)
        free(bn.vbufs[i].data);
    free(bn.bufs);
    free(bn.vbufs);
    for (uint32_t i = 0; i < bn.npaths; i++)
        free(bn.paths[i]);
    free(bn.paths);
    free(of.epoch_start);
    if (bn.dirfd >= 0)
        close(bn.dirfd);
    if (bn.verifyfd >= 0)
        close(bn.verifyfd);
    cfs_options_free(&c.o);
    return rc < 0 ? 1 : 0;
}
