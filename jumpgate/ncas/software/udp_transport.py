"""What a software NCA instance's UDP edges need from the control plane (docs/udp-transport.md):
whether it is built with DPDK and which DPDK port it drives (the server's JUMPGATE_DPDK names the
NCAs, jumpgate/ncas/software/dpdk.py), where its UDP inputs listen, and the receivers' idle timeout
(`udp.idle_ms`: instance settings, else JUMPGATE_UDP_IDLE_MS, else the runtime's default).

DPDK takes all of an instance's UDP edges, in and out; its TCP edges stay on kernel sockets. An
instance without UDP edges is built and run as if it were not named.
"""
from __future__ import annotations

import os

from ...nca.interface import FILE, InstanceContext, NcaError, NcaSpec
from .dpdk import DpdkLease, dpdk_selection

IDLE_PARAM = "udp.idle_ms"
IDLE_ENV = "JUMPGATE_UDP_IDLE_MS"
MAX_IDLE_MS = 86_400_000  # the runtime's bound (in_udp.c)


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

    @property
    def dpdk(self) -> bool:
        """Build with the runtime's DPDK transport."""
        return bool(self.dpdk_ports)

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
