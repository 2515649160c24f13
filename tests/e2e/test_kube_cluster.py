"""The Kubernetes test cluster the Kubernetes deployer is tested against: a real kube-apiserver and
kube-controller-manager v1.36.3 over etcd (jumpgate/deploy/kube_fixture.py; built by
scripts/kube-build.sh), with test kubelets and the scheduler's part played through the API only
(jumpgate/deploy/kubelet_fixture.py, kubelet_pod.py). These tests check the cluster itself, with
the official `kubernetes` client, as a deployer will use it:

- the API server answers its version; the test nodes are registered and Ready;
- a Pod bound to a node runs its command in a network namespace of its own, with its own IP the
  test process reaches, its environment (downward API, a Secret's key) and volumes (a Secret at
  its mountPath, the service account's token), becomes Ready after its tcpSocket probe passes;
  deleting it stops the process, removes the namespace and the Pod;
- an unscheduled Pod is bound by the harness' scheduler, one that fits no node is marked
  Unschedulable with the reason; a Job's Pod runs to completion (the Job controller works) and
  its output reads back through the API server (`kubectl logs`);
- a Deployment's Pods pass an init container, an emptyDir and a ConfigMap volume, exec readiness
  and httpGet liveness probes; a hostNetwork Pod runs in its node's namespace at the node's address;
- a DaemonSet selecting labelled nodes gets one Ready Pod on each of them and none elsewhere;
- the API server stopped and started again keeps its state (etcd) and the kubelets and the
  scheduler watch again: Pods made before still run, new ones run too.

One cluster for the module (some 10 s to start). Skipped, saying why, when the binaries are not
built (scripts/setup.sh builds them unless JUMPGATE_WITH_KUBE=0) or namespaces cannot be made.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request
from collections.abc import Iterator

import pytest

from jumpgate.deploy import kube_fixture

pytest.importorskip("kubernetes", reason="the `kubernetes` client is a dev dependency (pip install -e '.[dev]')")
from kubernetes import client, config  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from jumpgate.deploy import kubelet_fixture  # noqa: E402
from jumpgate.deploy.kube_fixture import KubeCluster  # noqa: E402
from jumpgate.deploy.kubelet_fixture import KubeletHarness  # noqa: E402
from jumpgate.deploy.netns_fixture import NETNS_DIR, processes_in  # noqa: E402

WHY_NOT = kube_fixture.why_not() or kubelet_fixture.why_not()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"no Kubernetes test cluster: {WHY_NOT}")]

NCA_LABEL = "jumpgate.io/nca"
NODES = {"kn0": {NCA_LABEL: "yes"}, "kn1": {NCA_LABEL: "yes"}, "kn2": {}}

# A TCP server that answers each connection with what its process sees, as JSON.
SERVER = r"""
import json, os, socket, sys
def read(path):
    try:
        return open(path).read()
    except OSError as e:
        return f"<{e.strerror}>"
port = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen()
while True:
    c, _ = s.accept()
    seen = {"env": {k: v for k, v in os.environ.items() if k.startswith("JG_")}, "hostname": socket.gethostname(),
            "secret": read("/etc/jumpgate-test/secret/password"),
            "token": read("/var/run/secrets/kubernetes.io/serviceaccount/token"),
            "sa_namespace": read("/var/run/secrets/kubernetes.io/serviceaccount/namespace")}
    c.sendall(json.dumps(seen).encode())
    c.close()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KubeCluster]:
    with KubeCluster(tmp_path_factory.mktemp("kube")) as made:
        yield made
    assert not made.processes(), f"cluster processes left: {made.processes()}"


@pytest.fixture(scope="module")
def nodes(cluster, tmp_path_factory) -> Iterator[KubeletHarness]:
    harness = KubeletHarness(cluster, tmp_path_factory.mktemp("nodes"), NODES, max_probe_period=0.5)
    with harness:
        yield harness
    assert not [n for n in os.listdir(NETNS_DIR) if n.startswith(harness.tag)], "namespaces left"


@pytest.fixture(scope="module")
def core(cluster) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


@pytest.fixture(autouse=True)
def no_harness_errors(request):
    yield
    if "nodes" in request.fixturenames:
        harness = request.getfixturevalue("nodes")
        assert not harness.errors, harness.errors


def server_container(port: int, **extra) -> dict:
    return {"name": "server", "image": "jumpgate/test:none", "command": [sys.executable, "-c", SERVER],
            "args": [str(port)], "ports": [{"name": "answer", "containerPort": port}],
            "readinessProbe": {"tcpSocket": {"port": "answer"}, "periodSeconds": 1}, **extra}


def pod_manifest(name: str, port: int = 7000, *, node: str | None = None, labels: dict | None = None,
                 **spec) -> dict:
    spec = {"containers": [server_container(port)], "terminationGracePeriodSeconds": 5, **spec}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def is_ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def wait_ready(nodes: KubeletHarness, core, name: str, timeout: float = 30.0, namespace: str = "default"):
    def ready():
        pod = core.read_namespaced_pod(name, namespace)
        return pod if is_ready(pod) else None
    return nodes.wait_for(ready, timeout, f"pod {name} Ready")


def ask(address: str, port: int) -> dict:
    """What the test server at address:port sees."""
    with socket.create_connection((address, port), timeout=5) as s:
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data)


def gone(core, name: str, namespace: str = "default") -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as e:
        return e.status == 404
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---------------------------------------------------------------------------- the tests


def test_the_api_server_answers_its_version_and_the_nodes_are_ready(cluster, nodes, core):
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        assert client.VersionApi(api).get_code().git_version == kube_fixture.KUBE_VERSION
    finally:
        api.close()
    listed = {n.metadata.name: n for n in core.list_node().items}
    assert set(listed) == set(NODES)
    for name, node in listed.items():
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
        assert node.metadata.labels["kubernetes.io/hostname"] == name
        assert node.metadata.labels.get(NCA_LABEL) == NODES[name].get(NCA_LABEL)
        assert node.status.node_info.kubelet_version == kube_fixture.KUBE_VERSION
    # the controllers made the default namespace's service account and the root CA's ConfigMap
    assert core.read_namespaced_service_account("default", "default").metadata.name == "default"


def test_a_pod_runs_in_its_own_namespace_with_its_environment_and_volumes(nodes, core):
    core.create_namespaced_secret("default", client.V1Secret(metadata=client.V1ObjectMeta(name="db"),
                                                             string_data={"password": "s3cret"}))
    container = server_container(7000, env=[
        {"name": "JG_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "JG_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "JG_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "JG_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
        {"name": "JG_WHERE", "value": "$(JG_POD_NAME) on $(JG_NODE)"}],
        volumeMounts=[{"name": "secret", "mountPath": "/etc/jumpgate-test/secret"}])
    core.create_namespaced_pod("default", pod_manifest(
        "web", node="kn0", containers=[container], volumes=[{"name": "secret", "secret": {"secretName": "db"}}]))
    pod = wait_ready(nodes, core, "web")
    assert pod.status.phase == "Running" and pod.spec.node_name == "kn0"
    assert pod.status.host_ip == nodes.nodes["kn0"].node_address
    run = nodes.pod("default", "web")
    assert pod.status.pod_ip == run.ip
    procs = processes_in([run.netns])[run.netns]
    assert [p.pid for p in procs] == run.pids(), procs  # the server, alone in the Pod's namespace
    seen = ask(pod.status.pod_ip, 7000)
    assert seen["env"] == {"JG_POD_IP": pod.status.pod_ip, "JG_POD_NAME": "web", "JG_NODE": "kn0",
                           "JG_PASSWORD": "s3cret", "JG_WHERE": "web on kn0"}
    assert seen["hostname"] == "web"
    assert seen["secret"] == "s3cret"
    assert seen["sa_namespace"] == "default" and seen["token"].count(".") == 2  # a bound service-account JWT
    assert not os.path.exists("/etc/jumpgate-test/secret/password")  # only inside the Pod's mounts

    core.delete_namespaced_pod("web", "default")
    nodes.wait_for(lambda: gone(core, "web"), 20, "pod web deleted")
    assert not any(alive(p.pid) for p in procs)
    assert not (NETNS_DIR / run.netns).exists()
    assert processes_in([run.netns])[run.netns] == []
    assert not os.path.exists("/etc/jumpgate-test")  # the mountPath made for it is gone with it
    core.delete_namespaced_secret("db", "default")


def test_the_scheduler_binds_pending_pods_and_says_why_one_does_not_fit(nodes, core):
    core.create_namespaced_pod("default", pod_manifest("placed", node_selector={NCA_LABEL: "yes"}))
    pod = wait_ready(nodes, core, "placed")
    assert pod.spec.node_name in ("kn0", "kn1")
    assert {c.type: c.status for c in pod.status.conditions}["PodScheduled"] == "True"

    huge = pod_manifest("huge", containers=[server_container(7000, resources={"requests": {"cpu": "64"}})])
    core.create_namespaced_pod("default", huge)

    def unschedulable():
        p = core.read_namespaced_pod("huge", "default")
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled" and c.reason == "Unschedulable"),
                    None)
    cond = nodes.wait_for(unschedulable, 20, "pod huge Unschedulable")
    assert cond.message == "0/3 nodes are available: 3 Insufficient cpu."
    for name in ("placed", "huge"):
        core.delete_namespaced_pod(name, "default")
    nodes.wait_for(lambda: gone(core, "placed") and gone(core, "huge"), 20, "pods deleted")


def test_a_job_runs_to_completion(nodes, core, cluster):
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    batch = client.BatchV1Api(api)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "once", "image": "none", "command": [sys.executable, "-c", "print('done')"]}]}}}}
    try:
        batch.create_namespaced_job("default", job)
        nodes.wait_for(lambda: batch.read_namespaced_job("once", "default").status.succeeded == 1, 30, "job done")
        pods = core.list_namespaced_pod("default", label_selector="job-name=once").items
        assert [p.status.phase for p in pods] == ["Succeeded"]
        assert pods[0].status.container_statuses[0].state.terminated.exit_code == 0
        assert core.read_namespaced_pod_log(pods[0].metadata.name, "default") == "done\n"  # via the node's port
        batch.delete_namespaced_job("once", "default", propagation_policy="Background")
        nodes.wait_for(lambda: not core.list_namespaced_pod("default", label_selector="job-name=once").items,
                       30, "job's pod deleted")
    finally:
        api.close()


def test_a_daemonset_gets_one_ready_pod_per_labelled_node(nodes, core, cluster):
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    apps = client.AppsV1Api(api)
    labels = {"app": "nca"}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nca"},
          "spec": {"selector": {"matchLabels": labels},
                   "template": {"metadata": {"labels": labels},
                                "spec": {"nodeSelector": {NCA_LABEL: "yes"}, "terminationGracePeriodSeconds": 5,
                                         "containers": [server_container(7100)]}}}}
    try:
        apps.create_namespaced_daemon_set("default", ds)

        def all_ready():
            pods = core.list_namespaced_pod("default", label_selector="app=nca").items
            return pods if len(pods) == 2 and all(is_ready(p) for p in pods) else None
        pods = nodes.wait_for(all_ready, 30, "the DaemonSet's pods Ready")
        assert sorted(p.spec.node_name for p in pods) == ["kn0", "kn1"]
        for p in pods:  # each answers on its own address
            assert ask(p.status.pod_ip, 7100)["hostname"] == p.metadata.name
        nodes.wait_for(lambda: apps.read_namespaced_daemon_set("nca", "default").status.number_ready == 2, 20,
                       "the DaemonSet's status")
        apps.delete_namespaced_daemon_set("nca", "default", propagation_policy="Foreground")
        nodes.wait_for(lambda: not core.list_namespaced_pod("default", label_selector="app=nca").items, 30,
                       "the DaemonSet's pods deleted")
        # the harness forgets a pod once its runner thread has ended, just after the API let it go
        nodes.wait_for(lambda: not [k for k in nodes.pods() if k.startswith("default/nca-")], 10,
                       "the harness done with the DaemonSet's pods")
    finally:
        api.close()


def test_the_api_server_restarts_with_its_state_and_the_nodes_watch_again(nodes, core, cluster):
    core.create_namespaced_pod("default", pod_manifest("before", node="kn1"))
    before = wait_ready(nodes, core, "before")
    cluster.restart_apiserver()
    after = core.read_namespaced_pod("before", "default")  # kept in etcd, still Ready
    assert after.metadata.uid == before.metadata.uid and is_ready(after)
    assert ask(after.status.pod_ip, 7000)["hostname"] == "before"

    core.create_namespaced_pod("default", pod_manifest("after", node_selector={NCA_LABEL: "yes"}))
    pod = wait_ready(nodes, core, "after")  # scheduled, run and reported through the new watches
    assert ask(pod.status.pod_ip, 7000)["hostname"] == "after"
    for name in ("before", "after"):
        core.delete_namespaced_pod(name, "default")
    nodes.wait_for(lambda: gone(core, "before") and gone(core, "after"), 20, "pods deleted")
    assert not nodes.pods()


def test_a_deployment_with_an_init_container_config_volumes_and_exec_and_http_probes(nodes, core, cluster):
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    apps = client.AppsV1Api(api)
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="pages"), data={"greeting": "hello from a ConfigMap"}))
    labels = {"app": "pages"}
    init = {"name": "copy", "image": "none", "command": ["/bin/sh", "-c", "cp /config/greeting /site/index.html"],
            "volumeMounts": [{"name": "config", "mountPath": "/config"}, {"name": "site", "mountPath": "/site"}]}
    web = {"name": "web", "image": "none", "command": [sys.executable, "-m", "http.server", "7200"],
           "workingDir": "/site", "volumeMounts": [{"name": "site", "mountPath": "/site"}],
           "readinessProbe": {"exec": {"command": ["test", "-f", "/site/index.html"]}, "periodSeconds": 1},
           "livenessProbe": {"httpGet": {"path": "/", "port": 7200}, "periodSeconds": 1, "failureThreshold": 5}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pages"},
                  "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": {
                               "initContainers": [init], "containers": [web], "terminationGracePeriodSeconds": 5,
                               "volumes": [{"name": "site", "emptyDir": {}},
                                           {"name": "config", "configMap": {"name": "pages"}}]}}}}
    try:
        apps.create_namespaced_deployment("default", deployment)

        def all_ready():
            pods = core.list_namespaced_pod("default", label_selector="app=pages").items
            return pods if len(pods) == 2 and all(is_ready(p) for p in pods) else None
        pods = nodes.wait_for(all_ready, 30, "the Deployment's pods Ready")
        for p in pods:
            assert p.status.init_container_statuses[0].state.terminated.exit_code == 0
            with urllib.request.urlopen(f"http://{p.status.pod_ip}:7200/index.html", timeout=5) as r:
                assert r.read() == b"hello from a ConfigMap"
            assert p.status.container_statuses[0].restart_count == 0  # the liveness probe passes
        apps.delete_namespaced_deployment("pages", "default", propagation_policy="Background")
        nodes.wait_for(lambda: not core.list_namespaced_pod("default", label_selector="app=pages").items, 30,
                       "the Deployment's pods deleted")
    finally:
        core.delete_namespaced_config_map("pages", "default")
        api.close()


def test_a_host_network_pod_runs_in_its_nodes_namespace(nodes, core):
    core.create_namespaced_pod("default", pod_manifest("on-host", 7300, node="kn2", host_network=True))
    pod = wait_ready(nodes, core, "on-host")
    node = nodes.nodes["kn2"]
    assert pod.status.pod_ip == pod.status.host_ip == node.node_address
    assert nodes.pod("default", "on-host").pids()[0] in [p.pid for p in processes_in([node.node_netns])[node.node_netns]]
    assert ask(node.node_address, 7300)["hostname"] == "kn2"
    core.delete_namespaced_pod("on-host", "default")
    nodes.wait_for(lambda: gone(core, "on-host"), 20, "pod on-host deleted")
    assert processes_in([node.node_netns])[node.node_netns] == []
