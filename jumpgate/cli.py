"""The `jumpgate` command: `serve` runs the control plane; `ncas` lists plugins; `example` runs
the README's example job end to end against a server; `datagen` writes TPC-H/TPC-DS data;
`conformance` runs the NCA conformance suite (same as `python -m jumpgate.conformance`); `agent`
runs a node agent (docs/agent.md)."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api.app import create_app
    from .deploy.warm import WarmSettings
    from .runtime.service import JumpgateService, NoNodeUp, Settings

    data_root = Path(args.data_root)
    if not data_root.is_dir():
        print(f"jumpgate: --data-root {data_root} is not a directory", file=sys.stderr)
        return 2
    nodes = None
    if args.nodes:
        from .deploy.inventory import InventoryError, load_inventory

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
    settings = Settings(data_root=data_root, bind_host=args.nca_host, cores=args.cores,
                        stall_timeout_s=args.stall_timeout, nodes=nodes,
                        warm=WarmSettings(per_binary=max(0, args.warm_ncas), idle_s=args.warm_idle))
    if args.cache_dir:
        settings.cache_dir = Path(args.cache_dir)
    if args.ncas is not None:
        settings.plugins = [n.strip() for n in args.ncas.split(",") if n.strip()]
    try:
        service = JumpgateService(settings)
    except NoNodeUp as e:
        print(f"jumpgate: {e}", file=sys.stderr)
        return 2
    if settings.plugins is not None:
        known = set(service.registry.implementations) | set(service.registry.problems)
        unknown = [n for n in settings.plugins if n not in known]
        if unknown:
            print(f"jumpgate: --ncas names no registered NCA: {', '.join(unknown)} "
                  f"(see `jumpgate ncas`)", file=sys.stderr)
            return 2
    app = create_app(service)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _ncas(args: argparse.Namespace) -> int:
    import json

    from .nca.registry import load_registry

    print(json.dumps(load_registry().describe(), indent=2))
    return 0


def _datagen(args: argparse.Namespace) -> int:
    from .datagen import DatagenError, generate

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
    from .examples import run_example

    return run_example(args.url, Path(args.data_root), rows=args.rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:  # its own parser takes every option
        from .conformance.__main__ import main as conformance_main

        return conformance_main(argv[1:])
    if argv[:1] == ["agent"]:  # the node agent: its own parser, standard library only
        from .agent.node import main as agent_main

        agent_main(argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="jumpgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the control plane (REST API, contract §4)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8470)
    serve.add_argument("--data-root", required=True, help="directory that every read path is relative to")
    serve.add_argument("--nca-host", default="127.0.0.1", help="address NCA processes listen on")
    serve.add_argument("--cores", type=int, default=None, help="cores NCAs may use (default: all)")
    serve.add_argument("--nodes", default=None, metavar="FILE",
                       help="inventory of the nodes NCAs run on (YAML, docs/deploy.md); default: this machine")
    serve.add_argument("--cache-dir", default=None, help="where compiled NCAs are cached")
    serve.add_argument("--stall-timeout", type=float, default=300.0, metavar="SECONDS",
                       help="fail a job whose running NCAs neither move data nor compute for this long "
                            "(a lost stream, a client that stopped reading); 0 = never (default 300)")
    serve.add_argument("--warm-ncas", type=int, default=1, metavar="N",
                       help="pre-started NCA processes kept per binary for the next job "
                            "(docs/nca-process-protocol.md, \"Pre-started processes\"); 0 = off (default 1)")
    serve.add_argument("--warm-idle", type=float, default=30.0, metavar="SECONDS",
                       help="stop a pre-started NCA process unused for this long (default 30)")
    serve.add_argument("--log-level", default="warning")
    serve.add_argument("--ncas", default=None, metavar="NAME,NAME",
                       help="use only these registered NCA implementations (default: all)")
    serve.set_defaults(fn=_serve)

    ncas = sub.add_parser("ncas", help="list the registered NCA implementations")
    ncas.set_defaults(fn=_ncas)

    example = sub.add_parser("example", help="generate example data and run a job against a server")
    example.add_argument("--url", default="http://127.0.0.1:8470")
    example.add_argument("--data-root", required=True)
    example.add_argument("--rows", type=int, default=1_000_000, help="sales rows to generate")
    example.set_defaults(fn=_example)

    from .datagen.generate import BENCHMARKS, DEFAULT_ROWS_PER_FILE, FORMATS

    datagen = sub.add_parser("datagen", help="generate TPC-H or TPC-DS tables with DuckDB (pip: jumpgate[tpc])")
    datagen.add_argument("benchmark", choices=sorted(BENCHMARKS))
    datagen.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    datagen.add_argument("--format", choices=list(FORMATS), default="json")
    datagen.add_argument("--out", required=True, help="directory; one subdirectory per table")
    datagen.add_argument("--tables", default=None, metavar="T,T", help="only these tables (default: all)")
    datagen.add_argument("--rows-per-file", type=int, default=DEFAULT_ROWS_PER_FILE,
                         help=f"split tables into files of this many rows (default {DEFAULT_ROWS_PER_FILE:,})")
    datagen.add_argument("--quiet", action="store_true", help="no progress bar")
    datagen.set_defaults(fn=_datagen)

    # Listed for --help only: main() hands these to their own parsers.
    sub.add_parser("conformance", help="run the NCA conformance suite (jumpgate conformance --help)")
    sub.add_parser("agent", help="run a node agent (docs/agent.md; jumpgate agent serve --help)")

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
