"""The JSON scan's decimal parsers (ncas/runtime/parse.c: jgr_parse_decimal for decimals of up to 18
digits, jgr_parse_decimal128 for 19..38) through a tiny C driver compiled here, against Python's
decimal module: exact values rounded half away from zero to the scale, exponents, -1 for a token
that is not a decimal number and -2 for a value (or a type) beyond the precision."""
from __future__ import annotations

import decimal
import random
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from .fixtures.c_driver import build_c_driver

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")

DRIVER = r"""
#include "jgrt.h"
#include <stdio.h>

/* one case a line: "<width> <hex text or -> <precision> <scale>"; answers "<r> <value>" */
int main(void) {
  char line[512], hex[400];
  int width, p, s;
  while (fgets(line, sizeof line, stdin)) {
    if (sscanf(line, "%d %399s %d %d", &width, hex, &p, &s) != 4) return 2;
    char text[200];
    size_t n = 0;
    for (const char *h = hex[0] == '-' ? "" : hex; h[0] && h[1]; h += 2) {
      unsigned v;
      sscanf(h, "%2x", &v);
      text[n++] = (char)v;
    }
    __int128 v = 0;
    int r;
    if (width == 64) {
      int64_t v64 = 0;
      r = jgr_parse_decimal(text, n, p, s, &v64);
      v = v64;
    } else {
      r = jgr_parse_decimal128(text, n, p, s, &v);
    }
    if (r != 0) {
      printf("%d\n", r);
      continue;
    }
    char digits[48];
    int k = 0;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    do digits[k++] = (char)('0' + (int)(u % 10)); while (u /= 10);
    printf("0 %s", v < 0 ? "-" : "");
    while (k) putchar(digits[--k]);
    putchar('\n');
  }
  return 0;
}
"""


@cache
def driver() -> Path:
    return build_c_driver("parse-decimal", DRIVER, ("parse.c",))


def parse(cases: list[tuple[int, str, int, int]]) -> list[str]:
    lines = [f"{w} {t.encode().hex() or '-'} {p} {s}" for w, t, p, s in cases]
    proc = subprocess.run([str(driver())], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert len(out) == len(cases)
    return out


MANTISSA = re.compile(r"[+-]?[0-9]*(\.[0-9]*)?")  # what the parsers read before the exponent
NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def expected(width: int, text: str, p: int, s: int) -> str:
    """The contract's answer: -1 when the mantissa has no digit, -2 for a precision or scale the
    width does not have, -1 for anything else that is not a number, -2 when the value rounded to
    `s` digits after the point needs more than `p` digits."""
    if not any(c.isdigit() for c in MANTISSA.match(text).group()):
        return "-1"
    if not (1 <= p <= (18 if width == 64 else 38) and 0 <= s <= p):
        return "-2"
    number = NUMBER.fullmatch(text)
    if not number:
        return "-1"
    mantissa = decimal.Decimal(text[:number.start(2)] if number.group(2) else text)
    if mantissa.is_zero():
        return "0 0"
    exp = int(number.group(2)[1:]) if number.group(2) else 0
    if abs(exp) > 10**6:  # beyond Python's exponents; no mantissa here makes up for it
        return "-2" if exp > 0 else "0 0"
    exact = decimal.Context(prec=200, Emax=10**8, Emin=-(10**8))  # every token here is exact in it
    v = mantissa.scaleb(exp + s, exact)
    if v.adjusted() >= p:  # at least 10^p once scaled, before any rounding
        return "-2"
    q = int(v.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP, context=exact))
    return "-2" if abs(q) >= 10**p else f"0 {q}"


EXAMPLES = ["0", "-0", "+0", "0.000", "00012.50", "1", "-1", "1.5", "1.25", "-1.25", "1.35", "0.005", "-0.005",
            "0.004", "12.345", "99999.95", "99999.94", "-99999.995", ".5", "5.", "+3", "1e2", "1E2", "1.5E-1",
            "-2.5e+1", "25e-1", "1e-30", "1e30", "0e999999999999", "1e999999999999", "1e-999999999999",
            "5e-3", "4.99e-3", "0.0000000000000000000000000001", "00000000000000000000000012.5",
            "123456789012345678", "-999999999999999999.4", "999999999999999999.5", "9" * 38, "9" * 38 + ".5",
            "9" * 37 + ".5", "1" + "0" * 37, "-" + "9" * 36 + ".99", "1" * 60 + "e-40", "0." + "0" * 50 + "6",
            "", ".", "-", "+", "e5", ".e5", "1e", "1e+", "1e-", "1ee5", "1.2.3", "1..2", "abc", "1 2", " 1", "1 ",
            "--1", "+-1", "0x10", "1_000", "inf", "nan", "1.5f", "1e5.0", "١"]
SPECS = [(1, 0), (2, 2), (3, 1), (5, 1), (10, 2), (12, 3), (15, 2), (18, 0), (18, 4), (18, 18), (19, 2),
         (25, 0), (30, 3), (38, 2), (38, 10), (38, 38), (0, 0), (39, 2), (-1, 0), (5, -1), (5, 6)]


def check(cases: list[tuple[int, str, int, int]]) -> None:
    got = parse(cases)
    bad = [(c, g, expected(*c)) for c, g in zip(cases, got) if g != expected(*c)]
    assert not bad, bad[:10]


def test_examples_in_both_widths():
    check([(w, t, p, s) for w in (64, 128) for t in EXAMPLES for p, s in SPECS])


def test_random_tokens_in_both_widths():
    rnd = random.Random(11)

    def digits(n: int) -> str:
        return "".join(rnd.choice("0123456789999") for _ in range(n))

    cases = []
    for _ in range(20000):
        text = rnd.choice(["", "", "-", "+"]) + "0" * rnd.choice([0, 0, 0, 3, 25]) + digits(rnd.randint(0, 40))
        if rnd.random() < 0.7:
            text += "." + digits(rnd.randint(0, 40))
        if rnd.random() < 0.2:
            text += rnd.choice("eE") + rnd.choice(["", "+", "-"]) + digits(rnd.randint(1, 3))
        if rnd.random() < 0.02 and text:
            i = rnd.randrange(len(text))
            text = text[:i] + rnd.choice(".eE+- x") + text[i + 1:]
        width = rnd.choice([64, 128])
        p = rnd.randint(1, 18 if width == 64 else 38)
        cases.append((width, text, p, rnd.randint(0, p)))
    check(cases)
