/* Private to order identification (clairfs/identify.h).  The module is
 * thirteen files in layers; a file calls only the files below it, never one
 * above, so each can be read knowing only what lies under it:
 *
 *   identify.c             the opens as they come: observe, restart, state;
 *                          which readers restart a running scan
 *   identify_thread.c      the module's thread: create/destroy, an attempt
 *                          on a snapshot of the opens, what its outcome
 *                          changes, when the next attempt comes
 *   identify_epochs.c      torch-global without a seed: one epoch's window
 *                          of opens at a time, on the mount and offline
 *   identify_split.c       the seed scan split across a distributed
 *                          mount's nodes: the head's sets, a node's
 *                          share, the head's check of what passed
 *   identify_scan.c        one attempt: the kept candidates, the seed scans
 *                          over the sets of first and second opens,
 *                          cfs_identify_offline, the result in words
 *   identify_pace.c        the scans' priority, budget and share of a core
 *   identify_torchdata.c   torchdata-workers from the seeds people use
 *   identify_global.c      torch-global from a registered seed (K and G)
 *   identify_verify.c      one candidate seed: the hypotheses (world, batch,
 *                          workers, the frameworks') tried on it
 *   identify_walk.c        one hypothesis followed over every reader, and
 *                          the evidence of its fit
 *   identify_view.c        where each value sits in a candidate's epochs
 *   identify_frameworks.c  the frameworks' samplers as hypotheses
 *   identify_readers.c     the opens grouped by process
 *
 * identify_pace.c, identify_view.c, identify_frameworks.c and
 * identify_readers.c call no other identify file; identify_torchdata.c and
 * identify_global.c call only identify_verify.c and identify_readers.c.
 * (The object files' graph of calls - nm -u against nm -g --defined-only -
 * sorts with tsort.) */
#ifndef CLAIRFS_IDENTIFY_I_H
#define CLAIRFS_IDENTIFY_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "clairfs/identify.h"
#include "clairfs/sampler.h"

#define IDENT_NONE UINT32_MAX /* a position not known */

/* --- The opens grouped by process (identify_readers.c). ----------------- */

/* Opens of one process, in order. */
struct ident_reader {
    pid_t pid, ppid;
    uint32_t *s;
    size_t len, cap;
};

/* The observations grouped by process, readers in order of first open. */
struct ident_readers {
    struct ident_reader *r;
    size_t nr;
    uint64_t opens;
};

/* Groups samples[i] by pids[i] (NULL: one reader).  0 or -ENOMEM. */
int ident_group(const uint32_t *samples, const pid_t *pids, const pid_t *ppids, size_t count,
                struct ident_readers *out);
void ident_readers_free(struct ident_readers *rd);
/* rd with every open x renamed index[x] (a candidate order's numbering),
 * into out.  0 or -ENOMEM. */
int ident_readers_renumber(const struct ident_readers *rd, const uint32_t *index,
                           struct ident_readers *out);


/* A false identification stays below 2^-40 when the evidence of a fit, in
 * bits, reaches this much plus log2 of the candidate seeds tried (see
 * identify_verify.c for the argument). */
#define IDENT_SAFETY_BITS 40.0
#define IDENT_HYPOTHESIS_BITS 12.0 /* at most 4096 hypotheses a seed */
#define IDENT_MIN_OPENS 32

/* One hypothesis of how the opens follow from a candidate's epochs. */
struct ident_hyp {
    enum cfs_sampler_kind kind;
    bool persistent, drop_last, drop_last_batch;
    /* The loader keeps one iterator for the run (ultralytics'
     * InfiniteDataLoader): its workers take the batches round robin with
     * the count running on across the epochs, where a DataLoader's new
     * epoch starts again at worker 0. */
    bool one_iter;
    uint32_t world, batch, workers, p0;
    uint64_t rank_len; /* indices a rank reads in an epoch */
};

#define IDENT_MAX_WORLD 64 /* the largest world a hypothesis guesses */

/* Where a fit's ranks may sit on node k of a distributed mount, in the
 * order verify_view tries (identify_verify.c, in_node_block). */
enum ident_placement {
    IDENT_PLACE_BLOCK, /* ranks k L .. k L + L - 1 */
    IDENT_PLACE_DEALT, /* those, or k, k + N, ... (cyclic) */
    IDENT_PLACE_ANY,
};

/* --- The frameworks' samplers (identify_frameworks.c). ------------------ */

/* Ranks read disjoint parts of one permutation per epoch: torch-ddp and the
 * frameworks' samplers (a generator seeded afresh), detectron2's stream
 * (one generator's randperms back to back). */
bool ident_sharded(enum cfs_sampler_kind kind);
/* Rank r's index j is stream position r + j W: torch-ddp, ultralytics-ddp
 * and mmengine-noround within an epoch, detectron2 over the whole stream
 * (pass (r + j W) / n). */
bool ident_strided(enum cfs_sampler_kind kind);
/* The indices rank r reads an epoch under h: h->rank_len, but for
 * mmengine-noround (unpadded: ranks below n mod W read one more). */
uint64_t ident_rank_len_at(const struct ident_hyp *h, uint64_t n, uint32_t r);
/* For h of a framework kind (hf-accelerate, torchvision-ra): the indices
 * a rank reads per epoch; the permutation position of rank r's index j;
 * the (rank, index) pairs that read position q, at most
 * ident_fw_choices(h) of them, into r[] and j[]. */
uint64_t ident_fw_rank_len(const struct ident_hyp *h, uint64_t n);
uint32_t ident_fw_position(const struct ident_hyp *h, uint64_t n, uint32_t r, uint64_t j);
size_t ident_fw_places(const struct ident_hyp *h, uint64_t n, uint32_t q, uint32_t *r, uint64_t *j);
uint32_t ident_fw_choices(const struct ident_hyp *h);
#define IDENT_FW_MAX_CHOICES 3

/* The reader that opened the epoch's first permutation entry: pos(arg, i)
 * is the position of its open i (i < len) in the candidate's epoch 0
 * (IDENT_NONE where unknown; pos(arg, 0) = 0); a registered batch (0:
 * none). */
struct ident_fw_head {
    uint32_t (*pos)(void *arg, size_t i);
    void *arg;
    size_t len;
    uint64_t n;
    uint32_t hint_batch;
    /* The epoch-0 positions of the first opens of the head's siblings
     * (readers with its parent: its rank's other workers), which say B and
     * T while the head has not finished its first batch. */
    const uint32_t *sibling_first;
    size_t nsiblings;
};
/* The framework hypotheses (kind, world, batch, workers) these opens
 * allow, at most max; drop_last variants are the caller's. */
size_t ident_fw_hypotheses(const struct ident_fw_head *hd, struct ident_hyp *out, size_t max);

/* Workers 1 .. k of a rank start at w times one stride (torch-ddp's and
 * accelerate's batches, in their own units): the least of starts[0 .. k)
 * when each is a distinct multiple 1 .. k of it, else 0. */
uint32_t ident_stride_of_starts(const uint32_t *starts, size_t k);
/* The seeds libraries set themselves, scanned before the rest of the
 * range: ultralytics' 6148914691236517205 + RANK, RANK -1 in one process
 * (its low 32 bits). */
#define IDENT_CONSTANT_SEEDS 1
extern const uint32_t ident_constant_seed[IDENT_CONSTANT_SEEDS];
/* A torch fit (persistent workers, seed32) renamed for the library that
 * seeds that way: ultralytics' InfiniteDataLoader in one process (its
 * full seed into *seed); false when none does, or the registered sampler
 * says otherwise. */
bool ident_lib_ultralytics(uint32_t seed32, bool persistent, const struct cfs_sampler_params *hint,
                           uint64_t *seed);
/* Is a torchvision-ra fit with candidate seed seed32 to be named timm-ra
 * (seed32 is then the epoch the observation began in)? */
bool ident_fw_timm(uint32_t seed32, const struct cfs_sampler_params *hint);


/* --- A candidate's epochs (identify_view.c). ----------------------------- */

/* Where each value sits in each epoch of one generator family. */
struct ident_view {
    enum cfs_sampler_kind kind;
    bool persistent;
    uint32_t seed32, skip;
    uint64_t n;
    enum cfs_randperm_algo algo;
    bool sparse;
    struct cfs_sampler *s;
    /* the model the epochs come from (world 1, batch 1) */
    struct cfs_sampler_params base;
    uint32_t **inv;  /* dense: inv[e][v]; sparse: hash, keys then positions */
    uint64_t **seen; /* bitsets of explained positions, per epoch */
    uint32_t nep, maxep, hbits, width;
};

/* model: a full sampler configuration to take the epochs from (torch-global,
 * identify_global.c); NULL: kind's, seeded seed32.  0, -ENOMEM, -ENOTSUP (a
 * model above the dense n), -errno; ident_view_free in every case. */
int ident_view_init(struct ident_view *v, const struct cfs_identify_params *p,
                    enum cfs_sampler_kind kind, bool persistent, uint32_t seed32, uint32_t skip,
                    const struct cfs_sampler_params *model);
void ident_view_free(struct ident_view *v);
/* Position of value x in epoch e, IDENT_NONE when unknown (beyond the
 * epochs kept, outside the sparse window) or on error (*err set). */
uint32_t ident_pos_of(struct ident_view *v, uint32_t e, uint32_t x, int *err);

/* --- One hypothesis over every reader (identify_walk.c). ----------------- */

struct ident_walk {
    struct ident_view *v;
    const struct ident_hyp *h;
    const struct ident_readers *rd;
    struct cfs_sampler *model; /* confirming: compare with rank_at */
    uint32_t model_epoch;
    uint32_t *rank;   /* per reader: DDP rank (torch kinds: 0) */
    uint32_t *epoch0; /* per reader: the epoch of its first open */
    uint64_t *start;  /* per reader: the rank's index of its first open */
    /* per reader, the placement search's state: the epoch and the choice
     * of place to try next, and max_epoch before its placement */
    uint32_t *try_epoch, *try_place, *max_before;
    uint64_t budget;  /* schedules followed before the walk gives up */
    uint32_t max_epoch;
    int err;
};

/* Every reader placed at a worker's first batch of some epoch and followed
 * on its schedule; with mark, the placement found is walked once more
 * marking what it reads.  False when none fits (or w->err). */
bool ident_walk_all(struct ident_walk *w, bool mark);
/* The evidence of h's fit, in bits (identify_walk.c's top comment); -1
 * when it does not fit. */
double ident_walk_evidence(struct ident_walk *w);

/* --- One candidate (identify_verify.c). ---------------------------------- */

/* Verdict on one candidate: generator seed seed32 (mod 2^32) drawing
 * skip_words before the first randperm, the head of the stream at randperm
 * position p0.  Returns 1 when a hypothesis explains every open with at
 * least need_bits of evidence (*out filled), 0 when one explains every
 * open with less (*bits says how much), -ENOENT when none does, -ENOMEM. */
int ident_verify(const struct cfs_identify_params *p, const struct ident_readers *rd,
                 uint32_t seed32, uint32_t skip_words, uint32_t p0, double need_bits,
                 struct cfs_identified *out, double *bits);

/* The same against a full sampler configuration (torch-global: seed S,
 * rng_offset, rng_epoch_words; world and batch are found as above), from
 * randperm position 0.  Refused (-ENOTSUP) above the dense n. */
int ident_verify_model(const struct cfs_identify_params *p, const struct ident_readers *rd,
                       const struct cfs_sampler_params *model, double need_bits,
                       struct cfs_identified *out, double *bits);

/* --- torch-global from a registered seed (identify_global.c). ----------- */

/* The opens as observed, in order. */
struct ident_obs {
    const uint32_t *s;
    const pid_t *pids, *ppids;
    size_t len;
};

/* A torchdata-workers fit (identify_torchdata.c): the global seed, the
 * words drawn before the loader, persistent workers or not. */
struct ident_torchdata {
    bool found, persistent;
    uint64_t seed, offset;
};

/* What is known of a torch-global trainer between attempts (and of a
 * torchdata-workers one, whose sampler's seed is a global draw too). */
struct ident_global {
    bool found;       /* rng_offset known (and the loader's schedule) */
    bool words_known; /* rng_epoch_words known */
    bool persistent;
    uint64_t offset, words;
    uint32_t batch, workers, ranks;
    bool told;      /* "not found within K <= ..." was logged */
    uint32_t order; /* the root's index order it was found in (ident_cand's) */
    struct ident_torchdata td;
};

/* The registered seed S read as torch-global: 1 identified (*out), 0 a fit
 * short of evidence, -ENOENT no torch-global order of S fits, -ECANCELED,
 * -errno.  g carries the offset found from one attempt to the next. */
int ident_global_attempt(const struct cfs_identify_params *p, const struct ident_obs *obs,
                         const atomic_bool *cancel, double need_bits, struct ident_global *g,
                         struct cfs_identified *out);

/* Candidates the torch-global searches may try for p (0 when they do not
 * apply): counted in the evidence demanded. */
double ident_global_candidates(const struct cfs_identify_params *p);

/* " rng_offset=K rng_epoch_words=G" for a torch-global id, else "". */
void ident_global_describe(const struct cfs_identified *id, char *buf, size_t len);


/* --- torchdata-workers from the seeds people use (identify_torchdata.c). - */

/* The largest n walked: identify_view.c's dense views (a model's view). */
#define IDENT_TD_MAX_N (1u << 22)

/* The opens rd as torchdata's StatefulDataLoader with workers, its global
 * seed S from the table of seeds people use (or the registered one) and
 * the words K drawn before the loader walked as far as n allows; td the
 * fit kept from the last attempt, re-verified first (kept_only: that
 * alone).  1 identified (out), 0 a fit short of evidence, -ENOENT none,
 * -ECANCELED, -errno. */
int ident_torchdata_attempt(const struct cfs_identify_params *p, const struct ident_readers *rd,
                            const atomic_bool *cancel, double need_bits, bool kept_only,
                            struct ident_torchdata *td, struct cfs_identified *out);

/* Candidates that walk may try for p (0 when it does not apply): counted
 * in the evidence demanded. */
double ident_torchdata_candidates(const struct cfs_identify_params *p);

/* --- The scans' priority, budget and share of a core (identify_pace.c). -- */

static inline double ident_clock_sec(clockid_t clock)
{
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The share of a core the module thread's scans get (cfs_identify_scan_share).
 * Its own lock, a leaf: the data path asks without waiting for the module's. */
struct ident_scan_meter {
    pthread_mutex_t mu;
    clockid_t clock; /* the module thread's CPU time */
    bool has_clock;
    bool scanning;
    double scan_end;   /* monotonic seconds */
    double t0, cpu0;   /* the window's start, the thread's CPU time then */
    double share;      /* of the last window; -1 before one */
    bool raised;       /* a raised spell runs: no window is measured */
    _Atomic uint64_t workers_ns; /* the scans' worker threads' CPU time, counted up */
};

/* On the module's thread, around each scan. */
void ident_meter_scan(struct ident_scan_meter *m, bool begin);
/* The meter's arithmetic, its measurements given (m->mu held, or a meter
 * no other thread sees): a scan begins or ends at monotonic second now,
 * the module thread's CPU seconds then cpu; does a window close at now
 * (its CPU time is then needed); is a scan running (or ended less than a
 * gap ago) at now, *share the last window's. */
void ident_meter_scan_at(struct ident_scan_meter *m, bool begin, double now, double cpu);
bool ident_meter_window_closes(const struct ident_scan_meter *m, double now);
bool ident_meter_share_at(struct ident_scan_meter *m, double now, double cpu, double *share);
/* The scan runs raised (the budget's spell) or back at idle priority from
 * now, the CPU seconds then cpu: a raised scan's share says nothing of the
 * idle cores, so the last idle window's stands until a new one closes. */
void ident_meter_raised_at(struct ident_scan_meter *m, bool raised, double now, double cpu);

#define IDENT_PACE_CHUNK (1ull << 16) /* ~1 ms of a core: under a second at idle on busy cores */
#define IDENT_PACE_GAP 1.0         /* seconds between opens counted as reading, at most */
#define IDENT_PACE_MIN_READING 1.0 /* seconds of reading before a pace is known */
#define IDENT_PACE_PROBE 2.0       /* seconds at idle priority that measure its share */
#define IDENT_PACE_SPELL 20.0      /* seconds raised between probes */

/* The scans' pace (identify_pace.c's top comment). */
struct ident_pace {
    double budget;
    unsigned cores;
    uint64_t n;
    struct cfs_metrics *metrics;
    /* Stored under the module's lock (observe, restart), read by the thread. */
    _Atomic uint64_t opens;
    _Atomic uint64_t reading_us;
    atomic_bool reset; /* a restart: nothing of the budget spent yet */
    /* The module thread's own. */
    bool keep_thread_normal; /* never lowered: only the workers (identify.h thread_stays_idle) */
    bool idle;       /* the priority it runs at (its scans' workers', where keep_thread_normal) */
    bool raised;     /* in a scan's long part, at the normal priority */
    double cpu_mark; /* its CPU time and its scans' workers' when last charged */
    double workers_cpu; /* CPU seconds of the scans' worker threads, counted up */
    double spent;    /* CPU seconds run raised */
    bool said_raised, said_spent;
    double probe_wall, probe_cpu; /* the idle probe's start (monotonic, thread CPU); 0: none */
    double idle_share;            /* of a core at idle priority, the last probe's; -1: none */
    double raised_at;             /* monotonic seconds the raised spell began */
    /* The pace whose budget and trainers' pace this one's scan draws on (a
     * share scan's: the module's, identify_split.c); NULL: its own. */
    struct ident_pace *budget_of;
    /* CPU nanoseconds run raised against this pace's budget, by it and by
     * the paces drawing on it (any thread adds; the module's reset). */
    _Atomic uint64_t spent_ns;
};

/* On the module thread: its CPU time since the last charge, to the
 * priority it ran at; run at idle priority from now, or at the normal
 * one (outside the budget: the head of a scan, the checks); before each
 * chunk of a scan's long part, the priority of the next. */
void ident_pace_charge(struct ident_pace *pc);
void ident_pace_priority(struct ident_pace *pc, bool idle);
/* The threads of a paced scan's long part given search_threads=
 * `configured`: at least two where the module thread stays at the normal
 * priority (keep_thread_normal), so that it never scans itself. */
unsigned ident_pace_threads(const struct ident_pace *pc, unsigned configured);
struct cfs_seed_workers;
/* w: the scan's worker threads (NULL: the module thread scans), their CPU
 * time charged with the thread's (and added to m's, m may be NULL) and
 * their priority set with its. */
void ident_pace_chunk(struct ident_pace *pc, struct ident_scan_meter *m,
                      struct cfs_seed_workers *w);
/* ident_pace_chunk with its measurements given: the thread's CPU seconds
 * cpu charged, at monotonic second now; set_priority(raised) changes the
 * thread's priority (false: refused, the pace stays as it was). */
void ident_pace_charge_at(struct ident_pace *pc, double cpu);
void ident_pace_chunk_at(struct ident_pace *pc, double now, double cpu,
                         bool (*set_priority)(bool raised));
/* A share scan's pace, drawing on `of`'s budget, trainers' pace and
 * metrics (of NULL: no budget, idle priority only, its CPU counted in
 * metrics, which may be NULL); it begins at idle priority, its cpu_mark
 * for the thread that scans to set. */
void ident_pace_share_init(struct ident_pace *pc, struct ident_pace *of,
                           struct cfs_metrics *metrics);

/* --- One attempt over a set of observations (identify_scan.c). ---------- */

#define IDENT_MAX_KEEP 16 /* fits short of evidence kept between attempts */

/* A candidate: seed (mod 2^32), words skipped, the head's position; the
 * index order it was verified in (0: the observed numbering, k:
 * params.orders[k - 1]). */
struct ident_cand {
    uint32_t seed, skip, p0, order;
};

#define IDENT_MAX_ORDERS 8 /* candidate index orders beside the observed one */

/* The range's first seeds, scanned at the normal priority (ident_attempt_all
 * says why); the long part past them runs at idle priority. */
#define IDENT_SCAN_HEAD_SEEDS (1u << 20)

struct ident_attempt {
    const struct cfs_identify_params *p;
    const struct ident_readers *rd;
    /* the opens in each index order: [0] is rd, [k] renumbered by
     * params.orders[k - 1] */
    struct ident_readers in_order[1 + IDENT_MAX_ORDERS];
    size_t norders; /* 1 + the candidate orders */
    const atomic_bool *cancel;
    _Atomic uint64_t *scanned;      /* seeds the scans passed, counted up; NULL offline */
    struct ident_scan_meter *meter; /* NULL offline */
    struct ident_pace *pace;        /* NULL offline */
    bool paced;                     /* a scan's long part: its chunks paced */
    double need_bits;
    uint32_t p0;
    int rc; /* 1 identified, -errno */
    struct cfs_identified *out;
    struct ident_cand win;      /* what identified */
    struct cfs_identified near; /* the best fit short of evidence */
    double near_bits;
    struct ident_cand keep[IDENT_MAX_KEEP];
    size_t nkeep;
    uint64_t fits;
    bool scanning;   /* candidates come from a scan (not the kept ones) */
    bool global_win; /* the outcome is identify_global.c's */
    size_t readers;  /* processes among the opens (for the debug log) */
};

/* What an attempt is given: the opens (obs, grouped: rd), the module's
 * cancel flag, count of the seeds scanned, meter and pace (NULL offline),
 * the candidates kept from the last attempt (kept_only: those alone), what
 * is known of a torch-global trainer. */
struct ident_attempt_in {
    const struct cfs_identify_params *p;
    const struct ident_obs *obs;
    const struct ident_readers *rd;
    const atomic_bool *cancel;
    _Atomic uint64_t *scanned;
    struct ident_scan_meter *meter;
    struct ident_pace *pace;
    const struct ident_cand *keep;
    size_t nkeep;
    bool kept_only;
};

/* Fills out (or a "why not" text in out) from in's observations, g what
 * is known of a torch-global trainer.  1 identified, 0 not (out->text
 * says why), -errno. */
int ident_attempt_all(const struct ident_attempt_in *in, struct ident_global *g,
                      struct ident_attempt *a, struct cfs_identified *out);
/* The filter's second stride at head position p0 (0: none): the node
 * count on a distributed mount of one rank a node (identify_scan.c). */
uint32_t ident_scan_alt_gap(const struct cfs_identify_params *p, uint32_t p0, uint32_t maxskip);
/* The result in words (id->text), its seed's high bits from the registered
 * seed where they agree; the registered values the opens contradict (logged
 * with log_contradiction). */
void ident_finish(const struct cfs_identify_params *p, struct cfs_identified *id, double seconds,
                  bool log_contradiction);
/* out: nothing identified from `opens` opens, and why (a's best fit). */
void ident_not_identified(const struct ident_attempt *a, uint64_t opens,
                          struct cfs_identified *out);
/* An offline attempt's outcome (rc of ident_attempt_all over `opens`
 * opens): 0 with *out identified, -ENOENT with *out what was tried, or the
 * error, said in err. */
int ident_offline_outcome(const struct cfs_identify_params *p, const struct ident_attempt *a,
                          size_t opens, int rc, struct cfs_identified *out, char *err,
                          size_t errlen);

/* --- The module's state. ------------------------------------------------ */

/* Opens kept for verification: an ImageNet epoch (1 281 167) and the next
 * epoch's first opens, where what the first epoch left open shows (the
 * pages are touched only as opens come). */
#define IDENT_MAX_OBS (1u << 21)
#define IDENT_NEW_READER_RESTARTS 64 /* readers whose first open restarts a scan */

/* torch-global without a seed (clairfs/identify.h): the window of one
 * epoch's opens that the module learns from. */
enum { IDENT_EPOCHS_OFF, IDENT_EPOCHS_TRYING, IDENT_EPOCHS_ON };
struct ident_epochs {
    unsigned stage;     /* TRYING: one fresh seed's epoch was refuted by the next */
    uint32_t epoch;     /* the trainer's epoch the window holds */
    uint64_t per;       /* opens an epoch */
    uint64_t before;    /* opens observed before the window (since the restart) */
    /* The private seeds of the last consecutive epochs learnt (priv_epoch
     * the last one's), for the run's seed (ident_epochs_table). */
    uint32_t priv[3];
    uint32_t priv_epoch;
    unsigned priv_count;
    bool table_tried; /* the table of seeds people use was searched */
    /* The run's seed over all 2^32 seeds (rng_range.c) once the table had
     * none, for the private seeds of epochs range_first.. (range_priv),
     * in slices between the epochs' scans: range_next seeds searched. */
    bool range_on;
    uint32_t range_priv[3], range_first;
    uint64_t range_next;
    double range_seconds; /* spent in it so far */
};
/* Seeds of the full range between looks at the thread's other work:
 * about 2 s of one core, less on the search's threads; an attempt falling
 * due cancels the slice sooner (identify.c), which resumes after it. */
#define IDENT_RANGE_SLICE (1ull << 24)

struct cfs_identify {
    struct cfs_identify_params p;
    struct cfs_sampler_params hint;
    /* under lock: a hint taken after the start (cfs_identify_take_hint),
     * made p.hint by the thread between attempts, when no attempt reads p */
    struct cfs_sampler_params late_hint;
    bool late_hint_pending;
    /* under lock: the late hint refines what was identified; the next
     * attempt that ends says whether the opens fit it (on_refused) */
    bool refine_pending, refine_checking;
    /* under lock: candidate orders given after the start
     * (cfs_identify_take_orders), made p.orders the same way */
    const uint32_t *const *late_orders;
    const char *const *late_order_names;
    size_t late_norders;
    bool late_orders_pending;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    uint32_t *samples; /* under lock */
    pid_t *pids, *ppids;
    size_t len, next_attempt;
    uint64_t generation;
    bool stop;
    double first_open; /* under lock: ident_now at the first open (the window's) */
    double last_open;  /* under lock: ident_now at the last open paced (pace.opens > 0) */
    enum cfs_identify_state state;
    struct cfs_identified result;
    atomic_bool cancel;
    pthread_t thread;
    struct ident_cand keep[IDENT_MAX_KEEP]; /* under lock: fits short of evidence */
    size_t nkeep;
    /* under lock: a seed another node's share passed that fits the opens
     * (cfs_identify_take_candidate), kept until an attempt checked it */
    struct ident_cand passed;
    bool passed_pending;
    /* the thread's own: the sets last handed to on_split (sent again only
     * when they change: every node's share scan starts over with them) */
    struct cfs_split_sets split_sent;
    pid_t readers[IDENT_NEW_READER_RESTARTS];          /* under lock: the first readers seen */
    pid_t reader_parents[IDENT_NEW_READER_RESTARTS];   /* and their parents */
    double reader_seen[IDENT_NEW_READER_RESTARTS];     /* and when, seconds after first_open */
    uint32_t reader_first[IDENT_NEW_READER_RESTARTS];  /* and the sample each opened first */
    bool reader_two[IDENT_NEW_READER_RESTARTS];        /* and whether a second distinct one */
    bool reader_restarts[IDENT_NEW_READER_RESTARTS];   /* and whether its opens restart a scan */
    size_t nreaders;
    bool attempting; /* under lock: the thread works on a snapshot */
    unsigned fruitless; /* under lock: scans in a row that found nothing fitting */
    struct ident_global global; /* under lock: a torch-global trainer's offsets */
    struct ident_cand win;      /* under lock: the candidate of the last identification */
    struct ident_epochs epochs; /* under lock */
    struct ident_scan_meter meter;
    struct ident_pace pace;
    /* What the thread has done, for ident_progress_of. */
    uint64_t attempts;        /* under lock: attempts begun */
    size_t attempt_opens;     /* under lock: the opens of the last one begun */
    _Atomic uint64_t scanned; /* the seeds its scans have passed */
    bool waiting;             /* under lock: the thread waits on wake */
    bool tabling;             /* under lock: the thread searches the table of seeds */
    bool ranging;             /* under lock: ... or a slice of the full range */
    uint64_t restarts;        /* under lock: cfs_identify_restart calls */
};

/* The module's clock (cfs_identify_params.now), in seconds. */
static inline double ident_now(const struct cfs_identify *id)
{
    return id->p.now ? id->p.now(id->p.now_arg) : ident_clock_sec(CLOCK_MONOTONIC);
}

/* --- One epoch at a time (identify_epochs.c). --------------------------- */

/* Under the lock: the observations become the window of opens [from, len)
 * for the trainer's epoch `epoch`; learning starts again on them. */
void ident_window_from(struct cfs_identify *id, size_t from, uint32_t epoch);
/* On the thread, after an attempt over s[0, len) that refuted the
 * identification: if that was one fresh epoch and it explains the first
 * epoch_opens opens, the rest is the next epoch's, to be scanned alone
 * (true).  Takes and returns with the lock held. */
bool ident_try_next_epoch(struct cfs_identify *id, const uint32_t *s, const pid_t *pids,
                          const pid_t *ppids, size_t len);
/* On the thread, the lock held: out (candidate win) fits the current
 * observations.  In a window, a fresh epoch is torch-global's (named so,
 * planned as the torch-ddp epoch that reads it); anything else ends the
 * windows. */
void ident_epoch_fit(struct cfs_identify *id, struct cfs_identified *out, struct ident_cand win);
/* On the thread, the lock held (released meanwhile): once three
 * consecutive epochs' private seeds are known, the run's seed is sought
 * in the table of seeds people use (clairfs/rng_offset.h), once; found,
 * the result becomes torch-global of that seed, K and G, for the whole run
 * (out, true: the caller reports it; no attempt follows). */
bool ident_epochs_table(struct cfs_identify *id, struct cfs_identified *out);
/* On the thread, the lock held: the full range's search for the run's
 * seed, slice after slice while no attempt is due (id->len <
 * id->next_attempt), resumed where it stopped; true with out when a seed
 * was found and adopted (as ident_epochs_table does). */
bool ident_epochs_range(struct cfs_identify *id, struct cfs_identified *out);

/* --- The module's thread (identify_thread.c). --------------------------- */

/* Under the lock: the running attempt stops at its next check of cancel
 * (and the thread is put back at the normal priority to see it). */
void ident_cancel_attempt(struct cfs_identify *id);

/* Where the module's thread stands, for tests that wait for what it has
 * done - an attempt begun over so many opens, its scans past a seed -
 * rather than sleep for as long as it probably takes. */
struct ident_progress {
    uint64_t attempts; /* begun since cfs_identify_create */
    size_t opens;      /* the last one's snapshot of the opens */
    uint64_t scanned;  /* the seeds its scans have passed (the head's first) */
    bool attempting;   /* it still runs */
    bool settled;      /* it waits for opens, none due: done with those it has */
};
void ident_progress_of(struct cfs_identify *id, struct ident_progress *out);

#endif
