"""The hash-join plugin's operator interface (software.hash_join) and how the compiler places it:
fusion, input ports (0 = build, 1 = probe), output, stages."""
from __future__ import annotations

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import Field, Schema, parse_type
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.interface import FILE, NTF, InstanceContext, StreamSpec
from jumpgate.ncas.software import hash_join
from jumpgate.ncas.software.codegen import CodegenError
from jumpgate.ncas.software.hash_join import HashJoinInstance, HashJoinNca
from jumpgate.ncas.software.scan_json import JsonScanNca

B = [{"name": "bk", "type": "int64"}, {"name": "bs", "type": "string"}]
P = [{"name": "pk", "type": "int32"}, {"name": "pv", "type": "decimal(10,2)"}]
C = [{"name": "ck", "type": "int64"}, {"name": "cv", "type": "date"}]


def read(name: str, schema: list[dict]) -> dict:
    return {"kind": "read", "name": name, "path": f"{name}.jsonl", "format": "json", "schema": schema}


def join(name: str, build: str, probe: str, bk: str = "bk", pk: str = "pk", **extra) -> dict:
    return {"kind": "join", "name": name, "build": build, "probe": probe, "build_keys": [bk], "probe_keys": [pk],
            **extra}


def send(name: str, input: str, transport: str = "tcp") -> dict:
    return {"kind": "send", "name": name, "input": input, "transport": transport, "host": "127.0.0.1", "port": 9}


def plan_of(tmp_path, ops: list[dict]):
    for op in ops:
        if op["kind"] == "read":
            (tmp_path / op["path"]).write_text("{}\n")
    return parse_request({"name": "t", "operations": ops}, tmp_path)


@pytest.fixture
def impl():
    return HashJoinNca()


def ntf(plan, ref: str, transport: str = "tcp") -> StreamSpec:
    return StreamSpec(NTF, transport, generate_ntf(plan.schemas[ref]))


def basic(tmp_path, *tail: dict, **join_fields):
    ops = [read("b", B), read("p", P), join("j", "b", "p", **join_fields), *tail]
    if not any(o["kind"] == "send" for o in tail):
        ops.append(send("out", ops[-1]["name"]))
    return plan_of(tmp_path, ops)


# ------------------------------------------------------------------ match_operations


def test_takes_only_joins(tmp_path, impl):
    plan = basic(tmp_path)
    v = impl.match_operations(plan, "b")
    assert not v and "takes only 'join'" in v.reason
    v = impl.match_operations(plan, "")
    assert not v and "converter" in v.reason


def test_takes_a_join_alone(tmp_path, impl):
    v = impl.match_operations(basic(tmp_path), "j")
    assert v and v.value == ("j",) and "inner hash join on 1 key" in v.reason


def test_fuses_following_filters_and_projects(tmp_path, impl):
    plan = basic(tmp_path,
                 {"kind": "filter", "name": "f", "input": "j", "condition": "bs <> 'x'"},
                 {"kind": "project", "name": "q", "input": "f", "columns": [{"name": "v", "expr": "pv * 2"}]},
                 {"kind": "filter", "name": "g", "input": "q", "condition": "v > 1"},
                 type="left_outer", condition="pv > 0 OR bs IS NULL")
    v = impl.match_operations(plan, "j")
    assert v.value == ("j", "f", "q", "g")
    assert v.reason == "left_outer hash join on 1 key(s); fuses f, q, g"


def test_does_not_fuse_past_a_fork_or_an_aggregate(tmp_path, impl):
    plan = basic(tmp_path, {"kind": "filter", "name": "f", "input": "j", "condition": "pv > 0"},
                 send("o1", "j"), send("o2", "f"))
    assert impl.match_operations(plan, "j").value == ("j",)
    (tmp_path / "agg").mkdir()
    plan = basic(tmp_path / "agg", {"kind": "aggregate", "name": "a", "input": "j", "group_by": [],
                                   "aggregates": [{"name": "n", "fn": "count_star"}]})
    assert impl.match_operations(plan, "j").value == ("j",)


def test_a_chain_is_generated_once_for_matching_and_compiling(tmp_path, impl, monkeypatch):
    """match_operations generates the chain's C to learn that it can; compile asks for the same
    chain of the same plan in the same layout and gets that C without generating it again. Another
    plan, or another layout, is generated anew."""
    real, calls = hash_join.generate_join_query, []
    monkeypatch.setattr(hash_join, "generate_join_query", lambda *a: calls.append(a) or real(*a))
    plan = basic(tmp_path, {"kind": "filter", "name": "f", "input": "j", "condition": "pv > 0"})
    ops = impl.match_operations(plan, "j").value
    layout = generate_ntf(plan.schemas[ops[-1]])
    source = HashJoinNca._generate(plan, ops, layout)
    assert len(calls) == 1 and "JG_JOIN" in source
    renamed = generate_ntf(Schema(tuple(Field(f"y{i}", f.type) for i, f in enumerate(layout.fields))))
    HashJoinNca._generate(plan, ops, renamed)
    (tmp_path / "again").mkdir()
    other = basic(tmp_path / "again", {"kind": "filter", "name": "f", "input": "j", "condition": "pv > 0"})
    assert HashJoinNca._generate(other, ops, layout) == source
    assert len(calls) == 3


def test_fuses_fewer_operations_when_code_generation_fails(tmp_path, impl, monkeypatch):
    real = hash_join.generate_join_query

    def picky(ops, *args):
        if len(ops) > 1:
            raise CodegenError("no C for that filter")
        return real(ops, *args)

    monkeypatch.setattr(hash_join, "generate_join_query", picky)
    plan = basic(tmp_path, {"kind": "filter", "name": "f", "input": "j", "condition": "pv > 0"})
    assert impl.match_operations(plan, "j").value == ("j",)
    monkeypatch.setattr(hash_join, "generate_join_query", lambda *a: (_ for _ in ()).throw(CodegenError("nope")))
    (tmp_path / "again").mkdir()  # another plan: a plan's generated C is remembered (HashJoinNca._generate)
    plan = basic(tmp_path / "again", {"kind": "filter", "name": "f", "input": "j", "condition": "pv > 0"})
    v = impl.match_operations(plan, "j")
    assert not v and v.reason == "cannot generate C for it: nope"


# ------------------------------------------------------------------ match_input / match_output


def test_accepts_contract_ntf_over_tcp_build_then_probe(tmp_path, impl):
    plan = basic(tmp_path)
    assert impl.match_input(plan, ("j",), (ntf(plan, "b"), ntf(plan, "p")))


def test_refuses_other_inputs(tmp_path, impl):
    plan = basic(tmp_path)
    good = (ntf(plan, "b"), ntf(plan, "p"))
    v = impl.match_input(plan, ("j",), (StreamSpec("json", FILE), good[1]))
    assert not v and v.reason == "reads NTF on its build side, got json over file"
    v = impl.match_input(plan, ("j",), (good[0], ntf(plan, "p", "udp")))
    assert not v and "probe side is ntf over udp" in v.reason
    v = impl.match_input(plan, ("j",), (good[1], good[0]))  # swapped: layouts do not fit the schemas
    assert not v and "layout" in v.reason
    v = impl.match_input(plan, ("j",), good[:1])
    assert not v and "a build and a probe input" in v.reason


def test_accepts_a_layout_with_other_field_names(tmp_path, impl):
    plan = basic(tmp_path)
    renamed = generate_ntf(Schema(tuple(Field(f"x{i}", parse_type(c["type"])) for i, c in enumerate(B))))
    assert impl.match_input(plan, ("j",), (StreamSpec(NTF, "tcp", renamed), ntf(plan, "p")))


def test_output_is_the_contract_ntf_of_the_last_operation(tmp_path, impl):
    plan = basic(tmp_path, {"kind": "project", "name": "q", "input": "j",
                            "columns": [{"name": "s", "expr": "bs"}, {"name": "k", "expr": "pk"}]})
    ops = ("j", "q")
    ins = (ntf(plan, "b"), ntf(plan, "p"))
    [out] = impl.match_output(plan, ops, ins, (None,)).value
    assert out.spec == StreamSpec(NTF, "tcp", generate_ntf(plan.schemas["q"]))
    assert out.streams is None  # one per thread, chosen by the control plane
    assert impl.match_output(plan, ops, ins, ("tcp",))
    v = impl.match_output(plan, ops, ins, ("udp",))
    assert not v and "tcp only" in v.reason
    res = impl.resources(plan, ops)
    assert res.cores == 1 and res.max_cores > 1


# ------------------------------------------------------------------ placement by the compiler


def compile_ops(tmp_path, ops, threads: int = 1):
    return compile_plan(plan_of(tmp_path, ops), [JsonScanNca(), HashJoinNca()], thread_budget=threads)


def test_compiler_places_scans_and_a_two_stage_join(tmp_path):
    ops = [read("b", B), {"kind": "filter", "name": "bf", "input": "b", "condition": "bs IS NOT NULL"},
           read("p", P), {"kind": "filter", "name": "pf", "input": "p", "condition": "pv > 1"},
           join("j", "bf", "pf", condition="bs <> 'x'"),
           {"kind": "project", "name": "q", "input": "j", "columns": [{"name": "k", "expr": "pk"}]},
           send("out", "q")]
    p = compile_ops(tmp_path, ops)
    got = {n.id: (n.implementation, n.ops, n.stages) for n in p.ncas}
    joins = [n for n in p.ncas if n.implementation == "software.hash_join"]
    assert len(p.ncas) == 3 and len(joins) == 1
    jn = joins[0]
    assert (jn.ops, jn.stages) == (("j", "q"), (0, 1)), got
    scans = {n.ops[0]: n for n in p.ncas if n.implementation == "software.scan_json"}
    assert scans["b"].ops == ("b", "bf") and scans["b"].stages == (0,)
    assert scans["p"].ops == ("p", "pf") and scans["p"].stages == (1,)
    edges = {(e.producer, e.consumer, e.consumer_port) for e in p.edges if not e.to_client}
    assert edges == {(scans["b"].id, jn.id, 0), (scans["p"].id, jn.id, 1)}
    assert [s.source.op for s in jn.inputs] == ["bf", "pf"]
    assert p.outputs["out"].layout == generate_ntf(p.plan.schemas["q"])
    assert p.decisions["q"].implementation == "software.hash_join"


def test_chained_joins_take_three_stages(tmp_path):
    ops = [read("b", B), read("p", P), join("j1", "b", "p"), read("c", C),
           join("j2", "j1", "c", bk="pk", pk="ck", columns=[{"name": "cv", "expr": "cv"}, {"name": "bs", "expr": "bs"}]),
           send("out", "j2")]
    p = compile_ops(tmp_path, ops)
    by_op = {n.ops[0]: n for n in p.ncas}
    assert by_op["j1"].stages == (0, 1) and by_op["j2"].stages == (1, 2)
    assert by_op["b"].stages == (0,) and by_op["p"].stages == (1,) and by_op["c"].stages == (2,)
    [e] = [e for e in p.edges if e.producer == by_op["j1"].id]
    assert (e.consumer, e.consumer_port) == (by_op["j2"].id, 0)  # the first join feeds the build side


def test_threads_scale_output_streams(tmp_path):
    ops = [read("b", B), read("p", P), join("j", "b", "p"), send("out", "j")]
    p = compile_ops(tmp_path, ops, threads=4)
    [jn] = [n for n in p.ncas if n.implementation == "software.hash_join"]
    assert jn.resources.cores >= 1
    assert p.outputs["out"].expected_streams == jn.resources.cores


def test_instance_generates_the_query_of_its_operations(tmp_path):
    ops = [read("b", B), read("p", P), join("j", "b", "p", type="left_anti"),
           {"kind": "filter", "name": "f", "input": "j", "condition": "pv > 1"}, send("out", "f")]
    p = compile_ops(tmp_path, ops)
    [jn] = [n for n in p.ncas if n.implementation == "software.hash_join"]
    inst = HashJoinNca().instantiate(p.build_spec(jn), InstanceContext(None, str(tmp_path), str(tmp_path)))
    assert isinstance(inst, HashJoinInstance) and inst.driver == "join"
    src = inst.generate_source()
    assert ".type = JG_JOIN_LEFT_ANTI" in src and "fused filter 1 of 1" in src
