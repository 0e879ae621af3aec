/* The data path: from an open of a file to its bytes, and the prefetcher
 * that makes sure the bytes are already in a tier when the open comes.
 *
 * Keys.  The cache is keyed by catalog entry id (every regular file, also
 * those outside the index order: they are cached reactively); the plan
 * speaks of samples (dataset indices); the catalog maps one to the other.
 *
 * An open (cfs_prefetch_open_as) first tells the position tracker (see
 * src/prefetch_track.c: a count of expected opens, immune to DataLoader
 * reordering) and counts the prediction; then it takes a pinned cache
 * handle: a RAM or SSD entry is served as it is; a fetch in flight is waited
 * for; an absent file is fetched on demand into the RAM tier by the opening
 * thread itself (it would only wait for the io engine otherwise: two thread
 * hand-offs per file, which dominate for small files; a peer-owned file goes
 * to the peer at io priority DEMAND, ahead of every queued prefetch), and
 * other openers of the same file wait for that one fetch.  Under a plan a
 * demand fetch is an ordinary cache insertion: when the cache's policy says
 * the file is needed later than everything it holds (Belady: do not insert)
 * or it cannot be cached at all (larger than the tier, tier pinned full),
 * the open reads it straight from the source through a file descriptor.
 * Every file's bytes are checked by the cache (length against the catalog's
 * size, xxh3 of SSD entries) before a read is answered from a tier.
 *
 * Counting.  clairfs_reads_total{source} counts each open, once, when it is
 * opened, by where its bytes come from (reads of a staged file never reach
 * clairfs, see "Page cache"): "ram"/"ssd" when the
 * entry was resident at open, "pfs" when the open waited for a fetch or
 * reads the source directly.  clairfs_stall_seconds_total is the time opens
 * waited for fetches plus the time of direct reads.
 * clairfs_fetch_bytes_total{from="pfs"} counts every byte read from the
 * source (fetches and direct reads).  clairfs_prediction_total counts every
 * open of an indexed sample once: a hit or a miss of the order in force
 * (registered, or identified from the opens), or "unplanned" where no
 * order covers it (learning, one epoch's order ended with its epoch, a
 * folder beside the one whose order is predicted), so the opens the mount
 * does not predict are never left out of the share it does.
 *
 * The prefetcher thread walks the node's stream from the trainer's position
 * forward (at most `lookahead` files, default: as far as the two
 * materialised epochs go), fetching each file into the tier the plan gives
 * it (RAM for files the plan does not hold: just ahead of use) with
 * io_depth - io_depth/8 fetches in flight, so demand fetches always find a
 * free slot.  The cache refuses (-ENOSPC) a fetch that would evict data
 * needed sooner: the walk then waits for the trainer.  Past the eviction
 * horizon (how far the trainer's opens run ahead of its position, the
 * fetches in flight and the reorder window, in all at most half the files
 * the window's tier holds, never less than the first two) a fetch takes
 * free room only: a file fetched early holds room Belady's MIN gives to a
 * file read again sooner, so the mount fetches what clairfs-plan's
 * simulation does (tests/integration/test_sim_agree.sh).  When the window
 * is covered it stages the files the plan assigns to RAM and SSD in order
 * of first use.  Eviction is by next use (the tracker's tables, O(1), behind a
 * leaf lock, so the cache may ask with its own lock held); a file read for
 * the last time is dropped at its release.
 *
 * Peers.  With several nodes (params.peer_ops: the MPI transport, or a
 * test's fake) the plan covers every node: each file has an owner
 * (cfs_plan_owner) that keeps it in a tier for the whole run.  A fetch
 * (prefetch or demand) of a file owned by another node goes to that node
 * (peer_ops->submit into the cache entry's buffer) when the owner has begun holding it (the relative epoch
 * of the cluster's first read of the file, when the owner stages it), the
 * peer is not marked slow, and the performance model (model.h) estimates
 * the peer faster than this node's share of the PFS.  A peer answer other
 * than the bytes (-ENOENT not held, -ETIMEDOUT, -EHOSTDOWN, -EIO checksum,
 * -ECANCELED) resubmits the same fetch to the io engine: never wrong bytes,
 * never a hang (the peer layer times out).  An open of a peer-owned file
 * that the cache will not take (Belady, or a tier full of fetches in
 * flight) reads it from the peer into a buffer of its own (the direct read
 * of the single-node path, from the owner instead of the PFS).  It does not
 * insert it by force: that would evict files this node owns.  Owners keep
 * what they own: owned files
 * have next use 0 (never a victim for a file the node reads itself) and are
 * not dropped after the node's own last read; the plan already budgeted
 * their bytes.  Counting: an open that waited for a peer fetch counts as
 * clairfs_reads_total{source="peer"}, its bytes as
 * clairfs_fetch_bytes_total{from="peer"}; a fallback's bytes count as from
 * the PFS.  cfs_prefetch_provide() serves this node's entries to its peers
 * (a pinned cache handle, released when the send is done).  -o no_peers
 * plans each node alone (its own ranks, nodes = 1) and never asks a peer.
 * The state xattr says "peer:N" for a file absent here that node N owns
 * (its bytes will come from N), otherwise ram, ssd, inflight or pfs.
 *
 * Exactness: a source changed under the mount.  The catalog's size and
 * mtime of a file are the kernel's for the whole mount, and the dataset must
 * not be modified in place under it.  A file changed anyway is served as
 * the old version if a tier already holds it, else its opens fail with
 * ESTALE — never a prefix (a grown file: the kernel reads only the
 * catalog's size) and never a mix of versions (rewritten while a fetch
 * reads it).  Every fetch from the source reports the file's identity as
 * seen after its last read (io.h, "Identity"); when its size or mtime (sec
 * and nsec) differ from the catalog's, the bytes are not published
 * (complete_fetch with -ESTALE: not served, not written to the SSD tier)
 * and the fetch's waiters get ESTALE.  A direct read (the file is not
 * cached) fstats its fd after the openat (ESTALE on a mismatch) and after
 * every read (EIO: bytes of this open may already be out).  A changed file
 * is remembered (a bit per entry: later opens fail at once, the prefetcher
 * skips it), logged once and counted in clairfs_source_changed_total.
 * Peer answers are not re-checked: the owner checked its own fetch.  What
 * cannot be seen: a same-size rewrite within one timestamp tick of the
 * scan, or one hidden by a network source's attribute cache.
 *
 * Page cache (src/prefetch_stage.c, on unless -o no_pagecache; without a
 * plan only when there is no SSD tier, which the cache feeds by demoting
 * RAM buffers).  A FUSE read round trip costs more than the copy it
 * carries (docs/read-path.md: replying from tier memory reads ~110 KB files
 * at 1.7-2.3x the time of local memory; pages staged into the kernel page
 * cache read at 0.95-1.02x).  So a stager thread stores RAM entries into
 * the kernel's page cache (fuse_lowlevel_notify_store through the
 * cfs_kernel_ops the FUSE layer gives it) and then frees the tier's buffer
 * (cfs_cache_kernelize): the page cache *is* the RAM tier for those files,
 * charged against ram= like any entry, opened with keep_cache so the
 * kernel serves their reads without asking.  What is staged: a prefetched
 * RAM entry as soon as it is published, and any RAM entry after a read that
 * will come again (the kernel must already know the inode: a store to an
 * inode it has not looked up fails, and looking it up from the daemon
 * would make the mount busy to umount; epoch 0 stages after use, later
 * epochs ahead of use).  Files this node keeps for its peers are staged
 * too, and a peer's request for one is answered with the bytes read back
 * from the page cache (FUSE_NOTIFY_RETRIEVE, src/prefetch_retrieve.c; a
 * session without it keeps them out of the page cache).  Eviction and drop after last read turn the
 * entry into a zombie that the stager invalidates
 * (fuse_lowlevel_notify_inval_inode) before its bytes are free; a demand
 * fetch whose room a zombie holds waits for that, at most 50 ms (the stager
 * may itself wait on a READ another worker answers), then reads the source.
 * A second gain: tier buffers become transient, so the daemon reuses the
 * same memory instead of faulting in fresh pages for every cached byte
 * (4.7 s per GB on these VMs: a cold pass without a seed went from 7.2 s
 * to 1.5 s for 1 GB).  Only the
 * stager thread talks to the kernel: a store or an invalidation waits on the
 * page locks of a READ in flight, so it must never run in a FUSE request.
 * The kernel may still reclaim staged pages (memory pressure, or proactive
 * reclaim such as a DAMON pageout scheme: the test VMs run one, which drops
 * about 1 % of cold staged pages a minute): the reads that then arrive are
 * answered from the source (clairfs_pagecache_fallback_reads_total), and
 * with keep_cache the replies refill the page cache.
 *
 * Thread safety: every function may be called from any thread (FUSE runs a
 * multithreaded loop), except create/destroy. */
#ifndef CLAIRFS_PREFETCH_H
#define CLAIRFS_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clairfs/catalog.h"
#include "clairfs/ctl.h"
#include "clairfs/identify.h"
#include "clairfs/metrics.h"
#include "clairfs/options.h"

struct cfs_prefetch;
struct cfs_prefetch_file;
struct cfs_peer_ops;
struct cfs_peer_view;
struct cfs_run_config;
struct cfs_rank_range;

struct cfs_prefetch_params {
    const struct cfs_catalog *catalog;
    /* What the run plans (run_config.h: seeded, sampler, epochs, every
     * node's ranks, tier capacities, window, distributed), made for this
     * catalog and for the peer ops' node; copied, the caller may free it
     * after create. */
    const struct cfs_run_config *run;
    /* The data path's settings (io, io_depth, lookahead, no_pagecache,
     * model_file); copied, the caller may free it after create. */
    const struct cfs_options *opts;
    int source_fd;            /* directory SOURCE; not closed */
    const char *ssd_dir;      /* the SSD tier's directory ({rank} expanded), or NULL */
    const char *index_dir;    /* LMDB environment that persists the SSD tier, or NULL */
    struct cfs_metrics *metrics;
    bool progress;            /* log warm-up progress (staged %, MB/s, ETA) */
    double progress_interval; /* seconds between progress lines; 0: 5 */
    /* Distributed runs: the node's peers behind their ops (peer.h;
     * cfs_peer_ops_of() for an MPI handle; NULL ops: cfs_peer_single_ops,
     * one node) and the implementation's handle.  The peer handle must
     * outlive the prefetcher, and the peers must stop calling back
     * (cfs_peer_leave()) before cfs_prefetch_destroy(). */
    const struct cfs_peer_ops *peer_ops;
    void *peer;
};

/* Loads the performance model, probes io=uring and, when the run is
 * seeded, computes the plan: everything that can fail because of what the
 * user asked, before the mount exists.  Starts
 * no thread and opens no LMDB environment, so that the daemon may fork
 * (fuse_daemonize) after it.  Returns 0 or -errno with a one-line message
 * in err. */
int cfs_prefetch_create(const struct cfs_prefetch_params *p, struct cfs_prefetch **out, char *err,
                        size_t errlen);
/* Opens the index (with an SSD tier) and the cache tiers (reusing the SSD
 * entries of the last mount), starts the io engine and the prefetcher.
 * After it the data path serves and `.clairfs/ready` may appear.  Returns 0
 * or -errno with a one-line message in err. */
int cfs_prefetch_start(struct cfs_prefetch *pf, char *err, size_t errlen);
/* True when the open reads the source directly (no tier holds the bytes):
 * cfs_prefetch_read() then needs a scratch buffer. */
bool cfs_prefetch_is_direct(const struct cfs_prefetch_file *f);
/* True when every read of the open is answered from memory (a pinned RAM
 * entry, a peer's bytes): cfs_prefetch_read() then never waits. */
bool cfs_prefetch_read_in_memory(const struct cfs_prefetch_file *f);
/* Stops the prefetcher, cancels fetches, persists the SSD index.  Every
 * file handle must have been released.  Accepts NULL. */
void cfs_prefetch_destroy(struct cfs_prefetch *pf);
/* Stops the prefetcher thread only (destroy does it too), before what its
 * rounds ask goes away: the identification's scan_share. */
void cfs_prefetch_stop(struct cfs_prefetch *pf);

/* Who opens: the caller's process (thread group) and its parent, 0 when
 * unknown (another pid namespace, a process already gone). */
struct cfs_opener {
    pid_t pid, ppid;
};
/* Open regular file `id` for reading, by `who` (NULL: unknown), which
 * order identification learns from while the order is not known.  0 and
 * *out, or -errno (the source cannot be opened either). */
int cfs_prefetch_open_as(struct cfs_prefetch *pf, cfs_id id, const struct cfs_opener *who,
                         struct cfs_prefetch_file **out);

/* Where the bytes of a read are: data (len bytes in memory: a tier's, or the
 * scratch buffer for a direct read) or, with data NULL, fd at pos (an SSD
 * entry, e.g. for splicing).  Valid until the file is released. */
struct cfs_prefetch_extent {
    const void *data;
    int fd;
    uint64_t pos;
    size_t len;
};

/* A read of [off, off+size).  scratch (size bytes) receives the bytes of a
 * direct read; tier bytes are not copied.  Returns 0 (len 0 at EOF) or
 * -errno. */
int cfs_prefetch_read(struct cfs_prefetch *pf, struct cfs_prefetch_file *f, uint64_t off,
                      size_t size, void *scratch, struct cfs_prefetch_extent *x);
void cfs_prefetch_release(struct cfs_prefetch *pf, struct cfs_prefetch_file *f);
/* The kernel will send no RELEASE for f (it opens files itself now, and a
 * handle it opened before is closed without one): a staged file's pin on
 * the tier ends here, so that a drop at its last read frees it.  Nothing
 * for a file the tier serves through the handle.  f stays valid until
 * cfs_prefetch_release. */
void cfs_prefetch_unpin(struct cfs_prefetch *pf, struct cfs_prefetch_file *f);
/* Size of the opened file (the catalog's). */
uint64_t cfs_prefetch_file_size(const struct cfs_prefetch_file *f);

/* The kernel side of page-cache staging, implemented by the FUSE layer.
 * known, store and inval are called only from the stager thread.  known:
 * the kernel has looked the inode of entry id up (and not forgotten it).
 * store: copy len bytes at off into its page cache; 0 or -errno (-ENOENT:
 * the kernel does not know the inode).  inval: drop its cached pages; 0 or
 * -errno (-ENOENT: gone).  retrieve (from the peer thread; NULL where the
 * session cannot): ask the kernel for len bytes of the cached pages at off,
 * at most retrieve_max() bytes; the answer comes later, on a FUSE worker,
 * as cfs_prefetch_retrieved(cookie, ...); 0 or -errno (no answer comes). */
struct cfs_kernel_ops {
    bool (*known)(void *arg, cfs_id id);
    int (*store)(void *arg, cfs_id id, uint64_t off, const void *data, size_t len);
    int (*inval)(void *arg, cfs_id id);
    int (*retrieve)(void *arg, cfs_id id, uint64_t off, size_t len, void *cookie);
    size_t (*retrieve_max)(void *arg);
};

/* The kernel's answer to a retrieve: the len bytes it still held at off
 * (fewer than asked when it had dropped pages; data is copied). */
void cfs_prefetch_retrieved(void *cookie, uint64_t off, const void *data, size_t len);

/* Start the stager (after cfs_prefetch_start, once the session exists).
 * 0 or -errno with a message in err. */
int cfs_prefetch_kernel_start(struct cfs_prefetch *pf, const struct cfs_kernel_ops *ops,
                              void *arg, char *err, size_t errlen);
/* Stop the stager, waiting at most timeout seconds (< 0: for ever) for a
 * store or invalidation in progress: 0, or -ETIMEDOUT when it is still
 * blocked in the kernel (on a READ nobody will answer: abort the
 * connection, then call again).  Accepts a prefetcher without a stager. */
int cfs_prefetch_kernel_stop(struct cfs_prefetch *pf, double timeout);
/* No page-cache retrieve for a peer is asked of the kernel once this
 * returns (one in progress has ended; the peers then read the PFS): before
 * the session or the kops' argument goes, since the peer thread asking
 * runs until the peers leave.  Accepts NULL. */
void cfs_prefetch_retrieves_stop(struct cfs_prefetch *pf);
/* The kernel forgot the inode of entry id (FORGET): its pages are gone. */
void cfs_prefetch_forgot(struct cfs_prefetch *pf, cfs_id id);
/* Open with keep_cache: the file's bytes are staged in the page cache. */
bool cfs_prefetch_keep_cache(const struct cfs_prefetch_file *f);
/* Every regular file of non-zero size is staged in the page cache and no
 * staged page waits for its invalidation: the tiers have nothing left to
 * do for the reads of this node (-o kernel_open switches opens off then). */
bool cfs_prefetch_all_staged(struct cfs_prefetch *pf);
/* For a READ that arrived without an open (the kernel opens files itself
 * after -o kernel_open switched opens off, and had reclaimed the pages):
 * a handle on the source file that neither moves the trainer's position
 * nor counts a read; it counts a page-cache fallback.  Released with
 * cfs_prefetch_release. */
int cfs_prefetch_open_unseen(struct cfs_prefetch *pf, cfs_id id,
                             struct cfs_prefetch_file **out);

/* An open, and its close, that the kernel made without asking clairfs
 * (after -o kernel_open switched opens off), seen afterwards by watching the
 * mount: the open counts a read from the tier that holds the file (or from
 * the source, whose READs then come without a handle) and moves the
 * trainer's position exactly as cfs_prefetch_open_as does, without pinning
 * or fetching anything; the close frees a file read for the last time.
 * 0 or -errno (not a regular file of the catalog). */
int cfs_prefetch_open_seen(struct cfs_prefetch *pf, cfs_id id, const struct cfs_opener *who);
void cfs_prefetch_close_seen(struct cfs_prefetch *pf, cfs_id id);

/* user.clairfs.state of a file ("ram", "ssd", "pfs", "inflight"),
 * NUL-terminated; matches cfs_fs_state_fn.  arg is the prefetcher. */
int cfs_prefetch_state(void *arg, cfs_id id, char *buf, size_t len);
/* The peer provider (cfs_peer_provide_fn): a pinned view of entry id when
 * a tier holds it, else -ENOENT.  arg is the prefetcher (started). */
int cfs_prefetch_provide(void *arg, uint32_t id, struct cfs_peer_view *v);
/* The `control` handler (cfs_ctl_handler_fn): "epoch N" resynchronises the
 * tracker, "seed N" re-plans.  arg is the prefetcher. */
int cfs_prefetch_command(void *arg, const struct cfs_ctl_cmd *cmd);

/* Wait until the prefetcher has nothing to do (no fetch in flight, nothing
 * it may start), at most timeout seconds: 0 or -ETIMEDOUT.  For tests and
 * benchmarks. */
int cfs_prefetch_wait_idle(struct cfs_prefetch *pf, double timeout);

/* Order identification (src/prefetch_adopt.c).  The prefetcher reaches the
 * identify module (identify.h) only through these ops, so that the mount
 * fills them with the module and tests with a fake.  While the order is not
 * known (no seed, or learning again) every open of an indexed sample is
 * observed; a registered seed is observed too, until the opens confirm or
 * contradict it (it is never dropped: registration is the user's promise).
 * The module's on_identified calls cfs_prefetch_adopt().  An adopted order
 * that then mispredicts 64 opens in a row, or half of a block of 256 opens,
 * is dropped (back to reactive caching, plan and tracker freed) and the
 * module restarted with the run of misses that caused it. */
struct cfs_identify_ops {
    void (*observe)(void *arg, uint32_t sample, pid_t pid, pid_t ppid);
    void (*restart)(void *arg);
    enum cfs_identify_state (*state)(void *arg, struct cfs_identified *out);
    /* Optional (sweep=auto): cfs_identify_scan_share; asked by the
     * prefetcher thread, which cfs_prefetch_stop ends. */
    bool (*scan_share)(void *arg, double *share);
    /* Optional: what each dataset root's identification found, for the
     * stats' roots: line (cfs_roots_text). */
    void (*text)(void *arg, char *buf, size_t len);
    /* Optional (a distributed mount): the nodes' agreed order adopted here
     * (cfs_prefetch_adopt_cluster) no longer fits this node's opens, for
     * root ("" the mount's own): every node must drop it
     * (clairfs/order_agree.h), which comes back as cfs_prefetch_drop_cluster.
     * Called once the plan is dropped here, from the opening thread. */
    void (*refuse)(void *arg, const char *root);
};
/* Install before the first open (the mount: before the session serves);
 * ops NULL: identification is off and `off_reason` says why in the stats
 * ("off (-o no_identify)"). */
void cfs_prefetch_set_identify(struct cfs_prefetch *pf, const struct cfs_identify_ops *ops,
                               void *arg, const char *off_reason);
/* True while opens are observed: the FUSE layer then finds each opener. */
bool cfs_prefetch_learning(struct cfs_prefetch *pf);
/* Predict the identified order as if it had been registered: plan its
 * sampler for this node's ranks from the trainer's epoch, tell the tracker
 * what the trainer already read of that epoch, prefetch.  With a registered
 * seed nothing changes; a contradiction of it is logged once.  Any thread
 * but the FUSE workers (it plans).  0 or -errno with a message in err. */
int cfs_prefetch_adopt(struct cfs_prefetch *pf, const struct cfs_identified *id, char *err,
                       size_t errlen);
/* The same for an order of folder `root` (relative to the source) whose n
 * samples are the mount's map[0..n) (clairfs/roots.h); map NULL: the
 * mount's own order, as cfs_prefetch_adopt.  The map is copied.  Opens of
 * samples outside the root are then no part of the order (neither hit nor
 * miss, never a reason to drop it) and are still observed.  While another
 * root's order is adopted: -EBUSY, err says so. */
int cfs_prefetch_adopt_at(struct cfs_prefetch *pf, const struct cfs_identified *id,
                          const char *root, const uint32_t *map, uint64_t n, char *err,
                          size_t errlen);
/* A distributed mount's adoption, once the nodes agreed (clairfs/
 * order_agree.h): as cfs_prefetch_adopt_at, planned for every node's ranks
 * (node_ranks, one entry a node) from epoch from_epoch, the same on every
 * node, in one stage (a staged plan's first epochs would differ from node
 * to node).  On a single node it is cfs_prefetch_adopt_at. */
int cfs_prefetch_adopt_cluster(struct cfs_prefetch *pf, const struct cfs_identified *id,
                               const char *root, const uint32_t *map, uint64_t n,
                               const struct cfs_rank_range *node_ranks, uint32_t from_epoch,
                               char *err, size_t errlen);
/* A distributed mount's agreed order no longer holds for every node (one
 * node's opens refused it: clairfs/order_agree.h): the plan adopted from it
 * is dropped, back to reactive caching, and the identification is left as
 * it is, so this node adopts again only when the nodes agree again; the
 * stats' order line says why ("dropped by the nodes: node 1's opens no
 * longer fit ...").  Any thread but the FUSE workers. */
void cfs_prefetch_drop_cluster(struct cfs_prefetch *pf, const char *why);
/* Predict the unshuffled pass (an evaluation after every epoch) over
 * folder `root`, whose n samples are the mount's map[0..n), read at
 * stride `stride` (the ranks): its opens are counted apart
 * (clairfs_prediction_total{phase="validation"}), its files kept over
 * those needed after the epoch and staged before the epoch ends.  Any
 * thread but while holding a data-path lock; the map is copied.  0 (also
 * when already predicted) or -errno, logged. */
int cfs_prefetch_predict_pass(struct cfs_prefetch *pf, const char *root, const uint32_t *map,
                              uint64_t n, uint32_t stride);
/* The identification's per-root clauses (cfs_identify_ops.text) into buf;
 * empty without. */
void cfs_prefetch_roots_text(struct cfs_prefetch *pf, char *buf, size_t len);
/* The `order:` line of .clairfs/stats, NUL-terminated: "registered
 * torch-ddp seed=7 world=2", "learning (N opens)", "identified ...", "not a
 * torch shuffle (N opens)", "off (...)". */
void cfs_prefetch_order_text(struct cfs_prefetch *pf, char *buf, size_t len);

struct cfs_prefetch_stats {
    bool planned;           /* a seed is known, or an order identified */
    bool adopted;           /* the plan is an identified order's */
    uint32_t plan_start, plan_end; /* the epochs its window covers, [start, end) */
    uint64_t prefetches;    /* fetches started by the prefetcher */
    uint64_t demand_fetches;
    uint64_t direct_opens;  /* opens served from the source directly */
    uint64_t dropped;       /* entries dropped after their last read */
    uint64_t cache_bytes[2], cache_capacity[2]; /* ram, ssd */
    uint64_t checksum_failures, loaded;
    uint64_t peer_fetches;  /* fetches answered by a peer */
    uint64_t peer_fallbacks; /* peer fetches that went to the PFS after all */
    uint64_t peer_served;   /* files this node served to its peers */
    const char *io_engine;
};
void cfs_prefetch_stats(struct cfs_prefetch *pf, struct cfs_prefetch_stats *out);

#endif
