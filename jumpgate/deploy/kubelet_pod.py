"""One Pod as the test kubelet (jumpgate/deploy/kubelet_fixture.py) runs it: its containers as
processes in the Pod's own network namespace, its volumes as files, its probes, and its status
written back through the API server, as a kubelet would.

What a container becomes: `command` + `args` (`$(VAR)` expanded as Kubernetes does; there is no image,
so without a command the args are the whole argv, and `image` is only reported back), started as

    setpriv --pdeathsig KILL -- ip netns exec NETNS unshare --mount --uts --propagation private --
        sh -c 'hostname ...; mount --bind VOLUME MOUNTPATH ...; cd WORKDIR; exec "$@"' sh ARGV...

so it has the Pod's network namespace (its Pod IP on the test bridge; the node's namespace for
`hostNetwork: true`), its own hostname, and a private mount namespace in which every volumeMount's
mountPath really holds the volume (read-only for secrets, configMaps, projected and downwardAPI
volumes, as on a kubelet), /etc/hosts names the Pod at its IP, and /etc/resolv.conf points at the
Pod's own loopback (there is no cluster DNS; a lookup fails at once instead of timing out). The
process is killed should the harness' process die. A mountPath that does not exist on this machine is created for the
Pod's life (empty, shared by the Pods that need it) and removed after it. Its environment: PATH
of the test process, HOME=/root, HOSTNAME, then envFrom and env (values, `$(VAR)` references, the
downward API's fieldRef and resourceFieldRef, secretKeyRef, configMapKeyRef). Its working
directory is workingDir, else the Pod's own directory. Its output goes to CONTAINER.log in the
Pod's directory (`log_file`; the run before a restart's to CONTAINER.previous.log), which the
node's kubelet port serves to the API server (`kubectl logs`, with --previous and --follow).

Volumes played: emptyDir, hostPath, secret, configMap, downwardAPI, and projected (secrets,
configMaps, downwardAPI and serviceAccountToken, the latter a real bound token from the TokenRequest
API, as in the `kube-api-access-*` volume the API server adds to every Pod). Any other kind keeps
the Pod Pending with a CreateContainerConfigError that names it.

Probes: startup, readiness and liveness with tcpSocket, httpGet and exec (the command entering the
container's namespaces with nsenter), honouring initialDelaySeconds, periodSeconds,
timeoutSeconds, successThreshold and failureThreshold (the harness may cap delays and periods to
keep tests fast). A failed liveness probe restarts the container. restartPolicy is honoured
(Always restarts at once, then after 1, 2, 4, up to 10 s: a shorter CrashLoopBackOff than a
kubelet's), init containers run first, one after the other.

Deletion: when the Pod has a deletionTimestamp every container gets SIGTERM (its process group),
SIGKILL after the grace period, then whatever is left in the Pod's namespace is killed, the
namespace removed, and the Pod deleted for good (grace 0, the uid as precondition). A Pod that
vanished (force-deleted) is stopped the same way.

Not played: lifecycle hooks, grpc probes, resource limits (nothing is enforced), ephemeral
containers, in-place resize, token refresh (tokens are valid an hour or as asked), a route to the
API server from inside a Pod (`KUBERNETES_SERVICE_HOST` is not set), DNS.
"""
from __future__ import annotations

import base64
import datetime
import json
import math
import os
import re
import shlex
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import urllib3
from kubernetes.client.exceptions import ApiException

BACKOFF = (0.0, 1.0, 2.0, 4.0, 8.0, 10.0)  # before the 1st, 2nd, ... restart of a container
TICK = 0.1  # how often a running Pod looks at its processes
TRANSIENT = (urllib3.exceptions.HTTPError, OSError)  # the API server is away (restarting)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("500m", "2", "1Gi", "1e3") as a number."""
    s = str(text).strip()
    suffixes = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
                "E": 1e18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    for suffix in sorted(suffixes, key=len, reverse=True):
        if s.endswith(suffix) and s[:-len(suffix)]:
            return float(s[:-len(suffix)]) * suffixes[suffix]
    return float(s)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: a defined VAR is replaced, an undefined one left as written,
    `$$` is a literal `$`."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


class ConfigError(Exception):
    """What keeps a container from being made (a missing secret or key, a volume not played);
    the Pod stays Pending with this message, retried."""


class PodHost(Protocol):
    """What a Pod needs of the harness and its node."""

    node_name: str
    node_address: str
    node_netns: str
    allocatable: Mapping[str, str]
    core: Any  # kubernetes.client.CoreV1Api with the node's credentials

    def make_pod_netns(self, key: str) -> tuple[str, str]: ...  # (netns, address)
    def remove_pod_netns(self, netns: str) -> None: ...
    def claim_path(self, path: Path, is_dir: bool) -> bool: ...  # a missing mountPath (True: made for Pods)
    def release_paths(self, paths: list[Path]) -> None: ...
    def probe_timing(self, seconds: float) -> float: ...
    def log(self, text: str) -> None: ...
    def error(self, text: str) -> None: ...


@dataclass
class _ProbeState:
    spec: dict
    due: float
    successes: int = 0
    failures: int = 0


@dataclass
class Container:
    """One container of the Pod: its spec, process and what its status reports."""

    spec: dict
    init: bool = False
    proc: subprocess.Popen | None = None
    restarts: int = 0
    started_at: str = ""
    ready: bool = False
    started: bool = False  # the startup probe passed (or there is none)
    terminated: dict | None = None  # the state of its last exit
    next_start: float = 0.0
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    env: dict[str, str] = field(default_factory=dict)
    probes: dict[str, _ProbeState] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class PodRun:
    """A Pod on its node, run by a thread of its own until it ends or is deleted."""

    def __init__(self, host: PodHost, pod: dict, work: Path) -> None:
        self.host = host
        self.pod = pod
        meta = pod["metadata"]
        self.uid, self.namespace, self.name = meta["uid"], meta["namespace"], meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.dir = work / f"{self.namespace}_{self.name}_{self.uid[:8]}"
        spec = pod["spec"]
        self.host_network = bool(spec.get("hostNetwork"))
        self.netns = ""
        self._netns_removed = False
        self.ip = ""
        self.init_containers = [Container(c, init=True) for c in spec.get("initContainers") or []]
        self.containers = [Container(c) for c in spec.get("containers") or []]
        for c in self.init_containers + self.containers:  # counts from an earlier run of the Pod
            for st in (pod.get("status") or {}).get("initContainerStatuses" if c.init else "containerStatuses") or []:
                if st.get("name") == c.name:
                    c.restarts = st.get("restartCount", 0)
        self.phase = "Pending"
        self.start_time = ""
        self.initialized = not self.init_containers
        self.volumes: dict[str, Path] = {}
        self.read_only_volumes: set[str] = set()
        self._claimed: list[Path] = []
        self._config_error = ""
        self._conditions: dict[str, tuple[str, str, str]] = {}  # type -> (status, since, reason)
        self._published: str | None = None
        self.changed = threading.Event()
        self.gone = False  # the Pod vanished from the API (force-deleted)
        self.at_once = False  # stop without a grace period (the harness is closing)
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._main, name=f"pod {self.key}", daemon=True)

    # ------------------------------------------------------------------ driven by the node

    def update(self, pod: dict | None) -> None:
        """A newer version of the Pod from the watch; None: it was deleted from the API."""
        if pod is None:
            self.gone = True
        elif pod["metadata"]["uid"] == self.uid:
            self.pod = pod
        self.changed.set()

    @property
    def deleting(self) -> bool:
        return self.gone or bool(self.pod["metadata"].get("deletionTimestamp"))

    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.init_containers + self.containers if c.running]

    def kill_now(self) -> None:
        """Stop every process at once (the harness is closing: the machine goes away)."""
        self.gone = self.at_once = True
        self.changed.set()
        self._signal_all(signal.SIGKILL)

    # ------------------------------------------------------------------ the Pod's life

    def _main(self) -> None:
        try:
            if self.pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                return  # ended before this harness saw it
            self._run()
        except Exception as e:  # noqa: BLE001  (reported by the harness; tests assert there is none)
            self.host.error(f"{self.key}: {type(e).__name__}: {e}")
        finally:
            self._teardown()
            self.ended.set()

    def _run(self) -> None:
        self.start_time = now()
        while not self.deleting:
            try:
                self._prepare()
                break
            except ConfigError as e:
                self._config_error = str(e)
                self._publish()
                self.changed.wait(0.5)
                self.changed.clear()
        self._config_error = ""
        for c in self.init_containers:
            if not self._run_to_completion(c):
                break
        else:
            self.initialized = True
        while not self.deleting:
            if self.initialized:
                self._reap()
                for c in self.containers:
                    if c.proc is None and (c.terminated is None or self._due_for_restart(c)) \
                            and time.monotonic() >= c.next_start:
                        self._start(c)
                self._probe_all()
            self.phase = self._phase()
            self._publish()
            if self.phase in ("Succeeded", "Failed"):
                self._publish_final()
                return
            self.changed.wait(TICK)
            self.changed.clear()
        self._terminate()
        # As a kubelet: the Pod's sandbox (its network namespace) and volumes go before the Pod
        # leaves the API, so whoever sees it gone finds nothing of it left on the node.
        self._teardown()
        if not self.gone:
            self._delete_from_api()

    def _run_to_completion(self, c: Container) -> bool:
        """Run an init container until it exits 0 (retrying as restartPolicy says); False when the
        Pod failed or is being deleted."""
        while not self.deleting:
            self._reap()
            if c.terminated is not None and c.terminated["exitCode"] == 0 and c.proc is None:
                return True
            if c.proc is None and time.monotonic() >= c.next_start \
                    and (c.terminated is None or self.pod["spec"].get("restartPolicy") != "Never"):
                self._start(c)
            if c.terminated is not None and self.pod["spec"].get("restartPolicy") == "Never":
                self.phase = "Failed"
                self._publish_final()
                return False
            self._publish()
            self.changed.wait(TICK)
            self.changed.clear()
        return False

    def _due_for_restart(self, c: Container) -> bool:
        if c.running or c.terminated is None:
            return False
        policy = self.pod["spec"].get("restartPolicy", "Always")
        if c.init:  # an init container that succeeded is done; one that failed is retried unless Never
            return c.terminated["exitCode"] != 0 and policy != "Never"
        return policy == "Always" or (policy == "OnFailure" and c.terminated["exitCode"] != 0)

    def _phase(self) -> str:
        if not self.initialized or any(c.proc is None and c.terminated is None for c in self.containers):
            return "Failed" if self.phase == "Failed" else "Pending"
        if any(c.proc is not None or self._due_for_restart(c) for c in self.containers):  # (exited, not reaped: next tick)
            return "Running"
        ok = all(c.terminated is not None and c.terminated["exitCode"] == 0 for c in self.containers)
        return "Succeeded" if ok else "Failed"

    # ------------------------------------------------------------------ making it

    def _prepare(self) -> None:
        """The Pod's directory, network and volumes, and every container's environment; raises
        ConfigError when something it names is missing (retried)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.netns:
            if self.host_network:
                self.netns, self.ip = self.host.node_netns, self.host.node_address
            else:
                self.netns, self.ip = self.host.make_pod_netns(self.key)
        self._write_etc()
        self._make_volumes()
        for c in self.init_containers + self.containers:
            c.env = self._environment(c.spec)
            self._mounts(c.spec)  # checks the mounts name volumes that exist

    def _write_etc(self) -> None:
        """The Pod's /etc/hosts (its own name at its address, as a kubelet writes it) and
        /etc/resolv.conf: there is no cluster DNS, and a name server on the Pod's own loopback
        fails a lookup at once rather than after a timeout."""
        hostname = self.host.node_name if self.host_network else self.pod["spec"].get("hostname", self.name)
        (self.dir / "hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                                        f"{self.ip}\t{hostname}\n")
        (self.dir / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _api(self, call: Callable, *args, **kwargs) -> dict:
        resp = call(*args, _preload_content=False, _request_timeout=10, **kwargs)
        return json.loads(resp.data)

    def _object(self, kind: str, name: str, optional: bool) -> dict | None:
        """A Secret's or ConfigMap's data (bytes by key), fetched with the node's credentials."""
        read = self.host.core.read_namespaced_secret if kind == "Secret" else self.host.core.read_namespaced_config_map
        try:
            obj = self._api(read, name, self.namespace)
        except ApiException as e:
            if e.status == 404 and optional:
                return None
            if e.status == 404:  # a kubelet's words
                raise ConfigError(f'{kind.lower()} "{name}" not found') from None
            raise ConfigError(f"{kind.lower()} {name!r}: {e.status} {e.reason}") from None
        except TRANSIENT as e:
            raise ConfigError(f"{kind.lower()} {name!r}: the API server did not answer ({type(e).__name__})") from None
        if kind == "Secret":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return data

    def _field(self, path: str) -> str:
        """A downward API fieldRef's value."""
        meta, spec = self.pod["metadata"], self.pod["spec"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if m:
            return (meta.get(m.group(1)) or {}).get(m.group(2), "")
        simple = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"], "metadata.uid": meta["uid"],
                  "spec.nodeName": self.host.node_name, "spec.serviceAccountName": spec.get("serviceAccountName", ""),
                  "status.podIP": self.ip, "status.podIPs": self.ip, "status.hostIP": self.host.node_address,
                  "status.hostIPs": self.host.node_address}
        if path == "metadata.labels":
            return "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get("labels") or {}).items()))
        if path == "metadata.annotations":
            return "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get("annotations") or {}).items()))
        if path not in simple:
            raise ConfigError(f"fieldRef {path!r} is not supported")
        return simple[path]

    def _resource(self, ref: dict, default_container: dict) -> str:
        """A downward API resourceFieldRef's value (a limit unset is the node's allocatable)."""
        container = default_container
        if ref.get("containerName"):
            container = next((c for c in self.pod["spec"]["containers"] if c["name"] == ref["containerName"]), container)
        kind, _, what = ref["resource"].partition(".")
        value = ((container.get("resources") or {}).get(kind) or {}).get(what)
        if value is None:
            value = self.host.allocatable.get(what, "0")
        return str(math.ceil(quantity(value) / quantity(ref.get("divisor") or "1")))

    def _environment(self, spec: dict) -> dict[str, str]:
        hostname = self.host.node_name if self.host_network else self.pod["spec"].get("hostname", self.name)
        env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": "/root", "HOSTNAME": hostname}
        for source in spec.get("envFrom") or []:
            kind = "Secret" if "secretRef" in source else "ConfigMap"
            ref = source.get("secretRef") or source.get("configMapRef") or {}
            data = self._object(kind, ref["name"], bool(ref.get("optional")))
            for k, v in (data or {}).items():
                env[source.get("prefix", "") + k] = v.decode(errors="replace")
        for item in spec.get("env") or []:
            name, frm = item["name"], item.get("valueFrom")
            if frm is None:
                env[name] = expand(item.get("value", ""), env)
            elif "fieldRef" in frm:
                env[name] = self._field(frm["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in frm:
                env[name] = self._resource(frm["resourceFieldRef"], spec)
            else:
                kind = "Secret" if "secretKeyRef" in frm else "ConfigMap"
                ref = frm.get("secretKeyRef") or frm.get("configMapKeyRef") or {}
                data = self._object(kind, ref["name"], bool(ref.get("optional")))
                if data is not None and ref["key"] in data:
                    env[name] = data[ref["key"]].decode(errors="replace")
                elif not ref.get("optional"):
                    raise ConfigError(f"couldn't find key {ref['key']} in {kind} {self.namespace}/{ref['name']}")
        return env

    def _write_files(self, root: Path, data: Mapping[str, bytes], items: list | None, mode: int | None,
                     what: str, optional: bool) -> None:
        if items:
            for item in items:
                if item["key"] not in data:
                    if optional:
                        continue
                    raise ConfigError(f"{what}: no key {item['key']!r}")
                self._write_file(root / item["path"], data[item["key"]], item.get("mode", mode))
        else:
            for k, v in data.items():
                self._write_file(root / k, v, mode)

    @staticmethod
    def _write_file(path: Path, content: bytes, mode: int | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode if mode is not None else 0o644)

    def _token(self, source: dict) -> bytes:
        sa = self.pod["spec"].get("serviceAccountName") or "default"
        spec: dict = {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": self.name, "uid": self.uid},
                      "expirationSeconds": source.get("expirationSeconds") or 3607,
                      "audiences": [source["audience"]] if source.get("audience") else []}
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        try:
            answer = self._api(self.host.core.create_namespaced_service_account_token, sa, self.namespace, body)
        except ApiException as e:
            raise ConfigError(f"a token of service account {sa!r}: {e.status} {e.reason}") from None
        except TRANSIENT as e:
            raise ConfigError(f"a token of service account {sa!r}: no answer ({type(e).__name__})") from None
        return answer["status"]["token"].encode()

    def _make_volumes(self) -> None:
        base = self.dir / "volumes"
        for vol in self.pod["spec"].get("volumes") or []:
            name, path = vol["name"], base / vol["name"]
            if "hostPath" in vol:
                spec = vol["hostPath"]
                path = Path(spec["path"])
                if spec.get("type") == "DirectoryOrCreate":
                    path.mkdir(parents=True, exist_ok=True)
                elif spec.get("type") == "FileOrCreate" and not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.touch()
                self.volumes[name] = path
                continue
            path.mkdir(parents=True, exist_ok=True)
            self.volumes[name] = path
            if "emptyDir" in vol:
                continue
            self.read_only_volumes.add(name)
            if "secret" in vol or "configMap" in vol:
                kind = "Secret" if "secret" in vol else "ConfigMap"
                spec = vol.get("secret") or vol.get("configMap") or {}
                ref = spec.get("secretName") or spec.get("name")
                data = self._object(kind, ref, bool(spec.get("optional")))
                self._write_files(path, data or {}, spec.get("items"), spec.get("defaultMode"),
                                  f"volume {name}", bool(spec.get("optional")))
            elif "downwardAPI" in vol:
                spec = vol["downwardAPI"]
                self._write_downward(path, spec.get("items") or [], spec.get("defaultMode"))
            elif "projected" in vol:
                spec = vol["projected"]
                for source in spec.get("sources") or []:
                    self._project(path, source, spec.get("defaultMode"))
            else:
                kind = next((k for k in vol if k != "name"), "?")
                raise ConfigError(f"volume {name!r}: {kind} volumes are not played by the test kubelet")

    def _project(self, path: Path, source: dict, mode: int | None) -> None:
        if "serviceAccountToken" in source:
            spec = source["serviceAccountToken"]
            self._write_file(path / spec["path"], self._token(spec), mode)
        elif "secret" in source or "configMap" in source:
            kind = "Secret" if "secret" in source else "ConfigMap"
            spec = source.get("secret") or source.get("configMap") or {}
            data = self._object(kind, spec["name"], bool(spec.get("optional")))
            self._write_files(path, data or {}, spec.get("items"), mode, f"projected {kind}", bool(spec.get("optional")))
        elif "downwardAPI" in source:
            self._write_downward(path, source["downwardAPI"].get("items") or [], mode)
        else:
            raise ConfigError(f"projected source {next(iter(source), '?')} is not played by the test kubelet")

    def _write_downward(self, path: Path, items: list, mode: int | None) -> None:
        for item in items:
            if "fieldRef" in item:
                value = self._field(item["fieldRef"]["fieldPath"])
            else:
                value = self._resource(item["resourceFieldRef"], self.pod["spec"]["containers"][0])
            self._write_file(path / item["path"], value.encode(), item.get("mode", mode))

    def _mounts(self, spec: dict) -> list[tuple[Path, Path, bool]]:
        """(volume path on this machine, mountPath, read-only) of a container's volumeMounts."""
        out = []
        for m in spec.get("volumeMounts") or []:
            if m["name"] not in self.volumes:
                raise ConfigError(f"container {spec['name']}: volumeMount names no volume {m['name']!r}")
            src = self.volumes[m["name"]]
            if m.get("subPath"):
                src = src / expand(m["subPath"], {})
            ro = bool(m.get("readOnly")) or m["name"] in self.read_only_volumes
            out.append((src, Path(m["mountPath"]), ro))
        return out

    # ------------------------------------------------------------------ processes

    def _argv(self, c: Container) -> list[str]:
        argv = [expand(a, c.env) for a in (c.spec.get("command") or []) + (c.spec.get("args") or [])]
        if not argv:
            raise ConfigError(f"container {c.name}: no command (the test kubelet has no image to take one from)")
        return argv

    def _start(self, c: Container) -> None:
        try:
            argv, mounts = self._argv(c), self._mounts(c.spec)
        except ConfigError as e:
            c.waiting_reason, c.waiting_message = "CreateContainerError", str(e)
            c.next_start = time.monotonic() + 1.0
            return
        lines = ["set -e", f"hostname {shlex.quote(c.env['HOSTNAME'])}"]
        for name in ("hosts", "resolv.conf"):
            if os.path.exists(f"/etc/{name}"):
                lines.append(f"mount --bind {shlex.quote(str(self.dir / name))} /etc/{name}")
        for src, dst, ro in mounts:
            is_dir = src.is_dir()
            # Claimed once per Pod (not per container start), and also when another Pod's claim made
            # it: the last Pod using a made path removes it, which would lazily unmount it in the
            # mount namespaces of the Pods still bound there.
            if dst not in self._claimed and self.host.claim_path(dst, is_dir):
                self._claimed.append(dst)
            lines.append(f"mount --bind {shlex.quote(str(src))} {shlex.quote(str(dst))}")
            if ro:
                lines.append(f"mount -o remount,bind,ro {shlex.quote(str(dst))}")
        workdir = c.spec.get("workingDir") or str(self.dir)
        lines += [f"cd {shlex.quote(workdir)}", 'exec "$@"']
        # setpriv: the container is killed if this thread ends without stopping it (the test process died)
        prefix = ["setpriv", "--pdeathsig", "KILL", "--", "ip", "netns", "exec", self.netns,
                  "unshare", "--mount", "--uts", "--propagation", "private", "--"]
        if c.terminated is not None and self.log_file(c).exists():  # a restart: keep the last run's log
            self.log_file(c).replace(self.log_file(c, previous=True))
        with open(self.log_file(c), "ab") as log:
            c.proc = subprocess.Popen([*prefix, "/bin/sh", "-c", "\n".join(lines), "sh", *argv], env=c.env,
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        if c.terminated is not None:
            c.restarts += 1
        c.started_at, c.ready, c.waiting_reason, c.waiting_message = now(), False, "", ""
        c.started = "startupProbe" not in c.spec
        t = time.monotonic()
        c.probes = {kind: _ProbeState(c.spec[kind], t + self.host.probe_timing(c.spec[kind].get("initialDelaySeconds", 0)))
                    for kind in ("startupProbe", "readinessProbe", "livenessProbe") if c.spec.get(kind)}
        shown = shlex.join(argv).replace("\n", "\\n")
        self.host.log(f"{self.key}: started {c.name} (pid {c.proc.pid}) in {self.netns}: "
                      f"{shown if len(shown) < 200 else shown[:200] + '...'}")

    def log_file(self, c: Container, previous: bool = False) -> Path:
        """A container's output (stdout and stderr), or its previous run's."""
        return self.dir / f"{'init-' if c.init else ''}{c.name}{'.previous' if previous else ''}.log"

    def _reap(self) -> None:
        for c in self.init_containers + self.containers:
            if c.proc is not None and c.proc.poll() is not None:
                code = c.proc.returncode
                c.terminated = {"exitCode": code if code >= 0 else 128 - code,
                                "reason": "Completed" if code == 0 else "Error",
                                "startedAt": c.started_at, "finishedAt": now()}
                c.proc, c.ready = None, False
                delay = BACKOFF[min(c.restarts, len(BACKOFF) - 1)]
                c.next_start = time.monotonic() + delay
                c.waiting_reason = "CrashLoopBackOff" if code != 0 else ""
                c.waiting_message = (f"back-off {delay:g}s restarting failed container={c.name} "
                                     f"pod={self.name}_{self.namespace}({self.uid})") if code != 0 else ""
                self.host.log(f"{self.key}: {c.name} exited {code}")

    def _signal_all(self, sig: int) -> None:
        for c in self.init_containers + self.containers:
            if c.running:
                try:
                    os.killpg(c.proc.pid, sig)
                except ProcessLookupError:
                    pass

    def _terminate(self) -> None:
        """SIGTERM, the grace period, SIGKILL (the Pod is being deleted)."""
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        if self.at_once:
            grace = 0
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(c.running for c in self.init_containers + self.containers) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._signal_all(signal.SIGKILL)
        for c in self.init_containers + self.containers:
            if c.proc is not None:
                c.proc.wait(10)
        self.host.log(f"{self.key}: stopped")

    def _delete_from_api(self, within: float = 120.0) -> None:
        """Delete the Pod for good, as a kubelet does once its containers are gone; retried while
        the API server is away."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": self.uid}}
        deadline = time.monotonic() + within
        while not self.gone:
            try:
                self.host.core.delete_namespaced_pod(self.name, self.namespace, body=body, _preload_content=False,
                                                     _request_timeout=10)
                return
            except ApiException as e:
                if e.status in (404, 409):  # gone already, or another Pod of that name meanwhile
                    return
                if e.status < 500 or time.monotonic() > deadline:
                    raise
            except TRANSIENT:
                if time.monotonic() > deadline:
                    raise
            self.changed.wait(0.5)

    def _teardown(self) -> None:
        """Kill what is left, remove the network namespace, release the paths: once."""
        self._signal_all(signal.SIGKILL)
        for c in self.init_containers + self.containers:
            if c.proc is not None:
                c.proc.wait(10)
        if self.netns and not self.host_network and not self._netns_removed:
            self._netns_removed = True
            self.host.remove_pod_netns(self.netns)
        self.host.release_paths(self._claimed)
        self._claimed = []

    # ------------------------------------------------------------------ probes

    def _probe_all(self) -> None:
        t = time.monotonic()
        for c in self.containers:
            if not c.running:
                continue
            for kind, state in c.probes.items():
                if t < state.due or (kind != "startupProbe" and not c.started):
                    continue
                spec = state.spec
                ok = self._probe(c, spec)
                state.due = time.monotonic() + self.host.probe_timing(spec.get("periodSeconds", 10))
                state.successes, state.failures = (state.successes + 1, 0) if ok else (0, state.failures + 1)
                if kind == "startupProbe":
                    if ok:
                        c.started = True
                    elif state.failures >= spec.get("failureThreshold", 3):
                        self._restart(c, "startup probe failed")
                elif kind == "readinessProbe":
                    if ok and state.successes >= spec.get("successThreshold", 1):
                        c.ready = True
                    elif not ok and state.failures >= spec.get("failureThreshold", 3):
                        c.ready = False
                elif not ok and state.failures >= spec.get("failureThreshold", 3):
                    self._restart(c, "liveness probe failed")
            if c.started and "readinessProbe" not in c.probes:
                c.ready = True

    def _restart(self, c: Container, why: str) -> None:
        self.host.log(f"{self.key}: {c.name}: {why}, restarting it")
        if c.running:
            os.killpg(c.proc.pid, signal.SIGKILL)
            c.proc.wait(10)

    def _port(self, c: Container, port: int | str) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for p in c.spec.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
        raise ValueError(f"no port named {port!r}")

    def _probe(self, c: Container, spec: dict) -> bool:
        timeout = float(spec.get("timeoutSeconds", 1))
        try:
            if "tcpSocket" in spec:
                t = spec["tcpSocket"]
                with socket.create_connection((t.get("host") or self.ip, self._port(c, t["port"])), timeout=timeout):
                    return True
            if "httpGet" in spec:
                return self._http_probe(c, spec["httpGet"], timeout)
            if "exec" in spec:
                argv = ["nsenter", "--target", str(c.proc.pid), "--net", "--mount", "--uts", "--",
                        *spec["exec"]["command"]]
                done = subprocess.run(argv, env=c.env, capture_output=True, timeout=timeout)
                return done.returncode == 0
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return False
        return False  # grpc: not played

    def _http_probe(self, c: Container, spec: dict, timeout: float) -> bool:
        scheme = spec.get("scheme", "HTTP").lower()
        path = spec.get("path") or "/"
        url = f"{scheme}://{spec.get('host') or self.ip}:{self._port(c, spec['port'])}{path if path.startswith('/') else '/' + path}"
        headers = {h["name"]: h["value"] for h in spec.get("httpHeaders") or []}
        ctx = ssl._create_unverified_context() if scheme == "https" else None  # kubelets do not verify
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout,
                                        context=ctx) as r:
                return 200 <= r.status < 400
        except urllib.error.HTTPError as e:
            return 200 <= e.code < 400

    # ------------------------------------------------------------------ status

    def _condition(self, kind: str, ok: bool, reason: str = "") -> dict:
        status = "True" if ok else "False"
        last = self._conditions.get(kind)
        if last is None or last[0] != status or last[2] != reason:
            last = (status, now(), reason)
            self._conditions[kind] = last
        out = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": last[1]}
        if reason:
            out["reason"] = reason
        return out

    def _container_status(self, c: Container) -> dict:
        st: dict = {"name": c.name, "image": c.spec.get("image", ""), "imageID": "", "ready": c.ready,
                    "restartCount": c.restarts, "started": c.running and c.started}
        if c.running:
            st["state"] = {"running": {"startedAt": c.started_at}}
            st["containerID"] = f"process://{c.proc.pid}"
            if c.terminated is not None:
                st["lastState"] = {"terminated": c.terminated}
        elif c.terminated is not None and not self._due_for_restart(c):
            st["state"] = {"terminated": c.terminated}
        else:
            reason = c.waiting_reason or ("PodInitializing" if not c.init and not self.initialized else "ContainerCreating")
            if self._config_error:
                reason = "CreateContainerConfigError"
            st["state"] = {"waiting": {"reason": reason, **({"message": m} if (m := self._config_error or c.waiting_message) else {})}}
            if c.terminated is not None:
                st["lastState"] = {"terminated": c.terminated}
        return st

    def status(self) -> dict:
        terminal = self.phase in ("Succeeded", "Failed")
        ready = self.initialized and not terminal and all(c.ready and c.running for c in self.containers)
        not_ready = "" if ready else ("PodCompleted" if terminal else "ContainersNotReady")
        status: dict = {
            "phase": self.phase,
            "conditions": [self._condition("PodReadyToStartContainers", bool(self.netns)),
                           self._condition("Initialized", self.initialized,
                                           "" if self.initialized else "ContainersNotInitialized"),
                           self._condition("Ready", ready, not_ready),
                           self._condition("ContainersReady", ready, not_ready)],
            "hostIP": self.host.node_address, "hostIPs": [{"ip": self.host.node_address}],
            "startTime": self.start_time,
            "containerStatuses": [self._container_status(c) for c in self.containers],
        }
        if self.ip:
            status["podIP"], status["podIPs"] = self.ip, [{"ip": self.ip}]
        if self.init_containers:
            status["initContainerStatuses"] = [self._container_status(c) for c in self.init_containers]
        return status

    def _publish_final(self, within: float = 120.0) -> None:
        """Publish the status of a Pod that ended, retrying while the API server is away."""
        deadline = time.monotonic() + within
        while not self._publish() and not self.deleting and time.monotonic() < deadline:
            self.changed.wait(0.5)
            self.changed.clear()

    def _publish(self) -> bool:
        """Patch the Pod's status when it changed (or the last patch failed); whether it is written."""
        status = self.status()
        text = json.dumps(status, sort_keys=True)
        if text == self._published:
            return True
        try:
            self.host.core.patch_namespaced_pod_status(self.name, self.namespace, {"status": status},
                                                       _preload_content=False, _request_timeout=10)
            self._published = text
            self.host.log(f"{self.key}: status {status['phase']}, ready {status['conditions'][2]['status']}")
            return True
        except ApiException as e:
            if e.status == 404:
                self.gone = True
            else:
                self.host.log(f"{self.key}: status not written ({e.status} {e.reason}); retrying")
        except TRANSIENT as e:  # the API server is away: retried on the next tick
            self.host.log(f"{self.key}: status not written ({type(e).__name__}); retrying")
        return False
