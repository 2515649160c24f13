"""The ORC scan's native stripe reader (ncas/runtime/orc_native.cpp) against the Arrow ORC adapter
(`scan.orc_native 0`, the reference) and against the values Python wrote: every column kind it
decodes, NULLs (none, some, all), every compression pyarrow writes, RLE v1 (file version 0.11) and
v2 (0.12) with value distributions that make the writer pick each RLE v2 sub-encoding, several
stripes and batch sizes, the fallback to the adapter for the stripes it does not decode, statistics
pruning, and malformed stripes failing with the file named. Files are written by pyarrow."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import random

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .fixtures.columnar import cache_dir, scan_nca

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")

EPOCH = dt.date(1970, 1, 1)
D = decimal.Decimal
ADAPTER = {"scan.orc_native": "0"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return cache_dir(tmp_path_factory)


def distribution(name: str, n: int, rnd: random.Random) -> list[int]:
    """Integers shaped for one RLE v2 sub-encoding (SHORT_REPEAT, DIRECT, PATCHED_BASE, DELTA)."""
    if name == "constant":  # DELTA with a zero delta, SHORT_REPEAT at run ends
        return [-7] * n
    if name == "short_runs":  # SHORT_REPEAT: 3..10 copies
        out: list[int] = []
        while len(out) < n:
            out += [rnd.randint(-10**6, 10**6)] * rnd.randint(3, 10)
        return out[:n]
    if name == "ascending":  # DELTA, fixed delta
        return [1000 + 3 * k for k in range(n)]
    if name == "small_deltas":  # DELTA with bit-packed deltas
        out, x = [], -5000
        for _ in range(n):
            x += rnd.randint(0, 6)
            out.append(x)
        return out
    if name == "descending":  # DELTA with a negative first delta
        out, x = [], 10**12
        for _ in range(n):
            x -= rnd.randint(1, 300)
            out.append(x)
        return out
    if name == "small_random":  # DIRECT
        return [rnd.randint(-1000, 1000) for _ in range(n)]
    if name == "wide_random":  # DIRECT, 64-bit
        return [rnd.choice([-2**63, 2**63 - 1, rnd.randint(-2**63, 2**63 - 1)]) for _ in range(n)]
    if name == "outliers":  # PATCHED_BASE: small values, a few wide ones
        return [rnd.randint(0, 100) if rnd.random() > 0.02 else rnd.randint(2**40, 2**48) for _ in range(n)]
    if name == "negative_outliers":  # PATCHED_BASE with a negative base
        return [rnd.randint(-300, -200) if rnd.random() > 0.03 else rnd.randint(2**30, 2**50) for _ in range(n)]
    raise ValueError(name)


DISTRIBUTIONS = ["constant", "short_runs", "ascending", "small_deltas", "descending", "small_random",
                 "wide_random", "outliers", "negative_outliers"]

# (column, Arrow type in the file, schema type of the query)
KINDS = [("b", pa.bool_(), "boolean"), ("i8", pa.int8(), "int32"), ("i16", pa.int16(), "int32"),
         ("i32", pa.int32(), "int32"), ("f32", pa.float32(), "float64"), ("f64", pa.float64(), "float64"),
         ("day", pa.date32(), "date"), ("d18", pa.decimal128(18, 2), "decimal(18,2)"),
         ("d9", pa.decimal128(9, 4), "decimal(9,4)"), ("d5", pa.decimal128(5, 0), "decimal(5,0)"),
         ("d_wide", pa.decimal128(10, 2), "decimal(18,5)")]  # rescaled by the driver
KINDS += [(f"v_{d}", pa.int64(), "int64") for d in DISTRIBUTIONS]


def value(col: str, k: int, rnd: random.Random, ints: dict[str, list[int]]):
    if col.startswith("v_"):
        return ints[col][k]
    if col == "b":
        return rnd.random() < 0.4
    if col == "i8":
        return rnd.randint(-128, 127)
    if col == "i16":
        return rnd.choice([-2**15, 2**15 - 1, rnd.randint(-300, 300)])
    if col == "i32":
        return rnd.randint(-2**31, 2**31 - 1)
    if col == "f32":
        return rnd.randint(-4000, 4000) / 16
    if col == "f64":
        return rnd.choice([0.0, -0.0, 1e300, -2.5e-300, rnd.uniform(-1e9, 1e9)])
    if col == "day":
        return EPOCH + dt.timedelta(days=rnd.randint(-40000, 40000))
    if col == "d18":
        return D(rnd.choice([10**18 - 1, -(10**18 - 1), rnd.randint(-10**12, 10**12)])).scaleb(-2)
    if col == "d9":
        return D(rnd.randint(-10**9 + 1, 10**9 - 1)).scaleb(-4)
    if col == "d5":
        return D(rnd.randint(-99999, 99999))
    if col == "d_wide":
        return D(rnd.randint(-10**10 + 1, 10**10 - 1)).scaleb(-2)
    raise ValueError(col)


def make_table(n: int, nulls: str, seed: int = 5) -> pa.Table:
    """Every kind; NULLs in none, 20% or all of the rows of every column but two int64 ones (one of
    them incompressible, so that compressed files still get several stripes)."""
    rnd = random.Random(seed)
    ints = {f"v_{d}": distribution(d, n, rnd) for d in DISTRIBUTIONS}
    cols = {}
    for col, typ, _ in KINDS:
        vals = [value(col, k, rnd, ints) for k in range(n)]
        if col not in ("v_constant", "v_wide_random"):
            if nulls == "all":
                vals = [None] * n
            elif nulls == "some":
                vals = [None if rnd.random() < 0.2 else v for v in vals]
        cols[col] = pa.array(vals, typ)
    cols["s"] = pa.array([f"s{k % 97}" for k in range(n)])  # a string column, read only by some tests
    return pa.table(cols)


def expected_rows(table: pa.Table, names: list[str]) -> list[str]:
    """The rows as the harness decodes them: decimals unscaled at the query's scale, dates as days."""
    scales = {col: int(t[len("decimal("):-1].split(",")[1]) for col, _, t in KINDS if t.startswith("decimal")}
    rows = []
    for r in table.select(names).to_pylist():
        for col, v in r.items():
            if v is None:
                continue
            if col in scales:
                r[col] = int(v.scaleb(scales[col]))
            elif isinstance(v, dt.date):
                r[col] = (v - EPOCH).days
            elif isinstance(v, bool):
                r[col] = v
        rows.append(key(r))
    return sorted(rows)


def key(r: dict) -> str:
    return json.dumps(r, sort_keys=True, default=str)


def run_both(nca, path, params: dict | None = None, threads: int = 1):
    """(native event, native rows, adapter event, adapter rows), rows as sorted keys."""
    ev, got, _ = nca.run([path], threads=threads, params=params)
    ev_a, got_a, _ = nca.run([path], threads=threads, params={**(params or {}), **ADAPTER})
    assert ev["event"] == "done", ev
    assert ev_a["event"] == "done", ev_a
    return ev, sorted(map(key, got)), ev_a, sorted(map(key, got_a))


def write(table: pa.Table, path, **kw):
    kw.setdefault("stripe_size", 1024)  # the writer cuts a stripe at its next batch: many stripes
    kw.setdefault("batch_size", 1500)
    orc.write_table(table, str(path), **kw)
    return path


# ------------------------------------------------------------------ exact equality


@pytest.mark.parametrize("file_version", ["0.11", "0.12"])
@pytest.mark.parametrize("compression", ["uncompressed", "zlib", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("nulls", ["none", "some", "all"])
def test_native_stripes_equal_the_adapter_and_the_values_written(nulls, compression, file_version, tmp_path, cache):
    n = 20000  # compressed, the writer cuts a stripe once a 64 KiB chunk of some column is out
    table = make_table(n, nulls)
    path = write(table, tmp_path / "t.orc", compression=compression, file_version=file_version)
    nstripes = orc.ORCFile(str(path)).nstripes
    assert nstripes >= 2
    nca = scan_nca(tmp_path, "orc", [(c, t) for c, _, t in KINDS], cache)
    ev, native, ev_a, adapter = run_both(nca, path)
    assert ev["stats"]["stripes_native"] == nstripes and ev_a["stats"]["stripes_native"] == 0
    assert ev["stats"]["tuples_out"] == n
    assert native == adapter
    assert native == expected_rows(table, [c for c, _, _ in KINDS])


@pytest.mark.parametrize("batch_rows", ["1", "7", "999", "8192"])
def test_batches_that_end_inside_runs_and_bytes(batch_rows, tmp_path, cache):
    """Batches ending inside an RLE run, a byte of booleans or PRESENT bits, with two threads."""
    table = make_table(4000, "some", seed=9)
    path = write(table, tmp_path / "t.orc", compression="snappy", batch_size=1300)
    names = ["b", "i8", "day", "d18", "v_short_runs", "v_outliers", "v_small_deltas"]
    nca = scan_nca(tmp_path, "orc", [(c, t) for c, _, t in KINDS if c in names], cache)
    ev, native, _, adapter = run_both(nca, path, params={"scan.batch_rows": batch_rows}, threads=2)
    assert ev["stats"]["stripes_native"] == ev["stats"]["stripes_total"]
    assert native == adapter == expected_rows(table, names)


def test_decimal_scales_of_one_column_vary(tmp_path, cache):
    """Values stored at scales other than the column's (other writers vary the scale per value)
    are brought to it as ORC's reader does; pyarrow writes the column's scale, so the file comes
    from a decimal(18,6) column read as decimal(18,6) and at the query's scale 2 by the driver."""
    rnd = random.Random(4)
    vals = [D(rnd.randint(-10**6, 10**6)).scaleb(-2) for _ in range(3000)]
    table = pa.table({"d": pa.array(vals, pa.decimal128(18, 6))})
    path = write(table, tmp_path / "t.orc")
    nca = scan_nca(tmp_path, "orc", [("d", "decimal(18,2)")], cache)
    ev, native, _, adapter = run_both(nca, path)
    assert ev["stats"]["stripes_native"] == ev["stats"]["stripes_total"] > 1
    assert native == adapter == sorted(key({"d": int(v.scaleb(2))}) for v in vals)


# ------------------------------------------------------------------ what stays on the adapter


def test_fields_it_does_not_decode_go_through_the_adapter(tmp_path, cache):
    """A decimal of more than 18 digits (strings: test_orc_native_strings.py)."""
    n = 3000
    table = make_table(n, "some")
    table = table.append_column("big", pa.array([D(k).scaleb(-2) for k in range(n)], pa.decimal128(30, 2)))
    extra = ("big", "decimal(18,2)")
    path = write(table, tmp_path / "t.orc")
    nca = scan_nca(tmp_path, "orc", [("v_outliers", "int64"), ("d18", "decimal(18,2)"), extra], cache)
    ev, native, _, adapter = run_both(nca, path)
    assert ev["stats"]["stripes_native"] == 0 and ev["stats"]["tuples_out"] == n
    assert native == adapter
    # the same file without that field: native
    nca = scan_nca(tmp_path, "orc", [("v_outliers", "int64"), ("d18", "decimal(18,2)")], cache)
    ev, native, _, adapter = run_both(nca, path)
    assert ev["stats"]["stripes_native"] == ev["stats"]["stripes_total"] > 1
    assert native == adapter == expected_rows(table, ["v_outliers", "d18"])


def test_pruning_and_prefilter_on_native_stripes(tmp_path, cache):
    n = 20000
    table = pa.table({"k": pa.array(range(n), pa.int64()),
                      "q": pa.array([D(k % 5000).scaleb(-2) for k in range(n)], pa.decimal128(15, 2)),
                      "day": pa.array([EPOCH + dt.timedelta(days=k // 10) for k in range(n)], pa.date32())})
    path = write(table, tmp_path / "t.orc", batch_size=2000)
    nca = scan_nca(tmp_path, "orc", [("k", "int64"), ("q", "decimal(15,2)"), ("day", "date")], cache,
                   condition="k >= 15000 AND q < 10.5 AND day <> DATE '1970-02-20'", columns=[("k", "k")])
    ev, native, ev_a, adapter = run_both(nca, path)
    st = ev["stats"]
    assert st["stripes_skipped"] == ev_a["stats"]["stripes_skipped"] > 0
    assert st["stripes_native"] == st["stripes_total"] - st["stripes_skipped"] > 0
    want = sorted(key({"k": k}) for k in range(15000, n) if k % 5000 < 1050 and k // 10 != 50)
    assert native == adapter == want


# ------------------------------------------------------------------ malformed stripes


@pytest.mark.parametrize("compression", ["uncompressed", "snappy", "zstd"])
def test_malformed_stripe_data_fails_naming_the_file(compression, tmp_path, cache):
    """Stripe bytes overwritten, the tail intact: an error naming the file, never a crash or a hang."""
    n = 30000
    rnd = random.Random(2)
    table = pa.table({"l": pa.array([rnd.randint(-10**15, 10**15) for _ in range(n)], pa.int64()),
                      "d": pa.array([D(rnd.randint(-10**9, 10**9)).scaleb(-2) for _ in range(n)], pa.decimal128(12, 2))})
    path = write(table, tmp_path / "c.orc", compression=compression, batch_size=5000)
    data = bytearray(path.read_bytes())
    for k in range(3, len(data) * 2 // 3):  # leave the magic, the later stripes and the tail alone
        data[k] = 0xFF
    bad = tmp_path / "bad.orc"
    bad.write_bytes(bytes(data))
    nca = scan_nca(tmp_path, "orc", [("l", "int64"), ("d", "decimal(12,2)")], cache, path="bad.orc")
    ev, _, _ = nca.run([bad], threads=2)
    assert ev["event"] == "error" and ev["file"] == str(bad), ev
    assert "ORC" in ev["message"], ev


def test_truncated_file_fails_naming_it(tmp_path, cache):
    table = make_table(3000, "some")
    good = write(table, tmp_path / "good.orc", compression="snappy")
    data = good.read_bytes()
    bad = tmp_path / "bad.orc"
    bad.write_bytes(data[: len(data) * 3 // 4])
    nca = scan_nca(tmp_path, "orc", [("v_outliers", "int64"), ("d18", "decimal(18,2)")], cache, path="*.orc")
    ev, _, _ = nca.run([good, bad], threads=2)
    assert ev["event"] == "error" and ev["file"] == str(bad), ev
