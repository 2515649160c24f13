"""The software NCAs' entries in the support matrix (jumpgate/nca/support.py), from the tables the
code generator dispatches on, so that the matrix lists what the generated C really handles:

- a value type when it has a C representation (`codegen.csyntax._C_TYPE`);
- an expression construct when its tree node has a handler (`codegen.expr.HANDLERS`);
- a function when `codegen.functions.FUNCS` generates it;
- an aggregate function and mode when the aggregation's generator has an accumulator for it and
  a mode constant (`codegen.aggregate._MODE`).

Every software NCA evaluates expressions with the same generator (filters, projections, join
conditions, group keys, shuffle keys), so they differ only in their operations and in whether
they aggregate.
"""
from __future__ import annotations

from collections.abc import Mapping

from ...contract.types import Kind
from ...dataflow import language
from ...dataflow.plan import AggFn
from ...nca.support import Support
from .codegen import aggregate as agg_codegen
from .codegen.csyntax import _C_TYPE
from .codegen.expr import HANDLERS
from .codegen.functions import FUNCS

NO_AGGREGATES = "does not aggregate (software.aggregate and the file scans do)"


def codegen_support(operations: Mapping[str, str], aggregates: bool) -> Support:
    """The support of a software NCA that takes `operations` (kind -> note) and, if `aggregates`,
    runs aggregations."""
    types = {k.value: "" for k in Kind if k in _C_TYPE}
    expressions = {c.id: "" for c in language.CONSTRUCTS if c.node in HANDLERS}
    functions = {f.name: "" for f in language.FUNCTION_LIST if f.name in FUNCS}
    aggs: dict[str, str] = {}
    why_not: dict[str, str] = {}
    for fn in AggFn:
        if aggregates:
            aggs[fn.value] = ""
        else:
            why_not[fn.value] = NO_AGGREGATES
    for mode in agg_codegen._MODE:
        if aggregates:
            aggs[mode.value] = "bounded table, evicting when full" if mode.value == "partial" else ""
        else:
            why_not[mode.value] = NO_AGGREGATES
    return Support(operations=dict(operations), types=types, expressions=expressions, functions=functions,
                   aggregates=aggs, why_not=why_not,
                   why_not_default="no C code generation for it (jumpgate/ncas/software/codegen)")


__all__ = ["NO_AGGREGATES", "codegen_support"]
