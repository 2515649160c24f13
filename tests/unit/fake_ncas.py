"""Test-only NCA plugins and a small builder of bound logical plans.

The fakes are real `NcaImplementation` subclasses with just enough operator interface for the
mapping tests; none can be instantiated (mapping never calls `instantiate`). They mirror the
thesis' running example (Figure 3.2): a JSON scan that fuses filter and project, a join that
fuses a trailing project, a switch that does partial aggregation over UDP.
"""
from __future__ import annotations

from collections.abc import Sequence

from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import BOOLEAN, FLOAT64, INT64, DataType, Field, Schema
from jumpgate.dataflow.expr import Binary, Column, Expr, IsNull, Literal
from jumpgate.dataflow.plan import (
    AggFn,
    AggMode,
    Aggregate,
    AggregateCall,
    FileFormat,
    Filter,
    InputRef,
    Join,
    LogicalPlan,
    NamedExpr,
    Operation,
    Project,
    Read,
    Send,
    Shuffle,
    output_count,
)
from jumpgate.nca.fusion import fusable_chain
from jumpgate.nca.interface import (
    NTF,
    NcaImplementation,
    OutputSpec,
    ResourceRequest,
    StreamSpec,
    Verdict,
)

# ------------------------------------------------------------------ plan builder


def ref(text: str) -> InputRef:
    """`"x"` or `"x[2]"` as an InputRef."""
    if text.endswith("]") and "[" in text:
        name, port = text[:-1].split("[")
        return InputRef(name, int(port))
    return InputRef(text)


class PlanBuilder:
    """Builds a `LogicalPlan` directly from plan.py dataclasses, with bound expressions."""

    def __init__(self, name: str = "test") -> None:
        self.name = name
        self.ops: list[Operation] = []
        self.schemas: dict[str, Schema] = {}

    def col(self, schema: Schema | str, name: str) -> Column:
        s = self.schemas[schema] if isinstance(schema, str) else schema
        i = s.index(name)
        return Column(name, i, s.fields[i].type)

    def _add(self, op: Operation, schema: Schema | None) -> PlanBuilder:
        self.ops.append(op)
        if schema is not None:
            self.schemas[op.name] = schema
        return self

    def read(self, name: str, fields: Sequence[tuple[str, DataType]] = (("a", INT64), ("b", FLOAT64)),
             fmt: str = "json") -> PlanBuilder:
        schema = Schema(tuple(Field(n, t) for n, t in fields))
        return self._add(Read(name, (f"/data/{name}.{fmt}",), FileFormat(fmt), schema), schema)

    def filter(self, name: str, input: str, condition: Expr | None = None) -> PlanBuilder:
        r = ref(input)
        s = self.schemas[r.op]
        cond = condition or IsNull(Column(s.fields[0].name, 0, s.fields[0].type), True, BOOLEAN)
        return self._add(Filter(name, r, cond), s)

    def project(self, name: str, input: str, columns: Sequence[str]) -> PlanBuilder:
        r = ref(input)
        s = self.schemas[r.op]
        cols = tuple(NamedExpr(c, self.col(s, c)) for c in columns)
        return self._add(Project(name, r, cols), Schema(tuple(s.fields[s.index(c)] for c in columns)))

    def join(self, name: str, build: str, probe: str, key: str,
             columns: Sequence[str] | None = None) -> PlanBuilder:
        b, p = ref(build), ref(probe)
        bs, ps = self.schemas[b.op], self.schemas[p.op]
        both = list(ps.fields) + list(bs.fields)
        if columns is None:
            schema = Schema(tuple(both))
            named = None
        else:
            picked = [next(i for i, f in enumerate(both) if f.name == c) for c in columns]
            named = tuple(NamedExpr(c, Column(c, i, both[i].type)) for c, i in zip(columns, picked, strict=True))
            schema = Schema(tuple(both[i] for i in picked))
        return self._add(Join(name, b, p, (self.col(bs, key),), (self.col(ps, key),), columns=named), schema)

    def aggregate(self, name: str, input: str, group: Sequence[str],
                  aggs: Sequence[tuple[str, str, str | None]], mode: str = "partial") -> PlanBuilder:
        r = ref(input)
        s = self.schemas[r.op]
        calls, out = [], [s.fields[s.index(g)] for g in group]
        for agg_name, fn, col in aggs:
            c = self.col(s, col) if col else None
            calls.append(AggregateCall(agg_name, AggFn(fn), c))
            out.append(Field(agg_name, INT64 if fn.startswith("count") else c.type))  # type: ignore[union-attr]
        return self._add(Aggregate(name, r, tuple(NamedExpr(g, self.col(s, g)) for g in group),
                                   tuple(calls), AggMode(mode)), Schema(tuple(out)))

    def shuffle(self, name: str, input: str, keys: Sequence[str], partitions: int) -> PlanBuilder:
        r = ref(input)
        s = self.schemas[r.op]
        return self._add(Shuffle(name, r, tuple(self.col(s, k) for k in keys), partitions), s)

    def send(self, name: str, input: str, transport: str = "tcp", host: str = "127.0.0.1",
             port: int = 9000) -> PlanBuilder:
        return self._add(Send(name, ref(input), transport, host, port), None)

    def build(self) -> LogicalPlan:
        return LogicalPlan(self.name, tuple(self.ops), dict(self.schemas))


def running_example(send_transport: str = "tcp") -> LogicalPlan:
    """The thesis' running example (Figures 3.2, 3.4, A.1), in Figure A.1's order."""
    from jumpgate.contract.types import INT32, STRING

    pb = PlanBuilder("running_example")
    pb.read("read_sales", (("item_id", INT32), ("store_id", INT32), ("price", FLOAT64)))
    s = pb.schemas["read_sales"]
    pb.filter("filter_sales", "read_sales",
              Binary("=", pb.col(s, "item_id"), Literal(100, INT32), BOOLEAN))
    pb.project("project_sales", "filter_sales", ["store_id", "price"])
    pb.read("read_stores", (("store_id", INT32), ("state", STRING)))
    pb.project("project_stores", "read_stores", ["store_id", "state"])
    pb.join("join_sales_stores", "project_stores", "project_sales", "store_id",
            ["store_id", "price", "state"])
    pb.project("project_join", "join_sales_stores", ["price", "state"])
    pb.aggregate("agg", "project_join", ["state"], [("total_price", "sum", "price")], mode="partial")
    pb.shuffle("shuffle", "agg", ["state"], 2)
    pb.send("host1", "shuffle[0]", send_transport, "10.0.0.1", 1234)
    pb.send("host2", "shuffle[1]", send_transport, "10.0.0.2", 4567)
    return pb.build()


# ------------------------------------------------------------------ fake NCAs


def ntf_inputs(inputs: tuple[StreamSpec, ...], transports: Sequence[str]) -> Verdict[None]:
    for s in inputs:
        if s.format != NTF or s.transport not in transports:
            return Verdict.no(f"needs ntf over {' or '.join(transports)}, got {s.describe()}")
    return Verdict.yes()


def emit(plan: LogicalPlan, ops: tuple[str, ...], wanted: tuple[str | None, ...],
         transports: Sequence[str], streams: int = 1) -> Verdict[tuple[OutputSpec, ...]]:
    """One NTF output per port of the last operation, on the wanted transport or the first one."""
    last = ops[-1]
    layout = generate_ntf(plan.schemas[last])
    outs = []
    for port in range(output_count(plan.op(last))):
        t = wanted[port] if port < len(wanted) and wanted[port] is not None else transports[0]
        if t not in transports:
            return Verdict.no(f"cannot send over {t}, only {', '.join(transports)}")
        outs.append(OutputSpec(StreamSpec(NTF, t, layout), streams))
    return Verdict.yes(tuple(outs))


class FakeNca(NcaImplementation):
    abstract = True

    def instantiate(self, spec, context):
        raise NotImplementedError("fake NCA: for mapping tests only")


class FakeJsonScan(FakeNca):
    """Reads JSON Lines, fusing any filters and projects that follow (thesis Figure A.2)."""

    name = "fake.scan_json"
    description = "JSON scan with fused filter/project, TCP or UDP out"
    operation_kinds = ("read", "filter", "project")
    fuse = True
    streams = 1

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        if not isinstance(op, Read):
            return Verdict.no("only reads (with filters and projects after them)")
        if op.format is not FileFormat.JSON:
            return Verdict.no(f"reads json only, not {op.format.value}")
        chain = fusable_chain(plan, anchor, {"filter", "project"}) if self.fuse else (anchor,)
        return Verdict.yes(chain)

    def match_input(self, plan, ops, inputs):
        ok = inputs == (StreamSpec("json", "file"),)
        return Verdict.yes() if ok else Verdict.no(f"reads json files, got {inputs}")

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("tcp", "udp"), self.streams)

    def resources(self, plan, ops):
        return ResourceRequest(cores=self.streams)


class FakePlainJsonScan(FakeJsonScan):
    name = "fake.scan_json_plain"
    description = "JSON scan without fusion"
    operation_kinds = ("read",)
    fuse = False


class FakeParallelJsonScan(FakeJsonScan):
    name = "fake.scan_json_x2"
    description = "JSON scan with two worker threads: two streams per destination"
    streams = 2


class FakeOrcScan(FakeNca):
    name = "fake.scan_orc"
    description = "ORC scan, no fusion, TCP out"
    operation_kinds = ("read",)

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        if not isinstance(op, Read) or op.format is not FileFormat.ORC:
            return Verdict.no("reads orc files only")
        return Verdict.yes((anchor,))

    def match_input(self, plan, ops, inputs):
        return Verdict.yes() if inputs == (StreamSpec("orc", "file"),) else Verdict.no("orc files only")

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("tcp",))


class FakeFilterProject(FakeNca):
    name = "fake.filter_project"
    description = "software filter/project over NTF"
    operation_kinds = ("filter", "project")

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        if not isinstance(op, (Filter, Project)):
            return Verdict.no("filters and projects only")
        return Verdict.yes(fusable_chain(plan, anchor, {"filter", "project"}))

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("tcp", "udp"))

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("tcp", "udp"))


class FakeJoin(FakeNca):
    """Hash join fusing a trailing project (thesis NCA3); TCP in, TCP or UDP out."""

    name = "fake.join"
    description = "hash join with fused project"
    operation_kinds = ("join", "project")

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        if not isinstance(op, Join):
            return Verdict.no("joins only")
        return Verdict.yes(fusable_chain(plan, anchor, lambda o: isinstance(o, Project))[:2])

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("tcp",))

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("tcp", "udp"))

    def resources(self, plan, ops):
        return ResourceRequest(cores=1, memory_mb=512)


class FakeSwitchAgg(FakeNca):
    """Partial aggregation in a switch: UDP in and out, preferred over software (thesis NCA4)."""

    name = "fake.switch_agg"
    description = "switch partial aggregation"
    operation_kinds = ("aggregate",)
    preference = -1

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        if not isinstance(op, Aggregate):
            return Verdict.no("aggregates only")
        if op.mode is not AggMode.PARTIAL:
            return Verdict.no(f"partial aggregation only, not {op.mode.value}")
        if any(a.fn is AggFn.AVG for a in op.aggregates):
            return Verdict.no("no avg")
        return Verdict.yes((anchor,))

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("udp",))

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("udp",))

    def resources(self, plan, ops):
        return ResourceRequest(deployment="switch", pools={"agg_slots": 1})


class FakeSoftAgg(FakeNca):
    name = "fake.soft_agg"
    description = "software aggregation, TCP only"
    operation_kinds = ("aggregate",)

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        return Verdict.yes((anchor,)) if isinstance(op, Aggregate) else Verdict.no("aggregates only")

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("tcp",))

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("tcp",))


class FakeShuffle(FakeNca):
    name = "fake.shuffle"
    description = "hash partitioning to P outputs"
    operation_kinds = ("shuffle",)

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        return Verdict.yes((anchor,)) if isinstance(op, Shuffle) else Verdict.no("shuffles only")

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("tcp", "udp"))

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("tcp", "udp"))


class FakeUdpFilter(FakeNca):
    """A filter that only speaks UDP (a switch-like consumer)."""

    name = "fake.udp_filter"
    description = "UDP-only filter"
    operation_kinds = ("filter",)

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        return Verdict.yes((anchor,)) if isinstance(op, Filter) else Verdict.no("filters only")

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("udp",))

    def match_output(self, plan, ops, inputs, wanted):
        return emit(plan, ops, wanted, ("udp",))


class FakeTcpToUdp(FakeNca):
    name = "fake.tcp_to_udp"
    description = "relays NTF from TCP to UDP"
    converter = True

    def match_operations(self, plan, anchor):
        return Verdict.yes(()) if anchor == "" else Verdict.no("a converter implements no operation")

    def match_input(self, plan, ops, inputs):
        return ntf_inputs(inputs, ("tcp",)) if len(inputs) == 1 else Verdict.no("one input")

    def match_output(self, plan, ops, inputs, wanted):
        if wanted and wanted[0] not in (None, "udp"):
            return Verdict.no(f"emits udp only, not {wanted[0]}")
        return Verdict.yes((OutputSpec(StreamSpec(NTF, "udp", inputs[0].layout)),))


ALL_FAKES: tuple[type[FakeNca], ...] = (
    FakeJsonScan, FakePlainJsonScan, FakeParallelJsonScan, FakeOrcScan, FakeFilterProject, FakeJoin,
    FakeSwitchAgg, FakeSoftAgg, FakeShuffle, FakeUdpFilter, FakeTcpToUdp)


def fakes(*classes: type[FakeNca]) -> list[NcaImplementation]:
    return [c() for c in classes]


THESIS_NCAS = (FakeJsonScan, FakeJoin, FakeSwitchAgg, FakeSoftAgg, FakeShuffle, FakeTcpToUdp)
