/* Dataset roots: an open is numbered in the folder its trainer's dataset
 * is rooted at, and each root is identified on its own.  The trees are
 * real directories scanned into a catalog; the opens are a torch-ddp
 * trainer's, from the sampler model, on the training folder's indices,
 * mapped to the mount's samples as the FUSE layer sees them, with a
 * validation folder read in order beside them. */
#include <check.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "catalog_fixture.h"
#include "check_run.h"
#include "clairfs/roots.h"
#include "identify_fixture.h"

static struct cfs_catalog *scan(void)
{
    struct cfs_catalog_params p = {.source = tmp, .order = CFS_ORDER_IMAGEFOLDER,
                                   .order_optional = true};
    struct cfs_catalog *c = NULL;
    char err[256];
    ck_assert_msg(cfs_catalog_open(&p, &c, err, sizeof(err)) == 0, "%s", err);
    return c;
}

/* ROOT/train/c0..c3 (25 images each), ROOT/val/c0..c1 (20 each), files at
 * the root, and ROOT/deep/c<k>/images/ (one folder in each class). */
static void imagenet_tree(void)
{
    char p[64];
    const char *parts[] = {"train", "val", "deep"};
    for (int k = 0; k < 3; k++)
        mkd(parts[k]);
    for (int c = 0; c < 4; c++) {
        snprintf(p, sizeof(p), "train/c%d", c), mkd(p);
        for (int i = 0; i < 25; i++)
            snprintf(p, sizeof(p), "train/c%d/%02d.JPEG", c, i), mkf(p, "x");
    }
    for (int c = 0; c < 2; c++) {
        snprintf(p, sizeof(p), "val/c%d", c), mkd(p);
        for (int i = 0; i < 20; i++)
            snprintf(p, sizeof(p), "val/c%d/%02d.JPEG", c, i), mkf(p, "y");
        snprintf(p, sizeof(p), "deep/c%d", c), mkd(p);
        snprintf(p, sizeof(p), "deep/c%d/images", c), mkd(p);
        snprintf(p, sizeof(p), "deep/c%d/images/1.jpg", c), mkf(p, "z");
    }
    mkf("README.txt", "r");
}

START_TEST(an_open_finds_the_folder_its_classes_are_in)
{
    imagenet_tree();
    struct cfs_catalog *c = scan();
    cfs_id train = cfs_catalog_resolve(c, "train"), val = cfs_catalog_resolve(c, "val");
    ck_assert_uint_eq(cfs_roots_root_of(c, cfs_catalog_resolve(c, "train/c2/07.JPEG")), train);
    ck_assert_uint_eq(cfs_roots_root_of(c, cfs_catalog_resolve(c, "val/c1/19.JPEG")), val);
    /* One folder in each class: the class folders' parent, not the class. */
    ck_assert_uint_eq(cfs_roots_root_of(c, cfs_catalog_resolve(c, "deep/c1/images/1.jpg")),
                      cfs_catalog_resolve(c, "deep"));
    /* A file at the root belongs to the mount's own order. */
    ck_assert_uint_eq(cfs_roots_root_of(c, cfs_catalog_resolve(c, "README.txt")), CFS_ID_NONE);
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(a_flat_tree_is_the_mounts_own_order)
{
    mkd("a"), mkd("b");
    mkf("a/1.jpg", "1"), mkf("b/2.jpg", "2");
    struct cfs_catalog *c = scan();
    ck_assert_uint_eq(cfs_roots_root_of(c, cfs_catalog_resolve(c, "a/1.jpg")), CFS_ID_NONE);
    cfs_catalog_destroy(c);
}
END_TEST

struct heard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    char root[64];
    uint64_t n;
    bool map_right;
    struct cfs_identified id;
    const uint32_t *want; /* train's order as the mount's samples */
};

static void heard_cb(void *arg, const struct cfs_root *root, const struct cfs_identified *id)
{
    struct heard *h = arg;
    pthread_mutex_lock(&h->mu);
    snprintf(h->root, sizeof(h->root), "%s", root->name);
    h->n = root->n;
    h->map_right = root->map && memcmp(root->map, h->want, root->n * sizeof(*h->want)) == 0;
    h->id = *id;
    h->done = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Until the roots called back, or the test fails. */
static void wait_heard(struct heard *h)
{
    pthread_mutex_lock(&h->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 120; /* a bound on a hang, not a measure */
    while (!h->done && pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0)
        ;
    bool done = h->done;
    pthread_mutex_unlock(&h->mu);
    ck_assert_msg(done, "not identified");
}

/* The mount's samples of dir's ImageFolder order. */
static uint32_t *samples_of(struct cfs_catalog *c, const char *dir, uint64_t *n)
{
    cfs_id *ids;
    char why[128];
    ck_assert_int_eq(cfs_catalog_order_at(c, CFS_ORDER_IMAGEFOLDER, cfs_catalog_resolve(c, dir),
                                          &ids, n, why, sizeof(why)),
                     0);
    for (uint64_t i = 0; i < *n; i++)
        ids[i] = cfs_catalog_entry(c, ids[i])->sample;
    return ids;
}

START_TEST(training_identified_in_its_folder_beside_a_validation_pass)
{
    imagenet_tree();
    struct cfs_catalog *c = scan();
    uint64_t ntrain, nval;
    uint32_t *train = samples_of(c, "train", &ntrain), *val = samples_of(c, "val", &nval);
    ck_assert_uint_eq(ntrain, 100);
    ck_assert_uint_eq(nval, 40);
    struct heard h = {.want = train};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 4321, 4096),
                                  .on_identified = heard_cb, .cb_arg = &h};
    struct cfs_roots *r;
    char err[256];
    ck_assert_int_eq(cfs_roots_create(&rp, &r, err, sizeof(err)), 0);
    /* torch-ddp at world 1, two workers, batch 4, on train's indices; the
     * validation pass (two fresh workers of the same rank, in order)
     * after every third training open. */
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = 4321, .n = 100, .world = 1,
                        .batch = 4, .workers = 2, .ranks = 1, .epochs = 1};
    struct opens o = simulate(&t, 100);
    size_t v = 0;
    for (size_t i = 0; i < o.len; i++) {
        cfs_roots_observe(r, train[o.s[i]], o.pid[i], o.ppid[i]);
        if (i % 3 == 2 && v < 2 * nval) {
            cfs_roots_observe(r, val[v % nval], 5000 + (pid_t)(v / nval), 1000);
            v++;
        }
    }
    while (v < 2 * nval) {
        cfs_roots_observe(r, val[v % nval], 5000 + (pid_t)(v / nval), 1000);
        v++;
    }
    wait_heard(&h);
    ck_assert_str_eq(h.root, "train");
    ck_assert_uint_eq(h.n, 100);
    ck_assert_msg(h.map_right, "the map is not train's order as the mount's samples");
    ck_assert_uint_eq((uint32_t)h.id.sampler.seed, 4321);
    ck_assert_uint_eq(h.id.sampler.n, 100);
    char text[512];
    cfs_roots_text(r, text, sizeof(text));
    ck_assert_msg(strstr(text, "train: ") && strstr(text, "seed=4321"), "%s", text);
    ck_assert_msg(strstr(text, "val: sequential, world=1 (80 opens)"), "%s", text);
    cfs_roots_destroy(r);
    opens_free(&o);
    free(train);
    free(val);
    cfs_catalog_destroy(c);
}
END_TEST

/* Node 1 of a distributed mount, ranks 2-3 of world 4 on train/: the other
 * node's claim arrives as a late hint before this node's first open of
 * train/ (cfs_roots_take_hint keeps it for the root), and the root's
 * identification, made at the first open, checks it against its opens. */
START_TEST(a_late_hint_waits_for_its_root)
{
    imagenet_tree();
    struct cfs_catalog *c = scan();
    uint64_t ntrain;
    uint32_t *train = samples_of(c, "train", &ntrain);
    struct heard h = {.want = train};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    struct cfs_roots_params rp = {.catalog = c,
                                  .derive = true,
                                  .identify = params(0, 777, 4096),
                                  .on_identified = heard_cb,
                                  .cb_arg = &h};
    rp.identify.node = 1, rp.identify.nodes = 2;
    struct cfs_roots *r;
    char err[256];
    ck_assert_int_eq(cfs_roots_create(&rp, &r, err, sizeof(err)), 0);
    struct cfs_sampler_params hint = {
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = 777, .n = ntrain, .world = 4, .batch = 4};
    cfs_roots_take_hint(r, "val", &hint);   /* another root's: not train's */
    cfs_roots_take_hint(r, "train", &hint); /* the last one is kept */
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = 777,
                        .n = 100,
                        .world = 4,
                        .batch = 4,
                        .workers = 2,
                        .rank_first = 2,
                        .ranks = 2,
                        .epochs = 4};
    struct opens o = simulate(&t, 100000);
    for (size_t i = 0; i < o.len; i++)
        cfs_roots_observe(r, train[o.s[i]], o.pid[i], o.ppid[i]);
    wait_heard(&h);
    ck_assert_str_eq(h.root, "train");
    ck_assert_uint_eq(h.id.sampler.seed, 777);
    ck_assert_uint_eq(h.id.sampler.world, 4);
    ck_assert_uint_eq(h.id.rank_first, 2);
    ck_assert_uint_eq(h.id.rank_count, 2);
    cfs_roots_destroy(r);
    opens_free(&o);
    free(train);
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(a_registered_order_takes_every_open)
{
    imagenet_tree();
    struct cfs_catalog *c = scan();
    uint64_t ntrain;
    uint32_t *train = samples_of(c, "train", &ntrain);
    struct heard h = {0};
    struct cfs_roots_params rp = {.catalog = c, .derive = false, .identify = params(0, 1, 16),
                                  .on_identified = heard_cb, .cb_arg = &h};
    struct cfs_roots *r;
    char err[256];
    ck_assert_int_eq(cfs_roots_create(&rp, &r, err, sizeof(err)), 0);
    cfs_roots_observe(r, train[0], 7, 1);
    char text[256];
    cfs_roots_text(r, text, sizeof(text));
    ck_assert_msg(strncmp(text, ".: learning (1 opens)", 21) == 0, "%s", text);
    cfs_roots_destroy(r);
    free(train);
    cfs_catalog_destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("roots");
    TCase *tc = tcase_create("roots");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, an_open_finds_the_folder_its_classes_are_in);
    tcase_add_test(tc, a_flat_tree_is_the_mounts_own_order);
    tcase_add_test(tc, training_identified_in_its_folder_beside_a_validation_pass);
    tcase_add_test(tc, a_registered_order_takes_every_open);
    tcase_add_test(tc, a_late_hint_waits_for_its_root);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
