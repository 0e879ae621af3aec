/* The epoch-time model; the model itself is at the top of
 * include/clairfs/epoch_model.h.  Pure computation. */
#include "clairfs/epoch_model.h"

const char *cfs_epoch_bound_name(enum cfs_epoch_bound b)
{
    switch (b) {
    case CFS_EPOCH_COMPUTE:
        return "compute";
    case CFS_EPOCH_PFS:
        return "pfs";
    case CFS_EPOCH_NET:
        return "net";
    case CFS_EPOCH_SSD:
        return "ssd";
    case CFS_EPOCH_RAM:
        return "ram";
    }
    return "?";
}

double cfs_epoch_node_io(const struct cfs_cluster_env *e, const struct cfs_epoch_node *n,
                         double share, enum cfs_epoch_bound *bound)
{
    double depth = e->in_flight ? e->in_flight : 1;
    double tier_bytes = n->local_bytes + n->peer_bytes;
    double t[5] = {0};
    if (n->pfs_bytes > 0 || n->pfs_reads > 0)
        t[CFS_EPOCH_PFS] =
            (share > 0 ? n->pfs_bytes / share : 0) + n->pfs_reads * e->pfs_latency / depth;
    t[CFS_EPOCH_NET] =
        (n->peer_bytes + n->pfs_bytes) / e->net_bw + n->peer_reads * e->net_latency / depth;
    if (n->ssd_fraction > 0 && e->ssd_bw > 0)
        t[CFS_EPOCH_SSD] = tier_bytes * n->ssd_fraction / e->ssd_bw;
    t[CFS_EPOCH_RAM] = tier_bytes * (1 - n->ssd_fraction) / e->ram_bw;
    enum cfs_epoch_bound worst = CFS_EPOCH_PFS;
    for (int i = CFS_EPOCH_NET; i <= CFS_EPOCH_RAM; i++)
        if (t[i] > t[worst])
            worst = (enum cfs_epoch_bound)i;
    if (bound)
        *bound = worst;
    return t[worst];
}

void cfs_epoch_model(const struct cfs_cluster_env *e, const struct cfs_epoch_node *nodes,
                     uint32_t count, struct cfs_epoch_time *out)
{
    *out = (struct cfs_epoch_time){.bound = CFS_EPOCH_COMPUTE};
    double longest = 0;
    for (uint32_t j = 0; j < count; j++) {
        if (nodes[j].pfs_bytes > 0 || nodes[j].pfs_reads > 0)
            out->readers++;
        if (nodes[j].samples > longest)
            longest = nodes[j].samples;
    }
    out->compute = longest * e->compute_per_sample;
    out->pfs_share = out->readers ? cfs_cluster_env_pfs_bw(e, out->readers) / out->readers : 0;
    enum cfs_epoch_bound slowest_bound = CFS_EPOCH_COMPUTE;
    for (uint32_t j = 0; j < count; j++) {
        enum cfs_epoch_bound b;
        double t = cfs_epoch_node_io(e, &nodes[j], out->pfs_share, &b);
        if (t > out->io) {
            out->io = t;
            out->slowest = j;
            slowest_bound = b;
        }
    }
    out->total = out->compute;
    if (out->io > out->compute) {
        out->total = out->io;
        out->bound = slowest_bound;
    }
}

double cfs_epoch_ssd_fraction(const struct cfs_cluster_env *e, double wanted)
{
    double cap = (double)e->ram + (double)e->ssd;
    double held = wanted < cap ? wanted : cap;
    if (!(held > (double)e->ram))
        return 0;
    return (held - (double)e->ram) / held;
}
