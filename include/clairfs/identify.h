/* Order identification: learn a trainer's sampling pattern and seed from
 * the files it opens, so that nothing has to be registered.
 *
 * The mount tells this module every open of an indexed sample with the
 * opener's pid and parent pid (FUSE gives the caller's pid; DataLoader
 * workers are children of their trainer rank's process, and a loader
 * without workers opens from the rank's process itself).  A background
 * thread, at idle priority, groups the opens by process, forms hypotheses
 * (sampling pattern, world size, batch size, drop_last, epoch) and
 * searches the seed space (clairfs/seed_search.h) against the first opens;
 * it verifies every candidate against all opens observed so far and
 * demands enough consistent evidence that a false identification is
 * negligible (an order that is not a torch shuffle is never identified).
 *
 * Registered options are hints: identification checks them, never trusts
 * them; a contradiction is logged once with what was observed.  One hint
 * is needed on node k > 0 of a torch-ddp run: the world (so that k * world
 * / nodes, this node's first rank, is where its readers' stream starts);
 * without it only the torch models, whose every rank reads the whole
 * stream, are found there.  On a distributed mount with nothing registered
 * that hint is node 0's identification, seed and all, given when it comes
 * (cfs_identify_take_hint, clairfs/order_agree.h).
 *
 * What is found: the generator seed modulo 2^32 (all torch keeps; the
 * hint's high bits complete it when its low bits agree), the sampler kind,
 * world, batch size, DataLoader workers and drop_last flags.  The kinds:
 * torch-ddp (Lightning's order is one), torch, torch-sampler, and the
 * frameworks' hf-accelerate, torchvision-ra and timm-ra (src/
 * identify_frameworks.c says which of them the opens cannot tell from
 * torch-ddp or from each other); for timm-ra, seeded by the epoch, the
 * epoch is what is found, and the seed is the registered one or 0.  A torch-ddp
 * run resumed at epoch k reads as seed S + k at epoch 0 (the same order;
 * with seed S registered, as S at epoch k).  The torch models are found
 * from their epoch 0 (a resumed torch run re-seeds its generator: epoch 0
 * again).  Every observed open must be explained: a process opening files
 * off the schedule (a second job, a validation loop) keeps the module
 * learning.  Opens that fit no pattern are scanned again when they have
 * doubled, up to 8 scans in a row (1 with a registered seed); then the
 * module stops searching until cfs_identify_restart() (a new reader's first
 * open, among the first 64, still earns one more scan).
 *
 * torch-global (clairfs/sampler.h) is found from a registered seed S
 * (hint kind torch-ddp, the default, or torch-global): the trainer's
 * private seeds are random64 draws of the stream seeded S, so the module
 * searches (identify_global.c, clairfs/rng_offset.h) the words K that
 * building the model drew, K <= params.global_max_offset (2^25: ResNet-50
 * draws about 25.6 M), from epoch 0's first opens - identified then with
 * epoch_words_known false, which predicts epoch 0 - and the words G an
 * epoch draws outside the loader (<= 2^24) from epoch 1's, when
 * on_identified is called again.  Beyond the bounds it logs "not found
 * within K <= ..." and searches on as without S.
 *
 * Without S, torch-global is found one epoch at a time: each epoch's order
 * is the first randperm of a private generator seeded by a draw nobody
 * registered, which the scan fits as one epoch of torch-ddp at world 1 (or
 * torch-sampler).  Such a fit, made without a registered seed and with
 * every open in one epoch, says only that epoch (epoch_seed_only): the
 * next epoch's first opens either continue it (torch-sampler, torch-ddp:
 * checked IDENT_MIN_OPENS opens in) or refute it.  Refuted, while the fit
 * still explains the whole of its epoch, the module keeps only the next
 * epoch's opens (a window) and scans them alone; a second fresh seed there
 * is torch-global without S, and from then on every epoch's window - the
 * epoch_opens opens after the last - is scanned for its own private seed
 * (reported as torch-ddp at world 1 seeded so that `epoch` reads it, with
 * per_epoch_global).  A window that ends unidentified ends it.  Once
 * three consecutive epochs' private seeds are known, the module looks for
 * the run's seed among the seeds people use (cfs_rng_table_find, once, at
 * idle priority): found, it reports torch-global of that seed, K and G
 * (not epoch_seed_only: the whole run) and searches no more; the data
 * path's misses tell when it stops fitting (a restart).
 *
 * When an order is identified the module calls params.on_identified from
 * its own thread (the callback may take long: it plans); the mount then
 * predicts as if the order had been registered.  It keeps checking the
 * identification against later opens, cheaply, and calls on_identified
 * again with the new answer when they refine it: epoch 0 alone cannot tell
 * torch-ddp at world 1 from torch-sampler, nor persistent workers from
 * fresh ones; epoch 1 can.  (Opens that no longer fit send it back to
 * learning, as cfs_identify_restart() does, but keeping the opens.)  cfs_identify_restart()
 * sends it back to learning (the mount saw a run of mispredicted opens:
 * a restarted trainer, a second job): observations start afresh.
 *
 * Thread safety: cfs_identify_observe() may be called from any thread and
 * is cheap (an append under a leaf mutex); the rest from one thread. */
#ifndef CLAIRFS_IDENTIFY_H
#define CLAIRFS_IDENTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clairfs/sampler.h"
#include "clairfs/seed_search.h"

struct cfs_metrics;

/* What was identified: a sampler configuration that reproduces the opens,
 * the ranks of it that this node's processes are, and where in the run the
 * trainer stood when it was identified. */
struct cfs_identified {
    struct cfs_sampler_params sampler; /* kind, seed, n, world, batch, drop_last, ... */
    /* this node's trainer ranks first, first + stride, ... (count of them;
     * stride 0 or 1: one block, N: dealt round robin to N nodes) */
    uint32_t rank_first, rank_count, rank_stride;
    uint32_t epoch;                    /* the epoch the trainer was in (sampler epoch numbering) */
    uint32_t workers;                  /* DataLoader num_workers per rank (0: none seen) */
    double evidence_bits;              /* -log2 of a chance fit's probability (identify_verify.c) */
    uint64_t opens;                    /* opens observed when identified */
    uint64_t epoch_opens;              /* opens of this node's ranks in one epoch */
    double seconds;                    /* from the first observed open to identification */
    bool seed_high_known;              /* false: only seed's low 32 bits were recoverable */
    /* torch-global: sampler.rng_epoch_words was read off a later epoch
     * (false: only epoch 0 was seen, the value is 0 and unconfirmed) */
    bool epoch_words_known;
    /* Only this epoch's order is known (above): the data path plans to its
     * end and observes on.  per_epoch_global: torch-global without a seed,
     * each epoch identified from its own first opens. */
    bool epoch_seed_only, per_epoch_global;
    uint64_t opens_before; /* opens observed before this epoch's window */
    /* "torch-ddp seed=7 (low 32 bits) world=2 batch=32 workers=4 epoch 0
     * after 212 opens in 41 s" (" world=2 (ranks 0-0 here)" while fewer
     * ranks than the world have opened), then "; registered world=8
     * contradicted" for each hint the opens refute */
    char text[256];
    /* The index order the opens follow: 0 the one they were observed in,
     * k the params' orders[k - 1] (" order=NAME" in text). */
    uint32_t order;
};

typedef void (*cfs_identify_cb)(void *arg, const struct cfs_identified *id);

/* Generator seeds first, first + 1, ... (mod 2^32), count of them. */
struct cfs_seed_range {
    uint32_t first;
    uint64_t count;
};

struct cfs_split_sets;

struct cfs_identify_params {
    uint64_t n;                       /* samples in the index order */
    enum cfs_randperm_algo algo;
    /* Hints from the options (checked, never trusted).  NULL: none. */
    const struct cfs_sampler_params *hint;
    bool hint_has_seed;
    /* The hint is another node's identification (cfs_identify_take_hint),
     * not the user's: its seed is the sampler's generator's, never a
     * torch.manual_seed, so torch-global is not walked from it. */
    bool hint_identified;
    uint32_t node, nodes;             /* this node of the MPI run (0, 1 alone) */
    /* The generator seeds (mod 2^32) searched: seed_first, seed_first + 1,
     * ... seed_count of them, 0 meaning all 2^32 (about 2 CPU minutes;
     * tests and benchmarks search sub-ranges).  A hinted seed is tried
     * first, whatever the range. */
    uint32_t seed_first;
    uint64_t seed_count;
    /* Further ranges searched after that one, each as seed_first and
     * seed_count (count 1..2^32): clairfs-plan --seeds F:C,F:C,... for a
     * record whose epochs each have a seed of their own.  NULL: none. */
    const struct cfs_seed_range *more_seeds;
    size_t nmore_seeds;
    /* torch-global (a registered seed read as torch.manual_seed's): the
     * largest rng_offset searched; 0 means CFS_IDENTIFY_GLOBAL_MAX_OFFSET. */
    uint64_t global_max_offset;
    /* A reader first seen this long after its parent's first reader
     * (seconds; 0 means CFS_IDENTIFY_NEW_READER_SECONDS) restarts a
     * running scan only while a sibling reader still runs (identify.c
     * note_reader). */
    double new_reader_seconds;
    /* Past its first seeds a scan runs at SCHED_IDLE, on what everything
     * else leaves idle, but it may take up to this share (0..1) of the
     * CPUs' time at the normal priority, counted over the time the
     * trainers have been reading and the rest of one epoch of n opens at
     * their pace (cfs_identify_search_allowance), while the cores are
     * busy (cfs_identify_search_raise): where the trainers keep every core
     * busy for a long epoch, the order is still learned in it, at a
     * bounded cost.  0: idle priority only.  The mount's search_budget=
     * (default 3 %). */
    double search_budget;
    /* Threads of the seed searches' long parts (seed_threads.c), each at
     * idle priority within search_budget; 0: cfs_seed_usable_cpus().  The
     * mount's search_threads= (default 0).  The answer is the same for any
     * count. */
    unsigned search_threads;
    /* The module's thread could not come back from idle priority (no
     * CAP_SYS_NICE, RLIMIT_NICE short of 20: an ordinary user's mount).
     * It then never lowers itself, only its scans' worker threads: it
     * calls on_identified, which plans under the data path's locks, and a
     * SCHED_IDLE holder of those on busy cores would stall every open
     * behind it for seconds (a priority inversion). */
    bool thread_stays_idle;
    unsigned cores;               /* the CPUs it counts; 0: those this process may use */
    /* The scans' CPU time by priority (clairfs_search_cpu_seconds_total);
     * NULL: not counted. */
    struct cfs_metrics *metrics;
    /* Whether process pid still runs; NULL: kill(pid, 0) says. */
    bool (*process_alive)(void *arg, pid_t pid);
    void *process_alive_arg;
    /* The clock, in seconds, that says when the opens came: how late a
     * reader is (new_reader_seconds), the trainers' pace (search_budget),
     * the seconds to identification.  Any origin, never decreasing; called
     * under the module's lock, from cfs_identify_observe and the module's
     * thread.  NULL: CLOCK_MONOTONIC (tests step a clock of their own).
     * The share of a core the scans get (cfs_identify_scan_share, the
     * budget's probes) is measured on CLOCK_MONOTONIC whatever this is:
     * it is CPU time over real time. */
    double (*now)(void *arg);
    void *now_arg;
    /* Other index orders of the same n the opens may follow (a dataset
     * root's libraries' orders, clairfs/roots.h): orders[k][x] is the
     * index in order k of the sample observed as x, order_names[k] its
     * name.  The scans' set filter takes the opens' indices in every order
     * and each seed that passes it is verified in each: one pass over the
     * seeds for them all (identify_scan.c).  Torch-global (a registered
     * seed's stream, the unseeded epochs) is searched in the observed
     * order only.  At most 8; NULL: none. */
    const uint32_t *const *orders;
    const char *const *order_names;
    size_t norders;
    /* The observed numbering's order= name, said in the text as the
     * candidates' are; NULL: none (ImageFolder's, a root's usual order). */
    const char *order_name;
    cfs_identify_cb on_identified;    /* called from the module's thread */
    /* Optional, on a distributed mount's node 0 (the head: rank 0's
     * readers): at each attempt while nothing is identified, the sets its
     * scan filters with, for the other nodes to scan shares of its range
     * (identify_split.c).  From the module's thread, with cb_arg. */
    void (*on_split)(void *arg, const struct cfs_split_sets *sets);
    /* Optional: a refinement taken once identified (cfs_identify_take_hint)
     * that the opens so far contradict: hint as taken, why in words.  From
     * the module's thread, with cb_arg; the identification stays as it was. */
    void (*on_refused)(void *arg, const struct cfs_sampler_params *hint, const char *why);
    void *cb_arg;
};

/* The torch-global bounds: words building the model may draw (ResNet-50's
 * initialisation draws about 25.6 M; 2^25 is about 7 s of one core, more
 * at idle priority beside a trainer) and words an epoch may draw outside
 * the loader (one or two per CPU dropout call and step). */
#define CFS_IDENTIFY_GLOBAL_MAX_OFFSET (1ull << 25)
#define CFS_IDENTIFY_GLOBAL_MAX_WORDS (1ull << 24)
/* DDP ranks meet in init_process_group before they load data, so a rank
 * that holds the head of the order opens its first file seconds after the
 * first rank, not minutes. */
#define CFS_IDENTIFY_NEW_READER_SECONDS 60.0

struct cfs_identify;

/* Starts the module's thread.  0 or -errno with a one-line message. */
int cfs_identify_create(const struct cfs_identify_params *p, struct cfs_identify **out,
                        char *err, size_t errlen);
/* Stops the thread (cancels a search in flight).  Accepts NULL. */
void cfs_identify_destroy(struct cfs_identify *id);
/* Tells the module's thread to stop without waiting for it: from a thread
 * that holds a lock the module's callbacks take.  The module stays
 * readable (take_candidate, a share scan's pace) until
 * cfs_identify_destroy, which waits for the thread. */
void cfs_identify_halt(struct cfs_identify *id);

/* An open of sample `sample` by process pid whose parent is ppid. */
void cfs_identify_observe(struct cfs_identify *id, uint32_t sample, pid_t pid, pid_t ppid);

/* Back to learning: forget what was observed and identified. */
void cfs_identify_restart(struct cfs_identify *id);

/* A hint with a seed that comes after the start: on a distributed mount,
 * another node's identification (clairfs/order_agree.h), which a node
 * without the head of the order cannot make from its own opens.  It is
 * taken as a registered seed is (checked, never trusted) from the next
 * attempt on, which comes at once over the opens observed so far (none is
 * forgotten).  Ignored once this module has identified an order (the nodes
 * compare theirs), unless it refines that order (the same seed, world and
 * batch; drop_last, persistent workers or detectron2's stream where this
 * module has torch-ddp's: another node saw them at epoch 1's start), which
 * is checked at once over the opens so far: the module claims it again
 * (on_identified) when they fit it, says so (on_refused) when they fit
 * the order without it or fit nothing, and neither while they cannot tell
 * (the order fits both ways, or the refinement is detectron2's stream,
 * which the module tries after torch-ddp's: its own check at epoch 1's
 * start decides); ignored when its n is not the module's.  Any thread. */
void cfs_identify_take_hint(struct cfs_identify *id, const struct cfs_sampler_params *hint);

/* Candidate index orders (params.orders, names, count of them) that come
 * after the start: a dataset root's libraries' orders, built off the data
 * path (clairfs/roots.h).  Taken from the next attempt on, which comes at
 * once over the opens observed so far, as a late hint is; they must live
 * until cfs_identify_destroy.  Any thread. */
void cfs_identify_take_orders(struct cfs_identify *id, const uint32_t *const *orders,
                              const char *const *names, size_t count);

enum cfs_identify_state {
    CFS_IDENTIFY_LEARNING = 0, /* collecting opens, or searching */
    CFS_IDENTIFY_IDENTIFIED,   /* on_identified was called for the current observations */
    CFS_IDENTIFY_NOT_A_SHUFFLE,/* the opens fit no known pattern (still observing) */
};

/* The state and, when identified, what (out may be NULL).  For stats. */
enum cfs_identify_state cfs_identify_state(struct cfs_identify *id, struct cfs_identified *out);

/* True while a scan runs (or ended within the last second: scans restarted
 * for a new reader or tried again count as one), with *share the part of
 * one core the module's thread got over its last second of scanning, -1
 * before one is over.  Past its first 2^20 seeds a scan runs at SCHED_IDLE,
 * on what the trainer and everything else leave idle: a share well below
 * one says the cores are busy (the sweep then holds back, prefetch.h's
 * scan_share).  Any thread; reads a clock at most once a second. */
bool cfs_identify_scan_share(struct cfs_identify *id, double *share);

/* The CPU seconds the scans may take at the normal priority under
 * search_budget (a share of `cores` CPUs): budget x cores x the longer of
 * `reading` (the seconds the trainers have been reading, pauses of more
 * than a second counted as one) and one epoch of n opens at the pace of
 * the `opens` seen in them.  0 before a second of reading: no pace yet. */
double cfs_identify_search_allowance(double budget, unsigned cores, uint64_t n, uint64_t opens,
                                     double reading);

/* Whether a scan's next chunk runs at the normal priority: while `spent`
 * (CPU seconds run so) is below the allowance, and only where the cores
 * are busy - at idle priority the scan got less than
 * CFS_IDENTIFY_IDLE_ENOUGH of a core over its last probe (idle_share; < 0
 * not measured) - for a spell of at most a few seconds (raised_for: how
 * long it has run raised, < 0 not raised), then another probe. */
#define CFS_IDENTIFY_IDLE_ENOUGH 0.25
bool cfs_identify_search_raise(double spent, double allow, double idle_share, double raised_for);

/* Offline identification of a recorded open order (clairfs-plan
 * --identify): samples[i] opened by pids[i] (child of ppids[i]); pids and
 * ppids may be NULL (one reader).  Synchronous, full priority.  Returns 0
 * with *out filled, -ENOENT (no pattern fits, or a fit with too little
 * evidence: out->text says which, out->opens how many opens were seen), or
 * -errno with err. */
int cfs_identify_offline(const struct cfs_identify_params *p, const uint32_t *samples,
                         const pid_t *pids, const pid_t *ppids, size_t count,
                         struct cfs_identified *out, char *err, size_t errlen);

/* Offline, torch-global without a seed (clairfs-plan --identify): a record
 * that no one order explains, read as the mount learns it - each epoch the
 * first randperm of a private generator.  Epoch 0 is identified from the
 * shortest head (32 opens, doubled until one fits) as a
 * fresh generator's first epoch (torch-ddp at world 1, or torch-sampler,
 * nothing registered) that must explain all of its epoch; then every later
 * epoch, epoch_opens opens each, is identified alone, and must be a fresh
 * generator's first epoch too.  each(arg, id) is called for every epoch
 * identified, in order, with per_epoch_global set and the text "torch-global
 * (no seed registered) epoch E's private seed=...".  Returns the epochs
 * identified (at least 2: epoch 0 alone reads as torch-ddp, which
 * cfs_identify_offline says); -ENOENT when the record is not such a trainer's
 * (out->text says why: for a later epoch that fits nothing, "epoch E: ..."
 * after the epochs before it were given to each), or -errno with err.  A last
 * epoch of fewer than 32 opens is left out (out->opens counts
 * them, out->text says so).  A registered seed or a distributed node: -ENOENT
 * at once (the mount searches those otherwise). */
int cfs_identify_offline_epochs(const struct cfs_identify_params *p, const uint32_t *samples,
                                const pid_t *pids, const pid_t *ppids, size_t count,
                                cfs_identify_cb each, void *arg, struct cfs_identified *out,
                                char *err, size_t errlen);

/* The evidence, in bits, an identification over p's seed range demands
 * (cfs_identified.evidence_bits must reach it): log2 of the candidates the
 * range offers (with a registered seed, the torch-global offsets too),
 * times the index orders each seed is verified in (params.orders and the
 * observed one), plus 12 for the hypotheses per seed, plus 40 so that a false
 * identification stays below 2^-40.  About 85 for the full range. */
double cfs_identify_evidence_needed(const struct cfs_identify_params *p);

/* --- The seed scan split across the nodes (identify_split.c). ----------
 *
 * On a distributed mount the head node (the one serving rank 0's readers)
 * holds the two sets its scan filters with; node k of N scans share k of
 * the seed range with them, and hands back the seeds that pass, which the
 * head verifies against its own opens. */

#define CFS_SPLIT_VALUES_MAX 96 /* values in each set: a peer note holds 2 x 96 */
#define CFS_SPLIT_PASSES_MAX 16 /* seeds a share may be expected to pass */

/* What a node needs to scan a share: the head's sets as values, the
 * filter's stride and the range.  Fixed-size, raw bytes (the peer note). */
struct cfs_split_sets {
    uint64_t n, algo, alt_gap;
    uint64_t seed_first, seed_count; /* the whole range split (count 0: 2^32) */
    uint64_t nfirst, nsecond;
    uint32_t first[CFS_SPLIT_VALUES_MAX];  /* allowed randperm[0] */
    uint32_t second[CFS_SPLIT_VALUES_MAX]; /* allowed randperm[1] (or [alt_gap]) */
};

/* The sets of p's scan at position 0 over these opens, for the range p
 * searches.  0; -E2BIG when the readers hold more values than a message
 * carries, -ERANGE when a share of p->nodes would be expected to pass more
 * than CFS_SPLIT_PASSES_MAX seeds (small datasets: each is a note and a
 * check on the head): no split, the head scans alone; -ENOENT with no reader;
 * -EINVAL for a registered hint (its own span comes first, on the head);
 * -ENOMEM. */
int cfs_identify_split_sets(const struct cfs_identify_params *p, const uint32_t *samples,
                            const pid_t *pids, const pid_t *ppids, size_t count,
                            struct cfs_split_sets *out);

/* The share of node `node` of `nodes`: seeds [first, first + count). */
void cfs_identify_split_share(const struct cfs_split_sets *s, uint32_t node, uint32_t nodes,
                              uint32_t *first, uint64_t *count);

/* A seed and the skip it passed with (true stops the scan). */
typedef bool (*cfs_identify_split_found)(void *arg, uint32_t seed, uint32_t skip);

/* Scans share `node` of `nodes` with s, found() called on this thread in
 * seed order for each seed that passes; threads NULL: every usable CPU at
 * the normal priority.  0, -ECANCELED, -EINVAL (bad sets), -ENOMEM. */
int cfs_identify_split_scan(const struct cfs_split_sets *s, uint32_t node, uint32_t nodes,
                            const _Atomic bool *cancel, cfs_identify_split_found found, void *arg,
                            const struct cfs_seed_threads *threads);

/* cfs_identify_split_scan on the mount: on a thread of its own and the
 * usable CPUs (id's search_threads), paced by id's module as its own scans
 * are (identify_pace.c): at idle priority, raised on busy cores only while
 * the CPU id's scans and this one ran raised stays within id's
 * search_budget; its CPU counted in id's metrics
 * (clairfs_search_cpu_seconds_total) by the priority it ran at.  id NULL
 * (no such root on this node): idle priority only, counted in metrics (may
 * be NULL).  The caller waits, its priority untouched; id must outlive the
 * call.  cfs_identify_split_scan's returns, or -errno of the thread. */
int cfs_identify_split_scan_paced(struct cfs_identify *id, struct cfs_metrics *metrics,
                                  const struct cfs_split_sets *s, uint32_t node, uint32_t nodes,
                                  const _Atomic bool *cancel, cfs_identify_split_found found,
                                  void *arg);

/* The head's verification of seeds another node's share passed: as
 * cfs_identify_offline, with those seeds (position 0) as the only
 * candidates and the evidence the whole range demands.  0 identified,
 * -ENOENT, -errno with err. */
int cfs_identify_split_verify(const struct cfs_identify_params *p, const uint32_t *samples,
                              const pid_t *pids, const pid_t *ppids, size_t count,
                              const uint32_t *seeds, const uint32_t *skips, size_t nseeds,
                              struct cfs_identified *out, char *err, size_t errlen);

/* The module's sets over the opens observed so far (a distributed mount's
 * head node, to split its scan): cfs_identify_split_sets's returns, or
 * -EALREADY once identified.  Any thread. */
int cfs_identify_split_sets_now(struct cfs_identify *id, struct cfs_split_sets *out);

/* A seed another node's share passed (skip: the one it passed with),
 * verified on the caller's thread against a copy of the opens so far
 * (cfs_identify_split_verify).  1: it fits, and the module's next attempt,
 * which comes at once (a running scan is cancelled), identifies from it;
 * 0: it fits nothing (the scan goes on); -EALREADY once identified;
 * -errno.  Any thread but the module's. */
int cfs_identify_take_candidate(struct cfs_identify *id, uint32_t seed, uint32_t skip);

#endif
