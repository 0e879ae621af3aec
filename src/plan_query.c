/* What a plan says, asked of it after cfs_plan_create(): the planned
 * node's facts per file and the cluster's per node, one accessor each, as
 * clairfs/plan.h lists them.  Apart from plan.c because none of this builds
 * anything: the prefetcher, the tools and the simulator (sim.c) read the
 * plan only through these, so the layout of struct cfs_plan (plan_i.h) is
 * the planner's to change. */
#include "clairfs/plan.h"

#include <errno.h>

#include "plan_i.h"

uint64_t cfs_plan_sample_count(const struct cfs_plan *p)
{
    return p->n;
}
uint32_t cfs_plan_node(const struct cfs_plan *p)
{
    return p->node;
}
struct cfs_rank_range cfs_plan_node_ranks(const struct cfs_plan *p, uint32_t node)
{
    return p->ranks[node];
}
uint32_t cfs_plan_start_epoch(const struct cfs_plan *p)
{
    return p->start_epoch;
}
uint32_t cfs_plan_epoch_count(const struct cfs_plan *p)
{
    return p->nepochs;
}
uint64_t cfs_plan_capacity(const struct cfs_plan *p)
{
    return p->ram + p->ssd;
}
uint64_t cfs_plan_epoch_start(const struct cfs_plan *p, uint32_t rel)
{
    return p->epoch_start[rel > p->nepochs ? p->nepochs : rel];
}
uint32_t cfs_plan_count(const struct cfs_plan *p, uint32_t f)
{
    return p->count[f];
}
uint64_t cfs_plan_first_use(const struct cfs_plan *p, uint32_t f)
{
    return p->first_use[f];
}
enum cfs_tier cfs_plan_tier(const struct cfs_plan *p, uint32_t f)
{
    return p->tier[f];
}
uint32_t cfs_plan_total_count(const struct cfs_plan *p, uint32_t f)
{
    return p->total_count[f];
}
uint32_t cfs_plan_owner(const struct cfs_plan *p, uint32_t f, enum cfs_tier *tier)
{
    if (tier)
        *tier = p->owner[f] == CFS_NODE_NONE ? CFS_TIER_NONE : p->owner_tier[f];
    return p->owner[f];
}
const uint32_t *cfs_plan_prefetch_order(const struct cfs_plan *p, enum cfs_tier tier,
                                        uint64_t *count)
{
    if (tier != CFS_TIER_RAM && tier != CFS_TIER_SSD) {
        *count = 0;
        return NULL;
    }
    *count = p->order_len[tier];
    return p->order[tier];
}
int cfs_plan_node_summary(const struct cfs_plan *p, uint32_t node,
                          struct cfs_plan_node_summary *out)
{
    if (node >= p->nodes)
        return -EINVAL;
    *out = p->summary[node];
    return 0;
}
uint64_t cfs_plan_owned_bytes(const struct cfs_plan *p)
{
    return p->owned_bytes;
}
uint64_t cfs_plan_dataset_bytes(const struct cfs_plan *p)
{
    return p->dataset_bytes;
}
bool cfs_plan_peer_pinned(const struct cfs_plan *p, uint32_t f)
{
    return p->flags[f] & PLAN_PEER_PINNED;
}
bool cfs_plan_static_pinned(const struct cfs_plan *p, uint32_t f)
{
    return p->flags[f] & PLAN_STATIC;
}
uint32_t cfs_plan_static_pinners(const struct cfs_plan *p, uint32_t f)
{
    return p->static_pinners[f];
}
uint32_t cfs_plan_static_pinner_epoch(const struct cfs_plan *p, uint32_t f)
{
    return p->static_pinners[f] ? p->static_epoch[f] : UINT32_MAX;
}
uint32_t cfs_plan_owner_epoch(const struct cfs_plan *p, uint32_t f)
{
    return p->total_count[f] ? p->owner_epoch[f] : UINT32_MAX;
}
uint64_t cfs_plan_file_size(const struct cfs_plan *p, uint32_t f)
{
    return p->sizes[f];
}
