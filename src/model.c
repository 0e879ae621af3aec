/* The performance model; the design is at the top of include/clairfs/model.h. */
#include "clairfs/model.h"
#include "clairfs/key_value_file.h"
#include "clairfs/options.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One source's measured service: sums decayed by CFS_MODEL_DECAY per
 * completion, so that a burst of answers (a batch's REPLY completes its
 * files at once: the first carries the batch's whole wait, the others none)
 * averages over the batch instead of swinging with each file. */
struct svc {
    double secs;     /* service seconds */
    double bytes;    /* their bytes */
    double n;        /* completions (weights) */
    uint64_t last;   /* the latest completion, ns */
};

/* A least-squares line through the PFS's completions, seconds against
 * bytes, weighted as struct svc (no prior: measured completions only).  Its
 * slope is the bandwidth one fetch sees (the PFS's share at the load the
 * cluster puts on it, this node's concurrent fetches included), its
 * intercept the per-file latency: both as the fetches measure them. */
struct line_fit {
    double w, x, y, xx, xy; /* weight; sums of bytes, seconds, bytes^2, bytes*seconds */
};
/* The fit speaks once it has about a quarter of its window, over sizes
 * that vary (coefficient of variation >= 0.2: with files all of a size the
 * slope is noise, and the configured share splits the time instead). */
#define FIT_MIN_WEIGHT 16.0
#define FIT_MIN_CV2 0.04

struct cfs_model {
    struct cfs_model_params p;
    uint32_t nodes, clients;
    pthread_mutex_t mu; /* svc[], pfs_fit: the peer thread, io completions and openers report */
    struct svc *svc;    /* per node, then the PFS's at [nodes] */
    struct line_fit pfs_fit;
    _Atomic uint32_t *passed; /* per node: PFS choices since the last probe */
};

void cfs_model_defaults(struct cfs_model_params *out)
{
    /* A parallel filesystem shared with other jobs (a few GB/s for the
     * whole job, millisecond opens) and a 10 Gb/s network whose round trip
     * includes the peer thread's poll sleeps (peer.h). */
    *out = (struct cfs_model_params){
        .pfs_bw = 2e9,
        .pfs_client_bw = 1e9,
        .pfs_latency = 2e-3,
        .net_bw = 1.25e9,
        .net_latency = 1e-3,
        .ram_bw = 10e9,
        .ssd_bw = 1e9,
    };
}


/* The model file's keys: where each goes in the parameters, and whether
 * it is a bandwidth (else a time in seconds). */
static const struct {
    const char *key;
    size_t off;
    bool bytes;
} model_keys[] = {
    {"pfs_bw", offsetof(struct cfs_model_params, pfs_bw), true},
    {"pfs_client_bw", offsetof(struct cfs_model_params, pfs_client_bw), true},
    {"pfs_latency", offsetof(struct cfs_model_params, pfs_latency), false},
    {"net_bw", offsetof(struct cfs_model_params, net_bw), true},
    {"net_latency", offsetof(struct cfs_model_params, net_latency), false},
    {"ram_bw", offsetof(struct cfs_model_params, ram_bw), true},
    {"ssd_bw", offsetof(struct cfs_model_params, ssd_bw), true},
};
#define NMODEL_KEYS (sizeof(model_keys) / sizeof(model_keys[0]))

static int model_key(const char *k, char *v, const char *path, unsigned lineno, void *arg,
                     char *err, size_t errlen)
{
    struct cfs_model_params *np = arg;
    size_t i;
    for (i = 0; i < NMODEL_KEYS; i++)
        if (strcmp(model_keys[i].key, k) == 0)
            break;
    if (i == NMODEL_KEYS) {
        snprintf(err, errlen, "%s:%u: unknown key '%s'", path, lineno, k);
        return -EINVAL;
    }
    double d;
    if (cfs_parse_quantity(v, model_keys[i].bytes, &d) < 0 || (model_keys[i].bytes && d <= 0)) {
        snprintf(err, errlen, "%s:%u: %s = %s: expected a %s", path, lineno, k, v,
                 model_keys[i].bytes ? "positive bandwidth in bytes/s (K/M/G/T suffix)"
                                     : "time in seconds");
        return -EINVAL;
    }
    *(double *)((char *)np + model_keys[i].off) = d;
    np->fixed |= 1u << i;
    return 0;
}

int cfs_model_load(const char *path, struct cfs_model_params *p, char *err, size_t errlen)
{
    struct cfs_model_params np = *p;
    int rc = cfs_key_value_file_read(path, "model", model_key, &np, err, errlen);
    if (rc == 0)
        *p = np;
    return rc;
}

int cfs_model_create(const struct cfs_model_params *p, uint32_t nodes, uint32_t clients,
                     struct cfs_model **out)
{
    struct cfs_model *m = calloc(1, sizeof(*m));
    *out = NULL;
    if (!m)
        return -ENOMEM;
    m->svc = calloc((size_t)nodes + 1, sizeof(*m->svc));
    m->passed = calloc(nodes ? nodes : 1, sizeof(*m->passed));
    if (!m->svc || !m->passed) {
        free(m->svc);
        free(m->passed);
        free(m);
        return -ENOMEM;
    }
    m->p = *p;
    m->nodes = nodes;
    m->clients = clients ? clients : 1;
    /* The configured latencies as CFS_MODEL_PRIOR completions of no
     * bytes: one odd first answer moves them by 1/(PRIOR + 1). */
    for (uint32_t i = 0; i <= nodes; i++) {
        double lat = i < nodes ? p->net_latency : p->pfs_latency;
        m->svc[i] = (struct svc){.secs = lat * CFS_MODEL_PRIOR, .n = CFS_MODEL_PRIOR};
    }
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return 0;
}

void cfs_model_destroy(struct cfs_model *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->svc);
    free(m->passed);
    free(m);
}

static double pfs_share(const struct cfs_model *m)
{
    double share = m->p.pfs_bw / (double)m->clients;
    return share > m->p.pfs_client_bw ? m->p.pfs_client_bw : share;
}

static double link_bw(const struct cfs_model *m, enum cfs_tier tier)
{
    double bw = m->p.net_bw;
    double tbw = tier == CFS_TIER_SSD ? m->p.ssd_bw : m->p.ram_bw;
    return tbw < bw ? tbw : bw;
}

/* The latency of source i (node, or nodes: the PFS), measured: its service
 * time beyond the transfer at bandwidth bw, mean per completion (mu held). */
static double svc_latency(const struct cfs_model *m, uint32_t i, double bw)
{
    const struct svc *v = &m->svc[i];
    double lat = v->n > 0 ? (v->secs - v->bytes / bw) / v->n : 0;
    return lat > 1e-6 ? lat : 1e-6;
}

/* The measured latency of peer node (mu held); the configured one when
 * the model file fixes it. */
static double peer_latency(const struct cfs_model *m, uint32_t node)
{
    if (m->p.fixed & CFS_MODEL_FIXED_NET_LATENCY)
        return m->p.net_latency;
    return svc_latency(m, node, link_bw(m, CFS_TIER_RAM));
}

/* The measured line, when the PFS's figures are all left to measurement
 * and the completions say enough: latency and seconds per byte (mu held). */
static bool pfs_line(const struct cfs_model *m, double *lat, double *per_byte)
{
    const struct line_fit *f = &m->pfs_fit;
    if (m->p.fixed & CFS_MODEL_FIXED_PFS || f->w < FIT_MIN_WEIGHT || !(f->x > 0))
        return false;
    double sxx = f->w * f->xx - f->x * f->x; /* weight^2 x variance */
    if (!(sxx > FIT_MIN_CV2 * f->x * f->x))
        return false;
    double b = (f->w * f->xy - f->x * f->y) / sxx;
    if (!(b > 0) || !isfinite(b))
        return false; /* no bandwidth to see: time does not grow with size */
    double a = (f->y - b * f->x) / f->w;
    *lat = a > 1e-6 ? a : 1e-6;
    *per_byte = b;
    return true;
}

static double pfs_latency(const struct cfs_model *m)
{
    if (m->p.fixed & CFS_MODEL_FIXED_PFS_LATENCY)
        return m->p.pfs_latency;
    double lat, per_byte;
    if (pfs_line(m, &lat, &per_byte))
        return lat;
    return svc_latency(m, m->nodes, pfs_share(m));
}

double cfs_model_measured_latency(const struct cfs_model *m, uint32_t node)
{
    if (node >= m->nodes || m->p.fixed & CFS_MODEL_FIXED_NET_LATENCY)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    double lat = m->svc[node].n > CFS_MODEL_PRIOR ? peer_latency(m, node) : 0;
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return lat;
}

double cfs_model_pfs_latency(const struct cfs_model *m)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    double lat = pfs_latency(m);
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return lat;
}

double cfs_model_pfs_time(const struct cfs_model *m, uint64_t size)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    double lat, per_byte;
    double t = pfs_line(m, &lat, &per_byte) ? lat + (double)size * per_byte
                                            : pfs_latency(m) + (double)size / pfs_share(m);
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return t;
}

double cfs_model_pfs_bandwidth(const struct cfs_model *m)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    double lat, per_byte;
    double bw = pfs_line(m, &lat, &per_byte) ? 1.0 / per_byte : pfs_share(m);
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return bw;
}

double cfs_model_peer_time(const struct cfs_model *m, uint32_t node, enum cfs_tier tier,
                           uint64_t size, uint32_t queued)
{
    if (node >= m->nodes)
        return INFINITY;
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    double lat = peer_latency(m, node);
    /* What one file of the queue ahead holds the link: the mean service
     * time, the mean file's transfer included. */
    const struct svc *v = &m->svc[node];
    double per_file = v->n > 0 && !(m->p.fixed & CFS_MODEL_FIXED_NET_LATENCY)
                          ? v->secs / v->n
                          : lat + (double)size / link_bw(m, tier);
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return lat + (double)size / link_bw(m, tier) + (double)queued * per_file;
}

enum cfs_model_source cfs_model_choose(struct cfs_model *m, uint32_t node,
                                       enum cfs_tier tier, uint64_t size, uint32_t queued,
                                       bool slow)
{
    if (slow || node >= m->nodes)
        return CFS_MODEL_PFS;
    /* The holder unless it is clearly slower: the estimates swing by tens
     * of percent under load, and each PFS read of a held file is load the
     * cluster's memory was there to take off the shared PFS. */
    if (cfs_model_peer_time(m, node, tier, size, queued) <=
        CFS_MODEL_MARGIN * cfs_model_pfs_time(m, size))
        return CFS_MODEL_PEER;
    /* A measurement is only refreshed by asking: without a probe now and
     * then, one slow spell would send everything to the PFS for good. */
    if (atomic_fetch_add_explicit(&m->passed[node], 1, memory_order_relaxed) %
            CFS_MODEL_PROBE_EVERY ==
        CFS_MODEL_PROBE_EVERY - 1)
        return CFS_MODEL_PEER;
    return CFS_MODEL_PFS;
}

/* One completion of source i: bytes done at now (ns) that took seconds of
 * service (mu held). */
static void svc_add(struct svc *v, uint64_t bytes, double seconds)
{
    const double keep = 1.0 - CFS_MODEL_DECAY;
    v->secs = v->secs * keep + seconds;
    v->bytes = v->bytes * keep + (double)bytes;
    v->n = v->n * keep + 1.0;
}

void cfs_model_observe(struct cfs_model *m, uint32_t node, uint64_t bytes, double seconds)
{
    if (node >= m->nodes || !(seconds >= 0) || m->p.fixed & CFS_MODEL_FIXED_NET_LATENCY)
        return;
    pthread_mutex_lock(&m->mu);
    svc_add(&m->svc[node], bytes, seconds);
    pthread_mutex_unlock(&m->mu);
}

void cfs_model_peer_done(struct cfs_model *m, uint32_t node, uint64_t bytes, uint64_t t0_ns,
                         uint64_t now_ns)
{
    if (node >= m->nodes || m->p.fixed & CFS_MODEL_FIXED_NET_LATENCY || now_ns < t0_ns)
        return;
    /* From its submission or the peer's previous completion, whichever is
     * later: the peer answers in order, so a request that waited behind
     * others was served only since the one before it left; the wait
     * before is queueing, which cfs_model_peer_time adds from the queue's
     * length where the caller says it matters. */
    pthread_mutex_lock(&m->mu);
    struct svc *v = &m->svc[node];
    uint64_t from = v->last > t0_ns ? v->last : t0_ns;
    if (now_ns > v->last)
        v->last = now_ns;
    /* Reported from two threads (the peer thread, a direct read's opener),
     * completions may arrive a little out of order: served for nothing. */
    svc_add(v, bytes, now_ns > from ? (double)(now_ns - from) * 1e-9 : 0);
    pthread_mutex_unlock(&m->mu);
}

void cfs_model_pfs_done(struct cfs_model *m, uint64_t bytes, uint64_t t0_ns, uint64_t now_ns)
{
    if (m->p.fixed & CFS_MODEL_FIXED_PFS_LATENCY || now_ns < t0_ns)
        return;
    /* From its submission: the io engine runs this node's PFS fetches at
     * once (io_depth), so none waits behind another of ours, and what it
     * took is the PFS's latency at the load the cluster puts on it. */
    double secs = (double)(now_ns - t0_ns) * 1e-9, x = (double)bytes;
    const double keep = 1.0 - CFS_MODEL_DECAY;
    pthread_mutex_lock(&m->mu);
    svc_add(&m->svc[m->nodes], bytes, secs);
    struct line_fit *f = &m->pfs_fit;
    f->w = f->w * keep + 1.0;
    f->x = f->x * keep + x;
    f->y = f->y * keep + secs;
    f->xx = f->xx * keep + x * x;
    f->xy = f->xy * keep + x * secs;
    pthread_mutex_unlock(&m->mu);
}
