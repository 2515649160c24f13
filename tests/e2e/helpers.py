"""Running requests against the real server with the Python client, and comparing with DuckDB."""
from __future__ import annotations

import pyarrow as pa

from jumpgate.client import Jumpgate

from .data import schema_json


def read_op(name: str = "r", path: str = "t.jsonl", schema: list[dict] | None = None) -> dict:
    return {"kind": "read", "name": name, "path": path, "format": "json", "schema": schema or schema_json()}


def filter_project(cond: str | None, columns: list[tuple[str, str]]) -> list[dict]:
    ops = [read_op()]
    if cond is not None:
        ops.append({"kind": "filter", "name": "f", "input": "r", "condition": cond})
    ops.append({"kind": "project", "name": "p", "input": ops[-1]["name"],
                "columns": [{"name": n, "expr": e} for n, e in columns]})
    return ops


def run_ops(url: str, ops: list[dict], send_input: str | None = None) -> pa.Table:
    """Submit `ops` plus one send of the last operation; return what arrived."""
    send = {"kind": "send", "name": "out", "input": send_input or ops[-1]["name"], "transport": "tcp",
            "host": "127.0.0.1", "port": 0}
    with Jumpgate(url) as jg:
        return jg.run({"name": "e2e", "operations": ops + [send]}, timeout=600)["out"]


def assert_same_rows(con, got: pa.Table, sql: str) -> None:
    """Multiset equality of `got` and DuckDB's answer to `sql`, done inside DuckDB (EXCEPT ALL both
    ways) so a million rows compare in a blink. Column names and order must match too."""
    want = con.sql(sql).to_arrow_table()
    assert got.column_names == want.column_names, (got.column_names, want.column_names)
    assert got.num_rows == want.num_rows, f"got {got.num_rows} rows, DuckDB {want.num_rows}"
    con.register("got_t", got)
    con.register("want_t", want)
    try:
        extra = con.execute("SELECT * FROM got_t EXCEPT ALL SELECT * FROM want_t LIMIT 5").fetchall()
        missing = con.execute("SELECT * FROM want_t EXCEPT ALL SELECT * FROM got_t LIMIT 5").fetchall()
    finally:
        con.unregister("got_t")
        con.unregister("want_t")
    assert not extra and not missing, f"extra rows {extra}; missing rows {missing}"
