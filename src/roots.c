/* The dataset roots as the opens find them: each open is routed to its
 * root (roots_find.c), numbered as that root's sample, and handed to the
 * root's own identification; what each found is kept for the data path
 * and the stats.
 *
 * Why one identification a root, not one pass over every candidate root's
 * seeds: randperm(n) depends on n, so a candidate order of another n is
 * another scan, and opens grouped by root already say which one a reader
 * uses (roots_find.c).  A training folder and its validation folder read
 * at once are so two identifications, each with its own readers: the
 * validation workers, children of the same ranks as the training
 * workers, never become readers of the training order.  The roots seen
 * are few (train, val, a test folder), each built once, the first time an
 * open lands below it, from the catalog's entries.  The libraries' orders
 * of one root share its n and are searched in its one scan
 * (clairfs/identify.h, params.orders); the one found says which map the
 * data path gets.  A large root builds them on a thread of its own
 * (build_orders), since timm's natural sort of ImageNet's paths takes
 * seconds that the first open would wait under `mu`.
 *
 * A root's first NARROW_OPENS opens that all lie in one folder below it
 * say the dataset is that folder (narrow): a sorted glob of images/train,
 * whose parent images/ is an ImageFolder of the classes train and val.  A
 * shuffled reader of a class-folder root spreads 64 opens over its
 * classes; an unshuffled pass from the root's first samples is the root
 * read in order (its first class first), so it stays.  The folder becomes
 * a root of its own (built as a folder without classes), the kept opens
 * are fed to it, and the root above stops searching but keeps routing and
 * narrowing its other opens (images/val's pass after images/train).
 *
 * Locks: `mu` (the roots, the per-sample routing, what each found) is
 * taken before a root's identification lock (cfs_identify_observe is a
 * leaf append); an identification's thread calls back (found) without its
 * own lock, and takes `mu`.  An identification stopped for an unshuffled
 * pass or a narrowed root is destroyed after `mu` is released, once no
 * open can reach it - or, while a caller outside `mu` uses it (borrow: a
 * seed another node's share passed, checked against its opens; this
 * node's share of another node's scan, paced by its budget), by the last
 * such caller as it ends.  A root's order builder takes `mu` to hand its orders
 * over, and is joined by cfs_roots_destroy, which never holds `mu`. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/log.h"
#include "clairfs/metrics.h"
#include "roots_i.h"

#define ROUTE_UNKNOWN 0 /* route[s]: not yet routed; else the root's slot + 1 */
#define NARROW_OPENS 64 /* a root's first opens, all in one folder below it: that folder's */
/* A root of at most this many samples builds its candidate orders at its
 * first open; a larger one on a thread of its own (timm's natural sort of
 * ImageNet's 1.28 M paths takes seconds, and the first open waits under
 * the module's lock). */
#define ORDERS_AT_ONCE 2048

/* An open kept to hand to a narrower root. */
struct head_open {
    uint32_t sample;
    pid_t pid, ppid;
};

struct root {
    struct cfs_roots *owner;
    cfs_id dir;      /* CFS_ID_NONE: the mount's own order */
    enum cfs_order kind; /* its first order's */
    char name[256];
    uint64_t n;
    uint32_t *map;   /* root index -> the mount's sample (NULL: the identity) */
    /* the libraries' orders of the same samples, searched in the same scan */
    struct cfs_root_orders orders;
    struct cfs_identify *id; /* NULL once an unshuffled pass stopped it */
    struct roots_pass pass;
    /* the same steps in each candidate order: timm's validation loader
     * reads timm's order unshuffled */
    struct roots_pass pass_in[CFS_ROOT_MAX_ORDERS];
    uint32_t stride; /* an unshuffled pass at this stride; 0: none */
    uint32_t pass_order; /* in this order: 0 its first, k orders.map[k - 1] */
    pthread_t builder; /* building its candidate orders (building) */
    bool building;
    uint64_t opens;
    /* its first opens and the deepest folder above them all, until
     * NARROW_OPENS say whether they are a folder's below it */
    struct head_open head[NARROW_OPENS];
    size_t nhead;
    cfs_id common;
    struct root *narrowed; /* its opens are this root's now */
    int gauge; /* its clairfs_order_identified{root=} slot, -1: none */
    /* callers using its identification outside `mu` (borrow), and the one
     * an open stopped meanwhile: the last of them destroys it */
    unsigned borrowed;
    struct cfs_identify *stopped;
    bool found;
    struct cfs_identified got;
};

struct cfs_roots {
    struct cfs_roots_params p;
    pthread_mutex_t mu;
    struct root *r[CFS_ROOTS_MAX + 1];
    size_t nr;
    uint64_t nsamples;
    uint8_t *route;  /* per mount sample: ROUTE_UNKNOWN or slot + 1 */
    uint32_t *local; /* per mount sample: its index in its root */
    cfs_id bad[CFS_ROOTS_MAX]; /* directories whose order was refused */
    size_t nbad;
    struct root *last_found;
    /* the last late hint (cfs_roots_take_hint), for a root its opens have
     * not reached yet: another node can identify before this one's first
     * open of that root */
    struct cfs_sampler_params late_hint;
    char late_root[256];
    bool late_set;
};

/* On a root's identification thread, without its lock. */
static void found(void *arg, const struct cfs_identified *id)
{
    struct root *rt = arg;
    struct cfs_roots *r = rt->owner;
    pthread_mutex_lock(&r->mu);
    rt->found = true;
    rt->got = *id;
    r->last_found = rt;
    if (r->p.identify.metrics)
        cfs_metrics_root_set(r->p.identify.metrics, rt->gauge, 1);
    pthread_mutex_unlock(&r->mu);
    if (rt->dir != CFS_ID_NONE)
        cfs_info("identify: root %s (%" PRIu64 " samples): %s", rt->name, rt->n, id->text);
    /* the order the opens follow: the root's own, or a candidate's */
    const uint32_t *map = id->order ? rt->orders.map[id->order - 1] : rt->map;
    struct cfs_root view = {.name = rt->name, .n = rt->n, .map = map};
    r->p.on_identified(r->p.cb_arg, &view, id);
}

/* On a root's identification thread: its head sets, for the other nodes. */
static void split(void *arg, const struct cfs_split_sets *sets)
{
    struct root *rt = arg;
    struct cfs_roots *r = rt->owner;
    struct cfs_root view = {.name = rt->name, .n = rt->n, .map = rt->map};
    r->p.on_split(r->p.cb_arg, &view, sets);
}

/* On a root's identification thread: a refinement its opens refuse. */
static void refinement_refused(void *arg, const struct cfs_sampler_params *hint, const char *why)
{
    struct root *rt = arg;
    struct cfs_roots *r = rt->owner;
    struct cfs_root view = {.name = rt->name, .n = rt->n, .map = rt->map};
    r->p.on_refused(r->p.cb_arg, &view, hint, why);
}

static void root_free(struct root *rt)
{
    if (!rt)
        return;
    if (rt->building)
        pthread_join(rt->builder, NULL); /* it takes mu: never called with mu held */
    cfs_identify_destroy(rt->id);
    cfs_identify_destroy(rt->stopped);
    cfs_root_orders_free(&rt->orders);
    free(rt->map);
    free(rt);
}

/* A large root's candidate orders, off the data path: handed to its
 * identification when built (its next attempt comes at once), and to its
 * pass's steps from then on. */
static void *build_orders(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-root-orders");
    struct root *rt = arg;
    struct cfs_roots *r = rt->owner;
    struct cfs_root_orders o;
    if (cfs_root_orders_build(r->p.catalog, rt->dir == CFS_ID_NONE ? 0 : rt->dir, rt->map, rt->n,
                              &o) < 0) {
        cfs_warn("identify: %s: out of memory for the libraries' orders; searched in its own",
                 rt->dir == CFS_ID_NONE ? "the mount's order" : rt->name);
        return NULL;
    }
    char also[96] = "";
    for (size_t i = 0; i < o.count; i++)
        snprintf(also + strlen(also), sizeof(also) - strlen(also), "%s%s", i ? ", " : "",
                 o.name[i]);
    pthread_mutex_lock(&r->mu);
    rt->orders = o;
    if (rt->id && o.count)
        cfs_identify_take_orders(rt->id, (const uint32_t *const *)rt->orders.index, rt->orders.name,
                                 rt->orders.count);
    pthread_mutex_unlock(&r->mu);
    if (o.count)
        cfs_info("identify: %s is searched in the libraries' orders too: %s",
                 rt->dir == CFS_ID_NONE ? "the mount's order" : rt->name, also);
    return NULL;
}

/* A new root at dir (CFS_ID_NONE: the mount's own), its samples routed
 * to slot; NULL when it cannot be (why says). */
static struct root *root_new(struct cfs_roots *r, cfs_id dir, enum cfs_order kind, uint32_t *map,
                             uint64_t n, char *why, size_t whylen)
{
    struct root *rt = calloc(1, sizeof(*rt));
    if (!rt) {
        free(map);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    rt->owner = r;
    rt->dir = dir;
    rt->kind = kind;
    rt->map = map;
    rt->n = n;
    if (dir != CFS_ID_NONE && cfs_catalog_path(r->p.catalog, dir, rt->name, sizeof(rt->name)) < 0)
        snprintf(rt->name, sizeof(rt->name), "(id %u)", dir);
    struct cfs_identify_params ip = r->p.identify;
    struct cfs_sampler_params hint;
    if (ip.hint) {
        hint = *ip.hint;
        hint.n = n;
        ip.hint = &hint;
    }
    ip.n = n;
    /* The libraries' orders of this root (none where an order is
     * registered: registration is the user's promise), at once when it is
     * small. */
    if (r->p.derive && n <= ORDERS_AT_ONCE &&
        cfs_root_orders_build(r->p.catalog, dir == CFS_ID_NONE ? 0 : dir, map, n, &rt->orders) <
            0) {
        snprintf(why, whylen, "out of memory");
        root_free(rt);
        return NULL;
    }
    ip.orders = rt->orders.count ? (const uint32_t *const *)rt->orders.index : NULL;
    ip.order_names = rt->orders.name;
    ip.norders = rt->orders.count;
    ip.order_name = kind == CFS_ORDER_IMAGEFOLDER ? NULL : cfs_order_name(kind);
    ip.on_identified = found;
    ip.on_split = r->p.on_split ? split : NULL;
    ip.on_refused = r->p.on_refused ? refinement_refused : NULL;
    ip.cb_arg = rt;
    if (cfs_identify_create(&ip, &rt->id, why, whylen) < 0) {
        root_free(rt);
        return NULL;
    }
    if (r->late_set && r->late_hint.n == n && strcmp(r->late_root, rt->name) == 0)
        cfs_identify_take_hint(rt->id, &r->late_hint);
    if (r->p.derive && n > ORDERS_AT_ONCE)
        rt->building = pthread_create(&rt->builder, NULL, build_orders, rt) == 0;
    return rt;
}

int cfs_roots_create(const struct cfs_roots_params *p, struct cfs_roots **out, char *err,
                     size_t errlen)
{
    struct cfs_roots *r = calloc(1, sizeof(*r));
    *out = NULL;
    if (!r)
        return cfs_error_msg(err, errlen, -ENOMEM, "roots: out of memory");
    r->p = *p;
    r->nsamples = cfs_catalog_sample_count(p->catalog);
    pthread_mutex_init(&r->mu, NULL);
    r->route = calloc(r->nsamples + 1, 1);
    r->local = malloc((r->nsamples + 1) * sizeof(*r->local));
    if (!r->route || !r->local) {
        cfs_roots_destroy(r);
        return cfs_error_msg(err, errlen, -ENOMEM, "roots: out of memory");
    }
    *out = r;
    return 0;
}

void cfs_roots_destroy(struct cfs_roots *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nr; i++)
        root_free(r->r[i]);
    free(r->route);
    free(r->local);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static bool refused(const struct cfs_roots *r, cfs_id dir)
{
    for (size_t i = 0; i < r->nbad; i++)
        if (r->bad[i] == dir)
            return true;
    return false;
}

/* The slot of dir's root, made on first use (mu held); -1: not a root.
 * folder: a root narrowed to the folder holding a root's opens. */
static int slot_of(struct cfs_roots *r, cfs_id dir, bool folder)
{
    for (size_t i = 0; i < r->nr; i++)
        if (r->r[i]->dir == dir)
            return (int)i;
    if (r->nr == CFS_ROOTS_MAX + 1 || (dir != CFS_ID_NONE && refused(r, dir)))
        return -1;
    char why[256] = "";
    uint32_t *map = NULL;
    uint64_t n = r->nsamples;
    /* The mount's own order is ImageFolder's, or every file by sorted
     * path where that did not build at its root (catalog.c). */
    enum cfs_order kind = dir == CFS_ID_NONE && cfs_catalog_order_fallback(r->p.catalog)
                              ? CFS_ORDER_SORTED
                              : CFS_ORDER_IMAGEFOLDER;
    int rc = 0;
    if (dir != CFS_ID_NONE && r->nr == CFS_ROOTS_MAX)
        rc = -ENOSPC;
    else if (dir != CFS_ID_NONE && folder)
        rc = roots_build_folder(r->p.catalog, dir, &kind, &map, &n, why, sizeof(why));
    else if (dir != CFS_ID_NONE)
        rc = roots_build(r->p.catalog, dir, &kind, &map, &n, why, sizeof(why));
    if (rc < 0) {
        if (r->nbad < CFS_ROOTS_MAX)
            r->bad[r->nbad++] = dir;
        cfs_debug("identify: %s is no dataset root here: %s",
                  cfs_catalog_name(r->p.catalog, dir), why[0] ? why : "too many roots");
        return -1;
    }
    struct root *rt = root_new(r, dir, kind, map, n, why, sizeof(why));
    if (!rt) {
        cfs_warn("identify: root %s: %s", cfs_catalog_name(r->p.catalog, dir), why);
        return -1;
    }
    size_t k = r->nr++;
    r->r[k] = rt;
    const char *label = dir == CFS_ID_NONE ? "." : rt->name;
    rt->gauge = r->p.identify.metrics ? cfs_metrics_root_add(r->p.identify.metrics, label) : -1;
    /* The mount's own order takes its samples one open at a time: what no
     * deeper root takes (a root not built yet may still).  A narrowed
     * root takes its folder's samples from the root above. */
    for (uint64_t i = 0; map && i < n; i++) {
        r->route[map[i]] = (uint8_t)(k + 1);
        r->local[map[i]] = (uint32_t)i;
    }
    char also[96] = ""; /* the candidate orders searched with it */
    for (size_t i = 0; i < rt->orders.count; i++)
        snprintf(also + strlen(also), sizeof(also) - strlen(also), "%s%s", i ? ", " : "; or ",
                 rt->orders.name[i]);
    if (dir != CFS_ID_NONE)
        cfs_info("identify: opens below %s are numbered as %s(%s)'s %" PRIu64 " samples%s",
                 rt->name, kind == CFS_ORDER_IMAGEFOLDER ? "ImageFolder" : cfs_order_name(kind),
                 rt->name, n, also);
    else if (also[0])
        cfs_info("identify: the mount's order is searched with the libraries' orders of its "
                 "%" PRIu64 " samples%s",
                 n, also);
    return (int)k;
}

/* The root of sample s (mu held), routing it on its first open. */
static struct root *route(struct cfs_roots *r, uint32_t s)
{
    if (r->route[s] != ROUTE_UNKNOWN)
        return r->r[r->route[s] - 1];
    cfs_id dir = CFS_ID_NONE;
    if (r->p.derive) {
        cfs_id e = cfs_catalog_sample_entry(r->p.catalog, s);
        dir = cfs_roots_root_of(r->p.catalog, e);
        /* A refused root: the next one up. */
        while (dir != CFS_ID_NONE && slot_of(r, dir, false) < 0)
            dir = roots_candidate(r->p.catalog, cfs_catalog_entry(r->p.catalog, dir)->parent);
    }
    if (dir != CFS_ID_NONE)
        (void)slot_of(r, dir, false); /* routes its samples */
    if (r->route[s] == ROUTE_UNKNOWN) { /* in no root: the mount's own order */
        int k = slot_of(r, CFS_ID_NONE, false);
        if (k < 0)
            return NULL;
        r->route[s] = (uint8_t)(k + 1);
        r->local[s] = s;
    }
    return r->r[r->route[s] - 1];
}

/* What an open changed that is done without mu: identifications to stop
 * (no open reaches them now), a root to hand to on_pass. */
struct after_open {
    struct cfs_identify *stop[2];
    size_t nstop;
    struct root *pass;
};

/* rt's identification stops (mu held): destroyed once `mu` is released,
 * or, halted now, by the last caller that borrowed it. */
static void stop_identify(struct root *rt, struct after_open *after)
{
    if (rt->id && rt->borrowed) {
        cfs_identify_halt(rt->id);
        rt->stopped = rt->id;
    } else if (rt->id) {
        after->stop[after->nstop++] = rt->id;
    }
    rt->id = NULL;
}

/* rt's open of its index x (mu held). */
static void feed(struct cfs_roots *r, struct root *rt, uint32_t x, pid_t pid, pid_t ppid,
                 struct after_open *after)
{
    rt->opens++;
    if (rt->id)
        cfs_identify_observe(rt->id, x, pid, ppid);
    if (rt->stride || rt->found)
        return;
    /* Every order's steps at every open (one told late would lag); of the
     * orders a pass is told in at once, the one most of whose steps are
     * its stride (timm's order read in ImageFolder's numbering still
     * steps by one from img4 to img9, img10 to img19...). */
    uint32_t stride = roots_pass_open(&rt->pass, pid, x), order = 0;
    uint64_t best = stride ? rt->pass.stride_steps[stride] : 0;
    for (size_t k = 0; k < rt->orders.count; k++) {
        uint32_t in_k = roots_pass_open(&rt->pass_in[k], pid, rt->orders.index[k][x]);
        if (in_k && rt->pass_in[k].stride_steps[in_k] > best)
            stride = in_k, order = (uint32_t)k + 1, best = rt->pass_in[k].stride_steps[in_k];
    }
    if (stride) {
        rt->stride = stride;
        rt->pass_order = order;
        stop_identify(rt, after);
        /* the mount's own order is no evaluation */
        after->pass = rt->dir != CFS_ID_NONE ? rt : NULL;
        if (r->p.identify.metrics)
            cfs_metrics_root_set(r->p.identify.metrics, rt->gauge, 1);
        cfs_info("identify: %s: an unshuffled pass (sequential, world=%u%s%s): not searched",
                 rt->dir == CFS_ID_NONE ? "the mount's order" : rt->name, rt->stride,
                 order ? " order=" : "", order ? rt->orders.name[order - 1] : "");
    }
}

/* Keeps rt's first opens (mu held); at the NARROW_OPENS-th, when they all
 * lie in one folder below rt (roots_find.c's top comment: a flat folder of
 * images read by a library's glob), that folder becomes their root, built
 * in the orders of a folder without classes: its samples are routed there,
 * the opens kept are fed to it, and rt's search is stopped. */
static void narrow(struct cfs_roots *r, struct root *rt, uint32_t sample, pid_t pid, pid_t ppid,
                   struct after_open *after)
{
    if (!r->p.derive || rt->nhead == NARROW_OPENS || rt->found || rt->stride ||
        (!rt->id && !rt->narrowed))
        return;
    const struct cfs_catalog *c = r->p.catalog;
    cfs_id folder = cfs_catalog_entry(c, cfs_catalog_sample_entry(c, sample))->parent;
    rt->common = rt->nhead ? roots_common_dir(c, rt->common, folder) : folder;
    rt->head[rt->nhead++] = (struct head_open){sample, pid, ppid};
    cfs_id top = rt->dir == CFS_ID_NONE ? 0 : rt->dir;
    if (rt->nhead < NARROW_OPENS || rt->common == top)
        return;
    /* An unshuffled pass from the root's first samples reads the root (a
     * validation folder's first class): only a pass that starts inside the
     * root reads a folder of it. */
    uint32_t least = UINT32_MAX;
    for (size_t i = 0; i < rt->nhead; i++)
        if (r->local[rt->head[i].sample] < least)
            least = r->local[rt->head[i].sample];
    const struct roots_pass *p = &rt->pass;
    uint64_t small = 0;
    for (size_t d = 1; d <= ROOTS_PASS_MAX_STRIDE; d++)
        small += p->stride_steps[d];
    if (small * 3 >= p->steps * 2 && least < NARROW_OPENS)
        return;
    int k = slot_of(r, rt->common, true);
    if (k < 0 || r->r[k] == rt)
        return;
    struct root *to = r->r[k];
    rt->narrowed = to;
    stop_identify(rt, after);
    /* Its other opens may be another folder's (images/val beside
     * images/train): kept anew, and told apart anew. */
    rt->nhead = 0;
    memset(&rt->pass, 0, sizeof(rt->pass));
    memset(rt->pass_in, 0, sizeof(rt->pass_in));
    cfs_info("identify: the first %d opens below %s all lie in %s: its dataset's root",
             NARROW_OPENS, rt->dir == CFS_ID_NONE ? "the mount's root" : rt->name, to->name);
    for (size_t i = 0; i < NARROW_OPENS; i++)
        if (r->route[rt->head[i].sample] == (uint8_t)(k + 1))
            feed(r, to, r->local[rt->head[i].sample], rt->head[i].pid, rt->head[i].ppid, after);
}

void cfs_roots_observe(struct cfs_roots *r, uint32_t sample, pid_t pid, pid_t ppid)
{
    if (sample >= r->nsamples)
        return;
    struct after_open after = {0};
    pthread_mutex_lock(&r->mu);
    struct root *rt = route(r, sample);
    if (rt) {
        feed(r, rt, r->local[sample], pid, ppid, &after);
        narrow(r, rt, sample, pid, ppid, &after);
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < after.nstop; i++)
        cfs_identify_destroy(after.stop[i]); /* no open reaches it now */
    struct root *pass = after.pass;
    if (pass && r->p.on_pass) {
        /* A root is kept to the end and its stride set once: no lock. */
        const uint32_t *map =
            pass->pass_order ? pass->orders.map[pass->pass_order - 1] : pass->map;
        struct cfs_root view = {.name = pass->name, .n = pass->n, .map = map};
        r->p.on_pass(r->p.cb_arg, &view, pass->stride);
    }
}

void cfs_roots_restart(struct cfs_roots *r)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nr; i++) {
        struct root *rt = r->r[i];
        if (rt->id)
            cfs_identify_restart(rt->id);
        rt->found = false;
        rt->opens = 0;
        if (r->p.identify.metrics && !rt->stride)
            cfs_metrics_root_set(r->p.identify.metrics, rt->gauge, 0);
    }
    r->last_found = NULL;
    pthread_mutex_unlock(&r->mu);
}

/* *id, the identification of the root named `name` (of n samples; 0:
 * any), for use outside `mu` until give_back: an open that stops it
 * meanwhile leaves it to give_back to destroy.  NULL (nothing borrowed,
 * *id NULL) when there is none. */
static struct root *borrow(struct cfs_roots *r, const char *name, uint64_t n,
                           struct cfs_identify **id)
{
    struct root *rt = NULL;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nr && !rt; i++)
        if (r->r[i]->id && (!n || r->r[i]->n == n) && strcmp(r->r[i]->name, name) == 0)
            rt = r->r[i];
    *id = rt ? rt->id : NULL;
    if (rt)
        rt->borrowed++;
    pthread_mutex_unlock(&r->mu);
    return rt;
}

static void give_back(struct cfs_roots *r, struct root *rt)
{
    if (!rt)
        return;
    struct cfs_identify *gone = NULL;
    pthread_mutex_lock(&r->mu);
    if (--rt->borrowed == 0)
        gone = rt->stopped, rt->stopped = NULL;
    pthread_mutex_unlock(&r->mu);
    cfs_identify_destroy(gone);
}

void cfs_roots_take_candidate(struct cfs_roots *r, const char *name, uint32_t seed, uint32_t skip)
{
    struct cfs_identify *id;
    struct root *rt = borrow(r, name, 0, &id);
    /* verified without the roots' lock (it copies the opens) */
    int rc = id ? cfs_identify_take_candidate(id, seed, skip) : 0;
    give_back(r, rt);
    if (rc == 1)
        cfs_info("identify: root %s: seed %u from another node's share fits this node's opens",
                 name[0] ? name : "(mount)", seed);
}

int cfs_roots_split_scan(struct cfs_roots *r, const char *name, const struct cfs_split_sets *s,
                         uint32_t node, uint32_t nodes, const _Atomic bool *cancel,
                         cfs_identify_split_found found, void *arg)
{
    struct cfs_identify *id = NULL;
    struct root *rt = r ? borrow(r, name, s->n, &id) : NULL;
    int rc = cfs_identify_split_scan_paced(id, r ? r->p.identify.metrics : NULL, s, node, nodes,
                                           cancel, found, arg);
    if (r)
        give_back(r, rt);
    return rc;
}

void cfs_roots_take_hint(struct cfs_roots *r, const char *name,
                         const struct cfs_sampler_params *hint)
{
    pthread_mutex_lock(&r->mu);
    r->late_hint = *hint;
    r->late_hint.list_path = NULL;
    snprintf(r->late_root, sizeof(r->late_root), "%s", name);
    r->late_set = true;
    for (size_t i = 0; i < r->nr; i++) {
        struct root *rt = r->r[i];
        if (rt->id && rt->n == hint->n && strcmp(rt->name, name) == 0)
            cfs_identify_take_hint(rt->id, hint);
    }
    pthread_mutex_unlock(&r->mu);
}

/* The root the data path's questions are about (mu held): the one last
 * identified, else the one most opened; NULL before any open. */
static struct root *current(struct cfs_roots *r)
{
    struct root *best = r->last_found;
    for (size_t i = 0; !best && i < r->nr; i++)
        if (r->r[i]->id && (!best || r->r[i]->opens > best->opens))
            best = r->r[i];
    for (size_t i = 0; !best && i < r->nr; i++)
        if (!best || r->r[i]->opens > best->opens)
            best = r->r[i];
    return best;
}

enum cfs_identify_state cfs_roots_state(struct cfs_roots *r, struct cfs_identified *out)
{
    enum cfs_identify_state st = CFS_IDENTIFY_LEARNING;
    pthread_mutex_lock(&r->mu);
    struct root *rt = current(r);
    if (rt && rt->id)
        st = cfs_identify_state(rt->id, out);
    else if (rt)
        st = CFS_IDENTIFY_NOT_A_SHUFFLE; /* an unshuffled pass */
    pthread_mutex_unlock(&r->mu);
    return st;
}

bool cfs_roots_scan_share(struct cfs_roots *r, double *share)
{
    bool any = false;
    double least = -1;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nr; i++) {
        double s;
        if (r->r[i]->id && cfs_identify_scan_share(r->r[i]->id, &s)) {
            any = true;
            if (least < 0 || (s >= 0 && s < least))
                least = s;
        }
    }
    pthread_mutex_unlock(&r->mu);
    *share = least;
    return any;
}

/* One root's clause: "train: identified ...", "val: sequential, world=2". */
static int clause(struct root *rt, char *buf, size_t len)
{
    const char *name = rt->dir == CFS_ID_NONE ? "." : rt->name;
    struct cfs_identified got;
    if (rt->stride)
        return snprintf(buf, len, "%s: sequential, world=%u%s%s (%" PRIu64 " opens)", name,
                        rt->stride, rt->pass_order ? " order=" : "",
                        rt->pass_order ? rt->orders.name[rt->pass_order - 1] : "", rt->opens);
    if (rt->narrowed && !rt->id)
        return snprintf(buf, len, "%s: its opens are %s's (%" PRIu64 " opens)", name,
                        rt->narrowed->name, rt->opens);
    enum cfs_identify_state st = rt->id ? cfs_identify_state(rt->id, &got) : CFS_IDENTIFY_LEARNING;
    if (st == CFS_IDENTIFY_IDENTIFIED)
        return snprintf(buf, len, "%s: %s", name, got.text);
    return snprintf(buf, len, "%s: %s (%" PRIu64 " opens)", name,
                    st == CFS_IDENTIFY_NOT_A_SHUFFLE ? "not a torch shuffle" : "learning",
                    rt->opens);
}

void cfs_roots_text(struct cfs_roots *r, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nr && at < len; i++) {
        if (i && at + 2 < len) {
            memcpy(buf + at, "; ", 3);
            at += 2;
        }
        int k = clause(r->r[i], buf + at, len - at);
        at += k > 0 ? (size_t)k : 0;
    }
    pthread_mutex_unlock(&r->mu);
    if (at >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
}
