"""The REST API's answers (contract §4) as pydantic models: what `/openapi.json` documents for
every endpoint, its error body included.

They describe; they do not shape. The handlers answer with the dicts the runtime builds, as
before (a status poll skips FastAPI's encoder on purpose), so the models are attached to the routes
for the documentation only, and tests/unit/test_openapi.py checks real answers against them.
Every model allows fields it does not name: the contract's rule is that additions are fine, and a
v1 client ignores what it does not know, so a new field must not make the description wrong.
A class docstring or a `description` is what a client reads in the documentation.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..runtime.jobs import JobState


class Answer(BaseModel):
    # Additions are fine (contract): a field these models do not name is allowed.
    model_config = ConfigDict(extra="allow")


# --- errors --------------------------------------------------------------------------------------

class ErrorDetail(Answer):
    """What went wrong. Besides `message`, only what applies: `path` and `text` for a request's
    mistake; `limit`, `maximum` and `found` for a size limit (docs/limits.md); `operation` and
    `reasons` for a mapping error; a job's error also has `nca`, `stage`, `step`, `file`, `record`."""

    message: str
    path: str | None = Field(None, description="The JSON path of the mistake, e.g. operations[2].condition.")
    text: str | None = Field(None, description="The offending text (clipped).")
    limit: str | None = Field(None, description="The name of the limit the request is beyond.")
    maximum: int | None = None
    found: int | None = None
    operation: str | None = Field(None, description="The operation no NCA could take (422).")
    reasons: dict[str, Any] | None = Field(None, description="Per NCA implementation, why it said no (422).")


class ErrorAnswer(Answer):
    """Every error answer: `{"error": {"message", ...}}`."""

    error: ErrorDetail


# --- jobs ----------------------------------------------------------------------------------------

class NtfField(Answer):
    name: str
    type: str
    offset: int
    size: int
    null_bit: int


class NtfLayout(Answer):
    """An NTF layout (contract §2)."""

    version: int
    null_bytes: int
    fixed_size: int
    variable: bool
    fields: list[NtfField]


class ClientOutput(Answer):
    """What a send's receiver gets: the layout of its tuples, and how many streams to expect."""

    layout: NtfLayout
    expected_streams: int


class NcaEntry(Answer):
    """One NCA instance of the pipeline."""

    id: str
    implementation: str
    operations: list[str]
    stages: list[int]
    converter: bool = False
    host: str | None = Field(None, description="The node placement put it on; null for an NCA the network "
                                               "hosts (the switch).")
    placement: str | None = Field(None, description="Why this node, where placement had a choice.")
    files: list[str] | None = Field(None, description="The files it reads, when they are its node's part of "
                                                      "a read.")


class Verdict(Answer):
    implementation: str
    ok: bool
    step: str
    reason: str
    chosen: bool = False


class OperationDecision(Answer):
    """Which implementation took an operation, and what every implementation answered."""

    implementation: str | None = Field(None, description="null for a send (the client's end).")
    nca: str | None = None
    anchor: str | None = None
    verdicts: list[Verdict] = []
    path: str | None = None
    note: str | None = None


class CompileAnswer(Answer):
    """The compiled job (contract §4): its NCAs, stages and, per send, what its receiver gets."""

    job_id: str
    state: JobState
    ncas: list[NcaEntry]
    stages: list[list[str]] = Field(description="The NCA ids running in each stage.")
    outputs: dict[str, ClientOutput] = Field(description="Per send operation.")
    edges: list[dict[str, Any]] = Field([], description="Every network edge: producer, port, consumer, "
                                                        "format, transport, stream ids.")
    decisions: dict[str, OperationDecision] = {}
    search: dict[str, Any] = Field({}, description="The mapping's cost and statistics.")


class JobStateAnswer(Answer):
    """A job and its state."""

    job_id: str
    state: JobState


class Timeline(Answer):
    """Where the time went (docs/contract.md, Timeline): milliseconds since submission."""

    phases: dict[str, dict[str, Any]] = {}
    ncas: dict[str, dict[str, Any]] = {}


class QueuePosition(Answer):
    """A running job still waiting for cores."""

    position: int
    waiting: int
    waited_s: float
    max_wait_s: float | None = None


class JobStatus(Answer):
    """A job's status (contract §4), with its pipeline's NCAs and decisions."""

    job_id: str
    name: str = ""
    state: JobState
    tenant: str | None = None
    error: dict[str, Any] | None = Field(None, description="What failed and why: `message`, and where it "
                                                           "applies `nca`, `stage`, `step`, `file`, `record`.")
    timeline: Timeline
    queue: QueuePosition | None = None
    ncas: list[NcaEntry] = []
    decisions: dict[str, OperationDecision] | None = None


class JobLine(Answer):
    """A job in the listing (times in seconds since the epoch)."""

    job_id: str
    name: str = ""
    state: JobState
    tenant: str | None = None
    created: float
    finished: float | None = None


# --- the server ----------------------------------------------------------------------------------

class NcaImplementation(Answer):
    """A registered NCA implementation; a plugin that failed to load has only `name` and `error`."""

    name: str
    description: str | None = None
    operations: list[str] | None = Field(None, description="The operation kinds it can take.")
    converter: bool | None = None
    keyed_streams: bool | None = None
    error: str | None = Field(None, description="Why the plugin did not load.")


class Node(Answer):
    """A node NCAs run on (docs/deploy.md)."""

    name: str
    address: str
    cores: int
    kinds: list[str]
    state: str = Field(description="up or down.")
    reason: str | None = Field(None, description="Why it is down.")
    cores_in_use: int
    ncas_running: int
    data_root: str | None = Field(None, description="Where the node sees the files of reads (the Spark plugin "
                                                    "takes it when not configured).")
    reach: str | None = Field(None, description="How the server reaches it: local, ssh or kubernetes.")
    pod: str | None = Field(None, description="A kubernetes node's pod (its name is the node's).")
    namespace: str | None = Field(None, description="A kubernetes node's namespace.")
    source: dict[str, Any] | None = Field(None, description="A kubernetes node's source of nodes: its watch's "
                                                             "state (watching, unreachable, unauthorized, "
                                                             "forbidden, error) and reason.")


class Health(Answer):
    """Liveness and resources."""

    status: str
    cores: dict[str, Any] = Field(description="Per node: capacity and the cores each job holds.")
    nodes: list[str]
    ncas_running: int
    ncas_warm: list[int] = Field(description="Process ids of the warm spares.")
    node_sources: list[dict[str, Any]] | None = Field(
        None, description="The inventory's Kubernetes sources of nodes: namespace, label selector, API server, "
                          "state, reason and pods (docs/deploy.md, \"Kubernetes\").")


# --- what each route documents -------------------------------------------------------------------

# Why each status, in the words the documentation shows.
_WHY = {
    400: "A malformed request: not JSON, or a mistake at `path` (contract §1).",
    401: "No token, or one the server does not know (docs/security.md).",
    403: "The tenant's policy refuses a send or a read, or another site's page sent it (docs/security.md).",
    404: "No such job, or one of another tenant.",
    409: "The job is not in a state that allows it.",
    413: "The body is larger than 16 MiB, or the request beyond a limit (docs/limits.md).",
    415: "A browser's request without a JSON body (docs/security.md).",
    422: "No NCA, or combination of NCAs, can run an operation: `operation` and `reasons` say why.",
    500: "An internal error; the server keeps running.",
}


def errors(*statuses: int, **why: str) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route: each error status with the error body (`why`, by `s422=...`,
    words a status differently for this route)."""
    return {s: {"model": ErrorAnswer, "description": why.get(f"s{s}", _WHY[s])} for s in statuses}


__all__ = ["CompileAnswer", "ErrorAnswer", "Health", "JobLine", "JobStateAnswer", "JobStatus", "NcaImplementation",
           "Node", "errors"]
