/* The node's memory, as the RAM tier's default needs it.
 *
 * `clairfs SOURCE MOUNTPOINT` with no ram= has to size its RAM tier from
 * the machine: a training node has hundreds of GiB, a laptop a few, and a
 * Slurm job may use only what its cgroup's memory.max allows, however much
 * the node has.  This module reads those figures and nothing else; the rule
 * that turns them into a tier (what share, what cap) is the run
 * configuration's (run_config.h), so that it is decided in one place.
 *
 * Two sources, both read-only files the kernel keeps for any user:
 *  - /proc/meminfo: MemTotal and MemAvailable (the kernel's estimate of
 *    what can be allocated without swapping: free memory plus the page
 *    cache and slab it can reclaim).
 *  - the memory cgroup of this process (/proc/self/cgroup), v2 (memory.max,
 *    memory.current, memory.stat's `file`) or v1 (memory.limit_in_bytes,
 *    memory.usage_in_bytes, memory.stat's `cache`), and every ancestor up to
 *    the root: the tightest limit binds.  A cgroup's room is its limit less
 *    what it holds besides page cache (page cache is reclaimed at the limit
 *    before anything is killed, so it counts as room).
 *
 * The roots are parameters so that a test can point them at a tree of its
 * own; the daemon passes "/proc" and "/sys/fs/cgroup".  A file that is
 * missing or unreadable leaves its figure unknown (0): never an error. */
#ifndef CLAIRFS_NODE_MEMORY_H
#define CLAIRFS_NODE_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

struct cfs_node_memory {
    uint64_t total;        /* MemTotal, bytes; 0: unknown */
    uint64_t available;    /* MemAvailable, bytes; 0: unknown */
    bool limited;          /* a cgroup on the way to the root has a memory limit */
    uint64_t cgroup_max;   /* the tightest such limit, bytes */
    uint64_t cgroup_room;  /* that cgroup's limit less its usage besides page cache */
    char cgroup[256];      /* the cgroup whose limit binds, as /proc/self/cgroup names it */
};

/* Fills *out from PROC/meminfo, PROC/self/cgroup and the cgroup files under
 * CGROUP_ROOT (v2: CGROUP_ROOT/PATH; v1: CGROUP_ROOT/memory/PATH). */
void cfs_node_memory_read(const char *proc, const char *cgroup_root, struct cfs_node_memory *out);

/* What this process may still use: MemAvailable, or the cgroup's room when
 * smaller.  0 when neither is known. */
uint64_t cfs_node_memory_usable(const struct cfs_node_memory *m);

#endif
