/* Fuzz target: the -o option list (cfs_options_parse_list, _validate,
 * _sampler_params), the size and integer parsers, and {rank} expansion.
 * Invariants: every call returns 0 or one of its documented -errno; a
 * failure comes with a non-empty, terminated message; {rank} expansion
 * replaces exactly the non-overlapping occurrences. */
#include "fuzz_common.h"

#include "clairfs/options.h"

static size_t count_tokens(const char *s)
{
    size_t n = 0;
    for (const char *p = strstr(s, "{rank}"); p; p = strstr(p + 6, "{rank}"))
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *s = fuzz_cstr(data, size);
    char err[160];

    struct cfs_options o;
    cfs_options_init(&o);
    memset(err, 0x5a, sizeof(err));
    int rc = cfs_options_parse_list(&o, s, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc < 0)
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
    if (rc == 0) {
        memset(err, 0x5a, sizeof(err));
        rc = cfs_options_validate(&o, err, sizeof(err));
        FUZZ_CHECK(rc == 0 || rc == -EINVAL);
        if (rc < 0)
            FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
        if (rc == 0 && o.has_ranks)
            FUZZ_CHECK(o.rank_first <= o.rank_last && o.rank_last < o.world);
        struct cfs_sampler_params p;
        cfs_options_sampler_params(&o, 1000, &p);
        FUZZ_CHECK(p.n == 1000 && p.kind == o.sampler);
    }
    cfs_options_free(&o);

    /* One key=value on its own, as the daemon hands over unknown keys. */
    cfs_options_init(&o);
    rc = cfs_options_set(&o, s, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT || rc == -ENOMEM);
    cfs_options_free(&o);

    uint64_t v = 0;
    rc = cfs_parse_size(s, &v);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
    rc = cfs_parse_u64(s, 1000, &v);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
    if (rc == 0)
        FUZZ_CHECK(v <= 1000);

    char *x = cfs_options_expand_rank(s, 12);
    if (x) {
        size_t n = count_tokens(s);
        FUZZ_CHECK(strlen(x) == strlen(s) - 4 * n); /* 6 bytes become "12" */
        FUZZ_CHECK(strstr(x, "{rank}") == NULL); /* "{rank}" cannot overlap itself */
        free(x);
    }
    free(s);
    return 0;
}
