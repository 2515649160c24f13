"""The thesis' switch experiment (§3.5.6) on a software switch: BMv2 (simple_switch_grpc) running the
compiled p4/v1model/jumpgate_agg.p4 between network namespaces, driven by the switch plugin's
P4Runtime backend (`switch.aggregate`, JUMPGATE_SWITCH=bmv2://...; docs/switch.md, "On BMv2").

    sender (ns)  --veth-- port 1 [ BMv2, switch ns ] port 2 --veth--  final (ns)
                                         port 3
                                           |
                         root ns: the server, the plugin (controller), the client

`sender` and `final` are SSH nodes (jumpgate/deploy/netns_fixture.py: each its own namespace, sshd
and data root, on a bridge that carries the server's SSH and the client's results). store_sales is
on `sender` only and each node has one core, so the scan runs on `sender` and the final aggregation
on `final`. Their datagrams cross BMv2 on veth pairs of their own: the switch's data address
(`data_ip`, on no host) is routed over each host's link to the switch, with a static neighbour
entry (BMv2 answers no ARP), and BMv2's `forward` table sends each host's address out of that
host's port, to its MAC. So: scan -> BMv2 (the partial aggregation) -> final aggregation -> client,
END notices BMv2 -> plugin, FLUSH and FINISH plugin -> BMv2, all as IP datagrams through the
compiled program. The answer must equal DuckDB's over the same rows, and the switch must have
aggregated: tuples taken through its table, fewer records out than tuples in.

Runs when p4c, simple_switch_grpc, ethtool and the `p4runtime` package are installed and namespace
test hosts can be made (root, iproute2, sshd); says which is missing otherwise. BMv2 takes a few
thousand packets a second here, so the job runs on a few thousand of store_sales' rows.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.deploy import netns_fixture
from jumpgate.deploy.netns_fixture import NetnsHosts, kill_all_in, link_names, netns_names, run_ip
from jumpgate.local_server import LocalServer
from jumpgate.ncas.switch import defs
from jumpgate.ncas.switch.backends import P4RuntimeBackend
from jumpgate.ncas.switch.controller import TableEntry

from .test_switch import REQUEST

SF = 0.1  # the conformance data test_switch.py uses; the job reads its first ROWS rows
ROWS = 4000
SLOTS = 512  # slot indices per way a job leases: the smallest block, so a flush is 8 x 512 FLUSHes
# BMv2's egress queues hold 64 packets by default and drop beyond; a datagram's next pass goes
# through its port's egress queue (the v1model program recirculates in egress), so a sender's
# burst would lose passes ("UDP loss inside the switch")
EGRESS_QUEUE = 4096
GRPC_PORT, THRIFT_PORT = 9559, 9090
PROGRAM = defs.p4_dir() / "v1model" / "jumpgate_agg.p4"


def why_skipped() -> str | None:
    """Why this test cannot run here (None: it can)."""
    for tool, what in (("p4c", "p4c (p4lang's compiler)"),
                       ("simple_switch_grpc", "simple_switch_grpc (BMv2 with P4Runtime)"), ("ethtool", "ethtool")):
        if shutil.which(tool) is None:
            return f"{what} is not installed (docs/switch.md, 'On BMv2', says where to get it)"
    if importlib.util.find_spec("p4") is None or importlib.util.find_spec("grpc") is None:
        return "the p4runtime package is not installed (pip install 'jumpgate[switch]')"
    if importlib.util.find_spec("thrift") is None:
        return "the thrift package is not installed (pip install 'jumpgate[switch]')"
    why = netns_fixture.why_not()
    return f"no namespace test hosts: {why}" if why else None


WHY_SKIPPED = why_skipped()
pytestmark = [pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(WHY_SKIPPED is not None, reason=f"BMv2 end to end skipped: {WHY_SKIPPED}")]


def ip_in(netns: str | None, *args: str) -> None:
    run_ip(*(["-n", netns] if netns else []), *args)


def in_netns(netns: str | None, *argv: str) -> subprocess.CompletedProcess:
    cmd = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    return subprocess.run(cmd, capture_output=True, text=True, check=True)


def mac_of(netns: str | None, link: str) -> int:
    out = subprocess.run(["ip", *(["-n", netns] if netns else []), "-j", "link", "show", "dev", link],
                         capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)[0]["address"].replace(":", ""), 16)


def rx_packets(netns: str | None, link: str) -> int:
    out = subprocess.run(["ip", *(["-n", netns] if netns else []), "-j", "-s", "link", "show", "dev", link],
                         capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)[0]["stats64"]["rx"]["packets"])


class Bmv2Switch:
    """BMv2 in a namespace of its own, with one port per host (`ports`: port number -> the host's
    namespace, None for the root namespace) and a management address on the hosts' bridge for its
    gRPC (P4Runtime) and Thrift servers. Names follow netns_fixture's (`jgt<pid>-x...`), so what a
    crashed run left is swept by the next. `close` stops BMv2 and removes the namespace and links,
    also after a failure."""

    def __init__(self, work: Path, hosts: NetnsHosts, ports: dict[int, str | None],
                 program: tuple[Path, Path]) -> None:
        assert hosts.subnet is not None
        self.work, self.hosts, self.ports = work, hosts, ports
        self.p4info, self.config = program
        self.tag = f"{netns_fixture.PREFIX}{os.getpid():x}-x"  # as NetnsHosts' names, another sequence
        self.netns = f"{self.tag}sw"
        self.mgmt = str(hosts.subnet.network_address + 254)  # BMv2's gRPC and Thrift, on the bridge
        self.data_ip = str(hosts.subnet.network_address + 100)  # the address the switch answers for
        self.proc: subprocess.Popen | None = None
        self.log = work / "simple_switch_grpc.log"
        self._links: list[str] = []  # root-namespace ends, removed by close

    def url(self, *, push: bool) -> str:
        """JUMPGATE_SWITCH for the plugin: the controller at the root namespace's bridge address."""
        config = f"&config={self.config}" if push else ""
        return (f"bmv2://{self.mgmt}:{GRPC_PORT}?device_id=0&p4info={self.p4info}{config}"
                f"&thrift={self.mgmt}:{THRIFT_PORT}&data_ip={self.data_ip}"
                f"&ctrl_ip={self.hosts.client_address}")

    def start(self) -> None:
        try:
            run_ip("netns", "add", self.netns)
            ip_in(self.netns, "link", "set", "lo", "up")
            self._veth(f"{self.tag}mi", self.netns, f"{self.tag}mo", None)
            run_ip("link", "set", f"{self.tag}mo", "master", self.hosts.bridge)
            run_ip("link", "set", f"{self.tag}mo", "up")
            ip_in(self.netns, "addr", "add", f"{self.mgmt}/24", "dev", f"{self.tag}mi")
            ip_in(self.netns, "link", "set", f"{self.tag}mi", "up")
            for port, host_ns in self.ports.items():
                self._port(port, host_ns)
            self._run_switch()
            self._program()
        except BaseException:
            self.close()
            raise

    def _veth(self, inner: str, inner_ns: str, outer: str, outer_ns: str | None) -> None:
        run_ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        self._links.append(outer)
        run_ip("link", "set", inner, "netns", inner_ns)
        if outer_ns:
            run_ip("link", "set", outer, "netns", outer_ns)

    def _port(self, port: int, host_ns: str | None) -> None:
        """Switch port `port` and its host's end: no checksum or segmentation offloads (BMv2 reads
        frames off the wire: a GSO super-packet or a checksum left to the NIC would reach it as
        is), no IPv6 chatter; on the host, the switch's data address routed over this link with a
        static neighbour entry, and no reverse-path filter on it (the switch's output comes in
        here, from the switch's address)."""
        sw, host = f"{self.tag}w{port}", f"{self.tag}h{port}"
        self._veth(sw, self.netns, host, host_ns)
        for ns, link in ((self.netns, sw), (host_ns, host)):
            in_netns(ns, "ethtool", "-K", link, "rx", "off", "tx", "off", "sg", "off", "tso", "off", "gso", "off",
                     "gro", "off")
            in_netns(ns, "sysctl", "-qw", f"net.ipv6.conf.{link}.disable_ipv6=1")
            ip_in(ns, "link", "set", link, "up")
        in_netns(host_ns, "sysctl", "-qw", f"net.ipv4.conf.{host}.rp_filter=0")
        ip_in(host_ns, "route", "replace", f"{self.data_ip}/32", "dev", host)
        mac = ":".join(f"{b:02x}" for b in mac_of(self.netns, sw).to_bytes(6, "big"))
        ip_in(host_ns, "neigh", "replace", self.data_ip, "lladdr", mac, "dev", host, "nud", "permanent")

    def _run_switch(self) -> None:
        ifaces = [a for port in self.ports for a in ("-i", f"{port}@{self.tag}w{port}")]
        argv = ["ip", "netns", "exec", self.netns, "simple_switch_grpc", "--no-p4", "--device-id", "0", *ifaces,
                "--thrift-port", str(THRIFT_PORT), "--notifications-addr", f"ipc://{self.work}/bmv2-notifications.ipc",
                "--", "--grpc-server-addr", f"{self.mgmt}:{GRPC_PORT}"]
        with self.log.open("wb") as out:  # the child keeps its own descriptor of it
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:  # both servers listen once BMv2 is up
            try:
                for port in (GRPC_PORT, THRIFT_PORT):
                    socket.create_connection((self.mgmt, port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"simple_switch_grpc did not start: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.1)

    def _program(self) -> None:
        """Push the compiled program, fill `forward` (the operator's part, docs/switch.md: each
        host's bridge address out of its port to its MAC) and deepen the egress queues. The
        plugin, connecting later without `config`, keeps all of it."""
        backend = P4RuntimeBackend(self.url(push=True))
        backend.open(self.work)
        try:
            entries = []
            for port, host_ns in self.ports.items():
                address = self.hosts.client_address if host_ns is None else \
                    next(h.address for h in self.hosts.hosts if h.netns == host_ns)
                entries.append(TableEntry("forward", int.from_bytes(socket.inet_aton(address), "big"), "send",
                                          (("port", port), ("dst_mac", mac_of(host_ns, f"{self.tag}h{port}")))))
            backend.write_entries(entries)
            backend.bm.call("set_all_egress_queue_depths", [(1, "i32", EGRESS_QUEUE)],
                            service="simple_switch")
        finally:
            backend.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.netns in netns_names():
            kill_all_in(self.netns)
            run_ip("netns", "del", self.netns, check=False)  # its veth ends go, and their peers with them
        for link in self._links:
            if link in link_names():
                run_ip("link", "del", link, check=False)
        left = [n for n in netns_names() if n == self.netns] + [n for n in link_names() if n in self._links]
        if left:
            raise RuntimeError(f"could not remove {', '.join(left)}")


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[NetnsHosts]:
    with NetnsHosts(tmp_path_factory.mktemp("netns"), names=["sender", "final"]) as made:
        yield made


@pytest.fixture(scope="module")
def store_sales(hosts) -> Path:
    """The first ROWS rows of sf 0.1's store_sales, on the sender's data root only."""
    pytest.importorskip("duckdb")
    from jumpgate.conformance import default_data_dir, ensure_data

    root = default_data_dir(SF)
    ensure_data(root, ["tpcds/store_sales"], SF)
    first = sorted((root / "tpcds" / "store_sales").glob("*.jsonl"))[0]
    target = hosts.host("sender").data_root / "tpcds" / "store_sales" / "part-0.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    with first.open() as src, target.open("w") as dst:
        for _, line in zip(range(ROWS), src, strict=False):
            dst.write(line)
    return target


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, Path]:
    """p4/v1model/jumpgate_agg.p4 compiled by p4c: (P4Info, BMv2 JSON)."""
    out = tmp_path_factory.mktemp("p4c")
    info = out / "jumpgate_agg.p4info.txtpb"
    done = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", str(info),
                           "-o", str(out), str(PROGRAM)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return info, out / "jumpgate_agg.json"


@pytest.fixture(scope="module")
def switch(hosts, program, tmp_path_factory) -> Iterator[Bmv2Switch]:
    sw = Bmv2Switch(tmp_path_factory.mktemp("bmv2"), hosts,
                    {1: hosts.host("sender").netns, 2: hosts.host("final").netns, 3: None}, program)
    sw.start()
    try:
        yield sw
    finally:
        sw.close()


def bmv2_server(hosts: NetnsHosts, switch: Bmv2Switch, work: Path, env: dict[str, str] | None = None
                ) -> Iterator[LocalServer]:
    """A server whose switch plugin drives `switch` (and whatever `env` adds); afterwards no NCA
    process may be left in the namespaces."""
    (work / "root").mkdir()
    nodes = hosts.inventory_yaml(work / "nodes.yaml", cores=1,
                                 overrides={h.name: {"cache_dir": str(h.home / "cache")} for h in hosts.hosts})
    env = {"JUMPGATE_SWITCH": switch.url(push=False), "JUMPGATE_SWITCH_SLOTS": str(SLOTS), "JUMPGATE_SWITCH_MODEL": "0",
           **(env or {})}
    srv = LocalServer(work / "root", None, work / "server.log", env=env,
                      extra_args=["--nodes", str(nodes), "--send-allow", str(hosts.subnet)])
    try:
        yield srv
    finally:
        srv.stop()
        left = hosts.ncas_left()
        assert not left, f"NCA processes left in the namespaces: {left}"


# One server per test (function scope): a server keeps warm spare NCAs in the namespaces, which
# another server's check that none of its NCAs is left would count.
@pytest.fixture
def server(hosts, switch, store_sales, tmp_path_factory) -> Iterator[LocalServer]:
    yield from bmv2_server(hosts, switch, tmp_path_factory.mktemp("bmv2-server"))


@pytest.fixture
def lossy_server(hosts, switch, store_sales, tmp_path_factory) -> Iterator[LocalServer]:
    """A server whose senders reach BMv2 through a lossy relay (JUMPGATE_SWITCH_RELAY, on the
    controller's address in the root namespace: senders -> bridge -> relay -> port 3 -> BMv2, and
    BMv2's receipts and END answers back the same way): 5% loss, 1% duplication and reordering,
    both ways."""
    faults = {"loss": 0.05, "dup": 0.01, "reorder": 0.01, "depth": 3, "seed": 53}
    yield from bmv2_server(hosts, switch, tmp_path_factory.mktemp("bmv2-lossy-server"),
                           {"JUMPGATE_SWITCH_RELAY": json.dumps(faults)})


def store_sales_answer(store_sales: Path) -> list[tuple]:
    import duckdb

    return [tuple(r) for r in duckdb.connect().execute(f"""
        SELECT ss_item_sk, count(*) AS items, sum(ss_sales_price) AS sales
        FROM read_json('{store_sales}', columns={{ss_item_sk: 'BIGINT', ss_sales_price: 'DECIMAL(7,2)'}})
        GROUP BY ss_item_sk ORDER BY ss_item_sk""").fetchall()]


# ---------------------------------------------------------------------------- the job


def test_store_sales_through_bmv2_matches_duckdb(hosts, switch, server, store_sales):
    request = json.loads(json.dumps(REQUEST))
    request["name"] = "switch store_sales on BMv2"
    request["operations"][-1]["host"] = hosts.client_address
    final_rx = rx_packets(hosts.host("final").netns, f"{switch.tag}h2")
    with Jumpgate(server.url) as jg:
        table = jg.run(request, timeout=300)["out"]
        status = jg.last_job.status()

    decisions = status["decisions"]
    assert decisions["partial"]["implementation"] == "switch.aggregate"
    ncas = {n["implementation"]: n for n in status["ncas"]}
    assert ncas["software.scan_json"]["host"] == "sender" and ncas["software.aggregate"]["host"] == "final"

    want = store_sales_answer(store_sales)
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("ss_item_sk", "items", "sales")), strict=True))
    assert got == want

    # the switch aggregated: BMv2's registers (read by the plugin through Thrift) counted every row
    # through its table, and it sent fewer records than it took tuples
    switch_id = ncas["switch.aggregate"]["id"]
    [phase] = status["timeline"]["ncas"][switch_id]["stages"]
    tuples_in, tuples_out = phase["tuples_in"], phase["tuples_out"]
    assert tuples_in == ROWS and 0 < tuples_out < tuples_in
    # the scan sent version 2 (acknowledged) datagrams, which BMv2 took each once through its ring
    # and answered (a stream that heard no receipts would not have ended)
    scan = status["timeline"]["ncas"][ncas["software.scan_json"]["id"]]["stages"][0]
    assert 1 <= scan["udp_sent"] - scan["udp_retransmitted"] - phase["switch_taken"] <= 64  # its ENDs
    # nothing is lost on the way: what BMv2 dropped as taken before can only be repeats the scan's
    # timers sent early (each original arrives too)
    assert phase["switch_repeats"] <= scan["udp_retransmitted"]
    flushed = tuples_out - phase["switch_bypassed"] - phase["switch_spilled"]
    assert 0 < flushed <= len(want)  # the slots that held an item, one record each
    # and its output crossed the veth from BMv2 to the final aggregation's host
    assert rx_packets(hosts.host("final").netns, f"{switch.tag}h2") - final_rx >= tuples_out / defs.TUPLES_PER_DATAGRAM
    print(f"\nBMv2 (simple_switch_grpc) data reduction on {ROWS} rows of TPC-DS store_sales: {tuples_in} tuples in, "
          f"{tuples_out} out ({tuples_in / tuples_out:.1f}x; bypassed {phase['switch_bypassed']}, "
          f"spilled {phase['switch_spilled']})")


def test_store_sales_through_bmv2_survives_loss_before_it(hosts, switch, lossy_server, store_sales):
    """The same job with 5% of the datagrams between the scan and BMv2 lost (and 1% duplicated and
    reordered), both ways: the scan repeats what is lost, BMv2's ring drops what it took before
    (also the relay's duplicates) and answers every datagram with a receipt, and the END once every
    datagram was taken. The answer must still be DuckDB's."""
    request = json.loads(json.dumps(REQUEST))
    request["name"] = "switch store_sales on BMv2, lossy"
    request["operations"][-1]["host"] = hosts.client_address
    with Jumpgate(lossy_server.url) as jg:
        table = jg.run(request, timeout=300)["out"]
        status = jg.last_job.status()
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("ss_item_sk", "items", "sales")), strict=True))
    assert got == store_sales_answer(store_sales)

    ncas = {n["implementation"]: n["id"] for n in status["ncas"]}
    stages = {nid: n["stages"][0] for nid, n in status["timeline"]["ncas"].items()}
    scan, phase = stages[ncas["software.scan_json"]], stages[ncas["switch.aggregate"]]
    assert scan["udp_retransmitted"] > 0 and phase["switch_repeats"] > 0
    assert phase["tuples_in"] == ROWS  # every tuple added once
    # each of the scan's data datagrams taken exactly once (what it sent less its repeats and ENDs)
    assert 1 <= scan["udp_sent"] - scan["udp_retransmitted"] - phase["switch_taken"] <= 64
    print(f"\nBMv2 behind 5% loss: the scan sent {scan['udp_sent']} datagrams, {scan['udp_retransmitted']} of them "
          f"repeats ({scan['udp_retransmitted_share']:.1%}); BMv2 took {phase['switch_taken']} and dropped "
          f"{phase['switch_repeats']} as taken before")
