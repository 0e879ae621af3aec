/* Peers over MPI: start-up, the agreement collective, the client API, the
 * ops table the prefetcher uses, and the lifecycle.  The protocol and the
 * progress loop are in peer_proto.c; one node without MPI is
 * peer_single.c; the design is in include/clairfs/peer.h. */
#include "peer_i.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int mpi_error(int rc, const char *what, char *err, size_t errlen)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "error %d", rc);
    if (err && errlen)
        snprintf(err, errlen, "MPI: %s failed: %s", what, msg);
    return -EIO;
}

int cfs_peer_init(int *argc, char ***argv, struct cfs_peer **out, char *err, size_t errlen)
{
    struct cfs_peer *p = NULL;
    int provided = 0, rc, ret;
    bool initialized = false;

    *out = NULL;
    if (!cfs_peer_launched())
        return 0;

    rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
        ret = mpi_error(rc, "MPI_Init_thread", err, errlen);
        goto fail;
    }
    initialized = true;
    if (provided < MPI_THREAD_MULTIPLE) {
        snprintf(err, errlen, "MPI: the library provides thread level %d, clairfs needs "
                              "MPI_THREAD_MULTIPLE (%d)", provided, MPI_THREAD_MULTIPLE);
        ret = -ENOTSUP;
        goto fail;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        ret = -ENOMEM;
        goto fail;
    }
    p->comm = MPI_COMM_NULL;
    p->ctrl_req = MPI_REQUEST_NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    /* Our own communicator: nothing else in the process can match our
     * messages, and its error handler returns codes instead of aborting. */
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &p->comm);
    if (rc != MPI_SUCCESS) {
        ret = mpi_error(rc, "MPI_Comm_dup", err, errlen);
        goto fail;
    }
    MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(p->comm, &p->rank);
    MPI_Comm_size(p->comm, &p->size);

    int flag = 0;
    int *ub = NULL;
    MPI_Comm_get_attr(p->comm, MPI_TAG_UB, &ub, &flag);
    p->tag_max = flag && ub && *ub > PEER_TAG_DATA0 + 1024 ? (uint32_t)*ub : 32767;
    p->next_tag = PEER_TAG_DATA0;
    p->next_batch = 1;

    p->nodes = calloc((size_t)p->size, sizeof(*p->nodes));
    if (!p->nodes) {
        ret = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < p->size; i++)
        atomic_init(&p->nodes[i].state, i == p->rank ? CFS_PEER_SELF : CFS_PEER_UP);
    *out = p;
    return 0;

fail:
    if (p) {
        free(p->nodes);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
    }
    if (initialized)
        MPI_Finalize();
    return ret;
}

int cfs_peer_rank(const struct cfs_peer *p)
{
    return p ? p->rank : 0;
}

int cfs_peer_size(const struct cfs_peer *p)
{
    return p ? p->size : 1;
}

int cfs_peer_agree(struct cfs_peer *p, const struct cfs_peer_agreement *mine, char *err,
                   size_t errlen)
{
    if (!p)
        return 0;
    struct cfs_peer_agreement *all = calloc((size_t)p->size, sizeof(*all));
    if (!all)
        return -ENOMEM;
    int ret;
    int rc = MPI_Allgather(mine, (int)sizeof(*mine), MPI_BYTE, all, (int)sizeof(*mine), MPI_BYTE,
                           p->comm);
    if (rc != MPI_SUCCESS)
        ret = mpi_error(rc, "MPI_Allgather", err, errlen);
    else
        ret = cfs_peer_agreement_compare(all, p->size, err, errlen);
    free(all);
    return ret;
}

int cfs_peer_allgather(struct cfs_peer *p, const void *mine, size_t len, void *all, char *err,
                       size_t errlen)
{
    if (!p) {
        memcpy(all, mine, len);
        return 0;
    }
    if (len > INT_MAX)
        return -EINVAL;
    int rc = MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, p->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_error(rc, "MPI_Allgather", err, errlen);
}

int cfs_peer_start(struct cfs_peer *p, const struct cfs_peer_params *params, char *err,
                   size_t errlen)
{
    if (!p) {
        snprintf(err, errlen, "peers: not running under MPI");
        return -ENOTSUP;
    }
    if (p->started)
        return -EALREADY;
    p->params = *params;
    if (!(p->params.timeout > 0))
        p->params.timeout = 2.0;
    p->timeout_ns = (uint64_t)(p->params.timeout * 1e9);
    p->backoff_ns = p->params.backoff > 0 ? (uint64_t)(p->params.backoff * 1e9) : p->timeout_ns;
    for (int i = 0; i < p->size; i++)
        p->nodes[i].backoff_ns = p->backoff_ns;

    int rc = MPI_Irecv(p->ctrl_buf, (int)sizeof(p->ctrl_buf), MPI_BYTE, MPI_ANY_SOURCE,
                       PEER_TAG_CTRL, p->comm, &p->ctrl_req);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Irecv", err, errlen);
    rc = pthread_create(&p->thread, NULL, cfs_peer_comm_main, p);
    if (rc) {
        MPI_Cancel(&p->ctrl_req);
        MPI_Wait(&p->ctrl_req, MPI_STATUS_IGNORE);
        snprintf(err, errlen, "peers: cannot start the communication thread: %s", strerror(rc));
        return -rc;
    }
    p->started = true;
    return 0;
}

int cfs_peer_submit(struct cfs_peer *p, struct cfs_peer_req *req)
{
    if (!p)
        return -ESHUTDOWN;
    if (!req || !req->done || (!req->buf && req->cap) || req->node >= (uint32_t)p->size ||
        req->node == (uint32_t)p->rank)
        return -EINVAL;
    req->next_ = NULL;
    req->res = 0;
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    if (!p->started || p->leave_req)
        rc = -ESHUTDOWN;
    else if (atomic_load(&p->nodes[req->node].state) == CFS_PEER_SLOW)
        rc = -ETIMEDOUT;
    else if (atomic_load(&p->nodes[req->node].state) == CFS_PEER_GONE)
        rc = -EHOSTDOWN;
    if (rc) {
        pthread_mutex_unlock(&p->lock);
        return rc;
    }
    if (p->sub_tail)
        p->sub_tail->next_ = req;
    else
        p->sub_head = req;
    p->sub_tail = req;
    if (p->sleeping)
        pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

int cfs_peer_note(struct cfs_peer *p, uint32_t dest, const void *msg, size_t len)
{
    if (!p)
        return -ESHUTDOWN;
    if (dest >= (uint32_t)p->size || dest == (uint32_t)p->rank || len > CFS_PEER_NOTE_MAX)
        return -EINVAL;
    struct peer_note *n = calloc(1, sizeof(*n));
    struct peer_msg_hdr *h = calloc(1, sizeof(*h) + len);
    if (!n || !h) {
        free(n);
        free(h);
        return -ENOMEM;
    }
    h->type = PEER_MSG_NOTE;
    h->count = (uint32_t)len;
    memcpy(h + 1, msg, len);
    n->dest = dest;
    n->len = sizeof(*h) + len;
    n->msg = h;
    pthread_mutex_lock(&p->lock);
    int rc = !p->started || p->leave_req ? -ESHUTDOWN : 0;
    if (rc == 0) {
        if (p->note_tail)
            p->note_tail->next = n;
        else
            p->note_head = n;
        p->note_tail = n;
        if (p->sleeping)
            pthread_cond_signal(&p->wake);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc) {
        free(h);
        free(n);
    }
    return rc;
}

enum cfs_peer_state cfs_peer_node_state(const struct cfs_peer *p, uint32_t node)
{
    if (!p)
        return node == 0 ? CFS_PEER_SELF : CFS_PEER_GONE;
    if (node >= (uint32_t)p->size)
        return CFS_PEER_GONE;
    return (enum cfs_peer_state)atomic_load(&p->nodes[node].state);
}

static uint32_t mpi_node(const void *peer)
{
    return (uint32_t)cfs_peer_rank(peer);
}

static uint32_t mpi_nodes(const void *peer)
{
    return (uint32_t)cfs_peer_size(peer);
}

static int mpi_submit(void *peer, struct cfs_peer_req *req)
{
    return cfs_peer_submit(peer, req);
}

static enum cfs_peer_state mpi_node_state(const void *peer, uint32_t node)
{
    return cfs_peer_node_state(peer, node);
}

static const struct cfs_peer_ops mpi_ops = {
    .node = mpi_node,
    .nodes = mpi_nodes,
    .submit = mpi_submit,
    .node_state = mpi_node_state,
};

const struct cfs_peer_ops *cfs_peer_ops_of(const struct cfs_peer *p)
{
    return p ? &mpi_ops : &cfs_peer_single_ops;
}

void cfs_peer_get_stats(struct cfs_peer *p, struct cfs_peer_stats *out)
{
    *out = (struct cfs_peer_stats){0};
    if (!p)
        return;
    out->fetched = atomic_load(&p->st.fetched);
    out->fetched_bytes = atomic_load(&p->st.fetched_bytes);
    out->served = atomic_load(&p->st.served);
    out->served_bytes = atomic_load(&p->st.served_bytes);
    out->notheld = atomic_load(&p->st.notheld);
    out->timeouts = atomic_load(&p->st.timeouts);
    out->checksum_failures = atomic_load(&p->st.checksum_failures);
    out->batches_sent = atomic_load(&p->st.batches_sent);
    out->ssd_bounces = atomic_load(&p->st.ssd_bounces);
}

void cfs_peer_leave(struct cfs_peer *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    bool join = p->started && !p->left;
    p->leave_req = true;
    p->left = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    if (join)
        pthread_join(p->thread, NULL);
}

void cfs_peer_destroy(struct cfs_peer *p)
{
    if (!p)
        return;
    cfs_peer_leave(p);
    /* MPI_Comm_free is collective in the standard; the communicator goes
     * with MPI_Finalize, which is the one unavoidable fence (see peer.h). */
    MPI_Finalize();
    for (struct peer_note *n = p->note_head, *next; n; n = next) {
        next = n->next;
        free(n->msg);
        free(n);
    }
    free(p->nodes);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
