"""`python -m jumpgate.conformance`: prove an NCA plugin in one command.

    python -m jumpgate.conformance                          # every registered NCA, every request
    python -m jumpgate.conformance --nca mycompany.fpga_join  # one plugin (plus built-ins it needs)
    python -m jumpgate.conformance -k tpch_q01 --list

Generates the TPC-H/TPC-DS data if needed (cached), starts `jumpgate serve` on a free loopback
port restricted to the NCAs under test (or uses `--url`), runs each request, prints one line per
request and a closing `N passed, N failed` line. Exit status 0 when nothing failed.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from .cases import Case, CaseError, load_cases
from .data import Oracle, default_data_dir, ensure_data, format_root
from .runner import FAILED, NOT_USED, PASSED, UNSUPPORTED, Outcome, Runner

BUILTIN_PREFIX = "jumpgate."


def plugins_for(nca: str, builtins: list[str] | None = None) -> list[str]:
    """The NCA under test plus the built-in NCAs it runs with: `builtins` if given, else every
    built-in whose main operation (the first of its `operation_kinds`) differs from the main
    operation of the NCA under test, so a third-party join runs beside the built-in scan,
    aggregation and shuffle but not beside the built-in join."""
    from ..nca.registry import PluginError, load_registry

    registry = load_registry()
    if nca not in registry.implementations:
        why = registry.problems.get(nca)
        known = ", ".join(sorted(registry.implementations)) or "none"
        raise PluginError(f"NCA {nca!r} {'failed to load: ' + why if why else 'is not registered'} "
                          f"(registered: {known}); pip install the package that provides it")
    if builtins is not None:
        unknown = [b for b in builtins if b not in registry.implementations]
        if unknown:
            raise PluginError(f"--builtins names unregistered NCAs: {', '.join(unknown)}")
        return [nca] + [b for b in builtins if b != nca]
    main_kind = (registry.get(nca).operation_kinds or ("",))[0]
    return [nca] + [i.name for i in registry.all()
                    if type(i).__module__.startswith(BUILTIN_PREFIX) and i.name != nca
                    and (i.operation_kinds or ("",))[0] != main_kind]


def _line(o: Outcome, width: int) -> str:
    mark = {PASSED: "PASS", FAILED: "FAIL", UNSUPPORTED: "XFAIL", NOT_USED: "UNUSED"}[o.status]
    used = f" [{', '.join(o.ncas_used)}]" if o.ncas_used and o.status == PASSED else ""
    text = f"{mark:<6} {o.case:<{width}} {o.seconds:6.1f}s{used}"
    return text + (f"  {o.message}" if o.message else "")


def _list(cases: list[Case]) -> None:
    width = max((len(c.name) for c in cases), default=10)
    for c in cases:
        print(f"{c.name:<{width}}  {c.source:<28} {', '.join(c.exercises)}")
    print(f"{len(cases)} requests")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jumpgate.conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nca", help="the NCA plugin under test (registered name); default: all registered NCAs")
    p.add_argument("--data", type=Path, default=None,
                   help="data root (tpch/ and tpcds/ are generated inside when missing); "
                        "default: a cache directory keyed by generator and scale factor")
    p.add_argument("--sf", type=float, default=0.1, help="TPC scale factor (default 0.1)")
    p.add_argument("--format", dest="fmt", choices=("json", "orc", "parquet"), default="json",
                   help="which copy of the data the requests read (default json); answers are the same")
    p.add_argument("-k", dest="pattern", default=None,
                   help="only requests whose name contains PATTERN or matches it as a glob (comma-separated)")
    p.add_argument("--builtins", default=None, metavar="NAME,NAME",
                   help="with --nca: the built-in NCAs to run beside it (default: every built-in whose main "
                        "operation differs from the NCA's)")
    p.add_argument("--url", default=None,
                   help="use this running server (its --data-root must be the data root) instead of starting one")
    p.add_argument("--cache-dir", default=None, help="the started server's cache of compiled NCAs")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    p.add_argument("--client-host", default="127.0.0.1",
                   help="address this client receives results on; with --url of a server whose NCAs run on other "
                        "nodes, one they reach (default 127.0.0.1)")
    p.add_argument("--list", action="store_true", help="list the requests and what they exercise, then exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cases = load_cases(args.pattern)
    except CaseError as e:
        print(f"conformance: {e}", file=sys.stderr)
        return 2
    if args.list:
        _list(cases)
        return 0
    if not cases:
        print(f"conformance: no request matches {args.pattern!r}", file=sys.stderr)
        return 2
    from ..datagen import DatagenError
    from ..nca.registry import PluginError

    root = args.data or default_data_dir(args.sf)
    try:
        builtins = [b.strip() for b in args.builtins.split(",") if b.strip()] if args.builtins is not None else None
        plugins = plugins_for(args.nca, builtins) if args.nca and not args.url else None
        t0 = time.monotonic()
        tables = {t for c in cases for t in c.tables}
        written = ensure_data(root, tables, args.sf, progress=sys.stderr.isatty())
        if args.fmt != "json":
            written += ensure_data(root, tables, args.sf, progress=sys.stderr.isatty(), fmt=args.fmt)
        if written:
            print(f"generated {len(written)} table(s) under {root} in {time.monotonic() - t0:.1f} s")
    except (DatagenError, PluginError) as e:
        print(f"conformance: {e}", file=sys.stderr)
        return 2
    return _run(args, cases, root, plugins)


def _run(args, cases: list[Case], root: Path, plugins: list[str] | None) -> int:
    from ..local_server import LocalServer

    server = None
    with tempfile.TemporaryDirectory(prefix="jg-conformance-") as tmp:
        log = Path(tmp) / "server.log"
        try:
            if args.url:
                url = args.url
            else:
                extra = ["--ncas", ",".join(plugins)] if plugins else []
                server = LocalServer(format_root(root, args.fmt), Path(args.cache_dir) if args.cache_dir else None, log,
                                     extra_args=extra)
                url = server.url
            oracle = Oracle(root)
            runner = Runner(url, oracle, nca=args.nca, timeout=args.timeout, fmt=args.fmt, host=args.client_host)
            try:
                return _report(runner, cases, plugins)
            finally:
                runner.close()
                oracle.close()
        except Exception as e:
            print(f"conformance: {type(e).__name__}: {e}", file=sys.stderr)
            if server is not None and log.exists():
                print("server log (tail):\n" + log.read_text()[-3000:], file=sys.stderr)
            return 2
        finally:
            if server is not None:
                server.stop()


def _report(runner: Runner, cases: list[Case], plugins: list[str] | None) -> int:
    names = ", ".join(n["name"] for n in runner.ncas if not n.get("error"))
    under = f"NCA under test: {runner.nca}; " if runner.nca else ""
    print(f"{under}server NCAs: {names or 'none'}" + (f" (restricted to {', '.join(plugins)})" if plugins else ""))
    chosen = [c for c in cases if runner.relevant(c)]
    if runner.nca and len(chosen) < len(cases):
        print(f"{len(chosen)} of {len(cases)} requests contain an operation {runner.nca} claims "
              f"({', '.join(sorted(runner.claimed))})")
    width = max((len(c.name) for c in chosen), default=10)
    counts = {PASSED: 0, FAILED: 0, UNSUPPORTED: 0, NOT_USED: 0}
    for case in chosen:
        outcome = runner.run(case)
        counts[outcome.status] += 1
        print(_line(outcome, width), flush=True)
    tail = [f"{counts[UNSUPPORTED]} unsupported (strict xfail: no registered NCA for an operation)"] if counts[UNSUPPORTED] else []
    tail += [f"{counts[NOT_USED]} not using {runner.nca}"] if counts[NOT_USED] else []
    print(f"{counts[PASSED]} passed, {counts[FAILED]} failed" + (", " + ", ".join(tail) if tail else ""))
    return 1 if counts[FAILED] else 0


if __name__ == "__main__":
    sys.exit(main())
