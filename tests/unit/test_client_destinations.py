"""Client destinations (docs/nca-process-protocol.md, "Client destinations"): the executor marks the
destinations of `send`s with how long a client may take no data, and a software NCA tells its
process with `dest ... client MS`; streams between NCAs are never marked (a slow NCA is
backpressure)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.nca.interface import FILE, Destination, Endpoint, InstanceContext
from jumpgate.ncas.software.scan_json import JsonScanNca
from jumpgate.runtime.executor import CLIENT_STALL_S, JobRunner

from .test_join_plugin import B, plan_of, read, send
from .test_stream_keys import running_example_with


def routes(pipeline, tmp_path, **kw):
    job = SimpleNamespace(id="j1", pipeline=pipeline)
    runner = JobRunner(job, None, None, None, tmp_path, tmp_path, lambda j: None, **kw)
    try:
        endpoints = {n.id: [Endpoint("127.0.0.1", 40000 + i) for i, p in enumerate(n.inputs)
                            if p.spec.transport != FILE] for n in pipeline.ncas}
        return runner._resolve_routes(endpoints)
    finally:
        runner._pool.shutdown()


def marks(pipeline, routes_) -> list[tuple[bool, int]]:
    """(to a client, client_stall_ms) of every destination, in edge order."""
    out = []
    for node in pipeline.ncas:
        for edges, dests in zip(pipeline.output_edges(node.id), routes_[node.id]):
            out += [(e.to_client, d.client_stall_ms) for e, d in zip(edges, dests, strict=True)]
    return out


@pytest.mark.parametrize("kw,ms", [({}, int(CLIENT_STALL_S * 1000)), ({"client_stall": 2.5}, 2500),
                                   ({"client_stall": 0}, 0), ({"client_stall": None}, 0), ({"client_stall": -1}, 0)])
def test_the_executor_marks_client_destinations_only(tmp_path, kw, ms):
    pipeline = running_example_with()
    got = marks(pipeline, routes(pipeline, tmp_path, **kw))
    assert any(c for c, _ in got) and any(not c for c, _ in got)
    assert got == [(c, ms if c else 0) for c, _ in got]
    assert CLIENT_STALL_S == 10.0


def test_a_software_nca_writes_client_on_tcp_destinations(tmp_path):
    pipeline = compile_plan(plan_of(tmp_path, [read("b", B), send("out", "b")]), [JsonScanNca()])
    [scan] = pipeline.ncas
    inst = JsonScanNca().instantiate(pipeline.build_spec(scan), InstanceContext(None, str(tmp_path), str(tmp_path)))
    sent: list[str] = []
    inst._send = sent.extend
    inst.configure([[Destination(Endpoint("127.0.0.1", 9), 0, 1, client_stall_ms=10000),
                     Destination(Endpoint("127.0.0.1", 10), 0, 1),
                     Destination(Endpoint("127.0.0.1", 11, "udp"), 0, 1, client_stall_ms=10000)]])
    dests = [line for line in sent if line.startswith("dest ")]
    assert dests == ["dest 0 127.0.0.1 9 0 1 client 10000", "dest 0 127.0.0.1 10 0 1", "dest 0 127.0.0.1 11 0 1 udp 0 0"]
