/* A fake peer layer for unit tests of the data path, behind the same
 * struct cfs_peer_ops as the MPI transport: it holds, per node, a set of
 * file ids with their bytes, and completes requests from a thread of its
 * own, as the real layer does from its communication thread.  It can be
 * told to answer every request with -ENOENT (not held), -ETIMEDOUT, wrong
 * bytes (which the real layer's checksum turns into -EIO: the fake writes
 * garbage into the buffer and answers -EIO), or a short length; to be slow
 * (a delay per request); to be stopped (requests wait until `timeout` and
 * then fail with -ETIMEDOUT, and the node is marked slow, as the real layer
 * does); or to mark a node slow from the start. */
#ifndef CLAIRFS_TESTS_FAKE_PEER_H
#define CLAIRFS_TESTS_FAKE_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "clairfs/peer.h"

enum fake_peer_answer {
    FAKE_PEER_BYTES = 0, /* the held bytes, or -ENOENT when not held */
    FAKE_PEER_ENOENT,
    FAKE_PEER_TIMEOUT,
    FAKE_PEER_CORRUPT, /* garbage in the buffer, -EIO */
    FAKE_PEER_SHORT,   /* one byte less than held */
};

struct fake_peer_counts {
    uint64_t submitted; /* accepted by submit */
    uint64_t refused;   /* submit returned an error */
    uint64_t served, served_bytes; /* answered with the bytes */
    uint64_t failed;    /* answered with an error */
    uint64_t timeouts;  /* of which -ETIMEDOUT */
};

struct fake_peer;

extern const struct cfs_peer_ops fake_peer_ops;

/* This node is `node` of `nodes`; timeout: seconds a stopped fake waits
 * before -ETIMEDOUT. */
struct fake_peer *fake_peer_create(uint32_t node, uint32_t nodes, double timeout);
/* Completes what is queued with -ECANCELED and joins the thread. */
void fake_peer_destroy(struct fake_peer *fp);
/* Node `node` holds file id with these bytes (copied). */
void fake_peer_hold(struct fake_peer *fp, uint32_t node, uint32_t id, const void *bytes,
                    size_t len);
void fake_peer_answer(struct fake_peer *fp, enum fake_peer_answer a);
void fake_peer_delay(struct fake_peer *fp, double seconds);
void fake_peer_stop(struct fake_peer *fp, int stopped);
void fake_peer_set_state(struct fake_peer *fp, uint32_t node, enum cfs_peer_state st);
void fake_peer_counts(struct fake_peer *fp, struct fake_peer_counts *out);
/* Was file id asked for (accepted by submit) at least once? */
int fake_peer_asked(struct fake_peer *fp, uint32_t id);

#endif
