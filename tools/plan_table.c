/* clairfs-plan --env: what clairfs would do on a cluster we cannot run on.
 *
 * For each node count, the run is planned as the distributed mounts would
 * plan it (world = nodes x ranks_per_node trainer ranks, the description's
 * RAM and SSD per node), every node's stream is replayed through the
 * simulator (clairfs/sim.h), and each policy's bytes per node and source
 * become epoch times through the epoch-time model (clairfs/epoch_model.h).
 *
 * The sampled model.  Planning is exact but costs a sweep of every epoch
 * per node: 14 M files x 256 nodes would take hours and tens of GB.  The
 * catalog simulated may therefore be smaller than the dataset it stands
 * for (--synthetic FILES --sample N): capacities are divided by
 * FILES / N and every count and byte multiplied by it.  Under random
 * sampling what a policy achieves depends on capacity relative to the
 * dataset and on the node count, not on the file count, as long as every
 * trainer rank still reads enough files per epoch to average over (the
 * table says how many it simulated). */
#include "plan_table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/epoch_model.h"
#include "clairfs/plan.h"
#include "clairfs/run_config.h"
#include "clairfs/sim.h"

#define ERRLEN 512
#define GB 1e9

/* One node count: every node's epochs under every policy. */
struct group {
    uint32_t nodes, nepochs, start_epoch;
    struct cfs_epoch_node *ep; /* [policy][epoch][node] */
};

static struct cfs_epoch_node *at(const struct group *g, int pol, uint32_t e, uint32_t j)
{
    return &g->ep[((size_t)pol * g->nepochs + e) * g->nodes + j];
}

/* Node j's simulated epochs, scaled, into g. */
static void fill_node(struct group *g, uint32_t j, const struct cfs_sim_result *r, double scale,
                      uint32_t ranks, double ssd_fraction)
{
    for (int pol = 0; pol < CFS_SIM_POLICIES; pol++) {
        for (uint32_t e = 0; e < g->nepochs; e++) {
            const struct cfs_sim_epoch *x = &r->epoch[pol][e];
            *at(g, pol, e, j) = (struct cfs_epoch_node){
                .samples = (double)x->reads * scale / (ranks ? ranks : 1),
                .local_reads = (double)x->local_hits * scale,
                .local_bytes = (double)x->local_bytes * scale,
                .peer_reads = (double)x->peer_reads * scale,
                .peer_bytes = (double)x->peer_bytes * scale,
                .pfs_reads = (double)x->pfs_reads * scale,
                .pfs_bytes = (double)x->pfs_bytes * scale,
                .ssd_fraction = ssd_fraction,
            };
        }
    }
}

/* Plans and simulates node j of the run. */
static int simulate_node(struct group *g, uint32_t j, struct cfs_plan_params pp,
                         const struct cfs_run_config *run, double scale, char *err, size_t errlen)
{
    struct cfs_plan *plan = NULL;
    struct cfs_sim_result res = {0};
    pp.node = j;
    int rc = cfs_plan_create(&pp, &plan, err, errlen);
    if (rc == 0 && (rc = cfs_sim_result_init(&res, plan)) < 0)
        snprintf(err, errlen, "%s", strerror(-rc));
    if (rc == 0)
        rc = cfs_sim_run(plan, &res, err, errlen);
    if (rc == 0) {
        struct cfs_plan_node_summary s;
        cfs_plan_node_summary(plan, j, &s);
        /* Hits split as the planned placement holds the node's bytes. */
        double ram = (double)s.bytes[CFS_TIER_RAM], ssd = (double)s.bytes[CFS_TIER_SSD];
        g->nepochs = cfs_plan_epoch_count(plan);
        fill_node(g, j, &res, scale, run->node_ranks[j].count,
                  ram + ssd > 0 ? ssd / (ram + ssd) : 0);
    }
    cfs_sim_result_free(&res);
    cfs_plan_destroy(plan);
    return rc;
}

/* The run of g->nodes nodes, every node simulated. */
static int simulate_group(const struct plan_table_params *p, const uint64_t *sizes, double scale,
                          struct group *g, char *err, size_t errlen)
{
    const struct cfs_cluster_env *env = p->env;
    struct cfs_options o = *p->opts; /* shallow: nothing of it is freed here */
    o.world = g->nodes * env->ranks_per_node;
    o.has_ranks = false;
    struct cfs_run_inputs in = {
        .opts = &o, .nsamples = cfs_catalog_sample_count(p->cat), .nodes = g->nodes, .node = 0};
    struct cfs_run_config run = {0};
    int rc = cfs_run_config_make(&in, &run, err, errlen);
    if (rc < 0)
        return rc;
    run.ram = (uint64_t)((double)env->ram / scale);
    run.ssd = (uint64_t)((double)env->ssd / scale);
    struct cfs_plan_params pp;
    cfs_run_config_plan_params(&run, sizes, &pp);
    /* The table's epochs, all of them: the model compares policies over
     * those epochs (static pinning chooses from their reads), not the
     * mount's window; a sampled run plans them in seconds. */
    pp.epochs = run.epochs;
    g->start_epoch = run.start_epoch;
    g->nepochs = run.epochs - run.start_epoch;
    g->ep =
        calloc((size_t)CFS_SIM_POLICIES * (g->nepochs ? g->nepochs : 1) * g->nodes, sizeof(*g->ep));
    if (!g->ep) {
        snprintf(err, errlen, "%s", strerror(ENOMEM));
        rc = -ENOMEM;
    }
    for (uint32_t j = 0; rc == 0 && j < g->nodes; j++)
        rc = simulate_node(g, j, pp, &run, scale, err, errlen);
    cfs_run_config_free(&run);
    return rc;
}

/* A policy's figures over epochs [from, nepochs), per epoch. */
struct policy_row {
    double pfs_e0, pfs, peer, local; /* bytes, summed over nodes */
    double time_e0, time, compute;   /* s */
    enum cfs_epoch_bound bound;      /* of the last epoch */
    struct cfs_epoch_time *et;       /* nepochs */
};

static void policy_row(const struct plan_table_params *p, const struct group *g, int pol,
                       struct policy_row *row)
{
    uint32_t from = g->nepochs > 1 ? 1 : 0, late = g->nepochs - from;
    for (uint32_t e = 0; e < g->nepochs; e++) {
        struct cfs_epoch_time *t = &row->et[e];
        cfs_epoch_model(p->env, at(g, pol, e, 0), g->nodes, t);
        double pfs = 0, peer = 0, local = 0;
        for (uint32_t j = 0; j < g->nodes; j++) {
            pfs += at(g, pol, e, j)->pfs_bytes;
            peer += at(g, pol, e, j)->peer_bytes;
            local += at(g, pol, e, j)->local_bytes;
        }
        if (e == 0) {
            row->pfs_e0 = pfs;
            row->time_e0 = t->total;
        }
        if (e >= from) {
            row->pfs += pfs / late;
            row->peer += peer / late;
            row->local += local / late;
            row->time += t->total / late;
            row->compute += t->compute / late;
            row->bound = t->bound;
        }
    }
}

static void print_header(const struct plan_table_params *p, double bytes, uint64_t simulated,
                         const struct group *g)
{
    const struct cfs_cluster_env *e = p->env;
    if (p->json) {
        printf("{\"env\":{\"name\":\"%s\",\"ranks_per_node\":%u,\"ram\":%" PRIu64
               ",\"ssd\":%" PRIu64 ",\"compute_per_sample\":%g,\"net_bw\":%.0f},"
               "\"dataset\":{\"files\":%" PRIu64 ",\"simulated_files\":%" PRIu64
               ",\"bytes\":%.0f,\"start_epoch\":%u,\"epochs\":%u},\"rows\":[",
               e->name, e->ranks_per_node, e->ram, e->ssd, e->compute_per_sample, e->net_bw,
               p->files, simulated, bytes, g->start_epoch, g->nepochs);
        return;
    }
    printf("cluster %s: %u ranks/node, %.1f GiB RAM + %.1f GiB SSD per node, %.3g ms compute "
           "per sample and rank\n",
           e->name, e->ranks_per_node, (double)e->ram / (1u << 30), (double)e->ssd / (1u << 30),
           e->compute_per_sample * 1e3);
    printf("dataset: %" PRIu64 " files, %.1f GB; simulated %" PRIu64 " files (x%.4g); epochs "
           "%u-%u planned; after = mean of epochs %u-%u\n",
           p->files, bytes / GB, simulated, (double)p->files / (double)simulated, g->start_epoch,
           g->start_epoch + g->nepochs - 1, g->start_epoch + (g->nepochs > 1),
           g->start_epoch + g->nepochs - 1);
    printf("%5s %-12s %10s %12s %13s %9s %9s %11s %7s %8s\n", "nodes", "policy", "pfs_GB_e0",
           "pfs_GB/epoch", "peer_GB/epoch", "epoch0_s", "epoch_s", "no_io_s", "x_no_io", "bound");
}

static void print_group(const struct plan_table_params *p, const struct group *g,
                        struct policy_row *rows, bool *first)
{
    for (int pol = 0; pol < CFS_SIM_POLICIES; pol++) {
        const struct policy_row *r = &rows[pol];
        if (!p->json) {
            printf("%5u %-12s %10.2f %12.2f %13.2f %9.2f %9.2f %11.2f %7.2f %8s\n", g->nodes,
                   cfs_sim_policy_name(pol), r->pfs_e0 / GB, r->pfs / GB, r->peer / GB, r->time_e0,
                   r->time, r->compute, r->compute > 0 ? r->time / r->compute : 0,
                   cfs_epoch_bound_name(r->bound));
            continue;
        }
        printf("%s{\"nodes\":%u,\"policy\":\"%s\",\"pfs_bytes_epoch0\":%.0f,"
               "\"pfs_bytes_per_epoch_after\":%.0f,\"peer_bytes_per_epoch_after\":%.0f,"
               "\"local_bytes_per_epoch_after\":%.0f,\"epoch0_time\":%.6g,"
               "\"epoch_time_after\":%.6g,\"no_io_time_after\":%.6g,\"epochs\":[",
               *first ? "" : ",", g->nodes, cfs_sim_policy_name(pol), r->pfs_e0, r->pfs, r->peer,
               r->local, r->time_e0, r->time, r->compute);
        *first = false;
        for (uint32_t e = 0; e < g->nepochs; e++) {
            const struct cfs_epoch_time *t = &r->et[e];
            double pfs = 0;
            for (uint32_t j = 0; j < g->nodes; j++)
                pfs += at(g, pol, e, j)->pfs_bytes;
            printf("%s{\"epoch\":%u,\"pfs_bytes\":%.0f,\"readers\":%u,\"pfs_share\":%.6g,"
                   "\"compute\":%.6g,\"io\":%.6g,\"time\":%.6g,\"bound\":\"%s\"}",
                   e ? "," : "", g->start_epoch + e, pfs, t->readers, t->pfs_share, t->compute,
                   t->io, t->total, cfs_epoch_bound_name(t->bound));
        }
        printf("]}");
    }
}

int plan_table_run(const char *prog, const struct plan_table_params *p)
{
    char err[ERRLEN] = "";
    uint64_t n = cfs_catalog_sample_count(p->cat);
    double scale = n ? (double)p->files / (double)n : 1, bytes = 0;
    uint64_t *sizes = malloc((n ? n : 1) * sizeof(*sizes));
    int rc = 0;
    bool first = true;
    if (!sizes) {
        fprintf(stderr, "%s: %s\n", prog, strerror(ENOMEM));
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < n; i++) {
        sizes[i] = cfs_catalog_entry(p->cat, cfs_catalog_sample_entry(p->cat, i))->size;
        bytes += (double)sizes[i] * scale;
    }
    for (uint32_t k = 0; rc == 0 && k < p->nnodes; k++) {
        struct group g = {.nodes = p->nodes[k]};
        struct policy_row rows[CFS_SIM_POLICIES] = {{0}};
        rc = simulate_group(p, sizes, scale, &g, err, sizeof(err));
        for (int pol = 0; rc == 0 && pol < CFS_SIM_POLICIES; pol++) {
            rows[pol].et = calloc(g.nepochs ? g.nepochs : 1, sizeof(*rows[pol].et));
            if (!rows[pol].et) {
                snprintf(err, sizeof(err), "%s", strerror(ENOMEM));
                rc = -ENOMEM;
            } else {
                policy_row(p, &g, pol, &rows[pol]);
            }
        }
        if (rc == 0 && k == 0)
            print_header(p, bytes, n, &g);
        if (rc == 0)
            print_group(p, &g, rows, &first);
        else
            fprintf(stderr, "%s: %u nodes: %s\n", prog, g.nodes, err[0] ? err : strerror(-rc));
        for (int pol = 0; pol < CFS_SIM_POLICIES; pol++)
            free(rows[pol].et);
        free(g.ep);
        fflush(stdout);
    }
    if (rc == 0 && p->json)
        printf("]}\n");
    free(sizes);
    return rc;
}
