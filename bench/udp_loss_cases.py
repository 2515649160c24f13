"""bench/udp_send.py's runs of the acknowledged UDP transport (docs/udp-transport.md, "Version 2"):
the JSON scan NCA sending version 2 to a real receiver, an NTF relay NCA that decodes every tuple
and acknowledges (its output is discarded), directly and through the lossy relay
(jumpgate/deploy/udp_relay.py) at 0%, 1% and 5% loss. Goodput is the rows over the time from the
scan's `execute` to the receiver's `done` (every tuple delivered and decoded); Gbit/s counts each
datagram once (the repeats' bytes are the retransmitted share of what went out). "sender s" is the
scan's own phase, which for version 2 ends only once everything is acknowledged; the CPU seconds
of the scan and of the receiver during their phases show what acknowledging costs on a machine
where wall times are noisy.

  rx-v1-batched / rx-v2-batched   1472-byte datagrams to the receiver NCA, version 1 / version 2
  rx-v1-1 / rx-v2-1               one tuple per datagram, version 1 / version 2
  relay-batched-L / relay-1-L     version 2 through the relay dropping L% of the datagrams both ways

The relay is a Python process: through it, one tuple per datagram is bounded by the relay's own
rate, not by the transport (the `relay-*-0` runs show that ceiling).
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from jumpgate.contract.ntf import NtfLayout
from jumpgate.dataflow.parse import parse_expression
from jumpgate.dataflow.plan import Filter, InputRef
from jumpgate.dataflow.typecheck import bind
from jumpgate.deploy.udp_relay import Faults, RelayProcess
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen.shuffle import generate_relay_query


@dataclass(frozen=True)
class Case:
    limits: str  # the dest line's `udp MAX_BYTES MAX_TUPLES`
    version: int
    loss: float | None  # None: no relay


RELAY_CASES = {
    "rx-v1-batched": Case("udp 1472 0", 1, None), "rx-v2-batched": Case("udp 1472 0", 2, None),
    "rx-v1-1": Case("udp 0 1", 1, None), "rx-v2-1": Case("udp 0 1", 2, None),
    **{f"relay-batched-{p}": Case("udp 1472 0", 2, p / 100) for p in (0, 1, 5)},
    **{f"relay-1-{p}": Case("udp 0 1", 2, p / 100) for p in (0, 1, 5)},
}


class Process:
    """An NCA process spoken to through the process protocol."""

    def __init__(self, exe: Path, *args: str) -> None:
        self.p = subprocess.Popen([str(exe), "--bind", "127.0.0.1", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.ports = json.loads(self.p.stdout.readline())["ports"]

    def send(self, lines: list[str]) -> None:
        self.p.stdin.write("\n".join(lines) + "\n")
        self.p.stdin.flush()

    def done(self) -> dict:
        while True:
            ev = json.loads(self.p.stdout.readline())
            if ev["event"] == "done":
                return ev["stats"]
            if ev["event"] == "error":
                raise RuntimeError(ev["message"])

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(10)
        self.p.stdout.close()


def receiver_nca(layout: NtfLayout, cache: Path) -> Path:
    """An NTF relay over the scan's layout: decodes each tuple, tests a filter every row passes,
    and forwards it to an output port with no destination (discarded)."""
    first = layout.schema.fields[0].name
    keep = Filter("keep", InputRef("scan"), bind(parse_expression(f"{first} IS NOT NULL", "keep"), layout.schema, "keep"))
    return build_nca(generate_relay_query([keep], layout.schema, layout, layout), "ntf_relay", cache).path


def run_one(scan: Path, rx_exe: Path, data: Path, case: Case, seed: int) -> tuple[dict, float, dict | None, dict]:
    """The scan's stats, the seconds from its `execute` to the receiver's `done`, the relay's
    report, the receiver's stats."""
    rx = Process(rx_exe, "--inputs", "1", "--udp-inputs", "0")
    relay = None
    try:
        rx.send(["threads 1", "expect 0 1", "execute 0"])
        port = rx.ports[0]
        if case.loss is not None:
            relay = RelayProcess(("127.0.0.1", port), Faults(loss=case.loss, seed=seed))
            port = relay.port
        nca = Process(scan, "--inputs", "0")
        try:
            t0 = time.monotonic()
            nca.send([f"file {data}", f"dest 0 127.0.0.1 {port} 0 1 {case.limits}" + (" v2" if case.version == 2 else ""),
                      "execute 0"])
            stats = nca.done()
            rx_stats = rx.done()  # every tuple arrived (version 1: nothing was lost on the way, or this never ends)
            delivered = time.monotonic() - t0
        finally:
            nca.close()
        return stats, delivered, relay.stop() if relay else None, rx_stats
    finally:
        if relay:
            relay.stop()
        rx.p.kill()
        rx.close()


def run_relay_cases(scan: Path, layout: NtfLayout, data: Path, rows: int, repeat: int, cache: Path,
                    cases: dict[str, Case]) -> None:
    rx_exe = receiver_nca(layout, cache)
    print("\nto a receiver NCA (version 1, or 2: acknowledged) and through the lossy relay (version 2); goodput = rows "
          "over the time from the scan's execute to the receiver's done")
    print(f"{'case':16} {'tuples/s':>12} {'Gbit/s':>7} {'sent':>10} {'repeated':>9} {'share':>7} {'relay dropped':>14} "
          f"{'sender s':>9} {'delivered s':>12} {'cpu: scan':>10} {'receiver':>9}")
    for name, case in cases.items():
        runs = [run_one(scan, rx_exe, data, case, seed=i + 1) for i in range(repeat)]
        stats, delivered, report, _ = sorted(runs, key=lambda r: r[1])[len(runs) // 2]  # the median delivery
        sent, repeated = stats.get("udp_sent", 0), stats.get("udp_retransmitted", 0)
        share = statistics.median(s.get("udp_retransmitted_share", 0.0) for s, _, _, _ in runs)
        cpu = statistics.median(s["cpu_ns"] / 1e9 for s, _, _, _ in runs)
        rx_cpu = statistics.median(r["cpu_ns"] / 1e9 for _, _, _, r in runs)
        good_bytes = stats["bytes_out"] * (1 - repeated / sent) if sent else stats["bytes_out"]
        dropped = "" if report is None else f"{report['forward']['dropped'] + report['back']['dropped']:,}"
        print(f"{name:16} {rows / delivered:12,.0f} {good_bytes * 8 / delivered / 1e9:7.3f} {sent:10,} {repeated:9,} "
              f"{share:7.2%} {dropped:>14} {stats['wall_ns'] / 1e9:9.3f} {delivered:12.3f} {cpu:10.3f} {rx_cpu:9.3f}")
        sys.stdout.flush()
