/* An unshuffled pass, told by its steps.
 *
 * A validation loop reads its folder in order: SequentialSampler gives
 * each DataLoader worker runs of ascending indices (one batch each), and
 * DistributedSampler(shuffle=False) gives rank r the indices r, r + W,
 * r + 2W, ...  So within one process nearly every step from one open to
 * the next is the same small stride; only a batch boundary jumps (one step
 * in B).  No seed explains such a pass, so the seed search of its root
 * would scan 2^32 seeds for nothing, eight times over: this tells it
 * first.  A shuffled reader's steps are spread over +-n, and almost never
 * the same small stride two times in three. */
#include "roots_i.h"

uint32_t roots_pass_open(struct roots_pass *p, pid_t pid, uint32_t x)
{
    size_t i = 0;
    while (i < p->nreaders && p->pid[i] != pid)
        i++;
    if (i == p->nreaders) {
        if (p->nreaders == ROOTS_PASS_READERS)
            return 0; /* the first readers say it */
        p->pid[p->nreaders] = pid;
        p->last[p->nreaders++] = x;
        return 0;
    }
    uint32_t prev = p->last[i];
    p->last[i] = x;
    p->steps++;
    if (x > prev && x - prev <= ROOTS_PASS_MAX_STRIDE)
        p->stride_steps[x - prev]++;
    if (p->steps < ROOTS_PASS_MIN_STEPS)
        return 0;
    uint32_t best = 1;
    for (uint32_t d = 2; d <= ROOTS_PASS_MAX_STRIDE; d++)
        if (p->stride_steps[d] > p->stride_steps[best])
            best = d;
    /* Two steps in three: batches of 4 and more leave more than that. */
    return p->stride_steps[best] * 3 >= p->steps * 2 ? best : 0;
}
