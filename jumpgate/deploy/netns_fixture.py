"""Test hosts as Linux network namespaces, each with its own OpenSSH server: several "machines" on
one for the tests and benchmarks of SSH nodes (docs/deploy.md, `reach: ssh`).

Each host is a namespace with loopback up and one end of a veth pair, addressed on a private /24;
the other ends hang on a bridge in the root namespace, which has an address on the same /24 too:
the Jumpgate server and the test client live there, and NCAs send to the client at that address.
An address of a host exists only inside its namespace, so an NCA that binds its listening sockets
to its node's address (docs/nca-process-protocol.md, `--bind`) can only be running in that
namespace. Each host runs its own sshd inside its namespace (`ip netns exec NS sshd -D ...`, port
22 on the host's address, as on a real machine) with its own host key, the one client key
authorized, and a known_hosts file holding its key; each has its own data root directory.

    with NetnsHosts(tmp / "hosts", 3) as hosts:
        nodes = hosts.inventory_yaml(tmp / "nodes.yaml", cores=1)   # for `jumpgate serve --nodes`
        ...
        hosts.ncas()    # NCA processes running in each host's namespace, by node name

Names: every namespace, link and bridge is named `jgt<pid>-<n>...` (the owning process' id in hex
and a sequence number), at most 15 characters (the kernel's limit for interface names), so two
runs at once never collide, and what a crashed run left behind (its pid is gone) is recognised
and removed by the next run. The /24 is 10.213.X.0/24 with X the first one no interface or route
of this machine uses (starting from one derived from the pid, so concurrent runs rarely race).
`close` (and leaving the `with`) stops the sshds, kills every process left in the namespaces and
removes the namespaces, links and bridge, also when a test failed; it raises if any remains.
"""
from __future__ import annotations

import atexit
import functools
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import sshd_fixture

PREFIX = "jgt"
_OURS = re.compile(rf"^{PREFIX}([0-9a-f]+)-")  # the owner's pid, in hex
SUBNETS = ipaddress.ip_network("10.213.0.0/16")  # one /24 of it per run
NETNS_DIR = Path("/run/netns")
_sequence = itertools.count()


def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")
    return done


@functools.cache
def why_not() -> str | None:
    """Why namespace test hosts cannot be made here (None: they can). Tries it once: a namespace,
    a bridge and a veth pair are made and removed."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed (scripts/setup.sh installs it)"
    why = sshd_fixture.why_not()
    if why is not None:
        return why
    tag = f"{PREFIX}{os.getpid():x}-t"
    steps = [("netns", "add", f"{tag}n"), ("link", "add", f"{tag}b", "type", "bridge"),
             ("link", "add", f"{tag}v", "type", "veth", "peer", "name", f"{tag}p")]
    try:
        for step in steps:
            done = run_ip(*step, check=False)
            if done.returncode != 0:
                return f"`ip {' '.join(step)}` fails here: {done.stderr.strip()}"
        return None
    finally:
        run_ip("link", "del", f"{tag}v", check=False)
        run_ip("link", "del", f"{tag}b", check=False)
        run_ip("netns", "del", f"{tag}n", check=False)


# ---------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class NsProcess:
    """A process seen inside a namespace."""

    pid: int
    argv: tuple[str, ...]
    cpus: frozenset[int] = frozenset()  # the CPUs it may run on (its affinity) when looked at

    def option(self, name: str) -> str | None:
        """The value of `name VALUE` in the arguments, if there."""
        args = list(self.argv)
        i = args.index(name) if name in args else -1
        return args[i + 1] if 0 <= i < len(args) - 1 else None

    @property
    def bind(self) -> str | None:
        """The address an NCA was told to bind (`--bind HOST`, docs/nca-process-protocol.md),
        None for other processes."""
        return self.option("--bind")

    @property
    def inputs(self) -> int | None:
        """An NCA's number of network input ports (`--inputs N`)."""
        value = self.option("--inputs")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def is_nca(self) -> bool:
        return self.bind is not None

    @property
    def binary(self) -> str:
        return Path(self.argv[0]).name if self.argv else ""


def _netns_id(name: str) -> tuple[int, int] | None:
    try:
        st = os.stat(NETNS_DIR / name)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def processes_in(names: Sequence[str]) -> dict[str, list[NsProcess]]:
    """The live processes of each named namespace, in one pass over /proc: the same as
    `ip netns pids NS` (a process is in the namespace its /proc/PID/ns/net is), without a
    command per namespace, so one call is one snapshot of all of them. Zombies (exited, not yet
    reaped; they have no namespace any more) and kernel threads are left out."""
    ids = {i: n for n in names if (i := _netns_id(n)) is not None}
    out: dict[str, list[NsProcess]] = {n: [] for n in names}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
            name = ids.get((st.st_dev, st.st_ino))
            if name is None:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                raw = f.read()
            cpus = frozenset(os.sched_getaffinity(int(entry.name)))
        except OSError:  # it exited meanwhile
            continue
        argv = raw.rstrip(b"\0").split(b"\0")  # (sshd pads the title it sets with NULs)
        if raw:
            out[name].append(NsProcess(int(entry.name), tuple(a.decode(errors="replace") for a in argv), cpus))
    return out


def kill_all_in(netns: str, grace: float = 2.0) -> None:
    """TERM every process of the namespace, then KILL what is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        procs = processes_in([netns])[netns]
        if not procs:
            return
        for p in procs:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while processes_in([netns])[netns] and time.monotonic() < deadline:
            time.sleep(0.02)


# ---------------------------------------------------------------------------- leftovers


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftover(name: str) -> bool:
    m = _OURS.match(name)
    return m is not None and not _alive(int(m.group(1), 16))


def netns_names() -> list[str]:
    return [line.split()[0] for line in run_ip("netns", "list").stdout.splitlines() if line.strip()]


def link_names() -> list[str]:
    # `ip -o link show` lines: "7: NAME@PEER: <...> ..." (the @PEER only for some kinds)
    return [line.split(":")[1].strip().split("@")[0] for line in run_ip("-o", "link", "show").stdout.splitlines()]


def sweep_leftovers() -> list[str]:
    """Remove the namespaces, links and bridges of earlier runs whose process is gone (a crash, a
    SIGKILL): each is named after its owner's pid. Returns what was removed."""
    removed = []
    for ns in netns_names():
        if _leftover(ns):
            kill_all_in(ns, grace=0.5)
            run_ip("netns", "del", ns, check=False)
            removed.append(ns)
    for link in link_names():  # veth ends first (they hang on the bridge), then bridges
        if _leftover(link) and not link.endswith("br"):
            run_ip("link", "del", link, check=False)
            removed.append(link)
    for link in link_names():
        if _leftover(link):
            run_ip("link", "del", link, check=False)
            removed.append(link)
    return removed


# ---------------------------------------------------------------------------- the hosts


def used_subnets() -> set[ipaddress.IPv4Network]:
    """The /24s of 10.213.0.0/16 that an address or route of this machine touches."""
    text = run_ip("-o", "-4", "addr", "show").stdout + run_ip("-4", "route", "show", "table", "all").stdout
    used = set()
    for word in re.findall(r"\b10\.213\.\d+\.\d+(?:/\d+)?", text):
        net = ipaddress.ip_network(word, strict=False)
        used.update(net.subnets(new_prefix=24) if net.prefixlen < 24 else [net.supernet(new_prefix=24)])
    return used


def owners_of(subnet: ipaddress.IPv4Network) -> set[str]:
    """Interfaces with an address in `subnet`."""
    out = set()
    for line in run_ip("-o", "-4", "addr", "show").stdout.splitlines():
        parts = line.split()
        addr = ipaddress.ip_interface(parts[3]).ip
        if addr in subnet:
            out.add(parts[1])
    return out


@dataclass
class NetnsHost:
    """One test host: its node's name in the inventory, namespace, address, data root and sshd."""

    name: str
    netns: str
    address: str
    home: Path  # this host's own directory (the namespaces share this machine's disk)
    data_root: Path
    sshd: sshd_fixture.SshdFiles
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def sshd_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sessions(self) -> int:
        """Commands run through this host's sshd so far."""
        return sshd_fixture.sessions(self.sshd.log)


class NetnsHosts:
    """`count` namespace hosts named `names` (default n0, n1, ...); see the module docstring."""

    def __init__(self, work: Path, count: int = 3, names: Sequence[str] | None = None) -> None:
        self.work = Path(work)
        self.names = list(names) if names is not None else [f"n{i}" for i in range(count)]
        self.tag = f"{PREFIX}{os.getpid():x}-{next(_sequence)}"
        longest = f"{self.tag}v{len(self.names) - 1}"  # the veth end of the last host
        if len(longest) > 15:  # IFNAMSIZ - 1: `ip link add` refuses longer names
            raise ValueError(f"interface name {longest!r} would be longer than 15 characters")
        self.bridge = f"{self.tag}br"
        self.subnet: ipaddress.IPv4Network | None = None
        self.client_address = ""  # the root namespace's address on the bridge
        self.key_file = self.work / "client_key"  # the one client key every host authorizes
        self.hosts: list[NetnsHost] = []
        self._made_netns: list[str] = []
        self._made_links: list[str] = []

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> NetnsHosts:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        why = why_not()
        if why is not None:
            raise RuntimeError(f"cannot make namespace hosts here: {why}")
        atexit.register(self.close)  # a run that ends without leaving the `with` still cleans up
        try:
            sweep_leftovers()
            self.work.mkdir(parents=True, exist_ok=True)
            self._make_bridge()
            client_public = sshd_fixture.keygen(self.key_file)
            for i, name in enumerate(self.names):
                self.hosts.append(self._make_host(i, name, client_public))
            for i in range(len(self.hosts)):
                self.start_sshd(i)
        except BaseException:
            self.close()
            raise

    def _make_bridge(self) -> None:
        """The bridge and its address on the first free /24."""
        self._ip_made("link", self.bridge, "link", "add", self.bridge, "type", "bridge")
        run_ip("link", "set", self.bridge, "up")
        candidates = list(SUBNETS.subnets(new_prefix=24))[1:-1]
        start = os.getpid() % len(candidates)
        for subnet in candidates[start:] + candidates[:start]:
            if subnet in used_subnets():
                continue
            address = f"{subnet.network_address + 1}/24"
            run_ip("addr", "add", address, "dev", self.bridge)
            if owners_of(subnet) == {self.bridge}:
                self.subnet, self.client_address = subnet, str(subnet.network_address + 1)
                return
            run_ip("addr", "del", address, "dev", self.bridge)  # a concurrent run took it meanwhile
        raise RuntimeError(f"no free /24 in {SUBNETS}")

    def _ip_made(self, kind: str, name: str, *args: str) -> None:
        """Run `ip ARGS` that makes `name` and remember it for `close`."""
        run_ip(*args)
        (self._made_netns if kind == "netns" else self._made_links).append(name)

    def _make_host(self, i: int, name: str, client_public: str) -> NetnsHost:
        assert self.subnet is not None
        netns, outer, inner = f"{self.tag}n{i}", f"{self.tag}v{i}", f"{self.tag}p{i}"
        address = str(self.subnet.network_address + 2 + i)
        self._ip_made("netns", netns, "netns", "add", netns)
        self._ip_made("link", outer, "link", "add", outer, "type", "veth", "peer", "name", inner)
        run_ip("link", "set", inner, "netns", netns)
        run_ip("link", "set", outer, "master", self.bridge)
        run_ip("link", "set", outer, "up")
        run_ip("-n", netns, "link", "set", "lo", "up")  # NCAs of one host talk to each other here too
        run_ip("-n", netns, "addr", "add", f"{address}/24", "dev", inner)
        run_ip("-n", netns, "link", "set", inner, "up")
        home = self.work / name
        data_root = home / "data"
        data_root.mkdir(parents=True, exist_ok=True)
        files = sshd_fixture.configure_sshd(home / "sshd", address, 22, client_public)
        return NetnsHost(name, netns, address, home, data_root, files)

    def close(self) -> None:
        """Stop every sshd, kill what runs in the namespaces, remove namespaces, links, bridge.
        Safe to call more than once; raises if something could not be removed."""
        atexit.unregister(self.close)
        for host in self.hosts:
            if host.proc is not None:
                sshd_fixture.stop_process(host.proc)
        for ns in self._made_netns:
            kill_all_in(ns)
            run_ip("netns", "del", ns, check=False)
        for link in reversed(self._made_links):  # veths, then the bridge
            if link in link_names():
                run_ip("link", "del", link, check=False)
        left = [n for n in netns_names() if n in self._made_netns] + \
               [n for n in link_names() if n in self._made_links]
        self._made_netns, self._made_links = [], []
        if left:
            raise RuntimeError(f"could not remove {', '.join(left)}")

    # ------------------------------------------------------------------ using them

    def host(self, which: int | str) -> NetnsHost:
        return self.hosts[which] if isinstance(which, int) else next(h for h in self.hosts if h.name == which)

    def stop_sshd(self, which: int | str) -> None:
        """Stop a host's sshd: new logins fail (connection refused), as on a machine whose sshd
        is down. Sessions already open go on (they are processes of their own)."""
        host = self.host(which)
        if host.proc is not None:
            sshd_fixture.stop_process(host.proc)
            host.proc = None

    def start_sshd(self, which: int | str) -> None:
        """(Re)start a host's sshd inside its namespace, with the same host key and port."""
        host = self.host(which)
        if not host.sshd_running:
            host.proc = sshd_fixture.launch_sshd(host.sshd, ["ip", "netns", "exec", host.netns])

    def inventory_yaml(self, path: Path, *, cores: int = 1, ssh: Mapping[str, object] | None = None,
                       overrides: Mapping[str, Mapping[str, object]] | None = None,
                       node_fields: Mapping[str, Mapping[str, object]] | None = None) -> Path:
        """Write an inventory (docs/deploy.md) of the hosts as `reach: ssh` nodes: each node's
        address and ssh.host are the host's address, its data_root the host's. `ssh` adds fields
        to every node's ssh section; `overrides` (by node name) replaces fields of one node's ssh
        section, e.g. a known_hosts holding a wrong key, or a key_file the host does not accept;
        `node_fields` (by node name) adds fields of the node itself, e.g. its `cpus`."""
        nodes = []
        for h in self.hosts:
            spec = {"host": h.address, "port": h.sshd.port, "user": "root", "key_file": str(self.key_file),
                    "known_hosts": str(h.sshd.known_hosts), **(ssh or {}), **((overrides or {}).get(h.name) or {})}
            nodes.append({"name": h.name, "address": h.address, "cores": cores, "reach": "ssh",
                          "data_root": str(h.data_root), "ssh": spec, **((node_fields or {}).get(h.name) or {})})
        path = Path(path)
        path.write_text(yaml.safe_dump({"nodes": nodes}, sort_keys=False))
        return path

    def processes(self) -> dict[str, list[NsProcess]]:
        """The processes running in each host's namespace (sshd, sessions, NCAs), by node name."""
        by_ns = processes_in([h.netns for h in self.hosts])
        return {h.name: by_ns[h.netns] for h in self.hosts}

    def ncas(self) -> dict[str, list[NsProcess]]:
        """The NCA processes (`--bind` in their arguments) running in each host's namespace."""
        return {name: [p for p in procs if p.is_nca] for name, procs in self.processes().items()}

    def ncas_left(self, within: float = 5.0, ignore: Callable[[], set[int]] | None = None
                  ) -> dict[str, list[NsProcess]]:
        """The NCAs still running after waiting up to `within` seconds for all to end (a stopped
        NCA takes a moment to exit); empty when none is left. `ignore` names pids that do not
        count (e.g. a running server's warm spares, GET /v1/health "ncas_warm"); it is asked
        after each look, so a process that became one meanwhile is not in the look rather than
        counted."""
        deadline = time.monotonic() + within
        while True:
            seen = self.ncas()
            skip = ignore() if ignore is not None else set()
            left = {name: kept for name, procs in seen.items() if (kept := [p for p in procs if p.pid not in skip])}
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)
