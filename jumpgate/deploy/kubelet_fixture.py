"""Kubelets and a scheduler for the test cluster (jumpgate/deploy/kube_fixture.py): the parts of
Kubernetes that run Pods, played by test code that talks only to the API server, so the code under
test (a deployer creating Pods, DaemonSets, Jobs) cannot tell it from a real cluster.

    with KubeCluster(tmp / "kube") as cluster, \\
         KubeletHarness(cluster, tmp / "nodes", {"kn0": {"jumpgate.io/nca": "yes"}, "kn1": {}}) as nodes:
        ...                                   # create Pods through the API; they run, become Ready
        nodes.pod("default", "web").ip        # the Pod's IP, reachable from the test process
        nodes.pod("default", "web").netns     # its network namespace (netns_fixture.processes_in)

Nodes. Each node is a network namespace with its own address on a bridge of the test process'
root namespace (the same naming and sweeping of leftovers as netns_fixture.py's hosts, on a
10.213.X.0/24 of its own); the root namespace has the bridge's .1, so the test process reaches
every node and Pod, and Pods reach the test process there. Each node registers its Node object
with a kubelet's credentials (a client certificate of `system:node:NAME` in `system:nodes`, so the
Node authorizer and the NodeRestriction admission plugin apply: a node reads only the secrets of
its own Pods), with the labels given plus kubernetes.io/hostname, os and arch, capacity `cpus`
and `memory`, the Ready condition, and renews its Lease in kube-node-lease every 10 s, as a kubelet
does (so the node lifecycle controller keeps it Ready and taints nothing). Its kubelet port (10250
on the node's address, TLS with a certificate of the cluster's CA) serves the API server the
Pods' logs (`kubectl logs`, follow and previous included).

Pods. Each node watches (a real watch, resumed from its last resourceVersion, relisting after an
expired one or an API server restart) the Pods whose spec.nodeName is that node, and runs each in
jumpgate/deploy/kubelet_pod.py's way: its own network namespace and Pod IP on the bridge, the
container's command as a process, volumes, probes, status written back; deletion ends it.

Scheduling. There is no kube-scheduler, so the harness plays it too, for its own nodes, as
`system:kube-scheduler`: a Pod with no nodeName (a Deployment's or a DaemonSet's: since 1.12 the
DaemonSet controller only sets a node affinity `matchFields metadata.name` and leaves binding to
the default scheduler) is bound through the Binding subresource to a node that fits it: nodeSelector,
required node affinity (matchExpressions and matchFields), taints against tolerations,
spec.unschedulable, CPU and memory requests against allocatable, the Pod count, host ports; of the
nodes that fit, the one with the fewest Pods. A Pod that fits nowhere gets the PodScheduled=False
Unschedulable condition with kube-scheduler's style of message and is retried. Not played: pod
(anti-)affinity, topology spread, preemption, preferred affinity; Pods whose schedulerName is not
`default-scheduler` are left alone.

`close` (and leaving the `with`) kills every Pod's processes at once (the machines go away: the
Pod objects stay in the API), removes the namespaces, links and bridge, and raises if any remains.
Errors inside the harness' threads are collected in `errors` (tests assert it is empty) and logged
in WORK/kubelet.log with what each node did.
"""
from __future__ import annotations

import atexit
import ctypes
import datetime
import functools
import http.server
import ipaddress
import itertools
import json
import os
import platform
import shutil
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from . import netns_fixture
from .kube_fixture import KUBE_VERSION, KubeCluster
from .kubelet_pod import PodRun, now, quantity
from .netns_fixture import (  # its helpers: nodes and Pods are named and swept as its test hosts are
    PREFIX,
    SUBNETS,
    kill_all_in,
    link_names,
    netns_names,
    owners_of,
    run_ip,
    used_subnets,
)

LEASE_SECONDS = 40
RENEW_EVERY = 10.0
REFUSED_PATIENCE = 15.0  # seconds of 401/403 answers in a row before a thread reports them as an error
WATCH_SECONDS = 60  # a watch request's timeout; it is resumed from the last resourceVersion
TRANSIENT = (urllib3.exceptions.HTTPError, OSError)  # the API server is away (restarting)


def _transient(e: Exception) -> bool:
    """Whether a failed call is worth retrying quietly: no connection, or the server's 5xx/429."""
    if isinstance(e, ApiException):
        return not e.status or e.status >= 500 or e.status == 429
    return isinstance(e, TRANSIENT)


_sequence = itertools.count()


@functools.cache
def why_not() -> str | None:
    """Why the harness cannot run here (None: it can): it needs root and iproute2 for namespaces."""
    if os.geteuid() != 0:
        return "the test kubelets make network namespaces, which needs root"
    for tool in ("ip", "unshare", "nsenter", "mount", "setpriv"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    ns = f"{PREFIX}{os.getpid():x}-kt"
    done = run_ip("netns", "add", ns, check=False)
    run_ip("netns", "del", ns, check=False)
    return None if done.returncode == 0 else f"`ip netns add` fails here: {done.stderr.strip()}"


def micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Network:
    """A bridge in the root namespace on a free 10.213.X.0/24, and namespaces hanging on it."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.bridge = f"{tag}br"
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""
        self.made_netns: list[str] = []
        self.made_links: list[str] = []
        self.lock = threading.Lock()

    def open(self) -> None:
        run_ip("link", "add", self.bridge, "type", "bridge")
        self.made_links.append(self.bridge)
        run_ip("link", "set", self.bridge, "up")
        candidates = list(SUBNETS.subnets(new_prefix=24))[1:-1]
        start = (os.getpid() * 7 + 101) % len(candidates)  # away from where netns_fixture starts
        for subnet in candidates[start:] + candidates[:start]:
            if subnet in used_subnets():
                continue
            address = f"{subnet.network_address + 1}/24"
            run_ip("addr", "add", address, "dev", self.bridge)
            if owners_of(subnet) == {self.bridge}:
                self.subnet, self.gateway = subnet, str(subnet.network_address + 1)
                return
            run_ip("addr", "del", address, "dev", self.bridge)  # a concurrent run took it meanwhile
        raise RuntimeError(f"no free /24 in {SUBNETS}")

    def address(self, offset: int) -> str:
        assert self.subnet is not None
        return str(self.subnet.network_address + offset)

    def add(self, netns: str, link: str, address: str) -> None:
        """A namespace with loopback, `eth0` at `address` on the bridge, and a default route."""
        if len(link) > 15:
            raise ValueError(f"interface name {link!r} would be longer than 15 characters")
        with self.lock:
            run_ip("netns", "add", netns)
            self.made_netns.append(netns)
            run_ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns)
            self.made_links.append(link)
        run_ip("link", "set", link, "master", self.bridge)
        run_ip("link", "set", link, "up")
        run_ip("-n", netns, "link", "set", "lo", "up")
        run_ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        run_ip("-n", netns, "link", "set", "eth0", "up")
        run_ip("-n", netns, "route", "add", "default", "via", self.gateway)

    def remove(self, netns: str, link: str) -> None:
        kill_all_in(netns, grace=0.5)
        run_ip("netns", "del", netns, check=False)
        run_ip("link", "del", link, check=False)  # gone with the namespace already, usually
        with self.lock:
            self.made_netns = [n for n in self.made_netns if n != netns]
            self.made_links = [n for n in self.made_links if n != link]

    def close(self) -> list[str]:
        """Remove everything made; what could not be removed."""
        for ns in list(self.made_netns):
            kill_all_in(ns, grace=0.5)
            run_ip("netns", "del", ns, check=False)
        for link in reversed(self.made_links):  # veths, then the bridge
            if link in link_names():
                run_ip("link", "del", link, check=False)
        left = [n for n in netns_names() if n in self.made_netns] + \
               [n for n in link_names() if n in self.made_links]
        self.made_netns, self.made_links = [], []
        return left


class _Loop(threading.Thread):
    """A harness thread: runs `body` until the harness stops, reporting what it raises."""

    def __init__(self, harness: KubeletHarness, name: str, body: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.harness, self.body = harness, body

    def run(self) -> None:
        refused_since = None  # 401/403 in a row since then: an API server just restarted says so a moment
        while not self.harness.stopping.is_set():
            try:
                self.body()
                refused_since = None
            except Exception as e:  # noqa: BLE001
                if self.harness.stopping.is_set():
                    return
                if isinstance(e, ApiException) and e.status in (401, 403):
                    refused_since = refused_since or time.monotonic()
                    if time.monotonic() - refused_since < REFUSED_PATIENCE:
                        self.harness.log(f"{self.name}: {e.status} {e.reason}; trying again")
                        self.harness.stopping.wait(0.5)
                        continue
                self.harness.error(f"{self.name}: {type(e).__name__}: {e}")
                self.harness.stopping.wait(1.0)


class _Watcher:
    """List, then watch from the list's resourceVersion, resuming each time the server ends the
    watch; relist after 410 Gone or a broken connection. Raw dicts, not the client's models."""

    def __init__(self, harness: KubeletHarness, list_call: Callable, on_list: Callable[[list[dict]], None],
                 on_event: Callable[[str, dict], None], **selectors: str) -> None:
        self.harness, self.list_call, self.selectors = harness, list_call, selectors
        self.on_list, self.on_event = on_list, on_event
        self.rv = ""
        self.watch: watch.Watch | None = None

    def run_once(self) -> None:
        if not self.rv:
            try:
                answer = json.loads(self.list_call(_preload_content=False, _request_timeout=10,
                                                   **self.selectors).data)
            except (ApiException, *TRANSIENT) as e:
                if not _transient(e):
                    raise
                self.harness.stopping.wait(0.5)
                return
            self.rv = answer["metadata"]["resourceVersion"]
            self.on_list(answer.get("items") or [])
        self.watch = watch.Watch()
        try:
            for event in self.watch.stream(self.list_call, resource_version=self.rv, timeout_seconds=WATCH_SECONDS,
                                           allow_watch_bookmarks=True, deserialize=False, **self.selectors):
                if self.harness.stopping.is_set():
                    return
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    self.rv = ""  # 410 Gone: too old; relist
                    return
                self.rv = obj["metadata"]["resourceVersion"]
                if kind != "BOOKMARK":
                    self.on_event(kind, obj)
        except (ApiException, *TRANSIENT, ValueError, KeyError) as e:  # KeyError: how the client meets an ERROR
            if not self.harness.stopping.is_set():
                self.harness.log(f"watch ended ({type(e).__name__}); listing again")
                self.rv = ""
                self.harness.stopping.wait(0.5)
        finally:
            self.watch = None

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def listen_in_netns(netns: str, address: str, port: int) -> socket.socket:
    """A TCP socket listening on address:port inside a network namespace, for this process to serve
    (a socket keeps the namespace it was made in). Made by a thread of its own that enters the
    namespace (setns(2)) and leaves it again."""
    made: list = []

    def make() -> None:
        try:
            with open("/proc/thread-self/ns/net") as home, open(netns_fixture.NETNS_DIR / netns) as target:
                if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {netns}")
                try:
                    sock = socket.socket()
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((address, port))
                    sock.listen(16)
                    made.append(sock)
                finally:
                    if _libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns back")
        except OSError as e:
            made.append(e)

    t = threading.Thread(target=make, name=f"listen in {netns}")
    t.start()
    t.join()
    if isinstance(made[0], OSError):
        raise made[0]
    return made[0]


class _KubeletServer(http.server.ThreadingHTTPServer):
    """The kubelet's HTTPS port (10250 on the node's address) as far as the API server uses it for
    Pods' logs: GET /containerLogs/NS/POD/CONTAINER with follow, previous, tailLines and
    limitBytes (`kubectl logs`, read_namespaced_pod_log), and /healthz. Its certificate is signed by
    the cluster's CA; it asks for the API server's client certificate, signed by the same CA.
    exec, attach and port-forward are not played (501)."""

    daemon_threads = True

    def __init__(self, node: _Node, port: int = 10250) -> None:
        super().__init__((node.node_address, port), _KubeletHandler, bind_and_activate=False)
        self.node = node
        cert = node.harness.cluster.issue_server_cert(f"kubelet-{node.node_name}", [node.node_address, node.node_name])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
        ctx.load_verify_locations(str(node.harness.cluster.ca_file))
        ctx.verify_mode = ssl.CERT_REQUIRED
        self.socket.close()
        self.socket = ctx.wrap_socket(listen_in_netns(node.node_netns, node.node_address, port), server_side=True,
                                      do_handshake_on_connect=False)

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away (a follow ended) is no error of the harness


class _KubeletHandler(http.server.BaseHTTPRequestHandler):
    server: _KubeletServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.request.settimeout(10)
        self.request.do_handshake()  # in the request's own thread, so one slow client holds up no other
        self.request.settimeout(None)
        super().setup()

    def log_message(self, format: str, *args) -> None:
        self.server.node.log(f"kubelet port: {format % args}")

    def _answer(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        if parts == ["healthz"]:
            return self._answer(200, "ok")
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._answer(501, f"{url.path}: not played by the test kubelet")
        _, namespace, pod, container = parts
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        run = self.server.node.run_of(namespace, pod)
        if run is None:
            return self._answer(404, f'pod "{pod}" not found')
        c = next((c for c in run.init_containers + run.containers if c.name == container), None)
        if c is None:
            return self._answer(400, f'container {container} is not valid for pod {pod}')
        previous = query.get("previous") == "true"
        path = run.log_file(c, previous)
        if not path.exists():
            state = "previous terminated container" if previous else "container"
            return self._answer(400, f'{state} "{container}" in pod "{pod}" is waiting to start')
        data = path.read_bytes()
        if "tailLines" in query:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(query["tailLines"]):]) if int(query["tailLines"]) > 0 else b""
        if "limitBytes" in query:
            data = data[:int(query["limitBytes"])]
        if query.get("follow") != "true" or previous:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        self._follow(run, c, path, data)
        return None

    def _follow(self, run, c, path: Path, first: bytes) -> None:
        """Stream the log as it grows, until the container's process ends or the client goes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        proc = c.proc

        def chunk(data: bytes) -> None:
            if data:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        chunk(first)
        offset = path.stat().st_size
        while not self.server.node.harness.stopping.is_set():
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
            offset += len(data)
            chunk(data)
            if proc is None or proc.poll() is not None:
                break
            time.sleep(0.1)
        self.wfile.write(b"0\r\n\r\n")


class _Node:
    """One node: its namespace, its kubelet credentials, its Node object and Lease, its Pods."""

    def __init__(self, harness: KubeletHarness, index: int, name: str, labels: Mapping[str, str]) -> None:
        self.harness = harness
        self.node_name = name
        self.labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", **labels}
        self.node_netns, self.link = f"{harness.tag}n{index}", f"{harness.tag}v{index}"
        self.node_address = harness.network.address(2 + index)
        self.allocatable = {"cpu": str(harness.cpus), "memory": harness.memory, "pods": str(harness.max_pods)}
        kubeconfig = harness.cluster.kubeconfig_for(f"system:node:{name}", ["system:nodes"])
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.leases = client.CoordinationV1Api(self.api)
        self.runs: dict[str, PodRun] = {}  # by uid
        self.lock = threading.Lock()
        self.watcher = _Watcher(harness, self.core.list_pod_for_all_namespaces, self._on_list, self._on_event,
                                field_selector=f"spec.nodeName={name}")
        self.server: _KubeletServer | None = None

    def serve(self) -> None:
        """Start the kubelet's port (Pods' logs for the API server)."""
        self.server = _KubeletServer(self)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                         name=f"kubelet port of {self.node_name}", daemon=True).start()

    # ------------------------------------------------------------------ PodHost, for kubelet_pod

    def make_pod_netns(self, key: str) -> tuple[str, str]:
        return self.harness.make_pod_netns(key)

    def remove_pod_netns(self, netns: str) -> None:
        self.harness.remove_pod_netns(netns)

    def claim_path(self, path: Path, is_dir: bool) -> bool:
        return self.harness.claim_path(path, is_dir)

    def release_paths(self, paths: list[Path]) -> None:
        self.harness.release_paths(paths)

    def probe_timing(self, seconds: float) -> float:
        cap = self.harness.max_probe_period
        return min(float(seconds), cap) if cap is not None else float(seconds)

    def log(self, text: str) -> None:
        self.harness.log(f"{self.node_name}: {text}")

    def error(self, text: str) -> None:
        self.harness.error(f"{self.node_name}: {text}")

    # ------------------------------------------------------------------ the Node object

    def register(self) -> None:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node_name, "labels": self.labels},
                "spec": {"taints": list(self.harness.taints.get(self.node_name, []))}}
        try:
            self.core.create_node(body, _preload_content=False, _request_timeout=10)
        except ApiException as e:
            if e.status != 409:
                raise
            self.core.patch_node(self.node_name, {"metadata": {"labels": self.labels}}, _preload_content=False,
                                 _request_timeout=10)
        self.post_status()
        self.renew_lease()

    def post_status(self) -> None:
        t = now()
        conditions = [{"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": message,
                       "lastHeartbeatTime": t, "lastTransitionTime": t}
                      for kind, reason, message in (("MemoryPressure", "SufficientMemory", "no memory pressure"),
                                                    ("DiskPressure", "NoDiskPressure", "no disk pressure"),
                                                    ("PIDPressure", "SufficientPID", "sufficient PIDs"))]
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status", "lastHeartbeatTime": t,
                           "lastTransitionTime": t})
        status = {
            "capacity": self.allocatable, "allocatable": self.allocatable, "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": self.node_address},
                          {"type": "Hostname", "address": self.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": platform.release(),
                         "osImage": "test kubelet", "containerRuntimeVersion": "process://1",
                         "kubeletVersion": KUBE_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
        }
        self.core.patch_node_status(self.node_name, {"status": status}, _preload_content=False, _request_timeout=10)

    def renew_lease(self) -> None:
        spec = {"holderIdentity": self.node_name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_now()}
        try:
            self.leases.patch_namespaced_lease(self.node_name, "kube-node-lease", {"spec": spec},
                                               _preload_content=False, _request_timeout=10)
        except ApiException as e:
            if e.status != 404:
                raise
            node = json.loads(self.core.read_node(self.node_name, _preload_content=False, _request_timeout=10).data)
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": node["metadata"]["uid"]}
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.node_name, "namespace": "kube-node-lease", "ownerReferences": [owner]},
                    "spec": spec}
            self.leases.create_namespaced_lease("kube-node-lease", body, _preload_content=False, _request_timeout=10)

    def heartbeat(self) -> None:
        """The heartbeat thread's body: renew the Lease (registering again if the Node is gone)."""
        try:
            try:
                self.renew_lease()
            except ApiException as e:
                if e.status != 404:
                    raise
                self.register()
        except (ApiException, *TRANSIENT) as e:
            if not _transient(e):
                raise
            self.harness.stopping.wait(1.0)  # the API server is away
            return
        self.harness.stopping.wait(RENEW_EVERY)

    # ------------------------------------------------------------------ Pods

    def _on_list(self, pods: list[dict]) -> None:
        seen = {p["metadata"]["uid"] for p in pods}
        with self.lock:
            vanished = [run for uid, run in self.runs.items() if uid not in seen]
        for run in vanished:
            run.update(None)
        for pod in pods:
            self._on_event("MODIFIED", pod)

    def _on_event(self, kind: str, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            run = self.runs.get(uid)
            if run is None and kind != "DELETED" and not self.harness.stopping.is_set():
                run = PodRun(self, pod, self.harness.work / "pods")
                self.runs[uid] = run
                run.thread.start()
                return
        if run is not None:
            run.update(None if kind == "DELETED" else pod)

    def run_of(self, namespace: str, name: str) -> PodRun | None:
        with self.lock:
            return next((r for r in self.runs.values() if r.namespace == namespace and r.name == name), None)

    def forget_ended(self) -> None:
        with self.lock:
            for uid in [u for u, r in self.runs.items() if r.ended.is_set() and r.gone]:
                del self.runs[uid]

    def close(self) -> None:
        self.watcher.stop()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        with self.lock:
            runs = list(self.runs.values())
        for run in runs:
            run.kill_now()
        for run in runs:
            run.thread.join(20)
        self.api.close()


class _Scheduler:
    """The default scheduler's part, for the harness' nodes (see the module docstring)."""

    def __init__(self, harness: KubeletHarness) -> None:
        self.harness = harness
        kubeconfig = harness.cluster.kubeconfig_for("system:kube-scheduler")
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.pods: dict[str, dict] = {}  # every Pod, by uid
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self._said: dict[str, str] = {}  # uid -> the Unschedulable message last written
        self.watcher = _Watcher(harness, self.core.list_pod_for_all_namespaces, self._on_list, self._on_event)

    def _on_list(self, pods: list[dict]) -> None:
        with self.lock:
            self.pods = {p["metadata"]["uid"]: p for p in pods}
        self.wake.set()

    def _on_event(self, kind: str, pod: dict) -> None:
        with self.lock:
            if kind == "DELETED":
                self.pods.pop(pod["metadata"]["uid"], None)
            else:
                self.pods[pod["metadata"]["uid"]] = pod
        self.wake.set()

    def loop(self) -> None:
        """The scheduling thread's body: place the pending Pods, then wait for a change (or 1 s)."""
        self.wake.wait(1.0)
        self.wake.clear()
        if self.harness.stopping.is_set():
            return
        with self.lock:
            pending = sorted((p for p in self.pods.values() if self._pending(p)),
                             key=lambda p: p["metadata"].get("creationTimestamp", ""))
        if not pending:
            return
        try:
            nodes = json.loads(self.core.list_node(_preload_content=False, _request_timeout=10).data)["items"]
        except (ApiException, *TRANSIENT) as e:
            if not _transient(e):
                raise
            return
        nodes = [n for n in nodes if n["metadata"]["name"] in self.harness.nodes]
        for pod in pending:
            try:
                self._schedule(pod, nodes)
            except (ApiException, *TRANSIENT) as e:
                if not _transient(e):
                    raise
                return  # the API server is away: the next round tries again

    @staticmethod
    def _pending(pod: dict) -> bool:
        return (not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")
                and pod["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))

    def _schedule(self, pod: dict, nodes: list[dict]) -> None:
        fits, reasons = [], {}
        for node in nodes:
            why = self._why_not_fits(pod, node)
            if why is None:
                fits.append(node["metadata"]["name"])
            else:
                reasons[why] = reasons.get(why, 0) + 1
        meta = pod["metadata"]
        if not fits:
            text = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
            self._unschedulable(pod, f"0/{len(nodes)} nodes are available: {text}.")
            return
        with self.lock:
            counts = {n: sum(1 for p in self.pods.values() if p["spec"].get("nodeName") == n) for n in fits}
        target = min(fits, key=lambda n: (counts[n], n))
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"], "uid": meta["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": target}}
        try:
            self.core.create_namespaced_pod_binding(meta["name"], meta["namespace"], body, _preload_content=False,
                                                    _request_timeout=10)
        except ApiException as e:
            if e.status in (404, 409):  # gone, or bound meanwhile
                return
            raise
        self.harness.log(f"scheduler: bound {meta['namespace']}/{meta['name']} to {target}")
        with self.lock:  # assumed until the watch says so, so the next Pod counts it
            if meta["uid"] in self.pods:
                self.pods[meta["uid"]] = {**pod, "spec": {**pod["spec"], "nodeName": target}}

    def _unschedulable(self, pod: dict, message: str) -> None:
        meta = pod["metadata"]
        if self._said.get(meta["uid"]) == message:
            return
        cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                "lastProbeTime": None, "lastTransitionTime": now()}
        try:
            self.core.patch_namespaced_pod_status(meta["name"], meta["namespace"], {"status": {"conditions": [cond]}},
                                                  _preload_content=False, _request_timeout=10)
            self._said[meta["uid"]] = message
        except ApiException as e:
            if e.status != 404:
                raise

    # ------------------------------------------------------------------ the filters

    def _why_not_fits(self, pod: dict, node: dict) -> str | None:
        spec, name = pod["spec"], node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if node["spec"].get("unschedulable") and not _tolerates(
                spec, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return "node(s) were unschedulable"
        for taint in node["spec"].get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec, taint):
                return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
        if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            return "node(s) didn't match Pod's node affinity/selector"
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = required.get("nodeSelectorTerms")
        if terms and not any(_term_matches(t, labels, name) for t in terms):
            return "node(s) didn't match Pod's node affinity/selector"
        with self.lock:
            others = [p for p in self.pods.values() if p["spec"].get("nodeName") == name
                      and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                      and p["metadata"]["uid"] != pod["metadata"]["uid"]]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if len(others) + 1 > quantity(allocatable.get("pods", "110")):
            return "Too many pods"
        for resource in ("cpu", "memory"):
            used = sum(_request(p, resource) for p in others) + _request(pod, resource)
            if resource in allocatable and used > quantity(allocatable[resource]) + 1e-9:
                return f"Insufficient {resource}"
        taken = {port for p in others for port in _host_ports(p)}
        if taken & set(_host_ports(pod)):
            return "node(s) didn't have free ports for the requested pod ports"
        return None


def _tolerates(spec: dict, taint: dict) -> bool:
    for t in spec.get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _term_matches(term: dict, labels: Mapping[str, str], name: str) -> bool:
    exprs = [(e, labels) for e in term.get("matchExpressions") or []] + \
            [(e, {"metadata.name": name}) for e in term.get("matchFields") or []]
    if not exprs:
        return False  # an empty term matches nothing
    for e, values in exprs:
        op, key, want = e["operator"], e["key"], e.get("values") or []
        have = values.get(key)
        ok = {"In": have is not None and have in want, "NotIn": have not in want, "Exists": have is not None,
              "DoesNotExist": have is None,
              "Gt": have is not None and have.lstrip("-").isdigit() and int(have) > int(want[0]),
              "Lt": have is not None and have.lstrip("-").isdigit() and int(have) < int(want[0])}.get(op, False)
        if not ok:
            return False
    return True


def _request(pod: dict, resource: str) -> float:
    spec = pod["spec"]
    total = sum(quantity(((c.get("resources") or {}).get("requests") or {}).get(resource, 0))
                for c in spec.get("containers") or [])
    init = max((quantity(((c.get("resources") or {}).get("requests") or {}).get(resource, 0))
                for c in spec.get("initContainers") or []), default=0.0)
    return max(total, init)


def _host_ports(pod: dict) -> list[tuple[int, str]]:
    return [(p["hostPort"], p.get("protocol", "TCP")) for c in pod["spec"].get("containers") or []
            for p in c.get("ports") or [] if p.get("hostPort")]


class KubeletHarness:
    """Nodes that run the cluster's Pods, and the scheduler's part; see the module docstring.

    `nodes`: node names, or a mapping of node name to its labels. `taints`: by node name, taints
    it registers with. `max_probe_period`: cap probes' initialDelaySeconds and periodSeconds
    (seconds) to keep tests fast; None plays them as written."""

    def __init__(self, cluster: KubeCluster, work: Path, nodes: Sequence[str] | Mapping[str, Mapping[str, str]],
                 *, cpus: int = 4, memory: str = "8Gi", max_pods: int = 110,
                 taints: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
                 max_probe_period: float | None = None) -> None:
        self.cluster, self.work = cluster, Path(work)
        self.node_labels = {n: {} for n in nodes} if not isinstance(nodes, Mapping) else \
            {n: dict(labels) for n, labels in nodes.items()}
        self.cpus, self.memory, self.max_pods = cpus, memory, max_pods
        self.taints = {n: [dict(t) for t in ts] for n, ts in (taints or {}).items()}
        self.max_probe_period = max_probe_period
        self.tag = f"{PREFIX}{os.getpid():x}-k{next(_sequence)}"
        self.network = _Network(self.tag)
        self.nodes: dict[str, _Node] = {}
        self.scheduler: _Scheduler | None = None
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []
        self._log_lock = threading.Lock()
        self._slots = list(range(2 + len(self.node_labels), 255))  # the Pods' addresses, taken in turn
        self._pod_links: dict[str, str] = {}  # netns -> its veth's outer end
        self._paths: dict[Path, tuple[int, list[Path]]] = {}  # mountPath made -> (Pods using it, what was made)
        self._paths_lock = threading.Lock()

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> KubeletHarness:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        why = why_not()
        if why is not None:
            raise RuntimeError(f"cannot run the test kubelets here: {why}")
        if len(f"{self.tag}p{255:x}") > 15:
            raise ValueError(f"interface names from tag {self.tag!r} would be longer than 15 characters")
        atexit.register(self.close)
        try:
            netns_fixture.sweep_leftovers()
            (self.work / "pods").mkdir(parents=True, exist_ok=True)
            self.network.open()
            for i, (name, labels) in enumerate(self.node_labels.items()):
                node = _Node(self, i, name, labels)
                self.network.add(node.node_netns, node.link, node.node_address)
                node.serve()
                node.register()
                self.nodes[name] = node
                self._spawn(f"heartbeat {name}", node.heartbeat)
                self._spawn(f"pods of {name}", node.watcher.run_once)
            self.scheduler = _Scheduler(self)
            self._spawn("scheduler watch", self.scheduler.watcher.run_once)
            self._spawn("scheduler", self.scheduler.loop)
        except BaseException:
            self.close()
            raise

    def _spawn(self, name: str, body: Callable[[], None]) -> None:
        t = _Loop(self, name, body)
        self._threads.append(t)
        t.start()

    def close(self) -> None:
        """Kill every Pod's processes, stop the threads, remove namespaces, links and bridge."""
        atexit.unregister(self.close)
        self.stopping.set()
        if self.scheduler is not None:
            self.scheduler.watcher.stop()
            self.scheduler.wake.set()
        for node in self.nodes.values():
            node.close()
        for t in self._threads:
            t.join(15)
        if self.scheduler is not None:
            self.scheduler.api.close()
        for path in list(self._paths):
            self._paths[path] = (1, self._paths[path][1])
            self.release_paths([path])
        left = self.network.close()
        stuck = [t.name for t in self._threads if t.is_alive()]
        if left or stuck:
            raise RuntimeError(f"could not remove {', '.join(left)}; threads still running: {', '.join(stuck)}")

    # ------------------------------------------------------------------ for the tests

    def pods(self) -> dict[str, PodRun]:
        """The Pods running (or ended but not yet deleted) on the nodes, by "namespace/name"."""
        out = {}
        for node in self.nodes.values():
            node.forget_ended()
            with node.lock:
                out.update({run.key: run for run in node.runs.values() if not run.gone})
        return out

    def pod(self, namespace: str, name: str) -> PodRun:
        return self.pods()[f"{namespace}/{name}"]

    def wait_for(self, condition: Callable[[], object], timeout: float = 30.0, what: str = "") -> object:
        """Wait until `condition()` is truthy; its value. Raises naming `what` and the errors seen."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not within {timeout} s: {what or condition}; harness errors: {self.errors}")
            time.sleep(0.05)

    # ------------------------------------------------------------------ for the nodes and Pods

    def log(self, text: str) -> None:
        with self._log_lock, open(self.work / "kubelet.log", "a") as f:
            f.write(f"{datetime.datetime.now():%H:%M:%S.%f}"[:-3] + f" {text}\n")

    def error(self, text: str) -> None:
        self.errors.append(text)
        self.log(f"ERROR {text}")

    def make_pod_netns(self, key: str) -> tuple[str, str]:
        with self._paths_lock:
            if not self._slots:
                raise RuntimeError("no Pod address left on the test bridge")
            slot = self._slots.pop(0)
        netns, link = f"{self.tag}p{slot:x}", f"{self.tag}p{slot:x}"
        netns = f"{netns}-{key.replace('/', '.')}"[:64]
        address = self.network.address(slot)
        self.network.add(netns, link, address)
        self._pod_links[netns] = link
        self.log(f"{key}: namespace {netns}, address {address}")
        return netns, address

    def remove_pod_netns(self, netns: str) -> None:
        link = self._pod_links.pop(netns, "")
        self.network.remove(netns, link)
        slot = int(link[len(self.tag) + 1:], 16)
        with self._paths_lock:
            self._slots.append(slot)  # last in line: an address is not reused at once

    def claim_path(self, path: Path, is_dir: bool) -> bool:
        """Make a mountPath that does not exist on this machine, for as long as a Pod uses it; one
        made for other Pods is counted as this Pod's too. False: the path is the machine's own
        (nothing to release)."""
        with self._paths_lock:
            if path not in self._paths:
                if path.exists():
                    return False
                made = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
                path.parent.mkdir(parents=True, exist_ok=True)
                path.mkdir() if is_dir else path.touch()
                self._paths[path] = (0, made)
            users, made = self._paths[path]
            self._paths[path] = (users + 1, made)
            return True

    def release_paths(self, paths: list[Path]) -> None:
        """A Pod is done with these mountPaths: remove what was made for them once no Pod uses them."""
        with self._paths_lock:
            for path in paths:
                if path not in self._paths:
                    continue
                users, made = self._paths[path]
                if users > 1:
                    self._paths[path] = (users - 1, made)
                    continue
                del self._paths[path]
                for p in made:  # only what claim_path made, deepest first; a non-empty one stays
                    try:
                        p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
                    except OSError:
                        break
