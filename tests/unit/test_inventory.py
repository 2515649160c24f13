"""The inventory of nodes (jumpgate/deploy/inventory.py, docs/deploy.md): a valid file becomes the
deployment's hosts; every problem names the file, the node and the field; `jumpgate serve --nodes`
refuses a bad file before it starts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jumpgate.deploy.affinity import format_cpulist, parse_cpulist
from jumpgate.deploy.fleet import FleetDeployer
from jumpgate.deploy.inventory import InventoryError, load_inventory

GOOD = """
nodes:
  - {name: a, address: 127.0.0.2, cores: 1}
  - name: b
    address: 127.0.0.3
    cores: 2
    reach: local
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "nodes.yaml"
    p.write_text(text)
    return p


def test_a_valid_inventory_becomes_the_deployments_hosts(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD))
    fleet = FleetDeployer(inv)
    try:
        assert [(h.name, h.address, h.cores) for h in fleet.hosts()] == [("a", "127.0.0.2", 1), ("b", "127.0.0.3", 2)]
    finally:
        fleet.shutdown()


@pytest.mark.parametrize("text, message", [
    ("nodes:\n  - {name: a, address: 127.0.0.2, cores: 0}\n", r"nodes\[0\]\.cores: Input should be greater than or equal to 1"),
    ("nodes:\n  - {name: a, address: somewhere, cores: 1}\n", r"nodes\[0\]\.address: 'somewhere' is not an IP address"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cores: 1}\n  - {name: a, address: 127.0.0.3, cores: 1}\n",
     r"nodes\[1\]\.name: 'a' is used by another node"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cores: 1, disk: 5}\n", r"nodes\[0\]\.disk: Extra inputs are not permitted"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cores: 1, reach: telnet}\n", r"nodes\[0\]\.reach: Input should be 'local'"),
    ("nodes:\n  - {name: 'a b', address: 127.0.0.2, cores: 1}\n", r"nodes\[0\]\.name: String should match pattern"),
    ("nodes: []\n", r"nodes: Tuple should have at least 1 item"),
    ("[1, 2]\n", r"Input should be a valid dictionary"),
    ("nodes:\n  - {name: a, address: [\n", r"line \d+, column \d+\): not valid YAML"),
    ("nodes:\n  - {name: a, address: 127.0.0.2}\n", r"nodes\[0\]: a node needs `cores` .* or `cpus`"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cpus: '3-1'}\n", r"nodes\[0\]\.cpus: '3-1' is not a CPU list"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cpus: '0,,1'}\n", r"nodes\[0\]\.cpus: '0,,1' is not a CPU list"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cpus: 'x'}\n", r"nodes\[0\]\.cpus: 'x' is not a CPU list"),
    ("nodes:\n  - {name: a, address: 127.0.0.2, cpus: '4095'}\n", r"nodes\[0\]: cpus '4095': this machine has no CPU 4095"),
])
def test_each_problem_names_the_node_and_the_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InventoryError, match=message) as e:
        load_inventory(path)
    assert str(path) in str(e.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(InventoryError, match="cannot read the inventory .*missing.yaml"):
        load_inventory(tmp_path / "missing.yaml")


def test_serve_refuses_a_bad_inventory_before_it_starts(tmp_path):
    path = write(tmp_path, "nodes:\n  - {name: a, address: 127.0.0.2, cores: -3}\n")
    r = subprocess.run([sys.executable, "-m", "jumpgate.cli", "serve", "--data-root", str(tmp_path), "--nodes",
                        str(path), "--port", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nodes[0].cores" in r.stderr, r.stderr


def test_ssh_nodes_need_their_ssh_section(tmp_path):
    path = write(tmp_path, "nodes:\n  - {name: s, address: 10.0.0.5, cores: 2, reach: ssh}\n")
    with pytest.raises(InventoryError, match=r"nodes\[0\]: a node with reach: ssh needs an `ssh` section"):
        load_inventory(path)
    path = write(tmp_path, "nodes:\n  - {name: s, address: 10.0.0.5, cores: 2, reach: ssh,\n"
                           "     ssh: {host: 10.0.0.5, user: u, key_file: /k, known_hosts: /kh, port: 70000}}\n")
    with pytest.raises(InventoryError, match=r"nodes\[0\]\.ssh\.port: Input should be less than or equal to 65535"):
        load_inventory(path)


def test_cpus_pin_a_nodes_ncas_and_count_as_its_cores(tmp_path):
    """`cpus` (deploy/affinity.py): the node's cores default to their number, GET /v1/nodes shows
    them, and a process the node's deployer starts runs on those CPUs only."""
    allowed = sorted(os.sched_getaffinity(0))
    first, last = allowed[0], allowed[-1]
    inv = load_inventory(write(tmp_path, f"nodes:\n  - {{name: a, address: 127.0.0.2, cpus: '{first}'}}\n"
                                         f"  - {{name: b, address: 127.0.0.3, cores: 4, cpus: '{last}'}}\n"))
    fleet = FleetDeployer(inv)
    try:
        a, b = fleet.hosts()
        assert (a.cores, a.cpus, b.cores, b.cpus) == (1, (first,), 4, (last,))
        assert fleet.node_info()["a"]["cpus"] == str(first)
        for host, cpu in ((a, first), (b, last)):
            proc = fleet.start(host, ["sleep", "30"], tmp_path, f"sleeper-{host.name}")
            try:
                assert os.sched_getaffinity(proc.pid) == {cpu}
            finally:
                fleet.stop(proc, grace=0.5)
    finally:
        fleet.shutdown()


@pytest.mark.parametrize("text, cpus", [("0", (0,)), ("0-3,6", (0, 1, 2, 3, 6)), (" 2 , 0-1 ", (0, 1, 2)),
                                        ("5-5", (5,))])
def test_cpu_lists_read_and_write_as_linux_writes_them(text, cpus):
    assert parse_cpulist(text) == cpus
    assert parse_cpulist(format_cpulist(cpus)) == cpus
    assert format_cpulist((0, 1, 2, 3, 6)) == "0-3,6"


# ---------------------------------------------------------------------------- kubernetes sources


def kube_inventory(tmp_path: Path, source: str, nodes: str = "") -> Path:
    (tmp_path / "secret").write_text("s3cret\n")
    return write(tmp_path, nodes + "kubernetes:\n  - " + source.replace("SECRET", str(tmp_path / "secret")) + "\n")


def test_a_kubernetes_source_beside_or_instead_of_nodes(tmp_path):
    inv = load_inventory(kube_inventory(tmp_path, "{namespace: jumpgate, label_selector: app=agent, "
                                                  "secret_file: SECRET}"))
    assert inv.static_nodes == () and inv.nodes is None
    (source,) = inv.sources
    assert (source.namespace, source.label_selector, source.agent_port, source.kubeconfig, source.lease_s) == \
        ("jumpgate", "app=agent", 7070, None, 10.0)
    both = load_inventory(kube_inventory(tmp_path, "{namespace: a, label_selector: x=y, secret_file: SECRET, "
                                                   "agent_port: 7100}",
                                         nodes="nodes:\n  - {name: a, address: 127.0.0.2, cores: 1}\n"))
    assert [n.name for n in both.static_nodes] == ["a"] and both.sources[0].agent_port == 7100


@pytest.mark.parametrize("source, message", [
    ("{namespace: Jumpgate, label_selector: a=b, secret_file: SECRET}", r"kubernetes\[0\]\.namespace: String should match"),
    ("{namespace: j, label_selector: '', secret_file: SECRET}", r"kubernetes\[0\]\.label_selector: String should have at least"),
    ("{namespace: j, label_selector: a=b}", r"kubernetes\[0\]\.secret_file: Field required"),
    ("{namespace: j, label_selector: a=b, secret_file: /nonexistent/secret}",
     r"kubernetes\[0\]\.secret_file: '/nonexistent/secret' is not a readable file"),
    ("{namespace: j, label_selector: a=b, secret_file: SECRET, kubeconfig: /nonexistent/kc}",
     r"kubernetes\[0\]\.kubeconfig: '/nonexistent/kc' is not a readable file"),
    ("{namespace: j, label_selector: a=b, secret_file: SECRET, agent_port: 70000}",
     r"kubernetes\[0\]\.agent_port: Input should be less than or equal to 65535"),
    ("{namespace: j, label_selector: a=b, secret_file: SECRET, watch: true}", r"kubernetes\[0\]\.watch: Extra inputs"),
])
def test_each_problem_of_a_kubernetes_source_names_its_field(tmp_path, source, message):
    path = kube_inventory(tmp_path, source)
    with pytest.raises(InventoryError, match=message) as e:
        load_inventory(path)
    assert str(path) in str(e.value)


def test_an_inventory_needs_nodes_or_a_source(tmp_path):
    with pytest.raises(InventoryError, match="an inventory needs `nodes`, `kubernetes`"):
        load_inventory(write(tmp_path, "{}\n"))
    with pytest.raises(InventoryError, match=r"kubernetes: Tuple should have at least 1 item"):
        load_inventory(write(tmp_path, "kubernetes: []\n"))
