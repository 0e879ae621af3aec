/* The idle priority of background search threads (thread_priority.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid */
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clairfs/thread_priority.h"

const char *cfs_thread_lower_priority(void)
{
    struct sched_param sp = {.sched_priority = 0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0)
        return "idle";
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) == 0)
        return "nice 19";
    return "normal";
}

int cfs_thread_lower_priority_of(pthread_t thread, pid_t tid)
{
    struct sched_param sp = {.sched_priority = 0};
    if (pthread_setschedparam(thread, SCHED_IDLE, &sp) == 0)
        return 0;
    return setpriority(PRIO_PROCESS, (id_t)tid, 19) == 0 ? 0 : -errno;
}

int cfs_thread_normal_priority(void)
{
    return cfs_thread_normal_priority_of(pthread_self());
}

int cfs_thread_normal_priority_of(pthread_t thread)
{
    struct sched_param sp = {.sched_priority = 0};
    return -pthread_setschedparam(thread, SCHED_OTHER, &sp);
}
