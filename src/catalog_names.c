/* How the libraries compare and filter names: the Python string semantics
 * an index order is made of, on the catalog's raw bytes.
 *
 * Every library sorts Python str objects, and a POSIX name becomes a str by
 * UTF-8 decoding with surrogateescape: an undecodable byte b is the lone
 * code point U+DC00+b.  Sorting is by code point, which is not bytewise
 * order once a name is not valid UTF-8 (U+DCFF sorts below U+E000 whose
 * UTF-8 starts with 0xEE).  timm sorts by a "natural key" instead (digit
 * runs compared as numbers, the rest lowercased), and each library tests
 * extensions its own way (endswith on the lowered name, splitext, the text
 * after the last dot).  These are pure functions of bytes, so the orders
 * (catalog_order.c, catalog_walk.c) can be checked against transcriptions
 * of the libraries one rule at a time.
 *
 * Lowercasing is ASCII only.  For the extension tests that is exact:
 * Python's str.lower() maps no non-ASCII character to one of the ASCII
 * letters the extensions use (U+212A KELVIN SIGN becomes 'k', which none
 * uses; U+0130 becomes "i" plus U+0307, two characters).  For timm's natural
 * key it is not: Python lowers non-ASCII letters too and reads non-ASCII
 * decimal digits as numbers; here they compare by code point (documented in
 * catalog_order.c as a divergence).
 *
 * Place in the layer order (src/catalog_i.h): layer 0, calls nothing. */
#include <string.h>

#include "catalog_i.h"

/* One code point of Python's UTF-8 decoding with surrogateescape.  A byte
 * that does not start a complete, shortest-form, non-surrogate sequence is
 * escaped alone; this gives the same result as Python's maximal-subpart
 * error ranges, since every byte in such a range is escaped one by one. */
static uint32_t cp_next(const unsigned char *s, size_t n, size_t *i)
{
    size_t k = *i;
    unsigned b = s[k];
    if (b < 0x80) {
        *i = k + 1;
        return b;
    }
    unsigned need = 0, lo = 0x80, hi = 0xBF;
    uint32_t cp = 0;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        cp = b & 0x0F;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        cp = b & 0x07;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    }
    if (need == 0 || k + need >= n)
        goto escape;
    for (unsigned j = 1; j <= need; j++) {
        unsigned t = s[k + j];
        if (t < (j == 1 ? lo : 0x80) || t > (j == 1 ? hi : 0xBF))
            goto escape;
        cp = (cp << 6) | (t & 0x3F);
    }
    *i = k + 1 + need;
    return cp;
escape:
    *i = k + 1;
    return 0xDC00 + b;
}

int cfs_pykey_cmp(const char *a, size_t alen, int ta, const char *b, size_t blen, int tb)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t i = 0, j = 0;
    while (i < alen && j < blen) {
        if (x[i] < 0x80 && y[j] < 0x80) {
            if (x[i] != y[j])
                return x[i] < y[j] ? -1 : 1;
            i++;
            j++;
            continue;
        }
        uint32_t ca = cp_next(x, alen, &i), cb = cp_next(y, blen, &j);
        if (ca != cb)
            return ca < cb ? -1 : 1;
    }
    /* One string is a prefix of the other: its terminal (-1 for the end,
     * '/' for a directory's subtree) meets the other's next code point. */
    int64_t ca = i < alen ? (int64_t)cp_next(x, alen, &i) : ta;
    int64_t cb = j < blen ? (int64_t)cp_next(y, blen, &j) : tb;
    return (ca > cb) - (ca < cb);
}

int cfs_pystr_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    return cfs_pykey_cmp(a, alen, -1, b, blen, -1);
}

bool cfs_utf8_valid(const char *s, size_t len)
{
    const unsigned char *x = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (x[i] < 0x80) {
            i++;
            continue;
        }
        if (cp_next(x, len, &i) - 0xDC80u < 0x80u)
            return false;
    }
    return true;
}

static bool is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

static uint32_t lower_cp(const unsigned char *s, size_t n, size_t *i)
{
    uint32_t cp = cp_next(s, n, i);
    return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

/* timm's natural_key(s) = [int(t) if t.isdigit() else t for t in
 * re.split(r'(\d+)', s.lower())]: a list alternating text and number,
 * starting and ending with text (maybe empty).  Lists compare element by
 * element; a list that runs out first is the smaller. */
int cfs_natural_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t i = 0, j = 0;
    for (;;) {
        /* Text: up to the next digit or the end, compared as strings. */
        while (i < alen && j < blen && !is_digit(x[i]) && !is_digit(y[j])) {
            uint32_t ca = lower_cp(x, alen, &i), cb = lower_cp(y, blen, &j);
            if (ca != cb)
                return ca < cb ? -1 : 1;
        }
        bool aend = i == alen || is_digit(x[i]), bend = j == blen || is_digit(y[j]);
        if (!aend || !bend)
            return aend ? -1 : 1; /* the shorter text is a prefix: smaller */
        if (i == alen || j == blen)
            return (i < alen) - (j < blen);
        /* Number: int() drops leading zeros; then more digits is larger. */
        size_t i0 = i, j0 = j;
        while (i < alen && is_digit(x[i]))
            i++;
        while (j < blen && is_digit(y[j]))
            j++;
        while (i0 < i - 1 && x[i0] == '0')
            i0++;
        while (j0 < j - 1 && y[j0] == '0')
            j0++;
        if (i - i0 != j - j0)
            return i - i0 < j - j0 ? -1 : 1;
        int d = memcmp(x + i0, y + j0, i - i0);
        if (d)
            return d < 0 ? -1 : 1;
    }
}

static bool tail_is(const char *s, size_t len, const char *ext)
{
    size_t el = strlen(ext);
    if (len < el)
        return false;
    for (size_t i = 0; i < el; i++) {
        char ch = s[len - el + i];
        if ((ch >= 'A' && ch <= 'Z' ? ch + 32 : ch) != ext[i])
            return false;
    }
    return true;
}

bool cfs_name_endswith(const char *name, size_t len, const char *const *exts)
{
    for (; *exts; exts++)
        if (tail_is(name, len, *exts))
            return true;
    return false;
}

bool cfs_name_suffix_in(const char *name, size_t len, bool splitext, const char *const *exts)
{
    const char *dot = memrchr(name, '.', len);
    if (!dot)
        return false;
    if (splitext) {
        /* os.path.splitext: leading dots do not start an extension
         * (".jpg" and "..jpg" have none). */
        const char *p = name;
        while (p < dot && *p == '.')
            p++;
        if (p == dot)
            return false;
    }
    size_t sl = len - (size_t)(dot - name);
    for (; *exts; exts++)
        if (strlen(*exts) == sl && tail_is(dot, sl, *exts))
            return true;
    return false;
}
