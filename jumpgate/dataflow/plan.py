"""The logical plan: a validated, typed, immutable DAG of dataflow operations (contract §1).

`jumpgate.dataflow.request.parse_request` builds it from request JSON; the compiler only ever sees
these nodes. Operations reference their inputs through `InputRef`, which names an operation and one
of its outputs (only `shuffle` has more than one).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from ..contract.types import Schema
from .expr import Expr


@dataclass(frozen=True, slots=True)
class InputRef:
    op: str
    port: int = 0

    def __str__(self) -> str:
        return self.op if self.port == 0 and "[" not in self.op else f"{self.op}[{self.port}]"


@dataclass(frozen=True, slots=True)
class NamedExpr:
    name: str
    expr: Expr


class FileFormat(StrEnum):
    JSON = "json"
    ORC = "orc"
    PARQUET = "parquet"
    CSV = "csv"


@dataclass(frozen=True, slots=True)
class Read:
    name: str
    paths: tuple[str, ...]  # absolute paths inside the data root, resolved and checked
    format: FileFormat
    schema: Schema
    sizes: tuple[int, ...] = ()  # bytes of each file, as the storage reported them at parse time
    holders: tuple[tuple[str, ...], ...] = ()  # per file, the nodes holding it; () or empty: any
    kind: str = field(default="read", init=False)


@dataclass(frozen=True, slots=True)
class Filter:
    name: str
    input: InputRef
    condition: Expr
    kind: str = field(default="filter", init=False)


@dataclass(frozen=True, slots=True)
class Project:
    name: str
    input: InputRef
    columns: tuple[NamedExpr, ...]
    kind: str = field(default="project", init=False)


class RequestJoinType(StrEnum):
    """The join types a request may name (contract §1; left = the probe side)."""

    INNER = "inner"
    LEFT_SEMI = "left_semi"
    LEFT_ANTI = "left_anti"
    LEFT_OUTER = "left_outer"


class JoinType(StrEnum):
    """The request's join types, and the compiler's own `right_outer`: a `left_outer` join run with
    its sides swapped (compiler/join_sides.py), which keeps its *build* side's rows that nothing
    matched. No request names it."""

    INNER = "inner"
    LEFT_SEMI = "left_semi"
    LEFT_ANTI = "left_anti"
    LEFT_OUTER = "left_outer"
    RIGHT_OUTER = "right_outer"


@dataclass(frozen=True, slots=True)
class Join:
    """Hash join. Key expressions are bound against their own side; `condition` and `columns` are
    bound against the probe's columns followed by the build's."""

    name: str
    build: InputRef
    probe: InputRef
    build_keys: tuple[Expr, ...]
    probe_keys: tuple[Expr, ...]
    type: JoinType = JoinType.INNER
    condition: Expr | None = None
    columns: tuple[NamedExpr, ...] | None = None
    kind: str = field(default="join", init=False)


class AggFn(StrEnum):
    SUM = "sum"
    COUNT = "count"
    COUNT_STAR = "count_star"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


class AggMode(StrEnum):
    COMPLETE = "complete"
    PARTIAL = "partial"
    FINAL = "final"


@dataclass(frozen=True, slots=True)
class AggregateCall:
    name: str
    fn: AggFn
    expr: Expr | None  # None for count_star
    # `count(DISTINCT x)` and the like: over each distinct non-NULL value once (complete mode only).
    # The compiler rewrites it into aggregations without it before any NCA sees the plan
    # (compiler/distinct.py), so no plugin has to know it.
    distinct: bool = False


@dataclass(frozen=True, slots=True)
class Aggregate:
    name: str
    input: InputRef
    group_by: tuple[NamedExpr, ...]
    aggregates: tuple[AggregateCall, ...]
    mode: AggMode = AggMode.COMPLETE
    kind: str = field(default="aggregate", init=False)


@dataclass(frozen=True, slots=True)
class Shuffle:
    name: str
    input: InputRef
    keys: tuple[Expr, ...]
    partitions: int
    kind: str = field(default="shuffle", init=False)


@dataclass(frozen=True, slots=True)
class Send:
    name: str
    input: InputRef
    transport: str
    host: str
    port: int
    udp_version: int = 1  # UDP: the transport version the client's receiver takes (docs/udp-transport.md)
    kind: str = field(default="send", init=False)


Operation = Read | Filter | Project | Join | Aggregate | Shuffle | Send


def inputs_of(op: Operation) -> tuple[InputRef, ...]:
    """Input edges of an operation; a join's are (build, probe) in that order."""
    if isinstance(op, Read):
        return ()
    if isinstance(op, Join):
        return (op.build, op.probe)
    return (op.input,)


def output_count(op: Operation) -> int:
    if isinstance(op, Shuffle):
        return op.partitions
    if isinstance(op, Send):
        return 0
    return 1


@dataclass(frozen=True)
class LogicalPlan:
    """Operations in a topological order (inputs first), with each one's output schema."""

    name: str
    ops: tuple[Operation, ...]
    schemas: dict[str, Schema]  # output schema of every operation except sends
    op_paths: dict[str, str] = field(default_factory=dict)  # name -> "operations[i]" in the request

    # Lookups by name are indexed once per plan: plugins and the compiler call them for every
    # operation of a chain, and a scan of `ops` each time made a chain of N filters O(N^2).

    @cached_property
    def _by_name(self) -> dict[str, Operation]:
        return {o.name: o for o in self.ops}

    @cached_property
    def _consumers(self) -> dict[str, tuple[tuple[Operation, InputRef], ...]]:
        out: dict[str, list[tuple[Operation, InputRef]]] = {}
        for o in self.ops:
            for ref in inputs_of(o):
                out.setdefault(ref.op, []).append((o, ref))
        return {name: tuple(edges) for name, edges in out.items()}

    @cached_property
    def _sends(self) -> tuple[Send, ...]:
        return tuple(o for o in self.ops if isinstance(o, Send))

    def op(self, name: str) -> Operation:
        return self._by_name[name]

    def consumers(self, name: str) -> list[tuple[Operation, InputRef]]:
        """Operations that read an output of `name`, with the edge they read it by, in plan order."""
        return list(self._consumers.get(name, ()))

    @property
    def sends(self) -> list[Send]:
        return list(self._sends)

    def input_schema(self, ref: InputRef) -> Schema:
        return self.schemas[ref.op]


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name2`, `name3`, ... : the first not in `taken`, which it joins (the names of
    operations and columns the compiler adds when it rewrites a plan)."""
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}{n}"
    taken.add(out)
    return out
