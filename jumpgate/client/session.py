"""Talking to a Jumpgate server (contract §4) and running a job end to end.

`Jumpgate.collect_many` is the whole client flow in one place:

1. bind one `Receiver` per destination (port 0 on the given host) so the request carries real ports;
2. `POST /v1/jobs`; read `outputs[send].layout` and `expected_streams` from the answer;
3. start the receivers accepting, then `POST /v1/jobs/{id}/execute`;
4. poll `GET /v1/jobs/{id}` until a terminal state while the receivers read (with `progress`,
   each answer's live counters feed a progress display or callback: client/progress.py);
5. decode each destination's streams to one Arrow table.

A failed job raises `JobFailed` with the server's error JSON. A timeout, a broken stream, Ctrl-C
or any other error before the job ends sends `DELETE /v1/jobs/{id}` so nothing is left running.
"""
from __future__ import annotations

import copy
import email.utils
import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pyarrow as pa

from ..contract.ntf import NtfLayout
from .builder import NAME_RE, Dataflow, Read, Send, build_request, read
from .errors import BuilderError, ClientError, JobFailed, JobTimeout, RequestRejected, StreamError
from .explain import Plan, explain_request
from .frames import to_pandas
from .ntf import as_layout
from .progress import ProgressCallback, Reporter
from .receiver import Receiver, wait_all
from .udp import UdpReceiver

DEFAULT_URL = "http://127.0.0.1:8470"
TERMINAL = ("succeeded", "failed", "cancelled")
STREAM_GRACE_S = 30.0  # after `succeeded`, how long the last bytes may take to arrive
LONG_POLL_S = 0.25  # each status call waits this long server-side for the job to end
STREAM_FAILURE_GRACE_S = 5.0  # after a broken stream, how long to wait for the server to say why
RECEIVERS = {"tcp": Receiver, "udp": UdpReceiver}  # a send's transport -> what listens for it
UDP_VERSION = 2  # the UDP transport version UdpReceiver takes (docs/udp-transport.md)
DEFAULT_RETRY_FOR_S = 60.0  # how long submit/execute keep retrying a 503 (Jumpgate(retry_for=...))
DEFAULT_RETRY_AFTER_S = 1.0  # the wait when a 503 carries no (readable) Retry-After
MAX_RETRY_WAIT_S = 10.0  # the longest single wait, whatever Retry-After says
MIN_RETRY_WAIT_S = 0.1  # the shortest (a Retry-After of 0 must not become a busy loop)
RETRY_JITTER = 0.2  # each wait is Retry-After times 1..1+RETRY_JITTER, so clients do not retry in step


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 §10.2.3);
    DEFAULT_RETRY_AFTER_S when absent or unreadable, capped at MAX_RETRY_WAIT_S."""
    if value is None or not value.strip():
        return DEFAULT_RETRY_AFTER_S
    v = value.strip()
    try:
        secs = float(v)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(v)
        except (TypeError, ValueError, IndexError):
            return DEFAULT_RETRY_AFTER_S
        if when is None:  # pragma: no cover - older Pythons
            return DEFAULT_RETRY_AFTER_S
        secs = when.timestamp() - (time.time() if now is None else now)
    if secs != secs:  # NaN
        return DEFAULT_RETRY_AFTER_S
    return min(max(secs, 0.0), MAX_RETRY_WAIT_S)


@dataclass(frozen=True)
class Output:
    """What the server said one `send` destination will receive."""

    name: str
    layout: NtfLayout
    expected_streams: int
    layout_json: dict


class Job:
    """A compiled job on the server."""

    def __init__(self, client: Jumpgate, answer: dict) -> None:
        self._client = client
        self.answer = answer
        try:
            self.job_id: str = str(answer["job_id"])
            raw = answer.get("outputs") or {}
            self.outputs: dict[str, Output] = {
                name: Output(name, as_layout(o["layout"]), int(o.get("expected_streams", 1)), o["layout"])
                for name, o in raw.items()}
        except (KeyError, TypeError, ValueError) as e:
            raise ClientError(f"unexpected answer to POST /v1/jobs: {e!r}: {str(answer)[:300]}") from None
        self.state: str = answer.get("state", "compiled")
        self.last_status: dict = answer

    @property
    def ncas(self) -> list:
        """The job's NCA instances: id, implementation, operations, stages, and `host`, the node
        each runs on (docs/deploy.md)."""
        return self.answer.get("ncas", [])

    @property
    def nodes(self) -> dict[str, str | None]:
        """NCA id -> the node it runs on (None for an NCA the network hosts)."""
        return {n["id"]: n.get("host") for n in self.ncas}

    @property
    def stages(self) -> list:
        return self.answer.get("stages", [])

    @property
    def search(self) -> dict:
        """How the mapping went: its cost, and `nodes_skipped` (node -> why it could not be
        used) when some nodes were down."""
        return self.answer.get("search", {})

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def execute(self, *, deadline: float | None = None) -> dict:
        """POST /v1/jobs/{id}/execute, retrying a 503 as `Jumpgate.retry_for` allows (and no
        later than `deadline`, a time.monotonic() value)."""
        body = self._client._call("POST", f"/v1/jobs/{self.job_id}/execute", retry=True, deadline=deadline)
        self.state = body.get("state", "running")
        return body

    def status(self, wait: float = 0.0) -> dict:
        """The job's status; with `wait`, the server holds the answer until the job ends or
        `wait` seconds pass (a long poll)."""
        path = f"/v1/jobs/{self.job_id}" + (f"?wait={wait:.3f}" if wait > 0 else "")
        body = self._client._call("GET", path)
        self.state = body.get("state", self.state)
        self.last_status = body
        return body

    def cancel(self) -> dict:
        body = self._client._call("DELETE", f"/v1/jobs/{self.job_id}")
        self.state = body.get("state", "cancelled")
        return body

    def cancel_quietly(self) -> None:
        """Best-effort DELETE while already handling another error."""
        try:
            self.cancel()
        except (ClientError, httpx.HTTPError):
            pass

    def raise_if_failed(self) -> None:
        if self.state in ("failed", "cancelled"):
            raise JobFailed(self.job_id, self.state, self.last_status.get("error"))

    def __repr__(self) -> str:
        return f"<Job {self.job_id} state={self.state}>"


class Jumpgate:
    """A connection to one Jumpgate server, and the entry point of the fluent builder.

    >>> jg = Jumpgate("http://127.0.0.1:8470")
    >>> t = jg.read("t.jsonl", schema={"a": "int32"}).filter("a > 1").collect()
    """

    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None, http_timeout: float = 300.0,
                 poll_interval: float = 0.02, http: httpx.Client | None = None,
                 retry_for: float = DEFAULT_RETRY_FOR_S) -> None:
        """`token`: the bearer token of a server with tenants (docs/security.md); default: the
        environment's JUMPGATE_TOKEN, if set. `retry_for`: how many seconds, in all, submit and
        execute keep retrying when the server answers 503 (no resources now), waiting what its
        Retry-After says (plus jitter, at most MAX_RETRY_WAIT_S a time); 0 = never retry."""
        if isinstance(retry_for, bool) or not isinstance(retry_for, (int, float)) or not retry_for >= 0:
            raise BuilderError(f"retry_for must be a number of seconds >= 0, got {retry_for!r}")
        self.url = url.rstrip("/")
        self.retry_for = float(retry_for)
        self.poll_interval = poll_interval
        token = token if token is not None else os.environ.get("JUMPGATE_TOKEN") or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._own_http = http is None
        self._http = http if http is not None else httpx.Client(base_url=self.url, timeout=http_timeout,
                                                                headers=headers)
        if http is not None and token:
            self._http.headers["Authorization"] = f"Bearer {token}"
        self.last_job: Job | None = None

    def __repr__(self) -> str:  # never the token itself
        has_token = "Authorization" in self._http.headers
        return f"<Jumpgate {self.url} token={'set' if has_token else 'none'}>"

    # ------------------------------------------------------------------ builder
    def read(self, path: str | Sequence[str], format: str = "json", schema: Any = None, *,
             name: str | None = None) -> Read:
        return read(path, format, schema, name=name, session=self)

    @staticmethod
    def request(*sends: Send, name: str | None = None) -> dict:
        """The contract §1 request JSON for these sends (and everything they read from)."""
        return build_request(sends, name)

    # ------------------------------------------------------------------ REST
    def _call(self, method: str, path: str, body: dict | None = None, expect: type = dict, *,
              retry: bool = False, deadline: float | None = None) -> Any:
        """One REST call. With `retry`, a 503 is retried: after Retry-After seconds (default 1,
        at most MAX_RETRY_WAIT_S) plus jitter, for `retry_for` seconds in all and never past
        `deadline`; then the 503 is raised, saying how long it was retried."""
        call = f"{method} {path}"
        start = time.monotonic()
        until = start + self.retry_for if retry else start
        if deadline is not None:
            until = min(until, deadline)
        tries = 0
        while True:
            try:
                r = self._http.request(method, path, json=body)
            except httpx.HTTPError as e:
                raise ClientError(f"{call}: cannot reach the Jumpgate server at {self.url}: {e}", call=call) from e
            tries += 1
            if r.status_code != 503:
                break
            left = until - time.monotonic()
            if left <= 0:
                break
            wait = retry_after_seconds(r.headers.get("Retry-After")) * (1 + random.uniform(0, RETRY_JITTER))
            time.sleep(min(max(wait, MIN_RETRY_WAIT_S), left))
        return self._answer(r, call, expect, retries=tries - 1, retried_for=time.monotonic() - start)

    def _answer(self, r: httpx.Response, call: str, expect: type, *, retries: int = 0,
                retried_for: float = 0.0) -> Any:
        try:
            data = r.json() if r.content else {}
        except ValueError:
            data = {"message": r.text[:500]}
        if r.status_code >= 400:
            err = data.get("error", data) if isinstance(data, dict) else {"message": str(data)}
            raise RequestRejected(r.status_code, err, call, retries=retries, retried_for=retried_for)
        if not isinstance(data, expect):
            raise ClientError(f"{call}: expected a JSON {expect.__name__}, got {str(data)[:200]}", call=call)
        return data

    def submit(self, request: dict | Send | Sequence[Send], *, name: str | None = None,
               deadline: float | None = None, execute: bool = False) -> Job:
        """Compile a request (a request dict, or send nodes): POST /v1/jobs. Nothing runs yet,
        unless `execute`: then the same call starts the job (`POST /v1/jobs?execute=true`), for a
        caller that already listens at every send address and accepts streams before it reads the
        layouts; `job.state` says whether it started (a server without that answers `compiled`).
        A 503 is retried for `retry_for` seconds (and not past `deadline`, a time.monotonic() value)."""
        if isinstance(request, Send) or (isinstance(request, (list, tuple)) and request
                                         and all(isinstance(s, Send) for s in request)):
            request = build_request([request] if isinstance(request, Send) else request, name)
        if not isinstance(request, dict):
            raise BuilderError(f"submit takes a request dict or send nodes, got {type(request).__name__}")
        path = "/v1/jobs?execute=true" if execute else "/v1/jobs"
        answer = self._call("POST", path, request, retry=True, deadline=deadline)
        try:
            return Job(self, answer)
        except (ClientError, StreamError):  # an answer we cannot use (e.g. a layout we cannot read)
            if isinstance(answer.get("job_id"), (str, int)):
                try:
                    self._call("DELETE", f"/v1/jobs/{answer['job_id']}")
                except (ClientError, httpx.HTTPError):
                    pass
            raise

    def explain(self, request: dict | Dataflow | Send | Sequence[Send], *, name: str | None = None) -> Plan:
        """Compile without running: POST /v1/jobs, then DELETE the compiled job so it holds
        nothing. Takes a request dict (a `send` port 0 is compiled as a placeholder port), send
        nodes, or a dataflow node (sent to the client, as `collect` would). `str()` of the answer
        is the readable plan; `.to_json()` the server's answer."""
        return explain_request(self, request, name=name)

    def to_pandas(self, node: Dataflow | pa.Table, *, host: str = "127.0.0.1", timeout: float | None = None,
                  progress: bool | ProgressCallback | None = None, **options: Any) -> Any:
        """Run a dataflow (or take a table already collected) and return a pandas DataFrame.
        Needs pandas (`pip install 'jumpgate[pandas]'`); `options` go to pyarrow's `to_pandas`."""
        table = node if isinstance(node, pa.Table) else self.collect(node, host=host, timeout=timeout,
                                                                      progress=progress)
        return to_pandas(table, **options)

    def ncas(self) -> list:
        """GET /v1/ncas: the NCA implementations the server has."""
        return self._call("GET", "/v1/ncas", expect=list)

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Jumpgate:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ running
    def collect(self, node: Dataflow, *, host: str = "127.0.0.1", timeout: float | None = None,
                name: str | None = None, progress: bool | ProgressCallback | None = None) -> pa.Table:
        """Run one dataflow and return its rows as a pyarrow Table.

        `progress=True` shows a progress display on standard error (compiling, then the rows and
        tuples so far, from the server's live counters); a callable instead gets a
        `ProgressUpdate` at each step and every status poll (about 4 a second; what it raises
        cancels the job and comes out of `collect`)."""
        return self.collect_many({"out": node}, host=host, timeout=timeout, name=name, progress=progress)["out"]

    def collect_many(self, nodes: Mapping[str, Dataflow], *, host: str = "127.0.0.1",
                     timeout: float | None = None, name: str | None = None,
                     progress: bool | ProgressCallback | None = None) -> dict[str, pa.Table]:
        """Run several dataflows as one job, one `send` each (named by the keys); tables by key.
        `progress` as for `collect`."""
        if not nodes:
            raise BuilderError("collect_many needs at least one dataflow")
        for key, node in nodes.items():
            if not isinstance(key, str) or not NAME_RE.match(key):
                raise BuilderError(f"collect_many: {key!r} is not a valid send name")
            if not isinstance(node, Dataflow):
                raise BuilderError(f"collect_many: {key!r} is not a dataflow node: {node!r}")
        receivers: dict[str, Receiver] = {}
        try:
            for key in nodes:
                receivers[key] = Receiver(host, 0, name=key)
            sends = [node.send(host, receivers[key].port, name=key) for key, node in nodes.items()]
            request = build_request(sends, name)
            return self._run(request, receivers, timeout, progress)
        finally:
            for r in receivers.values():
                r.close()

    def run(self, request: dict, *, timeout: float | None = None,
            progress: bool | ProgressCallback | None = None) -> dict[str, pa.Table]:
        """Run a raw request dict, listening where its `send` operations say (port 0: any free
        port, written into the request sent). A send over UDP asks for version 2 of the transport
        (`udp_version`: acknowledged, loss repaired) unless it says otherwise. Returns a table per
        send name. `progress` as for `collect`."""
        if not isinstance(request, dict) or not isinstance(request.get("operations"), list):
            raise BuilderError("run takes a request dict with an 'operations' list")
        request = copy.deepcopy(request)
        receivers: dict[str, Receiver | UdpReceiver] = {}
        try:
            for i, op in enumerate(request["operations"]):
                if isinstance(op, dict) and op.get("kind") == "send":
                    transport = str(op.get("transport", "tcp")).lower()
                    if transport not in RECEIVERS:
                        raise BuilderError(f"send {op.get('name')!r}: this client receives only "
                                           f"{', '.join(RECEIVERS)}, not {transport}")
                    name, host, port = _listen_at(i, op)
                    r = RECEIVERS[transport](host, port, name=name)
                    receivers[name] = r
                    op["port"] = r.port
                    if transport == "udp" and op.get("udp_version") is None:
                        op["udp_version"] = UDP_VERSION  # acknowledged: the NCAs repeat what is lost
            if not receivers:
                raise BuilderError("the request has no send operation")
            return self._run(request, receivers, timeout, progress)
        finally:
            for r in receivers.values():
                r.close()

    def _run(self, request: dict, receivers: dict[str, Receiver], timeout: float | None,
             progress: bool | ProgressCallback | None = None) -> dict[str, pa.Table]:
        reporter = Reporter(progress)
        try:
            return self._run_reporting(request, receivers, timeout, reporter)
        finally:
            reporter.close()

    def _run_reporting(self, request: dict, receivers: dict[str, Receiver], timeout: float | None,
                       reporter: Reporter) -> dict[str, pa.Table]:
        deadline = None if timeout is None else time.monotonic() + timeout
        reporter.step("compiling")
        # TCP listeners hold early connections in their backlog until `start`, so one call can
        # compile and run; a UDP socket would drop what overflows its buffer meanwhile.
        at_once = all(isinstance(r, Receiver) for r in receivers.values())
        job = self.submit(request, deadline=deadline, execute=at_once)
        self.last_job = job
        try:
            for key, r in receivers.items():
                out = job.outputs.get(key)
                if out is None:
                    raise ClientError(f"the server's answer has no outputs[{key!r}]", job_id=job.job_id)
                r.start(out.expected_streams, out.layout)
            reporter.step("starting", job_id=job.job_id)
            if job.state == "compiled":
                job.execute(deadline=deadline)
            self._wait(job, receivers, deadline, reporter)
            for r in receivers.values():
                r.senders_done()  # every END has been sent: a UDP receiver can tell a lost one
            left = STREAM_GRACE_S if deadline is None else max(0.0, deadline - time.monotonic())
            if not wait_all(receivers.values(), min(left, STREAM_GRACE_S)):
                missing = {k: f"{r.ended}/{r.expected}" for k, r in receivers.items() if not r.done}
                raise StreamError(f"job {job.job_id} succeeded but streams did not end: {missing}",
                                  job_id=job.job_id)
            reporter.done(job.last_status, receivers.values())
            return {key: r.table() for key, r in receivers.items()}
        except BaseException:
            if not job.finished:
                job.cancel_quietly()
            raise

    def _settle(self, job: Job, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not job.finished and time.monotonic() < end:
            time.sleep(0.02)
            job.status()

    def _wait(self, job: Job, receivers: Mapping[str, Receiver], deadline: float | None,
              reporter: Reporter | None = None) -> None:
        """Poll until the job ends; raise on failure, broken streams or timeout."""
        interval = self.poll_interval
        while True:
            asked = time.monotonic()
            job.status(wait=LONG_POLL_S if deadline is None else max(0.0, min(LONG_POLL_S, deadline - asked)))
            if reporter is not None:
                reporter.status(job.last_status, receivers.values())
            if job.state == "succeeded":
                return
            job.raise_if_failed()
            for key, r in receivers.items():
                if r.error:
                    # A broken stream is usually the consequence of a failing NCA: give the server
                    # a moment to say why, and report that cause rather than the symptom.
                    self._settle(job, STREAM_FAILURE_GRACE_S)
                    job.raise_if_failed()
                    raise StreamError(f"destination {key!r}: {r.error}", job_id=job.job_id)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise JobTimeout(f"job {job.job_id} did not finish in time (state {job.state}); cancelled",
                                 job_id=job.job_id)
            if now - asked < interval:  # the server answered at once: do not spin
                time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - now)))
                interval = min(interval * 1.5, 0.25)


def _listen_at(i: int, op: dict) -> tuple[str, str, int]:
    """A raw request's send: its name and where this client listens for it (port 0: any free
    port). Checked here, before anything listens or is submitted, with the operation's place."""
    name = op.get("name")
    if not isinstance(name, str) or not name:
        raise BuilderError(f"operations[{i}].name: a send needs a name (a non-empty string), not {name!r}")
    host = op.get("host")
    if not isinstance(host, str) or not host:
        raise BuilderError(f"operations[{i}].host: send {name!r} needs the address this client listens on "
                           f"(e.g. \"127.0.0.1\"), not {host!r}")
    port = op.get("port", 0)
    if port is None:
        port = 0
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise BuilderError(f"operations[{i}].port: send {name!r} needs a port from 0 (any free port) to 65535, "
                           f"not {port!r}")
    return name, host, port
