"""More groups than the switch has slots, over UDP end to end: 400,000 rows over about 150,000
int64 keys, some NULL keys, some values beyond 2^30 (no slot takes them: they go on as spills) and
values near 2^29 (a slot takes one, the next spills), through the switch MODEL (p4/model) into a
software final aggregation that sends the result to the client over UDP.

The job leases 4096 slot indices per way (JUMPGATE_SWITCH_SLOTS; 28,672 slots in its 7 ways, a
fraction of the switch's 229,376), so most of the rows go on past its slots at once, so the scan's datagrams reach the model about as
fast as the scan can send them. The model once fell behind here and its receive buffer dropped
datagrams, the scan's END copies (sent last) among them; the switch then waited for that END for
ever and the final aggregation waited out its 60 s idle timeout. Now the job must finish in seconds
with DuckDB's answer, and on a loaded machine (a CPU-bound process on every core) it must either do
the same or fail fast with a loss error: never wait out the idle timeout for a sender that is done."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jumpgate.client import JobFailed, Jumpgate
from jumpgate.client.errors import StreamError
from jumpgate.local_server import LocalServer
from jumpgate.ncas.switch import defs

from .conftest import switch_model_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROWS, KEYS = 400_000, 150_000
WAY_SLOTS = 4096  # the job's lease per way (JUMPGATE_SWITCH_SLOTS)
SLOTS = defs.WAYS * WAY_SLOTS  # in its 7 ways (docs/switch.md): far fewer than the groups
IDLE_TIMEOUT_S = 60  # the receivers' default udp.idle_ms: what a lost END used to cost
EXECUTE_WITHIN_S = 10  # the job's execute phase (about a second here), well inside the idle timeout
WALL_WITHIN_S = 30  # the whole job, building its NCAs included (a cold cache on a loaded machine)

REQUEST = {"name": "switch many groups", "operations": [
    {"kind": "read", "name": "t", "path": "many_groups.jsonl", "format": "json",
     "schema": [{"name": "k", "type": "int64"}, {"name": "v", "type": "int64"}]},
    {"kind": "aggregate", "name": "partial", "input": "t", "mode": "partial",
     "group_by": [{"name": "k", "expr": "k"}],
     "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "s", "fn": "sum", "expr": "v"}]},
    {"kind": "aggregate", "name": "final", "input": "partial", "mode": "final",
     "group_by": [{"name": "k"}],
     "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "s", "fn": "sum"}]},
    {"kind": "send", "name": "out", "input": "final", "transport": "udp", "host": "127.0.0.1", "port": 0}]}


def value(rng: random.Random, null_key: bool) -> int | None:
    """Mostly small; 1% beyond 2^58 (a spill), 4% near 2^29 (a second one in a slot spills);
    the NULL key's group gets small values only, so that its sum (a few thousand rows) fits int64."""
    r = rng.random()
    if null_key or r >= 0.07:
        return rng.randrange(-10**6, 10**6)
    if r < 0.01:
        return 2**59 + rng.randrange(1000)
    if r < 0.05:
        return 2**29 + rng.randrange(1000)
    return None


def write_rows(path: Path, seed: int = 7) -> None:
    rng = random.Random(seed)
    keys = [rng.randrange(-2**62, 2**62) for _ in range(KEYS)]
    with open(path, "w") as f:
        for _ in range(ROWS):
            k = None if rng.random() < 0.01 else keys[rng.randrange(KEYS)]
            f.write(json.dumps({"k": k, "v": value(rng, k is None)}) + "\n")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("many-groups")
    write_rows(path / "many_groups.jsonl")
    return path


@pytest.fixture(scope="module")
def want(root) -> list[tuple]:
    duckdb = pytest.importorskip("duckdb")
    with duckdb.connect() as con:
        rows = con.execute(f"""
            SELECT k, count(*), sum(v) FROM read_json('{root}/many_groups.jsonl',
                                                      columns={{k: 'BIGINT', v: 'BIGINT'}})
            GROUP BY k""").fetchall()
    assert len(rows) > 2 * SLOTS  # more groups than slots, by far
    return sorted(rows, key=_order)


@pytest.fixture(scope="module")
def server(root, tmp_path_factory):
    yield from switch_model_server(root, tmp_path_factory.mktemp("many-groups-logs"),
                                   {"JUMPGATE_SWITCH_SLOTS": str(WAY_SLOTS)})


@pytest.fixture
def cpu_load() -> Iterator[int]:
    """A CPU-bound process on every core for the test's duration; always killed."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)  # let them take the cores first
        yield len(burners)
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait(10)


def _order(row: tuple) -> tuple:
    return (row[0] is not None, row[0] or 0)


def run(server: LocalServer) -> tuple[list[tuple], dict]:
    """The job's rows (sorted) and its status; it must not take longer than the bounds."""
    t0 = time.monotonic()
    with Jumpgate(server.url) as jg:
        table = jg.run(REQUEST, timeout=2 * IDLE_TIMEOUT_S)["out"]
        elapsed = time.monotonic() - t0
        status = jg.last_job.status()
    execute_s = status["timeline"]["phases"]["execute"]["duration_ms"] / 1000
    assert execute_s < EXECUTE_WITHIN_S and elapsed < WALL_WITHIN_S, (execute_s, elapsed)
    rows = sorted(zip(*(table.column(c).to_pylist() for c in ("k", "n", "s")), strict=True), key=_order)
    return rows, status


def test_more_groups_than_slots_through_the_switch_model_over_udp_matches_duckdb(server, want):
    got, status = run(server)
    decisions = status["decisions"]
    assert decisions["partial"]["implementation"] == "switch.model"
    assert decisions["final"]["implementation"] == "software.aggregate"
    assert got == want
    switch = next(n["id"] for n in status["ncas"] if n["implementation"] == "switch.model")
    [phase] = status["timeline"]["ncas"][switch]["stages"]
    assert phase["tuples_in"] == ROWS
    assert phase["switch_slots"] == SLOTS
    assert phase["switch_bypassed"] > ROWS // 3 and phase["switch_spilled"] > 0  # NULL keys, values, no room
    print(f"\n{ROWS} rows, {len(want)} groups through the switch model over UDP: execute "
          f"{status['timeline']['phases']['execute']['duration_ms']:.0f} ms")


def test_the_same_job_on_a_loaded_machine_completes_or_fails_fast(server, want, cpu_load):
    t0 = time.monotonic()
    try:
        got, status = run(server)
    except (JobFailed, StreamError) as e:  # loss is allowed here, waiting for a lost END is not
        elapsed = time.monotonic() - t0
        message = json.dumps(e.error) if isinstance(e, JobFailed) else str(e)
        assert "UDP loss" in message, message
        assert elapsed < WALL_WITHIN_S, f"failed only after {elapsed:.1f} s: {message}"
        print(f"\nwith {cpu_load} CPU-bound processes: failed fast ({elapsed:.1f} s) with {message}")
        return
    assert got == want
    print(f"\nwith {cpu_load} CPU-bound processes: {len(got)} groups, execute "
          f"{status['timeline']['phases']['execute']['duration_ms']:.0f} ms")
