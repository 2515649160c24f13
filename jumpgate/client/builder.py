"""The fluent dataflow builder (thesis Figure 3.4) and its translation to request JSON (contract §1).

Nodes are immutable: every method returns a new node and never changes its receiver, so a
sub-plan can be reused in several requests. Operation names are given with `name=` or generated
when a request is built: `{kind}_{i}`, where `i` is the operation's position in the request's
`operations` list (inputs before the operations that use them, sends in the order given). The
same program therefore always yields the same JSON.

The builder checks what it can see: argument shapes and types, operation names, type names,
join/aggregate/mode keywords, and (when the input columns are known and an expression is a bare
column name) that referenced columns exist. Expressions are passed through as text; the server
parses and types them and is the authority on everything else.

Argument forms for lists of named columns (`project`, `group_by`, join `columns`):
``"a"`` (name and expression a), ``("total", "a + b")`` (a tuple of exactly two strings is one
column), ``{"name": "total", "expr": "a + b"}``, a mapping ``{"total": "a + b"}``, or a list of
any of these. Keyword arguments (``total="a + b"``) come after positional ones; a column called
`name` (or `mode`, ...) needs one of the other forms.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..contract.types import parse_type
from .errors import BuilderError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
JOIN_TYPES = ("inner", "left_semi", "left_anti", "left_outer")
AGG_FUNCTIONS = ("sum", "count", "count_star", "min", "max", "avg")
AGG_MODES = ("complete", "partial", "final")
_AGG_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.DOTALL)
_KEYWORDS = {"true", "false", "null"}

Column = tuple[str, str]  # (output name, expression)


# --------------------------------------------------------------------------------- validation
def _check_op_name(name: str | None) -> str | None:
    if name is not None and (not isinstance(name, str) or not NAME_RE.match(name)):
        raise BuilderError(f"operation name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    return name


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BuilderError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _type_name(t: Any, column: str) -> str:
    if not isinstance(t, str):
        t = _arrow_type_name(t, column)
    try:
        return str(parse_type(t))
    except ValueError as e:
        raise BuilderError(f"column {column!r}: {e}") from None


def _arrow_type_name(t: Any, column: str) -> str:
    """Contract type name of a pyarrow type, for schemas given as pyarrow.Schema."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover
        pa = None
    if pa is not None and isinstance(t, pa.DataType):
        simple = {pa.bool_(): "boolean", pa.int32(): "int32", pa.int64(): "int64", pa.float64(): "float64",
                  pa.string(): "string", pa.large_string(): "string", pa.date32(): "date"}
        if t in simple:
            return simple[t]
        if pa.types.is_decimal(t):
            return f"decimal({t.precision},{t.scale})"
    raise BuilderError(f"column {column!r}: type {t!r} has no contract equivalent")


def _columns(items: Iterable[Any], named: Mapping[str, Any], what: str) -> tuple[Column, ...]:
    """Normalise the column forms described in the module docstring into (name, expr) pairs."""
    out: list[Column] = []

    def add(item: Any) -> None:
        if isinstance(item, str):
            out.append((_text(item, f"{what} column"), item))
        elif isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, str) for x in item):
            out.append((_text(item[0], f"{what} column name"), _text(item[1], f"{what} expression")))
        elif isinstance(item, Mapping) and set(item) == {"name", "expr"}:
            add((item["name"], item["expr"]))
        elif isinstance(item, Mapping):
            for k, v in item.items():
                add((k, v))
        elif isinstance(item, (list, tuple)):
            for x in item:
                add(x)
        else:
            raise BuilderError(f"{what}: cannot read a column from {item!r}")

    for item in items:
        add(item)
    for k, v in named.items():
        add((k, v))
    names = [n for n, _ in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise BuilderError(f"{what}: duplicate column names {sorted(dup)}")
    return tuple(out)


def _expr_list(keys: Any, what: str) -> tuple[str, ...]:
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, (list, tuple)) or not keys:
        raise BuilderError(f"{what} must be a non-empty list of expressions, got {keys!r}")
    return tuple(_text(k, what) for k in keys)


def _bare_column(expr: str) -> str | None:
    """The column name if `expr` is just a (possibly double-quoted) column reference."""
    e = expr.strip()
    if len(e) >= 2 and e[0] == e[-1] == '"' and '"' not in e[1:-1]:
        return e[1:-1]
    if NAME_RE.match(e) and e.lower() not in _KEYWORDS:
        return e
    return None


def _check_refs(node: Dataflow, exprs: Iterable[str], what: str) -> None:
    cols = node.columns
    if cols is None:
        return
    known = {c.lower() for c in cols}
    for e in exprs:
        c = _bare_column(e)
        if c is not None and c.lower() not in known:
            raise BuilderError(f"{what}: no column {c!r} in the input (columns: {', '.join(cols)})")


# ---------------------------------------------------------------------------------- nodes
@dataclass(frozen=True, eq=False, kw_only=True)
class Op:
    """An operation of the request. Identity, not value, decides whether two nodes are the same."""

    kind: ClassVar[str] = ""
    name: str | None = None
    session: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_op_name(self.name)
        # computed once, from the inputs' cached values: no recursion however deep the plan
        object.__setattr__(self, "_columns", self._compute_columns())

    def _compute_columns(self) -> tuple[str, ...] | None:
        return None

    def _deps(self) -> tuple[Op, ...]:
        return ()

    def _body(self, ref) -> dict:  # pragma: no cover - every kind overrides
        raise NotImplementedError

    def _main_input(self) -> Op | None:
        """The input a chain of operations continues through (the probe side of a join)."""
        return None

    def _describe(self) -> str:  # pragma: no cover - every kind overrides
        return self.kind

    def _step(self) -> str:
        """This operation alone, e.g. `filter(a > 1)`, with ` as NAME` when it is named."""
        return self._describe() + (f" as {self.name}" if self.name else "")

    def _chain(self) -> str:
        """The operations from the first read to this one, `read('t.jsonl') -> filter(a > 1)`
        (iterative: deep plans; long chains keep their ends)."""
        steps: list[str] = []
        node: Op | None = self
        while node is not None:
            steps.append(node._step())
            node = node._main_input()
        steps.reverse()
        if len(steps) > REPR_MAX_STEPS:
            keep = REPR_MAX_STEPS // 2
            steps = steps[:keep] + [f"... {len(steps) - 2 * keep} more ..."] + steps[-keep:]
        return " -> ".join(steps)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._chain()}>"


REPR_MAX_STEPS = 12  # a repr shows at most this many operations of a chain
REPR_TEXT = 60  # expressions longer than this are cut in a repr


def _short(text: str, width: int = REPR_TEXT) -> str:
    t = " ".join(text.split())
    return t if len(t) <= width else t[:width - 1] + "…"


def _cols_text(cols: Sequence[Column]) -> str:
    return ", ".join(n if n == e else f"{n}={_short(e, 30)}" for n, e in cols)


class Dataflow(Op):
    """Something that produces rows: the fluent methods live here."""

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Output column names when the client can know them without typing expressions."""
        return self._columns

    def _ref_op(self) -> Op:
        return self

    def _child(self, cls, *args, name: str | None, **kw):
        return cls(*args, name=name, session=self.session, **kw)

    def filter(self, condition: str, *, name: str | None = None) -> Filter:
        return self._child(Filter, self, _text(condition, "filter condition"), name=name)

    def project(self, *columns: Any, name: str | None = None, **named: str) -> Project:
        cols = _columns(columns, named, "project")
        if not cols:
            raise BuilderError("project needs at least one column")
        _check_refs(self, (e for _, e in cols), "project")
        return self._child(Project, self, cols, name=name)

    def join(self, build: Dataflow, on: Any = None, *, build_keys: Any = None, probe_keys: Any = None,
             type: str = "inner", condition: str | None = None, columns: Any = None,
             name: str | None = None) -> Join:
        """Join with `self` as the probe (left) side and `build` as the build side.

        `on`: a column name or list; each item a name present on both sides, or a pair
        `(probe_expr, build_expr)`. Or give `build_keys` and `probe_keys` explicitly."""
        if not isinstance(build, Dataflow):
            raise BuilderError(f"join: the build side must be a dataflow node, got {build!r}")
        if on is not None:
            if build_keys is not None or probe_keys is not None:
                raise BuilderError("join: give either on= or build_keys=/probe_keys=, not both")
            items = [on] if isinstance(on, str) else list(on) if isinstance(on, (list, tuple)) else None
            if not items:
                raise BuilderError(f"join: on= must be a column name or a non-empty list, got {on!r}")
            pk, bk = [], []
            for it in items:
                if isinstance(it, str):
                    pk.append(it)
                    bk.append(it)
                elif isinstance(it, tuple) and len(it) == 2:
                    pk.append(it[0])
                    bk.append(it[1])
                else:
                    raise BuilderError(f"join: cannot read a key from {it!r}")
            probe_keys, build_keys = pk, bk
        if build_keys is None or probe_keys is None:
            raise BuilderError("join needs on= or both build_keys= and probe_keys=")
        bk, pk = _expr_list(build_keys, "join build_keys"), _expr_list(probe_keys, "join probe_keys")
        if len(bk) != len(pk):
            raise BuilderError(f"join: {len(bk)} build keys but {len(pk)} probe keys")
        if type not in JOIN_TYPES:
            raise BuilderError(f"join type {type!r} must be one of {', '.join(JOIN_TYPES)}")
        _check_refs(build, bk, "join build_keys")
        _check_refs(self, pk, "join probe_keys")
        cols = None if columns is None else _columns([columns], {}, "join columns")
        if cols == ():
            raise BuilderError("join columns= must not be empty")
        if condition is not None:
            _text(condition, "join condition")
        return self._child(Join, build, self, bk, pk, type, condition, cols, name=name)

    def aggregate(self, group_by: Any = None, aggregates: Any = None, *, mode: str = "complete",
                  name: str | None = None, **named: Any) -> Aggregate:
        """Group and aggregate. Aggregates as keywords: `total="sum(price)"`, `n="count(*)"`,
        `hi=("max", "price")`; or `aggregates=` a list of `{"name","fn","expr"}` dicts or
        `(name, fn, expr)` / `(name, "fn(expr)")` tuples, or a mapping of name to either form."""
        groups = () if group_by is None else _columns([group_by], {}, "group_by")
        aggs: list[tuple[str, str, str | None]] = []
        if aggregates is not None:
            items = aggregates.items() if isinstance(aggregates, Mapping) else aggregates
            for it in items:
                aggs.append(_aggregate_item(it))
        for k, v in named.items():
            aggs.append(_aggregate_item((k, v)))
        if not groups and not aggs:
            raise BuilderError("aggregate needs group_by columns or aggregates")
        if mode not in AGG_MODES:
            raise BuilderError(f"aggregate mode {mode!r} must be one of {', '.join(AGG_MODES)}")
        names = [n for n, _ in groups] + [a[0] for a in aggs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise BuilderError(f"aggregate: duplicate output names {sorted(dup)}")
        _check_refs(self, [e for _, e in groups], "aggregate group_by")
        if mode != "final":  # final inputs are partial states, referenced by the aggregate's name
            _check_refs(self, [a[2] for a in aggs if a[2] is not None], "aggregate")
        return self._child(Aggregate, self, groups, tuple(aggs), mode, name=name)

    def shuffle(self, keys: Any, partitions: int, *, name: str | None = None) -> Shuffle:
        ks = _expr_list(keys, "shuffle keys")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise BuilderError(f"shuffle partitions must be an integer >= 1, got {partitions!r}")
        _check_refs(self, ks, "shuffle keys")
        return self._child(Shuffle, self, ks, partitions, name=name)

    def send(self, host: str, port: int, transport: str = "tcp", *, name: str | None = None) -> Send:
        """Deliver this node's rows to `host:port` (where the client listens)."""
        _text(host, "send host")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise BuilderError(f"send port must be an integer in 1..65535, got {port!r}")
        return Send(self, _text(transport, "send transport").lower(), host, port, name=name,
                    session=self.session)

    def collect(self, *, host: str = "127.0.0.1", timeout: float | None = None,
                progress: Any = None) -> pa.Table:
        """Run this dataflow and return its rows (see `Jumpgate.collect`; `progress=True` shows a
        progress display, a callable gets each `ProgressUpdate`)."""
        if self.session is None:
            raise BuilderError("this node was built without a Jumpgate session: use Jumpgate.collect(node)")
        return self.session.collect(self, host=host, timeout=timeout, progress=progress)

    def to_pandas(self, *, host: str = "127.0.0.1", timeout: float | None = None, progress: Any = None,
                  **options: Any) -> Any:
        """Run this dataflow and return its rows as a pandas DataFrame (needs pandas:
        `pip install 'jumpgate[pandas]'`; checked before anything runs). `progress` as for `collect`."""
        from .frames import require_pandas, to_pandas

        require_pandas()
        return to_pandas(self.collect(host=host, timeout=timeout, progress=progress), **options)

    def explain(self, *, name: str | None = None) -> Any:
        """Compile without running and return the plan (see `Jumpgate.explain`): `print()` it."""
        if self.session is None:
            raise BuilderError("this node was built without a Jumpgate session: use Jumpgate.explain(node)")
        return self.session.explain(self, name=name)

    def __repr__(self) -> str:
        return f"<Dataflow {self._chain()}>"


def _aggregate_item(item: Any) -> tuple[str, str, str | None]:
    """(name, fn, expr) from one aggregate in any accepted form."""
    if isinstance(item, Mapping):
        if "fn" not in item or "name" not in item:
            raise BuilderError(f"aggregate {item!r} needs 'name' and 'fn'")
        name, fn, expr = item["name"], item["fn"], item.get("expr")
    elif isinstance(item, tuple) and len(item) == 3:
        name, fn, expr = item
    elif isinstance(item, tuple) and len(item) == 2:
        name, spec = item
        if isinstance(spec, str):
            m = _AGG_CALL.match(spec)
            if not m:
                raise BuilderError(f"aggregate {name!r}: {spec!r} is not of the form fn(expr), e.g. sum(price)")
            fn, expr = m.group(1), m.group(2).strip()
        elif isinstance(spec, (tuple, list)) and 1 <= len(spec) <= 2:
            fn, expr = spec[0], spec[1] if len(spec) == 2 else None
        else:
            raise BuilderError(f"aggregate {name!r}: cannot read {spec!r}; use 'fn(expr)' or ('fn', 'expr')")
    else:
        raise BuilderError(f"cannot read an aggregate from {item!r}")
    _text(name, "aggregate name")
    fn = _text(fn, f"aggregate {name!r} function").lower()
    if expr is not None and not isinstance(expr, str):
        raise BuilderError(f"aggregate {name!r}: the expression must be a string, got {expr!r}")
    if fn == "count" and expr is not None and expr.strip() == "*":
        fn, expr = "count_star", None
    if fn == "count_star":
        if expr not in (None, "", "*"):
            raise BuilderError(f"aggregate {name!r}: count_star takes no expression")
        expr = None
    elif fn not in AGG_FUNCTIONS:
        raise BuilderError(f"aggregate {name!r}: unknown function {fn!r}; one of {', '.join(AGG_FUNCTIONS)}")
    else:
        expr = _text(expr, f"aggregate {name!r} expression")
    return name, fn, expr


@dataclass(frozen=True, eq=False, repr=False)
class Read(Dataflow):
    kind: ClassVar[str] = "read"
    path: str | tuple[str, ...]
    format: str
    schema: tuple[tuple[str, str], ...]

    def _compute_columns(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.schema)

    def _body(self, ref) -> dict:
        path = self.path if isinstance(self.path, str) else list(self.path)
        return {"path": path, "format": self.format,
                "schema": [{"name": n, "type": t} for n, t in self.schema]}

    def _describe(self) -> str:
        paths = [self.path] if isinstance(self.path, str) else list(self.path)
        shown = ", ".join(repr(p) for p in paths[:3]) + (f", +{len(paths) - 3}" if len(paths) > 3 else "")
        return f"read({shown}" + (f", {self.format}" if self.format != "json" else "") + ")"


def read(path: str | Sequence[str], format: str = "json", schema: Any = None, *, name: str | None = None,
         session: Any = None) -> Read:
    """A `read` operation. `schema`: a mapping name → type, a list of (name, type) pairs or
    {"name","type"} dicts, or a pyarrow.Schema. Types are contract names (`int32`, `decimal(12,2)`)."""
    if isinstance(path, str):
        _text(path, "read path")
    elif isinstance(path, (list, tuple)) and path:
        path = tuple(_text(p, "read path") for p in path)
    else:
        raise BuilderError(f"read path must be a string or a non-empty list of strings, got {path!r}")
    fmt = _text(format, "read format").lower()
    return Read(path, fmt, _schema(schema), name=name, session=session)


def _schema(schema: Any) -> tuple[tuple[str, str], ...]:
    if schema is None:
        raise BuilderError("read needs a schema (the server never guesses types)")
    try:
        import pyarrow as pa

        if isinstance(schema, pa.Schema):
            schema = [(f.name, f.type) for f in schema]
    except ImportError:  # pragma: no cover
        pass
    items = schema.items() if isinstance(schema, Mapping) else schema
    out = []
    for it in items:
        if isinstance(it, Mapping):
            if set(it) != {"name", "type"}:
                raise BuilderError(f"schema entry {it!r} needs exactly 'name' and 'type'")
            it = (it["name"], it["type"])
        if not isinstance(it, (tuple, list)) or len(it) != 2:
            raise BuilderError(f"cannot read a schema column from {it!r}")
        n = _text(it[0], "schema column name")
        out.append((n, _type_name(it[1], n)))
    if not out:
        raise BuilderError("read schema must not be empty")
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise BuilderError(f"read schema has duplicate columns {sorted({n for n in names if names.count(n) > 1})}")
    return tuple(out)


@dataclass(frozen=True, eq=False, repr=False)
class Filter(Dataflow):
    kind: ClassVar[str] = "filter"
    input: Dataflow
    condition: str

    def _compute_columns(self):
        return self.input.columns

    def _deps(self):
        return (self.input._ref_op(),)

    def _body(self, ref) -> dict:
        return {"input": ref(self.input), "condition": self.condition}

    def _main_input(self):
        return self.input

    def _describe(self) -> str:
        return f"filter({_short(self.condition)})"


@dataclass(frozen=True, eq=False, repr=False)
class Project(Dataflow):
    kind: ClassVar[str] = "project"
    input: Dataflow
    exprs: tuple[Column, ...]

    def _compute_columns(self):
        return tuple(n for n, _ in self.exprs)

    def _deps(self):
        return (self.input._ref_op(),)

    def _body(self, ref) -> dict:
        return {"input": ref(self.input), "columns": [{"name": n, "expr": e} for n, e in self.exprs]}

    def _main_input(self):
        return self.input

    def _describe(self) -> str:
        return f"project({_short(_cols_text(self.exprs), 2 * REPR_TEXT)})"


@dataclass(frozen=True, eq=False, repr=False)
class Join(Dataflow):
    kind: ClassVar[str] = "join"
    build: Dataflow
    probe: Dataflow
    build_keys: tuple[str, ...]
    probe_keys: tuple[str, ...]
    type: str = "inner"
    condition: str | None = None
    output: tuple[Column, ...] | None = None

    def _compute_columns(self):
        if self.output is not None:
            return tuple(n for n, _ in self.output)
        if self.type in ("left_semi", "left_anti"):
            return None  # which sides a semi/anti join keeps without columns= is the server's call
        p, b = self.probe.columns, self.build.columns
        if p is None or b is None:
            return None
        clash = sorted(set(p) & set(b))
        if clash:
            raise BuilderError(f"join{' ' + self.name if self.name else ''}: both sides have columns {clash}; "
                               "pass columns= to name the output")
        return p + b

    def _deps(self):  # probe first: the request then reads like the thesis' Figure A.1
        return (self.probe._ref_op(), self.build._ref_op())

    def _body(self, ref) -> dict:
        out = {"build": ref(self.build), "probe": ref(self.probe), "build_keys": list(self.build_keys),
               "probe_keys": list(self.probe_keys), "type": self.type}
        if self.condition is not None:
            out["condition"] = self.condition
        if self.output is not None:
            out["columns"] = [{"name": n, "expr": e} for n, e in self.output]
        return out

    def _main_input(self):
        return self.probe

    def _describe(self) -> str:
        keys = ", ".join(p if p == b else f"{p}={b}" for p, b in zip(self.probe_keys, self.build_keys))
        build = self.build._chain()
        extra = "" if self.type == "inner" else f", {self.type}"
        return f"join({_short(build, 2 * REPR_TEXT)} on {_short(keys)}{extra})"


@dataclass(frozen=True, eq=False, repr=False)
class Aggregate(Dataflow):
    kind: ClassVar[str] = "aggregate"
    input: Dataflow
    group_by: tuple[Column, ...]
    aggregates: tuple[tuple[str, str, str | None], ...]
    mode: str = "complete"

    def _compute_columns(self):
        names = [n for n, _ in self.group_by]
        for n, fn, _ in self.aggregates:
            names += [f"{n}__sum", f"{n}__count"] if self.mode == "partial" and fn == "avg" else [n]
        return tuple(names)

    def _deps(self):
        return (self.input._ref_op(),)

    def _body(self, ref) -> dict:
        aggs = [{"name": n, "fn": fn, **({} if e is None else {"expr": e})} for n, fn, e in self.aggregates]
        return {"input": ref(self.input), "group_by": [{"name": n, "expr": e} for n, e in self.group_by],
                "aggregates": aggs, "mode": self.mode}

    def _main_input(self):
        return self.input

    def _describe(self) -> str:
        parts = []
        if self.group_by:
            parts.append("by " + _cols_text(self.group_by))
        if self.aggregates:
            parts.append(", ".join(f"{n}=" + ("count(*)" if fn == "count_star" else f"{fn}({'*' if e is None else _short(e, 30)})") for n, fn, e in self.aggregates))
        mode = "" if self.mode == "complete" else f", {self.mode}"
        return f"aggregate({_short('; '.join(parts), 2 * REPR_TEXT)}{mode})"


@dataclass(frozen=True, eq=False, repr=False)
class Shuffle(Op):
    """P outputs; `s[i]` is the i-th, a dataflow node of its own."""

    kind: ClassVar[str] = "shuffle"
    input: Dataflow
    keys: tuple[str, ...]
    partitions: int

    def __getitem__(self, i: int) -> ShufflePartition:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"shuffle outputs are indexed by int, not {type(i).__name__}")
        if i < 0:
            i += self.partitions
        if not 0 <= i < self.partitions:
            raise IndexError(f"shuffle has {self.partitions} outputs, no [{i}]")
        return ShufflePartition(self, i, session=self.session)

    def __len__(self) -> int:
        return self.partitions

    def __iter__(self):
        return (self[i] for i in range(self.partitions))

    def _deps(self):
        return (self.input._ref_op(),)

    def _body(self, ref) -> dict:
        return {"input": ref(self.input), "keys": list(self.keys), "partitions": self.partitions}

    def _main_input(self):
        return self.input

    def _describe(self) -> str:
        return f"shuffle({_short(', '.join(self.keys))}; {self.partitions})"

    def collect(self, *, host: str = "127.0.0.1", timeout: float | None = None,
                progress: Any = None) -> list[pa.Table]:
        """Run and return one table per output, in order."""
        if self.session is None:
            raise BuilderError("this node was built without a Jumpgate session: use Jumpgate.collect_many")
        base = self.name or "out"
        tables = self.session.collect_many({f"{base}_{i}": p for i, p in enumerate(self)},
                                           host=host, timeout=timeout, progress=progress)
        return list(tables.values())


@dataclass(frozen=True, eq=False, repr=False)
class ShufflePartition(Dataflow):
    """Output `index` of a shuffle: referenced as `NAME[index]`, not an operation itself."""

    source: Shuffle
    index: int

    def _compute_columns(self):
        return self.source.input.columns

    def _ref_op(self) -> Op:
        return self.source

    def _main_input(self):
        return self.source.input

    def _step(self) -> str:
        src = self.source
        return f"{src._describe()}[{self.index}]" + (f" as {src.name}[{self.index}]" if src.name else "")


@dataclass(frozen=True, eq=False, repr=False)
class Send(Op):
    kind: ClassVar[str] = "send"
    input: Dataflow
    transport: str
    host: str
    port: int

    def _deps(self):
        return (self.input._ref_op(),)

    def _body(self, ref) -> dict:
        return {"input": ref(self.input), "transport": self.transport, "host": self.host, "port": self.port}

    def _main_input(self):
        return self.input

    def _describe(self) -> str:
        return f"send({self.transport}://{self.host}:{self.port})"


# ---------------------------------------------------------------------------------- request JSON
def _post_order(roots: Sequence[Op]) -> list[Op]:
    """Every operation reachable from `roots`, inputs first, each once (iterative: deep plans)."""
    order: list[Op] = []
    done: set[int] = set()
    for root in roots:
        stack: list[tuple[Op, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in done:
                continue
            if expanded:
                done.add(id(node))
                order.append(node)
                continue
            stack.append((node, True))
            for dep in reversed(node._deps()):
                if id(dep) not in done:
                    stack.append((dep, False))
    return order


def build_request(sends: Iterable[Send], name: str | None = None) -> dict:
    """The contract §1 request for the given sends and everything they depend on."""
    flat: list[Send] = []
    for s in sends:
        if isinstance(s, (list, tuple)):
            flat.extend(s)
        else:
            flat.append(s)
    if not flat:
        raise BuilderError("a request needs at least one send")
    for s in flat:
        if not isinstance(s, Send):
            raise BuilderError(f"requests are built from send nodes (node.send(host, port)), got {s!r}")
    ops = _post_order(flat)
    names: dict[int, str] = {}
    taken: dict[str, Op] = {}
    for op in ops:
        if op.name is not None:
            if op.name in taken:
                raise BuilderError(f"two different operations are named {op.name!r}")
            taken[op.name] = op
            names[id(op)] = op.name
    for i, op in enumerate(ops):
        if op.name is None:
            cand = f"{op.kind}_{i}"
            while cand in taken:
                cand += "_"
            taken[cand] = op
            names[id(op)] = cand

    def ref(node: Dataflow) -> str:
        if isinstance(node, ShufflePartition):
            return f"{names[id(node.source)]}[{node.index}]"
        return names[id(node)]

    operations = [{"kind": op.kind, "name": names[id(op)], **op._body(ref)} for op in ops]
    request: dict = {"operations": operations}
    if name is not None:
        request = {"name": _text(name, "request name"), **request}
    return request
