"""The Jinja2 environment over ncas/templates/ (the C skeletons of software NCAs).

Templates only arrange generated C (tables, function bodies) that the Python generators produce
from typed trees; no request text is ever handed to a template except as `c_bytes` output.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

from ..toolchain import nca_sources_dir
from .csyntax import LiteralPool
from .messages import GeneratedSource


def template_dir() -> Path:
    return nca_sources_dir() / "templates"


@lru_cache(maxsize=4)
def _environment(directory: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # C, not HTML; every value is generated C
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def environment() -> jinja2.Environment:
    return _environment(str(template_dir()))


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)


def render_query(name: str, pool: LiteralPool, **context) -> GeneratedSource:
    """A query file from template `name`: the pool's literals declared in it, its message table
    carried beside it (messages.py), for the process's configuration."""
    return GeneratedSource(render(name, literals=pool.declarations(), **context), pool.messages.texts)
