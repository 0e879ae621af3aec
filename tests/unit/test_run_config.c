/* The run configuration (run_config.h): the one place where options become
 * a plan's inputs.  The SSD tier without ssd= is half the free space of
 * ssd_dir for the mount and clairfs-plan alike; the ranks of ranks=,
 * default blocks and no_peers; the default window is the one the position
 * tracker defaulted to, and the tracker takes it as given; bad inputs are
 * refused with a message. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/node_memory.h"
#include "clairfs/options.h"
#include "clairfs/run_config.h"
#include "src/prefetch_i.h"

static void parse(struct cfs_options *o, const char *list)
{
    char err[256] = "";
    cfs_options_init(o);
    ck_assert_msg(cfs_options_parse_list(o, list, err, sizeof(err)) == 0, "%s: %s", list, err);
}

static void make(const struct cfs_options *o, uint64_t n, uint32_t nodes, uint32_t node,
                 const char *ssd_dir, struct cfs_run_config *c)
{
    struct cfs_run_inputs in = {.opts = o, .nsamples = n, .nodes = nodes, .node = node,
                                .ssd_dir = ssd_dir};
    char err[256] = "";
    ck_assert_msg(cfs_run_config_make(&in, c, err, sizeof(err)) == 0, "make: %s", err);
}

static uint64_t half_free(const char *dir)
{
    struct statvfs sv;
    ck_assert_int_eq(statvfs(dir, &sv), 0);
    return (uint64_t)sv.f_bavail * sv.f_frsize / 2;
}

START_TEST(ssd_dir_without_ssd_is_half_the_free_space_for_mount_and_plan)
{
    char dir[] = "/tmp/clairfs-run-config.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    struct cfs_options o;
    parse(&o, "seed=1,world=4");
    /* The mount (node 1 of 2, its {rank}-expanded directory) and
     * clairfs-plan (one node) make the configuration the same way; other
     * writers on the file system may move the free space between two
     * statvfs calls, so retry until a quiet moment. */
    bool same = false;
    for (int attempt = 0; attempt < 20 && !same; attempt++) {
        uint64_t before = half_free(dir);
        struct cfs_run_config mount, plan;
        make(&o, 100, 2, 1, dir, &mount);
        make(&o, 100, 1, 0, dir, &plan);
        uint64_t after = half_free(dir);
        ck_assert(mount.ssd_from_free_space && plan.ssd_from_free_space);
        same = before == after && mount.ssd == before && plan.ssd == before;
        cfs_run_config_free(&mount);
        cfs_run_config_free(&plan);
    }
    ck_assert_msg(same, "SSD tier is not half of the free space of ssd_dir");

    struct cfs_run_config c;
    cfs_options_free(&o);
    parse(&o, "seed=1,ssd=64M,ssd_dir=/nonexistent");
    make(&o, 100, 1, 0, dir, &c); /* ssd= given: no statvfs */
    ck_assert_uint_eq(c.ssd, 64u << 20);
    ck_assert(!c.ssd_from_free_space);
    cfs_run_config_free(&c);
    make(&o, 100, 1, 0, NULL, &c); /* no directory, no SSD tier */
    ck_assert_uint_eq(c.ssd, 0);
    ck_assert_uint_eq(c.ram, 1u << 30);
    cfs_run_config_free(&c);
    cfs_options_free(&o);
    rmdir(dir);
}
END_TEST

START_TEST(ranks_from_option_default_blocks_and_no_peers)
{
    struct cfs_options o;
    struct cfs_run_config c;
    parse(&o, "seed=3,world=10,ranks=2-5,batch=8,epochs=4,start_epoch=1");
    make(&o, 1000, 1, 0, NULL, &c);
    ck_assert(!c.distributed);
    ck_assert_uint_eq(c.ranks.first, 2);
    ck_assert_uint_eq(c.ranks.count, 4);
    ck_assert_uint_eq(c.sampler.n, 1000);
    ck_assert_uint_eq(c.sampler.batch, 8);
    ck_assert_uint_eq(c.sampler.world, 10);
    ck_assert_uint_eq(c.start_epoch, 1);
    ck_assert_uint_eq(c.epochs, 4);
    cfs_run_config_free(&c);

    /* Three nodes: ranks= is node 1's; the others keep their blocks of 4,3,3. */
    make(&o, 1000, 3, 1, NULL, &c);
    ck_assert(c.distributed);
    ck_assert_uint_eq(c.node_ranks[0].first, 0);
    ck_assert_uint_eq(c.node_ranks[0].count, 4);
    ck_assert_uint_eq(c.node_ranks[1].first, 2);
    ck_assert_uint_eq(c.node_ranks[1].count, 4);
    ck_assert_uint_eq(c.node_ranks[2].first, 7);
    ck_assert_uint_eq(c.node_ranks[2].count, 3);
    struct cfs_plan_params pp;
    cfs_run_config_plan_params(&c, NULL, &pp);
    ck_assert_uint_eq(pp.nodes, 3);
    ck_assert_uint_eq(pp.node, 1);
    ck_assert_ptr_eq(pp.ranks, c.node_ranks);
    cfs_run_config_free(&c);
    cfs_options_free(&o);

    /* ranks=cyclic: node k of 3 serves k, k + 3, ... of 10 (srun
     * --distribution=cyclic) */
    parse(&o, "seed=3,world=10,ranks=cyclic");
    make(&o, 1000, 3, 1, NULL, &c);
    static const uint32_t cyc_count[] = {4, 3, 3};
    for (uint32_t k = 0; k < 3; k++) {
        ck_assert_uint_eq(c.node_ranks[k].first, k);
        ck_assert_uint_eq(c.node_ranks[k].count, cyc_count[k]);
        ck_assert_uint_eq(cfs_rank_last(c.node_ranks[k]), k + 3 * (cyc_count[k] - 1));
    }
    ck_assert_uint_eq(c.ranks.stride, 3);
    cfs_run_config_free(&c);
    cfs_options_free(&o);

    parse(&o, "seed=3,world=10,no_peers");
    make(&o, 1000, 3, 2, NULL, &c);
    ck_assert(!c.distributed);
    ck_assert_uint_eq(c.ranks.first, 7);
    ck_assert_uint_eq(c.ranks.count, 3);
    cfs_run_config_plan_params(&c, NULL, &pp);
    ck_assert_uint_eq(pp.nodes, 1);
    ck_assert_uint_eq(pp.ranks->first, 7);
    ck_assert_uint_eq(pp.ranks->count, 3);
    cfs_run_config_free(&c);

    /* Every node's ranks as the start-up meeting gathered them. */
    struct cfs_rank_range gathered[2] = {{0, 6}, {6, 4}};
    struct cfs_run_inputs in = {.opts = &o, .nsamples = 10, .nodes = 2, .node = 1,
                                .node_ranks = gathered};
    char err[128];
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ranks.first, 6);
    ck_assert_uint_eq(c.ranks.count, 4);
    ck_assert_uint_eq(c.node_ranks[0].count, 6);
    cfs_run_config_free(&c);
    cfs_options_free(&o);
}
END_TEST

/* The trainer ranks of the planned node, derived from the options apart
 * from the run configuration (as the prefetcher once did), and the window
 * the position tracker once defaulted to for them: 16 x batch x ranks,
 * clamped to [1024, 2^24]. */
static uint32_t trackers_default_window(const struct cfs_options *o, uint64_t n, uint32_t nodes,
                                        uint32_t node)
{
    uint64_t *sizes = malloc(n * sizeof(*sizes));
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = 100 + i;
    struct cfs_rank_range rr = {o->has_ranks ? o->rank_first : 0,
                                o->has_ranks ? o->rank_last - o->rank_first + 1 : 0};
    struct cfs_plan_params pp = {
        .n = n, .sizes = sizes, .world = o->world, .start_epoch = o->start_epoch,
        .epochs = o->epochs, .nodes = 1, .node = 0, .ranks = rr.count ? &rr : NULL,
        .ram = o->ram,
    };
    if (nodes > 1 && !o->no_peers) {
        pp.nodes = nodes;
        pp.node = node;
        pp.ranks = NULL;
    } else if (nodes > 1) {
        cfs_plan_default_ranks(o->world, nodes, node, &rr);
        pp.ranks = &rr;
    }
    cfs_options_sampler_params(o, n, &pp.sampler);
    struct cfs_plan *plan = NULL;
    char err[256] = "";
    ck_assert_msg(cfs_plan_create(&pp, &plan, err, sizeof(err)) == 0, "plan: %s", err);
    uint32_t count = cfs_plan_node_ranks(plan, pp.node).count;
    cfs_plan_destroy(plan);
    free(sizes);
    uint64_t w = (uint64_t)16 * (o->batch ? o->batch : 1) * (count ? count : 1);
    return w < 1024 ? 1024 : w > (1u << 24) ? (1u << 24) : (uint32_t)w;
}

/* The window the tracker built from the configuration works with. */
static uint32_t tracker_window(const struct cfs_run_config *c)
{
    uint64_t *sizes = malloc(c->sampler.n * sizeof(*sizes));
    for (uint64_t i = 0; i < c->sampler.n; i++)
        sizes[i] = 100 + i;
    struct pf_track_params tp = {.window = c->window};
    cfs_run_config_plan_params(c, sizes, &tp.plan);
    struct pf_track *t = NULL;
    char err[256] = "";
    ck_assert_msg(pf_track_create(&tp, &t, err, sizeof(err)) == 0, "tracker: %s", err);
    uint32_t w = pf_track_window(t);
    pf_track_destroy(t);
    free(sizes);
    return w;
}

START_TEST(default_window_is_the_trackers)
{
    static const struct {
        const char *opts;
        uint32_t nodes, node;
    } cases[] = {
        {"seed=1,epochs=2", 1, 0},                           /* the floor, 1024 */
        {"seed=1,epochs=2,world=8,batch=32", 1, 0},          /* 16 x 32 x 8 */
        {"seed=1,epochs=2,world=8,batch=32,ranks=2-4", 1, 0},
        {"seed=1,epochs=2,world=9,batch=64", 2, 1},          /* distributed, 4 ranks */
        {"seed=1,epochs=2,world=9,batch=64,no_peers", 2, 0}, /* alone, 5 ranks */
        {"seed=1,epochs=2,world=64,batch=32768", 1, 0},      /* the ceiling, 2^24 */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cfs_options o;
        struct cfs_run_config c;
        parse(&o, cases[i].opts);
        make(&o, 200, cases[i].nodes, cases[i].node, NULL, &c);
        uint32_t want = trackers_default_window(&o, 200, cases[i].nodes, cases[i].node);
        ck_assert_msg(c.window == want, "%s: window %u, tracker %u", cases[i].opts, c.window,
                      want);
        ck_assert_uint_eq(tracker_window(&c), c.window);
        cfs_run_config_free(&c);
        cfs_options_free(&o);
    }
    ck_assert_uint_eq(cfs_run_default_window(1, 1), 1024);
    ck_assert_uint_eq(cfs_run_default_window(32, 8), 4096);
    ck_assert_uint_eq(cfs_run_default_window(0, 0), 1024);
    ck_assert_uint_eq(cfs_run_default_window(1u << 20, 1u << 10), 1u << 24);
}
END_TEST

static void assert_refused(const struct cfs_run_inputs *in, int want_rc, const char *want)
{
    struct cfs_run_config c;
    char err[256] = "";
    int rc = cfs_run_config_make(in, &c, err, sizeof(err));
    ck_assert_msg(rc == want_rc, "rc %d, want %d (%s)", rc, want_rc, err);
    ck_assert_msg(strstr(err, want) != NULL, "message '%s' lacks '%s'", err, want);
    ck_assert_ptr_null(c.node_ranks);
}

START_TEST(bad_inputs_are_refused_with_a_message)
{
    struct cfs_options o;
    parse(&o, "seed=1,world=4");
    struct cfs_run_inputs in = {.opts = &o, .nsamples = 10, .nodes = 2, .node = 2};
    assert_refused(&in, -EINVAL, "node 2 of 2");
    in.nodes = 0;
    in.node = 0;
    assert_refused(&in, -EINVAL, "node 0 of 0");
    in.nodes = 1;
    struct cfs_rank_range beyond = {3, 2};
    in.node_ranks = &beyond;
    assert_refused(&in, -EINVAL, "beyond world=4");
    in.node_ranks = NULL;
    in.ssd_dir = "/nonexistent/clairfs-ssd";
    assert_refused(&in, -ENOENT, "ssd_dir /nonexistent/clairfs-ssd");
    in.ssd_dir = NULL;
    o.has_ranks = true;
    o.rank_first = 2;
    o.rank_last = 4;
    assert_refused(&in, -EINVAL, "ranks=2-4");
    o.has_ranks = false;
    o.start_epoch = o.epochs;
    assert_refused(&in, -EINVAL, "start_epoch");
    in.opts = NULL;
    assert_refused(&in, -EINVAL, "no options");
    cfs_options_free(&o);
}
END_TEST

/* The RAM tier: without ram= half of what the node can give, at most the
 * dataset; ram= above 90 % of it is cut there; distributed, half of the
 * cgroup's limit (else MemTotal) in whole GiB; no figures, the options'. */
START_TEST(ram_default_from_the_node)
{
    const uint64_t G = 1ull << 30;
    struct cfs_node_memory node = {.total = 512 * G, .available = 400 * G};
    struct cfs_options o;
    parse(&o, "");
    struct cfs_run_inputs in = {.opts = &o, .nsamples = 10, .nodes = 1, .node = 0,
                                .memory = &node, .dataset_bytes = 1000 * G};
    struct cfs_run_config c;
    char err[256];
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 200 * G);
    ck_assert(c.ram_derived && !c.ram_capped);
    ck_assert_msg(strstr(c.ram_note, "50 % of the 400.0 GiB available (MemAvailable)"), "%s",
                  c.ram_note);
    cfs_run_config_free(&c);

    in.dataset_bytes = 3 * G + 4096; /* a smaller dataset: all of it, not more */
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 3 * G + 4096);
    ck_assert_msg(strstr(c.ram_note, "the dataset's size"), "%s", c.ram_note);
    cfs_run_config_free(&c);

    /* A Slurm job's cgroup: 64 GiB, 60 left. */
    node.limited = true;
    node.cgroup_max = 64 * G;
    node.cgroup_room = 60 * G;
    snprintf(node.cgroup, sizeof(node.cgroup), "/job_7");
    in.dataset_bytes = 1000 * G;
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 30 * G);
    ck_assert_msg(strstr(c.ram_note, "cgroup /job_7's memory limit of 64.0 GiB"), "%s", c.ram_note);
    cfs_run_config_free(&c);

    /* ram= above the cap (90 % of 60 GiB = 54 GiB) is cut to it. */
    parse(&o, "ram=100G");
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 54 * G);
    ck_assert(c.ram_capped && !c.ram_derived);
    cfs_run_config_free(&c);
    parse(&o, "ram=50G"); /* below it: as given */
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 50 * G);
    ck_assert(!c.ram_capped && !c.ram_derived);
    cfs_run_config_free(&c);

    /* Distributed: half the cgroup's limit, whatever is free this minute. */
    parse(&o, "seed=1,world=4");
    in.nodes = 2;
    node.cgroup_room = 13 * G + 12345;
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 32 * G);
    cfs_run_config_free(&c);
    node.limited = false; /* no cgroup: half of MemTotal */
    node.total = 255 * G + 777;
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, 127 * G);
    cfs_run_config_free(&c);

    /* No figures (clairfs-plan, clairfs-bench): the options' default. */
    in.memory = NULL;
    in.nodes = 1;
    parse(&o, "");
    ck_assert_int_eq(cfs_run_config_make(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.ram, CFS_RAM_FALLBACK);
    ck_assert(!c.ram_derived);
    cfs_run_config_free(&c);
    cfs_options_free(&o);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_config");
    TCase *tc = tcase_create("make");
    tcase_add_test(tc, ssd_dir_without_ssd_is_half_the_free_space_for_mount_and_plan);
    tcase_add_test(tc, ranks_from_option_default_blocks_and_no_peers);
    tcase_add_test(tc, default_window_is_the_trackers);
    tcase_add_test(tc, bad_inputs_are_refused_with_a_message);
    tcase_add_test(tc, ram_default_from_the_node);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
