"""Real text for the scrub corpus: the running Python's standard library, its docstrings and reference docs.

Nothing but Python is needed (``sysconfig.get_paths()["stdlib"]``): real
English about code, and real code, that the rules must let pass.
"""

from __future__ import annotations

import ast
import functools
import random
import sysconfig
from pathlib import Path

_SKIP_DIRS = frozenset(
    {
        "test",
        "tests",
        "idle_test",
        "site-packages",
        "encodings",
        "__pycache__",
        "turtledemo",
        "lib2to3",
        "idlelib",
    }
)


@functools.cache
def _stdlib_sources() -> tuple[str, ...]:
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(
        p for p in root.rglob("*.py") if not _SKIP_DIRS.intersection(p.relative_to(root).parts[:-1])
    )
    return tuple(p.read_text(encoding="utf-8", errors="replace") for p in paths)


@functools.cache
def _docstrings() -> tuple[str, ...]:
    found: list[str] = []
    for source in _stdlib_sources():
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        found.extend(
            doc
            for node in ast.walk(tree)
            if isinstance(node, nodes) and (doc := ast.get_docstring(node)) and len(doc) > 200
        )
    return tuple(found)


@functools.cache
def _reference_docs() -> tuple[str, ...]:
    try:
        from pydoc_data.topics import topics  # noqa: PLC0415  (large: loaded only for traffic)
    except ImportError:  # some distributions leave pydoc_data out
        return ()
    return tuple(topics[name] for name in sorted(topics))


def _lines(text: str, rng: random.Random, low: int, high: int) -> str:
    """A run of whole lines of ``text`` of about ``low`` to ``high`` characters (all of it if shorter)."""
    if len(text) <= high:
        return text
    start = text.rfind("\n", 0, rng.randrange(0, len(text) - low)) + 1
    end = text.find("\n", start + rng.randrange(low, high))
    return text[start : end if end != -1 else len(text)]


def stdlib_code(rng: random.Random) -> str:
    return _lines(rng.choice(_stdlib_sources()), rng, 800, 8000)


def stdlib_prose(rng: random.Random) -> str:
    docs = _reference_docs()
    if docs and rng.random() < 0.5:
        return _lines(rng.choice(docs), rng, 500, 6000)
    return rng.choice(_docstrings())
