"""The Kubernetes node source's decisions, without an API server (deploy/kube_source.py; the real
one is tests/e2e/test_kube_deploy.py's): which pods are nodes, their cores and data roots, how API
errors read, how a list and events add and remove nodes; the resource view following nodes that
come and go (deploy/resources.py HostCores.sync); a source whose API server is unreachable is a
state of the fleet, not an error of the server."""
from __future__ import annotations

import datetime
import socket
from pathlib import Path

import pytest

pytest.importorskip("kubernetes", reason="the `kubernetes` client (pip install 'jumpgate[kubernetes]')")
from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from urllib3.exceptions import MaxRetryError  # noqa: E402

from jumpgate.deploy import kube_source  # noqa: E402
from jumpgate.deploy.fleet import FleetDeployer  # noqa: E402
from jumpgate.deploy.inventory import KubernetesSource, parse_inventory  # noqa: E402
from jumpgate.deploy.kube_source import AgentPod, KubeNodeSource, cores_of, cpu_cores, explain  # noqa: E402
from jumpgate.deploy.resources import HostCores  # noqa: E402
from jumpgate.nca.deployment import Host  # noqa: E402


def source_spec(tmp_path: Path, **extra) -> KubernetesSource:
    (tmp_path / "secret").write_text("s3cret")
    return KubernetesSource(namespace="jg", label_selector="app=agent", secret_file=str(tmp_path / "secret"),
                            **extra)


def pod(name: str = "agent-a", ip: str | None = "10.1.0.5", ready: bool = True, *, uid: str = "u1",
        annotations: dict | None = None, cpu: dict | None = None, deleting: bool = False) -> client.V1Pod:
    resources = client.V1ResourceRequirements(**(cpu or {}))
    container = client.V1Container(name="agent", ports=[client.V1ContainerPort(container_port=7070)],
                                   resources=resources)
    conditions = [client.V1PodCondition(type="Ready", status="True" if ready else "False",
                                        reason=None if ready else "ContainersNotReady")]
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="jg", uid=uid, annotations=annotations,
                                     deletion_timestamp=datetime.datetime.now() if deleting else None),
        spec=client.V1PodSpec(containers=[container]),
        status=client.V1PodStatus(pod_ip=ip, conditions=conditions))


@pytest.mark.parametrize("quantity, cores", [("2", 2), ("500m", 1), ("1500m", 2), ("1.5", 2), (None, None),
                                             ("0", None), ("lots", None)])
def test_cpu_quantities_as_whole_cores(quantity, cores):
    assert cpu_cores(quantity) == cores


def test_cores_from_the_annotation_else_the_limit_else_the_request_else_one():
    assert cores_of(pod(annotations={kube_source.CORES: "6"}, cpu={"limits": {"cpu": "4"}}), 7070) == 6
    assert cores_of(pod(cpu={"limits": {"cpu": "4"}, "requests": {"cpu": "1"}}), 7070) == 4
    assert cores_of(pod(cpu={"requests": {"cpu": "250m"}}), 7070) == 1
    assert cores_of(pod(cpu={"requests": {"cpu": "3"}}), 7070) == 3
    assert cores_of(pod(), 7070) == 1
    assert cores_of(pod(annotations={kube_source.CORES: "many"}, cpu={"limits": {"cpu": "2"}}), 7070) == 2


def test_which_pods_are_nodes():
    assert kube_source.not_ready_reason(pod()) is None
    assert kube_source.not_ready_reason(pod(ready=False)) == "pod jg/agent-a is not Ready (ContainersNotReady)"
    assert kube_source.not_ready_reason(pod(ip=None)) == "pod jg/agent-a has no IP yet"
    assert kube_source.not_ready_reason(pod(deleting=True)) == "pod jg/agent-a is terminating"


def test_api_errors_read_as_states(tmp_path):
    spec = source_spec(tmp_path)
    state, reason = explain(ApiException(status=401, reason="Unauthorized"), spec, "https://k:6443")
    assert state == "unauthorized" and "refused the credentials (401 Unauthorized)" in reason
    state, reason = explain(ApiException(status=403, reason="Forbidden"), spec, "https://k:6443")
    assert state == "forbidden" and "forbids watching pods with 'app=agent' in namespace jg" in reason
    assert "get, list and watch on pods" in reason
    state, reason = explain(MaxRetryError(None, "/api/v1/namespaces/jg/pods", "Connection refused"), spec, "https://k")
    assert state == "unreachable" and reason.startswith("cannot reach the API server https://k: MaxRetryError")


def test_a_list_and_events_add_and_remove_nodes(tmp_path):
    seen: list[tuple] = []
    source = KubeNodeSource(source_spec(tmp_path, data_root="/srv"), lambda p: seen.append(("ready", p)),
                            lambda name, why: seen.append(("gone", name, why)))
    source._sync([pod("a", "10.1.0.5", annotations={kube_source.DATA_ROOT: "/data"}), pod("b", "10.1.0.6", ready=False)])
    assert seen == [("ready", AgentPod("a", "jg", "u1", "10.1.0.5", 1, "/data"))]
    source._event("MODIFIED", pod("b", "10.1.0.6", uid="u2"))
    assert seen[-1] == ("ready", AgentPod("b", "jg", "u2", "10.1.0.6", 1, "/srv"))
    source._event("MODIFIED", pod("b", "10.1.0.6", uid="u2"))  # nothing changed: nothing said
    assert len(seen) == 2
    source._event("MODIFIED", pod("a", "10.1.0.5", ready=False))
    assert seen[-1] == ("gone", "a", "pod jg/a is not Ready (ContainersNotReady)")
    source._event("ADDED", pod("a", "10.1.0.9", uid="u3"))  # back, elsewhere
    source._event("MODIFIED", pod("a", "10.1.0.7", uid="u4"))  # replaced under the same name
    assert seen[-3:] == [("ready", AgentPod("a", "jg", "u3", "10.1.0.9", 1, "/srv")),
                         ("gone", "a", "pod jg/a was replaced"), ("ready", AgentPod("a", "jg", "u4", "10.1.0.7", 1, "/srv"))]
    source._event("DELETED", pod("b", "10.1.0.6", uid="u2"))
    assert seen[-1] == ("gone", "b", "pod jg/b was deleted")
    source._sync([])  # a relist after the watch expired: what it lacks is gone
    assert seen[-1] == ("gone", "a", "pod jg/a was deleted") and source.describe()["pods"] == 0


def test_the_resource_view_follows_nodes_that_come_and_go():
    a, b = Host("a", "10.0.0.1", 2), Host("b", "10.0.0.2", 4)
    cores = HostCores([], dynamic=True)
    assert cores.most_free == 0 and cores.snapshot() == {}
    cores.sync([a, b])
    cores.acquire("j1", {"b": [3]})
    cores.sync([a])  # b is gone while j1 holds cores there: kept until j1 releases them
    assert set(cores.snapshot()) == {"a", "b"}
    cores.release("j1")
    cores.sync([a])
    assert set(cores.snapshot()) == {"a"} and cores.most_free == 2
    with pytest.raises(ValueError, match="at least one host"):
        HostCores([])


def test_an_unreachable_api_server_is_a_state_of_the_source(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")
    (tmp_path / "secret").write_text("s3cret")
    inventory = parse_inventory({"kubernetes": [{"namespace": "jg", "label_selector": "app=agent",
                                                 "secret_file": str(tmp_path / "secret"),
                                                 "kubeconfig": str(kubeconfig), "connect_timeout": 1}]})
    fleet = FleetDeployer(inventory)
    try:
        assert fleet.dynamic and fleet.hosts() == [] and fleet.node_states() == []
        (state,) = fleet.source_states()
        assert state["state"] == "unreachable", state
        assert state["reason"].startswith(f"cannot reach the API server http://127.0.0.1:{port}")
        assert fleet.control_ports() == [7070]
    finally:
        fleet.shutdown()


def test_a_server_with_no_node_up_yet_starts_and_says_why_a_job_cannot_run(tmp_path):
    """Nodes of a source may come later: the server starts, a request is a 503 naming the source's
    trouble, GET /v1/health shows the source."""
    from jumpgate.contract.errors import NoResources
    from jumpgate.runtime.service import JumpgateService, Settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "kubeconfig").write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")
    (tmp_path / "secret").write_text("s3cret")
    (tmp_path / "nodes.yaml").write_text(f"""kubernetes:
  - {{namespace: jg, label_selector: app=agent, secret_file: {tmp_path / 'secret'},
     kubeconfig: {tmp_path / 'kubeconfig'}, connect_timeout: 1}}
""")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.jsonl").write_text('{"a": 1}\n')
    service = JumpgateService(Settings(data_root=tmp_path / "data", cache_dir=tmp_path / "cache",
                                       nodes=tmp_path / "nodes.yaml"))
    try:
        assert service.nodes() == []
        (source,) = service.health()["node_sources"]
        assert source["state"] == "unreachable"
        request = {"operations": [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
                                   "schema": [{"name": "a", "type": "int32"}]},
                                  {"kind": "send", "name": "out", "input": "r", "transport": "tcp",
                                   "host": "127.0.0.1", "port": 9}]}
        with pytest.raises(NoResources, match="no node is up; node source jg is unreachable: cannot reach"):
            service.submit(request)
    finally:
        service.shutdown()
