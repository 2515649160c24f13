"""Where the software NCAs do not take wide decimals (more than 18 digits) yet, mapping refuses
with a reason naming the operation: join keys (the join's packed keys hold 8 bytes per key) and
shuffle keys (jg_hash v1 defines no hash for 128-bit values), and the switch aggregator (64-bit
keys and sums). Narrow decimal keys are taken as before."""
from __future__ import annotations

from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.hash_join import HashJoinNca
from jumpgate.ncas.software.scan_json import JsonScanNca
from jumpgate.ncas.software.shuffle import ShuffleNca
from jumpgate.ncas.switch.query import operation_reason

SCHEMA = [{"name": "k", "type": "int64"}, {"name": "w", "type": "decimal(25,2)"}, {"name": "d", "type": "decimal(12,2)"}]


def plan_of(tmp_path, ops):
    for op in ops:
        if op["kind"] == "read":
            (tmp_path / op["path"]).write_text("{}\n")
    return parse_request({"name": "t", "operations": ops}, tmp_path)


def read(name, prefix=""):
    schema = [{**c, "name": prefix + c["name"]} for c in SCHEMA]
    return {"kind": "read", "name": name, "path": f"{name}.jsonl", "format": "json", "schema": schema}


def send(name, inp):
    return {"kind": "send", "name": name, "input": inp, "transport": "tcp", "host": "127.0.0.1", "port": 9}


def join_plan(tmp_path, key):
    return plan_of(tmp_path, [read("b", "b_"), read("p", "p_"),
                              {"kind": "join", "name": "j", "build": "b", "probe": "p", "build_keys": ["b_" + key],
                               "probe_keys": ["p_" + key]}, send("o", "j")])


def test_hash_join_refuses_a_wide_key(tmp_path):
    v = HashJoinNca().match_operations(join_plan(tmp_path, "w"), "j")
    assert not v and "wide decimal" in v.reason and "decimal(25,2)" in v.reason, v.reason
    assert HashJoinNca().match_operations(join_plan(tmp_path, "d"), "j")  # narrow: as before


def shuffle_plan(tmp_path, key):
    return plan_of(tmp_path, [read("r"), {"kind": "shuffle", "name": "s", "input": "r", "keys": [key],
                                          "partitions": 2}, send("o0", "s[0]"), send("o1", "s[1]")])


def test_shuffle_by_a_wide_key_is_refused_and_not_fused(tmp_path):
    plan = shuffle_plan(tmp_path, "w")
    v = ShuffleNca().match_operations(plan, "s")
    assert not v and "shuffle 's'" in v.reason and "wide decimal" in v.reason, v.reason
    assert JsonScanNca().match_operations(plan, "r").value == ("r",)
    narrow = shuffle_plan(tmp_path, "d")
    assert ShuffleNca().match_operations(narrow, "s")
    assert JsonScanNca().match_operations(narrow, "r").value == ("r", "s")


def test_switch_refuses_wide_keys_and_sums(tmp_path):
    def reason(key, summed):
        plan = plan_of(tmp_path, [read("r"), {"kind": "aggregate", "name": "a", "input": "r", "mode": "partial",
                                              "group_by": [{"name": "g", "expr": key}],
                                              "aggregates": [{"name": "s", "fn": "sum", "expr": summed}]},
                                  send("o", "a")])
        return operation_reason(plan, plan.op("a"))

    assert "decimal(25,2)" in reason("w", "d")
    assert "decimal(25,2)" in reason("k", "w")
    assert reason("d", "d") is None
