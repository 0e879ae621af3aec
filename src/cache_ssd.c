/* The SSD store, the cache module's bottom layer (see src/cache_ssd.h).
 *
 * Layer order of the cache module, top to bottom; each file calls only
 * the ones below it:
 *   cache.c        the core: entry states, tiers, eviction, fetches,
 *                  readers, the record queue, the warm-restart judgement;
 *   cache_kernel.c kernel-backed RAM entries and their zombies;
 *   cache_heap.c   the eviction heaps (a data structure on entry keys);
 *   cache_ssd.c    this file: entry files in one directory and their records.
 * The store never calls up: it takes no cache lock, reads no cache state
 * and asks nobody anything.  The protocol it serves (write, rename, batch
 * commit after syncfs, recovery at create) is described at the top of
 * include/clairfs/cache.h. */
#include "cache_ssd.h"

#include "clairfs/index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define CACHE_DB "cache"
#define VERIFY_CHUNK (256u * 1024u)

struct cfs_ssd_store {
    int dirfd; /* SSD_DIR/cache */
    struct cfs_index *index;
};

static void entry_name(uint32_t id, bool tmp, char *buf, size_t len)
{
    snprintf(buf, len, "%08x%s", id, tmp ? ".tmp" : "");
}

static void rec_key(uint32_t id, unsigned char key[4])
{
    /* Big-endian, so the records walk in id order. */
    key[0] = (unsigned char)(id >> 24);
    key[1] = (unsigned char)(id >> 16);
    key[2] = (unsigned char)(id >> 8);
    key[3] = (unsigned char)id;
}

/* ---- the directory */

int cfs_ssd_open(const char *ssd_dir, struct cfs_index *index, struct cfs_ssd_store **out,
                 char *err, size_t errlen)
{
    size_t n = strlen(ssd_dir) + sizeof("/cache");
    char *path = malloc(n);
    struct cfs_ssd_store *s = calloc(1, sizeof(*s));
    int rc = 0;

    *out = NULL;
    if (!path || !s) {
        snprintf(err, errlen, "cache: out of memory");
        rc = -ENOMEM;
        goto out;
    }
    snprintf(path, n, "%s/cache", ssd_dir);
    if (mkdir(ssd_dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "ssd_dir %s: %s", ssd_dir, strerror(-rc));
        goto out;
    }
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "ssd_dir %s: %s", path, strerror(-rc));
        goto out;
    }
    s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) {
        rc = -errno;
        snprintf(err, errlen, "ssd_dir %s: %s", path, strerror(-rc));
        goto out;
    }
    s->index = index;
    *out = s;
    s = NULL;
out:
    free(s);
    free(path);
    return rc;
}

void cfs_ssd_close(struct cfs_ssd_store *s)
{
    if (!s)
        return;
    close(s->dirfd);
    free(s);
}

bool cfs_ssd_persists(const struct cfs_ssd_store *s)
{
    return s->index != NULL;
}

/* ---- writing and verifying entry files */

static int write_all(int fd, const void *buf, uint64_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (uint64_t)n;
    }
    return 0;
}

int cfs_ssd_write(struct cfs_ssd_store *s, uint32_t id, const void *buf, uint64_t len)
{
    char tmp[32], name[32];
    int rc, fd;

    entry_name(id, true, tmp, sizeof(tmp));
    entry_name(id, false, name, sizeof(name));
    fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    rc = write_all(fd, buf, len);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    /* No fsync here: the batch commit makes the files durable before their
     * records, and an unrecorded file is an orphan. */
    if (rc == 0 && renameat(s->dirfd, tmp, s->dirfd, name) < 0)
        rc = -errno;
    if (rc)
        (void)unlinkat(s->dirfd, tmp, 0);
    return rc;
}

static int hash_file(int fd, uint64_t len, uint64_t *out)
{
    XXH3_state_t *xs = XXH3_createState();
    char *chunk = malloc(VERIFY_CHUNK);
    uint64_t off = 0;
    int rc = 0;

    if (!xs || !chunk) {
        rc = -ENOMEM;
        goto out;
    }
    XXH3_64bits_reset(xs);
    while (off < len) {
        ssize_t n = pread(fd, chunk, VERIFY_CHUNK, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EBADMSG;
            goto out;
        }
        XXH3_64bits_update(xs, chunk, (size_t)n);
        off += (uint64_t)n;
    }
    *out = XXH3_64bits_digest(xs);
out:
    free(chunk);
    XXH3_freeState(xs);
    return rc;
}

int cfs_ssd_open_verified(struct cfs_ssd_store *s, uint32_t id, uint64_t len, uint64_t xxh,
                          bool verify, int *out)
{
    char name[32];
    struct stat st;
    uint64_t h = 0;
    int rc = 0, fd;

    entry_name(id, false, name, sizeof(name));
    fd = openat(s->dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        rc = -errno;
    else if ((uint64_t)st.st_size != len)
        rc = -EBADMSG;
    else if (verify && (rc = hash_file(fd, len, &h)) == 0 && h != xxh)
        rc = -EBADMSG;
    if (rc) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

void cfs_ssd_unlink(struct cfs_ssd_store *s, uint32_t id)
{
    char name[32];
    entry_name(id, false, name, sizeof(name));
    (void)unlinkat(s->dirfd, name, 0);
}

/* ---- records */

static void rec_of(const struct cfs_ssd_entry *e, struct cache_rec *r)
{
    memset(r, 0, sizeof(*r));
    r->magic = CACHE_REC_MAGIC;
    r->version = CACHE_REC_VERSION;
    r->state = CACHE_REC_COMPLETE;
    r->tier = CACHE_REC_TIER_SSD;
    r->len = e->len;
    r->xxh = e->xxh;
    r->src_size = e->src_size;
    r->mtime_sec = e->mtime_sec;
    r->mtime_nsec = e->mtime_nsec;
    r->path_hash = e->path_hash;
}

int cfs_ssd_commit(struct cfs_ssd_store *s, const struct cfs_ssd_op *ops, size_t n)
{
    struct cfs_index_txn *t = NULL;
    bool any_put = false;
    int rc;

    if (!s->index || n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        any_put |= ops[i].kind == CFS_SSD_PUT;
    /* Every file of the batch was renamed before its op was queued: one
     * syncfs makes them all durable before any record says COMPLETE. */
    if (any_put && syncfs(s->dirfd) < 0)
        return -errno;
    rc = cfs_index_begin(s->index, true, &t);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned char key[4];
        rec_key(ops[i].e.id, key);
        if (ops[i].kind == CFS_SSD_PUT) {
            struct cache_rec r;
            rec_of(&ops[i].e, &r);
            rc = cfs_index_put(t, CACHE_DB, key, sizeof(key), &r, sizeof(r));
        } else {
            rc = cfs_index_del(t, CACHE_DB, key, sizeof(key));
            if (rc == -ENOENT)
                rc = 0; /* dropped before its record was ever committed */
        }
    }
    if (rc)
        cfs_index_abort(t);
    else
        rc = cfs_index_commit(t);
    return rc;
}

struct walk {
    struct cfs_ssd_stored *v;
    size_t n, cap;
};

static int collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct walk *w = arg;
    struct cache_rec r;

    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        struct cfs_ssd_stored *v = realloc(w->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        w->v = v;
        w->cap = cap;
    }
    struct cfs_ssd_stored *l = &w->v[w->n++];
    memset(l, 0, sizeof(*l));
    l->klen = klen < sizeof(l->key) ? klen : sizeof(l->key);
    memcpy(l->key, key, l->klen);
    if (klen != 4 || vlen != sizeof(r))
        return 0;
    memcpy(&r, val, sizeof(r));
    l->complete = r.magic == CACHE_REC_MAGIC && r.version == CACHE_REC_VERSION &&
                  r.state == CACHE_REC_COMPLETE && r.tier == CACHE_REC_TIER_SSD;
    l->e = (struct cfs_ssd_entry){
        .id = (uint32_t)l->key[0] << 24 | (uint32_t)l->key[1] << 16 | (uint32_t)l->key[2] << 8 |
              l->key[3],
        .len = r.len,
        .xxh = r.xxh,
        .src_size = r.src_size,
        .mtime_sec = r.mtime_sec,
        .mtime_nsec = r.mtime_nsec,
        .path_hash = r.path_hash,
    };
    return 0;
}

int cfs_ssd_load(struct cfs_ssd_store *s, struct cfs_ssd_stored **out, size_t *n)
{
    struct walk w = {0};
    struct cfs_index_txn *t = NULL;
    int rc;

    *out = NULL;
    *n = 0;
    if (!s->index)
        return 0;
    rc = cfs_index_begin(s->index, false, &t);
    if (rc)
        return rc;
    rc = cfs_index_foreach(t, CACHE_DB, collect, &w);
    cfs_index_abort(t);
    if (rc) {
        free(w.v);
        return rc;
    }
    *out = w.v;
    *n = w.n;
    return 0;
}

bool cfs_ssd_file_holds(struct cfs_ssd_store *s, uint32_t id, uint64_t len)
{
    char name[32];
    struct stat st;
    entry_name(id, false, name, sizeof(name));
    return fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           (uint64_t)st.st_size == len;
}

int cfs_ssd_forget(struct cfs_ssd_store *s, const struct cfs_ssd_stored *v, size_t n)
{
    struct cfs_index_txn *t = NULL;
    int rc;

    if (!s->index || n == 0)
        return 0;
    rc = cfs_index_begin(s->index, true, &t);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = cfs_index_del(t, CACHE_DB, v[i].key, v[i].klen);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (t && rc)
        cfs_index_abort(t);
    else if (t)
        rc = cfs_index_commit(t);
    return rc;
}

/* ---- orphans */

static bool parse_name(const char *s, uint32_t *id, bool *tmp)
{
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint32_t)d;
    }
    *id = v;
    *tmp = strcmp(s + 8, ".tmp") == 0;
    return *tmp || s[8] == '\0';
}

int cfs_ssd_remove_orphans(struct cfs_ssd_store *s, const uint8_t *keep, uint32_t nkeep,
                           uint64_t *removed)
{
    int dfd = dup(s->dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *de;

    if (!d) {
        int rc = -errno;
        if (dfd >= 0)
            close(dfd);
        return rc;
    }
    while ((de = readdir(d)) != NULL) {
        uint32_t id;
        bool tmp;
        if (!parse_name(de->d_name, &id, &tmp))
            continue; /* not ours: leave it */
        if (!tmp && id < nkeep && (keep[id / 8] & (1u << (id % 8))))
            continue;
        if (unlinkat(s->dirfd, de->d_name, 0) == 0)
            (*removed)++;
    }
    closedir(d);
    return 0;
}
