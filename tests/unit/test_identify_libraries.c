/* Order identification of the training libraries' samplers: opens
 * simulated from the exact models (clairfs/sampler.h) are identified with
 * nothing registered.
 *
 * detectron2's TrainingSampler (MMEngine's InfiniteSampler) is a stream:
 * one generator's randperms back to back, rank r reading every W-th index
 * from r, its DataLoader workers taking chunks of the batch round-robin
 * with no regard for the passes - so chunks straddle them, and with W not
 * dividing n the rank that reads a pass's first index changes from pass
 * to pass.  Within its first pass it reads as torch-ddp (with persistent
 * workers or not); past it only detectron2 fits.  torchdata's
 * StatefulDataLoader without workers reads the same stream at world 1 (one
 * randperm an epoch, none trailing) and is named detectron2; ultralytics'
 * constant seed names a torch fit ultralytics (its one iterator deals the
 * batches to the workers across the epochs), and under DDP its sampler's
 * late epochs show from epoch 1 on; MMEngine's unpadded DefaultSampler
 * shows where a persistent worker runs past its shorter share; the Hugging
 * Face Trainer
 * without data_seed is torch-sampler of the seed its global draw gave.
 * torchdata with workers reads its sampler generator's second randperm
 * and is found by the walk of the seeds people use (identify_torchdata.c),
 * within its bounds only.
 * Orders shaped like these streams but drawn otherwise are refused.
 *
 * Cost: each case searches 4096 seeds around the true one (milliseconds),
 * the refusals 2^20 (a second or two); every search that finds nothing
 * walks the table too (a tenth of a second at these n). */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "clairfs/identify.h"
#include "clairfs/sampler.h"
#include "identify_fixture.h"

#define RANGE 4096

static const uint64_t seeds[] = {0, 1, 2147483647u, 4294967295u, 1234567};

/* A trainer whose loader lives for the run: every rank's stream over
 * `passes` epochs (passes) from the exact model, its workers' batches of B
 * dealt round-robin with the count running on across the epochs - over the
 * whole stream for detectron2 (ToIterableDataset's chunks), each epoch's
 * last batch short otherwise (ultralytics' one iterator) - the readers'
 * opens interleaved one at a time, up to max.  Worker w of rank r is
 * process 2000 + 100 r + w (child of 1000 + r, persistent), or the rank
 * itself without workers. */
static struct opens simulate_run(enum cfs_sampler_kind kind, uint64_t seed, uint32_t n,
                                 uint32_t world, uint32_t batch, uint32_t workers, uint32_t passes,
                                 size_t max)
{
    struct cfs_sampler_params sp = {.kind = kind,
                                    .seed = seed,
                                    .n = n,
                                    .world = world,
                                    .batch = batch,
                                    .persistent_workers = kind == CFS_SAMPLER_ULTRALYTICS};
    struct cfs_sampler *s;
    char err[256];
    ck_assert_int_eq(cfs_sampler_create(&sp, &s, err, sizeof(err)), 0);
    uint32_t readers = world * (workers ? workers : 1);
    uint32_t **stream = calloc(readers, sizeof(*stream));
    size_t *len = calloc(readers, sizeof(*len)), *at = calloc(readers, sizeof(*at));
    uint64_t *j = calloc(world, sizeof(*j)); /* each rank's batch count, in indices */
    for (uint32_t k = 0; k < readers; k++)
        stream[k] = malloc(((size_t)passes * n / world + n + 1) * sizeof(**stream));
    for (uint32_t p = 0; p < passes; p++) {
        ck_assert_int_eq(cfs_sampler_compute_epoch(s, p), 0);
        for (uint32_t r = 0; r < world; r++) {
            uint64_t rl = cfs_sampler_rank_len(s, p, r);
            for (uint64_t i = 0; i < rl; i++, j[r]++) {
                uint32_t k = r * (workers ? workers : 1) +
                             (workers ? (uint32_t)(j[r] / batch % workers) : 0);
                stream[k][len[k]++] = cfs_sampler_rank_at(s, r, i);
            }
            if (kind != CFS_SAMPLER_DETECTRON2 && rl % batch)
                j[r] += batch - rl % batch; /* the epoch's short last batch */
        }
    }
    struct opens o = {0};
    for (bool any = true; any && o.len < max;) {
        any = false;
        for (uint32_t k = 0; k < readers && o.len < max; k++) {
            if (at[k] == len[k])
                continue;
            any = true;
            uint32_t r = k / (workers ? workers : 1), w = workers ? k % workers : 0;
            pid_t pid = workers ? (pid_t)(2000 + 100 * r + w) : (pid_t)(1000 + r);
            push(&o, stream[k][at[k]++], pid, workers ? (pid_t)(1000 + r) : 999);
        }
    }
    for (uint32_t k = 0; k < readers; k++)
        free(stream[k]);
    free(stream);
    free(len);
    free(at);
    free(j);
    cfs_sampler_destroy(s);
    return o;
}

static struct cfs_identified identify_opens(const struct opens *o, uint32_t n, uint32_t around)
{
    struct cfs_identify_params p = params(n, around, RANGE);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, o, &id) == 0, "seed %u: %s", around, id.text);
    return id;
}

/* Across the first pass's end (n = 1001: odd, and 62.5 chunks of 8 a rank
 * at world 2), worlds 1 to 3, with and without workers. */
START_TEST(detectron2_is_identified_past_its_first_pass)
{
    for (uint32_t world = 1; world <= 3; world++)
        for (uint32_t workers = 0; workers <= 2; workers += 2) {
            if (world == 1 && workers == 0)
                continue; /* torchdata's reading: below */
            struct opens o =
                simulate_run(CFS_SAMPLER_DETECTRON2, seeds[_i], 1001, world, 8, workers, 3, 2500);
            struct cfs_identified id = identify_opens(&o, 1001, (uint32_t)seeds[_i]);
            ck_assert_msg(id.sampler.kind == CFS_SAMPLER_DETECTRON2, "world %u workers %u: %s",
                          world, workers, id.text);
            ck_assert_uint_eq(id.sampler.seed, (uint32_t)seeds[_i]);
            ck_assert_uint_eq(id.sampler.world, world);
            ck_assert_uint_eq(id.workers, workers);
            if (workers)
                ck_assert_uint_eq(id.sampler.batch, 8);
            ck_assert_uint_eq(id.epoch, 2);
            ck_assert_uint_eq(id.rank_count, world);
            ck_assert_ptr_nonnull(strstr(id.text, "detectron2"));
            opens_free(&o);
        }
}
END_TEST

/* Within its first pass the stream is torch-ddp's epoch 0 (seed S): named
 * torch-ddp, and the first opens of the next pass refine it. */
START_TEST(detectron2_first_pass_reads_as_torch_ddp)
{
    struct opens o = simulate_run(CFS_SAMPLER_DETECTRON2, seeds[_i], 1001, 2, 8, 2, 1, 600);
    struct cfs_identified id = identify_opens(&o, 1001, (uint32_t)seeds[_i]);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH_DDP, "%s", id.text);
    ck_assert_uint_eq(id.sampler.world, 2);
    opens_free(&o);
}
END_TEST

/* torchdata 0.11+ without workers: after manual_seed(S) its sampler's
 * generator is seeded with the low word of one global random64, and every
 * epoch is that generator's next randperm: detectron2's stream at world 1,
 * seed P.  So it is named; it predicts the same opens. */
START_TEST(torchdata_reads_as_detectron2_at_world_1)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCHDATA,
                        .seed = seeds[_i],
                        .n = 1001,
                        .world = 1,
                        .batch = 8,
                        .ranks = 1,
                        .epochs = 3};
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seeds[_i]);
    uint32_t private_seed = (uint32_t)cfs_mt19937_next64(&mt);
    struct opens o = simulate(&t, 2500);
    struct cfs_identified id = identify_opens(&o, 1001, private_seed);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_DETECTRON2, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, private_seed);
    ck_assert_uint_eq(id.sampler.world, 1);
    ck_assert_uint_eq(id.epoch, 2);
    opens_free(&o);
}
END_TEST

/* torchdata 0.11+ with workers: every epoch's iterator iter()s the batch
 * sampler twice, so epoch 0 reads the sampler generator's second randperm
 * (seeded by the global draw at word K after manual_seed(S)), which no seed
 * scan reaches.  A seed of the table people use, with K small, is found by
 * the walk of the global streams, persistent workers or not (epoch 1 reads
 * randperm 2 with them, 3 without), and names S and K whole. */
START_TEST(torchdata_workers_is_found_from_the_seed_table)
{
    static const struct {
        uint64_t seed, k;
        bool persistent;
    } cases[] = {
        {42, 0, false}, {3407, 0, true}, {0, 11, false}, {1234, 5, true}, {1023, 18, true}};
    struct trainer t = {.kind = CFS_SAMPLER_TORCHDATA_WORKERS,
                        .seed = cases[_i].seed,
                        .rng_offset = cases[_i].k,
                        .persistent = cases[_i].persistent,
                        .n = 1001,
                        .world = 1,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 1,
                        .epochs = 3};
    struct opens o = simulate(&t, 2500);
    struct cfs_identified id = identify_opens(&o, 1001, 1u << 20);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCHDATA_WORKERS, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, cases[_i].seed);
    ck_assert_uint_eq(id.sampler.rng_offset, cases[_i].k);
    ck_assert_int_eq(id.sampler.persistent_workers, cases[_i].persistent);
    ck_assert_uint_eq(id.sampler.batch, 8);
    ck_assert_uint_eq(id.workers, 2);
    ck_assert_uint_eq(id.epoch, 2);
    ck_assert_uint_eq(id.epoch_opens, 1001);
    opens_free(&o);
}
END_TEST

/* The walk's bounds: a seed outside the table, or K past 18 words at n =
 * 1001 (a model built before the loader), is not found, and nothing else
 * is claimed. */
START_TEST(torchdata_workers_outside_the_walk_is_not_identified)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCHDATA_WORKERS,
                        .seed = _i ? 42 : 987654321,
                        .rng_offset = _i ? 19 : 0,
                        .n = 1001,
                        .world = 1,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 1,
                        .epochs = 2};
    struct opens o = simulate(&t, 1500);
    struct cfs_identify_params p = params(1001, 1u << 20, RANGE);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == -ENOENT, "claimed: %s", id.text);
    opens_free(&o);
}
END_TEST

/* torchdata 0.8-0.10: its RandomSampler seeds its generator with 1 and
 * iterates torch's RandomSampler, a generator function (lazy: an iterator
 * made and dropped draws nothing; the trailing randperm is drawn when an
 * epoch ends), so with workers or without, persistent or not, epoch e
 * reads randperm 2e of a generator seeded 1: torch-sampler seed=1, named
 * so from epoch 1 on. */
START_TEST(torchdata_before_0_11_reads_as_torch_sampler_seed_1)
{
    struct trainer t = {.kind = CFS_SAMPLER_TORCH_SAMPLER,
                        .seed = 1,
                        .n = 1001,
                        .world = 1,
                        .batch = 8,
                        .workers = 2 * (uint32_t)(_i != 0),
                        .persistent = _i == 2,
                        .ranks = 1,
                        .epochs = 2};
    struct opens o = simulate(&t, 1500);
    struct cfs_identified id = identify_opens(&o, 1001, 1);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH_SAMPLER, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, 1);
    ck_assert_uint_eq(id.workers, t.workers);
    ck_assert_uint_eq(id.epoch, 1);
    opens_free(&o);
}
END_TEST

/* The Trainer without data_seed: torch-sampler of the drawn seed, every
 * epoch predicted (its seed S is not needed). */
START_TEST(hf_trainer_global_reads_as_torch_sampler)
{
    struct trainer t = {.kind = CFS_SAMPLER_HF_TRAINER_GLOBAL,
                        .seed = seeds[_i],
                        .n = 1001,
                        .world = 1,
                        .batch = 8,
                        .workers = 2,
                        .ranks = 1,
                        .epochs = 2};
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seeds[_i]);
    uint32_t private_seed = (uint32_t)cfs_mt19937_next64(&mt);
    struct opens o = simulate(&t, 1500);
    struct cfs_identified id = identify_opens(&o, 1001, private_seed);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH_SAMPLER, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, private_seed);
    ck_assert_uint_eq(id.epoch, 1);
    opens_free(&o);
}
END_TEST

/* ultralytics in one process: torch with persistent workers, seeded
 * 6148914691236517204; named ultralytics with its whole seed from its
 * first epoch on (where torch without persistent workers reads the same). */
START_TEST(ultralytics_is_named_by_its_seed)
{
    static const uint64_t seed = 6148914691236517204ull;
    struct trainer t = {.kind = CFS_SAMPLER_ULTRALYTICS,
                        .seed = seed,
                        .n = 1001,
                        .world = 1,
                        .batch = 8,
                        .workers = 2,
                        .persistent = true,
                        .ranks = 1,
                        .epochs = 1};
    struct opens o = simulate(&t, 600);
    struct cfs_identified id = identify_opens(&o, 1001, (uint32_t)seed);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_ULTRALYTICS, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, seed);
    ck_assert_ptr_nonnull(strstr(id.text, "ultralytics seed=6148914691236517204 "));
    opens_free(&o);
    /* over 3 epochs of 125 batches (n = 993), the last short: worker 0
     * reads batches 0, 2, ..., 124, then epoch 1's batch 0 goes to worker 1 */
    o = simulate_run(CFS_SAMPLER_ULTRALYTICS, seed, 993, 1, 8, 2, 3, 2800);
    id = identify_opens(&o, 993, (uint32_t)seed);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_ULTRALYTICS && id.epoch == 2, "%s", id.text);
    opens_free(&o);
    /* the same stream of another seed is torch's */
    t.kind = CFS_SAMPLER_TORCH, t.seed = 77;
    o = simulate(&t, 1500);
    id = identify_opens(&o, 1001, 77);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH, "%s", id.text);
    opens_free(&o);
}
END_TEST

/* ultralytics under DDP: DistributedSampler(seed 0) read one epoch late
 * (epochs 0 and 1 read seed 0's epoch 0) by one iterator's workers.  In
 * epoch 0 it is torch-ddp; epoch 1 refutes torch-ddp and names it.
 * n = 1001 at world 2: 63 batches of 8 a rank, the last short. */
START_TEST(ultralytics_ddp_is_named_at_epoch_1)
{
    struct opens o = simulate_run(CFS_SAMPLER_ULTRALYTICS_DDP, seeds[_i], 1001, 2, 8, 2, 1, 800);
    struct cfs_identified id = identify_opens(&o, 1001, (uint32_t)seeds[_i]);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH_DDP, "%s", id.text);
    opens_free(&o);
    o = simulate_run(CFS_SAMPLER_ULTRALYTICS_DDP, seeds[_i], 1001, 2, 8, 2, 3, 2800);
    id = identify_opens(&o, 1001, (uint32_t)seeds[_i]);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_ULTRALYTICS_DDP, "%s", id.text);
    ck_assert_uint_eq(id.sampler.seed, (uint32_t)seeds[_i]);
    ck_assert_uint_eq(id.sampler.world, 2);
    ck_assert_uint_eq(id.workers, 2);
    ck_assert_uint_eq(id.sampler.batch, 8);
    ck_assert_uint_eq(id.epoch, 2);
    opens_free(&o);
}
END_TEST

/* MMEngine's DefaultSampler(round_up=False) at world 2 on n = 1001: rank 1
 * reads 500 indices where torch-ddp pads it to 501.  With persistent
 * workers rank 1's worker goes on into epoch 1 one index early, which
 * refutes torch-ddp and names mmengine-noround; without them each epoch's
 * workers end and torch-ddp predicts every open (named so).  With round_up
 * (mmengine) it is torch-ddp's order itself. */
START_TEST(mmengine_noround_shows_with_persistent_workers)
{
    struct trainer t = {.kind = CFS_SAMPLER_MMENGINE_NOROUND,
                        .seed = seeds[_i],
                        .n = 1001,
                        .world = 2,
                        .batch = 8,
                        .workers = 2,
                        .persistent = true,
                        .ranks = 2,
                        .epochs = 2};
    struct opens o = simulate(&t, 1300);
    struct cfs_identified id = identify_opens(&o, 1001, (uint32_t)seeds[_i]);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_MMENGINE_NOROUND, "%s", id.text);
    ck_assert_uint_eq(id.sampler.world, 2);
    ck_assert_uint_eq(id.epoch, 1);
    ck_assert_uint_eq(id.epoch_opens, 1001);
    opens_free(&o);
    t.persistent = false;
    o = simulate(&t, 1300);
    id = identify_opens(&o, 1001, (uint32_t)seeds[_i]);
    ck_assert_msg(id.sampler.kind == CFS_SAMPLER_TORCH_DDP, "%s", id.text);
    opens_free(&o);
}
END_TEST

/* Stream-shaped orders drawn otherwise are refused over 2^20 seeds (the
 * detectron2 hypothesis among the others): passes of a permutation that is
 * no torch randperm (xorshift Fisher-Yates), dealt as detectron2 deals to
 * two ranks and read by one; sequential passes; Python's random.shuffle
 * (backwards Fisher-Yates on MT19937 seeded in the range) pass after pass
 * from one generator; and a custom sampler that reads torch's randperm of a
 * seed in the range, then that same permutation reversed. */
static void refused(const uint32_t *order, size_t len, uint32_t n, uint32_t ranks, uint32_t batch)
{
    struct opens o = {0};
    for (size_t i = 0; i < len; i++)
        push(&o, order[i], (pid_t)(1000 + i % ranks), 999);
    (void)batch;
    struct cfs_identify_params p = params(n, 1u << 19, 1u << 20);
    struct cfs_identified id;
    ck_assert_msg(identify(&p, &o, &id) == -ENOENT, "misidentified: %s", id.text);
    opens_free(&o);
}

START_TEST(stream_shaped_orders_are_refused)
{
    enum { N = 301, PASSES = 3 };
    uint32_t *order = malloc(PASSES * N * sizeof(*order));
    uint64_t x = 88172645463325252ull;
    for (uint32_t p = 0; p < PASSES; p++) {
        uint32_t *perm = order + p * N;
        for (uint32_t i = 0; i < N; i++)
            perm[i] = i;
        for (uint32_t i = N - 1; i > 0; i--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t j = (uint32_t)(x % (i + 1)), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
    }
    refused(order, PASSES * N, N, 2, 1);
    refused(order, PASSES * N, N, 1, 1);
    for (uint32_t k = 0; k < PASSES * N; k++)
        order[k] = k % N;
    refused(order, PASSES * N, N, 1, 1);
    refused(order, PASSES * N, N, 2, 1);
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, 4242);
    for (uint32_t p = 0; p < PASSES; p++) {
        uint32_t *perm = order + p * N;
        for (uint32_t i = 0; i < N; i++)
            perm[i] = i;
        for (uint32_t i = N - 1; i > 0; i--) {
            uint32_t j = cfs_mt19937_next32(&mt) % (i + 1), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
    }
    refused(order, PASSES * N, N, 1, 1);
    refused(order, PASSES * N, N, 2, 1);
    cfs_mt19937_seed(&mt, 4243);
    cfs_torch_randperm(&mt, order, N, CFS_RANDPERM_CURRENT);
    for (uint32_t i = 0; i < N; i++)
        order[N + i] = order[N - 1 - i];
    refused(order, 2 * N, N, 1, 1);
    refused(order, 2 * N, N, 2, 1);
    free(order);
}
END_TEST

static Suite *identify_libraries_suite(void)
{
    Suite *s = suite_create("identify_libraries");
    TCase *t = tcase_create("libraries");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, detectron2_is_identified_past_its_first_pass, 0, 5);
    tcase_add_loop_test(t, detectron2_first_pass_reads_as_torch_ddp, 0, 5);
    tcase_add_loop_test(t, torchdata_reads_as_detectron2_at_world_1, 0, 5);
    tcase_add_loop_test(t, torchdata_workers_is_found_from_the_seed_table, 0, 5);
    tcase_add_loop_test(t, torchdata_workers_outside_the_walk_is_not_identified, 0, 2);
    tcase_add_loop_test(t, torchdata_before_0_11_reads_as_torch_sampler_seed_1, 0, 3);
    tcase_add_loop_test(t, hf_trainer_global_reads_as_torch_sampler, 0, 5);
    tcase_add_test(t, ultralytics_is_named_by_its_seed);
    tcase_add_loop_test(t, ultralytics_ddp_is_named_at_epoch_1, 0, 5);
    tcase_add_loop_test(t, mmengine_noround_shows_with_persistent_workers, 0, 5);
    suite_add_tcase(s, t);
    TCase *f = tcase_create("refusals");
    tcase_set_timeout(f, 120);
    tcase_add_test(f, stream_shaped_orders_are_refused);
    suite_add_tcase(s, f);
    return s;
}

int main(void)
{
    return cfs_check_run(identify_libraries_suite());
}
