"""Placement (jumpgate/compiler/placement.py): every instance of the staged pipeline gets a host
the deployer offers and can run it; the NCAs of one stage spread over hosts before any host is
oversubscribed; an instance the network hosts (the switch) is placed on no host; a process with
no host to run on is a clear mapping error. An NCA fed by others (a join) goes, among the hosts
with its cores free, where most of the bytes it receives are produced, else to the least
oversubscribed host, and says why. And the service places every job on its deployer's hosts,
which the job's answer shows."""
from __future__ import annotations

from dataclasses import replace

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.compiler.placement import place
from jumpgate.contract.errors import MappingError
from jumpgate.dataflow.plan import Read
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.deployment import Host
from jumpgate.nca.registry import load_registry
from jumpgate.runtime.service import JumpgateService, Settings, cores_by_host, stage_cores

from .fake_ncas import THESIS_NCAS, fakes, running_example
from .test_scale_out import LI, ORDERS, NodesStorage, read, send


def hosts(*cores: int) -> list[Host]:
    return [Host(f"h{i}", f"10.0.0.{i + 1}", c) for i, c in enumerate(cores)]


def test_one_host_takes_every_process_and_the_switch_none():
    p = compile_plan(running_example(), fakes(*THESIS_NCAS), hosts=hosts(8))
    placed = {n.id: n.host for n in p.ncas}
    switch = [n.id for n in p.ncas if n.resources.deployment == "switch"]
    assert switch and all(placed[s] is None for s in switch)
    assert all(h == "h0" for nid, h in placed.items() if nid not in switch)
    assert all(n["host"] == placed[n["id"]] for n in p.to_json()["ncas"])


def test_the_ncas_of_a_stage_spread_over_hosts():
    p = compile_plan(running_example(), fakes(*THESIS_NCAS))
    placed = place(p, hosts(1, 1, 1, 1))
    for stage in placed.stages:
        local = [placed.node(nid) for nid in stage if placed.node(nid).resources.deployment == "local"]
        on = [n.host for n in local]
        assert len(set(on)) == len(on), f"stage {stage}: {on}"  # one core each, four hosts: no sharing


def test_a_busier_host_gets_fewer_instances():
    p = compile_plan(running_example(), fakes(*THESIS_NCAS))
    placed = place(p, hosts(1, 16))
    on = [n.host for n in placed.ncas if n.host is not None]
    assert on.count("h1") > on.count("h0")


def test_no_host_for_a_process_is_a_mapping_error():
    p = compile_plan(running_example(), fakes(*THESIS_NCAS))
    with pytest.raises(MappingError, match="no host can run nca0"):
        place(p, [Host("sw", "10.0.0.9", 4, frozenset({"switch"}))])


def test_cores_are_reserved_per_host_of_the_placed_instances():
    p = place(compile_plan(running_example(), fakes(*THESIS_NCAS)), hosts(1, 1, 1, 1))
    demand = cores_by_host(p, "h0")
    assert set(demand) == {n.host or "h0" for n in p.ncas}  # hosts with instances only
    # each stage's cores are split over the hosts, none lost or counted twice
    whole = stage_cores(p)
    assert [sum(demand[h][s] for h in demand) for s in range(len(whole))] == whole


def test_the_service_places_jobs_on_its_deployers_hosts(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"a": 1}\n')
    svc = JumpgateService(Settings(data_root=tmp_path, cache_dir=tmp_path / "cache"))
    try:
        job = svc.submit({"name": "q", "operations": [
            {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": [{"name": "a", "type": "int64"}]},
            {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": 9}]})
        assert [h.name for h in svc.deployer.hosts()] == ["local"]
        assert {n["host"] for n in job.pipeline.to_json()["ncas"]} == {"local"}
    finally:
        svc.shutdown()


def _with_holders(holders_first, holders_others):
    """The running example with its first read's files held by `holders_first`, the others' by
    `holders_others` (as a storage spanning nodes would report them)."""
    plan = running_example()
    first = next(op for op in plan.ops if isinstance(op, Read))
    ops = tuple(replace(op, sizes=tuple(0 for _ in op.paths),
                        holders=tuple((holders_first if op is first else holders_others) for _ in op.paths))
                if isinstance(op, Read) else op for op in plan.ops)
    return replace(plan, ops=ops), first.name


def test_a_scan_goes_to_a_node_holding_its_files():
    plan, first = _with_holders(("h1",), ("h0", "h1"))
    p = compile_plan(plan, fakes(*THESIS_NCAS), hosts=hosts(8, 8))
    scans = [n for n in p.ncas if any(port.files for port in n.inputs)]
    assert scans
    for n in scans:
        read = [plan.op(port.source.op) for port in n.inputs if port.files][0]
        assert n.host == "h1" if read.name == first else n.host in ("h0", "h1")


def test_a_file_on_no_node_that_can_scan_it_is_a_clear_mapping_error():
    plan, _ = _with_holders(("h7",), ())
    with pytest.raises(MappingError, match="no node holds all the files of read 'read_sales' "
                                           r"\(/data/read_sales.json on h7\): /data/read_sales.json is on no "
                                           r"node that can run fake.scan_json \(h0, h1\)"):
        compile_plan(plan, fakes(*THESIS_NCAS), hosts=hosts(8, 8))


# ------------------------------------------------------------------ bytes: joins go to their data


def _join_plan(sizes: dict[str, tuple[int, tuple[str, ...]]], build: str = "o"):
    """A join of o and li with the real registry's NCAs, files as given: o builds, unless `build`
    is li."""
    keys = {"o": ["ok"], "li": ["k"]}
    probe = "li" if build == "o" else "o"
    return parse_request({"operations": [
        read("o", "o*.jsonl", ORDERS), read("li", "li*.jsonl", LI),
        {"kind": "join", "name": "j", "build": build, "probe": probe, "build_keys": keys[build],
         "probe_keys": keys[probe]},
        send("j")]}, NodesStorage(sizes))


def _join_host(plan, hosts_: list[Host]):
    p = compile_plan(plan, load_registry().all(), op_paths=plan.op_paths, hosts=hosts_)
    [join] = [n for n in p.ncas if n.implementation == "software.hash_join"]
    return join, p


def _named(*cores: tuple[str, int]) -> list[Host]:
    return [Host(n, f"10.0.0.{i + 1}", c) for i, (n, c) in enumerate(cores)]


def test_a_join_goes_where_most_of_the_bytes_it_receives_are_produced():
    big_build = _join_plan({"o.jsonl": (10 << 20, ("b",)), "li.jsonl": (1 << 20, ("a",))})
    join, _ = _join_host(big_build, _named(("a", 8), ("b", 8)))
    assert join.host == "b"
    assert join.placement.startswith("b: 10.0 MB of the ~11.0 MB it receives are produced on b")
    big_probe = _join_plan({"o.jsonl": (1 << 20, ("b",)), "li.jsonl": (10 << 20, ("a",))})
    assert _join_host(big_probe, _named(("a", 8), ("b", 8)))[0].host == "a"


def test_a_join_fed_by_a_split_read_counts_every_part():
    """li is split: 3 MB scanned on a, 1 MB on b where o's 1 MB is too: a produces more. (li builds:
    a join probing a split read runs once per scan, on its node, compiler/scale_out.py.)"""
    plan = _join_plan({"o.jsonl": (1 << 20, ("b",)), "li0.jsonl": (3 << 20, ("a",)), "li1.jsonl": (1 << 20, ("b",))},
                      build="li")
    join, p = _join_host(plan, _named(("a", 8), ("b", 8)))
    assert [n.host for n in p.ncas if n.ops == ("li",)] == ["a", "b"]
    assert join.host == "a" and "3.0 MB of the ~5.0 MB" in join.placement
    assert "placement" in next(n for n in p.to_json()["ncas"] if n["id"] == join.id)


def test_free_cores_come_before_bytes_and_then_the_least_oversubscribed_host():
    # one core each: a scans li in the probe stage, b scans o in the build stage
    plan = _join_plan({"o.jsonl": (10 << 20, ("b",)), "li.jsonl": (1 << 20, ("a",))})
    join, _ = _join_host(plan, _named(("a", 1), ("b", 1), ("c", 1)))
    assert join.host == "c"  # the only node with a core free in both stages, though no byte is there
    join, _ = _join_host(plan, _named(("a", 1), ("b", 1)))
    assert join.host == "b"  # both as oversubscribed; b produces most of its input
    assert "no node has 1 core(s) free in stage(s) 0, 1, b is the least oversubscribed" in join.placement
    flipped = _join_plan({"o.jsonl": (1 << 20, ("b",)), "li.jsonl": (10 << 20, ("a",))})
    assert _join_host(flipped, _named(("a", 1), ("b", 1)))[0].host == "a"


def test_one_host_leaves_no_placement_note():
    plan = _join_plan({"o.jsonl": (10 << 20, ()), "li.jsonl": (1 << 20, ())})
    _, p = _join_host(plan, _named(("local", 8)))
    assert {n.host for n in p.ncas} == {"local"} and all(not n.placement for n in p.ncas)
    assert all("placement" not in n and "files" not in n for n in p.to_json()["ncas"])
