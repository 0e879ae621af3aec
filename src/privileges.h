/* What an ordinary user may do (privileges.c). */
#ifndef CLAIRFS_PRIVILEGES_H
#define CLAIRFS_PRIVILEGES_H

#include <stdbool.h>

#include "clairfs/options.h"

/* Each option the user's privileges do not allow is logged once with what
 * the mount does instead (allow_other is dropped where /etc/fuse.conf does
 * not allow it).  Returns whether the order's search must stay at idle
 * priority (no CAP_SYS_NICE, no RLIMIT_NICE that lets it back). */
bool cfs_privileges_check(struct cfs_options *o);

#endif
