/* Fuzz target: sampler=list:FILE (src/sampler_list.c) through the public
 * sampler API.  Input: byte 0 gives world (1..4), byte 1 the dataset
 * length n (1..256), the rest is the file.  Invariants, from
 * include/clairfs/sampler.h: creation returns 0 or -errno with a message;
 * an accepted list yields, for every epoch, the same number of indices on
 * every rank, each below n, and epochs cycle. */
#include "fuzz_common.h"

#include "clairfs/sampler.h"

#define MAX_FILE (64u * 1024u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > MAX_FILE)
        return 0;
    uint32_t world = 1u + (data[0] & 3u);
    uint64_t n = 1u + data[1];
    char path[512];
    fuzz_path(path, sizeof(path), "sampler.list");
    fuzz_write_file(path, data + 2, size - 2);

    struct cfs_sampler_params p = {
        .kind = CFS_SAMPLER_LIST,
        .n = n,
        .world = world,
        .batch = 1,
        .list_path = path,
    };
    struct cfs_sampler *s = NULL;
    char err[256];
    err[0] = '\0';
    int rc = cfs_sampler_create(&p, &s, err, sizeof(err));
    if (rc < 0) {
        FUZZ_CHECK(s == NULL || rc < 0);
        FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof(err)) != NULL);
        return 0;
    }
    FUZZ_CHECK(rc == 0 && s != NULL);
    uint32_t *first = NULL;
    uint64_t first_len = 0;
    /* Epochs 0..4; a list of E epochs makes epoch e read epoch e % E, and
     * a one-epoch list must read epoch 0 again in epoch 1. */
    for (uint32_t e = 0; e < 5; e++) {
        rc = cfs_sampler_compute_epoch(s, e);
        FUZZ_CHECK(rc == 0);
        uint64_t len0 = cfs_sampler_rank_len(s, e, 0);
        for (uint32_t r = 0; r < world; r++) {
            uint64_t len = cfs_sampler_rank_len(s, e, r);
            FUZZ_CHECK(len == len0);
            FUZZ_CHECK(len <= MAX_FILE / 2);
            for (uint64_t i = 0; i < len; i++)
                FUZZ_CHECK(cfs_sampler_rank_at(s, r, i) < n);
        }
        if (e == 0) {
            first_len = len0;
            first = malloc((len0 ? len0 : 1) * sizeof(*first));
            FUZZ_CHECK(first != NULL);
            for (uint64_t i = 0; i < len0; i++)
                first[i] = cfs_sampler_rank_at(s, 0, i);
        }
    }
    /* Epoch 0 again after later ones: the re-read must give the same. */
    FUZZ_CHECK(cfs_sampler_compute_epoch(s, 0) == 0);
    FUZZ_CHECK(cfs_sampler_rank_len(s, 0, 0) == first_len);
    for (uint64_t i = 0; i < first_len; i++)
        FUZZ_CHECK(cfs_sampler_rank_at(s, 0, i) == first[i]);
    free(first);
    cfs_sampler_destroy(s);
    return 0;
}
