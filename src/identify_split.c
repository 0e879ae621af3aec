/* The seed scan split across a distributed mount's nodes
 * (clairfs/identify.h, "The seed scan split across the nodes").
 *
 * Why split.  The head node (the one serving rank 0's readers) is the only
 * node whose opens hold randperm[0]: it alone can filter the seed space,
 * and an exhaustive scan of 2^32 seeds at ImageNet's size takes it about
 * two CPU minutes, while the other nodes wait for its claim with idle
 * cores.  The filter needs nothing but the two sets (randperm[0] among the
 * readers' first opens, randperm[1] - or randperm[alt_gap] - among their
 * first and second distinct opens): a few hundred values.  So the head
 * sends the sets as values, node k of N scans the k-th N-th of the range
 * with them at the same filter cost as the head's, and the seeds that pass
 * (none or one at ImageNet's size besides the real one) go back to the
 * head, which verifies them against its own opens exactly as it verifies
 * its own scan's.  The cluster finds a late seed in 1/N of the time.
 *
 * Why the result cannot depend on the node.  The filter is the head's,
 * value for value: a seed passes on node k exactly when it would pass on
 * the head.  Verification is the head's alone, over its own opens, and it
 * demands the evidence of the whole range (cfs_identify_evidence_needed of
 * the head's parameters), not of the one share: a share's survivor is as
 * well proved as one the head found itself.  What the head identifies then
 * goes the claim's way (order_agree.h), each other node checking it
 * against its own opens.
 *
 * Only position 0 is split.  A registered seed's span and a late hint are
 * checked on the head first (milliseconds); the split is the long part.
 *
 * What a share costs.  A share is the node's own search as much as its
 * scan of its own opens: on the mount it runs on a thread of its own,
 * paced by the node's module for that root (cfs_identify_split_scan_paced,
 * identify_pace.c), at idle priority, raised on busy cores only while the
 * CPU both ran raised stays within the node's search_budget, its CPU
 * counted in the same metric. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "identify_i.h"

/* Adds v to vals[*nv] once; false when full. */
static bool add_value(uint32_t *vals, uint64_t *nv, uint32_t v)
{
    for (uint64_t i = 0; i < *nv; i++)
        if (vals[i] == v)
            return true;
    if (*nv >= CFS_SPLIT_VALUES_MAX)
        return false;
    vals[(*nv)++] = v;
    return true;
}

int cfs_identify_split_sets(const struct cfs_identify_params *p, const uint32_t *samples,
                            const pid_t *pids, const pid_t *ppids, size_t count,
                            struct cfs_split_sets *out)
{
    memset(out, 0, sizeof(*out));
    if (p->hint && p->hint_has_seed)
        return -EINVAL;
    if (p->n < 2 || p->n > UINT32_MAX)
        return -ENOENT;
    struct ident_readers rd;
    if (ident_group(samples, pids, ppids, count, &rd) < 0)
        return -ENOMEM;
    out->n = p->n;
    out->algo = (uint64_t)p->algo;
    out->alt_gap = ident_scan_alt_gap(p, 0, 2);
    out->seed_first = p->seed_first;
    out->seed_count = p->seed_count;
    int rc = rd.nr ? 0 : -ENOENT;
    for (size_t i = 0; i < rd.nr && rc == 0; i++) {
        const struct ident_reader *r = &rd.r[i];
        if (r->len == 0)
            continue;
        /* the rule of identify_scan.c's set_bits: the first open, and the
         * first open that differs from it (its top comment says why) */
        uint32_t v = r->s[0];
        bool ok =
            add_value(out->first, &out->nfirst, v) && add_value(out->second, &out->nsecond, v);
        for (size_t k = 1; k < r->len && ok; k++)
            if (r->s[k] != v) {
                ok = add_value(out->second, &out->nsecond, r->s[k]);
                break;
            }
        if (!ok)
            rc = -E2BIG;
    }
    ident_readers_free(&rd);
    /* Seeds the filter passes over the range, about 2^32 R 2R / n^2 a
     * skip and stride: none or one at ImageNet's size, thousands at a few
     * thousand samples, where each would be a note to the head and a
     * check there - more than the head's own scan of them costs. */
    double range = p->seed_count ? (double)p->seed_count : 4294967296.0;
    double passes = range * (double)out->nfirst * (double)out->nsecond * 2.0 *
                    (out->alt_gap ? 2.0 : 1.0) / ((double)p->n * (double)p->n);
    if (rc == 0 && passes > CFS_SPLIT_PASSES_MAX * (p->nodes > 1 ? p->nodes : 1))
        rc = -ERANGE;
    return rc;
}

void cfs_identify_split_share(const struct cfs_split_sets *s, uint32_t node, uint32_t nodes,
                              uint32_t *first, uint64_t *count)
{
    uint64_t all = s->seed_count ? s->seed_count : 1ull << 32;
    uint64_t lo = nodes ? all * node / nodes : 0, hi = nodes ? all * (node + 1) / nodes : all;
    *first = (uint32_t)(s->seed_first + lo);
    *count = hi - lo;
}

/* Sets that came over the wire: within n, within the arrays, a stride the
 * filter's window holds. */
static bool sets_valid(const struct cfs_split_sets *s)
{
    if (s->n < 2 || s->n > UINT32_MAX || s->nfirst == 0 || s->nfirst > CFS_SPLIT_VALUES_MAX ||
        s->nsecond == 0 || s->nsecond > CFS_SPLIT_VALUES_MAX || s->seed_count > 1ull << 32 ||
        (s->alt_gap && (s->alt_gap < 2 || s->alt_gap + 3 > CFS_SEED_SET_HEAD_WORDS)))
        return false;
    for (uint64_t i = 0; i < s->nfirst; i++)
        if (s->first[i] >= s->n)
            return false;
    for (uint64_t i = 0; i < s->nsecond; i++)
        if (s->second[i] >= s->n)
            return false;
    return true;
}

struct split_scan {
    cfs_identify_split_found found;
    void *arg;
};

static bool on_passed(void *arg, uint32_t seed, uint32_t skip)
{
    struct split_scan *ss = arg;
    return ss->found(ss->arg, seed, skip);
}

int cfs_identify_split_scan(const struct cfs_split_sets *s, uint32_t node, uint32_t nodes,
                            const _Atomic bool *cancel, cfs_identify_split_found found, void *arg,
                            const struct cfs_seed_threads *threads)
{
    if (!sets_valid(s) || nodes == 0 || node >= nodes)
        return -EINVAL;
    size_t words = (size_t)((s->n + 63) / 64);
    uint64_t *fs = calloc(words, sizeof(uint64_t)), *ss = calloc(words, sizeof(uint64_t));
    int rc = fs && ss ? 0 : -ENOMEM;
    if (rc == 0) {
        for (uint64_t i = 0; i < s->nfirst; i++)
            fs[s->first[i] / 64] |= 1ull << (s->first[i] % 64);
        for (uint64_t i = 0; i < s->nsecond; i++)
            ss[s->second[i] / 64] |= 1ull << (s->second[i] % 64);
        /* position 0 with skips 0 and 2, as the head's own scan */
        static const uint32_t both[] = {0, 2};
        struct cfs_seed_set_problem sp = {.n = s->n,
                                          .algo = (enum cfs_randperm_algo)s->algo,
                                          .pos = 0,
                                          .skips = both,
                                          .nskips = 2,
                                          .first = fs,
                                          .second = ss,
                                          .alt_gap = (uint32_t)s->alt_gap};
        struct cfs_seed_threads all = {0};
        uint32_t first;
        uint64_t count, searched;
        cfs_identify_split_share(s, node, nodes, &first, &count);
        struct split_scan cb = {found, arg};
        if (count)
            rc = cfs_seed_search_set_threads(&sp, first, count, cancel, on_passed, &cb, &searched,
                                             threads ? threads : &all);
        if (rc == 0 && cancel && atomic_load(cancel))
            rc = -ECANCELED;
    }
    free(fs);
    free(ss);
    return rc;
}

int cfs_identify_split_verify(const struct cfs_identify_params *p, const uint32_t *samples,
                              const pid_t *pids, const pid_t *ppids, size_t count,
                              const uint32_t *seeds, const uint32_t *skips, size_t nseeds,
                              struct cfs_identified *out, char *err, size_t errlen)
{
    struct ident_readers rd;
    struct ident_cand *keep = calloc(nseeds ? nseeds : 1, sizeof(*keep));
    struct ident_attempt *a = malloc(sizeof(*a));
    int rc = keep && a ? ident_group(samples, pids, ppids, count, &rd) : -ENOMEM;
    if (rc < 0) {
        free(keep);
        free(a);
        snprintf(err, errlen, "identify: out of memory for %zu opens", count);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nseeds; i++)
        keep[i] = (struct ident_cand){seeds[i], skips[i], 0};
    struct ident_obs obs = {samples, pids, ppids, count};
    struct ident_global g = {0};
    struct ident_attempt_in in = {
        .p = p, .obs = &obs, .rd = &rd, .keep = keep, .nkeep = nseeds, .kept_only = true};
    rc = ident_offline_outcome(p, a, rd.opens, ident_attempt_all(&in, &g, a, out), out, err, errlen);
    free(a);
    free(keep);
    ident_readers_free(&rd);
    return rc;
}

/* A share scan on a thread of its own (cfs_identify_split_scan_paced). */
struct share_run {
    struct ident_pace pace;
    const struct cfs_split_sets *s;
    uint32_t node, nodes;
    const _Atomic bool *cancel;
    cfs_identify_split_found found;
    void *arg;
    unsigned threads;
    int rc;
};

static void share_pace_chunk(void *arg, struct cfs_seed_workers *w)
{
    ident_pace_chunk(arg, NULL, w);
}

/* The share's thread: the pace moves it and its workers between idle and
 * the normal priority as it moves the module's thread, and it ends with
 * the scan, so the agreement's thread that waits for it keeps its own (a
 * thread once at SCHED_IDLE comes back only with CAP_SYS_NICE or
 * RLIMIT_NICE 20, and that one plans the adopted order). */
static void *share_thread(void *arg)
{
    struct share_run *sr = arg;
    pthread_setname_np(pthread_self(), "cfs-share-scan");
    sr->pace.cpu_mark = ident_clock_sec(CLOCK_THREAD_CPUTIME_ID);
    ident_pace_priority(&sr->pace, true);
    struct cfs_seed_threads th = {.threads = sr->threads,
                                  .idle = true,
                                  .every = IDENT_PACE_CHUNK,
                                  .pace = share_pace_chunk,
                                  .pace_arg = &sr->pace};
    sr->rc = cfs_identify_split_scan(sr->s, sr->node, sr->nodes, sr->cancel, sr->found, sr->arg,
                                     &th);
    ident_pace_charge(&sr->pace); /* the last chunk's, on one thread */
    return NULL;
}

int cfs_identify_split_scan_paced(struct cfs_identify *id, struct cfs_metrics *metrics,
                                  const struct cfs_split_sets *s, uint32_t node, uint32_t nodes,
                                  const _Atomic bool *cancel, cfs_identify_split_found found,
                                  void *arg)
{
    struct share_run sr = {.s = s,
                           .node = node,
                           .nodes = nodes,
                           .cancel = cancel,
                           .found = found,
                           .arg = arg,
                           .threads = id ? id->p.search_threads : 0};
    ident_pace_share_init(&sr.pace, id ? &id->pace : NULL, metrics);
    pthread_t t;
    int rc = -pthread_create(&t, NULL, share_thread, &sr);
    if (rc < 0)
        return rc;
    pthread_join(t, NULL);
    return sr.rc;
}
