/* The reader of `key = value` files (clairfs/key_value_file.h): the
 * lexical part the model's file and the cluster's description share, so
 * that both accept the same comments, blanks and spacing and say "PATH:LINE:"
 * the same way. */
#include "clairfs/key_value_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s without its comment and surrounding blanks (cut in place). */
static char *strip(char *s)
{
    char *hash = strchr(s, '#');
    if (hash)
        *hash = '\0';
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int split_line(char *s, const char *path, unsigned lineno, cfs_key_value_fn fn, void *arg,
                      char *err, size_t errlen)
{
    char *eq = strchr(s, '=');
    if (!eq) {
        snprintf(err, errlen, "%s:%u: expected key = value", path, lineno);
        return -EINVAL;
    }
    char *key_end = eq;
    while (key_end > s && isspace((unsigned char)key_end[-1]))
        key_end--;
    *key_end = '\0';
    char *value = eq + 1;
    while (isspace((unsigned char)*value))
        value++;
    return fn(s, value, path, lineno, arg, err, errlen);
}

int cfs_key_value_file_read(const char *path, const char *what, cfs_key_value_fn fn, void *arg,
                            char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return rc;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        char *s = strip(line);
        if (*s)
            rc = split_line(s, path, lineno, fn, arg, err, errlen);
    }
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "%s %s: read error", what, path);
    }
    free(line);
    fclose(f);
    return rc;
}
