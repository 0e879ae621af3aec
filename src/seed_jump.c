/* A far MT19937 draw as a linear map of the seeded state (src/seed_jump.h).
 *
 * MT19937's transition (one word generated) is a linear map A on a
 * 19937-bit state, and the tempered output words x_0, x_1, ... satisfy the
 * linear recurrence of A's characteristic polynomial phi (degree 19937).
 * Hence x_W = XOR of x_k over the k < 19937 where g = x^W mod phi has a
 * 1: the far word is a fixed combination of the first 19937 ones. Fed the
 * unit states e_b, that gives column b of the matrix from seeded state to
 * x_W. phi is found once by Berlekamp-Massey over bit 0 of 2 * 19937
 * outputs; x^W mod phi by squaring (a square over GF(2) is a bit spread).
 *
 * The 19937 columns (bit 31 of word 0, all of words 1..623; the low 31 bits
 * of word 0 never reach an output) are grouped by byte of the state into
 * 256-entry XOR tables: 2496 lookups per seed. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clairfs/sampler.h"
#include "seed_jump.h"

enum {
    MT_N = CFS_JUMP_STATE_WORDS,
    DEG = 19937,                 /* degree of phi */
    PW = (DEG + 63) / 64 + 1,    /* words of a polynomial of degree <= DEG */
    CB = 8,                      /* state bits per table: 5 MB in all */
    PER_WORD = 32 / CB,
    CHUNKS = MT_N * PER_WORD,
    ENTRIES = 1 << CB,
};

struct cfs_seed_jump {
    uint64_t table[CHUNKS][ENTRIES]; /* draw = XOR over chunks of table[chunk][value] */
};

static inline bool bit(const uint64_t *p, uint64_t i)
{
    return (p[i >> 6] >> (i & 63)) & 1u;
}

static inline void flip(uint64_t *p, uint64_t i)
{
    p[i >> 6] ^= 1ull << (i & 63);
}

/* p ^= q << k, q of `qw` words, p long enough. */
static void xor_shifted(uint64_t *p, const uint64_t *q, size_t qw, uint64_t k)
{
    size_t w = (size_t)(k >> 6);
    unsigned b = (unsigned)(k & 63);
    for (size_t i = 0; i < qw; i++) {
        p[w + i] ^= q[i] << b;
        if (b)
            p[w + i + 1] ^= q[i] >> (64 - b);
    }
}

/* phi from Berlekamp-Massey over bit 0 of the outputs of a seeded
 * generator: the shortest recurrence s_n = sum c_i s_(n-i), and phi(x) =
 * x^L + c_1 x^(L-1) + ... + c_L. Returns 0 or -EIO if L is not 19937. */
enum { NS = 2 * DEG, CW = 2 * PW + NS / 64 + 4 /* room for any shift of b */ };

static int characteristic_polynomial(uint64_t phi[PW])
{
    int rc = -ENOMEM;
    uint8_t *s = malloc(NS);
    uint64_t *c = calloc(CW, sizeof(*c));
    uint64_t *b = calloc(CW, sizeof(*b));
    uint64_t *t = calloc(CW, sizeof(*t));
    if (!s || !c || !b || !t)
        goto out;
    struct cfs_mt19937 mt;
    cfs_mt19937_seed(&mt, 5489);
    for (int i = 0; i < NS; i++)
        s[i] = cfs_mt19937_next32(&mt) & 1u;
    c[0] = b[0] = 1;
    uint64_t len = 0, m = 1;
    for (uint64_t n = 0; n < NS; n++) {
        unsigned d = s[n];
        for (uint64_t i = 1; i <= len; i++)
            d ^= bit(c, i) & s[n - i];
        if (!d) {
            m++;
        } else if (2 * len <= n) {
            memcpy(t, c, CW * sizeof(*c));
            xor_shifted(c, b, PW + 1, m);
            len = n + 1 - len;
            memcpy(b, t, CW * sizeof(*b));
            m = 1;
        } else {
            xor_shifted(c, b, PW + 1, m);
            m++;
        }
    }
    rc = -EIO;
    if (len != DEG)
        goto out;
    memset(phi, 0, PW * sizeof(*phi));
    for (uint64_t i = 0; i <= len; i++)
        if (bit(c, i))
            flip(phi, len - i);
    rc = 0;
out:
    free(s);
    free(c);
    free(b);
    free(t);
    return rc;
}

/* r (2 * PW words, degree < 2 * DEG) reduced mod phi in place. */
static void reduce(uint64_t *r, const uint64_t phi[PW])
{
    for (uint64_t i = 2 * (uint64_t)DEG; i-- > DEG;)
        if (bit(r, i))
            xor_shifted(r, phi, PW, i - DEG);
}

/* g = x^word mod phi, and gx = x^(word+1) mod phi. */
static int jump_polynomials(uint64_t word, const uint64_t phi[PW], uint64_t *g, uint64_t *gx)
{
    uint64_t *sq = calloc(2 * PW + 2, sizeof(*sq));
    if (!sq)
        return -ENOMEM;
    memset(g, 0, PW * sizeof(*g));
    g[0] = 1;
    for (int k = 63; k >= 0; k--) {
        memset(sq, 0, (2 * PW + 2) * sizeof(*sq));
        for (uint64_t i = 0; i < DEG; i++)
            if (bit(g, i))
                flip(sq, 2 * i);
        if ((word >> k) & 1u) {
            uint64_t carry = 0;
            for (size_t i = 0; i < 2 * PW + 1; i++) {
                uint64_t w = sq[i];
                sq[i] = (w << 1) | carry;
                carry = w >> 63;
            }
        }
        reduce(sq, phi);
        memcpy(g, sq, PW * sizeof(*g));
    }
    memcpy(gx, g, PW * sizeof(*g));
    uint64_t carry = 0;
    for (size_t i = 0; i < PW; i++) {
        uint64_t w = gx[i];
        gx[i] = (w << 1) | carry;
        carry = w >> 63;
    }
    if (bit(gx, DEG))
        for (size_t i = 0; i < PW; i++)
            gx[i] ^= phi[i];
    free(sq);
    return 0;
}

/* Column of state bit (word j, bit t): the draw from the unit state. Both
 * combinations are summed untempered (tempering is linear) and tempered
 * once. */
static uint64_t column(uint32_t j, uint32_t t, const uint64_t *g, const uint64_t *gx,
                       uint32_t *s)
{
    memset(s, 0, MT_N * sizeof(*s));
    s[j] = 1u << t;
    uint32_t hi = 0, lo = 0;
    for (uint32_t k = 0; k < DEG; k++) {
        if (k % MT_N == 0)
            cfs_mt19937_twist_state(s);
        uint32_t y = s[k % MT_N];
        hi ^= y & -(uint32_t)bit(g, k);
        lo ^= y & -(uint32_t)bit(gx, k);
    }
    return ((uint64_t)cfs_mt19937_temper(hi) << 32) | cfs_mt19937_temper(lo);
}

static void fill_tables(struct cfs_seed_jump *jt, const uint64_t *g, const uint64_t *gx,
                        uint32_t *s)
{
    for (uint32_t j = 0; j < MT_N; j++) {
        for (uint32_t c = 0; c < PER_WORD; c++) {
            uint64_t col[CB];
            for (uint32_t t = 0; t < CB; t++) {
                uint32_t bitno = c * CB + t;
                col[t] = (j == 0 && bitno != 31) ? 0 : column(j, bitno, g, gx, s);
            }
            uint64_t *tab = jt->table[j * PER_WORD + c];
            tab[0] = 0;
            for (uint32_t v = 1; v < ENTRIES; v++) {
                uint32_t low = (uint32_t)__builtin_ctz(v);
                tab[v] = tab[v & (v - 1)] ^ col[low];
            }
        }
    }
}

/* phi is the generator's, not the seed's: found once per process. */
static uint64_t phi_cache[PW];
static int phi_rc;
static pthread_once_t phi_once = PTHREAD_ONCE_INIT;

static void find_phi(void)
{
    phi_rc = characteristic_polynomial(phi_cache);
}

int cfs_seed_jump_create(uint64_t word, struct cfs_seed_jump **out)
{
    *out = NULL;
    int rc = -ENOMEM;
    const uint64_t *phi = phi_cache;
    uint64_t *g = calloc(PW, sizeof(*g));
    uint64_t *gx = calloc(PW, sizeof(*gx));
    uint32_t *s = malloc(MT_N * sizeof(*s));
    struct cfs_seed_jump *jt = malloc(sizeof(*jt));
    if (!g || !gx || !s || !jt)
        goto out;
    pthread_once(&phi_once, find_phi);
    if ((rc = phi_rc) < 0)
        goto out;
    if ((rc = jump_polynomials(word, phi, g, gx)) < 0)
        goto out;
    fill_tables(jt, g, gx, s);
    *out = jt;
    jt = NULL;
out:
    free(g);
    free(gx);
    free(s);
    free(jt);
    return rc;
}

void cfs_seed_jump_destroy(struct cfs_seed_jump *j)
{
    free(j);
}

typedef uint32_t v8u __attribute__((vector_size(32)));

void cfs_seed_jump_states(uint32_t seed0, uint32_t st[CFS_JUMP_LANES][CFS_JUMP_STATE_WORDS])
{
    const v8u iota = {0, 1, 2, 3, 4, 5, 6, 7};
    v8u x = iota + seed0;
    for (uint32_t j = 0;; j++) {
        for (int l = 0; l < CFS_JUMP_LANES; l++)
            st[l][j] = x[l];
        if (j + 1 == MT_N)
            break;
        x = 1812433253u * (x ^ (x >> 30)) + (j + 1);
    }
}

uint64_t cfs_seed_jump_draw(const struct cfs_seed_jump *j, const uint32_t state[CFS_JUMP_STATE_WORDS])
{
    uint64_t a = 0, b = 0;
    const uint64_t(*t)[ENTRIES] = j->table;
    for (uint32_t w = 0; w < MT_N; w++, t += PER_WORD) {
        uint32_t x = state[w];
        for (uint32_t c = 0; c < PER_WORD; c += 2) {
            a ^= t[c][(x >> (c * CB)) & (ENTRIES - 1)];
            b ^= t[c + 1][(x >> ((c + 1) * CB)) & (ENTRIES - 1)];
        }
    }
    return a ^ b;
}
