/* Sampler models against real PyTorch: golden vectors made by
 * tests/golden/gen_sampler_golden.py, MT19937 known answers, the list:FILE
 * format and its errors, and the coverage property of DistributedSampler. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "known_stream.h"
#include "clairfs/sampler.h"

static char *golden_path(const char *name)
{
    const char *root = getenv("CLAIRFS_SOURCE_ROOT");
    char *p;
    ck_assert_msg(root != NULL, "CLAIRFS_SOURCE_ROOT not set");
    ck_assert_int_ge(asprintf(&p, "%s/tests/golden/sampler/%s", root, name), 0);
    return p;
}

static uint64_t epoch_hash(const struct cfs_sampler *s, uint32_t epoch, uint32_t world)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t r = 0; r < world; r++) {
        uint64_t len = cfs_sampler_rank_len(s, epoch, r);
        h = (h ^ len) * 0x100000001b3ull;
        for (uint64_t i = 0; i < len; i++)
            h = (h ^ cfs_sampler_rank_at(s, r, i)) * 0x100000001b3ull;
    }
    return h;
}

static enum cfs_sampler_kind kind_of(const char *name)
{
    if (!strcmp(name, "torch-ddp"))
        return CFS_SAMPLER_TORCH_DDP;
    if (!strcmp(name, "torch"))
        return CFS_SAMPLER_TORCH;
    ck_assert_str_eq(name, "torch-sampler");
    return CFS_SAMPLER_TORCH_SAMPLER;
}

struct golden_case {
    struct cfs_sampler_params p;
    char desc[200];
    unsigned epochs;
    uint64_t hash[8];
};

static void check_epoch(struct cfs_sampler *s, const struct golden_case *c, unsigned e,
                        const char *how)
{
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
    ck_assert_msg(epoch_hash(s, e, c->p.world) == c->hash[e], "%s: epoch %u (%s) differs",
                  c->desc, e, how);
}

/* Epochs first..epochs-1 in increasing order (the planner starts at
 * start_epoch), then again from `first` and the one after it (another
 * node's plan), one before
 * `first` (a replay from the seed) and the last one. */
static void check_case(const struct golden_case *c, unsigned first)
{
    struct cfs_sampler *s = make(&c->p);
    for (unsigned e = first; e < c->epochs; e++)
        check_epoch(s, c, e, first ? "from epoch 2" : "from epoch 0");
    check_epoch(s, c, first + 1, "restart after first");
    check_epoch(s, c, first, "again");
    if (first)
        check_epoch(s, c, first - 1, "backwards");
    check_epoch(s, c, c->epochs - 1, "last after going back");
    cfs_sampler_destroy(s);
}

START_TEST(golden_streams_match_pytorch)
{
    char *path = golden_path("streams.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    struct golden_case c;
    struct cfs_sampler *s = NULL;
    int cases = 0, fulls = 0, have = 0;
    int last_full_epoch = -1;

    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#')
            continue;
        if (!strncmp(line, "case ", 5)) {
            if (have)
                check_case(&c, 0), check_case(&c, 2);
            cfs_sampler_destroy(s);
            s = NULL;
            last_full_epoch = -1;
            char kind[32];
            unsigned long long n, seed;
            unsigned w, b, dl, dlb, pw, ep;
            memset(&c, 0, sizeof(c));
            ck_assert_int_eq(sscanf(line + 5,
                                    "%31s n=%llu world=%u seed=%llu batch=%u drop_last=%u "
                                    "drop_last_batch=%u persistent=%u epochs=%u",
                                    kind, &n, &w, &seed, &b, &dl, &dlb, &pw, &ep),
                             9);
            ck_assert_uint_le(ep, 8);
            c.p = (struct cfs_sampler_params){.kind = kind_of(kind), .seed = seed, .n = n,
                                              .world = w, .batch = b, .drop_last = dl,
                                              .drop_last_batch = dlb, .persistent_workers = pw};
            c.epochs = ep;
            snprintf(c.desc, sizeof(c.desc), "%s", line);
            have = 1;
            cases++;
        } else if (!strncmp(line, "hash ", 5)) {
            unsigned e;
            uint64_t h;
            ck_assert_int_eq(sscanf(line + 5, "%u %" SCNx64, &e, &h), 2);
            ck_assert_uint_lt(e, c.epochs);
            c.hash[e] = h;
        } else if (!strncmp(line, "full ", 5)) {
            /* Whole small streams, compared index by index. */
            unsigned e, r;
            int used;
            ck_assert_int_eq(sscanf(line + 5, "%u %u:%n", &e, &r, &used), 2);
            if (!s)
                s = make(&c.p);
            if ((int)e != last_full_epoch) {
                ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
                last_full_epoch = (int)e;
            }
            const char *p = line + 5 + used;
            uint64_t i = 0;
            char *end;
            for (;;) {
                unsigned long v = strtoul(p, &end, 10);
                if (end == p)
                    break;
                ck_assert_uint_lt(i, cfs_sampler_rank_len(s, e, r));
                ck_assert_msg(cfs_sampler_rank_at(s, r, i) == v, "%s: epoch %u rank %u [%" PRIu64
                              "] = %u, torch %lu", c.desc, e, r, i, cfs_sampler_rank_at(s, r, i), v);
                i++;
                p = end;
            }
            ck_assert_uint_eq(i, cfs_sampler_rank_len(s, e, r));
            fulls++;
        } else {
            ck_abort_msg("%s: unexpected line '%s'", path, line);
        }
    }
    if (have)
        check_case(&c, 0), check_case(&c, 2);
    cfs_sampler_destroy(s);
    ck_assert_int_ge(cases, 200);
    ck_assert_int_ge(fulls, 100);
    free(line);
    fclose(f);
    free(path);
}
END_TEST

START_TEST(mt19937_matches_torch_generator)
{
    char *path = golden_path("mt19937.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    char line[256];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long seed, want;
        unsigned pos;
        if (line[0] == '#')
            continue;
        ck_assert_int_eq(sscanf(line, "mt %llu %u %llu", &seed, &pos, &want), 3);
        struct cfs_mt19937 mt;
        cfs_mt19937_seed(&mt, seed);
        cfs_mt19937_discard(&mt, 2ull * pos);
        /* torch's int64 random_() is random64() % 2^63. */
        ck_assert_uint_eq(cfs_mt19937_next64(&mt) & INT64_MAX, want);
        n++;
    }
    ck_assert_int_ge(n, 50);
    fclose(f);
    free(path);

    /* The reference MT19937 (std::mt19937 default seed 5489). */
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, 5489);
    ck_assert_uint_eq(cfs_mt19937_next32(&mt), 3499211612u);
    cfs_mt19937_discard(&mt, 9998);
    ck_assert_uint_eq(cfs_mt19937_next32(&mt), 4123659995u);
    /* Only the low 32 bits of a seed matter. */
    struct cfs_mt19937 a, b;
    cfs_mt19937_seed(&a, 5);
    cfs_mt19937_seed(&b, (1ull << 32) + 5);
    for (int i = 0; i < 1000; i++)
        ck_assert_uint_eq(cfs_mt19937_next32(&a), cfs_mt19937_next32(&b));
}
END_TEST

START_TEST(randperm_known_answer_and_draws)
{
    /* torch.randperm(10, generator=torch.Generator().manual_seed(0)) */
    static const uint32_t want[10] = {4, 1, 7, 5, 3, 9, 0, 8, 6, 2};
    uint32_t perm[10];
    struct cfs_mt19937 mt, ref;
    cfs_mt19937_seed(&mt, 0);
    cfs_torch_randperm(&mt, perm, 10, CFS_RANDPERM_CURRENT);
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(perm[i], want[i]);
    /* It drew n - 1 words. */
    cfs_mt19937_seed(&ref, 0);
    cfs_mt19937_discard(&ref, 9);
    ck_assert_uint_eq(cfs_mt19937_next32(&mt), cfs_mt19937_next32(&ref));
    ck_assert_uint_eq(cfs_torch_randperm_words(1, CFS_RANDPERM_CURRENT), 0);
    ck_assert_uint_eq(cfs_torch_randperm_words(214748363, CFS_RANDPERM_CURRENT), 214748362);
    ck_assert_uint_eq(cfs_torch_randperm_words(214748364, CFS_RANDPERM_CURRENT), 429496728);
    ck_assert_uint_eq(cfs_torch_randperm_words(214748364, CFS_RANDPERM_LEGACY), 214748363);
}
END_TEST

START_TEST(rank_lengths_follow_torch_rules)
{
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_TORCH_DDP, .n = 10, .world = 3, .batch = 3};
    struct cfs_sampler *s = make(&p);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 0), 4); /* ceil(10/3), padded */
    cfs_sampler_destroy(s);
    p.drop_last = true;
    s = make(&p);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 2), 3); /* floor(10/3) */
    cfs_sampler_destroy(s);
    p.drop_last = false;
    p.drop_last_batch = true;
    s = make(&p);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 1), 3); /* 4 -> one full batch of 3 */
    cfs_sampler_destroy(s);
    p.n = 3;
    p.world = 7;
    p.drop_last = true;
    p.drop_last_batch = false;
    s = make(&p);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 6), 0); /* n < W with drop_last */
    cfs_sampler_destroy(s);
    p = (struct cfs_sampler_params){.kind = CFS_SAMPLER_TORCH, .n = 10, .world = 4, .batch = 4,
                                    .drop_last_batch = true};
    s = make(&p);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 3), 8); /* every rank: the full stream */
    cfs_sampler_destroy(s);
}
END_TEST

/* Union of all ranks' streams in an epoch: each index as often as
 * DistributedSampler's padding repeats it. */
START_TEST(ddp_ranks_cover_every_index_like_torch)
{
    uint32_t seed = 12345;
    for (int t = 0; t < 300; t++) {
        seed = seed * 1103515245u + 12345u;
        struct cfs_sampler_params p = {.kind = CFS_SAMPLER_TORCH_DDP,
                                       .n = 1 + (seed >> 8) % 300,
                                       .world = 1 + (seed >> 20) % 16,
                                       .batch = 1,
                                       .seed = seed,
                                       .drop_last = (seed >> 3) & 1};
        struct cfs_sampler *s = make(&p);
        uint32_t e = t % 5;
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
        uint64_t len = cfs_sampler_rank_len(s, e, 0);
        uint64_t total = len * p.world, n = p.n;
        uint32_t *count = calloc(n, sizeof(*count));
        for (uint32_t r = 0; r < p.world; r++) {
            ck_assert_uint_eq(cfs_sampler_rank_len(s, e, r), len);
            for (uint64_t i = 0; i < len; i++) {
                uint32_t v = cfs_sampler_rank_at(s, r, i);
                ck_assert_uint_lt(v, n);
                count[v]++;
            }
        }
        if (p.drop_last) {
            ck_assert_uint_eq(total, n / p.world * p.world);
            for (uint64_t i = 0; i < n; i++)
                ck_assert_uint_le(count[i], 1);
        } else {
            ck_assert_uint_eq(total, (n + p.world - 1) / p.world * p.world);
            /* Position j of the padded list (rank j % W, item j / W) holds
             * the (j % n)-th index: the first total % n indices once more. */
            uint64_t q = total / n, extra = total % n;
            for (uint64_t j = 0; j < n; j++) {
                uint32_t v = cfs_sampler_rank_at(s, (uint32_t)(j % p.world), j / p.world);
                ck_assert_uint_eq(count[v], q + (j < extra));
            }
        }
        free(count);
        cfs_sampler_destroy(s);
    }
}
END_TEST

START_TEST(bad_parameters_are_rejected)
{
    struct cfs_sampler *s;
    char err[256];
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_TORCH_DDP, .n = 10, .world = 0, .batch = 1};
    ck_assert_int_eq(cfs_sampler_create(&p, &s, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "world=0"));
    p.world = 2;
    p.batch = 0;
    ck_assert_int_eq(cfs_sampler_create(&p, &s, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "batch=0"));
    p.batch = 1;
    p.n = 0;
    ck_assert_int_eq(cfs_sampler_create(&p, &s, err, sizeof(err)), -EINVAL);
    /* torch's manual_seed(seed + epoch) overflows past 2^64 - 1. */
    p.n = 10;
    p.seed = UINT64_MAX - 1;
    s = make(&p);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 1), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 2), -ERANGE);
    ck_assert_ptr_nonnull(strstr(cfs_sampler_error(s), "2^64"));
    cfs_sampler_destroy(s);
    cfs_sampler_destroy(NULL);
}
END_TEST

/* --- list:FILE --- */

static char list_path[64];

static void write_list(const char *text)
{
    strcpy(list_path, "/tmp/cfs-sampler-list-XXXXXX");
    int fd = mkstemp(list_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int open_list(const char *text, uint64_t n, uint32_t world, struct cfs_sampler **s,
                     char *err, size_t errlen)
{
    write_list(text);
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_LIST, .n = n, .world = world, .batch = 7,
                                   .drop_last_batch = true, .list_path = list_path};
    err[0] = '\0';
    return cfs_sampler_create(&p, s, err, errlen);
}

START_TEST(list_file_gives_its_streams_and_cycles)
{
    struct cfs_sampler *s;
    char err[256];
    int rc = open_list("# two ranks, two epochs\n"
                       "clairfs-sampler-list world=2 epochs=2 n=6\n"
                       "\n"
                       "epoch 0 rank 1: 5 4 3\n"
                       "epoch 0 rank 0: 0 1 2\r\n"
                       "epoch 1 rank 0: 1 1\n"
                       "epoch  1  rank 1 :\t2   0 \n",
                       6, 2, &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 0, 0), 3);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 1, 1), 2);
    ck_assert_uint_eq(cfs_sampler_rank_len(s, 3, 1), 2); /* epoch 3 reads listed epoch 1 */
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 0), 0);
    ck_assert_uint_eq(cfs_sampler_rank_at(s, 0, 2), 2);
    ck_assert_uint_eq(cfs_sampler_rank_at(s, 1, 0), 5);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 3), 0);
    ck_assert_uint_eq(cfs_sampler_rank_at(s, 0, 0), 1);
    ck_assert_uint_eq(cfs_sampler_rank_at(s, 1, 0), 2);
    ck_assert_uint_eq(cfs_sampler_rank_at(s, 1, 1), 0);
    ck_assert_int_eq(cfs_sampler_compute_epoch(s, 4), 0);
    ck_assert_uint_eq(cfs_sampler_rank_at(s, 1, 2), 3);
    cfs_sampler_destroy(s);
    unlink(list_path);
}
END_TEST

static void assert_list_error(const char *text, uint64_t n, uint32_t world, int line,
                              const char *needle)
{
    struct cfs_sampler *s = NULL;
    char err[256], where[96];
    int rc = open_list(text, n, world, &s, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "accepted: %s", text);
    ck_assert_ptr_null(s);
    snprintf(where, sizeof(where), "%s:%d: ", list_path, line);
    ck_assert_msg(strncmp(err, where, strlen(where)) == 0, "'%s' does not start with '%s'", err,
                  where);
    ck_assert_msg(strstr(err, needle) != NULL, "'%s' lacks '%s'", err, needle);
    ck_assert_ptr_null(strchr(err, '\n'));
    unlink(list_path);
}

START_TEST(list_file_errors_name_file_and_line)
{
    const char *h = "clairfs-sampler-list world=2 epochs=2\n";
    char buf[512];
    snprintf(buf, sizeof(buf), "%sepoch 0 rank 0: 1 2\nepoch 0 rank 1: 3\n"
             "epoch 1 rank 0: 1\nepoch 1 rank 1: 2\n", h);
    assert_list_error(buf, 5, 2, 3, "has 1 indices, rank 0 has 2");
    snprintf(buf, sizeof(buf), "%sepoch 0 rank 0: 1 2\nepoch 0 rank 1: 3 9\n", h);
    assert_list_error(buf, 5, 2, 3, "index 9 out of range");
    snprintf(buf, sizeof(buf), "%sepoch 0 rank 0: 1 2\nepoch 0 rank 1: 3 x4\n", h);
    assert_list_error(buf, 5, 2, 3, "'x4' is not an index");
    snprintf(buf, sizeof(buf), "%sepoch 0 rank 0: 1 -2\n", h);
    assert_list_error(buf, 5, 2, 2, "'-2' is not an index");
    snprintf(buf, sizeof(buf), "%sepoch 0 rank 0: 1 2\nepoch 0 rank 1: 3 4\n"
             "epoch 1 rank 1: 0 0\n", h);
    assert_list_error(buf, 5, 2, 4, "epoch 1 rank 0 missing");
    snprintf(buf, sizeof(buf), "%sepoch 0 rank 0: 1\nepoch 0 rank 0: 1\n", h);
    assert_list_error(buf, 5, 2, 3, "listed twice");
    snprintf(buf, sizeof(buf), "%sepoch 2 rank 0: 1\n", h);
    assert_list_error(buf, 5, 2, 2, "outside the header");
    snprintf(buf, sizeof(buf), "%sepoch 0 rank0 1\n", h);
    assert_list_error(buf, 5, 2, 2, "expected 'epoch E rank R:");
    assert_list_error("# c\nepoch 0 rank 0: 1\n", 5, 2, 2, "expected the header");
    assert_list_error("clairfs-sampler-list world=3 epochs=1\n", 5, 2, 1, "world=3");
    assert_list_error("clairfs-sampler-list world=2 epochs=1 n=6\n", 5, 2, 1, "n=6");
    assert_list_error("clairfs-sampler-list world=2\n", 5, 2, 1, "epochs=E");
    assert_list_error("", 5, 2, 0, "no header");
    /* Found by fuzzing: a header promising billions of lines sized an
     * allocation before any line was read. */
    assert_list_error("clairfs-sampler-list world=2 epochs=4000000000\n", 5, 2, 1,
                      "the file is too short");

    struct cfs_sampler *s;
    char err[256];
    struct cfs_sampler_params p = {.kind = CFS_SAMPLER_LIST, .n = 5, .world = 1, .batch = 1,
                                   .list_path = "/nonexistent/list.txt"};
    ck_assert_int_eq(cfs_sampler_create(&p, &s, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/list.txt"));
}
END_TEST

START_TEST(epoch_order_view_matches_rank_at)
{
    /* The planner reads streams through this view; it must agree with
     * rank_at for every rank and index, padding and cut-off included. */
    static const struct {
        enum cfs_sampler_kind kind;
        uint64_t n;
        uint32_t world, batch;
        bool drop_last, drop_last_batch;
    } cases[] = {
        {CFS_SAMPLER_TORCH_DDP, 1000, 7, 1, false, false},
        {CFS_SAMPLER_TORCH_DDP, 1000, 7, 8, true, true},
        {CFS_SAMPLER_TORCH_DDP, 3, 5, 1, false, false}, /* padding past n */
        {CFS_SAMPLER_TORCH, 777, 2, 16, false, true},
        {CFS_SAMPLER_TORCH_SAMPLER, 500, 1, 3, false, false},
        {CFS_SAMPLER_TORCH_GLOBAL, 600, 3, 7, false, true},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct cfs_sampler_params p = {.kind = cases[c].kind, .seed = 1234 + c, .n = cases[c].n,
                                       .world = cases[c].world, .batch = cases[c].batch,
                                       .drop_last = cases[c].drop_last,
                                       .drop_last_batch = cases[c].drop_last_batch};
        struct cfs_sampler *s;
        char err[256];
        ck_assert_int_eq(cfs_sampler_create(&p, &s, err, sizeof(err)), 0);
        const uint32_t *order;
        uint64_t len, rank_step, stride;
        ck_assert_int_eq(cfs_sampler_epoch_order(s, &order, &len, &rank_step, &stride), -ENODATA);
        for (uint32_t e = 0; e < 3; e++) {
            ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
            ck_assert_int_eq(cfs_sampler_epoch_order(s, &order, &len, &rank_step, &stride), 0);
            for (uint32_t r = 0; r < cases[c].world; r++)
                for (uint64_t i = 0; i < cfs_sampler_rank_len(s, e, r); i++)
                    ck_assert_uint_eq(order[(r * rank_step + i * stride) % len],
                                      cfs_sampler_rank_at(s, r, i));
        }
        cfs_sampler_destroy(s);
    }
}
END_TEST

/* torch-global against real torch 1.13: manual_seed(7), Linear(16, 32),
 * ReLU, Linear(32, 4) built (676 words), DataLoader(arange(1000),
 * batch_size=50, shuffle=True, num_workers=2), no dropout; the first 8
 * indices of epochs 0-2 as the trainer printed them. Epochs asked out of
 * order replay the same stream. */
START_TEST(torch_global_matches_a_real_trainer)
{
    static const uint32_t golden[2][3][8] = {
        {{888, 375, 564, 799, 315, 36, 820, 26},
         {440, 512, 687, 840, 761, 236, 902, 363},
         {350, 18, 840, 995, 558, 958, 63, 977}},
        {{888, 375, 564, 799, 315, 36, 820, 26}, /* persistent_workers */
         {331, 225, 251, 196, 549, 372, 921, 340},
         {440, 512, 687, 840, 761, 236, 902, 363}},
    };
    static const uint32_t epochs[] = {0, 1, 2, 1, 0, 2};
    for (int pw = 0; pw < 2; pw++) {
        struct cfs_sampler_params p = {.kind = CFS_SAMPLER_TORCH_GLOBAL, .seed = 7, .n = 1000,
                                       .world = 4, .batch = 50, .persistent_workers = pw,
                                       .rng_offset = 676};
        struct cfs_sampler *s;
        char err[256];
        ck_assert_int_eq(cfs_sampler_create(&p, &s, err, sizeof(err)), 0);
        for (size_t k = 0; k < sizeof(epochs) / sizeof(epochs[0]); k++) {
            uint32_t e = epochs[k];
            ck_assert_int_eq(cfs_sampler_compute_epoch(s, e), 0);
            ck_assert_uint_eq(cfs_sampler_rank_len(s, e, 3), 1000);
            for (uint32_t i = 0; i < 8; i++) {
                ck_assert_uint_eq(cfs_sampler_rank_at(s, 0, i), golden[pw][e][i]);
                ck_assert_uint_eq(cfs_sampler_rank_at(s, 3, i), golden[pw][e][i]);
            }
        }
        cfs_sampler_destroy(s);
    }
    ck_assert_str_eq(cfs_sampler_kind_name(CFS_SAMPLER_TORCH_GLOBAL), "torch-global");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_add_test(tc, golden_streams_match_pytorch);
    tcase_add_test(tc, mt19937_matches_torch_generator);
    tcase_add_test(tc, randperm_known_answer_and_draws);
    tcase_add_test(tc, rank_lengths_follow_torch_rules);
    tcase_add_test(tc, ddp_ranks_cover_every_index_like_torch);
    tcase_add_test(tc, bad_parameters_are_rejected);
    tcase_add_test(tc, list_file_gives_its_streams_and_cycles);
    tcase_add_test(tc, list_file_errors_name_file_and_line);
    tcase_add_test(tc, epoch_order_view_matches_rank_at);
    tcase_add_test(tc, torch_global_matches_a_real_trainer);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
