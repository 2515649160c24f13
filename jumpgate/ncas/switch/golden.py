"""Golden files of the switch's table entries: what the controller classes write for a handful of
representative partial aggregations, kept in tests/unit/golden/switch/<case>.json and compared by
tests/unit/test_switch_plugin.py.

    python -m jumpgate.ncas.switch.golden --update   # rewrite every golden file
    python -m jumpgate.ncas.switch.golden --check    # exit 1 and list the stale ones

Review a diff of these files like a diff of P4 table programming: it is what a switch is told.
Cases are request JSON bound by the real parser and binder.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from ...contract.ntf import generate_ntf
from ...dataflow.request import parse_request
from .controller import JobConfig, JobSlots, Output, StreamCounters
from .query import compile_query, input_reason, operation_reason

GOLDEN_DIR = Path(__file__).resolve().parents[3] / "tests" / "unit" / "golden" / "switch"

# A fixed place on the switch, so the files do not depend on leases or ports of a run.
SLOTS = JobSlots(job=2, base=2048, size=1024, tag=0x1234ABCD)
UDP_PORT = 40002
DST = (0x0A000002, 5000, 0)  # 10.0.0.2:5000, stream 0
CTRL = (0x0A000001, 6000)  # 10.0.0.1:6000


def _agg(schema: dict[str, str], group_by: str, aggregates: list[dict]) -> dict:
    return {"operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
         "schema": [{"name": n, "type": t} for n, t in schema.items()]},
        {"kind": "aggregate", "name": "p", "input": "r", "mode": "partial",
         "group_by": [{"name": group_by, "expr": group_by}], "aggregates": aggregates},
        {"kind": "send", "name": "out", "input": "p", "transport": "udp", "host": "127.0.0.1", "port": 9}]}


CASES = {
    # the thesis' experiment on TPC-DS store_sales: unique items, and the sales price as a decimal sum
    "store_sales_items": _agg({"ss_item_sk": "int64", "ss_sales_price": "decimal(7,2)"}, "ss_item_sk",
                              [{"name": "cnt", "fn": "count_star"},
                               {"name": "total", "fn": "sum", "expr": "ss_sales_price"}]),
    # an int32 key and an int32 sum (sign-extended), count of a nullable column, sum first
    "int32_sum_then_count": _agg({"g": "int32", "x": "int32", "y": "boolean"}, "g",
                                 [{"name": "sx", "fn": "sum", "expr": "x"},
                                  {"name": "n", "fn": "count", "expr": "x"}]),
    # a date key after other fields, two sums around a count
    "date_key_two_sums": _agg({"a": "int64", "b": "decimal(12,4)", "d": "date", "c": "int64"}, "d",
                              [{"name": "sa", "fn": "sum", "expr": "a"},
                               {"name": "k", "fn": "count_star"},
                               {"name": "sb", "fn": "sum", "expr": "b"}]),
}


def render_case(name: str) -> str:
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "t.jsonl").write_text("")
        plan = parse_request(CASES[name], Path(root))
    op = plan.op("p")
    in_schema = plan.input_schema(op.input)
    in_layout = generate_ntf(in_schema)
    why = operation_reason(plan, op) or input_reason(in_layout, in_schema)
    if why:
        raise ValueError(f"golden case {name}: {why}")
    q = compile_query(plan, op, in_layout)
    doc = {
        "slots": {"job": SLOTS.job, "base": SLOTS.base, "size": SLOTS.size, "tag": SLOTS.tag},
        "entries": [e.to_json() for e in JobConfig.entries(q, SLOTS, UDP_PORT)
                    + Output.entries(q, SLOTS.job, *DST, *CTRL)],
        "reset_registers": sorted({c.register for c in StreamCounters.reset(SLOTS.job)}),
        "output_layout": q.layout.to_json(),
    }
    return json.dumps(doc, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    stale = []
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name in sorted(CASES):
        path = GOLDEN_DIR / f"{name}.json"
        text = render_case(name)
        if not path.exists() or path.read_text() != text:
            stale.append(path.name)
            if args.update:
                path.write_text(text)
    if stale and not args.update:
        print("stale golden files:", ", ".join(stale))
        return 1
    print(f"{'updated' if args.update else 'up to date'}: {len(CASES)} cases" + (f" ({', '.join(stale)})" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
