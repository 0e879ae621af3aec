/* The run's global seed from the private seeds of three epochs: the seeds
 * people use, tried in turn.
 *
 * Why.  A torch-global trainer that nobody registered (timm's train.py:
 * torch.manual_seed(42 + rank), a model built, DataLoader(shuffle=True))
 * is learnt one epoch at a time: each epoch's private seed, the low half of
 * a random64 of the global stream, is found by the exhaustive search of its
 * 2^32 values (identify_epochs.c).  Those private seeds are words of one
 * stream, seeded S: epoch e's is word D_e + 1, D_e = K + 2 + e (L + G)
 * (clairfs/rng_offset.h).  Knowing S, K and G predicts every later epoch
 * with no search at all.  The stream of an arbitrary S cannot be searched
 * (2^32 seeds times 2^25 words; rng_range.c searches them all only where
 * the first epoch's draw stands in the stream's first words), but people
 * seed with a few numbers: the table below.  A table seed is what a registered seed is to
 * identify_global.c, tried in turn, with the same bounds on K and G.
 *
 * How.  For each seed S, the stream is walked once over K's range looking
 * for the first epoch's private seed (the state's words against it
 * untempered, 624 at a time after each twist: 2^25 words a seed).  A match at
 * word i is rare (2^25 / 2^32 a seed); from it the stream is walked on
 * over G's range for the second epoch's private seed, for both loader
 * iterators (L = 4, or 2 with persistent workers), and each (L, G) it
 * names is checked at the one word where the third epoch's must stand.
 *
 * Why three epochs.  The evidence is 32 bits an epoch.  A false claim
 * needs a chance match at each step: (K_max + 1) / 2^32 for the first,
 * 2 (G_max + 1) / 2^32 for the second, 2^-32 for the third, about 2^-46 a
 * seed at K_max = 2^25 and G_max = 2^24, 2^-35 over the table's 1 100
 * seeds; two epochs alone would leave 2^-3.
 *
 * The table (cfs_rng_seed_table), with where each comes from: 42 (the
 * default of timm's train.py - 42 + rank -, of Hugging Face's
 * TrainingArguments and of many examples), 0 and 1 (Lightning's
 * seed_everything default, torch examples), 3407 ("torch.manual_seed(3407)
 * is all you need", Picard 2021), 1234 and 12345 (common examples), 2021 to
 * 2024 (years), 31337, 1337, 777, 666 (hacker and lucky numbers), 123,
 * 100, 7; then every seed of 0..1023 (small seeds and 42 + rank up to rank
 * 981); then 123456, 1234567, 20240101.  Pure computation, synchronous;
 * cancel is polled between seeds. */
#include <errno.h>
#include <string.h>

#include "clairfs/rng_offset.h"
#include "clairfs/sampler.h"
#include "rng_i.h"

enum { MT_WORDS = 624 };

static const uint64_t famous[] = {42,   0,     1,    3407, 1234, 12345, 2021, 2022, 2023,
                                  2024, 31337, 1337, 777,  666,  123,   100,  7};
static const uint64_t large[] = {123456, 1234567, 20240101};
#define SMALL 1024u
#define NFAMOUS (sizeof(famous) / sizeof(famous[0]))
#define NLARGE (sizeof(large) / sizeof(large[0]))
#define TABLE_MAX (NFAMOUS + SMALL + NLARGE)

size_t cfs_rng_seed_table(uint64_t *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < NFAMOUS && k < cap; i++)
        out[k++] = famous[i];
    for (uint64_t s = 0; s < SMALL && k < cap; s++) {
        bool again = false;
        for (size_t i = 0; i < NFAMOUS; i++)
            again = again || famous[i] == s;
        if (!again)
            out[k++] = s;
    }
    for (size_t i = 0; i < NLARGE && k < cap; i++)
        out[k++] = large[i];
    return k;
}

/* The inverse of the generator's tempering (a bijection): the walk
 * compares the state's untempered words with the wanted word untempered
 * once, the twist and a compare a word. */
static uint32_t unshift_right(uint32_t y, int s)
{
    uint32_t x = y;
    for (int i = 0; i < 32 / s + 1; i++)
        x = y ^ (x >> s);
    return x;
}

static uint32_t unshift_left(uint32_t y, int s, uint32_t mask)
{
    uint32_t x = y;
    for (int i = 0; i < 32 / s + 1; i++)
        x = y ^ ((x << s) & mask);
    return x;
}

uint32_t rng_untemper(uint32_t y)
{
    y = unshift_right(y, 18);
    y = unshift_left(y, 15, 0xefc60000u);
    y = unshift_left(y, 7, 0x9d2c5680u);
    return unshift_right(y, 11);
}

/* The first word at or after *at (a stream position) equal to want, up to
 * position last (inclusive): its position, or UINT64_MAX.  mt stands at
 * position *at and is left after the word found (or past last). */
static uint64_t find_word(struct cfs_mt19937 *mt, uint64_t *at, uint64_t last, uint32_t want)
{
    want = rng_untemper(want);
    while (*at <= last) {
        if (mt->next >= MT_WORDS) {
            cfs_mt19937_twist_state(mt->state);
            mt->next = 0;
        }
        uint64_t room = (uint64_t)(MT_WORDS - mt->next);
        if (room > last - *at + 1)
            room = last - *at + 1;
        int from = mt->next, to = from + (int)room, hit = -1;
        for (int k = from; k < to; k++)
            if (mt->state[k] == want) {
                hit = k;
                break;
            }
        if (hit >= 0) {
            uint64_t pos = *at + (uint64_t)(hit - from);
            mt->next = hit + 1;
            *at = pos + 1;
            return pos;
        }
        mt->next += (int)room;
        *at += room;
    }
    return UINT64_MAX;
}

/* The word at position pos of the stream that mt stands at position at
 * of (pos >= at). */
static uint32_t word_at(struct cfs_mt19937 mt, uint64_t at, uint64_t pos)
{
    cfs_mt19937_discard(&mt, pos - at);
    return cfs_mt19937_next32(&mt);
}

/* From a first-epoch match at word i (mt just past it): the second
 * epoch's private seed within G's range, and the third at its word. */
static bool follow(const struct cfs_rng_table_problem *p, uint64_t seed, struct cfs_mt19937 mt,
                   uint64_t i, struct cfs_rng_table_result *res)
{
    const uint32_t *ps = p->private_seeds;
    uint64_t at = i + 1, last = i + 4 + p->max_words, j;
    while ((j = find_word(&mt, &at, last, ps[1])) != UINT64_MAX) {
        for (int pers = 0; pers < 2; pers++) {
            uint64_t l = pers ? 2 : 4, step = j - i;
            if (step < l || step - l > p->max_words)
                continue;
            /* K from the first epoch's word: i = K + 3 + e0 (L + G) */
            uint64_t before = 3 + (uint64_t)p->first_epoch * step;
            if (i < before || i - before > p->max_offset)
                continue;
            if (word_at(mt, at, i + 2 * step) != ps[2])
                continue;
            *res = (struct cfs_rng_table_result){.found = true,
                                                 .seed = seed,
                                                 .offset = i - before,
                                                 .words = step - l,
                                                 .persistent_workers = pers,
                                                 .seeds_tried = res->seeds_tried};
            return true;
        }
    }
    return false;
}

bool rng_seed_fits(const struct cfs_rng_table_problem *p, uint64_t seed, uint64_t last,
                   struct cfs_rng_table_result *res)
{
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, seed);
    uint64_t at = 0, i;
    while ((i = find_word(&mt, &at, last, p->private_seeds[0])) != UINT64_MAX)
        if (follow(p, seed, mt, i, res))
            return true;
    return false;
}

uint64_t rng_first_word_last(const struct cfs_rng_table_problem *p)
{
    return 3 + p->max_offset + (uint64_t)p->first_epoch * (4 + p->max_words);
}

int cfs_rng_table_find(const struct cfs_rng_table_problem *p, const atomic_bool *cancel,
                       struct cfs_rng_table_result *res)
{
    memset(res, 0, sizeof(*res));
    uint64_t table[TABLE_MAX];
    const uint64_t *seeds = p->seeds;
    size_t nseeds = p->nseeds;
    if (!p->private_seeds || p->max_offset > (1ull << 40) || p->max_words > (1ull << 40) ||
        p->first_epoch > 1024)
        return -EINVAL;
    if (!seeds) {
        nseeds = cfs_rng_seed_table(table, TABLE_MAX);
        seeds = table;
    }
    uint64_t last = rng_first_word_last(p);
    for (size_t k = 0; k < nseeds; k++) {
        if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
            res->cancelled = true;
            return 0;
        }
        res->seeds_tried = k + 1;
        if (rng_seed_fits(p, seeds[k], last, res))
            return 0;
    }
    return 0;
}
