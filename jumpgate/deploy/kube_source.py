"""Nodes found through a Kubernetes API server (the inventory's `kubernetes:` sources,
docs/deploy.md "Kubernetes"): the agent pods a label selector picks in a namespace, WATCHED with
the official client's `kubernetes.watch`, never polled.

A pod is a node while it is Ready, has an IP and is not being deleted; it stops being one when it
is deleted, turns unready or terminating (`on_gone` with the reason); a pod replaced under its name,
or whose annotations changed, is a node gone and a new one. The watch resumes from the
last resourceVersion it saw (bookmarks included); a resourceVersion the API server no longer has
(410 Gone) is answered by listing again, which also drops the pods deleted meanwhile. An API
server that cannot be reached, or that refuses the credentials (401) or the request (403), is a
state of the source with a reason (GET /v1/nodes, GET /v1/health, the log), retried with backoff,
never a stack trace; the nodes already known keep serving meanwhile: their agents do not need the
API server.

Per pod (annotations override, see `ANNOTATIONS`): its name is the node's name, its IP the node's
address; cores from `jumpgate.io/cores`, else the agent container's CPU limit or request (rounded
up), else 1; the data root from `jumpgate.io/data-root`, else the source's, else the server's.
"""
from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .inventory import KubernetesSource

log = logging.getLogger(__name__)

CORES = "jumpgate.io/cores"
DATA_ROOT = "jumpgate.io/data-root"
ANNOTATIONS = {CORES: "the cores the resource view counts on the node (an integer)",
               DATA_ROOT: "where the agent sees the files of reads"}
WATCH_S = 240  # the API server ends each watch after this long; it is resumed from its resourceVersion
BACKOFF_S = (0.5, 10.0)  # first and longest wait before trying an API server that failed again


@dataclass(frozen=True)
class AgentPod:
    """A Ready agent pod: what a node is made of."""

    name: str
    namespace: str
    uid: str
    ip: str
    cores: int
    data_root: str | None


def cpu_cores(quantity: str | None) -> int | None:
    """A Kubernetes CPU quantity ("2", "500m", "1.5") as whole cores, rounded up; None if unset or
    not a quantity."""
    if not quantity:
        return None
    try:
        value = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    except ValueError:
        return None
    return max(1, math.ceil(value)) if value > 0 else None


def cores_of(pod, agent_port: int) -> int:
    """The node's cores: the annotation, else the agent container's CPU limit, else its request,
    else 1. The agent's container is the one exposing `agent_port` (else the first)."""
    annotated = (pod.metadata.annotations or {}).get(CORES)
    if annotated is not None:
        try:
            value = int(annotated)
            if value >= 1:
                return value
        except ValueError:
            pass
        log.warning("pod %s: annotation %s=%r is not a whole number of cores; ignored",
                    pod.metadata.name, CORES, annotated)
    containers = pod.spec.containers or []
    agent = next((c for c in containers if any(p.container_port == agent_port for p in c.ports or [])),
                 containers[0] if containers else None)
    resources = agent.resources if agent is not None else None
    for kind in ("limits", "requests"):
        found = cpu_cores((getattr(resources, kind, None) or {}).get("cpu")) if resources is not None else None
        if found is not None:
            return found
    return 1


def not_ready_reason(pod) -> str | None:
    """Why the pod is no node now (None: it is one)."""
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
    if pod.metadata.deletion_timestamp is not None:
        return f"{where} is terminating"
    status = pod.status
    if status is None or not status.pod_ip:
        return f"{where} has no IP yet"
    ready = next((c for c in status.conditions or [] if c.type == "Ready"), None)
    if ready is None or ready.status != "True":
        why = f" ({ready.reason})" if ready is not None and ready.reason else ""
        return f"{where} is not Ready{why}"
    return None


def agent_pod(pod, source: KubernetesSource) -> AgentPod:
    annotations = pod.metadata.annotations or {}
    return AgentPod(pod.metadata.name, pod.metadata.namespace, pod.metadata.uid, pod.status.pod_ip,
                    cores_of(pod, source.agent_port), annotations.get(DATA_ROOT) or source.data_root)


def explain(error: BaseException, source: KubernetesSource, server: str) -> tuple[str, str]:
    """(state, reason) of an API call's failure, in words an operator can act on."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    what = f"pods with {source.label_selector!r} in namespace {source.namespace}"
    if isinstance(error, ApiException):
        detail = (error.reason or "").strip()
        if error.status == 401:
            return "unauthorized", (f"the API server {server} refused the credentials (401 Unauthorized): "
                                    "check the kubeconfig or the service account's token")
        if error.status == 403:
            return "forbidden", (f"the API server {server} forbids watching {what} (403 Forbidden): the "
                                 "service account needs get, list and watch on pods there "
                                 "(deploy/kubernetes/rbac.yaml)")
        if error.status == 404:
            return "error", f"the API server {server} has no namespace {source.namespace} (404)"
        return "error", f"the API server {server} answered {error.status} {detail} for {what}"
    if isinstance(error, ConfigException):
        return "error", f"no Kubernetes configuration: {error}"
    return "unreachable", f"cannot reach the API server {server}: {type(error).__name__}: {_short(error)}"


def _short(error: BaseException) -> str:
    text = str(getattr(error, "reason", None) or error)
    return text if len(text) < 300 else text[:300] + "..."


class KubeNodeSource:
    """One `kubernetes:` source of the inventory: tells `on_ready` of each agent pod that becomes
    a node and `on_gone(name, reason)` of each that stops being one."""

    def __init__(self, spec: KubernetesSource, on_ready: Callable[[AgentPod], None],
                 on_gone: Callable[[str, str], None]) -> None:
        self.spec = spec
        self.on_ready, self.on_gone = on_ready, on_gone
        self.state, self.reason = "starting", ""
        self.server = "?"
        self.synced = threading.Event()  # the first list has been answered, or has failed
        self._known: dict[str, AgentPod] = {}  # the watcher thread's own
        self._closed = threading.Event()
        self._watch = None
        self._failed = False
        self._thread = threading.Thread(target=self._run, name=f"kube-{spec.namespace}", daemon=True)

    def fail(self, reason: str) -> None:
        """This source cannot be used at all (its agents' secret is unreadable): it stays in state
        `error` with `reason`, and `start` does not watch."""
        self._set("error", reason)
        self._failed = True
        self.synced.set()

    def start(self) -> None:
        if not self._failed:
            self._thread.start()

    def close(self) -> None:
        self._closed.set()
        watch = self._watch
        if watch is not None:
            watch.stop()  # seen at the next event only: the open response is closed too
            response = getattr(watch, "_resp", None)
            if response is not None:
                try:
                    response.close()
                except Exception:  # noqa: BLE001 - closing from another thread may race its reader
                    pass
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)

    def describe(self) -> dict:
        return {"namespace": self.spec.namespace, "label_selector": self.spec.label_selector,
                "api_server": self.server, "state": self.state, "reason": self.reason, "pods": len(self._known)}

    # ---------------------------------------------------------------- the watcher thread

    def _set(self, state: str, reason: str) -> None:
        if (state, reason) != (self.state, self.reason):
            where = f"node source {self.spec.namespace}/{self.spec.label_selector}"
            if state == "watching":
                log.info("%s: watching %s", where, self.server)
            else:
                log.warning("%s is %s: %s", where, state, reason)
        self.state, self.reason = state, reason

    def _api(self):
        from kubernetes import client, config

        cfg = client.Configuration()
        if self.spec.kubeconfig:
            config.load_kube_config(config_file=self.spec.kubeconfig, client_configuration=cfg)
        else:  # the server's own pod's service account
            config.load_incluster_config(client_configuration=cfg)
        cfg.retries = 0  # an unreachable server is a state to report and retry with backoff, not a wait
        self.server = cfg.host
        return client.ApiClient(cfg)

    def _run(self) -> None:
        from kubernetes import client, watch

        delay = BACKOFF_S[0]
        api = None
        timeout = (self.spec.connect_timeout, WATCH_S + 30)
        while not self._closed.is_set():
            version: str | None = None
            try:
                if api is None:
                    api = self._api()
                core = client.CoreV1Api(api)
                listed = core.list_namespaced_pod(self.spec.namespace, label_selector=self.spec.label_selector,
                                                  _request_timeout=(self.spec.connect_timeout, 30))
                self._sync(listed.items)
                version = listed.metadata.resource_version
                self._set("watching", "")
                self.synced.set()
                delay = BACKOFF_S[0]
                while not self._closed.is_set():  # each watch ends after WATCH_S; resume where it was
                    self._watch = watch.Watch()
                    for event in self._watch.stream(core.list_namespaced_pod, self.spec.namespace,
                                                    label_selector=self.spec.label_selector,
                                                    resource_version=version, timeout_seconds=WATCH_S,
                                                    allow_watch_bookmarks=True, _request_timeout=timeout):
                        version = self._watch.resource_version or version
                        if event["type"] != "BOOKMARK":
                            self._event(event["type"], event["object"])
                continue
            except Exception as e:  # noqa: BLE001 - every failure becomes the source's state, and a retry
                if self._closed.is_set():
                    break  # `close` cut the watch's response
                if getattr(e, "status", None) == 410:  # the resourceVersion expired: list again
                    log.info("node source %s: watch expired, listing again", self.spec.namespace)
                    continue
                self._set(*explain(e, self.spec, self.server))
                if getattr(e, "status", None) is None and not _is_api_error(e) and api is not None:
                    api.close()  # a fresh connection pool after a network failure
                    api = None
            self.synced.set()
            self._closed.wait(delay)
            delay = min(delay * 2, BACKOFF_S[1])
        if api is not None:
            api.close()

    def _sync(self, pods: list) -> None:
        """A full list: nodes for its Ready pods, and the known ones it lacks are gone."""
        listed = {p.metadata.name: p for p in pods}
        for name in list(self._known):
            if name not in listed:
                self._drop(name, f"pod {self.spec.namespace}/{name} was deleted")
        for pod in listed.values():
            self._event("MODIFIED", pod)

    def _event(self, kind: str, pod) -> None:
        name = pod.metadata.name
        if kind == "DELETED":
            self._drop(name, f"pod {self.spec.namespace}/{name} was deleted")
            return
        why = not_ready_reason(pod)
        if why is not None:
            self._drop(name, why)
            return
        found = agent_pod(pod, self.spec)
        known = self._known.get(name)
        if known == found:
            return
        if known is not None:  # the same name, another pod (or another IP): a new node
            self._drop(name, f"pod {self.spec.namespace}/{name} was replaced")
        self._known[name] = found
        try:
            self.on_ready(found)
        except Exception:  # noqa: BLE001 - one pod's trouble must not stop the watch
            log.exception("adding the node of pod %s/%s", found.namespace, name)

    def _drop(self, name: str, reason: str) -> None:
        if self._known.pop(name, None) is None:
            return
        try:
            self.on_gone(name, reason)
        except Exception:  # noqa: BLE001
            log.exception("removing the node of pod %s/%s", self.spec.namespace, name)


def _is_api_error(e: BaseException) -> bool:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    return isinstance(e, ApiException | ConfigException)


def read_secret(path: str) -> bytes:
    """The agents' shared secret as the agent reads it (agent/node.py read_secret)."""
    return Path(path).read_text().strip().encode()
