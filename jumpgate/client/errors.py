"""What the client raises. All are `JumpgateError`s, so they carry a message and context.
`StreamError` (a stream broke the framing or the layout) is the contract's own, raised by its
framing code as well; the client exports it beside its own errors."""
from __future__ import annotations

from ..contract.errors import JumpgateError, StreamError

__all__ = ["BuilderError", "ClientError", "JobFailed", "JobTimeout", "MissingDependency", "RequestRejected",
           "StreamError"]


class ClientError(JumpgateError):
    """Base class of everything `jumpgate.client` raises on purpose."""


class BuilderError(ClientError, ValueError):
    """A dataflow built with the fluent API is malformed in a way the client can see locally."""


class RequestRejected(ClientError):
    """The server answered a call with an error (contract §4): `status` and the server's `error`.
    For a 503 that the client retried, `retries` and `retried_for` (seconds) say how long."""

    def __init__(self, status: int, error: dict, call: str, *, retries: int = 0, retried_for: float = 0.0) -> None:
        msg = error.get("message") if isinstance(error, dict) else None
        where = f" at {error['path']}" if isinstance(error, dict) and error.get("path") else ""
        tried = ""
        if retries:
            tried = (f" (still {status} after retrying {retries} time{'s' if retries != 1 else ''} "
                     f"for {retried_for:.1f} s; Jumpgate(retry_for=...) sets how long)")
        super().__init__(f"{call} answered {status}: {msg or error}{where}{tried}", call=call)
        self.status = status
        self.error = error
        self.retries = retries
        self.retried_for = retried_for


class MissingDependency(ClientError, ImportError):
    """An optional feature needs a package that is not installed; the message names the extra."""


class JobFailed(ClientError):
    """The job ended `failed` (or `cancelled`); `error` is the server's error JSON, as sent."""

    def __init__(self, job_id: str, state: str, error: dict | None) -> None:
        error = error if isinstance(error, dict) else ({"message": str(error)} if error else {})
        self.job_id = job_id
        self.state = state
        self.error = error
        self.nca = error.get("nca")
        self.stage = error.get("stage")
        self.file = error.get("file")
        self.record = error.get("record")
        parts = [error.get("message") or f"job {state}"]
        if self.nca is not None:
            parts.append(f"nca={self.nca}")
        if self.stage is not None:
            parts.append(f"stage={self.stage}")
        if self.file is not None:
            parts.append(f"file={self.file}" + (f":{self.record}" if self.record is not None else ""))
        super().__init__(f"job {job_id} {state}: " + ", ".join(parts), job_id=job_id, state=state)


class JobTimeout(ClientError):
    """The job did not finish in time; the client has asked the server to cancel it."""
