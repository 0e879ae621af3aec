/* The fuzz targets without libFuzzer: every file named on the command line,
 * or found (sorted) in a directory named there, goes through
 * LLVMFuzzerTestOneInput once.  Built with any compiler, registered as a
 * unit test, so the corpus and every crasher kept in tests/fuzz/crashers
 * stay regression inputs.  Fails when no input at all was found: a
 * regression test that replays nothing cannot fail. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return -1;
    }
    /* A copy of exactly n bytes, so that ASan sees a read past the input. */
    uint8_t *in = malloc(n ? n : 1);
    if (!in)
        abort();
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the number of inputs replayed, or -1. */
static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path) < 0 ? -1 : 1;
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and .gitkeep */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof(*names));
            if (!names)
                abort();
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof(*names), name_cmp);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof(full), "%s/%s", path, names[i]);
        int rc = replay_path(full);
        if (rc < 0)
            count = -1;
        else if (count >= 0)
            count += rc;
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    int total = 0;
    for (int i = 1; i < argc; i++) {
        int rc = replay_path(argv[i]);
        if (rc < 0)
            return 1;
        total += rc;
    }
    printf("%d input(s) replayed\n", total);
    return total > 0 ? 0 : 1;
}
