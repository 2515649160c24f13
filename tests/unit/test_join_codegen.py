"""Generated join code: hostile names and literals reach the C source only as byte arrays, the
source compiles warning-free, and the plan of the generated functions (which columns are decoded,
key types) follows the typed trees."""
from __future__ import annotations

import re

import pytest

from jumpgate.ncas.software.codegen import CodegenError
from jumpgate.ncas.software.codegen.golden import join_chain
from jumpgate.ncas.software.codegen.join import generate_join_query, plan_join

from .test_codegen_security import HOSTILE, lit, q


def hostile_join(names):
    probe = {n: "string" for n in names} | {"id": "int64"}
    build = {n + " b": "string" for n in names} | {"bid": "int64"}
    cond = " OR ".join(f"{q(n)} = {lit(names[(k + 1) % len(names)])}" for k, n in enumerate(names))
    cols = [{"name": n + " out", "expr": f"coalesce({q(n + ' b')}, {lit(n)})"} for n in names] + \
        [{"name": "id", "expr": "id"}]
    join = {"build_keys": [q(names[0] + " b"), "bid"], "probe_keys": [q(names[0]), "id"], "type": "left_outer",
            "condition": cond, "columns": cols}
    steps = [("filter", f"{q(names[1] + ' out')} LIKE {lit('%' + names[2][:4] + '%')} OR id > 0")]
    return generate_join_query(*join_chain(probe, build, join, steps))


def test_request_text_never_appears_in_join_source():
    src = hostile_join(HOSTILE)
    benign = hostile_join([f"c{k}" for k in range(len(HOSTILE))])
    for h in HOSTILE:
        assert h not in src
        for piece in re.split(r"\s+", h):
            if len(piece) >= 2 and not piece.isalnum():
                assert src.count(piece) == benign.count(piece), piece
    assert src.isascii() and "??" not in src
    assert all(re.fullmatch(r"\\x[0-9a-f]{2}", m.group(0)) for m in re.finditer(r"\\.{0,3}", src))
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', src):
        body = m.group(1)
        assert re.fullmatch(r"(\\x[0-9a-f]{2})*", body) or body in (
            "jg.h", "jg_join.h", "NTF fields are written in host order", ""), body
    assert "system" not in src and "printf" not in src


def test_hostile_join_compiles_warning_free(tmp_path):
    from .test_codegen_golden import compile_seconds

    assert compile_seconds(hostile_join(HOSTILE), tmp_path, repeat=1) < 2


def test_only_read_columns_are_decoded():
    ops, probe, build, layout = join_chain(
        {"a": "int64", "unused_p": "string", "v": "int64"}, {"k": "int64", "unused_b": "string", "w": "date"},
        {"build_keys": ["k"], "probe_keys": ["a"], "condition": "w > DATE '2000-01-01'",
         "columns": [{"name": "v", "expr": "v"}]})
    src = generate_join_query(ops, probe, build, layout)
    assert "probe_used[3] = { 1, 0, 1 }" in src  # keys and output
    assert "build_used[3] = { 0, 0, 1 }" in src  # the condition (build keys are evaluated at build time)
    assert ".condition_reads_build = 1" in src and ".output_reads_build = 0" in src


def test_key_types_follow_the_binder_casts():
    ops, probe, build, _ = join_chain({"a": "int32", "d": "decimal(10,1)"}, {"b": "int64", "e": "decimal(12,3)"},
                                      {"build_keys": ["b", "e"], "probe_keys": ["a", "d"]})
    assert [str(t) for t in plan_join(ops, probe, build).key_types] == ["int64", "decimal(12,3)"]


def test_a_chain_that_does_not_start_with_a_join_is_refused():
    ops, probe, build, _ = join_chain({"a": "int64"}, {"b": "int64"}, {"build_keys": ["b"], "probe_keys": ["a"]},
                                      [("filter", "a > 1")])
    with pytest.raises(CodegenError, match="starts with a 'join'"):
        plan_join(ops[1:], probe, build)
