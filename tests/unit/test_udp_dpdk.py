"""DPDK as the C runtime's UDP send and receive path (docs/udp-transport.md, "DPDK"), on a virtual
device only: a veth pair inside a network namespace this test creates and deletes, one end
driven by DPDK's af_packet PMD (--no-huge, --no-pci), the other a kernel socket with a private
address. A scan NCA built with DPDK sends to a kernel receiver; an NTF relay built with DPDK
receives from a kernel sender. Skipped, saying why, without libdpdk-dev, root or iproute2."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from urllib.parse import quote

import pytest

from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.codegen.golden import scan_chain
from jumpgate.ncas.software.dpdk import dpdk_missing

from .fixtures.runtime_harness import FIXTURES, NcaProcess

pytestmark = [
    pytest.mark.skipif(dpdk_missing() is not None, reason=f"DPDK: {dpdk_missing()}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="DPDK on af_packet and network namespaces need root"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="no iproute2 (ip) for the network namespace"),
]

KERNEL_IP, DPDK_IP = "10.231.7.1", "10.231.7.2"  # private, on our own veth pair only


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def netns():
    """Namespace with veth pair va (kernel, KERNEL_IP) <-> vb (for DPDK); yields (name, va MAC, vb MAC)."""
    ns = f"jgdpdk{os.getpid()}"
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        sh("ip", "-n", ns, "addr", "add", f"{KERNEL_IP}/24", "dev", "va")
        for dev in ("lo", "va", "vb"):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        macs = {d: json.loads(sh("ip", "-n", ns, "-j", "link", "show", d))[0]["address"] for d in ("va", "vb")}
        # the kernel side has no ARP answer from DPDK: a permanent neighbour entry instead
        sh("ip", "-n", ns, "neigh", "replace", DPDK_IP, "lladdr", macs["vb"], "dev", "va", "nud", "permanent")
        yield ns, macs["va"], macs["vb"]
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def dpdk_params(peer_mac: str, core: int = 1) -> list[str]:
    eal = f"-l {core} --no-huge -m 256 --no-shconf --no-pci --vdev=net_af_packet0,iface=vb"
    return [f"param udp.dpdk {quote(eal, safe='')}", f"param udp.dpdk.ip {DPDK_IP}",
            f"param udp.dpdk.peer_mac {quote(peer_mac, safe='')}"]


def in_netns(ns: str, code: str) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())


def test_dpdk_sender_to_a_kernel_receiver(netns, tmp_path):
    ns, va_mac, _ = netns
    ops, layout = scan_chain({"k": "int64", "v": "int64"}, [])
    exe = build_nca(generate_scan_query(ops, layout), "scan_json", tmp_path.parent / "nca-cache", dpdk=True).path
    n = 20000
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": 3 * i}) + "\n" for i in range(n)))
    receiver = in_netns(ns, f"""
import json
from jumpgate.client.udp import UdpReceiver
r = UdpReceiver({KERNEL_IP!r}, 0)
print(r.port, flush=True)
r.start(1, json.loads({json.dumps(json.dumps(layout.to_json()))}))
ok = r.wait(60)
t = r.table() if ok and not r.error else None
print(json.dumps({{"error": r.error, "rows": t and t.num_rows, "sum": t and sum(t.column("v").to_pylist()),
                  "datagrams": r.datagrams}}), flush=True)
""")
    nca = NcaProcess(exe, prefix=("ip", "netns", "exec", ns))
    try:
        port = int(receiver.stdout.readline())
        nca.send(*dpdk_params(va_mac), f"file {tmp_path / 't.jsonl'}", f"dest 0 {KERNEL_IP} {port} 0 1 udp 0 1",
                 "execute 0")
        done = nca.event("done", timeout=60)
        result = json.loads(receiver.stdout.readline())
        assert result == {"error": None, "rows": n, "sum": 3 * n * (n - 1) // 2, "datagrams": n}
        assert done["stats"]["tuples_out"] == n
    finally:
        nca.kill()
        receiver.kill()
        receiver.wait()
        receiver.stdout.close()


def test_dpdk_receiver_from_a_kernel_sender(netns, tmp_path):
    ns, va_mac, _ = netns
    relay = build_nca((FIXTURES / "copy_query.c").read_text(), "ntf_relay", tmp_path.parent / "nca-cache",
                      dpdk=True).path
    nca = NcaProcess(relay, inputs=1, extra_args=("--udp-inputs", "0"), prefix=("ip", "netns", "exec", ns))
    try:
        port = nca.ports[0]  # the DPDK side receives on the port number the kernel reserved
        nca.send(*dpdk_params(va_mac), "expect 0 2", "execute 0")
        n = 5000
        sender = in_netns(ns, f"""
import socket, time
from jumpgate.client import udp
from tests.unit.fixtures.runtime_harness import encode_tuple
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
time.sleep(1.0)  # EAL and the port start after `execute`
for sid in range(2):
    for i in range({n}):
        s.sendto(udp.data_datagram(sid, i, [encode_tuple({{"i": i, "s": "dpdk"}})]), ({DPDK_IP!r}, {port}))
        if i % 256 == 255:
            time.sleep(0.002)  # af_packet's ring is small: do not outrun one polling core
    for _ in range(3):
        s.sendto(udp.end_datagram(sid, {n}, {n}), ({DPDK_IP!r}, {port}))
print("sent", flush=True)
""")
        assert sender.stdout.readline().strip() == "sent"
        done = nca.event("done", timeout=60)
        assert done["stats"]["tuples_in"] == 2 * n
        sender.wait()
        sender.stdout.close()
    finally:
        nca.kill()
