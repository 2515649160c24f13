"""Jumpgate on Kubernetes, against a real API server (jumpgate/deploy/kube_fixture.py) and the test
kubelets (kubelet_fixture.py): deploy/kubernetes/ applied as it is, the agents of its DaemonSet
running the real `jumpgate agent serve` in pods of their own, and a `jumpgate serve --nodes` whose
inventory finds them through the API server with the least-privileged service account of the
manifests (docs/deploy.md, "Kubernetes").

- every manifest passes the API server's validation (strict: an unknown field is an error);
- the server's Role is enough for the watch and no more (TokenRequest of its own account);
- the thesis' running example runs over the two agent pods, DuckDB's answer, and so do the
  conformance suite's TPC-H requests (their tables in the agents' hostPath);
- an agent pod deleted mid-job fails the job naming it, leaves no NCA in any pod, and the next job
  runs on the remaining node; a new agent pod is used by the next job, without a restart;
- the API server stopped: the nodes go on serving, the server reports the lost watch, and the
  watch resumes when the API server is back.

One cluster and one set of nodes for the module. Skipped, saying why, without the cluster's
binaries or namespaces.
"""
from __future__ import annotations

import copy
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from jumpgate.deploy import kube_fixture

pytest.importorskip("kubernetes", reason="the `kubernetes` client (pip install -e '.[dev]')")
from kubernetes import client, config  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from kubernetes.utils import FailToCreateError  # noqa: E402

from jumpgate.client import Jumpgate  # noqa: E402
from jumpgate.client.receiver import Receiver, wait_all  # noqa: E402
from jumpgate.conformance import (  # noqa: E402
    PASSED,
    UNSUPPORTED,
    Oracle,
    Runner,
    default_data_dir,
    ensure_data,
    load_cases,
)
from jumpgate.deploy import kubelet_fixture  # noqa: E402
from jumpgate.deploy.inventory import KubernetesSource  # noqa: E402
from jumpgate.deploy.kube_fixture import KubeCluster  # noqa: E402
from jumpgate.deploy.kube_source import KubeNodeSource  # noqa: E402
from jumpgate.deploy.kube_testbed import (  # noqa: E402
    AGENTS,
    BASE,
    NAMESPACE,
    Installed,
    create,
    install,
    ready_agent_pods,
    server_inventory,
    service_account_kubeconfig,
    service_account_token,
    set_agent_label,
)
from jumpgate.deploy.kubelet_fixture import KubeletHarness  # noqa: E402
from jumpgate.deploy.kustomize import render  # noqa: E402
from jumpgate.deploy.netns_fixture import processes_in  # noqa: E402
from jumpgate.examples import running_example, write_data  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402

from .helpers import assert_same_rows  # noqa: E402

WHY_NOT = kube_fixture.why_not() or kubelet_fixture.why_not()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"no Kubernetes test cluster: {WHY_NOT}")]

NS = NAMESPACE
LABEL = {"jumpgate.io/agent": "true"}
NODES = {"kn0": LABEL, "kn1": LABEL, "kn2": {}}
SF = float(os.environ.get("JUMPGATE_KUBE_SF", "0.01"))
TPCH = [c for c in load_cases() if c.name.startswith("tpch")]


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KubeCluster]:
    with KubeCluster(tmp_path_factory.mktemp("kube")) as made:
        yield made


@pytest.fixture(scope="module")
def nodes(cluster, tmp_path_factory) -> Iterator[KubeletHarness]:
    with KubeletHarness(cluster, tmp_path_factory.mktemp("nodes"), NODES, max_probe_period=0.5) as harness:
        yield harness


@pytest.fixture(scope="module")
def admin(cluster) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield api
    api.close()


@pytest.fixture(autouse=True)
def no_harness_errors(request):
    yield
    if "nodes" in request.fixturenames:
        assert not request.getfixturevalue("nodes").errors, request.getfixturevalue("nodes").errors


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """The agents' hostPath: the running example's tables, and a big file for a stalled scan."""
    root = tmp_path_factory.mktemp("agent-data")
    write_data(root, sales=50_000)
    (root / "big.jsonl").write_text(('{"a": 1, "s": "' + "x" * 2000 + '"}\n') * 20000)
    return root


@pytest.fixture(scope="module")
def installed(admin, nodes, data) -> Installed:
    return install(admin, data)


def agent_pods(core: client.CoreV1Api, count: int, nodes: KubeletHarness, timeout: float = 60.0) -> list:
    return ready_agent_pods(core, count, nodes.wait_for, timeout)


@pytest.fixture(scope="module")
def core(admin) -> client.CoreV1Api:
    return client.CoreV1Api(admin)


@pytest.fixture(scope="module")
def server(cluster, nodes, core, installed, tmp_path_factory) -> Iterator[LocalServer]:
    """`jumpgate serve --nodes` with the ConfigMap's inventory, as the server's pod would read it,
    but the API server reached with a kubeconfig of the server's own service account."""
    work = tmp_path_factory.mktemp("kube-server")
    agent_pods(core, 2, nodes)
    inventory = server_inventory(installed, work, service_account_kubeconfig(cluster, core, work / "kubeconfig"))
    (work / "root").mkdir()
    srv = LocalServer(work / "root", None, work / "server.log",
                      extra_args=["--nodes", str(inventory), "--send-allow", str(nodes.network.subnet),
                                  "--warm-ncas", "0", "--log-level", "info"])
    try:
        yield srv
    finally:
        srv.stop()
    assert not ncas_in_pods(nodes), ncas_in_pods(nodes)


def listed_nodes(srv: LocalServer) -> dict[str, dict]:
    return {n["name"]: n for n in httpx.get(srv.url + "/v1/nodes").json()}


def wait_nodes(srv: LocalServer, names: set[str], timeout: float = 30.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = {n: v for n, v in listed_nodes(srv).items() if v["state"] == "up"}
        if set(found) == names:
            return found
        assert time.monotonic() < deadline, f"nodes up {sorted(found)}, expected {sorted(names)}"
        time.sleep(0.1)


def ncas_in_pods(nodes: KubeletHarness) -> dict[str, list]:
    """The NCA processes in the pods' network namespaces (the agents themselves are not NCAs)."""
    runs = {key: run for key, run in nodes.pods().items() if run.netns}
    seen = processes_in([run.netns for run in runs.values()])
    return {key: ncas for key, run in runs.items() if (ncas := [p for p in seen[run.netns] if p.is_nca])}


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def run_job(url: str, address: str, request: dict, timeout: float = 120) -> tuple[dict[str, pa.Table], list]:
    """Run `request` with its sends to `address` (the test process on the harness' bridge)."""
    request = copy.deepcopy(request)
    for op in request["operations"]:
        if op["kind"] == "send":
            op["host"], op["port"] = address, free_port(address)
    receivers: list[Receiver] = []
    with Jumpgate(url) as jg:
        job = jg.submit(request)
        try:
            for op in request["operations"]:
                if op["kind"] == "send":
                    r = Receiver(address, op["port"], name=op["name"])
                    receivers.append(r)
                    r.start(job.outputs[op["name"]].expected_streams, job.outputs[op["name"]].layout)
            job.execute()
            deadline = time.monotonic() + timeout
            while not job.finished and time.monotonic() < deadline:
                job.status(wait=0.25)
            job.raise_if_failed()
            assert job.state == "succeeded", f"job {job.job_id} is {job.state} after {timeout} s"
            assert wait_all(receivers, 30), "the job succeeded but its streams did not end"
            return {r.name: r.table() for r in receivers}, job.ncas
        finally:
            if not job.finished:
                job.cancel_quietly()
            for r in receivers:
                r.close()


def running_example_request(url: str, address: str) -> dict:
    with Jumpgate(url) as jg:
        shuffle = running_example(jg)
        return jg.request(*[part.send(address, 1, name=f"shuffle_{i}") for i, part in enumerate(shuffle)])


def scan_request(address: str, port: int) -> dict:
    return {"operations": [
        {"kind": "read", "name": "r", "path": "big.jsonl", "format": "json",
         "schema": [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]},
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": address, "port": port}]}


def run_scan(url: str, address: str) -> str:
    """A scan of big.jsonl to a client that reads it all; the node it ran on."""
    tables, ncas = run_job(url, address, scan_request(address, 1))
    assert tables["out"].num_rows == 20000
    (host,) = {n["host"] for n in ncas if n.get("host")}
    return host


# ---------------------------------------------------------------------------- the tests


def test_every_manifest_passes_the_api_servers_strict_validation(admin):
    """Rendered into a namespace of its own: the Namespace made, every other object created with
    dryRun=All (admission and validation run, nothing is stored) and strict field validation."""
    docs = render(BASE, "validate")
    assert [d["kind"] for d in docs if d["kind"] == "Namespace"] == ["Namespace"]
    kinds = set()
    for doc in docs:
        try:
            create(admin, doc, **({} if doc["kind"] == "Namespace" else {"dry_run": "All"}))
        except FailToCreateError as e:
            raise AssertionError(f"{doc['kind']} {doc['metadata']['name']}: "
                                 + "; ".join(f"{x.status} {x.body}" for x in e.api_exceptions)) from None
        kinds.add(doc["kind"])
    assert kinds == {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret", "Deployment",
                     "Service", "DaemonSet", "NetworkPolicy"}
    assert client.CoreV1Api(admin).list_namespaced_config_map("validate", label_selector="app.kubernetes.io/part-of"
                                                               "=jumpgate").items == []  # dry run: nothing stored
    bad = copy.deepcopy(next(d for d in docs if d["kind"] == "DaemonSet"))
    bad["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    # the API server itself refuses it (the typed client would refuse it before sending)
    request = admin.param_serialize("POST", "/apis/apps/v1/namespaces/validate/daemonsets",
                                    query_params=[("dryRun", "All"), ("fieldValidation", "Strict")], body=bad,
                                    header_params={"Content-Type": "application/json"}, auth_settings=["BearerToken"])
    answer = admin.call_api(*request)
    answer.read()
    assert answer.status == 400, answer.data
    assert 'unknown field \\"spec.template.spec.containers[0].livenessProbes\\"' in answer.data.decode()


def test_the_servers_role_is_enough_for_the_watch_and_no_more(cluster, core, nodes, installed, tmp_path):
    pods = agent_pods(core, 2, nodes)
    kubeconfig = service_account_kubeconfig(cluster, core, tmp_path / "kubeconfig")
    (tmp_path / "secret").write_text(installed.secret)
    spec = KubernetesSource(namespace=NS, label_selector=AGENTS, secret_file=str(tmp_path / "secret"),
                            kubeconfig=str(kubeconfig))
    found: list = []
    source = KubeNodeSource(spec, found.append, lambda name, why: None)
    source.start()
    try:
        nodes.wait_for(lambda: len(found) == 2, 30, "the watch finds the agent pods")
        assert source.state == "watching", source.describe()
        assert sorted(p.name for p in found) == sorted(p.metadata.name for p in pods)
        assert {p.ip for p in found} == {p.status.pod_ip for p in pods}
        assert {p.cores for p in found} == {4} and {p.data_root for p in found} == {"/data"}  # limit, annotation
    finally:
        source.close()
    # elsewhere, and anything but reading pods, is forbidden
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        as_server = client.CoreV1Api(api)
        as_server.list_namespaced_pod(NS)
        forbidden = {
            "list secrets": lambda: as_server.list_namespaced_secret(NS),
            "read the Secret": lambda: as_server.read_namespaced_secret("jumpgate-secrets", NS),
            "create a pod": lambda: as_server.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod",
                                                                         "metadata": {"name": "x"}, "spec": {
                                                                             "containers": [{"name": "x", "image": "x"}]}}),
            "delete a pod": lambda: as_server.delete_namespaced_pod(pods[0].metadata.name, NS),
            "list pods elsewhere": lambda: as_server.list_namespaced_pod("default"),
            "list nodes": lambda: as_server.list_node(),
            "list config maps": lambda: as_server.list_namespaced_config_map(NS),
        }
        for what, call in forbidden.items():
            with pytest.raises(ApiException) as e:
                call()
            assert e.value.status == 403, what
    finally:
        api.close()
    # a source the role does not cover says so
    elsewhere = KubernetesSource(namespace="default", label_selector=AGENTS, secret_file=str(tmp_path / "secret"),
                                 kubeconfig=str(kubeconfig))
    source = KubeNodeSource(elsewhere, found.append, lambda name, why: None)
    source.start()
    try:
        assert source.synced.wait(20)
        assert source.state == "forbidden", source.describe()
        assert "403 Forbidden" in source.reason and "namespace default" in source.reason
    finally:
        source.close()


def test_the_running_example_over_agent_pods_matches_duckdb(server, core, nodes, data):
    duckdb = pytest.importorskip("duckdb")
    pods = {p.metadata.name: p for p in agent_pods(core, 2, nodes)}
    wait_nodes(server, set(pods))

    def with_health() -> dict | None:
        found = listed_nodes(server)
        return found if all(n.get("agent", {}).get("pid") for n in found.values()) else None
    listed = nodes.wait_for(with_health, 20, "the agents' first heartbeat")
    for name, node in listed.items():
        assert (node["reach"], node["pod"], node["namespace"]) == ("kubernetes", name, NS)
        assert node["address"] == pods[name].status.pod_ip and node["cores"] == 4
        assert node["data_root"] == "/data" and node["agent"]["pid"] > 0
        assert node["source"] == {"state": "watching", "reason": ""}
    (source,) = httpx.get(server.url + "/v1/health").json()["node_sources"]
    assert (source["namespace"], source["state"], source["pods"]) == (NS, "watching", 2)
    page = httpx.get(server.url + "/").text
    assert all(f"{NS}/{name}" in page for name in pods) and "node-sources" in page
    address = nodes.network.gateway
    tables, ncas = run_job(server.url, address, running_example_request(server.url, address))
    assert {n["host"] for n in ncas if n.get("host")} <= set(pods), ncas
    got = pa.concat_tables([tables["shuffle_0"], tables["shuffle_1"]])
    assert got.num_rows > 0
    assert_same_rows(duckdb.connect(), got, f"""
        SELECT st.state, sum(s.price) AS total_price
        FROM read_json('{data}/sales.jsonl', columns={{'sale_id': 'BIGINT', 'item_id': 'INTEGER',
                       'store_id': 'INTEGER', 'price': 'DECIMAL(10,2)'}}) s
        JOIN read_json('{data}/stores.jsonl', columns={{'store_id': 'INTEGER', 'state': 'VARCHAR'}}) st
          ON s.store_id = st.store_id
        WHERE s.item_id = 100 GROUP BY st.state""")
    assert not ncas_in_pods(nodes)


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_the_server_as_its_pod_runs_it_uses_the_in_cluster_configuration(cluster, core, nodes, installed, tmp_path):
    """No kubeconfig: the server finds the API server as in its pod, through KUBERNETES_SERVICE_HOST
    and _PORT and the files of its service account at /var/run/secrets/kubernetes.io/serviceaccount
    (its token from the TokenRequest API, the cluster's CA, the namespace). Those files are there
    only in the server's own mount namespace (an empty /run, the directory bound over), so this
    machine's /run is not touched. It lists both agent pods and runs a job over them."""
    pods = {p.metadata.name for p in agent_pods(core, 2, nodes)}
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(service_account_token(core))
    shutil.copy(cluster.ca_file, account / "ca.crt")
    (account / "namespace").write_text(NS)
    inventory = server_inventory(installed, tmp_path)
    assert "kubeconfig" not in inventory.read_text()
    in_pod = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
              f'mount -t tmpfs none /run && mkdir -p {SERVICE_ACCOUNT_DIR} '
              f'&& mount --bind "$0" {SERVICE_ACCOUNT_DIR} && exec "$@"', str(account)]
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    (tmp_path / "root").mkdir()
    with LocalServer(tmp_path / "root", None, tmp_path / "server.log", wrapper=in_pod,
                     env={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port},
                     extra_args=["--nodes", str(inventory), "--send-allow", str(nodes.network.subnet),
                                 "--warm-ncas", "0"]) as srv:
        listed = wait_nodes(srv, pods)
        assert {n["source"]["state"] for n in listed.values()} == {"watching"}, listed
        assert run_scan(srv.url, nodes.network.gateway) in pods
    assert not Path(SERVICE_ACCOUNT_DIR, "token").exists()  # only the server's mount namespace had it


class Unsupported(Exception):
    """The server refused a request that needs an operation no registered NCA claims."""


@pytest.fixture(scope="module")
def tpch_runner(server, core, nodes, data) -> Iterator[Runner]:
    """The conformance suite's TPC-H tables (generated once into its cache) in the agents'
    hostPath, under the paths its requests read; a runner receiving on the harness' bridge."""
    pytest.importorskip("duckdb")
    root = default_data_dir(SF)
    tables = {t for c in TPCH for t in c.tables}
    ensure_data(root, tables, SF)
    for table in tables:
        if not (data / table).exists():
            shutil.copytree(root / table, data / table)
    wait_nodes(server, {p.metadata.name for p in agent_pods(core, 2, nodes)})
    oracle = Oracle(root)
    runner = Runner(server.url, oracle, host=nodes.network.gateway, timeout=120)
    try:
        yield runner
    finally:
        runner.close()
        oracle.close()


@pytest.mark.parametrize("case", TPCH, ids=[c.name for c in TPCH])
def test_the_conformance_suites_tpch_requests_over_agent_pods(case, tpch_runner, nodes, request):
    """As tests/conformance runs them on one host (a request needing an NCA nobody registered is a
    strict expected failure), with every NCA in an agent pod found through the API server."""
    gap = tpch_runner.gap(case)
    if gap:
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True, raises=Unsupported))
    outcome = tpch_runner.run(case)
    if outcome.status == UNSUPPORTED:
        raise Unsupported(outcome.message)
    assert outcome.status == PASSED, f"{case.name} ({case.source}): {outcome.message}"
    assert not ncas_in_pods(nodes)


def test_an_agent_pod_deleted_mid_job_fails_it_and_new_pods_are_used(server, core, nodes):
    """The scan's pod is deleted while it sends to a client that does not read (its node's label
    taken off first, so that the DaemonSet makes no new pod there yet): the job fails naming the
    pod, no NCA is left, the next job runs on the other node. Labelled again, the node gets a new
    agent pod, and the next job runs there (the old node's data root is moved away by its
    annotation, so the file is the new node's only)."""
    address = nodes.network.gateway
    pods = {p.metadata.name: p for p in agent_pods(core, 2, nodes)}
    wait_nodes(server, set(pods))
    listener = socket.create_server((address, 0))
    conn = None
    try:
        with Jumpgate(server.url) as jg:
            job = jg.submit(scan_request(address, listener.getsockname()[1]))
            (victim,) = [n["host"] for n in job.ncas]
            job.execute()
            conn, _ = listener.accept()
            nodes.wait_for(lambda: ncas_in_pods(nodes), 20, "the scan running in its pod")
            node_of_victim = pods[victim].spec.node_name
            set_agent_label(core, node_of_victim, None)
            try:
                core.delete_namespaced_pod(victim, NS)
            except ApiException as e:
                assert e.status == 404  # the DaemonSet controller was first
            status = job.status(wait=30)
            while status["state"] == "running":
                status = job.status(wait=30)
    finally:
        if conn is not None:
            conn.close()
        listener.close()
    assert status["state"] == "failed", status
    assert victim in status["error"]["message"], status["error"]
    nodes.wait_for(lambda: not ncas_in_pods(nodes), 20, "no NCA left in any pod")
    (remaining,) = set(pods) - {victim}
    wait_nodes(server, {remaining})
    assert run_scan(server.url, address) == remaining

    # the remaining pod's files elsewhere: the file is then on the new node only
    core.patch_namespaced_pod(remaining, NS, {"metadata": {"annotations": {"jumpgate.io/data-root": "/var/lib/jumpgate"}}})
    set_agent_label(core, node_of_victim, "true")
    (new,) = {p.metadata.name for p in agent_pods(core, 2, nodes)} - {remaining}
    nodes.wait_for(lambda: listed_nodes(server).get(remaining, {}).get("data_root") == "/var/lib/jumpgate", 20,
                   "the remaining node's new data root")
    wait_nodes(server, {remaining, new})
    assert run_scan(server.url, address) == new
    core.patch_namespaced_pod(remaining, NS, {"metadata": {"annotations": {"jumpgate.io/data-root": "/data"}}})
    nodes.wait_for(lambda: listed_nodes(server).get(remaining, {}).get("data_root") == "/data", 20,
                   "the data root back")


def test_the_api_server_away_nodes_keep_serving_and_the_watch_resumes(server, cluster, core, nodes):
    address = nodes.network.gateway
    names = {p.metadata.name for p in agent_pods(core, 2, nodes)}
    wait_nodes(server, names)

    def source_state() -> dict:
        (source,) = httpx.get(server.url + "/v1/health").json()["node_sources"]
        return source

    cluster.stop_apiserver()
    try:
        nodes.wait_for(lambda: source_state()["state"] == "unreachable", 60, "the lost watch reported")
        assert "cannot reach the API server" in source_state()["reason"]
        listed = wait_nodes(server, names)  # still there, and used
        assert {n["source"]["state"] for n in listed.values()} == {"unreachable"}
        assert run_scan(server.url, address) in names
    finally:
        cluster.start_apiserver()
    nodes.wait_for(lambda: source_state()["state"] == "watching", 60, "the watch resumed")
    assert wait_nodes(server, names)
    # and it sees changes again: a pod deleted now goes (the DaemonSet makes another)
    victim = sorted(names)[0]
    core.delete_namespaced_pod(victim, NS)
    nodes.wait_for(lambda: victim not in listed_nodes(server), 30, "the deleted pod's node removed")
    new = {p.metadata.name for p in agent_pods(core, 2, nodes)}
    wait_nodes(server, new, timeout=60)
    assert victim not in new
    assert run_scan(server.url, address) in new

