/* clairfs-plan: the planner offline.  Same options as the mount; prints the
 * plan summary, the simulated policies, or one rank's order of one epoch.
 *
 * --print-order writes each relative path as its raw bytes followed by a
 * newline (with -0, a NUL).  A name that contains a newline is therefore
 * ambiguous in the default output: use -0 for such datasets. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/catalog.h"
#include "clairfs/options.h"
#include "clairfs/plan.h"
#include "clairfs/sampler.h"
#include "clairfs/sim.h"

#define ERRLEN 512

static const char *prog = "clairfs-plan";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-o OPT[,OPT...]] [--nodes N] [--node I] [--json] [--no-sim]\n"
            "       %*s [--print-order RANK EPOCH [-0]] [--synthetic N [--mean-size BYTES]]\n"
            "       %*s SOURCE\n"
            "\n"
            "Plans the reads of a trainer from its sampler seed, as the mount does, and\n"
            "simulates no cache, LRU, static frequency pinning (NoPFS) and the clairvoyant\n"
            "policy (Belady eviction, prefetch in access order) for the given ram=/ssd=.\n"
            "\n"
            "    --nodes N                 nodes (MPI ranks of the mount), default 1\n"
            "    --node I                  plan and simulate node I only (default: summary of\n"
            "                              every node, simulation summed over all nodes)\n"
            "    --json                    machine-readable output\n"
            "    --no-sim                  plan summary only\n"
            "    --print-order RANK EPOCH  relative paths trainer rank RANK reads in EPOCH,\n"
            "                              one per line, in order (raw bytes)\n"
            "    -0, --null                with --print-order: end each path with NUL\n"
            "    --synthetic N             N synthetic files instead of SOURCE\n"
            "    --mean-size BYTES         their mean size (K/M/G suffixes), default 110K\n"
            "    -h, --help                this text\n"
            "\n"
            "Options (-o), as for the mount; seed= is required:\n",
            prog, (int)strlen(prog), "", (int)strlen(prog), "");
    cfs_options_print_help(f);
}

static void die(const char *msg)
{
    fprintf(stderr, "%s: %s\n", prog, msg);
}

/* One line for what getopt_long (opterr = 0) rejected: c is '?' or ':',
 * arg the argument it was looking at. */
static void getopt_error(int c, const char *arg)
{
    bool is_long = strncmp(arg, "--", 2) == 0;
    const char *what = c == ':'                  ? "missing value for"
                       : is_long && optopt != 0 ? "no value allowed for" /* --json=3 */
                                                : "unknown option";
    if (is_long)
        fprintf(stderr, "%s: %s %s (see --help)\n", prog, what, arg);
    else
        fprintf(stderr, "%s: %s -%c (see --help)\n", prog, what, optopt);
}

static int print_order(const struct cfs_catalog *cat, const struct cfs_sampler_params *sp,
                       uint64_t rank, uint64_t epoch, char sep)
{
    char err[ERRLEN] = "";
    struct cfs_sampler *s = NULL;
    int rc = cfs_sampler_create(sp, &s, err, sizeof(err));
    if (rc < 0) {
        die(err[0] ? err : strerror(-rc));
        return 1;
    }
    if (rank >= sp->world) {
        fprintf(stderr, "%s: --print-order %" PRIu64 ": rank must be below world=%u\n", prog,
                rank, sp->world);
        cfs_sampler_destroy(s);
        return 1;
    }
    rc = cfs_sampler_compute_epoch(s, (uint32_t)epoch);
    if (rc < 0) {
        const char *why = cfs_sampler_error(s);
        fprintf(stderr, "%s: --print-order epoch %" PRIu64 ": %s\n", prog, epoch,
                why[0] ? why : strerror(-rc));
        cfs_sampler_destroy(s);
        return 1;
    }
    uint64_t len = cfs_sampler_rank_len(s, (uint32_t)epoch, (uint32_t)rank);
    char *path = malloc(65536);
    int ret = 0;
    for (uint64_t i = 0; path && i < len; i++) {
        uint32_t sample = cfs_sampler_rank_at(s, (uint32_t)rank, i);
        int l = cfs_catalog_path(cat, cfs_catalog_sample_entry(cat, sample), path, 65536);
        if (l < 0) {
            fprintf(stderr, "%s: sample %u: %s\n", prog, sample, strerror(-l));
            ret = 1;
            break;
        }
        fwrite(path, 1, (size_t)l, stdout);
        putchar(sep);
    }
    if (!path)
        ret = 1;
    free(path);
    cfs_sampler_destroy(s);
    if (fflush(stdout) != 0)
        ret = 1;
    return ret;
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void print_summary(const struct cfs_plan *p, bool json, uint32_t only)
{
    uint32_t nodes = cfs_plan_nodes(p), ne = cfs_plan_epoch_count(p);
    if (!json) {
        printf("dataset: %" PRIu64 " files, %" PRIu64 " bytes; %u epochs planned; distinct bytes "
               "held cluster-wide: %" PRIu64 " (%.1f%%)\n",
               cfs_plan_sample_count(p), cfs_plan_dataset_bytes(p), ne, cfs_plan_owned_bytes(p),
               pct(cfs_plan_owned_bytes(p), cfs_plan_dataset_bytes(p)));
        printf("%5s %11s %12s %10s %14s %10s %14s %10s %14s %16s %16s\n", "node", "ranks", "reads",
               "ram_files", "ram_bytes", "ssd_files", "ssd_bytes", "owned", "owned_bytes",
               "pfs_bytes/epoch", "peer_bytes/epoch");
    } else {
        printf("\"dataset\":{\"files\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"epochs\":%u,"
               "\"owned_bytes\":%" PRIu64 "},\"nodes\":[",
               cfs_plan_sample_count(p), cfs_plan_dataset_bytes(p), ne, cfs_plan_owned_bytes(p));
    }
    bool firstj = true;
    for (uint32_t j = 0; j < nodes; j++) {
        if (only != CFS_NODE_NONE && j != only)
            continue;
        struct cfs_plan_node_summary s;
        cfs_plan_node_summary(p, j, &s);
        char ranks[32];
        if (s.ranks.count)
            snprintf(ranks, sizeof(ranks), "%u-%u", s.ranks.first, s.ranks.first + s.ranks.count - 1);
        else
            snprintf(ranks, sizeof(ranks), "-");
        if (!json) {
            printf("%5u %11s %12" PRIu64 " %10" PRIu64 " %14" PRIu64 " %10" PRIu64 " %14" PRIu64
                   " %10" PRIu64 " %14" PRIu64 " %16" PRIu64 " %16" PRIu64 "\n",
                   j, ranks, s.reads, s.files[CFS_PLAN_TIER_RAM], s.bytes[CFS_PLAN_TIER_RAM],
                   s.files[CFS_PLAN_TIER_SSD], s.bytes[CFS_PLAN_TIER_SSD], s.owned_files, s.owned_bytes,
                   s.pfs_read_bytes / ne, s.peer_read_bytes / ne);
        } else {
            printf("%s{\"node\":%u,\"rank_first\":%u,\"rank_count\":%u,\"reads\":%" PRIu64
                   ",\"read_bytes\":%" PRIu64 ",\"ram_files\":%" PRIu64 ",\"ram_bytes\":%" PRIu64
                   ",\"ssd_files\":%" PRIu64 ",\"ssd_bytes\":%" PRIu64
                   ",\"unheld_files\":%" PRIu64 ",\"owned_files\":%" PRIu64
                   ",\"owned_bytes\":%" PRIu64 ",\"local_read_bytes\":%" PRIu64
                   ",\"peer_read_bytes\":%" PRIu64 ",\"pfs_read_bytes\":%" PRIu64
                   ",\"pfs_bytes_per_epoch\":%" PRIu64 "}",
                   firstj ? "" : ",", j, s.ranks.first, s.ranks.count, s.reads, s.read_bytes,
                   s.files[CFS_PLAN_TIER_RAM], s.bytes[CFS_PLAN_TIER_RAM], s.files[CFS_PLAN_TIER_SSD],
                   s.bytes[CFS_PLAN_TIER_SSD], s.files[CFS_PLAN_TIER_NONE], s.owned_files, s.owned_bytes,
                   s.local_read_bytes, s.peer_read_bytes, s.pfs_read_bytes,
                   s.pfs_read_bytes / ne);
        }
        firstj = false;
    }
    if (json)
        printf("]");
}

static void print_sim(const struct cfs_sim_result *r, bool json, const char *simulated)
{
    uint32_t after = r->nepochs > 1 ? 1 : 0;
    if (!json) {
        printf("\nsimulation (%s; a hit is a read served from the node's own tiers):\n",
               simulated);
        printf("%-12s %8s %13s %13s %18s %20s\n", "policy", "hit%", "hit%_after_e0",
               "peer%_after_e0", "pfs_bytes_epoch0", "pfs_bytes/epoch_after");
    } else {
        printf(",\"simulation\":{\"simulated\":\"%s\",\"policies\":{", simulated);
    }
    for (int pol = 0; pol < CFS_SIM_POLICIES; pol++) {
        struct cfs_sim_epoch all = cfs_sim_sum(r, pol, 0), late = cfs_sim_sum(r, pol, after);
        struct cfs_sim_epoch e0 = r->epoch[pol][0];
        uint64_t late_epochs = r->nepochs - after;
        if (!json) {
            printf("%-12s %7.2f%% %12.2f%% %13.2f%% %18" PRIu64 " %20" PRIu64 "\n",
                   cfs_sim_policy_name(pol), pct(all.local_hits, all.reads),
                   pct(late.local_hits, late.reads), pct(late.peer_reads, late.reads),
                   e0.pfs_bytes, late_epochs ? late.pfs_bytes / late_epochs : 0);
            continue;
        }
        printf("%s\"%s\":{\"hit_rate\":%.6f,\"hit_rate_after_first_epoch\":%.6f,"
               "\"peer_rate_after_first_epoch\":%.6f,\"epochs\":[",
               pol ? "," : "", cfs_sim_policy_name(pol), pct(all.local_hits, all.reads) / 100,
               pct(late.local_hits, late.reads) / 100, pct(late.peer_reads, late.reads) / 100);
        for (uint32_t e = 0; e < r->nepochs; e++) {
            const struct cfs_sim_epoch *x = &r->epoch[pol][e];
            printf("%s{\"epoch\":%u,\"reads\":%" PRIu64 ",\"read_bytes\":%" PRIu64
                   ",\"local_hits\":%" PRIu64 ",\"local_bytes\":%" PRIu64 ",\"peer_reads\":%" PRIu64
                   ",\"peer_bytes\":%" PRIu64 ",\"pfs_reads\":%" PRIu64 ",\"pfs_bytes\":%" PRIu64
                   "}",
                   e ? "," : "", r->start_epoch + e, x->reads, x->read_bytes, x->local_hits,
                   x->local_bytes, x->peer_reads, x->peer_bytes, x->pfs_reads, x->pfs_bytes);
        }
        printf("]}");
    }
    if (json)
        printf("}}");
}

enum { OPT_NODES = 256, OPT_NODE, OPT_JSON, OPT_NOSIM, OPT_ORDER, OPT_SYNTH, OPT_MEAN };

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"nodes", required_argument, NULL, OPT_NODES},
        {"node", required_argument, NULL, OPT_NODE},
        {"json", no_argument, NULL, OPT_JSON},
        {"no-sim", no_argument, NULL, OPT_NOSIM},
        {"print-order", required_argument, NULL, OPT_ORDER},
        {"null", no_argument, NULL, '0'},
        {"synthetic", required_argument, NULL, OPT_SYNTH},
        {"mean-size", required_argument, NULL, OPT_MEAN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cfs_options o;
    struct cfs_catalog *cat = NULL;
    struct cfs_plan *plan = NULL;
    uint64_t *sizes = NULL;
    struct cfs_rank_range *ranks = NULL;
    struct cfs_sim_result res = {0};
    char err[ERRLEN] = "";
    uint64_t nodes = 1, node = 0, synthetic = 0, mean_size = 110 * 1024;
    uint64_t order_rank = 0, order_epoch = 0;
    bool has_node = false, json = false, nosim = false, has_order = false, has_synth = false;
    char sep = '\n';
    int ret = 1, rc, c;

    cfs_options_init(&o);
    opterr = 0; /* one line per error, ours */
    while ((c = getopt_long(argc, argv, ":o:h0", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (cfs_options_parse_list(&o, optarg, err, sizeof(err)) < 0) {
                die(err);
                goto out;
            }
            break;
        case OPT_NODES:
            if (cfs_parse_u64(optarg, 65535, &nodes) < 0 || nodes == 0) {
                fprintf(stderr, "%s: --nodes %s: expected 1..65535\n", prog, optarg);
                goto out;
            }
            break;
        case OPT_NODE:
            if (cfs_parse_u64(optarg, 65534, &node) < 0) {
                fprintf(stderr, "%s: --node %s: not a node number\n", prog, optarg);
                goto out;
            }
            has_node = true;
            break;
        case OPT_JSON: json = true; break;
        case OPT_NOSIM: nosim = true; break;
        case '0': sep = '\0'; break;
        case OPT_ORDER:
            if (cfs_parse_u64(optarg, UINT32_MAX, &order_rank) < 0) {
                fprintf(stderr, "%s: --print-order %s: RANK must be a number below 2^32\n",
                        prog, optarg);
                goto out;
            }
            if (optind >= argc ||
                cfs_parse_u64(argv[optind], UINT32_MAX, &order_epoch) < 0) {
                fprintf(stderr, "%s: --print-order %s %s: EPOCH must be a number below 2^32\n",
                        prog, optarg, optind < argc ? argv[optind] : "(missing)");
                goto out;
            }
            optind++;
            has_order = true;
            break;
        case OPT_SYNTH:
            if (cfs_parse_u64(optarg, UINT32_MAX - 1, &synthetic) < 0 || synthetic == 0) {
                fprintf(stderr, "%s: --synthetic %s: expected a file count\n", prog, optarg);
                goto out;
            }
            has_synth = true;
            break;
        case OPT_MEAN:
            if (cfs_parse_size(optarg, &mean_size) < 0) {
                fprintf(stderr, "%s: --mean-size %s: not a size\n", prog, optarg);
                goto out;
            }
            break;
        case 'h':
            usage(stdout);
            ret = 0;
            goto out;
        default:
            getopt_error(c, argv[optind - 1]);
            ret = 2;
            goto out;
        }
    }
    if (has_synth ? optind != argc : optind != argc - 1) {
        fprintf(stderr, "%s: %s (see --help)\n", prog,
                has_synth ? "--synthetic takes no SOURCE" : "expected one SOURCE directory");
        ret = 2;
        goto out;
    }
    if (cfs_options_validate(&o, err, sizeof(err)) < 0) {
        die(err);
        goto out;
    }
    if (!o.has_seed) {
        die("option seed=N is required: the plan is a function of the trainer's seed");
        goto out;
    }
    /* DistributedSampler seeds epoch e with seed+e, and torch refuses a
     * seed >= 2^64: say so now, naming the option, not mid-plan. */
    if (o.sampler == CFS_SAMPLER_TORCH_DDP) {
        uint64_t last = has_order ? order_epoch : o.epochs - 1;
        if (o.seed > UINT64_MAX - last) {
            fprintf(stderr, "%s: option seed=%" PRIu64 ": seed + epoch %" PRIu64
                    " exceeds 2^64-1 (torch's manual_seed would fail)\n", prog, o.seed, last);
            goto out;
        }
    }
    if (node >= nodes) {
        fprintf(stderr, "%s: --node %" PRIu64 ": must be below --nodes %" PRIu64 "\n", prog,
                node, nodes);
        goto out;
    }

    if (has_synth) {
        rc = cfs_catalog_synthetic(synthetic, mean_size, &cat);
        if (rc < 0) {
            fprintf(stderr, "%s: --synthetic %" PRIu64 ": %s\n", prog, synthetic, strerror(-rc));
            goto out;
        }
    } else {
        struct cfs_catalog_params cp = {.source = argv[optind], .order = o.order,
                                        .order_list = o.order_list, .index_dir = o.index_dir,
                                        .rescan = o.rescan};
        rc = cfs_catalog_open(&cp, &cat, err, sizeof(err));
        if (rc < 0) {
            die(err[0] ? err : strerror(-rc));
            goto out;
        }
    }
    uint64_t n = cfs_catalog_sample_count(cat);
    struct cfs_sampler_params sp;
    cfs_options_sampler_params(&o, n, &sp);

    if (has_order) {
        ret = print_order(cat, &sp, order_rank, order_epoch, sep);
        goto out;
    }

    sizes = malloc((n ? n : 1) * sizeof(*sizes));
    ranks = calloc(nodes, sizeof(*ranks));
    if (!sizes || !ranks) {
        die(strerror(ENOMEM));
        goto out;
    }
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = cfs_catalog_entry(cat, cfs_catalog_sample_entry(cat, i))->size;
    for (uint32_t j = 0; j < nodes; j++)
        cfs_plan_default_ranks(o.world, (uint32_t)nodes, j, &ranks[j]);
    if (o.has_ranks) /* ranks= speaks for the planned node; the others keep their blocks */
        ranks[node] = (struct cfs_rank_range){o.rank_first, o.rank_last - o.rank_first + 1};

    struct cfs_plan_params pp = {
        .n = n, .sizes = sizes, .sampler = sp, .world = o.world, .start_epoch = o.start_epoch,
        .epochs = o.epochs, .nodes = (uint32_t)nodes, .node = (uint32_t)node, .ranks = ranks,
        .ram = o.ram, .ssd = o.has_ssd ? o.ssd : 0,
    };
    rc = cfs_plan_create(&pp, &plan, err, sizeof(err));
    if (rc < 0) {
        die(err[0] ? err : strerror(-rc));
        goto out;
    }
    if (json)
        printf("{");
    print_summary(plan, json, has_node ? (uint32_t)node : CFS_NODE_NONE);
    if (!nosim) {
        if (cfs_sim_result_init(&res, plan) < 0) {
            die(strerror(ENOMEM));
            goto out;
        }
        char what[64];
        uint32_t lo = has_node ? (uint32_t)node : 0, hi = has_node ? (uint32_t)node : (uint32_t)nodes - 1;
        if (has_node)
            snprintf(what, sizeof(what), "node %u of %" PRIu64, lo, nodes);
        else
            snprintf(what, sizeof(what), "all %" PRIu64 " nodes", nodes);
        for (uint32_t j = lo; j <= hi; j++) {
            struct cfs_plan *pj = plan;
            if (j != node) {
                pp.node = j;
                rc = cfs_plan_create(&pp, &pj, err, sizeof(err));
                if (rc < 0) {
                    die(err);
                    goto out;
                }
            }
            rc = cfs_sim_run(pj, &res, err, sizeof(err));
            if (pj != plan)
                cfs_plan_destroy(pj);
            if (rc < 0) {
                die(err);
                goto out;
            }
        }
        print_sim(&res, json, what);
    }
    if (json)
        printf("}");
    printf("\n");
    ret = fflush(stdout) == 0 ? 0 : 1;
out:
    cfs_sim_result_free(&res);
    cfs_plan_destroy(plan);
    free(sizes);
    free(ranks);
    cfs_catalog_destroy(cat);
    cfs_options_free(&o);
    return ret;
}
