"""C code generation for software NCAs: typed trees -> C through Jinja2 templates (ncas/templates).

- `generate_scan_query(ops, layout)`: the query file of a JSON scan NCA (read + filters/projects);
- `ExprCompiler` (expr.py): typed expression -> C statements yielding (value, null flag)
  temporaries; reused by every template that evaluates expressions;
- `emit_tuple` (output.py): write one NTF tuple from evaluated values.

Golden files of generated C live in tests/unit/golden/; regenerate them with
`python -m jumpgate.ncas.software.codegen.golden --update`.
"""
from __future__ import annotations

from .csyntax import CodegenError, CValue, FunctionBody, LiteralPool
from .expr import Env, ExprCompiler, count_subtrees
from .output import emit_tuple
from .scan import generate_scan_query, plan_scan

__all__ = ["CodegenError", "CValue", "Env", "ExprCompiler", "FunctionBody", "LiteralPool", "count_subtrees",
           "emit_tuple", "generate_scan_query", "plan_scan"]
