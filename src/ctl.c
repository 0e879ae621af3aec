/* The control namespace's contents (clairfs/ctl.h): the names and modes of
 * the files in .clairfs/, the text each shows, and the commands `control`
 * takes.  Kept free of FUSE so that the unit tests and the fuzzer drive it
 * exactly as the FUSE layer (src/fs_ctl.c) does, one buffer per write.
 *
 * A write is parsed whole before its first command is delivered, so that a
 * typo on the third line does not leave the first two applied; the lock
 * only keeps two writers' commands from interleaving.  Each text is
 * rendered from one metrics snapshot (metrics.c), so that a reader sees
 * figures of one instant; ready is a flag the daemon sets, read by every
 * lookup without the lock. */
#include "clairfs/ctl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clairfs/options.h"

struct cfs_ctl {
    struct cfs_metrics *metrics;
    _Atomic bool ready;
    /* Serialises writers, so that two writes' commands never interleave. */
    pthread_mutex_t lock;
    cfs_ctl_handler_fn handler;
    void *handler_arg;
};

static const char *const file_names[CFS_CTL_NFILES] = {
    [CFS_CTL_READY] = "ready",
    [CFS_CTL_METRICS] = "metrics",
    [CFS_CTL_STATS] = "stats",
    [CFS_CTL_CONTROL] = "control",
};

const char *cfs_ctl_file_name(enum cfs_ctl_file f)
{
    return (unsigned)f < CFS_CTL_NFILES ? file_names[f] : NULL;
}

int cfs_ctl_file_lookup(const char *name)
{
    for (int i = 0; i < CFS_CTL_NFILES; i++)
        if (strcmp(name, file_names[i]) == 0)
            return i;
    return -ENOENT;
}

uint32_t cfs_ctl_file_mode(enum cfs_ctl_file f)
{
    return S_IFREG | (f == CFS_CTL_CONTROL ? 0200u : 0444u);
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int cfs_ctl_parse(const char *line, size_t len, struct cfs_ctl_cmd *cmd)
{
    static const struct {
        const char *word;
        enum cfs_ctl_cmd_kind kind;
        uint64_t max;
    } words[] = {
        {"epoch", CFS_CTL_CMD_EPOCH, UINT32_MAX},
        {"seed", CFS_CTL_CMD_SEED, UINT64_MAX},
    };
    size_t b = 0, e = len;
    if (e > 0 && line[e - 1] == '\r')
        e--;
    while (b < e && is_blank(line[b]))
        b++;
    while (e > b && is_blank(line[e - 1]))
        e--;

    size_t wend = b;
    while (wend < e && !is_blank(line[wend]))
        wend++;
    size_t vbeg = wend;
    while (vbeg < e && is_blank(line[vbeg]))
        vbeg++;
    if (vbeg == wend || vbeg == e)
        return -EINVAL; /* no blank after the word, or no value */

    char value[24];
    if (e - vbeg >= sizeof(value) || memchr(line + vbeg, '\0', e - vbeg))
        return -EINVAL;
    memcpy(value, line + vbeg, e - vbeg);
    value[e - vbeg] = '\0';

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i].word) != wend - b || memcmp(words[i].word, line + b, wend - b) != 0)
            continue;
        uint64_t v;
        if (cfs_parse_u64(value, words[i].max, &v) < 0)
            return -EINVAL;
        cmd->kind = words[i].kind;
        cmd->value = v;
        return 0;
    }
    return -EINVAL;
}

int cfs_ctl_create(struct cfs_metrics *metrics, struct cfs_ctl **out)
{
    struct cfs_ctl *ctl = calloc(1, sizeof(*ctl));
    if (!ctl)
        return -ENOMEM;
    ctl->metrics = metrics;
    atomic_init(&ctl->ready, false);
    pthread_mutex_init(&ctl->lock, NULL);
    *out = ctl;
    return 0;
}

void cfs_ctl_destroy(struct cfs_ctl *ctl)
{
    if (!ctl)
        return;
    pthread_mutex_destroy(&ctl->lock);
    free(ctl);
}

void cfs_ctl_set_handler(struct cfs_ctl *ctl, cfs_ctl_handler_fn fn, void *arg)
{
    pthread_mutex_lock(&ctl->lock);
    ctl->handler = fn;
    ctl->handler_arg = arg;
    pthread_mutex_unlock(&ctl->lock);
}

void cfs_ctl_set_ready(struct cfs_ctl *ctl, bool ready)
{
    atomic_store(&ctl->ready, ready);
}

bool cfs_ctl_is_ready(const struct cfs_ctl *ctl)
{
    return atomic_load(&((struct cfs_ctl *)ctl)->ready);
}

#define MAX_CMDS 64

int cfs_ctl_write(struct cfs_ctl *ctl, const char *buf, size_t len)
{
    struct cfs_ctl_cmd cmds[MAX_CMDS];
    size_t n = 0;
    if (len > CFS_CTL_MAX_WRITE)
        return -EINVAL;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        size_t b = pos;
        while (b < end && (is_blank(buf[b]) || buf[b] == '\r'))
            b++;
        if (b < end) { /* blank lines are allowed, e.g. a trailing newline */
            if (n == MAX_CMDS || cfs_ctl_parse(buf + pos, end - pos, &cmds[n]) < 0)
                return -EINVAL;
            n++;
        }
        pos = end + 1;
    }
    if (n == 0)
        return -EINVAL;

    int rc = 0;
    pthread_mutex_lock(&ctl->lock);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ctl->handler)
            rc = ctl->handler(ctl->handler_arg, &cmds[i]);
        if (rc == 0 && cmds[i].kind == CFS_CTL_CMD_EPOCH && ctl->metrics)
            cfs_metrics_set(ctl->metrics, CFS_M_EPOCH, cmds[i].value);
    }
    pthread_mutex_unlock(&ctl->lock);
    return rc < 0 ? rc : (int)len;
}

int cfs_ctl_render(struct cfs_ctl *ctl, enum cfs_ctl_file f, char **out, size_t *len)
{
    struct cfs_metrics_snapshot snap;
    switch (f) {
    case CFS_CTL_READY:
        *out = strdup("");
        *len = 0;
        return *out ? 0 : -ENOMEM;
    case CFS_CTL_METRICS:
    case CFS_CTL_STATS:
        if (ctl->metrics)
            cfs_metrics_snapshot(ctl->metrics, &snap);
        else
            memset(&snap, 0, sizeof(snap));
        return f == CFS_CTL_METRICS ? cfs_metrics_render_prometheus(&snap, out, len)
                                    : cfs_metrics_render_stats(&snap, out, len);
    case CFS_CTL_CONTROL:
    case CFS_CTL_NFILES:
        break;
    }
    return -EACCES;
}
