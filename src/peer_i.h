/* Private to the peer module over MPI: the node context its files share, the
 * wire format, and the calls from one of its files into another.  The
 * design is at the top of include/clairfs/peer.h.
 *
 * Layers.  Each file calls only files listed before it here, never one
 * after it: no circle, so a file reads knowing only what is below it, and a
 * change reaches only what is above.  Below them all, in the library every
 * build has (cfs-peer-base, no MPI): peer_single.c (one node, its ops
 * table) and peer_agree.c (the agreement's values and comparison).  Then
 * the MPI library (cfs-peer), bottom up:
 *   peer_slots.c    the slot table of posted MPI requests, and
 *                   peer_send_ctrl, which both sides send with;
 *   peer_serve.c    the serving side: one requested file pinned, read
 *                   (SSD) and its data send posted;
 *   peer_defer.c    REPLYs held back for files this node is fetching,
 *                   asking the provider again through peer_serve_one;
 *   peer_proto.c    the communication thread: the client side, the
 *                   control messages in, completions, timeouts, leaving;
 *   peer.c          init, the agreement collective, the client API, the
 *                   ops table, start and lifecycle (it starts the thread);
 *   peer_startup.c  the start-up meetings, through peer.c's public API.
 * To check it: for the objects of build/libcfs-peer.a.p, the pairs "user
 * definer" (a symbol one uses, from nm -u, that the other defines, from
 * nm -g --defined-only) through tsort: no "input contains a loop", and
 * every pair goes down this list. */
#ifndef CLAIRFS_PEER_I_H
#define CLAIRFS_PEER_I_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "clairfs/peer.h"

/* Control messages: one tag, so that they stay ordered between two nodes. */
#define PEER_TAG_CTRL 1
#define PEER_TAG_DATA0 16 /* data tags cycle through [DATA0, tag_max) */

enum peer_msg_type {
    PEER_MSG_REQ = 1,
    PEER_MSG_REPLY,
    PEER_MSG_GOODBYE,
    PEER_MSG_GOODBYE_ACK,
    PEER_MSG_NOTE, /* count: the bytes that follow, for params.on_note */
    PEER_MSG_NTYPES,
};

struct peer_msg_hdr {
    uint32_t type;
    uint32_t count; /* entries that follow */
    uint64_t batch; /* REQ/REPLY: the requester's batch id */
};
struct peer_req_ent {
    uint32_t id;
    uint32_t tag;  /* data tag the requester posted a receive for */
    uint64_t cap;  /* size of that receive */
};
struct peer_rep_ent {
    uint32_t tag;
    int32_t status; /* 0 (data follows) or -errno */
    uint64_t len;
    uint64_t xxh3;
};
#define PEER_CTRL_MAX                                                                              \
    (sizeof(struct peer_msg_hdr) + CFS_PEER_BATCH * sizeof(struct peer_rep_ent))

struct peer_batch;

/* One requested file of a batch.  The receive buffer (bounce) belongs to the
 * xfer, the caller's request only until it completes. */
struct peer_xfer {
    struct peer_batch *b;
    struct cfs_peer_req *user; /* NULL once completed */
    void *bounce;
    uint64_t posted;
    int slot;                  /* slot of the posted receive, -1 when none */
    bool recv_done;
    int64_t recv_len;
    bool reply_known;
    int32_t status;
    uint64_t len, xxh3;
};

struct peer_batch {
    struct peer_batch *next;
    uint64_t id;
    uint32_t dest;
    uint64_t sent_ns;
    uint32_t n;
    uint32_t pending_user; /* requests not completed yet */
    uint32_t active_recvs; /* posted receives not finished */
    bool replied;
    struct peer_xfer x[];
};

/* Per other node; everything but `state` is the communication thread's. */
struct peer_node {
    _Atomic int state; /* enum cfs_peer_state; read by submitters */
    uint64_t slow_until_ns;
    uint64_t heard_ns; /* last message or data from it */
    uint64_t backoff_ns;
    struct cfs_peer_req *qhead, *qtail; /* accepted, not yet in a batch */
    struct peer_batch *batches;         /* sent, not yet freed */
    uint32_t live_batches;              /* with requests still pending */
    bool awaiting_ack;
};

enum peer_slot_kind {
    PEER_SLOT_FREE = 0,
    PEER_SLOT_DATA_RECV,
    PEER_SLOT_DATA_SEND,
    PEER_SLOT_CTRL_SEND,
    PEER_SLOT_NKINDS,
};

/* A file being sent: the pinned view (RAM) or the bounce buffer (SSD). */
struct peer_send {
    struct cfs_peer_view view;
    bool pinned;
    void *bounce;
};

/* A REPLY held back until files in flight at this node are published
 * (peer_defer.c): r[i].status is -EAGAIN for those still awaited. */
struct peer_pending {
    struct peer_pending *next;
    int src;
    uint64_t deadline_ns;
    struct peer_msg_hdr *rh; /* the REPLY, its entries after it */
    size_t rlen;
    struct peer_req_ent q[]; /* the request's entries, rh->count of them */
};

/* A note queued for the communication thread: the message as sent. */
struct peer_note {
    struct peer_note *next;
    uint32_t dest;
    size_t len;
    struct peer_msg_hdr *msg;
};

struct cfs_peer {
    MPI_Comm comm;
    int rank, size;
    uint32_t tag_max;
    struct cfs_peer_params params;
    uint64_t timeout_ns, backoff_ns;

    pthread_t thread;
    bool started;
    /* Submissions and the leave request, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct cfs_peer_req *sub_head, *sub_tail;
    struct peer_note *note_head, *note_tail;
    bool leave_req, closed, sleeping, left;

    struct peer_node *nodes;

    /* Communication thread only. */
    MPI_Request *mreq; /* parallel arrays: MPI requests and their owners */
    enum peer_slot_kind *kind;
    void **obj;
    int *free_slots;
    int nslots, nfree, used;
    /* Of the used slots, the data receives of batches whose REPLY has not
     * come: nothing moves for them until the owner answers, which may take
     * a PFS fetch (peer_defer.c), so they do not keep the thread polling. */
    int awaiting;
    int *done_idx;
    MPI_Status *done_st;
    MPI_Request ctrl_req;
    unsigned char ctrl_buf[PEER_CTRL_MAX];
    uint64_t next_batch;
    uint32_t next_tag;
    bool leaving;
    uint64_t leave_deadline_ns;
    struct peer_pending *pending; /* replies held back, oldest first */

    struct {
        _Atomic uint64_t fetched, fetched_bytes, served, served_bytes, notheld, timeouts,
            checksum_failures, batches_sent, ssd_bounces;
    } st;
};

/* peer_slots.c: a free slot for a request about to be posted (or -ENOMEM),
 * its owner once posted, the slot back once completed or not posted; the
 * table freed at teardown.  peer_send_ctrl takes msg (freed on failure). */
int peer_slot_get(struct cfs_peer *p);
void peer_slot_set(struct cfs_peer *p, int s, enum peer_slot_kind k, void *obj);
void peer_slot_put(struct cfs_peer *p, int s);
void peer_slots_free(struct cfs_peer *p);
int peer_send_ctrl(struct cfs_peer *p, int dest, void *msg, size_t len);

/* peer_serve.c: one requested file, its data send posted and r filled
 * (r->status -EAGAIN: in flight here, the REPLY waits); a data send's pin
 * and buffers released once it completed. */
void peer_serve_one(struct cfs_peer *p, int src, const struct peer_req_ent *q,
                    struct peer_rep_ent *r);
void peer_send_release(struct peer_send *s);

/* peer_defer.c: hold a REPLY whose entries include -EAGAIN ones; retry them
 * (returns the replies sent); flush (every node's when src < 0) answering
 * the awaited ones "not held"; free everything at teardown. */
void peer_defer_reply(struct cfs_peer *p, int src, const struct peer_req_ent *q,
                      struct peer_msg_hdr *rh, size_t rlen, uint64_t now);
int peer_defer_poll(struct cfs_peer *p, uint64_t now);
void peer_defer_flush(struct cfs_peer *p, int src);
void peer_defer_free(struct cfs_peer *p);

/* peer_proto.c: the communication thread (peer.c starts it). */
void *cfs_peer_comm_main(void *arg);

/* The monotonic clock in ns, the one time base of the protocol's timeouts
 * and deferrals.  Inline here rather than in peer.c, which would make
 * peer_proto.c call back up into the file that starts it. */
static inline uint64_t cfs_peer_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
