/* The slot table: every MPI request the communication thread has posted
 * (data receives, data sends, control sends), in parallel arrays beside
 * what each belongs to.  One table, so that one MPI_Testsome per pass of
 * the loop finds every completion, whatever side of the protocol posted it;
 * the kind of each slot says which handler its completion goes to
 * (peer_proto.c).  It grows by doubling and never shrinks: a node's
 * outstanding requests are bounded by the batch window times the nodes.
 *
 * peer_send_ctrl is here rather than with the protocol because both sides
 * send control messages: the client its REQs, the server its REPLYs, also
 * the ones held back (peer_defer.c).  Communication thread only. */
#include "peer_i.h"

#include <stdlib.h>

#include "clairfs/log.h"

static int slot_grow(struct cfs_peer *p)
{
    int n = p->nslots ? p->nslots * 2 : 256;
    MPI_Request *mreq = realloc(p->mreq, (size_t)n * sizeof(*mreq));
    if (mreq)
        p->mreq = mreq;
    enum peer_slot_kind *kind = realloc(p->kind, (size_t)n * sizeof(*kind));
    if (kind)
        p->kind = kind;
    void **obj = realloc(p->obj, (size_t)n * sizeof(*obj));
    if (obj)
        p->obj = obj;
    int *fs = realloc(p->free_slots, (size_t)n * sizeof(*fs));
    if (fs)
        p->free_slots = fs;
    int *di = realloc(p->done_idx, (size_t)n * sizeof(*di));
    if (di)
        p->done_idx = di;
    MPI_Status *ds = realloc(p->done_st, (size_t)n * sizeof(*ds));
    if (ds)
        p->done_st = ds;
    if (!mreq || !kind || !obj || !fs || !di || !ds)
        return -ENOMEM;
    for (int i = n - 1; i >= p->nslots; i--) {
        p->mreq[i] = MPI_REQUEST_NULL;
        p->kind[i] = PEER_SLOT_FREE;
        p->obj[i] = NULL;
        p->free_slots[p->nfree++] = i;
    }
    p->nslots = n;
    return 0;
}

/* A free slot for a request about to be posted, or -ENOMEM. */
int peer_slot_get(struct cfs_peer *p)
{
    if (!p->nfree && slot_grow(p) < 0)
        return -ENOMEM;
    return p->free_slots[--p->nfree];
}

void peer_slot_put(struct cfs_peer *p, int s)
{
    p->mreq[s] = MPI_REQUEST_NULL;
    p->kind[s] = PEER_SLOT_FREE;
    p->obj[s] = NULL;
    p->free_slots[p->nfree++] = s;
}

void peer_slot_set(struct cfs_peer *p, int s, enum peer_slot_kind k, void *obj)
{
    p->kind[s] = k;
    p->obj[s] = obj;
    p->used++;
}

/* At teardown, once no slot is in use. */
void peer_slots_free(struct cfs_peer *p)
{
    free(p->mreq);
    free(p->kind);
    free(p->obj);
    free(p->free_slots);
    free(p->done_idx);
    free(p->done_st);
    p->mreq = NULL;
    p->nslots = p->nfree = 0;
}

int peer_send_ctrl(struct cfs_peer *p, int dest, void *msg, size_t len)
{
    int s = peer_slot_get(p);
    if (s < 0) {
        free(msg);
        return s;
    }
    int rc = MPI_Isend(msg, (int)len, MPI_BYTE, dest, PEER_TAG_CTRL, p->comm, &p->mreq[s]);
    if (rc != MPI_SUCCESS) {
        cfs_err("peers: sending a control message to rank %d failed (MPI error %d)", dest, rc);
        free(msg);
        peer_slot_put(p, s);
        return -EIO;
    }
    peer_slot_set(p, s, PEER_SLOT_CTRL_SEND, msg);
    return 0;
}
