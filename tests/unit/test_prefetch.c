/* The data path without FUSE (the position tracker has its own test,
 * test_prefetch_track.c): open/read/release over a temporary source with a
 * real plan, cache and io engine (io_uring and threads), every byte compared, metrics exact;
 * and a two-node mount whose peer is a fake (fake_peer.h): which fetches go
 * to the peer, what its answers count, and the fallback to the PFS. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/catalog.h"
#include "clairfs/metrics.h"
#include "clairfs/options.h"
#include "clairfs/peer.h"
#include "clairfs/prefetch.h"
#include "clairfs/run_config.h"
#include "clairfs/sampler.h"
#include "src/prefetch_i.h"
#include "epoch_stream.h"
#include "fake_peer.h"
#include "prefetch_fixture.h"


/* 4 workers x prefetch 2 x batch 8: opens up to 64 files out of order. */
static const char *io_kinds[] = {"io=threads", "io=uring"};

/* ram >= dataset: everything staged before the trainer starts, every read a
 * RAM hit, each file fetched exactly once, all dropped after the last epoch. */
START_TEST(path_planned_all_in_ram)
{
    struct fixture fx;
    struct cfs_metrics m;
    char opts[128];
    fixture_init(&fx);
    snprintf(opts, sizeof(opts), "seed=5,epochs=3,ram=16M,%s", io_kinds[_i]);
    struct cfs_prefetch *pf = make_pf(&fx, opts, &m, NULL);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    for (uint32_t e = 0; e < 3; e++)
        replay_epoch(pf, &fx, 5, e);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), 3 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_PFS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_SSD), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 3 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 3);
    ck_assert_uint_eq(mget(&m, CFS_M_STALL_NS), 0);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert_uint_eq(st.cache_bytes[0], 0); /* dropped after their last read */
    ck_assert_uint_eq(st.dropped, NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_CACHE_BYTES_RAM), 0);
    char state[16];
    ck_assert_int_eq(cfs_prefetch_state(pf, cfs_catalog_sample_entry(fx.cat, 0), state, 16), 0);
    ck_assert_str_eq(state, "pfs");
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* The tracker's window reaches epoch `epoch` (the prefetcher plans the
 * next window while the trainer reads the last of the current one). */
static bool window_holds(struct cfs_prefetch *pf, uint32_t epoch)
{
    for (int i = 0; i < 1000; i++) {
        pthread_rwlock_rdlock(&pf->plan_lock);
        uint32_t end = pf->track ? pf_track_end_epoch(pf->track) : 0;
        pthread_rwlock_unlock(&pf->plan_lock);
        if (end > epoch)
            return true;
        usleep(10000);
    }
    return false;
}

/* RAM for a quarter of the dataset: a plan covers a window of 4 epochs
 * (run_config.h), and the trainer reads on past it: every open of 8 epochs
 * predicted, over three windows, each planned by the prefetcher from the
 * last epoch of the one before; `epoch 2` then plans the window from 2. */
START_TEST(path_windows_follow_the_trainer)
{
    struct fixture fx;
    struct cfs_metrics m;
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "seed=5,epochs=10,ram=480K", &m, NULL);
    pthread_rwlock_rdlock(&pf->plan_lock);
    ck_assert_uint_eq(pf_track_end_epoch(pf->track), 4);
    pthread_rwlock_unlock(&pf->plan_lock);
    for (uint32_t e = 0; e < 8; e++) {
        replay_epoch(pf, &fx, 5, e);
        ck_assert_msg(window_holds(pf, e + 1), "no plan for epoch %u", e + 1);
    }
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 8 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 8);
    pthread_rwlock_rdlock(&pf->plan_lock);
    ck_assert_uint_eq(pf_track_start_epoch(pf->track), 6);
    ck_assert_uint_eq(pf_track_end_epoch(pf->track), 10);
    pthread_rwlock_unlock(&pf->plan_lock);
    /* `epoch N` outside the window plans the window from N. */
    struct cfs_ctl_cmd cmd = {.kind = CFS_CTL_CMD_EPOCH, .value = 2};
    ck_assert_int_eq(cfs_prefetch_command(pf, &cmd), 0);
    pthread_rwlock_rdlock(&pf->plan_lock);
    ck_assert_uint_eq(pf_track_start_epoch(pf->track), 2);
    pthread_rwlock_unlock(&pf->plan_lock);
    replay_epoch(pf, &fx, 5, 2);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 9 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    cmd.value = 10; /* past the run */
    ck_assert_int_eq(cfs_prefetch_command(pf, &cmd), -ERANGE);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Without a seed, RAM for the dataset: the sweep stages every file before
 * a read, in one fetch each; then every read is a RAM hit, none predicted.
 * With RAM for half of it: the sweep fills the free room only (never above
 * the tier, no file twice), and an epoch reads some of it from RAM. */
START_TEST(path_sweep_without_seed)
{
    struct fixture fx;
    struct cfs_metrics m;
    char opts[128];
    fixture_init(&fx);
    snprintf(opts, sizeof(opts), "ram=16M,%s", io_kinds[_i]);
    struct cfs_prefetch *pf = make_pf(&fx, opts, &m, NULL);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    for (uint32_t e = 0; e < 2; e++)
        replay_epoch(pf, &fx, 5, e);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_PFS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), 2 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 0);
    cfs_prefetch_destroy(pf);

    snprintf(opts, sizeof(opts), "ram=%" PRIu64 ",%s", fx.total / 2, io_kinds[_i]);
    pf = make_pf(&fx, opts, &m, NULL);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert_uint_gt(mget(&m, CFS_M_FETCH_BYTES_PFS), 0);
    ck_assert_uint_le(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total / 2);
    ck_assert_uint_le(mget(&m, CFS_M_FETCHES_PFS), NFILES);
    ck_assert_uint_le(mget(&m, CFS_M_CACHE_PEAK_RAM), fx.total / 2);
    replay_epoch(pf, &fx, 5, 0);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM) + mget(&m, CFS_M_READS_PFS), NFILES);
    ck_assert_uint_gt(mget(&m, CFS_M_READS_RAM), 0);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Bytes of the files the RAM tier holds now. */
static uint64_t held_bytes(struct cfs_prefetch *pf, const struct fixture *fx)
{
    uint64_t held = 0;
    for (uint32_t s = 0; s < NFILES; s++) {
        cfs_id id = cfs_catalog_sample_entry(fx->cat, s);
        char state[16];
        ck_assert_int_eq(cfs_prefetch_state(pf, id, state, sizeof(state)), 0);
        ck_assert_str_ne(state, "inflight");
        if (strcmp(state, "ram") == 0)
            held += cfs_catalog_entry(fx->cat, id)->size;
    }
    return held;
}

/* An epoch's opens from..to-1, in batches of 8, the prefetcher given its
 * turn after each (as a trainer that computes between batches); then the
 * bytes the PFS has served.  *next: the sample the epoch opens at `to`. */
static uint64_t replay_epoch_slowly(struct cfs_prefetch *pf, const struct fixture *fx,
                                    const struct cfs_metrics *m, uint32_t epoch, uint32_t from,
                                    uint32_t to, uint32_t *next)
{
    uint32_t *s = epoch_stream(NFILES, 5, epoch);
    for (uint32_t i = from; i < to; i++) {
        read_check(pf, fx, s[i]);
        if (i % 8 == 7)
            ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    }
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    if (next)
        *next = to < NFILES ? s[to] : UINT32_MAX;
    free(s);
    return mget(m, CFS_M_FETCH_BYTES_PFS);
}

/* Bytes of sample s when the RAM tier does not hold it, else 0. */
static uint64_t unheld_bytes(struct cfs_prefetch *pf, const struct fixture *fx, uint32_t s)
{
    cfs_id id = cfs_catalog_sample_entry(fx->cat, s);
    char state[16];
    ck_assert_int_eq(cfs_prefetch_state(pf, id, state, sizeof(state)), 0);
    return strcmp(state, "ram") == 0 ? 0 : cfs_catalog_entry(fx->cat, id)->size;
}

/* Without a seed, RAM for half the dataset: once the free room is taken,
 * the sweep goes on by evicting the files the trainer has read in this
 * pass (never one it has not), so the source is used for the whole epoch:
 * far more reads hit RAM than the free room could hold, and no file is
 * fetched twice in an epoch (the PFS's bytes are the dataset's exactly,
 * then in the next pass the files RAM did not hold at its start).  The
 * tier never goes over its bound; every byte is compared. */
START_TEST(path_sweep_evicts_read_files)
{
    struct fixture fx;
    struct cfs_metrics m;
    char opts[128];
    fixture_init(&fx);
    uint64_t ram = fx.total / 2;
    snprintf(opts, sizeof(opts), "ram=%" PRIu64 ",%s", ram, io_kinds[_i]);
    struct cfs_prefetch *pf = make_pf(&fx, opts, &m, NULL);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    uint64_t first = mget(&m, CFS_M_READS_RAM);
    ck_assert_uint_eq(first, 0);
    /* What the free room alone gives: the files staged before any read. */
    uint64_t room_files = mget(&m, CFS_M_FETCHES_PFS);
    ck_assert_uint_lt(room_files, NFILES * 2 / 3);

    /* Before the pass's last open (after it the sweep may begin the next
     * one): every file read so far was fetched once, the last one at most
     * once, if the sweep has staged it. */
    uint32_t last;
    uint64_t bytes = replay_epoch_slowly(pf, &fx, &m, 0, 0, NFILES - 1, &last);
    ck_assert_uint_eq(bytes, fx.total - unheld_bytes(pf, &fx, last));
    replay_epoch_slowly(pf, &fx, &m, 0, NFILES - 1, NFILES, NULL);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM) + mget(&m, CFS_M_READS_PFS), NFILES);
    ck_assert_uint_gt(mget(&m, CFS_M_READS_RAM), room_files + NFILES / 5);
    ck_assert_uint_le(mget(&m, CFS_M_CACHE_PEAK_RAM), ram);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 0);

    /* The next pass: the sweep starts again from the first file; what RAM
     * holds now is kept until read, the rest fetched once. */
    uint64_t held = held_bytes(pf, &fx), bytes0 = mget(&m, CFS_M_FETCH_BYTES_PFS);
    uint64_t ram0 = mget(&m, CFS_M_READS_RAM);
    ck_assert_uint_gt(held, 0);
    bytes = replay_epoch_slowly(pf, &fx, &m, 1, 0, NFILES - 1, &last);
    ck_assert_uint_eq(bytes - bytes0, fx.total - held - unheld_bytes(pf, &fx, last));
    replay_epoch_slowly(pf, &fx, &m, 1, NFILES - 1, NFILES, NULL);
    ck_assert_uint_gt(mget(&m, CFS_M_READS_RAM) - ram0, room_files + NFILES / 5);
    ck_assert_uint_le(mget(&m, CFS_M_CACHE_PEAK_RAM), ram);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* Without a seed, no_sweep: reactive LRU, nothing predicted. */
START_TEST(path_lru_without_seed)
{
    struct fixture fx;
    struct cfs_metrics m;
    char opts[128];
    fixture_init(&fx);
    snprintf(opts, sizeof(opts), "ram=16M,no_sweep,%s", io_kinds[_i]);
    struct cfs_prefetch *pf = make_pf(&fx, opts, &m, NULL);
    for (uint32_t e = 0; e < 3; e++) {
        replay_epoch(pf, &fx, 5, e);
        ck_assert_uint_eq(mget(&m, CFS_M_READS_PFS), NFILES);
        ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), e * NFILES);
    }
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_MISS), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    char state[16];
    cfs_id id = cfs_catalog_sample_entry(fx.cat, 3);
    ck_assert_int_eq(cfs_prefetch_state(pf, id, state, 16), 0);
    ck_assert_str_eq(state, "ram");
    /* What a peer may ask for: ids only, checked against the catalog. */
    struct cfs_peer_view v;
    ck_assert_int_eq(cfs_prefetch_provide(pf, id, &v), 0);
    ck_assert_uint_eq(v.len, cfs_catalog_entry(fx.cat, id)->size);
    v.release(v.release_arg, &v);
    ck_assert_int_eq(cfs_prefetch_provide(pf, cfs_catalog_entry_count(fx.cat), &v), -ENOENT);
    ck_assert_int_eq(cfs_prefetch_provide(pf, UINT32_MAX, &v), -ENOENT);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* ram = 30 %: every byte right, the tier never over its bound, every open
 * counted once. */
START_TEST(path_small_ram)
{
    struct fixture fx;
    struct cfs_metrics m;
    char opts[160];
    fixture_init(&fx);
    uint64_t ram = fx.total * 3 / 10;
    snprintf(opts, sizeof(opts), "seed=9,epochs=4,ram=%llu,%s", (unsigned long long)ram,
             io_kinds[_i]);
    struct cfs_prefetch *pf = make_pf(&fx, opts, &m, NULL);
    for (uint32_t e = 0; e < 4; e++) {
        uint32_t *s = epoch_stream(NFILES, 9, e);
        for (uint32_t i = 0; i < NFILES; i++) {
            read_check(pf, &fx, s[i]);
            ck_assert_uint_le(mget(&m, CFS_M_CACHE_BYTES_RAM), ram);
        }
        free(s);
    }
    uint64_t reads = mget(&m, CFS_M_READS_RAM) + mget(&m, CFS_M_READS_PFS);
    ck_assert_uint_eq(reads, 4 * NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_SSD), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), 4 * NFILES);
    ck_assert_uint_ge(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    /* the plan keeps about 30 % resident: some reads must hit */
    ck_assert_uint_gt(mget(&m, CFS_M_READS_RAM), NFILES);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* SSD tier: staged, persisted, reused by a second "mount" (warm restart);
 * a flipped byte in an entry file is detected, counted and refetched. */
START_TEST(path_ssd_warm_and_corrupt)
{
    struct fixture fx;
    struct cfs_metrics m;
    char opts[256];
    fixture_init(&fx);
    snprintf(opts, sizeof(opts), "seed=3,epochs=3,ram=0,ssd=64M,ssd_dir=%s,%s", fx.ssd,
             io_kinds[_i]);
    struct cfs_prefetch *pf = make_pf(&fx, opts, &m, fx.idx);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    struct cfs_prefetch_stats st;
    cfs_prefetch_stats(pf, &st);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), fx.total);
    cfs_prefetch_destroy(pf);

    /* flip one byte of the entry of sample 10 (size > 0) */
    cfs_id victim = cfs_catalog_sample_entry(fx.cat, 10);
    char path[160];
    snprintf(path, sizeof(path), "%s/cache/%08x", fx.ssd, victim);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, 100), 1);
    c ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &c, 1, 100), 1);
    close(fd);

    /* The empty file fits in ram=0: the plan keeps it in RAM, so it is not
     * persisted and is staged again. */
    pf = make_pf(&fx, opts, &m, fx.idx);
    cfs_prefetch_stats(pf, &st);
    ck_assert_uint_eq(st.loaded, NFILES - 1);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_FETCH_BYTES_PFS), 0);
    replay_epoch(pf, &fx, 3, 0);
    cfs_prefetch_stats(pf, &st);
    ck_assert_uint_eq(st.checksum_failures, 1);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_SSD), NFILES - 2);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_PFS), 1);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), 1);
    /* read from the source once, and staged again for a later epoch once
     * epoch 0 is done and the prefetcher's window moves on */
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    cfs_prefetch_stats(pf, &st);
    ck_assert_uint_eq(st.direct_opens, 1);
    ck_assert_msg(mget(&m, CFS_M_FETCH_BYTES_PFS) == 2 * file_size(10),
                  "fetched %llu, prefetches %llu demand %llu direct %llu",
                  (unsigned long long)mget(&m, CFS_M_FETCH_BYTES_PFS),
                  (unsigned long long)st.prefetches, (unsigned long long)st.demand_fetches,
                  (unsigned long long)st.direct_opens);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST

/* control: `seed N` re-plans a mount that had none; `epoch N` jumps. */
START_TEST(path_seed_and_epoch_commands)
{
    struct fixture fx;
    struct cfs_metrics m;
    fixture_init(&fx);
    struct cfs_prefetch *pf = make_pf(&fx, "ram=16M,epochs=3", &m, NULL);
    struct cfs_ctl_cmd cmd = {.kind = CFS_CTL_CMD_SEED, .value = 21};
    ck_assert_int_eq(cfs_prefetch_command(pf, &cmd), 0);
    ck_assert_int_eq(cfs_prefetch_wait_idle(pf, 30), 0);
    cmd = (struct cfs_ctl_cmd){.kind = CFS_CTL_CMD_EPOCH, .value = 2};
    ck_assert_int_eq(cfs_prefetch_command(pf, &cmd), 0);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 2);
    replay_epoch(pf, &fx, 21, 2);
    ck_assert_uint_eq(mget(&m, CFS_M_PREDICTION_HIT), NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_READS_RAM), NFILES);
    ck_assert_uint_eq(mget(&m, CFS_M_EPOCH), 3);
    cmd.value = 7;
    ck_assert_int_eq(cfs_prefetch_command(pf, &cmd), -ERANGE);
    cfs_prefetch_destroy(pf);
    fixture_fini(&fx);
}
END_TEST


/* ---- two nodes, the other one a fake peer */

/* Node 0 runs rank 0 of world 2.  Epoch 0: rank 0 reads 0..29, rank 1
 * 30..59; epoch 1: rank 0 reads 30..89, rank 1 reads 60..89 twice.  So
 * node 0's stream is 0..89: files the cluster first read in epoch 0
 * (30..59, which node 1 owns) and files first read in epoch 1, which node 1
 * owns as it reads them more (60..89); 90..119 are never read. */
#define PEER_STREAM0 90

static void write_peer_list(const struct fixture *fx, char *path, size_t len)
{
    /* epoch, rank: first index, count (indices cycle through 30 from first
     * when count > 30 and first is 60) */
    static const uint32_t lines[4][2] = {{0, 30}, {30, 30}, {30, 60}, {60, 60}};
    snprintf(path, len, "%s/list", fx->idx);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "clairfs-sampler-list world=2 epochs=2 n=%u", NFILES);
    for (int l = 0; l < 4; l++) {
        fprintf(f, "\nepoch %d rank %d:", l / 2, l % 2);
        for (uint32_t i = 0; i < lines[l][1]; i++)
            fprintf(f, " %u", lines[l][0] == 60 ? 60 + i % 30 : lines[l][0] + i);
    }
    fprintf(f, "\n");
    fclose(f);
}

static size_t sample_size(const struct fixture *fx, uint32_t s)
{
    return (size_t)cfs_catalog_entry(fx->cat, cfs_catalog_sample_entry(fx->cat, s))->size;
}

/* What node 0 fetches, from the plan: the files it asks node 1 for in
 * epoch 0 (owned there, held since epoch 0, not empty: is_peer, peer,
 * peer_bytes), every file it fetches (its stream and what it owns: needed,
 * needed_bytes), and the files of its stream node 1 owns from epoch 1. */
struct peer_expect {
    bool is_peer[NFILES];
    uint64_t peer, peer_bytes, needed, needed_bytes, later;
};

/* One run: node 0's prefetcher whose peers are a fake; node 1 holds every
 * file. */
struct peer_run {
    struct fixture fx;
    struct cfs_metrics m;
    struct fake_peer *fp;
    struct cfs_prefetch *pf;
    struct peer_expect x;
    struct fake_peer_counts c;
    struct cfs_prefetch_stats st;
};

static void expect_peers(struct peer_run *r)
{
    struct peer_expect *x = &r->x;
    bool needed[NFILES] = {false};
    memset(x, 0, sizeof(*x));
    ck_assert_ptr_nonnull(r->pf->track);
    for (uint32_t s = 0; s < NFILES; s++) {
        enum cfs_tier tier;
        uint32_t from, owner = pf_track_owner(r->pf->track, s, &tier, &from);
        needed[s] = owner == 0 || s < PEER_STREAM0;
        if (s >= PEER_STREAM0 || owner != 1 || sample_size(&r->fx, s) == 0)
            continue;
        if (from == 0)
            x->is_peer[s] = true;
        else
            x->later++;
    }
    for (uint32_t s = 0; s < NFILES; s++) {
        x->needed += needed[s];
        x->needed_bytes += needed[s] ? sample_size(&r->fx, s) : 0;
        x->peer += x->is_peer[s];
        x->peer_bytes += x->is_peer[s] ? sample_size(&r->fx, s) : 0;
    }
}

/* The prefetcher, started and idle (r->fp configured before). */
static void peer_run_start(struct peer_run *r, const char *extra)
{
    char list[128], model[96], opts[448], err[256] = "";
    write_peer_list(&r->fx, list, sizeof(list));
    /* The fixture's source is a local directory, faster than the fake
     * peer: measured, the model would send the peer's files there.  These
     * tests are about the routing, so the latencies are fixed. */
    snprintf(model, sizeof(model), "%s/model", r->fx.idx);
    FILE *mf = fopen(model, "w");
    ck_assert_ptr_nonnull(mf);
    fputs("pfs_latency = 0.05\nnet_latency = 0.001\n", mf);
    fclose(mf);
    snprintf(opts, sizeof(opts), "seed=5,epochs=2,world=2,ram=16M,sampler=list:%s,model=%s%s",
             list, model, extra);
    unsigned char *buf = malloc(40000);
    for (uint32_t s = 0; s < NFILES; s++) {
        cfs_id id = cfs_catalog_sample_entry(r->fx.cat, s);
        uint32_t i = (uint32_t)strtoul(cfs_catalog_name(r->fx.cat, id) + 1, NULL, 10);
        fill_bytes(i, buf, file_size(i));
        fake_peer_hold(r->fp, 1, id, buf, file_size(i));
    }
    free(buf);
    cfs_metrics_init(&r->m);
    r->pf = create_pf(&r->fx, opts, fake_peer_ops.nodes(r->fp), fake_peer_ops.node(r->fp),
                      (struct cfs_prefetch_params){.metrics = &r->m, .peer_ops = &fake_peer_ops,
                                                   .peer = r->fp});
    ck_assert_msg(cfs_prefetch_start(r->pf, err, sizeof(err)) == 0, "start: %s", err);
    expect_peers(r); /* with no_peers: no peer files, its own stream */
    ck_assert_int_eq(cfs_prefetch_wait_idle(r->pf, 30), 0);
    fake_peer_counts(r->fp, &r->c);
    cfs_prefetch_stats(r->pf, &r->st);
}

static void peer_run_init(struct peer_run *r, double timeout)
{
    fixture_init(&r->fx);
    r->fp = fake_peer_create(0, 2, timeout);
    ck_assert_ptr_nonnull(r->fp);
}

/* Node 0's trainer reads its stream, every byte checked; then tear down. */
static void peer_run_finish(struct peer_run *r)
{
    for (uint32_t s = 0; s < PEER_STREAM0; s++)
        read_check(r->pf, &r->fx, s);
    ck_assert_uint_eq(mget(&r->m, CFS_M_READS_RAM), PEER_STREAM0); /* none refetched */
    ck_assert_uint_eq(mget(&r->m, CFS_M_FETCH_BYTES_PEER) + mget(&r->m, CFS_M_FETCH_BYTES_PFS),
                      r->x.needed_bytes);
    cfs_prefetch_destroy(r->pf);
    fake_peer_destroy(r->fp);
    fixture_fini(&r->fx);
}

/* Files node 1 owns go to it once it holds them (from the cluster's first
 * read): epoch 0's files are asked for, epoch 1's are read from the PFS;
 * each answer is the bytes, counted once as from the peer. */
START_TEST(peer_choice_and_completion)
{
    struct peer_run r;
    peer_run_init(&r, 1.0);
    peer_run_start(&r, "");
    ck_assert_uint_gt(r.x.peer, 0);
    ck_assert_uint_gt(r.x.later, 0); /* the from-epoch rule has files to refuse */
    for (uint32_t s = 0; s < NFILES; s++)
        ck_assert_msg(fake_peer_asked(r.fp, cfs_catalog_sample_entry(r.fx.cat, s)) ==
                          r.x.is_peer[s],
                      "sample %u: asked %d", s,
                      fake_peer_asked(r.fp, cfs_catalog_sample_entry(r.fx.cat, s)));
    ck_assert_uint_eq(r.c.submitted, r.x.peer);
    ck_assert_uint_eq(r.c.served, r.x.peer);
    ck_assert_uint_eq(r.c.served_bytes, r.x.peer_bytes);
    ck_assert_uint_eq(r.st.peer_fetches, r.x.peer);
    ck_assert_uint_eq(r.st.peer_fallbacks, 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PEER_FETCH_OK), r.x.peer);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PEER_FETCH_FALLBACK), 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PEER), r.x.peer_bytes);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PFS), r.x.needed_bytes - r.x.peer_bytes);
    /* Idle, node 0 holds every file it owns: a peer asking for one is
     * served at once, never late. */
    unsigned owned = 0;
    for (uint32_t s = 0; s < NFILES; s++) {
        if (pf_track_owner(r.pf->track, s, NULL, NULL) != 0 || sample_size(&r.fx, s) == 0)
            continue;
        struct cfs_peer_view v;
        ck_assert_int_eq(cfs_prefetch_provide(r.pf, cfs_catalog_sample_entry(r.fx.cat, s), &v), 0);
        v.release(v.release_arg, &v);
        owned++;
    }
    ck_assert_uint_gt(owned, 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PEER_LATE), 0);
    peer_run_finish(&r);
}
END_TEST

/* A peer marked slow, or -o no_peers: nothing is asked of it. */
START_TEST(peer_not_when_slow_or_no_peers)
{
    struct peer_run r;
    peer_run_init(&r, 1.0);
    if (_i == 0)
        fake_peer_set_state(r.fp, 1, CFS_PEER_SLOW);
    peer_run_start(&r, _i == 0 ? "" : ",no_peers");
    if (_i == 0) {
        ck_assert_uint_gt(r.x.peer, 0);
        ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PFS), r.x.needed_bytes);
    }
    ck_assert_uint_eq(r.c.submitted + r.c.refused, 0);
    ck_assert_uint_eq(r.st.peer_fetches, 0);
    ck_assert_uint_eq(r.st.peer_fallbacks, 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PEER), 0);
    peer_run_finish(&r);
}
END_TEST

/* Every answer but the bytes resubmits the same fetch to the PFS: the
 * bytes are still right, each failed answer is one fallback, and all the
 * bytes count as from the PFS. */
static const enum fake_peer_answer bad_answers[] = {FAKE_PEER_ENOENT, FAKE_PEER_TIMEOUT,
                                                    FAKE_PEER_CORRUPT, FAKE_PEER_SHORT};

START_TEST(peer_fallback_to_pfs)
{
    struct peer_run r;
    peer_run_init(&r, 1.0);
    fake_peer_answer(r.fp, bad_answers[_i]);
    peer_run_start(&r, "");
    ck_assert_uint_gt(r.x.peer, 0);
    ck_assert_uint_eq(r.c.submitted, r.x.peer);
    ck_assert_uint_eq(r.st.peer_fetches, 0);
    ck_assert_uint_eq(r.st.peer_fallbacks, r.x.peer);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PEER_FETCH_OK), 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_PEER_FETCH_FALLBACK), r.x.peer);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PEER), 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PFS), r.x.needed_bytes);
    peer_run_finish(&r);
}
END_TEST

/* A stopped peer: its requests time out (each one a fallback), it is then
 * marked slow and asked nothing more; every byte comes from the PFS. */
START_TEST(peer_stopped_times_out)
{
    struct peer_run r;
    peer_run_init(&r, 0.05);
    fake_peer_stop(r.fp, 1);
    peer_run_start(&r, "");
    ck_assert_uint_ge(r.c.submitted, 1);
    ck_assert_uint_le(r.c.submitted + r.c.refused, r.x.peer);
    ck_assert_uint_eq(r.c.timeouts, r.c.submitted);
    ck_assert_uint_eq(r.st.peer_fetches, 0);
    ck_assert_uint_eq(r.st.peer_fallbacks, r.c.timeouts);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PEER), 0);
    ck_assert_uint_eq(mget(&r.m, CFS_M_FETCH_BYTES_PFS), r.x.needed_bytes);
    ck_assert_int_eq(fake_peer_ops.node_state(r.fp, 1), CFS_PEER_SLOW);
    peer_run_finish(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("prefetch");
    TCase *tc = tcase_create("path");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, path_planned_all_in_ram, 0, 2);
    tcase_add_loop_test(tc, path_sweep_without_seed, 0, 2);
    tcase_add_loop_test(tc, path_sweep_evicts_read_files, 0, 2);
    tcase_add_loop_test(tc, path_lru_without_seed, 0, 2);
    tcase_add_loop_test(tc, path_small_ram, 0, 2);
    tcase_add_loop_test(tc, path_ssd_warm_and_corrupt, 0, 2);
    tcase_add_test(tc, path_windows_follow_the_trainer);
    tcase_add_test(tc, path_seed_and_epoch_commands);
    suite_add_tcase(s, tc);
    tc = tcase_create("peers");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, peer_choice_and_completion);
    tcase_add_loop_test(tc, peer_not_when_slow_or_no_peers, 0, 2);
    tcase_add_loop_test(tc, peer_fallback_to_pfs, 0, 4);
    tcase_add_test(tc, peer_stopped_times_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return cfs_check_run(suite());
}
