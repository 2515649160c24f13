"""jg_hash v1: the C implementation (ncas/runtime/jg_hash.h) and the Python reference
(jumpgate.ncas.software.hashing) agree on many values of every type, and both reproduce the test
vectors published in docs/hashing.md (the public specification of the shuffle's partitioning).

A tiny C program compiled against jg_hash.h reads rows of typed key values on stdin and prints
each value hash, the row hash and the partition for a few P; Python computes the same.
"""
from __future__ import annotations

import datetime as dt
import decimal
import math
import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

from jumpgate.ncas.software import hashing
from jumpgate.ncas.software.build import runtime_dir

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = (1, 2, 3, 7, 64, 1000003)

# Records on stdin: u32 key count, then per key a tag and its bytes; the C side hashes exactly
# the way generated code does (integers as int64, floats by value, strings by bytes).
NULL, INT, FLOAT, STRING = 0, 1, 2, 3
C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "jg_hash.h"

static int get(void *p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main(void) {
  static const uint64_t parts[] = {PARTS};
  uint32_t k;
  char *buf = malloc(1 << 20);
  while (get(&k, 4)) {
    uint64_t h = JG_HASH_SEED;
    for (uint32_t i = 0; i < k; i++) {
      uint8_t tag;
      uint64_t v = 0;
      if (!get(&tag, 1)) return 2;
      if (tag == 0) {
        v = JG_HASH_NULL;
      } else if (tag == 1) {
        int64_t x;
        if (!get(&x, 8)) return 2;
        v = jg_hash_int(x);
      } else if (tag == 2) {
        double x;
        if (!get(&x, 8)) return 2;
        v = jg_hash_float(x);
      } else {
        uint32_t n;
        if (!get(&n, 4) || n > (1u << 20) || !get(buf, n)) return 2;
        v = jg_hash_bytes(buf, n);
      }
      printf("%016llx ", (unsigned long long)v);
      h = jg_hash_combine(h, v);
    }
    printf("= %016llx", (unsigned long long)h);
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) printf(" %llu", (unsigned long long)(h % parts[p]));
    printf("\n");
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def c_hasher(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("jg_hash")
    src = d / "hash.c"
    src.write_text(C_PROGRAM.replace("PARTS", ", ".join(f"{p}ull" for p in PARTITIONS)))
    exe = d / "hash"
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{runtime_dir()}", str(src),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    return exe


def encode(rows: list[list[tuple[int, object]]]) -> bytes:
    out = bytearray()
    for row in rows:
        out += struct.pack("<I", len(row))
        for tag, v in row:
            out += bytes([tag])
            if tag == INT:
                out += struct.pack("<q", v)
            elif tag == FLOAT:
                out += v if isinstance(v, bytes) else struct.pack("<d", v)  # bytes: raw bits (NaN payloads)
            elif tag == STRING:
                b = v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v
                out += struct.pack("<I", len(b)) + b
    return bytes(out)


def run_c(exe: Path, rows) -> list[tuple[list[int], int, list[int]]]:
    out = subprocess.run([str(exe)], input=encode(rows), capture_output=True, check=True).stdout.decode()
    parsed = []
    for line in out.splitlines():
        values, rest = line.split("=")
        h, *parts = rest.split()
        parsed.append(([int(x, 16) for x in values.split()], int(h, 16), [int(p) for p in parts]))
    assert len(parsed) == len(rows)
    return parsed


def python_value(tag: int, v: object) -> object:
    """What the Python reference is given for a C test value."""
    if tag == NULL:
        return None
    if tag == FLOAT and isinstance(v, bytes):
        return struct.unpack("<d", v)[0]
    return v


def check_rows(exe: Path, rows) -> None:
    for row, (vhashes, h, parts) in zip(rows, run_c(exe, rows)):
        values = [python_value(t, v) for t, v in row]
        assert vhashes == [hashing.value_hash(v) for v in values], row
        assert h == hashing.row_hash(values), row
        assert parts == [hashing.partition(values, p) for p in PARTITIONS], row


INTS = [0, 1, -1, 2, 42, -42, 2**31 - 1, -(2**31), 2**31, 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 10**18 - 1,
        -(10**18) + 1, 20000, -719162]
FLOAT_BITS = [struct.pack("<Q", b) for b in (
    0x7FF8000000000000,  # the canonical quiet NaN
    0xFFF8000000000000,  # negative NaN
    0x7FF0000000000001,  # signalling NaN
    0x7FFFFFFFFFFFFFFF,  # NaN with every payload bit
    0x8000000000000000,  # -0.0
    0x0000000000000001,  # the smallest subnormal
    0x7FF0000000000000,  # +inf
    0xFFF0000000000000,  # -inf
)]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.1, 1e300, -1e-300, 2.0**53, 3.5, math.pi, float("nan"), float("inf")]
STRINGS = ["", "a", "alpha", "Alpha", "ALPHA", "na\u00efve", "nai\u0308ve", "日本語", "ÀÉÎ straße", "emoji 🎉",
           "O'Neil", "tab\there", "nul\0byte", "x" * 10000, "\U0010ffff", "é" * 333]


def test_single_values_of_every_type(c_hasher):
    rows = [[(NULL, None)]]
    rows += [[(INT, x)] for x in INTS]
    rows += [[(FLOAT, x)] for x in FLOATS + FLOAT_BITS]
    rows += [[(STRING, s)] for s in STRINGS]
    check_rows(c_hasher, rows)


def test_many_random_multi_key_rows(c_hasher):
    rng = random.Random(2024)

    def value():
        tag = rng.choice([NULL, INT, INT, FLOAT, STRING, STRING])
        if tag == INT:
            return tag, rng.choice([rng.randint(-(2**63), 2**63 - 1), rng.randint(-1000, 1000), rng.choice(INTS)])
        if tag == FLOAT:
            return tag, rng.choice([rng.uniform(-1e6, 1e6), rng.choice(FLOATS), rng.choice(FLOAT_BITS),
                                    struct.pack("<Q", rng.getrandbits(64))])
        if tag == STRING:
            n = rng.randint(0, 40)
            return tag, "".join(rng.choice("abcXYZ09 éß日本\U0001f389'\"\\") for _ in range(n))
        return tag, None

    rows = [[value() for _ in range(rng.randint(0, 6))] for _ in range(4000)]
    check_rows(c_hasher, rows)


def test_equal_sql_values_hash_alike():
    """What 'rows with equal keys go to the same output' needs of the value hash."""
    # int32 and int64 (and boolean, date, decimal of scale 0 by value)
    for x in INTS:
        if -(2**31) <= x < 2**31:
            assert hashing.value_hash(x, "int32") == hashing.value_hash(x, "int64") == hashing.value_hash(x)
    assert hashing.value_hash(True, "boolean") == hashing.value_hash(1, "int64")
    assert hashing.value_hash(dt.date(1970, 1, 2), "date") == hashing.value_hash(1, "int32")
    assert hashing.value_hash(decimal.Decimal("7"), "decimal(5,0)") == hashing.value_hash(7, "int64")
    # a decimal by its unscaled value at the key's scale
    assert hashing.value_hash(decimal.Decimal("1.5"), "decimal(10,2)") == hashing.value_hash(150)
    assert hashing.value_hash("1.50", "decimal(10,2)") == hashing.value_hash(150)
    assert hashing.value_hash(decimal.Decimal("1.5"), "decimal(10,1)") == hashing.value_hash(15)
    # -0.0 = 0.0 and NaN = NaN (as SQL engines compare them for grouping)
    assert hashing.value_hash(-0.0) == hashing.value_hash(0.0)
    nans = [struct.unpack("<d", b)[0] for b in FLOAT_BITS[:4]]
    assert len({hashing.value_hash(n) for n in nans}) == 1
    # typed reading: an int for a float64 key is the float
    assert hashing.value_hash(3, "float64") == hashing.value_hash(3.0) != hashing.value_hash(3)
    # strings by UTF-8 bytes: no normalisation, case-sensitive
    assert hashing.value_hash("na\u00efve") != hashing.value_hash("nai\u0308ve")
    assert hashing.value_hash("a") != hashing.value_hash("A")
    assert hashing.value_hash("abc") == hashing.value_hash(b"abc")
    # NULL is one value whatever its type
    assert {hashing.value_hash(None, t) for t in ("int32", "string", "float64", "decimal(3,1)")} == {hashing.NULL}


def test_key_order_and_count_matter():
    assert hashing.row_hash([1, 2]) != hashing.row_hash([2, 1])
    assert hashing.row_hash([1]) != hashing.row_hash([1, None])
    assert hashing.row_hash([]) == hashing.SEED


def test_reference_rejects_what_it_cannot_read():
    with pytest.raises(TypeError, match="needs its type"):
        hashing.value_hash(decimal.Decimal("1.5"))
    with pytest.raises(ValueError, match="decimal places"):
        hashing.value_hash(decimal.Decimal("1.555"), "decimal(10,2)")
    with pytest.raises(TypeError):
        hashing.value_hash("1", "int64")
    with pytest.raises(TypeError):
        hashing.value_hash(dt.datetime(2020, 1, 1), "date")
    with pytest.raises(OverflowError):
        hashing.value_hash(2**63)
    with pytest.raises(ValueError):
        hashing.partition([1], 0)
    with pytest.raises(ValueError, match="types"):
        hashing.row_hash([1, 2], ["int64"])


# ------------------------------------------------------------------ the published test vectors


def doc_vectors() -> list[tuple[str, list[tuple[str, str]], int, dict[int, int]]]:
    """The rows of the test-vector table in docs/hashing.md: (text, [(type, value)], h, {P: p})."""
    text = (ROOT / "docs" / "hashing.md").read_text()
    section = text.split("## Test vectors", 1)[1]
    rows = []
    for line in section.splitlines():
        m = re.match(r"^\|\s*`(.*)`\s*\|\s*`(0x[0-9a-f]{16})`\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|$", line)
        if m:
            keys = parse_vector_keys(m.group(1))
            rows.append((m.group(1), keys, int(m.group(2), 16),
                         {2: int(m.group(3)), 3: int(m.group(4)), 10: int(m.group(5))}))
    return rows


def parse_vector_keys(text: str) -> list[tuple[str, object]]:
    """`type value, type value, ...` with values as in SQL: NULL, numbers, 'strings', DATE '...'."""
    if text == "(no keys)":
        return []
    out = []
    for part in re.findall(r"(\w+(?:\(\d+,\d+\))?) (NULL|'(?:[^']|'')*'|[-+.\w]+)", text):
        t, v = part
        if v == "NULL":
            out.append((t, None))
        elif v.startswith("'"):
            s = v[1:-1].replace("''", "'")
            out.append((t, dt.date.fromisoformat(s) if t == "date" else s))
        elif t == "float64":
            out.append((t, float(v)))
        elif t.startswith("decimal"):
            out.append((t, decimal.Decimal(v)))
        elif t == "boolean":
            out.append((t, v == "true"))
        else:
            out.append((t, int(v)))
    return out


def c_row(keys: list[tuple[str, object]]) -> list[tuple[int, object]]:
    """The C side's view: integer-like values as int64 (dates as days, decimals unscaled)."""
    row = []
    for t, v in keys:
        if v is None:
            row.append((NULL, None))
        elif t == "float64":
            row.append((FLOAT, v))
        elif t == "string":
            row.append((STRING, v))
        elif t == "date":
            row.append((INT, (v - hashing.EPOCH).days))
        elif t.startswith("decimal"):
            scale = int(t.split(",")[1].rstrip(")"))
            row.append((INT, int(v.scaleb(scale))))
        else:
            row.append((INT, int(v)))
    return row


def test_published_vectors(c_hasher):
    vectors = doc_vectors()
    assert len(vectors) >= 10, "docs/hashing.md lost its test-vector table"
    outs = run_c(c_hasher, [c_row(keys) for _, keys, _, _ in vectors])
    for (text, keys, h, parts), (_, c_h, _) in zip(vectors, outs):
        types = [t for t, _ in keys]
        values = [v for _, v in keys]
        assert hashing.row_hash(values, types) == h == c_h, text
        assert {p: hashing.partition(values, p, types) for p in parts} == parts, text
