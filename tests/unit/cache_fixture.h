/* What the cache tests share (test_cache.c: the RAM tier, eviction,
 * kernel-backed entries, fetches and their waiters; test_cache_ssd.c: the
 * SSD tier and persistence): files whose bytes and source identity are a
 * function of their id, so that any reader can check every byte; a put that
 * fetches such a file into a tier; a next-use table for the clairvoyant
 * policy; a scratch directory; and the concurrent run that holds the tiers'
 * bounds while four threads put, read and drop. */
#ifndef CLAIRFS_TESTS_CACHE_FIXTURE_H
#define CLAIRFS_TESTS_CACHE_FIXTURE_H

#include <stdint.h>

#include "clairfs/cache.h"

#define PAGE 4096u

/* Byte j of file id, and the source identity of a file of that id and size. */
uint8_t byte_of(uint32_t id, uint64_t j);
struct cfs_cache_source src_of(uint32_t id, uint64_t size);
/* Fetch file id of size bytes into tier: begin, fill with byte_of, complete. */
int put_flags(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier,
              unsigned flags);
int put(struct cfs_cache *c, uint32_t id, uint64_t size, enum cfs_tier tier);
/* Acquire id and compare every byte; returns acquire's rc. */
int check_bytes(struct cfs_cache *c, uint32_t id, uint64_t size);

/* The next use of each id, answered by table_next_use (the clairvoyant
 * policy's callback). */
extern uint64_t next_use_table[64];
uint64_t table_next_use(void *arg, uint32_t id);
/* A cache of nfiles ids with a RAM tier of ram bytes and no SSD. */
struct cfs_cache *ram_cache(uint32_t nfiles, uint64_t ram, cfs_cache_next_use_fn fn);
/* want: one letter per id: r(am) s(sd) i(nflight) -(absent). */
void expect_states(struct cfs_cache *c, const char *want);

/* A scratch directory under /tmp, its path in tmpdir. */
extern char tmpdir[256];
void make_tmpdir(void);
void remove_tmpdir(void);

/* Four threads put, read and drop at random over 256 ids; the RAM bound
 * (and with ssd_cap the SSD bound, with demotions) must hold throughout. */
void run_concurrent(uint64_t ssd_cap);

#endif
