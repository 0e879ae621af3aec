/* The LMDB wrapper.  See index.h for the contract; the subtle parts:
 *
 * Growing the map.  LMDB reports MDB_MAP_FULL from a put (or from the commit
 * that saves the free list) and the transaction is then dead.
 * mdb_env_set_mapsize() may only be called while this process has no
 * transaction open, so every transaction holds `resize` for reading for its
 * whole life, and growth takes it for writing.  A write transaction keeps a
 * log of its operations (copies of keys and values); on MDB_MAP_FULL it
 * aborts, releases `resize`, doubles the map under the write lock, begins
 * again and replays the log.  Callers see nothing but a slower put.
 * cfs_index_reserve() grows the map ahead of a known large write, so the
 * replay is the exception.
 *
 * Named databases.  mdb_dbi_open() must not run in two live transactions at
 * once: LMDB hands out handle slots per transaction and two of them could
 * claim the same slot.  The usual names are opened once, in cfs_index_open();
 * any other name is opened inside the caller's transaction, which then holds
 * the right to open names (`dbi_owner`) until it ends, and its handles are
 * kept for everyone only when it commits (LMDB closes them on abort). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clairfs/index.h"
#include "clairfs/index_check.h"

#define MAX_DBS 32
#define INITIAL_MAP (64ull << 20)

/* The initial map size: CLAIRFS_INDEX_MAPSIZE (bytes) lets the fault tests
 * start with a map a few pages large, so that growth runs on every mount;
 * anything unparsable or below 64 KiB is ignored. */
static size_t initial_map(void)
{
    const char *s = getenv("CLAIRFS_INDEX_MAPSIZE");
    if (!s || !*s)
        return INITIAL_MAP;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < (64u << 10) || v > SIZE_MAX)
        return INITIAL_MAP;
    return (size_t)v;
}

static const char *const preopened[] = {"catalog", "cache", "meta", "plan"};

struct dbslot {
    char *name;
    MDB_dbi dbi;
};

struct cfs_index {
    MDB_env *env;
    pthread_rwlock_t resize;
    pthread_mutex_t lock; /* dbs, ndbs, dbi_owner */
    pthread_cond_t dbi_free;
    struct cfs_index_txn *dbi_owner;
    struct dbslot dbs[MAX_DBS];
    int ndbs;
};

enum op_kind { OP_PUT, OP_DEL, OP_DROP };

struct op {
    enum op_kind kind;
    char *db;
    void *key, *val;
    size_t klen, vlen;
};

struct cfs_index_txn {
    struct cfs_index *ix;
    MDB_txn *txn;
    bool write;
    bool owns_dbi; /* this transaction opened a name: see the top */
    struct dbslot pending[MAX_DBS];
    int npending;
    struct op *ops;
    size_t nops, opcap;
};

static int mdb_to_errno(int rc)
{
    if (rc >= 0)
        return -rc;
    switch (rc) {
    case MDB_NOTFOUND:
        return -ENOENT;
    case MDB_KEYEXIST:
        return -EEXIST;
    case MDB_MAP_FULL:
        return -ENOSPC;
    case MDB_READERS_FULL:
        return -EAGAIN;
    case MDB_DBS_FULL:
        return -EMFILE;
    case MDB_BAD_VALSIZE:
    case MDB_BAD_DBI:
    case MDB_INCOMPATIBLE:
        return -EINVAL;
    case MDB_TXN_FULL:
    case MDB_CURSOR_FULL:
    case MDB_PAGE_FULL:
        return -E2BIG;
    default: /* MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_VERSION_MISMATCH, ... */
        return -EIO;
    }
}

/* Grow the map to at least `want` bytes (0: by doubling).  No transaction
 * of this process may be open: the caller holds no read side of `resize`. */
static int grow_map(struct cfs_index *ix, size_t want)
{
    pthread_rwlock_wrlock(&ix->resize);
    MDB_envinfo info;
    int rc = mdb_env_info(ix->env, &info);
    if (rc == 0) {
        size_t cur = info.me_mapsize;
        size_t target = want ? want : cur * 2;
        if (target > cur)
            rc = mdb_env_set_mapsize(ix->env, target);
    }
    pthread_rwlock_unlock(&ix->resize);
    return mdb_to_errno(rc);
}

int cfs_index_reserve(struct cfs_index *ix, size_t bytes)
{
    MDB_envinfo info;
    MDB_stat st;
    int rc = mdb_env_info(ix->env, &info);
    if (rc == 0)
        rc = mdb_env_stat(ix->env, &st);
    if (rc)
        return mdb_to_errno(rc);
    /* Pages in use plus twice the new data: a copy-on-write update keeps the
     * old pages until the commit. */
    size_t used = (info.me_last_pgno + 1) * (size_t)st.ms_psize;
    size_t need = used + 2 * bytes + (1u << 20);
    if (need <= info.me_mapsize)
        return 0;
    size_t target = info.me_mapsize;
    while (target < need)
        target *= 2;
    return grow_map(ix, target);
}

void cfs_index_close(struct cfs_index *ix)
{
    if (!ix)
        return;
    if (ix->env)
        mdb_env_close(ix->env);
    for (int i = 0; i < ix->ndbs; i++)
        free(ix->dbs[i].name);
    pthread_rwlock_destroy(&ix->resize);
    pthread_mutex_destroy(&ix->lock);
    pthread_cond_destroy(&ix->dbi_free);
    free(ix);
}

/* The environment's format (index_check.h), recorded once; an environment
 * that holds another is left as it is (cfs_index_recover() judges it). */
static int put_format(MDB_txn *txn, MDB_dbi meta)
{
    MDB_val k = {6, "format"}, v;
    int rc = mdb_get(txn, meta, &k, &v);
    if (rc != MDB_NOTFOUND)
        return rc;
    v = (MDB_val){strlen(CFS_INDEX_FORMAT), CFS_INDEX_FORMAT};
    return mdb_put(txn, meta, &k, &v, 0);
}

/* LMDB maps its lock file and writes it through the mapping: on a full
 * filesystem that write is a SIGBUS, not an error.  Its blocks are taken
 * first (the default 126 reader slots need about 8 KiB; LMDB only ever grows
 * the file), so a full disk is -ENOSPC here instead. */
#define LOCK_FILE_ROOM (64 * 1024)
static int reserve_lock_file(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/lock.mdb", dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = posix_fallocate(fd, 0, LOCK_FILE_ROOM);
    close(fd);
    /* A filesystem without fallocate: LMDB's own ftruncate is all there is. */
    return rc == EOPNOTSUPP || rc == EINVAL ? 0 : -rc;
}

int cfs_index_open(const char *dir, struct cfs_index **out, char *err, size_t errlen)
{
    struct cfs_index *ix = calloc(1, sizeof(*ix));
    MDB_txn *txn = NULL;
    int rc;
    *out = NULL;
    if (!ix) {
        snprintf(err, errlen, "index '%s': out of memory", dir);
        return -ENOMEM;
    }
    pthread_rwlock_init(&ix->resize, NULL);
    pthread_mutex_init(&ix->lock, NULL);
    pthread_cond_init(&ix->dbi_free, NULL);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "index '%s': cannot create directory: %s", dir, strerror(-rc));
        goto fail;
    }
    rc = reserve_lock_file(dir);
    if (rc < 0) {
        snprintf(err, errlen, "index '%s': no room for its lock file: %s", dir, strerror(-rc));
        goto fail;
    }
    rc = mdb_env_create(&ix->env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(ix->env, MAX_DBS);
    if (rc == 0)
        rc = mdb_env_set_mapsize(ix->env, initial_map());
    /* MDB_NOTLS: read transactions are not tied to threads, so workers may
     * keep and reuse their own. */
    if (rc == 0)
        rc = mdb_env_open(ix->env, dir, MDB_NOTLS, 0600);
    if (rc) {
        snprintf(err, errlen, "index '%s': %s", dir, mdb_strerror(rc));
        rc = mdb_to_errno(rc);
        goto fail;
    }
    int dead;
    mdb_reader_check(ix->env, &dead);
    rc = mdb_txn_begin(ix->env, NULL, 0, &txn);
    for (size_t i = 0; rc == 0 && i < sizeof(preopened) / sizeof(preopened[0]); i++) {
        MDB_dbi dbi;
        rc = mdb_dbi_open(txn, preopened[i], MDB_CREATE, &dbi);
        if (rc == 0) {
            ix->dbs[ix->ndbs].name = strdup(preopened[i]);
            ix->dbs[ix->ndbs++].dbi = dbi;
        }
    }
    if (rc == 0)
        rc = put_format(txn, ix->dbs[2].dbi); /* preopened[2]: "meta" */
    if (rc == 0) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (rc) {
        snprintf(err, errlen, "index '%s': %s", dir, mdb_strerror(rc));
        rc = mdb_to_errno(rc);
        goto fail;
    }
    *out = ix;
    return 0;
fail:
    if (txn)
        mdb_txn_abort(txn);
    cfs_index_close(ix);
    return rc;
}

static void release_dbi_right(struct cfs_index_txn *t, bool keep)
{
    struct cfs_index *ix = t->ix;
    pthread_mutex_lock(&ix->lock);
    for (int i = 0; i < t->npending; i++) {
        if (keep && ix->ndbs < MAX_DBS)
            ix->dbs[ix->ndbs++] = t->pending[i];
        else
            free(t->pending[i].name);
    }
    t->npending = 0;
    if (t->owns_dbi) {
        t->owns_dbi = false;
        ix->dbi_owner = NULL;
        pthread_cond_broadcast(&ix->dbi_free);
    }
    pthread_mutex_unlock(&ix->lock);
}

static int get_dbi(struct cfs_index_txn *t, const char *name, MDB_dbi *dbi)
{
    struct cfs_index *ix = t->ix;
    int rc = 0;
    pthread_mutex_lock(&ix->lock);
    for (int i = 0; i < ix->ndbs; i++)
        if (strcmp(ix->dbs[i].name, name) == 0) {
            *dbi = ix->dbs[i].dbi;
            goto out;
        }
    for (int i = 0; i < t->npending; i++)
        if (strcmp(t->pending[i].name, name) == 0) {
            *dbi = t->pending[i].dbi;
            goto out;
        }
    while (ix->dbi_owner && ix->dbi_owner != t)
        pthread_cond_wait(&ix->dbi_free, &ix->lock);
    if (ix->ndbs + t->npending >= MAX_DBS) {
        rc = -EMFILE;
        goto out;
    }
    ix->dbi_owner = t;
    t->owns_dbi = true;
    rc = mdb_dbi_open(t->txn, name, t->write ? MDB_CREATE : 0, dbi);
    if (rc == 0) {
        char *copy = strdup(name);
        if (!copy) {
            rc = -ENOMEM;
            goto out;
        }
        t->pending[t->npending].name = copy;
        t->pending[t->npending++].dbi = *dbi;
    }
    rc = mdb_to_errno(rc);
out:
    pthread_mutex_unlock(&ix->lock);
    return rc;
}

static int txn_start(struct cfs_index_txn *t)
{
    for (;;) {
        pthread_rwlock_rdlock(&t->ix->resize);
        int rc = mdb_txn_begin(t->ix->env, NULL, t->write ? 0 : MDB_RDONLY, &t->txn);
        if (rc == 0)
            return 0;
        pthread_rwlock_unlock(&t->ix->resize);
        t->txn = NULL;
        if (rc != MDB_MAP_RESIZED)
            return mdb_to_errno(rc);
        /* Another process grew the map: adopt its size. */
        pthread_rwlock_wrlock(&t->ix->resize);
        rc = mdb_env_set_mapsize(t->ix->env, 0);
        pthread_rwlock_unlock(&t->ix->resize);
        if (rc)
            return mdb_to_errno(rc);
    }
}

/* End the LMDB transaction (already ended by LMDB when `dead`). */
static void txn_stop(struct cfs_index_txn *t, bool dead)
{
    if (t->txn && !dead)
        mdb_txn_abort(t->txn);
    t->txn = NULL;
    release_dbi_right(t, false);
    pthread_rwlock_unlock(&t->ix->resize);
}

int cfs_index_begin(struct cfs_index *ix, bool write, struct cfs_index_txn **out)
{
    struct cfs_index_txn *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!t)
        return -ENOMEM;
    t->ix = ix;
    t->write = write;
    int rc = txn_start(t);
    if (rc < 0) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

static void free_ops(struct cfs_index_txn *t)
{
    for (size_t i = 0; i < t->nops; i++) {
        free(t->ops[i].db);
        free(t->ops[i].key);
        free(t->ops[i].val);
    }
    free(t->ops);
    t->ops = NULL;
    t->nops = t->opcap = 0;
}

static int apply(struct cfs_index_txn *t, const struct op *o)
{
    MDB_dbi dbi;
    int rc = get_dbi(t, o->db, &dbi);
    if (rc < 0)
        return rc == -ENOSPC ? MDB_MAP_FULL : rc == -ENOENT ? MDB_NOTFOUND : -rc;
    MDB_val k = {o->klen, o->key}, v = {o->vlen, o->val};
    switch (o->kind) {
    case OP_PUT:
        return mdb_put(t->txn, dbi, &k, &v, 0);
    case OP_DEL:
        return mdb_del(t->txn, dbi, &k, NULL);
    case OP_DROP:
        return mdb_drop(t->txn, dbi, 0);
    }
    return EINVAL;
}

/* After MDB_MAP_FULL: grow, begin again, replay every logged operation. */
static int regrow(struct cfs_index_txn *t, bool dead)
{
    for (;;) {
        txn_stop(t, dead);
        int rc = grow_map(t->ix, 0);
        if (rc == 0)
            rc = txn_start(t);
        if (rc < 0)
            return rc;
        dead = false;
        int mrc = 0;
        for (size_t i = 0; i < t->nops && mrc == 0; i++) {
            mrc = apply(t, &t->ops[i]);
            if (mrc == MDB_NOTFOUND && t->ops[i].kind == OP_DEL)
                mrc = 0;
        }
        if (mrc == 0)
            return 0;
        if (mrc != MDB_MAP_FULL)
            return mdb_to_errno(mrc);
    }
}

static int logged(struct cfs_index_txn *t, enum op_kind kind, const char *db, const void *key,
                  size_t klen, const void *val, size_t vlen)
{
    if (!t->write || !t->txn)
        return -EBADF;
    if (t->nops == t->opcap) {
        size_t ncap = t->opcap ? 2 * t->opcap : 16;
        struct op *ops = realloc(t->ops, ncap * sizeof(*ops));
        if (!ops)
            return -ENOMEM;
        t->ops = ops;
        t->opcap = ncap;
    }
    struct op *o = &t->ops[t->nops];
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->db = strdup(db);
    o->klen = klen;
    o->vlen = vlen;
    o->key = klen ? malloc(klen) : NULL;
    o->val = vlen ? malloc(vlen) : NULL;
    if (!o->db || (klen && !o->key) || (vlen && !o->val)) {
        free(o->db);
        free(o->key);
        free(o->val);
        return -ENOMEM;
    }
    if (klen)
        memcpy(o->key, key, klen);
    if (vlen)
        memcpy(o->val, val, vlen);
    t->nops++;
    int rc = apply(t, o);
    if (rc == MDB_MAP_FULL)
        return regrow(t, false);
    if (rc) {
        /* A failed operation leaves nothing to replay. */
        t->nops--;
        free(o->db);
        free(o->key);
        free(o->val);
    }
    return mdb_to_errno(rc);
}

int cfs_index_put(struct cfs_index_txn *t, const char *db, const void *key, size_t klen,
                  const void *val, size_t vlen)
{
    return logged(t, OP_PUT, db, key, klen, val, vlen);
}

int cfs_index_del(struct cfs_index_txn *t, const char *db, const void *key, size_t klen)
{
    return logged(t, OP_DEL, db, key, klen, NULL, 0);
}

int cfs_index_drop(struct cfs_index_txn *t, const char *db)
{
    return logged(t, OP_DROP, db, NULL, 0, NULL, 0);
}

int cfs_index_get(struct cfs_index_txn *t, const char *db, const void *key, size_t klen,
                  const void **val, size_t *vlen)
{
    MDB_dbi dbi;
    if (!t->txn)
        return -EBADF;
    int rc = get_dbi(t, db, &dbi);
    if (rc < 0)
        return rc;
    MDB_val k = {klen, (void *)key}, v;
    rc = mdb_get(t->txn, dbi, &k, &v);
    if (rc)
        return mdb_to_errno(rc);
    *val = v.mv_data;
    *vlen = v.mv_size;
    return 0;
}

int cfs_index_foreach(struct cfs_index_txn *t, const char *db, cfs_index_visit_fn fn, void *arg)
{
    MDB_dbi dbi;
    MDB_cursor *cur;
    if (!t->txn)
        return -EBADF;
    int rc = get_dbi(t, db, &dbi);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    rc = mdb_cursor_open(t->txn, dbi, &cur);
    if (rc)
        return mdb_to_errno(rc);
    MDB_val k, v;
    int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    rc = 0;
    while (mrc == 0 && rc == 0) {
        rc = fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
        if (rc == 0)
            mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc == 0 && mrc != MDB_NOTFOUND)
        rc = mdb_to_errno(mrc);
    return rc;
}

int cfs_index_commit(struct cfs_index_txn *t)
{
    int rc = 0;
    for (;;) {
        int mrc = mdb_txn_commit(t->txn);
        if (mrc == 0) {
            /* The handles opened in this transaction now belong to all. */
            t->txn = NULL;
            release_dbi_right(t, true);
            pthread_rwlock_unlock(&t->ix->resize);
            break;
        }
        /* A failed commit has ended the LMDB transaction. */
        t->txn = NULL;
        if (mrc == MDB_MAP_FULL && t->write) {
            rc = regrow(t, true);
            if (rc == 0)
                continue;
            if (t->txn)
                txn_stop(t, false);
            break;
        }
        rc = mdb_to_errno(mrc);
        txn_stop(t, true);
        break;
    }
    free_ops(t);
    free(t);
    return rc;
}

void cfs_index_abort(struct cfs_index_txn *t)
{
    if (!t)
        return;
    if (t->txn)
        txn_stop(t, false);
    free_ops(t);
    free(t);
}
