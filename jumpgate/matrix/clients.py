"""The support matrix's sections on the clients: the Spark plugin (tables in spark.py, checked
against its Scala sources) and the Python client (from jumpgate/client/builder.py itself)."""
from __future__ import annotations

import inspect

from ..client import builder
from ..client.errors import BuilderError
from . import spark
from .ncas import NO, YES, table

STATUS = {"yes": YES, "partly": f"{YES} partly", "incompatible": "incompatible", "no": NO}


def spark_section() -> list[str]:
    lines = ["## Apache Spark (clients/spark)", "",
             "What the plugin translates into requests (docs/spark.md). A node it cannot translate, and "
             "everything above it, runs in Spark; `EXPLAIN EXTENDED` says why. *partly*: in the cases the note "
             "says; *incompatible*: results can differ from Spark's in corner cases, so it is translated only "
             "with `spark.jumpgate.allowIncompatible=true`.", "", "### Operators", ""]
    lines += table(["Spark operator", "converter", "becomes", "when"],
                   [(f"`{op}`", f"`{conv}`", ops, when) for op, conv, ops, when in spark.OPERATORS])
    lines += ["", "Not offloaded:", ""]
    lines += [f"- `{ops}`: {why}" for ops, why in spark.OPERATORS_NOT]
    lines += ["", "### Expressions (Catalyst)", ""]
    lines += table(["expression", "offloaded", "note"],
                   [(f"`{name}`", STATUS[status], note) for name, (status, note) in spark.EXPRESSIONS.items()])
    lines += ["", "Any other expression stays in Spark (*expression X is not supported*), and so does one whose "
              "type has no contract type (below).", "", "### Casts", ""]
    lines += table(["from", "to", "offloaded", "note"],
                   [(src, dst, STATUS[status], note) for _, src, dst, status, note in spark.CASTS])
    lines += ["", f"{spark.CAST_OTHERWISE[0].upper()}{spark.CAST_OTHERWISE[1:]}.", "", "### Aggregate functions", "",
              "In a partial `HashAggregateExec` (Spark's final aggregation stays in Spark):", ""]
    lines += table(["function", "becomes", "note"],
                   [(f"`{name}`", f"`{fn}`" if "," not in fn else ", ".join(f"`{f.strip()}`" for f in fn.split(",")),
                     note) for name, (fn, note) in spark.AGGREGATES.items()])
    lines += ["", "Not offloaded: " + "; ".join(f"{what} (*{why}*)" for what, why in spark.AGGREGATES_NOT.items()) +
              "; any other function. A query's `count(DISTINCT x)` still offloads its bottom: Spark plans it "
              "with an aggregation by the keys and x first, which has no DISTINCT.", "", "### Types", ""]
    lines += table(["Spark type", "contract type", "note"],
                   [(f"`{name}`", f"`{ct}`", note) for name, (ct, note) in spark.TYPES.items()])
    lines += ["", f"Not offloaded: {spark.TYPES_NOT}."]
    return lines


# pyarrow types a schema may hold: (as written, how to make it)
_ARROW_TYPES = (("pa.bool_()", lambda pa: pa.bool_()), ("pa.int8()", lambda pa: pa.int8()),
                ("pa.int16()", lambda pa: pa.int16()), ("pa.int32()", lambda pa: pa.int32()),
                ("pa.int64()", lambda pa: pa.int64()), ("pa.float32()", lambda pa: pa.float32()),
                ("pa.float64()", lambda pa: pa.float64()), ("pa.string()", lambda pa: pa.string()),
                ("pa.large_string()", lambda pa: pa.large_string()), ("pa.date32()", lambda pa: pa.date32()),
                ("pa.date64()", lambda pa: pa.date64()), ("pa.timestamp('us')", lambda pa: pa.timestamp("us")),
                ("pa.decimal128(12, 2)", lambda pa: pa.decimal128(12, 2)),
                ("pa.decimal128(38, 2)", lambda pa: pa.decimal128(38, 2)), ("pa.binary()", lambda pa: pa.binary()))


def _arrow_rows() -> list[tuple[str, str, str]]:
    """What the builder makes of a pyarrow schema's types: asked of `builder._type_name` itself."""
    import pyarrow as pa

    rows = []
    for spelled, make in _ARROW_TYPES:
        try:
            rows.append((f"`{spelled}`", YES, f"`{builder._type_name(make(pa), 'c')}`"))
        except BuilderError as e:
            why = str(e).split(": ", 1)[-1]
            rows.append((f"`{spelled}`", NO, "no contract type" if "no contract equivalent" in why else why))
    return rows


def python_section() -> list[str]:
    methods = [n for n, m in inspect.getmembers(builder.Dataflow, inspect.isfunction)
               if not n.startswith("_") and n in builder.Dataflow.__dict__]
    lines = ["## Python (jumpgate.client)", "",
             "The fluent builder writes requests; expressions are passed as text and the server parses them, so "
             "the request language above is what it supports (its reference checks catch misspelt columns "
             "early).", "",
             "- **Operations**: `read` (`Jumpgate.read`), " + ", ".join(f"`{m}`" for m in methods
                                                                          if m in ("filter", "project", "join",
                                                                                   "aggregate", "shuffle", "send"))
             + "; to run: " + ", ".join(f"`{m}`" for m in methods if m in ("collect", "to_pandas", "explain")) + ".",
             "- **Join types**: " + ", ".join(f"`{t}`" for t in builder.JOIN_TYPES) + ".",
             "- **Aggregates**: " + ", ".join(f"`{f}`" for f in builder.AGG_FUNCTIONS) +
             " as `name=\"fn(expr)\"` (`count(*)` is `count_star`, `count(DISTINCT x)` a DISTINCT count), "
             "`(\"fn\", \"expr\")` or dicts; modes " + ", ".join(f"`{m}`" for m in builder.AGG_MODES) + ".",
             "- **Types** in a schema: the contract names (`int32`, `decimal(12,2)`, ...), or a `pyarrow.Schema`:", ""]
    lines += table(["pyarrow type", "taken", "as"], _arrow_rows())
    lines += ["", "Not supported, because the contract has no such operation: sorting, limits, unions, window "
              "functions, DISTINCT rows (an `aggregate` with `group_by` only gives them)."]
    return lines
