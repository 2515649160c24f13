"""DPDK for software NCAs' UDP transport (docs/udp-transport.md, "DPDK"): the runtime's dpdk_io.c,
built and linked only where pkg-config finds Debian's libdpdk-dev, only into NCAs that ask for it
(`build_nca(..., dpdk=True)`), so nothing else depends on DPDK.

Which NCAs use it is the server's setting JUMPGATE_DPDK: a JSON object (inline, or the path of a
file holding it) from NCA implementation names to the DPDK port each instance of that NCA drives,
or to a list of such ports when several instances may run at once (each instance leases one for
its lifetime). An NCA not named keeps kernel sockets. `scripts/setup.sh` installs libdpdk-dev.
"""
from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import os
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ...nca.interface import NcaError
from .buildstep import beside_runtime, stamped_build
from .toolchain import NcaBuildError, run_make

OBJECT = "dpdk_io.o"
SELECT_ENV = "JUMPGATE_DPDK"  # which NCAs send and receive UDP through DPDK, and on which ports
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


class DpdkUnavailable(Exception):
    pass


@dataclass(frozen=True)
class DpdkToolchain:
    version: str
    ldflags: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"libdpdk {self.version}"


@functools.cache
def dpdk_toolchain() -> DpdkToolchain:
    """libdpdk's version and link flags from pkg-config; DpdkUnavailable (with the fix) without it."""
    try:
        version = subprocess.run(["pkg-config", "--modversion", "libdpdk"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        libs = subprocess.run(["pkg-config", "--libs", "libdpdk"], capture_output=True, text=True,
                              check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        raise DpdkUnavailable("pkg-config finds no libdpdk: apt-get install libdpdk-dev "
                              "(bash scripts/setup.sh installs it)") from None
    return DpdkToolchain(version, tuple(libs))


def dpdk_missing() -> str | None:
    """Why NCAs cannot be built with DPDK here, or None."""
    try:
        dpdk_toolchain()
    except DpdkUnavailable as e:
        return str(e)
    return None


def ensure_dpdk_object(runtime: Path) -> tuple[Path, DpdkToolchain]:
    """Build dpdk_io.o (`make dpdk`) into runtime/dpdk-<hash of the libdpdk version> unless there."""
    try:
        tc = dpdk_toolchain()
    except DpdkUnavailable as e:
        raise NcaBuildError(f"the NCA cannot be built with DPDK: {e}") from None
    target, lock = beside_runtime(runtime, f"dpdk-{hashlib.sha256(tc.key.encode()).hexdigest()[:12]}")
    stamped_build(target, lambda tmp: run_make(tmp, "dpdk", [], "the DPDK transport"), {"dpdk": tc.key},
                  lock=lock)
    return target / OBJECT, tc


# ------------------------------------------------------------------ which NCAs use DPDK


@dataclass(frozen=True, slots=True)
class DpdkPort:
    """One DPDK Ethernet port as an NCA process drives it: the runtime's `udp.dpdk*` params."""

    eal: str  # EAL arguments: cores, memory, the device (--vdev=... or -a PCI-ADDRESS)
    ip: str  # this side's IPv4 address: senders' source, and where the NCA's UDP inputs listen
    peer_mac: str  # the next hop's MAC (no ARP on the DPDK path)
    port: int = 0  # the DPDK port id among the devices the EAL arguments give

    def params(self) -> dict[str, str]:
        return {"udp.dpdk": self.eal, "udp.dpdk.ip": self.ip, "udp.dpdk.peer_mac": self.peer_mac,
                "udp.dpdk.port": str(self.port)}


def _port(nca: str, i: int, entry: object) -> DpdkPort:
    where = f"{SELECT_ENV}: {nca}" + (f"[{i}]" if i >= 0 else "")
    if not isinstance(entry, dict):
        raise NcaError(f"{where} must be an object with eal, ip, peer_mac (and port)")
    unknown = sorted(set(entry) - {"eal", "ip", "peer_mac", "port"})
    if unknown:
        raise NcaError(f"{where}: unknown keys {', '.join(unknown)} (known: eal, ip, peer_mac, port)")
    eal, ip, mac, port = entry.get("eal"), entry.get("ip"), entry.get("peer_mac"), entry.get("port", 0)
    if not isinstance(eal, str) or not eal.strip():
        raise NcaError(f"{where}: eal (the EAL arguments, e.g. \"-l 2 --in-memory -a 0000:3b:00.0\") is missing")
    try:
        ipaddress.IPv4Address(ip)
    except (ipaddress.AddressValueError, ValueError):
        raise NcaError(f"{where}: ip must be this side's IPv4 address, got {ip!r}") from None
    if not isinstance(mac, str) or not _MAC.match(mac):
        raise NcaError(f"{where}: peer_mac must be the next hop's MAC (aa:bb:cc:dd:ee:ff), got {mac!r}")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 1024:
        raise NcaError(f"{where}: port must be a DPDK port id, got {port!r}")
    return DpdkPort(eal.strip(), str(ip), mac, port)


def dpdk_selection(text: str | None = None) -> dict[str, tuple[DpdkPort, ...]]:
    """JUMPGATE_DPDK (or `text`) parsed: NCA implementation name -> its DPDK ports; {} when unset."""
    text = os.environ.get(SELECT_ENV, "") if text is None else text
    if not text.strip():
        return {}
    if not text.lstrip().startswith("{"):
        try:
            text = Path(text.strip()).read_text()
        except OSError as e:
            raise NcaError(f"{SELECT_ENV} is neither a JSON object nor a readable file: {e}") from None
    try:
        config = json.loads(text)
    except ValueError as e:
        raise NcaError(f"{SELECT_ENV} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise NcaError(f"{SELECT_ENV} must map NCA implementation names to DPDK ports")
    out: dict[str, tuple[DpdkPort, ...]] = {}
    for nca, value in config.items():
        entries = value if isinstance(value, list) else [value]
        if not entries:
            raise NcaError(f"{SELECT_ENV}: {nca} names no DPDK port")
        out[nca] = tuple(_port(nca, i if isinstance(value, list) else -1, e) for i, e in enumerate(entries))
    return out


class DpdkLease:
    """One configured port held by one NCA instance: two processes never drive the same port."""

    _lock = threading.Lock()
    _held: set[tuple[str, int]] = set()

    def __init__(self, nca: str, index: int, port: DpdkPort) -> None:
        self.nca, self.index, self.port = nca, index, port
        self._released = False

    @classmethod
    def acquire(cls, nca: str, ports: tuple[DpdkPort, ...]) -> DpdkLease:
        with cls._lock:
            for i, port in enumerate(ports):
                if (nca, i) not in cls._held:
                    cls._held.add((nca, i))
                    return cls(nca, i, port)
        raise NcaError(f"all {len(ports)} DPDK ports that {SELECT_ENV} gives {nca} are in use by other "
                       f"instances; give it more (a list) or run the job again later")

    def release(self) -> None:
        with self._lock:
            if not self._released:
                self._released = True
                self._held.discard((self.nca, self.index))
