"""Where a tenant's jobs may send, and which files they may read (docs/security.md).

A `send` makes the service's NCAs open a connection to an address and port the request names and
write bytes the request chose: without a rule, any user could make the service talk to any
service it reaches. The operator decides per tenant (the token file's `tenants` section):

- `send.networks`: the networks a send may go to (CIDR). Default: the address the request came
  from, and loopback: a client receives its own results.
- `send.ports`: the ports (`"9000"` or `"1024-65535"`). Default: every port.
- `read_prefix`: a directory of the data root the tenant's reads must stay in. Default: all of it.

Whatever the rules say, a send never goes to the service's own REST port nor to its node agents'
ports. A host name is resolved once, at submit, and the job sends to the address it resolved to,
so a name cannot point somewhere else by the time the NCA connects.
"""
from __future__ import annotations

import ipaddress
import posixpath
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..contract.errors import Forbidden

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
LOOPBACK: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


class SendRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    networks: tuple[Annotated[str, Field(min_length=1)], ...] | None = None  # None: source + loopback
    ports: tuple[str, ...] = ("1-65535",)

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for net in value or ():
            ipaddress.ip_network(net, strict=False)  # ValueError names it
        return value

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spec in value:
            lo, hi = _port_range(spec)
            if not 1 <= lo <= hi <= 65535:
                raise ValueError(f"port range {spec!r} is not within 1-65535")
        return value

    def port_ranges(self) -> list[tuple[int, int]]:
        return [_port_range(p) for p in self.ports]


def _port_range(spec: str) -> tuple[int, int]:
    lo, _, hi = str(spec).partition("-")
    try:
        return int(lo), int(hi or lo)
    except ValueError:
        raise ValueError(f"{spec!r} is not a port or a range like 1024-65535") from None


class TenantPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    send: SendRule = SendRule()
    read_prefix: str = ""
    # Jobs of the tenant running at once, and cores they hold together (runtime/queue.py); beyond
    # them its jobs wait in the run queue. None: no limit of its own.
    max_jobs: int | None = Field(default=None, ge=1)
    max_cores: int | None = Field(default=None, ge=1)

    @field_validator("read_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value:
            return ""
        norm = posixpath.normpath(value.strip("/"))  # relative to the data root, like read paths
        if norm == ".." or norm.startswith("../"):
            raise ValueError(f"read_prefix {value!r} must stay inside the data root")
        return "" if norm == "." else norm + "/"


@dataclass(frozen=True)
class SendTarget:
    """One send of a request, as the policy sees it."""

    name: str
    path: str  # the request path, e.g. operations[4]
    host: str
    port: int


@dataclass(frozen=True)
class Reserved:
    """Endpoints no job may send to: the service's REST port (on its own addresses) and its node
    agents' ports (on loopback, where each node's NCAs would reach their own agent)."""

    rest_port: int
    rest_addresses: frozenset[str]
    agent_ports: frozenset[int] = frozenset()


def resolve(host: str) -> list[Address]:
    """The addresses a send's host stands for: itself when it is an address, else what the name
    resolves to now."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise LookupError(f"cannot resolve {host!r}: {e}") from None
    return sorted({ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}, key=str)


def check_sends(sends: Sequence[SendTarget], policy: TenantPolicy, source: str | None, reserved: Reserved,
                tenant: str, also: Sequence[str] = ()) -> dict[str, str]:
    """Each send's address to connect to (the host resolved); raises Forbidden naming the first
    send the rules refuse, and which rule. `also`: networks the operator allows every tenant's
    default rule (`serve --send-allow`)."""
    allowed: list[Network] = []
    if policy.send.networks is None:
        allowed += LOOPBACK
        allowed += [ipaddress.ip_network(n, strict=False) for n in also]
        origin = _source_address(source)
        if origin is not None:
            allowed.append(ipaddress.ip_network(origin))
        extra = f", {', '.join(also)}" if also else ""
        rule = (f"the default rule of tenant {tenant!r}: the request's own address ({source or 'unknown'}), "
                f"loopback{extra}")
    else:
        allowed += [ipaddress.ip_network(n, strict=False) for n in policy.send.networks]
        rule = f"tenant {tenant!r} may send to {', '.join(policy.send.networks) or 'no network'}"
    ranges = policy.send.port_ranges()
    out = {}
    for s in sends:
        try:
            addresses = resolve(s.host)
        except LookupError as e:
            raise Forbidden(f"send {s.name!r}: {e}", path=f"{s.path}.host", text=s.host) from None
        address = addresses[0]
        for a in addresses:
            if not any(a in net for net in allowed if net.version == a.version):
                raise Forbidden(f"send {s.name!r} may not go to {a} ({rule})", path=f"{s.path}.host", text=s.host)
        if not any(lo <= s.port <= hi for lo, hi in ranges):
            raise Forbidden(f"send {s.name!r} may not go to port {s.port} (tenant {tenant!r} may send to ports "
                            f"{', '.join(policy.send.ports)})", path=f"{s.path}.port")
        if s.port == reserved.rest_port and (address.is_loopback or str(address) in reserved.rest_addresses
                                             or any(ipaddress.ip_address(r).is_unspecified
                                                    for r in reserved.rest_addresses)):
            raise Forbidden(f"send {s.name!r} may not go to {address}:{s.port}: that is this service's own REST port",
                            path=f"{s.path}.port")
        if address.is_loopback and s.port in reserved.agent_ports:
            raise Forbidden(f"send {s.name!r} may not go to {address}:{s.port}: that is a node agent's port",
                            path=f"{s.path}.port")
        out[s.name] = str(address)
    return out


def _source_address(source: str | None) -> Address | None:
    """The request's address as the rules compare it: an IPv4 client seen through a dual-stack
    socket (::ffff:a.b.c.d) is its IPv4 address; anything that is not an address (a Unix socket,
    a test client's name) allows nothing beyond loopback."""
    try:
        address = ipaddress.ip_address(source or "")
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def check_reads(reads: Iterable[tuple[str, str, Sequence[str]]], policy: TenantPolicy, tenant: str) -> None:
    """`reads`: (read name, request path, the read's paths relative to the data root, symlinks
    resolved); each must lie under the tenant's read_prefix."""
    prefix = policy.read_prefix
    if not prefix:
        return
    for name, path, relatives in reads:
        for rel in relatives:
            norm = posixpath.normpath(rel)
            if not (norm + "/").startswith(prefix):
                raise Forbidden(f"read {name!r} may not read {rel!r}: tenant {tenant!r} reads only under "
                                f"{prefix!r} of the data root", path=f"{path}.path", text=rel)
