/* The start-up agreement: what every node must share for the global plan
 * to be the same everywhere (taken from the run configuration, so that the
 * nodes compare what they will plan, not how they spelled it), and the
 * message that says what differs.  Pure code, no MPI: peer.c gathers the
 * structs. */
#include "clairfs/peer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "clairfs/run_config.h"

void cfs_peer_agreement_from_config(struct cfs_peer_agreement *out,
                                    const struct cfs_run_config *c, uint64_t catalog_hash)
{
    const struct cfs_sampler_params *sp = &c->sampler;
    memset(out, 0, sizeof(*out));
    out->protocol = CFS_PEER_PROTOCOL;
    out->catalog_hash = catalog_hash;
    out->has_seed = c->seeded;
    out->seed = c->seeded ? sp->seed : 0;
    out->sampler = (uint64_t)sp->kind;
    /* The path, not the contents: a job passes the same file to every node,
     * and reading it here would be I/O in a comparison helper. */
    if (sp->kind == CFS_SAMPLER_LIST && sp->list_path)
        out->sampler_list = XXH3_64bits(sp->list_path, strlen(sp->list_path));
    out->world = c->world;
    out->batch = sp->batch;
    out->drop_last = sp->drop_last;
    out->drop_last_batch = sp->drop_last_batch;
    out->persistent_workers = sp->persistent_workers;
    /* Only the RA samplers repeat; elsewhere the option means nothing and
     * must not make two nodes disagree. */
    if (sp->kind == CFS_SAMPLER_TORCHVISION_RA || sp->kind == CFS_SAMPLER_TIMM_RA)
        out->repetitions = sp->repetitions ? sp->repetitions : 3;
    out->epochs = c->epochs;
    out->start_epoch = c->start_epoch;
    out->order = (uint64_t)c->order;
    out->ram = c->ram;
    /* Half of each node's free space is that node's business: only an
     * ssd= that the user gave must be the same everywhere. */
    out->ssd = c->ssd_from_free_space ? 0 : c->ssd;
    out->no_peers = c->no_peers;
}

uint64_t cfs_peer_config_hash(const struct cfs_run_config *c)
{
    struct cfs_peer_agreement a;
    cfs_peer_agreement_from_config(&a, c, 0);
    /* How this node fetches, not what the plan's data are: the agreement
     * compares it, the hash (what a plan was made from) does not. */
    a.no_peers = 0;
    return XXH3_64bits(&a, sizeof(a));
}

enum agree_fmt { F_NUM, F_BOOL, F_HEX, F_SEED, F_SAMPLER, F_ORDER };

struct agree_field {
    const char *name;
    size_t off;
    enum agree_fmt fmt;
};

#define AOFF(f) offsetof(struct cfs_peer_agreement, f)
/* The catalog is reported apart ("dataset differs"); these are the rest, in
 * the order a person would check them. */
static const struct agree_field agree_fields[] = {
    {"protocol version", AOFF(protocol), F_NUM},
    {"seed", AOFF(seed), F_SEED},
    {"sampler", AOFF(sampler), F_SAMPLER},
    {"sampler list (path hash)", AOFF(sampler_list), F_HEX},
    {"world", AOFF(world), F_NUM},
    {"batch", AOFF(batch), F_NUM},
    {"drop_last", AOFF(drop_last), F_BOOL},
    {"drop_last_batch", AOFF(drop_last_batch), F_BOOL},
    {"persistent_workers", AOFF(persistent_workers), F_BOOL},
    {"repetitions", AOFF(repetitions), F_NUM},
    {"epochs", AOFF(epochs), F_NUM},
    {"start_epoch", AOFF(start_epoch), F_NUM},
    {"order", AOFF(order), F_ORDER},
    {"ram", AOFF(ram), F_NUM},
    {"ssd", AOFF(ssd), F_NUM},
    {"no_peers", AOFF(no_peers), F_BOOL},
};

static uint64_t field_val(const struct cfs_peer_agreement *a, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)a + off, sizeof(v));
    return v;
}

static void format_value(const struct cfs_peer_agreement *a, const struct agree_field *f,
                         char *buf, size_t len)
{
    static const char *const samplers[] = {"torch-ddp", "torch", "torch-sampler", "list",
                                           "hf-accelerate", "torchvision-ra", "timm-ra",
                                           "torch-global"};
    static const char *const orders[] = {"imagefolder", "sorted", "list"};
    uint64_t v = field_val(a, f->off);
    switch (f->fmt) {
    case F_SEED:
        if (!a->has_seed) {
            snprintf(buf, len, "none");
            return;
        }
        break;
    case F_BOOL:
        snprintf(buf, len, "%s", v ? "on" : "off");
        return;
    case F_HEX:
        snprintf(buf, len, "%016llx", (unsigned long long)v);
        return;
    case F_SAMPLER:
        if (v < sizeof(samplers) / sizeof(samplers[0])) {
            snprintf(buf, len, "%s", samplers[v]);
            return;
        }
        break;
    case F_ORDER:
        if (v < sizeof(orders) / sizeof(orders[0])) {
            snprintf(buf, len, "%s", orders[v]);
            return;
        }
        break;
    case F_NUM:
        break;
    }
    snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* Appends to err at *pos, never past errlen (a long message is cut). */
static void append(char *err, size_t errlen, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *err, size_t errlen, size_t *pos, const char *fmt, ...)
{
    if (!err || *pos >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err + *pos, errlen - *pos, fmt, ap);
    va_end(ap);
    if (n > 0)
        *pos = *pos + (size_t)n < errlen ? *pos + (size_t)n : errlen;
}

/* "rank 1" or "ranks 0,2-3": the ranks whose value string equals vals[first]. */
static void append_ranks(char *err, size_t errlen, size_t *pos, char (*vals)[48], int n,
                         int first, int *count)
{
    int members = 0;
    for (int r = first; r < n; r++)
        members += strcmp(vals[r], vals[first]) == 0;
    *count = members;
    append(err, errlen, pos, "%s ", members == 1 ? "rank" : "ranks");
    bool comma = false;
    for (int r = first; r < n; r++) {
        if (strcmp(vals[r], vals[first]) != 0)
            continue;
        int end = r;
        while (end + 1 < n && strcmp(vals[end + 1], vals[first]) == 0)
            end++;
        if (end > r + 1)
            append(err, errlen, pos, "%s%d-%d", comma ? "," : "", r, end);
        else
            append(err, errlen, pos, "%s%d", comma ? "," : "", r);
        comma = true;
        if (end > r + 1)
            r = end;
    }
}

/* One group per distinct value, in order of the first rank that has it. */
static void append_groups(char *err, size_t errlen, size_t *pos, char (*vals)[48], int n,
                          bool dataset)
{
    bool first = true;
    for (int r = 0; r < n; r++) {
        bool seen = false;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(vals[q], vals[r]) == 0;
        if (seen)
            continue;
        int count;
        append(err, errlen, pos, "%s", first ? "" : ", ");
        if (dataset) {
            append(err, errlen, pos, "%s on ", vals[r]);
            append_ranks(err, errlen, pos, vals, n, r, &count);
        } else {
            append_ranks(err, errlen, pos, vals, n, r, &count);
            append(err, errlen, pos, " %s %s", count == 1 ? "has" : "have", vals[r]);
        }
        first = false;
    }
}

int cfs_peer_agreement_compare(const struct cfs_peer_agreement *all, int n, char *err,
                               size_t errlen)
{
    size_t pos = 0;
    int rc = 0;
    char (*vals)[48] = calloc(n > 0 ? (size_t)n : 1, sizeof(*vals));
    if (!vals)
        return -ENOMEM;
    if (err && errlen)
        err[0] = '\0';

    bool differs = false;
    for (int r = 1; r < n; r++)
        differs |= all[r].catalog_hash != all[0].catalog_hash;
    if (differs) {
        for (int r = 0; r < n; r++)
            snprintf(vals[r], sizeof(vals[r]), "%016llx",
                     (unsigned long long)all[r].catalog_hash);
        append(err, errlen, &pos, "dataset differs (catalog hash ");
        append_groups(err, errlen, &pos, vals, n, true);
        append(err, errlen, &pos, ")");
        rc = -EINVAL;
    }
    for (size_t f = 0; f < sizeof(agree_fields) / sizeof(agree_fields[0]); f++) {
        const struct agree_field *fd = &agree_fields[f];
        differs = false;
        for (int r = 0; r < n; r++) {
            format_value(&all[r], fd, vals[r], sizeof(vals[r]));
            differs |= strcmp(vals[r], vals[0]) != 0;
        }
        if (!differs)
            continue;
        append(err, errlen, &pos, "%s%s differs: ", rc ? "; " : "", fd->name);
        append_groups(err, errlen, &pos, vals, n, false);
        rc = -EINVAL;
    }
    free(vals);
    return rc;
}
