"""The subset of kustomize that deploy/kubernetes/ uses, for the tests that apply it to a real API
server (kustomize is not installed there): a kustomization's `resources` (files, in order) and
`namespace` (set on every namespaced object). Anything else in the kustomization is refused, so a
base that grows a feature grows this renderer, or its test fails, rather than being applied
half-rendered."""
from __future__ import annotations

from pathlib import Path

import yaml

SUPPORTED = {"apiVersion", "kind", "namespace", "resources"}
# Kinds without a namespace among those the base uses (and a few it may).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PriorityClass", "StorageClass", "PersistentVolume"}


class KustomizeError(ValueError):
    """The kustomization uses what this renderer does not do, or names a missing file."""


def load_kustomization(directory: Path) -> dict:
    path = Path(directory) / "kustomization.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    unknown = set(data) - SUPPORTED
    if unknown:
        raise KustomizeError(f"{path}: {sorted(unknown)} not rendered by jumpgate/deploy/kustomize.py")
    return data


def render(directory: Path, namespace: str | None = None) -> list[dict]:
    """Every object of the base, in the order of its resources; `namespace` overrides the
    kustomization's (and renames the Namespace object it makes)."""
    directory = Path(directory)
    data = load_kustomization(directory)
    target = namespace or data.get("namespace")
    out: list[dict] = []
    for name in data.get("resources") or []:
        path = directory / name
        if not path.is_file():
            raise KustomizeError(f"{directory / 'kustomization.yaml'}: resource {name} is not a file")
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if target is not None:
                if doc["kind"] == "Namespace":
                    doc["metadata"]["name"] = target
                elif doc["kind"] not in CLUSTER_SCOPED:
                    doc["metadata"]["namespace"] = target
            out.append(doc)
    return out
