"""Late materialization in the ORC and Parquet scans (ncas/runtime/scan_arrow.cpp, scan_parquet.cpp,
orc_native.cpp): per batch the columns of the row prefilter are decoded first, the other columns only
for batches in which a row passed, else skipped without decoding; a late column's Parquet page or
ORC streams none of whose rows passed are never decompressed.

The files have several row groups / stripes and many small pages, and the late columns NULLs in
PLAIN and dictionary encodings, so a wrong skip (a position off by the rows skipped, NULLs counted as
values, a dictionary index taken from the wrong page) gives other values than DuckDB's. Every answer
is checked against DuckDB over the same rows (for ORC, a Parquet copy of the same table) and against
the same scan with late materialization off (`scan.late 0`)."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import random

import duckdb
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .fixtures.columnar import cache_dir, scan_nca

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")

EPOCH = dt.date(1970, 1, 1)
D = decimal.Decimal
N = 12000
UNIT_ROWS = 4000  # Parquet row group; ORC stripes are smaller (ORC_STRIPE_ROWS)
ORC_STRIPE_ROWS = 1000
RUN = 500  # rows per run of one value of `g`: a filter on g passes whole runs of rows

TYPES = [("g", "int64"), ("h", "int64"), ("r", "int32"), ("l", "int64"), ("s", "string"), ("d", "decimal(12,2)"),
         ("dt", "date"), ("f", "float64"), ("i", "int32")]
PROJECT = [("l", "l"), ("s", "s"), ("d", "d"), ("dt", "dt"), ("f", "f"), ("i", "i")]


def table() -> pa.Table:
    """`g` runs of RUN rows (0..11 over and over: every unit holds several values, so statistics
    prune little), `h` 5 where g is 5 and else 0 and 10 in turn (no unit's statistics rule out
    h = 5), `r` random 0..999 (scattered matches), and late columns with NULLs."""
    rnd = random.Random(5)

    def maybe(v, p=0.2):
        return None if rnd.random() < p else v

    return pa.table({
        "g": pa.array([(k // RUN) % 12 for k in range(N)], pa.int64()),
        "h": pa.array([5 if (k // RUN) % 12 == 5 else 10 * (k % 2) for k in range(N)], pa.int64()),
        "r": pa.array([rnd.randint(0, 999) for _ in range(N)], pa.int32()),
        "l": pa.array([maybe(k * 1_000_003 - 2**40) for k in range(N)], pa.int64()),
        "s": pa.array([maybe(rnd.choice(["", "alpha", "beta", "gamma", "日本", "x" * 40])) for _ in range(N)], pa.string()),
        "d": pa.array([maybe(D(rnd.randint(-10**11 + 1, 10**11 - 1)).scaleb(-2)) for _ in range(N)], pa.decimal128(12, 2)),
        "dt": pa.array([maybe(EPOCH + dt.timedelta(days=k % 5000)) for k in range(N)], pa.date32()),
        "f": pa.array([maybe(k / 8) for k in range(N)], pa.float64()),
        "i": pa.array([maybe(rnd.randint(-5, 5), 0.3) for _ in range(N)], pa.int32()),
    })


def write_parquet(t: pa.Table, path, version: str):
    # small pages (a few dozen rows each) in three row groups; g, s, i dictionary-encoded, the
    # other late columns PLAIN; Snappy (decompressed by the scan itself, so pages can be skipped)
    pq.write_table(t, str(path), row_group_size=UNIT_ROWS, data_page_size=256, write_batch_size=64,
                   data_page_version=version, use_dictionary=["g", "s", "i"], compression="snappy",
                   store_decimal_as_integer=True, store_schema=False)
    return path


def write_orc(t: pa.Table, path):
    orc.write_table(t, str(path), stripe_size=1024, batch_size=ORC_STRIPE_ROWS, compression="snappy",
                    dictionary_key_size_threshold=1.0)
    return path


def duck_rows(parquet_path, condition: str) -> list[str]:
    cols = ", ".join(e for _, e in PROJECT)
    rows = duckdb.sql(f"SELECT {cols} FROM read_parquet('{parquet_path}') WHERE {condition}").fetchall()
    out = []
    for row in rows:
        r = dict(zip([n for n, _ in PROJECT], row))
        r["d"] = None if r["d"] is None else int(r["d"].scaleb(2))
        r["dt"] = None if r["dt"] is None else (r["dt"] - EPOCH).days
        out.append(key(r))
    return sorted(out)


def key(r: dict) -> str:
    return json.dumps(r, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return cache_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("late")
    t = table()
    return {"parquet-v1": write_parquet(t, d / "v1.parquet", "1.0"),
            "parquet-v2": write_parquet(t, d / "v2.parquet", "2.0"),
            "orc": write_orc(t, d / "t.orc")}


# (condition, whether some batch has no row passing the prefilter, so late columns are skipped)
CONDITIONS = {
    "clustered": ("h = 5", True),  # no unit pruned: whole stripes and pages without a match
    "clustered, pruned": ("g = 5", True),
    "scattered": ("r < 4", False),  # a few rows in every batch: positions inside pages and runs
    "several columns": ("g IN (2, 9) AND r >= 500", True),
    "none passes": ("h = 7", True),  # statistics prune nothing, no row matches
    "prefilter and more": ("g = 7 AND f > l", True),  # f > l: only the row function decides it
    "late column filtered too": ("g = 3 AND s = 'beta'", True),  # s is read first then
}


@pytest.mark.parametrize("layout", ["parquet-v1", "parquet-v2", "orc"])
@pytest.mark.parametrize("case", CONDITIONS)
def test_late_columns_equal_duckdb_and_unskipped_reads(layout, case, files, tmp_path, cache):
    cond, skips = CONDITIONS[case]
    fmt = "orc" if layout == "orc" else "parquet"
    path = files[layout]
    nca = scan_nca(path.parent, fmt, TYPES, cache, condition=cond, columns=PROJECT, path=path.name)
    want = duck_rows(files["parquet-v1"], cond)
    results = {}
    for params in ({"scan.batch_rows": "100"}, {"scan.batch_rows": "100", "scan.late": "0"}, {}):
        ev, got, _ = nca.run([path], threads=2, params=params)
        assert ev["event"] == "done", (params, ev)
        assert sorted(map(key, got)) == want, params
        results[tuple(params.items())] = ev["stats"]
    small = results[(("scan.batch_rows", "100"),)]
    off = results[(("scan.batch_rows", "100"), ("scan.late", "0"))]
    assert off["late_rows_skipped"] == 0
    if skips:
        assert small["late_rows_skipped"] > 0, small
    if skips and (case == "clustered" or fmt == "parquet"):  # ORC: only where a stripe has no match
        chunks = "late_streams_skipped" if fmt == "orc" else "late_pages_skipped"
        assert small[chunks] > 0, small
    if case == "none passes":
        assert small["tuples_out"] == 0 and small["late_rows_skipped"] == small["tuples_in"] == N


def test_parquet_dictionary_late_column_skipped_across_pages(tmp_path, cache):
    """A dictionary-encoded late column whose pages are partly skipped: after a skipped page the
    next page's indices start at its own first row, and a page entered after skipped batches is
    positioned past the rows skipped in it (batches of 30 rows inside pages of about 64)."""
    rnd = random.Random(9)
    n = 3000
    g = [1 if (k // 150) % 4 == 1 or rnd.random() < 0.01 else 0 for k in range(n)]
    t = pa.table({"g": pa.array(g, pa.int64()),
                  "s": pa.array([None if rnd.random() < 0.25 else f"v{rnd.randint(0, 20)}" for _ in range(n)], pa.string()),
                  "l": pa.array([None if k % 7 == 0 else k for k in range(n)], pa.int64())})
    path = tmp_path / "p.parquet"
    pq.write_table(t, str(path), row_group_size=n, data_page_size=128, write_batch_size=32, use_dictionary=["s"],
                   compression="snappy")
    nca = scan_nca(tmp_path, "parquet", [("g", "int64"), ("s", "string"), ("l", "int64")], cache, condition="g = 1",
                   columns=[("s", "s"), ("l", "l")])
    want = sorted(key({"s": s, "l": v}) for s, v, x in zip(t.column("s").to_pylist(), t.column("l").to_pylist(), g) if x == 1)
    for batch in ("30", "7", "8192"):
        ev, got, _ = nca.run([path], params={"scan.batch_rows": batch})
        assert ev["event"] == "done", ev
        assert sorted(map(key, got)) == want, batch
        assert ev["stats"]["late_rows_skipped"] > 0 and ev["stats"]["late_pages_skipped"] > 0, (batch, ev["stats"])


def decimal_table() -> pa.Table:
    """Late decimal columns without NULLs (ORC writes no PRESENT stream for them), whose varints
    are 1 to 10 bytes long: 18-digit values of both signs, small ones, zero. `r` random 0..999."""
    rnd = random.Random(11)
    n = N

    def value(k: int, digits: int) -> D:
        size = rnd.choice([0, 1, 3, 9, digits - 1, digits])
        v = rnd.randint(0, 10**size - 1) if size else 0
        return D(-v if k % 3 == 0 else v).scaleb(-2)

    return pa.table({
        "r": pa.array([rnd.randint(0, 999) for _ in range(n)], pa.int32()),
        "p": pa.array([value(k, 18) for k in range(n)], pa.decimal128(18, 2)),
        "q": pa.array([value(k, 12) for k in range(n)], pa.decimal128(12, 2)),
        "k": pa.array(range(n), pa.int64()),
    })


@pytest.mark.parametrize("cond", ["r < 4", "r < 240", "r < 700", "r >= 0", "r < 0",
                                  "r < 40 AND p > 0", "r < 100 AND q <= 0 AND p > 1000"])
def test_orc_late_decimals_decoded_at_the_kept_rows(cond, tmp_path, cache):
    """A late ORC decimal column in a batch where at most a quarter of the rows passed is decoded
    at those rows only, the varints between them stepped over a word at a time (orc_native.cpp,
    decode_kept and skip_varints): the answers equal DuckDB's and the same scan's without late
    materialization, over batches of several sizes (varints straddling the word boundaries at
    other places); `late_values_skipped` counts the values stepped over. With predicates on the
    decimals too, the ORC scan's filter is staged: only r is decoded first, and each further
    predicate's column at the rows the ones before kept."""
    t = decimal_table()
    orc_path = write_orc(t, tmp_path / "d.orc")
    pq_path = tmp_path / "d.parquet"
    pq.write_table(t, str(pq_path))
    types = [("r", "int32"), ("p", "decimal(18,2)"), ("q", "decimal(12,2)"), ("k", "int64")]
    cols = [("k", "k"), ("p", "p"), ("q", "q")]
    nca = scan_nca(tmp_path, "orc", types, cache, condition=cond, columns=cols, path="d.orc")
    want = sorted((k, int(p.scaleb(2)), int(q.scaleb(2)))
                  for k, p, q in duckdb.sql(f"SELECT k, p, q FROM read_parquet('{pq_path}') WHERE {cond}").fetchall())
    kept = len(want)
    for params in ({"scan.batch_rows": "97"}, {"scan.batch_rows": "1000"}, {}, {"scan.late": "0"}):
        ev, got, _ = nca.run([orc_path], threads=2, params=params)
        assert ev["event"] == "done", (params, ev)
        assert sorted((r["k"], r["p"], r["q"]) for r in got) == want, params
        skipped = ev["stats"]["late_values_skipped"]
        if params.get("scan.late") == "0" or kept in (0, N) or kept > N // 2:
            assert skipped == 0, (params, ev["stats"])
        elif cond == "r < 4":  # every batch sparse: in each batch with a kept row, both columns
            # stepped over all its other rows (batches without one are skipped whole)
            assert skipped == 2 * (N - kept - ev["stats"]["late_rows_skipped"]) > 0, (params, ev["stats"])
        elif "AND" in cond:  # staged: the predicates' decimals stepped over as well as the other
            # one, so more values than one column has outside the kept rows of the batches read
            assert skipped > N - kept - ev["stats"]["late_rows_skipped"] > 0, (params, ev["stats"])
        else:
            assert skipped > 0, (params, ev["stats"])
