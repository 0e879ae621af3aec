/* The control namespace MOUNTPOINT/.clairfs/ (docs/design.md, "The
 * interface contract", ".clairfs/"), without FUSE:
 * which files exist, what reading them shows, and what writing `control`
 * does.  The FUSE layer (fs_ctl.c) only maps inodes and file handles onto this,
 * so everything here is unit-tested and can be fuzzed.
 *
 *   ready    exists once the daemon says so (cfs_ctl_set_ready); empty
 *   metrics  Prometheus text, rendered fresh at each open
 *   stats    the same for people, one screen
 *   control  write-only for the mount's owner: one command a line,
 *            "epoch N" or "seed N"; anything else is EINVAL
 *
 * A write is all or nothing: every line is parsed before the first command
 * is delivered.  Commands go to a handler that the prefetcher installs; with
 * no handler an epoch command still updates clairfs_epoch. */
#ifndef CLAIRFS_CTL_H
#define CLAIRFS_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clairfs/metrics.h"

#define CFS_CTL_DIRNAME ".clairfs"
/* Longest write to `control` that is accepted. */
#define CFS_CTL_MAX_WRITE 4096

enum cfs_ctl_file {
    CFS_CTL_READY = 0,
    CFS_CTL_METRICS,
    CFS_CTL_STATS,
    CFS_CTL_CONTROL,
    CFS_CTL_NFILES
};

const char *cfs_ctl_file_name(enum cfs_ctl_file f);
/* The file called name, or -ENOENT. */
int cfs_ctl_file_lookup(const char *name);
/* S_IFREG plus permission bits: 0444 for the readable files, 0200 for
 * control (the owner is the mount's owner). */
uint32_t cfs_ctl_file_mode(enum cfs_ctl_file f);

enum cfs_ctl_cmd_kind {
    CFS_CTL_CMD_EPOCH = 0,
    CFS_CTL_CMD_SEED,
};

struct cfs_ctl_cmd {
    enum cfs_ctl_cmd_kind kind;
    uint64_t value; /* epoch <= UINT32_MAX */
};

/* One command line (no newline; surrounding blanks and a trailing '\r' are
 * allowed).  Returns 0 or -EINVAL. */
int cfs_ctl_parse(const char *line, size_t len, struct cfs_ctl_cmd *cmd);

/* Called for every command, in order, under the ctl's lock.  Returns 0 or
 * -errno, which becomes the writer's error. */
typedef int (*cfs_ctl_handler_fn)(void *arg, const struct cfs_ctl_cmd *cmd);

struct cfs_ctl;

int cfs_ctl_create(struct cfs_metrics *metrics, struct cfs_ctl **out);
void cfs_ctl_destroy(struct cfs_ctl *ctl);

void cfs_ctl_set_handler(struct cfs_ctl *ctl, cfs_ctl_handler_fn fn, void *arg);
void cfs_ctl_set_ready(struct cfs_ctl *ctl, bool ready);
bool cfs_ctl_is_ready(const struct cfs_ctl *ctl);

/* A write to `control`: returns len when every command was applied,
 * -EINVAL for a bad, empty or oversized write (nothing applied), or the
 * handler's error (commands before the failing one stay applied). */
int cfs_ctl_write(struct cfs_ctl *ctl, const char *buf, size_t len);

/* The contents of a readable file as of now, malloc'd (*out, *len).
 * Returns 0, -ENOMEM, or -EACCES for control. */
int cfs_ctl_render(struct cfs_ctl *ctl, enum cfs_ctl_file f, char **out, size_t *len);

#endif
