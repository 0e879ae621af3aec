/* The dataset root an adopted order numbers: its samples as the mount's,
 * for the plan and for the opens.
 *
 * A trainer on ImageFolder(MNT/train) draws indices of train's order, not
 * of the mount's; identification numbers its opens so (clairfs/roots.h)
 * and hands the root's map, root index i -> the mount's sample, with the
 * order.  The data path keeps planning and tracking in the mount's
 * sample numbers - its sizes, cache keys, passes and seen ring are the
 * mount's - and the map enters in two places only: the plan's source
 * (the sampler draws root indices, the plan reads their samples) and the
 * opens, where a sample outside the adopted root (the validation folder
 * read between epochs) is no part of the order, neither hit nor miss.
 * The mount's own order is the map-less root, so a mount whose order is
 * registered (order=KIND:ROOT) and one whose trainer reads its root go
 * through the same code, with no filter.  Roots are kept to the end (an
 * old tracker's walker may still read its source while a new plan is
 * made); they are few. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "prefetch_i.h"

struct pf_root {
    char name[256];
    uint64_t n;
    uint32_t *map;
    uint64_t *in; /* bitset over the mount's samples */
    struct pf_root *next;
};

/* A plan's source: the sampler over the root's n, read through the map. */
struct pf_root_source {
    struct cfs_plan_source src;
    struct cfs_sampler_params sp;
    const struct pf_root *root;
    struct pf_root_source *next;
};

struct mapped {
    struct cfs_sampler *s;
    const uint32_t *map;
};

static int mapped_create(const void *cfg, void **state, char *err, size_t errlen)
{
    const struct pf_root_source *rs = cfg;
    struct mapped *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->map = rs->root->map;
    int rc = cfs_sampler_create(&rs->sp, &m->s, err, errlen);
    if (rc < 0) {
        free(m);
        return rc;
    }
    *state = m;
    return 0;
}

static void mapped_destroy(void *st)
{
    struct mapped *m = st;
    cfs_sampler_destroy(m->s);
    free(m);
}

static uint64_t mapped_rank_len(void *st, uint32_t e, uint32_t r)
{
    return cfs_sampler_rank_len(((struct mapped *)st)->s, e, r);
}

static int mapped_compute(void *st, uint32_t e)
{
    return cfs_sampler_compute_epoch(((struct mapped *)st)->s, e);
}

static uint32_t mapped_at(void *st, uint32_t r, uint64_t i)
{
    struct mapped *m = st;
    return m->map[cfs_sampler_rank_at(m->s, r, i)];
}

const struct pf_root *pf_root_get(struct cfs_prefetch *pf, const char *name, const uint32_t *map,
                                  uint64_t n)
{
    if (!map)
        return NULL; /* the mount's own order */
    /* a folder's orders share its name and n (ImageFolder's, timm's ...:
     * clairfs/roots.h): the map says which one */
    for (struct pf_root *r = pf->roots; r; r = r->next)
        if (strcmp(r->name, name) == 0 && r->n == n && memcmp(r->map, map, n * sizeof(*map)) == 0)
            return r;
    struct pf_root *r = calloc(1, sizeof(*r));
    uint64_t words = (pf->nsamples + 63) / 64;
    if (!r || !(r->map = malloc(n * sizeof(*map))) || !(r->in = calloc(words + 1, 8))) {
        if (r)
            free(r->map);
        free(r);
        return NULL;
    }
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->n = n;
    memcpy(r->map, map, n * sizeof(*map));
    for (uint64_t i = 0; i < n; i++)
        if (map[i] < pf->nsamples)
            r->in[map[i] / 64] |= 1ull << (map[i] % 64);
    r->next = pf->roots;
    pf->roots = r;
    return r;
}

bool pf_root_holds(const struct pf_root *r, uint32_t s)
{
    return !r || (r->in[s / 64] >> (s % 64) & 1);
}

uint64_t pf_root_n(const struct cfs_prefetch *pf, const struct pf_root *r)
{
    return r ? r->n : pf->nsamples;
}

const char *pf_root_name(const struct pf_root *r)
{
    return r ? r->name : "";
}

int pf_root_plan(struct cfs_prefetch *pf, const struct pf_root *r, struct cfs_plan_params *plan)
{
    if (!r)
        return 0;
    struct pf_root_source *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    rs->sp = plan->sampler;
    rs->root = r;
    rs->src = (struct cfs_plan_source){
        .create = mapped_create, .destroy = mapped_destroy, .rank_len = mapped_rank_len,
        .compute_epoch = mapped_compute, .rank_at = mapped_at, .cfg = rs,
    };
    rs->next = pf->root_sources;
    pf->root_sources = rs;
    plan->source = &rs->src;
    plan->n = pf->nsamples;
    return 0;
}

uint64_t pf_root_count(struct cfs_prefetch *pf, const struct pf_root *r, uint64_t from,
                       uint64_t to)
{
    if (!r || !pf->seen)
        return to - from;
    uint64_t lost = 0;
    if (to - from > pf->seen_cap) {
        lost = to - from - pf->seen_cap;
        from = to - pf->seen_cap;
    }
    uint64_t k = 0;
    for (uint64_t i = from; i < to; i++)
        k += pf_root_holds(r, atomic_load(&pf->seen[i % pf->seen_cap]));
    /* The opens the ring lost, in the share of the root the ring holds. */
    return k + (to > from ? lost * k / (to - from) : 0);
}

void pf_roots_free(struct cfs_prefetch *pf)
{
    while (pf->roots) {
        struct pf_root *r = pf->roots;
        pf->roots = r->next;
        free(r->map);
        free(r->in);
        free(r);
    }
    while (pf->root_sources) {
        struct pf_root_source *rs = pf->root_sources;
        pf->root_sources = rs->next;
        free(rs);
    }
}
