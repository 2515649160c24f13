"""DuckDB column types → contract types (contract §1 "Types"), and the SELECT expression that writes
a column so that the file holds exactly what the schema says.

Every DuckDB type the TPC generators produce is mapped explicitly; anything else fails loudly
rather than being guessed (a wrong schema would make every answer over the data suspect).
"""
from __future__ import annotations

import re

_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
MAX_DECIMAL_PRECISION = 18  # contract: decimal(p,s) with 1 <= p <= 18
# DuckDB writes a DECIMAL to JSON as a number through a double. A double keeps 15 significant
# decimal digits exactly, so for p <= 15 the text, read exactly and rounded to scale s (as the
# contract's reader does), is the original value. Wider decimals are written as numeric strings.
EXACT_JSON_NUMBER_DIGITS = 15

# DuckDB type -> (contract type, the DuckDB type the file is written with)
_SIMPLE = {
    "BOOLEAN": ("boolean", "BOOLEAN"),
    "TINYINT": ("int32", "INTEGER"),
    "SMALLINT": ("int32", "INTEGER"),
    "INTEGER": ("int32", "INTEGER"),
    "UTINYINT": ("int32", "INTEGER"),
    "USMALLINT": ("int32", "INTEGER"),
    "BIGINT": ("int64", "BIGINT"),
    "UINTEGER": ("int64", "BIGINT"),
    "FLOAT": ("float64", "DOUBLE"),
    "DOUBLE": ("float64", "DOUBLE"),
    "VARCHAR": ("string", "VARCHAR"),
    "DATE": ("date", "DATE"),
}


class UnsupportedType(ValueError):
    pass


def contract_type(duckdb_type: str) -> str:
    """The contract type of a DuckDB column type, e.g. `DECIMAL(15,2)` → `decimal(15,2)`."""
    return _map(duckdb_type)[0]


def _map(duckdb_type: str) -> tuple[str, str]:
    t = duckdb_type.strip().upper()
    if t.startswith("CHAR(") or t.startswith("VARCHAR("):  # DuckDB reports both as VARCHAR today
        t = "VARCHAR"
    if t in _SIMPLE:
        return _SIMPLE[t]
    m = _DECIMAL.fullmatch(t)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        if p > MAX_DECIMAL_PRECISION:
            raise UnsupportedType(f"{duckdb_type}: the contract's decimals have at most "
                                  f"{MAX_DECIMAL_PRECISION} digits")
        return f"decimal({p},{s})", f"DECIMAL({p},{s})"
    raise UnsupportedType(f"DuckDB type {duckdb_type} has no contract type (contract §1 'Types'); "
                          f"map it explicitly in jumpgate/datagen/types.py")


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def select_expr(column: str, duckdb_type: str, file_format: str) -> str:
    """The expression that writes `column`: cast to the written type when DuckDB's differs (so a
    Parquet or ORC file carries the schema's type), and wide decimals as strings in JSON."""
    _, written = _map(duckdb_type)
    col = quote_ident(column)
    m = _DECIMAL.fullmatch(written)
    if file_format == "json" and m and int(m.group(1)) > EXACT_JSON_NUMBER_DIGITS:
        return f"CAST({col} AS VARCHAR) AS {col}"
    if written != duckdb_type.strip().upper():
        return f"CAST({col} AS {written}) AS {col}"
    return col
