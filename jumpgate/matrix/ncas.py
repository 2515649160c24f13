"""The support matrix's sections on the request language and on the registered NCA implementations
(jumpgate/nca/support.py has what each implementation declares, jumpgate/dataflow/language.py
the items)."""
from __future__ import annotations

from collections.abc import Sequence

from ..dataflow import language
from ..dataflow.aggregates import DISTINCT_FUNCTIONS
from ..nca.registry import Registry
from ..nca.support import Support

KINDS = ("read", "filter", "project", "join", "aggregate", "shuffle")
YES, NO = "✓", "✗"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows]
    return out


def language_section() -> list[str]:
    lines = ["## The request language", "",
             "What a request may say at all (contract §1, with this implementation's additions); the sections "
             "after it say which NCA runs what.", "",
             "**Types**: " + ", ".join(f"`{language.type_label(t)}`" for t in language.TYPES) + ".", "",
             "**Expressions**:", ""]
    lines += table(["construct", "written", "example"],
                   [(c.id, c.syntax, f"`{c.example}`") for c in language.CONSTRUCTS])
    lines += ["", "**Functions**:", ""]
    lines += table(["function", "gives", "example"],
                   [(f"`{f.signature}`", f.result, f"`{f.example}`") for f in language.FUNCTION_LIST])
    lines += ["", "**Aggregates** (`fn` of an `aggregate`; modes " +
              ", ".join(f"`{m}`" for m in language.MODES) + "):", ""]
    rows = []
    for fn in language.AGGREGATES:
        takes, gives = language.aggregate_inputs(fn)
        distinct = YES if fn in language.DISTINCT_AGGREGATES else NO
        rows.append((f"`{fn}`", takes, gives, distinct))
    lines += table(["aggregate", "takes", "gives", "`DISTINCT`"], rows)
    names = ", ".join(f"`{fn.value}`" for fn in DISTINCT_FUNCTIONS)
    lines += ["", f"`DISTINCT` ({names}, written `\"expr\": \"DISTINCT x\"` or, in the Python client, "
              "`count(DISTINCT x)`): complete mode only (a partial state would have to carry the values), one "
              "expression for all the DISTINCT aggregates of an operation (the second is rejected naming its "
              "path); the compiler runs it as an aggregation by the keys and x, then one by the keys, so every "
              "NCA that aggregates runs it (jumpgate/compiler/distinct.py).", "",
              "**Not in the language** (the parser rejects them by name): " +
              ", ".join(f"`{n}`" if not n.startswith(("other", "'")) else n for n in language.NOT_IN_LANGUAGE) + "."]
    return lines


def _cell(support: Support | None, dimension: str, item: str) -> tuple[str, str]:
    """(the cell, the reason when it is not supported)."""
    if support is None:
        return "?", "not declared by the plugin"
    ok, text = support.verdict(dimension, item)
    if ok:
        return (f"{YES} {text}" if text else YES), ""
    return NO, text


def grid(registry: Registry, title: str, dimension: str, rows: Sequence[tuple[str, str]]) -> list[str]:
    """`rows` (item, label) by implementation; implementations that answer alike share a column,
    and what they do not take is listed under the table with the reason."""
    columns: dict[tuple, list[str]] = {}
    for impl in registry.all():
        support = impl.support()
        cells = tuple(_cell(support, dimension, item) for item, _ in rows)
        columns.setdefault(cells, []).append(impl.name)
    header = [title] + [", ".join(f"`{n}`" for n in names) for names in columns.values()]
    body = [[label] + [cells[i][0] for cells in columns] for i, (_, label) in enumerate(rows)]
    lines = table(header, body)
    notes = []
    for cells, names in columns.items():
        by_reason: dict[str, list[str]] = {}
        for (_, label), (_, why) in zip(rows, cells, strict=True):
            if why:
                by_reason.setdefault(why, []).append(label)
        for why, labels in by_reason.items():
            notes.append(f"- {', '.join(f'`{n}`' for n in names)}: not {', '.join(labels)}: {why}.")
    return lines + ([""] + notes if notes else [])


def nca_section(registry: Registry) -> list[str]:
    lines = ["## NCA implementations", "",
             "From the registered plugins (entry points `jumpgate.ncas`): a mark means the implementation may "
             "take the operation; its operator interface decides per request and says why not in the job's "
             "`decisions`. The tables below are each plugin's own declaration (`support()`, "
             "jumpgate/nca/support.py), which the built-in plugins derive from the tables their code "
             "generators dispatch on.", ""]
    lines += table(["implementation", *KINDS, "description"],
                   [[f"`{impl.name}`", *(YES if k in impl.operation_kinds else "" for k in KINDS), impl.description]
                    for impl in registry.all()]
                   + [[f"`{name}`", *("" for _ in KINDS), f"failed to load: {why}"]
                      for name, why in sorted(registry.problems.items())])
    lines += ["", "### What each takes of its operations", ""]
    for impl in registry.all():
        support = impl.support()
        ops = "not declared" if support is None else "; ".join(
            f"**{kind}**" + (f": {note}" if note else "") for kind, note in support.operations.items())
        lines.append(f"- `{impl.name}`: {ops}")
    types = [(t, f"`{language.type_label(t)}`") for t in language.TYPES]
    constructs = [(c.id, c.id) for c in language.CONSTRUCTS]
    functions = [(f.name, f"`{f.name}`") for f in language.FUNCTION_LIST]
    aggregates = [(fn, f"`{fn}`") for fn in language.AGGREGATES] + [(m, f"{m} mode") for m in language.MODES]
    for title, dimension, rows in (("Types", "types", types), ("Expressions", "expressions", constructs),
                                   ("Functions", "functions", functions),
                                   ("Aggregates", "aggregates", aggregates)):
        lines += ["", f"### {title}", ""] + grid(registry, title.lower().rstrip("s"), dimension, rows)
    return lines
