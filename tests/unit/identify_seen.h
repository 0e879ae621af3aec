/* What a module's thread reported, and waits on it, for the unit tests of
 * cfs_identify on its thread (test_identify_thread.c, test_identify_refine.c):
 * on_identified's calls and the last result, on_split's calls and the last
 * sets, on_refused's calls and the last hint refused.  A wait polls
 * every 10 ms with a guard of two minutes against a hang, never a bound on
 * how long a step may take: the asserts after it say what did not come. */
#ifndef CLAIRFS_TEST_IDENTIFY_SEEN_H
#define CLAIRFS_TEST_IDENTIFY_SEEN_H

#include <unistd.h>

#include "clairfs/identify.h"
#include "src/identify_i.h"

struct seen {
    int calls;
    struct cfs_identified id;
    int splits; /* on_split's calls, and the last sets */
    struct cfs_split_sets split;
    int refusals; /* on_refused's calls, and the last hint refused */
    struct cfs_sampler_params refused;
};

static inline void on_identified(void *arg, const struct cfs_identified *id)
{
    struct seen *s = arg;
    s->id = *id;
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
}

static inline void on_refused(void *arg, const struct cfs_sampler_params *hint, const char *why)
{
    struct seen *s = arg;
    (void)why;
    s->refused = *hint;
    __atomic_add_fetch(&s->refusals, 1, __ATOMIC_SEQ_CST);
}

static inline int calls_of(struct seen *s)
{
    return __atomic_load_n(&s->calls, __ATOMIC_SEQ_CST);
}

#define WAIT_POLLS 12000

/* on_identified's calls once `want` of them came (or the guard). */
static inline int wait_calls(struct seen *s, int want)
{
    for (int i = 0; i < WAIT_POLLS && calls_of(s) < want; i++)
        usleep(10000);
    return calls_of(s);
}

/* The module's progress once its thread waits for opens, every attempt
 * due over those observed made (or the guard: the caller asserts). */
static inline struct ident_progress wait_settled(struct cfs_identify *id)
{
    struct ident_progress pr;
    ident_progress_of(id, &pr);
    for (int i = 0; i < WAIT_POLLS && !pr.settled; i++) {
        usleep(10000);
        ident_progress_of(id, &pr);
    }
    return pr;
}

#endif
