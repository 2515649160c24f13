"""The query file of a hash-join NCA: `join`, then any chain of `filter` and `project` fused after
it (thesis Table 3.4 "join-[project]"). The driver is ncas/runtime/join.c; the interface is
ncas/runtime/jg_join.h.

Generated here, from the typed trees only:
- `build_keys` / `probe_keys`: the key expressions over a row of their side, as `jg_val`s of the
  key types (the binder cast both sides to identical types), and their jg_hash v1; a NULL key
  answers JG_KEY_NULL (it matches nothing);
- `keys_equal`: exact equality of two key tuples, consistent with the hash;
- `join_condition`: the optional extra condition over the joined row (probe values, then build);
- `query_row` (JG_QUERY.row): the join's output columns, then the fused filters and projections,
  folded onto the joined row (chain.py), then one NTF tuple;
- `build_batch` / `probe_batch`: a batch of one side's NTF tuples read by that side's layout (typed
  loads at the fields' offsets, only the columns some function reads; a build tuple's strings are
  all checked, as it is stored whole), then the key function over each row;
- `build_decode`: the build columns the condition or the output reads, from a stored build tuple;
- `probe_emit`: the probe's compare-and-emit stage for one batch, written for the join type, with
  key equality, `build_decode`, the condition and `query_row` inlined.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....contract.ntf import NtfLayout
from ....contract.types import DataType, Kind, Schema
from ....dataflow.expr import Column, Expr, walk
from ....dataflow.plan import Join, JoinType, Operation
from .chain import ChainFold, emit_filters, emit_outputs
from .csyntax import (
    CodegenError,
    CValue,
    FunctionBody,
    LiteralPool,
    c_bytes,
    is_true,
    jg_type,
    row_member,
    same_representation,
)
from .expr import ExprCompiler, count_subtrees
from .ntf_read import read_plan
from .templates import render_query

JOIN_TYPE_C = {JoinType.INNER: "JG_JOIN_INNER", JoinType.LEFT_SEMI: "JG_JOIN_LEFT_SEMI",
               JoinType.LEFT_ANTI: "JG_JOIN_LEFT_ANTI", JoinType.LEFT_OUTER: "JG_JOIN_LEFT_OUTER",
               JoinType.RIGHT_OUTER: "JG_JOIN_RIGHT_OUTER"}


@dataclass(frozen=True)
class JoinPlan:
    """A join chain reduced to what the generated functions evaluate. Filters and outputs are over
    the joined row: the probe's columns (0 .. nprobe-1), then the build's."""

    join: Join
    probe_schema: Schema
    build_schema: Schema
    key_types: tuple[DataType, ...]
    filters: tuple[tuple[str, Expr], ...]  # (where, condition)
    outputs: tuple[tuple[str, Expr], ...]  # (where, value)

    @property
    def nprobe(self) -> int:
        return len(self.probe_schema)


def _key_types(join: Join) -> tuple[DataType, ...]:
    if not join.build_keys or len(join.build_keys) != len(join.probe_keys):
        raise CodegenError(f"join '{join.name}' needs equally many build and probe keys (at least one)")
    types = []
    for j, (b, p) in enumerate(zip(join.build_keys, join.probe_keys, strict=True)):
        if b.type is None or p.type is None:
            raise CodegenError(f"join key {j} is not bound")
        if b.type != p.type:
            raise CodegenError(f"join key {j} has type {p.type} on the probe side and {b.type} on the "
                               "build side (the binder casts both to one type)")
        types.append(b.type)
    return tuple(types)


def join_output_columns(join: Join, probe: Schema, build: Schema) -> tuple[list[str], list[Expr]]:
    """The join operation's own output (names, expressions over the joined row)."""
    if join.columns is not None:
        return [c.name for c in join.columns], [c.expr for c in join.columns]
    fields = list(probe.fields)
    if join.type not in (JoinType.LEFT_SEMI, JoinType.LEFT_ANTI):
        fields += list(build.fields)
    return [f.name for f in fields], [Column(f.name, i, f.type) for i, f in enumerate(fields)]


def plan_join(ops: Sequence[Operation], probe_schema: Schema, build_schema: Schema) -> JoinPlan:
    """Check the chain and bind every filter and output to the joined row."""
    if not ops or not isinstance(ops[0], Join):
        raise CodegenError("a join query starts with a 'join' operation")
    join = ops[0]
    names, columns = join_output_columns(join, probe_schema, build_schema)
    chain = ChainFold(names, columns, join.name).fold(ops[1:], "a join query fuses filter and project operations")
    return JoinPlan(join, probe_schema, build_schema, _key_types(join), tuple(chain.filters), chain.outputs())


class JoinedRowEnv:
    """Column k of the joined row (or of one side's row, for the key functions) is `row[k]`."""

    def __init__(self, types: Sequence[DataType], what: str) -> None:
        self.types = list(types)
        self.what = what

    def column(self, index: int, expected: DataType) -> CValue:
        if not 0 <= index < len(self.types):
            raise CodegenError(f"column #{index} is outside the {self.what} ({len(self.types)} columns)")
        t = self.types[index]
        if not same_representation(t, expected):
            raise CodegenError(f"column #{index} of the {self.what} is {t}, referenced as {expected}")
        return CValue(f"row[{index}].v.{row_member(t)}", f"row[{index}].null", t)


def _reads_build(exprs: Sequence[Expr], nprobe: int) -> bool:
    return any(isinstance(n, Column) and n.index >= nprobe for e in exprs for n in walk(e))


def _used(exprs: Sequence[Expr], first: int, count: int) -> list[int]:
    """1 for each of the `count` columns from `first` on that the expressions read, else 0."""
    read = {n.index for e in exprs for n in walk(e) if isinstance(n, Column)}
    return [int(first + i in read) for i in range(count)]


def _value_hash(t: DataType, v: str) -> str:
    """C expression of jg_hash v1's value hash of a non-NULL key `v` (a jg_val)."""
    if t.is_wide_decimal:  # the packed keys (jg_join.h) hold 8 bytes per key
        raise CodegenError(f"a join key of type {t} (a wide decimal, more than 18 digits) is not taken yet")
    if t.kind is Kind.FLOAT64:
        return f"jg_hash_float({v}.v.f)"
    if t.kind is Kind.STRING:
        return f"jg_hash_bytes({v}.v.s.p, {v}.v.s.n)"
    return f"jg_hash_int({v}.v.i)"  # boolean, int32, int64, date, decimal (unscaled at the key scale)


def _equal(t: DataType, j: int) -> str:
    """C condition: key j of jg_vals `a` equals key j of the packed keys `b` (jg_join.h)."""
    if t.kind is Kind.FLOAT64:
        return f"jg_f64_eq(a[{j}].v.f, jg_packed_f64(b, {8 * j}))"  # -0.0 = 0.0 and NaN = NaN, as the hash
    if t.kind is Kind.STRING:
        return f"jg_str_eq(a[{j}].v.s, jg_packed_str(b, {8 * j}))"
    return f"a[{j}].v.i == jg_packed_i64(b, {8 * j})"


def _key_function(pool: LiteralPool, keys: Sequence[Expr], key_types: Sequence[DataType],
                  side_types: Sequence[DataType], side: str) -> str:
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, JoinedRowEnv(side_types, f"{side} row"), shared=count_subtrees(keys))
    for j, (e, t) in enumerate(zip(keys, key_types, strict=True)):
        comp.where = f"{side}_keys[{j}]"
        v = comp.coerce(comp.compile(e), t)
        body.comment(f"key {j}: {t}")
        if v.always_null:
            body.line("return JG_KEY_NULL;")
            return body.text()
        if not v.never_null:
            body.line(f"if ({v.null}) return JG_KEY_NULL;")
        body.line(f"keys[{j}].null = 0;")
        body.line(f"keys[{j}].v.{row_member(t)} = {v.value};")
    body.comment("jg_hash v1 of the key values (docs/hashing.md)")
    body.line("uint64_t h = JG_HASH_SEED;")
    for j, t in enumerate(key_types):
        body.line(f"h = jg_hash_combine(h, {_value_hash(t, f'keys[{j}]')});")
    body.line("*hash = h;")
    body.line("return JG_ROW_OK;")
    return body.text()


def _condition_function(pool: LiteralPool, cond: Expr, row_types: Sequence[DataType], name: str) -> str:
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, JoinedRowEnv(row_types, "joined row"), shared=count_subtrees([cond]))
    comp.where = f"the condition of join '{name}'"
    v = comp.compile(cond)
    if v.type.kind is not Kind.BOOLEAN:
        raise CodegenError("a join condition must be boolean")
    body.line(f"return {body.cond(is_true(v))} ? 1 : 0;")
    return body.text()


def _output_function(pool: LiteralPool, plan: JoinPlan, row_types: Sequence[DataType], layout: NtfLayout) -> str:
    exprs = [e for _, e in plan.filters] + [e for _, e in plan.outputs]
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, JoinedRowEnv(row_types, "joined row"), shared=count_subtrees(exprs))
    emit_filters(body, comp, plan.filters, "fused filter {i} of {n}")
    emit_outputs(body, comp, plan.outputs, layout)
    return body.text()


def _column_table(schema: Schema, first_row_index: int) -> list[dict]:
    """A side's columns for the driver, which decodes NTF by position: types only, no names (the
    request's names would make the source differ between requests of one shape)."""
    rows = []
    for i, f in enumerate(schema.fields):
        rows.append({"name": c_bytes(b""), "name_len": 0, "jg_type": jg_type(f.type),
                     "precision": f.type.precision, "scale": f.type.scale, "row_index": first_row_index + i,
                     "type": str(f.type)})
    return rows


def generate_join_query(ops: Sequence[Operation], probe_schema: Schema, build_schema: Schema,
                        layout: NtfLayout) -> str:
    """C source of a hash-join NCA's query: JG_QUERY (probe columns, output function) and JG_JOIN.

    `ops` is the NCA's chain (the join, then filters and projects, each reading the previous one),
    bound and typed; `probe_schema` / `build_schema` are the schemas of the join's inputs (their
    NTFs are the contract layouts of these); `layout` is the NTF of the last operation's output."""
    plan = plan_join(ops, probe_schema, build_schema)
    join = plan.join
    probe_types = [f.type for f in probe_schema.fields]
    build_types = [f.type for f in build_schema.fields]
    row_types = probe_types + build_types
    pool = LiteralPool()
    build_body = _key_function(pool, join.build_keys, plan.key_types, build_types, "build")
    probe_body = _key_function(pool, join.probe_keys, plan.key_types, probe_types, "probe")
    equal = " && ".join(_equal(t, j) for j, t in enumerate(plan.key_types))
    cond_body = _condition_function(pool, join.condition, row_types, join.name) if join.condition else ""
    row_body = _output_function(pool, plan, row_types, layout)
    exprs = [e for _, e in plan.filters] + [e for _, e in plan.outputs]
    joined = exprs + ([join.condition] if join.condition else [])
    nprobe, nbuild = len(probe_schema), len(build_schema)
    probe_used = [max(u) for u in zip(_used(joined, 0, nprobe), _used(join.probe_keys, 0, nprobe), strict=True)]
    build_used = _used(joined, nprobe, nbuild)
    probe_decode, probe_fixed = read_plan(probe_schema, probe_used)
    # the build side: the key columns are read when a row arrives (every string checked, as the whole
    # tuple is stored), the columns `build_used` names when a row matches
    build_batch_decode, build_fixed = read_plan(build_schema, _used(join.build_keys, 0, nbuild), [1] * nbuild)
    build_decode, _ = read_plan(build_schema, build_used)
    condition_reads_build = bool(join.condition) and _reads_build([join.condition], plan.nprobe)
    output_reads_build = _reads_build(exprs, plan.nprobe)
    emits_pairs = join.type in (JoinType.INNER, JoinType.LEFT_OUTER, JoinType.RIGHT_OUTER)
    return render_query(
        "join_query.c.j2", pool, kind="join",
        probe_columns=_column_table(probe_schema, 0), build_columns=_column_table(build_schema, len(probe_schema)),
        key_types=[jg_type(t) for t in plan.key_types], key_type_names=[str(t) for t in plan.key_types],
        join_type=JOIN_TYPE_C[join.type], join_type_name=join.type.value,
        build_keys=build_body, probe_keys=probe_body, keys_equal=equal, condition=cond_body,
        condition_reads_build=int(condition_reads_build), output_reads_build=int(output_reads_build),
        emits_pairs=emits_pairs, decode_build_half=condition_reads_build or (emits_pairs and output_reads_build),
        nfilters=len(plan.filters), body=row_body, probe_used=probe_used, build_used=build_used,
        probe_decode=probe_decode, probe_fixed_size=probe_fixed, build_batch_decode=build_batch_decode,
        build_decode=build_decode, build_fixed_size=build_fixed)
