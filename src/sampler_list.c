/* list:FILE: explicit per-epoch, per-rank index streams.
 *
 * The file is read twice over its life: once whole at open, to validate
 * every line and note where each (epoch, rank) line starts, and then one
 * epoch at a time on demand. So memory stays O(one epoch) even for a list of
 * many epochs, and a malformed file is rejected before anything is planned. */
#include <errno.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sampler_i.h"

struct cfs_sampler_list {
    char *path;
    FILE *f;
    uint64_t n;
    uint32_t world;
    uint32_t epochs;
    off_t *off;        /* [epoch * world + rank]: start of the line, -1 = not seen */
    uint64_t *len;     /* [epoch * world + rank] */
    unsigned long *lineno;
    uint64_t max_total;
};

static const char *skip_blank(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static bool at_end(const char *p)
{
    p = skip_blank(p);
    return *p == '\0' || *p == '\n' || (*p == '\r' && (p[1] == '\n' || p[1] == '\0'));
}

/* A decimal number at *pp (no sign); advances *pp. */
static bool parse_u64(const char **pp, uint64_t *v)
{
    const char *p = *pp;
    uint64_t x = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *pp = p;
    *v = x;
    return true;
}

static bool parse_word(const char **pp, const char *word)
{
    size_t k = strlen(word);
    if (strncmp(*pp, word, k) != 0)
        return false;
    *pp += k;
    return true;
}

/* The token at p, for messages: up to the next blank, at most 24 chars. */
static int token_len(const char *p)
{
    int k = 0;
    while (p[k] && p[k] != ' ' && p[k] != '\t' && p[k] != '\n' && p[k] != '\r' && k < 24)
        k++;
    return k;
}

/* "epoch E rank R:" -> E, R and the position after the colon. */
static bool parse_line_head(const char *p, uint64_t *e, uint64_t *r, const char **rest)
{
    p = skip_blank(p);
    if (!parse_word(&p, "epoch"))
        return false;
    p = skip_blank(p);
    if (!parse_u64(&p, e))
        return false;
    p = skip_blank(p);
    if (!parse_word(&p, "rank"))
        return false;
    p = skip_blank(p);
    if (!parse_u64(&p, r))
        return false;
    p = skip_blank(p);
    if (*p != ':')
        return false;
    *rest = p + 1;
    return true;
}

/* Parses the indices after the colon; stores at most cap of them into out
 * when out is non-NULL. */
static int parse_indices(const char *p, uint64_t n, uint32_t *out, uint64_t cap, uint64_t *count,
                         const char *path, unsigned long lineno, char *err, size_t errlen)
{
    uint64_t k = 0;
    for (;;) {
        p = skip_blank(p);
        if (at_end(p))
            break;
        const char *tok = p;
        uint64_t v;
        if (!parse_u64(&p, &v) || !(*p == ' ' || *p == '\t' || at_end(p))) {
            snprintf(err, errlen, "%s:%lu: '%.*s' is not an index (a decimal integer)", path,
                     lineno, token_len(tok), tok);
            return -EINVAL;
        }
        if (v >= n) {
            snprintf(err, errlen, "%s:%lu: index %llu out of range (dataset has %llu samples)",
                     path, lineno, (unsigned long long)v, (unsigned long long)n);
            return -EINVAL;
        }
        if (out) {
            if (k == cap) {
                snprintf(err, errlen, "%s:%lu: file changed since it was read", path, lineno);
                return -EIO;
            }
            out[k] = (uint32_t)v;
        }
        k++;
    }
    *count = k;
    return 0;
}

static int parse_header(const char *line, const char *path, unsigned long lineno, uint64_t n,
                        uint32_t world, uint32_t *epochs, char *err, size_t errlen)
{
    const char *p = skip_blank(line);
    bool have_world = false, have_epochs = false;
    if (!parse_word(&p, "clairfs-sampler-list") || !(*p == ' ' || *p == '\t' || at_end(p))) {
        snprintf(err, errlen,
                 "%s:%lu: expected the header 'clairfs-sampler-list world=W epochs=E [n=N]'", path,
                 lineno);
        return -EINVAL;
    }
    for (;;) {
        p = skip_blank(p);
        if (at_end(p))
            break;
        const char *tok = p;
        uint64_t v;
        const char *key = p;
        size_t klen = strcspn(p, "= \t\r\n");
        p += klen;
        if (*p != '=' || (p++, !parse_u64(&p, &v)) || !(*p == ' ' || *p == '\t' || at_end(p))) {
            snprintf(err, errlen, "%s:%lu: bad header field '%.*s' (expected KEY=NUMBER)", path,
                     lineno, token_len(tok), tok);
            return -EINVAL;
        }
        if (klen == 5 && strncmp(key, "world", 5) == 0) {
            if (v != world) {
                snprintf(err, errlen, "%s:%lu: list is for world=%llu, the trainer has world=%u",
                         path, lineno, (unsigned long long)v, world);
                return -EINVAL;
            }
            have_world = true;
        } else if (klen == 6 && strncmp(key, "epochs", 6) == 0) {
            if (v == 0 || v > UINT32_MAX) {
                snprintf(err, errlen, "%s:%lu: epochs=%llu: must be 1..%u", path, lineno,
                         (unsigned long long)v, UINT32_MAX);
                return -EINVAL;
            }
            *epochs = (uint32_t)v;
            have_epochs = true;
        } else if (klen == 1 && key[0] == 'n') {
            if (v != n) {
                snprintf(err, errlen, "%s:%lu: list is for n=%llu, the dataset has %llu samples",
                         path, lineno, (unsigned long long)v, (unsigned long long)n);
                return -EINVAL;
            }
        } else {
            snprintf(err, errlen, "%s:%lu: unknown header field '%.*s'", path, lineno,
                     token_len(tok), tok);
            return -EINVAL;
        }
    }
    if (!have_world || !have_epochs) {
        snprintf(err, errlen, "%s:%lu: header lacks %s", path, lineno,
                 have_world ? "epochs=E" : "world=W");
        return -EINVAL;
    }
    return 0;
}

static bool skippable(const char *line)
{
    const char *p = skip_blank(line);
    return *p == '#' || at_end(p);
}

int cfs_sampler_list_open(const char *path, uint64_t n, uint32_t world,
                          struct cfs_sampler_list **out, char *err, size_t errlen)
{
    struct cfs_sampler_list *l = calloc(1, sizeof(*l));
    char *line = NULL;
    size_t cap = 0;
    unsigned long lineno = 0;
    bool have_header = false;
    int rc = -ENOMEM;

    *out = NULL;
    if (!l || !(l->path = strdup(path)))
        goto fail;
    l->n = n;
    l->world = world;
    l->f = fopen(path, "re");
    if (!l->f) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    for (;;) {
        off_t at = ftello(l->f);
        errno = 0;
        ssize_t got = getline(&line, &cap, l->f);
        if (got < 0) {
            if (errno) {
                rc = -errno;
                snprintf(err, errlen, "%s:%lu: %s", path, lineno + 1, strerror(errno));
                goto fail;
            }
            break;
        }
        lineno++;
        if ((size_t)got != strlen(line)) {
            rc = -EINVAL;
            snprintf(err, errlen, "%s:%lu: NUL byte in a text file", path, lineno);
            goto fail;
        }
        if (skippable(line))
            continue;
        if (!have_header) {
            rc = parse_header(line, path, lineno, n, world, &l->epochs, err, errlen);
            if (rc < 0)
                goto fail;
            size_t cells = (size_t)l->epochs * world;
            /* Every (epoch, rank) needs a line of its own: a header that
             * promises more of them than the file has bytes is wrong, and
             * must not size an allocation (the missing lines themselves are
             * reported by line below). */
            struct stat fst;
            if (cells / world != l->epochs ||
                (fstat(fileno(l->f), &fst) == 0 && cells > (uint64_t)fst.st_size)) {
                rc = -EINVAL;
                snprintf(err, errlen,
                         "%s:%lu: epochs=%u x world=%u lines promised, the file is too short",
                         path, lineno, l->epochs, world);
                goto fail;
            }
            rc = -ENOMEM;
            if (cells / world != l->epochs || !(l->off = malloc(cells * sizeof(*l->off))) ||
                !(l->len = calloc(cells, sizeof(*l->len))) ||
                !(l->lineno = calloc(cells, sizeof(*l->lineno)))) {
                snprintf(err, errlen, "%s:%lu: epochs=%u x world=%u: out of memory", path, lineno,
                         l->epochs, world);
                goto fail;
            }
            for (size_t i = 0; i < cells; i++)
                l->off[i] = -1;
            have_header = true;
            continue;
        }
        uint64_t e, r, count;
        const char *rest;
        rc = -EINVAL;
        if (!parse_line_head(line, &e, &r, &rest)) {
            snprintf(err, errlen, "%s:%lu: expected 'epoch E rank R: INDEX...'", path, lineno);
            goto fail;
        }
        if (e >= l->epochs || r >= world) {
            snprintf(err, errlen, "%s:%lu: epoch %llu rank %llu outside the header's epochs=%u world=%u",
                     path, lineno, (unsigned long long)e, (unsigned long long)r, l->epochs, world);
            goto fail;
        }
        size_t cell = (size_t)e * world + r;
        if (l->off[cell] >= 0) {
            snprintf(err, errlen, "%s:%lu: epoch %llu rank %llu listed twice (first on line %lu)",
                     path, lineno, (unsigned long long)e, (unsigned long long)r, l->lineno[cell]);
            goto fail;
        }
        rc = parse_indices(rest, n, NULL, 0, &count, path, lineno, err, errlen);
        if (rc < 0)
            goto fail;
        l->off[cell] = at;
        l->len[cell] = count;
        l->lineno[cell] = lineno;
    }
    rc = -EINVAL;
    if (!have_header) {
        snprintf(err, errlen, "%s:%lu: no header 'clairfs-sampler-list world=W epochs=E'", path,
                 lineno);
        goto fail;
    }
    for (uint32_t e = 0; e < l->epochs; e++) {
        uint64_t total = 0;
        for (uint32_t r = 0; r < world; r++) {
            size_t cell = (size_t)e * world + r;
            if (l->off[cell] < 0) {
                snprintf(err, errlen, "%s:%lu: epoch %u rank %u missing (the header says epochs=%u world=%u)",
                         path, lineno, e, r, l->epochs, world);
                goto fail;
            }
            if (l->len[cell] != l->len[(size_t)e * world]) {
                snprintf(err, errlen,
                         "%s:%lu: epoch %u rank %u has %llu indices, rank 0 has %llu (ranks step in lockstep)",
                         path, l->lineno[cell], e, r, (unsigned long long)l->len[cell],
                         (unsigned long long)l->len[(size_t)e * world]);
                goto fail;
            }
            total += l->len[cell];
        }
        if (total > l->max_total)
            l->max_total = total;
    }
    free(line);
    *out = l;
    return 0;
fail:
    free(line);
    cfs_sampler_list_close(l);
    return rc;
}

void cfs_sampler_list_close(struct cfs_sampler_list *l)
{
    if (!l)
        return;
    if (l->f)
        fclose(l->f);
    free(l->off);
    free(l->len);
    free(l->lineno);
    free(l->path);
    free(l);
}

uint32_t cfs_sampler_list_epochs(const struct cfs_sampler_list *l)
{
    return l->epochs;
}

uint64_t cfs_sampler_list_len(const struct cfs_sampler_list *l, uint32_t epoch, uint32_t rank)
{
    return l->len[(size_t)epoch * l->world + rank];
}

uint64_t cfs_sampler_list_max_epoch_total(const struct cfs_sampler_list *l)
{
    return l->max_total;
}

int cfs_sampler_list_load(struct cfs_sampler_list *l, uint32_t epoch, uint32_t *buf, char *err,
                          size_t errlen)
{
    char *line = NULL;
    size_t cap = 0;
    uint64_t at = 0;
    int rc = 0;

    for (uint32_t r = 0; r < l->world; r++) {
        size_t cell = (size_t)epoch * l->world + r;
        uint64_t e, rr, count;
        const char *rest;
        if (fseeko(l->f, l->off[cell], SEEK_SET) < 0 || getline(&line, &cap, l->f) < 0) {
            rc = errno ? -errno : -EIO;
            snprintf(err, errlen, "%s:%lu: cannot read back: %s", l->path, l->lineno[cell],
                     strerror(-rc));
            break;
        }
        /* The file was validated at open; if it changed since, say so. */
        if (!parse_line_head(line, &e, &rr, &rest) || e != epoch || rr != r) {
            rc = -EIO;
            snprintf(err, errlen, "%s:%lu: file changed since it was read", l->path,
                     l->lineno[cell]);
            break;
        }
        rc = parse_indices(rest, l->n, buf + at, l->len[cell], &count, l->path, l->lineno[cell], err, errlen);
        if (rc == 0 && count != l->len[cell]) {
            rc = -EIO;
            snprintf(err, errlen, "%s:%lu: file changed since it was read", l->path,
                     l->lineno[cell]);
        }
        if (rc < 0)
            break;
        at += count;
    }
    free(line);
    return rc;
}
