"""Fixtures of the Presto (Trino) client's tests: the connector's plugin folder (clients/presto),
a data root with TPC-H at SF 0.1 as JSON Lines, Parquet and ORC (written by `jumpgate datagen`), a
real `jumpgate serve` over it, and one real Trino 476 server (scripts/trino-install.sh) with the
catalogs `tpch` (Trino's own) and `jumpgate`, for the whole run.

These tests run in their own pytest run (`pytest tests/presto`, as scripts/test.sh does after the
Spark suite): a run over all of `tests` leaves them out (see `pytest_ignore_collect`), since a Trino
server is a heavy thing for the main suite. JUMPGATE_TRINO_TESTS=1 takes them in anyway.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from jumpgate.local_server import LocalServer, free_port

from . import trino_server

PROJECT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PLUGIN = PROJECT / "clients" / "presto" / "target" / "jumpgate-trino-0.1.0"
SF = float(os.environ.get("JUMPGATE_PRESTO_SF", "0.1"))
DATA = Path(os.environ.get("JUMPGATE_PRESTO_DATA") or PROJECT / ".jumpgate" / "presto-tests")
FORMATS = ["json", "parquet", "orc"]
TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
ROWS_PER_FILE = 200_000


def pytest_ignore_collect(collection_path, config):
    """Leave these tests out of a run that did not name tests/presto (the main suite)."""
    if os.environ.get("JUMPGATE_TRINO_TESTS") == "1" or collection_path == HERE:
        return None
    for arg in config.args:
        p = Path(arg.split("::")[0]).resolve()
        if p == HERE or HERE in p.parents:
            return None
    return True


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/presto/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def plugin_dir() -> Path:
    why = trino_server.missing()
    if why:
        pytest.skip(why)
    r = subprocess.run(["bash", str(PROJECT / "clients" / "presto" / "build.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"building the Trino connector failed:\n{r.stdout}\n{r.stderr}")
    return PLUGIN


@pytest.fixture(scope="session")
def data_root() -> Path:
    from jumpgate import datagen
    for fmt in FORMATS:
        datagen.generate("tpch", SF, fmt, DATA / "tpch" / fmt, rows_per_file=ROWS_PER_FILE, progress=False)
    return DATA


@pytest.fixture(scope="session")
def jg_server(data_root, tmp_path_factory):
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    srv = LocalServer(data_root, cache, tmp_path_factory.mktemp("jglogs") / "server.log")
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


@pytest.fixture(scope="session")
def doomed_url():
    """A URL where no Jumpgate server listens (a stopped server's): the `jumpgate_down` catalog's."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="session")
def victim_server(data_root, tmp_path_factory):
    """A second real server, for the `jumpgate_victim` catalog: a test kills it in mid-query."""
    srv = LocalServer(data_root, tmp_path_factory.mktemp("victim-cache"), tmp_path_factory.mktemp("victim") / "server.log")
    yield srv
    srv.stop()


def jumpgate_catalog(url: str, data_root: Path, **switches: str) -> dict[str, str]:
    return {"connector.name": "jumpgate", "jumpgate.url": url, "jumpgate.data-root": str(data_root),
            "jumpgate.job-timeout": "300s", **switches}


@pytest.fixture(scope="session")
def trino(plugin_dir, jg_server, victim_server, data_root, doomed_url, tmp_path_factory):
    catalogs = {
        "tpch": {"connector.name": "tpch", "tpch.column-naming": "STANDARD"},
        "jumpgate": jumpgate_catalog(jg_server.url, data_root),
        # The same datasets with every pushdown off: Trino does all but the scan.
        "jumpgate_nopush": jumpgate_catalog(jg_server.url, data_root, **{"jumpgate.pushdown.enabled": "false"}),
        # Destinations read once their streams have ended, instead of as chunks arrive.
        "jumpgate_buffered": jumpgate_catalog(jg_server.url, data_root, **{"jumpgate.streaming": "false"}),
        "jumpgate_down": jumpgate_catalog(doomed_url, data_root),
        "jumpgate_victim": jumpgate_catalog(victim_server.url, data_root),
    }
    srv = trino_server.TrinoServer(tmp_path_factory.mktemp("trino"), catalogs, {"jumpgate": plugin_dir})
    print(f"Trino {trino_server.VERSION} ready in {srv.start_seconds:.1f} s at {srv.url}")
    yield srv
    srv.stop()


# Trino's types as the contract's, for the tables of its `tpch` connector (docs/contract.md, Types).
TRINO_TYPES = {"bigint": "int64", "integer": "int32", "double": "float64", "date": "date", "varchar": "string"}


@pytest.fixture(scope="session")
def trino_tpch_copy(trino, data_root) -> str:
    """Trino's own `tpch` tables at SF, copied through Trino into the data root as JSON Lines,
    Parquet and ORC, in the layout `jumpgate datagen` writes; returns the prefix of the connector's
    schemas for them (`tpch_trino`: `tpch_trino_json`, ...). They hold exactly the rows and types of
    the `tpch` connector's tables (its free text and its double prices too), which dbgen's files do
    not: the two generators draw comments and addresses apart."""
    import duckdb
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq
    from trino import dbapi

    from jumpgate.client.ntf import arrow_type
    from jumpgate.contract.types import parse_type

    out = DATA / "tpch_trino"
    done = out / ".complete"
    if done.exists() and done.read_text() == str(SF):
        return "tpch_trino"
    conn = dbapi.connect(host="127.0.0.1", port=trino.port, user="jumpgate-tests", catalog="tpch",
                         schema=trino_tpch_schema(), request_timeout=600)
    duck = duckdb.connect()
    try:
        for table in TABLES:
            cur = conn.cursor()
            cur.execute(f"SELECT * FROM {table}")
            rows = cur.fetchall()
            schema = [{"name": d[0], "type": TRINO_TYPES[d[1].split("(")[0]]} for d in cur.description]
            cur.close()
            data = pa.table({c["name"]: pa.array([r[i] for r in rows], arrow_type(parse_type(c["type"])))
                             for i, c in enumerate(schema)})
            for fmt in FORMATS:
                (out / fmt / table).mkdir(parents=True, exist_ok=True)
                (out / fmt / f"{table}.schema.json").write_text(json.dumps(schema))
            pq.write_table(data, out / "parquet" / table / "part-0.parquet", compression="snappy")
            orc.write_table(data, out / "orc" / table / "part-0.orc", compression="snappy")
            duck.register("data", data)  # DuckDB writes JSON Lines: dates as text, doubles round-trip
            duck.execute(f"COPY data TO '{out / 'json' / table / 'part-0.jsonl'}' (FORMAT JSON)")
            duck.unregister("data")
    finally:
        duck.close()
        conn.close()
    done.write_text(str(SF))
    return "tpch_trino"


def trino_tpch_schema() -> str:
    """The `tpch` connector's schema for SF: `sf0.1`, `sf1`, `tiny` for 0.01."""
    return "tiny" if SF == 0.01 else f"sf{SF:g}"


@pytest.fixture(scope="session")
def conn(trino):
    dbapi = pytest.importorskip("trino.dbapi", reason="pip install -e '.[dev]' (the trino client)")
    c = dbapi.connect(host="127.0.0.1", port=trino.port, user="jumpgate-tests", catalog="jumpgate",
                      schema="tpch_json", request_timeout=600)
    yield c
    c.close()


def query(conn, sql: str) -> list[tuple]:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


@pytest.fixture(scope="session")
def duck():
    """DuckDB with TPC-H at the same scale, generated by the same dbgen as the data files: the oracle."""
    from jumpgate import datagen
    con = datagen.connect(datagen.BENCHMARKS["tpch"])
    con.execute(f"CALL dbgen(sf={SF})")
    yield con
    con.close()
