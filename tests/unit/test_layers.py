"""The layers of docs/design.md ("Layers, and what each may import"), checked on the source: every
`import` and `from ... import` of every module under jumpgate/, relative ones resolved, at any
depth (inside functions too). A layer imports only the layers below it; a plugin imports no other
plugin's modules. A failure names the module, the line and the import that breaks the rule."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "jumpgate"

# What each layer may import of Jumpgate, besides itself. Layers not listed (the command line, the
# conformance suite, the data generator, the support matrix's generator, examples) are tools on top of
# everything.
ALLOWED = {
    "contract": set(),
    "dataflow": {"contract"},
    "nca": {"contract", "dataflow"},
    "agent": {"contract", "dataflow", "nca"},  # agent/node.py: the standard library only (shipped alone)
    "deploy": {"contract", "dataflow", "nca", "agent"},
    "compiler": {"contract", "dataflow", "nca"},
    "tenancy": {"contract"},
    "runtime": {"contract", "dataflow", "nca", "deploy", "compiler", "tenancy"},
    "api": {"contract", "dataflow", "nca", "deploy", "compiler", "runtime", "web", "tenancy"},
    "web": {"contract", "dataflow", "nca", "deploy", "compiler", "runtime", "tenancy"},
    "client": {"contract", "dataflow"},
    "ncas": {"contract", "dataflow", "nca", "deploy"},  # and the plugin's own package only
}


def module_name(path: Path, package: Path = PACKAGE) -> tuple[str, bool]:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, imported module) for each Jumpgate import of the file; `from X import y` counts as
    X.y, which is a module or a name of X (either way it belongs to X's layer)."""
    name, is_package = module_name(path, package)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return [(line, t) for line, t in out if t == "jumpgate" or t.startswith("jumpgate.")]


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def plugin(module: str) -> str | None:
    """The plugin package of a module under jumpgate.ncas (e.g. jumpgate.ncas.software)."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) > 2 and parts[1] == "ncas" else None


def violations(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        name, _ = module_name(path, package)
        mine = layer(name)
        if mine not in ALLOWED:
            continue
        for line, target in imports_of(path, package):
            theirs = layer(target)
            where = f"{path.relative_to(package.parent)}:{line}: imports {target}"
            if theirs != mine and theirs not in ALLOWED[mine]:
                found.append(f"{where} ({mine} may import only {sorted(ALLOWED[mine]) or 'nothing of Jumpgate'})")
            elif mine == "ncas" and theirs == "ncas" and plugin(target) not in (plugin(name), None):
                found.append(f"{where} (a plugin imports no other plugin's modules)")
    return found


def test_every_import_respects_the_layers():
    found = violations()
    assert not found, "imports that break docs/design.md's layers:\n" + "\n".join(found)


@pytest.mark.parametrize("source, rule", [
    ("from ..compiler.mapping import map_plan\n", "nca may import only"),
    ("import jumpgate.runtime.service\n", "nca may import only"),
])
def test_a_forbidden_import_is_named(tmp_path, source, rule):
    """The check itself: a module of the nca layer importing upwards is reported with its line."""
    fake = tmp_path / "jumpgate"
    (fake / "nca").mkdir(parents=True)
    (fake / "nca" / "bad.py").write_text("from __future__ import annotations\n" + source)
    found = violations(fake)
    assert len(found) == 1 and "jumpgate/nca/bad.py:2" in found[0] and rule in found[0], found


def test_a_plugin_importing_another_plugin_is_named(tmp_path):
    fake = tmp_path / "jumpgate"
    for p in ("one", "two"):
        (fake / "ncas" / p).mkdir(parents=True)
    (fake / "ncas" / "one" / "plugin.py").write_text("from ..two.helpers import thing\nfrom .own import x\n")
    found = violations(fake)
    assert found == ["jumpgate/ncas/one/plugin.py:1: imports jumpgate.ncas.two.helpers.thing "
                     "(a plugin imports no other plugin's modules)"], found
