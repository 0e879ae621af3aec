/* Fuzz target: writes to MOUNTPOINT/.clairfs/control, through the FUSE-free
 * ctl module exactly as fs.c hands them over (one buffer per write).
 *
 * The first input byte picks the handler's behaviour (accept everything,
 * or fail the k-th command); the rest is the write.  Invariants, from
 * include/clairfs/ctl.h: a write returns its length, -EINVAL with nothing
 * applied, or the handler's error with exactly the commands before it
 * applied; every applied command re-parses from its own line; an applied
 * epoch command shows as clairfs_epoch. */
#include "fuzz_common.h"

#include "clairfs/ctl.h"
#include "clairfs/metrics.h"

struct sink {
    unsigned calls;
    unsigned fail_at; /* 0: never */
    struct cfs_ctl_cmd last;
    bool have_epoch;
    uint64_t epoch;
};

static int handler(void *arg, const struct cfs_ctl_cmd *cmd)
{
    struct sink *s = arg;
    FUZZ_CHECK(cmd->kind == CFS_CTL_CMD_EPOCH || cmd->kind == CFS_CTL_CMD_SEED);
    if (cmd->kind == CFS_CTL_CMD_EPOCH)
        FUZZ_CHECK(cmd->value <= UINT32_MAX);
    s->calls++;
    if (s->fail_at && s->calls == s->fail_at)
        return -EBUSY;
    s->last = *cmd;
    if (cmd->kind == CFS_CTL_CMD_EPOCH) {
        s->have_epoch = true;
        s->epoch = cmd->value;
    }
    return 0;
}

/* Lines that are not blank (blanks, tabs and '\r' only), as ctl_write
 * counts commands. */
static unsigned count_commands(const char *buf, size_t len)
{
    unsigned n = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        for (size_t i = pos; i < end; i++) {
            if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r') {
                n++;
                break;
            }
        }
        pos = end + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > CFS_CTL_MAX_WRITE + 16)
        return 0;
    struct sink sink = {.fail_at = data[0] & 7};
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;

    struct cfs_metrics *m = malloc(sizeof(*m));
    struct cfs_ctl *ctl = NULL;
    FUZZ_CHECK(m != NULL);
    cfs_metrics_init(m);
    FUZZ_CHECK(cfs_ctl_create(m, &ctl) == 0);
    if (data[0] & 8)
        cfs_ctl_set_handler(ctl, handler, &sink);
    cfs_metrics_set(m, CFS_M_EPOCH, 777);

    int rc = cfs_ctl_write(ctl, buf, len);
    unsigned ncmd = count_commands(buf, len);
    if (rc == -EINVAL) {
        FUZZ_CHECK(sink.calls == 0);
        FUZZ_CHECK(cfs_metrics_get(m, CFS_M_EPOCH) == 777);
    } else if (rc == -EBUSY) {
        FUZZ_CHECK((data[0] & 8) && sink.fail_at && sink.calls == sink.fail_at);
        FUZZ_CHECK(sink.calls <= ncmd);
    } else {
        FUZZ_CHECK(rc >= 0 && (size_t)rc == len);
        FUZZ_CHECK(len > 0 && len <= CFS_CTL_MAX_WRITE && ncmd > 0);
        if (data[0] & 8) {
            FUZZ_CHECK(sink.calls == ncmd);
            FUZZ_CHECK(cfs_metrics_get(m, CFS_M_EPOCH) == (sink.have_epoch ? sink.epoch : 777));
        }
    }

    /* Every line on its own through the parser. */
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        struct cfs_ctl_cmd cmd;
        int prc = cfs_ctl_parse(buf + pos, end - pos, &cmd);
        FUZZ_CHECK(prc == 0 || prc == -EINVAL);
        if (prc == 0 && cmd.kind == CFS_CTL_CMD_EPOCH)
            FUZZ_CHECK(cmd.value <= UINT32_MAX);
        pos = end + 1;
    }

    char *name = fuzz_cstr((const uint8_t *)buf, len < 64 ? len : 64);
    int f = cfs_ctl_file_lookup(name);
    FUZZ_CHECK(f == -ENOENT || (f >= 0 && f < CFS_CTL_NFILES &&
                                strcmp(cfs_ctl_file_name((enum cfs_ctl_file)f), name) == 0));
    free(name);

    for (int i = 0; i < CFS_CTL_NFILES; i++) {
        char *out = NULL;
        size_t olen = 0;
        int r = cfs_ctl_render(ctl, (enum cfs_ctl_file)i, &out, &olen);
        if (i == CFS_CTL_CONTROL) {
            FUZZ_CHECK(r == -EACCES);
        } else {
            FUZZ_CHECK(r == 0 && out && strlen(out) == olen);
            free(out);
        }
    }
    cfs_ctl_destroy(ctl);
    free(m);
    return 0;
}
