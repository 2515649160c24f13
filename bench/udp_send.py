"""How fast the JSON scan NCA sends NTF tuples over UDP (docs/udp-transport.md), against the same
scan sending nothing and sending over TCP (thesis §3.5.6: "the ORC parser sends each small
packet via the send syscall, resulting in low throughput (0.288Gbps)").

Every run scans the same file of (ss_item_sk int64, ss_sales_price decimal(7,2)) rows, the two
columns of the switch experiment, with one thread, and reports the sender's rows per second and
datagrams per second (medians of --repeat runs, wall time of the `execute` phase):

  none            the scan alone, output discarded: the parsing ceiling
  tcp             contract §3 TCP to a reader that drains it
  udp-batched     kernel UDP, as many tuples as fit in a 1472-byte datagram, sendmmsg batches
  udp-1           kernel UDP, one tuple per datagram (towards a switch), sendmmsg batches of 256
  udp-1-send      kernel UDP, one tuple per datagram, one system call each (the thesis' case)
  dpdk-null-1     DPDK, one tuple per datagram, into net_null (no wire: DPDK's own ceiling)
  dpdk-afpkt-1    DPDK, one tuple per datagram, through af_packet on a veth pair in a network
                  namespace to a kernel UDP socket (root only)

Towards the switch MODEL (p4/model), a job configured on it as the plugin configures one (the
thesis' job: count and sum of the price per item), the model taking every datagram through its
pipeline (UDP_GRO on its socket, as always). The sender is the ORC scan NCA (the thesis' sender
was an ORC reader), on the same rows written as ORC, or with `--switch-sender json` the JSON scan:

  switch-N        the switch's datagram layout: up to N = JG_TUPLES_PER_DATAGRAM tuples per
                  datagram (what the P4 parser and the recirculating record stack take;
                  docs/switch.md), runs of equal datagrams as UDP GSO sends
  switch-1        one tuple per datagram, sendmmsg batches with UDP GSO (the layout before)
  switch-1-send   one tuple per datagram, one `send` each: the thesis' case
  switch-N-v2     switch-N in version 2 (acknowledged; docs/udp-transport.md, "A switch in a
                  version 2 path"): at most 64 datagrams in flight (the bound the switch's endpoint
                  announces: `v2 window 64`), a receipt from the model for each, repeats of what
                  is lost

For these it also prints what the model did: tuples/s it took through its table (all of the
scan's tuples, from the scan's start until its `tuples` counter had them all), and whether it
received every datagram (its END notice). Then what the model alone takes (model-N): the scan
sends DRAIN_ROWS rows at N per datagram to the model while the model is stopped (SIGSTOP; they
wait in its socket's receive buffer), and the model, continued, works through them: tuples/s from
SIGCONT until its `tuples` counter has them all. Gbit/s counts the UDP payload (datagram header and
tuples); "wire" adds the 42 bytes of Ethernet, IPv4 and UDP headers each datagram has on a link.

The other kernel UDP runs send to a socket nobody reads (the sender's cost is what is measured; the
kernel drops what overflows the receiver). DPDK runs need libdpdk-dev; af_packet needs root.

The acknowledged transport (version 2, bench/udp_loss_cases.py): the scan to a receiver NCA that
acknowledges, version 1 against version 2 (rx-v1-batched, rx-v2-batched, rx-v1-1, rx-v2-1), and
version 2 through the lossy relay at 0%, 1% and 5% loss (relay-batched-0 .. relay-1-5): goodput
(tuples/s, Gbit/s) and the retransmitted share.

    .venv/bin/python bench/udp_send.py [--rows 2000000] [--repeat 3] [--only udp-1,switch-N,switch-1-send]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from udp_loss_cases import RELAY_CASES, run_relay_cases  # noqa: E402  (bench/udp_loss_cases.py)

from jumpgate.contract import udp  # noqa: E402
from jumpgate.contract.ntf import generate_ntf  # noqa: E402
from jumpgate.dataflow.request import parse_request  # noqa: E402
from jumpgate.ncas.software.build import build_nca  # noqa: E402
from jumpgate.ncas.software.codegen import generate_scan_query  # noqa: E402
from jumpgate.ncas.software.codegen.golden import scan_chain  # noqa: E402
from jumpgate.ncas.software.dpdk import dpdk_missing  # noqa: E402
from jumpgate.ncas.switch import defs, golden  # noqa: E402
from jumpgate.ncas.switch.backends import ModelBackend, resolve_ipv4  # noqa: E402
from jumpgate.ncas.switch.controller import JobConfig, JobSlots, Output, StreamCounters  # noqa: E402
from jumpgate.ncas.switch.query import SwitchQuery, compile_query  # noqa: E402
from jumpgate.runtime.service import default_cache_dir  # noqa: E402

NS = f"jgbench{os.getpid()}"
KERNEL_IP, DPDK_IP = "10.231.9.1", "10.231.9.2"
WIRE_HEADERS = 14 + 20 + 8  # Ethernet, IPv4, UDP: what a datagram adds on a link
THESIS_GBPS = 0.288  # the thesis' sender, one send per tuple (§3.5.6)
DRAIN_ROWS = 1_000_000  # model-N: what the model's receive buffer holds at N per datagram
UDP_GRO = 104  # <netinet/udp.h>


def write_rows(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            f.write(f'{{"ss_item_sk": {i % 18000 + 1}, "ss_sales_price": {(i * 7919) % 20000 / 100:.2f}}}\n')


class Nca:
    def __init__(self, exe: Path, prefix: tuple[str, ...] = ()) -> None:
        self.p = subprocess.Popen([*prefix, str(exe), "--bind", "127.0.0.1", "--inputs", "0"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        json.loads(self.p.stdout.readline())

    def run(self, lines: list[str]) -> dict:
        self.p.stdin.write("\n".join(lines) + "\nexecute 0\n")
        self.p.stdin.flush()
        while True:
            ev = json.loads(self.p.stdout.readline())
            if ev["event"] == "done":
                return ev["stats"]
            if ev["event"] == "error":
                raise RuntimeError(ev["message"])

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(10)


def tcp_sink() -> tuple[int, threading.Thread]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def drain():
        c, _ = srv.accept()
        while c.recv(1 << 20):
            pass
        c.close()
        srv.close()

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    return srv.getsockname()[1], t


def write_orc(path: Path, n: int) -> None:
    """The rows of write_rows, as one ORC file."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.orc as orc

    items = pa.array([i % 18000 + 1 for i in range(n)], pa.int64())
    prices = pa.array([Decimal((i * 7919) % 20000).scaleb(-2) for i in range(n)], pa.decimal128(7, 2))
    orc.write_table(pa.table({"ss_item_sk": items, "ss_sales_price": prices}), str(path))


def store_sales_query() -> SwitchQuery:
    """The thesis' job (golden case store_sales_items: count and sum of the price per item) as the
    switch runs it, over the scan's tuples."""
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "t.jsonl").write_text("")
        plan = parse_request(golden.CASES["store_sales_items"], Path(root))
    op = plan.op("p")
    return compile_query(plan, op, generate_ntf(plan.input_schema(op.input)))


@dataclass
class ModelRun:
    model_wall: float  # from the scan's start until the model had taken every tuple through its table
    tuples: int  # what the model took
    datagrams: int  # what the scan sent (its END)
    received: int  # what the model received (its END notice)


class SwitchJob:
    """A job on a fresh switch model process, configured through the controller classes exactly as
    the plugin configures one (all 229,376 slots), its records going to a socket nobody reads."""

    def __init__(self, cache: Path, query: SwitchQuery) -> None:
        self.backend = ModelBackend()
        self.backend.open(cache)
        self.ctrl = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ctrl.bind(("127.0.0.1", 0))
        self.ctrl.settimeout(2)
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.setsockopt(socket.SOL_UDP, UDP_GRO, 1)
        self.sink.bind(("127.0.0.1", 0))
        self.host, self.port = self.backend.ingress(0)
        ip = resolve_ipv4("127.0.0.1")
        slots = JobSlots(job=0, base=0, size=defs.WAY_SLOTS, tag=0x5EED5EED)
        self.backend.write_registers(StreamCounters.reset(0))
        self.backend.write_entries(JobConfig.entries(query, slots, self.port)
                                   + Output.entries(query, 0, ip, self.sink.getsockname()[1], 0, ip,
                                                    self.ctrl.getsockname()[1]))

    def wait(self, t0: float, rows: int) -> ModelRun:
        """Until the model has taken all `rows` tuples through its table (or stopped short of it)."""
        last, since = -1, time.monotonic()
        while (done := self.backend.read_register("tuples", 0)[0]) < rows:
            if done != last:
                last, since = done, time.monotonic()
            elif time.monotonic() - since > 2:
                break  # lost datagrams: it will not get there
            time.sleep(0.002)
        t1 = time.monotonic()
        try:
            h = udp.parse_header(data := self.ctrl.recv(2048))
            _, received = udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE)
            return ModelRun(t1 - t0, done, h.seq, received)
        except TimeoutError:  # every END copy lost: the model fell behind by more than its socket holds
            return ModelRun(t1 - t0, done, -1, self.backend.read_register("received", 0)[0])

    def close(self) -> None:
        self.ctrl.close()
        self.sink.close()
        self.backend.close()


def netns_up() -> str:
    def sh(*a):
        return subprocess.run(a, check=True, capture_output=True, text=True).stdout
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    sh("ip", "netns", "add", NS)
    sh("ip", "-n", NS, "link", "add", "va", "type", "veth", "peer", "name", "vb")
    sh("ip", "-n", NS, "addr", "add", f"{KERNEL_IP}/24", "dev", "va")
    for d in ("lo", "va", "vb"):
        sh("ip", "-n", NS, "link", "set", d, "up")
    return json.loads(sh("ip", "-n", NS, "-j", "link", "show", "va"))[0]["address"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--switch-sender", choices=("orc", "json"), default="orc",
                    help="the scan that sends towards the switch model (default: the ORC scan, as the thesis)")
    args = ap.parse_args()
    cache = default_cache_dir()
    ops, layout = scan_chain({"ss_item_sk": "int64", "ss_sales_price": "decimal(7,2)"}, [])
    src = generate_scan_query(ops, layout)
    exe = build_nca(src, "scan_json", cache).path
    why_no_dpdk = dpdk_missing()
    exe_dpdk = build_nca(src, "scan_json", cache, dpdk=True).path if why_no_dpdk is None else None
    tmp = Path(tempfile.mkdtemp(prefix="jg-udp-bench-"))
    data = tmp / "rows.jsonl"
    write_rows(data, args.rows)
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    uport = sink.getsockname()[1]
    eal = "-l 1 --no-huge -m 256 --no-shconf --no-pci"
    dpdk_common = ["param udp.dpdk.ip 10.231.9.2", f"param udp.dpdk.peer_mac {quote('02:00:00:00:00:01')}"]
    cases = {
        "none": (exe, [], lambda: []),
        "tcp": (exe, [], lambda: [f"dest 0 127.0.0.1 {tcp_sink()[0]} 0 1"]),
        "udp-batched": (exe, [], lambda: [f"dest 0 127.0.0.1 {uport} 0 1 udp 1472 0"]),
        "udp-1": (exe, [], lambda: [f"dest 0 127.0.0.1 {uport} 0 1 udp 0 1"]),
        "udp-1-send": (exe, [], lambda: ["param udp.batch 1", f"dest 0 127.0.0.1 {uport} 0 1 udp 0 1"]),
    }
    skipped = {}
    if exe_dpdk:
        cases["dpdk-null-1"] = (exe_dpdk, [], lambda: [
            f"param udp.dpdk {quote(eal + ' --vdev=net_null0', safe='')}", *dpdk_common,
            "dest 0 10.231.9.1 9 0 1 udp 0 1"])
        if os.geteuid() == 0 and shutil.which("ip"):
            cases["dpdk-afpkt-1"] = (exe_dpdk, ["ip", "netns", "exec", NS], lambda: [
                f"param udp.dpdk {quote(eal + ' --vdev=net_af_packet0,iface=vb,framecnt=16384', safe='')}",
                "param udp.dpdk.ip 10.231.9.2", f"param udp.dpdk.peer_mac {quote(MAC_A[0])}",
                f"dest 0 {KERNEL_IP} 9 0 1 udp 0 1"])
        else:
            skipped["dpdk-afpkt-1"] = "needs root and iproute2"
    else:
        skipped["dpdk-*"] = why_no_dpdk
    n = defs.TUPLES_PER_DATAGRAM
    # switch-N-v2's dest line as the plugin writes it from the model's endpoint (its ring's bound)
    switch_cases = {"switch-N": [f"udp 0 {n}"], "switch-N-v2": [f"udp 0 {n} v2 window {defs.SEEN}"],
                    "switch-1": ["udp 0 1"], "switch-1-send": ["udp 0 1", "batch"]}
    relay_cases = dict(RELAY_CASES)  # the acknowledged transport, direct and through the lossy relay
    only = [c for c in args.only.split(",") if c]
    if only:
        cases = {k: v for k, v in cases.items() if k in only}
        relay_cases = {k: v for k, v in relay_cases.items() if k in only}
        switch_cases = {k: v for k, v in switch_cases.items() if k in only}
    MAC_A = [netns_up()] if "dpdk-afpkt-1" in cases else [""]
    print(f"scan NCA, 1 thread, {args.rows:,} rows of (int64, decimal(7,2)); tuple 24 bytes, median of {args.repeat}")
    print(f"{'case':14} {'rows/s':>12} {'datagrams/s':>12} {'Gbit/s out':>11} {'wall s':>8}")
    try:
        for name, (binary, prefix, lines) in cases.items():
            walls, stats = [], None
            for _ in range(args.repeat):
                nca = Nca(binary, prefix)
                stats = nca.run([f"file {data}", *lines()])
                nca.close()
                walls.append(stats["wall_ns"] / 1e9)
            wall = statistics.median(walls)
            dgrams = {"none": 0, "tcp": 0, "udp-batched": None}.get(name, args.rows)
            if name == "udp-batched":
                dgrams = -(-stats["bytes_out"] // 1472)
            rate = args.rows / wall
            print(f"{name:14} {rate:12,.0f} {(dgrams or 0) / wall:12,.0f} {stats['bytes_out'] * 8 / wall / 1e9:11.3f} "
                  f"{wall:8.3f}")
        if relay_cases:
            run_relay_cases(exe, layout, data, args.rows, args.repeat, cache, relay_cases)
        if switch_cases:
            sender, rows_file = exe, data
            if args.switch_sender == "orc":
                sender, rows_file = build_nca(src, "scan_orc", cache).path, tmp / "rows.orc"
                write_orc(rows_file, args.rows)
            print(f"\nsender: the {args.switch_sender.upper()} scan NCA, 1 thread, the same rows")
            run_switch_cases(sender, rows_file, args.rows, args.repeat, cache, switch_cases)
            if "switch-N" in switch_cases:
                drain_file = tmp / f"drain{rows_file.suffix}"
                (write_orc if args.switch_sender == "orc" else write_rows)(drain_file, DRAIN_ROWS)
                model_alone(sender, drain_file, args.repeat, cache)
    finally:
        sink.close()
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    for k, why in skipped.items():
        print(f"{k}: skipped ({why})")
    return 0


def run_switch_cases(exe: Path, data: Path, rows: int, repeat: int, cache: Path, cases: dict[str, list[str]]) -> None:
    query = store_sales_query()
    n = defs.TUPLES_PER_DATAGRAM
    print(f"towards the switch model (N = {n} tuples per datagram at most); Gbit/s: UDP payload, and on the wire "
          f"(+{WIRE_HEADERS} bytes per datagram); model: tuples/s through its table, datagrams received/sent")
    print(f"{'case':14} {'tuples/s':>12} {'datagrams/s':>12} {'Gbit/s':>7} {'wire':>6} {'model t/s':>12} "
          f"{'received':>19} {'wall s':>7}")
    rates: dict[str, tuple[float, float, float]] = {}  # case: tuples/s, Gbit/s payload, on the wire
    for name, spec in cases.items():
        runs = []
        for _ in range(repeat):
            job = SwitchJob(cache, query)
            try:
                nca = Nca(exe)
                lines = [f"file {data}", *(["param udp.batch 1"] if "batch" in spec else []),
                         f"dest 0 {job.host} {job.port} 0 1 {spec[0]}"]
                t0 = time.monotonic()
                stats = nca.run(lines)
                nca.close()
                runs.append((stats, job.wait(t0, rows)))
            finally:
                job.close()
        wall = statistics.median(s["wall_ns"] / 1e9 for s, _ in runs)
        stats, model = sorted(runs, key=lambda r: r[0]["wall_ns"])[len(runs) // 2]
        dgrams = model.datagrams if model.datagrams >= 0 else model.received  # (at least) what arrived
        gbps = stats["bytes_out"] * 8 / wall / 1e9
        wire = (stats["bytes_out"] + WIRE_HEADERS * dgrams) * 8 / wall / 1e9
        model_rate = statistics.median(m.tuples / m.model_wall for _, m in runs)
        lost = any(m.received != m.datagrams or m.tuples != rows for _, m in runs)
        rates[name] = (rows / wall, gbps, wire)
        print(f"{name:14} {rows / wall:12,.0f} {dgrams / wall:12,.0f} {gbps:7.3f} {wire:6.3f} {model_rate:12,.0f} "
              f"{f'{model.received:,}/' + (f'{dgrams:,}' if model.datagrams >= 0 else '?'):>19} {wall:7.3f}"
              + ("  LOSS: the model fell behind" if lost else ""))
    if "switch-N" in rates:
        t, gbps, wire = rates["switch-N"]
        line = (f"switch-N: {gbps:.2f} Gbit/s of UDP payload ({gbps / THESIS_GBPS:.1f}x the thesis' {THESIS_GBPS}), "
                f"{wire:.2f} on the wire ({wire / THESIS_GBPS:.1f}x)")
        if "switch-1-send" in rates:
            line += f"; {t / rates['switch-1-send'][0]:.1f}x the tuples/s of one send per tuple here"
        print(line)



def model_alone(exe: Path, data: Path, repeat: int, cache: Path) -> None:
    """The model's own rate: DRAIN_ROWS rows queued while it is stopped, then taken."""
    query = store_sales_query()
    rates, complete = [], True
    for _ in range(repeat):
        job = SwitchJob(cache, query)
        try:
            pid = job.backend.proc.pid
            os.kill(pid, signal.SIGSTOP)
            try:
                nca = Nca(exe)
                nca.run([f"file {data}", f"dest 0 {job.host} {job.port} 0 1 udp 0 {defs.TUPLES_PER_DATAGRAM}"])
                nca.close()
            finally:
                os.kill(pid, signal.SIGCONT)
            t0 = time.monotonic()
            run = job.wait(t0, DRAIN_ROWS)
            complete &= run.tuples == DRAIN_ROWS and run.received == run.datagrams
            rates.append(run.tuples / run.model_wall)
        finally:
            job.close()
    print(f"{'model-N':14} {statistics.median(rates):12,.0f} tuples/s through the model's table alone "
          f"({DRAIN_ROWS:,} rows queued while it was stopped{'' if complete else '; some were LOST: more than it holds'})")


if __name__ == "__main__":
    sys.exit(main())
