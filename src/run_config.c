/* The run's configuration from the options (run_config.h): the single place
 * where options become a plan's inputs and where their defaults that depend
 * on the catalog, the nodes or the SSD directory are decided.  The mount,
 * clairfs-plan, clairfs-bench and the agreement check call it, and the
 * prefetcher keeps its result instead of reading the options. */
#include "clairfs/run_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "clairfs/log.h"
#include "clairfs/node_memory.h"
#include "clairfs/options.h"

uint32_t cfs_run_default_window(uint32_t batch, uint32_t rank_count)
{
    uint64_t w = (uint64_t)16 * (batch ? batch : 1) * (rank_count ? rank_count : 1);
    return w < CFS_WINDOW_MIN ? CFS_WINDOW_MIN : w > CFS_WINDOW_MAX ? CFS_WINDOW_MAX : (uint32_t)w;
}

/* The inputs that are not options: one line naming what is wrong. */
static int check_inputs(const struct cfs_run_inputs *in, char *err, size_t errlen)
{
    if (!in || !in->opts)
        return cfs_error_msg(err, errlen, -EINVAL, "run configuration: no options");
    if (in->nodes == 0 || in->node >= in->nodes)
        return cfs_error_msg(err, errlen, -EINVAL, "run configuration: node %u of %u nodes",
                             in->node, in->nodes);
    const struct cfs_options *o = in->opts;
    if (o->has_ranks && o->rank_first > o->rank_last)
        return cfs_error_msg(err, errlen, -EINVAL, "option ranks=%u-%u: first rank above the last",
                             o->rank_first, o->rank_last);
    for (uint32_t j = 0; in->node_ranks && j < in->nodes; j++) {
        const struct cfs_rank_range *r = &in->node_ranks[j];
        if (cfs_rank_end(*r) > o->world)
            return cfs_error_msg(err, errlen, -EINVAL,
                                 "run configuration: node %u serves ranks beyond world=%u", j,
                                 o->world);
    }
    return 0;
}

/* "12.0 GiB", "512.0 MiB": a size for the log. */
static const char *human(uint64_t b, char *buf, size_t len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu bytes", (unsigned long long)b);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* pct % of x, exactly (x up to 2^64). */
static uint64_t pct_of(uint64_t x, unsigned pct)
{
    return (uint64_t)((unsigned __int128)x * pct / 100);
}

/* Where the usable memory figure comes from, for the notes. */
static void usable_words(const struct cfs_node_memory *m, char *buf, size_t len)
{
    char a[32], b[32];
    if (m->limited && (m->available == 0 || m->cgroup_room < m->available))
        snprintf(buf, len, "the %s left under cgroup %s's memory limit of %s",
                 human(m->cgroup_room, a, sizeof(a)), m->cgroup, human(m->cgroup_max, b, sizeof(b)));
    else
        snprintf(buf, len, "the %s available (MemAvailable)", human(m->available, a, sizeof(a)));
}

/* The RAM tier: ram= up to the cap; without it the node's share (see
 * run_config.h for the rule and docs/memory.md for why it is safe). */
static void ram_capacity(const struct cfs_run_inputs *in, struct cfs_run_config *c)
{
    const struct cfs_options *o = in->opts;
    const struct cfs_node_memory *m = in->memory;
    uint64_t usable = m ? cfs_node_memory_usable(m) : 0;
    char from[480], a[32], b[32];
    c->ram_derived = c->ram_capped = false;
    c->ram_note[0] = '\0';
    if (o->has_ram) {
        c->ram = o->ram;
        uint64_t cap = pct_of(usable, CFS_RAM_CAP_PCT);
        if (usable && o->ram > cap) {
            usable_words(m, from, sizeof(from));
            c->ram = cap;
            c->ram_capped = true;
            snprintf(c->ram_note, sizeof(c->ram_note),
                     "ram=%s is more than %s: using %s, %u %% of it",
                     human(o->ram, a, sizeof(a)), from, human(cap, b, sizeof(b)), CFS_RAM_CAP_PCT);
        }
        return;
    }
    c->ram = o->ram; /* CFS_RAM_FALLBACK unless a caller set it */
    if (!m)
        return;
    c->ram_derived = true;
    uint64_t share;
    if (c->distributed) {
        /* The same figure on every node: not what is free this minute. */
        bool by_cgroup = m->limited && m->cgroup_max < m->total;
        uint64_t base = by_cgroup ? m->cgroup_max : m->total;
        if (by_cgroup)
            snprintf(from, sizeof(from), "%u %% of cgroup %s's memory limit of %s, in whole GiB "
                     "(distributed: the same on every node)", CFS_RAM_SHARE_PCT, m->cgroup,
                     human(base, a, sizeof(a)));
        else
            snprintf(from, sizeof(from), "%u %% of the node's %s (MemTotal), in whole GiB "
                     "(distributed: the same on every node)", CFS_RAM_SHARE_PCT,
                     human(base, a, sizeof(a)));
        share = pct_of(base, CFS_RAM_SHARE_PCT);
        if (share >= (1ull << 30))
            share &= ~((1ull << 30) - 1);
    } else {
        char words[400];
        usable_words(m, words, sizeof(words));
        snprintf(from, sizeof(from), "%u %% of %s", CFS_RAM_SHARE_PCT, words);
        share = pct_of(usable, CFS_RAM_SHARE_PCT);
    }
    if (share == 0) {
        snprintf(c->ram_note, sizeof(c->ram_note),
                 "%s: the node's memory is unknown (/proc/meminfo)", human(c->ram, b, sizeof(b)));
        return;
    }
    if (in->dataset_bytes && in->dataset_bytes < share) {
        c->ram = in->dataset_bytes;
        snprintf(c->ram_note, sizeof(c->ram_note), "%s: the dataset's size, below %s (%s)",
                 human(c->ram, a, sizeof(a)), from, human(share, b, sizeof(b)));
    } else {
        c->ram = share;
        snprintf(c->ram_note, sizeof(c->ram_note), "%s: %s", human(c->ram, a, sizeof(a)), from);
    }
}

/* ssd= bytes; without it half the free space of ssd_dir; no ssd_dir, none. */
static int ssd_capacity(const struct cfs_run_inputs *in, struct cfs_run_config *c, char *err,
                        size_t errlen)
{
    const struct cfs_options *o = in->opts;
    c->ssd = 0;
    c->ssd_from_free_space = false;
    if (!in->ssd_dir)
        return 0;
    if (o->has_ssd) {
        c->ssd = o->ssd;
        return 0;
    }
    struct statvfs sv;
    if (statvfs(in->ssd_dir, &sv) < 0) {
        int rc = -errno;
        return cfs_error_msg(err, errlen, rc, "ssd_dir %s: %s", in->ssd_dir, strerror(-rc));
    }
    c->ssd = (uint64_t)sv.f_bavail * sv.f_frsize / 2;
    c->ssd_from_free_space = true;
    return 0;
}

int cfs_run_config_make(const struct cfs_run_inputs *in, struct cfs_run_config *out, char *err,
                        size_t errlen)
{
    int rc;
    memset(out, 0, sizeof(*out));
    if ((rc = check_inputs(in, err, errlen)) < 0)
        return rc;
    const struct cfs_options *o = in->opts;
    if ((rc = cfs_options_validate(o, err, errlen)) < 0)
        return rc;

    struct cfs_run_config c = {
        .seeded = o->has_seed,
        .order = o->order,
        .world = o->world,
        .start_epoch = o->start_epoch,
        .epochs = o->epochs,
        .nodes = in->nodes,
        .node = in->node,
        .distributed = in->nodes > 1 && !o->no_peers,
        .no_peers = o->no_peers,
        .ram = o->ram,
    };
    cfs_options_sampler_params(o, in->nsamples, &c.sampler);
    ram_capacity(in, &c);
    if ((rc = ssd_capacity(in, &c, err, errlen)) < 0)
        return rc;

    c.node_ranks = calloc(c.nodes, sizeof(*c.node_ranks));
    if (!c.node_ranks)
        return cfs_error_msg(err, errlen, -ENOMEM, "run configuration: out of memory");
    if (in->node_ranks) {
        memcpy(c.node_ranks, in->node_ranks, c.nodes * sizeof(*c.node_ranks));
    } else {
        for (uint32_t j = 0; j < c.nodes; j++)
            (o->ranks_cyclic ? cfs_plan_cyclic_ranks : cfs_plan_default_ranks)(c.world, c.nodes, j,
                                                                               &c.node_ranks[j]);
        if (o->has_ranks) /* ranks= speaks for this node; the others keep their blocks */
            c.node_ranks[c.node] =
                (struct cfs_rank_range){o->rank_first, o->rank_last - o->rank_first + 1};
    }
    c.ranks = c.node_ranks[c.node];
    c.window = in->window ? in->window : cfs_run_default_window(c.sampler.batch, c.ranks.count);
    *out = c;
    return 0;
}

void cfs_run_config_free(struct cfs_run_config *c)
{
    if (!c)
        return;
    free(c->node_ranks);
    c->node_ranks = NULL;
}

/* The window a plan covers (run_config.h): the fewest epochs, at least
 * CFS_PLAN_WINDOW_MIN, in which a node is expected to read twice its
 * capacity in distinct bytes; the whole run when no such window is shorter.
 * A node of `share` of the trainer ranks reads a file in an epoch with
 * that probability, so h epochs reach 1 - (1 - share)^h of the dataset. */
static uint32_t plan_window(const struct cfs_run_config *c, const uint64_t *sizes)
{
    uint32_t span = c->epochs - c->start_epoch;
    if (!sizes || span <= CFS_PLAN_WINDOW_MIN)
        return span;
    double dataset = 0, cap = (double)c->ram + (double)c->ssd;
    for (uint64_t f = 0; f < c->sampler.n; f++)
        dataset += (double)sizes[f];
    /* Every node plans the same window: the share of a node of an even
     * split, not this node's own. */
    double share = c->distributed ? 1.0 / c->nodes
                                  : (double)(c->ranks.count ? c->ranks.count : 1) / c->world;
    if (share > 1)
        share = 1;
    double unread = 1;
    for (uint32_t h = 1; h < span; h++) {
        unread *= 1 - share;
        if (h >= CFS_PLAN_WINDOW_MIN && dataset * (1 - unread) >= 2 * cap)
            return h;
    }
    return span;
}

uint32_t cfs_run_config_plan_end(const struct cfs_run_config *c, const uint64_t *sizes)
{
    return c->start_epoch + plan_window(c, sizes);
}

void cfs_run_config_plan_params(const struct cfs_run_config *c, const uint64_t *sizes,
                                struct cfs_plan_params *out)
{
    *out = (struct cfs_plan_params){
        .n = c->sampler.n, .sizes = sizes, .sampler = c->sampler, .world = c->world,
        .start_epoch = c->start_epoch, .epochs = cfs_run_config_plan_end(c, sizes), .nodes = 1,
        .node = 0, .ranks = &c->ranks, .ram = c->ram, .ssd = c->ssd,
    };
    if (c->distributed) {
        out->nodes = c->nodes;
        out->node = c->node;
        out->ranks = c->node_ranks;
    }
}
