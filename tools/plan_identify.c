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
 * sample of the index order.  Empty lines are skipped.  Errors name the
 * file and line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The sample of a relative path, or CFS_NO_SAMPLE. */
static uint32_t resolve(const struct cfs_catalog *cat, char *path)
{
    cfs_id at = 0;
    for (char *save = NULL, *part = strtok_r(path, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (strcmp(part, ".") == 0)
            continue;
        at = cfs_catalog_lookup(cat, at, part);
        if (at == CFS_ID_NONE)
            return CFS_NO_SAMPLE;
    }
    return cfs_catalog_entry(cat, at)->sample;
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
                      struct recorded *r)
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
        uint32_t sample = copy ? resolve(cat, copy) : CFS_NO_SAMPLE;
        free(copy);
        if (sample == CFS_NO_SAMPLE) {
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

static void print_epoch(void *arg, const struct cfs_identified *id)
{
    (void)arg;
    printf("%s\n", id->text);
}

int plan_identify(const char *prog, const char *file, const struct cfs_catalog *cat,
                  struct cfs_identify_params *p)
{
    struct recorded r = {0};
    int status = 2;
    if (read_opens(prog, file, cat, &r) < 0)
        goto out;
    p->n = cfs_catalog_sample_count(cat);
    struct cfs_identified id;
    char err[512] = "";
    int rc = cfs_identify_offline(p, r.s, r.pid, r.ppid, r.len, &id, err, sizeof(err));
    if (rc == -ENOENT) {
        /* No one order: maybe one per epoch (lines printed as found). */
        struct cfs_identified each;
        int erc = cfs_identify_offline_epochs(p, r.s, r.pid, r.ppid, r.len, print_epoch, NULL,
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
        printf("%s\n", id.text);
        status = fflush(stdout) == 0 ? 0 : 2;
    } else if (rc == -ENOENT) {
        printf("%s\n", id.text); /* an answer, not an error */
        status = 1;
    } else {
        fprintf(stderr, "%s: %s\n", prog, err);
    }
out:
    free(r.s);
    free(r.pid);
    free(r.ppid);
    return status;
}
