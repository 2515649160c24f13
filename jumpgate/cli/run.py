"""`jumpgate run REQUEST.json`: run a dataflow request file (contract §1) through the Python
client, listening where each `send` says (port 0: any free port), and print what arrived or write
it to a file."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .common import FAILED, OK, USAGE, CliError, add_connection, connect, explain, report

OUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
TABLE_LIMIT = 20


def add_parser(sub, formatter) -> None:
    p = sub.add_parser(
        "run", formatter_class=formatter, help="run a request file (contract §1 JSON) and print or save the result",
        description="Run a dataflow request file (docs/contract.md §1) on a Jumpgate server and print the rows "
                    "each `send` received, or write them to --out. The client listens where each send says "
                    "(\"port\": 0 = any free port). The first run of a query compiles its NCAs, which can "
                    "take seconds; later runs reuse them.")
    p.add_argument("request", metavar="REQUEST.json", help="the request file")
    add_connection(p)
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the rows to FILE instead of printing them: .parquet, .csv or .jsonl (by "
                        "extension); with several sends, one FILE-<send>.ext per send (default: print)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="how to print the rows: a table, CSV, or JSON (an array of row objects; with several "
                        "sends, an object of such arrays by send name)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help=f"print at most N rows per send (default: {TABLE_LIMIT} for a table, all for csv "
                        "and json; 0 = all)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="cancel the job if it has not finished after this long (default: no limit)")
    p.set_defaults(fn=main)


def main(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except CliError as e:
        return report("run", e)


def load_request(path: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: no such file", USAGE) from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a request file", USAGE) from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}", USAGE) from None
    try:
        request = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"{path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", USAGE) from None
    if not isinstance(request, dict) or not isinstance(request.get("operations"), list):
        raise CliError(f"{path}: a request is a JSON object with an \"operations\" list (docs/contract.md §1)",
                       USAGE)
    sends = [op.get("name") for op in request["operations"] if isinstance(op, dict) and op.get("kind") == "send"]
    if not sends:
        raise CliError(f"{path}: the request has no send operation, so nothing would come back", USAGE)
    return request


def out_paths(out: str, sends: list[str]) -> dict[str, Path]:
    """Where each send's rows go: FILE itself for one send, FILE-<send>.ext for several."""
    path = Path(out)
    if path.suffix.lower() not in OUT_FORMATS:
        raise CliError(f"--out {out}: unsupported extension {path.suffix or '(none)'!r}: use "
                       f"{', '.join(OUT_FORMATS)}", USAGE)
    parent = path.parent
    if not parent.is_dir():
        raise CliError(f"--out {out}: directory {parent} does not exist", USAGE)
    if not os.access(parent, os.W_OK):
        raise CliError(f"--out {out}: directory {parent} is not writable", USAGE)
    if path.is_dir():
        raise CliError(f"--out {out}: is a directory", USAGE)
    if len(sends) == 1:
        return {sends[0]: path}
    return {s: path.with_name(f"{path.stem}-{s}{path.suffix}") for s in sends}


def _run(args: argparse.Namespace) -> int:
    request = load_request(args.request)
    sends = [str(op.get("name")) for op in request["operations"] if isinstance(op, dict) and op.get("kind") == "send"]
    outs = out_paths(args.out, sends) if args.out else None
    if args.limit is not None and args.limit < 0:
        raise CliError("--limit must be 0 or more", USAGE)

    from rich.console import Console

    err = Console(stderr=True)
    try:
        tables = _execute(args, request, err)
    except KeyboardInterrupt:
        print("jumpgate run: interrupted; the job was cancelled", file=sys.stderr)
        return 130

    if outs:
        for send, path in outs.items():
            table = tables[send]
            try:
                write_table(table, path)
            except OSError as e:
                raise CliError(f"cannot write {path}: {e.strerror or e}", FAILED) from None
            print(f"wrote {table.num_rows:,} row(s) of send {send!r} to {path}", file=sys.stderr)
        return OK
    print_tables(tables, args.format, args.limit)
    return OK


def _execute(args: argparse.Namespace, request: dict, err) -> dict:
    """Runs the request, with a progress display on stderr when it is a terminal: compiling, then
    the stage running and the rows and bytes so far, from the server's live counters."""
    from ..client.errors import ClientError

    progress = None
    if err.is_terminal:
        from ..client.progress import RichProgress

        progress = RichProgress(console=err, transient=True)
    jg = connect(args)
    try:
        try:
            return jg.run(request, timeout=args.timeout, progress=progress)
        except OSError as e:  # a receiver could not listen where a send says
            raise CliError(f"cannot listen where the request's send says: {e.strerror or e}", FAILED) from None
        except ClientError as e:
            raise explain(e, args.url) or CliError(str(e), FAILED) from None
    finally:
        if progress is not None:
            progress.close()
        jg.close()


def write_table(table, path: Path) -> None:
    """Writes via a temporary file next to `path`, so a failure leaves no half-written file."""
    kind = OUT_FORMATS[path.suffix.lower()]
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        elif kind == "csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                for batch in table.to_batches(max_chunksize=65536):
                    for row in batch.to_pylist():
                        f.write(json.dumps(row, default=_json_value, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _json_value(v):
    """Decimals as strings (exact; the contract reads them back), dates as YYYY-MM-DD."""
    import datetime
    import decimal

    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def print_tables(tables: dict, fmt: str, limit: int | None) -> None:
    several = len(tables) > 1
    if fmt == "json":
        docs = {name: _rows(t, limit) for name, t in tables.items()}
        out = docs if several else next(iter(docs.values()))
        sys.stdout.write(json.dumps(out, default=_json_value, ensure_ascii=False, indent=1) + "\n")
        return
    if fmt == "csv":
        import pyarrow.csv as pcsv

        for name, t in tables.items():
            if several:
                sys.stdout.write(f"# send {name}\n")
            sys.stdout.flush()
            pcsv.write_csv(t.slice(0, limit) if limit else t, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    limit = TABLE_LIMIT if limit is None else limit
    for name, t in tables.items():
        shown = t.slice(0, limit) if limit else t
        table = Table(title=f"send {name}" if several else None, title_justify="left")
        for col in t.schema:
            table.add_column(col.name, justify="right" if _numeric(col.type) else "left")
        for row in shown.to_pylist():
            table.add_row(*("NULL" if v is None else str(v) for v in row.values()))
        console.print(table)
        if shown.num_rows < t.num_rows:
            console.print(f"{shown.num_rows:,} of {t.num_rows:,} rows shown (--limit N, 0 = all; or --out FILE)",
                          highlight=False)
        else:
            console.print(f"{t.num_rows:,} row(s)", highlight=False)


def _rows(t, limit: int | None) -> list:
    return (t.slice(0, limit) if limit else t).to_pylist()


def _numeric(typ) -> bool:
    import pyarrow.types as pt

    return pt.is_integer(typ) or pt.is_floating(typ) or pt.is_decimal(typ)
