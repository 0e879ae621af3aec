/* Background searches (seed, offset, identification) yield to the trainer:
 * the calling thread drops to SCHED_IDLE, which runs only when nothing else
 * wants the core, or where that is refused to nice 19.  Returns what it got:
 * "idle", "nice 19" or "normal" (both refused). */
#ifndef CLAIRFS_THREAD_PRIORITY_H
#define CLAIRFS_THREAD_PRIORITY_H

#include <pthread.h>
#include <sys/types.h>

const char *cfs_thread_lower_priority(void);
/* Back from SCHED_IDLE to the normal policy, for short work that must not
 * wait for an idle core (a check of milliseconds that a busy trainer would
 * otherwise delay by seconds).  0 or -errno; a nice value stays. */
int cfs_thread_normal_priority(void);
/* The same for another thread: one told to stop what it does at SCHED_IDLE
 * (a cancelled scan) must run to see it, where on busy cores a thread at
 * idle priority waits for seconds or the rest of an epoch. */
int cfs_thread_normal_priority_of(pthread_t thread);
/* Another thread to SCHED_IDLE, else nice 19 (tid: its gettid()), as the
 * workers of a scan that share one pace (seed_threads.c): 0 or -errno. */
int cfs_thread_lower_priority_of(pthread_t thread, pid_t tid);

#endif
