"""Regenerates the UTF-8 case-mapping tables of ncas/runtime/expr_support.c.

lower() and upper() of software NCAs follow DuckDB exactly (Unicode simple case mapping, one code
point to one code point, with DuckDB's upper('ß') = 'ẞ'), so the tables are read from DuckDB, a
development dependency, and compressed into ranges {first, last, delta, stride}:
code points first, first+stride, ..., last map to themselves plus delta.

    python -m jumpgate.ncas.software.codegen.casetable          # rewrite the tables in place
    python -m jumpgate.ncas.software.codegen.casetable --check  # exit 1 when they are stale
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[4] / "ncas" / "runtime" / "expr_support.c"
BEGIN = "/* BEGIN GENERATED CASE TABLES (python -m jumpgate.ncas.software.codegen.casetable) */"
END = "/* END GENERATED CASE TABLES */"


def duckdb_mappings() -> tuple[dict[int, int], dict[int, int]]:
    import duckdb  # development dependency
    import pyarrow as pa

    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    con = duckdb.connect()
    con.register("t", pa.table({"c": pa.array(cps, pa.int64()), "s": [chr(c) for c in cps]}))
    lower, upper = {}, {}
    for c, lo, up in con.execute("SELECT c, lower(s), upper(s) FROM t ORDER BY c").fetchall():
        if len(lo) == 1 and ord(lo) != c:
            lower[c] = ord(lo)
        if len(up) == 1 and ord(up) != c:
            upper[c] = ord(up)
    return lower, upper


def ranges(mapping: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """Greedy runs of equal delta with stride 1 or 2."""
    out: list[list[int]] = []
    for c in sorted(mapping):
        delta = mapping[c] - c
        if out:
            lo, hi, d, stride = out[-1]
            if d == delta and ((lo == hi and c - hi in (1, 2)) or (lo != hi and c - hi == stride)):
                out[-1][1] = c
                out[-1][3] = c - lo if lo == hi else stride
                continue
        out.append([c, c, delta, 1])
    return [tuple(r) for r in out]


def _utf8_len(c: int) -> int:
    return 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4


def render_tables(lower: dict[int, int], upper: dict[int, int]) -> str:
    lines = [BEGIN]
    for name, mapping in (("lower", lower), ("upper", upper)):
        # the scratch size in jg_lower/jg_upper assumes no mapping grows by more than half
        assert all(2 * _utf8_len(t) <= 3 * _utf8_len(s) for s, t in mapping.items()), name
        # the ASCII fast path assumes ASCII maps within ASCII
        assert all(t < 0x80 for s, t in mapping.items() if s < 0x80), name
        rs = ranges(mapping)
        lines.append(f"static const struct case_range case_{name}[{len(rs)}] = {{")
        cells = [f"{{0x{lo:04X}, 0x{hi:04X}, {d}, {stride}}}," for lo, hi, d, stride in rs]
        for i in range(0, len(cells), 4):
            lines.append("  " + " ".join(cells[i:i + 4]))
        lines.append("};")
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    text = SOURCE.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    new = text[:start] + render_tables(*duckdb_mappings()) + text[end:]
    if args.check:
        if new != text:
            print(f"{SOURCE} case tables are stale; run python -m jumpgate.ncas.software.codegen.casetable")
            return 1
        return 0
    SOURCE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
