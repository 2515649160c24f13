"""DPDK as the C runtime's UDP send and receive path (docs/udp-transport.md, "DPDK"), on a virtual
device only: a veth pair inside a network namespace this test creates and deletes, one end
driven by DPDK's af_packet PMD (--no-huge, --no-pci), the other a kernel socket with a private
address. A scan NCA built with DPDK sends to a kernel receiver; an NTF relay built with DPDK
receives from a kernel sender; a real server picks DPDK for exactly the NCAs its JUMPGATE_DPDK
names. scripts/setup.sh installs libdpdk-dev and iproute2, so these run wherever the suite does;
they skip, saying why, only without root, when this machine will not create a network namespace,
or when DPDK's EAL cannot start here at all (probed on net_null, which needs no device)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
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


@pytest.fixture(scope="module")
def scan_exe(tmp_path_factory) -> tuple[Path, object]:
    """The JSON scan of columns k, v (int64) built with DPDK, and its output layout."""
    ops, layout = scan_chain({"k": "int64", "v": "int64"}, [])
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca(generate_scan_query(ops, layout), "scan_json", cache, dpdk=True).path, layout


@pytest.fixture(scope="module")
def eal_works(scan_exe, tmp_path_factory) -> None:
    """Skip when DPDK's EAL cannot start on this machine at all: the scan sends 10 rows into
    net_null, a virtual device that needs nothing of the machine. Any other failure fails."""
    d = tmp_path_factory.mktemp("eal-probe")
    (d / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": i}) + "\n" for i in range(10)))
    eal = "-l 0 --no-huge -m 128 --no-shconf --vdev=net_null0"
    nca = NcaProcess(scan_exe[0])
    try:
        nca.send(f"param udp.dpdk {quote(eal, safe='')}", f"param udp.dpdk.ip {DPDK_IP}",
                 f"param udp.dpdk.peer_mac {quote('02:00:00:00:00:01', safe='')}", f"file {d / 't.jsonl'}",
                 "dest 0 10.231.7.1 9 0 1 udp 0 1", "execute 0")
        ev = nca.event(timeout=60)
    finally:
        nca.kill()
    if ev and ev["event"] == "error" and "DPDK EAL init failed" in ev["message"]:
        pytest.skip(f"DPDK's EAL does not start here: {ev['message']}")
    assert ev and ev["event"] == "done", ev


@pytest.fixture
def netns(eal_works):
    """Namespace with veth pair va (kernel, KERNEL_IP) <-> vb (for DPDK); yields (name, va MAC, vb MAC)."""
    ns = f"jgdpdk{os.getpid()}"
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"this machine does not let us create a network namespace: {made.stderr.strip()}")
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


def test_dpdk_sender_to_a_kernel_receiver(netns, scan_exe, tmp_path):
    ns, va_mac, _ = netns
    exe, layout = scan_exe
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
from jumpgate.contract import udp
from tests.unit.fixtures.runtime_harness import encode_tuple
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
time.sleep(1.0)  # EAL and the port start after `execute`
for sid in range(2):
    for i in range({n}):
        s.sendto(udp.data_datagram(sid, i, [encode_tuple({{"i": i, "s": "dpdk"}})]), ({DPDK_IP!r}, {port}))
        if i % 64 == 63:
            # af_packet's ring is small: do not outrun one polling core, even on a busy machine
            # where that core is often not running
            time.sleep(0.002)
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


# A real server inside the namespace (its NCAs listen on KERNEL_IP, the client too): the scan sends
# the job's answer to the client over UDP, through DPDK when JUMPGATE_DPDK names it. DPDK frames
# leave vb and arrive at va, where the kernel counts them; kernel sockets to KERNEL_IP never touch va.
SERVER_JOB = """
import json, os, subprocess, sys
from pathlib import Path
from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

def va_rx():
    return json.loads(subprocess.run(["ip", "-s", "-j", "link", "show", "va"], capture_output=True,
                                     check=True, text=True).stdout)[0]["stats64"]["rx"]["packets"]

data, cache, log, kernel_ip = sys.argv[1:5]
request = {"operations": [
    {"kind": "read", "name": "t", "path": "t.jsonl", "format": "json",
     "schema": [{"name": "k", "type": "int64"}, {"name": "v", "type": "int64"}]},
    {"kind": "filter", "name": "f", "input": "t", "condition": "k % 2 = 0"},
    {"kind": "send", "name": "out", "input": "f", "transport": "udp", "host": kernel_ip, "port": 0}]}
with LocalServer(Path(data), Path(cache), Path(log), extra_args=["--nca-host", kernel_ip, "--send-allow", kernel_ip]) as srv:
    before = va_rx()
    with Jumpgate(srv.url) as jg:
        table = jg.run(request, timeout=120)["out"]
        status = jg.last_job.status()
    print(json.dumps({"rows": table.num_rows, "sum": sum(table.column("v").to_pylist()),
                      "ncas": [n["implementation"] for n in status["ncas"]], "va_rx": va_rx() - before}))
"""


def run_server_job(ns: str, tmp_path: Path, dpdk_setting: dict) -> dict:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    n = 40000
    (data / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": 3 * i}) + "\n" for i in range(n)))
    env = {**os.environ, "JUMPGATE_DPDK": json.dumps(dpdk_setting)}
    proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", textwrap.dedent(SERVER_JOB), str(data),
                           str(tmp_path.parent / "nca-cache"), str(tmp_path / "server.log"), KERNEL_IP],
                          capture_output=True, text=True, env=env, timeout=300, cwd=os.getcwd())
    assert proc.returncode == 0, proc.stderr[-3000:] + (tmp_path / "server.log").read_text()[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rows"] == n // 2 and out["sum"] == sum(3 * i for i in range(0, n, 2))
    return out


def test_the_server_uses_dpdk_for_the_ncas_its_setting_names(netns, tmp_path):
    ns, va_mac, _ = netns
    port = {"eal": "-l 1 --no-huge -m 256 --no-shconf --vdev=net_af_packet0,iface=vb",
            "ip": DPDK_IP, "peer_mac": va_mac}
    named = run_server_job(ns, tmp_path, {"software.scan_json": port})
    assert named["ncas"] == ["software.scan_json"]
    # 20000 tuples of 24 bytes + 4-byte lengths in 1472-byte datagrams: at least 390 frames on va
    assert named["va_rx"] >= 20000 * 28 // 1472, named
    other = run_server_job(ns, tmp_path, {"software.aggregate": port})  # names another NCA only
    assert other["va_rx"] < 20, other  # kernel sockets: loopback, not the veth pair


def test_bad_eal_arguments_fail_the_phase_without_touching_the_event_channel(scan_exe, tmp_path):
    """EAL prints its usage to stdout on bad arguments; stdout is the NCA's event channel, so the
    runtime points it at stderr meanwhile: the control plane reads an `error` event, not junk."""
    (tmp_path / "t.jsonl").write_text('{"k": 1, "v": 2}\n')
    nca = NcaProcess(scan_exe[0])
    try:
        nca.send(f"param udp.dpdk {quote('--no-huge --in-memory', safe='')}", f"param udp.dpdk.ip {DPDK_IP}",
                 f"param udp.dpdk.peer_mac {quote('02:00:00:00:00:01', safe='')}", f"file {tmp_path / 't.jsonl'}",
                 "dest 0 10.231.7.1 9 0 1 udp 0 1", "execute 0")
        ev = nca.event(timeout=60)
        assert ev["event"] == "error" and ev["message"].startswith("DPDK EAL init failed (--no-huge --in-memory)"), ev
    finally:
        nca.kill()
