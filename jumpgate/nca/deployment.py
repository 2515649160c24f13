"""Where NCA instances run, as the life-cycle interface sees it: hosts, a deployer that ships an
artefact to a host and starts it there, and the control channel of a started instance
(docs/nca-process-protocol.md: commands in, events out).

The interface lives beside the life-cycle interface because instances use it (`InstanceContext`)
and the compiler's placement step names its hosts; the deployers themselves (local processes
today; SSH hosts and Kubernetes are peers of it) live in `jumpgate.deploy`. A deployer owns
everything about how a process is reached: an instance never touches a `Popen`, a local log file
or a host's file system.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class Host:
    """A machine (or network namespace, or pod) that can run NCA instances.

    `address` is where instances on it listen and are reached by their senders; `cores` is what
    the resource view counts there (`cpus`, when set, the CPUs its NCAs are pinned to); `kinds`
    are the `ResourceRequest.deployment` values it can host (software NCAs ask for "local": a
    process). `data_root` is where the host sees the files
    of reads: the directory the storage checked a read's paths in, given as the host knows it.
    Its NCAs open their input files beneath it (docs/nca-process-protocol.md, `root`), so that a
    file replaced since the check by a symlink leading outside is refused. None: the deployer
    does not say; NCAs then open the storage's real paths without following any symlink."""

    name: str
    address: str
    cores: int
    kinds: frozenset[str] = field(default_factory=lambda: frozenset({"local"}))
    data_root: str | None = None
    # The CPUs its NCAs are pinned to (the inventory's `cpus`); empty: the kernel's choice.
    cpus: tuple[int, ...] = ()

    def to_json(self) -> dict:
        return {"name": self.name, "address": self.address, "cores": self.cores, "kinds": sorted(self.kinds)}


class ControlChannel(ABC):
    """A started instance: its host, and its control channel."""

    host: Host
    name: str

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write commands (whole lines). Raises OSError (or ValueError once closed) when the
        instance is gone."""

    @abstractmethod
    def events(self) -> Iterator[bytes]:
        """The instance's event lines, until it exits or is stopped. Called once; the iterator
        is read by one thread, and the channel closes its end when the iteration ends (a `stop`
        after this call leaves that end to the reader)."""


class Deployer(ABC):
    """Runs NCA instances on its hosts. Every method may be called from any thread."""

    kind: ClassVar[str] = ""

    @abstractmethod
    def hosts(self) -> Sequence[Host]:
        """Where instances may run, in order of preference."""

    def node_states(self) -> list[tuple[Host, str, str]]:
        """Every host the deployer knows, with its state ("up", or "down") and why; `hosts` are
        the ones up."""
        return [(h, "up", "") for h in self.hosts()]

    def node_info(self) -> dict[str, dict]:
        """Per host name, what the deployer knows of it beyond its state (how it is reached, its
        agent's health and load), for GET /v1/nodes and the nodes page."""
        return {}

    def control_ports(self) -> list[int]:
        """Ports of the deployer's own services on its nodes' loopback (node agents): no job may
        send there, since a node's NCAs would reach its agent."""
        return []

    def ship(self, host: Host, artifact: Path) -> str:
        """Make a built artefact (an NCA binary) available on `host`; returns its path there.
        A deployer whose hosts share the control plane's file system returns it unchanged."""
        return str(artifact)

    @abstractmethod
    def start(self, host: Host, argv: list[str], work_dir: Path, name: str, *,
              reuse: bool = False) -> ControlChannel:
        """Start `argv` (its first element a path `ship` returned) on `host`. `work_dir` is the
        job's directory, `name` names its log. With `reuse`, a pre-started instance of the same
        command line may be handed out (the instance must not depend on its working directory)."""

    @abstractmethod
    def stop(self, channel: ControlChannel, grace: float = 2.0) -> None:
        """Close the control channel (the instance's signal to exit), then end it for good."""

    def activity(self, channel: ControlChannel) -> tuple[int, ...] | None:
        """A reading that changes whenever the instance moves bytes or uses CPU (the executor's
        stall watchdog compares them); None when the deployer cannot tell."""
        return None

    def log_tail(self, channel: ControlChannel, limit: int = 2000) -> str:
        """The end of the instance's standard error, for error messages."""
        return ""

    def allow_fork_server(self, host: Host, binary: str) -> None:
        """`binary` (a path `ship` returned) accepts `--fork-server` (docs/nca-process-protocol.md,
        "Fork servers"): the deployer may start its instances on `host` as forks of one loaded copy
        of it instead of executing it each time. Deployers that cannot ignore it."""
        return None

    def warm_up(self, host: Host, argv: list[str]) -> None:
        """Have an instance of `argv` pre-started on `host` for the next job, if the deployer
        keeps spares; called when a job's instance ends."""
        return None

    def running(self) -> list[ControlChannel]:
        """Instances that belong to jobs and still run."""
        return []

    def spares(self) -> list[int]:
        """Identifiers (local: pids) of pre-started instances waiting for a job."""
        return []

    def close_spares(self) -> None:
        """Stop the pre-started instances and start no more (first step of a shutdown, so that
        jobs cancelled after it do not start new ones)."""
        return None

    @abstractmethod
    def shutdown(self) -> None:
        """Stop every instance, spares first."""
