/* Scanning SOURCE into the catalog.
 *
 * Place in the layer order (src/catalog_i.h): layer 2.  It fills the
 * entries through the structure's append (catalog_table.c); catalog.c
 * calls it.
 *
 * Breadth first: directory i is read when the loop over ids reaches it, its
 * entries are appended at the end, then that range is sorted by name, so a
 * directory's children get contiguous ids in bytewise name order and the
 * ids follow from the tree alone (the same tree gives the same ids on every
 * node, whatever order readdir returns).
 *
 * Symbolic links are followed like Python's os.walk(followlinks=True): a
 * link to a file or directory takes the target's type and attributes, and a
 * linked directory is scanned under the link's name.  A link whose target
 * directory is the directory holding it or one of its ancestors (same
 * st_dev/st_ino) would make the tree infinite; it stays a symlink, as does a
 * broken link, with that ancestor in its entry's loop_dir: Python's is_dir()
 * says True for it, so os.walk lists it among the directories, not the
 * files, and the orders (which may be built long after the scan, from a
 * stored copy) need to tell it from a broken link.  Entries that vanish between readdir and stat, and
 * directories that cannot be opened, are skipped and counted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog_i.h"

struct devino {
    uint64_t dev, ino;
};

struct scan {
    struct cfs_catalog *c;
    struct devino *di; /* per id; set for directories */
    uint32_t side_cap;
    int srcfd;
    char path[PATH_MAX];
};

static int side_grow(struct scan *s)
{
    if (s->c->cap <= s->side_cap)
        return 0;
    uint32_t cap = s->c->cap;
    struct devino *di = realloc(s->di, (size_t)cap * sizeof(*di));
    if (!di)
        return -ENOMEM;
    s->di = di;
    s->side_cap = cap;
    return 0;
}

static int append(struct scan *s, const char *name, size_t len, const struct stat *st, cfs_id parent,
                  cfs_id loop_dir)
{
    int64_t id = cfs_catalog_append(s->c, name, len, st, parent);
    if (id < 0)
        return (int)id;
    int rc = side_grow(s);
    if (rc < 0)
        return rc;
    s->di[id].dev = st->st_dev;
    s->di[id].ino = st->st_ino;
    s->c->e[id].loop_dir = loop_dir;
    return 0;
}

/* The ancestor of dir (itself included) that st is, or CFS_ID_NONE. */
static cfs_id ancestor(const struct scan *s, cfs_id dir, const struct stat *st)
{
    for (cfs_id a = dir;; a = s->c->e[a].parent) {
        if (s->di[a].dev == (uint64_t)st->st_dev && s->di[a].ino == (uint64_t)st->st_ino)
            return a;
        if (a == 0)
            return CFS_ID_NONE;
    }
}

static int cmp_name(const void *a, const void *b, void *arg)
{
    const struct cfs_catalog *c = arg;
    return strcmp(c->names + c->e[*(const uint32_t *)a].name_off,
                  c->names + c->e[*(const uint32_t *)b].name_off);
}

/* Sort ids [first, c->n) by name, carrying the side arrays along. */
static int sort_range(struct scan *s, uint32_t first)
{
    struct cfs_catalog *c = s->c;
    uint32_t k = c->n - first;
    if (k < 2)
        return 0;
    int rc = -ENOMEM;
    uint32_t *perm = malloc(k * sizeof(*perm));
    struct cfs_entry *te = malloc(k * sizeof(*te));
    struct devino *td = malloc(k * sizeof(*td));
    if (!perm || !te || !td)
        goto out;
    bool sorted = true;
    for (uint32_t i = 0; i < k; i++) {
        perm[i] = first + i;
        if (i && sorted && cmp_name(&perm[i - 1], &perm[i], c) > 0)
            sorted = false;
    }
    if (!sorted) {
        qsort_r(perm, k, sizeof(*perm), cmp_name, c);
        for (uint32_t i = 0; i < k; i++) {
            /* memcpy, not assignment: padding bytes too, so the stored
             * blob is the same for the same tree. */
            memcpy(&te[i], &c->e[perm[i]], sizeof(*te));
            td[i] = s->di[perm[i]];
        }
        memcpy(c->e + first, te, k * sizeof(*te));
        memcpy(s->di + first, td, k * sizeof(*td));
    }
    rc = 0;
out:
    free(perm);
    free(te);
    free(td);
    return rc;
}

static int scan_dir(struct scan *s, cfs_id id)
{
    struct cfs_catalog *c = s->c;
    int dfd;
    if (id == 0) {
        dfd = dup(s->srcfd);
    } else {
        int len = cfs_catalog_path(c, id, s->path, sizeof(s->path));
        if (len < 0) {
            c->skipped++;
            return 0;
        }
        dfd = openat(s->srcfd, s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
    }
    if (dfd < 0) {
        if (errno == ENOMEM || errno == EMFILE || errno == ENFILE)
            return -errno;
        c->skipped++;
        return 0;
    }
    struct stat dst;
    /* The directory changed under us (replaced since its stat): skip it
     * rather than attach foreign children. */
    if (fstat(dfd, &dst) < 0 || (uint64_t)dst.st_dev != s->di[id].dev ||
        (uint64_t)dst.st_ino != s->di[id].ino) {
        close(dfd);
        c->skipped++;
        return 0;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -errno;
    }
    uint32_t first = c->n;
    int rc = 0;
    struct dirent *de;
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno)
                c->skipped++; /* a partial listing: keep what we read */
            break;
        }
        const char *nm = de->d_name;
        if (nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0')))
            continue;
        struct stat st, tst;
        if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            c->skipped++;
            continue;
        }
        cfs_id loop_dir = CFS_ID_NONE;
        if (S_ISLNK(st.st_mode) && fstatat(dfd, nm, &tst, 0) == 0) {
            if (S_ISDIR(tst.st_mode))
                loop_dir = ancestor(s, id, &tst);
            if (loop_dir == CFS_ID_NONE)
                st = tst;
        }
        rc = append(s, nm, strlen(nm), &st, id, loop_dir);
        if (rc < 0)
            break;
    }
    closedir(d);
    if (rc < 0)
        return rc;
    rc = sort_range(s, first);
    if (rc < 0)
        return rc;
    c->e[id].first_child = c->n > first ? first : CFS_ID_NONE;
    c->e[id].nchildren = c->n - first;
    return 0;
}

int cfs_catalog_scan(struct cfs_catalog *c, const char *source, char *err, size_t errlen)
{
    struct scan *s = calloc(1, sizeof(*s));
    int rc;
    if (!s) {
        cfs_catalog_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->c = c;
    s->srcfd = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
    if (s->srcfd < 0) {
        rc = -errno;
        if (rc == -ENOENT)
            cfs_catalog_errf(err, errlen, "source '%s' does not exist", source);
        else if (rc == -ENOTDIR)
            cfs_catalog_errf(err, errlen, "source '%s' is not a directory", source);
        else
            cfs_catalog_errf(err, errlen, "cannot open source '%s': %s", source, strerror(-rc));
        goto out;
    }
    struct stat st;
    if (fstat(s->srcfd, &st) < 0) {
        rc = -errno;
        cfs_catalog_errf(err, errlen, "cannot stat source '%s': %s", source, strerror(-rc));
        goto out;
    }
    rc = append(s, "", 0, &st, CFS_ID_NONE, CFS_ID_NONE);
    for (cfs_id id = 0; rc == 0 && id < c->n; id++)
        if (S_ISDIR(c->e[id].mode))
            rc = scan_dir(s, id);
    if (rc < 0)
        cfs_catalog_errf(err, errlen, "scanning '%s': %s", source, strerror(-rc));
out:
    if (s->srcfd >= 0)
        close(s->srcfd);
    free(s->di);
    free(s);
    return rc;
}
