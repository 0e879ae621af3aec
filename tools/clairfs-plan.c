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
#include "clairfs/run_config.h"
#include "clairfs/sampler.h"
#include "clairfs/sim.h"
#include "plan_identify.h"
#include "plan_table.h"

#define ERRLEN 512

static const char *prog = "clairfs-plan";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-o OPT[,OPT...]] [--nodes N] [--node I] [--json] [--no-sim]\n"
            "       %*s [--print-order RANK EPOCH [-0]] [--synthetic N [--mean-size BYTES]]\n"
            "       %*s [--identify FILE [--seeds FIRST:COUNT[,FIRST:COUNT...]]]\n"
            "       %*s [--env NAME|FILE [--table N,N,...] [--sample N]] SOURCE\n"
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
            "    --identify FILE           which torch order the opens recorded in FILE are\n"
            "                              (one PATH, or PID PPID PATH, a line); exit 1: none\n"
            "    --seeds FIRST:COUNT[,...] with --identify: search these generator seeds only\n"
            "                              (default all 2^32, about a CPU minute or two;\n"
            "                              up to 64 ranges: the epochs of a torch-global\n"
            "                              trainer without a seed each have their own)\n"
            "    --env NAME|FILE           PFS bytes and epoch time per policy against the\n"
            "                              no-I/O lower bound on a cluster: a preset (lassen,\n"
            "                              lassen-ram) or a FILE of key = value lines; world,\n"
            "                              ram and ssd come from it\n"
            "    --table N,N,...           with --env: node counts, one row group each\n"
            "                              (default --nodes)\n"
            "    --sample N                with --env and --synthetic: simulate N files\n"
            "                              standing for the --synthetic count (counts and\n"
            "                              capacities scaled)\n"
            "    -h, --help                this text\n"
            "\n"
            "Options (-o), as for the mount; seed= is required (with --identify, options\n"
            "are hints, checked against the opens):\n",
            prog, (int)strlen(prog), "", (int)strlen(prog), "", (int)strlen(prog), "");
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

/* The plans of the nodes: the cluster's (one plan of every node), or with
 * no_peers each node's own (nodes plans of one node each). */
struct node_plans {
    struct cfs_plan *cluster;
    struct cfs_plan **alone; /* nodes entries, or NULL */
    uint32_t nodes;
    uint64_t held_bytes; /* distinct bytes held cluster-wide */
};

/* Node j's plan and its index in it. */
static const struct cfs_plan *plan_of(const struct node_plans *np, uint32_t j, uint32_t *pj)
{
    *pj = np->alone ? 0 : j;
    return np->alone ? np->alone[j] : np->cluster;
}

static void print_summary(const struct node_plans *np, bool json, uint32_t only)
{
    uint32_t pj, nodes = np->nodes;
    const struct cfs_plan *p = plan_of(np, 0, &pj);
    uint32_t ne = cfs_plan_epoch_count(p);
    uint64_t held = np->held_bytes;
    if (!json) {
        printf("dataset: %" PRIu64 " files, %" PRIu64 " bytes; %u epochs planned; distinct bytes "
               "held cluster-wide: %" PRIu64 " (%.1f%%)\n",
               cfs_plan_sample_count(p), cfs_plan_dataset_bytes(p), ne, held,
               pct(held, cfs_plan_dataset_bytes(p)));
        printf("%5s %11s %12s %10s %14s %10s %14s %10s %14s %16s %16s\n", "node", "ranks", "reads",
               "ram_files", "ram_bytes", "ssd_files", "ssd_bytes", "owned", "owned_bytes",
               "pfs_bytes/epoch", "peer_bytes/epoch");
    } else {
        printf("\"dataset\":{\"files\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"epochs\":%u,"
               "\"owned_bytes\":%" PRIu64 "},\"nodes\":[",
               cfs_plan_sample_count(p), cfs_plan_dataset_bytes(p), ne, held);
    }
    bool firstj = true;
    for (uint32_t j = 0; j < nodes; j++) {
        if (only != CFS_NODE_NONE && j != only)
            continue;
        struct cfs_plan_node_summary s;
        const struct cfs_plan *pn = plan_of(np, j, &pj);
        cfs_plan_node_summary(pn, pj, &s);
        char ranks[32];
        if (s.ranks.count && s.ranks.stride > 1) /* dealt round robin: first-last/step */
            snprintf(ranks, sizeof(ranks), "%u-%u/%u", s.ranks.first, cfs_rank_last(s.ranks),
                     s.ranks.stride);
        else if (s.ranks.count)
            snprintf(ranks, sizeof(ranks), "%u-%u", s.ranks.first, cfs_rank_last(s.ranks));
        else
            snprintf(ranks, sizeof(ranks), "-");
        if (!json) {
            printf("%5u %11s %12" PRIu64 " %10" PRIu64 " %14" PRIu64 " %10" PRIu64 " %14" PRIu64
                   " %10" PRIu64 " %14" PRIu64 " %16" PRIu64 " %16" PRIu64 "\n",
                   j, ranks, s.reads, s.files[CFS_TIER_RAM], s.bytes[CFS_TIER_RAM],
                   s.files[CFS_TIER_SSD], s.bytes[CFS_TIER_SSD], s.owned_files, s.owned_bytes,
                   s.pfs_read_bytes / ne, s.peer_read_bytes / ne);
        } else {
            printf("%s{\"node\":%u,\"rank_first\":%u,\"rank_count\":%u,\"rank_stride\":%u,"
                   "\"reads\":%" PRIu64 ",\"read_bytes\":%" PRIu64 ",\"ram_files\":%" PRIu64
                   ",\"ram_bytes\":%" PRIu64 ",\"ssd_files\":%" PRIu64 ",\"ssd_bytes\":%" PRIu64
                   ",\"unheld_files\":%" PRIu64 ",\"owned_files\":%" PRIu64
                   ",\"owned_bytes\":%" PRIu64 ",\"local_read_bytes\":%" PRIu64
                   ",\"peer_read_bytes\":%" PRIu64 ",\"pfs_read_bytes\":%" PRIu64
                   ",\"pfs_bytes_per_epoch\":%" PRIu64 "}",
                   firstj ? "" : ",", j, s.ranks.first, s.ranks.count,
                   s.ranks.stride ? s.ranks.stride : 1, s.reads, s.read_bytes,
                   s.files[CFS_TIER_RAM], s.bytes[CFS_TIER_RAM], s.files[CFS_TIER_SSD],
                   s.bytes[CFS_TIER_SSD], s.files[CFS_TIER_NONE], s.owned_files, s.owned_bytes,
                   s.local_read_bytes, s.peer_read_bytes, s.pfs_read_bytes, s.pfs_read_bytes / ne);
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

enum {
    OPT_NODES = 256, OPT_NODE, OPT_JSON, OPT_NOSIM, OPT_ORDER, OPT_SYNTH, OPT_MEAN, OPT_IDENTIFY,
    OPT_SEEDS, OPT_ENV, OPT_TABLE, OPT_SAMPLE
};

#define TABLE_MAX 16
#define SEED_RANGES_MAX 64 /* --seeds ranges */

/* The command line. */
struct plan_cli {
    struct cfs_options o;
    const char *source;
    uint64_t nodes, node, synthetic, mean_size;
    uint64_t order_rank, order_epoch;
    const char *identify;
    uint64_t seed_first, seed_count;
    struct cfs_seed_range more_seeds[SEED_RANGES_MAX - 1];
    size_t nmore_seeds;
    const char *env;
    uint32_t table[TABLE_MAX], ntable;
    uint64_t sample;
    bool has_node, json, nosim, has_order, has_synth, has_opts;
    char sep;
};

/* --print-order RANK EPOCH: EPOCH is the next argument. */
static int parse_print_order(struct plan_cli *c, int argc, char **argv)
{
    if (cfs_parse_u64(optarg, UINT32_MAX, &c->order_rank) < 0) {
        fprintf(stderr, "%s: --print-order %s: RANK must be a number below 2^32\n", prog, optarg);
        return -1;
    }
    if (optind >= argc || cfs_parse_u64(argv[optind], UINT32_MAX, &c->order_epoch) < 0) {
        fprintf(stderr, "%s: --print-order %s %s: EPOCH must be a number below 2^32\n", prog,
                optarg, optind < argc ? argv[optind] : "(missing)");
        return -1;
    }
    optind++;
    c->has_order = true;
    return 0;
}

/* One FIRST:COUNT of --seeds, FIRST below 2^32, COUNT 1..2^32. */
static bool parse_seed_range(char *tok, uint64_t *first, uint64_t *count)
{
    char *colon = strchr(tok, ':');
    if (!colon)
        return false;
    *colon = '\0';
    return cfs_parse_u64(tok, UINT32_MAX, first) == 0 &&
           cfs_parse_u64(colon + 1, 1ull << 32, count) == 0 && *count > 0;
}

/* --seeds FIRST:COUNT[,FIRST:COUNT...]: the first range, then the others. */
static int parse_seeds(struct plan_cli *c, const char *arg)
{
    char buf[SEED_RANGES_MAX * 24];
    size_t k = 0;
    bool ok = strlen(arg) < sizeof(buf);
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); ok && tok;
         tok = strtok_r(NULL, ",", &save), k++) {
        uint64_t first, count;
        ok = k < SEED_RANGES_MAX && parse_seed_range(tok, &first, &count);
        if (ok && k == 0)
            c->seed_first = first, c->seed_count = count;
        else if (ok)
            c->more_seeds[k - 1] = (struct cfs_seed_range){(uint32_t)first, count};
    }
    if (ok && k > 0) {
        c->nmore_seeds = k - 1;
        return 0;
    }
    fprintf(stderr,
            "%s: --seeds %s: expected FIRST:COUNT[,FIRST:COUNT...] (FIRST < 2^32, COUNT "
            "1..2^32, at most %d ranges)\n",
            prog, arg, SEED_RANGES_MAX);
    return -1;
}

/* --table N,N,...: node counts 1..65535. */
static int parse_table(struct plan_cli *c, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    c->ntable = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (c->ntable == TABLE_MAX || cfs_parse_u64(tok, 65535, &v) < 0 || v == 0) {
            c->ntable = 0;
            break;
        }
        c->table[c->ntable++] = (uint32_t)v;
    }
    if (c->ntable == 0 || strlen(arg) >= sizeof(buf)) {
        fprintf(stderr, "%s: --table %s: expected up to %d node counts 1..65535, comma-separated\n",
                prog, arg, TABLE_MAX);
        return -1;
    }
    return 0;
}

/* One option of getopt_long: 0, or the exit status (-1: status 1). */
static int parse_one(struct plan_cli *c, int opt, int argc, char **argv)
{
    char err[ERRLEN] = "";
    switch (opt) {
    case 'o':
        if (cfs_options_parse_list(&c->o, optarg, err, sizeof(err)) < 0) {
            die(err);
            return -1;
        }
        c->has_opts = true;
        return 0;
    case OPT_IDENTIFY: c->identify = optarg; return 0;
    case OPT_SEEDS: return parse_seeds(c, optarg);
    case OPT_ENV: c->env = optarg; return 0;
    case OPT_TABLE: return parse_table(c, optarg);
    case OPT_SAMPLE:
        if (cfs_parse_u64(optarg, UINT32_MAX - 1, &c->sample) < 0 || c->sample == 0) {
            fprintf(stderr, "%s: --sample %s: expected a file count\n", prog, optarg);
            return -1;
        }
        return 0;
    case OPT_NODES:
        if (cfs_parse_u64(optarg, 65535, &c->nodes) < 0 || c->nodes == 0) {
            fprintf(stderr, "%s: --nodes %s: expected 1..65535\n", prog, optarg);
            return -1;
        }
        return 0;
    case OPT_NODE:
        if (cfs_parse_u64(optarg, 65534, &c->node) < 0) {
            fprintf(stderr, "%s: --node %s: not a node number\n", prog, optarg);
            return -1;
        }
        c->has_node = true;
        return 0;
    case OPT_JSON: c->json = true; return 0;
    case OPT_NOSIM: c->nosim = true; return 0;
    case '0': c->sep = '\0'; return 0;
    case OPT_ORDER:
        return parse_print_order(c, argc, argv);
    case OPT_SYNTH:
        if (cfs_parse_u64(optarg, UINT32_MAX - 1, &c->synthetic) < 0 || c->synthetic == 0) {
            fprintf(stderr, "%s: --synthetic %s: expected a file count\n", prog, optarg);
            return -1;
        }
        c->has_synth = true;
        return 0;
    case OPT_MEAN:
        if (cfs_parse_size(optarg, &c->mean_size) < 0) {
            fprintf(stderr, "%s: --mean-size %s: not a size\n", prog, optarg);
            return -1;
        }
        return 0;
    default:
        getopt_error(opt, argv[optind - 1]);
        return 2;
    }
}

/* The command line into *c: 0 to go on, else the exit status (-1 for 1;
 * --help prints and gives 0 through *done). */
static int parse_command_line(struct plan_cli *c, int argc, char **argv, bool *done)
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
        {"identify", required_argument, NULL, OPT_IDENTIFY},
        {"seeds", required_argument, NULL, OPT_SEEDS},
        {"env", required_argument, NULL, OPT_ENV},
        {"table", required_argument, NULL, OPT_TABLE},
        {"sample", required_argument, NULL, OPT_SAMPLE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt, rc;
    opterr = 0; /* one line per error, ours */
    while ((opt = getopt_long(argc, argv, ":o:h0", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            *done = true;
            return 0;
        }
        if ((rc = parse_one(c, opt, argc, argv)) != 0)
            return rc;
    }
    if (c->has_synth ? optind != argc : optind != argc - 1) {
        fprintf(stderr, "%s: %s (see --help)\n", prog,
                c->has_synth ? "--synthetic takes no SOURCE" : "expected one SOURCE directory");
        return 2;
    }
    c->source = c->has_synth ? NULL : argv[optind];
    return 0;
}

/* What the options and arguments must satisfy before any work: 0 or -1. */
static int check_command_line(const struct plan_cli *c)
{
    char err[ERRLEN] = "";
    const struct cfs_options *o = &c->o;
    if (cfs_options_validate(o, err, sizeof(err)) < 0) {
        die(err);
        return -1;
    }
    if (c->seed_count && !c->identify) {
        die("--seeds is for --identify");
        return -1;
    }
    if (c->identify && (c->has_order || c->json)) {
        die("--identify prints one line: not with --print-order or --json");
        return -1;
    }
    if (!o->has_seed && !c->identify) {
        die("option seed=N is required: the plan is a function of the trainer's seed");
        return -1;
    }
    /* DistributedSampler (and accelerate's and torchvision's samplers)
     * seed epoch e with seed+e, and torch refuses a seed >= 2^64: say so
     * now, naming the option, not mid-plan. */
    if (o->sampler == CFS_SAMPLER_TORCH_DDP || o->sampler == CFS_SAMPLER_HF_ACCELERATE ||
        o->sampler == CFS_SAMPLER_TORCHVISION_RA) {
        uint64_t last = c->has_order ? c->order_epoch : o->epochs - 1;
        if (o->seed > UINT64_MAX - last) {
            fprintf(stderr, "%s: option seed=%" PRIu64 ": seed + epoch %" PRIu64
                    " exceeds 2^64-1 (torch's manual_seed would fail)\n", prog, o->seed, last);
            return -1;
        }
    }
    if ((c->ntable || c->sample) && !c->env) {
        die("--table and --sample are for --env");
        return -1;
    }
    if (c->env && (c->has_node || c->has_order || c->identify || c->nosim || o->no_peers)) {
        die("--env prints the epoch table of the distributed mounts: not with --node, "
            "--print-order, --identify, --no-sim or no_peers");
        return -1;
    }
    if (c->sample && (!c->has_synth || c->sample > c->synthetic)) {
        fprintf(stderr, "%s: --sample %" PRIu64 ": needs --synthetic with at least as many "
                "files (it stands for them)\n", prog, c->sample);
        return -1;
    }
    if (c->node >= c->nodes) {
        fprintf(stderr, "%s: --node %" PRIu64 ": must be below --nodes %" PRIu64 "\n", prog,
                c->node, c->nodes);
        return -1;
    }
    return 0;
}

static int open_catalog(const struct plan_cli *c, struct cfs_catalog **cat)
{
    char err[ERRLEN] = "";
    int rc;
    if (c->has_synth) {
        rc = cfs_catalog_synthetic(c->sample ? c->sample : c->synthetic, c->mean_size, cat);
        if (rc < 0)
            fprintf(stderr, "%s: --synthetic %" PRIu64 ": %s\n", prog, c->synthetic,
                    strerror(-rc));
        return rc;
    }
    struct cfs_catalog_params cp = {.source = c->source, .order = c->o.order,
                                    .order_list = c->o.order_list,
                                    .order_root = c->o.order_root, .index_dir = c->o.index_dir,
                                    .rescan = c->o.rescan};
    rc = cfs_catalog_open(&cp, cat, err, sizeof(err));
    if (rc < 0)
        die(err[0] ? err : strerror(-rc));
    return rc;
}

/* The run configuration of the planned node, as the mount makes it: the
 * same SSD tier (half the free space of its ssd_dir without ssd=). */
static int configure_run(const struct plan_cli *c, uint64_t n, struct cfs_run_config *run)
{
    char err[ERRLEN] = "";
    char *ssd_dir = NULL;
    if (c->o.ssd_dir && !(ssd_dir = cfs_options_expand_rank(c->o.ssd_dir, (int)c->node))) {
        die(strerror(ENOMEM));
        return -ENOMEM;
    }
    struct cfs_run_inputs in = {.opts = &c->o, .nsamples = n, .nodes = (uint32_t)c->nodes,
                                .node = (uint32_t)c->node, .ssd_dir = ssd_dir};
    int rc = cfs_run_config_make(&in, run, err, sizeof(err));
    if (rc < 0)
        die(err[0] ? err : strerror(-rc));
    free(ssd_dir);
    return rc;
}

/* Simulates node c->node only, or every node, and prints the result.  pp:
 * the cluster's plan parameters, to plan the other nodes. */
static int simulate(const struct plan_cli *c, const struct node_plans *np,
                    struct cfs_plan_params pp)
{
    char err[ERRLEN] = "";
    struct cfs_sim_result res = {0};
    uint32_t pj;
    int rc = 0;
    if (cfs_sim_result_init(&res, plan_of(np, 0, &pj)) < 0) {
        die(strerror(ENOMEM));
        return -ENOMEM;
    }
    res.charge_granule = CFS_SIM_TIER_PAGE; /* the mount's tiers charge pages */
    char what[64];
    uint32_t lo = c->has_node ? (uint32_t)c->node : 0;
    uint32_t hi = c->has_node ? (uint32_t)c->node : (uint32_t)c->nodes - 1;
    if (c->has_node)
        snprintf(what, sizeof(what), "node %u of %" PRIu64, lo, c->nodes);
    else
        snprintf(what, sizeof(what), "all %" PRIu64 " nodes", c->nodes);
    for (uint32_t j = lo; j <= hi && rc == 0; j++) {
        const struct cfs_plan *pn = plan_of(np, j, &pj);
        struct cfs_plan *other = NULL;
        if (!np->alone && j != c->node) {
            pp.node = j;
            rc = cfs_plan_create(&pp, &other, err, sizeof(err));
            pn = other;
        }
        if (rc == 0)
            rc = cfs_sim_run(pn, &res, err, sizeof(err));
        cfs_plan_destroy(other);
        if (rc < 0)
            die(err);
    }
    if (rc == 0)
        print_sim(&res, c->json, what);
    cfs_sim_result_free(&res);
    return rc;
}

/* no_peers: every node plans alone, for its own ranks, as its mount does;
 * held_bytes counts a file held by several nodes once. */
static int plan_each_alone(const struct cfs_run_config *run, const uint64_t *sizes,
                           struct node_plans *np, char *err, size_t errlen)
{
    uint64_t n = run->sampler.n;
    bool *held = calloc(n ? n : 1, sizeof(*held));
    int rc = 0;
    np->alone = calloc(run->nodes, sizeof(*np->alone));
    if (!held || !np->alone) {
        snprintf(err, errlen, "%s", strerror(ENOMEM));
        rc = -ENOMEM;
    }
    for (uint32_t j = 0; rc == 0 && j < run->nodes; j++) {
        struct cfs_run_config node_run = *run;
        node_run.node = j;
        node_run.ranks = run->node_ranks[j];
        struct cfs_plan_params pp;
        cfs_run_config_plan_params(&node_run, sizes, &pp);
        rc = cfs_plan_create(&pp, &np->alone[j], err, errlen);
        for (uint64_t f = 0; rc == 0 && f < n; f++) {
            if (held[f] || cfs_plan_owner(np->alone[j], (uint32_t)f, NULL) == CFS_NODE_NONE)
                continue;
            held[f] = true;
            np->held_bytes += sizes[f];
        }
    }
    free(held);
    return rc;
}

static void node_plans_free(struct node_plans *np)
{
    cfs_plan_destroy(np->cluster);
    for (uint32_t j = 0; np->alone && j < np->nodes; j++)
        cfs_plan_destroy(np->alone[j]);
    free(np->alone);
}

/* The plans of the run (the cluster's, or each node's own under no_peers,
 * as the mounts plan), their summary and the simulation. */
static int plan_and_print(const struct plan_cli *c, const struct cfs_catalog *cat,
                          const struct cfs_run_config *run)
{
    char err[ERRLEN] = "";
    uint64_t n = run->sampler.n;
    struct node_plans np = {.nodes = run->nodes};
    int rc = -ENOMEM;
    uint64_t *sizes = malloc((n ? n : 1) * sizeof(*sizes));
    if (!sizes) {
        die(strerror(ENOMEM));
        return rc;
    }
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = cat ? cfs_catalog_entry(cat, cfs_catalog_sample_entry(cat, i))->size
                       : cfs_catalog_synthetic_size(i, c->mean_size);
    struct cfs_plan_params pp;
    cfs_run_config_plan_params(run, sizes, &pp);
    if (run->nodes > 1 && !run->distributed) {
        rc = plan_each_alone(run, sizes, &np, err, sizeof(err));
    } else {
        rc = cfs_plan_create(&pp, &np.cluster, err, sizeof(err));
        if (rc == 0)
            np.held_bytes = cfs_plan_owned_bytes(np.cluster);
    }
    if (rc < 0) {
        die(err[0] ? err : strerror(-rc));
        goto out;
    }
    if (c->json)
        printf("{");
    print_summary(&np, c->json, c->has_node ? (uint32_t)c->node : CFS_NODE_NONE);
    if (!c->nosim && (rc = simulate(c, &np, pp)) < 0)
        goto out;
    if (c->json)
        printf("}");
    printf("\n");
out:
    node_plans_free(&np);
    free(sizes);
    return rc;
}

/* --env: the epoch table of the cluster described. */
static int epoch_table(const struct plan_cli *c, const struct cfs_catalog *cat)
{
    char err[ERRLEN] = "";
    struct cfs_cluster_env env;
    if (cfs_cluster_env_get(c->env, &env, err, sizeof(err)) < 0) {
        die(err);
        return -1;
    }
    uint32_t one = (uint32_t)c->nodes;
    struct plan_table_params p = {.opts = &c->o, .env = &env,
                                  .nodes = c->ntable ? c->table : &one,
                                  .nnodes = c->ntable ? c->ntable : 1, .cat = cat,
                                  .files = c->sample ? c->synthetic
                                                     : cfs_catalog_sample_count(cat),
                                  .json = c->json};
    if (plan_table_run(prog, &p) < 0)
        return -1;
    return fflush(stdout) == 0 ? 0 : 1;
}

/* --identify: the options, when given, are the hints the mount would have. */
static int identify(const struct plan_cli *c, const struct cfs_catalog *cat)
{
    const struct cfs_options *o = &c->o;
    struct cfs_sampler_params hint = {.kind = o->sampler, .seed = o->seed, .world = o->world,
                                      .batch = o->batch, .drop_last = o->drop_last,
                                      .drop_last_batch = o->drop_last_batch,
                                      .persistent_workers = o->persistent_workers,
                                      .randperm = o->randperm};
    struct cfs_identify_params p = {.algo = o->randperm, .hint = c->has_opts ? &hint : NULL,
                                    .hint_has_seed = o->has_seed, .node = (uint32_t)c->node,
                                    .nodes = (uint32_t)c->nodes,
                                    .seed_first = (uint32_t)c->seed_first,
                                    .seed_count = c->seed_count,
                                    .more_seeds = c->more_seeds,
                                    .nmore_seeds = c->nmore_seeds};
    /* The roots below the source are found as the mount finds them, for
     * the default order only: order=KIND:ROOT names the user's. */
    const char *root = o->order_root && o->order_root[0] ? o->order_root
                       : o->order == CFS_ORDER_IMAGEFOLDER ? NULL
                                                           : "";
    return plan_identify(prog, c->identify, cat, root, &p);
}

int main(int argc, char **argv)
{
    struct plan_cli c = {.nodes = 1, .mean_size = 110 * 1024, .sep = '\n'};
    struct cfs_catalog *cat = NULL;
    struct cfs_run_config run = {0};
    bool done = false;
    int ret;

    cfs_options_init(&c.o);
    ret = parse_command_line(&c, argc, argv, &done);
    if (ret == 0 && !done && check_command_line(&c) < 0)
        ret = -1;
    /* Planning synthetic files needs their sizes only: the catalog (names,
     * entries; a gigabyte at ImageNet-22k scale) is made where a name is
     * printed or matched, or the epoch table asks for it. */
    bool sizes_only = c.has_synth && !c.has_order && !c.identify && !c.env;
    if (ret == 0 && !done && !sizes_only && open_catalog(&c, &cat) < 0)
        ret = -1;
    if (ret == 0 && !done && c.identify) {
        ret = identify(&c, cat);
        done = true;
    }
    if (ret == 0 && !done && c.env) {
        ret = epoch_table(&c, cat);
        done = true;
    }
    if (ret == 0 && !done &&
        configure_run(&c, cat ? cfs_catalog_sample_count(cat) : c.synthetic, &run) < 0)
        ret = -1;
    if (ret == 0 && !done) {
        if (c.has_order)
            ret = print_order(cat, &run.sampler, c.order_rank, c.order_epoch, c.sep);
        else if (plan_and_print(&c, cat, &run) < 0)
            ret = -1;
        else
            ret = fflush(stdout) == 0 ? 0 : 1;
    }
    cfs_run_config_free(&run);
    cfs_catalog_destroy(cat);
    cfs_options_free(&c.o);
    return ret < 0 ? 1 : ret;
}
