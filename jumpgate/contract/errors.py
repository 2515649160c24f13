"""Errors are values with context (design principle): a request path, an NCA, a stage, a file
and record. Every layer raises one of these; the REST layer turns them into contract §4 bodies, and
each class's `status` is the HTTP status the contract gives that error."""
from __future__ import annotations

from dataclasses import dataclass, field


class JumpgateError(Exception):
    """Base class; `status` is the HTTP status the REST layer answers with."""

    status = 500

    def __init__(self, message: str, **context: object) -> None:
        super().__init__(message)
        self.message = message
        self.context = {k: v for k, v in context.items() if v is not None}

    def to_json(self) -> dict:
        return {"message": self.message, **self.context}


class RequestError(JumpgateError):
    """A malformed or unsupported request. `path` is the JSON path, e.g. `operations[2].condition`."""

    status = 400

    def __init__(self, message: str, path: str | None = None, text: str | None = None) -> None:
        super().__init__(message, path=path, text=text)
        self.path = path


class PayloadTooLarge(RequestError):
    """A request (or a part of it) larger than the server's limit."""

    status = 413


class MappingError(RequestError):
    """The request is valid but no NCA (or combination) can run some operation."""

    status = 422


class NoResources(JumpgateError):
    status = 503


class Unauthorized(JumpgateError):
    """No token, or one the server does not know (or that was revoked)."""

    status = 401


class Forbidden(RequestError):
    """The caller may not do this: a send or read the tenant's policy does not allow (`path` names
    the operation, the message the rule), or an action reserved to admins."""

    status = 403


class StreamError(JumpgateError):
    """An NTF stream broke the framing of contract §3 (or of the UDP transport) or the layout of §2."""


class JobStateError(JumpgateError):
    status = 409


class UnknownJob(JumpgateError):
    status = 404


@dataclass
class NcaFailure:
    """What an NCA reported when it failed: carried into the job's error."""

    nca: str
    stage: int | None
    message: str
    file: str | None = None
    record: int | None = None
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"message": self.message, "nca": self.nca, "stage": self.stage}
        if self.file is not None:
            out["file"] = self.file
        if self.record is not None:
            out["record"] = self.record
        out.update(self.extra)
        return out
