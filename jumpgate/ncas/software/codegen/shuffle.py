"""Query files of the NCAs that read NTF tuples (the `ntf_relay` driver), and of shuffles.

- `generate_relay_query(ops, schema, input_layout, output_layout)`: a chain of `filter` and `project`
  operations over an NTF input, optionally ending in a `shuffle` (the NTF filter/project NCA and
  the shuffle NCA). The driver decodes every input field into `row[]` (contract §2 layout of the
  input schema, so `JG_QUERY.columns` lists the whole schema in field order).
- `generate_scan_shuffle_query(ops, layout)`: a JSON scan chain (read, filters, projects) that
  ends in a shuffle, fused into the scan NCA (one hop less than scan -> shuffle NCA).

A shuffle evaluates its key expressions, hashes them with jg_hash v1 (docs/hashing.md,
ncas/runtime/jg_hash.h) and writes the tuple to output port `h mod P`; each port carries one of
the shuffle's outputs `NAME[i]`. When the tuple leaves unchanged (the chain only filters, or
projects exactly its input's columns in order), the row function forwards the raw input bytes
(`jg_input_tuple`) instead of decoding and re-encoding them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....contract.ntf import NtfLayout, generate_ntf
from ....contract.types import Kind, Schema
from ....dataflow.expr import Column, Expr
from ....dataflow.plan import Operation, Read, Shuffle
from .chain import ChainFold, emit_filters, emit_outputs
from .csyntax import CodegenError, CValue, FunctionBody, LiteralPool
from .expr import ExprCompiler, count_subtrees
from .scan import RowEnv, column_table, fold_scan, used_columns
from .templates import render_query

_INTEGER_LIKE = (Kind.BOOLEAN, Kind.INT32, Kind.INT64, Kind.DATE, Kind.DECIMAL)


# ------------------------------------------------------------------ planning


@dataclass(frozen=True)
class RelayPlan:
    """An NTF chain reduced to what the row function evaluates, every expression over the input
    schema. `partitions` is 0 when the chain does not end in a shuffle (one output port)."""

    schema: Schema
    filters: tuple[tuple[str, Expr], ...]  # (where, condition)
    outputs: tuple[tuple[str, Expr], ...]  # (where, value)
    keys: tuple[tuple[str, Expr], ...]  # (where, shuffle key)
    partitions: int = 0


def split_shuffle(ops: Sequence[Operation]) -> tuple[list[Operation], Shuffle | None]:
    """(the operations before a trailing shuffle, the shuffle or None)."""
    ops = list(ops)
    if ops and isinstance(ops[-1], Shuffle):
        return ops[:-1], ops[-1]
    return ops, None


def _key_where(shuffle: Shuffle, j: int) -> str:
    return f"key {j + 1} of shuffle '{shuffle.name}'"


def plan_relay(ops: Sequence[Operation], schema: Schema) -> RelayPlan:
    """Check the chain (filters and projects, each reading the previous one, optionally a final
    shuffle) and bind every expression to the input schema `schema`."""
    if not ops:
        raise CodegenError("an NTF relay query takes at least one operation")
    chain = ChainFold.over(schema)
    keys: tuple[tuple[str, Expr], ...] = ()
    partitions = 0
    for k, op in enumerate(ops):
        if isinstance(op, Read):
            raise CodegenError("an NTF relay query reads NTF, not files: no 'read' operation")
        if chain.add(op):
            continue
        if not isinstance(op, Shuffle):
            raise CodegenError(f"an NTF relay query takes filter, project and shuffle operations, not {op.kind!r}")
        if k != len(ops) - 1:
            raise CodegenError(f"shuffle {op.name!r} must be the last operation of the chain")
        keys = tuple((_key_where(op, j), chain.bind(e)) for j, e in enumerate(op.keys))
        partitions = op.partitions
    return RelayPlan(schema, tuple(chain.filters), chain.outputs(ops[-1].name), keys, partitions)


def same_layout(a: NtfLayout, b: NtfLayout) -> bool:
    """Same bytes for the same values: sizes, and per field type, offset and null bit (names may
    differ: a projection may rename)."""
    return (a.null_bytes == b.null_bytes and a.fixed_size == b.fixed_size and len(a.fields) == len(b.fields)
            and all((f.type, f.offset, f.size, f.null_bit) == (g.type, g.offset, g.size, g.null_bit)
                    for f, g in zip(a.fields, b.fields)))


def is_contract_layout(layout: NtfLayout, schema: Schema) -> bool:
    """Is `layout` the contract §2 layout of `schema` (what the NTF decoder of the runtime reads)?"""
    return same_layout(layout, generate_ntf(schema)) and all(
        f.type == g.type for f, g in zip(layout.fields, schema.fields))


def forwards_input(plan: RelayPlan, input_layout: NtfLayout, output_layout: NtfLayout) -> bool:
    """True when every output tuple is byte for byte its input tuple: the outputs are the input's
    columns in order with their exact types, and both layouts agree."""
    if len(plan.outputs) != len(plan.schema.fields) or not same_layout(input_layout, output_layout):
        return False
    return all(isinstance(e, Column) and e.index == i and e.type == f.type
               for i, ((_, e), f) in enumerate(zip(plan.outputs, plan.schema.fields)))


# ------------------------------------------------------------------ C pieces


def value_hash(v: CValue) -> str:
    """C expression of jg_hash v1's value hash v(x) of an evaluated key (docs/hashing.md)."""
    if v.always_null:
        return "JG_HASH_NULL"
    kind = v.type.kind
    if v.type.is_wide_decimal:  # jg_hash v1 (docs/hashing.md) defines no hash for 128-bit values
        raise CodegenError(f"no jg_hash v1 value hash for {v.type} (a wide decimal)")
    if kind in _INTEGER_LIKE:
        h = f"jg_hash_int((int64_t){v.value})"
    elif kind is Kind.FLOAT64:
        h = f"jg_hash_float({v.value})"
    elif kind is Kind.STRING:
        h = f"jg_hash_bytes({v.value}.p, {v.value}.n)"
    else:
        raise CodegenError(f"no jg_hash v1 value hash for {v.type}")
    return h if v.never_null else f"({v.null} ? JG_HASH_NULL : {h})"


def hash_keys(body: FunctionBody, comp: ExprCompiler, keys: Sequence[tuple[str, Expr]]) -> str:
    """Evaluate the keys in order and fold their value hashes into a fresh `uint64_t hK`
    (jg_hash v1's row hash); returns its name."""
    h = f"h{body.fresh()}"
    body.comment(f"jg_hash v1 over {len(keys)} key(s) (docs/hashing.md)")
    body.line(f"uint64_t {h} = JG_HASH_SEED;")
    for where, e in keys:
        comp.where = where
        v = comp.compile(e)
        body.line(f"{h} = jg_hash_combine({h}, {value_hash(v)});")
    return h


def shuffle_port(body: FunctionBody, comp: ExprCompiler, keys: Sequence[tuple[str, Expr]],
                 partitions: int) -> str:
    """Hash the keys and pick the output port `h mod P`; returns the C name of the port."""
    if partitions < 1:
        raise CodegenError("a shuffle has at least one partition")
    h = hash_keys(body, comp, keys)
    port = f"p{body.fresh()}"
    body.line(f"const int {port} = (int)({h} % UINT64_C({partitions}));")
    return port


def forward_input(body: FunctionBody, port: str) -> None:
    """Write the current input tuple, unchanged, to output port `port`."""
    k = body.fresh()
    body.comment("the output tuple is the input tuple: forward its bytes")
    body.line(f"uint32_t len{k} = 0;")
    body.line(f"const uint8_t *const in{k} = jg_input_tuple(ctx, &len{k});")
    body.line(f"__builtin_memcpy(jg_emit(jg_output(ctx, {port}), len{k}), in{k}, len{k});")


# ------------------------------------------------------------------ query files


def generate_relay_query(ops: Sequence[Operation], schema: Schema, input_layout: NtfLayout,
                         output_layout: NtfLayout) -> str:
    """C source of an NTF-reading NCA's query (driver `ntf_relay`): filters and projects over the
    input (whose schema is `schema`), optionally a final shuffle whose P outputs are ports
    0..P-1 (all with `output_layout`). `input_layout` must be the contract layout of `schema`."""
    if not is_contract_layout(input_layout, schema):
        raise CodegenError("the NTF relay decodes contract §2 layouts only")
    plan = plan_relay(ops, schema)
    forward = forwards_input(plan, input_layout, output_layout)
    evaluated = [e for _, e in plan.filters] + [e for _, e in plan.keys]
    if not forward:
        evaluated += [e for _, e in plan.outputs]
    everything = list(range(len(schema.fields)))
    pool = LiteralPool()
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, RowEnv(schema, everything), shared=count_subtrees(evaluated))
    emit_filters(body, comp, plan.filters)
    port = shuffle_port(body, comp, plan.keys, plan.partitions) if plan.partitions else "0"
    if forward:
        forward_input(body, port)
    else:
        emit_outputs(body, comp, plan.outputs, output_layout, port=port)
    what = (f"{len(plan.filters)} filter condition(s), "
            + (f"the key hash picks 1 of {plan.partitions} output ports, " if plan.partitions else "")
            + ("the input tuple is forwarded unchanged" if forward else "then the output tuple"))
    return render_query("relay_query.c.j2", pool, kind="shuffle" if plan.partitions else "ntf relay",
                        body=body.text(), columns=column_table(schema, everything, named=False),
                  ports=max(1, plan.partitions), hashing=bool(plan.partitions),
                  summary=f"One input tuple: {what}.")


def generate_scan_shuffle_query(ops: Sequence[Operation], layout: NtfLayout) -> str:
    """C source of a JSON scan NCA whose chain (read, filters, projects) ends in a shuffle: the
    row function filters, hashes the keys and writes the output tuple (`layout`) to port
    `h mod P` of the shuffle's P ports."""
    chain, shuffle = split_shuffle(ops)
    if shuffle is None:
        raise CodegenError("a scan-shuffle query ends in a 'shuffle' operation")
    read, scan = fold_scan(chain)
    if not scan.reads_previous(shuffle):
        raise CodegenError(f"shuffle {shuffle.name!r} does not read the previous operation of the chain")
    keys = tuple((_key_where(shuffle, j), scan.bind(e)) for j, e in enumerate(shuffle.keys))
    outputs = scan.outputs()
    exprs = [e for _, e in scan.filters] + [e for _, e in keys] + [e for _, e in outputs]
    used = used_columns(exprs)
    pool = LiteralPool()
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, RowEnv(read.schema, used), shared=count_subtrees(exprs))
    emit_filters(body, comp, scan.filters)
    port = shuffle_port(body, comp, keys, shuffle.partitions)
    emit_outputs(body, comp, outputs, layout, port=port)
    return render_query("relay_query.c.j2", pool, kind="scan with shuffle", body=body.text(),
                  columns=column_table(read.schema, used), ports=shuffle.partitions, hashing=True,
                  summary=f"One input row: {len(scan.filters)} filter condition(s), the key hash picks 1 of "
                          f"{shuffle.partitions} output ports, then the output tuple.")
