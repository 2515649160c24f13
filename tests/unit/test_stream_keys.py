"""Which streams are keyed (docs/contract.md, "Keyed streams between NCAs"), and how a software
NCA is told: a random key per TCP input port whose receiver and senders all speak keyed streams;
plain NTF1 towards clients and to or from any NCA that does not."""
from __future__ import annotations

from dataclasses import replace

from jumpgate.compiler.compile import compile_plan
from jumpgate.nca.interface import Destination, Endpoint, InstanceContext, Verdict
from jumpgate.nca.registry import load_registry
from jumpgate.ncas.software.hash_join import HashJoinNca
from jumpgate.ncas.software.scan_json import JsonScanNca
from jumpgate.runtime.executor import stream_keys

from .fake_ncas import THESIS_NCAS, FakeJoin, FakeJsonScan, FakeShuffle, FakeSoftAgg, running_example
from .test_join_plugin import B, P, join, plan_of, read, send


def no_switch(request):
    return Verdict.no("no switch here") if request.deployment == "switch" else Verdict.yes()


def keyed(cls):
    return type(f"Keyed{cls.__name__}", (cls,), {"keyed_streams": True, "name": cls.name})


def running_example_with(*keyed_classes):
    impls = [keyed(c)() if c in keyed_classes else c() for c in THESIS_NCAS]
    pipeline = compile_plan(running_example(), impls, capacity_check=no_switch)
    assert [n.implementation for n in pipeline.ncas] == [
        "fake.scan_json", "fake.scan_json", "fake.join", "fake.soft_agg", "fake.shuffle"]
    return pipeline


def test_every_edge_between_keyed_ncas_gets_its_own_key():
    pipeline = running_example_with(FakeJsonScan, FakeJoin, FakeSoftAgg, FakeShuffle)
    keys = stream_keys(pipeline)
    # join build and probe, the aggregation's input, the shuffle's input; none for the clients
    assert set(keys) == {("nca2", 0), ("nca2", 1), ("nca3", 0), ("nca4", 0)}
    assert len(set(keys.values())) == 4 and all(0 < k < 2**64 for k in keys.values())
    assert [e.keyed for e in pipeline.edges] == [not e.to_client for e in pipeline.edges]
    assert all("keyed" in e for e in pipeline.to_json()["edges"])
    again = stream_keys(pipeline)
    assert set(again.values()).isdisjoint(keys.values())  # fresh per job


def test_an_unkeyed_ncas_edges_stay_plain_ntf1():
    pipeline = running_example_with(FakeJsonScan, FakeSoftAgg, FakeShuffle)  # the join is not
    keys = stream_keys(pipeline)
    # the join neither receives keyed streams nor sends them to the aggregation
    assert set(keys) == {("nca4", 0)}
    assert stream_keys(running_example_with()) == {}


def test_the_software_ncas_speak_keyed_streams_and_the_switch_does_not():
    reg = load_registry()
    by_name = {impl.name: impl.keyed_streams for impl in reg.all()}
    assert all(v for name, v in by_name.items() if name.startswith("software."))
    assert not by_name["switch.aggregate"] and not by_name["switch.model"]


def test_a_software_nca_is_told_its_keys(tmp_path):
    """The receiver gets `key PORT HEX` next to `expect`, the sender `dest ... key HEX`."""
    ops = [read("b", B), read("p", P), join("j", "b", "p"), send("out", "j")]
    pipeline = compile_plan(plan_of(tmp_path, ops), [JsonScanNca(), HashJoinNca()])
    keys = stream_keys(pipeline)
    [jn] = [n for n in pipeline.ncas if n.implementation == "software.hash_join"]
    assert set(keys) == {(jn.id, 0), (jn.id, 1)}
    spec = pipeline.build_spec(jn)
    spec = replace(spec, inputs=tuple(replace(p, key=keys[(jn.id, i)]) for i, p in enumerate(spec.inputs)))
    inst = HashJoinNca().instantiate(spec, InstanceContext(None, str(tmp_path), str(tmp_path)))
    sent: list[str] = []
    inst._send = sent.extend
    inst.configure([[Destination(Endpoint("127.0.0.1", 9), 0, 1),
                     Destination(Endpoint("127.0.0.1", 10), 0, 1, key=0xABC)]])
    assert f"key 0 {keys[(jn.id, 0)]:016x}" in sent and f"key 1 {keys[(jn.id, 1)]:016x}" in sent
    assert "dest 0 127.0.0.1 9 0 1" in sent and "dest 0 127.0.0.1 10 0 1 key 0000000000000abc" in sent
