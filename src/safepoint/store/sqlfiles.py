"""Named queries and numbered DDL revisions, read from the ``.sql`` files of a dialect.

A queries file holds blocks that each start with ``-- name: <query>``; a DDL
folder holds forward-only revisions named ``NNNN_what.sql``. Nothing here
builds SQL text: the files are the SQL.

An operation's query (``queries.sql``, PostgreSQL's ``save.sql``) opens with
its spec (``query_specs.QuerySpec``), in comment lines right after its name and
before the comments that say why::

    -- name: claim
    -- params: worker_id, now, expires_at
    -- returns: run_id, epoch, expires_at, attempts
    -- ends: transaction
    -- One statement: take the oldest queued run ...

``params`` are the parameters an operation passes, ``returns`` the result
columns in order (each an attribute of the named row the operation gets
back); ``none`` and ``nothing`` say there are none. A list ending with a
comma goes on over the next comment line. ``-- ends: transaction`` marks a
statement that is the whole of its operation's write (a driver may commit
with it), and ``-- optional: yes`` one a dialect may lack. Each dialect
writes the same header for the same query; ``tests/test_query_specs.py``
holds them to it and to what the SQL really returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_REVISION = re.compile(r"^(\d{4})_(\w+)\.sql$")


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """``{name: sql}`` for every ``-- name:`` block of ``package``/``filename``."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{package}/{filename}: query {name!r} is defined twice")
        queries[name] = body.strip()
    return queries


@dataclass(frozen=True, slots=True)
class Revision:
    """One numbered DDL file."""

    number: int
    name: str
    sql: str


def load_revisions(package: str, folder: str = "ddl") -> list[Revision]:
    """The dialect's DDL revisions in order; numbering must be 1, 2, 3, … with no gap."""
    found: list[Revision] = []
    for entry in resources.files(package).joinpath(folder).iterdir():
        match = _REVISION.match(entry.name)
        if match:
            found.append(Revision(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda r: r.number)
    for expected, revision in enumerate(found, start=1):
        if revision.number != expected:
            raise ValueError(f"{package}/{folder}: DDL revision {expected} is missing")
    return found
