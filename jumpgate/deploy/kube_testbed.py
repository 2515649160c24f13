"""deploy/kubernetes/ installed on the test cluster (kube_fixture.py, kubelet_fixture.py) as a user
would install it, for the Kubernetes tests and the benchmark (tests/e2e/test_kube_deploy.py,
bench/kube_agents.py): every manifest created with strict validation, the agents' DaemonSet running
this machine's `jumpgate agent serve` over a data directory of the caller's, and a server
inventory (the ConfigMap's) that reaches the API server as the server's own service account.

What differs from a cluster, and why: the server's Deployment is not created, because the server
runs in the caller's network namespace, where tests can start and stop it (the test kubelets give
pods no route to the API server); the image's `jumpgate` is the venv's; the Secret's agent secret
is a fresh one.
"""
from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.utils import create_from_dict

from .kube_fixture import KubeCluster
from .kustomize import render

BASE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
NAMESPACE = "jumpgate"
AGENTS = "app.kubernetes.io/name=jumpgate-agent"
AGENT_LABEL = "jumpgate.io/agent"  # the DaemonSet's nodeSelector


def create(api: client.ApiClient, doc: dict, **kwargs: Any) -> None:
    """Create one object, strictly validated (an unknown field is an error, not dropped)."""
    create_from_dict(api, doc, namespace=doc["metadata"].get("namespace", "default"),
                     field_validation="Strict", **kwargs)


@dataclass
class Installed:
    docs: list[dict]  # the rendered base, as created (the Deployment too, not created)
    secret: str  # the agents' shared secret (the Secret's agent-secret)

    def inventory(self) -> dict:
        """The ConfigMap's inventory.yaml, as the server's pod reads it."""
        settings = next(d for d in self.docs if d["kind"] == "ConfigMap")
        return yaml.safe_load(settings["data"]["inventory.yaml"])


def install(admin: client.ApiClient, data: Path, grace_seconds: int = 3) -> Installed:
    """deploy/kubernetes/ applied, but for the server's Deployment (see the module's docstring)."""
    docs = render(BASE)
    secret = secrets.token_hex(32)
    for doc in docs:
        if doc["kind"] == "Secret":
            doc["stringData"]["agent-secret"] = secret
        if doc["kind"] == "DaemonSet":
            spec = doc["spec"]["template"]["spec"]
            (agent,) = spec["containers"]
            agent["command"][0] = str(Path(sys.executable).with_name("jumpgate"))
            next(v for v in spec["volumes"] if v["name"] == "data")["hostPath"]["path"] = str(data)
            spec["terminationGracePeriodSeconds"] = grace_seconds
        if doc["kind"] != "Deployment":
            create(admin, doc)
    return Installed(docs, secret)


def service_account_token(core: client.CoreV1Api, account: str = "jumpgate-server") -> str:
    """A bound token of `account` from the TokenRequest API, as its pod would have (an hour)."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                 expiration_seconds=3600))
    return core.create_namespaced_service_account_token(account, NAMESPACE, request).status.token


def service_account_kubeconfig(cluster: KubeCluster, core: client.CoreV1Api, path: Path,
                               account: str = "jumpgate-server") -> Path:
    """A kubeconfig with a token of `account`."""
    return cluster.write_kubeconfig(path, token=service_account_token(core, account), user=account)


def server_inventory(installed: Installed, work: Path, kubeconfig: Path | None = None) -> Path:
    """WORK/nodes.yaml: the ConfigMap's inventory, with the secret as a file under WORK (where the
    pod has it mounted) and, when given, a kubeconfig (without one the server uses the in-cluster
    configuration: the service account files under /var/run/secrets/kubernetes.io/serviceaccount and
    KUBERNETES_SERVICE_HOST/PORT, as in its pod)."""
    inventory = installed.inventory()
    (work / "secret").write_text(installed.secret)
    for source in inventory["kubernetes"]:
        source["secret_file"] = str(work / "secret")
        if kubeconfig is not None:
            source["kubeconfig"] = str(kubeconfig)
    path = work / "nodes.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def is_ready(pod: client.V1Pod) -> bool:
    return (pod.metadata.deletion_timestamp is None and bool(pod.status.pod_ip)
            and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []))


def ready_agent_pods(core: client.CoreV1Api, count: int, wait_for: Callable, timeout: float = 60.0) -> list:
    """The agent pods once exactly `count` are Ready (`wait_for` is the harness' KubeletHarness.wait_for)."""
    def ready():
        pods = [p for p in core.list_namespaced_pod(NAMESPACE, label_selector=AGENTS).items if is_ready(p)]
        return pods if len(pods) == count else None
    return wait_for(ready, timeout, f"{count} agent pods Ready")


def set_agent_label(core: client.CoreV1Api, node: str, value: str | None) -> None:
    """Label a node for the agents' DaemonSet (None takes the label off: its agent pod goes)."""
    core.patch_node(node, {"metadata": {"labels": {AGENT_LABEL: value}}})

