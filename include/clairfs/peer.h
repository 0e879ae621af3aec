/* Peers: the nodes of a distributed mount, over Open MPI.  Node
 * identity, the start-up agreement check, and peer fetch: whole cached
 * files requested from and served by other nodes.  What to fetch from whom
 * is the prefetcher's business; this module moves bytes.
 *
 * Start-up.  cfs_peer_init() looks for the environment mpirun (or srun with
 * PMIx/PMI) gives its processes.  Without it clairfs is a single node: no
 * MPI call is made, no MPI runtime is needed, and the handle is NULL (every
 * function here accepts NULL as "one node, rank 0").  Under mpirun it calls
 * MPI_Init_thread(MPI_THREAD_MULTIPLE) and fails when the library provides
 * less, then works on a duplicate of MPI_COMM_WORLD whose error handler
 * returns codes (a peer error must not abort the job).  Fork after MPI_Init
 * is unsupported by Open MPI: under MPI the daemon must run in the
 * foreground (-f).
 *
 * Agreement.  Every node fills a struct cfs_peer_agreement (catalog hash,
 * the plan-relevant options, protocol version) and cfs_peer_agree() does one
 * MPI_Allgather of the raw structs.  Every node thus sees every node's values
 * and writes the same message: "seed differs: rank 0 has 42, rank 1 has 43",
 * or "dataset differs (catalog hash ...)".  The caller exits non-zero before
 * mounting.  Call it before cfs_peer_start() (it is the only collective).
 *
 * Threads.  One communication thread per node owns every MPI call after
 * start-up.  Client threads append requests to a locked list and wake it;
 * it posts, tests and completes everything in one progress loop
 * (MPI_Testsome over one table of requests).  MPI_THREAD_MULTIPLE would let
 * clients post themselves, but Open MPI then takes its big lock on every
 * call and the clients would contend with the progress loop; one owner
 * thread also makes the message order (below) easy to reason about.  When
 * there is nothing to do the thread sleeps in steps growing from 10 us to
 * 200 us, 20 us while transfers are in flight (MPI offers no way to block on
 * "a message or a local wake-up", and Open MPI's blocking calls spin), so a
 * server that worked in the last 200 ms answers within 200 us.  After
 * 200 ms without work the steps grow on to 5 ms: each wake-up costs some
 * 20 us of CPU, and an unread node (measured: test_mpi_mount.sh idle) drops
 * from 10 % of a core to about 1 %; a local client wakes the thread at once,
 * so only a peer's first request after a quiet spell waits up to 5 ms (a
 * measured latency the model would hold against that peer).
 * Spinning instead was tried and is far worse on a host with fewer cores
 * than busy threads (several ranks per host): the spinners starve the
 * threads that submit and consume.  Callbacks (done(), the provider) run on
 * this thread and must not block; they may call cfs_peer_submit().
 *
 * Measured (`meson test --benchmark peer_fetch`, 2 ranks on one 2-core
 * host, 1000 files of 110 KiB from RAM): a RAM hit (memcpy into the
 * reader's buffer) 11-13 us; one peer fetch at a time p50 200-230 us over
 * shared memory (btl vader), 700-950 us over TCP loopback; batched at depth
 * 256, 1.0-1.6 GB/s (vader, 9-15 k files/s) and 0.5-1.3 GB/s (TCP), the
 * lower figures on a host busy with other jobs.
 * Latency is dominated by the poll sleeps on both sides; the prefetcher
 * hides it by asking ahead, which is what the batching serves.
 *
 * Protocol.  Control messages use one tag, so MPI's non-overtaking rule
 * keeps them in order between two nodes: REQ (a batch of file ids), REPLY
 * (per file: status, length, xxh3-64), GOODBYE and GOODBYE_ACK (leaving),
 * NOTE (a few bytes for the caller's on_note: the order agreement).
 * A client gathers the requests queued for each destination into batches of
 * up to CFS_PEER_BATCH ids, at most CFS_PEER_WINDOW batches in flight per
 * destination, so small files do not pay one round trip each and a busy
 * client's batches fill up.  For each file of a batch the client posts an
 * MPI_Irecv with a tag of its own before sending the REQ; the server sends
 * each held file as one message with that tag straight from tier memory
 * (MPI_Isend from the RAM pointer; an SSD entry is pread into a bounce
 * buffer first, because mmap + munmap per file costs more than the copy,
 * and the pin is released at once), then the REPLY.  A file the server is
 * fetching itself (the provider says -EAGAIN: in flight, or an owned file it
 * starts fetching for the asker) holds the batch's REPLY back until the file
 * is published, at most peer_timeout / 2, then answers it "not held"
 * (peer_defer.c): in the first epoch the owner thus reads each file from the
 * PFS once for the whole cluster.  The pin of a RAM entry
 * is held until its send completes.  The receiver checks length and xxh3
 * of every file on arrival; a mismatch fails the request with -EIO (the
 * caller refetches from the PFS).
 *
 * Receive buffers.  Data lands in a bounce buffer of this module and is
 * copied to the caller's buffer after the checksum passed (one memcpy, about
 * 10 us for 110 KB).  The reason: a request that times out must give its
 * buffer back, but MPI_Cancel cannot withdraw a receive that has already
 * matched (a rendezvous whose sender stopped mid-transfer); the bounce buffer
 * stays with the module until MPI is done with it, so the caller's buffer is
 * never written after done() and a timeout is always honoured.
 *
 * Timeouts.  A node with requests outstanding that has sent us nothing (no
 * reply, no data) for peer_timeout seconds, counted from the later of its
 * oldest unanswered batch's send and the last thing it sent, is marked slow
 * (a node busy answering a long queue is not): every request to it still
 * outstanding or queued completes with -ETIMEDOUT, and new ones are refused
 * at once (cfs_peer_submit() returns -ETIMEDOUT) for a back-off that starts
 * at peer_timeout (or params.backoff) and doubles up to 8x while the peer
 * stays silent.  Any
 * message from the peer (typically its late replies) unmarks it at once;
 * after the back-off, requests are tried again.  A late reply's data is
 * received into the orphaned bounce buffer and dropped.
 *
 * Leaving.  cfs_peer_leave(): requests not yet answered complete with
 * -ECANCELED, new ones are refused (-ESHUTDOWN), and a GOODBYE goes to every
 * node still present.  The node keeps serving until every node has
 * acknowledged it: because control messages are ordered, a GOODBYE_ACK comes
 * after every REQ that node sent us and after its REPLYs to our requests, so
 * then nothing more is addressed to us.  A node that gets a GOODBYE marks
 * the sender gone (submit returns -EHOSTDOWN) and acknowledges.  Leaving
 * gives up after max(2 * peer_timeout, 1 s) on nodes that do not answer (a
 * stopped node).  No collective is made at shutdown: nodes leave at any time
 * and in any order.  MPI_Finalize, however, is itself a fence in Open MPI
 * 4.1 (measured: a rank that finalizes 3 s before the last one waits those
 * 3 s in MPI_Finalize), so a node that unmounts early has its mount gone at
 * once but its process lives until the last node finalizes.
 *
 * What MPI cannot survive.  Open MPI aborts the whole job when a rank dies
 * without MPI_Finalize (kill -9, a crash, a node failure): every daemon is
 * killed and every mount of the job disappears (reads on them fail with
 * ENOTCONN until unmounted).  A job script must therefore unmount every
 * node's mount (fusermount3 -u, also in its failure trap) and must not
 * expect the other mounts to outlive a crashed node; restarting the mpirun
 * reuses the SSD tiers.  A stopped or slow rank is survived (timeouts,
 * above).  A node that joins later is not supported: the world is fixed at
 * mpirun. */
#ifndef CLAIRFS_PEER_H
#define CLAIRFS_PEER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>


struct cfs_run_config;

#define CFS_PEER_BATCH 64 /* file ids per request message */
#define CFS_PEER_WINDOW 4 /* request batches in flight per destination */
#define CFS_PEER_SIZE_UNKNOWN UINT64_MAX

/* True when the environment says we were started by mpirun / srun (PMIx or
 * PMI variables).  Needs no MPI library. */
static inline bool cfs_peer_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "PMI_SIZE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

/* --- Agreement. --- */

/* Every field is a uint64_t so that the struct is gathered as raw bytes and
 * compared field by field. */
struct cfs_peer_agreement {
    uint64_t protocol;      /* CFS_PEER_PROTOCOL: same clairfs peer protocol */
    uint64_t catalog_hash;  /* cfs_catalog_hash() */
    uint64_t has_seed, seed;
    uint64_t sampler;       /* enum cfs_sampler_kind */
    uint64_t sampler_list;  /* hash of the sampler=list: path, 0 */
    uint64_t world, batch;
    uint64_t drop_last, drop_last_batch, persistent_workers;
    uint64_t repetitions;   /* sampler=torchvision-ra, timm-ra; 0 for the other kinds */
    uint64_t epochs, start_epoch;
    uint64_t order;         /* enum cfs_order (the list itself is in the catalog hash) */
    uint64_t ram, ssd;
    uint64_t no_peers;      /* a node without peers would never answer the others */
};
/* 2: the agreement has repetitions; 3: NOTE messages; 4: the split seed
 * scan's notes (order_agree.h); 5: a claim's refinement generation and
 * refusal; 6: the refusal of the order adopted (a node of 5 would drop
 * it and keep its plan alone); 7: a claim's rank stride (ranks dealt
 * round robin) */
#define CFS_PEER_PROTOCOL 7

/* The helpers (cfs_peer_agreement_from_config, _compare, cfs_peer_config_hash)
 * are declared with the rest of the API below. */

/* --- Serving: the provider gives a pinned view of a held file. --- */

struct cfs_peer_view {
    const void *data; /* RAM: the bytes; NULL when fd is used */
    int fd;           /* SSD: file to pread from at offset (ignored when data is set) */
    uint64_t offset;
    uint64_t len;
    uint64_t xxh3;    /* xxh3-64 of the bytes (the cache keeps it per entry) */
    bool has_xxh3;    /* false: the server computes it */
    /* Called once the bytes are no longer needed (send completed, or read
     * into the bounce buffer); may be NULL. */
    void (*release)(void *arg, struct cfs_peer_view *v);
    void *release_arg;
    void *priv;       /* for the provider, e.g. a struct cfs_cache_handle * */
};

/* Runs on the communication thread: 0 with *v filled (pinned), -ENOENT
 * when the file is not held here (the requester falls back to the PFS), or
 * -EAGAIN when it is being fetched here (asked again until it is 0 or
 * -ENOENT, or the reply's wait ends).  Must not block. */
typedef int (*cfs_peer_provide_fn)(void *arg, uint32_t id, struct cfs_peer_view *v);

/* Runs on the communication thread: a note (cfs_peer_note) from node src.
 * Must not block. */
typedef void (*cfs_peer_note_fn)(void *arg, uint32_t src, const void *msg, size_t len);

struct cfs_peer_params {
    cfs_peer_provide_fn provide; /* NULL: this node holds nothing */
    void *provide_arg;
    cfs_peer_note_fn on_note;    /* NULL: notes are dropped */
    void *note_arg;
    double timeout;              /* seconds, the peer_timeout option; <= 0: 2 */
    double backoff;              /* seconds a slow peer is first refused; <= 0: timeout */
};

/* --- Fetching: requests in the io.h style. --- */

struct cfs_peer_req;
typedef void (*cfs_peer_done_fn)(struct cfs_peer_req *req);

struct cfs_peer_req {
    /* Filled in by the caller; untouched by the module. */
    uint32_t node;      /* rank to ask */
    uint32_t id;        /* file id (catalog id) */
    void *buf;
    size_t cap;
    uint64_t size_hint; /* expected length, or CFS_PEER_SIZE_UNKNOWN; a reply
                           of another length fails with -EIO */
    cfs_peer_done_fn done;
    void *arg;

    /* Valid in done(): bytes received, or -errno: -ENOENT (not held there),
     * -EFBIG (longer than cap), -EIO (checksum or length mismatch),
     * -ETIMEDOUT (the peer did not answer in time), -EHOSTDOWN (the peer
     * left), -ECANCELED (we are leaving).  After done() returns the module
     * does not touch the request again. */
    int64_t res;

    /* Module-private. */
    struct cfs_peer_req *next_;
    uint32_t tag_;
};

struct cfs_peer;

enum cfs_peer_state {
    CFS_PEER_UP = 0,
    CFS_PEER_SLOW, /* timed out; requests refused until it answers or the back-off ends */
    CFS_PEER_GONE, /* said goodbye */
    CFS_PEER_SELF,
};

struct cfs_peer_stats {
    uint64_t fetched, fetched_bytes;  /* successful client requests */
    uint64_t served, served_bytes;    /* files sent to other nodes */
    uint64_t notheld, timeouts, checksum_failures, batches_sent, ssd_bounces;
};


/* --- The prefetcher's view of its peers. ---
 *
 * The data path reaches the peers only through this table (as the io engine
 * has its back ends and the stager its kernel ops), so that it needs no MPI
 * and can be tested against a fake (tests/unit/fake_peer.h).  peer is the
 * implementation's handle.  node/nodes: this node's index and the number of
 * nodes, fixed for the run.  submit: as cfs_peer_submit (0: done() runs
 * exactly once, on a thread of the implementation that holds none of its
 * locks; else -errno and done() is never called).  node_state: as
 * cfs_peer_node_state. */
struct cfs_peer_ops {
    uint32_t (*node)(const void *peer);
    uint32_t (*nodes)(const void *peer);
    int (*submit)(void *peer, struct cfs_peer_req *req);
    enum cfs_peer_state (*node_state)(const void *peer, uint32_t node);
};

/* One node: node 0 of 1, itself CFS_PEER_SELF, every other node
 * CFS_PEER_GONE, submit -ESHUTDOWN.  What a mount without peers uses (not
 * launched by mpirun, or built without MPI). */
extern const struct cfs_peer_ops cfs_peer_single_ops;
/* The ops for a handle from cfs_peer_init: the MPI transport's, or
 * cfs_peer_single_ops for NULL (one node, or no MPI in this build). */
const struct cfs_peer_ops *cfs_peer_ops_of(const struct cfs_peer *p);

/* --- The node's handle.  Built without MPI, cfs_peer_init fails under
 * mpirun (-ENOTSUP) and gives NULL otherwise; the functions below then
 * behave as for NULL (src/peer_single.c). --- */

/* The agreement of a run configuration and a catalog (pure, no MPI): what
 * every node must share for the global plan to be the same everywhere. */
void cfs_peer_agreement_from_config(struct cfs_peer_agreement *out,
                                    const struct cfs_run_config *c, uint64_t catalog_hash);
/* xxh3-64 of the plan-relevant configuration (the agreement without the
 * catalog and without no_peers, which the agreement compares but which says
 * how a node fetches, not what a plan is made from). */
uint64_t cfs_peer_config_hash(const struct cfs_run_config *c);
/* Compare the agreements of n ranks (all[r] is rank r's): 0 when equal,
 * else -EINVAL with every differing setting in err ("seed differs: rank 0
 * has 42, rank 1 has 43; ..."; ranks of one value as "0,2,3" or "1-3,5"). */
int cfs_peer_agreement_compare(const struct cfs_peer_agreement *all, int n, char *err,
                               size_t errlen);

/* Not launched: *out = NULL, 0 (single node).  Launched: MPI initialised;
 * -ENOTSUP when MPI_THREAD_MULTIPLE is not provided, -EIO on MPI errors, with
 * a one-line message in err. */
int cfs_peer_init(int *argc, char ***argv, struct cfs_peer **out, char *err, size_t errlen);
int cfs_peer_rank(const struct cfs_peer *p); /* NULL: 0 */
int cfs_peer_size(const struct cfs_peer *p); /* NULL: 1 */
/* One MPI_Allgather; 0 or -EINVAL (disagreement, message in err), -EIO.
 * Collective: every node must call it.  NULL: 0. */
int cfs_peer_agree(struct cfs_peer *p, const struct cfs_peer_agreement *mine, char *err,
                   size_t errlen);
/* One MPI_Allgather of len bytes per node into all (size * len bytes, rank
 * order): how the daemon shares per-node facts (start-up status, trainer
 * ranks) before the agreement.  Collective, before cfs_peer_start().  NULL:
 * copies mine.  0 or -EIO with a message in err. */
int cfs_peer_allgather(struct cfs_peer *p, const void *mine, size_t len, void *all, char *err,
                       size_t errlen);
/* Start the communication thread (serving and fetching).  -EALREADY. */
int cfs_peer_start(struct cfs_peer *p, const struct cfs_peer_params *params, char *err,
                   size_t errlen);
/* Queue a request.  0: done() will be called exactly once.  Otherwise
 * done() is not called: -EINVAL (bad node, self, no buffer), -ETIMEDOUT
 * (peer marked slow: use the PFS), -EHOSTDOWN (peer left), -ESHUTDOWN
 * (leaving, or not started). */
int cfs_peer_submit(struct cfs_peer *p, struct cfs_peer_req *req);
enum cfs_peer_state cfs_peer_node_state(const struct cfs_peer *p, uint32_t node);
/* Notes: small messages the nodes exchange after start-up (the order
 * agreement's claims, clairfs/order_agree.h), sent by the communication
 * thread in order with the other control messages to dest and handed to
 * dest's on_note there.  The bytes are copied: 0 (queued; a note to a node
 * that left or does not answer is lost, never waited for), -EINVAL (bad
 * node, self, or more than CFS_PEER_NOTE_MAX bytes), -ENOMEM, -ESHUTDOWN
 * (leaving, not started, or one node). */
#define CFS_PEER_NOTE_MAX 1024
int cfs_peer_note(struct cfs_peer *p, uint32_t dest, const void *msg, size_t len);
void cfs_peer_get_stats(struct cfs_peer *p, struct cfs_peer_stats *out);
/* Leave the peer group (see Leaving above) and stop the thread: every
 * callback has run when it returns.  Idempotent; the provider is not called
 * after it.  No collective.  Not from a callback (it joins the thread). */
void cfs_peer_leave(struct cfs_peer *p);
/* Leave if needed, MPI_Finalize (waits for the other nodes, see above),
 * free.  Accepts NULL. */
void cfs_peer_destroy(struct cfs_peer *p);


#endif
