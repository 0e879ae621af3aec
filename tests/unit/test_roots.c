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
#include "clairfs/metrics.h"
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

/* Roots over rp.catalog that call back into h, whose map should be want;
 * rp brings the catalog, derive, the identification and any on_pass. */
static struct cfs_roots *roots_heard(struct cfs_roots_params rp, struct heard *h,
                                     const uint32_t *want)
{
    *h = (struct heard){.want = want};
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    rp.on_identified = heard_cb;
    rp.cb_arg = h;
    struct cfs_roots *r;
    char err[256];
    ck_assert_msg(cfs_roots_create(&rp, &r, err, sizeof(err)) == 0, "%s", err);
    return r;
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

/* The mount's samples of dir's `kind` order. */
static uint32_t *order_of(struct cfs_catalog *c, enum cfs_order kind, const char *dir, uint64_t *n)
{
    cfs_id *ids;
    char why[128];
    ck_assert_int_eq(cfs_catalog_order_at(c, kind, cfs_catalog_resolve(c, dir), &ids, n, why,
                                          sizeof(why)),
                     0);
    for (uint64_t i = 0; i < *n; i++)
        ids[i] = cfs_catalog_entry(c, ids[i])->sample;
    return ids;
}

/* The mount's samples of dir's ImageFolder order. */
static uint32_t *samples_of(struct cfs_catalog *c, const char *dir, uint64_t *n)
{
    return order_of(c, CFS_ORDER_IMAGEFOLDER, dir, n);
}

START_TEST(training_identified_in_its_folder_beside_a_validation_pass)
{
    imagenet_tree();
    struct cfs_catalog *c = scan();
    uint64_t ntrain, nval;
    uint32_t *train = samples_of(c, "train", &ntrain), *val = samples_of(c, "val", &nval);
    ck_assert_uint_eq(ntrain, 100);
    ck_assert_uint_eq(nval, 40);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 4321, 4096)};
    struct heard h;
    struct cfs_roots *r = roots_heard(rp, &h, train);
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

/* Each root's identification as the roots reported it, by root name. */
struct heard_roots {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count;
    char root[2][64];
    struct cfs_identified id[2];
};

static void heard_roots_cb(void *arg, const struct cfs_root *root, const struct cfs_identified *id)
{
    struct heard_roots *h = arg;
    pthread_mutex_lock(&h->mu);
    int k = 0;
    while (k < h->count && strcmp(h->root[k], root->name) != 0)
        k++;
    if (k < 2) {
        snprintf(h->root[k], sizeof(h->root[k]), "%s", root->name);
        h->id[k] = *id;
        h->count += k == h->count;
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Two unrelated jobs on one mount, interleaved: torch-ddp seed 4321 on
 * train/ (100 samples) and a one-process torch loader seed 777 on other/
 * (80 samples, processes of their own).  Each folder is its own root and
 * is identified with its own job's order. */
START_TEST(two_jobs_on_two_folders_are_identified_apart)
{
    imagenet_tree();
    char p[64];
    mkd("other");
    for (int c = 0; c < 4; c++) {
        snprintf(p, sizeof(p), "other/k%d", c), mkd(p);
        for (int i = 0; i < 20; i++)
            snprintf(p, sizeof(p), "other/k%d/%02d.png", c, i), mkf(p, "o");
    }
    struct cfs_catalog *c = scan();
    uint64_t ntrain, nother;
    uint32_t *train = samples_of(c, "train", &ntrain), *other = samples_of(c, "other", &nother);
    ck_assert_uint_eq(nother, 80);
    struct heard_roots h = {0};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 4096, 8192),
                                  .on_identified = heard_roots_cb, .cb_arg = &h};
    struct cfs_roots *r;
    char err[256];
    ck_assert_int_eq(cfs_roots_create(&rp, &r, err, sizeof(err)), 0);
    struct trainer a = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = 4321, .n = 100, .world = 1,
                        .batch = 4, .workers = 2, .ranks = 1, .epochs = 1};
    struct trainer b = {.kind = CFS_SAMPLER_TORCH, .seed = 777, .n = 80, .world = 1,
                        .batch = 4, .workers = 2, .ranks = 1, .epochs = 1};
    struct opens oa = simulate(&a, 100), ob = simulate(&b, 80);
    for (size_t i = 0, j = 0; i < oa.len || j < ob.len;) {
        if (i < oa.len)
            cfs_roots_observe(r, train[oa.s[i]], oa.pid[i], oa.ppid[i]), i++;
        if (j < ob.len && i % 5 != 0)
            cfs_roots_observe(r, other[ob.s[j]], 50000 + ob.pid[j], 50000 + ob.ppid[j]), j++;
    }
    pthread_mutex_lock(&h.mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 120; /* a bound on a hang, not a measure */
    while (h.count < 2 && pthread_cond_timedwait(&h.cv, &h.mu, &until) == 0)
        ;
    pthread_mutex_unlock(&h.mu);
    ck_assert_int_eq(h.count, 2);
    for (int k = 0; k < 2; k++) {
        bool is_train = strcmp(h.root[k], "train") == 0;
        ck_assert_msg(is_train || strcmp(h.root[k], "other") == 0, "root %s", h.root[k]);
        ck_assert_uint_eq((uint32_t)h.id[k].sampler.seed, is_train ? 4321 : 777);
        ck_assert_uint_eq(h.id[k].sampler.n, is_train ? 100 : 80);
    }
    char text[512];
    cfs_roots_text(r, text, sizeof(text));
    ck_assert_msg(strstr(text, "train: ") && strstr(text, "seed=4321"), "%s", text);
    ck_assert_msg(strstr(text, "other: ") && strstr(text, "seed=777"), "%s", text);
    cfs_roots_destroy(r);
    opens_free(&oa);
    opens_free(&ob);
    free(train);
    free(other);
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
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 777, 4096)};
    rp.identify.node = 1, rp.identify.nodes = 2;
    struct heard h;
    struct cfs_roots *r = roots_heard(rp, &h, train);
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

/* ROOT/train with the traps the libraries' orders part on: classes cls2
 * and cls10 (timm's natural key puts cls2 first), img1 .. img34 (img2
 * before img10 in timm only), IMG35.JPG .. IMG37.JPG (upper case: first
 * bytewise, among the others lowered for timm), a nested aug/ (its files
 * after the class's own in ImageFolder, before them by path in mmpretrain),
 * non-images beside them; ROOT/val beside it.  `per` images a class. */
static void trap_tree_of(int per)
{
    char p[64];
    mkd("train"), mkd("val"), mkd("val/a"), mkd("val/b");
    mkf("train/readme.md", "r");
    mkf("val/a/1.jpg", "v"), mkf("val/b/1.jpg", "v");
    const char *cls[] = {"cls2", "cls10"};
    for (int c = 0; c < 2; c++) {
        snprintf(p, sizeof(p), "train/%s", cls[c]), mkd(p);
        snprintf(p, sizeof(p), "train/%s/aug", cls[c]), mkd(p);
        snprintf(p, sizeof(p), "train/%s/notes.txt", cls[c]), mkf(p, "n");
        for (int i = 1; i <= per - 6; i++)
            snprintf(p, sizeof(p), "train/%s/img%d.jpg", cls[c], i), mkf(p, "x");
        for (int i = per - 5; i <= per - 3; i++)
            snprintf(p, sizeof(p), "train/%s/IMG%d.JPG", cls[c], i), mkf(p, "x");
        for (int i = 1; i <= 3; i++)
            snprintf(p, sizeof(p), "train/%s/aug/img%d.jpg", cls[c], i), mkf(p, "x");
    }
}

static void trap_tree(void)
{
    trap_tree_of(40);
}

/* A torch-ddp trainer (world 2, batch 4, two workers a rank, seed) whose
 * dataset numbers train/'s images in `kind`'s order: the root names the
 * order the opens follow, and its map is that order.  empty_class: train/
 * has a class folder without an image too, so ImageFolder's order does not
 * build there. */
static void identified_in_tree(enum cfs_order kind, uint32_t seed, const char *want_text, int per,
                               bool empty_class)
{
    trap_tree_of(per);
    if (empty_class)
        mkd("train/cache"), mkf("train/cache/index.json", "{}");
    struct cfs_catalog *c = scan();
    uint64_t n;
    uint32_t *order = order_of(c, kind, "train", &n);
    ck_assert_uint_eq(n, 2 * (uint64_t)per);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, seed, 4096)};
    struct heard h;
    struct cfs_roots *r = roots_heard(rp, &h, order);
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = seed, .n = (uint32_t)n,
                        .world = 2, .batch = 4, .workers = 2, .ranks = 2, .epochs = 2};
    struct opens o = simulate(&t, 160);
    for (size_t i = 0; i < o.len; i++)
        cfs_roots_observe(r, order[o.s[i]], o.pid[i], o.ppid[i]);
    wait_heard(&h);
    ck_assert_str_eq(h.root, "train");
    ck_assert_uint_eq(h.n, n);
    ck_assert_msg(h.map_right, "the map is not train's %s order", cfs_order_name(kind));
    ck_assert_uint_eq((uint32_t)h.id.sampler.seed, seed);
    ck_assert_uint_eq(h.id.sampler.world, 2);
    char text[512];
    cfs_roots_text(r, text, sizeof(text));
    if (want_text)
        ck_assert_msg(strstr(text, want_text), "%s", text);
    else /* ImageFolder's, the root's own order: no library named */
        ck_assert_msg(!strstr(text, "order="), "%s", text);
    cfs_roots_destroy(r);
    opens_free(&o);
    free(order);
    cfs_catalog_destroy(c);
}

static void identified_in(enum cfs_order kind, uint32_t seed, const char *want_text, int per)
{
    identified_in_tree(kind, seed, want_text, per, false);
}

static void identified_in_order(enum cfs_order kind, uint32_t seed, const char *want_text)
{
    identified_in(kind, seed, want_text, 40);
}

START_TEST(the_libraries_orders_differ_on_the_traps)
{
    trap_tree();
    struct cfs_catalog *c = scan();
    uint64_t n[4];
    const enum cfs_order kind[] = {CFS_ORDER_IMAGEFOLDER, CFS_ORDER_TIMM, CFS_ORDER_MMPRETRAIN,
                                   CFS_ORDER_ULTRALYTICS};
    uint32_t *o[4];
    for (int k = 0; k < 4; k++)
        o[k] = order_of(c, kind[k], "train", &n[k]);
    /* the same 80 images, in three orders (ultralytics' is mmpretrain's
     * here: the candidate named first, mmpretrain, stands for both) */
    for (int k = 0; k < 4; k++)
        ck_assert_uint_eq(n[k], 80);
    ck_assert(memcmp(o[0], o[1], 80 * sizeof(uint32_t)) != 0);
    ck_assert(memcmp(o[0], o[2], 80 * sizeof(uint32_t)) != 0);
    ck_assert(memcmp(o[1], o[2], 80 * sizeof(uint32_t)) != 0);
    ck_assert(memcmp(o[2], o[3], 80 * sizeof(uint32_t)) == 0);
    for (int k = 0; k < 4; k++)
        free(o[k]);
    cfs_catalog_destroy(c);
}
END_TEST

START_TEST(a_timm_dataset_is_identified_in_timms_order)
{
    identified_in_order(CFS_ORDER_TIMM, 2024, "train: torch-ddp seed=2024 (low 32 bits) "
                                              "world=2 order=timm batch=4");
}
END_TEST

/* 2400 samples: the candidate orders are built on a thread of their own
 * and come to the identification after its first opens. */
START_TEST(a_large_timm_dataset_is_identified_in_timms_order)
{
    identified_in(CFS_ORDER_TIMM, 77, "train: torch-ddp seed=77 (low 32 bits) world=2 order=timm",
                  1200);
}
END_TEST

START_TEST(an_mmpretrain_dataset_is_identified_in_its_order)
{
    identified_in_order(CFS_ORDER_MMPRETRAIN, 99, " order=mmpretrain ");
}
END_TEST

/* A class folder without an image: torchvision's ImageFolder raises, so
 * the root is numbered in ultralytics-cls' order (ImageFolder with empty
 * classes allowed) and timm's of the same 80 images is its candidate. */
START_TEST(a_root_without_imagefolders_order_takes_a_librarys)
{
    identified_in_tree(CFS_ORDER_TIMM, 4242,
                       "train: torch-ddp seed=4242 (low 32 bits) "
                       "world=2 order=timm batch=4",
                       40, true);
}
END_TEST

START_TEST(a_root_with_an_empty_class_is_ultralytics_cls)
{
    identified_in_tree(CFS_ORDER_ULTRALYTICS_CLS, 808, " order=ultralytics-cls ", 40, true);
}
END_TEST

START_TEST(an_imagefolder_dataset_claims_no_library_order)
{
    identified_in_order(CFS_ORDER_IMAGEFOLDER, 31337, NULL);
}
END_TEST

/* An ultralytics detection tree: images/train (100 images: img2 before
 * img10 in timm only, upper-case extensions, a file that is no image),
 * images/val (40), labels/{train,val} beside (no image there: the mount's
 * root is no ImageFolder, its files numbered by sorted path).  A trainer
 * whose dataset is the sorted
 * glob of images/train (YOLODataset), torch-ddp at world 2, then a
 * validation pass over images/val in its order, twice: images/ is an
 * ImageFolder root (classes train and val), but the first opens of each
 * lie in one folder of it, which is the dataset's root. */
START_TEST(a_detection_dataset_is_its_images_folders)
{
    char p[64];
    mkd("images"), mkd("images/train"), mkd("images/val");
    mkd("labels"), mkd("labels/train"), mkd("labels/val");
    mkf("labels/train/img1.txt", "0 0.5 0.5 0.1 0.1"), mkf("labels/val/001.txt", "1 0.5 0.5 1 1");
    mkf("images/train/notes.txt", "n");
    for (int i = 1; i <= 100; i++) {
        snprintf(p, sizeof(p), i % 9 ? "images/train/img%d.jpg" : "images/train/IMG%d.JPG", i);
        mkf(p, "x");
    }
    for (int i = 1; i <= 40; i++)
        snprintf(p, sizeof(p), "images/val/%03d.jpg", i), mkf(p, "v");
    struct cfs_catalog *c = scan();
    ck_assert_ptr_nonnull(strstr(cfs_catalog_order_fallback(c), "class folder 'labels'"));
    ck_assert_uint_eq(cfs_catalog_sample_count(c), cfs_catalog_file_count(c));
    uint64_t n, nval;
    uint32_t *train = order_of(c, CFS_ORDER_ULTRALYTICS, "images/train", &n);
    uint32_t *val = order_of(c, CFS_ORDER_ULTRALYTICS, "images/val", &nval);
    ck_assert_uint_eq(n, 100);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 5150, 4096)};
    struct heard h;
    struct cfs_roots *r = roots_heard(rp, &h, train);
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = 5150, .n = 100, .world = 2,
                        .batch = 4, .workers = 2, .ranks = 2, .epochs = 2};
    struct opens o = simulate(&t, 200);
    for (size_t i = 0; i < o.len; i++)
        cfs_roots_observe(r, train[o.s[i]], o.pid[i], o.ppid[i]);
    wait_heard(&h);
    ck_assert_str_eq(h.root, "images/train");
    ck_assert_msg(h.map_right, "the map is not the sorted glob of images/train");
    ck_assert_uint_eq((uint32_t)h.id.sampler.seed, 5150);
    for (uint64_t v = 0; v < 2 * nval; v++)
        cfs_roots_observe(r, val[v % nval], 5000, 1000);
    char text[512];
    cfs_roots_text(r, text, sizeof(text));
    ck_assert_msg(strstr(text, "images/train: torch-ddp seed=5150 (low 32 bits) world=2 "
                               "order=ultralytics batch=4"),
                  "%s", text);
    ck_assert_msg(strstr(text, "images/val: sequential, world=1 (80 opens)"), "%s", text);
    ck_assert_msg(strstr(text, "images: its opens are images/val's"), "%s", text);
    cfs_roots_destroy(r);
    opens_free(&o);
    free(train);
    free(val);
    cfs_catalog_destroy(c);
}
END_TEST

static void pass_cb(void *arg, const struct cfs_root *root, uint32_t stride)
{
    struct heard *h = arg;
    pthread_mutex_lock(&h->mu);
    snprintf(h->root, sizeof(h->root), "%s", root->name);
    h->n = stride;
    h->map_right = root->map && memcmp(root->map, h->want, root->n * sizeof(*h->want)) == 0;
    h->done = true;
    pthread_mutex_unlock(&h->mu);
}

/* A validation loader over timm's dataset reads timm's order unshuffled:
 * told as a pass in that order, and handed on with timm's map. */
START_TEST(an_unshuffled_pass_in_timms_order)
{
    trap_tree();
    struct cfs_catalog *c = scan();
    uint64_t n;
    uint32_t *order = order_of(c, CFS_ORDER_TIMM, "train", &n);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 1, 16),
                                  .on_pass = pass_cb};
    struct heard h;
    struct cfs_roots *r = roots_heard(rp, &h, order);
    for (uint64_t i = 0; i < 2 * n; i++)
        cfs_roots_observe(r, order[i % n], 5000, 1000);
    ck_assert_msg(h.done, "no pass told");
    ck_assert_str_eq(h.root, "train");
    ck_assert_uint_eq(h.n, 1);
    ck_assert_msg(h.map_right, "the pass's map is not timm's order");
    char text[256];
    cfs_roots_text(r, text, sizeof(text));
    ck_assert_msg(strstr(text, "train: sequential, world=1 order=timm (160 opens)"), "%s", text);
    cfs_roots_destroy(r);
    free(order);
    cfs_catalog_destroy(c);
}
END_TEST

/* A share scan's found(): the seeds, and at the first an unshuffled pass
 * of the root whose identification paces the scan (pid 5000 reading train
 * in order), which stops that identification while the scan runs. */
struct share_seen {
    struct cfs_roots *r;
    const uint32_t *train;
    uint64_t ntrain;
    uint32_t seed[256];
    size_t n;
};

static bool share_found(void *arg, uint32_t seed, uint32_t skip)
{
    struct share_seen *ss = arg;
    (void)skip;
    if (ss->r && ss->n == 0)
        for (uint64_t i = 1; i < 2 * ss->ntrain; i++)
            cfs_roots_observe(ss->r, ss->train[i % ss->ntrain], 5000, 1000);
    if (ss->n < 256)
        ss->seed[ss->n++] = seed;
    return false;
}

/* Node 1's share of a head's sets for root train (n 100), scanned here
 * (cfs_roots_split_scan): paced by train's identification, its CPU in the
 * mount's clairfs_search_cpu_seconds_total, its seeds those of the unpaced
 * scan; the identification, stopped by an unshuffled pass of train while
 * the share runs, lives until the share ends (a sanitizer build tells a
 * use after free).  A root the node has not seen, or no roots at all: the
 * same seeds, at idle priority. */
START_TEST(a_share_scan_is_paced_by_its_roots_identification)
{
    imagenet_tree();
    struct cfs_catalog *c = scan();
    uint64_t ntrain;
    uint32_t *train = samples_of(c, "train", &ntrain);
    ck_assert_uint_eq(ntrain, 100);
    struct cfs_metrics m;
    cfs_metrics_init(&m);
    struct cfs_roots_params rp = {.catalog = c, .derive = true, .identify = params(0, 1, 16),
                                  .on_identified = heard_cb};
    rp.identify.node = 1, rp.identify.nodes = 2;
    rp.identify.metrics = &m;
    struct cfs_roots *r;
    char err[256];
    ck_assert_int_eq(cfs_roots_create(&rp, &r, err, sizeof(err)), 0);
    cfs_roots_observe(r, train[0], 5000, 1000); /* train's root and identification */
    /* a share of 2^17 seeds: its pace reads the identification's after
     * the stop (a chunk of 2^16 seeds a thread between) */
    struct cfs_split_sets sets = {.n = 100, .seed_count = 1u << 18, .nfirst = 2, .nsecond = 2};
    for (uint32_t k = 0; k < 2; k++)
        sets.first[k] = k, sets.second[k] = 10 + k;
    struct share_seen unpaced = {0}, paced = {.r = r, .train = train, .ntrain = ntrain},
                      elsewhere = {0}, none = {0};
    static const struct cfs_seed_threads one_thread = {.threads = 1};
    ck_assert_int_eq(cfs_identify_split_scan(&sets, 1, 2, NULL, share_found, &unpaced, &one_thread),
                     0);
    ck_assert_uint_gt(unpaced.n, 0);
    ck_assert_int_eq(cfs_roots_split_scan(r, "train", &sets, 1, 2, NULL, share_found, &paced), 0);
    ck_assert_uint_eq(paced.n, unpaced.n);
    ck_assert_mem_eq(paced.seed, unpaced.seed, unpaced.n * sizeof(uint32_t));
    char text[256];
    cfs_roots_text(r, text, sizeof(text));
    ck_assert_msg(strstr(text, "train: sequential, world=1"), "%s", text);
    ck_assert_uint_gt(cfs_metrics_get(&m, CFS_M_SEARCH_NS_IDLE) +
                          cfs_metrics_get(&m, CFS_M_SEARCH_NS_NORMAL),
                      0);
    ck_assert_int_eq(cfs_roots_split_scan(r, "val", &sets, 1, 2, NULL, share_found, &elsewhere), 0);
    ck_assert_int_eq(cfs_roots_split_scan(NULL, "train", &sets, 1, 2, NULL, share_found, &none), 0);
    ck_assert_uint_eq(elsewhere.n, unpaced.n);
    ck_assert_uint_eq(none.n, unpaced.n);
    cfs_roots_destroy(r);
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
    tcase_add_test(tc, two_jobs_on_two_folders_are_identified_apart);
    tcase_add_test(tc, a_registered_order_takes_every_open);
    tcase_add_test(tc, a_late_hint_waits_for_its_root);
    tcase_add_test(tc, the_libraries_orders_differ_on_the_traps);
    tcase_add_test(tc, a_timm_dataset_is_identified_in_timms_order);
    tcase_add_test(tc, an_mmpretrain_dataset_is_identified_in_its_order);
    tcase_add_test(tc, a_large_timm_dataset_is_identified_in_timms_order);
    tcase_add_test(tc, an_imagefolder_dataset_claims_no_library_order);
    tcase_add_test(tc, a_root_without_imagefolders_order_takes_a_librarys);
    tcase_add_test(tc, a_root_with_an_empty_class_is_ultralytics_cls);
    tcase_add_test(tc, a_detection_dataset_is_its_images_folders);
    tcase_add_test(tc, an_unshuffled_pass_in_timms_order);
    tcase_add_test(tc, a_share_scan_is_paced_by_its_roots_identification);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
