/* One far MT19937 draw as a table lookup over the seeded state (internal
 * to seed_search.c).
 *
 * Every MT output bit is a GF(2)-linear function of the state the seeding
 * leaves, however far into the stream it is: only the seeding recurrence
 * is non-linear. So random64() at word W, for any W, is a 19937 x 64 bit
 * matrix applied to the seeded state; src/seed_jump.c builds that matrix
 * once per W (the jump polynomial x^W mod the generator's characteristic
 * polynomial, found by Berlekamp-Massey) and applies it by byte-indexed
 * tables, so a seed costs 624 seeding steps and 2496 lookups instead of W
 * generated words. */
#ifndef CLAIRFS_SEED_JUMP_H
#define CLAIRFS_SEED_JUMP_H

#include <stdint.h>

enum { CFS_JUMP_STATE_WORDS = 624, CFS_JUMP_LANES = 8 };

struct cfs_seed_jump;

/* Tables for random64() drawn at words `word` and `word + 1` of a freshly
 * seeded generator (no twist done yet: torch's state after manual_seed).
 * About a second of work and 5 MB. Returns 0, -ENOMEM or -EIO (the
 * characteristic polynomial came out wrong: a bug, not an input). */
int cfs_seed_jump_create(uint64_t word, struct cfs_seed_jump **out);
void cfs_seed_jump_destroy(struct cfs_seed_jump *j);

/* The seeded states of seeds seed0 .. seed0 + 7 (cfs_mt19937_seed's). */
void cfs_seed_jump_states(uint32_t seed0, uint32_t st[CFS_JUMP_LANES][CFS_JUMP_STATE_WORDS]);

/* random64() at the table's word for a seeded state. */
uint64_t cfs_seed_jump_draw(const struct cfs_seed_jump *j,
                            const uint32_t state[CFS_JUMP_STATE_WORDS]);

#endif
