"""The plugin registry: every NCA implementation, built-in or third-party, is found through the
entry-point group `jumpgate.ncas` (design: one entry point, no private shortcuts).

Loading is lazy and fails loudly with a useful message: a plugin that does not import, is not an
`NcaImplementation`, or whose name disagrees with its entry point is reported, not skipped
silently (Ibis' backend registry does the same).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

from .interface import NcaImplementation

GROUP = "jumpgate.ncas"
log = logging.getLogger(__name__)


class PluginError(Exception):
    pass


@dataclass
class Registry:
    implementations: dict[str, NcaImplementation] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # entry point -> why it was not loaded

    def add(self, impl: NcaImplementation) -> None:
        if impl.name in self.implementations:
            raise PluginError(f"two NCA implementations are named {impl.name!r}: "
                              f"{type(self.implementations[impl.name]).__module__} and {type(impl).__module__}")
        self.implementations[impl.name] = impl

    def get(self, name: str) -> NcaImplementation:
        try:
            return self.implementations[name]
        except KeyError:
            known = ", ".join(sorted(self.implementations)) or "none"
            raise PluginError(f"no NCA implementation named {name!r} (registered: {known}); "
                              f"install the package that provides it") from None

    def all(self) -> list[NcaImplementation]:
        return [self.implementations[k] for k in sorted(self.implementations)]

    def describe(self) -> list[dict]:
        out = [impl.capabilities() for impl in self.all()]
        out += [{"name": name, "error": why} for name, why in sorted(self.problems.items())]
        return out


def _load(ep: EntryPoint) -> NcaImplementation:
    obj = ep.load()
    if not (isinstance(obj, type) and issubclass(obj, NcaImplementation)):
        raise PluginError(f"entry point {ep.name} = {ep.value} is not an NcaImplementation subclass")
    impl = obj()
    if impl.name != ep.name:
        raise PluginError(f"entry point {ep.name!r} loads an implementation named {impl.name!r}")
    return impl


def load_registry(only: list[str] | None = None, strict: bool = False) -> Registry:
    """Load every registered implementation (or just `only`). A plugin that fails to load is kept
    in `problems` (and shown by GET /v1/ncas) unless `strict`, which raises."""
    reg = Registry()
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        if only is not None and ep.name not in only:
            continue
        try:
            reg.add(_load(ep))
        except Exception as e:  # a broken third-party plugin must not take the service down
            if strict:
                raise PluginError(f"NCA plugin {ep.name!r} failed to load: {e}") from e
            log.warning("NCA plugin %s failed to load: %s", ep.name, e)
            reg.problems[ep.name] = f"{type(e).__name__}: {e}"
    return reg
