"""The query file of an aggregation: the aggregation NCA (`aggregate` over NTF input, then any
filters and projections of its groups) and a scan with a fused aggregation (`read`, filters and
projections, `aggregate`, filters and projections).

What is generated (template ncas/templates/agg_query.c.j2, runtime half in ncas/runtime/jg_agg.h
and agg_table.c):

- `q_entry`: the hash, the group keys (strings as jg_key_str: up to 12 bytes inline, longer ones
  in the table's arena) and one accumulator per aggregate: counts in int64 (in final mode, where
  counts are added up, int128); sums of integers and decimals in int128, checked against the
  result type only when emitted, so an overflow is a data error and never a wrong answer (sums of
  wide decimals, whose values may have 38 digits, also check each addition against 128 bits:
  `_Acc.checked_sum`); sums of float64 in double; min/max values (strings copied into the
  arena); avg as sum and count;
- `query_rows` (and `query_row`, one row): the filters before the aggregate, the group keys and
  aggregate arguments as expressions over each input row and the key hash (with one key not a
  string, its jg_hash v1 value hash, docs/hashing.md; else the table's own, jg_agg.h: each key's
  words mixed in by a multiply and a rotation, one fmix64 at the end) into a batch of pending
  rows while prefetching their table slots, then `q_apply` per pending row: the probe loop with
  the key comparison inlined and the accumulator updates. No per-value type dispatch, and the
  table's cache misses of a batch overlap. A global aggregation (no group key) has one group:
  its rows are added to that entry as they are evaluated (`q_update`), with no hash, probe or
  batch (a third of the work of a scan's `max(col)` per row went on those);
- `query_tuples` (the aggregation NCA over NTF): the same, reading each tuple's used columns with
  loads at the layout's offsets (ntf_read.py) instead of the runtime's generic decoder;
- `q_same_key`, `q_copy`, `q_merge`: whole entries, for merging the workers' tables;
- `q_emit`: one entry's output row, the partial states (partial mode) or the final values, then
  the filters and projections after the aggregate, written as one NTF tuple.

NULL semantics: aggregates skip NULL inputs; sum/min/max/avg of no value is NULL; count(expr)
counts non-NULL values, count_star rows; NULL is a group key value like any other (the hash has a
value for it, and key comparison compares null flags first). Float keys compare as jg_hash
hashes them: -0.0 equals 0.0 and NaN equals NaN (as DuckDB groups them).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....contract.ntf import NtfLayout
from ....contract.types import FLOAT64, INT64, DataType, Field, Kind, Schema
from ....dataflow.aggregates import partial_fields, result_type
from ....dataflow.expr import Column, Expr, walk
from ....dataflow.plan import AggFn, AggMode, Aggregate, Operation
from .chain import ChainFold, emit_filters, emit_outputs
from .csyntax import (
    CodegenError,
    CValue,
    FunctionBody,
    LiteralPool,
    c_int,
    c_int128,
    c_type,
    same_representation,
)
from .expr import ExprCompiler, compare_condition, count_subtrees
from .ntf_read import read_plan
from .scan import RowEnv, column_table, emit_runtime_filters, fold_scan, used_columns
from .templates import render_query

_MODE = {AggMode.COMPLETE: "JG_AGG_COMPLETE", AggMode.PARTIAL: "JG_AGG_PARTIAL", AggMode.FINAL: "JG_AGG_FINAL"}


def _member_type(t: DataType) -> str:
    """C type of a stored key or min/max value of type `t`."""
    if t.is_wide_decimal:
        return "__int128"
    if t.kind is Kind.FLOAT64:
        return "double"
    if t.kind is Kind.STRING:
        return "jg_str"
    return "int64_t"


# ------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class AggCall:
    """One aggregate, its argument(s) bound to the input row."""

    name: str
    fn: AggFn
    arg: Expr | None  # complete/partial: the expression; final: the state column (avg: NAME__sum)
    count: Expr | None = None  # final avg: the NAME__count state column

    @property
    def arg_type(self) -> DataType | None:
        return self.arg.type if self.arg is not None else None


@dataclass(frozen=True)
class AggPlan:
    """An aggregation reduced to what the generated functions evaluate. Filters, keys and
    arguments are over the input row (a scan's read columns, or every field of the NTF input);
    `post_filters` and `outputs` are over the aggregate's output columns (`agg_schema`)."""

    row_schema: Schema
    scan: bool  # reading files (a fused scan) rather than NTF
    filters: tuple[tuple[str, Expr], ...]
    keys: tuple[tuple[str, Expr], ...]
    calls: tuple[AggCall, ...]
    mode: AggMode
    agg_schema: Schema
    post_filters: tuple[tuple[str, Expr], ...]
    outputs: tuple[tuple[str, Expr], ...]


def aggregate_output_fields(agg: Aggregate) -> list[Field]:
    """The aggregate's output columns (what the binder computed; re-derived from the node)."""
    fields = [Field(g.name, g.expr.type) for g in agg.group_by]  # type: ignore[arg-type]
    for c in agg.aggregates:
        t = c.expr.type if c.expr is not None else None
        if agg.mode is AggMode.PARTIAL:
            fields += partial_fields(c.name, c.fn, t)
        else:
            fields.append(Field(c.name, result_type(c.fn, t)))
    return fields


def plan_aggregate(ops: Sequence[Operation], input_schema: Schema | None = None) -> AggPlan:
    """Check the chain and bind everything to the input row.

    `ops` is `[read, (filter|project)*, aggregate, (filter|project)*]` (a scan with the aggregation
    fused in) or `[aggregate, (filter|project)*]` reading NTF tuples of `input_schema`."""
    k = next((i for i, op in enumerate(ops) if isinstance(op, Aggregate)), None)
    if k is None:
        raise CodegenError("an aggregation query needs an 'aggregate' operation")
    agg = ops[k]
    assert isinstance(agg, Aggregate)
    if k > 0:
        read, pre = fold_scan(ops[:k])
        row_schema = read.schema
        if not pre.reads_previous(agg):
            raise CodegenError(f"aggregate {agg.name!r} does not read the previous operation of the chain")
    else:
        if input_schema is None:
            raise CodegenError("an aggregation over NTF input needs the input schema")
        row_schema, pre = input_schema, ChainFold.over(input_schema)

    keys = tuple((f"group column '{g.name}' of '{agg.name}'", pre.bind(g.expr)) for g in agg.group_by)
    calls = []
    for c in agg.aggregates:
        count = None
        if agg.mode is AggMode.FINAL and c.fn is AggFn.AVG:
            state = c.name + "__count"
            if state not in pre.names:
                raise CodegenError(f"final avg {c.name!r} has no {state!r} column in its input")
            count = pre.columns[pre.names.index(state)]
        if c.fn is not AggFn.COUNT_STAR and c.expr is None:
            raise CodegenError(f"aggregate {c.name!r} ({c.fn.value}) has no expression")
        calls.append(AggCall(c.name, c.fn, pre.bind(c.expr) if c.expr is not None else None, count))
    agg_schema = Schema(tuple(aggregate_output_fields(agg)))
    post_filters, outputs = _plan_post(agg, ops[k + 1:], agg_schema)
    return AggPlan(row_schema, k > 0, tuple(pre.filters), keys, tuple(calls), agg.mode, agg_schema,
                   post_filters, outputs)


def _plan_post(agg: Aggregate, ops: Sequence[Operation], schema: Schema):
    """Filters and projections after the aggregate, bound to its output columns."""
    post = ChainFold.over(schema, agg.name).fold(ops, "an aggregation takes filters and projections of its groups")
    return tuple(post.filters), post.outputs()


# ------------------------------------------------------------------ the entry and its accumulators


@dataclass(frozen=True)
class _Acc:
    """The accumulator of aggregate `j`: which members it has and how it adds values."""

    j: int
    call: AggCall
    final: bool

    @property
    def value_type(self) -> DataType | None:
        """Type of the values added up (input expression, or state column in final mode)."""
        return self.call.arg_type

    @property
    def sum_c(self) -> str:
        """C type of a sum (sum and avg)."""
        t = self.value_type
        return "double" if t is not None and t.kind is Kind.FLOAT64 else "__int128"

    @property
    def checked_sum(self) -> bool:
        """Sums of wide decimals can leave 128 bits after a few rows (each value may have 38
        digits): their additions are overflow-checked into a sticky flag `o{j}` that q_emit
        reports as a data error (as DuckDB fails on a HUGEINT overflow). Narrow sums need no
        check: 2^127 is beyond any count of 18-digit values."""
        t = self.value_type
        return t is not None and t.is_wide_decimal and self.call.fn in (AggFn.SUM, AggFn.AVG)

    def _add(self, dst: str, v: str) -> str:
        if self.checked_sum:
            return f"e->o{self.j} |= (uint8_t)__builtin_add_overflow({dst}, {v}, &{dst});"
        return f"{dst} += {v};"

    @property
    def count_c(self) -> str:
        return "__int128" if self.final else "int64_t"

    def members(self) -> list[tuple[str, str]]:
        j, fn = self.j, self.call.fn
        if fn in (AggFn.COUNT, AggFn.COUNT_STAR):
            return [(self.count_c, f"c{j}")]
        flag = [("uint8_t", f"o{j}")] if self.checked_sum else []
        if fn is AggFn.SUM:
            return [(self.sum_c, f"s{j}"), ("uint8_t", f"h{j}"), *flag]
        if fn is AggFn.AVG:
            return [(self.sum_c, f"s{j}"), (self.count_c, f"c{j}"), *flag]
        out = [(_member_type(self.value_type), f"m{j}"), ("uint8_t", f"h{j}")]  # type: ignore[arg-type]
        if self.value_type.kind is Kind.STRING:  # type: ignore[union-attr]
            out.append(("uint32_t", f"cap{j}"))
        return out

    def better(self, new: CValue, cur: CValue) -> str:
        """C condition: `new` replaces the current min/max `cur` (NaN-aware for float64)."""
        return compare_condition("<" if self.call.fn is AggFn.MIN else ">", new, cur)

    def update(self, v: CValue | None, count: CValue | None) -> list[str]:
        """Statements adding one input row (or one partial state row in final mode) to `e`."""
        j, fn = self.j, self.call.fn
        if fn is AggFn.COUNT_STAR and not self.final:
            return [f"e->c{j} += 1;"]
        assert v is not None
        guard = "" if v.never_null else f"if (!{v.null}) "
        if fn in (AggFn.COUNT, AggFn.COUNT_STAR):
            if self.final:
                return [f"{guard}e->c{j} += {v.value};"]
            return [f"e->c{j} += 1;" if v.never_null else f"e->c{j} += !{v.null};"]
        add = self._add(f"e->s{j}", v.value)
        if fn is AggFn.SUM:
            return [f"{guard}{{ {add} e->h{j} = 1; }}"]
        if fn is AggFn.AVG:
            if not self.final:
                return [f"{guard}{{ {add} e->c{j} += 1; }}"]
            assert count is not None
            cguard = "" if count.never_null else f"if (!{count.null}) "
            return [f"{guard}{add}" if guard else add, f"{cguard}e->c{j} += {count.value};"]
        cur = CValue(f"e->m{j}", "0", v.type)
        cond = f"{'' if v.never_null else f'!{v.null} && '}(!e->h{j} || {self.better(v, cur)})"
        if v.type.kind is Kind.STRING:
            store = f"jg_agg_set_str(t, &e->m{j}, &e->cap{j}, {v.value});"
        else:
            store = f"e->m{j} = {v.value};"
        return [f"if ({cond}) {{ {store} e->h{j} = 1; }}"]

    def merge(self) -> list[str]:
        """Statements merging entry `s`'s state into entry `d` (same keys)."""
        j, fn = self.j, self.call.fn
        if fn in (AggFn.COUNT, AggFn.COUNT_STAR):
            return [f"d->c{j} += s->c{j};"]
        if self.checked_sum:
            add = (f"d->o{j} |= (uint8_t)(s->o{j} | __builtin_add_overflow(d->s{j}, s->s{j}, &d->s{j}));")
        else:
            add = f"d->s{j} += s->s{j};"
        if fn is AggFn.SUM:
            return [f"if (s->h{j}) {{ {add} d->h{j} = 1; }}"]
        if fn is AggFn.AVG:
            return [add, f"d->c{j} += s->c{j};"]
        t = self.value_type
        cond = self.better(CValue(f"s->m{j}", "0", t), CValue(f"d->m{j}", "0", t))  # type: ignore[arg-type]
        if t.kind is Kind.STRING:  # type: ignore[union-attr]
            store = f"jg_agg_set_str(t, &d->m{j}, &d->cap{j}, s->m{j});"
        else:
            store = f"d->m{j} = s->m{j};"
        return [f"if (s->h{j} && (!d->h{j} || {cond})) {{ {store} d->h{j} = 1; }}"]

    def copy_strings(self) -> list[str]:
        j = self.j
        if self.call.fn in (AggFn.MIN, AggFn.MAX) and self.value_type.kind is Kind.STRING:  # type: ignore[union-attr]
            return [f"d->m{j} = jg_agg_store_str(t, s->m{j});", f"d->cap{j} = d->m{j}.n;"]
        return []


_LAYOUT = {"__int128": (16, 16), "jg_str": (16, 8), "jg_key_str": (16, 8), "int64_t": (8, 8), "double": (8, 8),
           "uint32_t": (4, 4), "uint8_t": (1, 1)}  # C type: (size, alignment) on x86-64


def _entry_members(plan: AggPlan, key_nullable: list[bool], accs: list[_Acc]) -> tuple[list[str], int]:
    """Declarations of q_entry's members and the struct's alignment. The hash comes first (the
    runtime reads it there), the rest by decreasing alignment so that the struct packs tightly;
    an entry of up to 64 bytes is aligned to its power-of-two size, so that it never straddles a
    cache line (the runtime aligns the entry array to 64 bytes): one miss per probed group."""
    members: list[tuple[str, str]] = []
    for i, (_, e) in enumerate(plan.keys):
        key_type = "jg_key_str" if e.type.kind is Kind.STRING else _member_type(e.type)  # type: ignore[union-attr]
        members.append((key_type, f"k{i}"))
        if key_nullable[i]:
            members.append(("uint8_t", f"kn{i}"))
    for a in accs:
        members += a.members()
    members.sort(key=lambda m: -_LAYOUT[m[0]][1])
    size, align = 8, 8
    for ct, _ in members:
        n, a = _LAYOUT[ct]
        size = (size + a - 1) // a * a + n
        align = max(align, a)
    size = (size + align - 1) // align * align
    while size <= 64 and align < size:
        align *= 2
    return ["uint64_t hash;"] + [f"{ct} {name};" for ct, name in members], align


# ------------------------------------------------------------------ keys


def _value_hash(v: CValue) -> str:
    """C expression: jg_hash v1's value hash of a key that is not a string (a table's one key)."""
    if v.type.kind is Kind.FLOAT64:
        h = f"jg_hash_float({v.value})"
    else:
        h = f"jg_hash_{'i128' if v.type.is_wide_decimal else 'int'}({v.value})"
    return h if v.never_null else f"({v.null} ? JG_HASH_NULL : {h})"


def _values_equal(kind: Kind, a: str, b: str) -> str:
    if kind is Kind.STRING:
        return f"({a}.n == {b}.n && __builtin_memcmp({a}.p, {b}.p, {b}.n) == 0)"
    if kind is Kind.FLOAT64:
        return f"({a} == {b} || ({a} != {a} && {b} != {b}))"
    return f"{a} == {b}"


def _key_matches(i: int, v: CValue, nullable: bool) -> str:
    """C condition: entry `e`'s key i equals the row's value `v` (a string: its key form, `v`q)."""
    if v.type.kind is Kind.STRING:
        same = f"jg_key_eq(&e->k{i}, &{v.value}q)"
    else:
        same = _values_equal(v.type.kind, f"e->k{i}", v.value)
    if not nullable:
        return same
    return f"e->kn{i} == {v.null} && ({v.null} || {same})"


def _key_store(i: int, v: CValue, nullable: bool) -> list[str]:
    kind = v.type.kind
    value = f"jg_agg_key_keep(t, {v.value}q)" if kind is Kind.STRING else v.value
    if not nullable:
        return [f"e->k{i} = {value};"]
    zero = {Kind.STRING: "(jg_key_str){0}", Kind.FLOAT64: "0.0"}.get(kind, "0")
    return [f"e->kn{i} = (uint8_t){v.null};", f"e->k{i} = {v.null} ? {zero} : {value};"]


def _same_key(plan: AggPlan, key_nullable: list[bool]) -> str:
    terms = []
    for i, (_, e) in enumerate(plan.keys):
        if key_nullable[i]:
            terms.append(f"a->kn{i} == b->kn{i}")  # NULL keys are stored as zero values
        if e.type.kind is Kind.STRING:  # type: ignore[union-attr]
            terms.append(f"jg_key_eq(&a->k{i}, &b->k{i})")
        else:
            terms.append(_values_equal(e.type.kind, f"a->k{i}", f"b->k{i}"))  # type: ignore[union-attr]
    return " &&\n         ".join(terms) or "1"


# ------------------------------------------------------------------ output values of one entry


class _ValuesEnv:
    """Column i of the aggregate's output is the already computed value `values[i]`."""

    def __init__(self, values: Sequence[CValue]) -> None:
        self.values = values

    def column(self, index: int, expected: DataType) -> CValue:
        v = self.values[index]
        if v is None:
            raise CodegenError(f"aggregate output column #{index} was not computed")
        if not same_representation(v.type, expected):
            raise CodegenError(f"aggregate output column #{index} is {v.type}, referenced as {expected}")
        return v


class _Emitter:
    """Statements of q_emit computing the aggregate's output columns from entry `e`."""

    def __init__(self, body: FunctionBody, plan: AggPlan) -> None:
        self.body = body
        self.plan = plan

    def fits(self, acc: str, t: DataType, message: str, guard: str) -> None:
        """Fail unless int128 `acc` fits result type `t` (int64, or decimal(p,s))."""
        if t.is_wide_decimal:
            lim = c_int128(10 ** t.precision)
            cond = f"{acc} <= -{lim} || {acc} >= {lim}"
        elif t.kind is Kind.DECIMAL:
            lim = c_int(10 ** t.precision)
            cond = f"{acc} <= -(__int128){lim} || {acc} >= (__int128){lim}"
        else:
            cond = f"{acc} < INT64_MIN || {acc} > INT64_MAX"
        self.body.fail(message, f"{guard}({cond})")

    def result(self, t: DataType, value: str, null: str) -> CValue:
        k = self.body.fresh()
        ct = c_type(t) if t.is_wide_decimal else {Kind.FLOAT64: "double", Kind.STRING: "jg_str",
                                                    Kind.BOOLEAN: "int"}.get(t.kind, "int64_t")
        self.body.line(f"const {ct} t{k} = {value};")
        if null in ("0", "1"):
            return CValue(f"t{k}", null, t)
        self.body.line(f"const int n{k} = {null};")
        return CValue(f"t{k}", f"n{k}", t)

    def exact(self, acc: str, has: str, t: DataType, message: str) -> CValue:
        """An int128 sum as int64 or decimal(p,s), NULL when `has` is 0, checked to fit."""
        self.fits(acc, t, message, f"{has} && ")
        held = acc if t.is_wide_decimal else f"(int64_t){acc}"
        return self.result(t, f"{has} ? {held} : 0", f"!{has}")

    def no_overflow(self, acc: _Acc, message: str) -> None:
        """Fail when a checked sum left 128 bits on the way (its flag `o{j}`)."""
        if acc.checked_sum:
            self.body.fail(message, f"e->o{acc.j}")

    def values(self, acc: _Acc, out_fields: list[Field]) -> list[CValue]:
        j, c = acc.j, acc.call
        fn, name, vt = c.fn, c.name, acc.value_type
        if fn in (AggFn.COUNT, AggFn.COUNT_STAR):
            if acc.final:
                self.fits(f"e->c{j}", INT64, f"integer overflow: {fn.value} '{name}' does not fit int64", "")
            return [self.result(INT64, f"(int64_t)e->c{j}", "0")]
        if fn in (AggFn.MIN, AggFn.MAX):
            return [self.result(out_fields[0].type, f"e->m{j}", f"!e->h{j}")]
        if fn is AggFn.SUM:
            t = out_fields[0].type
            self.no_overflow(acc, f"{_overflow(t)}: sum '{name}' does not fit {t}")
            if t.kind is Kind.FLOAT64:
                return [self.result(t, f"e->s{j}", f"!e->h{j}")]
            return [self.exact(f"e->s{j}", f"e->h{j}", t, f"{_overflow(t)}: sum '{name}' does not fit {t}")]
        # avg
        self.no_overflow(acc, f"decimal overflow: the sum of avg '{name}' has more than 38 digits")
        count = f"e->c{j}"
        if self.plan.mode is AggMode.PARTIAL:
            st, ct = out_fields[0].type, out_fields[1].type
            has = f"({count} != 0)"
            if st.kind is Kind.DECIMAL:
                total = self.exact(f"e->s{j}", has, st,
                                   f"decimal overflow: the sum of avg '{name}' does not fit {st}")
            else:
                total = self.result(st, f"{has} ? (double)e->s{j} : 0.0", f"!{has}")
            return [total, self.result(ct, f"(int64_t){count}", "0")]
        if acc.final:
            self.fits(count, INT64, f"integer overflow: the count of avg '{name}' does not fit int64", "")
        divisor = f"(long double){count}"
        if vt is not None and vt.kind is Kind.DECIMAL and vt.scale:
            divisor = f"({divisor} * {10 ** vt.scale}.0L)"
        if acc.sum_c == "double":
            mean = f"e->s{j} / (double){count}"
        else:
            mean = f"(double)((long double)e->s{j} / {divisor})"
        return [self.result(FLOAT64, f"{count} != 0 ? {mean} : 0.0", f"{count} == 0")]


def _overflow(t: DataType) -> str:
    return "decimal overflow" if t.kind is Kind.DECIMAL else "integer overflow"


# ------------------------------------------------------------------ generation


def generate_aggregate_query(ops: Sequence[Operation], layout: NtfLayout, input_schema: Schema | None = None,
                             runtime_filters: Sequence[Sequence[int]] = ()) -> str:
    """C source of an aggregation query (see the module docstring). `ops` as for
    `plan_aggregate`; `layout` is the NTF of the last operation's output; `input_schema` the NTF
    input's schema when the chain does not start with a read (contract §2 layout, every field).
    `runtime_filters` (a scan's only: per filter slot, the key columns as indexes into the read's
    schema) are tested after the filters before the aggregate, as a plain scan tests them
    (docs/runtime-filters.md): a join above the aggregation drops the groups they remove."""
    plan = plan_aggregate(ops, input_schema)
    if runtime_filters and not plan.scan:
        raise CodegenError("runtime filters apply to a scan's rows, and this aggregation reads NTF")
    if len(layout.fields) != len(plan.outputs):
        raise CodegenError(f"NTF layout has {len(layout.fields)} fields, the query outputs {len(plan.outputs)}")
    pool = LiteralPool()
    accs = [_Acc(j, c, plan.mode is AggMode.FINAL) for j, c in enumerate(plan.calls)]
    row_exprs = [e for _, e in plan.filters] + [e for _, e in plan.keys]
    row_exprs += [x for c in plan.calls for x in (c.arg, c.count) if x is not None]
    schema = plan.row_schema
    rf_keys = [Column(schema.fields[i].name, i, schema.fields[i].type) for cols in runtime_filters for i in cols]
    used = used_columns(row_exprs + rf_keys) if plan.scan else list(range(len(schema.fields)))
    row_eval, keys, args, pending = _evaluate(plan, pool, used, row_exprs, "continue;", runtime_filters)
    key_nullable = [not k.never_null for k in keys]
    emit = _emit_body(plan, accs, key_nullable, pool, layout)
    copy = [f"d->k{i} = jg_agg_key_store(t, s->k{i});" for i, k in enumerate(keys) if k.type.kind is Kind.STRING]
    copy += [line for a in accs for line in a.copy_strings()]
    entry, align = _entry_members(plan, key_nullable, accs)
    # over NTF input, the generated code reads the tuples itself: the columns the expressions read,
    # and every string bounds-checked (a malformed tuple fails as the runtime's decoder fails it)
    tuple_reads, fixed_size = None, 0
    if not plan.scan:
        read = set(used_columns(row_exprs))
        tuple_reads, fixed_size = read_plan(schema, [i in read for i in range(len(schema))], [1] * len(schema))
    return render_query("agg_query.c.j2", pool, kind="scan with aggregation" if plan.scan else "aggregation",
                  row_eval=row_eval,
                  pending=pending, apply=_apply_body(keys, args, accs), update=_update_lines(args, accs), emit=emit, entry=entry, align=align,
                  same_key=_same_key(plan, key_nullable), copy=copy, merge=[line for a in accs for line in a.merge()],
                  mode=_MODE[plan.mode], nkeys=len(plan.keys), columns=column_table(schema, used, named=plan.scan),
                  summary=_summary(plan), runtime_filters=[[used.index(i) for i in cols] for cols in runtime_filters],
                  tuple_reads=tuple_reads, fixed_size=fixed_size)


def _evaluate(plan: AggPlan, pool: LiteralPool, used: list[int], row_exprs: list[Expr], skip: str,
              runtime_filters: Sequence[Sequence[int]] = ()):
    """Statements evaluating one input row `row` into the pending row `p`: the filters and the
    runtime filters (a row that does not pass runs `skip`), the group keys and the aggregates'
    arguments, and the key hash. Returns (C text, pending keys, pending (argument, count) pairs, the pending struct's
    members): the pending values are `p->...` CValues, read by `q_apply`."""
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, RowEnv(plan.row_schema, used), shared=count_subtrees(row_exprs))
    emit_filters(body, comp, plan.filters, skip=skip)
    emit_runtime_filters(body, comp, plan.row_schema, runtime_filters, skip=skip)
    members: list[str] = ["uint64_t h;"]
    stores: list[str] = []

    def pend(v: CValue, name: str) -> CValue:
        members.append(f"{c_type(v.type)} {name};")
        stores.append(f"p->{name} = {v.value};")
        if v.never_null:
            return CValue(f"p->{name}", "0", v.type)
        members.append(f"uint8_t {name}n;")
        stores.append(f"p->{name}n = (uint8_t){v.null};")
        return CValue(f"p->{name}", f"p->{name}n", v.type)

    keys, values = [], []
    for i, (where, e) in enumerate(plan.keys):
        comp.where = where
        v = comp.compile(e)
        values.append(v)
        keys.append(pend(v, f"k{i}"))
        if v.type.kind is Kind.STRING:  # the key form the probe compares (jg_agg.h); a NULL's value is not read
            members.append(f"jg_key_str k{i}q;")
            form = f"jg_key_of(p->k{i})" if v.never_null else f"p->k{i}n ? (jg_key_str){{0}} : jg_key_of(p->k{i})"
            stores.append(f"p->k{i}q = {form};")
    args = []
    for j, c in enumerate(plan.calls):
        comp.where = f"aggregate '{c.name}'"
        a = pend(comp.compile(c.arg), f"a{j}") if c.arg is not None else None
        n = pend(comp.compile(c.count), f"c{j}") if c.count is not None else None
        args.append((a, n))
    for line in stores:
        body.line(line)
    if not keys:  # the one group of a global aggregation (query_finish inserts it so when empty)
        body.line("p->h = JG_HASH_SEED;")
    elif len(keys) == 1 and keys[0].type.kind is not Kind.STRING:  # already mixed: one fmix64 per row
        body.comment("group key hash (jg_hash v1 value hash of the one key)")
        body.line(f"p->h = {_value_hash(values[0])};")
    else:
        body.comment("group key hash (the table's own, jg_agg.h: the keys' words mixed in, one fmix64)")
        body.line("p->h = JG_HASH_SEED;")
        for i, k in enumerate(keys):
            body.line(f"p->h = {_key_mix(i, k)};")
        body.line("p->h = jg_fmix64(p->h);")
    return body.text(), keys, args, members


def _key_mix(i: int, k: CValue) -> str:
    """C expression: the table's hash so far, `p->h`, with pending key i (`k`) mixed in (jg_agg.h)."""
    kind = k.type.kind
    if kind is Kind.STRING:
        mixed = f"jg_agg_mix_str(p->h, &p->k{i}q, {k.value})"
    elif kind is Kind.FLOAT64:
        mixed = f"jg_agg_mix(p->h, jg_agg_float_word({k.value}))"
    elif k.type.is_wide_decimal:
        mixed = f"jg_agg_mix(jg_agg_mix(p->h, (uint64_t){k.value}), (uint64_t)((unsigned __int128){k.value} >> 64))"
    else:
        mixed = f"jg_agg_mix(p->h, (uint64_t)({k.value}))"
    return mixed if k.never_null else f"({k.null} ? jg_agg_mix(p->h, JG_HASH_NULL) : {mixed})"


def _apply_body(keys: list[CValue], args: list[tuple[CValue | None, CValue | None]], accs: list[_Acc]) -> str:
    """Statements of q_apply: find or insert the pending row's group, update its accumulators."""
    body = FunctionBody()
    nullable = [not k.never_null for k in keys]
    # arena bytes for the new entry's keys: only keys longer than a key's 12 inline bytes take any
    extra = " + ".join(f"jg_key_extra({k.value})" if k.never_null else f"({k.null} ? 0 : jg_key_extra({k.value}))"
                       for k in keys if k.type.kind is Kind.STRING) or "0"
    match = " && ".join(f"({_key_matches(i, k, nullable[i])})" for i, k in enumerate(keys)) or "1"
    body.line("q_entry *e = NULL;")
    with body.block("for (uint64_t i = p->h & t->mask;; i = (i + 1) & t->mask)"):
        body.line("const uint64_t s = t->slots[i];")
        with body.block("if (s == 0)"):
            body.line(f"e = (q_entry *)jg_agg_insert(t, p->h, i, {extra});")
            body.line("if (!e) return JG_ROW_ERROR;")
            for i, k in enumerate(keys):
                for line in _key_store(i, k, nullable[i]):
                    body.line(line)
            body.line("break;")
        with body.block("if ((s >> 32) == (p->h >> 32))"):
            body.line("e = (q_entry *)t->entries + ((uint32_t)s - 1);")
            body.line(f"if ({match}) break;")
    body.comment("aggregates")
    for line in _update_lines(args, accs):
        body.line(line)
    return body.text()


def _update_lines(args: list[tuple[CValue | None, CValue | None]], accs: list[_Acc]) -> list[str]:
    """Statements adding the pending row `p` to the accumulators of its group's entry `e`."""
    return [line for acc, (v, count) in zip(accs, args) for line in acc.update(v, count)]


def _emit_body(plan: AggPlan, accs: list[_Acc], key_nullable: list[bool], pool: LiteralPool,
               layout: NtfLayout) -> str:
    body = FunctionBody(messages=pool.messages)
    exprs = [e for _, e in plan.post_filters] + [e for _, e in plan.outputs]
    needed = {n.index for e in exprs for n in walk(e) if isinstance(n, Column)}
    fields = list(plan.agg_schema.fields)
    values: list[CValue | None] = []
    for i, (_, e) in enumerate(plan.keys):
        stored = f"jg_key_view(&e->k{i})" if e.type.kind is Kind.STRING else f"e->k{i}"  # type: ignore[union-attr]
        values.append(CValue(stored, f"e->kn{i}" if key_nullable[i] else "0", e.type))  # type: ignore[arg-type]
    emitter = _Emitter(body, plan)
    for acc in accs:
        width = 2 if plan.mode is AggMode.PARTIAL and acc.call.fn is AggFn.AVG else 1
        out = fields[len(values):len(values) + width]
        if any(len(values) + w in needed for w in range(width)):
            body.comment(f"{acc.call.fn.value} #{acc.j}")
            values += emitter.values(acc, out)
        else:
            values += [None] * width
    comp = ExprCompiler(body, pool, _ValuesEnv(values), shared=count_subtrees(exprs))  # type: ignore[arg-type]
    emit_filters(body, comp, plan.post_filters, "filter {i} of {n} after the aggregate")
    emit_outputs(body, comp, plan.outputs, layout)
    return body.text()


def _summary(plan: AggPlan) -> str:
    fns = ", ".join(c.fn.value for c in plan.calls) or "no aggregates"
    return (f"{plan.mode.value} aggregation: {len(plan.keys)} group key(s); {fns}; "
            f"{len(plan.filters)} filter(s) before, {len(plan.post_filters)} after")
