"""What a software NCA instance's UDP edges need from the control plane (docs/udp-transport.md):
whether it is built with DPDK and which DPDK port it drives (the server's JUMPGATE_DPDK names the
NCAs, jumpgate/ncas/software/dpdk.py), where its UDP inputs listen and which transport version they
take, the receivers' idle timeout (`udp.idle_ms`: instance settings, else JUMPGATE_UDP_IDLE_MS,
else the runtime's default), and two settings for testing: JUMPGATE_NCA_TRANSPORT, the transport
software NCAs offer each other when nothing insists on one, and JUMPGATE_UDP_RELAY, which puts a
lossy relay (jumpgate/deploy/udp_relay.py) in front of every UDP input.

UDP inputs take version 2 (acknowledged streams, whose senders repeat what is lost), and a sender
sends version 2 wherever the receiver's endpoint says it takes it. DPDK does not carry version 2 (no
acknowledgement comes back through it): an instance that uses DPDK announces version 1 and sends
version 1. DPDK takes all of an instance's UDP edges, in and out; its TCP edges stay on kernel
sockets. An instance without UDP edges is built and run as if it were not named.
"""
from __future__ import annotations

import json
import logging
import os
import zlib
from dataclasses import replace

from ...deploy.udp_relay import Faults, RelayProcess
from ...nca.interface import FILE, Endpoint, InstanceContext, NcaError, NcaSpec
from .dpdk import DpdkLease, dpdk_selection

log = logging.getLogger(__name__)

IDLE_PARAM = "udp.idle_ms"
IDLE_ENV = "JUMPGATE_UDP_IDLE_MS"
MAX_IDLE_MS = 86_400_000  # the runtime's bound (in_udp.c)
UDP_VERSION = 2  # what the runtime's UDP inputs take and its outputs send (docs/udp-transport.md)
TRANSPORT_ENV = "JUMPGATE_NCA_TRANSPORT"
RELAY_ENV = "JUMPGATE_UDP_RELAY"


def preferred_transport(offered: tuple[str, ...]) -> str | None:
    """The transport a software NCA offers on an edge to another NCA when nothing insists on one:
    JUMPGATE_NCA_TRANSPORT (`tcp`, the default, or `udp`) when it offers that, else the first it
    offers. None when the setting is not a transport (the caller refuses, saying so)."""
    wanted = os.environ.get(TRANSPORT_ENV, "").strip().lower() or "tcp"
    if wanted not in ("tcp", "udp"):
        return None
    return wanted if wanted in offered else offered[0]


def transport_setting_problem() -> str:
    return f"{TRANSPORT_ENV} must be tcp or udp, not {os.environ.get(TRANSPORT_ENV)!r}"


def relay_faults(value: str | None = None) -> Faults | None:
    """JUMPGATE_UDP_RELAY: a JSON object of jumpgate.deploy.udp_relay.Faults (loss, dup, reorder,
    depth, seed), or unset. A bad value is an NcaError naming the setting."""
    try:
        return Faults.from_text(os.environ.get(RELAY_ENV, "") if value is None else value)
    except ValueError as e:
        raise NcaError(f"{RELAY_ENV}: {e}") from None


def idle_ms(context: InstanceContext) -> int | None:
    """The receivers' idle timeout if the server sets one (0 turns it off), else None."""
    value = context.settings.get(IDLE_PARAM)
    if value is None or value == "":
        value = os.environ.get(IDLE_ENV)
    if value is None or value == "":
        return None
    try:
        ms = int(value)
    except (TypeError, ValueError):
        raise NcaError(f"{IDLE_PARAM} must be a number of milliseconds, got {value!r}") from None
    if not 0 <= ms <= MAX_IDLE_MS:
        raise NcaError(f"{IDLE_PARAM} must be between 0 (no timeout) and {MAX_IDLE_MS}, got {ms}")
    return ms


class UdpEdges:
    """The UDP side of one instance, from compile to destroy."""

    def __init__(self, spec: NcaSpec, context: InstanceContext) -> None:
        self.spec = spec
        self.context = context
        self.udp_inputs = any(p.spec.transport == "udp" for p in spec.inputs if p.spec.transport != FILE)
        udp_outputs = any(o.spec.transport == "udp" for o in spec.outputs)
        ports = dpdk_selection().get(spec.implementation, ())
        self.dpdk_ports = ports if (self.udp_inputs or udp_outputs) else ()
        self.lease: DpdkLease | None = None
        self.relays: list[RelayProcess] = []

    @property
    def dpdk(self) -> bool:
        """Build with the runtime's DPDK transport."""
        return bool(self.dpdk_ports)

    @property
    def udp_version(self) -> int:
        """The UDP transport version the instance's inputs take and its outputs may send."""
        return 1 if self.dpdk else UDP_VERSION

    def sends_version(self, endpoint: Endpoint) -> int:
        """The version to send to `endpoint`: the highest both sides take."""
        return min(endpoint.udp_version, self.udp_version)

    def front(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        """With JUMPGATE_UDP_RELAY, a lossy relay in front of each UDP input: the endpoints senders
        are given are the relays'. Each relay's generator is seeded from the setting's seed and the
        instance and port, so that runs repeat. Not with DPDK (its datagrams bypass the kernel)."""
        faults = relay_faults()
        if faults is None or self.dpdk:
            return endpoints
        out = []
        for i, ep in enumerate(endpoints):
            if ep.transport != "udp":
                out.append(ep)
                continue
            seeded = replace(faults, seed=faults.seed + zlib.crc32(f"{self.spec.id}:{i}".encode()))
            try:
                relay = RelayProcess((ep.host, ep.port), seeded, listen_host=ep.host)
            except (OSError, RuntimeError) as e:
                raise NcaError(f"{RELAY_ENV}: cannot start a relay in front of {ep.host}:{ep.port}: {e}") from None
            self.relays.append(relay)
            out.append(replace(ep, port=relay.port))
        return out

    def acquire(self) -> None:
        """Before the process starts: the DPDK port this instance drives."""
        if self.dpdk_ports and self.lease is None:
            self.lease = DpdkLease.acquire(self.spec.implementation, self.dpdk_ports)

    def input_host(self, bind_host: str) -> str:
        """Where senders send this instance's UDP inputs: the DPDK port's address under DPDK (the
        kernel socket on bind_host only reserves the port number)."""
        return self.lease.port.ip if self.lease else bind_host

    def params(self) -> dict[str, str]:
        out = dict(self.lease.port.params()) if self.lease else {}
        ms = idle_ms(self.context) if self.udp_inputs else None
        if ms is not None:
            out[IDLE_PARAM] = str(ms)
        return out

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        relays, self.relays = self.relays, []
        for relay in relays:
            report = relay.stop()
            log.info("job %s %s: UDP relay in front of port %s: %s", self.spec.job_id, self.spec.id,
                     relay.target[1], json.dumps({k: v for k, v in report.items() if k != "event"}))
