/* Strict text -> value parsers used by the JSON scan (contract §1, "In JSON Lines input...").
 *
 * Decimals are parsed from the token's digits, never through a double, so "0.125" at scale 2 is
 * exactly 13 (half away from zero) and 18-digit values keep every digit.
 */
#include <string.h>

#include "jgrt.h"

static const int64_t pow10_tab[19] = {1,
                                      10,
                                      100,
                                      1000,
                                      10000,
                                      100000,
                                      1000000,
                                      10000000,
                                      100000000,
                                      1000000000,
                                      10000000000,
                                      100000000000,
                                      1000000000000,
                                      10000000000000,
                                      100000000000000,
                                      1000000000000000,
                                      10000000000000000,
                                      100000000000000000,
                                      1000000000000000000};

#define KEEP_DIGITS 40 /* enough: a result has at most 38 digits, plus the rounding digit */

/* A decimal token read for a given precision and scale: its sign, its first significant digits
 * and where the unscaled result's digits end among them. */
typedef struct {
  int neg;
  char sig[KEEP_DIGITS]; /* first significant digits (leading zeros dropped) */
  int64_t k;             /* number of significant digits; 0 for a zero */
  int64_t keep;          /* digits of the unscaled result before rounding (<= precision) */
} decimal_digits;

/* The token reading shared by both decimal parsers: 0 with `d` filled, or the parsers' -1 / -2.
 * `max_precision` is 18 for the v1 (int64) decimals, 38 for the wide ones. Always inlined, so
 * that each parser keeps its own loop over the digits in its own width. */
static inline __attribute__((always_inline)) int read_decimal(const char *p, size_t n, int precision,
                                                               int scale, int max_precision,
                                                               decimal_digits *d) {
  size_t i = 0;
  d->neg = 0;
  if (i < n && (p[i] == '+' || p[i] == '-')) d->neg = p[i++] == '-';
  int64_t k = 0;    /* number of significant digits */
  int64_t frac = 0; /* digits after the point, significant or not */
  int mant_digits = 0, seen_point = 0;
  for (; i < n; i++) {
    char c = p[i];
    if (c >= '0' && c <= '9') {
      mant_digits = 1;
      if (seen_point) frac++;
      if (k == 0 && c == '0') continue;
      if (k < KEEP_DIGITS) d->sig[k] = (char)(c - '0');
      k++;
    } else if (c == '.' && !seen_point) {
      seen_point = 1;
    } else {
      break;
    }
  }
  if (!mant_digits) return -1;
  if (precision < 1 || precision > max_precision || scale < 0 || scale > precision) return -2;
  int64_t exp = 0;
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    i++;
    int eneg = 0;
    if (i < n && (p[i] == '+' || p[i] == '-')) eneg = p[i++] == '-';
    if (i >= n) return -1;
    for (; i < n; i++) {
      if (p[i] < '0' || p[i] > '9') return -1;
      if (exp < 1000000) exp = exp * 10 + (p[i] - '0'); /* clamp: far beyond any fit */
    }
    if (eneg) exp = -exp;
  }
  if (i != n) return -1;
  d->k = k;
  d->keep = 0;
  if (k == 0) return 0;
  /* value = D * 10^(exp - frac), D the k significant digits; unscaled = D * 10^shift */
  int64_t shift = exp - frac + scale;
  d->keep = k + shift;
  if (d->keep > precision) return -2;
  return 0;
}

int jgr_parse_decimal(const char *p, size_t n, int precision, int scale, int64_t *out) {
  decimal_digits d;
  int r = read_decimal(p, n, precision, scale, 18, &d);
  if (r != 0) return r;
  int64_t k = d.k, keep = d.keep, v = 0;
  if (keep > 0) {
    int64_t from_sig = keep < k ? keep : k;
    for (int64_t j = 0; j < from_sig; j++) v = v * 10 + d.sig[j];
    if (keep > k) v *= pow10_tab[keep - k]; /* keep <= precision <= 18 */
  }
  if (keep >= 0 && keep < k && d.sig[keep] >= 5) v++; /* half away from zero: first dropped digit */
  if (v >= pow10_tab[precision]) return -2;           /* rounding carried into one more digit */
  *out = d.neg ? -v : v;
  return 0;
}

int jgr_parse_decimal128(const char *p, size_t n, int precision, int scale, __int128 *out) {
  decimal_digits d;
  int r = read_decimal(p, n, precision, scale, 38, &d);
  if (r != 0) return r;
  int64_t k = d.k, keep = d.keep;
  __int128 v = 0;
  if (keep > 0) {
    int64_t from_sig = keep < k ? keep : k;
    for (int64_t j = 0; j < from_sig; j++) v = v * 10 + d.sig[j];
    for (int64_t j = k; j < keep; j++) v *= 10; /* keep <= precision <= 38 */
  }
  if (keep >= 0 && keep < k && d.sig[keep] >= 5) v++; /* half away from zero: first dropped digit */
  __int128 limit = pow10_tab[precision < 18 ? precision : 18];
  for (int j = 18; j < precision; j++) limit *= 10;
  if (v >= limit) return -2; /* rounding carried into one more digit */
  *out = d.neg ? -v : v;
  return 0;
}

int64_t jgr_days_from_civil(int64_t y, unsigned m, unsigned d) {
  /* Howard Hinnant's days_from_civil */
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

int jgr_parse_date(const char *p, size_t n, int64_t *days) {
  if (n != 10 || p[4] != '-' || p[7] != '-') return -1;
  static const int digit_pos[8] = {0, 1, 2, 3, 5, 6, 8, 9};
  for (int j = 0; j < 8; j++)
    if (p[digit_pos[j]] < '0' || p[digit_pos[j]] > '9') return -1;
  int y = (p[0] - '0') * 1000 + (p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
  unsigned m = (unsigned)((p[5] - '0') * 10 + (p[6] - '0'));
  unsigned d = (unsigned)((p[8] - '0') * 10 + (p[9] - '0'));
  static const unsigned dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1) return -1;
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > dim[m - 1] + (m == 2 && leap)) return -1;
  *days = jgr_days_from_civil(y, m, d);
  return 0;
}
