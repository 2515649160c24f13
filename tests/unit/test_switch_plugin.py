"""The switch aggregator plugin: its operator interface (what the switch can and cannot do, with
reasons), its slot pool and the service's capacity check (a job that finds no free slots goes to
software NCAs), the golden table entries, and the whole life cycle against the switch model:
compile, allocate (lease, ingress port), configure (table entries), execute (END notices, loss
detection, a lost END once the executor says the senders finished, flush, FINISH) and destroy
(cleared slots, released port, lease and model)."""
from __future__ import annotations

import random
import socket
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from jumpgate.client.testing import encode_tuple
from jumpgate.client.udp import UdpReceiver
from jumpgate.contract import udp
from jumpgate.contract.errors import NoResources
from jumpgate.contract.ntf import generate_ntf
from jumpgate.deploy.resources import BlockPool
from jumpgate.nca.interface import (
    NTF,
    CompileResult,
    Destination,
    Endpoint,
    InstanceContext,
    NcaError,
    NcaInstance,
    NcaSpec,
    PhaseStats,
    StreamSpec,
)
from jumpgate.nca.registry import Registry
from jumpgate.ncas.software.aggregate import AggregateNca
from jumpgate.ncas.software.scan_json import JsonScanNca
from jumpgate.ncas.switch import defs, golden
from jumpgate.ncas.switch.controller import RegisterFill
from jumpgate.ncas.switch.plugin import SwitchAggregatorNca, SwitchModelNca
from jumpgate.runtime.executor import JobRunner
from jumpgate.runtime.service import JumpgateService, Settings

from .fixtures.switch_harness import bind, exact, merge_partials, partial_request

STORE_SALES = ({"ss_item_sk": "int64", "ss_sales_price": "decimal(7,2)"}, "ss_item_sk",
               [{"name": "cnt", "fn": "count_star"}, {"name": "total", "fn": "sum", "expr": "ss_sales_price"}])


@pytest.fixture
def model_nca(monkeypatch) -> SwitchModelNca:
    monkeypatch.setenv("JUMPGATE_SWITCH_MODEL", "1")
    return SwitchModelNca()


def udp_in(plan, op: str = "p") -> StreamSpec:
    return StreamSpec(NTF, "udp", generate_ntf(plan.input_schema(plan.op(op).input)))


# ------------------------------------------------------------------ operator interface


def test_the_thesis_aggregation_fits(model_nca):
    plan = bind(partial_request(*STORE_SALES))
    assert model_nca.match_operations(plan, "p").value == ("p",)
    assert model_nca.match_input(plan, ("p",), (udp_in(plan),))
    [out] = model_nca.match_output(plan, ("p",), (udp_in(plan),), (None,)).value
    assert (out.spec.transport, out.streams, out.spec.layout) == ("udp", 1, generate_ntf(plan.schemas["p"]))
    res = model_nca.resources(plan, ("p",))
    assert res.pools == {"switch.model.slots": defs.WAY_SLOTS} and res.deployment == "switch"


@pytest.mark.parametrize("schema,key,aggs,why", [
    ({"k": "int64", "v": "int64"}, "k", [{"name": "m", "fn": "min", "expr": "v"}], "sum and count only"),
    ({"k": "int64", "v": "int64"}, "k", [{"name": "a", "fn": "avg", "expr": "v"}], "sum and count only"),
    ({"k": "string", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}], "not string"),
    ({"k": "float64", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}], "not float64"),
    ({"k": "int64", "v": "float64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}], "not float64"),
    ({"k": "int64", "v": "int64"}, "k", [{"name": f"s{i}", "fn": "sum", "expr": "v"} for i in range(3)],
     "at most 2 sums"),
    ({"k": "int64", "v": "int64"}, "k", [{"name": "a", "fn": "count", "expr": "v"},
                                         {"name": "b", "fn": "count_star"}], "one count"),
])
def test_what_the_switch_cannot_do_is_declined_with_a_reason(model_nca, schema, key, aggs, why):
    plan = bind(partial_request(schema, key, aggs))
    v = model_nca.match_operations(plan, "p")
    assert not v and why in v.reason, v.reason


def test_complete_mode_expressions_and_layouts_are_declined(model_nca):
    req = partial_request(*STORE_SALES)
    req["operations"][1]["mode"] = "complete"
    assert "partial aggregation only" in model_nca.match_operations(bind(req), "p").reason
    req = partial_request(*STORE_SALES)
    req["operations"][1]["group_by"] = [{"name": "g", "expr": "ss_item_sk + 1"}]
    assert "input column only" in model_nca.match_operations(bind(req), "p").reason
    wide = bind(partial_request({f"c{i}": "int64" for i in range(9)}, "c0", [{"name": "n", "fn": "count_star"}]))
    assert "at most 8 fields" in model_nca.match_input(wide, ("p",), (udp_in(wide),)).reason
    strings = bind(partial_request({"k": "int64", "s": "string"}, "k", [{"name": "n", "fn": "count_star"}]))
    assert "fixed-size tuples only" in model_nca.match_input(strings, ("p",), (udp_in(strings),)).reason
    plan = bind(partial_request(*STORE_SALES))
    tcp = StreamSpec(NTF, "tcp", udp_in(plan).layout)
    assert "over udp only" in model_nca.match_input(plan, ("p",), (tcp,)).reason
    assert "udp only" in model_nca.match_output(plan, ("p",), (udp_in(plan),), ("tcp",)).reason


def test_without_a_switch_it_says_how_to_configure_one(monkeypatch):
    monkeypatch.delenv("JUMPGATE_SWITCH", raising=False)
    monkeypatch.delenv("JUMPGATE_SWITCH_MODEL", raising=False)
    plan = bind(partial_request(*STORE_SALES))
    assert "JUMPGATE_SWITCH=" in SwitchAggregatorNca().match_operations(plan, "p").reason
    assert "JUMPGATE_SWITCH_MODEL=1" in SwitchModelNca().match_operations(plan, "p").reason


# ------------------------------------------------------------------ slots: pool, lease, mapping


def test_block_pool_leases_aligned_disjoint_blocks():
    pool = BlockPool("p", 65536, 1024)
    a = pool.acquire("a", 20000)  # rounded up to 32768, aligned
    b = pool.acquire("b", 1024)
    c = pool.acquire("c", 16384)
    assert (a.start, a.size) == (0, 32768) and (b.start, b.size) == (32768, 1024) and c.start == 49152
    assert not pool.can_acquire(32768) and pool.can_acquire(8192)
    with pytest.raises(NoResources):
        pool.acquire("d", 32768)
    pool.release("a")
    assert pool.acquire("d", 32768).start == 0
    assert pool.free == 65536 - 32768 - 1024 - 16384


@pytest.fixture
def service(tmp_path, monkeypatch):
    monkeypatch.setenv("JUMPGATE_SWITCH_MODEL", "1")
    rng = random.Random(3)
    (tmp_path / "data").mkdir()
    rows = [f'{{"ss_item_sk": {rng.randrange(500)}, "ss_sales_price": {rng.randrange(10000) / 100}}}'
            for _ in range(3000)]
    (tmp_path / "data" / "t.jsonl").write_text("\n".join(rows) + "\n")
    reg = Registry()
    for impl in (JsonScanNca(), AggregateNca(), SwitchModelNca()):
        reg.add(impl)
    svc = JumpgateService(Settings(data_root=tmp_path / "data", cache_dir=tmp_path / "cache"), registry=reg)
    yield svc
    svc.shutdown()


def taken(job) -> dict:
    return {op: d.implementation for op, d in job.pipeline.decisions.items()}


def test_mapping_picks_the_switch_and_falls_back_to_software_without_free_slots(service):
    request = partial_request(*STORE_SALES, final=True, transport="tcp")
    job = service.submit(request)
    assert taken(job) == {"r": "software.scan_json", "p": "switch.model", "f": "software.aggregate", "out": None}
    assert [e.spec.transport for e in job.pipeline.edges] == ["udp", "udp", "tcp"]
    pool = service.registry.get("switch.model").pool
    pool.acquire("another-job", defs.WAY_SLOTS)  # every slot leased
    job = service.submit(request)
    assert taken(job)["p"] == "software.scan_json"  # the scan fuses the partial aggregation again
    verdict = next(v for v in job.pipeline.decisions["p"].verdicts if v.implementation == "switch.model")
    assert verdict.step == "capacity" and "no free block of 32768" in verdict.reason
    pool.release("another-job")


def switch_instance(service, tmp_path, job_id="j1"):
    job = service.submit(partial_request(*STORE_SALES, final=True, transport="tcp"))
    node = next(n for n in job.pipeline.ncas if n.implementation == "switch.model")
    impl = service.registry.get("switch.model")
    ctx = InstanceContext(deployer=None, work_dir=str(tmp_path), cache_dir=str(service.cache_dir))
    return impl, impl.instantiate(job.pipeline.build_spec(node, job_id), ctx)


def send_as_scan(ep: Endpoint, rows, layout, claim: int | None = None, stream: int = 0,
                 claim_tuples: int | None = None) -> None:
    """Rows as a scan sends them: up to the endpoint's max_tuples per datagram, then the END
    (claiming `claim` datagrams and `claim_tuples` tuples when given, to play loss)."""
    per = ep.max_tuples or 1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i, at in enumerate(range(0, len(rows), per)):
            tuples = [encode_tuple(row, layout) for row in rows[at:at + per]]
            s.sendto(udp.data_datagram(stream, i, tuples), (ep.host, ep.port))
        n = -(-len(rows) // per) if claim is None else claim
        for _ in range(3):
            s.sendto(udp.end_datagram(stream, n, len(rows) if claim_tuples is None else claim_tuples),
                     (ep.host, ep.port))


def test_life_cycle_against_the_model(service, tmp_path):
    impl, inst = switch_instance(service, tmp_path)
    dst = UdpReceiver()
    try:
        inst.compile()
        [ep] = inst.allocate()
        assert (ep.transport, ep.max_tuples) == ("udp", defs.TUPLES_PER_DATAGRAM)
        assert impl.pool.free == 0 and impl.backend.proc is not None
        dst.start(1, inst.query.layout)
        inst.configure([[Destination(Endpoint("127.0.0.1", dst.port, "udp"), 0, 1)]])
        rng = random.Random(5)
        rows = [(rng.randrange(700), None if rng.random() < 0.05 else Decimal(rng.randrange(-10**6, 10**6)).scaleb(-2))
                for _ in range(5000)]
        send_as_scan(ep, rows, inst.spec.inputs[0].spec.layout)
        stats = inst.execute(0)
        assert dst.wait(10), dst.error
        table = dst.table()
        assert stats.tuples_in == 5000 and stats.tuples_out == table.num_rows
        datagrams = -(-5000 // defs.TUPLES_PER_DATAGRAM)  # the last one short when 5000 is not a multiple
        assert stats.bytes_in == datagrams * udp.HEADER_SIZE + 5000 * (4 + inst.query.in_len)
        assert stats.extra["switch_slots"] == defs.TABLE_SLOTS
        got = merge_partials(table, "ss_item_sk", ["cnt", "total"], {"cnt": "count_star", "total": "sum"})
        assert got == exact(rows, 0, [("cnt", "count_star", None), ("total", "sum", 1)])
    finally:
        dst.close()
        backend = impl.backend
        inst.destroy()
    assert impl.pool.free == defs.WAY_SLOTS and backend.proc is None  # lease released, model stopped


def test_loss_before_the_switch_fails_the_job_and_destroy_clears_the_slots(service, tmp_path):
    impl, inst = switch_instance(service, tmp_path)
    inst.compile()
    [ep] = inst.allocate()
    impl.backend.open(Path(service.cache_dir))  # keep the model running after destroy, to look at it
    try:
        inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp"), 0, 1)]])
        send_as_scan(ep, [(k, 1.0) for k in range(100)], inst.spec.inputs[0].spec.layout, claim=104)
        with pytest.raises(NcaError, match="UDP loss between the sender of stream 0 and the switch: it sent 104"):
            inst.execute(0)
        slots = inst.slots
        assert sum(sum(impl.backend.read_register(f"kl{w}", slots.base, slots.size)) for w in range(defs.WAYS)) > 0
        inst.destroy()
        for reg in defs.SLOT_REGISTERS:
            assert not any(impl.backend.read_register(reg, slots.base, slots.size)), reg
        assert impl.backend.read_register("received", slots.job * defs.MAX_STREAMS) == [0]
    finally:
        inst.destroy()
        impl.backend.close()
    assert impl.backend.proc is None


def test_execute_waits_until_the_switch_has_taken_every_tuple(service, tmp_path):
    """The switch counts a datagram on its first pass and its later tuples on their own passes
    (recirculated, docs/switch.md): the END notices may come before the last tuples have been
    through the table. execute flushes only once the `tuples` counter reaches what the ENDs count,
    and fails with loss inside the switch when it stands still short of that."""
    from jumpgate.ncas.switch.controller import RegisterWrite

    impl, inst = switch_instance(service, tmp_path)
    dst = UdpReceiver()
    try:
        inst.compile()
        [ep] = inst.allocate()
        dst.start(1, inst.query.layout)
        inst.configure([[Destination(Endpoint("127.0.0.1", dst.port, "udp"), 0, 1)]])
        rows = [(k % 7, Decimal(k)) for k in range(10)]
        # the ENDs say 2 tuples more than the model has taken: as if they were still recirculating
        send_as_scan(ep, rows, inst.spec.inputs[0].spec.layout, claim_tuples=12)
        late = threading.Timer(0.5, impl.backend.write_registers, [[RegisterWrite("tuples", inst.slots.job, 12)]])
        late.start()
        t0 = time.monotonic()
        stats = inst.execute(0)
        late.join()
        assert time.monotonic() - t0 >= 0.5 and stats.tuples_in == 12
        assert dst.wait(10), dst.error
    finally:
        dst.close()
        inst.destroy()
    impl, inst = switch_instance(service, tmp_path, "j2")
    try:
        inst.compile()
        [ep] = inst.allocate()
        inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp"), 0, 1)]])
        send_as_scan(ep, [(k, 1.0) for k in range(10)], inst.spec.inputs[0].spec.layout, claim_tuples=12)
        with pytest.raises(NcaError, match="UDP loss inside the switch: it took 10 of the 12 tuples"):
            inst.execute(0)
    finally:
        inst.destroy()


def test_the_destination_must_take_a_datagram_of_records(service, tmp_path):
    """An input datagram's records leave together (up to TUPLES_PER_DATAGRAM of them): a destination
    that takes fewer per datagram, or smaller datagrams, is refused at configure, saying why."""
    impl, inst = switch_instance(service, tmp_path)
    try:
        inst.compile()
        inst.allocate()
        n = defs.TUPLES_PER_DATAGRAM
        with pytest.raises(NcaError, match=f"up to {n} records per datagram; its destination 127.0.0.1:9 takes 1"):
            inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp", max_tuples=1), 0, 1)]])
        with pytest.raises(NcaError, match="datagrams of up to .* bytes; its destination 127.0.0.1:9 takes 40"):
            inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp", max_datagram=40), 0, 1)]])
    finally:
        inst.destroy()


def test_configure_clears_a_block_not_known_clear(service, tmp_path):
    """A slot holds no job number (docs/switch.md, "Clear slots"): a block the backend does not know
    to be clear (another job's leftovers, a real switch's registers at connect) is cleared with a
    FLUSH+DISCARD of every slot of every way before the job's first tuple; a clear one is not."""
    from jumpgate.ncas.switch.controller import RegisterWrite

    impl, inst = switch_instance(service, tmp_path)
    try:
        inst.compile()
        inst.allocate()
        slots = inst.slots
        assert impl.backend.clean_blocks >= inst._blocks()  # a fresh model: every block clear
        impl.backend.clean_blocks -= {slots.base}
        impl.backend.write_registers([RegisterWrite("kl5", slots.base + 3, 77), RegisterWrite("kh5", slots.base + 3, 9),
                                       RegisterWrite("cn5", slots.base + 3, 4)])
        inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp"), 0, 1)]])
        assert impl.backend.read_register("kl5", slots.base + 3) == [0]
        assert impl.backend.read_register("kh5", slots.base + 3) == [0]
        assert impl.backend.read_register("cn5", slots.base + 3) == [0]
        assert impl.backend.read_register("flushed", slots.job) == [defs.WAYS * slots.size]
        assert not impl.backend.clean_blocks & inst._blocks()  # in use now
    finally:
        inst.destroy()
    assert impl.backend.clean_blocks >= inst._blocks()  # destroy cleared it again


def test_destroy_wakes_a_waiting_execute(service, tmp_path):
    impl, inst = switch_instance(service, tmp_path)
    inst.compile()
    inst.allocate()
    inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp"), 0, 1)]])
    errors = []

    def run():
        try:
            inst.execute(0)
        except NcaError as e:
            errors.append(e.message)

    t = threading.Thread(target=run)
    t.start()
    inst.destroy()
    t.join(5)
    assert not t.is_alive() and errors == ["cancelled"]


class RecordingInstance(NcaInstance):
    """Executes at once and records the executor's `senders_finished` notices."""

    def __init__(self, spec: NcaSpec, told: list[tuple[str, int]]) -> None:
        super().__init__(spec)
        self.told = told

    def compile(self) -> CompileResult:
        return CompileResult()

    def allocate(self) -> list[Endpoint]:
        return []

    def configure(self, destinations: list[list[Destination]]) -> None:
        return None

    def execute(self, phase: int) -> PhaseStats:
        return PhaseStats()

    def senders_finished(self, port: int) -> None:
        self.told.append((self.spec.id, port))

    def destroy(self) -> None:
        return None


def test_a_lost_end_fails_soon_after_the_senders_finished(service, tmp_path):
    """Every copy of the sender's END lost before the switch: once the executor says the sender
    finished, and the switch has stopped counting the stream's datagrams, the job fails with UDP
    loss within seconds instead of waiting for the END for ever."""
    impl, inst = switch_instance(service, tmp_path)
    try:
        inst.compile()
        [ep] = inst.allocate()
        inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp"), 0, 1)]])
        layout = inst.spec.inputs[0].spec.layout
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for i in range(100):
                s.sendto(udp.data_datagram(0, i, [encode_tuple((i, 1.0), layout)]), (ep.host, ep.port))
        threading.Timer(0.5, inst.senders_finished, (0,)).start()
        t0 = time.monotonic()
        with pytest.raises(NcaError, match="UDP loss between the sender of stream 0 and the switch: the sender "
                                           "finished .* no copy of its END reached the switch .*received 100 "):
            inst.execute(0)
        assert time.monotonic() - t0 < 10
    finally:
        inst.destroy()


def test_the_executor_tells_each_receiver_when_its_senders_finished(service, tmp_path):
    """scan -> switch -> final aggregation -> client: the switch hears when the scan's last phase
    is done, the final aggregation when the switch's is, the scan (no network input) never."""
    job = service.submit(partial_request(*STORE_SALES, final=True, transport="udp"))
    told: list[tuple[str, int]] = []
    runner = JobRunner(job, service.store, service.registry, None, tmp_path, tmp_path, lambda j: None)
    runner.instances = {n.id: RecordingInstance(job.pipeline.build_spec(n), told) for n in job.pipeline.ncas}
    by_impl = {n.implementation: n.id for n in job.pipeline.ncas}
    scan, switch, final = (by_impl[i] for i in ("software.scan_json", "switch.model", "software.aggregate"))
    try:
        runner._execute_one(0, 0, scan)
        assert told == [(switch, 0)]
        runner._execute_one(0, 0, switch)
        runner._execute_one(0, 0, final)
        assert told == [(switch, 0), (final, 0)]
    finally:
        runner._pool.shutdown()


def test_two_jobs_never_share_slots(service, tmp_path, monkeypatch):
    monkeypatch.setenv("JUMPGATE_SWITCH_SLOTS", "16384")
    service.registry.implementations["switch.model"] = SwitchModelNca()
    service.pools = {n: p for i in service.registry.all() for n, p in i.resource_pools().items()}
    insts = [switch_instance(service, tmp_path, f"job{i}")[1] for i in range(3)]
    for inst in insts:
        inst.compile()
    try:
        insts[0].allocate()
        insts[1].allocate()
        assert {(i.lease.start, i.lease.size) for i in insts[:2]} == {(0, 16384), (16384, 16384)}
        assert insts[0].slots.job != insts[1].slots.job and insts[0].slots.tag != insts[1].slots.tag
        with pytest.raises(NcaError, match="no free block of 16384.*resubmit"):
            insts[2].allocate()
    finally:
        for inst in insts:
            inst.destroy()


# ------------------------------------------------------------------ golden table entries


@pytest.mark.parametrize("name", sorted(golden.CASES))
def test_golden_table_entries(name):
    path = golden.GOLDEN_DIR / f"{name}.json"
    assert path.read_text() == golden.render_case(name), \
        "stale golden file; run: python -m jumpgate.ncas.switch.golden --update"


# ------------------------------------------------------------------ version 2 (acknowledged) senders


class AckedSender:
    """A version 2 sender as ncas/runtime/out_udp.c is one towards the switch, in slow motion: its
    socket connected to the endpoint (so it takes answers only from there), the datagrams it
    sends, and the receipts and END answer it gets back."""

    def __init__(self, ep: Endpoint, rows: list[tuple], layout) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect((ep.host, ep.port))
        self.sock.settimeout(5)
        per = ep.max_tuples
        self.datagrams = [udp.data_datagram(0, i, [encode_tuple(r, layout) for r in rows[at:at + per]], version=2,
                                            stamp=i + 1) for i, at in enumerate(range(0, len(rows), per))]
        self.end = udp.end_datagram(0, len(self.datagrams), len(rows), version=2)

    def send(self, seqs, retx: bool = False) -> None:
        for q in seqs:
            d = self.datagrams[q]
            if retx:
                h = udp.parse_header(d)
                d = udp.pack_header(0, q, h.count, udp.F_RETX, 2, 1000 + q) + d[udp.HEADER_SIZE:]
            self.sock.send(d)

    def answers(self, n: int) -> list[udp.Header]:
        return [udp.parse_header(self.sock.recv(2048)) for _ in range(n)]

    def close(self) -> None:
        self.sock.close()


def test_a_version_2_sender_repairs_loss_and_duplicates_are_taken_once(service, tmp_path):
    """The model's endpoint takes version 2 (acknowledged) streams: configure resets the job's
    ring; a datagram lost on the way is repeated by its sender, which learns of it from the
    receipts; a duplicate is dropped by the ring; the END is answered (ACK and END) only once every
    datagram was taken, and execute flushes only then. The phase's stats say how many datagrams
    the switch took and how many it dropped as taken before."""
    impl, inst = switch_instance(service, tmp_path)
    dst = UdpReceiver()
    sender = None
    try:
        inst.compile()
        [ep] = inst.allocate()
        # version 2, and at most what the ring deduplicates in flight from the first datagram on
        assert (ep.udp_version, ep.udp_window_datagrams) == (2, defs.SEEN) == (2, udp.SACK_WINDOW)
        dst.start(1, inst.query.layout)
        job = inst.slots.job
        impl.backend.fill_registers([RegisterFill("seen", defs.seen_cell(job, 0, 5), 1, defs.seen_mark(5))])
        inst.configure([[Destination(Endpoint("127.0.0.1", dst.port, "udp"), 0, 1)]])
        assert impl.backend.read_register("seen", defs.seen_cell(job, 0, 5)) == [0]  # another job's mark: gone
        rows = [(k % 13, Decimal(k).scaleb(-2)) for k in range(150)]  # 38 datagrams: within the bound of 64
        sender = AckedSender(ep, rows, inst.spec.inputs[0].spec.layout)
        n = len(sender.datagrams)
        stats: list[PhaseStats] = []
        runner = threading.Thread(target=lambda: stats.append(inst.execute(0)))
        runner.start()
        lost, twice = {3, 17, n - 1}, {5, 6, 20}
        sender.send([q for q in range(n) if q not in lost])
        sender.send(sorted(twice))  # the network's copies
        sender.sock.send(sender.end)
        got = sender.answers(n - len(lost) + len(twice))  # receipts; the END is not answered yet
        assert all(h.flags == udp.F_ACK | udp.F_SACK for h in got)
        assert {h.seq for h in got} == set(range(n)) - lost
        sender.send(sorted(lost), retx=True)
        assert sorted(h.seq for h in sender.answers(len(lost))) == sorted(lost)
        assert runner.is_alive()  # no flush before every datagram was taken
        sender.sock.send(sender.end)  # the sender repeats its END until it is answered
        [answer] = sender.answers(1)
        assert (answer.flags, answer.seq) == (udp.F_ACK | udp.F_END, n)
        runner.join(20)
        assert stats, "execute did not finish"
        assert stats[0].tuples_in == len(rows)
        assert (stats[0].extra["switch_taken"], stats[0].extra["switch_repeats"]) == (n, len(twice))
        assert dst.wait(10), dst.error
        table = dst.table()
        got_rows = merge_partials(table, "ss_item_sk", ["cnt", "total"], {"cnt": "count_star", "total": "sum"})
        assert got_rows == exact(rows, 0, [("cnt", "count_star", None), ("total", "sum", 1)])
    finally:
        if sender is not None:
            sender.close()
        dst.close()
        inst.destroy()


def test_a_version_2_stream_that_stays_short_fails_once_its_sender_finished(service, tmp_path):
    """A version 2 stream's END came, but not all of its data: its sender repeats the rest, so
    that is no failure by itself; once the executor says the senders finished (which a sender that
    repairs its stream cannot have done) and the switch stopped taking datagrams, it is loss."""
    impl, inst = switch_instance(service, tmp_path)
    sender = None
    try:
        inst.compile()
        [ep] = inst.allocate()
        inst.configure([[Destination(Endpoint("127.0.0.1", 9, "udp"), 0, 1)]])
        sender = AckedSender(ep, [(k, Decimal(1)) for k in range(40)], inst.spec.inputs[0].spec.layout)
        sender.send(range(1, len(sender.datagrams)))  # datagram 0 never comes
        sender.sock.send(sender.end)
        threading.Timer(0.5, inst.senders_finished, (0,)).start()
        t0 = time.monotonic()
        with pytest.raises(NcaError, match="UDP loss between the sender of stream 0 and the switch: the sender "
                                           "finished .* the switch took 9 of its 10 data datagrams"):
            inst.execute(0)
        assert time.monotonic() - t0 < 10
    finally:
        if sender is not None:
            sender.close()
        inst.destroy()
