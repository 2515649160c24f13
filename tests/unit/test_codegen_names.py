"""Generated C does not depend on the request's operation and column names.

Clients name columns after ids that change from run to run (Spark's `x<exprId>`) or rename them
(Trino's self-joins), and build.py keys its binary cache on the generated source: names in the
source would recompile every NCA of a re-run query. Names reach a process only through its
message table (codegen/messages.py, `param msg.K`), so data errors still name them exactly.

The one kind of name that stays is a scan's read columns: the scan finds them in its files by
name, so they are what is read, not what it is called (the renames below keep them).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.plan import Join
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.codegen.aggregate import generate_aggregate_query
from jumpgate.ncas.software.codegen.join import generate_join_query
from jumpgate.ncas.software.codegen.messages import GeneratedSource, message_params
from jumpgate.ncas.software.codegen.shuffle import generate_relay_query, generate_scan_shuffle_query

from .fixtures.runtime_harness import run_scan
from .test_codegen_harness import cache_dir, needs_runtime

FILE_COLUMNS = {"k": "int64", "s": "string", "d": "decimal(10,2)", "e": "decimal(18,4)", "l": "int64"}
BASES = ("r", "r2", "f", "p", "p2", "j", "jp", "a", "h", "sh", "o", "k1", "sv", "dd", "l1", "k2", "v2",
         "key", "n", "total", "mean", "big", "out_k", "out_v", "pk")


def spark_like(base: str) -> str:
    """A run's names: Spark's `x<exprId>`, the ids differing between runs."""
    return f"x{1000 + 7 * BASES.index(base)}"


def other_run(base: str) -> str:
    return f"x{98765 + 13 * BASES.index(base)}"


OPERATIONS = ("r", "r2", "f", "p", "p2", "j", "jp", "a", "h", "sh", "o")


def hostile(base: str) -> str:
    """Names of other lengths; column names that would break C text if pasted (operation names
    are identifiers): none may reach the source."""
    return f"Renamed_{base}_by_a_client" if base in OPERATIONS else f"{base} '\"*/ ??/ \\ é"


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def request(n) -> list[dict]:
    """Every shape the tests compile, with `n(base)` as each operation and column name (a scan's
    read columns are its files' and keep theirs)."""
    c = lambda base: q(n(base))  # noqa: E731 - a column reference in an expression
    schema = [{"name": k, "type": t} for k, t in FILE_COLUMNS.items()]
    ops = [
        {"kind": "read", "name": n("r"), "path": "t.jsonl", "format": "json", "schema": schema},
        {"kind": "read", "name": n("r2"), "path": "t.jsonl", "format": "json", "schema": schema},
        # a scan: a filter and a projection with CASTs that can fail, decimal arithmetic
        {"kind": "filter", "name": n("f"), "input": n("r"), "condition": "CAST(s AS int64) > 0 OR k > 2"},
        {"kind": "project", "name": n("p"), "input": n("f"),
         "columns": [{"name": n("k1"), "expr": "k"}, {"name": n("sv"), "expr": "CAST(s AS int64)"},
                     {"name": n("dd"), "expr": "d * d"}, {"name": n("l1"), "expr": "l + 1"},
                     {"name": n("big"), "expr": "e"}]},
        {"kind": "project", "name": n("p2"), "input": n("r2"),
         "columns": [{"name": n("k2"), "expr": "k"}, {"name": n("v2"), "expr": "CAST(s AS decimal(12,2))"}]},
        # a join with keys, a condition and columns over both sides
        {"kind": "join", "name": n("j"), "build": n("p2"), "probe": n("p"), "type": "inner",
         "build_keys": [c("k2")], "probe_keys": [c("k1")], "condition": f"{c('v2')} + {c('dd')} > 0",
         "columns": [{"name": n("out_k"), "expr": c("k1")},
                     {"name": n("out_v"), "expr": f"CAST({c('v2')} AS int32)"}]},
        {"kind": "project", "name": n("jp"), "input": n("j"),
         "columns": [{"name": n("pk"), "expr": f"{c('out_k')} * 2"}, {"name": n("out_v"), "expr": c("out_v")}]},
        # an aggregation with decimal sums, and a filter over its groups
        {"kind": "aggregate", "name": n("a"), "input": n("p"), "mode": "complete",
         "group_by": [{"name": n("key"), "expr": f"{c('k1')} % 3"}],
         "aggregates": [{"name": n("n"), "fn": "count_star"}, {"name": n("total"), "fn": "sum", "expr": c("big")},
                        {"name": n("mean"), "fn": "avg", "expr": c("dd")}]},
        {"kind": "filter", "name": n("h"), "input": n("a"), "condition": f"{c('total')} > 1 AND {c('n')} > 0"},
        # a shuffle on computed keys
        {"kind": "shuffle", "name": n("sh"), "input": n("p"), "keys": [f"{c('l1')} + 1", c("sv")], "partitions": 3},
    ]
    sinks = [n("jp"), n("h")] + [f"{n('sh')}[{i}]" for i in range(3)]
    return ops + [{"kind": "send", "name": f"{n('o')}{i}", "input": s, "transport": "tcp", "host": "127.0.0.1",
                   "port": 1} for i, s in enumerate(sinks)]


def sources(root: Path, n) -> dict[str, str]:
    """The generated C of every NCA kind for the request named by `n`."""
    plan = parse_request({"operations": request(n)}, root)
    op = lambda base: plan.op(n(base))  # noqa: E731
    layout = lambda base: generate_ntf(plan.schemas[n(base)])  # noqa: E731
    read = op("r")
    join = op("j")
    assert isinstance(join, Join)
    return {
        "scan": generate_scan_query([read, op("f"), op("p")], layout("p")),
        "join": generate_join_query([join, op("jp")], plan.input_schema(join.probe), plan.input_schema(join.build),
                                    layout("jp")),
        "scan_aggregate": generate_aggregate_query([read, op("f"), op("p"), op("a"), op("h")], layout("h")),
        "aggregate": generate_aggregate_query([op("a"), op("h")], layout("h"), plan.schemas[n("p")]),
        "scan_shuffle": generate_scan_shuffle_query([read, op("f"), op("p"), op("sh")], layout("p")),
        "relay_shuffle": generate_relay_query([op("f"), op("p"), op("sh")], read.schema, generate_ntf(read.schema),
                                              layout("p")),
    }


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("names")
    (d / "t.jsonl").write_text('{"k": 1, "s": "2", "d": 1.5, "e": "3.25", "l": 4}\n')
    return d


@pytest.mark.parametrize("rename", [other_run, hostile], ids=["another_run", "hostile"])
def test_renamed_requests_generate_identical_c(root, rename):
    first, second = sources(root, spark_like), sources(root, rename)
    for kind, src in first.items():
        assert src == second[kind], f"{kind}: the generated C depends on names"
        assert "jg_message(" in src, kind  # each shape can fail, so it has a message table
        for base in BASES:  # no name of the request, as text or as bytes
            for name in (spark_like(base), rename(base)):
                assert name not in src and name.encode().hex() not in src.replace("\\x", ""), (kind, name)


def test_message_tables_carry_the_names(root):
    """Same source, different tables: each quotes its own request's names."""
    first, second = sources(root, spark_like), sources(root, hostile)
    for kind, src in first.items():
        assert isinstance(src, GeneratedSource) and len(src.messages) == len(second[kind].messages), kind
    assert any(f"sum '{spark_like('total')}'" in m for m in first["aggregate"].messages)
    assert any(f"sum '{hostile('total')}'" in m for m in second["aggregate"].messages)
    assert any(f"group column '{hostile('key')}' of '{hostile('a')}'" in m for m in second["aggregate"].messages)
    assert any(f"join '{hostile('j')}'" in m for m in second["join"].messages)
    assert any(f"shuffle '{hostile('sh')}'" in m for m in second["relay_shuffle"].messages)
    params = message_params(second["scan"])
    assert list(params) == [f"msg.{k}" for k in range(len(second["scan"].messages))]
    assert message_params("/* hand-written */") == {}


@needs_runtime
def test_one_binary_reports_each_requests_names(tmp_path):
    """A CAST failure: one compiled binary for both requests, and each run's error names the
    operation and column of its own request, given its message table as the control plane gives
    it (ProcessNca.configure)."""
    (tmp_path / "t.jsonl").write_text('{"k": 1, "s": "7", "d": 1, "e": 1, "l": 1}\n'
                                      '{"k": 5, "s": "seven", "d": 1, "e": 1, "l": 1}\n')
    built = []
    for n in (spark_like, hostile):
        src = sources(tmp_path, n)["scan"]
        built.append((n, src, build_nca(src, "scan_json", cache_dir())))
    assert built[0][2].path == built[1][2].path and built[1][2].cached
    for n, src, b in built:
        event, _, _ = run_scan(b.path, [tmp_path / "t.jsonl"], params=message_params(src))
        assert event["event"] == "error" and event["record"] == 2, event
        assert event["message"].startswith("invalid value for CAST to int64 in "), event
        assert f"filter '{n('f')}'" in event["message"] or f"column '{n('sv')}' of '{n('p')}'" in event["message"]
    # without its table a process still fails the row, saying which message it could not give
    event, _, _ = run_scan(built[0][2].path, [tmp_path / "t.jsonl"])
    assert event["event"] == "error" and "message table was not sent" in event["message"], event


@needs_runtime
def test_aggregate_overflow_names_the_aggregate(tmp_path):
    """Decimal overflow of a sum (the aggregation fused into a scan: the same accumulator code as
    over NTF): the message names the aggregate as the request does."""
    (tmp_path / "t.jsonl").write_text('{"k": 1, "s": "1", "d": 1, "e": "99999999999999.9999", "l": 1}\n' * 2)
    src = sources(tmp_path, hostile)["scan_aggregate"]
    event, _, _ = run_scan(build_nca(src, "scan_json", cache_dir()).path, [tmp_path / "t.jsonl"],
                           params=message_params(src))
    assert event["event"] == "error", event
    assert f"decimal overflow: sum '{hostile('total')}' does not fit decimal(18,4)" in event["message"], event


def test_a_software_nca_sends_its_message_table_with_the_configuration(tmp_path, monkeypatch):
    """ProcessNca: the compiled binary is one for both requests; `configure` gives each process
    its own request's messages (`param msg.K`, percent-encoded as every text token)."""
    from urllib.parse import unquote

    from jumpgate.compiler.compile import compile_plan
    from jumpgate.nca.interface import Destination, Endpoint, InstanceContext
    from jumpgate.ncas.software import process
    from jumpgate.ncas.software.build import BuildResult
    from jumpgate.ncas.software.scan_json import JsonScanNca

    from .test_join_plugin import B, plan_of, read, send

    built: list[str] = []
    monkeypatch.setattr(process, "build_nca", lambda src, *a, **k: built.append(src) or BuildResult(tmp_path, False, 0))
    configured = []
    for n in (spark_like, hostile):
        ops = [read("b", B), {"kind": "project", "name": n("p"), "input": "b",
                              "columns": [{"name": n("sv"), "expr": "CAST(bs AS int64) + bk"}]}, send("out", n("p"))]
        pipeline = compile_plan(plan_of(tmp_path, ops), [JsonScanNca()])
        [scan] = pipeline.ncas
        inst = JsonScanNca().instantiate(pipeline.build_spec(scan), InstanceContext(None, str(tmp_path), str(tmp_path)))
        inst.compile()
        sent: list[str] = []
        inst._send = sent.extend
        inst.configure([[Destination(Endpoint("127.0.0.1", 9), 0, 1)]])
        configured.append({unquote(k): unquote(v) for _, k, v in (line.split(" ") for line in sent
                                                                 if line.startswith("param msg."))})
    assert built[0] == built[1]
    for n, params in zip((spark_like, hostile), configured):
        assert params["msg.0"] == f"invalid value for CAST to int64 in column '{n('sv')}' of '{n('p')}':"
        assert all(f"column '{n('sv')}' of '{n('p')}'" in m for m in params.values())
