/* The LMDB wrapper: one environment per mount (index=DIR), named databases
 * for the catalog and the cache entries.  LMDB's own codes (positive errno,
 * negative MDB_*) are translated here into -errno and nowhere else.
 *
 * The environment is created with mode 0600 in a 0700 directory.  A put that
 * hits MDB_MAP_FULL grows the map and retries.  One write transaction at a
 * time (LMDB's rule); readers may be many.
 *
 * How the map grows: LMDB lets mdb_env_set_mapsize() run only while the
 * process has no open transaction, and a transaction that met MDB_MAP_FULL
 * is dead.  So every transaction holds a process-wide lock for reading for
 * its whole life; a write transaction logs copies of its puts, dels and
 * drops, and on MDB_MAP_FULL (from a put or from the commit) it aborts,
 * doubles the map under that lock taken for writing, begins again and
 * replays its log.  Consequences for callers: keep read transactions short
 * (a long one delays growth), and never hold a read transaction while the
 * same thread writes (growth would wait for it forever).
 * cfs_index_reserve() grows the map before a large write so that the replay
 * stays the exception.  A map grown by another process is adopted at the
 * next begin (MDB_MAP_RESIZED).
 *
 * Named databases: "catalog", "cache", "meta" and "plan" are opened at
 * cfs_index_open(); another name is created on first use, and the
 * transaction that opens it blocks other transactions that open new names
 * until it ends (LMDB's rule for mdb_dbi_open).  At most 32 names.  Read
 * transactions are not tied to a thread (MDB_NOTLS). */
#ifndef CLAIRFS_INDEX_H
#define CLAIRFS_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs_index;
struct cfs_index_txn;

int cfs_index_open(const char *dir, struct cfs_index **out, char *err, size_t errlen);
void cfs_index_close(struct cfs_index *ix);

/* A write transaction over any number of named databases (created on first
 * use).  Commit or abort exactly once. */
int cfs_index_begin(struct cfs_index *ix, bool write, struct cfs_index_txn **out);
int cfs_index_commit(struct cfs_index_txn *t);
void cfs_index_abort(struct cfs_index_txn *t);

int cfs_index_put(struct cfs_index_txn *t, const char *db, const void *key, size_t klen,
                  const void *val, size_t vlen);
/* On success *val points into the map and stays valid until the transaction
 * ends.  -ENOENT when absent. */
int cfs_index_get(struct cfs_index_txn *t, const char *db, const void *key, size_t klen,
                  const void **val, size_t *vlen);
int cfs_index_del(struct cfs_index_txn *t, const char *db, const void *key, size_t klen);
/* Empty a named database. */
int cfs_index_drop(struct cfs_index_txn *t, const char *db);

/* Grow the map, if needed, so that about `bytes` more data fit.  Call with
 * no transaction open in this thread. */
int cfs_index_reserve(struct cfs_index *ix, size_t bytes);

/* Visit every record of db in key order; a non-zero return of fn stops the
 * walk and is returned. */
typedef int (*cfs_index_visit_fn)(void *arg, const void *key, size_t klen, const void *val,
                                  size_t vlen);
int cfs_index_foreach(struct cfs_index_txn *t, const char *db, cfs_index_visit_fn fn, void *arg);

#endif
