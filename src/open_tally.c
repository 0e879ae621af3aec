/* Which sightings are one open (open_tally.h).
 *
 * Each reader thread has a ring of its latest opens (node, what saw it,
 * when); threads sit in an open-addressed table by tid, a slot idle for
 * KEEP_NS taken by the next new thread.  A thread's sightings of one open
 * arrive within milliseconds of each other, so a ring holds the opens of
 * the last KEEP_NS: it starts at RING_OPENS_MIN and doubles, up to
 * RING_OPENS_MAX, rather than forget an open younger than that (an
 * anonymous tally's one ring takes every reader's opens, tens of thousands
 * a second with tiny files, and a notification read 50 ms late on a busy
 * host found its open gone from a ring of 1 024 and counted it again). */
#include "open_tally.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 1024u   /* reader threads tracked at once */
#define RING_OPENS_MIN 1024u /* a thread's latest opens; powers of two */
#define RING_OPENS_MAX 65536u
#define KEEP_NS 2000000000ull
/* How late a thread's TTY may follow its open's notification and still be
 * that open's: a thread preempted between open() and isatty() on a busy
 * host.  100 ms was too little beside two busy loops and a test suite on 2
 * CPUs: the TTY then counted its open again, and left an entry that took
 * a later reader's notification of that file (12 001 and 2 999 of 12 000
 * and 3 000). */
#define TTY_LATE_NS 1000000000ull
/* An open a notification alone counted with no TTY after this long is a
 * reader's without isatty(): said soon, as the opens of one file by one
 * thread may merge until the watch changes (a late TTY still matches). */
#define UNTOLD_NS 100000000ull
#define UNTOLD_MAX 4096u
/* An open FUSE served while the marks went in has its notification within
 * a batch if its directory was marked already, else none: past this, a
 * notification of that file is another open's. */
#define SERVED_NOTE_NS 500000000ull
/* The key of the readers an anonymous tally cannot tell apart, and of
 * those the watch cannot name (tid 0): never a thread id. */
#define ANON_KEY ((pid_t)-1)

enum {
    SEEN_PERM = 1,
    SEEN_TTY = 2,
    SEEN_NOTE = 4,
    SEEN_SERVED = 8,
    EXPECT_NOTE = 16, /* the watch reported opens as notifications then */
};

struct tally_open {
    uint64_t node;
    uint64_t at;
    pid_t proc; /* the reader's process; 0: not known */
    uint8_t bits;
};

struct tally_thread {
    pid_t tid; /* 0: free */
    uint64_t used;
    uint32_t head, len, cap; /* ring: the newest at (head + len - 1) % cap */
    struct tally_open *ring;
    /* Entries without SEEN_TTY, and those with EXPECT_NOTE but no
     * SEEN_NOTE: the only ones a TTY or a NOTE can match.  Both are few and
     * recent (a reader's sightings come within milliseconds), so a scan
     * from the newest stops once it passed them all, instead of reading a
     * busy reader's whole ring at every sighting. */
    uint32_t untty, unnoted;
    /* Before counting: the last FUSE OPEN, until its TTY. */
    uint64_t served_node;
    bool served_pending;
};

struct untold {
    pid_t tid;
    bool told; /* its TTY came after all */
    uint64_t node, at;
};

struct cfs_open_tally {
    pthread_mutex_t mu;
    pthread_cond_t counted_cv; /* counting moved */
    /* The open a NOTE alone told, until its caller has counted it: its TTY
     * waits, so that the reader's next open never counts before it. */
    bool counting;
    pid_t counting_tid;
    uint64_t counting_node;
    bool started, notes;
    bool anonymous; /* since the start every sighting is ANON_KEY's */
    /* The latest time a call gave: callers read the clock before the
     * mutex, so a later call may bring an earlier time. */
    uint64_t now;
    uint64_t told_run;
    struct tally_thread threads[THREADS];
    struct untold untold[UNTOLD_MAX]; /* FIFO of opens counted from a NOTE alone */
    uint32_t untold_head, untold_len;
};

int cfs_open_tally_create(struct cfs_open_tally **out)
{
    struct cfs_open_tally *t = calloc(1, sizeof(*t));
    *out = t;
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->counted_cv, NULL);
    return 0;
}

void cfs_open_tally_destroy(struct cfs_open_tally *t)
{
    if (!t)
        return;
    for (unsigned i = 0; i < THREADS; i++)
        free(t->threads[i].ring);
    pthread_cond_destroy(&t->counted_cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Thread tid's slot, taken if need be (the least recently used where every
 * slot is busy); NULL without memory. */
static struct tally_thread *thread_of(struct cfs_open_tally *t, pid_t tid, uint64_t now)
{
    unsigned h = ((unsigned)tid * 2654435761u) % THREADS;
    struct tally_thread *stale = NULL, *oldest = NULL;
    for (unsigned k = 0; k < THREADS; k++) {
        struct tally_thread *th = &t->threads[(h + k) % THREADS];
        if (th->tid == tid)
            return th;
        if (th->tid == 0) {
            if (!stale)
                stale = th;
            break; /* never used: tid is not further on */
        }
        if (!stale && now - th->used > KEEP_NS)
            stale = th;
        if (!oldest || th->used < oldest->used)
            oldest = th;
    }
    struct tally_thread *th = stale ? stale : oldest;
    if (!th->ring) {
        if (!(th->ring = malloc(RING_OPENS_MIN * sizeof(*th->ring))))
            return NULL;
        th->cap = RING_OPENS_MIN;
    }
    th->tid = tid;
    th->head = th->len = 0;
    th->untty = th->unnoted = 0;
    th->served_pending = false;
    return th;
}

static struct tally_open *ring_at(struct tally_thread *th, uint32_t i)
{
    return &th->ring[(th->head + i) & (th->cap - 1)];
}

static bool is_unnoted(uint8_t bits)
{
    return (bits & EXPECT_NOTE) && !(bits & SEEN_NOTE);
}

/* Counts an entry's bits into th's untty and unnoted (dir 1) or out (-1). */
static void count_bits(struct tally_thread *th, uint8_t bits, int dir)
{
    if (!(bits & SEEN_TTY))
        th->untty += (uint32_t)dir;
    if (is_unnoted(bits))
        th->unnoted += (uint32_t)dir;
}

/* Adds bits to entry o of th, keeping the counts. */
static void mark(struct tally_thread *th, struct tally_open *o, uint8_t bits)
{
    count_bits(th, o->bits, -1);
    o->bits |= bits;
    count_bits(th, o->bits, 1);
}

static void ring_drop_oldest(struct tally_thread *th)
{
    count_bits(th, ring_at(th, 0)->bits, -1);
    th->head = (th->head + 1) & (th->cap - 1);
    th->len--;
}

/* Twice the room for th's opens, oldest first; false without memory. */
static bool ring_grow(struct tally_thread *th)
{
    struct tally_open *ring = malloc(2 * (size_t)th->cap * sizeof(*ring));
    if (!ring)
        return false;
    for (uint32_t i = 0; i < th->len; i++)
        ring[i] = *ring_at(th, i);
    free(th->ring);
    th->ring = ring;
    th->head = 0;
    th->cap *= 2;
    return true;
}

static void ring_push(struct tally_thread *th, uint64_t node, uint8_t bits, uint64_t now,
                      pid_t proc)
{
    if (th->len == th->cap &&
        (th->cap == RING_OPENS_MAX || now - ring_at(th, 0)->at > KEEP_NS || !ring_grow(th)))
        ring_drop_oldest(th);
    *ring_at(th, th->len++) =
        (struct tally_open){.node = node, .at = now, .proc = proc, .bits = bits};
    count_bits(th, bits, 1);
}

/* Forgets the opens of th older than KEEP_NS. */
static void ring_expire(struct tally_thread *th, uint64_t now)
{
    while (th->len && now - ring_at(th, 0)->at > KEEP_NS)
        ring_drop_oldest(th);
}

/* The run of told opens, before counting starts. */
static void learn_told(struct cfs_open_tally *t, struct tally_thread *th,
                       enum cfs_open_sighting s, uint64_t node)
{
    if (s == CFS_OPEN_SERVED) {
        if (th->served_pending)
            t->told_run = 0; /* its last open had no isatty() */
        th->served_node = node;
        th->served_pending = true;
    } else if (s == CFS_OPEN_TTY && th->served_pending && th->served_node == node) {
        th->served_pending = false;
        t->told_run++;
    }
}

/* The open that a NOTE alone counted, told by its TTY after all. */
static void untold_told(struct cfs_open_tally *t, pid_t tid, uint64_t node, uint64_t at)
{
    for (uint32_t i = t->untold_len; i-- > 0;) {
        struct untold *u = &t->untold[(t->untold_head + i) % UNTOLD_MAX];
        if (u->tid == tid && u->node == node && u->at == at) {
            u->told = true;
            return;
        }
    }
}

static bool tty_seen(struct cfs_open_tally *t, struct tally_thread *th, uint64_t node,
                     uint64_t now, uint8_t expect, pid_t proc)
{
    /* Past the oldest entry without a TTY, the latest open of node (if
     * any) was told already: this is another. */
    uint32_t untty_left = th->untty;
    for (uint32_t i = th->len; untty_left > 0 && i-- > 0;) {
        struct tally_open *o = ring_at(th, i);
        if (!(o->bits & SEEN_TTY))
            untty_left--;
        if (o->node != node)
            continue;
        bool told_before = o->bits & (SEEN_PERM | SEEN_SERVED);
        bool note_late = (o->bits & SEEN_NOTE) && now - o->at <= TTY_LATE_NS;
        if (!(o->bits & SEEN_TTY) && (told_before || note_late)) {
            mark(th, o, SEEN_TTY);
            if (!told_before)
                untold_told(t, th->tid, node, o->at);
            while (t->counting && t->counting_tid == th->tid && t->counting_node == node)
                pthread_cond_wait(&t->counted_cv, &t->mu);
            return false;
        }
        break; /* the latest open of node was told already: this is another */
    }
    ring_push(th, node, SEEN_TTY | expect, now, proc);
    return true;
}

static bool note_seen(struct cfs_open_tally *t, struct tally_thread *th, uint64_t node,
                      uint64_t now)
{
    /* A notification stands for its opener's opens of the file still
     * queued: the kernel merged them, one process's (one thread's, where
     * it names threads).  Not knowing whose it is (an anonymous tally's
     * ring holds every reader's), it is the latest open's process's: two
     * readers' opens of one file within a notification's lag come as two
     * notifications.  The latest, not the oldest: an open whose
     * notification never comes (its directory marked just after it) would
     * take the next open's, which would then take the one after, epoch
     * after epoch. */
    struct tally_open *latest = NULL;
    uint32_t unnoted_left = th->unnoted;
    for (uint32_t i = th->len; unnoted_left > 0 && i-- > 0;) {
        struct tally_open *o = ring_at(th, i);
        if (!is_unnoted(o->bits))
            continue;
        unnoted_left--;
        if (o->node != node || ((o->bits & SEEN_SERVED) && now - o->at > SERVED_NOTE_NS))
            continue;
        if (!latest)
            latest = o;
        else if (o->proc && o->proc == latest->proc)
            mark(th, o, SEEN_NOTE);
    }
    if (latest) {
        mark(th, latest, SEEN_NOTE);
        return false;
    }
    ring_push(th, node, SEEN_NOTE | EXPECT_NOTE, now, 0);
    t->counting = true;
    t->counting_tid = th->tid;
    t->counting_node = node;
    if (t->untold_len < UNTOLD_MAX)
        t->untold[(t->untold_head + t->untold_len++) % UNTOLD_MAX] =
            (struct untold){.tid = th->tid, .node = node, .at = now, .told = false};
    return true;
}

bool cfs_open_tally_seen(struct cfs_open_tally *t, enum cfs_open_sighting s, pid_t tid,
                         uint64_t node, uint64_t now_ns)
{
    return cfs_open_tally_seen_by(t, s, tid, tid, node, now_ns);
}

bool cfs_open_tally_seen_by(struct cfs_open_tally *t, enum cfs_open_sighting s, pid_t tid,
                            pid_t proc, uint64_t node, uint64_t now_ns)
{
    pthread_mutex_lock(&t->mu);
    if (now_ns < t->now)
        now_ns = t->now;
    t->now = now_ns;
    bool counted = false;
    if (tid == 0 || (t->started && t->anonymous))
        tid = ANON_KEY;
    if (!t->anonymous)
        proc = tid; /* a thread's ring: every open is its own */
    struct tally_thread *th = thread_of(t, tid, now_ns);
    if (!th) {
        /* Out of memory: count what is exact on its own. */
        counted = t->started && (s == CFS_OPEN_PERM || s == CFS_OPEN_SERVED);
        goto out;
    }
    th->used = now_ns;
    ring_expire(th, now_ns);
    if (!t->started) {
        learn_told(t, th, s, node);
        /* Kept: an open FUSE served just before the start whose TTY (or
         * notification, the marks going in) comes after it is that open's,
         * not another. */
        if (s == CFS_OPEN_SERVED)
            ring_push(th, node, SEEN_SERVED | EXPECT_NOTE, now_ns, proc);
        else if (s == CFS_OPEN_TTY)
            for (uint32_t i = th->len; i-- > 0;)
                if (ring_at(th, i)->node == node) {
                    mark(th, ring_at(th, i), SEEN_TTY);
                    break;
                }
        goto out;
    }
    uint8_t expect = t->notes ? EXPECT_NOTE : 0;
    switch (s) {
    case CFS_OPEN_PERM:
    case CFS_OPEN_SERVED:
        ring_push(th, node, (s == CFS_OPEN_PERM ? SEEN_PERM : SEEN_SERVED) | expect, now_ns,
                  proc);
        counted = true;
        break;
    case CFS_OPEN_TTY:
        counted = tty_seen(t, th, node, now_ns, expect, proc);
        break;
    case CFS_OPEN_NOTE:
        counted = note_seen(t, th, node, now_ns);
        break;
    }
out:
    pthread_mutex_unlock(&t->mu);
    return counted;
}

bool cfs_open_tally_untold(struct cfs_open_tally *t, uint64_t now_ns, pid_t *tid,
                           uint64_t *node)
{
    pthread_mutex_lock(&t->mu);
    if (now_ns < t->now)
        now_ns = t->now;
    t->now = now_ns;
    bool untold = false;
    while (t->untold_len && now_ns - t->untold[t->untold_head].at > UNTOLD_NS) {
        struct untold u = t->untold[t->untold_head];
        t->untold_head = (t->untold_head + 1) % UNTOLD_MAX;
        t->untold_len--;
        if (!u.told) {
            untold = true;
            *tid = u.tid == ANON_KEY ? 0 : u.tid;
            *node = u.node;
            t->untold_len = 0; /* said once: the watch changes for all */
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return untold;
}

void cfs_open_tally_counted(struct cfs_open_tally *t)
{
    pthread_mutex_lock(&t->mu);
    t->counting = false;
    pthread_cond_broadcast(&t->counted_cv);
    pthread_mutex_unlock(&t->mu);
}

bool cfs_open_tally_untold_pending(struct cfs_open_tally *t)
{
    pthread_mutex_lock(&t->mu);
    bool pending = t->untold_len > 0;
    pthread_mutex_unlock(&t->mu);
    return pending;
}

/* The opens FUSE served before an anonymous start whose TTY has not come
 * yet, moved to ANON_KEY's ring, where their TTY will look. */
static void gather_anonymous(struct cfs_open_tally *t)
{
    struct tally_thread *anon = thread_of(t, ANON_KEY, t->now);
    if (!anon)
        return; /* out of memory: such a TTY counts once more */
    anon->used = t->now;
    for (unsigned i = 0; i < THREADS; i++) {
        struct tally_thread *th = &t->threads[i];
        if (th == anon || th->tid == 0 || !th->ring)
            continue;
        ring_expire(th, t->now);
        for (uint32_t k = 0; k < th->len; k++) {
            const struct tally_open *o = ring_at(th, k);
            if ((o->bits & SEEN_SERVED) && !(o->bits & SEEN_TTY))
                ring_push(anon, o->node, o->bits, o->at, o->proc);
        }
    }
}

/* The opens before the start, made before the watch's first mark: no
 * notification comes for them, and one taken for theirs would be lost. */
static void expect_no_notes(struct cfs_open_tally *t)
{
    for (unsigned i = 0; i < THREADS; i++) {
        struct tally_thread *th = &t->threads[i];
        for (uint32_t k = 0; th->tid && k < th->len; k++) {
            struct tally_open *o = ring_at(th, k);
            if (o->bits & EXPECT_NOTE) {
                count_bits(th, o->bits, -1);
                o->bits &= (uint8_t)~EXPECT_NOTE;
                count_bits(th, o->bits, 1);
            }
        }
    }
}

void cfs_open_tally_start(struct cfs_open_tally *t, bool notes, bool anonymous)
{
    pthread_mutex_lock(&t->mu);
    expect_no_notes(t);
    t->started = true;
    t->notes = notes;
    t->anonymous = anonymous;
    if (anonymous)
        gather_anonymous(t);
    pthread_mutex_unlock(&t->mu);
}

bool cfs_open_tally_counting(struct cfs_open_tally *t)
{
    pthread_mutex_lock(&t->mu);
    bool started = t->started;
    pthread_mutex_unlock(&t->mu);
    return started;
}

uint64_t cfs_open_tally_told_run(struct cfs_open_tally *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t run = t->told_run;
    pthread_mutex_unlock(&t->mu);
    return run;
}
