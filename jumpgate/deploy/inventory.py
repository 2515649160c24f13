"""The inventory of nodes (`jumpgate serve --nodes FILE`, docs/deploy.md): the hosts NCAs may run
on, as a YAML file an operator writes.

```yaml
nodes:
  - name: a            # how jobs, the API and the pages name it
    address: 127.0.0.2 # where its NCAs listen and are reached by their senders
    cores: 1           # what the resource view counts there
    cpus: "0"          # optional: the CPUs its NCAs are pinned to (Linux cpulist); cores default to their count
    reach: local       # how the server starts NCAs there: `local` (processes of this machine) or `ssh`
    data_root: /data/a # where it sees the files of reads; default: the server's --data-root
  - name: b
    address: 10.0.0.12
    cores: 8
    reach: ssh
    ssh: {host: 10.0.0.12, port: 22, user: jumpgate, key_file: /etc/jumpgate/id_ed25519,
          known_hosts: /etc/jumpgate/known_hosts}
kubernetes:            # optional, beside or instead of `nodes`: agent pods found through the API server
  - namespace: jumpgate
    label_selector: app.kubernetes.io/name=jumpgate-agent
    agent_port: 7070
    secret_file: /etc/jumpgate/agent/secret
```

The file is validated as a whole before the server starts, with pydantic; every problem names the
node and the field (`nodes[1].cores: ...`). Without an inventory the server is one local node, as
it always was.
"""
from __future__ import annotations

import importlib.util
import ipaddress
import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .affinity import parse_cpulist


class InventoryError(ValueError):
    """The inventory file cannot be used; the message names the file, the node and the field."""


class SshSpec(BaseModel):
    """How the server logs in to an `ssh` node (Paramiko; key login only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str
    port: int = Field(default=22, ge=1, le=65535)
    user: str
    key_file: str  # the private key
    known_hosts: str  # the node's host key must be in it
    # Accept (and remember for this run) a host key known_hosts lacks; a changed key is refused
    # all the same. Off unless the operator says so.
    accept_unknown_host_key: bool = False
    connect_timeout: float = Field(default=5.0, gt=0, le=120)
    # Where the agent keeps its state, the NCA binaries it was sent and the jobs' working
    # directories on the node; default: ~/.cache/jumpgate of the login.
    cache_dir: str | None = None
    # The node's Python (3.10 or newer) that runs the agent the server ships (docs/agent.md).
    python: str = "python3"
    # Seconds the agent keeps this server's NCAs running without a word from it (a server that
    # vanished without closing its connection); the server speaks every quarter of it.
    lease_s: float = Field(default=10.0, ge=1, le=600)


class NodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    address: str
    # What the resource view counts there; default: the number of `cpus` (one of the two is needed).
    cores: int | None = Field(default=None, ge=1, le=4096)
    # The CPUs the node's NCAs are pinned to, in Linux's cpulist notation ("0-3,6"): how several
    # local nodes partition one machine for real, or how Jumpgate keeps off other services' CPUs.
    # Unset: the kernel's choice (every CPU the node's agent or the server may use).
    cpus: str | None = None
    reach: Literal["local", "ssh"] = "local"
    ssh: SshSpec | None = None
    # The directory under which the node sees the files of `read` operations (possibly only some
    # of them); default: the server's --data-root.
    data_root: str | None = None

    @property
    def cpu_set(self) -> tuple[int, ...]:
        return parse_cpulist(self.cpus) if self.cpus is not None else ()

    @property
    def core_count(self) -> int:
        return self.cores if self.cores is not None else len(self.cpu_set)

    @model_validator(mode="after")
    def _reach_fits(self) -> NodeSpec:
        if self.cores is None and self.cpus is None:
            raise ValueError("a node needs `cores` (what the resource view counts there) or `cpus`")
        # The CPUs of a local node are this machine's: one it may not use is refused now, not at
        # the first NCA's start. (A remote node's agent checks its own.)
        if self.reach == "local" and self.cpus is not None:
            missing = set(self.cpu_set) - os.sched_getaffinity(0)
            if missing:
                raise ValueError(f"cpus {self.cpus!r}: this machine has no CPU {sorted(missing)[0]} "
                                 f"that the server may use (it may use {sorted(os.sched_getaffinity(0))})")
        if self.reach == "ssh" and self.ssh is None:
            raise ValueError("a node with reach: ssh needs an `ssh` section (host, user, key_file, known_hosts)")
        if self.reach == "local" and self.ssh is not None:
            raise ValueError("an `ssh` section is for nodes with reach: ssh")
        # A local node's root is on this machine: a typo is caught before the first job.
        if self.reach == "local" and self.data_root is not None and not Path(self.data_root).is_dir():
            raise ValueError(f"data_root {self.data_root!r} is not a directory")
        return self

    @field_validator("cpus")
    @classmethod
    def _a_cpu_list(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cpulist(value)
        return value

    @field_validator("address")
    @classmethod
    def _an_ip_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address (NCAs bind to it)") from None
        return value


class KubernetesSource(BaseModel):
    """Nodes found through a Kubernetes API server: each Ready pod that `label_selector` selects in
    `namespace` is a node whose agent listens at podIP:agent_port (deploy/kube_source.py,
    docs/deploy.md "Kubernetes")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    label_selector: str = Field(min_length=1)
    # An admin's or a service account's kubeconfig; absent: the pod's own service account
    # (in-cluster config), as the server runs in the cluster.
    kubeconfig: str | None = None
    agent_port: int = Field(default=7070, ge=1, le=65535)
    # The agents' shared secret (the Secret the DaemonSet mounts): the server proves it knows it.
    secret_file: str
    lease_s: float = Field(default=10.0, ge=1, le=600)
    connect_timeout: float = Field(default=5.0, gt=0, le=120)
    # The data root of a pod that has no `jumpgate.io/data-root` annotation; default: the server's.
    data_root: str | None = None

    @model_validator(mode="after")
    def _client_installed(self) -> KubernetesSource:
        if importlib.util.find_spec("kubernetes") is None:
            raise ValueError("a `kubernetes` source needs the kubernetes client: pip install 'jumpgate[kubernetes]'")
        return self

    @field_validator("secret_file", "kubeconfig")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        # Read at start, so that a typo stops the server now rather than every pod's handshake later.
        if value is not None and not os.access(value, os.R_OK):
            raise ValueError(f"{value!r} is not a readable file")
        return value


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: tuple[NodeSpec, ...] | None = Field(default=None, min_length=1)
    kubernetes: tuple[KubernetesSource, ...] | None = Field(default=None, min_length=1)

    @property
    def static_nodes(self) -> tuple[NodeSpec, ...]:
        return self.nodes or ()

    @property
    def sources(self) -> tuple[KubernetesSource, ...]:
        return self.kubernetes or ()

    @model_validator(mode="after")
    def _unique(self) -> Inventory:
        if self.nodes is None and self.kubernetes is None:
            raise ValueError("an inventory needs `nodes`, `kubernetes` (sources of nodes), or both")
        for what in ("name", "address"):
            seen: set[str] = set()
            for i, node in enumerate(self.static_nodes):
                value = getattr(node, what)
                if value in seen:
                    raise ValueError(f"nodes[{i}].{what}: {value!r} is used by another node")
                seen.add(value)
        return self


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_inventory(data: object, source: str = "the inventory") -> Inventory:
    try:
        return Inventory.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            where = _where(err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {msg}" if where else msg)
        raise InventoryError(f"{source}: " + "; ".join(problems)) from None


def load_inventory(path: Path | str) -> Inventory:
    """Read and validate an inventory file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InventoryError(f"cannot read the inventory {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InventoryError(f"{path}{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
    return parse_inventory(data, str(path))
