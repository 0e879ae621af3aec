/* The daemon's command line (cmdline.c): SOURCE, MOUNTPOINT, -f, -d, -h,
 * -V and the -o list, split between clairfs's own options (options.h), the
 * ones the kernel or libfuse's mount take (handed on in the fuse_args), and
 * fstab's (accepted and dropped, so that an fstab line mounts). */
#ifndef CLAIRFS_CMDLINE_H
#define CLAIRFS_CMDLINE_H

#include <fuse_opt.h>
#include <stdbool.h>
#include <stddef.h>

#include "clairfs/options.h"

#define CFS_USAGE "usage: clairfs [-f] [-d] [-o OPT[,OPT...]] SOURCE MOUNTPOINT"

struct cmdline {
    struct cfs_options opts;
    char *source;
    char *mountpoint;
    int nargs; /* positional arguments seen */
    bool foreground, debug, help, version;
    char *fsname, *subtype; /* given by the user, else ours */
    char err[512];
};

/* Parses args into cl (its opts initialised by the caller): 0, 1 when
 * --help or --version was printed (exit 0), or -1 with a one-line reason in
 * err.  What libfuse's mount takes is left in args. */
int cfs_cmdline_parse(struct fuse_args *args, struct cmdline *cl, char *err, size_t errlen);
/* Frees what cfs_cmdline_parse stored (not the options). */
void cfs_cmdline_free(struct cmdline *cl);

#endif
