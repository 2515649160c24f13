"""Running conformance cases against a Jumpgate server and judging the answers.

Each case: POST the request; 422 when it needs an operation no registered NCA can run; otherwise
receive every send's rows with the Python client, compare them with DuckDB's answer to the case's
SQL over the same files, and read `decisions` from `GET /v1/jobs/{id}` to see which NCA took which
operation. With `nca` set (a plugin under test), each operation of a kind it claims must have been
taken by it or declined by its operator interface (reported with its reason); one it said it could
take but another NCA got is a failure. Operations another NCA fused after an operation of a kind
the NCA under test does not claim (a scan's filters) are not its to take.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import pyarrow as pa

from ..client import Jumpgate
from ..client.errors import ClientError, JobFailed, RequestRejected
from .cases import Case, Check, missing, missing_reason
from .compare import compare_tables, disjoint_keys
from .data import Oracle

PASSED, FAILED, UNSUPPORTED, NOT_USED = "passed", "failed", "unsupported", "not used"


@dataclass
class Outcome:
    case: str
    status: str
    message: str = ""
    seconds: float = 0.0
    decisions: dict[str, dict] = field(default_factory=dict)  # GET /v1/jobs/{id} "decisions"
    predicted_gap: str = ""  # "needs an NCA for ..." from GET /v1/ncas, before running

    @property
    def taken(self) -> dict[str, str | None]:
        """Operation -> the implementation that took it (None for sends)."""
        return {op: d.get("implementation") for op, d in self.decisions.items()}

    @property
    def ncas_used(self) -> list[str]:
        return sorted({impl for impl in self.taken.values() if impl})


class Runner:
    def __init__(self, url: str, oracle: Oracle, *, nca: str | None = None, timeout: float = 600.0,
                 fmt: str = "json", host: str = "127.0.0.1") -> None:
        self.url = url
        self.fmt = fmt  # which copy of the data the server's root holds (the oracle reads JSON)
        self.host = host  # where this client receives the sends: an address the NCAs' nodes reach
        self.oracle = oracle
        self.nca = nca
        self.timeout = timeout
        self.client = Jumpgate(url)
        self.ncas = self.client.ncas()  # GET /v1/ncas
        self.claimed: set[str] = set()
        if nca is not None:
            entry = next((n for n in self.ncas if n.get("name") == nca), None)
            if entry is None or entry.get("error"):
                why = entry.get("error") if entry else "not registered on the server"
                raise ClientError(f"NCA {nca!r} is not available: {why}")
            self.claimed = set(entry.get("operations") or ())

    def close(self) -> None:
        self.client.close()

    def relevant(self, case: Case) -> bool:
        """With an NCA under test: does the case contain an operation of a kind it claims?"""
        return self.nca is None or bool(case.kinds & self.claimed)

    def gap(self, case: Case) -> str:
        gaps = missing(case, self.ncas)
        return missing_reason(gaps) if gaps else ""

    # ------------------------------------------------------------------ one case

    def run(self, case: Case) -> Outcome:
        t0 = time.monotonic()
        out = Outcome(case.name, FAILED, predicted_gap=self.gap(case))
        try:
            self._run(case, out)
        except RequestRejected as e:
            if e.status == 422 and out.predicted_gap:
                out.status, out.message = UNSUPPORTED, f"{out.predicted_gap} (the server answered 422)"
            else:
                out.message = f"the server refused the request: {e.message}{_reasons(e.error)}"
        except JobFailed as e:
            out.message = str(e)
            if case.expected_error is not None and case.expected_error.lower() in str(e).lower():
                out.status, out.message = PASSED, f"failed as expected: {e}"
        except ClientError as e:
            out.message = f"{type(e).__name__}: {e.message}"
        except Exception as e:  # e.g. DuckDB cannot compare what arrived: report it, run the next one
            out.message = f"{type(e).__name__}: {e}"
        out.seconds = time.monotonic() - t0
        return out

    def _run(self, case: Case, out: Outcome) -> None:
        self.oracle.load(case.tables)
        try:
            got = self.client.run(case.runnable_request(host=self.host, fmt=self.fmt), timeout=self.timeout)
        finally:
            job = self.client.last_job
            self.client.last_job = None
            if job is not None and job.job_id:
                out.decisions = _decisions(job)
        if case.expected_error is not None:
            out.message = f"expected a data error containing {case.expected_error!r}, the job succeeded"
            return
        problems = [p for check in case.checks for p in [self._check(case, check, got)] if p]
        lost, declined = self._not_taken(case, out.decisions)
        if problems or lost:
            out.message = "; ".join(problems + lost)
        elif self.nca is not None and self.nca not in out.ncas_used:
            out.status = NOT_USED
            why = "; ".join(declined) or "the operations of kinds it claims were fused into other NCAs' operations"
            out.message = f"answers right, but {self.nca} took no operation: {why}"
        else:
            out.status = PASSED
            out.message = "; ".join(declined)

    def _check(self, case: Case, check: Check, got: dict[str, pa.Table]) -> str | None:
        return check_rows(self.oracle, case, check, got)

    def _not_taken(self, case: Case, decisions: dict[str, dict]) -> tuple[list[str], list[str]]:
        """With an NCA under test, the operations of kinds it claims that it did not take: `lost`
        (it said yes, yet another NCA got them: a failure) and `declined` (its operator interface
        said no, with a reason). Operations another NCA fused after an operation of a kind the
        NCA under test does not claim (a scan's filters) are neither."""
        if self.nca is None:
            return [], []
        kinds = {op["name"]: op["kind"] for op in case.operations}
        lost, declined = [], []
        for op, d in decisions.items():
            impl = d.get("implementation")
            if kinds.get(op) not in self.claimed or impl == self.nca:
                continue
            anchor = d.get("anchor")
            if anchor and anchor != op and kinds.get(anchor) not in self.claimed:
                continue
            verdict = next((v for v in d.get("verdicts", []) if v.get("implementation") == self.nca), None)
            if verdict is None or not verdict.get("ok"):
                why = f"{verdict.get('step')}: {verdict.get('reason')}" if verdict else "not asked"
                declined.append(f"declined {kinds[op]} '{op}' ({why})")
            else:
                lost.append(f"{kinds[op]} '{op}' went to {impl}, not {self.nca}, although it could take it "
                            f"({verdict.get('step')}: {verdict.get('reason')})")
        return lost, declined


def _decisions(job) -> dict[str, dict]:
    try:
        return job.status().get("decisions") or {}
    except ClientError:
        return {}


def _reasons(error: dict) -> str:
    reasons = error.get("reasons") if isinstance(error, dict) else None
    if not isinstance(reasons, dict):
        return ""
    return " [" + "; ".join(f"{n}: {r.get('reason')}" for n, r in reasons.items() if isinstance(r, dict)) + "]"


def check_rows(oracle: Oracle, case: Case, check: Check, got: dict[str, pa.Table]) -> str | None:
    """What differs between the rows the sends of `check` received (`got`, per send) and DuckDB's
    answer to its SQL over the case's tables; None when they agree. For suites that receive the
    rows themselves (e.g. over several hosts) as well as for the runner."""
    oracle.load(case.tables)
    con = oracle.con
    tables = [got[s] for s in check.sends]
    rows = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    where = "+".join(check.sends)
    if check.partition_keys:
        problem = disjoint_keys(con, dict(zip(check.sends, tables)), list(check.partition_keys))
        if problem:
            return f"{where}: {problem}"
    if check.got_sql:
        con.register("got", rows)
        try:
            rows = con.sql(check.got_sql).to_arrow_table()
        finally:
            con.unregister("got")
    want = con.sql(check.sql).to_arrow_table()
    problem = compare_tables(con, rows, want, ordered=case.ordered, rtol=case.float_rtol, atol=case.float_atol)
    return f"{where}: {problem}" if problem else None
