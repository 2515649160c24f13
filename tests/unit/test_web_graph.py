"""The pipeline graph of the job page (jumpgate/web/graph.py) and what the pages make of a job's
JSON (jumpgate/web/jobview.py): the layout's bands, columns and rows, arrows that go between boxes
rather than through them, the SVG's structure and escaping, stream labels, dry runs, rows sent,
the operations' expressions, and the live part of the page with and without `progress`."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from jumpgate.dataflow.request import parse_request
from jumpgate.web import jobview
from jumpgate.web.graph import GAP_X, Arrow, Box, Node, label_size, layout, render_svg
from jumpgate.web.pages import _env

SVG = "{http://www.w3.org/2000/svg}"

# The join of the running example: scan u builds (stage 0), scan r with its filter probes (stage
# 1), the join runs in both, the aggregation after it, one client.
PIPELINE = {
    "ncas": [
        {"id": "nca0", "implementation": "software.scan_json", "operations": ["u"], "stages": [0], "converter": False,
         "host": "local"},
        {"id": "nca1", "implementation": "software.scan_json", "operations": ["r", "f"], "stages": [1],
         "converter": False, "host": "local"},
        {"id": "nca2", "implementation": "software.hash_join", "operations": ["j"], "stages": [0, 1],
         "converter": False, "host": "local"},
        {"id": "nca3", "implementation": "software.aggregate", "operations": ["g"], "stages": [1],
         "converter": False, "host": "node-b"},
    ],
    "stages": [["nca0", "nca2"], ["nca1", "nca2", "nca3"]],
    "outputs": {"out": {"layout": {"fields": [{"name": "k", "type": "int64"}, {"name": "n", "type": "int64"}]},
                        "expected_streams": 1}},
    "edges": [
        {"from": "nca0", "from_port": 0, "to": "nca2", "to_port": 0, "client": False, "edge": "u", "format": "ntf",
         "transport": "tcp", "streams": 1, "first_stream": 0, "keyed": True},
        {"from": "nca1", "from_port": 0, "to": "nca2", "to_port": 1, "client": False, "edge": "f", "format": "ntf",
         "transport": "tcp", "streams": 1, "first_stream": 0, "keyed": True},
        {"from": "nca2", "from_port": 0, "to": "nca3", "to_port": 0, "client": False, "edge": "j", "format": "ntf",
         "transport": "tcp", "streams": 1, "first_stream": 0, "keyed": False},
        {"from": "nca3", "from_port": 0, "to": "out", "to_port": 0, "client": True, "edge": "g", "format": "ntf",
         "transport": "tcp", "streams": 1, "first_stream": 0, "keyed": False},
    ],
    "decisions": {},
}


def example() -> tuple[list[Node], list[Arrow], list[str]]:
    return jobview.graph_parts(PIPELINE, {"nca1": 4}, jobview.edge_columns(PIPELINE, None), {})


# ---------------------------------------------------------------------------------- layout


def test_an_nca_stands_in_the_band_of_its_last_stage_in_columns_by_depth():
    nodes, arrows, bands = example()
    assert bands == ["stage 0", "stage 1", "clients"]
    assert {n.id: n.band for n in nodes} == {"nca0": 0, "nca1": 1, "nca2": 1, "nca3": 1, "client:out": 2}
    lay = layout(nodes, arrows, bands)
    # stage 0: one column; stage 1: the scan, the join it feeds, the aggregation; then the client
    assert lay.columns == {"nca0": 0, "nca1": 1, "nca2": 2, "nca3": 3, "client:out": 4}
    xs = [lay.boxes[n].x for n in ("nca0", "nca1", "nca2", "nca3", "client:out")]
    assert xs == sorted(xs) and len(set(xs)) == 5
    # each band holds its boxes, and bands do not overlap
    for n in nodes:
        band, box = lay.bands[n.band], lay.boxes[n.id]
        assert band.x <= box.x and box.x + box.w <= band.x + band.w, (n.id, band, box)
    for left, right in zip(lay.bands, lay.bands[1:]):
        assert left.x + left.w < right.x
    # a chain reads as a straight line: the join, the aggregation and the client on one row
    assert lay.rows["nca2"] == lay.rows["nca3"] == lay.rows["client:out"]


def test_boxes_never_overlap_and_a_long_arrow_passes_between_boxes():
    nodes, arrows, bands = example()
    lay = layout(nodes, arrows, bands)
    boxes = list(lay.boxes.values())
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    long = next(r for r in lay.routes if r.arrow.source == "nca0")  # stage 0's scan to the join, past the probe scan
    assert long.path.count(" L") == 1  # straight through one free slot
    y_through = float(re.search(r" L[\d.]+,([\d.]+)", long.path).group(1))
    probe = lay.boxes["nca1"]
    assert not probe.y <= y_through <= probe.y + probe.h, "the arrow runs through the probe scan's box"


def test_arrows_into_one_box_do_not_cross():
    nodes, arrows, bands = example()
    lay = layout(nodes, arrows, bands)
    into_join = sorted((r for r in lay.routes if r.arrow.target == "nca2"), key=lambda r: r.end[1])
    # the one coming from higher up ends higher up
    before = [float(re.findall(r"([\d.]+),([\d.]+)", r.path)[-4][1]) for r in into_join]  # last curve's start
    assert before == sorted(before)
    assert [r.arrow.source for r in into_join] == ["nca1", "nca0"]  # nca0's arrow comes round below the probe scan


def test_labels_cover_no_box_and_no_other_label():
    """A shuffle fanning out to three clients beside a filter feeding a fourth: the labels crowd
    the same gap, and each finds a free spot along its own arrow."""
    lines = ("edge: a, k, s", "ntf/tcp", "1 stream")
    nodes = [Node("scan", ("scan",), 0), Node("shuffle", ("shuffle",), 0), Node("filter", ("filter",), 0),
             *(Node(f"c{i}", ("client",), 1, "client") for i in range(4))]
    arrows = [Arrow("scan", "shuffle", lines), Arrow("scan", "filter", lines),
              *(Arrow("shuffle", f"c{i}", lines) for i in range(3)), Arrow("filter", "c3", lines)]
    lay = layout(nodes, arrows, ["stage 0", "clients"])
    labels = []
    for r in lay.routes:
        w, h = label_size(r.arrow.lines)
        labels.append(Box(r.label_at[0] - w / 2, r.label_at[1] - h / 2, w, h))
    for i, a in enumerate(labels):
        assert not any(a.overlaps(b) for b in labels[i + 1:]), (i, a)
        assert not any(a.overlaps(b) for b in lay.boxes.values()), (i, a)


def test_rows_follow_what_feeds_them_and_arrows_to_unknown_nodes_are_left_out():
    nodes = [Node("a", ("a",), 0), Node("b", ("b",), 0), Node("c", ("c",), 1), Node("d", ("d",), 1)]
    arrows = [Arrow("b", "d"), Arrow("a", "c"), Arrow("a", "ghost")]
    lay = layout(nodes, arrows, ["s0", "s1"])
    assert lay.rows == {"a": 0, "b": 1, "c": 0, "d": 1}
    assert [(r.arrow.source, r.arrow.target) for r in lay.routes] == [("b", "d"), ("a", "c")]


def test_a_backward_arrow_loops_below_and_nothing_breaks_on_a_cycle_or_no_nodes():
    nodes = [Node("a", ("a",), 1), Node("b", ("b",), 0)]
    lay = layout(nodes, [Arrow("a", "b"), Arrow("b", "a")], ["s0", "s1"])
    back = next(r for r in lay.routes if r.arrow.source == "a")
    assert back.end[0] < back.start[0]
    assert back.label_at[1] > max(b.y + b.h for b in lay.boxes.values())  # below both boxes
    cyc = layout([Node("x", ("x",), 0), Node("y", ("y",), 0)], [Arrow("x", "y"), Arrow("y", "x")], ["s0"])
    assert set(cyc.columns) == {"x", "y"}
    empty = layout([], [], [])
    assert empty.routes == () and empty.boxes == {}


def test_many_columns_in_a_band_spread_and_the_band_widens():
    chain = [Node(f"n{i}", (f"n{i}",), 0) for i in range(4)]
    lay = layout(chain, [Arrow(f"n{i}", f"n{i + 1}") for i in range(3)], ["stage 0"])
    assert [lay.columns[f"n{i}"] for i in range(4)] == [0, 1, 2, 3]
    assert lay.bands[0].w > 3 * GAP_X
    assert len({lay.rows[f"n{i}"] for i in range(4)}) == 1


# ---------------------------------------------------------------------------------- SVG


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(SVG + "g") if cls in g.get("class", "").split()]


def test_the_svg_has_a_group_per_node_and_per_arrow_with_labels_and_bands():
    root = parse(render_svg(*example()))
    ncas = groups(root, "nca")
    assert [g.get("data-id") for g in ncas] == ["nca0", "nca1", "nca2", "nca3"]
    assert [g.get("data-id") for g in groups(root, "client")] == ["client:out"]
    assert len(groups(root, "band")) == 3
    edges = groups(root, "edge")
    assert [(g.get("data-from"), g.get("data-to")) for g in edges] == [
        ("nca0", "nca2"), ("nca1", "nca2"), ("nca2", "nca3"), ("nca3", "client:out")]
    for g in edges:
        assert g.find(SVG + "path").get("marker-end") == "url(#arrowhead)"
        label = " / ".join(t.text for t in g.iter(SVG + "tspan"))
        assert label.endswith("1 stream"), label
    assert [" / ".join(t.text for t in g.iter(SVG + "tspan")) for g in edges][3] == "g: k, n / ntf/tcp / 1 stream"
    nca1 = ncas[1]
    texts = [t.text for t in nca1.iter(SVG + "text")]
    assert texts == ["nca1 · 4 threads", "software.scan_json", "r → f", "on local"]
    join = [t.text for t in ncas[2].iter(SVG + "text")]
    assert join[-1] == "on local · stages 0, 1"
    assert ncas[2].get("data-stages") == "0,1" and ncas[3].get("data-host") == "node-b"


def test_every_text_of_the_svg_is_escaped():
    evil = '<script>alert("x")</script>&'
    nodes = [Node(evil, (evil, "x" * 500), 0, tip=evil, attrs={"k": evil}), Node("b", ("b",), 1)]
    svg = render_svg(nodes, [Arrow(evil, "b", (evil,), tip=evil, attrs={"edge": evil})], [evil, "s1"], title=evil)
    assert "<script" not in svg
    root = parse(svg)  # well-formed
    texts = [t.text for t in root.iter(SVG + "text") if t.text]
    assert any(t.startswith("<script>") for t in texts)
    assert max(len(t) for t in texts) < 40  # long lines are clipped (the tooltip has them whole)
    assert groups(root, "nca")[0].get("data-k") == evil


# ---------------------------------------------------------------------------------- stream labels


@pytest.mark.parametrize("streams, first, expected, text", [
    (1, 0, 1, "1 stream"),
    (4, 0, 4, "4 streams"),
    (1, 0, None, "1 stream"),
    (1, 2, 3, "1 of 3 streams (id 2)"),
    (2, 2, 4, "2 of 4 streams (ids 2–3)"),
    (2, 0, 4, "2 of 4 streams (ids 0–1)"),
])
def test_stream_labels(streams, first, expected, text):
    assert jobview.stream_text(streams, first, expected) == text


def test_an_edge_sharing_its_destination_says_which_streams_are_its_own():
    pipeline = {"ncas": [{"id": f"nca{i}", "implementation": "x", "operations": [f"o{i}"], "stages": [0]}
                         for i in range(3)], "stages": [["nca0", "nca1", "nca2"]],
                "edges": [{"from": "nca0", "to": "nca2", "to_port": 0, "edge": "o0", "format": "ntf",
                           "transport": "tcp", "streams": 2, "first_stream": 0},
                          {"from": "nca1", "to": "nca2", "to_port": 0, "edge": "o1", "format": "ntf",
                           "transport": "tcp", "streams": 1, "first_stream": 2}]}
    _, arrows, _ = jobview.graph_parts(pipeline, {}, jobview.edge_columns(pipeline, None), {})
    assert [a.lines[-1] for a in arrows] == ["2 of 3 streams (ids 0–1)", "1 of 3 streams (id 2)"]
    assert [a.attrs["expected"] for a in arrows] == ["3", "3"]


# ---------------------------------------------------------------------------------- job facts


def test_dry_runs_rows_and_durations():
    ran = {"phases": {"parse": {}, "mapping": {}, "setup": {}},
           "ncas": {"nca3": {"stages": [{"tuples_out": 5}, {"tuples_out": 2}]}, "nca0": {"stages": [{"tuples_out": 50}]}}}
    assert jobview.never_ran("cancelled", {"phases": {"parse": {}, "mapping": {}}})
    assert not jobview.never_ran("cancelled", ran) and not jobview.never_ran("succeeded", {"phases": {}})
    assert jobview.rows_sent(PIPELINE, ran) == 7  # the NCA feeding the client, over its phases
    assert jobview.rows_sent(PIPELINE, ran, {"rows_to_clients": 3}) == 3  # the live count wins
    assert jobview.rows_sent(PIPELINE, {"phases": {"parse": {}}}, {"rows_to_clients": 0}) is None  # never executed
    assert jobview.rows_sent(PIPELINE, {"phases": {"setup": {}}}) is None
    assert jobview.job_duration(100.0, 103.25, "succeeded", 999.0) == "3.25 s"
    assert jobview.job_duration(100.0, None, "running", 175.0) == "1 min 15 s so far"
    assert jobview.job_duration(100.0, None, "compiled", 175.0) == ""
    assert jobview.duration(7300) == "2 h 01 min" and jobview.size(1234567) == "1.2 MB" and jobview.size(12) == "12 B"


def test_progress_rows_tolerate_what_they_do_not_expect():
    assert jobview.progress_rows(None, PIPELINE) == []
    assert jobview.progress_rows({"ncas": "nope"}, PIPELINE) == []
    rows = jobview.progress_rows({"ncas": {"nca3": {"tuples_in": 10, "bytes_in": 2000, "tuples_out": None,
                                                    "bytes_out": True, "stage": 1, "state": "running"},
                                           "zz": 5, "nca0": {"state": "done", "stage": 0}}}, PIPELINE)
    assert [r["nca"] for r in rows] == ["nca0", "nca3", "zz"]
    assert rows[1] == {"nca": "nca3", "implementation": "software.aggregate", "state": "running", "stage": 1,
                       "tuples_in": 10, "bytes_in": 2000, "tuples_out": None, "bytes_out": None}


# ---------------------------------------------------------------------------------- expressions


@pytest.fixture
def plan(tmp_path: Path):
    (tmp_path / "t.jsonl").write_text('{"a": 1, "k": 2, "s": "x"}\n')
    (tmp_path / "u.jsonl").write_text('{"bk": 2, "name": "n"}\n')
    schema = [{"name": "a", "type": "int64"}, {"name": "k", "type": "int64"}, {"name": "s", "type": "string"}]
    ops = [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": schema},
        {"kind": "filter", "name": "f", "input": "r", "condition": "a > 500 AND s <> 'it''s'"},
        {"kind": "read", "name": "u", "path": "u.jsonl", "format": "json",
         "schema": [{"name": "bk", "type": "int64"}, {"name": "name", "type": "string"}]},
        {"kind": "join", "name": "j", "probe": "f", "build": "u", "type": "inner", "probe_keys": ["k"],
         "build_keys": ["bk"], "condition": "a > 0",
         "columns": [{"name": "k", "expr": "k"}, {"name": "a", "expr": "a"}, {"name": "upper name", "expr": "upper(name)"}]},
        {"kind": "project", "name": "p", "input": "j", "columns": [{"name": "k", "expr": "k"}, {"name": "a2", "expr": "a * 2"}]},
        {"kind": "aggregate", "name": "g", "input": "p", "mode": "complete", "group_by": [{"name": "k", "expr": "k"}],
         "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "sa", "fn": "sum", "expr": "a2 + 1"}]},
        {"kind": "send", "name": "out", "input": "g", "transport": "tcp", "host": "127.0.0.1", "port": 5000}]
    return parse_request({"name": "t", "operations": ops}, tmp_path)


def test_each_operation_shows_its_expressions_as_text(plan):
    asks = {name: dict(jobview.expressions(plan.op(name))) for name in ("r", "f", "u", "j", "p", "g", "out")}
    assert asks["r"] == {"files": ["json: t.jsonl"], "columns": ["a int64, k int64, s string"]}
    assert asks["f"] == {"where": ["a > 500 AND s <> 'it''s'"]}
    assert asks["j"]["on"] == ["k = bk"] and asks["j"]["and"] == ["a > 0"]
    assert asks["j"]["select"] == ["k", "a", 'upper(name) AS "upper name"']
    assert asks["p"] == {"select": ["k", "a * 2 AS a2"]}
    assert asks["g"]["group by"] == ["k"] and asks["g"]["aggregates"] == ["count(*) AS n", "sum(a2 + 1) AS sa"]
    assert asks["out"] == {"to": ["tcp 127.0.0.1:5000"]}


def test_operations_fold_the_implementations_not_chosen(plan):
    verdicts = [{"implementation": "a", "ok": False, "step": "operations", "reason": "no", "chosen": False},
                {"implementation": "b", "ok": True, "step": "chosen", "reason": "takes (f)", "chosen": True},
                {"implementation": "c", "ok": True, "step": "cost", "reason": "could", "chosen": False}]
    pipeline = {"decisions": {"f": {"implementation": "b", "nca": "nca1", "verdicts": verdicts, "path": "operations[1]"},
                              "out": {"implementation": None, "nca": None, "verdicts": [], "note": "fed by nca1"}}}
    ops = jobview.operations(pipeline, plan)
    assert ops[0]["kind"] == "filter" and ops[0]["reason"] == "takes (f)" and ops[0]["could"] == 1
    assert [v["implementation"] for v in ops[0]["others"]] == ["a", "c"]
    assert ops[0]["expressions"] == [("where", ["a > 500 AND s <> 'it''s'"])]
    assert ops[1]["implementation"] is None and ops[1]["note"] == "fed by nca1"
    assert jobview.operations(pipeline, None)[0]["expressions"] == []  # a recorded job: no request


# ---------------------------------------------------------------------------------- the live part


def live_html(state: str, progress: dict | None, terminal: bool = False) -> str:
    status = {"job_id": "abc", "state": state}
    return _env.get_template("live.html").render(
        job=status, terminal=terminal, queue=None, progress=jobview.progress_rows(progress, PIPELINE),
        progress_ms=(progress or {}).get("updated_ms"), rows=jobview.rows_sent(PIPELINE, {"phases": {"setup": {}}},
                                                                               progress),
        submitted="2026-01-01 00:00:00 UTC", duration="1.00 s so far")


def test_the_live_part_shows_progress_when_the_status_has_it_and_does_without():
    with_progress = live_html("running", {"updated_ms": 1234.5, "rows_to_clients": 42, "ncas": {
        "nca0": {"state": "done", "stage": 0, "tuples_in": 50, "bytes_in": 1240, "tuples_out": 50, "bytes_out": 1568},
        "nca3": {"state": "running", "stage": 1, "tuples_in": None, "bytes_in": None, "tuples_out": None,
                 "bytes_out": None}}})
    assert 'id="live" data-state="running" data-src="/ui/jobs/abc/live?wait=1"' in with_progress
    assert '<tr data-nca="nca0">' in with_progress and '<tr data-nca="nca3">' in with_progress
    assert "1.2 kB" in with_progress and "unknown" in with_progress and "1234 ms" in with_progress
    assert '<span id="rows">42</span> rows to clients' in with_progress
    without = live_html("running", None)
    assert 'id="live"' in without and "<table" not in without and "refreshes itself" in without
    done = live_html("succeeded", {"ncas": {"nca0": {"tuples_in": 1}}}, terminal=True)
    assert "<table" not in done and "refreshes itself" not in done
