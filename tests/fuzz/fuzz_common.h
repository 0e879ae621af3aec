/* What the fuzz targets share: the libFuzzer entry points (declared here so
 * -Wmissing-declarations stays quiet) and a scratch directory.
 *
 * Each target is built twice (tests/fuzz/meson.build): with libFuzzer's main
 * when the compiler is clang, and with replay_main.c, which feeds the corpus
 * and the crashers to the same function as a regression test.  A target
 * reports a broken invariant with FUZZ_CHECK, which aborts: libFuzzer keeps
 * the input as a crasher, the replay test fails. */
#ifndef CLAIRFS_FUZZ_COMMON_H
#define CLAIRFS_FUZZ_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -errno : 0;
}

static char fuzz_dir_path[256];

static inline void fuzz_rm_dir(void)
{
    if (fuzz_dir_path[0])
        nftw(fuzz_dir_path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* One scratch directory per process, removed at exit, in
 * $CLAIRFS_FUZZ_TMPDIR, else /dev/shm when there is one (some targets commit
 * an LMDB transaction per input, and an fsync on tmpfs costs nothing), else
 * $TMPDIR or /tmp. */
static inline const char *fuzz_dir(void)
{
    if (fuzz_dir_path[0])
        return fuzz_dir_path;
    const char *base = getenv("CLAIRFS_FUZZ_TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/clairfs-fuzz.XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(fuzz_rm_dir);
    return fuzz_dir_path;
}

/* dir/name into buf (aborts if it does not fit). */
static inline void fuzz_path(char *buf, size_t len, const char *name)
{
    if (snprintf(buf, len, "%s/%s", fuzz_dir(), name) >= (int)len)
        abort();
}

static inline void fuzz_write_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) {
        perror(path);
        abort();
    }
    close(fd);
}

/* A NUL-terminated copy of the input (the C-string APIs see its prefix up
 * to the first NUL, as a C caller would). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
