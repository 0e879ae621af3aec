/* The SSD tier's files and its index records: writing, verifying, batched
 * commits, and the recovery/warm-restart walk at create.  The protocol is
 * described at the top of include/clairfs/cache.h. */
#include "cache_i.h"

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

void cache_ssd_name(uint32_t id, bool tmp, char *buf, size_t len)
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

int cache_ssd_write(struct cfs_cache *c, uint32_t id, const void *buf, uint64_t len)
{
    char tmp[32], name[32];
    int rc, fd;

    cache_ssd_name(id, true, tmp, sizeof(tmp));
    cache_ssd_name(id, false, name, sizeof(name));
    fd = openat(c->ssd_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    rc = write_all(fd, buf, len);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    /* No fsync here: the batch commit makes the files durable before their
     * records (cfs_cache_sync), and an unrecorded file is an orphan. */
    if (rc == 0 && renameat(c->ssd_dirfd, tmp, c->ssd_dirfd, name) < 0)
        rc = -errno;
    if (rc)
        (void)unlinkat(c->ssd_dirfd, tmp, 0);
    return rc;
}

int cache_ssd_open_verify(struct cfs_cache *c, struct centry *e, bool verify, int *out)
{
    char name[32];
    struct stat st;
    XXH3_state_t *xs = NULL;
    char *chunk = NULL;
    int rc = 0, fd;

    cache_ssd_name(e->id, false, name, sizeof(name));
    fd = openat(c->ssd_dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if ((uint64_t)st.st_size != e->len) {
        rc = -EBADMSG;
        goto out;
    }
    if (verify) {
        xs = XXH3_createState();
        chunk = malloc(VERIFY_CHUNK);
        if (!xs || !chunk) {
            rc = -ENOMEM;
            goto out;
        }
        XXH3_64bits_reset(xs);
        uint64_t off = 0;
        while (off < e->len) {
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
        if (XXH3_64bits_digest(xs) != e->xxh)
            rc = -EBADMSG;
    }
out:
    free(chunk);
    XXH3_freeState(xs);
    if (rc) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

void cache_ssd_unlink(struct cfs_cache *c, uint32_t id)
{
    char name[32];
    cache_ssd_name(id, false, name, sizeof(name));
    (void)unlinkat(c->ssd_dirfd, name, 0);
}

/* ---- batched index records */

int cache_queue_op(struct cfs_cache *c, int kind, const struct centry *e)
{
    if (!c->index)
        return 0;
    if (c->nops == c->ops_cap) {
        size_t cap = c->ops_cap ? c->ops_cap * 2 : 64;
        struct cache_op *ops = realloc(c->ops, cap * sizeof(*ops));
        if (!ops)
            return -ENOMEM; /* the record is lost: the entry is not persistent */
        c->ops = ops;
        c->ops_cap = cap;
    }
    struct cache_op *op = &c->ops[c->nops++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->id = e->id;
    if (kind == OP_PUT) {
        op->rec.magic = CACHE_REC_MAGIC;
        op->rec.version = CACHE_REC_VERSION;
        op->rec.state = CACHE_REC_COMPLETE;
        op->rec.tier = CFS_TIER_SSD;
        op->rec.len = e->len;
        op->rec.xxh = e->xxh;
        op->rec.src_size = e->src.size;
        op->rec.mtime_sec = e->src.mtime_sec;
        op->rec.mtime_nsec = e->src.mtime_nsec;
        op->rec.path_hash = e->src.path_hash;
    }
    return 0;
}

bool cache_ops_due(struct cfs_cache *c)
{
    return c->index && c->nops >= c->commit_batch;
}

int cfs_cache_sync(struct cfs_cache *c)
{
    struct cfs_index_txn *t = NULL;
    struct cache_op *ops;
    size_t nops;
    bool any_put = false;
    int rc = 0;

    if (!c->index)
        return 0;
    pthread_mutex_lock(&c->ix_mu); /* batches commit in queue order */
    pthread_mutex_lock(&c->mu);
    ops = c->ops;
    nops = c->nops;
    c->ops = NULL;
    c->nops = c->ops_cap = 0;
    pthread_mutex_unlock(&c->mu);
    if (nops == 0)
        goto out;
    for (size_t i = 0; i < nops; i++)
        any_put |= ops[i].kind == OP_PUT;
    /* Every file of the batch was renamed before its op was queued: one
     * syncfs makes them all durable before any record says COMPLETE. */
    if (any_put && syncfs(c->ssd_dirfd) < 0) {
        rc = -errno;
        goto out;
    }
    rc = cfs_index_begin(c->index, true, &t);
    if (rc)
        goto out;
    for (size_t i = 0; i < nops && rc == 0; i++) {
        unsigned char key[4];
        rec_key(ops[i].id, key);
        if (ops[i].kind == OP_PUT) {
            rc = cfs_index_put(t, CACHE_DB, key, sizeof(key), &ops[i].rec, sizeof(ops[i].rec));
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
out:
    pthread_mutex_unlock(&c->ix_mu);
    free(ops);
    return rc;
}

/* ---- recovery and warm restart */

struct loaded {
    unsigned char key[16];
    size_t klen;
    struct cache_rec rec;
    bool valid_shape;
};

struct walk {
    struct loaded *v;
    size_t n, cap;
};

static int collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct walk *w = arg;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        struct loaded *v = realloc(w->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        w->v = v;
        w->cap = cap;
    }
    struct loaded *l = &w->v[w->n++];
    memset(l, 0, sizeof(*l));
    l->klen = klen < sizeof(l->key) ? klen : sizeof(l->key);
    memcpy(l->key, key, l->klen);
    l->valid_shape = klen == 4 && vlen == sizeof(l->rec);
    if (l->valid_shape)
        memcpy(&l->rec, val, sizeof(l->rec));
    return 0;
}

/* 0: serve it; else the counter to blame. */
static uint64_t *judge(struct cfs_cache *c, const struct cfs_cache_params *p,
                       const struct loaded *l, uint32_t id)
{
    const struct cache_rec *r = &l->rec;
    struct cfs_cache_source now;
    struct stat st;
    char name[32];

    if (!l->valid_shape || r->magic != CACHE_REC_MAGIC || r->version != CACHE_REC_VERSION ||
        r->state != CACHE_REC_COMPLETE || r->tier != CFS_TIER_SSD)
        return &c->st.incomplete;
    if (id >= c->nfiles || !p->source || p->source(p->source_arg, id, &now) != 0)
        return &c->st.stale;
    if (now.size != r->src_size || now.mtime_sec != r->mtime_sec ||
        now.mtime_nsec != r->mtime_nsec || now.path_hash != r->path_hash || r->len != r->src_size)
        return &c->st.stale;
    cache_ssd_name(id, false, name, sizeof(name));
    if (fstatat(c->ssd_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != r->len)
        return &c->st.incomplete; /* lost or cut short by a crash */
    return NULL;
}

static int load_records(struct cfs_cache *c, const struct cfs_cache_params *p)
{
    struct walk w = {0};
    struct cfs_index_txn *t = NULL;
    size_t ndel = 0;
    int rc;

    rc = cfs_index_begin(c->index, false, &t);
    if (rc)
        return rc;
    rc = cfs_index_foreach(t, CACHE_DB, collect, &w);
    cfs_index_abort(t);
    t = NULL;
    if (rc)
        goto out;

    for (size_t i = 0; i < w.n; i++) {
        struct loaded *l = &w.v[i];
        uint32_t id = l->klen == 4 ? (uint32_t)l->key[0] << 24 | (uint32_t)l->key[1] << 16 |
                                         (uint32_t)l->key[2] << 8 | l->key[3]
                                   : UINT32_MAX;
        uint64_t *blame = judge(c, p, l, id);
        struct centry *e = NULL;
        if (!blame && (e = calloc(1, sizeof(*e)))) {
            e->id = id;
            e->state = CFS_CACHE_SSD;
            e->tier = CFS_TIER_SSD;
            e->fd = -1;
            e->len = l->rec.len;
            e->charge = cache_round(e->len);
            e->xxh = l->rec.xxh;
            e->src = (struct cfs_cache_source){l->rec.src_size, l->rec.mtime_sec, l->rec.mtime_nsec,
                                               l->rec.path_hash};
            if (cache_insert_loaded(c, e) == 0) {
                c->st.loaded++;
                continue;
            }
            free(e);
            rc = -ENOMEM;
            goto out;
        }
        if (!e && !blame) {
            rc = -ENOMEM;
            goto out;
        }
        (*blame)++;
        if (ndel != i)
            w.v[ndel] = *l; /* compact the records to delete to the front */
        ndel++;
    }
    if (ndel) {
        rc = cfs_index_begin(c->index, true, &t);
        for (size_t i = 0; i < ndel && rc == 0; i++) {
            rc = cfs_index_del(t, CACHE_DB, w.v[i].key, w.v[i].klen);
            if (rc == -ENOENT)
                rc = 0;
        }
        if (t && rc)
            cfs_index_abort(t);
        else if (t)
            rc = cfs_index_commit(t);
    }
out:
    free(w.v);
    return rc;
}

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

/* Unlink every file of ours that no loaded record claims. */
static int remove_orphans(struct cfs_cache *c)
{
    int dfd = dup(c->ssd_dirfd);
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
        if (!tmp && id < c->nfiles && c->slot[id])
            continue;
        if (unlinkat(c->ssd_dirfd, de->d_name, 0) == 0)
            c->st.orphans++;
    }
    closedir(d);
    return 0;
}

int cache_ssd_open(struct cfs_cache *c, const struct cfs_cache_params *p, char *err, size_t errlen)
{
    size_t n = strlen(p->ssd_dir) + sizeof("/cache");
    int rc;

    c->ssd_path = malloc(n);
    if (!c->ssd_path) {
        snprintf(err, errlen, "cache: out of memory");
        return -ENOMEM;
    }
    snprintf(c->ssd_path, n, "%s/cache", p->ssd_dir);
    if (mkdir(p->ssd_dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "ssd_dir %s: %s", p->ssd_dir, strerror(-rc));
        return rc;
    }
    if (mkdir(c->ssd_path, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "ssd_dir %s: %s", c->ssd_path, strerror(-rc));
        return rc;
    }
    c->ssd_dirfd = open(c->ssd_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->ssd_dirfd < 0) {
        rc = -errno;
        snprintf(err, errlen, "ssd_dir %s: %s", c->ssd_path, strerror(-rc));
        return rc;
    }
    c->ssd = true;
    c->index = p->index;

    /* Called before any other thread can see the cache; mu is taken for the
     * helpers' sake only. */
    pthread_mutex_lock(&c->mu);
    rc = c->index ? load_records(c, p) : 0;
    if (rc == 0)
        rc = remove_orphans(c);
    if (rc == 0)
        cache_trim_tier(c, CFS_TIER_SSD); /* the capacity may have shrunk */
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        snprintf(err, errlen, "cache index in %s: %s", p->ssd_dir, strerror(-rc));
        return rc;
    }
    rc = cfs_cache_sync(c); /* deletions of trimmed entries */
    if (rc)
        snprintf(err, errlen, "cache index in %s: %s", p->ssd_dir, strerror(-rc));
    return rc;
}

void cache_ssd_close(struct cfs_cache *c)
{
    if (c->ssd_dirfd >= 0)
        close(c->ssd_dirfd);
    c->ssd_dirfd = -1;
    free(c->ssd_path);
    c->ssd_path = NULL;
}
