"""The ORC and Parquet scan plugins' operator interface (formats, fusion, threads, availability),
the mapping choosing the scan by the read's format, and the pruning predicates extracted from
filters (jumpgate/ncas/software/pruning.py)."""
from __future__ import annotations

import random
import string
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.contract.errors import MappingError
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.interface import FILE, StreamSpec
from jumpgate.ncas.software import arrow_cpp, scan_columnar
from jumpgate.ncas.software.common import read_columns_used
from jumpgate.ncas.software.pruning import PrunePredicate, prune_params, prune_predicates
from jumpgate.ncas.software.scan_columnar import OrcScanNca, ParquetScanNca
from jumpgate.ncas.software.scan_json import JsonScanNca

SCHEMA = [("a", "int32"), ("b", "int64"), ("d", "decimal(12,2)"), ("dt", "date"), ("s", "string"),
          ("x", "float64"), ("f", "boolean")]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("data")
    t = pa.table({"a": pa.array(range(5000), pa.int32())})
    orc.write_table(t, str(r / "t.orc"), stripe_size=1024, batch_size=1000)  # 5 stripes
    pq.write_table(t, str(r / "t.parquet"), row_group_size=2500)  # 2 row groups
    (r / "t.jsonl").write_text('{"a": 1}\n')
    return r


def plan_of(root, fmt: str, condition: str | None = None, path: str | None = None, tail=()):
    ops = [{"kind": "read", "name": "r", "path": path or f"t.{ {'json': 'jsonl'}.get(fmt, fmt)}",
            "format": fmt, "schema": [{"name": n, "type": t} for n, t in SCHEMA]}]
    if condition:
        ops.append({"kind": "filter", "name": "f", "input": "r", "condition": condition})
    ops += list(tail)
    ops.append({"kind": "send", "name": "o", "input": ops[-1]["name"], "transport": "tcp",
                "host": "127.0.0.1", "port": 9})
    return parse_request({"operations": ops}, root)


# ------------------------------------------------------------------ operator interface


@pytest.mark.parametrize("impl,fmt,other", [(OrcScanNca(), "orc", "parquet"), (ParquetScanNca(), "parquet", "orc")])
def test_each_scan_takes_its_format_only(root, impl, fmt, other):
    plan = plan_of(root, fmt, "a > 1", tail=[{"kind": "project", "name": "p", "input": "f",
                                              "columns": [{"name": "a2", "expr": "a * 2"}]}])
    v = impl.match_operations(plan, "r")
    assert v.ok and v.value == ("r", "f", "p")
    assert not impl.match_operations(plan, "f").ok
    assert not impl.match_operations(plan, "").ok
    v = impl.match_operations(plan_of(root, other), "r")
    assert not v.ok and f"reads only {fmt} files, not {other}" in v.reason
    assert not impl.match_operations(plan_of(root, "json"), "r").ok
    assert impl.capabilities()["formats"] == [fmt]
    assert impl.match_input(plan, ("r",), (StreamSpec(fmt, FILE),)).ok
    assert not impl.match_input(plan, ("r",), (StreamSpec(other, FILE),)).ok


def test_unavailable_arrow_says_why(root, monkeypatch):
    monkeypatch.setattr(arrow_cpp, "unavailable_reason", lambda: "pyarrow is not installed (test)")
    v = OrcScanNca().match_operations(plan_of(root, "orc"), "r")
    assert not v.ok and "pyarrow is not installed (test)" in v.reason
    assert OrcScanNca().capabilities()["unavailable"] == "pyarrow is not installed (test)"


def test_trailing_aggregate_is_fused(root):
    agg = {"kind": "aggregate", "name": "g", "input": "f", "group_by": [{"name": "s", "expr": "s"}],
           "aggregates": [{"name": "n", "fn": "count_star"}], "mode": "partial"}
    v = ParquetScanNca().match_operations(plan_of(root, "parquet", "a > 1", tail=[agg]), "r")
    assert v.ok and v.value == ("r", "f", "g")


@pytest.mark.parametrize("fmt,impl", [("orc", "software.scan_orc"), ("parquet", "software.scan_parquet"),
                                      ("json", "software.scan_json")])
def test_mapping_picks_the_scan_of_the_read_format(root, fmt, impl):
    impls = [OrcScanNca(), ParquetScanNca(), JsonScanNca()]
    p = compile_plan(plan_of(root, fmt, "a > 1"), impls, thread_budget=8)
    assert [(n.implementation, n.ops) for n in p.ncas] == [(impl, ("r", "f"))]


def test_mapping_error_names_the_format(root):
    with pytest.raises(MappingError) as e:
        compile_plan(plan_of(root, "orc"), [JsonScanNca(), ParquetScanNca()])
    assert "software.scan_parquet: operations: reads only parquet files, not orc" in str(e.value)


def test_threads_follow_units(root):
    def units(fmt, name):
        return scan_columnar.columnar_work(fmt, [str(root / name)], [1], {"a"}, limit=(64, 1 << 40))[0]

    assert units(scan_columnar.FileFormat.ORC, "t.orc") == 5
    assert units(scan_columnar.FileFormat.PARQUET, "t.parquet") == 2
    assert units(scan_columnar.FileFormat.ORC, "t.jsonl") == 1
    # a few hundred bytes of input: one thread whatever the units
    assert OrcScanNca().resources(plan_of(root, "orc"), ("r",)).max_cores == 1


def test_footers_are_read_once_per_file_version_and_a_symlink_is_never_served(tmp_path, monkeypatch):
    """Sizing a scan reads each file's footer once while the file stays as it is (every job over
    the same files sizes its scans again); a file rewritten in place is read again, and a path
    that became a symlink gets no cached answer: it counts as one unit of its size, unread."""
    reads = []
    real_footer = scan_columnar._parquet_footer
    monkeypatch.setattr(scan_columnar, "_parquet_footer", lambda f: reads.append(f.name) or real_footer(f))
    scan_columnar._read_footer.cache_clear()
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": list(range(100)), "b": list(range(100))}), path, row_group_size=50)

    def work(columns):
        return scan_columnar.columnar_work(scan_columnar.FileFormat.PARQUET, [str(path)], [7], columns,
                                           limit=(64, 1 << 40))

    first = work({"a"})
    assert first[0] == 2 and work({"a"}) == first and len(reads) == 1
    assert work({"a", "b"})[1] > first[1] and len(reads) == 1  # other columns, the same footer
    pq.write_table(pa.table({"a": list(range(300))}), path, row_group_size=100)  # rewritten
    assert work({"a"})[0] == 3 and len(reads) == 2
    target = tmp_path / "elsewhere.parquet"
    path.rename(target)
    path.symlink_to(target)
    assert work({"a"}) == (1, 7) and len(reads) == 2


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A narrow integer column `a` beside a wide column `s` of incompressible text (Parquet), or
    beside seven columns as wide as `a` (ORC, whose footer has no per-column sizes: a scan counts
    the share its columns are of the file's), in 8 row groups or stripes."""
    r = tmp_path_factory.mktemp("wide")
    rng = random.Random(7)
    n = 8000
    a = pa.array(range(n), pa.int32())
    text = pa.array(["".join(rng.choices(string.ascii_letters, k=200)) for _ in range(n)])
    pq.write_table(pa.table({"a": a, "s": text}), str(r / "w.parquet"), row_group_size=n // 8)
    others = {f"c{i}": pa.array([rng.getrandbits(63) for _ in range(n * 4)], pa.int64()) for i in range(7)}
    orc.write_table(pa.table({"a": pa.array([rng.getrandbits(63) for _ in range(n * 4)], pa.int64()), **others}),
                    str(r / "w.orc"), stripe_size=200 << 10)
    return r


SCHEMAS = {"parquet": [("a", "int32"), ("s", "string")],
           "orc": [("a", "int64"), *((f"c{i}", "int64") for i in range(7))]}


def wide_plan(root, fmt: str, tail: list[dict]):
    ops = [{"kind": "read", "name": "r", "path": f"w.{fmt}", "format": fmt,
            "schema": [{"name": n, "type": t} for n, t in SCHEMAS[fmt]]}, *tail]
    ops.append({"kind": "send", "name": "o", "input": ops[-1]["name"], "transport": "tcp",
                "host": "127.0.0.1", "port": 9})
    return parse_request({"operations": ops}, root)


ONLY_A = [{"kind": "project", "name": "p", "input": "r", "columns": [{"name": "a2", "expr": "a * 2"}]}]
COUNT_BY_A = [{"kind": "filter", "name": "f", "input": "r", "condition": "a > 10"},
              {"kind": "aggregate", "name": "g", "input": "f", "group_by": [{"name": "k", "expr": "a % 7"}],
               "aggregates": [{"name": "n", "fn": "count_star"}], "mode": "complete"}]
EVERY_COLUMN = [{"kind": "filter", "name": "f", "input": "r", "condition": "a > 10"}]


@pytest.mark.parametrize("impl,fmt", [(ParquetScanNca(), "parquet"), (OrcScanNca(), "orc")])
def test_threads_weigh_the_columns_read(wide, monkeypatch, impl, fmt):
    """The thread count follows the bytes of the columns the query reads, not the files' size:
    without that, the queries of `a` alone got as many threads as the whole files would."""
    assert (wide / f"w.{fmt}").stat().st_size > 1 << 20
    monkeypatch.setattr(type(impl), "min_bytes_per_thread", 200 << 10)
    threads = {name: impl.resources(wide_plan(wide, fmt, tail), ("r", *(op["name"] for op in tail))).max_cores
               for name, tail in (("a", ONLY_A), ("agg", COUNT_BY_A), ("all", EVERY_COLUMN))}
    assert threads["a"] == threads["agg"] == 1
    assert threads["all"] >= 4


@pytest.mark.parametrize("tail,used", [
    ([], {"a", "s"}),
    (ONLY_A, {"a"}),
    (COUNT_BY_A, {"a"}),
    (EVERY_COLUMN, {"a", "s"}),
    # a filter after the projection tests a projected column; a projected column no one uses
    # after a later projection is not read
    ([{"kind": "project", "name": "p", "input": "r", "columns": [{"name": "x", "expr": "a + 1"},
                                                                  {"name": "y", "expr": "length(s)"}]},
      {"kind": "filter", "name": "f", "input": "p", "condition": "x > 2"},
      {"kind": "project", "name": "q", "input": "f", "columns": [{"name": "x", "expr": "x"}]}], {"a"}),
])
def test_read_columns_used(wide, tail, used):
    plan = wide_plan(wide, "parquet", tail)
    assert read_columns_used(plan, ("r", *(op["name"] for op in tail))) == used


# ------------------------------------------------------------------ pruning predicates


def preds(root, condition: str, tail=()) -> list[PrunePredicate]:
    plan = plan_of(root, "orc", condition, tail=tail)
    return prune_predicates([op for op in plan.ops if op.kind != "send"])


P = PrunePredicate
CASES = [
    ("a > 5", [P("a", ">", (5,))]),
    ("5 < a", [P("a", ">", (5,))]),
    ("a >= 5 AND b <> 7", [P("a", ">=", (5,)), P("b", "<>", (7,))]),
    ("a BETWEEN 1 AND 3", [P("a", ">=", (1,)), P("a", "<=", (3,))]),
    ("NOT a BETWEEN 1 AND 3", []),
    ("NOT (a < 5)", [P("a", ">=", (5,))]),
    ("d < 24", [P("d", "<", (2400,))]),
    ("d < 0.055", [P("d", "<", (6,))]),
    ("d <= 0.055", [P("d", "<=", (5,))]),
    ("d > 0.055", [P("d", ">", (5,))]),
    ("d >= 0.055", [P("d", ">=", (6,))]),
    ("d = 0.055", []),  # never TRUE; left to the row function
    ("d BETWEEN 0.05 AND 0.07", [P("d", ">=", (5,)), P("d", "<=", (7,))]),
    ("a = 3.5", []),  # int cast to decimal: not representable
    ("a < 3.5", [P("a", "<", (4,))]),
    ("b > a", []),
    ("dt >= DATE '1994-01-01'", [P("dt", ">=", (8766,))]),
    ("s IN ('A', 'B', 'A')", [P("s", "in", ("A", "B"))]),
    ("s NOT IN ('A')", []),
    ("a IN (1, NULL, 2)", [P("a", "in", (1, 2))]),
    ("s = 'it''s'", [P("s", "=", ("it's",))]),
    ("x > 3", [P("x", ">", (3.0,))]),
    ("x < 0.1", [P("x", "<", (0.1,))]),
    ("a IS NULL AND s IS NOT NULL", [P("a", "isnull"), P("s", "notnull")]),
    ("NOT (a IS NULL)", [P("a", "notnull")]),
    ("f", [P("f", "=", (1,))]),
    ("NOT f", [P("f", "=", (0,))]),
    ("f = TRUE", [P("f", "=", (1,))]),
    ("a > 1 OR b > 2", []),
    ("a + 1 > 5", []),
    ("s LIKE 'a%'", []),
    ("a > NULL", []),
    ("b > 9223372036854775807", [P("b", ">", (2**63 - 1,))]),
    ("a > 1 AND (b < 2 AND s = 'z')", [P("a", ">", (1,)), P("b", "<", (2,)), P("s", "=", ("z",))]),
]


@pytest.mark.parametrize("cond,want", CASES, ids=[c for c, _ in CASES])
def test_pruning_predicates_from_conjuncts(root, cond, want):
    assert preds(root, cond) == want


def test_pruning_sees_through_projections_and_stops_at_the_aggregate(root):
    tail = [{"kind": "project", "name": "p", "input": "f", "columns": [{"name": "q", "expr": "b"},
                                                                       {"name": "t", "expr": "s"}]},
            {"kind": "filter", "name": "f2", "input": "p", "condition": "q < 10"},
            {"kind": "aggregate", "name": "g", "input": "f2", "group_by": [{"name": "t", "expr": "t"}],
             "aggregates": [{"name": "n", "fn": "count_star"}]},
            {"kind": "filter", "name": "having", "input": "g", "condition": "n > 5"}]
    assert preds(root, "a > 1", tail=tail) == [P("a", ">", (1,)), P("b", "<", (10,))]


def test_param_values_carry_any_text(root):
    plan = plan_of(root, "orc", "s IN ('a b', '100%', 'ünï', '') AND x >= -1e300")
    params = prune_params([op for op in plan.ops if op.kind != "send"])
    assert list(params) == ["prune.0", "prune.1"]
    toks = [unquote(t) for t in params["prune.0"].split(" ")]
    assert toks == ["s", "in", "a b", "100%", "ünï", ""]
    assert [unquote(t) for t in params["prune.1"].split(" ")] == ["x", ">=", "-1e+300"]
