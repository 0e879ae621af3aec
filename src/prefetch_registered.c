/* The registered order meets the identification: a registered seed (and
 * world, batch, ranks) is the user's promise, so the opens check it and
 * never replace it.  The first way they differ is warned about once and
 * shown in the stats' order: line; where they fit, the order is
 * confirmed, once the opens show every rank planned for this node. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "clairfs/log.h"
#include "clairfs/prefetch.h"
#include "prefetch_i.h"

/* The first way the opens differ from the registered order, as
 * "registered world=8, but the opens fit world=16"; empty when they fit. */
static void contradiction(const struct cfs_sampler_params *reg, const struct cfs_identified *id,
                          char *buf, size_t len)
{
    const struct cfs_sampler_params *got = &id->sampler;
    buf[0] = '\0';
    if (reg->kind != got->kind)
        snprintf(buf, len, "registered sampler=%s, but the opens fit sampler=%s",
                 cfs_sampler_kind_name(reg->kind), cfs_sampler_kind_name(got->kind));
    else if (reg->world != got->world)
        snprintf(buf, len, "registered world=%u, but the opens fit world=%u", reg->world,
                 got->world);
    else if ((uint32_t)reg->seed != (uint32_t)got->seed ||
             (id->seed_high_known && reg->seed != got->seed))
        snprintf(buf, len, "registered seed=%" PRIu64 ", but the opens fit seed=%" PRIu64,
                 reg->seed, got->seed);
    else if (reg->batch != got->batch && (reg->drop_last_batch || got->drop_last_batch))
        snprintf(buf, len, "registered batch=%u, but the opens fit batch=%u", reg->batch,
                 got->batch);
    else if (reg->drop_last != got->drop_last && reg->kind == CFS_SAMPLER_TORCH_DDP)
        snprintf(buf, len, "registered drop_last=%d, but the opens fit drop_last=%d",
                 reg->drop_last, got->drop_last);
    else if (reg->drop_last_batch != got->drop_last_batch)
        snprintf(buf, len, "registered drop_last_batch=%d, but the opens fit drop_last_batch=%d",
                 reg->drop_last_batch, got->drop_last_batch);
    else if (reg->persistent_workers != got->persistent_workers &&
             reg->kind == CFS_SAMPLER_TORCH)
        snprintf(buf, len,
                 "registered persistent_workers=%d, but the opens fit persistent_workers=%d",
                 reg->persistent_workers, got->persistent_workers);
}

/* A registered distributed run is planned in blocks (or ranks=A-B): a
 * node whose readers are other ranks (srun --distribution=cyclic) is told
 * so, as the sampler's contradictions are. */
static void ranks_contradiction(const struct cfs_prefetch *pf, const struct cfs_identified *id,
                                char *buf, size_t len)
{
    struct cfs_rank_range got = {id->rank_first, id->rank_count, id->rank_stride};
    uint32_t last = got.count ? (uint32_t)cfs_rank_end(got) - 1 : got.first;
    if (buf[0] || !pf->distributed || got.count == 0 ||
        (cfs_rank_in(pf->run.ranks, got.first) && cfs_rank_in(pf->run.ranks, last)))
        return;
    char seen[32];
    snprintf(seen, sizeof(seen), last > got.first ? "ranks %u-%u" : "rank %u", got.first, last);
    snprintf(buf, len,
             "planned ranks %u-%u, but the opens are %s (ranks dealt round robin: ranks=cyclic, "
             "or register nothing)",
             pf->run.ranks.first, cfs_rank_last(pf->run.ranks), seen);
}

void pf_check_registered(struct cfs_prefetch *pf, const struct cfs_identified *id)
{
    char why[sizeof(pf->contradiction)];
    contradiction(&pf->run.sampler, id, why, sizeof(why));
    ranks_contradiction(pf, id, why, sizeof(why));
    pthread_mutex_lock(&pf->order_mu);
    pf->ident = *id;
    snprintf(pf->contradiction, sizeof(pf->contradiction), "%s", why);
    pthread_mutex_unlock(&pf->order_mu);
    if (!why[0] && id->rank_count && id->rank_count < pf->run.ranks.count) {
        /* One rank's workers open a few batches before the next rank's
         * start: the ranks seen so far fit, the ones still to come may not
         * (a cyclic placement shows at its second rank).  The opens are
         * observed on; the module reports again when it sees more ranks. */
        cfs_debug("order: the opens fit the registered order so far (%u of the %u planned "
                  "ranks seen); observing on",
                  id->rank_count, pf->run.ranks.count);
        return;
    }
    atomic_store(&pf->learning, false);
    if (why[0]) {
        cfs_warn("order: %s (%s); the registered order is kept", why, id->text);
        pf_order_set_state(pf, PF_ORDER_CONTRADICTED);
    } else {
        cfs_info("order: the opens confirm the registered order (%s)", id->text);
        pf_order_set_state(pf, PF_ORDER_CONFIRMED);
    }
}
