"""Agents found through Kubernetes against agents reached over SSH (docs/deploy.md), in one run.

The cluster is the test cluster (a real kube-apiserver and kube-controller-manager, the test
kubelets of jumpgate/deploy/kubelet_fixture.py) with deploy/kubernetes/ installed as in
tests/e2e/test_kube_deploy.py; the SSH host is a network namespace with its own OpenSSH server
(jumpgate/deploy/netns_fixture.py). Each side has one node, and its own `jumpgate serve`.

1. Ready to first job: a node is labelled for the agents' DaemonSet, so an agent pod is made
   there. The benchmark watches the pod (a watch on the API server, as the server does) and takes
   the moment it sees the pod Ready; then the server's node list until the node is up, then the
   first job (the only node: it must run there). Reported per round: Ready -> node up, Ready -> the
   first job's last row received. The label is then taken off and the pod goes, for the next round.
2. Warm job overhead: the same small job (a filter and projection over 1,000 JSON Lines rows, so
   that what is measured is the job's overhead, not its data) on the Kubernetes-found agent and on
   the SSH agent, alternating, after two warm-up runs each. Reported: median wall time from submit to
   the last row received, and the difference and ratio Kubernetes / SSH.

Needs root (network namespaces), the cluster's binaries (scripts/kube-build.sh, run by
scripts/setup.sh) and sshd.

    .venv/bin/python bench/kube_agents.py [--runs 30] [--rounds 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import urllib3

from jumpgate.client import Jumpgate
from jumpgate.deploy import kube_fixture, kubelet_fixture, netns_fixture
from jumpgate.local_server import LocalServer

SCHEMA = {"id": "int64", "a": "int32", "s": "string"}


def write_data(root: Path) -> None:
    with open(root / "small.jsonl", "w") as f:
        for i in range(1000):
            f.write(f'{{"id": {i}, "a": {i % 100}, "s": "x{i}"}}\n')


def small_job(jg: Jumpgate, client: str) -> dict:
    flow = jg.read("small.jsonl", schema=SCHEMA).filter("a > 50").project(id="id", s="upper(s)")
    request = jg.request(flow.send(client, 1, name="out"))
    for op in request["operations"]:
        if op["kind"] == "send":
            op["port"] = 0  # any free port, chosen by Jumpgate.run
    return request


def run_job(jg: Jumpgate, request: dict) -> float:
    t0 = time.perf_counter()
    (table,) = jg.run(request, timeout=120).values()
    wall = time.perf_counter() - t0
    assert table.num_rows == 490, table.num_rows
    return wall


def nodes_up(url: str) -> list[str]:
    return [n["name"] for n in httpx.get(url + "/v1/nodes").json() if n["state"] == "up"]


def poll(predicate, timeout: float, what: str, period: float = 0.005):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(period)
    return found


class ReadyWatch:
    """Watches the agent pods and notes when each is first seen Ready (monotonic time)."""

    def __init__(self, core) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        from jumpgate.deploy.kube_testbed import AGENTS, NAMESPACE, is_ready
        self.ready: dict[str, float] = {}
        self._watch = watch.Watch()
        self._lock = threading.Lock()

        self._stopped = threading.Event()

        def run() -> None:
            while not self._stopped.is_set():
                try:
                    for event in self._watch.stream(core.list_namespaced_pod, NAMESPACE, label_selector=AGENTS,
                                                    timeout_seconds=3600):
                        pod = event["object"]
                        if is_ready(pod):
                            with self._lock:
                                self.ready.setdefault(pod.metadata.name, time.monotonic())
                except (ApiException, urllib3.exceptions.HTTPError):
                    # a fresh API server's watch cache not yet ready (504), or the cluster going
                    # away at the end: watch again unless stopped
                    time.sleep(0.1)
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def first_ready(self, exclude: set[str]) -> tuple[str, float] | None:
        with self._lock:
            return next(((n, t) for n, t in self.ready.items() if n not in exclude), None)

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="warm jobs per side")
    ap.add_argument("--rounds", type=int, default=5, help="agent pods made Ready, one after the other")
    args = ap.parse_args()
    why = kube_fixture.why_not() or kubelet_fixture.why_not() or netns_fixture.why_not()
    if why:
        raise SystemExit(f"kube_agents: {why}")
    from kubernetes import client, config

    from jumpgate.deploy.kube_testbed import (
        install,
        server_inventory,
        service_account_kubeconfig,
        set_agent_label,
    )

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        write_data(data)
        with kube_fixture.KubeCluster(work / "kube") as cluster, \
                kubelet_fixture.KubeletHarness(cluster, work / "nodes", {"kn0": {}}, max_probe_period=0.5) as harness, \
                netns_fixture.NetnsHosts(work / "ssh", names=["s0"]) as hosts:
            admin = config.new_client_from_config(config_file=str(cluster.kubeconfig))
            core = client.CoreV1Api(admin)
            installed = install(admin, data)
            (work / "kserver").mkdir()
            kube_inventory = server_inventory(installed, work / "kserver", service_account_kubeconfig(
                cluster, core, work / "kserver" / "kubeconfig"))
            (hosts.host("s0").data_root / "small.jsonl").write_bytes((data / "small.jsonl").read_bytes())
            ssh_inventory = hosts.inventory_yaml(work / "ssh.yaml")
            (work / "root").mkdir()
            watch = ReadyWatch(core)
            try:
                with LocalServer(work / "root", work / "cache", work / "kube-server.log",
                                 extra_args=["--nodes", str(kube_inventory),
                                             "--send-allow", str(harness.network.subnet)]) as kube_srv, \
                        LocalServer(work / "root", work / "cache", work / "ssh-server.log",
                                    extra_args=["--nodes", str(ssh_inventory),
                                                "--send-allow", str(hosts.subnet)]) as ssh_srv, \
                        Jumpgate(kube_srv.url) as kube, Jumpgate(ssh_srv.url) as ssh:
                    print(f"one agent pod (deploy/kubernetes/, test kubelets) against one SSH host; "
                          f"{args.rounds} pods made Ready, {args.runs} warm jobs each side")
                    ready_to_first_job(args.rounds, core, watch, kube_srv.url, kube,
                                       small_job(kube, harness.network.gateway), set_agent_label)
                    warm_overhead(args.runs, kube, small_job(kube, harness.network.gateway),
                                  ssh, small_job(ssh, hosts.client_address))
            finally:
                watch.stop()
                admin.close()
    return 0


def ready_to_first_job(rounds: int, core, watch: ReadyWatch, url: str, jg: Jumpgate, request: dict,
                       set_label) -> None:
    seen: set[str] = set()
    to_up, to_job = [], []
    for r in range(rounds):
        set_label(core, "kn0", "true")
        name, ready = poll(lambda: watch.first_ready(seen), 60, "an agent pod Ready")
        seen.add(name)
        poll(lambda name=name: name in nodes_up(url), 30, f"node {name} up")
        up = time.monotonic()
        run_job(jg, request)
        done = time.monotonic()
        to_up.append(up - ready)
        to_job.append(done - ready)
        cold = " (the job's NCA compiled: the server's compile cache was empty)" if r == 0 else ""
        print(f"  round {r + 1}: pod {name}: Ready -> node up {(up - ready) * 1000:.0f} ms, "
              f"-> first job done {(done - ready) * 1000:.0f} ms{cold}")
        set_label(core, "kn0", None)
        poll(lambda name=name: name not in [n["name"] for n in httpx.get(url + "/v1/nodes").json()], 60,
             f"node {name} removed", period=0.05)
    warm = to_job[1:] or to_job
    print(f"Ready -> node up: median {statistics.median(to_up) * 1000:.0f} ms; "
          f"Ready -> first job's last row: median {statistics.median(warm) * 1000:.0f} ms with the NCA compiled "
          f"(min {min(warm) * 1000:.0f}, max {max(warm) * 1000:.0f}), {to_job[0] * 1000:.0f} ms in round 1")
    set_label(core, "kn0", "true")
    poll(lambda: nodes_up(url), 60, "an agent pod up for the warm jobs", period=0.05)


def warm_overhead(runs: int, kube: Jumpgate, kube_request: dict, ssh: Jumpgate, ssh_request: dict) -> None:
    walls: dict[str, list[float]] = {"kubernetes": [], "ssh": []}
    sides = (("kubernetes", kube, kube_request), ("ssh", ssh, ssh_request))
    for _ in range(2):
        for _, jg, request in sides:
            run_job(jg, request)
    for _ in range(runs):
        for label, jg, request in sides:
            walls[label].append(run_job(jg, request))
    k, s = statistics.median(walls["kubernetes"]), statistics.median(walls["ssh"])
    print(f"warm job, submit -> last row: Kubernetes agent {k * 1000:.1f} ms, SSH agent {s * 1000:.1f} ms "
          f"(medians of {runs}); difference {(k - s) * 1000:+.1f} ms, ratio {k / s:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
