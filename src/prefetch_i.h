/* Private to the prefetcher: the state every file of the data path shares,
 * the position tracker (the only part that sees the planner), and the
 * page-cache stager.  The design is at the top of include/clairfs/prefetch.h.
 *
 * Layers.  Each file calls only files listed before it here (besides the
 * modules outside the prefetcher), never one after it: no circle, so a file
 * reads knowing only what is below it, and a change reaches only what is
 * above.  Bottom up:
 *   prefetch_track.c    the position tracker, the only part that sees the
 *                       planner (it does not know struct cfs_prefetch);
 *   prefetch_root.c     the dataset root an adopted order numbers: its
 *                       map into the plan's source, its samples' filter;
 *   prefetch_eval.c     the evaluation pass beside the training order:
 *                       its opens predicted, its eviction key, the order
 *                       the prefetcher stages it in;
 *   prefetch_state.c    what every file does to the shared state: wake-ups,
 *                       gauges, the cache's eviction keys (the tracker's,
 *                       the passes'), the changed sources, the plan's
 *                       replacement (pf_replan);
 *   prefetch_retrieve.c owned files read back from the page cache for peers;
 *   prefetch_stage.c    the page-cache stager thread, and its glue
 *                       (kernel_start/stop, forgot, all_staged);
 *   prefetch_fetch.c    one fetch from the PFS or a peer, the finisher
 *                       thread, the source's identity;
 *   prefetch_loop.c     the prefetcher thread and its cursors, the sweep;
 *   prefetch_registered.c a registered order checked against an
 *                       identification;
 *   prefetch_adopt.c    order identification's side: learning, adoption,
 *                       self-correction, the order line of the stats;
 *   prefetch_open.c     open/read/release (the FUSE workers');
 *   prefetch.c          the top: create/start/destroy, the control
 *                       commands, stats, the state xattr, serving peers.
 * The unit test layers (tests/integration/test_layers.sh)
 * holds the code to it: from the library's symbols (nm), every call from
 * one file into another goes down this list, and the list names exactly
 * the library's files.
 *
 * Threads and locks (the one map; keep it true when the code changes).
 *
 *   Threads of the data path:
 *   - prefetcher: created by cfs_prefetch_start, runs pf_prefetch_main
 *     (prefetch_loop.c); joined by cfs_prefetch_destroy.
 *   - finisher: created by cfs_prefetch_start, runs pf_finisher_main
 *     (prefetch_fetch.c): publishes SSD-bound fetches, because the io
 *     engine's completions must not block on the disk.
 *   - stager: created by cfs_prefetch_kernel_start (pf_stager_create,
 *     prefetch_stage.c); the only thread that calls the kernel ops.
 *   Threads that call in:
 *   - FUSE workers: open/read/release, state, forgot, control commands.
 *   - io engine completions (worker threads, or the uring completion
 *     thread): fetch_done, then fetch_finish or the finisher queue.
 *   - the peer layer's thread (MPI: its communication thread; the test
 *     fake: a thread of its own): peer_done, which may resubmit to the io
 *     engine, and cfs_prefetch_provide, which for an owned file not yet
 *     fetched takes plan_lock for reading only if it is free (tryrdlock,
 *     never waiting) and calls fetch_start into free room.  Neither holds a
 *     peer-layer lock when it calls us.
 *
 *   - the identify module's thread: cfs_prefetch_adopt (on_identified).
 *   The prefetcher asks the identify ops (scan_share, for sweep=auto),
 *   so main stops it (cfs_prefetch_stop) before destroying the module.
 *
 *   Locks, outermost first.  A thread holding one may take only locks
 *   further down this list:
 *   0. pf->replan_mu: serialises what replaces the plan (set_seed, adopt,
 *      drop: prefetch_adopt.c), held while planning outside plan_lock.  An
 *      open never takes it under plan_lock: it drops an adopted order after
 *      unlocking.  The identify ops are called with nothing held, but
 *      scan_share (its meter's leaf lock: the prefetcher's round, under
 *      plan_lock's read side, while no order is planned).
 *   1. pf->plan_lock (rwlock): pf->track, run's seed and the prefetcher's cursors
 *      (scan, scan_gen, order_idx, owned_idx: the prefetcher thread's, reset
 *      under the write lock by set_seed).  Read: open, release, state,
 *      stats, set_epoch, prefetch_round, log_progress, stage_eligible,
 *      cfs_prefetch_provide (tryrdlock).
 *      Write: pf_replan (set_seed, adopt) and drop only; writers first (a
 *      waiting writer holds new readers back: no thread may take the read
 *      side twice).  Under the read lock an open may call
 *      fetch_start (and so everything below, also fetch_finish for a
 *      synchronous demand fetch) and wait up to ZOMBIE_WAIT_NS on
 *      zombie_cv.
 *   2. pf->gauge_mu: serialises update_gauges, which reads the cache's stats
 *      under it (so gauge_mu -> cache lock).
 *   3. the cache's lock (cache.c): with it held the cache calls
 *      next_use_cb (-> the tracker's leaf lock) and kernel_drop_cb (-> the
 *      stager's lock).  next_use_cb reads pf->track without plan_lock: a
 *      tracker swap first sets the cache's policy to NULL, or to
 *      pf_pass_key_cb (takes no lock, never reads pf->track).  An open may
 *      re-key the cache under plan_lock's read side (an epoch's or, without
 *      a tracker, a pass's end).
 *   4. leaves, never held while taking another lock:
 *      - the tracker's leaf lock (pf_track's mu, prefetch_track.c);
 *      - the stager's lock (pf_stager's mu) with its cv and exit_cv;
 *      - pf->mu with pf->cv (wakes the prefetcher), pf->idle_cv (wakes
 *        wait_idle) and pf->fin_cv (wakes the finisher): stop, running,
 *        idle, wake_seq, inflight, fetched_bytes, the finisher's queue,
 *        the scan_share op the prefetcher copies;
 *      - pf->order_mu: the order's state and what was identified (stats);
 *      - pf->zombie_mu with pf->zombie_cv: zombie_gen (stage_freed bumps
 *        it, then wakes the prefetcher after unlocking);
 *      - pf->kernel_mu, the one exception: a retrieve being asked of the
 *        kernel (the peer thread), against cfs_prefetch_retrieves_stop;
 *        retrieve_mu and the kernel ops' own lock (fs notify_mu) are
 *        taken under it, nothing else;
 *      - pf->retrieve_mu: the owned files being read back from the page
 *        cache for peers (prefetch_retrieve.c; the kernel is asked, and
 *        the peer thread and the FUSE worker with its answer meet, here);
 *      - the peer layer's submit lock (cfs_peer_submit) and the io
 *        engine's lock (cfs_io_submit), taken inside fetch_start;
 *      - a file's fd_mu: the source fd of a staged file's first fallback
 *        read (open_source, which logs: the log lock is the only one
 *        below it).
 *   The threads that wait (the prefetcher, the finisher, wait_idle, an open
 *   waiting for zombies or for a synchronous peer read) hold nothing else
 *   but what item 1 says.  Counters are atomics and need no lock.
 */
#ifndef CLAIRFS_PREFETCH_I_H
#define CLAIRFS_PREFETCH_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <pthread.h>
#include <stdatomic.h>

#include "clairfs/identify.h"
#include "clairfs/metrics.h"
#include "clairfs/options.h"
#include "clairfs/plan.h"
#include "clairfs/run_config.h"
#include "clairfs/tier.h"

#define PF_NEVER UINT64_MAX

/* Opens remembered after adoption, for a restart of identification. */
#define PF_RECENT 256u

enum pf_order_state {
    PF_ORDER_OFF = 0,      /* nothing registered, identification off */
    PF_ORDER_REGISTERED,   /* a seed was registered; the opens not yet checked */
    PF_ORDER_CONFIRMED,    /* registered, and the opens fit it */
    PF_ORDER_CONTRADICTED, /* registered, but the opens fit another order */
    PF_ORDER_LEARNING,     /* no seed: observing the opens */
    PF_ORDER_IDENTIFIED,   /* no seed: an identified order is predicted */
    PF_ORDER_DROPPED,      /* distributed: the nodes dropped their agreed order */
};

/* The plan of this node (cfs_run_config_plan_params(): the whole cluster
 * when distributed, else this node alone with its ranks; the planner copies
 * sizes and ranks) and the reordering slack in files, never 0 (the run
 * configuration's window). */
struct pf_track_params {
    struct cfs_plan_params plan;
    uint32_t window;
};

struct pf_track;

/* Builds the plan and materialises the first two epochs. */
int pf_track_create(const struct pf_track_params *p, struct pf_track **out, char *err,
                    size_t errlen);
void pf_track_destroy(struct pf_track *t);

struct pf_obs {
    bool hit;           /* expected now (within the window around the position) */
    bool epoch_changed; /* the tracker moved to another epoch */
    uint32_t epoch;     /* absolute epoch after the observation */
};
/* An open of sample s (s >= n or CFS_NO_SAMPLE: unexpected). */
void pf_track_open(struct pf_track *t, uint32_t s, struct pf_obs *out);
/* Absolute stream position of the next read of s after the trainer's
 * position, PF_NEVER when there is none.  O(1) but for samples read several
 * times in one epoch; takes the tracker's leaf lock. */
uint64_t pf_track_next_use(struct pf_track *t, uint32_t s);
/* The trainer's position (first unconsumed slot of the current epoch, as a
 * count), the current absolute epoch, and a generation that changes when
 * the position jumps (set_epoch). */
void pf_track_position(struct pf_track *t, uint64_t *pos, uint32_t *epoch, uint64_t *gen);
/* Sample at absolute position pos when it lies in the materialised window
 * (current and next epoch): 1 and *s, *consumed (already opened); 0 beyond. */
int pf_track_sample_at(struct pf_track *t, uint64_t pos, uint32_t *s, bool *consumed);
/* Resynchronise to the start of absolute epoch e: 0, -ERANGE outside the
 * plan, -ENOMEM. */
int pf_track_set_epoch(struct pf_track *t, uint32_t e);
uint32_t pf_track_window(const struct pf_track *t);
/* How far ahead of the position the trainer's opens reach (its readers'
 * reordering, measured): the most an open within the window took a slot
 * ahead of the count, over the current epoch and the one before. */
uint32_t pf_track_lead(struct pf_track *t);
/* Files this node reads in the current epoch (0 beyond the plan). */
uint64_t pf_track_epoch_len(struct pf_track *t);
/* The absolute position where the current epoch ends: the trainer's
 * evaluation after the epoch reads then (PF_NEVER beyond the plan). */
uint64_t pf_track_epoch_end(struct pf_track *t);

/* Planner facts, by sample. */
enum cfs_tier pf_track_tier(const struct pf_track *t, uint32_t s);
const uint32_t *pf_track_order(const struct pf_track *t, enum cfs_tier tier, uint64_t *count);
uint64_t pf_track_tier_bytes(const struct pf_track *t, enum cfs_tier tier);
/* The node that holds s for its peers (PF_NO_NODE: none, the PFS) and its
 * tier there, and the relative epoch from which it holds it
 * (the cluster's first read of s: the owner stages it then). */
#define PF_NO_NODE UINT32_MAX
uint32_t pf_track_owner(const struct pf_track *t, uint32_t s, enum cfs_tier *tier,
                        uint32_t *from_epoch);
uint32_t pf_track_start_epoch(const struct pf_track *t);
/* One past the last epoch the tracker's plan covers (its window). */
uint32_t pf_track_end_epoch(const struct pf_track *t);
const struct cfs_plan *pf_track_plan(const struct pf_track *t);
/* A fresh tracker t (not shared yet) of the next window put where `from`
 * stands: its current epoch, and what the trainer consumed of it and of
 * the next, when t's window holds them; else at t's first epoch.  0 or
 * -errno. */
int pf_track_follow(struct pf_track *t, struct pf_track *from);

/* The CLOCK_REALTIME instant `ns` nanoseconds from now, for
 * pthread_cond_timedwait. */
static inline struct timespec pf_deadline(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t end = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(end / 1000000000u);
    ts.tv_nsec = (long)(end % 1000000000u);
    return ts;
}

/* ---- the page-cache stager (prefetch_stage.c; design in prefetch.h) */

struct cfs_cache;
struct cfs_cache_source;
struct cfs_metrics;
struct cfs_kernel_ops;
struct pf_stager;

struct pf_stager_params {
    struct cfs_cache *cache;
    struct cfs_metrics *metrics;
    uint32_t nentries; /* ids 0 .. nentries-1 */
    const struct cfs_kernel_ops *ops;
    void *ops_arg;
    /* May entry id be staged now (a plan exists, a regular file that is
     * not kept for peers)?  Called without any stager or cache lock. */
    bool (*eligible)(void *arg, uint32_t id);
    /* Zombies were invalidated: room is free in the RAM tier. */
    void (*freed)(void *arg);
    /* The tiers' bytes changed: refresh the gauges. */
    void (*gauges)(void *arg);
    void *arg;
};

/* Starts the stager thread. */
int pf_stager_create(const struct pf_stager_params *p, struct pf_stager **out);
/* Ask for entry id to be staged (deduplicated; cheap, any thread). */
void pf_stager_queue(struct pf_stager *s, uint32_t id);
/* Zombies wait (the cache's kernel_drop callback: only signals). */
void pf_stager_kick(struct pf_stager *s);
/* See cfs_prefetch_kernel_stop(): 0 once the thread is joined, -ETIMEDOUT. */
int pf_stager_stop(struct pf_stager *s, double timeout);
/* Joins the thread if needed (it must have been stopped or be stoppable). */
void pf_stager_destroy(struct pf_stager *s);

/* ---- the shared state (defined here so that each file of the data path
 * sees it; see the map of threads and locks at the top) */

struct cfs_prefetch_file;
struct cfs_opener;
struct cfs_identify_ops;
struct cfs_entry;
struct cfs_io;
struct cfs_index;
struct cfs_model;
struct cfs_peer_ops;
struct fetch;

struct cfs_prefetch {
    const struct cfs_catalog *cat;
    struct cfs_metrics *m;
    int source_fd;
    struct cfs_cache *cache;
    struct cfs_io *io;
    struct cfs_index *index;
    char *ssd_dir, *index_dir;
    /* The data path's settings (io, io_depth, lookahead, no_pagecache):
     * scalars only, the strings are not kept.  What the plan depends on is
     * in run, not here. */
    struct cfs_options opts;
    /* The run configuration, the prefetcher's own copy: node_ranks and the
     * sampler's list_path (sampler_list) are owned.  "seed N" changes its
     * sampler seed and seeded flag under the plan lock's write side. */
    struct cfs_run_config run;
    /* Epochs an identified order is planned ahead: the mount's own run's,
     * fixed at creation (an adoption of one epoch only shortens run.epochs). */
    uint32_t plan_span;
    char *sampler_list;
    uint64_t *sizes; /* per sample, for the planner */
    uint64_t nsamples;

    /* The tracker; replaced by "seed N" under the write lock.  The cache's
     * policy callback reads it without this lock: a swap first switches
     * the cache to LRU, or to the passes' keys (pf_pass_key_cb, which
     * never reads it). */
    pthread_rwlock_t plan_lock;
    struct pf_track *track;

    pthread_mutex_t gauge_mu; /* update_gauges */
    atomic_uint moves;        /* opens and releases since the prefetcher was woken */

    /* The prefetcher thread and what it waits on. */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* wakes the prefetcher */
    pthread_cond_t idle_cv; /* wakes wait_idle */
    pthread_t thread;
    bool running, stop, idle;
    uint64_t wake_seq;
    uint32_t inflight, max_inflight; /* prefetches */
    uint64_t lookahead;
    /* Files the window's tier (RAM, else SSD) holds at the dataset's mean
     * size: bounds the window's eviction horizon (prefetch_round). */
    uint64_t window_tier_files;
    uint64_t scan, scan_gen;
    uint64_t order_idx[CFS_TIER_COUNT];
    uint64_t owned_idx[CFS_TIER_COUNT]; /* distributed: cursor of the owned files' staging */
    uint64_t fetched_bytes;
    /* The sweep (prefetch_loop.c): while no order is known, one node
     * stages the samples not yet read in the current pass, in index order,
     * into RAM, evicting only files read in this pass.  sweep: the mount
     * sweeps (fixed at creation); sweep_idx is the next sample and
     * sweep_pass the pass it belongs to, the prefetcher thread's. */
    bool sweep;
    uint64_t sweep_idx, sweep_pass;
    /* sweep=auto's brake (prefetch_loop.c sweep_holds): scan_share and its
     * argument are the identification's (under mu: installed after this
     * thread starts); sweep_held and held_since are this thread's. */
    bool (*scan_share)(void *arg, double *share);
    void *scan_share_arg;
    bool sweep_held;
    double held_since;
    /* The passes over the dataset (with the sweep only, else NULL): every
     * nsamples opens of samples are a pass (one epoch when each sample is
     * read once an epoch).  pass_read[s] is 1 + the pass of s's last open
     * (0: never opened); pass_opens counts the opens since creation.  Set
     * by the open path with relaxed atomics, no lock; read by the sweep
     * and by the cache's policy while no order is known (pf_pass_key_cb). */
    _Atomic uint32_t *pass_read;
    atomic_uint_fast64_t pass_opens;

    /* SSD completions are written by a finisher thread: the io engine's
     * callbacks must not block on the disk. */
    pthread_t finisher;
    bool fin_running, fin_stop;
    struct fetch *fin_head, *fin_tail;
    pthread_cond_t fin_cv;

    bool progress;
    double progress_interval;

    atomic_uint_fast64_t prefetches, demand_fetches, direct_opens, dropped;
    atomic_bool ssd_error_logged;
    atomic_bool index_error_logged; /* the first refused index write is logged */
    bool index_unopened;            /* the SSD tier's index could not open: not persisting */
    /* Bitmap by entry id: the source file was found changed under the mount
     * (its reads fail with ESTALE unless a tier holds it; logged once). */
    _Atomic uint64_t *changed;

    /* Peers, behind their ops (cfs_peer_single_ops: one node).  nodes,
     * node and distributed are run's (the plan spans nodes and fetches may
     * go to peers: not with no_peers), kept here for the fetch paths. */
    const struct cfs_peer_ops *peer_ops;
    void *peer;
    uint32_t nodes, node;
    bool distributed;
    struct cfs_model *model;
    /* Per entry id: 1 + the node the last completed fetch came from, 0 for
     * the PFS; read by an open that waited for that fetch. */
    _Atomic uint32_t *from_node;
    _Atomic uint32_t *peer_inflight; /* per node: requests in flight */
    uint32_t nentries;
    atomic_uint_fast64_t peer_fetches, peer_fallbacks, peer_served;

    /* Page-cache staging (prefetch_stage.c); NULL until kernel_start. */
    struct pf_stager *_Atomic stager;
    /* The kernel ops kernel_start was given (NULL before), and the owned
     * files being read back for peers (prefetch_retrieve.c, retrieve_mu). */
    const struct cfs_kernel_ops *_Atomic kops; /* read by the peer thread: set last */
    void *kops_arg;
    pthread_mutex_t retrieve_mu;
    /* Held by the peer thread while it asks the kernel (kops->retrieve,
     * retrieve_max); retrieves_off, set under it by
     * cfs_prefetch_retrieves_stop, ends the asking before the session and
     * the kops' owner go. */
    pthread_mutex_t kernel_mu;
    bool retrieves_off;
    struct pf_retrieval *retrievals;
    unsigned nretrievals;
    atomic_uint_fast64_t kernel_opens, kernel_fallbacks;
    uint64_t stageable; /* regular files of non-zero size: all staged = all of these */
    atomic_bool reclaim_warned;
    /* Zombies invalidated (stage_freed): a demand fetch refused for their
     * room waits for this, briefly. */
    pthread_mutex_t zombie_mu;
    pthread_cond_t zombie_cv;
    uint64_t zombie_gen;

    /* Order identification (prefetch_adopt.c). */
    pthread_mutex_t replan_mu;
    const struct cfs_identify_ops *id_ops; /* NULL: off */
    void *id_arg;
    char id_off[96];                 /* why it is off */
    atomic_bool learning;            /* opens are observed */
    /* Adopted: opens are still observed until this many (the next epoch's
     * first batches, where what epoch 0 left open shows); 0 none. */
    atomic_uint_fast64_t observe_until;
    bool adopted;                    /* the tracker is an identified order's (plan_lock) */
    /* The window plan_next_window replaces, while it plans the next one
     * (under replan_mu, so the tracker that owns it stays): the next
     * plan keeps its owners in the epoch the two share (plan.c). */
    const struct cfs_plan *window_prev;
    uint32_t window_failed;          /* the window end whose next failed to plan (prefetcher) */
    /* ... of one epoch only (identify.h epoch_seed_only), planned to its
     * end and observed on (plan_lock) */
    bool epoch_only;
    /* The samples opened while learning without a seed, in order: the
     * replay of the trainer's current epoch at adoption.  Written under
     * plan_lock's read side, read and reset under its write side. */
    _Atomic uint32_t *seen;
    uint64_t seen_cap;
    atomic_uint_fast64_t seen_count, observed;
    /* An adoption planned its first epochs and plans the rest: every open
     * goes to seen, learning or not (the second replay's). */
    atomic_bool extending;
    /* An adoption plans the order's first epochs: a held sweep stays held
     * (the plan prefetches in a moment; the sweep would take the CPU the
     * planning and the trainer need). */
    atomic_bool adopting;
    /* After adoption: the last PF_RECENT opens (sample and hit; opener),
     * the current run of misses, and the misses of the current block. */
    _Atomic uint64_t recent[PF_RECENT][2];
    atomic_uint_fast64_t recent_count;
    atomic_uint miss_run, block_opens, block_misses, drop_block_misses;
    atomic_bool drop_pending;
    atomic_bool drop_owed, end_owed; /* asked by an open, for pf_settle_owed */
    bool restart_owed; /* dropped, the module not yet restarted (replan_mu) */
    bool cluster_plan; /* the adopted plan is the nodes' agreed order's (replan_mu) */
    pthread_mutex_t order_mu;
    enum pf_order_state order_state;
    struct cfs_identified ident; /* when identified (or checked against the registered seed) */
    char contradiction[200];
    char cluster_dropped[400]; /* PF_ORDER_DROPPED: which node refused, and why */
    /* Dataset roots (prefetch_root.c): every one adopted (replan_mu), kept
     * to the end with the plan sources made of them; the one the next
     * plan numbers (replan_mu) and the adopted order's (plan_lock), NULL
     * for the mount's own order. */
    struct pf_root *roots;
    struct pf_root_source *root_sources;
    const struct pf_root *plan_root;
    const struct pf_root *root;
    /* Evaluation passes named by identification (prefetch_eval.c): a list
     * kept to the end, published by this head (opens read it unlocked). */
    struct pf_eval *_Atomic evals;
};

static inline uint64_t pf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- The files' entry points, bottom up (the layers at the top); the
 * tracker's and the stager's are above, before the struct they do not
 * need. */

/* prefetch_state.c: the shared state's operations. */
void pf_wake(struct cfs_prefetch *pf);
/* The trainers moved (an open, a release); now: the epoch changed. */
void pf_nudge(struct cfs_prefetch *pf, bool now);
void pf_update_gauges(struct cfs_prefetch *pf);
/* This node keeps sample s for its peers (plan_lock held, or the cache's
 * policy callback, which a tracker swap excludes). */
bool pf_owned_for_peers(const struct cfs_prefetch *pf, uint32_t s);
/* The eviction key of sample s: owned files count as needed now. */
uint64_t pf_sample_next_use(struct cfs_prefetch *pf, uint32_t s);
/* The cache's policy callback (cfs_cache_next_use_fn), arg the prefetcher. */
uint64_t pf_next_use_cb(void *arg, uint32_t id);
/* The passes while no order is known (see pass_read above).  An open of
 * sample s: true when it ended a pass (the next open starts one). */
bool pf_pass_open(struct cfs_prefetch *pf, uint32_t s);
/* The current pass. */
uint64_t pf_pass_current(struct cfs_prefetch *pf);
/* s was opened in pass `pass`. */
bool pf_pass_was_read(const struct cfs_prefetch *pf, uint32_t s, uint64_t pass);
/* The cache's policy while no order is known (cfs_cache_next_use_fn, arg
 * the prefetcher): a file read in the current pass is needed only after
 * every file not yet read in it, so it goes first and the sweep may evict
 * it; a file not yet read is never evicted for a prefetch.  It never reads
 * pf->track. */
uint64_t pf_pass_key_cb(void *arg, uint32_t id);
/* Install the cache's policy for no known order (plan_lock held for
 * writing, or before any other thread runs): pf_pass_key_cb with the
 * sweep, else LRU. */
void pf_policy_unordered(struct cfs_prefetch *pf);
/* The tracker of run configuration *run (the kept one, or a copy that
 * differs in its order): this node's plan and the window. */
int pf_tracker_of_run(struct cfs_prefetch *pf, const struct cfs_run_config *run,
                      char *err, size_t errlen, struct pf_track **out);
/* Install tracker-to-be of *run in place of the current one (replan_mu
 * held): plans outside plan_lock, then under its write side calls
 * replay(pf, new tracker, arg) (may be NULL), swaps, and frees the old
 * tracker outside.  pf->run takes run's sampler, world, epochs, ranks,
 * window and seeded flag. */
int pf_replan(struct cfs_prefetch *pf, const struct cfs_run_config *run,
              void (*replay)(struct cfs_prefetch *, struct pf_track *, void *), void *arg,
              char *err, size_t errlen);
bool pf_is_changed(const struct cfs_prefetch *pf, uint32_t id);
/* Remember that id's source changed; count and log it the first time. */
void pf_mark_changed(struct cfs_prefetch *pf, uint32_t id, const char *path);
/* The order's state, and clairfs_order_identified with it (order_mu not
 * held). */
void pf_order_set_state(struct cfs_prefetch *pf, enum pf_order_state st);

/* prefetch_retrieve.c: owned files staged in the page cache, read back
 * for peers.  possible: the session can retrieve (owned files may then be
 * staged).  provide: as cfs_prefetch_provide for the staged entry whose
 * pin is *h, which it takes (0 with *v, -EAGAIN asked, -ENOENT); a
 * retrieval in flight keeps the entry pinned. */
struct pf_retrieval;
struct cfs_peer_view;
struct cfs_cache_handle;
bool pf_retrieve_possible(const struct cfs_prefetch *pf);
int pf_retrieve_provide(struct cfs_prefetch *pf, uint32_t id, struct cfs_cache_handle *h,
                        struct cfs_peer_view *v);
void pf_retrieve_destroy(struct cfs_prefetch *pf);

/* prefetch_stage.c (besides the stager above): the cache's kernel_drop
 * callback (cache lock held). */
void pf_kernel_drop_cb(void *arg);

/* prefetch_fetch.c: fetches and the source's identity. */
/* The cache's source callback (cfs_cache_source_fn), arg the prefetcher. */
int pf_source_cb(void *arg, uint32_t id, struct cfs_cache_source *out);
bool pf_fd_is_catalogs(int fd, const struct cfs_entry *e);
/* Open entry id's source for direct reads: 0 and *fd, or -errno (-ESTALE:
 * not the catalog's file any more). */
int pf_open_source(struct cfs_prefetch *pf, uint32_t id, int *fd);
/* The node to ask for entry e instead of the PFS, or -1 and in *why the
 * CFS_M_PFS_BYTES_* slot that says why not (plan_lock held).  waiting: a
 * trainer waits for this read now (a demand fetch, a direct read). */
int pf_peer_choice(struct cfs_prefetch *pf, const struct cfs_entry *e, bool waiting,
                   enum cfs_metric *why);
/* The owner of e has held it since before the current epoch: a peer fetch
 * of it measures the peer.  In the epoch of the cluster's first read the
 * owner may still be fetching it from the PFS and holds the answer back
 * (peer_defer.c): that wait is the PFS's, and measured as the peer's it made
 * every peer look tens of milliseconds slow for the rest of the run. */
bool pf_peer_settled(struct cfs_prefetch *pf, const struct cfs_entry *e);
/* Begin the fetch of id into tier (CFS_TIER_NONE: RAM, just ahead of use)
 * and submit it: see prefetch_fetch.c. */
int pf_fetch_start(struct cfs_prefetch *pf, uint32_t id, enum cfs_tier tier, bool prefetch,
                   unsigned cache_flags, int *sync_res);
void *pf_finisher_main(void *arg);

/* prefetch_loop.c: the prefetcher thread. */
void *pf_prefetch_main(void *arg);

/* prefetch_adopt.c: the open path's side of identification. */
/* Learning: remember s (plan_lock read side held). */
void pf_learn_record(struct cfs_prefetch *pf, uint32_t s);
/* An adoption extending its plan: s remembered in seen only (plan_lock
 * read side held). */
void pf_seen_record(struct cfs_prefetch *pf, uint32_t s);
/* Adopted: an open's outcome (plan_lock read side held).  True when it
 * ends a run of misses that must drop the order (once: the caller then
 * asks pf_settle_owed for the drop after unlocking). */
bool pf_adopted_outcome(struct cfs_prefetch *pf, uint32_t s, const struct cfs_opener *who,
                        bool hit);
/* Drop the adopted order and restart identification (nothing held). */
void pf_drop_adopted(struct cfs_prefetch *pf);
/* The adopted order was one epoch's and the trainer finished it: back to
 * reactive caching while the module learns the next (nothing held). */
void pf_end_epoch_order(struct cfs_prefetch *pf);
/* On the open path (nothing held): the drop or the epoch's end an open
 * asked for (drop_owed, end_owed), done now if replan_mu is free, else
 * left to a later open. */
void pf_settle_owed(struct cfs_prefetch *pf);
/* Initialises and frees the identification state (create/destroy). */
void pf_identify_init(struct cfs_prefetch *pf);
void pf_identify_free(struct cfs_prefetch *pf);
/* prefetch_registered.c: a registered order meets an identification
 * (replan_mu held): kept, and confirmed or contradicted by the opens. */
void pf_check_registered(struct cfs_prefetch *pf, const struct cfs_identified *id);

/* ---- prefetch_root.c: the dataset root an adopted order numbers. */

struct pf_root;
/* The root of that name with that map (root index -> the mount's sample),
 * made and kept on first use (replan_mu held); NULL for map NULL (the
 * mount's own order) or out of memory. */
const struct pf_root *pf_root_get(struct cfs_prefetch *pf, const char *name, const uint32_t *map,
                                  uint64_t n);
/* Is the mount's sample s one of r's (every sample is the mount's own)? */
bool pf_root_holds(const struct pf_root *r, uint32_t s);
uint64_t pf_root_n(const struct cfs_prefetch *pf, const struct pf_root *r);
const char *pf_root_name(const struct pf_root *r);
/* plan (made for r's sampler) reads r's samples as the mount's: its
 * source maps, its n is the mount's.  0 or -ENOMEM (replan_mu held). */
int pf_root_plan(struct cfs_prefetch *pf, const struct pf_root *r, struct cfs_plan_params *plan);
/* Of the opens seen [from, to) (the seen ring's counts), those of r's
 * samples; the ring's lost ones in the share of those it holds. */
uint64_t pf_root_count(struct cfs_prefetch *pf, const struct pf_root *r, uint64_t from,
                       uint64_t to);
void pf_roots_free(struct cfs_prefetch *pf);

/* ---- prefetch_eval.c: the evaluation pass beside the training order. */

struct pf_eval;
/* Predict the unshuffled pass over root `name` (its n samples are the
 * mount's map[0..n), read at stride `stride`): 0, -EEXIST (already),
 * -EINVAL, -ENOMEM.  Any thread. */
int pf_eval_add(struct cfs_prefetch *pf, const char *name, const uint32_t *map, uint64_t n,
                uint32_t stride);
/* Is the mount's sample s one of an evaluation pass's? */
bool pf_eval_holds(const struct cfs_prefetch *pf, uint32_t s);
enum pf_eval_result {
    PF_EVAL_NONE,    /* no evaluation pass holds s */
    PF_EVAL_UNARMED, /* one does, in the pass it was named in: not counted */
    PF_EVAL_HIT,
    PF_EVAL_MISS,
};
/* An open of s: whether an evaluation pass expected it now (window: the
 * reordering slack in files).  Any thread, no lock. */
enum pf_eval_result pf_eval_open(struct cfs_prefetch *pf, uint32_t s, uint32_t window);
/* s's eviction key when an evaluation pass holds it and an order is
 * planned: the end of the trainer's epoch (as pf_sample_next_use). */
bool pf_eval_key(struct cfs_prefetch *pf, uint32_t s, uint64_t *key);
/* The files of every evaluation pass: how early before an epoch's end
 * they are staged (prefetch_loop.c). */
uint64_t pf_eval_files(const struct cfs_prefetch *pf);
/* The prefetcher's walk over the passes in their order (its thread only,
 * plan_lock read side): the next sample from *at (NULL: the first pass)
 * in trainer epoch `epoch` (the walk starts again in each), and *at its
 * pass; PF_NEVER at the end.  pf_eval_step moves past it. */
uint64_t pf_eval_next(struct cfs_prefetch *pf, struct pf_eval **at, uint32_t epoch);
void pf_eval_step(struct pf_eval *at);
void pf_evals_free(struct cfs_prefetch *pf);

#endif
