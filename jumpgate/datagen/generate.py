"""Generate TPC-H / TPC-DS tables with DuckDB's `tpch` and `tpcds` extensions and write them as
JSON Lines, Parquet or ORC, one directory per table:

    OUT/manifest.json             what was generated (benchmark, scale factor, format, versions)
    OUT/lineitem/part-0.jsonl     rows 0 .. rows_per_file-1, part-1.jsonl the next ones, ...
    OUT/lineitem.schema.json      [{"name": "l_orderkey", "type": "int64"}, ...] (contract types)

A table's folder holds its data files and nothing else, so any engine reads the folder or a glob
over it as the table: `spark.read.parquet("OUT/lineitem")`, DuckDB's
`read_parquet('OUT/lineitem/*')`, `pyarrow.dataset.dataset("OUT/lineitem")`, a Jumpgate `read` of
`lineitem/*`. (Earlier versions wrote `schema.json` inside the folder, which Spark and DuckDB then
tried to read as data; a `_schema.json` would do for Spark, Trino and pyarrow, which skip names
starting with `_`, but not for DuckDB or a plain glob.) `read_schema` reads either layout.

Idempotent: a table is written into a hidden temporary directory and renamed into place when
complete, its schema file written just before, so an existing `OUT/<table>` is always whole and is
skipped; when every wanted table is there, DuckDB is not even asked to generate. A lock file
serialises concurrent generators.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .types import UnsupportedType, contract_type, quote_ident, select_expr

# Bump when what this module writes changes (file layout, type mapping, text of values): caches
# keyed by it are then regenerated instead of being silently reused. (Not bumped when the schema
# file moved beside the table's folder: the data is the same and `read_schema` reads both layouts,
# so existing outputs stay valid instead of failing the manifest check.)
DATAGEN_VERSION = 2
SCHEMA_SUFFIX = ".schema.json"  # OUT/<table>.schema.json, beside the table's folder
LEGACY_SCHEMA = "schema.json"  # OUT/<table>/schema.json, as written before
FORMATS = {"json": "jsonl", "parquet": "parquet", "orc": "orc"}
# ORC as Spark writes it (Snappy, spark.sql.orc.compression.codec's default; strings dictionary-
# encoded where their distinct values are under 80% of a stripe's rows, ORC's own default key
# threshold), not as pyarrow does by default (uncompressed, never a dictionary): the scans then meet
# the files their users have. Parquet comes from DuckDB's writer with its defaults (Snappy,
# dictionaries), much like Spark's.
ORC_WRITE_OPTIONS = {"compression": "snappy", "dictionary_key_size_threshold": 0.8}
DEFAULT_ROWS_PER_FILE = 250_000


class DatagenError(Exception):
    pass


@dataclass(frozen=True)
class Benchmark:
    name: str
    extension: str  # the DuckDB extension
    module: str  # the pip package that ships it
    procedure: str  # the generating table function


BENCHMARKS = {
    "tpch": Benchmark("tpch", "tpch", "duckdb_extension_tpch", "dbgen"),
    "tpcds": Benchmark("tpcds", "tpcds", "duckdb_extension_tpcds", "dsdgen"),
}


@dataclass
class TableResult:
    name: str
    rows: int = 0
    files: int = 0
    skipped: bool = False  # already complete


@dataclass
class DatagenResult:
    out: Path
    tables: list[TableResult] = field(default_factory=list)
    generate_s: float = 0.0
    write_s: float = 0.0

    @property
    def written(self) -> list[str]:
        return [t.name for t in self.tables if not t.skipped]


def generator_key() -> str:
    """Identifies the generator: DuckDB (and its pinned extensions) and this module's version."""
    import duckdb

    return f"duckdb-{duckdb.__version__}-datagen{DATAGEN_VERSION}"


def extension_path(bench: Benchmark) -> str:
    """The extension file shipped by its pip package (there is no `INSTALL` without a network)."""
    import importlib

    import duckdb

    try:
        mod = importlib.import_module(bench.module)
    except ImportError:
        raise DatagenError(f"the DuckDB {bench.extension} extension is missing: "
                           f"pip install 'jumpgate[tpc]' (or {bench.module.replace('_', '-')}=="
                           f"{duckdb.__version__})") from None
    path = os.path.join(os.path.dirname(mod.__file__), "extensions", "v" + duckdb.__version__,
                        f"{bench.extension}.duckdb_extension")
    if not os.path.exists(path):
        raise DatagenError(f"{path} does not exist: {bench.module} does not match DuckDB "
                           f"{duckdb.__version__}")
    return path


def connect(bench: Benchmark):
    import duckdb

    con = duckdb.connect()
    path = extension_path(bench)
    con.execute(f"LOAD '{_sql_str(path)}'")
    return con


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


def table_columns(con) -> dict[str, list[tuple[str, str]]]:
    """Every table of the connection's main schema with its (column, DuckDB type) list."""
    rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                       "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in rows:
        out.setdefault(table, []).append((column, dtype))
    return out


def contract_schema(columns: Sequence[tuple[str, str]], table: str = "") -> list[dict]:
    try:
        return [{"name": c, "type": contract_type(t)} for c, t in columns]
    except UnsupportedType as e:
        raise DatagenError(f"table {table}: {e}") from None


# ------------------------------------------------------------------ the manifest and the lock


def _manifest(bench: Benchmark, sf: float, fmt: str, rows_per_file: int) -> dict:
    import duckdb

    return {"benchmark": bench.name, "sf": sf, "format": fmt, "rows_per_file": rows_per_file,
            "duckdb": duckdb.__version__, "datagen_version": DATAGEN_VERSION}


def _check_manifest(out: Path, wanted: dict) -> None:
    path = out / "manifest.json"
    if path.exists():
        have = json.loads(path.read_text())
        if have != wanted:
            diff = {k: (have.get(k), v) for k, v in wanted.items() if have.get(k) != v}
            raise DatagenError(f"{out} holds different data ({', '.join(f'{k}: {a!r}, wanted {b!r}' for k, (a, b) in diff.items())}); "
                               f"use another --out directory or remove it")
        return
    tmp = path.with_name(f".manifest.json.{os.getpid()}")
    tmp.write_text(json.dumps(wanted, indent=2) + "\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    with open(out / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------ writing one table


def schema_path(table_dir: Path | str) -> Path:
    """Where the contract schema of the table in folder `table_dir` is: `<table>.schema.json`
    beside the folder, or `schema.json` inside it when only that (the earlier layout) exists."""
    table_dir = Path(table_dir)
    beside = table_dir.with_name(table_dir.name + SCHEMA_SUFFIX)
    legacy = table_dir / LEGACY_SCHEMA
    return legacy if not beside.exists() and legacy.exists() else beside


def read_schema(table_dir: Path | str) -> list[dict]:
    """The contract schema (`[{"name", "type"}, ...]`) of the table in folder `table_dir`, in
    either layout (`schema_path`)."""
    path = schema_path(table_dir)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DatagenError(f"no schema for the table in {table_dir}: neither {path.name} beside it nor "
                           f"{LEGACY_SCHEMA} in it") from None


def _write_table(con, table: str, columns: list[tuple[str, str]], fmt: str, rows_per_file: int,
                 out: Path, advance) -> TableResult:
    rows = con.execute(f"SELECT count(*) FROM {quote_ident(table)}").fetchone()[0]
    files = max(1, math.ceil(rows / rows_per_file))
    advance(table, total=files, rows=rows)
    tmp = out / f".{table}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        select = ", ".join(select_expr(c, t, fmt) for c, t in columns)
        for i in range(files):
            # rowid follows insertion order, so the parts are deterministic and disjoint.
            sql = (f"SELECT {select} FROM {quote_ident(table)} WHERE rowid >= {i * rows_per_file} "
                   f"AND rowid < {(i + 1) * rows_per_file}")
            _write_part(con, sql, fmt, tmp / f"part-{i}.{FORMATS[fmt]}")
            advance(table, done=1)
        fields = [json.dumps(f) for f in contract_schema(columns, table)]
        # Beside the folder, not in it (the module docstring says why), and before the folder is
        # renamed into place: a whole folder always has its schema.
        schema_tmp = out / f".{table}{SCHEMA_SUFFIX}.tmp-{os.getpid()}"
        schema_tmp.write_text("[\n  " + ",\n  ".join(fields) + "\n]\n")
        os.replace(schema_tmp, out / f"{table}{SCHEMA_SUFFIX}")
        try:
            os.rename(tmp, out / table)
        except OSError:
            if not (out / table).is_dir():  # not a concurrent writer finishing first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TableResult(table, rows, files)


def _write_part(con, sql: str, fmt: str, path: Path) -> None:
    if fmt == "json":
        con.execute(f"COPY ({sql}) TO '{_sql_str(str(path))}' (FORMAT json)")
    elif fmt == "parquet":
        con.execute(f"COPY ({sql}) TO '{_sql_str(str(path))}' (FORMAT parquet)")
    elif fmt == "orc":
        import pyarrow.orc as orc

        orc.write_table(con.sql(sql).to_arrow_table(), str(path), **ORC_WRITE_OPTIONS)
    else:
        raise DatagenError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


# ------------------------------------------------------------------ the whole run


def generate(benchmark: str, sf: float, fmt: str, out: Path | str, *, tables: Sequence[str] | None = None,
             rows_per_file: int = DEFAULT_ROWS_PER_FILE, progress: bool = True) -> DatagenResult:
    """Generate `benchmark` (`tpch` or `tpcds`) at scale factor `sf` into `out`, in format `fmt`
    (`json`, `parquet`, `orc`). `tables` restricts which tables are written (default: all)."""
    if benchmark not in BENCHMARKS:
        raise DatagenError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(BENCHMARKS)}")
    if fmt not in FORMATS:
        raise DatagenError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not (sf > 0 and math.isfinite(sf)):
        raise DatagenError(f"the scale factor must be positive, got {sf}")
    if rows_per_file < 1:
        raise DatagenError(f"rows per file must be at least 1, got {rows_per_file}")
    bench = BENCHMARKS[benchmark]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = DatagenResult(out)
    with _locked(out):
        _check_manifest(out, _manifest(bench, sf, fmt, rows_per_file))
        con = connect(bench)
        try:
            con.execute(f"CALL {bench.procedure}(sf=0)")  # empty tables: the schemas, at once
            schemas = table_columns(con)
            wanted = list(schemas) if tables is None else list(tables)
            unknown = [t for t in wanted if t not in schemas]
            if unknown:
                raise DatagenError(f"{benchmark} has no table {', '.join(map(repr, unknown))}; "
                                   f"its tables: {', '.join(schemas)}")
            for t in wanted:
                contract_schema(schemas[t], t)  # an unmappable type fails before any work
            todo = [t for t in wanted if not (out / t).is_dir()]
            result.tables = [TableResult(t, skipped=True) for t in wanted if t not in todo]
            if not todo:
                return result
            with _Progress(progress, benchmark, sf, fmt, todo) as bar:
                t0 = time.monotonic()
                con.execute(f"CALL {bench.procedure}(sf={sf!r}, overwrite=true)")
                result.generate_s = time.monotonic() - t0
                bar.generated()
                for t in todo:
                    result.tables.append(_write_table(con, t, schemas[t], fmt, rows_per_file, out, bar.advance))
                result.write_s = time.monotonic() - t0 - result.generate_s
        finally:
            con.close()
    return result


class _Progress:
    """A Rich progress bar per table (files written), after one for DuckDB's generation step."""

    def __init__(self, enabled: bool, benchmark: str, sf: float, fmt: str, tables: list[str]) -> None:
        self.enabled = enabled
        self.tables = tables
        self.title = f"{benchmark} sf={sf:g} → {fmt}"
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[note]}"), TimeElapsedColumn())
            self.bar.start()
            self.gen = self.bar.add_task(f"{self.title}: generating", total=1, note="")
            self.tasks = {t: self.bar.add_task(f"  {t}", total=None, note="") for t in self.tables}
        return self

    def generated(self) -> None:
        if self.enabled:
            self.bar.update(self.gen, completed=1, note="in DuckDB")

    def advance(self, table: str, total: int | None = None, rows: int | None = None, done: int = 0) -> None:
        if not self.enabled:
            return
        task = self.tasks[table]
        if total is not None:
            self.bar.update(task, total=total, note=f"{rows:,} rows")
        if done:
            self.bar.advance(task, done)

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.bar.stop()
