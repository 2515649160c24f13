"""The Jinja2 environment over ncas/templates/ (the C skeletons of software NCAs).

Templates only arrange generated C (tables, function bodies) that the Python generators produce
from typed trees; no request text is ever handed to a template except as `c_bytes` output.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import jinja2

TEMPLATE_DIR = Path(os.environ.get("JUMPGATE_TEMPLATE_DIR", Path(__file__).resolve().parents[4] / "ncas" / "templates"))


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # C, not HTML; every value is generated C
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
