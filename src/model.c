/* The performance model; the design is at the top of include/clairfs/model.h. */
#include "clairfs/model.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cfs_model {
    struct cfs_model_params p;
    uint32_t nodes, clients;
    /* Per node: the measured latency as bits of a double (0: none).  A
     * lost update between two completions only delays the mean by one
     * sample. */
    _Atomic uint64_t *lat;
    _Atomic uint32_t *passed; /* per node: PFS choices since the last probe */
    _Atomic uint64_t pfs_lat; /* bits of a double, 0: none */
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

static int parse_value(const char *s, bool bytes, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || !isfinite(v))
        return -EINVAL;
    if (bytes && *end) {
        static const char units[] = "KMGT";
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u)
            return -EINVAL;
        v *= pow(1024.0, (double)(u - units + 1));
        end++;
        if (*end == 'i' || *end == 'B')
            end++;
        if (*end == 'B')
            end++;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -EINVAL;
    *out = v;
    return 0;
}

int cfs_model_load(const char *path, struct cfs_model_params *p, char *err, size_t errlen)
{
    static const struct {
        const char *key;
        size_t off;
        bool bytes;
    } keys[] = {
        {"pfs_bw", offsetof(struct cfs_model_params, pfs_bw), true},
        {"pfs_client_bw", offsetof(struct cfs_model_params, pfs_client_bw), true},
        {"pfs_latency", offsetof(struct cfs_model_params, pfs_latency), false},
        {"net_bw", offsetof(struct cfs_model_params, net_bw), true},
        {"net_latency", offsetof(struct cfs_model_params, net_latency), false},
        {"ram_bw", offsetof(struct cfs_model_params, ram_bw), true},
        {"ssd_bw", offsetof(struct cfs_model_params, ssd_bw), true},
    };
    FILE *f = fopen(path, "re");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "model %s: %s", path, strerror(errno));
        return rc;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;
    struct cfs_model_params np = *p;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        char *s = line, *hash = strchr(s, '#');
        if (hash)
            *hash = '\0';
        while (isspace((unsigned char)*s))
            s++;
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            s[--n] = '\0';
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%u: expected key = value", path, lineno);
            rc = -EINVAL;
            break;
        }
        char *k = s, *ke = eq;
        while (ke > k && isspace((unsigned char)ke[-1]))
            ke--;
        *ke = '\0';
        char *v = eq + 1;
        while (isspace((unsigned char)*v))
            v++;
        size_t i;
        for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (strcmp(keys[i].key, k) == 0)
                break;
        if (i == sizeof(keys) / sizeof(keys[0])) {
            snprintf(err, errlen, "%s:%u: unknown key '%s'", path, lineno, k);
            rc = -EINVAL;
            break;
        }
        double d;
        if (parse_value(v, keys[i].bytes, &d) < 0 || (keys[i].bytes && d <= 0)) {
            snprintf(err, errlen, "%s:%u: %s = %s: expected a %s", path, lineno, k, v,
                     keys[i].bytes ? "positive bandwidth in bytes/s (K/M/G/T suffix)"
                                   : "time in seconds");
            rc = -EINVAL;
            break;
        }
        *(double *)((char *)&np + keys[i].off) = d;
        np.fixed |= 1u << i;
    }
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "model %s: read error", path);
    }
    if (rc == 0)
        *p = np;
    free(line);
    fclose(f);
    return rc;
}

int cfs_model_create(const struct cfs_model_params *p, uint32_t nodes, uint32_t clients,
                     struct cfs_model **out)
{
    struct cfs_model *m = calloc(1, sizeof(*m));
    *out = NULL;
    if (!m)
        return -ENOMEM;
    m->lat = calloc(nodes ? nodes : 1, sizeof(*m->lat));
    m->passed = calloc(nodes ? nodes : 1, sizeof(*m->passed));
    if (!m->lat || !m->passed) {
        free(m->lat);
        free(m->passed);
        free(m);
        return -ENOMEM;
    }
    m->p = *p;
    m->nodes = nodes;
    m->clients = clients ? clients : 1;
    *out = m;
    return 0;
}

void cfs_model_destroy(struct cfs_model *m)
{
    if (!m)
        return;
    free(m->lat);
    free(m->passed);
    free(m);
}

static double load_lat(const struct cfs_model *m, uint32_t node)
{
    if (node >= m->nodes)
        return 0;
    uint64_t bits = atomic_load_explicit(&m->lat[node], memory_order_relaxed);
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

double cfs_model_measured_latency(const struct cfs_model *m, uint32_t node)
{
    return load_lat(m, node);
}

static double bits_double(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

static uint64_t double_bits(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    return bits;
}

static double pfs_share(const struct cfs_model *m)
{
    double share = m->p.pfs_bw / (double)m->clients;
    return share > m->p.pfs_client_bw ? m->p.pfs_client_bw : share;
}

double cfs_model_pfs_latency(const struct cfs_model *m)
{
    double lat = bits_double(atomic_load_explicit(&m->pfs_lat, memory_order_relaxed));
    return lat > 0 ? lat : m->p.pfs_latency;
}

double cfs_model_pfs_time(const struct cfs_model *m, uint64_t size)
{
    return cfs_model_pfs_latency(m) + (double)size / pfs_share(m);
}

static double link_bw(const struct cfs_model *m, enum cfs_tier tier)
{
    double bw = m->p.net_bw;
    double tbw = tier == CFS_TIER_SSD ? m->p.ssd_bw : m->p.ram_bw;
    return tbw < bw ? tbw : bw;
}

double cfs_model_peer_time(const struct cfs_model *m, uint32_t node, enum cfs_tier tier,
                           uint64_t size)
{
    /* The measured latency replaces the configured one once known: it is
     * what this peer, loaded as it is, actually answers in. */
    double lat = load_lat(m, node);
    if (!(lat > 0))
        lat = m->p.net_latency;
    return lat + (double)size / link_bw(m, tier);
}

enum cfs_model_source cfs_model_choose(struct cfs_model *m, uint32_t node,
                                       enum cfs_tier tier, uint64_t size, bool slow)
{
    if (slow || node >= m->nodes)
        return CFS_MODEL_PFS;
    if (cfs_model_peer_time(m, node, tier, size) <= cfs_model_pfs_time(m, size))
        return CFS_MODEL_PEER;
    /* A measurement is only refreshed by asking: without a probe now and
     * then, one slow spell would send everything to the PFS for good. */
    if (atomic_fetch_add_explicit(&m->passed[node], 1, memory_order_relaxed) %
            CFS_MODEL_PROBE_EVERY ==
        CFS_MODEL_PROBE_EVERY - 1)
        return CFS_MODEL_PEER;
    return CFS_MODEL_PFS;
}

void cfs_model_observe(struct cfs_model *m, uint32_t node, uint64_t bytes, double seconds)
{
    if (node >= m->nodes || !(seconds > 0) || m->p.fixed & CFS_MODEL_FIXED_NET_LATENCY)
        return;
    /* Minus the transfer at the modelled bandwidth: a latency, comparable
     * across file sizes (a rate would not be). */
    double sample = seconds - (double)bytes / link_bw(m, CFS_TIER_RAM);
    if (sample < 1e-6)
        sample = 1e-6;
    double old = load_lat(m, node);
    if (!(old > 0))
        old = m->p.net_latency; /* the prior: one odd first answer moves it by 1/8 */
    atomic_store_explicit(&m->lat[node], double_bits(old + (sample - old) / 8.0),
                          memory_order_relaxed);
}

void cfs_model_peer_done(struct cfs_model *m, uint32_t node, uint64_t bytes, uint64_t t0_ns,
                         uint64_t now_ns)
{
    if (node >= m->nodes)
        return;
    cfs_model_observe(m, node, bytes, now_ns > t0_ns ? (double)(now_ns - t0_ns) * 1e-9 : 0);
}

void cfs_model_pfs_done(struct cfs_model *m, uint64_t bytes, uint64_t t0_ns, uint64_t now_ns)
{
    double secs = now_ns > t0_ns ? (double)(now_ns - t0_ns) * 1e-9 : 0;
    if (m->p.fixed & CFS_MODEL_FIXED_PFS_LATENCY || !(secs > 0))
        return;
    double sample = secs - (double)bytes / pfs_share(m);
    if (sample < 1e-6)
        sample = 1e-6;
    double old = cfs_model_pfs_latency(m);
    atomic_store_explicit(&m->pfs_lat, double_bits(old + (sample - old) / 8.0),
                          memory_order_relaxed);
}
