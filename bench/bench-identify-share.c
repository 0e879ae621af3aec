/* A distributed mount's identification at ImageNet's size: for a torch-ddp
 * trainer of world 4, 8 and 16 with 2 ranks a node (4 DataLoader workers,
 * batch 32) over 1 281 167 samples, the opens and the time the node with
 * rank 0 takes to identify the order alone, and those another node (the
 * second and the last) takes to check that node's claim against its own
 * opens (clairfs/order_agree.h: the claim as a late hint with a seed).
 * The opens are epoch 0's first, the workers interleaved; the prefix is
 * doubled from 32 until identification.  The seed is small (42: within the
 * scan's first 2^20 seeds, at the normal priority): a seed far in the range
 * costs the head node the full scan, which bench-identify.c measures.  The
 * agreement itself is one note a node over the peer protocol (milliseconds).
 *
 * usage: bench-identify-share */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clairfs/identify.h"
#include "identify_fixture.h"

#define N 1281167u
#define SEED 42u

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Node `node` of world/2 nodes identifies from its shortest prefix. */
static void node_share(uint32_t world, uint32_t node)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP, .seed = SEED, .n = N, .world = world,
                        .batch = 32, .workers = 4, .rank_first = 2 * node, .ranks = 2,
                        .epochs = 1};
    struct opens o = simulate(&t, 4096);
    struct cfs_identify_params p = {.n = N, .node = node, .nodes = world / 2,
                                    .process_alive = no_process};
    struct cfs_sampler_params claim = {
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = SEED, .n = N, .world = world, .batch = 32};
    if (node) {
        p.hint = &claim;
        p.hint_has_seed = p.hint_identified = true;
    }
    struct cfs_identified id;
    char err[256];
    for (size_t k = 32; k <= o.len; k *= 2) {
        double t0 = now();
        int rc = cfs_identify_offline(&p, o.s, o.pid, o.ppid, k, &id, err, sizeof(err));
        double secs = now() - t0;
        if (rc == 0) {
            printf("world %2u node %u (%s): %4zu opens, %.3f s: %s\n", world, node,
                   node ? "checks the claim" : "alone", k, secs, id.text);
            break;
        }
        if (rc != -ENOENT) {
            printf("world %u node %u: %s\n", world, node, err);
            break;
        }
    }
    opens_free(&o);
}

START_TEST(shares)
{
    static const uint32_t worlds[] = {4, 8, 16};
    for (size_t w = 0; w < 3; w++) {
        node_share(worlds[w], 0);
        node_share(worlds[w], 1);
        node_share(worlds[w], worlds[w] / 2 - 1);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("identify_share");
    TCase *t = tcase_create("shares");
    tcase_set_timeout(t, 1800);
    tcase_add_test(t, shares);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK); /* the fixture asserts as the tests do */
    srunner_run_all(r, CK_SILENT);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
