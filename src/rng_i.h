/* Private to the rng module (clairfs/rng_offset.h).
 *
 * Layers.  A file calls only files listed before it here, never one after
 * it (checked by the unit test layers).  Bottom up:
 *   rng_offset.c  the offset finder: K and G given S (public API);
 *   rng_table.c   S from three epochs' private seeds, tried over the
 *                 table of seeds people use, one seed's stream walked at a
 *                 time (public API; rng_seed_fits for rng_range.c);
 *   rng_range.c   the same over any range of the 2^32 seeds with the
 *                 first epoch's draw among the stream's first words,
 *                 vectorized and on the seed search's threads (public API).
 */
#ifndef CLAIRFS_RNG_I_H
#define CLAIRFS_RNG_I_H

#include <stdbool.h>
#include <stdint.h>

#include "clairfs/rng_offset.h"

/* The inverse of MT19937's tempering. */
uint32_t rng_untemper(uint32_t y);

/* The last word of the stream where p's first epoch's private seed can
 * stand: K's range past the epochs before it. */
uint64_t rng_first_word_last(const struct cfs_rng_table_problem *p);

/* Does seed S's stream put p's three private seeds at their words, the
 * first at a word <= last (and within p's bounds on K and G)?  If so res
 * gets S, K, G and the iterator (seeds_tried kept). */
bool rng_seed_fits(const struct cfs_rng_table_problem *p, uint64_t seed, uint64_t last,
                   struct cfs_rng_table_result *res);

#endif
