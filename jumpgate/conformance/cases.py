"""The conformance requests: one JSON file each in `requests/`, loaded into `Case`s.

A file holds the contract §1 request (its sends without `host` and `port`, which the runner
fills in), where it comes from, and what the answer must be:

    {"source": "TPC-H Q1", "description": "...", "exercises": [...],
     "request": {"operations": [...]},
     "expected_sql": "SELECT ... FROM tpch.lineitem ..."}

`expected_sql` is DuckDB SQL over tables named `tpch.<table>` / `tpcds.<table>`, loaded from the
same files the request reads; it is a string (or a list of lines) for the request's only send, or
an object `{send name: SQL}`. Optional fields:

- `union_of`: send names whose rows together must equal `expected_sql` (a shuffle's outputs),
  with `partition_keys`: output columns whose values must not appear in two of those sends;
- `got_sql`: SQL applied to the received rows (as table `got`) before comparing, e.g. to merge a
  partial aggregation's states, which may repeat a group;
- `ordered`: compare rows in order (no v1 operation orders rows, so no request sets it today);
- `float_rtol`, `float_atol`: tolerance for float64 columns (default 1e-9 relative);
- `expected_error`: instead of `expected_sql`, the job must fail with a data error whose message
  contains this text (a result that does not fit its type: never a wrong answer).

`exercises` lists the operations (and join types, aggregate functions and modes, contract types)
the request uses. It is recomputed from the request when loading and must agree.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path

REQUESTS_DIR = Path(__file__).with_name("requests")
KINDS = ("read", "filter", "project", "join", "aggregate", "shuffle")
FORMAT_EXTENSIONS = {"json": "jsonl", "orc": "orc", "parquet": "parquet"}
DEFAULT_RTOL = 1e-9
DEFAULT_ATOL = 1e-9
_FILE_KEYS = {"source", "description", "exercises", "request", "expected_sql", "union_of",
              "partition_keys", "got_sql", "ordered", "float_rtol", "float_atol", "expected_error"}


class CaseError(ValueError):
    pass


@dataclass(frozen=True)
class Check:
    """The rows of `sends` (together) must equal what `sql` answers."""

    sends: tuple[str, ...]
    sql: str
    partition_keys: tuple[str, ...] = ()
    got_sql: str | None = None


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    source: str
    description: str
    request: dict
    checks: tuple[Check, ...]
    exercises: tuple[str, ...]
    ordered: bool = False
    float_rtol: float = DEFAULT_RTOL
    float_atol: float = DEFAULT_ATOL
    tables: tuple[str, ...] = field(default=())  # "tpch/lineitem", ... read by the request
    expected_error: str | None = None  # the job must fail with a data error containing this

    @property
    def operations(self) -> list[dict]:
        return self.request["operations"]

    @property
    def kinds(self) -> set[str]:
        return {op["kind"] for op in self.operations if op["kind"] != "send"}

    def runnable_request(self, host: str = "127.0.0.1", port: int = 0, fmt: str = "json") -> dict:
        """The request with every send listening on `host` (port 0: the client picks one), reading
        the `fmt` copy of the data (`*.jsonl` paths become `*.orc` or `*.parquet`)."""
        ops = []
        for op in self.operations:
            op = dict(op)
            if op["kind"] == "send":
                op["host"], op["port"] = host, port
            elif op["kind"] == "read" and fmt != "json":
                ext = FORMAT_EXTENSIONS[fmt]
                paths = op["path"] if isinstance(op["path"], list) else [op["path"]]
                paths = [p[: -len(".jsonl")] + "." + ext if p.endswith(".jsonl") else p for p in paths]
                op["path"] = paths if isinstance(op["path"], list) else paths[0]
                op["format"] = fmt
            ops.append(op)
        return {"name": self.request.get("name") or self.name, "operations": ops}


def _sql(value: object, where: str) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, str):
        return value
    raise CaseError(f"{where}: SQL must be a string or a list of lines")


def exercises(request: dict) -> list[str]:
    """What a request uses: operation kinds, join types, aggregate modes and functions, and the
    contract types read, in a fixed order."""
    tags: set[str] = set()
    for op in request["operations"]:
        kind = op["kind"]
        if kind == "send":
            continue
        tags.add(kind)
        if kind == "read":
            tags.update(f"type:{_type_family(c['type'])}" for c in op["schema"])
        elif kind == "join":
            tags.add(f"join:{op.get('type') or 'inner'}")
            if op.get("condition"):
                tags.add("join:condition")
        elif kind == "aggregate":
            tags.add(f"aggregate:{op.get('mode') or 'complete'}")
            tags.update(f"agg:{a['fn']}" for a in op.get("aggregates") or [])
            if not op.get("group_by"):
                tags.add("aggregate:global")
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(tags, key=lambda t: (order.get(t.split(":")[0], len(order)), t))


def _type_family(t: str) -> str:
    return "decimal" if t.startswith("decimal") else t


def tables_read(request: dict) -> list[str]:
    """`bench/table` of every read (paths look like `tpch/lineitem/*.jsonl`)."""
    out = []
    for op in request["operations"]:
        if op["kind"] == "read":
            paths = op["path"] if isinstance(op["path"], list) else [op["path"]]
            for p in paths:
                parts = p.split("/")
                if len(parts) < 3 or parts[0] not in ("tpch", "tpcds"):
                    raise CaseError(f"read {op['name']!r}: path {p!r} is not tpch/<table>/... or tpcds/<table>/...")
                t = f"{parts[0]}/{parts[1]}"
                if t not in out:
                    out.append(t)
    return out


def load_case(path: Path) -> Case:
    try:
        raw = json.loads(path.read_text())
    except ValueError as e:
        raise CaseError(f"{path.name}: not valid JSON: {e}") from None
    where = path.name
    unknown = set(raw) - _FILE_KEYS
    if unknown:
        raise CaseError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    for key in ("source", "request"):
        if key not in raw:
            raise CaseError(f"{where}: missing {key!r}")
    error = raw.get("expected_error")
    if ("expected_sql" in raw) == (error is not None):
        raise CaseError(f"{where}: give exactly one of 'expected_sql' and 'expected_error'")
    if error is not None and (not isinstance(error, str) or not error):
        raise CaseError(f"{where}: 'expected_error' must be a non-empty string")
    request = raw["request"]
    sends = [op["name"] for op in request["operations"] if op["kind"] == "send"]
    for op in request["operations"]:
        if op["kind"] == "send" and ("host" in op or "port" in op):
            raise CaseError(f"{where}: send {op['name']!r} must not give host or port; the runner does")
    checks = _checks(raw, sends, where) if error is None else ()
    computed = exercises(request)
    if raw.get("exercises") is not None and list(raw["exercises"]) != computed:
        raise CaseError(f"{where}: 'exercises' is {raw['exercises']} but the request exercises {computed}")
    return Case(name=path.stem, path=path, source=raw["source"], description=raw.get("description", ""),
                request=request, checks=checks, exercises=tuple(computed),
                ordered=bool(raw.get("ordered", False)),
                float_rtol=float(raw.get("float_rtol", DEFAULT_RTOL)),
                float_atol=float(raw.get("float_atol", DEFAULT_ATOL)),
                tables=tuple(tables_read(request)), expected_error=error)


def _checks(raw: dict, sends: list[str], where: str) -> tuple[Check, ...]:
    expected = raw["expected_sql"]
    got_sql = _sql(raw["got_sql"], f"{where}: got_sql") if raw.get("got_sql") is not None else None
    keys = tuple(raw.get("partition_keys") or ())
    if isinstance(expected, dict):
        checks = tuple(Check((s,), _sql(q, f"{where}: expected_sql[{s}]"), got_sql=got_sql)
                       for s, q in expected.items())
    elif raw.get("union_of"):
        checks = (Check(tuple(raw["union_of"]), _sql(expected, f"{where}: expected_sql"), keys, got_sql),)
    else:
        if len(sends) != 1:
            raise CaseError(f"{where}: the request has sends {sends}; give expected_sql per send or union_of")
        checks = (Check((sends[0],), _sql(expected, f"{where}: expected_sql"), got_sql=got_sql),)
    covered = [s for c in checks for s in c.sends]
    if sorted(covered) != sorted(sends):
        raise CaseError(f"{where}: checks cover sends {covered}, the request has {sends}")
    if keys and not raw.get("union_of"):
        raise CaseError(f"{where}: partition_keys needs union_of")
    return checks


def load_cases(pattern: str | None = None, directory: Path = REQUESTS_DIR) -> list[Case]:
    """Every request file, by name; `pattern` keeps names containing it or matching it as a glob
    (several patterns separated by commas)."""
    cases = [load_case(p) for p in sorted(directory.glob("*.json"))]
    if pattern:
        pats = [p.strip() for p in pattern.split(",") if p.strip()]
        cases = [c for c in cases if any(p in c.name or fnmatch.fnmatchcase(c.name, p) for p in pats)]
    return cases


# ------------------------------------------------------------------ what a request needs


# Kinds a scan NCA may fuse after its read (a scan claims `read` and some of these, and cannot take
# them anywhere else). Reads and joins are always an NCA's first operation.
_FUSABLE_AFTER_SCAN = ("filter", "project", "aggregate", "shuffle")


@dataclass(frozen=True)
class Need:
    """Something a request needs an NCA for: an operation kind, and for a kind that a scan may fuse
    (`_FUSABLE_AFTER_SCAN`) whether it is on NTF input, i.e. not reachable from a read through
    single-consumer filters and projects; then `after` is the kind of the operation it follows."""

    kind: str
    after: str | None = None

    def __str__(self) -> str:
        if self.after is None:
            return self.kind
        article = "an" if self.after[0] in "aeiou" else "a"
        return f"{self.kind} on NTF input (after {article} {self.after})"

    def met_by(self, operations: set[str]) -> bool:
        """Whether an NCA claiming `operations` (its `GET /v1/ncas` entry) may take it. That entry
        does not say where an NCA can take an operation, so this assumes what the built-in NCAs
        do: an NCA that claims `read` is a scan, which takes its other kinds only fused after its
        read; any other NCA takes the kinds it claims on NTF input."""
        if self.kind not in operations:
            return False
        return self.after is None or "read" not in operations


def op_needs(request: dict) -> dict[str, Need]:
    """What each operation (but sends) needs an NCA for, by operation name."""
    ops = {op["name"]: op for op in request["operations"]}
    consumers: dict[str, int] = {}
    for op in request["operations"]:
        for ref in _inputs(op):
            consumers[ref] = consumers.get(ref, 0) + 1
    return {op["name"]: _placement(op, ops, consumers) if op["kind"] in _FUSABLE_AFTER_SCAN else Need(op["kind"])
            for op in request["operations"] if op["kind"] != "send"}


def needs(request: dict) -> list[Need]:
    """What a request needs NCAs for, each once, in request order."""
    out: list[Need] = []
    for need in op_needs(request).values():
        if need not in out:
            out.append(need)
    return out


def _inputs(op: dict) -> list[str]:
    refs = [op[f] for f in ("input", "build", "probe") if isinstance(op.get(f), str)]
    return [r.split("[")[0] for r in refs]


def _placement(op: dict, ops: dict[str, dict], consumers: dict[str, int]) -> Need:
    """Walk back through filters and projects: a scan can fuse `op` when that reaches a read with
    every link the only consumer of the operation before it."""
    cur, fusable = op, True
    while True:
        src = ops[_inputs(cur)[0]]
        fusable = fusable and consumers.get(src["name"], 0) == 1 and "[" not in cur["input"]
        if src["kind"] not in ("filter", "project"):
            if src["kind"] == "read" and fusable:
                return Need(op["kind"])
            return Need(op["kind"], src["kind"])
        cur = src


def missing(case: Case, ncas: list[dict]) -> list[Need]:
    """What `case` needs that none of `ncas` (GET /v1/ncas entries) claims."""
    claims = [set(n.get("operations") or ()) for n in ncas if not n.get("error")]
    return [n for n in needs(case.request) if not any(n.met_by(c) for c in claims)]


def missing_reason(gaps: list[Need]) -> str:
    return "needs an NCA for " + ", ".join(str(g) for g in gaps)
