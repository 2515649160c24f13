"""Dataflow request JSON → `LogicalPlan` (contract §1).

Checks run in this order, each failing with a `RequestError` whose `path` names the JSON field:
1. shape, by the request's pydantic models (models.py, validation.py): the body, `operations`
   (counted against `RequestLimits.max_operations` first: beyond it is a `RequestTooLarge`, 413),
   each operation's `kind`, `name` and fields (unknown fields are rejected: they are usually typos;
   optional fields may be null), every value one field decides (types, ranges, enums, names,
   reference syntax, send addresses, type names);
2. names: unique; references: `input`/`build`/`probe` name an existing, non-send operation, with
   `NAME[i]` for shuffle outputs (and only for them), 0 <= i < partitions;
3. the graph: no cycle; at least one send; every operation feeds some send, and every output of
   a shuffle is read (rows routed to an unread output would be lost silently);
4. per operation, in topological order: expressions parsed and bound against the input schemas,
   output schemas and what else needs more than one field (`opbind.py`, `aggregates.py`), read
   paths (`paths.py`).

Every expression is checked against the other limits before it is parsed (dataflow/limits.py).
Every step is linear in the size of the request and none recurses on it.

Operations may appear in any order; the plan lists them in a topological order that keeps the
request's order where the dataflow allows. An input may be read by several operations.
"""
from __future__ import annotations

import difflib
import heapq
from pathlib import Path

from ..contract.errors import RequestError
from ..contract.types import Schema
from .aggregates import bind_aggregate
from .limits import DEFAULT_LIMITS, RequestLimits
from .models import OPERATIONS, REFERENCE_RE, operation_fields, reference_fields
from .opbind import RawOp, bind_filter, bind_join, bind_project, bind_read, bind_send, bind_shuffle
from .plan import InputRef, LogicalPlan, Operation
from .storage import LocalStorage, Storage
from .validation import validate_request

# kind -> (required fields, optional fields), besides "kind" and "name": from the models.
FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = operation_fields()
# kind -> the fields naming its inputs, in the order of its input edges (a join's: build, probe).
INPUT_FIELDS: dict[str, tuple[str, ...]] = {kind: reference_fields(kind) for kind in OPERATIONS}


def parse_request(body: object, storage: Storage | Path | str,
                  limits: RequestLimits = DEFAULT_LIMITS) -> LogicalPlan:
    """Validate a dataflow request and build its typed logical plan. Reads' files are looked up in
    `storage` (dataflow/storage.py); a path stands for the data root of this machine. `limits`
    bound the request's size (dataflow/limits.py; a service passes its settings')."""
    if isinstance(storage, (str, Path)):
        storage = LocalStorage(storage)
    request = validate_request(body, limits)  # 1. shape
    items = body["operations"]  # type: ignore[index]  # a dict now; the binders read its raw fields
    ops = [RawOp(i, m.kind, m.name, items[i], limits, m) for i, m in enumerate(request.operations)]
    by_name = _unique_names(ops)
    refs = {op.name: _references(op, by_name) for op in ops}
    order = _topological(ops, refs, by_name)
    _check_usage(ops, refs, by_name)
    return _bind(request.name or "", order, refs, storage)


# --- 2. names and references -------------------------------------------------------------------

def _unique_names(ops: list[RawOp]) -> dict[str, RawOp]:
    by_name: dict[str, RawOp] = {}
    for op in ops:
        if op.name in by_name:
            raise RequestError(f"duplicate operation name {op.name!r} (also {by_name[op.name].path})",
                               op.at("name"), op.name)
        by_name[op.name] = op
    return by_name


def _references(op: RawOp, by_name: dict[str, RawOp]) -> dict[str, InputRef]:
    """The input edges of `op`, by field name (their syntax is the models')."""
    out = {}
    for field in INPUT_FIELDS[op.kind]:
        path = op.at(field)
        text = op.obj[field]
        m = REFERENCE_RE.fullmatch(text)
        assert m is not None, text  # the model's check
        target = by_name.get(m.group(1))
        if target is None:
            hint = difflib.get_close_matches(m.group(1), list(by_name), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            raise RequestError(f"unknown operation {m.group(1)!r}{extra}", path, text)
        out[field] = _port(target, m.group(2), path, text)
    return out


def _port(target: RawOp, index: str | None, path: str, text: str) -> InputRef:
    if target.kind == "send":
        raise RequestError(f"{target.name!r} is a send, which has no output to read", path, text)
    if target.kind == "shuffle":
        count = target.obj["partitions"]
        if index is None:
            raise RequestError(f"{target.name!r} is a shuffle with {count} output(s); read one of them as "
                               f"{target.name}[0]..{target.name}[{count - 1}]", path, text)
        if int(index) >= count:
            raise RequestError(f"shuffle {target.name!r} has {count} outputs (0..{count - 1}); "
                               f"{text!r} is out of range", path, text)
        return InputRef(target.name, int(index))
    if index is not None:
        raise RequestError(f"{target.name!r} is a {target.kind} with a single output; read it as "
                           f"{target.name!r} without an index", path, text)
    return InputRef(target.name)


# --- 3. the graph ------------------------------------------------------------------------------

def _topological(ops: list[RawOp], refs: dict[str, dict[str, InputRef]],
                 by_name: dict[str, RawOp]) -> list[RawOp]:
    """Kahn's algorithm, ties broken by position in the request; a cycle is an error."""
    waiting = {op.name: len(refs[op.name]) for op in ops}
    readers: dict[str, list[str]] = {op.name: [] for op in ops}
    for op in ops:
        for ref in refs[op.name].values():
            readers[ref.op].append(op.name)
    ready = [op.index for op in ops if waiting[op.name] == 0]
    heapq.heapify(ready)
    order: list[RawOp] = []
    while ready:
        op = ops[heapq.heappop(ready)]
        order.append(op)
        for reader in readers[op.name]:
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, by_name[reader].index)
    if len(order) < len(ops):
        _report_cycle([op for op in ops if waiting[op.name] > 0], refs)
    return order


def _report_cycle(stuck: list[RawOp], refs: dict[str, dict[str, InputRef]]) -> None:
    stuck_names = {op.name for op in stuck}
    by_name = {op.name: op for op in stuck}
    chain = [stuck[0].name]
    position = {chain[0]: 0}  # where each name is in `chain`: the walk stays linear
    while True:  # every stuck op reads another stuck op, so this walk must revisit one
        field, ref = next((f, r) for f, r in refs[chain[-1]].items() if r.op in stuck_names)
        if ref.op in position:
            cycle = chain[position[ref.op]:] + [ref.op]
            break
        position[ref.op] = len(chain)
        chain.append(ref.op)
    ring = cycle[:-1]  # start at the member listed first in the request, for a stable message
    start = min(range(len(ring)), key=lambda i: by_name[ring[i]].index)
    ring = ring[start:] + ring[:start]
    cycle = ring + [ring[0]]
    first = by_name[cycle[0]]
    field = next(f for f, r in refs[first.name].items() if r.op == cycle[1])
    shown = cycle if len(cycle) <= 21 else [*cycle[:10], f"... ({len(cycle) - 12:,} more)", *cycle[-2:]]
    raise RequestError(f"operations form a cycle: {' -> '.join(shown)} (each reads the next)",
                       first.at(field), ", ".join(shown[:-1]))


def _check_usage(ops: list[RawOp], refs: dict[str, dict[str, InputRef]], by_name: dict[str, RawOp]) -> None:
    sends = [op for op in ops if op.kind == "send"]
    if not sends:
        raise RequestError("the request has no send operation, so its results would go nowhere",
                           "operations")
    used: set[str] = set()
    stack = [op.name for op in sends]
    while stack:
        name = stack.pop()
        if name not in used:
            used.add(name)
            stack.extend(ref.op for ref in refs[name].values())
    for op in ops:
        if op.name not in used:
            raise RequestError(f"operation {op.name!r} is not used: no send consumes its output, directly "
                               "or through other operations", op.path, op.name)
    read_ports: dict[str, set[int]] = {}
    for op in ops:
        for ref in refs[op.name].values():
            read_ports.setdefault(ref.op, set()).add(ref.port)
    for op in ops:
        ports = read_ports.get(op.name, set())
        if op.kind == "shuffle" and len(ports) < op.obj["partitions"]:  # every port is < partitions
            unread = _first_missing(ports, op.obj["partitions"], 10)
            listed = ", ".join(f"{op.name}[{i}]" for i in unread)
            more = op.obj["partitions"] - len(ports) - len(unread)
            raise RequestError(f"shuffle output(s) {listed}{f' and {more} more' if more else ''} are not read "
                               "by any operation; rows routed there would be lost", op.at("partitions"), op.name)


def _first_missing(present: set[int], count: int, limit: int) -> list[int]:
    """Up to `limit` integers in 0..count-1 missing from `present` (cheap even for a huge count)."""
    missing: list[int] = []
    i = 0
    while i < count and len(missing) < limit:
        if i not in present:
            missing.append(i)
        i += 1
    return missing


# --- 4. binding --------------------------------------------------------------------------------

def _bind(label: str, order: list[RawOp], refs: dict[str, dict[str, InputRef]],
          storage: Storage) -> LogicalPlan:
    schemas: dict[str, Schema] = {}
    bound: list[Operation] = []
    for op in order:
        r = refs[op.name]
        if op.kind == "read":
            node, schema = bind_read(op, storage)
        elif op.kind == "filter":
            node, schema = bind_filter(op, r["input"], schemas[r["input"].op])
        elif op.kind == "project":
            node, schema = bind_project(op, r["input"], schemas[r["input"].op])
        elif op.kind == "join":
            node, schema = bind_join(op, r["build"], r["probe"], schemas[r["build"].op], schemas[r["probe"].op])
        elif op.kind == "aggregate":
            node, schema = bind_aggregate(op, r["input"], schemas[r["input"].op])
        elif op.kind == "shuffle":
            node, schema = bind_shuffle(op, r["input"], schemas[r["input"].op])
        else:
            node, schema = bind_send(op, r["input"]), None
        bound.append(node)
        if schema is not None:
            schemas[op.name] = schema
    return LogicalPlan(label, tuple(bound), schemas, {op.name: f"operations[{op.index}]" for op in order})
