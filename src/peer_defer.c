/* Replies held back: a peer asked for a file this node is fetching right now
 * (typically in the first epoch, when the owner stages from the PFS what
 * another node's trainer is about to read).  Answering "not held" would send
 * the asker to the PFS for the same bytes, a second read of the dataset;
 * instead the REPLY of its batch waits until every such file is published
 * (the data of the others is already on its way), for at most half the peer
 * timeout, after which the files still awaited are answered "not held" and
 * the asker reads them from the PFS as before.  The asker sees nothing but a
 * later REPLY: the protocol is unchanged.
 *
 * Everything here runs on the communication thread.  The awaited files are
 * retried by asking the provider again at every pass of the loop, which
 * keeps its sleeps short while anything is held back; a held reply is rare
 * once the owners have staged their files. */
#include "peer_i.h"

#include <stdlib.h>
#include <string.h>

void peer_defer_reply(struct cfs_peer *p, int src, const struct peer_req_ent *q,
                      struct peer_msg_hdr *rh, size_t rlen, uint64_t now)
{
    struct peer_pending *pd = malloc(sizeof(*pd) + rh->count * sizeof(*q));
    if (!pd) {
        /* Cannot wait: every awaited file is "not held" now. */
        struct peer_rep_ent *r = (struct peer_rep_ent *)(rh + 1);
        for (uint32_t i = 0; i < rh->count; i++)
            if (r[i].status == -EAGAIN)
                r[i].status = -ENOENT;
        peer_send_ctrl(p, src, rh, rlen);
        return;
    }
    pd->next = NULL;
    pd->src = src;
    pd->deadline_ns = p->leaving ? now : now + p->timeout_ns / 2;
    pd->rh = rh;
    pd->rlen = rlen;
    memcpy(pd->q, q, rh->count * sizeof(*q));
    struct peer_pending **tail = &p->pending;
    while (*tail)
        tail = &(*tail)->next;
    *tail = pd;
}

/* Ask again for the awaited files of pd; true when none is left. */
static bool retry(struct cfs_peer *p, struct peer_pending *pd, bool give_up)
{
    struct peer_rep_ent *r = (struct peer_rep_ent *)(pd->rh + 1);
    bool left = false;
    for (uint32_t i = 0; i < pd->rh->count; i++) {
        if (r[i].status != -EAGAIN)
            continue;
        peer_serve_one(p, pd->src, &pd->q[i], &r[i]);
        if (r[i].status == -EAGAIN) {
            if (give_up) {
                r[i].status = -ENOENT;
                atomic_fetch_add_explicit(&p->st.notheld, 1, memory_order_relaxed);
            } else {
                left = true;
            }
        }
    }
    return !left;
}

/* Sends the replies that are complete (a REPLY names its batch, so they
 * need not go out in the order the requests came). */
static int resolve(struct cfs_peer *p, uint64_t now, int only_src, bool give_up)
{
    int sent = 0;
    for (struct peer_pending **at = &p->pending; *at;) {
        struct peer_pending *pd = *at;
        bool mine = only_src < 0 || pd->src == only_src;
        if (!mine || !retry(p, pd, give_up || now >= pd->deadline_ns)) {
            at = &pd->next;
            continue;
        }
        *at = pd->next;
        peer_send_ctrl(p, pd->src, pd->rh, pd->rlen);
        free(pd);
        sent++;
    }
    return sent;
}

int peer_defer_poll(struct cfs_peer *p, uint64_t now)
{
    return resolve(p, now, -1, false);
}

void peer_defer_flush(struct cfs_peer *p, int src)
{
    (void)resolve(p, cfs_peer_now_ns(), src, true);
}

void peer_defer_free(struct cfs_peer *p)
{
    while (p->pending) {
        struct peer_pending *pd = p->pending;
        p->pending = pd->next;
        free(pd->rh);
        free(pd);
    }
}
