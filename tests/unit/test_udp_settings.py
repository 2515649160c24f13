"""The server settings of software NCAs' UDP edges (docs/udp-transport.md): JUMPGATE_DPDK, which
names the NCAs that use DPDK and the ports they drive, and the receivers' idle timeout. What they
do on the wire is tested in test_udp_runtime.py (idle timeout) and test_udp_dpdk.py (a server
choosing DPDK per NCA); here, how they are read, checked and handed to instances."""
from __future__ import annotations

import json

import pytest

from jumpgate.contract.ntf import NtfLayout
from jumpgate.dataflow.plan import InputRef, LogicalPlan
from jumpgate.nca.interface import (
    InputPort,
    InstanceContext,
    NcaError,
    NcaSpec,
    OutputSpec,
    ResourceRequest,
    StreamSpec,
)
from jumpgate.ncas.software.dpdk import SELECT_ENV, DpdkLease, DpdkPort, dpdk_selection
from jumpgate.ncas.software.udp_transport import IDLE_ENV, UdpEdges

PORT = {"eal": "-l 2 --in-memory -a 0000:3b:00.0", "ip": "10.0.0.7", "peer_mac": "0c:42:a1:00:00:01"}
LAYOUT = NtfLayout.from_json({"null_bytes": 8, "fixed_size": 16, "variable": False, "fields": [
    {"name": "k", "type": "int64", "offset": 8, "size": 8, "null_bit": 0}]})


def spec(implementation: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> NcaSpec:
    def stream(t: str) -> StreamSpec:
        return StreamSpec("json", t) if t == "file" else StreamSpec("ntf", t, LAYOUT)

    return NcaSpec(id="n0", implementation=implementation, plan=LogicalPlan("t", (), {}), ops=(),
                   inputs=tuple(InputPort(stream(t), InputRef("x")) for t in inputs),
                   outputs=tuple(OutputSpec(stream(t)) for t in outputs), output_refs=(), stages=(0,),
                   resources=ResourceRequest())


def context(**settings: str) -> InstanceContext:
    return InstanceContext(deployer=None, work_dir="/nonexistent", cache_dir="/nonexistent", settings=settings)


def test_the_setting_names_ncas_and_their_ports_inline_or_in_a_file(tmp_path):
    text = json.dumps({"software.scan_json": PORT, "software.aggregate": [PORT, {**PORT, "ip": "10.0.0.8", "port": 1}]})
    (tmp_path / "dpdk.json").write_text(text)
    for value in (text, str(tmp_path / "dpdk.json")):
        sel = dpdk_selection(value)
        assert sel["software.scan_json"] == (DpdkPort(PORT["eal"], "10.0.0.7", "0c:42:a1:00:00:01", 0),)
        assert [p.ip for p in sel["software.aggregate"]] == ["10.0.0.7", "10.0.0.8"]
        assert sel["software.aggregate"][1].params() == {
            "udp.dpdk": PORT["eal"], "udp.dpdk.ip": "10.0.0.8", "udp.dpdk.peer_mac": "0c:42:a1:00:00:01",
            "udp.dpdk.port": "1"}
    assert dpdk_selection("") == {}


@pytest.mark.parametrize("value,message", [
    ("{not json", "is not valid JSON"),
    ("/nonexistent/dpdk.json", "neither a JSON object nor a readable file"),
    (json.dumps({"software.scan_json": {**PORT, "ip": "fe80::1"}}), "software.scan_json: ip must be"),
    (json.dumps({"software.scan_json": [PORT, {**PORT, "peer_mac": "nope"}]}), "software.scan_json[1]: peer_mac"),
    (json.dumps({"software.scan_json": {**PORT, "eal": " "}}), "eal (the EAL arguments"),
    (json.dumps({"software.scan_json": {**PORT, "cores": 2}}), "unknown keys cores"),
    (json.dumps({"software.scan_json": []}), "names no DPDK port"),
])
def test_a_bad_setting_is_an_error_that_says_what_is_wrong(value, message):
    with pytest.raises(NcaError) as e:
        dpdk_selection(value)
    assert message in e.value.message and SELECT_ENV in e.value.message


def test_instances_of_a_named_nca_lease_its_ports_one_each(monkeypatch):
    monkeypatch.setenv(SELECT_ENV, json.dumps({"software.aggregate": [PORT, {**PORT, "ip": "10.0.0.8"}]}))
    edges = [UdpEdges(spec("software.aggregate", ("udp",), ("tcp",)), context()) for _ in range(3)]
    assert all(e.dpdk for e in edges)
    edges[0].acquire()
    edges[1].acquire()
    assert {edges[0].input_host("127.0.0.1"), edges[1].input_host("127.0.0.1")} == {"10.0.0.7", "10.0.0.8"}
    with pytest.raises(NcaError, match="all 2 DPDK ports that JUMPGATE_DPDK gives software.aggregate are in use"):
        edges[2].acquire()
    edges[0].release()
    edges[2].acquire()  # the released port is free again
    assert edges[2].params()["udp.dpdk.ip"] == "10.0.0.7"
    for e in edges:
        e.release()
    assert not DpdkLease._held


def test_ncas_not_named_or_without_udp_edges_keep_kernel_sockets(monkeypatch):
    monkeypatch.setenv(SELECT_ENV, json.dumps({"software.scan_json": PORT}))
    assert UdpEdges(spec("software.scan_json", ("file",), ("udp",)), context()).dpdk
    tcp_only = UdpEdges(spec("software.scan_json", ("file",), ("tcp",)), context())
    other = UdpEdges(spec("software.aggregate", ("udp",), ("udp",)), context())
    for e in (tcp_only, other):
        e.acquire()
        assert not e.dpdk and e.params() == {} and e.input_host("127.0.0.1") == "127.0.0.1"


def test_the_idle_timeout_reaches_receivers_only(monkeypatch):
    receiver = spec("software.aggregate", ("udp",), ("tcp",))
    assert UdpEdges(receiver, context()).params() == {}  # the runtime's default
    monkeypatch.setenv(IDLE_ENV, "1500")
    assert UdpEdges(receiver, context()).params() == {"udp.idle_ms": "1500"}
    assert UdpEdges(receiver, context(**{"udp.idle_ms": "0"})).params() == {"udp.idle_ms": "0"}
    assert UdpEdges(spec("software.scan_json", ("file",), ("udp",)), context()).params() == {}
    monkeypatch.setenv(IDLE_ENV, "soon")
    with pytest.raises(NcaError, match="udp.idle_ms must be a number of milliseconds"):
        UdpEdges(receiver, context()).params()


# ------------------------------------------------------------------ version 2 (docs/udp-transport.md)


def test_inputs_announce_version_2_except_under_dpdk_and_senders_send_what_both_take(monkeypatch):
    from jumpgate.nca.interface import Endpoint

    plain = UdpEdges(spec("software.aggregate", ("udp",), ("udp",)), context())
    assert plain.udp_version == 2
    assert plain.sends_version(Endpoint("h", 1, "udp", udp_version=2)) == 2
    assert plain.sends_version(Endpoint("h", 1, "udp")) == 1  # a switch, or a client that did not ask
    monkeypatch.setenv(SELECT_ENV, json.dumps({"software.aggregate": PORT}))
    dpdk = UdpEdges(spec("software.aggregate", ("udp",), ("udp",)), context())
    assert dpdk.udp_version == 1 and dpdk.sends_version(Endpoint("h", 1, "udp", udp_version=2)) == 1


def test_the_relay_setting_is_checked_and_names_itself(monkeypatch):
    from jumpgate.deploy.udp_relay import Faults
    from jumpgate.ncas.software.udp_transport import RELAY_ENV, relay_faults

    assert relay_faults("") is None
    assert relay_faults('{"loss": 0.05, "dup": 0.01, "seed": 3}') == Faults(loss=0.05, dup=0.01, seed=3)
    for bad, message in (("{nope", "Expecting property name"), ('{"loss": 2}', "loss must be a probability"),
                         ('{"drop": 0.1}', "unknown keys drop")):
        with pytest.raises(NcaError) as e:
            relay_faults(bad)
        assert e.value.message.startswith(f"{RELAY_ENV}: ") and message in e.value.message


def test_the_transport_setting_makes_software_ncas_talk_udp_to_each_other(monkeypatch, tmp_path):
    from jumpgate.compiler.compile import compile_plan
    from jumpgate.contract.errors import MappingError
    from jumpgate.dataflow.request import parse_request
    from jumpgate.nca.registry import load_registry
    from jumpgate.ncas.software.udp_transport import TRANSPORT_ENV

    (tmp_path / "t.jsonl").write_text('{"k": 1}\n')
    aggs = [{"name": "n", "fn": "count_star"}]
    plan = parse_request({"operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": [{"name": "k", "type": "int64"}]},
        {"kind": "aggregate", "name": "p", "input": "r", "mode": "partial", "group_by": [{"name": "k", "expr": "k"}],
         "aggregates": aggs},
        {"kind": "aggregate", "name": "f", "input": "p", "mode": "final", "group_by": [{"name": "k"}], "aggregates": aggs},
        {"kind": "send", "name": "out", "input": "f", "transport": "udp", "host": "127.0.0.1", "port": 9,
         "udp_version": 2}]}, tmp_path)
    assert plan.op("out").udp_version == 2

    def between_ncas() -> set[str]:
        return {e.spec.transport for e in compile_plan(plan, load_registry().all(), thread_budget=2).edges
                if not e.to_client}

    assert between_ncas() == {"tcp"}  # the default: TCP where nothing insists
    monkeypatch.setenv(TRANSPORT_ENV, "udp")
    assert between_ncas() == {"udp"}
    monkeypatch.setenv(TRANSPORT_ENV, "sctp")
    with pytest.raises(MappingError, match=f"{TRANSPORT_ENV} must be tcp or udp, not 'sctp'"):
        between_ncas()


@pytest.mark.parametrize("send,message", [
    ({"transport": "tcp", "udp_version": 2}, "udp_version is for transport udp, not tcp"),
    ({"transport": "udp", "udp_version": 3}, "udp_version"),
])
def test_a_sends_udp_version_is_checked(tmp_path, send, message):
    from jumpgate.contract.errors import RequestError
    from jumpgate.dataflow.request import parse_request

    (tmp_path / "t.jsonl").write_text('{"k": 1}\n')
    ops = [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": [{"name": "k", "type": "int64"}]},
           {"kind": "send", "name": "out", "input": "r", "host": "127.0.0.1", "port": 9, **send}]
    with pytest.raises(RequestError) as e:
        parse_request({"operations": ops}, tmp_path)
    assert message in str(e.value) and "operations[1]" in (e.value.path or "")


def test_the_dest_line_asks_for_version_2_where_the_receiver_takes_it(tmp_path, monkeypatch):
    from jumpgate.compiler.compile import compile_plan
    from jumpgate.dataflow.request import parse_request
    from jumpgate.nca.interface import Destination, Endpoint
    from jumpgate.ncas.software.scan_json import JsonScanNca

    (tmp_path / "t.jsonl").write_text('{"k": 1}\n')
    plan = parse_request({"operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": [{"name": "k", "type": "int64"}]},
        {"kind": "send", "name": "out", "input": "r", "transport": "udp", "host": "127.0.0.1", "port": 9}]}, tmp_path)
    pipeline = compile_plan(plan, [JsonScanNca()])
    [scan] = pipeline.ncas

    def dest_lines() -> list[str]:
        ctx = InstanceContext(None, str(tmp_path), str(tmp_path))
        inst = JsonScanNca().instantiate(pipeline.build_spec(scan), ctx)
        inst.udp = UdpEdges(inst.spec, ctx)
        sent: list[str] = []
        inst._send = sent.extend
        inst.configure([[Destination(Endpoint("127.0.0.1", 10, "udp", udp_version=2), 0, 1),
                         Destination(Endpoint("127.0.0.1", 11, "udp", max_tuples=4), 0, 1),  # a P4 switch: v1
                         # the switch model: version 2, its ring's bound on datagrams in flight
                         Destination(Endpoint("127.0.0.1", 12, "udp", max_tuples=4, udp_version=2,
                                              udp_window_datagrams=64), 0, 1)]])
        return [line for line in sent if line.startswith("dest ")]

    assert dest_lines() == ["dest 0 127.0.0.1 10 0 1 udp 0 0 v2", "dest 0 127.0.0.1 11 0 1 udp 0 4",
                            "dest 0 127.0.0.1 12 0 1 udp 0 4 v2 window 64"]
    monkeypatch.setenv(SELECT_ENV, json.dumps({"software.scan_json": PORT}))
    assert dest_lines() == ["dest 0 127.0.0.1 10 0 1 udp 0 0", "dest 0 127.0.0.1 11 0 1 udp 0 4",
                            "dest 0 127.0.0.1 12 0 1 udp 0 4"]  # DPDK: version 1, which has no window


def test_an_endpoints_bound_on_datagrams_in_flight_is_at_least_one():
    from jumpgate.nca.interface import Endpoint

    assert Endpoint("h", 1, "udp", udp_version=2, udp_window_datagrams=1).udp_window_datagrams == 1
    with pytest.raises(ValueError, match="udp_window_datagrams is at least 1"):
        Endpoint("h", 1, "udp", udp_version=2, udp_window_datagrams=0)
