/* A distributed mount's identification at ImageNet's size: for a torch-ddp
 * trainer on 2, 4 and 8 nodes with 1 and 2 ranks a node, the 2 in a block
 * or dealt round robin (srun --distribution=cyclic), and on 32 nodes of one
 * rank (past the seed filter's vector words) (4 DataLoader workers, batch
 * 32) over 1 281 167 samples, the opens and the time the
 * node with rank 0 takes to identify the order alone, and those every
 * other node takes to check that node's claim against its own opens
 * (clairfs/order_agree.h: the claim as a late hint with a seed).
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

/* Node `node` of world/L nodes identifies from its shortest prefix: the
 * opens it needed into *opens, the seconds of the successful attempt
 * returned (-1: none). */
static double node_share(uint32_t world, uint32_t per_node, bool cyclic, uint32_t node,
                         size_t *opens)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_DDP,
                        .seed = SEED,
                        .n = N,
                        .world = world,
                        .batch = 32,
                        .workers = 4,
                        .rank_first = cyclic ? node : per_node * node,
                        .ranks = per_node,
                        .rank_stride = cyclic ? world / per_node : 1,
                        .epochs = 1};
    struct opens o = simulate(&t, 4096);
    struct cfs_identify_params p = {
        .n = N, .node = node, .nodes = world / per_node, .process_alive = no_process};
    struct cfs_sampler_params claim = {
        .kind = CFS_SAMPLER_TORCH_DDP, .seed = SEED, .n = N, .world = world, .batch = 32};
    if (node) {
        p.hint = &claim;
        p.hint_has_seed = p.hint_identified = true;
    }
    struct cfs_identified id;
    char err[256];
    double secs = -1;
    for (size_t k = 32; k <= o.len; k *= 2) {
        double t0 = now();
        int rc = cfs_identify_offline(&p, o.s, o.pid, o.ppid, k, &id, err, sizeof(err));
        if (rc == 0) {
            secs = now() - t0;
            *opens = k;
            if (node == 0 || node == 1 || node == world / per_node - 1)
                printf("world %2u, %u a node%s, node %u (%s): %4zu opens, %.3f s: %s\n", world,
                       per_node, cyclic ? " cyclic" : "", node, node ? "checks the claim" : "alone",
                       k, secs, id.text);
            break;
        }
        if (rc != -ENOENT) {
            printf("world %u node %u: %s\n", world, node, err);
            break;
        }
    }
    opens_free(&o);
    return secs;
}

/* Nodes 2, 4 and 8 at 1 and 2 ranks a node (blocks, then cyclic), and 32
 * of one: the head node alone, then every other node checking its claim
 * (on their own hosts, at once: the slowest counts); the compute between
 * the opens and the agreement. */
START_TEST(shares)
{
    static const uint32_t nodes[] = {2, 4, 8, 32}, per[] = {1, 2, 2};
    for (size_t l = 0; l < 3; l++)
        for (size_t k = 0; k < 4; k++) {
            bool cyclic = l == 2;
            if (nodes[k] == 32 && per[l] != 1)
                continue;
            uint32_t world = nodes[k] * per[l];
            size_t head_opens = 0, opens = 0, most = 0;
            double head = node_share(world, per[l], cyclic, 0, &head_opens), slowest = 0;
            bool all = head >= 0;
            for (uint32_t node = 1; node < nodes[k] && all; node++) {
                double secs = node_share(world, per[l], cyclic, node, &opens);
                all = secs >= 0;
                slowest = secs > slowest ? secs : slowest;
                most = opens > most ? opens : most;
            }
            if (all)
                printf("%u nodes, %u a node%s: head %zu opens %.3f s, then the slowest check "
                       "%.3f s (up to %zu opens a node): %.3f s of compute to the agreement\n",
                       nodes[k], per[l], cyclic ? " cyclic" : "", head_opens, head, slowest, most,
                       head + slowest);
            else
                printf("%u nodes, %u a node%s: not every node identified\n", nodes[k], per[l],
                       cyclic ? " cyclic" : "");
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
