"""The `jumpgate` command: `serve` runs the control plane; `ncas` lists plugins; `example` runs
the README's example job end to end against a server."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api.app import create_app
    from .runtime.service import JumpgateService, Settings

    data_root = Path(args.data_root)
    if not data_root.is_dir():
        print(f"jumpgate: --data-root {data_root} is not a directory", file=sys.stderr)
        return 2
    settings = Settings(data_root=data_root, bind_host=args.nca_host, cores=args.cores)
    if args.cache_dir:
        settings.cache_dir = Path(args.cache_dir)
    service = JumpgateService(settings)
    app = create_app(service)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _ncas(args: argparse.Namespace) -> int:
    import json

    from .nca.registry import load_registry

    print(json.dumps(load_registry().describe(), indent=2))
    return 0


def _example(args: argparse.Namespace) -> int:
    from .examples import run_example

    return run_example(args.url, Path(args.data_root), rows=args.rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jumpgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the control plane (REST API, contract §4)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8470)
    serve.add_argument("--data-root", required=True, help="directory that every read path is relative to")
    serve.add_argument("--nca-host", default="127.0.0.1", help="address NCA processes listen on")
    serve.add_argument("--cores", type=int, default=None, help="cores NCAs may use (default: all)")
    serve.add_argument("--cache-dir", default=None, help="where compiled NCAs are cached")
    serve.add_argument("--log-level", default="warning")
    serve.set_defaults(fn=_serve)

    ncas = sub.add_parser("ncas", help="list the registered NCA implementations")
    ncas.set_defaults(fn=_ncas)

    example = sub.add_parser("example", help="generate example data and run a job against a server")
    example.add_argument("--url", default="http://127.0.0.1:8470")
    example.add_argument("--data-root", required=True)
    example.add_argument("--rows", type=int, default=100_000)
    example.set_defaults(fn=_example)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
