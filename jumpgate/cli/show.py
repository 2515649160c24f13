"""`jumpgate jobs`, `jumpgate job ID` and `jumpgate ncas`: what a server (or this installation)
has, as tables, or as JSON with --json."""
from __future__ import annotations

import argparse
import json
import time

from .common import OK, CliError, add_connection, connect, explain, report


def add_parsers(sub, formatter) -> None:
    jobs = sub.add_parser("jobs", formatter_class=formatter, help="list the server's jobs",
                          description="The jobs the server knows (your tenant's, or every tenant's for an admin "
                                      "token), oldest first.")
    add_connection(jobs)
    jobs.add_argument("--json", action="store_true", help="print the server's JSON instead of a table")
    jobs.set_defaults(fn=_jobs)

    job = sub.add_parser("job", formatter_class=formatter, help="one job: status, error, pipeline and timeline",
                         description="One job's state and error, its staged networked pipeline (each NCA, the "
                                     "operations it runs, its node and stages) and where the time went.")
    job.add_argument("id", metavar="ID", help="the job's id (see `jumpgate jobs`)")
    add_connection(job)
    job.add_argument("--json", action="store_true", help="print the server's JSON instead of tables")
    job.set_defaults(fn=_job)

    ncas = sub.add_parser("ncas", formatter_class=formatter, help="list the registered NCA implementations",
                          description="The NCA implementations registered in this installation (entry points "
                                      "`jumpgate.ncas`) and what each can do; with --url, a server's.")
    ncas.add_argument("--url", default=None, help="ask this server instead (GET /v1/ncas) (default: this "
                                                   "installation's registry)")
    ncas.add_argument("--token", default=None, help="bearer token for --url (default: $JUMPGATE_TOKEN)")
    ncas.add_argument("--json", action="store_true", help="print JSON (for scripts) instead of a table")
    ncas.set_defaults(fn=_ncas)


def _call(args: argparse.Namespace, command: str, fetch):
    from ..client.errors import ClientError

    jg = connect(args)
    try:
        return fetch(jg)
    except ClientError as e:
        raise explain(e, args.url) or CliError(str(e)) from None
    finally:
        jg.close()


def _when(t) -> str:
    if not isinstance(t, (int, float)):
        return "" if t is None else str(t)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _ms(v) -> str:
    return f"{v:,.1f}" if isinstance(v, (int, float)) else ("" if v is None else str(v))


def _jobs(args: argparse.Namespace) -> int:
    try:
        # The client has no public call for GET /v1/jobs yet; its _call gives the same errors as the rest.
        listed = _call(args, "jobs", lambda jg: jg._call("GET", "/v1/jobs", expect=list))
    except CliError as e:
        return report("jobs", e)
    if args.json:
        print(json.dumps(listed, indent=2))
        return OK
    from rich.console import Console
    from rich.table import Table

    table = Table()
    cols = ["id", "name", "tenant", "state"]
    times = [k for k in ("created", "finished") if any(k in j for j in listed)]
    for c in cols + times:
        table.add_column(c)
    for j in listed:
        table.add_row(str(j.get("job_id", "")), str(j.get("name") or ""), str(j.get("tenant") or ""),
                      _state(j.get("state")), *(_when(j.get(k)) for k in times))
    console = Console()
    console.print(table)
    console.print(f"{len(listed)} job(s)", highlight=False)
    return OK


def _state(state) -> str:
    colour = {"succeeded": "green", "failed": "red", "cancelled": "yellow", "running": "cyan"}.get(state)
    return f"[{colour}]{state}[/]" if colour else str(state or "")


def _job(args: argparse.Namespace) -> int:
    from ..client.session import Job

    try:
        status = _call(args, "job", lambda jg: Job(jg, {"job_id": args.id}).status())
    except CliError as e:
        return report("job", e)
    if args.json:
        print(json.dumps(status, indent=2))
        return OK
    from rich.console import Console
    from rich.table import Table

    console = Console()
    state = status.get("state")
    console.print(f"job {status.get('job_id', args.id)}"
                  + (f" ({status['name']})" if status.get("name") else "")
                  + (f", tenant {status['tenant']}" if status.get("tenant") else "")
                  + f": {_state(state)}"
                  + (f", queued at position {status['queue']}" if status.get("queue") is not None else ""))
    error = status.get("error")
    if error:
        if isinstance(error, dict):
            where = ", ".join(f"{k} {error[k]}" for k in ("nca", "stage", "step", "file", "record", "path")
                              if error.get(k) is not None)
            console.print(f"[red]error:[/] {error.get('message', error)}" + (f" ({where})" if where else ""),
                          highlight=False)
        else:
            console.print(f"[red]error:[/] {error}", highlight=False)

    ncas = status.get("ncas") or []
    if ncas:
        pipeline = Table(title="pipeline", title_justify="left")
        for c in ("nca", "implementation", "operations", "host", "stages"):
            pipeline.add_column(c)
        for n in ncas:
            pipeline.add_row(str(n.get("id", "")), str(n.get("implementation", "")),
                             " → ".join(map(str, n.get("operations", []))), str(n.get("host") or "-"),
                             ", ".join(map(str, n.get("stages", []))))
        console.print(pipeline)

    timeline = status.get("timeline") or {}
    phases = timeline.get("phases") or {}
    if phases:
        t = Table(title="phases (ms from submission)", title_justify="left")
        for c in ("phase", "start", "end", "duration"):
            t.add_column(c, justify="left" if c == "phase" else "right")
        for name, span in phases.items():
            t.add_row(name, _ms(span.get("start_ms")), _ms(span.get("end_ms")), _ms(span.get("duration_ms")))
        console.print(t)
    per_nca = timeline.get("ncas") or {}
    if per_nca:
        steps = Table(title="per NCA (ms)", title_justify="left")
        for c in ("nca", "compile", "allocate", "configure"):
            steps.add_column(c, justify="left" if c == "nca" else "right")
        stages = Table(title="per NCA and stage", title_justify="left")
        for c in ("nca", "stage", "threads", "tuples in", "tuples out", "wall ms", "busy ms", "wait in ms",
                  "wait out ms"):
            stages.add_column(c, justify="left" if c == "nca" else "right")
        for nca, info in sorted(per_nca.items()):
            compile_span = info.get("compile") or {}
            cached = " (cached)" if compile_span.get("cached") else ""
            steps.add_row(nca, _ms(compile_span.get("duration_ms")) + cached,
                          _ms((info.get("allocate") or {}).get("duration_ms")),
                          _ms((info.get("configure") or {}).get("duration_ms")))
            for st in info.get("stages", []):
                stages.add_row(nca, str(st.get("stage", "")), str(st.get("threads", "")),
                               _count(st.get("tuples_in")), _count(st.get("tuples_out")), _ms(st.get("wall_ms")),
                               _ms(st.get("busy_ms")), _ms(st.get("wait_input_ms")), _ms(st.get("wait_output_ms")))
        console.print(steps)
        if stages.row_count:
            console.print(stages)
    return OK


def _count(v) -> str:
    return f"{v:,}" if isinstance(v, int) else ("" if v is None else str(v))


def _ncas(args: argparse.Namespace) -> int:
    if args.url:
        try:
            described = _call(args, "ncas", lambda jg: jg.ncas())
        except CliError as e:
            return report("ncas", e)
    else:
        from ..nca.registry import load_registry

        described = load_registry().describe()
    if args.json:
        print(json.dumps(described, indent=2))
        return OK
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for c in ("name", "operations", "formats", "description"):
        table.add_column(c, overflow="fold")
    for n in described:
        if not isinstance(n, dict):
            continue
        table.add_row(str(n.get("name", "")), ", ".join(map(str, n.get("operations", []))),
                      ", ".join(map(str, n.get("formats", []))) or "-", str(n.get("description", "")))
    Console().print(table)
    return OK
