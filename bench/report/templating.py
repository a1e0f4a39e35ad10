"""The report's templates (``report/templates/*.md.j2``): Jinja2, with the report's formatting as filters.

Each part of docs/benchmarks.md is a template holding its prose and tables;
the Python beside it only computes the numbers and rows it shows. Filters:
``ms``, ``x`` (a ratio), ``size`` (bytes), ``fmt("spec")`` (any format spec,
e.g. ``fmt(",")``, ``fmt(".1f")``), ``median``; globals: ``table(head, rows)``,
``targets_table(targets)``, ``TIMES``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import jinja2

from report import fmt

TEMPLATES = Path(__file__).resolve().parent / "templates"

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    # Markdown, not HTML: nothing to escape, and the text must come out as written.
    autoescape=False,
    undefined=jinja2.StrictUndefined,  # a name missing from the context fails the report, not blanks it
    keep_trailing_newline=True,
    # A line holding only a {% tag %} leaves nothing in the output, not even its line break.
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(ms=fmt.ms, x=fmt.x, size=fmt.size, fmt=format, median=statistics.median)
_ENV.globals.update(table=fmt.table, targets_table=fmt.targets_table, TIMES=fmt.TIMES)


def render(name: str, **context: Any) -> str:
    """The template ``name`` (under ``report/templates``) filled in with ``context``."""
    return _ENV.get_template(name).render(**context)
