"""The aggregation table's string keys (ncas/runtime/jg_agg.h: jg_key_str, 12 bytes inline or a
4-byte prefix and a pointer), through a tiny C driver compiled here: for every length from 0 to 40,
random strings whose last byte is the last byte before an unreadable page (an over-read faults),
the key form holds exactly the contract's bytes, views back to the string, and compares equal
exactly when the strings are equal, also for strings that share length and prefix; and the table's
hash of a string key (jg_agg_mix_str) stays within the string, is equal for equal bytes anywhere,
and changes with any one byte."""
from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from .fixtures.c_driver import build_c_driver

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")

DRIVER = r"""
#include "jg_agg.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *page_end; /* the first byte of a PROT_NONE page */

/* a copy of b[0..n) ending right before the unreadable page */
static jg_str at_end(const char *b, uint32_t n) {
  char *p = page_end - n;
  memcpy(p, b, n);
  return (jg_str){p, n};
}

int main(void) {
  const long page = sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect(m + page, page, PROT_NONE) != 0) return 2;
  page_end = m + page;
  char a[64], b[64], other[64];
  unsigned seed = 7;
  for (uint32_t n = 0; n <= 40; n++) {
    for (int trial = 0; trial < 300; trial++) {
      for (uint32_t i = 0; i < n; i++) a[i] = (char)(rand_r(&seed) & 255);
      const jg_str s = at_end(a, n);
      const jg_key_str k = jg_key_of(s);
      jg_key_str want;
      memset(&want, 0, sizeof want);
      want.n = n;
      if (n <= JG_KEY_INLINE) {
        memcpy(want.b, a, n);
      } else {
        memcpy(want.b, a, 4);
        memcpy(want.b + 4, &s.p, 8);
      }
      if (memcmp(&k, &want, sizeof k) != 0) { printf("form n=%u\n", n); return 1; }
      const jg_str v = jg_key_view(&k);
      if (v.n != n || (n && memcmp(v.p, a, n) != 0)) { printf("view n=%u\n", n); return 1; }
      /* the same bytes elsewhere are equal; one byte changed (anywhere) or one byte shorter is not */
      memcpy(other, a, n);
      jg_key_str same = jg_key_of((jg_str){other, n});
      if (!jg_key_eq(&k, &same)) { printf("equal n=%u\n", n); return 1; }
      /* the table's hash (jg_agg_mix_str) reads no byte past the string (it ends at the page),
       * is the same for the same bytes elsewhere, and changes with any one byte or the length */
      const uint64_t h = jg_agg_mix_str(1, &k, s);
      if (jg_agg_mix_str(1, &same, (jg_str){other, n}) != h) { printf("hash equal n=%u\n", n); return 1; }
      if (n > 0 && jg_agg_mix_str(1, &(jg_key_str){0}, (jg_str){a, 0}) == h) { printf("hash empty n=%u\n", n); return 1; }
      for (uint32_t at = 0; at < n; at++) {
        memcpy(b, a, n);
        b[at] ^= (char)(1 + rand_r(&seed) % 255);
        const jg_str c = at_end(b, n);
        const jg_key_str ck = jg_key_of(c);
        if (jg_agg_mix_str(1, &ck, c) == h) { printf("hash differ n=%u at=%u\n", n, at); return 1; }
        at_end(a, n);
      }
      if (n > 0) {
        const uint32_t at = (uint32_t)rand_r(&seed) % n;
        memcpy(b, a, n);
        b[at] ^= (char)(1 + rand_r(&seed) % 255);
        const jg_key_str changed = jg_key_of((jg_str){b, n});
        if (jg_key_eq(&k, &changed) || jg_key_eq(&changed, &k)) { printf("differ n=%u at=%u\n", n, at); return 1; }
        const jg_key_str shorter = jg_key_of((jg_str){a, n - 1});
        if (jg_key_eq(&k, &shorter)) { printf("shorter n=%u\n", n); return 1; }
      }
    }
  }
  puts("ok");
  return 0;
}
"""


@cache
def driver() -> Path:
    return build_c_driver("agg-keys", DRIVER)


def test_key_strings_at_every_length():
    proc = subprocess.run([str(driver())], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stdout, proc.stderr)
