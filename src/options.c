/* The mount options (clairfs/options.h): one table, options_table, that
 * both the parser and --help read, so that an option cannot be parsed one
 * way and described another.  Shared
 * by the daemon, clairfs-plan and clairfs-bench, so the same option means
 * the same thing in each.  Most rows are a type and a range; the options
 * whose value is a word or a list (sampler=, order=, ranks=, io=, ...)
 * have a parser of their own here.  Checks that look at several options
 * together wait for cfs_options_validate(), so that options may come in
 * any order. */
#include "clairfs/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"

/* How an option's value is read.  Every option is one row of options_table
 * below; parsing, --help and the man page's option list come from it. */
enum opt_type {
    OPT_FLAG,   /* no value: sets a bool, or calls the handler with NULL */
    OPT_U32,    /* decimal */
    OPT_U64,    /* decimal, full 64-bit range */
    OPT_SIZE,   /* bytes with K/M/G/T suffix */
    OPT_SECONDS,/* decimal seconds, fractional allowed */
    OPT_STRING, /* path */
    OPT_SPECIAL /* parsed by a handler */
};

enum opt_group { OPT_GROUP_USER, OPT_GROUP_HINT, OPT_GROUP_TUNE, OPT_GROUP_DEBUG, OPT_GROUPS };

struct opt_def {
    const char *name;
    enum opt_type type;
    size_t offset;
    size_t present_offset; /* bool set when given, or (size_t)-1 */
    uint64_t min, max;
    int (*handler)(struct cfs_options *o, const char *value, char *err, size_t errlen);
    enum opt_group group; /* --help's heading */
    const char *help;     /* one short line; "ARG: ..." names the argument */
};

#define NO_PRESENT ((size_t)-1)
#define OFF(f) offsetof(struct cfs_options, f)

static int replace_string(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*slot);
    *slot = copy;
    return 0;
}

/* The sampler= names. Some are a kind under a second name its users know:
 * Lightning injects exactly torch-ddp's DistributedSampler, MMEngine's
 * DefaultSampler and InfiniteSampler are torch-ddp's and detectron2's code,
 * and the Hugging Face Trainer with a data_seed is torch-sampler
 * (clairfs/sampler.h). */
static const struct {
    const char *name;
    enum cfs_sampler_kind kind;
} sampler_names[] = {
    {"torch-ddp", CFS_SAMPLER_TORCH_DDP},
    {"torch", CFS_SAMPLER_TORCH},
    {"torch-sampler", CFS_SAMPLER_TORCH_SAMPLER},
    {"lightning", CFS_SAMPLER_TORCH_DDP},
    {"hf-accelerate", CFS_SAMPLER_HF_ACCELERATE},
    {"torchvision-ra", CFS_SAMPLER_TORCHVISION_RA},
    {"timm-ra", CFS_SAMPLER_TIMM_RA},
    {"torch-global", CFS_SAMPLER_TORCH_GLOBAL},
    {"detectron2", CFS_SAMPLER_DETECTRON2},
    {"mmengine", CFS_SAMPLER_TORCH_DDP},
    {"mmengine-noround", CFS_SAMPLER_MMENGINE_NOROUND},
    {"mmengine-infinite", CFS_SAMPLER_DETECTRON2},
    {"torchdata", CFS_SAMPLER_TORCHDATA},
    {"torchdata-workers", CFS_SAMPLER_TORCHDATA_WORKERS},
    {"ultralytics", CFS_SAMPLER_ULTRALYTICS},
    {"ultralytics-ddp", CFS_SAMPLER_ULTRALYTICS_DDP},
    {"hf-trainer", CFS_SAMPLER_TORCH_SAMPLER},
    {"hf-trainer-global", CFS_SAMPLER_HF_TRAINER_GLOBAL},
};

static int parse_sampler(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    if (strncmp(v, "list:", 5) == 0 && v[5]) {
        o->sampler = CFS_SAMPLER_LIST;
        o->sampler_lightning = false;
        return replace_string(&o->sampler_list, v + 5);
    }
    for (size_t i = 0; i < sizeof(sampler_names) / sizeof(sampler_names[0]); i++)
        if (strcmp(v, sampler_names[i].name) == 0) {
            o->sampler = sampler_names[i].kind;
            o->sampler_lightning = strcmp(v, "lightning") == 0;
            return 0;
        }
    /* The one-line error lists the table, so it cannot fall behind it. */
    char names[512];
    size_t at = 0;
    for (size_t i = 0; i < sizeof(sampler_names) / sizeof(sampler_names[0]); i++) {
        int k = snprintf(names + at, sizeof(names) - at, "%s, ", sampler_names[i].name);
        if (k < 0 || (size_t)k >= sizeof(names) - at)
            break;
        at += (size_t)k;
    }
    return cfs_error_msg(err, errlen, -EINVAL, "option sampler=%s: expected %slist:FILE", v,
                         names);
}

static int parse_order(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    const char *arg;
    if (cfs_order_parse(v, &o->order, &arg) < 0)
        return cfs_error_msg(err, errlen, -EINVAL, "option order=%s: expected " CFS_ORDER_NAMES,
                             v);
    /* The last order= wins whole: no root or list left from an earlier one.
     * Whether ROOT is a directory of SOURCE is the catalog's to say. */
    free(o->order_list);
    free(o->order_root);
    o->order_list = o->order_root = NULL;
    return replace_string(o->order == CFS_ORDER_LIST ? &o->order_list : &o->order_root, arg);
}

static int parse_ranks(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    uint64_t first, last;
    o->ranks_cyclic = strcmp(v, "cyclic") == 0;
    o->has_ranks = false;
    if (o->ranks_cyclic)
        return 0;
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", v);
    char *dash = strchr(buf, '-');
    if (dash)
        *dash = '\0';
    if (cfs_parse_u64(buf, UINT32_MAX - 1, &first) < 0 ||
        (dash && cfs_parse_u64(dash + 1, UINT32_MAX - 1, &last) < 0))
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option ranks=%s: expected A, A-B (trainer ranks) or cyclic", v);
    if (!dash)
        last = first;
    if (last < first)
        return cfs_error_msg(err, errlen, -EINVAL, "option ranks=%s: the range is empty", v);
    o->has_ranks = true;
    o->rank_first = (uint32_t)first;
    o->rank_last = (uint32_t)last;
    return 0;
}

static int parse_repetitions(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    uint64_t r;
    if (cfs_parse_u64(v, 1024, &r) < 0 || r == 0)
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option repetitions=%s: expected an integer 1..1024 (timm's "
                             "non-integer num_repeats resamples, which clairfs does not model)",
                             v);
    o->repetitions = (uint32_t)r;
    return 0;
}

static int parse_torch(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    /* Only randperm for n >= 214748364 differs between the torch versions
     * clairfs models; everything else reads the same. */
    if (strcmp(v, "2.6") == 0 || strcmp(v, "current") == 0)
        o->randperm = CFS_RANDPERM_CURRENT;
    else if (strcmp(v, "legacy") == 0 || strcmp(v, "1.13") == 0)
        o->randperm = CFS_RANDPERM_LEGACY;
    else
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option torch=%s: expected current (torch >= 2.6) or legacy", v);
    return 0;
}

/* An option whose value is one of a few words: their index in names, or
 * -EINVAL with "option KEY=V: expected a, b or c". */
static int keyword(const char *key, const char *v, const char *const *names, size_t n, char *err,
                   size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return (int)i;
    char list[128] = "";
    for (size_t i = 0; i < n; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof(list) - at, "%s%s",
                 i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
    }
    return cfs_error_msg(err, errlen, -EINVAL, "option %s=%s: expected %s", key, v, list);
}

static int parse_io(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    static const char *const names[] = {"auto", "uring", "threads"};
    static const enum cfs_io_kind kinds[] = {CFS_IO_AUTO, CFS_IO_URING, CFS_IO_THREADS};
    int k = keyword("io", v, names, sizeof(names) / sizeof(*names), err, errlen);
    if (k < 0)
        return k;
    o->io = kinds[k];
    return 0;
}

static int parse_fuse_io(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    static const char *const names[] = {"auto", "uring", "device"};
    static const enum cfs_fuse_io kinds[] = {CFS_FUSE_IO_AUTO, CFS_FUSE_IO_URING,
                                             CFS_FUSE_IO_DEVICE};
    int k = keyword("fuse_io", v, names, sizeof(names) / sizeof(*names), err, errlen);
    if (k < 0)
        return k;
    o->fuse_io = kinds[k];
    return 0;
}

static int parse_sweep(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    static const char *const names[] = {"auto", "on", "off"};
    static const enum cfs_sweep_mode modes[] = {CFS_SWEEP_AUTO, CFS_SWEEP_ON, CFS_SWEEP_OFF};
    int k = v ? keyword("sweep", v, names, sizeof(names) / sizeof(*names), err, errlen)
              : 2; /* no_sweep */
    if (k < 0)
        return k;
    o->sweep = modes[k];
    return 0;
}

static int parse_log_level(struct cfs_options *o, const char *v, char *err, size_t errlen)
{
    static const char *const names[] = {"error", "warning", "notice", "info", "debug"};
    static const int levels[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};
    int k = keyword("log_level", v, names, sizeof(names) / sizeof(*names), err, errlen);
    if (k < 0)
        return k;
    o->log_level = levels[k];
    return 0;
}

/* --help's groups, in the order it prints them: what a user sets, the
 * order's hints (the mount learns the order from the opens; these are for
 * the few cases it cannot, man clairfs(1)), tuning, and debugging. */
static const char *const group_titles[] = {
    [OPT_GROUP_USER] = "Tiers, metrics, access",
    [OPT_GROUP_HINT] = "Hints for the read order (it is learnt from the opens: man clairfs, HINTS)",
    [OPT_GROUP_TUNE] = "Tuning",
    [OPT_GROUP_DEBUG] = "Debugging",
};

#define U OPT_GROUP_USER
#define H OPT_GROUP_HINT
#define T OPT_GROUP_TUNE
#define D OPT_GROUP_DEBUG
static const struct opt_def options_table[] = {
    {"ram", OPT_SIZE, OFF(ram), OFF(has_ram), 0, UINT64_MAX, NULL, U,
     "RAM tier; default half the available memory"},
    {"ssd", OPT_SIZE, OFF(ssd), OFF(has_ssd), 0, UINT64_MAX, NULL, U,
     "SSD tier; default half of ssd_dir's free space"},
    {"ssd_dir", OPT_STRING, OFF(ssd_dir), NO_PRESENT, 0, 0, NULL, U,
     "the SSD tier's directory ({rank}: MPI rank)"},
    {"index", OPT_STRING, OFF(index_dir), NO_PRESENT, 0, 0, NULL, U,
     "index directory; default ~/.cache/clairfs/..."},
    {"metrics_listen", OPT_STRING, OFF(metrics_listen), NO_PRESENT, 0, 0, NULL, U,
     "HOST:PORT: serve /metrics to Prometheus"},
    {"allow_other", OPT_FLAG, OFF(allow_other), NO_PRESENT, 0, 0, NULL, U,
     "let other users read the mount"},
    {"reclaim", OPT_FLAG, OFF(reclaim), NO_PRESENT, 0, 0, NULL, U,
     "replace a dead mount left on MOUNTPOINT"},
    {"seed", OPT_U64, OFF(seed), OFF(has_seed), 0, UINT64_MAX, NULL, H, "the sampler's seed"},
    {"sampler", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_sampler, H,
     "KIND: torch-ddp, torch, torch-global, ..., list:FILE"},
    {"torch", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_torch, H,
     "VERSION: current (>= 2.6) or legacy randperm"},
    {"world", OPT_U32, OFF(world), NO_PRESENT, 1, UINT32_MAX, NULL, H, "trainer world size"},
    {"ranks", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_ranks, H,
     "A-B: the trainer ranks served; cyclic: k, k+N, ..."},
    {"batch", OPT_U32, OFF(batch), NO_PRESENT, 1, UINT32_MAX, NULL, H, "DataLoader batch_size"},
    {"drop_last", OPT_FLAG, OFF(drop_last), NO_PRESENT, 0, 0, NULL, H,
     "DistributedSampler(drop_last=True)"},
    {"drop_last_batch", OPT_FLAG, OFF(drop_last_batch), NO_PRESENT, 0, 0, NULL, H,
     "DataLoader(drop_last=True)"},
    {"persistent_workers", OPT_FLAG, OFF(persistent_workers), NO_PRESENT, 0, 0, NULL, H,
     "DataLoader(persistent_workers=True)"},
    {"repetitions", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_repetitions, H,
     "N: repeats of each index (torchvision-ra, timm-ra)"},
    {"rng_offset", OPT_U64, OFF(rng_offset), NO_PRESENT, 0, UINT64_MAX, NULL, H,
     "torch-global: words drawn before epoch 0"},
    {"rng_epoch_words", OPT_U64, OFF(rng_epoch_words), NO_PRESENT, 0, UINT64_MAX, NULL, H,
     "torch-global: words each epoch draws elsewhere"},
    {"epochs", OPT_U32, OFF(epochs), NO_PRESENT, 1, UINT32_MAX, NULL, H,
     "epochs the trainer runs (default 100)"},
    {"start_epoch", OPT_U32, OFF(start_epoch), NO_PRESENT, 0, UINT32_MAX, NULL, H,
     "first epoch of a resumed run"},
    {"order", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_order, H,
     "KIND: imagefolder, timm, ..., list:FILE, KIND:ROOT"},
    {"rescan", OPT_FLAG, OFF(rescan), NO_PRESENT, 0, 0, NULL, T,
     "scan SOURCE again though the index has it"},
    {"io", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_io, T, "ENGINE: auto, uring or threads"},
    {"io_depth", OPT_U32, OFF(io_depth), NO_PRESENT, 1, 4096, NULL, T,
     "fetches in flight (default 64)"},
    {"fuse_io", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_fuse_io, T,
     "REQUESTS: auto, uring or device (/dev/fuse)"},
    {"lookahead", OPT_U32, OFF(lookahead), NO_PRESENT, 1, UINT32_MAX, NULL, T,
     "files to fetch ahead of the trainers"},
    {"no_pagecache", OPT_FLAG, OFF(no_pagecache), NO_PRESENT, 0, 0, NULL, T,
     "keep the RAM tier out of the page cache"},
    {"kernel_open", OPT_FLAG, OFF(kernel_open), NO_PRESENT, 0, 0, NULL, T,
     "kernel opens even where opens go uncounted"},
    {"no_kernel_open", OPT_FLAG, OFF(no_kernel_open), NO_PRESENT, 0, 0, NULL, T,
     "every open reaches clairfs, staged or not"},
    {"sweep", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_sweep, T,
     "MODE: auto, on or off: stage in index order meanwhile"},
    {"no_sweep", OPT_FLAG, 0, NO_PRESENT, 0, 0, parse_sweep, T, "the same as sweep=off"},
    {"search_budget", OPT_U32, OFF(search_budget), NO_PRESENT, 0, 100, NULL, T,
     "PCT: CPU the order's search may take (default 3)"},
    {"search_threads", OPT_U32, OFF(search_threads), NO_PRESENT, 0, 1024, NULL, T,
     "N: the seed search's threads (default 0: all CPUs)"},
    {"no_identify", OPT_FLAG, OFF(no_identify), NO_PRESENT, 0, 0, NULL, T,
     "never learn the order from the opens"},
    {"peer_timeout", OPT_SECONDS, OFF(peer_timeout), NO_PRESENT, 0, 0, NULL, T,
     "seconds before a silent MPI peer is slow"},
    {"no_peers", OPT_FLAG, OFF(no_peers), NO_PRESENT, 0, 0, NULL, T,
     "under MPI, never fetch from other nodes"},
    {"model", OPT_STRING, OFF(model_file), NO_PRESENT, 0, 0, NULL, T,
     "FILE: the peer-or-PFS model's figures (MPI)"},
    {"record_opens", OPT_STRING, OFF(record_opens), NO_PRESENT, 0, 0, NULL, D,
     "FILE: write PID PPID PATH per open"},
    {"log_level", OPT_SPECIAL, 0, NO_PRESENT, 0, 0, parse_log_level, D,
     "LEVEL: error, warning, notice, info or debug"},
};
#undef U
#undef H
#undef T
#undef D

#define N_OPTIONS (sizeof(options_table) / sizeof(options_table[0]))

void cfs_options_init(struct cfs_options *o)
{
    memset(o, 0, sizeof(*o));
    o->sampler = CFS_SAMPLER_TORCH_DDP;
    o->world = 1;
    o->batch = 1;
    o->log_level = -1;
    o->repetitions = 3;
    o->epochs = 100;
    o->order = CFS_ORDER_IMAGEFOLDER;
    o->ram = CFS_RAM_FALLBACK; /* callers without the node's memory */
    o->io = CFS_IO_AUTO;
    o->io_depth = 64;
    o->peer_timeout = 2.0;
    o->search_budget = 3;
}

void cfs_options_free(struct cfs_options *o)
{
    free(o->sampler_list);
    free(o->order_list);
    free(o->order_root);
    free(o->ssd_dir);
    free(o->index_dir);
    free(o->model_file);
    free(o->metrics_listen);
    free(o->record_opens);
    o->sampler_list = o->order_list = o->ssd_dir = o->index_dir = o->model_file = NULL;
    o->metrics_listen = o->record_opens = o->order_root = NULL;
}

int cfs_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int cfs_parse_quantity(const char *s, bool scaled, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || !isfinite(v))
        return -EINVAL;
    if (scaled && *end && !isspace((unsigned char)*end)) {
        static const char units[] = "KMGT";
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u)
            return -EINVAL;
        v *= pow(1024.0, (double)(u - units + 1));
        end++;
        if (*end == 'i')
            end++;
        if (toupper((unsigned char)*end) == 'B')
            end++;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -EINVAL;
    *out = v;
    return 0;
}

int cfs_parse_size(const char *s, uint64_t *out)
{
    double bytes;
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.') || cfs_parse_quantity(s, true, &bytes) < 0)
        return -EINVAL;
    if (bytes >= 18446744073709551615.0)
        return -ERANGE;
    *out = (uint64_t)bytes;
    return 0;
}

static const struct opt_def *find_option(const char *key, size_t keylen)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options_table[i].name) == keylen &&
            memcmp(options_table[i].name, key, keylen) == 0)
            return &options_table[i];
    return NULL;
}

static int apply_option(struct cfs_options *o, const struct opt_def *d, const char *value,
                        char *err, size_t errlen)
{
    char *base = (char *)o;
    uint64_t u;
    int rc;

    if (d->type == OPT_FLAG) {
        if (value)
            return cfs_error_msg(err, errlen, -EINVAL, "option %s takes no value", d->name);
        if (d->handler) /* a flag that names a value of another option */
            return d->handler(o, NULL, err, errlen);
        *(bool *)(base + d->offset) = true;
        return 0;
    }
    if (!value || !*value)
        return cfs_error_msg(err, errlen, -EINVAL, "option %s needs a value (%s=...)", d->name,
                             d->name);

    switch (d->type) {
    case OPT_U32:
    case OPT_U64:
        rc = cfs_parse_u64(value, d->type == OPT_U32 ? UINT32_MAX : UINT64_MAX, &u);
        if (rc < 0)
            return cfs_error_msg(err, errlen, -EINVAL, "option %s=%s: %s", d->name, value,
                                 rc == -ERANGE ? "number out of range" : "not a number");
        if (u < d->min || u > d->max)
            return cfs_error_msg(err, errlen, -EINVAL,
                                 "option %s=%s: must be between %llu and %llu", d->name, value,
                                 (unsigned long long)d->min, (unsigned long long)d->max);
        if (d->type == OPT_U32)
            *(uint32_t *)(base + d->offset) = (uint32_t)u;
        else
            *(uint64_t *)(base + d->offset) = u;
        break;
    case OPT_SIZE:
        if (cfs_parse_size(value, &u) < 0)
            return cfs_error_msg(err, errlen, -EINVAL,
                                 "option %s=%s: not a size (use a number with K, M, G or T)",
                                 d->name, value);
        *(uint64_t *)(base + d->offset) = u;
        break;
    case OPT_SECONDS: {
        char *end;
        double v = strtod(value, &end);
        if (*end || end == value || !isfinite(v) || v <= 0 || v > 86400)
            return cfs_error_msg(err, errlen, -EINVAL, "option %s=%s: expected seconds > 0",
                                 d->name, value);
        *(double *)(base + d->offset) = v;
        break;
    }
    case OPT_STRING:
        rc = replace_string((char **)(base + d->offset), value);
        if (rc < 0)
            return rc;
        break;
    case OPT_SPECIAL:
        rc = d->handler(o, value, err, errlen);
        if (rc < 0)
            return rc;
        break;
    case OPT_FLAG:
        break;
    }
    if (d->present_offset != NO_PRESENT)
        *(bool *)(base + d->present_offset) = true;
    return 0;
}

int cfs_options_set(struct cfs_options *o, const char *kv, char *err, size_t errlen)
{
    const char *eq = strchr(kv, '=');
    size_t keylen = eq ? (size_t)(eq - kv) : strlen(kv);
    const struct opt_def *d = find_option(kv, keylen);
    if (!d)
        return -ENOENT;
    return apply_option(o, d, eq ? eq + 1 : NULL, err, errlen);
}

int cfs_options_parse_list(struct cfs_options *o, const char *list, char *err, size_t errlen)
{
    char *copy = strdup(list);
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        rc = cfs_options_set(o, tok, err, errlen);
        if (rc == -ENOENT) {
            cfs_error_msg(err, errlen, -EINVAL, "unknown option '%s' (see --help)", tok);
            rc = -EINVAL;
        }
        if (rc < 0)
            break;
    }
    free(copy);
    return rc;
}

int cfs_options_validate(const struct cfs_options *o, char *err, size_t errlen)
{
    if (o->has_ranks && o->rank_last >= o->world)
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option ranks=%u-%u: ranks must be within 0..%u (world=%u)",
                             o->rank_first, o->rank_last, o->world - 1, o->world);
    if (o->start_epoch >= o->epochs)
        return cfs_error_msg(err, errlen, -EINVAL, "option start_epoch=%u: must be below epochs=%u",
                             o->start_epoch, o->epochs);
    /* DistributedSampler (and accelerate's and torchvision's samplers) seed
     * epoch e with seed + e, which torch refuses past 2^64-1: say so now
     * rather than at the first epoch that overflows. */
    bool seeds_per_epoch = o->sampler == CFS_SAMPLER_TORCH_DDP ||
                           o->sampler == CFS_SAMPLER_HF_ACCELERATE ||
                           o->sampler == CFS_SAMPLER_TORCHVISION_RA;
    if (o->has_seed && seeds_per_epoch && o->seed > UINT64_MAX - (o->epochs - 1))
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option seed=%llu: seed + epoch exceeds 2^64-1 within epochs=%u",
                             (unsigned long long)o->seed, o->epochs);
    /* Lightning injects its DistributedSampler with drop_last=False; a
     * trainer that sets drop_last passes a sampler of its own (torch-ddp). */
    if (o->sampler_lightning && o->drop_last)
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option drop_last: Lightning's injected DistributedSampler never "
                             "drops; with a sampler of your own use sampler=torch-ddp");
    /* Lightning's seed_everything refuses a seed outside numpy's range. */
    if (o->has_seed && o->sampler_lightning && o->seed > UINT32_MAX)
        return cfs_error_msg(err, errlen, -EINVAL,
                             "option seed=%llu: sampler=lightning takes seed_everything's seed, "
                             "0..4294967295",
                             (unsigned long long)o->seed);
    if (o->has_ssd && o->ssd > 0 && !o->ssd_dir)
        return cfs_error_msg(err, errlen, -EINVAL, "option ssd=SIZE needs ssd_dir=DIR");
    return 0;
}

char *cfs_options_expand_rank(const char *s, int rank)
{
    static const char token[] = "{rank}";
    size_t tlen = sizeof(token) - 1;
    char num[16];
    int nlen = snprintf(num, sizeof(num), "%d", rank);
    size_t count = 0;
    for (const char *p = strstr(s, token); p; p = strstr(p + tlen, token))
        count++;
    char *out = malloc(strlen(s) + count * (size_t)nlen + 1);
    if (!out)
        return NULL;
    char *w = out;
    for (const char *p = s; *p;) {
        if (strncmp(p, token, tlen) == 0) {
            memcpy(w, num, (size_t)nlen);
            w += nlen;
            p += tlen;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return out;
}

/* The argument's name: a help line may open with it ("PCT: ..."), else the
 * type's. */
static const char *help_arg(const struct opt_def *d, const char **help)
{
    static char named[24];
    const char *colon = strstr(d->help, ": ");
    size_t len = colon ? (size_t)(colon - d->help) : 0;
    if (d->type != OPT_FLAG && len && len < sizeof(named) &&
        strspn(d->help, "ABCDEFGHIJKLMNOPQRSTUVWXYZ:-") >= len) {
        snprintf(named, sizeof(named), "=%.*s", (int)len, d->help);
        *help = colon + 2;
        return named;
    }
    *help = d->help;
    return d->type == OPT_FLAG      ? ""
           : d->type == OPT_SIZE    ? "=SIZE"
           : d->type == OPT_STRING  ? "=DIR"
           : d->type == OPT_SECONDS ? "=SEC"
           : d->type == OPT_SPECIAL ? "=..."
                                    : "=N";
}

void cfs_options_print_help(FILE *f)
{
    for (int g = 0; g < OPT_GROUPS; g++) {
        fprintf(f, "%s%s:\n", g ? "\n" : "", group_titles[g]);
        for (size_t i = 0; i < N_OPTIONS; i++) {
            const struct opt_def *d = &options_table[i];
            if ((int)d->group != g)
                continue;
            const char *help;
            const char *arg = help_arg(d, &help);
            char lhs[48];
            snprintf(lhs, sizeof(lhs), "-o %s%s", d->name, arg);
            fprintf(f, "    %-28s %s\n", lhs, help);
        }
    }
}

void cfs_options_sampler_params(const struct cfs_options *o, uint64_t n,
                                struct cfs_sampler_params *p)
{
    memset(p, 0, sizeof(*p));
    p->kind = o->sampler;
    p->seed = o->seed;
    p->n = n;
    p->world = o->world;
    p->batch = o->batch;
    p->drop_last = o->drop_last;
    p->drop_last_batch = o->drop_last_batch;
    p->persistent_workers = o->persistent_workers;
    p->list_path = o->sampler_list;
    p->randperm = o->randperm;
    p->repetitions = o->repetitions;
    p->rng_offset = o->rng_offset;
    p->rng_epoch_words = o->rng_epoch_words;
}
