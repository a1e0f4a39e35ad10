"""One store operation in one SQLite transaction: BEGIN, its named queries, then COMMIT or ROLLBACK.

With a query hook (``safepoint.observe.QueryObserver``, set as the driver's
``on_query``), each statement is timed and reported: the operation's named
queries (``store.query_trace``), and the transaction's ``BEGIN`` (``BEGIN
IMMEDIATE`` for a write) and ``COMMIT``, which on SQLite are statements of
their own. Without one, a transaction costs three ``is None`` tests more.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from typing import TypeVar

from safepoint.observe import QueryHook
from safepoint.store.query import UNSUPPORTED, Op, Query, Row
from safepoint.store.query_specs import DIALECTS, load_dialect
from safepoint.store.query_trace import attributes, report, traced

from .errors import translate

T = TypeVar("T")
# Each query's SQL and spec (its header in queries.sql): the rows go back to
# the operation as the spec's named rows.
QUERIES = load_dialect(*DIALECTS["sqlite"])
# The optional queries this dialect has: the file's housekeeping (vacuum,
# free pages, secure delete, WAL truncation), which only a file needs.
# ops.save's one-statement save (save_next) is PostgreSQL's, saving a round
# trip; on one local connection the general save costs none, so this driver
# answers UNSUPPORTED to it and ops.save goes on in the same transaction.
CAPABILITIES = frozenset(name for name, query in QUERIES.items() if query.spec.optional)
DIALECT = "sqlite"


def transact(
    conn: sqlite3.Connection, op: Op[T], *, write: bool, path: str | None, on_query: QueryHook | None
) -> T:
    """Drive ``op`` inside one transaction; commit on return, roll back on error."""
    try:
        control(conn, "BEGIN IMMEDIATE" if write else "BEGIN", on_query)
    except sqlite3.Error as exc:
        raise translate(exc, "starting a transaction", path) from exc
    try:
        result = drive(conn, op, path=path, on_query=on_query)
        try:
            control(conn, "COMMIT", on_query)
        except sqlite3.Error as exc:  # e.g. SQLITE_FULL: SQLite has rolled back
            raise translate(exc, "committing", path) from exc
    except BaseException:
        if conn.in_transaction:
            # The error that got us here is the one to report, not the rollback's.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return result


def drive(conn: sqlite3.Connection, op: Op[T], *, path: str | None, on_query: QueryHook | None) -> T:
    """Answer each named query ``op`` asks for with its rows, until it returns."""
    if on_query is not None:
        op = traced(op, on_query, DIALECT)
    rows: list[Row] | None = None
    while True:
        try:
            query = op.send(rows)  # type: ignore[arg-type]
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if query.optional and query.name not in CAPABILITIES:
            rows = UNSUPPORTED
            continue
        try:
            rows = _execute(conn, query)
        except sqlite3.Error as exc:
            op.close()
            raise translate(exc, f"running {query.name!r}", path) from exc


def _execute(conn: sqlite3.Connection, query: Query) -> list[Row]:
    named = QUERIES[query.name]
    if query.many is not None:
        conn.executemany(named.sql, query.many)
        return []
    return named.spec.rows(conn.execute(named.sql, query.params).fetchall())


def control(conn: sqlite3.Connection, statement: str, on_query: QueryHook | None) -> None:
    """BEGIN or COMMIT, reported under its own text."""
    if on_query is None:
        conn.execute(statement)
        return
    start = time.perf_counter()
    conn.execute(statement)
    report(on_query, statement, time.perf_counter() - start, attributes(DIALECT, 0))
