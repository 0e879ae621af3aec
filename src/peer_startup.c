/* The nodes' start-up meetings (peer_startup.h): the node words gathered
 * twice before the mount, the first followed by the agreement check.  Here
 * rather than in the daemon so that the daemon's lifecycle reads as phases
 * and the collectives stay in the peer module. */
#include "clairfs/peer_startup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One node's word at a start-up meeting. */
struct node_word {
    uint32_t failed;
    uint32_t first, count, stride; /* the trainer ranks it serves (cfs_rank_range) */
};

#define START_MEETINGS 2

struct cfs_peer_startup {
    struct cfs_peer *peer;
    int nodes;
    int met;               /* meetings attended */
    struct node_word mine; /* what this node says */
    struct node_word *all; /* nodes entries */
};

int cfs_peer_startup_create(struct cfs_peer *peer, struct cfs_peer_startup **out, char *err,
                            size_t errlen)
{
    *out = NULL;
    if (!peer)
        return 0;
    struct cfs_peer_startup *s = calloc(1, sizeof(*s));
    int n = cfs_peer_size(peer);
    if (!s || !(s->all = calloc((size_t)n, sizeof(*s->all)))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->peer = peer;
    s->nodes = n;
    *out = s;
    return 0;
}

/* The next meeting: every node's word in s->all.  0 when every node is
 * fine, -ECANCELED when one is not (err names them), -EIO. */
static int meet(struct cfs_peer_startup *s, char *err, size_t errlen)
{
    s->met++;
    int rc = cfs_peer_allgather(s->peer, &s->mine, sizeof(s->mine), s->all, err, errlen);
    if (rc < 0)
        return rc;
    size_t pos = 0;
    int bad = 0;
    for (int r = 0; r < s->nodes; r++) {
        if (!s->all[r].failed)
            continue;
        int k = snprintf(err + pos, errlen - pos, "%s%d", bad ? "," : "", r);
        if (k > 0 && (size_t)k < errlen - pos)
            pos += (size_t)k;
        bad++;
    }
    if (!bad)
        return 0;
    if (s->mine.failed)
        err[0] = '\0'; /* this node has said why */
    else
        snprintf(err + pos, errlen - pos, ": %s could not start (see %s messages); not mounting",
                 bad == 1 ? "that node" : "those nodes", bad == 1 ? "its" : "their");
    return -ECANCELED;
}

int cfs_peer_startup_meet_config(struct cfs_peer_startup *s, struct cfs_run_config *cfg,
                                 uint64_t catalog_hash, char *err, size_t errlen)
{
    if (!s)
        return 0;
    s->mine = (struct node_word){0, cfg->ranks.first, cfg->ranks.count, cfg->ranks.stride};
    int rc = meet(s, err, errlen);
    if (rc < 0)
        return rc;
    for (int r = 0; r < s->nodes && (uint32_t)r < cfg->nodes; r++)
        cfg->node_ranks[r] =
            (struct cfs_rank_range){s->all[r].first, s->all[r].count, s->all[r].stride};
    struct cfs_peer_agreement agreement;
    cfs_peer_agreement_from_config(&agreement, cfg, catalog_hash);
    char why[768];
    rc = cfs_peer_agree(s->peer, &agreement, why, sizeof(why));
    if (rc < 0)
        snprintf(err, errlen, "the nodes disagree, not mounting: %s", why);
    return rc;
}

int cfs_peer_startup_meet_planned(struct cfs_peer_startup *s, char *err, size_t errlen)
{
    return s ? meet(s, err, errlen) : 0;
}

void cfs_peer_startup_destroy(struct cfs_peer_startup *s)
{
    if (!s)
        return;
    s->mine.failed = 1;
    while (s->met < START_MEETINGS) {
        char ignored[256];
        if (meet(s, ignored, sizeof(ignored)) == -EIO)
            break;
    }
    free(s->all);
    free(s);
}
