/* The serving side: one requested file answered.  The provider (the
 * prefetcher, cfs_prefetch_provide) pins the file where it is: in RAM its
 * bytes are sent straight from the pin, which the send's completion
 * releases; on the SSD one pread copies them into a bounce buffer and the
 * pin goes at once, so that a slow receiver never holds a cache entry.
 * The reply entry carries the checksum, the provider's when it has one.
 *
 * A file the provider is fetching itself answers -EAGAIN: the caller
 * (on_req in peer_proto.c, or peer_defer.c asking again) holds the REPLY
 * back.  Here only the one file: which reply it belongs to, and when it
 * goes, is the callers'.  Communication thread only. */
#include "peer_i.h"

#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

void peer_send_release(struct peer_send *s)
{
    if (s->pinned && s->view.release)
        s->view.release(s->view.release_arg, &s->view);
    s->pinned = false;
    free(s->bounce);
    free(s);
}

static int read_full(int fd, void *buf, uint64_t len, uint64_t off)
{
    uint64_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO;
        done += (uint64_t)n;
    }
    return 0;
}

/* One requested file: post its data send, fill its reply entry. */
void peer_serve_one(struct cfs_peer *p, int src, const struct peer_req_ent *q,
                    struct peer_rep_ent *r)
{
    r->tag = q->tag;
    r->len = 0;
    r->xxh3 = 0;
    if (!p->params.provide || q->cap == UINT64_MAX) {
        r->status = -ENOENT;
        goto notheld;
    }
    struct peer_send *s = calloc(1, sizeof(*s));
    if (!s) {
        r->status = -ENOMEM;
        return;
    }
    int rc = p->params.provide(p->params.provide_arg, q->id, &s->view);
    if (rc == -EAGAIN) {
        free(s);
        r->status = rc; /* in flight here: the reply waits for it */
        return;
    }
    if (rc < 0) {
        free(s);
        r->status = rc;
        goto notheld;
    }
    s->pinned = true;
    const void *data = s->view.data;
    uint64_t len = s->view.len;
    if (len > q->cap) {
        peer_send_release(s);
        r->status = -EFBIG;
        return;
    }
    if (!data) {
        /* SSD entry: one pread into a bounce buffer, the pin goes at once. */
        s->bounce = malloc(len ? len : 1);
        rc = s->bounce ? read_full(s->view.fd, s->bounce, len, s->view.offset) : -ENOMEM;
        if (s->view.release)
            s->view.release(s->view.release_arg, &s->view);
        s->pinned = false;
        if (rc < 0) {
            peer_send_release(s);
            r->status = rc;
            return;
        }
        data = s->bounce;
        atomic_fetch_add_explicit(&p->st.ssd_bounces, 1, memory_order_relaxed);
    }
    r->xxh3 = s->view.has_xxh3 ? s->view.xxh3 : XXH3_64bits(data, len);
    int slot = peer_slot_get(p);
    if (slot < 0 || MPI_Isend(data, (int)len, MPI_BYTE, src, (int)q->tag, p->comm,
                              &p->mreq[slot]) != MPI_SUCCESS) {
        if (slot >= 0)
            peer_slot_put(p, slot);
        peer_send_release(s);
        r->status = -EIO;
        return;
    }
    peer_slot_set(p, slot, PEER_SLOT_DATA_SEND, s);
    r->status = 0;
    r->len = len;
    atomic_fetch_add_explicit(&p->st.served, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->st.served_bytes, len, memory_order_relaxed);
    return;
notheld:
    atomic_fetch_add_explicit(&p->st.notheld, 1, memory_order_relaxed);
}
