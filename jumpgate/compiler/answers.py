"""The operator interface as the mapper calls it: every answer is cached (it depends only on the
arguments, and the search asks the same questions on many branches) and exception-safe (a plugin
bug must not take the compiler down: it becomes a "no" with the exception as the reason)."""
from __future__ import annotations

from collections.abc import Callable

from ..dataflow.plan import LogicalPlan
from ..nca.interface import NcaImplementation, ResourceRequest, StreamSpec, Verdict


class PluginAnswers:
    def __init__(self, plan: LogicalPlan,
                 capacity_check: Callable[[ResourceRequest], Verdict] | None) -> None:
        self.plan = plan
        self.capacity_check = capacity_check
        self._cache: dict[tuple, object] = {}

    def _ask(self, key: tuple, call: Callable[[], object]) -> Verdict:
        hit = self._cache.get(key)
        if hit is None:
            try:
                hit = call()
            except Exception as e:  # a plugin bug must not take the compiler down
                hit = Verdict.no(f"raised {type(e).__name__}: {e}")
            if not isinstance(hit, Verdict):
                hit = Verdict.no(f"answered {hit!r}, not a Verdict")
            self._cache[key] = hit
        return hit  # type: ignore[return-value]

    def match_operations(self, impl: NcaImplementation, anchor: str) -> Verdict:
        return self._ask(("ops", impl.name, anchor), lambda: impl.match_operations(self.plan, anchor))

    def match_input(self, impl: NcaImplementation, ops: tuple[str, ...],
                    specs: tuple[StreamSpec, ...]) -> Verdict:
        return self._ask(("in", impl.name, ops, specs), lambda: impl.match_input(self.plan, ops, specs))

    def match_output(self, impl: NcaImplementation, ops: tuple[str, ...],
                     specs: tuple[StreamSpec, ...], wanted: tuple[str | None, ...]) -> Verdict:
        return self._ask(("out", impl.name, ops, specs, wanted),
                         lambda: impl.match_output(self.plan, ops, specs, wanted))

    def resources(self, impl: NcaImplementation, ops: tuple[str, ...]) -> ResourceRequest:
        key = ("res", impl.name, ops)
        if key not in self._cache:
            self._cache[key] = impl.resources(self.plan, ops)
        return self._cache[key]  # type: ignore[return-value]

    def capacity(self, res: ResourceRequest) -> Verdict:
        if self.capacity_check is None:
            return Verdict.yes()
        return self._ask(("cap", res.cores, res.memory_mb, res.deployment,
                          tuple(sorted(res.pools.items()))), lambda: self.capacity_check(res))
