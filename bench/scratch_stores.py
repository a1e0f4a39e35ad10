"""The stores a section measures side by side: SQLite plain and encrypted, and PostgreSQL plain and
encrypted in scratch schemas (dropped after) when a server answers — one place, every section."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pg_server

from safepoint import Keyring

Made = list[tuple[str, str, dict[str, Any]]]  # (name, url, open_store options)


@contextmanager
def scratch_stores(prefix: str, pg_url: str | None, keys: str, more: Made | None = None) -> Iterator[Made]:
    """(name, url, options) of each store; ``more`` (SQLite ones, ``{tmp}`` in the url filled in)
    go after the two SQLite stores. PostgreSQL's schemas are named ``prefix`` and dropped after."""
    sealed = {"encryption": Keyring.from_text(keys)}
    with tempfile.TemporaryDirectory(prefix=f"safepoint-{prefix}-bench-") as tmp:
        made: Made = [
            ("SQLite", f"sqlite:///{tmp}/plain.db", {}),
            ("SQLite + encrypted", f"sqlite:///{tmp}/sealed.db", sealed),
            *((name, url.format(tmp=tmp), options) for name, url, options in more or ()),
        ]
        schemas: list[str] = []
        if pg_url is not None and pg_server.unreachable(pg_url) is None:
            for name, options in (("PostgreSQL", {}), ("PostgreSQL + encrypted", sealed)):
                schemas.append(pg_server.schema_name(prefix))
                made.append((name, f"{pg_url}{'&' if '?' in pg_url else '?'}schema={schemas[-1]}", options))
        try:
            yield made
        finally:
            for schema in schemas:
                pg_server.drop_schema(pg_url, schema)  # type: ignore[arg-type]
