/* The fake peer layer of fake_peer.h: a mutex, a FIFO of requests with
 * their due times, and one thread that answers them in order. */
#include "fake_peer.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAKE_MAX_NODES 8
#define FAKE_MAX_IDS 4096

struct held {
    void *bytes;
    size_t len;
    bool has;
};

struct pending {
    struct cfs_peer_req *r;
    uint64_t due_ns; /* answered then (or timed out, when stopped) */
    struct pending *next;
};

struct fake_peer {
    uint32_t node, nodes;
    uint64_t timeout_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool quit, stopped;
    enum fake_peer_answer answer;
    uint64_t delay_ns;
    enum cfs_peer_state state[FAKE_MAX_NODES];
    struct held held[FAKE_MAX_NODES][FAKE_MAX_IDS];
    unsigned char asked[FAKE_MAX_IDS];
    struct pending *head, *tail;
    struct fake_peer_counts n;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The answer to r (mu held): fills its buffer and returns its res. */
static int64_t answer_of(struct fake_peer *fp, struct cfs_peer_req *r)
{
    const struct held *h = &fp->held[r->node][r->id < FAKE_MAX_IDS ? r->id : 0];
    switch (fp->answer) {
    case FAKE_PEER_ENOENT:
        return -ENOENT;
    case FAKE_PEER_TIMEOUT:
        return -ETIMEDOUT;
    case FAKE_PEER_CORRUPT:
        memset(r->buf, 0xa5, r->cap);
        return -EIO;
    case FAKE_PEER_BYTES:
    case FAKE_PEER_SHORT:
        break;
    }
    if (r->id >= FAKE_MAX_IDS || !h->has)
        return -ENOENT;
    if (h->len > r->cap)
        return -EFBIG;
    if (r->size_hint != CFS_PEER_SIZE_UNKNOWN && r->size_hint != h->len)
        return -EIO;
    size_t len = fp->answer == FAKE_PEER_SHORT && h->len ? h->len - 1 : h->len;
    memcpy(r->buf, h->bytes, len);
    return (int64_t)len;
}

/* Sleep on cv for at most ns (mu held). */
static void wait_ns(struct fake_peer *fp, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t end = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(end / 1000000000u);
    ts.tv_nsec = (long)(end % 1000000000u);
    (void)pthread_cond_timedwait(&fp->cv, &fp->mu, &ts);
}

static void *fake_main(void *arg)
{
    struct fake_peer *fp = arg;
    pthread_mutex_lock(&fp->mu);
    for (;;) {
        struct pending *q = fp->head;
        if (!q) {
            if (fp->quit)
                break;
            pthread_cond_wait(&fp->cv, &fp->mu);
            continue;
        }
        uint64_t now = now_ns();
        /* Stopped: nothing is answered; the request times out instead. */
        uint64_t due = fp->stopped ? q->due_ns + fp->timeout_ns : q->due_ns;
        if (!fp->quit && now < due) {
            wait_ns(fp, due - now < 1000000u ? due - now : 1000000u);
            continue;
        }
        fp->head = q->next;
        if (!fp->head)
            fp->tail = NULL;
        struct cfs_peer_req *r = q->r;
        free(q);
        int64_t res;
        if (fp->quit) {
            res = -ECANCELED;
        } else if (fp->stopped) {
            res = -ETIMEDOUT;
            fp->state[r->node] = CFS_PEER_SLOW;
        } else {
            res = answer_of(fp, r);
        }
        if (res >= 0) {
            fp->n.served++;
            fp->n.served_bytes += (uint64_t)res;
        } else {
            fp->n.failed++;
            if (res == -ETIMEDOUT)
                fp->n.timeouts++;
        }
        r->res = res;
        /* As the real layer: done() without any of the layer's locks. */
        pthread_mutex_unlock(&fp->mu);
        r->done(r);
        pthread_mutex_lock(&fp->mu);
    }
    pthread_mutex_unlock(&fp->mu);
    return NULL;
}

static uint32_t fake_node(const void *peer)
{
    return ((const struct fake_peer *)peer)->node;
}

static uint32_t fake_nodes(const void *peer)
{
    return ((const struct fake_peer *)peer)->nodes;
}

static enum cfs_peer_state fake_node_state(const void *peer, uint32_t node)
{
    struct fake_peer *fp = (struct fake_peer *)peer;
    if (node >= fp->nodes)
        return CFS_PEER_GONE;
    pthread_mutex_lock(&fp->mu);
    enum cfs_peer_state st = fp->state[node];
    pthread_mutex_unlock(&fp->mu);
    return st;
}

static int fake_submit(void *peer, struct cfs_peer_req *r)
{
    struct fake_peer *fp = peer;
    if (!r || !r->done || (!r->buf && r->cap) || r->node >= fp->nodes || r->node == fp->node)
        return -EINVAL;
    struct pending *q = malloc(sizeof(*q));
    if (!q)
        return -ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&fp->mu);
    if (fp->quit)
        rc = -ESHUTDOWN;
    else if (fp->state[r->node] == CFS_PEER_SLOW)
        rc = -ETIMEDOUT;
    else if (fp->state[r->node] == CFS_PEER_GONE)
        rc = -EHOSTDOWN;
    if (rc) {
        fp->n.refused++;
        pthread_mutex_unlock(&fp->mu);
        free(q);
        return rc;
    }
    r->res = 0;
    q->r = r;
    q->due_ns = now_ns() + fp->delay_ns;
    q->next = NULL;
    if (fp->tail)
        fp->tail->next = q;
    else
        fp->head = q;
    fp->tail = q;
    fp->n.submitted++;
    if (r->id < FAKE_MAX_IDS)
        fp->asked[r->id] = 1;
    pthread_cond_signal(&fp->cv);
    pthread_mutex_unlock(&fp->mu);
    return 0;
}

const struct cfs_peer_ops fake_peer_ops = {
    .node = fake_node,
    .nodes = fake_nodes,
    .submit = fake_submit,
    .node_state = fake_node_state,
};

struct fake_peer *fake_peer_create(uint32_t node, uint32_t nodes, double timeout)
{
    if (nodes > FAKE_MAX_NODES || node >= nodes)
        return NULL;
    struct fake_peer *fp = calloc(1, sizeof(*fp));
    if (!fp)
        return NULL;
    fp->node = node;
    fp->nodes = nodes;
    fp->timeout_ns = (uint64_t)(timeout * 1e9);
    for (uint32_t i = 0; i < nodes; i++)
        fp->state[i] = i == node ? CFS_PEER_SELF : CFS_PEER_UP;
    pthread_mutex_init(&fp->mu, NULL);
    pthread_cond_init(&fp->cv, NULL);
    if (pthread_create(&fp->thread, NULL, fake_main, fp) != 0) {
        pthread_cond_destroy(&fp->cv);
        pthread_mutex_destroy(&fp->mu);
        free(fp);
        return NULL;
    }
    return fp;
}

void fake_peer_destroy(struct fake_peer *fp)
{
    if (!fp)
        return;
    pthread_mutex_lock(&fp->mu);
    fp->quit = true;
    pthread_cond_signal(&fp->cv);
    pthread_mutex_unlock(&fp->mu);
    pthread_join(fp->thread, NULL);
    for (uint32_t n = 0; n < fp->nodes; n++)
        for (uint32_t i = 0; i < FAKE_MAX_IDS; i++)
            free(fp->held[n][i].bytes);
    pthread_cond_destroy(&fp->cv);
    pthread_mutex_destroy(&fp->mu);
    free(fp);
}

void fake_peer_hold(struct fake_peer *fp, uint32_t node, uint32_t id, const void *bytes,
                    size_t len)
{
    if (node >= fp->nodes || id >= FAKE_MAX_IDS)
        return;
    pthread_mutex_lock(&fp->mu);
    struct held *h = &fp->held[node][id];
    free(h->bytes);
    h->bytes = malloc(len ? len : 1);
    memcpy(h->bytes, bytes, len);
    h->len = len;
    h->has = true;
    pthread_mutex_unlock(&fp->mu);
}

void fake_peer_answer(struct fake_peer *fp, enum fake_peer_answer a)
{
    pthread_mutex_lock(&fp->mu);
    fp->answer = a;
    pthread_mutex_unlock(&fp->mu);
}

void fake_peer_delay(struct fake_peer *fp, double seconds)
{
    pthread_mutex_lock(&fp->mu);
    fp->delay_ns = (uint64_t)(seconds * 1e9);
    pthread_mutex_unlock(&fp->mu);
}

void fake_peer_stop(struct fake_peer *fp, int stopped)
{
    pthread_mutex_lock(&fp->mu);
    fp->stopped = stopped != 0;
    pthread_cond_signal(&fp->cv);
    pthread_mutex_unlock(&fp->mu);
}

void fake_peer_set_state(struct fake_peer *fp, uint32_t node, enum cfs_peer_state st)
{
    if (node >= fp->nodes)
        return;
    pthread_mutex_lock(&fp->mu);
    fp->state[node] = st;
    pthread_mutex_unlock(&fp->mu);
}

void fake_peer_counts(struct fake_peer *fp, struct fake_peer_counts *out)
{
    pthread_mutex_lock(&fp->mu);
    *out = fp->n;
    pthread_mutex_unlock(&fp->mu);
}

int fake_peer_asked(struct fake_peer *fp, uint32_t id)
{
    pthread_mutex_lock(&fp->mu);
    int asked = id < FAKE_MAX_IDS && fp->asked[id];
    pthread_mutex_unlock(&fp->mu);
    return asked;
}
