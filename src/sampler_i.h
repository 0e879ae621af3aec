/* Private to the sampler module: the list:FILE reader (src/sampler_list.c). */
#ifndef CLAIRFS_SAMPLER_I_H
#define CLAIRFS_SAMPLER_I_H

#include <stddef.h>
#include <stdint.h>

struct cfs_sampler_list;

/* Reads and validates the whole file (format in clairfs/sampler.h) keeping
 * only where each (epoch, rank) line starts and its length. */
int cfs_sampler_list_open(const char *path, uint64_t n, uint32_t world,
                          struct cfs_sampler_list **out, char *err, size_t errlen);
void cfs_sampler_list_close(struct cfs_sampler_list *l);
uint32_t cfs_sampler_list_epochs(const struct cfs_sampler_list *l);
/* Length of (epoch, rank), epoch < cfs_sampler_list_epochs(). */
uint64_t cfs_sampler_list_len(const struct cfs_sampler_list *l, uint32_t epoch, uint32_t rank);
/* The largest total over the ranks of one epoch: the buffer load needs. */
uint64_t cfs_sampler_list_max_epoch_total(const struct cfs_sampler_list *l);
/* Reads epoch `epoch` into buf, rank after rank (rank r starts at the sum of
 * the lengths of ranks < r). */
int cfs_sampler_list_load(struct cfs_sampler_list *l, uint32_t epoch, uint32_t *buf, char *err,
                          size_t errlen);

#endif
