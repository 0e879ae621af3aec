/* The communication thread: owns every MPI call after start-up.  One loop
 * takes new requests, sends batches, answers control messages, tests the
 * table of outstanding MPI requests and checks deadlines (protocol in
 * include/clairfs/peer.h).  Here the client side and the dispatch; what it
 * dispatches to on the serving side is below it: one file served
 * (peer_serve.c), replies held back (peer_defer.c), the table of requests
 * and the control sends (peer_slots.c). */
#include "peer_i.h"

#include <stdio.h>
#include <sys/prctl.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "clairfs/log.h"

#define IDLE_MIN_NS 10000u
#define IDLE_MAX_NS 200000u
#define IDLE_BUSY_MAX_NS 20000u /* with transfers in flight */
/* Only replies awaited (or held back for a peer): they come after a PFS
 * fetch, tens of ms, so the sleeps grow to 1 ms (an answer within the
 * first microseconds is still seen at once: they start at IDLE_MIN_NS).
 * 20 us sleeps there kept a core busy through the first epoch. */
#define IDLE_AWAIT_MAX_NS 1000000u
/* Nothing done for DEEP_IDLE_AFTER_NS: the sleeps grow on to
 * IDLE_DEEP_MAX_NS.  Each wake-up costs some 20 us of CPU (a timed wait, an
 * Open MPI progress pass), so 200 us sleeps alone kept an unread node at 10 %
 * of a core; 5 ms ones cost well under 1 %.  A busy exchange never gets
 * there, and a local client wakes the thread at once: only the first request
 * from a peer after a quiet spell waits, at most IDLE_DEEP_MAX_NS. */
#define DEEP_IDLE_AFTER_NS 200000000u
#define IDLE_DEEP_MAX_NS 5000000u
#define BURST_NS 100000u        /* polling without sleep, transfers in flight */
#define BACKOFF_MAX_FACTOR 8

/* b's REPLY came, or none will: its receives still posted now await data. */
static void batch_set_replied(struct cfs_peer *p, struct peer_batch *b)
{
    if (b->replied)
        return;
    b->replied = true;
    p->awaiting -= (int)b->active_recvs;
}

/* --- Control messages out. --- */

static int send_simple(struct cfs_peer *p, int dest, enum peer_msg_type type)
{
    struct peer_msg_hdr *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->type = type;
    return peer_send_ctrl(p, dest, h, sizeof(*h));
}

/* --- Client side. --- */

static void complete_user(struct cfs_peer *p, struct peer_xfer *x, int64_t res)
{
    struct cfs_peer_req *u = x->user;
    if (!u)
        return;
    x->user = NULL;
    struct peer_batch *b = x->b;
    if (--b->pending_user == 0)
        p->nodes[b->dest].live_batches--;
    if (res >= 0) {
        atomic_fetch_add_explicit(&p->st.fetched, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->st.fetched_bytes, (uint64_t)res, memory_order_relaxed);
    } else if (res == -ETIMEDOUT) {
        atomic_fetch_add_explicit(&p->st.timeouts, 1, memory_order_relaxed);
    }
    u->res = res;
    u->done(u);
}

static void fail_queue(struct cfs_peer *p, struct peer_node *nd, int64_t res)
{
    struct cfs_peer_req *r = nd->qhead;
    nd->qhead = nd->qtail = NULL;
    while (r) {
        struct cfs_peer_req *next = r->next_;
        if (res == -ETIMEDOUT)
            atomic_fetch_add_explicit(&p->st.timeouts, 1, memory_order_relaxed);
        r->res = res;
        r->done(r);
        r = next;
    }
}

static void batch_maybe_free(struct cfs_peer *p, struct peer_batch *b)
{
    if (b->pending_user || b->active_recvs || !b->replied)
        return;
    struct peer_node *nd = &p->nodes[b->dest];
    for (struct peer_batch **pp = &nd->batches; *pp; pp = &(*pp)->next) {
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    }
    for (uint32_t i = 0; i < b->n; i++)
        free(b->x[i].bounce);
    free(b);
}

/* Reply and data both here: check and hand the bytes to the caller. */
static void finish_xfer(struct cfs_peer *p, struct peer_xfer *x)
{
    if (x->user) {
        struct cfs_peer_req *u = x->user;
        int64_t res;
        if (x->recv_len != (int64_t)x->len ||
            (u->size_hint != CFS_PEER_SIZE_UNKNOWN && x->len != u->size_hint)) {
            res = -EIO;
        } else if (x->len > u->cap) {
            res = -EFBIG;
        } else if (XXH3_64bits(x->bounce, x->len) != x->xxh3) {
            atomic_fetch_add_explicit(&p->st.checksum_failures, 1, memory_order_relaxed);
            res = -EIO;
        } else {
            if (x->len)
                memcpy(u->buf, x->bounce, x->len);
            res = (int64_t)x->len;
        }
        complete_user(p, x, res);
    }
    free(x->bounce);
    x->bounce = NULL;
}

static uint32_t next_tag(struct cfs_peer *p)
{
    /* Wrapping reuses a tag only after ~2^31 requests: a receive orphaned
     * that long ago has been cancelled at the latest when its reply came. */
    uint32_t t = p->next_tag++;
    if (p->next_tag >= p->tag_max || p->next_tag >= (1u << 30))
        p->next_tag = PEER_TAG_DATA0;
    return t;
}

/* Up to CFS_PEER_BATCH queued requests of one node into one REQ. */
static int send_batch(struct cfs_peer *p, uint32_t dest, uint64_t now)
{
    struct peer_node *nd = &p->nodes[dest];
    uint32_t n = 0;
    for (struct cfs_peer_req *r = nd->qhead; r && n < CFS_PEER_BATCH; r = r->next_)
        n++;
    struct peer_batch *b = calloc(1, sizeof(*b) + n * sizeof(struct peer_xfer));
    size_t mlen = sizeof(struct peer_msg_hdr) + n * sizeof(struct peer_req_ent);
    struct peer_msg_hdr *h = calloc(1, mlen);
    if (!b || !h) {
        free(b);
        free(h);
        return -ENOMEM;
    }
    b->id = p->next_batch++;
    b->dest = dest;
    b->n = n;
    h->type = PEER_MSG_REQ;
    h->count = n;
    h->batch = b->id;
    struct peer_req_ent *ent = (struct peer_req_ent *)(h + 1);

    uint32_t posted = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct cfs_peer_req *u = nd->qhead;
        nd->qhead = u->next_;
        if (!nd->qhead)
            nd->qtail = NULL;
        struct peer_xfer *x = &b->x[i];
        x->b = b;
        x->user = u;
        x->slot = -1;
        x->posted = u->cap;
        if (u->size_hint != CFS_PEER_SIZE_UNKNOWN && u->size_hint < u->cap)
            x->posted = u->size_hint;
        if (x->posted > INT32_MAX)
            x->posted = INT32_MAX;
        u->tag_ = next_tag(p);
        ent[i].id = u->id;
        ent[i].tag = u->tag_;
        ent[i].cap = x->posted;
        b->pending_user++;
        x->bounce = malloc(x->posted ? x->posted : 1);
        int s = x->bounce ? peer_slot_get(p) : -ENOMEM;
        if (s >= 0 && MPI_Irecv(x->bounce, (int)x->posted, MPI_BYTE, (int)dest, (int)u->tag_,
                                p->comm, &p->mreq[s]) != MPI_SUCCESS) {
            peer_slot_put(p, s);
            s = -EIO;
        }
        if (s < 0) {
            ent[i].cap = UINT64_MAX; /* tells the server not to send */
            x->reply_known = true;
            x->status = s;
            continue;
        }
        peer_slot_set(p, s, PEER_SLOT_DATA_RECV, x);
        x->slot = s;
        b->active_recvs++;
        p->awaiting++;
        posted++;
    }
    b->sent_ns = now;
    b->next = nd->batches;
    nd->batches = b;
    nd->live_batches++;
    atomic_fetch_add_explicit(&p->st.batches_sent, 1, memory_order_relaxed);
    /* Failures to post are completed after the batch is in place. */
    for (uint32_t i = 0; i < n; i++)
        if (b->x[i].slot < 0)
            complete_user(p, &b->x[i], b->x[i].status);
    if (peer_send_ctrl(p, (int)dest, h, mlen) < 0) {
        for (uint32_t i = 0; i < n; i++)
            complete_user(p, &b->x[i], -EIO);
        for (uint32_t i = 0; i < n; i++)
            if (b->x[i].slot >= 0)
                MPI_Cancel(&p->mreq[b->x[i].slot]);
        batch_set_replied(p, b); /* no reply will come */
        batch_maybe_free(p, b);
    }
    (void)posted;
    return 0;
}

static int flush_batches(struct cfs_peer *p, uint64_t now)
{
    int work = 0;
    for (int d = 0; d < p->size; d++) {
        struct peer_node *nd = &p->nodes[d];
        while (nd->qhead && nd->live_batches < CFS_PEER_WINDOW) {
            if (send_batch(p, (uint32_t)d, now) < 0) {
                fail_queue(p, nd, -ENOMEM);
                break;
            }
            work++;
        }
    }
    return work;
}

static void accept_request(struct cfs_peer *p, struct cfs_peer_req *r)
{
    struct peer_node *nd = &p->nodes[r->node];
    int64_t res = 0;
    if (p->leaving)
        res = -ECANCELED;
    else if (atomic_load(&nd->state) == CFS_PEER_SLOW)
        res = -ETIMEDOUT;
    else if (atomic_load(&nd->state) == CFS_PEER_GONE)
        res = -EHOSTDOWN;
    if (res) {
        if (res == -ETIMEDOUT)
            atomic_fetch_add_explicit(&p->st.timeouts, 1, memory_order_relaxed);
        r->res = res;
        r->done(r);
        return;
    }
    r->next_ = NULL;
    if (nd->qtail)
        nd->qtail->next_ = r;
    else
        nd->qhead = r;
    nd->qtail = r;
}

/* Fail every pending request of node d with res (timeout, or we leave). */
static void fail_node_requests(struct cfs_peer *p, uint32_t d, int64_t res)
{
    struct peer_node *nd = &p->nodes[d];
    fail_queue(p, nd, res);
    /* complete_user may make a batch freeable, but batch_maybe_free is only
     * called once we are done walking the list. */
    for (struct peer_batch *b = nd->batches; b; b = b->next)
        for (uint32_t i = 0; i < b->n && b->pending_user; i++)
            complete_user(p, &b->x[i], res);
    for (struct peer_batch *b = nd->batches, *next; b; b = next) {
        next = b->next;
        batch_maybe_free(p, b);
    }
}

static void mark_slow(struct cfs_peer *p, uint32_t d, uint64_t now)
{
    struct peer_node *nd = &p->nodes[d];
    if (atomic_load(&nd->state) == CFS_PEER_UP)
        cfs_warn("peers: rank %u did not answer within %.3g s: marked slow, its files come "
                 "from the PFS for %.3g s",
                 d, p->params.timeout, (double)nd->backoff_ns / 1e9);
    atomic_store(&nd->state, CFS_PEER_SLOW);
    nd->slow_until_ns = now + nd->backoff_ns;
    if (nd->backoff_ns < BACKOFF_MAX_FACTOR * p->backoff_ns)
        nd->backoff_ns *= 2;
    fail_node_requests(p, d, -ETIMEDOUT);
}

static void check_timeouts(struct cfs_peer *p, uint64_t now)
{
    for (int d = 0; d < p->size; d++) {
        struct peer_node *nd = &p->nodes[d];
        int st = atomic_load(&nd->state);
        if (st == CFS_PEER_SLOW && now >= nd->slow_until_ns) {
            /* Try again; another timeout doubles the back-off. */
            atomic_store(&nd->state, CFS_PEER_UP);
            continue;
        }
        if (st != CFS_PEER_UP && st != CFS_PEER_GONE)
            continue;
        /* Silent since the oldest unanswered batch went out, or since it
         * last sent us anything: a peer that is busy answering a long queue
         * of batches is not slow. */
        uint64_t since = UINT64_MAX;
        for (struct peer_batch *b = nd->batches; b; b = b->next)
            if (b->pending_user && b->sent_ns < since)
                since = b->sent_ns;
        if (since == UINT64_MAX)
            continue;
        if (nd->heard_ns > since)
            since = nd->heard_ns;
        if (now - since < p->timeout_ns)
            continue;
        if (st == CFS_PEER_GONE)
            fail_node_requests(p, (uint32_t)d, -ETIMEDOUT);
        else
            mark_slow(p, (uint32_t)d, now);
    }
}

/* --- Control messages in: one handler per type. --- */

typedef void (*peer_handler)(struct cfs_peer *p, int src, const struct peer_msg_hdr *h,
                             size_t len);

static void on_req(struct cfs_peer *p, int src, const struct peer_msg_hdr *h, size_t len)
{
    uint32_t n = h->count;
    if (n > CFS_PEER_BATCH || len < sizeof(*h) + n * sizeof(struct peer_req_ent))
        return;
    size_t rlen = sizeof(*h) + n * sizeof(struct peer_rep_ent);
    struct peer_msg_hdr *rh = calloc(1, rlen);
    if (!rh)
        return; /* the requester times out */
    rh->type = PEER_MSG_REPLY;
    rh->count = n;
    rh->batch = h->batch;
    const struct peer_req_ent *q = (const struct peer_req_ent *)(h + 1);
    struct peer_rep_ent *r = (struct peer_rep_ent *)(rh + 1);
    bool awaited = false;
    for (uint32_t i = 0; i < n; i++) {
        peer_serve_one(p, src, &q[i], &r[i]);
        awaited |= r[i].status == -EAGAIN;
    }
    if (awaited)
        peer_defer_reply(p, src, q, rh, rlen, cfs_peer_now_ns());
    else
        peer_send_ctrl(p, src, rh, rlen);
}

static void on_reply(struct cfs_peer *p, int src, const struct peer_msg_hdr *h, size_t len)
{
    struct peer_batch *b = p->nodes[src].batches;
    while (b && b->id != h->batch)
        b = b->next;
    if (!b || b->replied || h->count != b->n ||
        len < sizeof(*h) + b->n * sizeof(struct peer_rep_ent))
        return;
    const struct peer_rep_ent *r = (const struct peer_rep_ent *)(h + 1);
    batch_set_replied(p, b);
    for (uint32_t i = 0; i < b->n; i++) {
        struct peer_xfer *x = &b->x[i];
        if (x->reply_known)
            continue; /* failed locally, nothing was asked */
        x->reply_known = true;
        x->status = r[i].status;
        x->len = r[i].len;
        x->xxh3 = r[i].xxh3;
        if (x->status < 0) {
            /* No data will come: withdraw the receive (its completion,
             * cancelled, frees the slot). */
            if (x->slot >= 0)
                MPI_Cancel(&p->mreq[x->slot]);
            complete_user(p, x, x->status);
        } else if (x->recv_done) {
            finish_xfer(p, x);
        }
    }
    batch_maybe_free(p, b);
}

static void on_goodbye(struct cfs_peer *p, int src, const struct peer_msg_hdr *h, size_t len)
{
    (void)h;
    (void)len;
    struct peer_node *nd = &p->nodes[src];
    atomic_store(&nd->state, CFS_PEER_GONE);
    /* Requests already sent will be answered (it serves until acked);
     * those not yet sent never will be. */
    fail_queue(p, nd, -EHOSTDOWN);
    peer_defer_flush(p, src); /* our replies to it come before the ack */
    send_simple(p, src, PEER_MSG_GOODBYE_ACK);
    cfs_info("peers: rank %d left", src);
}

static void on_goodbye_ack(struct cfs_peer *p, int src, const struct peer_msg_hdr *h, size_t len)
{
    (void)h;
    (void)len;
    p->nodes[src].awaiting_ack = false;
}

static void on_note(struct cfs_peer *p, int src, const struct peer_msg_hdr *h, size_t len)
{
    if (h->count > CFS_PEER_NOTE_MAX || len < sizeof(*h) + h->count || !p->params.on_note)
        return;
    p->params.on_note(p->params.note_arg, (uint32_t)src, h + 1, h->count);
}

_Static_assert(sizeof(struct peer_msg_hdr) + CFS_PEER_NOTE_MAX <= PEER_CTRL_MAX,
               "a note fits the control receive");

/* The notes queued by cfs_peer_note, sent (to a node still present). */
static int send_notes(struct cfs_peer *p, struct peer_note *n)
{
    int work = 0;
    while (n) {
        struct peer_note *next = n->next;
        if (atomic_load(&p->nodes[n->dest].state) != CFS_PEER_GONE && !p->leaving)
            peer_send_ctrl(p, (int)n->dest, n->msg, n->len); /* takes the message */
        else
            free(n->msg);
        free(n);
        n = next;
        work++;
    }
    return work;
}

static const peer_handler peer_handlers[PEER_MSG_NTYPES] = {
    [PEER_MSG_REQ] = on_req,         [PEER_MSG_REPLY] = on_reply,
    [PEER_MSG_GOODBYE] = on_goodbye, [PEER_MSG_GOODBYE_ACK] = on_goodbye_ack,
    [PEER_MSG_NOTE] = on_note,
};

static int poll_ctrl(struct cfs_peer *p)
{
    int work = 0;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Test(&p->ctrl_req, &flag, &st) != MPI_SUCCESS || !flag)
            break;
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        int src = st.MPI_SOURCE;
        if (count >= (int)sizeof(struct peer_msg_hdr) && src >= 0 && src < p->size) {
            const struct peer_msg_hdr *h = (const struct peer_msg_hdr *)p->ctrl_buf;
            struct peer_node *nd = &p->nodes[src];
            nd->heard_ns = cfs_peer_now_ns();
            if (atomic_load(&nd->state) == CFS_PEER_SLOW) {
                cfs_info("peers: rank %d answers again", src);
                atomic_store(&nd->state, CFS_PEER_UP);
            }
            if (atomic_load(&nd->state) == CFS_PEER_UP)
                nd->backoff_ns = p->backoff_ns;
            if (h->type < PEER_MSG_NTYPES && peer_handlers[h->type])
                peer_handlers[h->type](p, src, h, (size_t)count);
        }
        work++;
        if (MPI_Irecv(p->ctrl_buf, (int)sizeof(p->ctrl_buf), MPI_BYTE, MPI_ANY_SOURCE,
                      PEER_TAG_CTRL, p->comm, &p->ctrl_req) != MPI_SUCCESS) {
            cfs_err("peers: cannot post the control receive; peers disabled");
            p->ctrl_req = MPI_REQUEST_NULL;
            break;
        }
    }
    return work;
}

/* --- Completions of the slot table: one handler per kind. --- */

typedef void (*slot_handler)(struct cfs_peer *p, void *obj, MPI_Status *st);

static void done_data_recv(struct cfs_peer *p, void *obj, MPI_Status *st)
{
    struct peer_xfer *x = obj;
    struct peer_batch *b = x->b;
    int cancelled = 0;
    MPI_Test_cancelled(st, &cancelled);
    x->slot = -1;
    b->active_recvs--;
    if (!b->replied)
        p->awaiting--; /* the data came first, or the receive was withdrawn */
    if (cancelled || st->MPI_ERROR != MPI_SUCCESS) {
        /* Cancelled after a non-OK reply (already completed), at leave, or
         * a truncated/failed receive. */
        if (!cancelled && x->reply_known && x->status == 0)
            complete_user(p, x, -EIO);
        free(x->bounce);
        x->bounce = NULL;
    } else {
        int count = 0;
        MPI_Get_count(st, MPI_BYTE, &count);
        x->recv_done = true;
        x->recv_len = count;
        p->nodes[b->dest].heard_ns = cfs_peer_now_ns();
        if (x->reply_known && x->status == 0)
            finish_xfer(p, x);
        else if (!x->user) {
            free(x->bounce); /* orphaned: timed out, or we are leaving */
            x->bounce = NULL;
        }
    }
    batch_maybe_free(p, b);
}

static void done_data_send(struct cfs_peer *p, void *obj, MPI_Status *st)
{
    (void)p;
    (void)st;
    peer_send_release(obj);
}

static void done_ctrl_send(struct cfs_peer *p, void *obj, MPI_Status *st)
{
    (void)p;
    (void)st;
    free(obj);
}

static const slot_handler slot_handlers[PEER_SLOT_NKINDS] = {
    [PEER_SLOT_DATA_RECV] = done_data_recv,
    [PEER_SLOT_DATA_SEND] = done_data_send,
    [PEER_SLOT_CTRL_SEND] = done_ctrl_send,
};

static int poll_slots(struct cfs_peer *p)
{
    if (!p->used)
        return 0;
    int outcount = 0;
    /* MPI_Testsome fills statuses even under MPI_ERRORS_RETURN when one
     * request failed (MPI_ERR_IN_STATUS); each status carries its error. */
    int rc = MPI_Testsome(p->nslots, p->mreq, &outcount, p->done_idx, p->done_st);
    if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || outcount == MPI_UNDEFINED)
        return 0;
    for (int i = 0; i < outcount; i++) {
        int s = p->done_idx[i];
        enum peer_slot_kind k = p->kind[s];
        void *obj = p->obj[s];
        if (rc == MPI_SUCCESS)
            p->done_st[i].MPI_ERROR = MPI_SUCCESS;
        peer_slot_put(p, s);
        p->used--;
        if (k < PEER_SLOT_NKINDS && slot_handlers[k])
            slot_handlers[k](p, obj, &p->done_st[i]);
    }
    return outcount;
}

/* --- Leaving. --- */

static void begin_leaving(struct cfs_peer *p, uint64_t now)
{
    p->leaving = true;
    peer_defer_flush(p, -1);
    uint64_t wait = 2 * p->timeout_ns;
    if (wait < 1000000000u)
        wait = 1000000000u;
    p->leave_deadline_ns = now + wait;
    for (int d = 0; d < p->size; d++) {
        if (d == p->rank)
            continue;
        fail_node_requests(p, (uint32_t)d, -ECANCELED);
        if (atomic_load(&p->nodes[d].state) != CFS_PEER_GONE &&
            send_simple(p, d, PEER_MSG_GOODBYE) == 0)
            p->nodes[d].awaiting_ack = true;
    }
}

static bool leave_finished(struct cfs_peer *p, uint64_t now)
{
    bool acked = true;
    for (int d = 0; d < p->size; d++)
        acked &= !p->nodes[d].awaiting_ack;
    if (acked && !p->used)
        return true;
    if (now < p->leave_deadline_ns)
        return false;
    int missing = 0;
    for (int d = 0; d < p->size; d++)
        missing += p->nodes[d].awaiting_ack;
    cfs_warn("peers: leaving without the answer of %d node(s) (%d transfers unfinished)",
             missing, p->used);
    return true;
}

/* After the loop: nothing more will be progressed.  Receives are
 * cancelled; a send still running is let go (MPI_Request_free) and its
 * pin released: should the peer still pull the bytes later, it checks the
 * checksum.  Buffers MPI might still write into are leaked, not freed. */
static void teardown(struct cfs_peer *p)
{
    for (int s = 0; s < p->nslots; s++) {
        if (p->kind[s] == PEER_SLOT_FREE)
            continue;
        void *obj = p->obj[s];
        int flag = 0;
        MPI_Status st;
        switch (p->kind[s]) {
        case PEER_SLOT_DATA_RECV: {
            struct peer_xfer *x = obj;
            MPI_Cancel(&p->mreq[s]);
            MPI_Test(&p->mreq[s], &flag, &st);
            if (!flag)
                MPI_Request_free(&p->mreq[s]);
            else
                free(x->bounce);
            x->bounce = NULL;
            x->slot = -1;
            break;
        }
        case PEER_SLOT_DATA_SEND:
        case PEER_SLOT_CTRL_SEND:
            MPI_Test(&p->mreq[s], &flag, &st);
            if (!flag)
                MPI_Request_free(&p->mreq[s]);
            if (p->kind[s] == PEER_SLOT_DATA_SEND) {
                struct peer_send *ps = obj;
                if (ps->pinned && ps->view.release)
                    ps->view.release(ps->view.release_arg, &ps->view);
                if (flag)
                    free(ps->bounce);
                free(ps);
            } else if (flag) {
                free(obj);
            }
            break;
        default:
            break;
        }
        peer_slot_put(p, s);
    }
    p->used = 0;
    p->awaiting = 0;
    peer_defer_free(p);
    for (int d = 0; d < p->size; d++) {
        struct peer_node *nd = &p->nodes[d];
        fail_queue(p, nd, -ECANCELED);
        while (nd->batches) {
            struct peer_batch *b = nd->batches;
            nd->batches = b->next;
            for (uint32_t i = 0; i < b->n; i++) {
                complete_user(p, &b->x[i], -ECANCELED);
                free(b->x[i].bounce);
            }
            free(b);
        }
    }
    if (p->ctrl_req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Cancel(&p->ctrl_req);
        MPI_Test(&p->ctrl_req, &flag, MPI_STATUS_IGNORE);
        if (!flag)
            MPI_Request_free(&p->ctrl_req);
    }
    peer_slots_free(p);
}

void *cfs_peer_comm_main(void *arg)
{
    pthread_setname_np(pthread_self(), "cfs-peer");
    struct cfs_peer *p = arg;
    uint64_t idle_ns = 0, burst_ns = 0, worked_ns = cfs_peer_now_ns();
    /* Our sleeps are tens of microseconds: the default 50 us timer slack
     * of this thread would double them. */
    prctl(PR_SET_TIMERSLACK, 2000UL, 0, 0, 0);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        struct cfs_peer_req *subs = p->sub_head;
        p->sub_head = p->sub_tail = NULL;
        struct peer_note *notes = p->note_head;
        p->note_head = p->note_tail = NULL;
        bool leave = p->leave_req;
        pthread_mutex_unlock(&p->lock);

        uint64_t now = cfs_peer_now_ns();
        int work = 0;
        while (subs) {
            struct cfs_peer_req *next = subs->next_;
            accept_request(p, subs);
            subs = next;
            work++;
        }
        work += send_notes(p, notes);
        if (leave && !p->leaving)
            begin_leaving(p, now);
        work += poll_ctrl(p);
        work += poll_slots(p);
        if (p->pending)
            work += peer_defer_poll(p, cfs_peer_now_ns());
        if (!p->leaving)
            work += flush_batches(p, now);
        check_timeouts(p, cfs_peer_now_ns());
        if (p->leaving && leave_finished(p, cfs_peer_now_ns()))
            break;
        if (work) {
            idle_ns = 0;
            burst_ns = worked_ns = cfs_peer_now_ns();
            continue;
        }
        bool moving = p->used > p->awaiting; /* sends, or receives whose data is announced */
        if (moving && cfs_peer_now_ns() - burst_ns < BURST_NS) {
            /* Transfers in flight and something just completed: a
             * rendezvous takes several progress steps, so poll on for a
             * moment before sleeping (on a host with more busy threads
             * than cores every sleep can cost a scheduler time slice).
             * Not after a sleep: receives orphaned by a stopped peer must
             * not keep us spinning. */
            continue;
        }
        uint64_t max_ns = moving                  ? IDLE_BUSY_MAX_NS
                          : p->used || p->pending ? IDLE_AWAIT_MAX_NS
                                                  : IDLE_MAX_NS;
        if (!p->used && !p->pending && !p->leaving &&
            cfs_peer_now_ns() - worked_ns > DEEP_IDLE_AFTER_NS)
            max_ns = IDLE_DEEP_MAX_NS;
        idle_ns = idle_ns ? idle_ns * 2 : IDLE_MIN_NS;
        if (idle_ns > max_ns)
            idle_ns = max_ns;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)idle_ns;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&p->lock);
        if (!p->sub_head && !p->note_head && p->leave_req == leave) {
            p->sleeping = true;
            pthread_cond_timedwait(&p->wake, &p->lock, &ts);
            p->sleeping = false;
        }
        pthread_mutex_unlock(&p->lock);
    }
    teardown(p);
    return NULL;
}
