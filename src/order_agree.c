/* The nodes' agreement on an identified order (clairfs/order_agree.h).
 *
 * Every node keeps a table of the claims it has heard, its own among them,
 * and decides from the table alone.  There is no coordinator and no round
 * of answers: each node sends its claim to every other node whenever it
 * changes, so every table converges to the same claims and every node
 * reaches the same decision, whichever message came first.  A node never
 * waits on another: the decision is taken again at each claim, and a node
 * that is never heard from leaves the others waiting as reactive caches.
 *
 * Why a thread.  The claims arrive on the peer communication thread, which
 * must never block, and the adoption they release plans for seconds; the
 * hint to the identification takes the roots' lock.  So both run on the
 * module's own thread, which sleeps until the table changes. */
#include "clairfs/order_agree.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clairfs/log.h"
#include "clairfs/peer.h"
#include "clairfs/sampler.h"

/* A world beyond any cluster's: a claim naming one is bad bytes. */
#define CFS_ORDER_WORLD_MAX (1u << 20)

void cfs_order_claim_of(const struct cfs_identified *id, const char *root,
                        struct cfs_order_claim *out)
{
    const struct cfs_sampler_params *sp = &id->sampler;
    memset(out, 0, sizeof(*out));
    out->magic = CFS_ORDER_CLAIM_MAGIC;
    out->kind = (uint64_t)sp->kind;
    out->seed = sp->seed;
    out->n = sp->n;
    out->world = sp->world;
    out->batch = sp->batch;
    out->drop_last = sp->drop_last;
    out->drop_last_batch = sp->drop_last_batch;
    out->persistent_workers = sp->persistent_workers;
    out->epoch = id->epoch;
    out->rank_first = id->rank_first;
    out->rank_count = id->rank_count;
    out->rank_stride = id->rank_stride > 1 && id->rank_count > 1 ? id->rank_stride : 1;
    snprintf(out->root, sizeof(out->root), "%s", root ? root : "");
}

void cfs_order_claim_sampler(const struct cfs_order_claim *c, struct cfs_sampler_params *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = (enum cfs_sampler_kind)c->kind;
    out->seed = c->seed;
    out->n = c->n;
    out->world = (uint32_t)c->world;
    out->batch = (uint32_t)c->batch;
    out->drop_last = c->drop_last != 0;
    out->drop_last_batch = c->drop_last_batch != 0;
    out->persistent_workers = c->persistent_workers != 0;
    /* timm-ra seeds its generator with the epoch alone: the claim's seed
     * says nothing, its epoch says where the other node's candidates are
     * (identify_scan.c, try_hinted_seed) */
    if (c->kind == CFS_SAMPLER_TIMM_RA)
        out->seed = c->epoch;
}

bool cfs_order_claims_alike(const struct cfs_order_claim *a, const struct cfs_order_claim *b)
{
    return a->kind == b->kind && (uint32_t)a->seed == (uint32_t)b->seed && a->n == b->n &&
           a->world == b->world && a->batch == b->batch && a->drop_last == b->drop_last &&
           a->drop_last_batch == b->drop_last_batch &&
           a->persistent_workers == b->persistent_workers && strcmp(a->root, b->root) == 0;
}

bool cfs_order_claim_refines(const struct cfs_order_claim *newer,
                             const struct cfs_order_claim *older)
{
    bool family = newer->kind == older->kind ||
                  (older->kind == CFS_SAMPLER_TORCH_DDP && newer->kind == CFS_SAMPLER_DETECTRON2);
    return family && (uint32_t)newer->seed == (uint32_t)older->seed && newer->n == older->n &&
           newer->world == older->world && newer->batch == older->batch &&
           strcmp(newer->root, older->root) == 0 && !cfs_order_claims_alike(newer, older);
}

/* A claim's ranks (bad bytes give an empty or out-of-world range, which
 * ranks_cover refuses). */
static struct cfs_rank_range claim_ranks(const struct cfs_order_claim *c)
{
    bool fits =
        c->rank_first <= UINT32_MAX && c->rank_count <= UINT32_MAX && c->rank_stride <= UINT32_MAX;
    return fits ? (struct cfs_rank_range){(uint32_t)c->rank_first, (uint32_t)c->rank_count,
                                          (uint32_t)c->rank_stride}
                : (struct cfs_rank_range){UINT32_MAX, 1, 1};
}

/* Do the claims' ranks cover [0, world) once, each node's a block or a
 * stride (ranks dealt round robin)?  -1: they overlap (or pass the world);
 * 0: some rank is missing; 1: exactly. */
static int ranks_cover(const struct cfs_order_claim *claims, uint32_t nodes, uint64_t world)
{
    uint64_t covered = 0;
    if (world > CFS_ORDER_WORLD_MAX)
        return -1;
    for (uint32_t i = 0; i < nodes; i++) {
        struct cfs_rank_range c = claim_ranks(&claims[i]);
        if (cfs_rank_end(c) > world)
            return -1;
        for (uint32_t l = 0; l < c.count; l++)
            for (uint32_t j = 0; j < i; j++)
                if (cfs_rank_in(claim_ranks(&claims[j]), cfs_rank_at(c, l)))
                    return -1;
        covered += c.count;
    }
    return covered == world ? 1 : 0;
}

/* The decision over the claims of the newest generation: a refusal of it
 * contradicts, an older claim it refines waits for its node's check. */
static bool decide_generations(const struct cfs_order_claim *claims, const bool *have,
                               uint32_t nodes, struct cfs_order_decision *out)
{
    int newest = -1;
    for (uint32_t i = 0; i < nodes; i++)
        if (have[i] && !claims[i].refused &&
            (newest < 0 || claims[i].generation > claims[newest].generation))
            newest = (int)i;
    for (uint32_t i = 0; i < nodes; i++)
        if (have[i] && (newest < 0 || claims[i].generation >= claims[newest].generation))
            out->generation = (uint32_t)claims[i].generation;
    for (uint32_t i = 0; i < nodes && newest >= 0; i++) {
        const struct cfs_order_claim *c = &claims[i];
        if (!have[i] || c->generation > out->generation)
            continue;
        if (c->refused && c->generation == out->generation) {
            out->state = CFS_ORDER_CONTRADICTED;
            out->refused = true;
            out->no_longer_fits = c->refused == CFS_CLAIM_REFUSED_ADOPTED;
            out->first_differing = i;
            out->differs_from = (uint32_t)newest;
            return true;
        }
        if (c->generation < out->generation) {
            if (!cfs_order_claim_refines(&claims[newest], c) &&
                !cfs_order_claims_alike(&claims[newest], c)) {
                out->state = CFS_ORDER_CONTRADICTED;
                out->first_differing = i;
                out->differs_from = (uint32_t)newest;
                return true;
            }
            out->refining++;
        }
    }
    return false;
}

void cfs_order_agree_decide(const struct cfs_order_claim *claims, const bool *have, uint32_t nodes,
                            struct cfs_rank_range *node_ranks, struct cfs_order_decision *out)
{
    memset(out, 0, sizeof(*out));
    if (decide_generations(claims, have, nodes, out))
        return;
    int first = -1;
    for (uint32_t i = 0; i < nodes; i++) {
        if (!have[i]) {
            out->missing++;
            continue;
        }
        if (claims[i].generation < out->generation)
            continue; /* counted in refining */
        if (first < 0) {
            first = (int)i;
        } else if (!cfs_order_claims_alike(&claims[first], &claims[i])) {
            out->state = CFS_ORDER_CONTRADICTED;
            out->first_differing = i;
            out->differs_from = (uint32_t)first;
            return;
        }
    }
    if (out->missing || out->refining) {
        out->state = CFS_ORDER_WAITING;
        return;
    }
    int cover = ranks_cover(claims, nodes, claims[0].world);
    if (cover < 0) {
        /* one order, but two nodes say they serve one rank: not one job */
        out->state = CFS_ORDER_CONTRADICTED;
        out->first_differing = out->differs_from = 0;
        return;
    }
    if (cover == 0) {
        out->state = CFS_ORDER_WAITING; /* a rank not seen yet on some node */
        return;
    }
    out->state = CFS_ORDER_AGREED;
    out->node_ranks = node_ranks;
    for (uint32_t i = 0; i < nodes; i++) {
        node_ranks[i] = claim_ranks(&claims[i]);
        if (claims[i].epoch > out->from_epoch)
            out->from_epoch = (uint32_t)claims[i].epoch;
    }
}

static void describe_claim(const struct cfs_order_claim *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s seed=%" PRIu32 " world=%" PRIu64 " batch=%" PRIu64 "%s%s%s",
             c->root[0] ? c->root : "", c->root[0] ? ": " : "",
             cfs_sampler_kind_name((enum cfs_sampler_kind)c->kind), (uint32_t)c->seed, c->world,
             c->batch, c->drop_last ? " drop_last" : "",
             c->drop_last_batch ? " drop_last_batch" : "",
             c->persistent_workers ? " persistent_workers" : "");
}

void cfs_order_agree_describe(const struct cfs_order_claim *claims, const bool *have,
                              uint32_t nodes, const struct cfs_order_decision *d, char *buf,
                              size_t len)
{
    char a[200], b[200];
    uint32_t any = 0;
    while (any < nodes && !have[any])
        any++;
    switch (d->state) {
    case CFS_ORDER_AGREED:
        describe_claim(&claims[0], a, sizeof(a));
        if (d->generation)
            snprintf(buf, len, "nodes 0-%u agree: %s (refinement %u), planned from epoch %u",
                     nodes - 1, a, d->generation, d->from_epoch);
        else
            snprintf(buf, len, "nodes 0-%u agree: %s, planned from epoch %u", nodes - 1, a,
                     d->from_epoch);
        return;
    case CFS_ORDER_CONTRADICTED:
        describe_claim(&claims[d->first_differing], a, sizeof(a));
        describe_claim(&claims[d->differs_from], b, sizeof(b));
        if (d->refused && d->no_longer_fits)
            snprintf(buf, len,
                     "node %u's opens no longer fit the agreed order (%s); every node drops it "
                     "and stays a reactive cache",
                     d->first_differing, b);
        else if (d->refused)
            snprintf(buf, len,
                     "node %u's opens contradict node %u's refinement %u: %s; every node stays a "
                     "reactive cache",
                     d->first_differing, d->differs_from, d->generation, b);
        else if (d->first_differing == d->differs_from)
            snprintf(buf, len, "the nodes' ranks overlap (%s); every node stays a reactive cache",
                     a);
        else
            snprintf(buf, len,
                     "node %u contradicts node %u: %s against %s; every node stays a reactive "
                     "cache",
                     d->first_differing, d->differs_from, a, b);
        return;
    case CFS_ORDER_WAITING:
        break;
    }
    if (any == nodes) {
        snprintf(buf, len, "learning (no node has identified the order)");
        return;
    }
    describe_claim(&claims[any], a, sizeof(a));
    if (d->refining) {
        uint32_t newest = any;
        for (uint32_t i = 0; i < nodes; i++)
            if (have[i] && claims[i].generation == d->generation)
                newest = i;
        describe_claim(&claims[newest], a, sizeof(a));
        snprintf(buf, len,
                 "refining: %u of %u nodes checking node %u's refinement %u (%s); no node "
                 "changes its plan yet",
                 d->refining, nodes, newest, d->generation, a);
    } else if (d->missing)
        snprintf(buf, len, "waiting for %u of %u nodes (node %u: %s)", d->missing, nodes, any, a);
    else
        snprintf(buf, len, "waiting for every rank of world %" PRIu64 " (node %u: %s)",
                 claims[any].world, any, a);
}

/* A SPLIT or PASSED note waiting for the module's thread. */
struct split_event {
    uint32_t src;
    bool split; /* else passed */
    union {
        struct cfs_split_note split;
        struct cfs_passed_note passed;
    } note;
};
#define SPLIT_EVENTS 64 /* a share rarely passes more than one seed a node */

struct cfs_order_agree {
    struct cfs_order_agree_params p;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct cfs_order_claim *claims; /* per node, under mu */
    bool *have;
    struct cfs_rank_range *ranks;
    struct cfs_identified mine; /* this node's identification */
    const void *mine_ctx;
    uint64_t changes, handled; /* table changes, and those the thread acted on */
    bool hint_owed;            /* a claim came while this node had none */
    struct cfs_order_claim hint_claim;
    uint32_t hint_src;
    bool refine_owed;  /* a node refined the order this node claimed */
    bool refine_heard; /* refine_claim is the newest refinement heard */
    struct cfs_order_claim refine_claim;
    uint32_t refine_src;
    bool adopted; /* the last agreement acted on */
    struct cfs_order_claim adopted_claim;
    uint32_t adopted_from;
    enum cfs_order_agreement logged; /* the last state logged */
    double first_claim;              /* CLOCK_MONOTONIC seconds at the first claim, 0: none */
    struct split_event *events;      /* the split scan's notes, a ring under mu */
    uint32_t ev_head, ev_len;
    bool ev_dropped; /* the ring overflowed (logged once) */
    /* A share's scan stops once any node claims (the order is found) or
     * the module stops; set under mu. */
    _Atomic bool share_cancel;
    pthread_t thread;
};

_Static_assert(sizeof(struct cfs_split_note) <= CFS_PEER_NOTE_MAX, "the head's sets fit a note");
_Static_assert(sizeof(struct cfs_order_claim) <= CFS_PEER_NOTE_MAX, "a claim fits a note");

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Under mu: the table changed. */
static void changed(struct cfs_order_agree *a)
{
    atomic_store(&a->share_cancel, true);
    if (a->first_claim == 0)
        a->first_claim = now_sec();
    a->changes++;
    pthread_cond_signal(&a->cv);
}

/* On the module's thread, with mu held: what the table now says, acted
 * upon; the callbacks run with mu released. */
static void act(struct cfs_order_agree *a)
{
    uint32_t nodes = a->p.nodes;
    struct cfs_order_decision d;
    cfs_order_agree_decide(a->claims, a->have, nodes, a->ranks, &d);
    char text[600];
    cfs_order_agree_describe(a->claims, a->have, nodes, &d, text, sizeof(text));
    bool hint = a->hint_owed && !a->have[a->p.node];
    struct cfs_order_claim hc = a->hint_claim;
    uint32_t hsrc = a->hint_src;
    a->hint_owed = false;
    bool refine = a->refine_owed && a->have[a->p.node];
    struct cfs_order_claim rc = a->refine_claim;
    uint32_t rsrc = a->refine_src;
    a->refine_owed = false;
    bool drop = d.state == CFS_ORDER_CONTRADICTED && a->adopted;
    if (drop)
        a->adopted = false;
    /* once per agreement: a claim refined (a rank seen later) is a new one */
    bool adopt = d.state == CFS_ORDER_AGREED &&
                 !(a->adopted && a->adopted_from == d.from_epoch &&
                   memcmp(&a->adopted_claim, &a->claims[a->p.node], sizeof(hc)) == 0);
    struct cfs_identified mine = a->mine;
    const void *ctx = a->mine_ctx;
    char root[CFS_ORDER_ROOT_MAX];
    memcpy(root, a->claims[a->p.node].root, sizeof(root));
    struct cfs_rank_range *ranks = NULL;
    if (adopt) {
        ranks = malloc(nodes * sizeof(*ranks));
        if (ranks)
            memcpy(ranks, a->ranks, nodes * sizeof(*ranks));
        a->adopted = ranks != NULL;
        a->adopted_claim = a->claims[a->p.node];
        a->adopted_from = d.from_epoch;
    }
    bool log = d.state != a->logged || adopt;
    a->logged = d.state;
    double since = now_sec() - a->first_claim;
    pthread_mutex_unlock(&a->mu);
    if (log && d.state == CFS_ORDER_CONTRADICTED)
        cfs_warn("order: %s", text);
    else if (log && d.state == CFS_ORDER_AGREED)
        cfs_info("order: %s (%.2f s after the first claim this node heard or made)", text, since);
    if (hint && a->p.hint) {
        struct cfs_sampler_params sp;
        cfs_order_claim_sampler(&hc, &sp);
        cfs_info("order: node %u identified %s seed=%" PRIu32 " world=%u; checking it against "
                 "this node's opens",
                 hsrc, cfs_sampler_kind_name(sp.kind), (uint32_t)sp.seed, sp.world);
        a->p.hint(a->p.arg, hc.root, &sp);
    }
    void (*check)(void *, const char *, const struct cfs_sampler_params *) =
        a->p.refine ? a->p.refine : a->p.hint;
    if (refine && check) {
        struct cfs_sampler_params sp;
        cfs_order_claim_sampler(&rc, &sp);
        char what[200];
        describe_claim(&rc, what, sizeof(what));
        cfs_info("order: node %u refined the order to %s (refinement %" PRIu64
                 "); checking it against this node's opens",
                 rsrc, what, rc.generation);
        check(a->p.arg, rc.root, &sp);
    }
    if (drop && a->p.drop)
        a->p.drop(a->p.arg, root, text);
    if (ranks && a->p.adopt)
        a->p.adopt(a->p.arg, root, ctx, &mine, ranks, d.from_epoch);
    free(ranks);
    pthread_mutex_lock(&a->mu);
}

/* On the module's thread, with mu held: the oldest split note, handed to
 * its callback with mu released. */
static void act_split(struct cfs_order_agree *a)
{
    struct split_event ev = a->events[a->ev_head];
    a->ev_head = (a->ev_head + 1) % SPLIT_EVENTS;
    a->ev_len--;
    /* a claim heard already: the order is found, no share is worth a scan;
     * newer sets queued: these are stale */
    bool claimed = false;
    for (uint32_t i = 0; i < a->p.nodes; i++)
        claimed |= a->have[i];
    for (uint32_t i = 0; i < a->ev_len && ev.split; i++)
        claimed |= a->events[(a->ev_head + i) % SPLIT_EVENTS].split;
    atomic_store(&a->share_cancel, claimed);
    pthread_mutex_unlock(&a->mu);
    if (ev.split && !claimed && a->p.scan_share)
        a->p.scan_share(a->p.arg, ev.note.split.root, ev.src, &ev.note.split.sets,
                        &a->share_cancel);
    else if (!ev.split && a->p.passed)
        a->p.passed(a->p.arg, ev.note.passed.root, ev.src, (uint32_t)ev.note.passed.seed,
                    (uint32_t)ev.note.passed.skip);
    pthread_mutex_lock(&a->mu);
}

static void *agree_thread(void *arg)
{
    struct cfs_order_agree *a = arg;
    pthread_setname_np(pthread_self(), "cfs-agree");
    pthread_mutex_lock(&a->mu);
    while (!a->stop) {
        if (a->handled != a->changes) {
            a->handled = a->changes;
            act(a);
        } else if (a->ev_len) {
            act_split(a);
        } else {
            pthread_cond_wait(&a->cv, &a->mu);
        }
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* The agreement's memory (a may be NULL or half made). */
static void free_agree(struct cfs_order_agree *a)
{
    if (a) {
        free(a->claims);
        free(a->have);
        free(a->ranks);
        free(a->events);
    }
    free(a);
}

int cfs_order_agree_create(const struct cfs_order_agree_params *p, struct cfs_order_agree **out,
                           char *err, size_t errlen)
{
    *out = NULL;
    if (p->nodes == 0 || p->node >= p->nodes) {
        snprintf(err, errlen, "order agreement: node %u of %u", p->node, p->nodes);
        return -EINVAL;
    }
    struct cfs_order_agree *a = calloc(1, sizeof(*a));
    if (!a)
        goto oom;
    a->p = *p;
    a->claims = calloc(p->nodes, sizeof(*a->claims));
    a->have = calloc(p->nodes, sizeof(*a->have));
    a->ranks = calloc(p->nodes, sizeof(*a->ranks));
    a->events = calloc(SPLIT_EVENTS, sizeof(*a->events));
    if (!a->claims || !a->have || !a->ranks || !a->events)
        goto oom;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    int rc = pthread_create(&a->thread, NULL, agree_thread, a);
    if (rc) {
        snprintf(err, errlen, "order agreement: cannot start its thread: %s", strerror(rc));
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free_agree(a);
        return -rc;
    }
    *out = a;
    return 0;
oom:
    free_agree(a);
    snprintf(err, errlen, "order agreement: out of memory");
    return -ENOMEM;
}

void cfs_order_agree_stop(struct cfs_order_agree *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    bool join = !a->stop;
    a->stop = true;
    atomic_store(&a->share_cancel, true);
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (join)
        pthread_join(a->thread, NULL);
}

void cfs_order_agree_destroy(struct cfs_order_agree *a)
{
    if (!a)
        return;
    cfs_order_agree_stop(a);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free_agree(a);
}

/* Under mu: the generation of this node's new claim c.  Alike a claim
 * heard (or its own last): that one's, a refinement checked; a refinement
 * of its own last: one past the newest heard, a new one to check. */
static uint64_t claim_generation(const struct cfs_order_agree *a, const struct cfs_order_claim *c)
{
    const struct cfs_order_claim *own = &a->claims[a->p.node];
    bool had = a->have[a->p.node];
    uint64_t alike = 0, newest = 0;
    bool any_alike = false;
    for (uint32_t i = 0; i < a->p.nodes; i++) {
        if (!a->have[i] || a->claims[i].refused)
            continue;
        if (a->claims[i].generation > newest)
            newest = a->claims[i].generation;
        if (cfs_order_claims_alike(&a->claims[i], c) && a->claims[i].generation >= alike) {
            alike = a->claims[i].generation;
            any_alike = true;
        }
    }
    if (any_alike)
        return alike;
    if (had && cfs_order_claim_refines(c, own))
        return newest + 1;
    return had ? own->generation : 0;
}

void cfs_order_agree_local(struct cfs_order_agree *a, const char *root, const void *ctx,
                           const struct cfs_identified *id)
{
    if (id->epoch_seed_only || id->per_epoch_global)
        return;
    struct cfs_order_claim c;
    cfs_order_claim_of(id, root, &c);
    pthread_mutex_lock(&a->mu);
    c.generation = claim_generation(a, &c);
    a->claims[a->p.node] = c;
    a->have[a->p.node] = true;
    a->mine = *id;
    a->mine_ctx = ctx;
    changed(a);
    pthread_mutex_unlock(&a->mu);
    /* send never blocks (the peer thread sends): under no lock all the same */
    for (uint32_t d = 0; d < a->p.nodes; d++)
        if (d != a->p.node && a->p.send)
            a->p.send(a->p.arg, d, &c, sizeof(c));
}

/* Queues a split note for the module's thread; a full ring drops it (a
 * lost share: the head's own scan still covers the range). */
static void push_event(struct cfs_order_agree *a, const struct split_event *ev)
{
    pthread_mutex_lock(&a->mu);
    bool drop = a->ev_len == SPLIT_EVENTS;
    bool first_drop = drop && !a->ev_dropped;
    if (drop) {
        a->ev_dropped = true;
    } else {
        if (ev->split) /* newer sets: the running share's scan gives way */
            atomic_store(&a->share_cancel, true);
        a->events[(a->ev_head + a->ev_len) % SPLIT_EVENTS] = *ev;
        a->ev_len++;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    if (first_drop)
        cfs_warn("order: more than %d split scan notes waiting; later ones are dropped (the "
                 "head node's own scan covers their seeds)",
                 SPLIT_EVENTS);
}

static bool root_ok(const char *root)
{
    return memchr(root, '\0', CFS_ORDER_ROOT_MAX) != NULL;
}

/* A SPLIT or PASSED note (a claim is neither): true when it was one. */
static bool receive_split(struct cfs_order_agree *a, uint32_t src, const void *msg, size_t len)
{
    uint64_t magic;
    if (len < sizeof(magic))
        return false;
    memcpy(&magic, msg, sizeof(magic));
    struct split_event ev = {.src = src};
    if (magic == CFS_SPLIT_NOTE_MAGIC && len == sizeof(ev.note.split)) {
        ev.split = true;
        memcpy(&ev.note.split, msg, len);
        if (root_ok(ev.note.split.root))
            push_event(a, &ev);
        return true;
    }
    if (magic == CFS_PASSED_NOTE_MAGIC && len == sizeof(ev.note.passed)) {
        memcpy(&ev.note.passed, msg, len);
        if (root_ok(ev.note.passed.root) && ev.note.passed.seed <= UINT32_MAX &&
            ev.note.passed.skip <= 4)
            push_event(a, &ev);
        return true;
    }
    return false;
}

void cfs_order_agree_split(struct cfs_order_agree *a, const char *root,
                           const struct cfs_split_sets *s)
{
    struct cfs_split_note n = {.magic = CFS_SPLIT_NOTE_MAGIC, .sets = *s};
    snprintf(n.root, sizeof(n.root), "%s", root ? root : "");
    for (uint32_t d = 0; d < a->p.nodes; d++)
        if (d != a->p.node && a->p.send)
            a->p.send(a->p.arg, d, &n, sizeof(n));
}

void cfs_order_agree_passed(struct cfs_order_agree *a, const char *root, uint32_t head,
                            uint32_t seed, uint32_t skip)
{
    struct split_event ev = {.src = a->p.node};
    ev.note.passed =
        (struct cfs_passed_note){.magic = CFS_PASSED_NOTE_MAGIC, .seed = seed, .skip = skip};
    snprintf(ev.note.passed.root, sizeof(ev.note.passed.root), "%s", root ? root : "");
    if (head == a->p.node)
        push_event(a, &ev);
    else if (head < a->p.nodes && a->p.send)
        a->p.send(a->p.arg, head, &ev.note.passed, sizeof(ev.note.passed));
}

void cfs_order_agree_receive(struct cfs_order_agree *a, uint32_t src, const void *msg, size_t len)
{
    struct cfs_order_claim c;
    if (src >= a->p.nodes || src == a->p.node || receive_split(a, src, msg, len) ||
        len != sizeof(c))
        return;
    memcpy(&c, msg, sizeof(c));
    if (c.magic != CFS_ORDER_CLAIM_MAGIC || c.world == 0 || c.n == 0 ||
        c.refused > CFS_CLAIM_REFUSED_ADOPTED || memchr(c.root, '\0', sizeof(c.root)) == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    /* The first claim from src: ours goes back to it, in case the one we
     * sent was lost (a note is never retried by the transport). */
    bool answer = !a->have[src] && a->have[a->p.node];
    struct cfs_order_claim mine = a->claims[a->p.node];
    a->claims[src] = c;
    a->have[src] = true;
    if (!a->have[a->p.node]) {
        a->hint_owed = true;
        a->hint_claim = c;
        a->hint_src = src;
    } else if (!c.refused && c.generation > mine.generation && cfs_order_claim_refines(&c, &mine)) {
        a->refine_owed = a->refine_heard = true;
        a->refine_claim = c;
        a->refine_src = src;
    }
    changed(a);
    pthread_mutex_unlock(&a->mu);
    if (answer && a->p.send)
        a->p.send(a->p.arg, src, &mine, sizeof(mine));
}

/* This node's refusal (CFS_CLAIM_REFUSED_*) of root's claim `which`
 * (the newest refinement heard, or the one adopted), with its own ranks
 * and epoch, to every node; nothing when there is none of root. */
static void refuse(struct cfs_order_agree *a, const char *root, uint64_t why)
{
    pthread_mutex_lock(&a->mu);
    bool refinement = why == CFS_CLAIM_REFUSED_REFINEMENT;
    struct cfs_order_claim c = refinement ? a->refine_claim : a->adopted_claim;
    /* the claim adopted is of the newest generation every node claimed */
    bool ok = (refinement ? a->refine_heard : a->adopted) && a->have[a->p.node] &&
              strcmp(c.root, root ? root : "") == 0;
    if (ok) {
        const struct cfs_order_claim *mine = &a->claims[a->p.node];
        c.refused = why;
        c.rank_first = mine->rank_first, c.rank_count = mine->rank_count, c.epoch = mine->epoch;
        c.rank_stride = mine->rank_stride > 1 && mine->rank_count > 1 ? mine->rank_stride : 1;
        a->claims[a->p.node] = c;
        changed(a);
    }
    pthread_mutex_unlock(&a->mu);
    for (uint32_t d = 0; ok && d < a->p.nodes; d++)
        if (d != a->p.node && a->p.send)
            a->p.send(a->p.arg, d, &c, sizeof(c));
}

void cfs_order_agree_refuse(struct cfs_order_agree *a, const char *root)
{
    refuse(a, root, CFS_CLAIM_REFUSED_REFINEMENT);
}

void cfs_order_agree_refuse_adopted(struct cfs_order_agree *a, const char *root)
{
    refuse(a, root, CFS_CLAIM_REFUSED_ADOPTED);
}

enum cfs_order_agreement cfs_order_agree_state(struct cfs_order_agree *a, char *buf, size_t len)
{
    struct cfs_order_decision d;
    pthread_mutex_lock(&a->mu);
    struct cfs_rank_range *ranks = malloc(a->p.nodes * sizeof(*ranks));
    if (!ranks) {
        pthread_mutex_unlock(&a->mu);
        snprintf(buf, len, "out of memory");
        return CFS_ORDER_WAITING;
    }
    cfs_order_agree_decide(a->claims, a->have, a->p.nodes, ranks, &d);
    if (buf && len)
        cfs_order_agree_describe(a->claims, a->have, a->p.nodes, &d, buf, len);
    pthread_mutex_unlock(&a->mu);
    free(ranks);
    return d.state;
}
