"""The ORC and Parquet scan drivers (ncas/runtime/scan_orc.cpp, scan_parquet.cpp, scan_arrow.cpp)
as real processes through the process protocol, with the code a job would generate: every type and
NULLs, the Arrow types each contract type accepts (widening, dictionaries, large strings, decimal
rescaling), the ones it refuses (narrowing, timestamps) with the file and column named, bad files,
statistics pruning with its counts, the row prefilter, several files and threads.

Files are written by pyarrow; every test runs for both formats."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import random

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .fixtures.columnar import cache_dir, scan_nca

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")

FORMATS = ["orc", "parquet"]
EPOCH = dt.date(1970, 1, 1)
D = decimal.Decimal


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return cache_dir(tmp_path_factory)


def write(table: pa.Table, path, rows_per_unit: int | None = None, **kw):
    """ORC with a stripe every `rows_per_unit` rows, Parquet with row groups of that many rows."""
    if path.suffix == ".orc":
        if rows_per_unit:
            kw.setdefault("stripe_size", 1024)
            kw.setdefault("batch_size", rows_per_unit)
        orc.write_table(table, str(path), **kw)
    else:
        pq.write_table(table, str(path), row_group_size=rows_per_unit or 1 << 20, **kw)
    return path


ALL_TYPES = [("b", "boolean"), ("i", "int32"), ("l", "int64"), ("f", "float64"), ("d", "decimal(10,2)"),
             ("s", "string"), ("dt", "date")]


def all_types_table(n: int, seed: int = 1) -> tuple[pa.Table, list[dict]]:
    rnd = random.Random(seed)

    def maybe(v):
        return None if rnd.random() < 0.15 else v

    rows = []
    for k in range(n):
        rows.append({"b": maybe(rnd.random() < 0.5), "i": maybe(rnd.randint(-2**31, 2**31 - 1)),
                     "l": maybe(rnd.choice([-2**63, 2**63 - 1, rnd.randint(-10**15, 10**15)])),
                     "f": maybe(rnd.choice([0.0, -0.0, 1.5, -1e300, rnd.uniform(-1e6, 1e6)])),
                     "d": maybe(D(rnd.randint(-10**10 + 1, 10**10 - 1)).scaleb(-2)),
                     "s": maybe(rnd.choice(["", "a", "naïve", "日本語", "x" * 300, f"v{k}"])),
                     "dt": maybe(EPOCH + dt.timedelta(days=rnd.randint(-50000, 50000)))})
    table = pa.table({"b": pa.array([r["b"] for r in rows], pa.bool_()),
                      "i": pa.array([r["i"] for r in rows], pa.int32()),
                      "l": pa.array([r["l"] for r in rows], pa.int64()),
                      "f": pa.array([r["f"] for r in rows], pa.float64()),
                      "d": pa.array([r["d"] for r in rows], pa.decimal128(10, 2)),
                      "s": pa.array([r["s"] for r in rows], pa.string()),
                      "dt": pa.array([r["dt"] for r in rows], pa.date32()),
                      "unused": pa.array(range(n), pa.int64())})
    return table, rows


def expected(r: dict) -> dict:
    """A row as the harness decodes NTF: decimals unscaled, dates as days."""
    out = dict(r)
    if out["d"] is not None:
        out["d"] = int(out["d"].scaleb(2))
    if out["dt"] is not None:
        out["dt"] = (out["dt"] - EPOCH).days
    return out


def key(r: dict) -> str:
    return json.dumps(r, sort_keys=True, default=str)


# ------------------------------------------------------------------ values


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_type_and_null_exact(fmt, tmp_path, cache):
    table, rows = all_types_table(3000)
    write(table, tmp_path / f"t.{fmt}", rows_per_unit=700)
    nca = scan_nca(tmp_path, fmt, ALL_TYPES, cache)
    ev, got, streams = nca.run([tmp_path / f"t.{fmt}"])
    assert ev["event"] == "done", ev
    st = ev["stats"]
    assert st["tuples_in"] == st["tuples_out"] == 3000
    unit = "stripes" if fmt == "orc" else "row_groups"
    assert st[f"{unit}_total"] == 5 and st[f"{unit}_skipped"] == 0
    assert sorted(map(key, got)) == sorted(key(expected(r)) for r in rows)


@pytest.mark.parametrize("fmt", FORMATS)
def test_widening_and_other_arrow_encodings(fmt, tmp_path, cache):
    """int8/16/32 and uint8/16 for int64, float32 for float64, decimals of another precision and a
    smaller scale (rescaled exactly), large strings and dictionary-encoded strings."""
    n = 500
    cols = {"i8": pa.array([None if k % 7 == 0 else k % 100 - 50 for k in range(n)], pa.int8()),
            "i16": pa.array([k * 60 - 15000 for k in range(n)], pa.int16()),
            "i32": pa.array([k * 4_000_000 - 2**31 + 7 for k in range(n)], pa.int32()),
            "f32": pa.array([k / 4 for k in range(n)], pa.float32()),
            "dsmall": pa.array([D(k - 250).scaleb(-1) for k in range(n)], pa.decimal128(5, 1)),
            "s": pa.array([["red", "green", None, "blue"][k % 4] for k in range(n)], pa.string())}
    if fmt == "parquet":  # ORC has no unsigned types; Parquet's stored Arrow schema brings these back
        cols["u16"] = pa.array([65535 - k for k in range(n)], pa.uint16())
        cols["ls"] = pa.array([f"large{k}" for k in range(n)], pa.large_string())
        cols["ds"] = pa.array([["x", "yy", None][k % 3] for k in range(n)]).dictionary_encode()
    write(pa.table(cols), tmp_path / f"w.{fmt}", rows_per_unit=128)
    schema = [("i8", "int32"), ("i16", "int64"), ("i32", "int64"), ("f32", "float64"),
              ("dsmall", "decimal(8,3)"), ("s", "string")]
    if fmt == "parquet":
        schema += [("u16", "int32"), ("ls", "string"), ("ds", "string")]
    nca = scan_nca(tmp_path, fmt, schema, cache)
    ev, got, _ = nca.run([tmp_path / f"w.{fmt}"], threads=2)
    assert ev["event"] == "done", ev
    want = []
    for k in range(n):
        r = {"i8": None if k % 7 == 0 else k % 100 - 50, "i16": k * 60 - 15000, "i32": k * 4_000_000 - 2**31 + 7,
             "f32": k / 4, "dsmall": (k - 250) * 100, "s": ["red", "green", None, "blue"][k % 4]}
        if fmt == "parquet":
            r |= {"u16": 65535 - k, "ls": f"large{k}", "ds": ["x", "yy", None][k % 3]}
        want.append(r)
    assert sorted(map(key, got)) == sorted(map(key, want))


@pytest.mark.parametrize("fmt", FORMATS)
def test_decimal_scale_reduced_exactly_or_fails_with_row(fmt, tmp_path, cache):
    ok = pa.table({"d": pa.array([D("1.230"), D("-4.500"), None], pa.decimal128(12, 3))})
    write(ok, tmp_path / f"ok.{fmt}")
    nca = scan_nca(tmp_path, fmt, [("d", "decimal(12,2)")], cache, path=f"ok.{fmt}")
    ev, got, _ = nca.run([tmp_path / f"ok.{fmt}"])
    assert ev["event"] == "done", ev
    assert sorted(map(key, got)) == sorted(map(key, [{"d": 123}, {"d": -450}, {"d": None}]))
    bad = pa.table({"d": pa.array([D("1.000")] * 10 + [D("2.005")], pa.decimal128(12, 3))})
    write(bad, tmp_path / f"bad.{fmt}")
    ev, _, _ = nca.run([tmp_path / f"bad.{fmt}"])
    assert ev["event"] == "error" and ev["file"].endswith(f"bad.{fmt}") and ev["record"] == 11, ev
    assert "2.005" in ev["message"] and "decimal(12,2)" in ev["message"], ev
    wide = pa.table({"d": pa.array([D("123456789012.5")], pa.decimal128(20, 1))})
    write(wide, tmp_path / f"wide.{fmt}")
    ev, _, _ = nca.run([tmp_path / f"wide.{fmt}"])
    assert ev["event"] == "error" and ev["record"] == 1 and "does not fit" in ev["message"], ev


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case,arrow_type,schema_type,words", [
    ("narrowing", pa.int64(), "int32", ["int64", "int32", "narrowing"]),
    ("string_for_int", pa.string(), "int64", ["string", "int64"]),
    ("timestamp", pa.timestamp("ms"), "date", ["timestamp", "not a contract type"]),
    ("float_for_decimal", pa.float64(), "decimal(10,2)", ["double", "decimal(10,2)"]),
])
def test_column_of_wrong_type_fails_naming_file_and_column(fmt, case, arrow_type, schema_type, words, tmp_path, cache):
    values = {"string_for_int": ["1"], "timestamp": [dt.datetime(2020, 1, 1)], "float_for_decimal": [1.0]}.get(case, [1])
    write(pa.table({"a": pa.array(values, arrow_type), "b": pa.array([1], pa.int64())}), tmp_path / f"t.{fmt}")
    nca = scan_nca(tmp_path, fmt, [("a", schema_type), ("b", "int64")], cache)
    ev, _, _ = nca.run([tmp_path / f"t.{fmt}"])
    assert ev["event"] == "error" and ev["file"].endswith(f"t.{fmt}"), ev
    assert 'column "a"' in ev["message"], ev
    for w in words:
        assert w in ev["message"], (w, ev)


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_column_fails(fmt, tmp_path, cache):
    write(pa.table({"a": [1]}), tmp_path / f"t.{fmt}")
    nca = scan_nca(tmp_path, fmt, [("a", "int64"), ("zz", "int64")], cache)
    ev, _, _ = nca.run([tmp_path / f"t.{fmt}"])
    assert ev["event"] == "error" and ev["file"].endswith(f"t.{fmt}") and '"zz" is not in the file' in ev["message"]


# ------------------------------------------------------------------ bad files


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", ["truncated", "json", "empty", "tail_only"])
def test_bad_file_fails_naming_it(fmt, damage, tmp_path, cache):
    table, _ = all_types_table(2000)
    good = write(table, tmp_path / f"good.{fmt}", rows_per_unit=500)
    nca = scan_nca(tmp_path, fmt, ALL_TYPES, cache, path=f"good.{fmt}")
    data = good.read_bytes()
    bad = tmp_path / f"bad.{fmt}"
    bad.write_bytes({"truncated": data[: len(data) // 2], "json": b'{"b": true, "i": 1}\n' * 50, "empty": b"",
                     "tail_only": data[-200:]}[damage])
    ev, _, _ = nca.run([good, bad], threads=2)
    assert ev["event"] == "error" and ev["file"] == str(bad), ev
    assert ("ORC" if fmt == "orc" else "Parquet") in ev["message"], ev


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("compression", ["zstd", "snappy"])
def test_corrupt_data_inside_a_unit_fails_naming_the_file(fmt, compression, tmp_path, cache):
    """Footer intact, column data overwritten: an error with the file, never a crash or garbage
    (Snappy: through libsnappy, jg_snappy.h)."""
    n = 20000
    table = pa.table({"s": pa.array([f"value-{k * 7919 % 100003}" for k in range(n)]),
                      "l": pa.array([k * 1_000_003 for k in range(n)], pa.int64())})
    path = write(table, tmp_path / f"c.{fmt}", compression=compression)
    data = bytearray(path.read_bytes())
    for k in range(64, len(data) // 2, 97):  # scribble over the first half, away from the header
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))
    nca = scan_nca(tmp_path, fmt, [("s", "string"), ("l", "int64")], cache)
    ev, _, _ = nca.run([path])
    assert ev["event"] == "error" and ev["file"] == str(path), ev


# ------------------------------------------------------------------ several files, threads


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("threads", [1, 3, 8])
def test_files_and_threads_every_row_once(fmt, threads, tmp_path, cache):
    files, want = [], []
    for f, n in enumerate([2500, 10, 0, 1300]):
        table = pa.table({"id": pa.array(range(f * 10000, f * 10000 + n), pa.int64()),
                          "g": pa.array([k % 5 for k in range(n)], pa.int32())})
        files.append(write(table, tmp_path / f"p{f}.{fmt}", rows_per_unit=400))
        want += list(range(f * 10000, f * 10000 + n))
    nca = scan_nca(tmp_path, fmt, [("id", "int64"), ("g", "int32")], cache, path=f"p0.{fmt}")
    ev, got, streams = nca.run(files, threads=threads)
    assert ev["event"] == "done", ev
    assert sorted(s.stream_id for s in streams) == list(range(threads))
    assert all(s.count == len(s.tuples) for s in streams)
    assert sorted(r["id"] for r in got) == want
    assert ev["stats"]["tuples_in"] == len(want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_column_needed_counts_rows(fmt, tmp_path, cache):
    write(pa.table({"a": range(1234)}), tmp_path / f"t.{fmt}", rows_per_unit=100)
    nca = scan_nca(tmp_path, fmt, [("a", "int64")], cache, columns=[("one", "1")])
    ev, got, _ = nca.run([tmp_path / f"t.{fmt}"], threads=2)
    assert ev["event"] == "done" and len(got) == 1234 and got[0] == {"one": 1}


@pytest.mark.parametrize("fmt", FORMATS)
def test_row_error_reports_row_number_in_file(fmt, tmp_path, cache):
    n = 5000
    write(pa.table({"a": pa.array([1] * n, pa.int64()), "z": pa.array([1] * (n - 1) + [0], pa.int64())}),
          tmp_path / f"t.{fmt}", rows_per_unit=1000)
    nca = scan_nca(tmp_path, fmt, [("a", "int64"), ("z", "int64")], cache, columns=[("q", "a % z")])
    ev, _, _ = nca.run([tmp_path / f"t.{fmt}"], threads=2)
    assert ev["event"] == "error" and ev["record"] == n and ev["file"].endswith(f"t.{fmt}"), ev


# ------------------------------------------------------------------ statistics pruning


def sorted_table(n: int) -> pa.Table:
    """Columns increasing with the row number, so each unit has a narrow range of each."""
    return pa.table({"k": pa.array(range(n), pa.int64()),
                     "k32": pa.array(range(n), pa.int32()),
                     "d": pa.array([D(k).scaleb(-2) for k in range(n)], pa.decimal128(12, 2)),
                     "day": pa.array([EPOCH + dt.timedelta(days=k) for k in range(n)], pa.date32()),
                     "x": pa.array([k / 8 for k in range(n)], pa.float64()),
                     "s": pa.array([f"s{k:06d}" for k in range(n)], pa.string()),
                     "flag": pa.array([k >= n - 1000 for k in range(n)], pa.bool_()),
                     "maybe": pa.array([None if k < 1000 else k for k in range(n)], pa.int64())})


SORTED = [("k", "int64"), ("k32", "int32"), ("d", "decimal(12,2)"), ("day", "date"), ("x", "float64"),
          ("s", "string"), ("flag", "boolean"), ("maybe", "int64")]

# (condition, units kept out of 10 of 1000 rows, matching rows)
PRUNE_CASES = [
    ("k >= 9500", 1, 500),
    ("k < 1000", 1, 1000),
    ("k BETWEEN 2500 AND 4200", 3, 1701),
    ("k32 > 8999", 1, 1000),
    ("k = 5000", 1, 1),
    ("k IN (5, 7005, 123456)", 2, 2),
    ("d < 10.005", 2, 1001),
    ("d >= 95", 1, 500),
    ("day >= DATE '1970-01-01' AND day < DATE '1972-09-27'", 1, 1000),  # 1000 days
    ("x > 1000.0", 2, 1999),
    ("s >= 's009000'", 1, 1000),
    ("s IN ('s000001', 's004500')", 2, 2),
    ("flag", 1, 1000),
    ("NOT flag AND k > 8500", 1, 499),
    ("maybe IS NULL", 1, 1000),
    ("maybe IS NOT NULL AND k < 1500", 1, 500),
    ("k > 100 AND k < 50", 1, 0),  # each alone holds somewhere in unit 0
    ("k > 20000", 0, 0),
    ("k + 0 > 9500", 10, 499),  # not a simple form: nothing pruned
    ("k > 9500 OR k < 10", 10, 509),  # OR: nothing pruned
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cond,kept,matches", PRUNE_CASES, ids=[c[0] for c in PRUNE_CASES])
def test_statistics_prune_units_and_answers_stay_right(fmt, cond, kept, matches, tmp_path, cache):
    write(sorted_table(10000), tmp_path / f"s.{fmt}", rows_per_unit=1000)
    nca = scan_nca(tmp_path, fmt, SORTED, cache, condition=cond, columns=[("k", "k")])
    ev, got, _ = nca.run([tmp_path / f"s.{fmt}"], threads=2)
    assert ev["event"] == "done", ev
    unit = "stripes" if fmt == "orc" else "row_groups"
    assert ev["stats"][f"{unit}_total"] == 10
    assert ev["stats"][f"{unit}_skipped"] == 10 - kept, ev["stats"]
    assert ev["stats"]["rows_skipped"] == (10 - kept) * 1000
    assert len(got) == matches
    # the same answer without pruning and without the row prefilter
    ev2, got2, _ = nca.run([tmp_path / f"s.{fmt}"], params={"scan.prefilter": "0"} | {
        k: "k notnull" for k in nca.params})
    assert ev2["event"] == "done" and sorted(r["k"] for r in got2) == sorted(r["k"] for r in got)


@pytest.mark.parametrize("fmt", FORMATS)
def test_malformed_prune_param_fails_the_phase(fmt, tmp_path, cache):
    write(sorted_table(100), tmp_path / f"s.{fmt}")
    nca = scan_nca(tmp_path, fmt, SORTED, cache, columns=[("k", "k")])
    ev, _, _ = nca.run([tmp_path / f"s.{fmt}"], params={"prune.0": "k %3E"})
    assert ev["event"] == "error" and "prune.0" in ev["message"], ev
    ev, got, _ = nca.run([tmp_path / f"s.{fmt}"], params={"prune.0": "not_read_here = 1"})
    assert ev["event"] == "done" and len(got) == 100  # a column the query does not read: ignored


# ------------------------------------------------------------------ Parquet's direct path


@pytest.mark.parametrize("batch_rows", [100, 8192])
def test_parquet_direct_decoding_equals_parquet_arrow(batch_rows, tmp_path, cache):
    """Row groups of fixed-width columns only are decoded without parquet/arrow's record reader:
    INT32/INT64 (integers, dates, decimals stored as integers), FLOAT/DOUBLE, NULLs, pages that end
    inside a batch, required and optional columns. Same rows as the parquet/arrow path."""
    rnd = random.Random(3)
    n = 5000

    def maybe(v, p=0.2):
        return None if rnd.random() < p else v

    cols = {"i": pa.array([maybe(rnd.randint(-2**31, 2**31 - 1)) for _ in range(n)], pa.int32()),
            "l": pa.array([maybe(rnd.randint(-2**63, 2**63 - 1), 0.5) for _ in range(n)], pa.int64()),
            "req": pa.array([k * 3 for k in range(n)], pa.int64()),
            "dt": pa.array([maybe(EPOCH + dt.timedelta(days=rnd.randint(-9999, 9999))) for _ in range(n)], pa.date32()),
            "d9": pa.array([maybe(D(rnd.randint(-10**8, 10**8)).scaleb(-3)) for _ in range(n)], pa.decimal128(9, 3)),
            "d18": pa.array([maybe(D(rnd.randint(-10**17, 10**17)).scaleb(-2)) for _ in range(n)], pa.decimal128(18, 2)),
            "f": pa.array([maybe(rnd.uniform(-1e9, 1e9)) for _ in range(n)], pa.float64()),
            "f32": pa.array([maybe(rnd.randint(-1000, 1000) / 8) for _ in range(n)], pa.float32()),
            "none": pa.array([None] * n, pa.int64())}
    schema = pa.schema([pa.field(k, v.type, nullable=k != "req") for k, v in cols.items()])
    table = pa.table(cols, schema=schema)
    # decimals as INT32/INT64, as Spark and DuckDB write them, and no stored Arrow schema (it would
    # ask for decimal128 arrays, which parquet/arrow's reader builds)
    pq.write_table(table, str(tmp_path / "d.parquet"), row_group_size=1700, data_page_size=512,
                   store_decimal_as_integer=True, store_schema=False, use_dictionary=["i", "dt"])
    types = [("i", "int32"), ("l", "int64"), ("req", "int64"), ("dt", "date"), ("d9", "decimal(12,3)"),
             ("d18", "decimal(18,2)"), ("f", "float64"), ("f32", "float64"), ("none", "int64")]
    nca = scan_nca(tmp_path, "parquet", types, cache)
    ev, direct, _ = nca.run([tmp_path / "d.parquet"], threads=2, params={"scan.batch_rows": str(batch_rows)})
    assert ev["event"] == "done" and ev["stats"]["tuples_out"] == n, ev
    ev, slow, _ = nca.run([tmp_path / "d.parquet"], params={"scan.parquet_direct": "0",
                                                            "scan.batch_rows": str(batch_rows)})
    assert ev["event"] == "done", ev
    assert sorted(map(key, direct)) == sorted(map(key, slow))
    want = []
    for k in range(n):
        r = {c: table.column(c)[k].as_py() for c in cols}
        r["dt"] = None if r["dt"] is None else (r["dt"] - EPOCH).days
        r["d9"] = None if r["d9"] is None else int(r["d9"].scaleb(3))
        r["d18"] = None if r["d18"] is None else int(r["d18"].scaleb(2))
        want.append(r)
    assert sorted(map(key, direct)) == sorted(map(key, want))


# page layouts the direct path reads page by page: V1 and V2 data pages, a dictionary that
# overflows into PLAIN pages within a chunk, encodings other than PLAIN and dictionary
PAGE_LAYOUTS = {
    "v1-dictionary": dict(data_page_version="1.0"),
    "v2-dictionary": dict(data_page_version="2.0"),
    "dictionary-overflow": dict(dictionary_pagesize_limit=256),
    "v2-delta": dict(data_page_version="2.0", use_dictionary=False,
                     column_encoding={"a": "DELTA_BINARY_PACKED", "day": "DELTA_BINARY_PACKED",
                                      "x": "BYTE_STREAM_SPLIT", "q": "PLAIN"}),
}
# conditions whose prune predicates the row prefilter runs on the (dictionary-encoded) columns
# (the last two: IN lists longer than the prefilter scans value by value, searched instead)
LONG_INTS = tuple(range(60, -1, -3))  # 21 values, not in order
LONG_FLOATS = tuple(k / 8 for k in range(-10, 10, 1) if k % 3)  # 13 values, some outside the data
PAGE_CONDITIONS = ["a BETWEEN 10 AND 30 AND q < 5.5", "a IN (3, 17, 41) OR a IS NULL", "a <> 7 AND day >= DATE '1970-01-20'",
                   "q IS NULL AND x > 0", "x >= 0.25 AND x < 0.5 AND a IS NOT NULL",
                   f"a IN ({', '.join(map(str, LONG_INTS + LONG_INTS[:3]))})",
                   f"x IN ({', '.join(map(str, LONG_FLOATS + tuple(k / 16 for k in range(1, 16, 2))))})"]


@pytest.mark.parametrize("layout", PAGE_LAYOUTS)
def test_parquet_direct_pages_and_dictionary_prefilter(layout, tmp_path, cache):
    """The direct path reads a row group page by page (a batch ends where a column's page ends):
    dictionary-encoded columns arrive as indices into the chunk's dictionary and the prefilter tests
    each dictionary entry once. Every layout and condition gives the rows Python computes, and the
    rows parquet/arrow's reader gives, with small and default batches and two threads."""
    rnd = random.Random(7)
    n = 6000

    def maybe(v, p=0.1):
        return None if rnd.random() < p else v

    table = pa.table({"a": pa.array([maybe(rnd.randint(0, 50)) for _ in range(n)], pa.int64()),
                      "day": pa.array([maybe(EPOCH + dt.timedelta(days=rnd.randint(0, 40)), 0) for _ in range(n)],
                                      pa.date32()),
                      "q": pa.array([maybe(D(rnd.randint(0, 1000)).scaleb(-2), 0.3) for _ in range(n)],
                                    pa.decimal128(9, 2)),
                      "x": pa.array([maybe(rnd.randint(-8, 8) / 8) for _ in range(n)], pa.float64())})
    pq.write_table(table, str(tmp_path / "p.parquet"), row_group_size=2500, data_page_size=700,
                   store_decimal_as_integer=True, store_schema=False, **PAGE_LAYOUTS[layout])
    types = [("a", "int64"), ("day", "date"), ("q", "decimal(9,2)"), ("x", "float64")]
    rows = [{c: table.column(c)[k].as_py() for c in table.column_names} for k in range(n)]
    tests = {PAGE_CONDITIONS[0]: lambda r: r["a"] is not None and 10 <= r["a"] <= 30 and r["q"] is not None
             and r["q"] < D("5.5"),
             PAGE_CONDITIONS[1]: lambda r: r["a"] in (3, 17, 41, None),
             PAGE_CONDITIONS[2]: lambda r: r["a"] is not None and r["a"] != 7 and r["day"] >= EPOCH + dt.timedelta(19),
             PAGE_CONDITIONS[3]: lambda r: r["q"] is None and r["x"] is not None and r["x"] > 0,
             PAGE_CONDITIONS[4]: lambda r: r["x"] is not None and 0.25 <= r["x"] < 0.5 and r["a"] is not None,
             PAGE_CONDITIONS[5]: lambda r: r["a"] in LONG_INTS,
             PAGE_CONDITIONS[6]: lambda r: r["x"] in LONG_FLOATS or (r["x"] is not None and r["x"] * 16 % 2 == 1)}
    for cond in PAGE_CONDITIONS:
        nca = scan_nca(tmp_path, "parquet", types, cache, condition=cond, columns=[("a", "a"), ("x", "x")])
        want = sorted(key({"a": r["a"], "x": r["x"]}) for r in rows if tests[cond](r))
        assert want, cond
        for params in ({"scan.batch_rows": "64"}, {}, {"scan.parquet_direct": "0"}, {"scan.mmap": "0"},
                       {"scan.libsnappy": "0"}):
            ev, got, _ = nca.run([tmp_path / "p.parquet"], threads=2, params=params)
            assert ev["event"] == "done", (cond, params, ev)
            assert sorted(map(key, got)) == want, (cond, params)
            # pyarrow writes Snappy: the direct path decompresses its pages with libsnappy unless told not to
            assert (ev["stats"]["libsnappy_bytes"] > 0) == (params.get("scan.libsnappy") != "0"
                                                            and params.get("scan.parquet_direct") != "0"), params


# ------------------------------------------------------------------ Snappy through libsnappy


def snappy_table(n: int) -> pa.Table:
    """Columns of the kinds analytics files hold: 8-byte decimals and integers with few significant
    bytes (Snappy's many short literals and copies), a dictionary-friendly date, a float."""
    rnd = random.Random(11)
    return pa.table({"price": pa.array([D(rnd.randint(90000, 10500000)).scaleb(-2) for _ in range(n)], pa.decimal128(15, 2)),
                     "qty": pa.array([rnd.randint(1, 50) for _ in range(n)], pa.int64()),
                     "day": pa.array([EPOCH + dt.timedelta(days=rnd.randint(8000, 10500)) for _ in range(n)], pa.date32()),
                     "f": pa.array([rnd.randint(-4000, 4000) / 16 for _ in range(n)], pa.float64())})


SNAPPY_TYPES = [("price", "decimal(15,2)"), ("qty", "int64"), ("day", "date"), ("f", "float64")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_snappy_through_libsnappy_equals_arrows_codec(fmt, tmp_path, cache):
    """Snappy-compressed Parquet pages (V1 and V2, dictionary and PLAIN) and ORC chunks are
    decompressed with the system's libsnappy, counted in `libsnappy_bytes`, with the same rows as
    Arrow's codec (`scan.libsnappy 0`); other codecs never touch it."""
    n = 30000
    table = snappy_table(n)
    files = {}
    if fmt == "parquet":
        for name, kw in {"v1": {}, "v2": {"data_page_version": "2.0"}, "plain": {"use_dictionary": False},
                         "zstd": {"compression": "zstd"}}.items():
            files[name] = tmp_path / f"{name}.parquet"
            pq.write_table(table, str(files[name]), row_group_size=7000, data_page_size=4096, store_schema=False,
                           store_decimal_as_integer=True, compression=kw.pop("compression", "snappy"), **kw)
    else:
        for name, comp in {"snappy": "snappy", "zstd": "zstd"}.items():
            files[name] = write(table, tmp_path / f"{name}.orc", rows_per_unit=7000, compression=comp)
    nca = scan_nca(tmp_path, fmt, SNAPPY_TYPES, cache, condition="qty < 24 AND day >= DATE '1995-01-01'",
                   columns=[("price", "price"), ("qty", "qty"), ("day", "day"), ("f", "f")])
    want = sorted(key({"price": int(r["price"].scaleb(2)), "qty": r["qty"], "day": (r["day"] - EPOCH).days, "f": r["f"]})
                  for r in table.to_pylist() if r["qty"] < 24 and r["day"] >= dt.date(1995, 1, 1))
    assert len(want) > 1000
    for name, path in files.items():
        ev, got, _ = nca.run([path], threads=2)
        assert ev["event"] == "done" and sorted(map(key, got)) == want, (name, ev)
        assert (ev["stats"]["libsnappy_bytes"] > 0) == (name != "zstd"), (name, ev["stats"])
        ev, got, _ = nca.run([path], threads=2, params={"scan.libsnappy": "0"})
        assert ev["event"] == "done" and sorted(map(key, got)) == want, (name, ev)
        assert ev["stats"]["libsnappy_bytes"] == 0


def _varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


@pytest.mark.parametrize("libsnappy", ["1", "0"])
def test_corrupt_snappy_page_fails_naming_file_and_column(libsnappy, tmp_path, cache):
    """A Snappy page whose first tag copies from before the start of its output (a corrupt block
    libsnappy and Arrow's codec both must refuse) fails the job with the file and, through
    libsnappy, the column named; nothing is written past the page's buffer."""
    n = 4000
    table = pa.table({"v": pa.array([k * 7919 % 100003 for k in range(n)], pa.int64())},
                     schema=pa.schema([pa.field("v", pa.int64(), nullable=False)]))
    path = tmp_path / "bad.parquet"
    pq.write_table(table, str(path), use_dictionary=False, compression="snappy", data_page_size=1 << 20)
    cc = pq.ParquetFile(str(path)).metadata.row_group(0).column(0)
    data = bytearray(path.read_bytes())
    # one PLAIN page of n required int64: its Snappy block opens with the varint of n * 8, right
    # after the page header at the start of the chunk
    pre = _varint(n * 8)
    at = bytes(data[cc.data_page_offset:cc.data_page_offset + 256]).rfind(pre)
    assert at > 0
    tag = cc.data_page_offset + at + len(pre)
    data[tag:tag + 3] = b"\xfe\xff\xff"  # copy of 64 bytes from 65535 back: before the output's start
    path.write_bytes(bytes(data))
    nca = scan_nca(tmp_path, "parquet", [("v", "int64")], cache)
    ev, rows, _ = nca.run([path], params={"scan.libsnappy": libsnappy})
    assert ev["event"] == "error" and ev["file"] == str(path) and not rows, ev
    if libsnappy == "1":
        assert "column v" in ev["message"] and "Snappy" in ev["message"], ev


@pytest.mark.parametrize("compression", ["uncompressed", "zlib", "snappy", "lz4", "zstd"])
def test_orc_stripe_statistics_under_every_compression(compression, tmp_path, cache):
    """The stripe statistics are read from the file tail by our own reader (the adapter does not
    expose them): every compression ORC writers use must decompress."""
    import numpy as np

    n = 100_000
    noise = np.random.default_rng(1).integers(0, 2**62, n)  # incompressible: the writer cuts stripes
    table = pa.table({"k": pa.array(range(n), pa.int64()), "s": pa.array([f"s{k:06d}" for k in range(n)]),
                      "r": pa.array(noise, pa.int64())})
    orc.write_table(table, str(tmp_path / "s.orc"), compression=compression, stripe_size=1024, batch_size=1000)
    f = orc.ORCFile(str(tmp_path / "s.orc"))
    sizes = [f.read_stripe(i, columns=["k"]).num_rows for i in range(f.nstripes)]
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert len(sizes) > 5
    nca = scan_nca(tmp_path, "orc", [("k", "int64"), ("s", "string")], cache,
                   condition="k >= 95000 AND s >= 's090000'", columns=[("k", "k")])
    ev, got, _ = nca.run([tmp_path / "s.orc"])
    assert ev["event"] == "done", ev
    assert ev["stats"]["stripes_skipped"] == sum(1 for e in ends if e <= 95000), (ev, sizes)
    assert sorted(r["k"] for r in got) == list(range(95000, n))


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_parquet_direct_dictionary_strings(version, tmp_path, cache):
    """String columns dictionary-encoded throughout a row group are read by the direct path too, as
    indices into the chunk's dictionary (`row_groups_direct`); a row group whose dictionary
    overflowed into PLAIN pages goes through parquet/arrow. NULLs, empty strings, several pages,
    prefilter on the strings: the rows Python computes, and parquet/arrow's."""
    rnd = random.Random(5)
    n = 9000
    flags, modes = ["A", "N", "R", ""], ["AIR", "MAIL", "RAIL", "SHIP", "TRUCK", "REG AIR", "FOB"]

    def maybe(v, p=0.1):
        return None if rnd.random() < p else v

    rows = [{"flag": maybe(rnd.choice(flags)), "mode": rnd.choice(modes), "qty": maybe(rnd.randint(1, 50), 0.05),
             # row group 2 (rows 6000 on) has too many distinct remarks for its dictionary
             "remark": f"c{rnd.randint(0, 20)}" if k < 6000 else f"unique remark {k} {rnd.random()}"}
            for k in range(n)]
    table = pa.Table.from_pylist(rows, schema=pa.schema([("flag", pa.string()), ("mode", pa.string()),
                                                         ("qty", pa.int64()), ("remark", pa.string())]))
    path = tmp_path / "s.parquet"
    pq.write_table(table, str(path), row_group_size=3000, data_page_size=600, dictionary_pagesize_limit=4096,
                   data_page_version=version, store_schema=False)
    types = [("flag", "string"), ("mode", "string"), ("qty", "int64"), ("remark", "string")]
    cases = {"flag = 'R' OR flag IS NULL": lambda r: r["flag"] in ("R", None),
             "mode IN ('MAIL', 'SHIP') AND qty < 20": lambda r: r["mode"] in ("MAIL", "SHIP") and r["qty"] is not None
             and r["qty"] < 20,
             "flag = '' AND mode >= 'REG'": lambda r: r["flag"] == "" and r["mode"] >= "REG"}
    # a list longer than the prefilter scans value by value (searched instead), not in order
    many = ["TRUCK", "AIR", "x"] + [f"mode {k}" for k in range(20)] + ["RAIL", "AIR"]
    cases[f"mode IN ({', '.join(repr(m) for m in many)})"] = lambda r: r["mode"] in many
    for cond, test in cases.items():
        # without `remark`: all three row groups direct; with it, the last one is not
        for cols, direct in (([("flag", "flag"), ("mode", "mode"), ("qty", "qty")], 3),
                             ([("mode", "mode"), ("remark", "remark")], 2)):
            names = [c for c, _ in cols]
            want = sorted(key({c: r[c] for c in names}) for r in rows if test(r))
            assert want, cond
            nca = scan_nca(tmp_path, "parquet", types, cache, condition=cond, columns=cols)
            for params in ({}, {"scan.batch_rows": "100"}, {"scan.parquet_direct": "0"}):
                ev, got, _ = nca.run([path], threads=2, params=params)
                assert ev["event"] == "done", (cond, params, ev)
                assert sorted(map(key, got)) == want, (cond, names, params)
                assert ev["stats"]["row_groups_direct"] == (0 if params.get("scan.parquet_direct") else direct), ev


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_parquet_randomly_damaged_files_end_cleanly(version, tmp_path, cache):
    """Bytes overwritten at random in the pages of a Snappy Parquet file of dictionary strings,
    integers and NULLs (the direct path, libsnappy): every run ends with `done` or an error that
    names the file, never a crash; damage the checks cannot see (a changed value) is all `done` may
    hide."""
    rnd = random.Random(2)
    n = 20000
    table = pa.table({"s": pa.array([rnd.choice(["AIR", "MAIL", "SHIP", None, ""]) for _ in range(n)]),
                      "l": pa.array([rnd.randint(0, 10**9) for _ in range(n)], pa.int64()),
                      "d": pa.array([rnd.randint(0, 50) for _ in range(n)], pa.int32())})
    good = tmp_path / "good.parquet"
    pq.write_table(table, str(good), row_group_size=5000, data_page_size=2000, data_page_version=version,
                   store_schema=False)
    nca = scan_nca(tmp_path, "parquet", [("s", "string"), ("l", "int64"), ("d", "int32")], cache,
                   condition="s = 'MAIL' OR d < 5")
    ev, _, _ = nca.run([good])
    assert ev["event"] == "done" and ev["stats"]["row_groups_direct"] == 4, ev
    original = good.read_bytes()
    footer_at = len(original) - 8 - int.from_bytes(original[-8:-4], "little")
    ends = {}
    for seed in range(24):
        r = random.Random(seed)
        data = bytearray(original)
        for _ in range(r.choice([1, 4, 16, 64])):
            data[r.randrange(4, footer_at)] = r.randrange(256)
        bad = tmp_path / f"bad{seed}.parquet"
        bad.write_bytes(bytes(data))
        ev, _, _ = nca.run([bad])
        assert ev["event"] in ("done", "error"), (seed, ev)
        if ev["event"] == "error":
            assert ev["file"] == str(bad), (seed, ev)
        ends[ev["event"]] = ends.get(ev["event"], 0) + 1
    assert ends.get("error", 0) >= 12, ends  # most damage is caught


# ------------------------------------------------------------------ wide decimals (19..38 digits)


@pytest.mark.parametrize("fmt", FORMATS)
def test_wide_decimal_columns(fmt, tmp_path, cache):
    """decimal(38,2) and decimal(25,0) files into wide columns (the Decimal128 values as they are,
    or rescaled exactly), a narrow file column into a wide schema column, NULLs, negatives and the
    largest values; a file value that does not fit its wide column fails naming the row."""
    big = D("9" * 36 + ".99")
    w = [big, D("-" + "9" * 36 + ".99"), D("12345678901234567890123.45"), None, D("-0.01"), D("0")]
    v = [D(10**24 - 1), D(-(10**24) + 1), None, D(7), D(-1234567890123456789), D(0)]
    n = [D("12.34"), None, D("-99999999.99"), D("0.05"), D("1"), D("-2")]
    table = pa.table({"w": pa.array(w, pa.decimal128(38, 2)), "v": pa.array(v, pa.decimal128(25, 0)),
                      "n": pa.array(n, pa.decimal128(10, 2))})
    write(table, tmp_path / f"t.{fmt}")
    schema = [("w", "decimal(38,2)"), ("v", "decimal(30,3)"), ("n", "decimal(20,2)")]
    nca = scan_nca(tmp_path, fmt, schema, cache, path=f"t.{fmt}")
    ev, got, _ = nca.run([tmp_path / f"t.{fmt}"])
    assert ev["event"] == "done", ev

    def unscaled(x, s):
        return None if x is None else int(x.scaleb(s, decimal.Context(prec=60)))

    want = [{"w": unscaled(a, 2), "v": unscaled(b, 3), "n": unscaled(c, 2)} for a, b, c in zip(w, v, n)]
    assert sorted(map(key, got)) == sorted(map(key, want))
    over = pa.table({"w": pa.array([D(1), D(10**36)], pa.decimal128(38, 0)), "v": pa.array([D(1)] * 2, pa.decimal128(25, 0)),
                     "n": pa.array([D(1)] * 2, pa.decimal128(10, 2))})
    write(over, tmp_path / f"over.{fmt}")
    nca = scan_nca(tmp_path, fmt, schema, cache, path=f"over.{fmt}")
    ev, _, _ = nca.run([tmp_path / f"over.{fmt}"])
    assert ev["event"] == "error" and ev["record"] == 2 and "does not fit" in ev["message"], ev
