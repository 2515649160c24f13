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

The kernel UDP runs send to a socket nobody reads (the sender's cost is what is measured; the
kernel drops what overflows the receiver). DPDK runs need libdpdk-dev; af_packet needs root.

    .venv/bin/python bench/udp_send.py [--rows 2000000] [--repeat 3] [--only udp-1,dpdk-null-1]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jumpgate.ncas.software.build import build_nca  # noqa: E402
from jumpgate.ncas.software.codegen import generate_scan_query  # noqa: E402
from jumpgate.ncas.software.codegen.golden import scan_chain  # noqa: E402
from jumpgate.ncas.software.dpdk import dpdk_missing  # noqa: E402
from jumpgate.runtime.service import default_cache_dir  # noqa: E402

NS = f"jgbench{os.getpid()}"
KERNEL_IP, DPDK_IP = "10.231.9.1", "10.231.9.2"


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
    only = [c for c in args.only.split(",") if c]
    if only:
        cases = {k: v for k, v in cases.items() if k in only}
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
    finally:
        sink.close()
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    for k, why in skipped.items():
        print(f"{k}: skipped ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
