"""`explain()`: compile a request without running it and show the plan the server chose.

The request is compiled (POST /v1/jobs) and the compiled job deleted at once (DELETE), so it holds
no cores or ports. `Plan` keeps the server's answer: `str()` is a readable plan (stages, each NCA
with its implementation, operations and host, the network edges, and per operation the chosen
implementation with the reason and every other implementation's verdict on one line each);
`to_json()` is the answer as JSON text and `answer` the dict.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .builder import Dataflow, Send, build_request
from .errors import BuilderError, ClientError

if TYPE_CHECKING:  # pragma: no cover
    from .session import Jumpgate

PLACEHOLDER_HOST = "127.0.0.1"
PLACEHOLDER_PORT = 9  # a send needs a port to compile; nothing connects to it, since nothing runs
REASON_WIDTH = 160  # a verdict's reason is folded onto one line and cut to this many characters


def _one_line(text: Any, width: int = REASON_WIDTH) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[:width - 1] + "…"


class Plan:
    """The compile answer of a request that was not run."""

    def __init__(self, answer: dict, request: dict) -> None:
        self.answer = answer
        self.request = request

    @property
    def job_id(self) -> str | None:
        return self.answer.get("job_id")

    @property
    def ncas(self) -> list:
        return self.answer.get("ncas") or []

    @property
    def stages(self) -> list:
        return self.answer.get("stages") or []

    @property
    def edges(self) -> list:
        return self.answer.get("edges") or []

    @property
    def decisions(self) -> dict:
        return self.answer.get("decisions") or {}

    def to_json(self, indent: int | None = 2) -> str:
        """The server's compile answer, as JSON text."""
        return json.dumps(self.answer, indent=indent)

    def __repr__(self) -> str:
        return f"<Plan {len(self.ncas)} NCA(s), {len(self.stages)} stage(s), {len(self.edges)} edge(s)>"

    def __str__(self) -> str:
        return "\n".join(self._lines())

    def _lines(self) -> list[str]:
        out: list[str] = []
        search = self.answer.get("search") or {}
        head = f"Plan of job {self.job_id} (compiled, not run, deleted)"
        if search.get("cost_text"):
            head += f": {search['cost_text']}"
        out.append(head)
        skipped = search.get("nodes_skipped") or {}
        for node, why in skipped.items():
            out.append(f"  node {node} skipped: {_one_line(why)}")

        out.append("Stages:")
        for i, ids in enumerate(self.stages):
            out.append(f"  {i}: {', '.join(map(str, ids))}")
        if not self.stages:
            out.append("  (none)")

        out.append("NCAs:")
        width = max((len(str(n.get("id"))) for n in self.ncas), default=0)
        for n in self.ncas:
            host = n.get("host")
            where = f"on {host}" if host else "in the network"
            stages = ",".join(map(str, n.get("stages") or []))
            conv = " (converter)" if n.get("converter") else ""
            out.append(f"  {str(n.get('id')):<{width}}  {n.get('implementation')}{conv} {where}, "
                       f"stage {stages}: {', '.join(n.get('operations') or [])}")

        out.append("Edges:")
        for e in self.edges:
            dest = f"{e.get('to')} (client)" if e.get("client") else f"{e.get('to')}:{e.get('to_port')}"
            streams = e.get("streams")
            n = f", {streams} stream{'s' if streams != 1 else ''}" if streams is not None else ""
            keyed = ", keyed" if e.get("keyed") else ""
            out.append(f"  {e.get('from')}:{e.get('from_port')} -> {dest}: {e.get('edge')} as "
                       f"{e.get('format')} over {e.get('transport')}{n}{keyed}")
        if not self.edges:
            out.append("  (none)")

        filters = self.answer.get("runtime_filters") or []
        if filters:  # docs/runtime-filters.md
            out.append("Runtime filters:")
        for f in filters:
            if not isinstance(f, dict):
                continue
            if f.get("planned"):
                keys = ", ".join(map(str, f.get("keys") or []))
                out.append(f"  {f.get('id')}: join {f.get('join')} -> scan of {f.get('read')} on {keys} "
                           f"({', '.join(map(str, f.get('from') or []))} -> {', '.join(map(str, f.get('to') or []))})")
            else:
                out.append(f"  join {f.get('join')}: none, {_one_line(f.get('reason') or '')}")

        out.append("Operations:")
        for op, d in self.decisions.items():
            if not isinstance(d, dict):
                continue
            impl = d.get("implementation")
            if impl is None:
                out.append(f"  {op}: {_one_line(d.get('note') or 'no NCA')}")
                continue
            verdicts = d.get("verdicts") or []
            chosen = next((v for v in verdicts if v.get("chosen")), None)
            why = f": {_one_line(chosen.get('reason'))}" if chosen and chosen.get("reason") else ""
            out.append(f"  {op} -> {impl} ({d.get('nca')}){why}")
            for v in verdicts:
                if v.get("chosen"):
                    continue
                label = "not chosen" if v.get("ok") else "rejected"
                out.append(f"      {label} {v.get('implementation')}: {_one_line(v.get('reason'))}")
        return out


def _as_request(request: Any, name: str | None) -> dict:
    if isinstance(request, Dataflow):
        return build_request([request.send(PLACEHOLDER_HOST, PLACEHOLDER_PORT, name="out")], name)
    if isinstance(request, Send):
        return build_request([request], name)
    if isinstance(request, Sequence) and not isinstance(request, (str, bytes)) and request \
            and all(isinstance(s, Send) for s in request):
        return build_request(request, name)
    if isinstance(request, dict) and isinstance(request.get("operations"), list):
        request = copy.deepcopy(request)
        for op in request["operations"]:  # as `run` would: port 0 means "any", here a placeholder
            if isinstance(op, dict) and op.get("kind") == "send" and not op.get("port"):
                op["port"] = PLACEHOLDER_PORT
        return request
    raise BuilderError(f"explain takes a dataflow node, send nodes or a request dict, got {type(request).__name__}")


def explain_request(client: Jumpgate, request: Any, *, name: str | None = None) -> Plan:
    """Compile `request` on `client`'s server, delete the compiled job, return its `Plan`."""
    req = _as_request(request, name)
    answer = client._call("POST", "/v1/jobs", req, retry=True)
    job_id = answer.get("job_id")
    if job_id is not None:
        try:
            client._call("DELETE", f"/v1/jobs/{job_id}")
        except ClientError as e:  # the plan is still right; say the job may linger
            answer = {**answer, "delete_error": str(e)}
    return Plan(answer, req)
