/* The index's health check, and moving a damaged environment aside.
 *
 * Why a child process.  LMDB trusts its pages: a page of random bytes can
 * make a cursor fail cleanly (MDB_CORRUPTED, MDB_PAGE_NOTFOUND), trip one
 * of its assertions (abort), or follow a wild offset (SIGSEGV, SIGBUS past
 * the end of a truncated file).  Only a process we can lose may read such
 * pages, so the check forks, the child opens the environment read-only and
 * walks it, and reports on a pipe and in its exit status; the parent only
 * reads the verdict.  The child sets no core limit (a damaged index must
 * not leave cores about) and LMDB's assertion callback turns an assertion
 * into a verdict instead of an abort.
 *
 * What the walk proves.  Every database is walked with a cursor: keys in
 * strictly increasing order, as many records as the database's header
 * counts, the first and last byte of every value read (so a value outside
 * the file faults here, not in the daemon).  The free list's entries are
 * page lists: in range, descending, and no page free twice.  Then every
 * page of the file is accounted for, as LMDB's own audit does: the pages of
 * every tree plus the free pages plus the two meta pages make the file's
 * used pages exactly.  A page of random bytes that happens to parse as a
 * leaf still breaks the key order or the counts; a free list that hands
 * out a page in use (what ends in LMDB's `x > 1` assertion on a later
 * write) breaks the accounting.  The values themselves are the readers'
 * business: the catalog's copy has its checksum, an SSD entry's record its
 * file's length and xxh3.
 *
 * Moving aside.  The files go to DIR.damaged (an older copy there is
 * replaced: one is kept, for inspection); when they cannot be moved (DIR is
 * a mount point, say) they are removed.  The caller's next open of DIR then
 * creates an empty environment, the catalog is scanned again and the SSD
 * tier, finding no records, starts empty and removes its files. */
#include "clairfs/index_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clairfs/log.h"

#define NUM_METAS 2
#define MIN_FILE (NUM_METAS * 4096)
#define MAX_NAMES 128
#define CHECK_TIMEOUT_MS (120 * 1000)

/* The child's exit status: a verdict, or UNCHECKED + errno. */
enum { SOUND = 0, DAMAGED = 1, FOREIGN = 2, UNCHECKED = 16 };

/* LMDB's page header (mdb.c, 64-bit pgno_t): an overflow run's first page
 * holds its number, flags and its length in pages. */
#define OV_HDR 16
#define P_OVERFLOW_FLAG 0x04

struct walk {
    MDB_txn *txn;
    const char *map; /* where the file is mapped */
    size_t psize;
    size_t last_pgno;
    bool same_txn;    /* no commit since our snapshot: the accounting is exact */
    uint8_t *freemap; /* one bit per page: seen in the free list */
    size_t freecount, treepages;
    char *why;
    size_t whylen;
};

static int report_fd = -1; /* the child's end of the pipe */

static const char *mdb_name(int rc)
{
    switch (rc) {
    case MDB_CORRUPTED:
        return "MDB_CORRUPTED";
    case MDB_PAGE_NOTFOUND:
        return "MDB_PAGE_NOTFOUND";
    case MDB_INVALID:
        return "MDB_INVALID";
    case MDB_VERSION_MISMATCH:
        return "MDB_VERSION_MISMATCH";
    case MDB_INCOMPATIBLE:
        return "MDB_INCOMPATIBLE";
    case MDB_BAD_TXN:
        return "MDB_BAD_TXN";
    case MDB_PANIC:
        return "MDB_PANIC";
    default:
        return mdb_strerror(rc);
    }
}

/* Errors that say nothing about the file: the check could not run. */
static bool not_about_the_file(int rc)
{
    return rc == EACCES || rc == EPERM || rc == ENOMEM || rc == EMFILE || rc == ENFILE ||
           rc == ENOSPC || rc == EROFS || rc == EAGAIN || rc == EBUSY;
}

static int damaged(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int damaged(struct walk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, w->whylen, fmt, ap);
    va_end(ap);
    return DAMAGED;
}

/* LMDB calls this before it aborts: the verdict goes out first. */
static void on_assert(MDB_env *env, const char *msg)
{
    (void)env;
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "LMDB assertion: %s", msg);
    if (report_fd >= 0 && n > 0)
        (void)!write(report_fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    _exit(DAMAGED);
}

/* A value on overflow pages starts right after the first page's header
 * (in a leaf it never can: the header and the node pointers come first).
 * That header is what LMDB trusts when it frees the pages on a later write:
 * it must name its own page, say overflow, and count the pages the value
 * needs, all inside the file. */
static bool overflow_ok(const struct walk *w, const MDB_val *v)
{
    uintptr_t at = (uintptr_t)v->mv_data - (uintptr_t)w->map;
    if ((at - OV_HDR) % w->psize)
        return true; /* inline in a leaf */
    struct {
        uint64_t pgno;
        uint16_t pad, flags;
        uint32_t pages;
    } h;
    memcpy(&h, (const char *)v->mv_data - OV_HDR, sizeof(h));
    size_t pages = (OV_HDR - 1 + v->mv_size) / w->psize + 1;
    return (!w->map || h.pgno == (at - OV_HDR) / w->psize) && (h.flags & P_OVERFLOW_FLAG) &&
           h.pages == pages && h.pgno + pages - 1 <= w->last_pgno;
}

/* Walk one database; is_free: the free list, whose values are page lists. */
static int walk_db(struct walk *w, MDB_dbi dbi, const char *what, bool is_free)
{
    MDB_cursor *cur;
    MDB_val k, v, prev = {0, NULL};
    MDB_stat st;
    size_t n = 0;
    char *prev_buf = NULL;
    int verdict = SOUND;
    int rc = mdb_cursor_open(w->txn, dbi, &cur);
    if (rc)
        return damaged(w, "%s in %s", mdb_name(rc), what);
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && verdict == SOUND;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (prev.mv_data && mdb_cmp(w->txn, dbi, &prev, &k) >= 0) {
            verdict = damaged(w, "keys out of order in %s", what);
            break;
        }
        char *copy = realloc(prev_buf, k.mv_size ? k.mv_size : 1);
        if (!copy) {
            verdict = UNCHECKED + ENOMEM;
            break;
        }
        prev_buf = copy;
        memcpy(prev_buf, k.mv_data, k.mv_size);
        prev = (MDB_val){k.mv_size, prev_buf};
        if (v.mv_size) {
            /* Fault here, in the child, if the value lies outside the file. */
            volatile const unsigned char *p = v.mv_data;
            (void)p[0];
            (void)p[v.mv_size - 1];
            if (!overflow_ok(w, &v)) {
                verdict = damaged(w, "a bad overflow page in %s", what);
                break;
            }
        }
        n++;
        if (!is_free)
            continue;
        size_t count;
        if (v.mv_size < sizeof(size_t) || v.mv_size % sizeof(size_t)) {
            verdict = damaged(w, "a free-list entry of %zu bytes", v.mv_size);
            break;
        }
        memcpy(&count, v.mv_data, sizeof(count));
        if (count != v.mv_size / sizeof(size_t) - 1) {
            verdict = damaged(w, "a free-list entry of %zu bytes counts %zu pages", v.mv_size,
                              count);
            break;
        }
        size_t last = SIZE_MAX;
        for (size_t i = 1; i <= count && verdict == SOUND; i++) {
            size_t pg;
            memcpy(&pg, (const char *)v.mv_data + i * sizeof(size_t), sizeof(pg));
            if (pg < NUM_METAS || pg > w->last_pgno || pg >= last ||
                (w->freemap[pg / 8] & (1u << (pg % 8))))
                verdict = damaged(w, "free page %zu out of range, order or twice free", pg);
            else
                w->freemap[pg / 8] |= (uint8_t)(1u << (pg % 8));
            last = pg;
        }
        w->freecount += count;
    }
    mdb_cursor_close(cur);
    free(prev_buf);
    if (verdict != SOUND)
        return verdict;
    if (rc != MDB_NOTFOUND)
        return damaged(w, "%s in %s", mdb_name(rc), what);
    rc = mdb_stat(w->txn, dbi, &st);
    if (rc)
        return damaged(w, "%s in %s", mdb_name(rc), what);
    if (st.ms_entries != n)
        return damaged(w, "%s: %zu records walked, the header counts %zu", what, n,
                       (size_t)st.ms_entries);
    w->treepages += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
    return SOUND;
}

/* The named databases (the main database's keys), each walked; "meta"'s
 * format record checked. */
static int walk_named(struct walk *w)
{
    MDB_dbi main_dbi;
    MDB_cursor *cur;
    MDB_val k, v;
    char names[MAX_NAMES][64];
    int nnames = 0, verdict = SOUND;
    int rc = mdb_dbi_open(w->txn, NULL, 0, &main_dbi);
    if (rc == 0)
        rc = mdb_cursor_open(w->txn, main_dbi, &cur);
    if (rc)
        return damaged(w, "%s in the main database", mdb_name(rc));
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        /* clairfs names its databases with short words. */
        if (nnames == MAX_NAMES || k.mv_size == 0 || k.mv_size >= sizeof(names[0]) ||
            memchr(k.mv_data, '\0', k.mv_size)) {
            verdict = damaged(w, "a database name of %zu bytes", k.mv_size);
            break;
        }
        memcpy(names[nnames], k.mv_data, k.mv_size);
        names[nnames++][k.mv_size] = '\0';
    }
    mdb_cursor_close(cur);
    if (verdict != SOUND)
        return verdict;
    if (rc != MDB_NOTFOUND)
        return damaged(w, "%s in the main database", mdb_name(rc));
    verdict = walk_db(w, main_dbi, "the main database", false);
    for (int i = 0; i < nnames && verdict == SOUND; i++) {
        MDB_dbi dbi;
        char what[96];
        snprintf(what, sizeof(what), "%s records", names[i]);
        rc = mdb_dbi_open(w->txn, names[i], 0, &dbi);
        if (rc)
            return damaged(w, "%s in %s", mdb_name(rc), what);
        verdict = walk_db(w, dbi, what, false);
        MDB_val fk = {6, "format"}, fv;
        if (verdict == SOUND && strcmp(names[i], "meta") == 0 &&
            mdb_get(w->txn, dbi, &fk, &fv) == 0 &&
            (fv.mv_size != strlen(CFS_INDEX_FORMAT) ||
             memcmp(fv.mv_data, CFS_INDEX_FORMAT, fv.mv_size) != 0)) {
            int len = fv.mv_size > 40 ? 40 : (int)fv.mv_size;
            snprintf(w->why, w->whylen, "format '%.*s'", len, (const char *)fv.mv_data);
            for (char *c = w->why; *c; c++)
                if (*c < 0x20 || *c > 0x7e)
                    *c = '?';
            verdict = FOREIGN;
        }
    }
    return verdict;
}

/* Where data.mdb is mapped in this process (mdb_env_info() tells only a
 * fixed map's address): from /proc/self/maps; NULL when not found, and the
 * overflow pages' numbers are then not checked. */
static const char *map_base(const char *dir)
{
    char want[PATH_MAX], line[PATH_MAX + 128], path[PATH_MAX];
    const char *base = NULL;
    if (!realpath(dir, want) || strlen(want) + sizeof("/data.mdb") > sizeof(want))
        return NULL;
    strcat(want, "/data.mdb");
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return NULL;
    while (!base && fgets(line, sizeof(line), f)) {
        unsigned long start, end, off;
        path[0] = '\0';
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &start, &end, &off, path) == 4 &&
            off == 0 && strcmp(path, want) == 0)
            base = (const char *)start;
    }
    fclose(f);
    return base;
}

static int check_open_env(MDB_env *env, const char *dir, struct walk *w)
{
    char path[PATH_MAX];
    struct stat fst;
    MDB_envinfo info;
    MDB_stat est;
    int rc = mdb_env_set_maxdbs(env, MAX_NAMES);
    if (rc == 0)
        rc = mdb_env_set_assert(env, on_assert);
    if (rc == 0)
        rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0600);
    if (rc)
        return not_about_the_file(rc) ? UNCHECKED + rc : damaged(w, "%s at open", mdb_name(rc));
    rc = mdb_env_info(env, &info);
    if (rc == 0)
        rc = mdb_env_stat(env, &est);
    if (rc)
        return damaged(w, "%s in the meta pages", mdb_name(rc));
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    if (stat(path, &fst) < 0)
        return UNCHECKED + errno;
    size_t need = (info.me_last_pgno + 1) * (size_t)est.ms_psize;
    if ((uint64_t)fst.st_size < need)
        return damaged(w, "data.mdb is truncated: %lld of %zu bytes", (long long)fst.st_size,
                       need);
    rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &w->txn);
    if (rc)
        return not_about_the_file(rc) ? UNCHECKED + rc : damaged(w, "%s at begin", mdb_name(rc));
    /* The snapshot's own figures: a commit by another process since the
     * open would make the file's figures newer than the snapshot. */
    rc = mdb_env_info(env, &info);
    if (rc)
        return damaged(w, "%s in the meta pages", mdb_name(rc));
    w->same_txn = info.me_last_txnid == mdb_txn_id(w->txn);
    w->last_pgno = info.me_last_pgno;
    w->map = map_base(dir);
    w->psize = est.ms_psize;
    w->freemap = calloc(w->last_pgno / 8 + 1, 1);
    if (!w->freemap)
        return UNCHECKED + ENOMEM;
    int verdict = walk_db(w, 0, "the free list", true);
    if (verdict == SOUND)
        verdict = walk_named(w);
    if (verdict == SOUND && w->same_txn &&
        w->treepages + w->freecount + NUM_METAS != w->last_pgno + 1)
        verdict = damaged(w, "%zu pages in trees, %zu free, %zu in the file", w->treepages,
                          w->freecount, w->last_pgno + 1);
    return verdict;
}

/* The child's whole job: a verdict, with the reason in why. */
static int check_in_child(const char *dir, char *why, size_t whylen)
{
    struct walk w = {.why = why, .whylen = whylen};
    MDB_env *env = NULL;
    int rc = mdb_env_create(&env);
    if (rc)
        return UNCHECKED + (rc > 0 ? rc : EIO);
    int verdict = check_open_env(env, dir, &w);
    /* No cleanup worth doing: the process ends now. */
    return verdict;
}

/* Read the child's report until it closes the pipe or the time is up. */
static bool read_report(int fd, char *why, size_t whylen)
{
    struct timespec t0, now;
    size_t got = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= CHECK_TIMEOUT_MS)
            return false;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)(CHECK_TIMEOUT_MS - spent));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? false : true;
        char buf[256];
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return true;
        for (ssize_t i = 0; i < r && got + 1 < whylen; i++)
            why[got++] = buf[i];
        why[got] = '\0';
    }
}

int cfs_index_check(const char *dir, char *why, size_t whylen)
{
    char path[PATH_MAX];
    struct stat st;
    int fds[2], status;
    why[0] = '\0';
    if (snprintf(path, sizeof(path), "%s/data.mdb", dir) >= (int)sizeof(path))
        return cfs_error_msg(why, whylen, -ENAMETOOLONG, "path too long");
    if (stat(path, &st) < 0)
        return errno == ENOENT ? 0 : cfs_error_msg(why, whylen, -errno, "%s", strerror(errno));
    if (st.st_size < MIN_FILE)
        return cfs_error_msg(why, whylen, -EBADMSG, "data.mdb is truncated: %lld bytes",
                             (long long)st.st_size);
    if (pipe2(fds, O_CLOEXEC) < 0)
        return cfs_error_msg(why, whylen, -errno, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int rc = -errno;
        close(fds[0]);
        close(fds[1]);
        return cfs_error_msg(why, whylen, rc, "fork: %s", strerror(-rc));
    }
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        char reason[400] = "";
        close(fds[0]);
        (void)setrlimit(RLIMIT_CORE, &nocore);
        /* A fault on a damaged page is the answer, not a bug to report: die
         * of it (the parent names the signal), past any handler the process
         * inherited (a sanitizer's would print a report and exit). */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        report_fd = fds[1];
        int verdict = check_in_child(dir, reason, sizeof(reason));
        (void)!write(fds[1], reason, strlen(reason));
        _exit(verdict);
    }
    close(fds[1]);
    bool finished = read_report(fds[0], why, whylen);
    close(fds[0]);
    if (!finished)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return cfs_error_msg(why, whylen, -errno, "waitpid: %s", strerror(errno));
    if (!finished)
        return cfs_error_msg(why, whylen, -EBADMSG, "the check did not end in %d s",
                             CHECK_TIMEOUT_MS / 1000);
    if (WIFSIGNALED(status))
        return cfs_error_msg(why, whylen, -EBADMSG, "the check died of %s",
                             strsignal(WTERMSIG(status)));
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : UNCHECKED + EIO;
    if (code == SOUND)
        return 0;
    if (code == DAMAGED)
        return -EBADMSG;
    if (code == FOREIGN)
        return -EPROTO;
    int err = code > UNCHECKED ? code - UNCHECKED : EIO;
    return cfs_error_msg(why, whylen, -err, "%s", strerror(err));
}

/* DIR's files into aside (emptied of an older copy first).  1: moved; 0:
 * removed instead; -errno when they are still in DIR. */
static int move_aside(const char *dir, const char *aside)
{
    static const char *const files[] = {"data.mdb", "lock.mdb"};
    bool moved = mkdir(aside, 0700) == 0 || errno == EEXIST;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char from[PATH_MAX], to[PATH_MAX];
        if (snprintf(from, sizeof(from), "%s/%s", dir, files[i]) >= (int)sizeof(from) ||
            snprintf(to, sizeof(to), "%s/%s", aside, files[i]) >= (int)sizeof(to))
            return -ENAMETOOLONG;
        if (moved && unlink(to) < 0 && errno != ENOENT)
            moved = false;
        if (moved && rename(from, to) == 0)
            continue;
        if (errno == ENOENT && access(from, F_OK) < 0)
            continue;
        moved = false;
        if (unlink(from) < 0 && errno != ENOENT)
            return -errno;
    }
    return moved ? 1 : 0;
}

int cfs_index_recover(const char *dir, char *note, size_t notelen)
{
    char why[400], base[PATH_MAX], aside[PATH_MAX + 16];
    int rc = cfs_index_check(dir, why, sizeof(why));
    if (rc == 0)
        return 0;
    if (rc != -EBADMSG && rc != -EPROTO)
        return cfs_error_msg(note, notelen, rc, "index %s: cannot check it: %s", dir, why);
    /* "DIR/" must give "DIR.damaged", not "DIR/.damaged". */
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (len >= sizeof(base))
        return cfs_error_msg(note, notelen, -ENAMETOOLONG, "index %s: path too long", dir);
    memcpy(base, dir, len);
    base[len] = '\0';
    snprintf(aside, sizeof(aside), "%s.damaged", base);
    const char *what = rc == -EPROTO ? "was written by another clairfs" : "is damaged";
    int moved = move_aside(base, aside);
    if (moved < 0)
        return cfs_error_msg(note, notelen, moved, "index %s %s (%s), and cannot be removed: %s",
                             base, what, why, strerror(-moved));
    if (moved)
        cfs_error_msg(note, notelen, 1, "index %s %s (%s): moved to %s, rebuilding", base, what,
                      why, aside);
    else
        cfs_error_msg(note, notelen, 1, "index %s %s (%s): removed (it cannot move to %s), "
                      "rebuilding", base, what, why, aside);
    return 1;
}
