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
