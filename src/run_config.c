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
        if ((uint64_t)r->first + r->count > o->world)
            return cfs_error_msg(err, errlen, -EINVAL,
                                 "run configuration: node %u serves ranks beyond world=%u", j,
                                 o->world);
    }
    return 0;
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
    if ((rc = ssd_capacity(in, &c, err, errlen)) < 0)
        return rc;

    c.node_ranks = calloc(c.nodes, sizeof(*c.node_ranks));
    if (!c.node_ranks)
        return cfs_error_msg(err, errlen, -ENOMEM, "run configuration: out of memory");
    if (in->node_ranks) {
        memcpy(c.node_ranks, in->node_ranks, c.nodes * sizeof(*c.node_ranks));
    } else {
        for (uint32_t j = 0; j < c.nodes; j++)
            cfs_plan_default_ranks(c.world, c.nodes, j, &c.node_ranks[j]);
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

void cfs_run_config_plan_params(const struct cfs_run_config *c, const uint64_t *sizes,
                                struct cfs_plan_params *out)
{
    *out = (struct cfs_plan_params){
        .n = c->sampler.n, .sizes = sizes, .sampler = c->sampler, .world = c->world,
        .start_epoch = c->start_epoch, .epochs = c->epochs, .nodes = 1, .node = 0,
        .ranks = &c->ranks, .ram = c->ram, .ssd = c->ssd,
    };
    if (c->distributed) {
        out->nodes = c->nodes;
        out->node = c->node;
        out->ranks = c->node_ranks;
    }
}
