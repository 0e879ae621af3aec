/* The owners: which node keeps each file for the others (plan.h's
 * assignment rule).  Files go in order of total reads, most first, each to
 * its best reader while that node has room, else to the reader with room
 * that prefers it most, else to the node with the most room; a first pass
 * caps each node at its fair share of the dataset so that its own reads of
 * the others' files keep room.
 *
 * Why the next window keeps the last one's owners in the epoch they share:
 * each node switches windows when its own trainer reaches that epoch, and
 * installs the next plan as soon as it is planned, so for a while one node
 * asks the next plan's owners while they hold the last plan's files, and
 * the reverse; a peer that does not hold the file sends the read to the
 * PFS.  Of the three cures this one alone costs nothing at run time: a
 * second owner asked after a miss would add a round trip to every miss,
 * and switching at an agreed epoch would need the nodes to talk about
 * their trainers' positions.  Every node plans from the same previous plan,
 * so the plans still agree.  Under a DistributedSampler every file is read
 * in every epoch, so the owners then stay those of the first window for
 * the run, as they were before windows (the ranking by reads in a window
 * shifts little where every file is read once an epoch). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_i.h"

/* The owner of f: its best reader when that node has room, else the reader
 * with room that prefers it most, else the node with the most room; none
 * when no node has room (the PFS).  b->room_bound, at least the most room
 * any node has, skips the look at every node for a file too large for all
 * of them: once the tiers fill, nearly every file is. */
static void owner_of(struct cfs_plan *p, struct plan_build *b, uint32_t f)
{
    uint64_t sz = p->sizes[f];
    uint32_t best = b->best[f];
    if (b->free_room[best] < sz) {
        if (b->room_bound < sz)
            return;
        uint64_t most = 0, bound = 0;
        uint32_t roomiest = CFS_NODE_NONE;
        for (uint32_t j = 0; j < p->nodes; j++) {
            bound = b->free_room[j] > bound ? b->free_room[j] : bound;
            if (b->free_room[j] >= sz && b->free_room[j] >= most &&
                (roomiest == CFS_NODE_NONE || b->free_room[j] > most)) {
                most = b->free_room[j];
                roomiest = j;
            }
        }
        b->room_bound = bound;
        if (roomiest == CFS_NODE_NONE)
            return;
        best = CFS_NODE_NONE;
        uint32_t bp = UINT32_MAX;
        for (uint32_t j = 0; j < p->nodes; j++) {
            if (b->free_room[j] < sz)
                continue;
            uint32_t k = rec_find(&b->rec[j], f);
            if (k != NO_RECORD && pref(rv(&b->rec[j], k)) < bp) {
                best = j;
                bp = pref(rv(&b->rec[j], k));
            }
        }
        if (best == CFS_NODE_NONE)
            best = roomiest;
    }
    p->owner[f] = best;
    b->free_room[best] -= sz;
}

/* The files anybody reads into b->ids (*m of them) by total reads, most
 * first, then their best reader's preference, then index: counting sorts on
 * 16-bit digits, by preference first (into b->key, with each file's total
 * beside it), then stably by total.  A 32-bit key with a radix sort's copy
 * took 16 bytes a file here, at the planner's peak; this takes 10.  The
 * best readers' preferences come in b->ids (totals_and_best), which the
 * last pass overwrites. */
static int sort_read_files(struct cfs_plan *p, struct plan_build *b, uint64_t *m)
{
    const uint64_t n = p->n;
    uint64_t *start = calloc(1u << 16, sizeof(*start));
    uint16_t *fewer = malloc(n * sizeof(*fewer) + 1); /* 0xFFFF - total, saturated */
    uint32_t *by_pref = b->key;
    int rc = -ENOMEM;
    if (!start || !fewer)
        goto out;
    for (uint64_t f = 0; f < n; f++)
        if (b->total[f])
            start[b->ids[f]]++;
    uint64_t sum = 0;
    for (uint32_t k = 0; k < 1u << 16; k++) {
        uint64_t c = start[k];
        start[k] = sum;
        sum += c;
    }
    for (uint64_t f = 0; f < n; f++) {
        uint32_t tot = b->total[f];
        if (!tot)
            continue;
        uint64_t at = start[b->ids[f]]++;
        by_pref[at] = (uint32_t)f;
        fewer[at] = (uint16_t)(0xFFFFu - (tot > 0xFFFF ? 0xFFFF : tot));
    }
    *m = sum;
    memset(start, 0, (1u << 16) * sizeof(*start));
    for (uint64_t i = 0; i < *m; i++)
        start[fewer[i]]++;
    sum = 0;
    for (uint32_t k = 0; k < 1u << 16; k++) {
        uint64_t c = start[k];
        start[k] = sum;
        sum += c;
    }
    for (uint64_t i = 0; i < *m; i++)
        b->ids[start[fewer[i]]++] = by_pref[i];
    rc = 0;
out:
    free(start);
    free(fewer);
    return rc;
}

/* Each file's total reads, first epoch read by any node, best reader (the
 * lowest preference, the first such node) and its preference (in b->ids,
 * free till sort_read_files has read them).  Block by
 * block of files, node by node within a block, each node's records from
 * where the last block left them: the records stream in order while the
 * block's sums stay in L1, and a node costs nothing where it reads
 * nothing. */
enum { OWNER_BLOCK = 2048 };

static int totals_and_best(struct cfs_plan *p, struct plan_build *b)
{
    const uint64_t n = p->n;
    uint64_t best[OWNER_BLOCK]; /* preference << 32 | node */
    uint32_t total[OWNER_BLOCK];
    uint8_t first[OWNER_BLOCK];
    uint64_t *next = calloc(p->nodes, sizeof(*next)); /* each node's next record */
    if (!next)
        return -ENOMEM;
    for (uint64_t f0 = 0; f0 < n; f0 += OWNER_BLOCK) {
        const uint64_t len = n - f0 < OWNER_BLOCK ? n - f0 : OWNER_BLOCK;
        for (uint64_t i = 0; i < len; i++) {
            best[i] = UINT64_MAX;
            total[i] = 0;
            first[i] = UINT8_MAX;
        }
        for (uint32_t j = 0; j < p->nodes; j++) {
            const struct node_records *r = &b->rec[j];
            uint64_t k = next[j];
            for (; k < r->len && rec_file(r, k) < f0 + len; k++) {
                if (!r->cnt[k])
                    continue; /* dense, unread */
                const uint64_t i = rec_file(r, k) - f0;
                uint16_t v = rv(r, k);
                uint64_t key = (uint64_t)pref(v) << 32 | j;
                total[i] += RCOUNT(v);
                best[i] = key < best[i] ? key : best[i];
                first[i] = REPOCH(v) < first[i] ? (uint8_t)REPOCH(v) : first[i];
            }
            next[j] = k;
        }
        for (uint64_t i = 0; i < len; i++) {
            b->total[f0 + i] = total[i];
            p->owner_epoch[f0 + i] = first[i];
            b->best[f0 + i] = best[i] == UINT64_MAX ? CFS_NODE_NONE : (uint32_t)best[i];
            b->ids[f0 + i] = (uint32_t)(best[i] >> 32);
        }
    }
    free(next);
    return 0;
}

/* The previous window's plan when it ends where this one begins (its last
 * epoch is this one's first) over the same files and nodes; else NULL. */
static const struct cfs_plan *window_before(const struct cfs_plan *p,
                                            const struct cfs_plan_params *pp)
{
    const struct cfs_plan *q = pp->prev;
    if (!q || q->n != p->n || q->nodes != p->nodes ||
        q->start_epoch + q->nepochs != p->start_epoch + 1)
        return NULL;
    return q;
}

/* The epoch two windows share keeps the first one's owners (plan.h: each
 * node switches windows when its own trainer reaches that epoch, so in it
 * a node on either plan asks the same owner, who holds the file whichever
 * plan it is on).  A file read in it takes its previous owner ahead of
 * every other file, none included: on the PFS it stays there.  Marks the
 * kept files in *kept (a bitmap, NULL when there is no previous window);
 * the owners' room is debited. */
static int keep_previous_owners(struct cfs_plan *p, struct plan_build *b,
                                const struct cfs_plan *prev, uint64_t **kept)
{
    *kept = NULL;
    if (!prev)
        return 0;
    uint64_t *bits = calloc(b->file_words + 1, sizeof(*bits));
    if (!bits)
        return -ENOMEM;
    for (uint64_t f = 0; f < p->n; f++) {
        if (!b->total[f] || p->owner_epoch[f] != 0)
            continue;
        uint32_t o = prev->owner[f];
        if (o != CFS_NODE_NONE && b->free_room[o] < p->sizes[f])
            continue; /* no room for it now: chosen as any other */
        bits[f / 64] |= 1ull << (f % 64);
        if (o == CFS_NODE_NONE)
            continue;
        p->owner[f] = o;
        b->free_room[o] -= p->sizes[f];
    }
    *kept = bits;
    return 0;
}

/* Owners: de-duplicated, in order of total reads (after those the previous
 * window's shared epoch keeps). */
int plan_assign_owners(struct cfs_plan *p, struct plan_build *b, const struct cfs_plan_params *pp)
{
    const struct cfs_plan *prev = window_before(p, pp);
    const uint64_t cap = p->ram + p->ssd;
    uint64_t m = 0;
    int rc = totals_and_best(p, b);
    if (rc == 0)
        rc = sort_read_files(p, b, &m);
    if (rc < 0)
        return rc;
    /* Two passes.  The first gives each node at most its fair share of the
     * dataset (the rest of its room is for its own reads of the others'
     * files: an owner whose tiers are all owned files makes room for what
     * it streams by evicting them, and its peers then find them gone).  The
     * second places what the shares left over, up to each node's room. */
    uint64_t share = p->dataset_bytes / p->nodes + b->max_size;
    if (share > cap)
        share = cap;
    uint64_t *kept = NULL;
    uint64_t *second = calloc(p->nodes, sizeof(*second)); /* the second pass's room */
    if (!second)
        return -ENOMEM;
    for (uint32_t j = 0; j < p->nodes; j++)
        b->free_room[j] = cap;
    rc = keep_previous_owners(p, b, prev, &kept);
    if (rc < 0)
        goto out;
    /* What the kept files took counts against the fair share first. */
    for (uint32_t j = 0; j < p->nodes; j++) {
        uint64_t used = cap - b->free_room[j];
        b->free_room[j] = used < share ? share - used : 0;
        second[j] = cap - used - b->free_room[j];
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            for (uint32_t j = 0; j < p->nodes; j++)
                b->free_room[j] += second[j];
        b->room_bound = UINT64_MAX;
        for (uint64_t i = 0; i < m; i++) {
            uint32_t f = b->ids[i];
            if (p->owner[f] == CFS_NODE_NONE && !(kept && (kept[f / 64] >> (f % 64) & 1)))
                owner_of(p, b, f);
        }
    }
out:
    free(second);
    free(kept);
    return rc;
}
