/* The opens grouped by process: the unit every judgement of a candidate
 * works in.  A DataLoader's workers are processes, and each reads its own
 * batches of its rank's stream in order while the processes race each
 * other, so the order of opens across processes says little and the order
 * within one says everything: a reader's opens are consecutive entries of
 * one schedule.  The verification (identify_verify.c) places each reader
 * in a hypothesis's schedule and follows it; the scans (identify_scan.c)
 * take each reader's first and second distinct opens as the sets a seed's
 * first two randperm entries must fall in; identify_global.c groups the
 * opens of one epoch.  The module keeps its opens flat (sample, pid, ppid
 * per open, under its lock) and groups a snapshot per attempt: grouping
 * is linear, an attempt's scan is minutes.
 *
 * Readers come in order of first open and keep their parent's pid: worker
 * processes of one rank share a parent, ranks without workers share their
 * launcher.  A candidate index order of a dataset root (params.orders)
 * numbers the same opens otherwise: the same readers, each open renamed
 * (ident_readers_renumber). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "identify_i.h"

static int reader_push(struct ident_reader *r, uint32_t sample)
{
    if (r->len == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        uint32_t *s = realloc(r->s, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        r->s = s, r->cap = cap;
    }
    r->s[r->len++] = sample;
    return 0;
}

int ident_group(const uint32_t *samples, const pid_t *pids, const pid_t *ppids, size_t count,
                struct ident_readers *out)
{
    memset(out, 0, sizeof(*out));
    size_t cap = 0, hcap = 64;
    size_t *slot = NULL; /* pid hash -> reader index + 1 */
    int rc = -ENOMEM;
    if (!(slot = calloc(hcap, sizeof(*slot))))
        goto fail;
    for (size_t i = 0; i < count; i++) {
        pid_t pid = pids ? pids[i] : 0;
        size_t h = ((uint32_t)pid * 0x9e3779b1u) & (hcap - 1);
        while (slot[h] && out->r[slot[h] - 1].pid != pid)
            h = (h + 1) & (hcap - 1);
        if (!slot[h]) {
            if (out->nr == cap) {
                size_t nc = cap ? 2 * cap : 8;
                struct ident_reader *r = realloc(out->r, nc * sizeof(*r));
                if (!r)
                    goto fail;
                out->r = r, cap = nc;
            }
            out->r[out->nr] = (struct ident_reader){.pid = pid, .ppid = ppids ? ppids[i] : 0};
            slot[h] = ++out->nr;
            if (2 * out->nr > hcap) { /* rehash */
                size_t nh = 2 * hcap;
                size_t *ns = calloc(nh, sizeof(*ns));
                if (!ns)
                    goto fail;
                for (size_t k = 0; k < out->nr; k++) {
                    size_t g = ((uint32_t)out->r[k].pid * 0x9e3779b1u) & (nh - 1);
                    while (ns[g])
                        g = (g + 1) & (nh - 1);
                    ns[g] = k + 1;
                }
                free(slot);
                slot = ns, hcap = nh;
                h = ((uint32_t)pid * 0x9e3779b1u) & (hcap - 1);
                while (out->r[slot[h] - 1].pid != pid)
                    h = (h + 1) & (hcap - 1);
            }
        }
        if (reader_push(&out->r[slot[h] - 1], samples[i]) < 0)
            goto fail;
        out->opens++;
    }
    free(slot);
    return 0;
fail:
    free(slot);
    ident_readers_free(out);
    return rc;
}

int ident_readers_renumber(const struct ident_readers *rd, const uint32_t *index,
                           struct ident_readers *out)
{
    memset(out, 0, sizeof(*out));
    if (rd->nr && !(out->r = calloc(rd->nr, sizeof(*out->r))))
        return -ENOMEM;
    out->nr = rd->nr;
    out->opens = rd->opens;
    for (size_t i = 0; i < rd->nr; i++) {
        const struct ident_reader *r = &rd->r[i];
        out->r[i] = (struct ident_reader){.pid = r->pid, .ppid = r->ppid, .cap = r->len};
        if (r->len && !(out->r[i].s = malloc(r->len * sizeof(*r->s)))) {
            ident_readers_free(out);
            return -ENOMEM;
        }
        for (size_t k = 0; k < r->len; k++)
            out->r[i].s[k] = index[r->s[k]];
        out->r[i].len = r->len;
    }
    return 0;
}

void ident_readers_free(struct ident_readers *rd)
{
    for (size_t i = 0; rd->r && i < rd->nr; i++)
        free(rd->r[i].s);
    free(rd->r);
    memset(rd, 0, sizeof(*rd));
}
