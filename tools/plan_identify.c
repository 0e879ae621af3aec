/* clairfs-plan --identify FILE: which torch order a recorded sequence of
 * opens is, by the same identification the mount runs (clairfs/identify.h),
 * synchronously.  One line, the identification; or, for a record that no
 * one order explains but whose epochs are each a fresh generator's first
 * randperm (torch-global without a seed: manual_seed, a model built,
 * DataLoader(shuffle=True) without a generator), a line per epoch naming
 * its private seed, as the mount learns them one epoch at a time.
 *
 * FILE holds one open a line, in open order, in one of two forms, the first
 * line deciding for the whole file:
 *
 *     PATH              the relative path of the opened file (one reader)
 *     PID PPID PATH     the opener's pid and parent pid, decimal, one blank
 *                       each, then the path (every byte to the end of line)
 *
 * PATH is relative to SOURCE (a leading '/' is ignored) and must be a
 * sample of the index order (with order=KIND:ROOT, a file of the source
 * outside ROOT is left out, as the mount leaves it).  Empty lines are
 * skipped.  Errors name the
 * file and line.
 *
 * The dataset root is the mount's (clairfs/roots.h): with the default
 * order, the folder most of the opens are rooted at (ImageFolder(SOURCE/
 * train) beside a validation folder), its opens numbered as its samples
 * and the others left out; with order=KIND:ROOT, ROOT.  A root below
 * SOURCE is named before the line ("train: torch-ddp seed=..."), as the
 * stats' roots: line names it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clairfs/roots.h"
#include "plan_identify.h"

struct recorded {
    uint32_t *s;
    pid_t *pid, *ppid;
    size_t len, cap;
};

static int grow(struct recorded *r)
{
    size_t cap = r->cap ? 2 * r->cap : 4096;
    uint32_t *s = realloc(r->s, cap * sizeof(*s));
    if (s)
        r->s = s;
    pid_t *pid = realloc(r->pid, cap * sizeof(*pid));
    if (pid)
        r->pid = pid;
    pid_t *ppid = realloc(r->ppid, cap * sizeof(*ppid));
    if (ppid)
        r->ppid = ppid;
    if (!s || !pid || !ppid)
        return -ENOMEM;
    r->cap = cap;
    return 0;
}

/* The sample of a relative path, or CFS_NO_SAMPLE; *found: the catalog
 * holds the path (a file outside the order's root is, with no sample). */
static uint32_t resolve(const struct cfs_catalog *cat, char *path, bool *found)
{
    cfs_id at = 0;
    *found = false;
    for (char *save = NULL, *part = strtok_r(path, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (strcmp(part, ".") == 0)
            continue;
        at = cfs_catalog_lookup(cat, at, part);
        if (at == CFS_ID_NONE)
            return CFS_NO_SAMPLE;
    }
    const struct cfs_entry *e = cfs_catalog_entry(cat, at);
    *found = at != 0 && S_ISREG(e->mode);
    return e->sample;
}

/* "PID PPID PATH": true with the two numbers and where PATH starts. */
static bool pid_form(const char *line, long *pid, long *ppid, const char **path)
{
    char *end;
    if (line[0] < '0' || line[0] > '9')
        return false;
    *pid = strtol(line, &end, 10);
    if (*end != ' ' || end[1] < '0' || end[1] > '9')
        return false;
    *ppid = strtol(end + 1, &end, 10);
    if (*end != ' ' || end[1] == '\0' || *pid <= 0 || *ppid < 0)
        return false;
    *path = end + 1;
    return true;
}

static int read_opens(const char *prog, const char *file, const struct cfs_catalog *cat,
                      bool registered, struct recorded *r)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "%s: --identify %s: %s\n", prog, file, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int form = -1, rc = 0; /* form: 0 paths, 1 pids */
    while (rc == 0 && (got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (got > 0 && line[got - 1] == '\n')
            line[--got] = '\0';
        if (got == 0)
            continue;
        long pid = 0, ppid = 0;
        const char *path = line;
        bool pids = pid_form(line, &pid, &ppid, &path);
        if (form < 0)
            form = pids;
        if (form == 1 && !pids) {
            fprintf(stderr, "%s: %s:%zu: expected \"PID PPID PATH\" as on line 1\n", prog, file,
                    lineno);
            rc = -1;
            break;
        }
        if (form == 0)
            path = line, pid = 0, ppid = 0; /* a path that starts like "12 34 " */
        char *copy = strdup(path);
        bool found = false;
        uint32_t sample = copy ? resolve(cat, copy, &found) : CFS_NO_SAMPLE;
        free(copy);
        if (sample == CFS_NO_SAMPLE && found && registered) {
            continue; /* outside order=KIND:ROOT's root: the mount does not observe it */
        } else if (sample == CFS_NO_SAMPLE) {
            fprintf(stderr, "%s: %s:%zu: %s: not a sample of the index order\n", prog, file, lineno,
                    path);
            rc = -1;
        } else if (r->len == r->cap && grow(r) < 0) {
            fprintf(stderr, "%s: %s: out of memory\n", prog, file);
            rc = -1;
        } else {
            r->s[r->len] = sample;
            r->pid[r->len] = (pid_t)pid;
            r->ppid[r->len++] = (pid_t)ppid;
        }
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "%s: --identify %s: read error\n", prog, file);
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

#define ROOTS_COUNTED 64

/* The root most opens are rooted at, by the mount's rule (a folder below
 * it when its first ROOTS_COUNTED opens all lie in one: cfs_roots_narrow,
 * *order_name then that folder's order); the opens below it renumbered as
 * its samples, the others dropped; *n its samples and name its path (""
 * and nothing changed for the mount's own order); its libraries' orders
 * into orders.  0 or -ENOMEM. */
static int find_root(const struct cfs_catalog *cat, struct recorded *r, uint64_t *n, char *name,
                     size_t len, struct cfs_root_orders *orders, const char **order_name)
{
    cfs_id dir[ROOTS_COUNTED], first[ROOTS_COUNTED];
    size_t count[ROOTS_COUNTED], nd = 0, best = 0;
    for (size_t i = 0; i < r->len; i++) {
        cfs_id e = cfs_catalog_sample_entry(cat, r->s[i]), d = cfs_roots_root_of(cat, e);
        size_t k = 0;
        while (k < nd && dir[k] != d)
            k++;
        if (k == nd && nd == ROOTS_COUNTED)
            continue; /* a 65th root: the others are more than enough to choose */
        if (k == nd) {
            dir[nd] = d, first[nd] = e, count[nd++] = 0;
        }
        if (++count[k] > count[best])
            best = k;
    }
    name[0] = '\0';
    *order_name = NULL;
    uint64_t all = cfs_catalog_sample_count(cat);
    *n = all;
    uint32_t *map = NULL, *local = malloc((all ? all : 1) * sizeof(*local));
    if (!local)
        return -ENOMEM;
    enum cfs_order kind = CFS_ORDER_IMAGEFOLDER;
    cfs_id root = nd && dir[best] != CFS_ID_NONE
                      ? cfs_roots_resolve(cat, first[best], &map, n, &kind)
                      : CFS_ID_NONE;
    if (root != CFS_ID_NONE && kind != CFS_ORDER_IMAGEFOLDER)
        *order_name = cfs_order_name(kind);
    for (int pass = 0; pass < 2; pass++) {
        memset(local, 0xff, all * sizeof(*local));
        for (uint64_t i = 0; i < *n; i++)
            local[map ? map[i] : i] = (uint32_t)i;
        if (pass == 1)
            break;
        /* its first opens all in one folder below it: that folder */
        cfs_id head[ROOTS_COUNTED];
        size_t nh = 0;
        for (size_t i = 0; i < r->len && nh < ROOTS_COUNTED; i++)
            if (local[r->s[i]] != UINT32_MAX)
                head[nh++] = cfs_catalog_sample_entry(cat, r->s[i]);
        uint32_t *fmap;
        uint64_t fn;
        cfs_id f = nh == ROOTS_COUNTED
                       ? cfs_roots_narrow(cat, root, head, nh, &fmap, &fn, &kind)
                       : CFS_ID_NONE;
        if (f == CFS_ID_NONE)
            break;
        free(map);
        map = fmap, *n = fn, root = f;
        *order_name = cfs_order_name(kind);
    }
    int rc = cfs_root_orders_build(cat, root == CFS_ID_NONE ? 0 : root, map, *n, orders);
    if (rc == 0 && map) {
        size_t kept = 0;
        for (size_t i = 0; i < r->len; i++) {
            if (local[r->s[i]] == UINT32_MAX)
                continue; /* another root's: a validation pass, another job */
            r->s[kept] = local[r->s[i]];
            r->pid[kept] = r->pid[i];
            r->ppid[kept++] = r->ppid[i];
        }
        r->len = kept;
        if (cfs_catalog_path(cat, root, name, len) < 0)
            snprintf(name, len, "%s", cfs_catalog_name(cat, root));
    }
    free(map);
    free(local);
    return rc;
}

static void print_epoch(void *arg, const struct cfs_identified *id)
{
    const char *root = arg;
    printf("%s%s%s\n", root, root[0] ? ": " : "", id->text);
}

int plan_identify(const char *prog, const char *file, const struct cfs_catalog *cat,
                  const char *root, struct cfs_identify_params *p)
{
    struct recorded r = {0};
    struct cfs_root_orders orders = {0};
    int status = 2;
    char name[256];
    if (read_opens(prog, file, cat, root && root[0], &r) < 0)
        goto out;
    p->n = cfs_catalog_sample_count(cat);
    snprintf(name, sizeof(name), "%s", root ? root : "");
    const char *first_order = NULL;
    if (!root && find_root(cat, &r, &p->n, name, sizeof(name), &orders, &first_order) < 0) {
        fprintf(stderr, "%s: --identify %s: out of memory\n", prog, file);
        goto out;
    }
    p->orders = orders.count ? (const uint32_t *const *)orders.index : NULL;
    p->order_names = orders.name;
    p->norders = orders.count;
    p->order_name = first_order;
    struct cfs_identified id;
    char err[512] = "";
    int rc = cfs_identify_offline(p, r.s, r.pid, r.ppid, r.len, &id, err, sizeof(err));
    if (rc == -ENOENT) {
        /* No one order: maybe one per epoch (lines printed as found), in
         * the root's own order (as the mount learns them). */
        p->orders = NULL, p->norders = 0;
        struct cfs_identified each;
        int erc = cfs_identify_offline_epochs(p, r.s, r.pid, r.ppid, r.len, print_epoch, name,
                                              &each, err, sizeof(err));
        if (erc > 0) {
            status = fflush(stdout) == 0 ? 0 : 2;
            goto out;
        }
        if (erc == -ENOENT && each.per_epoch_global)
            id = each; /* epochs identified, then one that is not: its text */
        else if (erc != -ENOENT)
            rc = erc;
    }
    if (rc == 0) {
        print_epoch(name, &id);
        status = fflush(stdout) == 0 ? 0 : 2;
    } else if (rc == -ENOENT) {
        print_epoch(name, &id); /* an answer, not an error */
        status = 1;
    } else {
        fprintf(stderr, "%s: %s\n", prog, err);
    }
out:
    p->orders = NULL, p->norders = 0, p->order_name = NULL;
    cfs_root_orders_free(&orders);
    free(r.s);
    free(r.pid);
    free(r.ppid);
    return status;
}
