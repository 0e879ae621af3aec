/* Fuzz target: decoding of the records clairfs keeps in LMDB, the only
 * bytes it reads back from disk and trusts to describe memory:
 *
 *  - the catalog's copy (src/catalog_store.c: "meta", "entries", "names",
 *    "samples"), loaded by cfs_catalog_store_load() (src/catalog_i.h);
 *  - the SSD tier's entry records (struct cache_rec in src/cache_ssd.h),
 *    read back by cfs_cache_create() at a warm restart.
 *
 * The records are written into a real environment through
 * include/clairfs/index.h and the real loaders read them, so no decoder is
 * copied here.  Input byte 0, bit 0 picks the store.
 *
 * Catalog: a valid copy of a small tree is made once; the input is a list
 * of edits to its four records ([sel][off lo][off hi][len][bytes]; sel bits
 * 0-1 the record, bits 2-3 overwrite / truncate / append / delete).  Bit 1
 * of byte 0 re-seals the edited blobs with a correct checksum (found in
 * "meta" by value), so that edits get past it as a bit flip on disk would
 * not but a bug or a hostile writer would.  The load must give "scan
 * again" (1), an error, or a catalog whose every id, name, path and sample
 * is in range.
 *
 * Cache: the input is a list of records ([klen 1-8][key][mode][...]) and
 * entry files.  Whatever was stored, an entry that cfs_cache_acquire()
 * serves must have its source's size and bytes that hash to the handle's
 * checksum: nothing wrong served. */
#include "fuzz_common.h"

#include <sys/stat.h>
#include <xxhash.h>

#include "clairfs/cache.h"
#include "clairfs/catalog.h"
#include "clairfs/index.h"
#include "src/cache_i.h"
#include "src/catalog_i.h"

#define NREC 4
#define MAX_REC 65536
static const char *const rec_names[NREC] = {"meta", "entries", "names", "samples"};

static struct cfs_index *ix;
static char source[512], index_dir[512], ssd_dir[512];
static uint8_t *base[NREC];
static size_t base_len[NREC];
static long sum_off = -1; /* where "meta" keeps the blobs' checksum */

struct reader {
    const uint8_t *p;
    size_t n;
};

static bool take(struct reader *r, void *out, size_t n)
{
    if (r->n < n)
        return false;
    memcpy(out, r->p, n);
    r->p += n;
    r->n -= n;
    return true;
}

static uint64_t seal(uint8_t *const rec[NREC], const size_t len[NREC])
{
    XXH3_state_t *st = XXH3_createState();
    FUZZ_CHECK(st != NULL);
    XXH3_64bits_reset(st);
    for (int i = 1; i < NREC; i++)
        XXH3_64bits_update(st, rec[i], len[i]);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

static void setup(void)
{
    char p[1024], err[256];
    fuzz_path(source, sizeof(source), "src");
    fuzz_path(index_dir, sizeof(index_dir), "index");
    fuzz_path(ssd_dir, sizeof(ssd_dir), "ssd");
    FUZZ_CHECK(mkdir(source, 0755) == 0);
    static const char *const dirs[] = {"cat", "dog", "dog/inner"};
    static const char *const files[] = {"cat/1.jpg", "cat/2.png", "dog/3.jpg", "dog/inner/4.jpg",
                                        "readme"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", source, dirs[i]);
        FUZZ_CHECK(mkdir(p, 0755) == 0);
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", source, files[i]);
        fuzz_write_file(p, files[i], strlen(files[i]));
    }
    FUZZ_CHECK(cfs_index_open(index_dir, &ix, err, sizeof(err)) == 0);
    struct cfs_catalog_params cp = {.source = source, .order = CFS_ORDER_SORTED,
                                    .index_dir = index_dir, .index = ix};
    struct cfs_catalog *c = NULL;
    FUZZ_CHECK(cfs_catalog_open(&cp, &c, err, sizeof(err)) == 0);
    cfs_catalog_destroy(c);

    struct cfs_index_txn *t = NULL;
    FUZZ_CHECK(cfs_index_begin(ix, false, &t) == 0);
    for (int i = 0; i < NREC; i++) {
        const void *v;
        FUZZ_CHECK(cfs_index_get(t, "catalog", rec_names[i], strlen(rec_names[i]), &v,
                                 &base_len[i]) == 0);
        base[i] = malloc(base_len[i] + 1);
        FUZZ_CHECK(base[i] != NULL);
        memcpy(base[i], v, base_len[i]);
    }
    cfs_index_abort(t);
    uint64_t h = seal(base, base_len);
    for (size_t off = 0; off + 8 <= base_len[0]; off++)
        if (memcmp(base[0] + off, &h, 8) == 0)
            sum_off = (long)off;
    FUZZ_CHECK(sum_off >= 0); /* catalog_store.c stores the checksum as it is in memory */
}

static void check_catalog(const struct cfs_catalog *c)
{
    uint32_t n = cfs_catalog_entry_count(c);
    char path[4096];
    FUZZ_CHECK(n > 0);
    for (cfs_id id = 0; id < n; id++) {
        const struct cfs_entry *e = cfs_catalog_entry(c, id);
        const char *name = cfs_catalog_name(c, id);
        /* A stored name may hold a NUL (structure_ok() checks only the
         * terminator): shorter, never longer. */
        FUZZ_CHECK(strlen(name) <= e->name_len);
        int len = cfs_catalog_path(c, id, path, sizeof(path));
        FUZZ_CHECK(len >= 0 || len == -ENAMETOOLONG);
        if (id)
            (void)cfs_catalog_lookup(c, e->parent, name);
    }
    for (uint64_t s = 0; s < cfs_catalog_sample_count(c); s++)
        FUZZ_CHECK(cfs_catalog_sample_entry(c, s) < n);
    (void)cfs_catalog_hash(c);
}

static void fuzz_catalog(uint8_t flags, struct reader *r)
{
    uint8_t *rec[NREC];
    size_t len[NREC];
    bool present[NREC];
    for (int i = 0; i < NREC; i++) {
        rec[i] = malloc(MAX_REC);
        FUZZ_CHECK(rec[i] != NULL);
        memcpy(rec[i], base[i], base_len[i]);
        len[i] = base_len[i];
        present[i] = true;
    }
    uint8_t hdr[4], bytes[255];
    while (take(r, hdr, 4) && take(r, bytes, hdr[3])) {
        int i = hdr[0] & 3, op = (hdr[0] >> 2) & 3;
        size_t off = (size_t)(hdr[1] | hdr[2] << 8) % (len[i] + 1);
        size_t n = hdr[3];
        if (op == 0 && off + n <= MAX_REC) { /* overwrite, growing if need be */
            memcpy(rec[i] + off, bytes, n);
            if (off + n > len[i])
                len[i] = off + n;
        } else if (op == 1) {
            len[i] = off;
        } else if (op == 2 && len[i] + n <= MAX_REC) {
            memcpy(rec[i] + len[i], bytes, n);
            len[i] += n;
        } else if (op == 3) {
            present[i] = false;
        }
    }
    if ((flags & 2) && len[0] >= (size_t)sum_off + 8) {
        uint64_t h = seal(rec, len);
        memcpy(rec[0] + sum_off, &h, 8);
    }

    struct cfs_index_txn *t = NULL;
    FUZZ_CHECK(cfs_index_begin(ix, true, &t) == 0);
    FUZZ_CHECK(cfs_index_drop(t, "catalog") == 0);
    for (int i = 0; i < NREC; i++)
        if (present[i])
            FUZZ_CHECK(cfs_index_put(t, "catalog", rec_names[i], strlen(rec_names[i]), rec[i],
                                     len[i]) == 0);
    FUZZ_CHECK(cfs_index_commit(t) == 0);

    struct cfs_catalog_params cp = {.source = source, .order = CFS_ORDER_SORTED,
                                    .index_dir = index_dir, .index = ix};
    struct cfs_catalog *c = NULL;
    char err[256];
    int rc = cfs_catalog_store_load(&cp, &c, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == 1 || rc == -ENOMEM);
    if (rc == 0) {
        check_catalog(c);
        cfs_catalog_destroy(c);
    }
    for (int i = 0; i < NREC; i++)
        free(rec[i]);
}

/* ---- the SSD tier's records */

#define NFILES 8u

static int source_of(void *arg, uint32_t id, struct cfs_cache_source *out)
{
    (void)arg;
    if (id >= NFILES)
        return -ENOENT;
    *out = (struct cfs_cache_source){.size = 100 + 37 * id, .mtime_sec = 1700000000 + id,
                                     .mtime_nsec = id, .path_hash = 0x9e3779b97f4a7c15ull * (id + 1)};
    return 0;
}

static void clear_cache_dir(void)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/cache", ssd_dir);
    nftw(p, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void fuzz_cache(struct reader *r)
{
    char p[1024], err[256];
    uint8_t klen, key[8], mode, fill[1024];
    struct cfs_index_txn *t = NULL;

    clear_cache_dir();
    FUZZ_CHECK(mkdir(ssd_dir, 0700) == 0 || errno == EEXIST);
    snprintf(p, sizeof(p), "%s/cache", ssd_dir);
    FUZZ_CHECK(mkdir(p, 0700) == 0);
    FUZZ_CHECK(cfs_index_begin(ix, true, &t) == 0);
    FUZZ_CHECK(cfs_index_drop(t, "cache") == 0);
    for (unsigned nrec = 0; nrec < 32 && take(r, &klen, 1); nrec++) {
        klen = 1 + (klen & 7);
        if (!take(r, key, klen) || !take(r, &mode, 1))
            break;
        uint8_t val[sizeof(struct cache_rec) + 16];
        size_t vlen = sizeof(struct cache_rec);
        uint32_t id = klen == 4 ? (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 |
                                      (uint32_t)key[2] << 8 | key[3]
                                : UINT32_MAX;
        if (mode & 1) { /* raw bytes */
            uint8_t vl;
            if (!take(r, &vl, 1))
                break;
            vlen = vl % sizeof(val);
            if (!take(r, val, vlen))
                break;
        } else { /* a well-formed record, fields from the input */
            struct cache_rec rec = {.magic = CACHE_REC_MAGIC, .version = CACHE_REC_VERSION,
                                    .state = CACHE_REC_COMPLETE, .tier = CFS_TIER_SSD};
            struct cfs_cache_source src = {0};
            uint8_t lenb;
            if (!take(r, &lenb, 1))
                break;
            if ((mode & 2) && source_of(NULL, id, &src) == 0) {
                rec.src_size = src.size;
                rec.mtime_sec = src.mtime_sec;
                rec.mtime_nsec = src.mtime_nsec;
                rec.path_hash = src.path_hash;
                rec.len = (mode & 4) ? src.size : lenb;
            } else if (!take(r, &rec.src_size, 8) || !take(r, &rec.len, 8)) {
                break;
            }
            /* The entry file: its length and bytes from the input. */
            size_t flen = (mode & 8) ? (size_t)(rec.len < sizeof(fill) ? rec.len : 0) : lenb;
            memset(fill, mode, flen);
            if ((mode & 16) && flen)
                fill[flen / 2] ^= 1; /* a flipped bit in the file */
            rec.xxh = XXH3_64bits(fill, flen);
            if (mode & 32)
                take(r, &rec.xxh, 8);
            if (id != UINT32_MAX && !(mode & 64)) {
                char name[32];
                snprintf(name, sizeof(name), "%08x", id);
                snprintf(p, sizeof(p), "%s/cache/%s", ssd_dir, name);
                if (mode & 16)
                    fill[flen / 2] ^= 1;
                fuzz_write_file(p, fill, flen);
            }
            memcpy(val, &rec, sizeof(rec));
        }
        FUZZ_CHECK(cfs_index_put(t, "cache", key, klen, val, vlen) == 0);
    }
    FUZZ_CHECK(cfs_index_commit(t) == 0);

    struct cfs_cache_params cp = {.nfiles = NFILES, .ram_bytes = 1 << 20, .ssd_bytes = 1 << 20,
                                  .ssd_dir = ssd_dir, .index = ix, .source = source_of,
                                  .ssd_verify = CFS_CACHE_VERIFY_EVERY_OPEN};
    struct cfs_cache *c = NULL;
    int rc = cfs_cache_create(&cp, &c, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
    if (rc < 0)
        return;
    for (uint32_t id = 0; id < NFILES; id++) {
        struct cfs_cache_handle h;
        if (cfs_cache_acquire(c, id, 0, &h) != 0)
            continue;
        struct cfs_cache_source src;
        FUZZ_CHECK(source_of(NULL, id, &src) == 0);
        FUZZ_CHECK(h.id == id && h.size == src.size);
        uint8_t *buf = malloc(h.size);
        FUZZ_CHECK(buf != NULL);
        if (h.data)
            memcpy(buf, h.data, h.size);
        else
            FUZZ_CHECK(pread(h.fd, buf, h.size, (off_t)h.offset) == (ssize_t)h.size);
        FUZZ_CHECK(XXH3_64bits(buf, h.size) == h.xxh3);
        free(buf);
        cfs_cache_release(c, &h);
    }
    cfs_cache_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    if (!ix)
        setup();
    struct reader r = {data + 1, size - 1};
    if (data[0] & 1)
        fuzz_cache(&r);
    else
        fuzz_catalog(data[0], &r);
    return 0;
}
