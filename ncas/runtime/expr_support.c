/* Helpers for generated query code: the functions declared at the end of jg.h ("helpers for
 * generated code").
 *
 * They live in the runtime library so that generated files stay small and compile fast.
 * Semantics follow contract §1 and DuckDB (checked by tests/unit/test_codegen_support.py and
 * tests/unit/test_codegen_semantics.py). No allocation except through jg_scratch; no locale
 * dependence (numbers are parsed and printed without the C library's locale-sensitive paths
 * deciding the result).
 */
#include "jg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const jg_str EMPTY = {"", 0};

/* ------------------------------------------------------------------ UTF-8 */

/* Bytes of the UTF-8 sequence starting with lead byte `b` (1 for stray continuation bytes). */
static inline uint32_t utf8_seq_len(unsigned char b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

static inline uint32_t utf8_step(const char *p, uint32_t i, uint32_t n) {
  uint32_t k = utf8_seq_len((unsigned char)p[i]);
  return (i + k > n) ? n : i + k;
}

int64_t jg_utf8_length(jg_str s) {
  int64_t count = 0;
  const unsigned char *p = (const unsigned char *)s.p;
  for (uint32_t i = 0; i < s.n; i++) count += (p[i] & 0xC0) != 0x80;
  return count;
}

int jg_strcmp(jg_str a, jg_str b) {
  uint32_t n = a.n < b.n ? a.n : b.n;
  int c = n ? memcmp(a.p, b.p, n) : 0;
  if (c) return c < 0 ? -1 : 1;
  return a.n < b.n ? -1 : a.n > b.n;
}

/* SQL LIKE: '%' any run of characters, '_' exactly one character (code point), other pattern
 * bytes match themselves; case-sensitive; no escape character. Greedy matching that backtracks
 * only to the last '%', so linear for the usual patterns. */
int jg_like(jg_str s, const char *pat, uint32_t pat_len) {
  uint32_t si = 0, pi = 0, star_p = UINT32_MAX, star_s = 0;
  while (si < s.n) {
    if (pi < pat_len && pat[pi] == '%') {
      star_p = ++pi;
      star_s = si;
    } else if (pi < pat_len && pat[pi] == '_') {
      si = utf8_step(s.p, si, s.n);
      pi++;
    } else if (pi < pat_len && pat[pi] == s.p[si]) {
      si++;
      pi++;
    } else if (star_p != UINT32_MAX) {
      star_s = utf8_step(s.p, star_s, s.n);
      si = star_s;
      pi = star_p;
    } else {
      return 0;
    }
  }
  while (pi < pat_len && pat[pi] == '%') pi++;
  return pi == pat_len;
}

/* Byte offset of code point `k` (0-based; k <= number of code points). */
static uint32_t utf8_offset(jg_str s, int64_t k) {
  uint32_t i = 0;
  while (k > 0 && i < s.n) {
    i = utf8_step(s.p, i, s.n);
    k--;
  }
  return i;
}

/* substr(s, start[, len]) as DuckDB: 1-based start in characters; start 0 begins one character
 * before the first (so substr(s, 0, 2) is one character); a negative start counts from the end;
 * a negative length takes the characters before start. Out-of-range parts are clipped (DuckDB
 * raises an error for |start| or |len| beyond 2^32; we clip those too). */
jg_str jg_substr(jg_str s, int64_t start, int64_t len, int has_len) {
  jg_str out = {s.n ? s.p : "", 0};
  if (has_len && len == 0) return out;
  int64_t n = jg_utf8_length(s);
  __int128 st, en, ln = has_len ? (__int128)len : (__int128)1 << 80; /* two arguments: to the end */
  if (start > 0) {
    st = (__int128)start - 1;
  } else if (start < 0) {
    st = (__int128)n + start;
  } else {
    st = 0;
    if (has_len && ln > 0 && --ln == 0) return out;
  }
  if (ln >= 0) {
    en = st + ln;
  } else {
    en = st;
    st = st + ln;
  }
  if (st < 0) st = 0;
  if (en > n) en = n;
  if (st >= en) return out;
  uint32_t b0, b1;
  if ((int64_t)s.n == n) { /* ASCII */
    b0 = (uint32_t)st;
    b1 = (uint32_t)en;
  } else {
    b0 = utf8_offset(s, (int64_t)st);
    jg_str rest = {s.p + b0, s.n - b0};
    b1 = b0 + utf8_offset(rest, (int64_t)(en - st));
  }
  out.p = s.p + b0;
  out.n = b1 - b0;
  return out;
}

/* ------------------------------------------------------------------ case mapping */

struct case_range {
  uint32_t first, last;
  int32_t delta;
  uint32_t stride;
};

/* BEGIN GENERATED CASE TABLES (python -m jumpgate.ncas.software.codegen.casetable) */
static const struct case_range case_lower[182] = {
  {0x0041, 0x005A, 32, 1}, {0x00C0, 0x00D6, 32, 1}, {0x00D8, 0x00DE, 32, 1}, {0x0100, 0x012E, 1, 2},
  {0x0130, 0x0130, -199, 1}, {0x0132, 0x0136, 1, 2}, {0x0139, 0x0147, 1, 2}, {0x014A, 0x0176, 1, 2},
  {0x0178, 0x0178, -121, 1}, {0x0179, 0x017D, 1, 2}, {0x0181, 0x0181, 210, 1}, {0x0182, 0x0184, 1, 2},
  {0x0186, 0x0186, 206, 1}, {0x0187, 0x0187, 1, 1}, {0x0189, 0x018A, 205, 1}, {0x018B, 0x018B, 1, 1},
  {0x018E, 0x018E, 79, 1}, {0x018F, 0x018F, 202, 1}, {0x0190, 0x0190, 203, 1}, {0x0191, 0x0191, 1, 1},
  {0x0193, 0x0193, 205, 1}, {0x0194, 0x0194, 207, 1}, {0x0196, 0x0196, 211, 1}, {0x0197, 0x0197, 209, 1},
  {0x0198, 0x0198, 1, 1}, {0x019C, 0x019C, 211, 1}, {0x019D, 0x019D, 213, 1}, {0x019F, 0x019F, 214, 1},
  {0x01A0, 0x01A4, 1, 2}, {0x01A6, 0x01A6, 218, 1}, {0x01A7, 0x01A7, 1, 1}, {0x01A9, 0x01A9, 218, 1},
  {0x01AC, 0x01AC, 1, 1}, {0x01AE, 0x01AE, 218, 1}, {0x01AF, 0x01AF, 1, 1}, {0x01B1, 0x01B2, 217, 1},
  {0x01B3, 0x01B5, 1, 2}, {0x01B7, 0x01B7, 219, 1}, {0x01B8, 0x01B8, 1, 1}, {0x01BC, 0x01BC, 1, 1},
  {0x01C4, 0x01C4, 2, 1}, {0x01C5, 0x01C5, 1, 1}, {0x01C7, 0x01C7, 2, 1}, {0x01C8, 0x01C8, 1, 1},
  {0x01CA, 0x01CA, 2, 1}, {0x01CB, 0x01DB, 1, 2}, {0x01DE, 0x01EE, 1, 2}, {0x01F1, 0x01F1, 2, 1},
  {0x01F2, 0x01F4, 1, 2}, {0x01F6, 0x01F6, -97, 1}, {0x01F7, 0x01F7, -56, 1}, {0x01F8, 0x021E, 1, 2},
  {0x0220, 0x0220, -130, 1}, {0x0222, 0x0232, 1, 2}, {0x023A, 0x023A, 10795, 1}, {0x023B, 0x023B, 1, 1},
  {0x023D, 0x023D, -163, 1}, {0x023E, 0x023E, 10792, 1}, {0x0241, 0x0241, 1, 1}, {0x0243, 0x0243, -195, 1},
  {0x0244, 0x0244, 69, 1}, {0x0245, 0x0245, 71, 1}, {0x0246, 0x024E, 1, 2}, {0x0370, 0x0372, 1, 2},
  {0x0376, 0x0376, 1, 1}, {0x037F, 0x037F, 116, 1}, {0x0386, 0x0386, 38, 1}, {0x0388, 0x038A, 37, 1},
  {0x038C, 0x038C, 64, 1}, {0x038E, 0x038F, 63, 1}, {0x0391, 0x03A1, 32, 1}, {0x03A3, 0x03AB, 32, 1},
  {0x03CF, 0x03CF, 8, 1}, {0x03D8, 0x03EE, 1, 2}, {0x03F4, 0x03F4, -60, 1}, {0x03F7, 0x03F7, 1, 1},
  {0x03F9, 0x03F9, -7, 1}, {0x03FA, 0x03FA, 1, 1}, {0x03FD, 0x03FF, -130, 1}, {0x0400, 0x040F, 80, 1},
  {0x0410, 0x042F, 32, 1}, {0x0460, 0x0480, 1, 2}, {0x048A, 0x04BE, 1, 2}, {0x04C0, 0x04C0, 15, 1},
  {0x04C1, 0x04CD, 1, 2}, {0x04D0, 0x052E, 1, 2}, {0x0531, 0x0556, 48, 1}, {0x10A0, 0x10C5, 7264, 1},
  {0x10C7, 0x10C7, 7264, 1}, {0x10CD, 0x10CD, 7264, 1}, {0x13A0, 0x13EF, 38864, 1}, {0x13F0, 0x13F5, 8, 1},
  {0x1C90, 0x1CBA, -3008, 1}, {0x1CBD, 0x1CBF, -3008, 1}, {0x1E00, 0x1E94, 1, 2}, {0x1E9E, 0x1E9E, -7615, 1},
  {0x1EA0, 0x1EFE, 1, 2}, {0x1F08, 0x1F0F, -8, 1}, {0x1F18, 0x1F1D, -8, 1}, {0x1F28, 0x1F2F, -8, 1},
  {0x1F38, 0x1F3F, -8, 1}, {0x1F48, 0x1F4D, -8, 1}, {0x1F59, 0x1F5F, -8, 2}, {0x1F68, 0x1F6F, -8, 1},
  {0x1F88, 0x1F8F, -8, 1}, {0x1F98, 0x1F9F, -8, 1}, {0x1FA8, 0x1FAF, -8, 1}, {0x1FB8, 0x1FB9, -8, 1},
  {0x1FBA, 0x1FBB, -74, 1}, {0x1FBC, 0x1FBC, -9, 1}, {0x1FC8, 0x1FCB, -86, 1}, {0x1FCC, 0x1FCC, -9, 1},
  {0x1FD8, 0x1FD9, -8, 1}, {0x1FDA, 0x1FDB, -100, 1}, {0x1FE8, 0x1FE9, -8, 1}, {0x1FEA, 0x1FEB, -112, 1},
  {0x1FEC, 0x1FEC, -7, 1}, {0x1FF8, 0x1FF9, -128, 1}, {0x1FFA, 0x1FFB, -126, 1}, {0x1FFC, 0x1FFC, -9, 1},
  {0x2126, 0x2126, -7517, 1}, {0x212A, 0x212A, -8383, 1}, {0x212B, 0x212B, -8262, 1}, {0x2132, 0x2132, 28, 1},
  {0x2160, 0x216F, 16, 1}, {0x2183, 0x2183, 1, 1}, {0x24B6, 0x24CF, 26, 1}, {0x2C00, 0x2C2F, 48, 1},
  {0x2C60, 0x2C60, 1, 1}, {0x2C62, 0x2C62, -10743, 1}, {0x2C63, 0x2C63, -3814, 1}, {0x2C64, 0x2C64, -10727, 1},
  {0x2C67, 0x2C6B, 1, 2}, {0x2C6D, 0x2C6D, -10780, 1}, {0x2C6E, 0x2C6E, -10749, 1}, {0x2C6F, 0x2C6F, -10783, 1},
  {0x2C70, 0x2C70, -10782, 1}, {0x2C72, 0x2C72, 1, 1}, {0x2C75, 0x2C75, 1, 1}, {0x2C7E, 0x2C7F, -10815, 1},
  {0x2C80, 0x2CE2, 1, 2}, {0x2CEB, 0x2CED, 1, 2}, {0x2CF2, 0x2CF2, 1, 1}, {0xA640, 0xA66C, 1, 2},
  {0xA680, 0xA69A, 1, 2}, {0xA722, 0xA72E, 1, 2}, {0xA732, 0xA76E, 1, 2}, {0xA779, 0xA77B, 1, 2},
  {0xA77D, 0xA77D, -35332, 1}, {0xA77E, 0xA786, 1, 2}, {0xA78B, 0xA78B, 1, 1}, {0xA78D, 0xA78D, -42280, 1},
  {0xA790, 0xA792, 1, 2}, {0xA796, 0xA7A8, 1, 2}, {0xA7AA, 0xA7AA, -42308, 1}, {0xA7AB, 0xA7AB, -42319, 1},
  {0xA7AC, 0xA7AC, -42315, 1}, {0xA7AD, 0xA7AD, -42305, 1}, {0xA7AE, 0xA7AE, -42308, 1}, {0xA7B0, 0xA7B0, -42258, 1},
  {0xA7B1, 0xA7B1, -42282, 1}, {0xA7B2, 0xA7B2, -42261, 1}, {0xA7B3, 0xA7B3, 928, 1}, {0xA7B4, 0xA7C2, 1, 2},
  {0xA7C4, 0xA7C4, -48, 1}, {0xA7C5, 0xA7C5, -42307, 1}, {0xA7C6, 0xA7C6, -35384, 1}, {0xA7C7, 0xA7C9, 1, 2},
  {0xA7D0, 0xA7D0, 1, 1}, {0xA7D6, 0xA7D8, 1, 2}, {0xA7F5, 0xA7F5, 1, 1}, {0xFF21, 0xFF3A, 32, 1},
  {0x10400, 0x10427, 40, 1}, {0x104B0, 0x104D3, 40, 1}, {0x10570, 0x1057A, 39, 1}, {0x1057C, 0x1058A, 39, 1},
  {0x1058C, 0x10592, 39, 1}, {0x10594, 0x10595, 39, 1}, {0x10C80, 0x10CB2, 64, 1}, {0x118A0, 0x118BF, 32, 1},
  {0x16E40, 0x16E5F, 32, 1}, {0x1E900, 0x1E921, 34, 1},
};
static const struct case_range case_upper[201] = {
  {0x0061, 0x007A, -32, 1}, {0x00B5, 0x00B5, 743, 1}, {0x00DF, 0x00DF, 7615, 1}, {0x00E0, 0x00F6, -32, 1},
  {0x00F8, 0x00FE, -32, 1}, {0x00FF, 0x00FF, 121, 1}, {0x0101, 0x012F, -1, 2}, {0x0131, 0x0131, -232, 1},
  {0x0133, 0x0137, -1, 2}, {0x013A, 0x0148, -1, 2}, {0x014B, 0x0177, -1, 2}, {0x017A, 0x017E, -1, 2},
  {0x017F, 0x017F, -300, 1}, {0x0180, 0x0180, 195, 1}, {0x0183, 0x0185, -1, 2}, {0x0188, 0x0188, -1, 1},
  {0x018C, 0x018C, -1, 1}, {0x0192, 0x0192, -1, 1}, {0x0195, 0x0195, 97, 1}, {0x0199, 0x0199, -1, 1},
  {0x019A, 0x019A, 163, 1}, {0x019E, 0x019E, 130, 1}, {0x01A1, 0x01A5, -1, 2}, {0x01A8, 0x01A8, -1, 1},
  {0x01AD, 0x01AD, -1, 1}, {0x01B0, 0x01B0, -1, 1}, {0x01B4, 0x01B6, -1, 2}, {0x01B9, 0x01B9, -1, 1},
  {0x01BD, 0x01BD, -1, 1}, {0x01BF, 0x01BF, 56, 1}, {0x01C5, 0x01C5, -1, 1}, {0x01C6, 0x01C6, -2, 1},
  {0x01C8, 0x01C8, -1, 1}, {0x01C9, 0x01C9, -2, 1}, {0x01CB, 0x01CB, -1, 1}, {0x01CC, 0x01CC, -2, 1},
  {0x01CE, 0x01DC, -1, 2}, {0x01DD, 0x01DD, -79, 1}, {0x01DF, 0x01EF, -1, 2}, {0x01F2, 0x01F2, -1, 1},
  {0x01F3, 0x01F3, -2, 1}, {0x01F5, 0x01F5, -1, 1}, {0x01F9, 0x021F, -1, 2}, {0x0223, 0x0233, -1, 2},
  {0x023C, 0x023C, -1, 1}, {0x023F, 0x0240, 10815, 1}, {0x0242, 0x0242, -1, 1}, {0x0247, 0x024F, -1, 2},
  {0x0250, 0x0250, 10783, 1}, {0x0251, 0x0251, 10780, 1}, {0x0252, 0x0252, 10782, 1}, {0x0253, 0x0253, -210, 1},
  {0x0254, 0x0254, -206, 1}, {0x0256, 0x0257, -205, 1}, {0x0259, 0x0259, -202, 1}, {0x025B, 0x025B, -203, 1},
  {0x025C, 0x025C, 42319, 1}, {0x0260, 0x0260, -205, 1}, {0x0261, 0x0261, 42315, 1}, {0x0263, 0x0263, -207, 1},
  {0x0265, 0x0265, 42280, 1}, {0x0266, 0x0266, 42308, 1}, {0x0268, 0x0268, -209, 1}, {0x0269, 0x0269, -211, 1},
  {0x026A, 0x026A, 42308, 1}, {0x026B, 0x026B, 10743, 1}, {0x026C, 0x026C, 42305, 1}, {0x026F, 0x026F, -211, 1},
  {0x0271, 0x0271, 10749, 1}, {0x0272, 0x0272, -213, 1}, {0x0275, 0x0275, -214, 1}, {0x027D, 0x027D, 10727, 1},
  {0x0280, 0x0280, -218, 1}, {0x0282, 0x0282, 42307, 1}, {0x0283, 0x0283, -218, 1}, {0x0287, 0x0287, 42282, 1},
  {0x0288, 0x0288, -218, 1}, {0x0289, 0x0289, -69, 1}, {0x028A, 0x028B, -217, 1}, {0x028C, 0x028C, -71, 1},
  {0x0292, 0x0292, -219, 1}, {0x029D, 0x029D, 42261, 1}, {0x029E, 0x029E, 42258, 1}, {0x0345, 0x0345, 84, 1},
  {0x0371, 0x0373, -1, 2}, {0x0377, 0x0377, -1, 1}, {0x037B, 0x037D, 130, 1}, {0x03AC, 0x03AC, -38, 1},
  {0x03AD, 0x03AF, -37, 1}, {0x03B1, 0x03C1, -32, 1}, {0x03C2, 0x03C2, -31, 1}, {0x03C3, 0x03CB, -32, 1},
  {0x03CC, 0x03CC, -64, 1}, {0x03CD, 0x03CE, -63, 1}, {0x03D0, 0x03D0, -62, 1}, {0x03D1, 0x03D1, -57, 1},
  {0x03D5, 0x03D5, -47, 1}, {0x03D6, 0x03D6, -54, 1}, {0x03D7, 0x03D7, -8, 1}, {0x03D9, 0x03EF, -1, 2},
  {0x03F0, 0x03F0, -86, 1}, {0x03F1, 0x03F1, -80, 1}, {0x03F2, 0x03F2, 7, 1}, {0x03F3, 0x03F3, -116, 1},
  {0x03F5, 0x03F5, -96, 1}, {0x03F8, 0x03F8, -1, 1}, {0x03FB, 0x03FB, -1, 1}, {0x0430, 0x044F, -32, 1},
  {0x0450, 0x045F, -80, 1}, {0x0461, 0x0481, -1, 2}, {0x048B, 0x04BF, -1, 2}, {0x04C2, 0x04CE, -1, 2},
  {0x04CF, 0x04CF, -15, 1}, {0x04D1, 0x052F, -1, 2}, {0x0561, 0x0586, -48, 1}, {0x10D0, 0x10FA, 3008, 1},
  {0x10FD, 0x10FF, 3008, 1}, {0x13F8, 0x13FD, -8, 1}, {0x1C80, 0x1C80, -6254, 1}, {0x1C81, 0x1C81, -6253, 1},
  {0x1C82, 0x1C82, -6244, 1}, {0x1C83, 0x1C84, -6242, 1}, {0x1C85, 0x1C85, -6243, 1}, {0x1C86, 0x1C86, -6236, 1},
  {0x1C87, 0x1C87, -6181, 1}, {0x1C88, 0x1C88, 35266, 1}, {0x1D79, 0x1D79, 35332, 1}, {0x1D7D, 0x1D7D, 3814, 1},
  {0x1D8E, 0x1D8E, 35384, 1}, {0x1E01, 0x1E95, -1, 2}, {0x1E9B, 0x1E9B, -59, 1}, {0x1EA1, 0x1EFF, -1, 2},
  {0x1F00, 0x1F07, 8, 1}, {0x1F10, 0x1F15, 8, 1}, {0x1F20, 0x1F27, 8, 1}, {0x1F30, 0x1F37, 8, 1},
  {0x1F40, 0x1F45, 8, 1}, {0x1F51, 0x1F57, 8, 2}, {0x1F60, 0x1F67, 8, 1}, {0x1F70, 0x1F71, 74, 1},
  {0x1F72, 0x1F75, 86, 1}, {0x1F76, 0x1F77, 100, 1}, {0x1F78, 0x1F79, 128, 1}, {0x1F7A, 0x1F7B, 112, 1},
  {0x1F7C, 0x1F7D, 126, 1}, {0x1F80, 0x1F87, 8, 1}, {0x1F90, 0x1F97, 8, 1}, {0x1FA0, 0x1FA7, 8, 1},
  {0x1FB0, 0x1FB1, 8, 1}, {0x1FB3, 0x1FB3, 9, 1}, {0x1FBE, 0x1FBE, -7205, 1}, {0x1FC3, 0x1FC3, 9, 1},
  {0x1FD0, 0x1FD1, 8, 1}, {0x1FE0, 0x1FE1, 8, 1}, {0x1FE5, 0x1FE5, 7, 1}, {0x1FF3, 0x1FF3, 9, 1},
  {0x214E, 0x214E, -28, 1}, {0x2170, 0x217F, -16, 1}, {0x2184, 0x2184, -1, 1}, {0x24D0, 0x24E9, -26, 1},
  {0x2C30, 0x2C5F, -48, 1}, {0x2C61, 0x2C61, -1, 1}, {0x2C65, 0x2C65, -10795, 1}, {0x2C66, 0x2C66, -10792, 1},
  {0x2C68, 0x2C6C, -1, 2}, {0x2C73, 0x2C73, -1, 1}, {0x2C76, 0x2C76, -1, 1}, {0x2C81, 0x2CE3, -1, 2},
  {0x2CEC, 0x2CEE, -1, 2}, {0x2CF3, 0x2CF3, -1, 1}, {0x2D00, 0x2D25, -7264, 1}, {0x2D27, 0x2D27, -7264, 1},
  {0x2D2D, 0x2D2D, -7264, 1}, {0xA641, 0xA66D, -1, 2}, {0xA681, 0xA69B, -1, 2}, {0xA723, 0xA72F, -1, 2},
  {0xA733, 0xA76F, -1, 2}, {0xA77A, 0xA77C, -1, 2}, {0xA77F, 0xA787, -1, 2}, {0xA78C, 0xA78C, -1, 1},
  {0xA791, 0xA793, -1, 2}, {0xA794, 0xA794, 48, 1}, {0xA797, 0xA7A9, -1, 2}, {0xA7B5, 0xA7C3, -1, 2},
  {0xA7C8, 0xA7CA, -1, 2}, {0xA7D1, 0xA7D1, -1, 1}, {0xA7D7, 0xA7D9, -1, 2}, {0xA7F6, 0xA7F6, -1, 1},
  {0xAB53, 0xAB53, -928, 1}, {0xAB70, 0xABBF, -38864, 1}, {0xFF41, 0xFF5A, -32, 1}, {0x10428, 0x1044F, -40, 1},
  {0x104D8, 0x104FB, -40, 1}, {0x10597, 0x105A1, -39, 1}, {0x105A3, 0x105B1, -39, 1}, {0x105B3, 0x105B9, -39, 1},
  {0x105BB, 0x105BC, -39, 1}, {0x10CC0, 0x10CF2, -64, 1}, {0x118C0, 0x118DF, -32, 1}, {0x16E60, 0x16E7F, -32, 1},
  {0x1E922, 0x1E943, -34, 1},
};
/* END GENERATED CASE TABLES */

static uint32_t case_map(const struct case_range *t, size_t n, uint32_t c) {
  size_t lo = 0, hi = n; /* first range with first > c */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t[mid].first <= c) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return c;
  const struct case_range *r = &t[lo - 1];
  if (c > r->last || (c - r->first) % r->stride) return c;
  return (uint32_t)((int64_t)c + r->delta);
}

static uint32_t utf8_decode(const unsigned char *p, uint32_t n, uint32_t *len) {
  uint32_t k = utf8_seq_len(p[0]);
  if (k == 1 || k > n) {
    *len = 1;
    return UINT32_MAX; /* not a lead byte of a complete sequence: copy the byte as is */
  }
  uint32_t c = p[0] & (0x7F >> k);
  for (uint32_t i = 1; i < k; i++) {
    if ((p[i] & 0xC0) != 0x80) {
      *len = 1;
      return UINT32_MAX;
    }
    c = (c << 6) | (p[i] & 0x3F);
  }
  *len = k;
  return c;
}

static uint32_t utf8_encode(uint32_t c, char *out) {
  if (c < 0x80) {
    out[0] = (char)c;
    return 1;
  }
  if (c < 0x800) {
    out[0] = (char)(0xC0 | (c >> 6));
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = (char)(0xE0 | (c >> 12));
    out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[2] = (char)(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (c >> 18));
  out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
  out[3] = (char)(0x80 | (c & 0x3F));
  return 4;
}

static jg_str case_convert(jg_ctx *ctx, jg_str s, const struct case_range *t, size_t nt, int upper) {
  if (s.n == 0) return EMPTY;
  /* no mapping grows a character by more than half its bytes (checked by the table generator) */
  size_t cap = (size_t)s.n + s.n / 2 + 4;
  char *out = jg_scratch(ctx, cap);
  if (!out) return EMPTY;
  const unsigned char *p = (const unsigned char *)s.p;
  uint32_t i = 0, o = 0;
  while (i < s.n) {
    unsigned char b = p[i];
    if (b < 0x80) { /* ASCII maps within ASCII */
      if (upper) out[o++] = (char)(b >= 'a' && b <= 'z' ? b - 32 : b);
      else out[o++] = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
      i++;
      continue;
    }
    uint32_t len;
    uint32_t c = utf8_decode(p + i, s.n - i, &len);
    if (c == UINT32_MAX) {
      out[o++] = (char)b;
    } else {
      o += utf8_encode(case_map(t, nt, c), out + o);
    }
    i += len;
  }
  jg_str r = {out, o};
  return r;
}

jg_str jg_lower(jg_ctx *ctx, jg_str s) {
  return case_convert(ctx, s, case_lower, sizeof case_lower / sizeof case_lower[0], 0);
}

jg_str jg_upper(jg_ctx *ctx, jg_str s) {
  return case_convert(ctx, s, case_upper, sizeof case_upper / sizeof case_upper[0], 1);
}

/* ------------------------------------------------------------------ dates */

/* Proleptic Gregorian calendar, astronomical years (year 0 = 1 BC), any sign of days
 * (H. Hinnant's civil_from_days / days_from_civil). */
void jg_civil_from_days(int64_t days, int64_t *y, int64_t *m, int64_t *d) {
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2);
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void trim(const char **p, size_t *n) {
  while (*n && is_space(**p)) (*p)++, (*n)--;
  while (*n && is_space((*p)[*n - 1])) (*n)--;
}

static int digits(const char *p, size_t n, size_t *i, int max, int64_t *v) {
  int count = 0;
  *v = 0;
  while (*i < n && p[*i] >= '0' && p[*i] <= '9' && count < max) {
    *v = *v * 10 + (p[*i] - '0');
    (*i)++;
    count++;
  }
  return count;
}

/* 'YYYY-MM-DD' (also Y..Y-M-D with 1 or 2 digit month and day, '/' instead of '-', a leading '-'
 * for years before 0, a trailing ' (BC)', and surrounding spaces, as DuckDB accepts). Returns 0 on
 * success; the day must be valid and fit the 32-bit date of the NTF. */
int jg_parse_date(const char *p, size_t n, int64_t *days) {
  trim(&p, &n);
  size_t i = 0;
  int neg = 0;
  int64_t y, m, d;
  if (i < n && p[i] == '-') neg = 1, i++;
  if (digits(p, n, &i, 7, &y) < 1) return 1;
  if (i >= n || (p[i] != '-' && p[i] != '/')) return 1;
  char sep = p[i++];
  if (digits(p, n, &i, 2, &m) < 1) return 1;
  if (i >= n || p[i] != sep) return 1;
  i++;
  if (digits(p, n, &i, 2, &d) < 1) return 1;
  if (neg) y = -y;
  if (i < n) {
    static const char bc[] = " (BC)";
    if (n - i != sizeof bc - 1 || memcmp(p + i, bc, sizeof bc - 1) != 0 || neg || y < 1) return 1;
    y = 1 - y;
  }
  static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1] + (m == 2 && leap)) return 1;
  int64_t v = days_from_civil(y, m, d);
  if (v < INT32_MIN || v > INT32_MAX) return 1;
  *days = v;
  return 0;
}

jg_str jg_format_date(jg_ctx *ctx, int64_t days) {
  int64_t y, m, d;
  jg_civil_from_days(days, &y, &m, &d);
  char *out = jg_scratch(ctx, 32);
  if (!out) return EMPTY;
  int bc = y <= 0;
  int k = snprintf(out, 32, "%04lld-%02lld-%02lld%s", (long long)(bc ? 1 - y : y), (long long)m,
                   (long long)d, bc ? " (BC)" : "");
  jg_str r = {out, (uint32_t)(k < 0 ? 0 : k)};
  return r;
}

/* ------------------------------------------------------------------ decimals and numbers */

const int64_t jg_pow10[19] = {1LL,
                              10LL,
                              100LL,
                              1000LL,
                              10000LL,
                              100000LL,
                              1000000LL,
                              10000000LL,
                              100000000LL,
                              1000000000LL,
                              10000000000LL,
                              100000000000LL,
                              1000000000000LL,
                              10000000000000LL,
                              100000000000000LL,
                              1000000000000000LL,
                              10000000000000000LL,
                              100000000000000000LL,
                              1000000000000000000LL};

int jg_dec_upscale(int64_t v, int from, int to, int64_t *out) {
  if (to < from || to - from > 18) return 0;
  return !__builtin_mul_overflow(v, jg_pow10[to - from], out);
}

static __int128 pow10_128(int k) {
  __int128 p = 1;
  while (k-- > 0) p *= 10;
  return p;
}

/* Rescale unscaled `v` from scale `from` to `to`, rounding half away from zero when the scale
 * shrinks; fails (non-zero) when the result has more than `precision` digits. */
int jg_dec_rescale(__int128 v, int from, int to, int precision, int64_t *out) {
  __int128 limit = pow10_128(precision);
  if (to >= from) {
    if (v >= limit || v <= -limit) return 1;
    v *= pow10_128(to - from);
  } else {
    __int128 p = pow10_128(from - to);
    __int128 q = v / p, r = v % p;
    if (r < 0) r = -r;
    if (2 * r >= p) q += v < 0 ? -1 : 1;
    v = q;
  }
  if (v >= limit || v <= -limit) return 1;
  *out = (int64_t)v;
  return 0;
}

/* The parts of a decimal number's text: [sign] digits [. digits] [e|E [sign] digits], at least one
 * mantissa digit, surrounding spaces allowed. */
typedef struct {
  int neg;
  const char *ip; /* integer digits */
  size_t in;
  const char *fp; /* fraction digits */
  size_t fn;
  int64_t exp; /* clamped to +-1e6 */
} number_text;

static int split_number(const char *p, size_t n, number_text *t) {
  trim(&p, &n);
  size_t i = 0;
  memset(t, 0, sizeof *t);
  if (i < n && (p[i] == '+' || p[i] == '-')) t->neg = p[i++] == '-';
  t->ip = p + i;
  while (i < n && p[i] >= '0' && p[i] <= '9') i++, t->in++;
  t->fp = p + i;
  if (i < n && p[i] == '.') {
    i++;
    t->fp = p + i;
    while (i < n && p[i] >= '0' && p[i] <= '9') i++, t->fn++;
  }
  if (t->in + t->fn == 0) return 1;
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    i++;
    int eneg = 0;
    if (i < n && (p[i] == '+' || p[i] == '-')) eneg = p[i++] == '-';
    if (i >= n || p[i] < '0' || p[i] > '9') return 1;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
      if (t->exp < 1000000) t->exp = t->exp * 10 + (p[i] - '0');
      i++;
    }
    if (eneg) t->exp = -t->exp;
  }
  return i != n;
}

static int digit_at(const number_text *t, size_t k) {
  return k < t->in ? t->ip[k] - '0' : t->fp[k - t->in] - '0';
}

/* round(value * 10^scale) half away from zero, when it has at most `max_keep` digits (<= 38). */
static int number_scaled_upto(const number_text *t, int scale, int64_t max_keep, __int128 *out);

/* round(value * 10^scale) half away from zero, when it has at most 20 digits. */
static int number_scaled(const number_text *t, int scale, __int128 *out) {
  return number_scaled_upto(t, scale, 20, out);
}

static int number_scaled_upto(const number_text *t, int scale, int64_t max_keep, __int128 *out) {
  size_t total = t->in + t->fn, first = 0;
  while (first < total && digit_at(t, first) == 0) first++;
  int64_t nd = (int64_t)(total - first);
  int64_t keep = nd + t->exp - (int64_t)t->fn + scale; /* digits before the point, after scaling */
  __int128 v = 0;
  if (nd == 0 || keep < 0) {
    v = 0;
  } else {
    if (keep > max_keep) return 1;
    int64_t take = keep < nd ? keep : nd;
    for (int64_t k = 0; k < take; k++) v = v * 10 + digit_at(t, first + (size_t)k);
    for (int64_t k = take; k < keep; k++) v *= 10;
    if (keep < nd && digit_at(t, first + (size_t)keep) >= 5) v += 1;
  }
  *out = t->neg ? -v : v;
  return 0;
}

int jg_parse_decimal(const char *p, size_t n, int precision, int scale, int64_t *out) {
  number_text t;
  __int128 v;
  if (split_number(p, n, &t) || number_scaled(&t, scale, &v)) return 1;
  __int128 limit = pow10_128(precision);
  if (v >= limit || v <= -limit) return 1;
  *out = (int64_t)v;
  return 0;
}

/* An integer, or (as DuckDB's CAST) a decimal number rounded half away from zero. */
int jg_parse_int64(const char *p, size_t n, int64_t *out) {
  number_text t;
  __int128 v;
  if (split_number(p, n, &t) || number_scaled(&t, 0, &v)) return 1;
  if (v > INT64_MAX || v < INT64_MIN) return 1;
  *out = (int64_t)v;
  return 0;
}

static int lower_equals(const char *p, size_t n, const char *word) {
  size_t k = strlen(word);
  if (n != k) return 0;
  for (size_t i = 0; i < k; i++) {
    char c = p[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
    if (c != word[i]) return 0;
  }
  return 1;
}

/* Decimal text (as split_number), or inf/infinity/nan with an optional sign, any case. */
int jg_parse_float64(const char *p, size_t n, double *out) {
  trim(&p, &n);
  const char *q = p;
  size_t m = n;
  int neg = 0;
  if (m && (*q == '+' || *q == '-')) neg = *q == '-', q++, m--;
  if (lower_equals(q, m, "inf") || lower_equals(q, m, "infinity")) {
    *out = neg ? -__builtin_inf() : __builtin_inf();
    return 0;
  }
  if (lower_equals(q, m, "nan")) {
    *out = __builtin_nan("");
    return 0;
  }
  number_text t;
  if (split_number(p, n, &t)) return 1;
  /* canonical text: sign, significant digits (at most 767, then a sticky 1), 'e', exponent; no
   * decimal point, so strtod's locale cannot matter */
  char buf[800];
  size_t o = 0, total = t.in + t.fn, first = 0;
  while (first < total && digit_at(&t, first) == 0) first++;
  if (t.neg) buf[o++] = '-';
  int64_t exp = t.exp - (int64_t)t.fn;
  if (first == total) {
    buf[o++] = '0';
  } else {
    size_t nd = total - first, keep = nd > 767 ? 767 : nd;
    for (size_t k = 0; k < keep; k++) buf[o++] = (char)('0' + digit_at(&t, first + k));
    if (keep < nd) {
      int sticky = 0;
      for (size_t k = keep; k < nd; k++) sticky |= digit_at(&t, first + k);
      if (sticky) buf[o++] = '1', exp -= 1;
      exp += (int64_t)(nd - keep);
    }
  }
  if (exp > 100000) exp = 100000;
  if (exp < -100000) exp = -100000;
  snprintf(buf + o, sizeof buf - o, "e%lld", (long long)exp);
  *out = strtod(buf, NULL);
  return 0;
}

/* DuckDB's boolean text: true/false, t/f, yes/no, y/n, 1/0, any case, no surrounding spaces. */
int jg_parse_bool(const char *p, size_t n, int64_t *out) {
  static const char *const yes[] = {"true", "t", "yes", "y", "1"};
  static const char *const no[] = {"false", "f", "no", "n", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (lower_equals(p, n, yes[i])) return *out = 1, 0;
    if (lower_equals(p, n, no[i])) return *out = 0, 0;
  }
  return 1;
}

/* Round half to even without libm (correct in the default rounding mode, no -ffast-math). */
double jg_round_even(double v) {
  const double two52 = 4503599627370496.0;
  if (!(__builtin_fabs(v) < two52)) return v; /* already integral, or inf/nan */
  volatile double r = v >= 0 ? (v + two52) - two52 : -((-v + two52) - two52);
  return r;
}

/* float64 -> decimal(precision, scale): v * 10^scale rounded half away from zero (as DuckDB). */
int jg_float_to_dec(double v, int precision, int scale, int64_t *out) {
  double x = v * (double)jg_pow10[scale];
  if (!(x > -9.2e18 && x < 9.2e18)) return 1;
  int64_t i = (int64_t)x; /* toward zero */
  double frac = x - (double)i;
  if (frac >= 0.5) i++;
  else if (frac <= -0.5) i--;
  if (i >= jg_pow10[precision] || i <= -jg_pow10[precision]) return 1;
  *out = i;
  return 0;
}

/* ------------------------------------------------------------------ formatting */

/* The k characters of tmp, which were written last to first, in order in the context's scratch. */
static jg_str reversed_copy(jg_ctx *ctx, const char *tmp, int k) {
  char *out = jg_scratch(ctx, (size_t)k);
  if (!out) return EMPTY;
  for (int i = 0; i < k; i++) out[i] = tmp[k - 1 - i];
  jg_str r = {out, (uint32_t)k};
  return r;
}

jg_str jg_format_int64(jg_ctx *ctx, int64_t v) {
  char tmp[24];
  int k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[k++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) tmp[k++] = '-';
  return reversed_copy(ctx, tmp, k);
}

jg_str jg_format_decimal(jg_ctx *ctx, int64_t v, int scale) {
  char tmp[48];
  int k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  for (int i = 0; i < scale; i++) {
    tmp[k++] = (char)('0' + u % 10);
    u /= 10;
  }
  if (scale > 0) tmp[k++] = '.';
  do {
    tmp[k++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) tmp[k++] = '-';
  return reversed_copy(ctx, tmp, k);
}

/* As DuckDB (and Python's repr): the shortest digits that read back as the same double; plain
 * notation with at least one fractional digit when the decimal exponent is in [-4, 16), else
 * d[.ddd]e+XX; inf, -inf, nan. */
jg_str jg_format_float64(jg_ctx *ctx, double v) {
  static const jg_str inf = {"inf", 3}, ninf = {"-inf", 4}, nan = {"nan", 3};
  if (v != v) return nan;
  if (v == __builtin_inf()) return inf;
  if (v == -__builtin_inf()) return ninf;
  char sci[40];
  char dig[20];
  int nd = 0, exp10 = 0;
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
    /* read back through a locale-free canonical form: digits, then the exponent */
    nd = 0;
    const char *s = sci;
    while (*s && *s != 'e') {
      if (*s >= '0' && *s <= '9') dig[nd++] = *s;
      s++;
    }
    exp10 = *s == 'e' ? atoi(s + 1) : 0;
    char canon[48];
    snprintf(canon, sizeof canon, "%s%.*se%d", v < 0 || (v == 0 && 1 / v < 0) ? "-" : "", nd, dig,
             exp10 - (nd - 1));
    if (strtod(canon, NULL) == v) break;
  }
  while (nd > 1 && dig[nd - 1] == '0') nd--;
  char buf[48];
  int k = 0;
  if (v < 0 || (v == 0 && 1 / v < 0)) buf[k++] = '-';
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 >= 0) {
      for (int i = 0; i <= exp10; i++) buf[k++] = i < nd ? dig[i] : '0';
      buf[k++] = '.';
      if (nd > exp10 + 1) {
        for (int i = exp10 + 1; i < nd; i++) buf[k++] = dig[i];
      } else {
        buf[k++] = '0';
      }
    } else {
      buf[k++] = '0';
      buf[k++] = '.';
      for (int i = 0; i < -exp10 - 1; i++) buf[k++] = '0';
      for (int i = 0; i < nd; i++) buf[k++] = dig[i];
    }
  } else {
    buf[k++] = dig[0];
    if (nd > 1) {
      buf[k++] = '.';
      for (int i = 1; i < nd; i++) buf[k++] = dig[i];
    }
    k += snprintf(buf + k, sizeof buf - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  }
  char *out = jg_scratch(ctx, (size_t)k);
  if (!out) return EMPTY;
  memcpy(out, buf, (size_t)k);
  jg_str r = {out, (uint32_t)k};
  return r;
}

/* ------------------------------------------------------------------ errors */

/* jg_fail with "<msg> '<value>'", the value cut to 80 bytes (at a character boundary) and its
 * control characters shown as '?', so a message stays one readable line. */
void jg_fail_text(jg_ctx *ctx, const char *msg, jg_str value) {
  char buf[512];
  size_t k = 0, cap = sizeof buf - 8;
  for (const char *m = msg; *m && k < 400; m++) buf[k++] = *m;
  buf[k++] = ' ';
  buf[k++] = '\'';
  uint32_t i = 0;
  while (i < value.n && k < cap) {
    uint32_t next = utf8_step(value.p, i, value.n);
    if (i >= 80) {
      memcpy(buf + k, "...", 3);
      k += 3;
      break;
    }
    for (uint32_t j = i; j < next && k < cap; j++) {
      unsigned char c = (unsigned char)value.p[j];
      buf[k++] = (char)(c < 0x20 || c == 0x7F ? '?' : c);
    }
    i = next;
  }
  buf[k++] = '\'';
  buf[k] = 0;
  jg_fail(ctx, buf);
}

/* ------------------------------------------------------------------ wide decimals (19..38 digits) */

/* 10^k for 0 <= k <= 38 (10^38 < 2^127), a constant table: 10^19.. are products of 64-bit
 * constants, exact in 128 bits (tests/unit/test_codegen_support.py checks every entry). */
#define P10_18 ((__int128)1000000000000000000)
static const __int128 p10w_tab[39] = {
    1,
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
    1000000000000000000,
    P10_18 * 10,
    P10_18 * 100,
    P10_18 * 1000,
    P10_18 * 10000,
    P10_18 * 100000,
    P10_18 * 1000000,
    P10_18 * 10000000,
    P10_18 * 100000000,
    P10_18 * 1000000000,
    P10_18 * 10000000000,
    P10_18 * 100000000000,
    P10_18 * 1000000000000,
    P10_18 * 10000000000000,
    P10_18 * 100000000000000,
    P10_18 * 1000000000000000,
    P10_18 * 10000000000000000,
    P10_18 * 100000000000000000,
    P10_18 * P10_18,
    P10_18 * P10_18 * 10,
    P10_18 * P10_18 * 100,
};
#undef P10_18

static inline __int128 p10w(int k) { return p10w_tab[k]; }

static int fits128(__int128 v, int precision) {
  __int128 lim = p10w(precision);
  return v < lim && v > -lim;
}

int jg_dec128_rescale(__int128 v, int from, int to, int precision, __int128 *out) {
  if (from < 0 || from > 38 || to < 0 || to > 38 || precision < 1 || precision > 38) return 1;
  if (to >= from) {
    if (__builtin_mul_overflow(v, p10w(to - from), &v)) return 1;
  } else {
    __int128 p = p10w(from - to);
    __int128 q = v / p, r = v % p;
    if (r < 0) r = -r;
    if (r >= p - r) q += v < 0 ? -1 : 1; /* half away from zero; 2*r could overflow */
    v = q;
  }
  if (!fits128(v, precision)) return 1;
  *out = v;
  return 0;
}

int jg_dec128_cmp(__int128 a, int sa, __int128 b, int sb) {
  /* bring both to the larger scale; a value that leaves 128 bits doing so is beyond any
   * 38-digit value at that scale, so its sign decides */
  if (sa < sb) {
    __int128 x;
    if (__builtin_mul_overflow(a, p10w(sb - sa), &x)) return a < 0 ? -1 : 1;
    a = x;
  } else if (sb < sa) {
    __int128 y;
    if (__builtin_mul_overflow(b, p10w(sa - sb), &y)) return b < 0 ? 1 : -1;
    b = y;
  }
  return (a > b) - (a < b);
}

int jg_parse_decimal128(const char *p, size_t n, int precision, int scale, __int128 *out) {
  number_text t;
  __int128 v;
  if (precision < 1 || precision > 38) return 1;
  if (split_number(p, n, &t) || number_scaled_upto(&t, scale, 38, &v)) return 1;
  if (!fits128(v, precision)) return 1;
  *out = v;
  return 0;
}

int jg_float_to_dec128(double v, int precision, int scale, __int128 *out) {
  /* as jg_float_to_dec: v * 10^scale in double, rounded half away from zero */
  if (precision < 1 || precision > 38 || scale < 0 || scale > precision) return 1;
  double x = v * (double)p10w(scale);
  if (!(x > -1.7e38 && x < 1.7e38)) return 1;
  __int128 i = (__int128)x; /* toward zero */
  double frac = x - (double)i;
  if (frac >= 0.5) i++;
  else if (frac <= -0.5) i--;
  if (!fits128(i, precision)) return 1;
  *out = i;
  return 0;
}

double jg_dec128_to_double(__int128 v, int scale) {
  /* integer part plus fraction, each converted once (as DuckDB converts a HUGEINT decimal): the
   * integer part keeps its own rounding instead of that of a 38-digit unscaled value */
  __int128 p = p10w(scale);
  return (double)(v / p) + (double)(v % p) / (double)p;
}

jg_str jg_format_decimal128(jg_ctx *ctx, __int128 v, int scale) {
  char tmp[48];
  int k = 0;
  unsigned __int128 u = v < 0 ? (unsigned __int128)0 - (unsigned __int128)v : (unsigned __int128)v;
  for (int i = 0; i < scale; i++) {
    tmp[k++] = (char)('0' + (int)(u % 10));
    u /= 10;
  }
  if (scale > 0) tmp[k++] = '.';
  do {
    tmp[k++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u);
  if (v < 0) tmp[k++] = '-';
  return reversed_copy(ctx, tmp, k);
}
