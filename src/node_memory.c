/* The node's memory (clairfs/node_memory.h): /proc/meminfo and the memory
 * cgroup, read as plain files.  Why a module of its own: the RAM tier's
 * default is decided from these figures (run_config.c), and a test must be
 * able to hand it a machine of 512 GiB under a Slurm cgroup of 64 GiB
 * without having one, which it does by pointing the two roots at a tree it
 * wrote.  Nothing here fails: what cannot be read is unknown (0), and the
 * caller falls back. */
#include "clairfs/node_memory.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number after "KEY" and the separator sep on a line of a key-value
 * file, times scale; 0 when absent. */
static uint64_t keyed_field(const char *path, const char *key, char sep, uint64_t scale)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == sep) {
            v = strtoull(line + klen + 1, NULL, 10) * scale;
            break;
        }
    fclose(f);
    return v;
}

/* "Key:   N kB" of a meminfo-like file, in bytes; 0 when absent. */
static uint64_t meminfo_field(const char *path, const char *key)
{
    return keyed_field(path, key, ':', 1024);
}

/* A file holding one number ("max" and v1's near-2^63 both mean none:
 * UINT64_MAX).  false when the file is absent or holds no number. */
static bool number_file(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof(buf), f) != NULL;
    fclose(f);
    if (!ok)
        return false;
    if (strncmp(buf, "max", 3) == 0) {
        *out = UINT64_MAX;
        return true;
    }
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf)
        return false;
    /* cgroup v1 writes "no limit" as the largest page-aligned long. */
    *out = v >= (1ull << 62) ? UINT64_MAX : (uint64_t)v;
    return true;
}

/* "key N" of a memory.stat file; 0 when absent. */
static uint64_t stat_field(const char *path, const char *key)
{
    return keyed_field(path, key, ' ', 1);
}

/* The memory cgroup's path from PROC/self/cgroup: v1's "N:...memory...:/PATH"
 * when there is one (a hybrid setup keeps the memory controller there),
 * else v2's "0::/PATH".  *v1 says which. */
static bool cgroup_path(const char *proc, char *path, size_t len, bool *v1)
{
    char file[PATH_MAX];
    snprintf(file, sizeof(file), "%s/self/cgroup", proc);
    FILE *f = fopen(file, "re");
    if (!f)
        return false;
    char line[PATH_MAX + 64];
    bool v2_found = false, v1_found = false;
    while (!v1_found && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c2 = '\0';
        if (strcmp(line, "0:") == 0 && c1[1] == '\0') {
            snprintf(path, len, "%s", c2 + 1);
            v2_found = true;
            continue;
        }
        char *save = NULL;
        for (char *t = strtok_r(c1 + 1, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (strcmp(t, "memory") == 0) {
                snprintf(path, len, "%s", c2 + 1);
                v1_found = true;
            }
    }
    fclose(f);
    *v1 = v1_found;
    return v1_found || v2_found;
}

/* One cgroup directory: its limit and its room, when it has a limit. */
static bool cgroup_limit(const char *dir, bool v1, uint64_t *max, uint64_t *room)
{
    char file[2 * PATH_MAX + 64];
    uint64_t limit, usage = 0;
    snprintf(file, sizeof(file), "%s/%s", dir, v1 ? "memory.limit_in_bytes" : "memory.max");
    if (!number_file(file, &limit) || limit == UINT64_MAX)
        return false;
    snprintf(file, sizeof(file), "%s/%s", dir, v1 ? "memory.usage_in_bytes" : "memory.current");
    (void)number_file(file, &usage);
    snprintf(file, sizeof(file), "%s/memory.stat", dir);
    uint64_t cache = stat_field(file, v1 ? "cache" : "file");
    uint64_t held = usage > cache ? usage - cache : 0;
    *max = limit;
    *room = held < limit ? limit - held : 0;
    return true;
}

void cfs_node_memory_read(const char *proc, const char *cgroup_root, struct cfs_node_memory *out)
{
    memset(out, 0, sizeof(*out));
    char file[PATH_MAX];
    snprintf(file, sizeof(file), "%s/meminfo", proc);
    out->total = meminfo_field(file, "MemTotal");
    out->available = meminfo_field(file, "MemAvailable");

    char path[PATH_MAX] = "";
    bool v1 = false;
    if (!cgroup_path(proc, path, sizeof(path), &v1) || path[0] != '/')
        return;
    /* From the process's cgroup up to the root: the tightest room binds. */
    for (;;) {
        char dir[2 * PATH_MAX];
        snprintf(dir, sizeof(dir), "%s%s%s", cgroup_root, v1 ? "/memory" : "",
                 strcmp(path, "/") == 0 ? "" : path);
        uint64_t max, room;
        if (cgroup_limit(dir, v1, &max, &room) && (!out->limited || room < out->cgroup_room)) {
            out->limited = true;
            out->cgroup_max = max;
            out->cgroup_room = room;
            snprintf(out->cgroup, sizeof(out->cgroup), "%s", path);
        }
        char *slash = strrchr(path, '/');
        if (!slash || strcmp(path, "/") == 0)
            break;
        if (slash == path)
            path[1] = '\0';
        else
            *slash = '\0';
    }
}

uint64_t cfs_node_memory_usable(const struct cfs_node_memory *m)
{
    uint64_t v = m->available;
    if (m->limited && (v == 0 || m->cgroup_room < v))
        v = m->cgroup_room;
    return v;
}
