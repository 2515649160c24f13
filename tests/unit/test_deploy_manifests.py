"""deploy/kubernetes/ as files (tests/e2e/test_kube_deploy.py applies them to a real API server):
the kustomization lists every manifest, renders with the subset jumpgate/deploy/kustomize.py
does, and the objects say what deploy/README.md promises: the agent's real command line, probes on
real endpoints, resources, least-privilege RBAC, a NetworkPolicy that opens the agents' control
port to the server's pods only, and an inventory the server's inventory parser accepts."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jumpgate.agent.node import main as agent_main
from jumpgate.deploy.inventory import Inventory
from jumpgate.deploy.kustomize import KustomizeError, load_kustomization, render

BASE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def objects() -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in render(BASE)}


def test_the_kustomization_lists_every_manifest():
    listed = load_kustomization(BASE)["resources"]
    assert sorted(listed) == sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert (BASE.parent / "README.md").is_file() and (BASE.parent / "Containerfile").is_file()
    assert (BASE.parent / "grafana" / "jumpgate.json").is_file()


def test_every_object_is_in_the_namespace():
    for doc in render(BASE):
        assert doc["kind"] == "Namespace" or doc["metadata"]["namespace"] == "jumpgate", doc["metadata"]
    assert {d["metadata"].get("namespace") for d in render(BASE, "other") if d["kind"] != "Namespace"} == {"other"}


def test_the_renderer_refuses_what_it_does_not_do(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: [a.yaml]\nimages: [{name: x, newTag: y}]\n")
    with pytest.raises(KustomizeError, match=r"\['images'\] not rendered"):
        render(tmp_path)


def container(doc: dict) -> dict:
    (c,) = doc["spec"]["template"]["spec"]["containers"]
    return c


def test_the_agent_runs_the_real_command_and_never_exits_when_idle(capsys):
    agent = objects()[("DaemonSet", "jumpgate-agent")]
    c = container(agent)
    assert c["command"][:3] == ["jumpgate", "agent", "serve"] and "--idle-exit" not in c["command"]
    with pytest.raises(SystemExit):
        agent_main(["serve", "--help"])
    known = capsys.readouterr().out
    assert all(a in known for a in c["command"] if a.startswith("--")), "an option `agent serve` lacks"
    listen = c["command"][c["command"].index("--listen") + 1]
    assert listen == "0.0.0.0:7070" and c["ports"] == [{"name": "agent", "containerPort": 7070}]
    assert c["readinessProbe"]["tcpSocket"] == {"port": "agent"} and c["livenessProbe"]["tcpSocket"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    spec = agent["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"jumpgate.io/agent": "true"} and not spec.get("hostNetwork")
    assert spec["automountServiceAccountToken"] is False
    assert agent["spec"]["template"]["metadata"]["annotations"]["jumpgate.io/data-root"] == "/data"


def test_the_server_probes_its_health_and_reads_a_kubernetes_inventory():
    docs = objects()
    c = container(docs[("Deployment", "jumpgate-server")])
    assert c["readinessProbe"]["httpGet"]["path"] == "/v1/health" == c["livenessProbe"]["httpGet"]["path"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    args = c["args"]
    assert args[0] == "serve" and args[args.index("--nodes") + 1] == "/etc/jumpgate/settings/inventory.yaml"
    inventory = yaml.safe_load(docs[("ConfigMap", "jumpgate-settings")]["data"]["inventory.yaml"])
    (source,) = inventory["kubernetes"]
    agent_labels = docs[("DaemonSet", "jumpgate-agent")]["spec"]["template"]["metadata"]["labels"]
    key, _, value = source["label_selector"].partition("=")
    assert agent_labels[key] == value and source["namespace"] == "jumpgate" and source["agent_port"] == 7070
    # the inventory's fields are the parser's (the secret file is the pod's, checked there)
    assert set(source) <= set(Inventory.model_fields["kubernetes"].annotation.__args__[0].__args__[0].model_fields)
    assert docs[("Service", "jumpgate-server")]["spec"]["ports"][0]["port"] == 8470


def test_the_server_may_only_read_pods():
    docs = objects()
    (rule,) = docs[("Role", "jumpgate-server")]["rules"]
    assert rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    binding = docs[("RoleBinding", "jumpgate-server")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "jumpgate-server"}]
    assert docs[("Deployment", "jumpgate-server")]["spec"]["template"]["spec"]["serviceAccountName"] == \
        "jumpgate-server"
    assert not any(d["kind"] in ("ClusterRole", "ClusterRoleBinding") for d in render(BASE))


def test_only_the_servers_pods_reach_the_agents_control_port():
    policy = objects()[("NetworkPolicy", "jumpgate-agent")]["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "jumpgate-agent"}}
    to_control = [rule for rule in policy["ingress"]
                  if any(p.get("port", 0) <= 7070 <= p.get("endPort", p.get("port", 0))
                         and p.get("protocol", "TCP") == "TCP" for p in rule["ports"])]
    assert len(to_control) == 1
    assert to_control[0]["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "jumpgate-server"}}}]
