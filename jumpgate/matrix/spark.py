"""The Spark plugin's part of the support matrix: what clients/spark translates, as tables kept
beside the Scala code they describe. Parsing Scala is out of reach, so these tables are written by
hand and tests/unit/test_support_matrix.py reads the Scala sources (`scala_*` below) and fails when
they disagree: a Catalyst expression, cast, aggregate function, type or operator converter added
or removed there must be added or removed here, with its status.

Statuses: `yes` (always translated), `partly` (translated in the cases the note says; otherwise it
stays in Spark with the reason EXPLAIN shows), `incompatible` (results can differ from Spark's in
corner cases: translated only with spark.jumpgate.allowIncompatible=true), `no` (stays in Spark).
"""
from __future__ import annotations

import re
from pathlib import Path

SPARK_SRC = Path(__file__).resolve().parents[2] / "clients" / "spark" / "src" / "main" / "scala"
PLANNER = SPARK_SRC / "io" / "jumpgate" / "spark" / "planner"

# Catalyst expression -> (status, note). Every expression's type must also have a contract type
# (TYPES below); any expression not listed stays in Spark ("expression X is not supported").
EXPRESSIONS: dict[str, tuple[str, str]] = {
    "AttributeReference": ("yes", "a column of the offloaded subtree's input"),
    "Alias": ("yes", ""),
    "Literal": ("partly", "boolean, int, long, double (not NaN or infinite), decimal, string, date; NULL"),
    "KnownNotNull": ("yes", ""),
    "And": ("yes", ""),
    "Or": ("yes", ""),
    "Not": ("yes", ""),
    "EqualTo": ("yes", ""),
    "LessThan": ("yes", ""),
    "LessThanOrEqual": ("yes", ""),
    "GreaterThan": ("yes", ""),
    "GreaterThanOrEqual": ("yes", ""),
    "EqualNullSafe": ("yes", "`<=>`, as a CASE"),
    "IsNull": ("yes", ""),
    "IsNotNull": ("yes", ""),
    "In": ("partly", "a list of literals only"),
    "InSet": ("yes", ""),
    "Add": ("partly", "decimals only when Spark's result scale is Jumpgate's (the larger scale)"),
    "Subtract": ("partly", "decimals only when Spark's result scale is Jumpgate's (the larger scale)"),
    "Multiply": ("partly", "decimals only when Spark's result scale is Jumpgate's (the sum of the scales)"),
    "Divide": ("partly", "only with a double result (Jumpgate divides in float64)"),
    "Remainder": ("partly", "integers and decimals; of doubles incompatible (float remainder)"),
    "UnaryMinus": ("yes", ""),
    "Abs": ("yes", ""),
    "Cast": ("partly", "the casts below"),
    "UnscaledValue": ("yes", "Spark's rewrite of decimal sums"),
    "CaseWhen": ("yes", ""),
    "If": ("yes", ""),
    "Coalesce": ("yes", ""),
    "Like": ("partly", "a literal pattern without an escape character or a backslash"),
    "StartsWith": ("partly", "a literal without `%`, `_` or `\\`"),
    "EndsWith": ("partly", "a literal without `%`, `_` or `\\`"),
    "Contains": ("partly", "a literal without `%`, `_` or `\\`"),
    "Substring": ("partly", "a literal start of at least 1 and a literal length of at least 0"),
    "Length": ("partly", "of a string"),
    "Lower": ("incompatible", "Unicode case mapping differs"),
    "Upper": ("incompatible", "Unicode case mapping differs"),
    "Year": ("partly", "of a date"),
    "Month": ("partly", "of a date"),
    "DayOfMonth": ("partly", "of a date"),
    "KnownFloatingPointNormalized": ("incompatible", "NaN/-0.0 normalization of a float key"),
    "SubqueryExpression": ("no", "references the result of a subquery"),
    "PlanExpression": ("no", "references the result of a subquery"),
}

# ExprTranslator.cast: the Scala pattern of each case (the test compares them in order) ->
# (from, to, status, note).
CASTS: list[tuple[str, str, str, str, str]] = [
    ("(a, b) if a == b", "any type", "the same type", "yes", "dropped"),
    ("(NullType, _)", "NULL", "any contract type", "yes", ""),
    ("(IntegerType, LongType | DoubleType | _: DecimalType)", "int", "long, double, decimal", "yes", ""),
    ("(LongType, DoubleType | _: DecimalType)", "long", "double, decimal", "yes", ""),
    ("(a: DecimalType, b: DecimalType) if b.scale >= a.scale", "decimal", "decimal of a larger or equal scale",
     "yes", ""),
    ("(_: DecimalType, _: DecimalType)", "decimal", "decimal of a smaller scale", "yes",
     "rounds half away from zero, as Spark's HALF_UP"),
    ("(a: DecimalType, DoubleType) if a.precision <= 15", "decimal of at most 15 digits", "double", "yes", ""),
    ("(_: DecimalType, DoubleType)", "decimal of more than 15 digits", "double", "incompatible",
     "two roundings may differ from Spark's one"),
    ("(DateType, _: StringType)", "date", "string", "yes", ""),
    ("(IntegerType | LongType, _: StringType)", "int, long", "string", "yes", ""),
]
CAST_OTHERWISE = "any other cast stays in Spark"

# Spark type -> (contract type, note); Types.contractType. Other types have no contract type.
TYPES: dict[str, tuple[str, str]] = {
    "BooleanType": ("boolean", ""),
    "IntegerType": ("int32", ""),
    "LongType": ("int64", ""),
    "DoubleType": ("float64", ""),
    "DateType": ("date", ""),
    "DecimalType": ("decimal(p,s)", "precision at most 38 (more than 18: a wide decimal, 16 bytes in NTF; "
                    "sums and averages of decimals from 9 digits on buffer in one)"),
    "StringType": ("string", "the binary (UTF8_BINARY) collation only"),
}
TYPES_NOT = ("ByteType, ShortType and FloatType (no contract type of their width), TimestampType, "
             "TimestampNTZType, BinaryType, arrays, maps, structs, intervals: no contract type")

# Spark physical operator -> (converter, contract operations, conditions); Converters.all.
OPERATORS: list[tuple[str, str, str, str]] = [
    ("FileSourceScanExec", "FileScanConverter", "read",
     "JSON Lines, ORC or Parquet; not partitioned or bucketed; files under the server's data root; JSON "
     "reader options only those that choose files; no metadata columns"),
    ("FilterExec", "FilterConverter", "filter", "its condition translates"),
    ("ProjectExec", "ProjectConverter", "project", "every expression translates"),
    ("BroadcastHashJoinExec", "BroadcastHashJoinConverter", "join (+ a renaming project)",
     "inner, left/right outer, left semi, left anti with the build side under its broadcast; not a "
     "null-aware anti join (NOT IN)"),
    ("HashAggregateExec", "PartialAggregateConverter", "aggregate (partial) + project",
     "Partial mode: Spark's final aggregation merges Jumpgate's partial states"),
]
OPERATORS_NOT: list[tuple[str, str]] = [
    ("ShuffleExchangeExec", "Spark's hash partitioning would have to be reproduced; Jumpgate's shuffle only "
     "spreads one job's output"),
    ("SortMergeJoinExec, ShuffledHashJoinExec", "both sides arrive through Spark shuffles"),
    ("HashAggregateExec (final, merge), ObjectHashAggregateExec, SortAggregateExec",
     "they read a Spark shuffle; the contract has the partial states of sum, count, min, max, avg only"),
    ("SortExec, TakeOrderedAndProjectExec, LimitExec, WindowExec, UnionExec, ExpandExec, GenerateExec",
     "the contract has no such operation"),
]

# Aggregate functions of PartialAggregateConverter -> (contract function, note).
AGGREGATES: dict[str, tuple[str, str]] = {
    "Sum": ("sum", "of doubles incompatible (the order of additions differs)"),
    "Count": ("count, count_star", "of one expression"),
    "Min": ("min", ""),
    "Max": ("max", ""),
    "Average": ("avg", "of doubles incompatible (the order of additions differs)"),
}
# What the converter refuses in any aggregate function, with the text of its reason.
AGGREGATES_NOT: dict[str, str] = {
    "DISTINCT": "DISTINCT aggregate",
    "FILTER (WHERE ...)": "aggregate with FILTER",
}


# --- reading the Scala sources (for the test) ---------------------------------------------------

_CASE = re.compile(r"^(\s*)case (?:(?:\w+|_): )?([A-Z]\w*)")


def _body(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i:text.index(end, i)]


def scala_cases(body: str, indent: int) -> dict[str, list[str]]:
    """The `case` blocks at `indent` spaces of a Scala match: type name -> the text of each block
    (from its `case` to the next one), for the cases that name a type (`case a: Alias`, `case
    And(l, r)`, `case _: In`)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        stripped = len(line) - len(line.lstrip(" "))
        if stripped == indent and line.lstrip().startswith("case "):
            m = _CASE.match(line)
            current = out.setdefault(m.group(2), []) if m else None
            if current is not None:
                current.append("")
        if current is not None:
            current[-1] += line + "\n"
    return out


def scala_expressions() -> dict[str, list[str]]:
    text = (PLANNER / "ExprTranslator.scala").read_text()
    return scala_cases(_body(text, "    e match {", "  /** + - * %"), 6)


def scala_casts() -> list[str]:
    text = (PLANNER / "ExprTranslator.scala").read_text()
    body = _body(text, "  private def cast(c: Cast): R = {", "  private def likeOf(")
    return [m.group(1) for m in re.finditer(r"^\s+case (\(.*\)(?: if .*?)?) =>", body, re.M)]


def scala_aggregates() -> tuple[set[str], str]:
    text = (PLANNER / "Converters.scala").read_text()
    body = _body(text, "  private def lowerFunction(", "  def convert(")
    return set(scala_cases(body[body.index("ae.aggregateFunction match {"):], 6)), body


def scala_types() -> set[str]:
    text = (PLANNER / "Types.scala").read_text()
    body = _body(text, "  def contractType(", "  def supported(")
    return {m.group(1) for m in re.finditer(r"case (?:\w+: )?(\w+Type)\b", body)}


def scala_operators() -> dict[str, str]:
    """Converter object -> the Spark class its `matches` takes, for the converters in `all`."""
    text = (PLANNER / "Converters.scala").read_text()
    names = re.search(r"val all: Seq\[OperatorConverter\] =\s*Seq\(([^)]*)\)", text).group(1)  # type: ignore[union-attr]
    out = {}
    for name in (n.strip() for n in names.split(",")):
        block = text[text.index(f"object {name} extends OperatorConverter"):]
        matches = block[block.index("def matches"):block.index("\n\n", block.index("def matches"))]
        m = re.search(r"isInstanceOf\[(\w+)\]|case \w+: (\w+) =>", matches)
        out[name] = (m.group(1) or m.group(2)) if m else ""
    return out
