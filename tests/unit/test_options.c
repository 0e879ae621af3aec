#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "check_run.h"
#include "clairfs/options.h"

START_TEST(sizes_parse_with_binary_suffixes)
{
    uint64_t v;
    ck_assert_int_eq(cfs_parse_size("0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(cfs_parse_size("4K", &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(cfs_parse_size("1.5G", &v), 0);
    ck_assert_uint_eq(v, 1610612736ull);
    ck_assert_int_eq(cfs_parse_size("10m", &v), 0);
    ck_assert_uint_eq(v, 10485760ull);
    ck_assert_int_eq(cfs_parse_size("2GiB", &v), 0);
    ck_assert_uint_eq(v, 2147483648ull);
    ck_assert_int_eq(cfs_parse_size("12X", &v), -EINVAL);
    ck_assert_int_eq(cfs_parse_size("", &v), -EINVAL);
    ck_assert_int_eq(cfs_parse_size("-1G", &v), -EINVAL);
    ck_assert_int_eq(cfs_parse_size("G", &v), -EINVAL);
    ck_assert_int_eq(cfs_parse_size("1GG", &v), -EINVAL);
}
END_TEST

START_TEST(list_sets_every_kind_of_option)
{
    struct cfs_options o;
    char err[256];
    cfs_options_init(&o);
    ck_assert_int_eq(o.log_level, -1); /* unset: -d's or the default */
    ck_assert_int_eq(cfs_options_parse_list(&o,
        "seed=18446744073709551615,world=8,ranks=2-3,batch=32,drop_last,epochs=5,"
        "start_epoch=1,ram=2G,ssd=10G,ssd_dir=/tmp/x{rank},sampler=list:/a/b,order=sorted,io=threads,"
        "log_level=debug",
        err, sizeof(err)), 0);
    ck_assert(o.has_seed);
    ck_assert_uint_eq(o.seed, UINT64_MAX);
    ck_assert_uint_eq(o.world, 8);
    ck_assert(o.has_ranks);
    ck_assert_uint_eq(o.rank_first, 2);
    ck_assert_uint_eq(o.rank_last, 3);
    ck_assert_uint_eq(o.batch, 32);
    ck_assert(o.drop_last);
    ck_assert(!o.drop_last_batch);
    ck_assert_uint_eq(o.epochs, 5);
    ck_assert_uint_eq(o.start_epoch, 1);
    ck_assert_uint_eq(o.ram, 2ull << 30);
    ck_assert(o.has_ssd);
    ck_assert_uint_eq(o.ssd, 10ull << 30);
    ck_assert_str_eq(o.ssd_dir, "/tmp/x{rank}");
    ck_assert_int_eq(o.sampler, CFS_SAMPLER_LIST);
    ck_assert_str_eq(o.sampler_list, "/a/b");
    ck_assert_int_eq(o.order, CFS_ORDER_SORTED);
    ck_assert_int_eq(o.io, CFS_IO_THREADS);
    ck_assert_int_eq(o.log_level, LOG_DEBUG);
    ck_assert_int_eq(cfs_options_validate(&o, err, sizeof(err)), 0);
    ck_assert(!o.ranks_cyclic);
    /* the last ranks= wins: srun --distribution=cyclic's placement */
    ck_assert_int_eq(cfs_options_parse_list(&o, "ranks=cyclic", err, sizeof(err)), 0);
    ck_assert(o.ranks_cyclic && !o.has_ranks);
    cfs_options_free(&o);
}
END_TEST

static void assert_rejected(const char *list, const char *needle)
{
    struct cfs_options o;
    char err[256] = "";
    cfs_options_init(&o);
    int rc = cfs_options_parse_list(&o, list, err, sizeof(err));
    if (rc == 0)
        rc = cfs_options_validate(&o, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "'%s' accepted", list);
    ck_assert_msg(strstr(err, needle) != NULL, "'%s': message '%s' lacks '%s'", list, err, needle);
    ck_assert_msg(strchr(err, '\n') == NULL, "message has more than one line");
    cfs_options_free(&o);
}

/* sweep=: auto by default; no_sweep is sweep=off, the later one wins. */
START_TEST(sweep_modes)
{
    static const struct {
        const char *list;
        enum cfs_sweep_mode want;
    } cases[] = {{"", CFS_SWEEP_AUTO},          {"sweep=on", CFS_SWEEP_ON},
                 {"sweep=off", CFS_SWEEP_OFF},  {"no_sweep", CFS_SWEEP_OFF},
                 {"sweep=on,no_sweep", CFS_SWEEP_OFF}, {"no_sweep,sweep=auto", CFS_SWEEP_AUTO}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cfs_options o;
        char err[256];
        cfs_options_init(&o);
        if (cases[i].list[0])
            ck_assert_msg(cfs_options_parse_list(&o, cases[i].list, err, sizeof(err)) == 0,
                          "%s: %s", cases[i].list, err);
        ck_assert_msg(o.sweep == cases[i].want, "%s: sweep %d", cases[i].list, (int)o.sweep);
        cfs_options_free(&o);
    }
    assert_rejected("sweep=yes", "sweep=yes: expected auto, on or off");
    assert_rejected("sweep", "sweep needs a value");
    assert_rejected("no_sweep=1", "no_sweep takes no value");
}
END_TEST

START_TEST(search_threads_is_a_count)
{
    struct cfs_options o;
    char err[256];
    cfs_options_init(&o);
    ck_assert_uint_eq(o.search_threads, 0);
    ck_assert_int_eq(cfs_options_parse_list(&o, "search_threads=1", err, sizeof(err)), 0);
    ck_assert_uint_eq(o.search_threads, 1);
    ck_assert_int_eq(cfs_options_parse_list(&o, "search_threads=64", err, sizeof(err)), 0);
    ck_assert_uint_eq(o.search_threads, 64);
    cfs_options_free(&o);
    assert_rejected("search_threads=1025", "search_threads=1025");
    assert_rejected("search_threads=-1", "search_threads=-1");
    assert_rejected("search_threads=two", "search_threads=two");
}
END_TEST

START_TEST(search_budget_is_a_percent)
{
    struct cfs_options o;
    char err[256];
    cfs_options_init(&o);
    ck_assert_uint_eq(o.search_budget, 3);
    ck_assert_int_eq(cfs_options_parse_list(&o, "search_budget=0", err, sizeof(err)), 0);
    ck_assert_uint_eq(o.search_budget, 0);
    ck_assert_int_eq(cfs_options_parse_list(&o, "search_budget=100", err, sizeof(err)), 0);
    ck_assert_uint_eq(o.search_budget, 100);
    cfs_options_free(&o);
    assert_rejected("search_budget=101", "search_budget=101");
    assert_rejected("search_budget=2.5", "search_budget=2.5");
    assert_rejected("search_budget=-1", "search_budget=-1");
}
END_TEST

START_TEST(bad_values_name_the_option)
{
    assert_rejected("seed=abc", "seed=abc");
    assert_rejected("seed=18446744073709551616", "out of range");
    assert_rejected("seed=-1", "seed=-1");
    assert_rejected("world=0", "world=0");
    assert_rejected("batch=0", "batch=0");
    assert_rejected("ram=12Q", "ram=12Q");
    assert_rejected("bogus=1", "unknown option 'bogus=1'");
    assert_rejected("world=4,ranks=3-4", "ranks=3-4");
    assert_rejected("ranks=5-2", "ranks=5-2");
    assert_rejected("ranks=round", "A, A-B (trainer ranks) or cyclic");
    assert_rejected("epochs=3,start_epoch=3", "start_epoch=3");
    assert_rejected("sampler=numpy", "sampler=numpy");
    assert_rejected("order=random", "order=random");
    assert_rejected("log_level=verbose", "log_level=verbose");
    assert_rejected("drop_last=1", "drop_last");
    assert_rejected("seed", "seed needs a value");
    assert_rejected("ssd=1G", "ssd_dir");
    assert_rejected("seed=18446744073709551615,epochs=2", "seed=18446744073709551615");
}
END_TEST

START_TEST(framework_samplers_and_their_limits)
{
    static const struct {
        const char *list;
        enum cfs_sampler_kind kind;
        bool lightning;
        uint32_t repetitions;
    } ok[] = {
        {"sampler=hf-accelerate", CFS_SAMPLER_HF_ACCELERATE, false, 3},
        {"sampler=torchvision-ra,repetitions=2", CFS_SAMPLER_TORCHVISION_RA, false, 2},
        {"sampler=timm-ra,seed=18446744073709551615,epochs=9", CFS_SAMPLER_TIMM_RA, false, 3},
        {"sampler=lightning,seed=4294967295", CFS_SAMPLER_TORCH_DDP, true, 3},
        {"sampler=lightning,sampler=torch-ddp,seed=4294967296", CFS_SAMPLER_TORCH_DDP, false, 3},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct cfs_options o;
        char err[256] = "";
        cfs_options_init(&o);
        ck_assert_msg(cfs_options_parse_list(&o, ok[i].list, err, sizeof(err)) == 0 &&
                          cfs_options_validate(&o, err, sizeof(err)) == 0,
                      "'%s': %s", ok[i].list, err);
        ck_assert_int_eq(o.sampler, ok[i].kind);
        ck_assert_int_eq(o.sampler_lightning, ok[i].lightning);
        struct cfs_sampler_params p;
        cfs_options_sampler_params(&o, 10, &p);
        ck_assert_uint_eq(p.repetitions, ok[i].repetitions);
        cfs_options_free(&o);
    }
    {
        struct cfs_options o;
        struct cfs_sampler_params p;
        char err[256] = "";
        cfs_options_init(&o);
        ck_assert_int_eq(cfs_options_parse_list(&o,
                                                "sampler=torch-global,seed=7,rng_offset=25000000,"
                                                "rng_epoch_words=64000,persistent_workers",
                                                err, sizeof(err)),
                         0);
        ck_assert_int_eq(cfs_options_validate(&o, err, sizeof(err)), 0);
        cfs_options_sampler_params(&o, 10, &p);
        ck_assert_int_eq(p.kind, CFS_SAMPLER_TORCH_GLOBAL);
        ck_assert_uint_eq(p.rng_offset, 25000000);
        ck_assert_uint_eq(p.rng_epoch_words, 64000);
        ck_assert(p.persistent_workers);
        cfs_options_free(&o);
    }
    assert_rejected("rng_offset=-1", "rng_offset");
    assert_rejected("rng_epoch_words=x", "rng_epoch_words");
    assert_rejected("sampler=lightning,seed=4294967296", "seed_everything");
    assert_rejected("sampler=lightning,drop_last", "drop_last");
    assert_rejected("repetitions=0", "repetitions=0");
    assert_rejected("repetitions=1025", "repetitions=1025");
    assert_rejected("repetitions=1.5", "non-integer num_repeats");
    assert_rejected("sampler=hf-accelerate,seed=18446744073709551615,epochs=2", "seed=");
    assert_rejected("sampler=torchvision-ra,seed=18446744073709551614,epochs=3", "seed=");
}
END_TEST

START_TEST(rank_placeholder_expands_everywhere)
{
    char *s = cfs_options_expand_rank("/mnt/n{rank}/x{rank}", 12);
    ck_assert_str_eq(s, "/mnt/n12/x12");
    free(s);
    s = cfs_options_expand_rank("/plain", 3);
    ck_assert_str_eq(s, "/plain");
    free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, sizes_parse_with_binary_suffixes);
    tcase_add_test(tc, list_sets_every_kind_of_option);
    tcase_add_test(tc, bad_values_name_the_option);
    tcase_add_test(tc, sweep_modes);
    tcase_add_test(tc, search_budget_is_a_percent);
    tcase_add_test(tc, search_threads_is_a_count);
    tcase_add_test(tc, framework_samplers_and_their_limits);
    tcase_add_test(tc, rank_placeholder_expands_everywhere);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
