"""The `jumpgate` command: `serve` runs the control plane; `run` runs a request file and prints
or saves the result; `jobs` and `job ID` show a server's jobs; `ncas` lists plugins; `example` runs
the README's example job end to end against a server; `datagen` writes TPC-H/TPC-DS data;
`conformance` runs the NCA conformance suite (same as `python -m jumpgate.conformance`); `agent`
runs a node agent (docs/agent.md)."""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from ..contract.readiness import wait_readable
from .common import HelpFormatter
from .run import add_parser as add_run_parser
from .show import add_parsers as add_show_parsers

KEEP_ALIVE_S = 75  # seconds an idle HTTP connection stays open (_serve says why)

__all__ = ["main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jumpgate")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api.app import create_app
    from ..deploy.warm import WarmSettings
    from ..runtime.jobdb import StateDbError
    from ..runtime.logs import configure as configure_logging
    from ..runtime.service import JumpgateService, NoNodeUp, Settings

    log_config = configure_logging(args.log_format, args.log_level)  # first: what follows may log
    data_root = Path(args.data_root)
    if not data_root.is_dir():
        print(f"jumpgate: --data-root {data_root} is not a directory", file=sys.stderr)
        return 2
    nodes = None
    if args.nodes:
        from ..deploy.inventory import InventoryError, load_inventory

        if args.cores is not None or args.nca_host != "127.0.0.1":
            print("jumpgate: with --nodes, each node's address and cores come from the inventory "
                  "(drop --nca-host and --cores)", file=sys.stderr)
            return 2
        try:
            load_inventory(args.nodes)  # every problem now, before the server starts
        except InventoryError as e:
            print(f"jumpgate: {e}", file=sys.stderr)
            return 2
        nodes = Path(args.nodes)
    problem = _exposure_problem(args)
    if problem:
        print(f"jumpgate: {problem}", file=sys.stderr)
        return 2
    if args.overcommit < 1:
        print(f"jumpgate: --overcommit must be at least 1, got {args.overcommit:g}", file=sys.stderr)
        return 2
    settings = Settings(data_root=data_root, bind_host=args.nca_host, cores=args.cores, overcommit=args.overcommit,
                        stall_timeout_s=args.stall_timeout, nodes=nodes,
                        warm=WarmSettings(per_binary=max(0, args.warm_ncas), total=max(0, args.warm_total),
                                          idle_s=args.warm_idle, fork_servers=max(0, args.fork_servers)),
                        tokens=Path(args.tokens) if args.tokens else None, rest_host=args.host, rest_port=args.port,
                        send_allow=tuple(args.send_allow), max_ncas_per_job=args.max_ncas_per_job,
                        compiled_ttl_s=args.compiled_ttl, queue_max_wait_s=args.queue_max_wait,
                        client_stall_s=max(0.0, args.client_stall),
                        state_db=Path(args.state_db) if args.state_db else None,
                        keep_jobs=max(0, args.keep_jobs), keep_days=max(0.0, args.keep_days),
                        runtime_filters=not args.no_runtime_filters, shared_scans=args.shared_scans,
                        shared_scan_wait_s=max(0.0, args.shared_scan_wait),
                        shared_scan_linger_s=max(0.0, args.shared_scan_linger))
    if args.cache_dir:
        settings.cache_dir = Path(args.cache_dir)
    if args.ncas is not None:
        settings.plugins = [n.strip() for n in args.ncas.split(",") if n.strip()]
    try:
        service = JumpgateService(settings)
    except (NoNodeUp, StateDbError) as e:
        print(f"jumpgate: {e}", file=sys.stderr)
        return 2
    if settings.plugins is not None:
        known = set(service.registry.implementations) | set(service.registry.problems)
        unknown = [n for n in settings.plugins if n not in known]
        if unknown:
            print(f"jumpgate: --ncas names no registered NCA: {', '.join(unknown)} "
                  f"(see `jumpgate ncas`)", file=sys.stderr)
            return 2
    app = create_app(service, metrics=args.metrics_port is None)
    if args.metrics_port is not None:  # /metrics on a port of its own, not the API's (docs/operations.md)
        from prometheus_client import start_http_server

        try:
            start_http_server(args.metrics_port, args.metrics_host or args.host, service.metrics.registry,
                              certfile=args.tls_cert, keyfile=args.tls_key)
        except OSError as e:
            print(f"jumpgate: --metrics-port {args.metrics_port}: {e}", file=sys.stderr)
            return 2
    # uvicorn's own text handlers unless the lines are to be JSON (runtime/logs.py). Idle
    # connections are kept longer than clients keep them in their pools (Java's HttpClient 30 s,
    # which the Spark and Trino clients use): with uvicorn's default of 5 s a client could send a
    # request on a connection the server was closing that moment, and the request failed with no
    # answer ("header parser received no bytes"), which a client cannot safely retry for a POST.
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                           timeout_keep_alive=KEEP_ALIVE_S,
                                           ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
                                           **({"log_config": log_config} if log_config else {})))
    threading.Thread(target=_announce, args=(server, args), name="announce", daemon=True).start()
    if args.exit_with_parent:
        _exit_with_parent(server)
    # What the server has built by now (modules, the app, the registry: some 150,000 objects)
    # lives as long as it does. Left to the collector, each full collection walks all of it
    # again, 40 to 110 ms of CPU with the GIL held, stalling every request and job driver thread
    # at once; frozen, a full collection walks only what jobs have made since.
    gc.collect()
    gc.freeze()
    server.run()
    return 0


def _exit_with_parent(server) -> None:
    """Have the server stop as on SIGTERM once its parent process exits. A pidfd of the parent
    becomes readable at its exit, so a thread waits on it without polling; where there is no
    pidfd (an old kernel), the thread looks at the parent's PID once a second (an orphan is
    adopted by another process)."""
    parent = os.getppid()
    if parent <= 1:
        return  # started by init or a container's first process: that is no test run

    def watch() -> None:
        try:
            fd = os.pidfd_open(parent)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            wait_readable(fd, None)
            os.close(fd)
        else:
            while os.getppid() == parent:
                time.sleep(1.0)
        print(f"jumpgate: the process that started this server ({parent}) exited: stopping", file=sys.stderr,
              flush=True)
        server.should_exit = True  # uvicorn's own SIGTERM path: the lifespan's end stops every job

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _announce(server, args: argparse.Namespace) -> None:
    """One line once the port accepts connections: where the API, the pages and the API's docs are
    (at the default log level uvicorn says nothing, and a newcomer would not know it is ready)."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.05)
    base = f"{'https' if args.tls_cert else 'http'}://{args.host}:{args.port}"
    message = f"listening on {base}, UI at {base}/ui/jobs, API docs at {base}/docs"
    if args.log_format == "json":  # every line must parse: the same shape as the log lines
        print(json.dumps({"time": datetime.now(UTC).isoformat(timespec="milliseconds"), "level": "INFO",
                          "logger": "jumpgate.cli", "message": message}), file=sys.stderr, flush=True)
    else:
        print(f"jumpgate: {message}", file=sys.stderr, flush=True)


def _warn(args: argparse.Namespace, message: str) -> None:
    """A warning at start-up: a log line when the lines are JSON (every line must parse)."""
    if args.log_format == "json":
        logging.getLogger("jumpgate.cli").warning(message)
    else:
        print(f"jumpgate: warning: {message}", file=sys.stderr)


def _exposure_problem(args: argparse.Namespace) -> str | None:
    """Why the server must not start as asked (docs/security.md); warns about what it allows."""
    import ipaddress

    from ..tenancy.policy import SendRule
    from ..tenancy.tokens import TokenFile, TokenFileError

    if bool(args.tls_cert) != bool(args.tls_key):
        return "--tls-cert and --tls-key go together"
    try:
        SendRule(networks=tuple(args.send_allow))
    except ValueError as e:
        return f"--send-allow: {e}"
    if args.tokens:
        try:
            if not TokenFile(args.tokens).entries():
                _warn(args, f"{args.tokens} has no tokens yet: every request is refused until "
                            "`jumpgate tokens add` makes one")
        except TokenFileError as e:
            return str(e)
        return None
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if loopback:
        return None
    if not args.insecure:
        return (f"--host {args.host} would let anyone who reaches it run jobs: give --tokens FILE "
                "(`jumpgate tokens add --file FILE --tenant NAME`), or --insecure to accept that")
    _warn(args, f"listening on {args.host} without tokens (--insecure): anyone who reaches it can "
                "see, run and cancel every job")
    return None


def _tokens(args: argparse.Namespace) -> int:
    from ..tenancy.tokens import TokenFile, TokenFileError

    if args.action == "add" and not args.tenant:
        print("jumpgate: tokens add needs --tenant NAME", file=sys.stderr)
        return 2
    if args.action == "revoke" and not args.id:
        print("jumpgate: tokens revoke needs the token id (see `jumpgate tokens list`)", file=sys.stderr)
        return 2
    try:
        tokens = TokenFile(args.file)
        if args.action == "add":
            token = tokens.add(args.tenant, args.role)
            print(token)
            print(f"(a {args.role} token of tenant {args.tenant}; shown only now, store it safely)", file=sys.stderr)
        elif args.action == "list":
            entries = tokens.entries()
            if args.json:
                import json

                print(json.dumps([e.model_dump(exclude={"sha256"}) for e in entries], indent=2))
            else:
                for e in entries:
                    print(f"{e.id}  {e.tenant:<20} {e.role:<6} {e.created}")
        elif not tokens.revoke(args.id):
            print(f"jumpgate: no token {args.id!r} in {args.file}", file=sys.stderr)
            return 1
    except TokenFileError as e:
        print(f"jumpgate: {e}", file=sys.stderr)
        return 2
    return 0


def _datagen(args: argparse.Namespace) -> int:
    from ..datagen import DatagenError, generate

    tables = [t.strip() for t in args.tables.split(",") if t.strip()] if args.tables else None
    try:
        result = generate(args.benchmark, args.sf, args.format, Path(args.out), tables=tables,
                          rows_per_file=args.rows_per_file, progress=not args.quiet)
    except DatagenError as e:
        print(f"jumpgate datagen: {e}", file=sys.stderr)
        return 2
    skipped = [t.name for t in result.tables if t.skipped]
    if not args.quiet:
        print(f"{args.out}: wrote {len(result.written)} table(s)"
              + (f", {len(skipped)} already complete" if skipped else "")
              + (f" (DuckDB {result.generate_s:.1f} s, writing {result.write_s:.1f} s)" if result.written else ""))
    return 0


def _example(args: argparse.Namespace) -> int:
    from ..examples import run_example

    return run_example(args.url, Path(args.data_root), rows=args.rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:  # its own parser takes every option
        from ..conformance.__main__ import main as conformance_main

        return conformance_main(argv[1:])
    if argv[:1] == ["agent"]:  # the node agent: its own parser, standard library only
        from ..agent.node import main as agent_main

        agent_main(argv[1:])
        return 0
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return args.fn(args)
    except BrokenPipeError:  # `jumpgate jobs --json | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"jumpgate {args.command}: interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand's parser (`conformance` and `agent` have their own: listed for --help only)."""
    from ..deploy.warm import WarmSettings

    parser = argparse.ArgumentParser(prog="jumpgate", description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_parser(sub, HelpFormatter)
    add_show_parsers(sub, HelpFormatter)

    serve = sub.add_parser("serve", formatter_class=HelpFormatter, help="run the control plane (REST API, contract §4)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8470, help="the REST API's port")
    serve.add_argument("--data-root", required=True, help="directory that every read path is relative to")
    serve.add_argument("--nca-host", default="127.0.0.1", help="address NCA processes listen on")
    serve.add_argument("--cores", type=int, default=None, help="cores NCAs may use (default: all)")
    serve.add_argument("--overcommit", type=float, default=2.0, metavar="F",
                       help="jobs running together may hold F times the cores in threads, one job at most "
                            "the cores; 1 = one thread per core (default 2: NCA threads wait for the network "
                            "much of the time)")
    serve.add_argument("--nodes", default=None, metavar="FILE",
                       help="inventory of the nodes NCAs run on (YAML, docs/deploy.md); default: this machine")
    serve.add_argument("--cache-dir", default=None, help="where compiled NCAs are cached")
    serve.add_argument("--stall-timeout", type=float, default=300.0, metavar="SECONDS",
                       help="fail a job whose running NCAs neither move data nor compute for this long "
                            "(a lost stream, a client that stopped reading); 0 = never (default 300)")
    serve.add_argument("--warm-ncas", type=int, default=WarmSettings.per_binary, metavar="N",
                       help="pre-started NCA processes kept per binary for the next job, at most: as many as the "
                            "last job used at once (docs/nca-process-protocol.md, \"Pre-started processes\"); "
                            f"0 = off (default {WarmSettings.per_binary})")
    serve.add_argument("--warm-total", type=int, default=WarmSettings.total, metavar="N",
                       help=f"pre-started NCA processes kept in all (default {WarmSettings.total})")
    serve.add_argument("--warm-idle", type=float, default=30.0, metavar="SECONDS",
                       help="stop a pre-started NCA process unused for this long (default 30)")
    serve.add_argument("--fork-servers", type=int, default=WarmSettings.fork_servers, metavar="N",
                       help="NCA binaries kept loaded to fork their processes from, at most (docs/nca-process-protocol.md, "
                            f"\"Fork servers\"); 0 = off (default {WarmSettings.fork_servers})")
    serve.add_argument("--log-level", default="warning",
                       help="critical, error, warning, info, debug or trace: the server's and Jumpgate's own "
                            "lines (default warning)")
    serve.add_argument("--log-format", choices=("text", "json"), default="text",
                       help="text lines, or one JSON object per line with the job's id on lines logged for a job "
                            "(docs/operations.md; default text)")
    serve.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                       help="serve GET /metrics on this port instead of the API's (docs/operations.md)")
    serve.add_argument("--metrics-host", default=None, metavar="ADDRESS",
                       help="the address --metrics-port listens on (default: --host)")
    serve.add_argument("--ncas", default=None, metavar="NAME,NAME",
                       help="use only these registered NCA implementations (default: all)")
    serve.add_argument("--tokens", default=None, metavar="FILE",
                       help="tenants and their bearer tokens (docs/security.md); without it, no authentication, "
                            "which is allowed on loopback only")
    serve.add_argument("--insecure", action="store_true",
                       help="allow --host on a non-loopback address without --tokens")
    serve.add_argument("--send-allow", action="append", default=[], metavar="CIDR",
                       help="a network every tenant's default send rule allows, besides the request's own address "
                            "and loopback (repeatable)")
    serve.add_argument("--max-ncas-per-job", type=int, default=64, metavar="N",
                       help="the most NCA processes one job may start (default 64)")
    serve.add_argument("--compiled-ttl", type=float, default=600.0, metavar="SECONDS",
                       help="cancel a job compiled and never executed after this long; 0 = keep (default 600)")
    serve.add_argument("--client-stall", type=float, default=10.0, metavar="SECONDS",
                       help="fail a job whose client (a send's receiver) takes no data for this long while there "
                            "is data for it (it stopped reading or never accepted); 0 = never (default 10)")
    serve.add_argument("--shared-scans", action="store_true",
                       help="scans of the same files that run at the same time, in one job or several, read "
                            "them once (docs/shared-scans.md)")
    serve.add_argument("--shared-scan-wait", type=float, default=0.2, metavar="SECONDS",
                       help="how long a shared scan waits for the scans announced for its files (default 0.2)")
    serve.add_argument("--shared-scan-linger", type=float, default=0.05, metavar="SECONDS",
                       help="how long a shared scan waits for scans of jobs still being planned (default 0.05)")
    serve.add_argument("--no-runtime-filters", action="store_true",
                       help="plan no runtime filters from hash joins' build sides to the scans of their probe "
                            "sides (docs/runtime-filters.md); for comparison")
    serve.add_argument("--queue-max-wait", type=float, default=300.0, metavar="SECONDS",
                       help="fail a job that waited this long in the run queue for cores (default 300)")
    serve.add_argument("--state-db", default=None, metavar="PATH",
                       help="the SQLite file jobs are recorded in, so that they outlive the server: a restarted "
                            "server lists them, and marks those that were running as failed "
                            "(docs/operations.md; default: state.db in the cache directory)")
    serve.add_argument("--keep-jobs", type=int, default=10_000, metavar="N",
                       help="keep the newest N ended jobs in the state database; 0 = no limit (default 10000)")
    serve.add_argument("--keep-days", type=float, default=30.0, metavar="DAYS",
                       help="delete ended jobs older than this from the state database; 0 = no limit (default 30)")
    serve.add_argument("--exit-with-parent", action="store_true",
                       help="stop (as on SIGTERM: jobs cancelled, NCAs stopped) when the process that started "
                            "this one exits; for test suites and benchmarks, so that a run killed midway "
                            "leaves no server behind")
    serve.add_argument("--tls-cert", default=None, metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="... and this private key (PEM)")
    serve.set_defaults(fn=_serve)

    tokens = sub.add_parser("tokens", formatter_class=HelpFormatter, help="manage tenants' bearer tokens (docs/security.md)")
    tokens.add_argument("action", choices=("add", "list", "revoke"))
    tokens.add_argument("id", nargs="?", help="the token id to revoke (see `list`)")
    tokens.add_argument("--file", required=True, help="the token file (`serve --tokens`)")
    tokens.add_argument("--tenant", help="the tenant of a new token")
    tokens.add_argument("--role", choices=("user", "admin"), default="user",
                        help="user: its tenant's jobs; admin: every job (default user)")
    tokens.add_argument("--json", action="store_true", help="list as JSON")
    tokens.set_defaults(fn=_tokens)

    example = sub.add_parser("example", formatter_class=HelpFormatter, help="generate example data and run a job against a server")
    example.add_argument("--url", default="http://127.0.0.1:8470", help="the Jumpgate server")
    example.add_argument("--data-root", required=True,
                         help="where the example data is (written there if missing): the server's --data-root")
    example.add_argument("--rows", type=int, default=1_000_000, help="sales rows to generate")
    example.set_defaults(fn=_example)

    from ..datagen.generate import BENCHMARKS, DEFAULT_ROWS_PER_FILE, FORMATS

    datagen = sub.add_parser("datagen", formatter_class=HelpFormatter, help="generate TPC-H or TPC-DS tables with DuckDB (pip: jumpgate[tpc])")
    datagen.add_argument("benchmark", choices=sorted(BENCHMARKS))
    datagen.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    datagen.add_argument("--format", choices=list(FORMATS), default="json", help="the files' format")
    datagen.add_argument("--out", required=True, help="directory; one subdirectory per table")
    datagen.add_argument("--tables", default=None, metavar="T,T", help="only these tables (default: all)")
    datagen.add_argument("--rows-per-file", type=int, default=DEFAULT_ROWS_PER_FILE,
                         help=f"split tables into files of this many rows (default {DEFAULT_ROWS_PER_FILE:,})")
    datagen.add_argument("--quiet", action="store_true", help="no progress bar")
    datagen.set_defaults(fn=_datagen)

    # Listed for --help only: main() hands these to their own parsers.
    sub.add_parser("conformance", help="run the NCA conformance suite (jumpgate conformance --help)")
    sub.add_parser("agent", help="run a node agent (docs/agent.md; jumpgate agent serve --help)")

    return parser
