"""What both PostgreSQL drivers send, written once and free of I/O.

A driver opens a transaction and asks this module for its statements:
``op_steps`` turns an operation's named queries (``store/ops/``) into SQL
after pointing search_path at the store's schema (``schema.py`` holds the
DDL setup's). The sync driver blocks on each statement and the async driver
awaits it; that loop is all either of them holds (the split psycopg itself
uses between its generators and its waiting functions).
``errors.Transaction`` passes either on, remembering where it stands so
that a psycopg error becomes safepoint's.

Round trips: operations run in psycopg's pipeline mode on autocommit
connections, with BEGIN and COMMIT sent as statements of the pipeline, and a
driver waits only for statements whose rows the operation reads
(``Statement.fetch``); in a write transaction each wait is followed by a
Sync, which arms the server's idle-in-transaction timeout while the
operation works on the rows. BEGIN, set_config and run_head travel
together, and everything a save writes travels with its COMMIT and the
pipeline's last Sync, so ``ops.save`` costs three round trips (two waits
and that Sync). (psycopg's own ``transaction()``
inside a pipeline syncs on entering and on leaving it, which made five.)
``ops.save``'s one-statement save (``save_next``) is a final statement (``Statement.final``):
BEGIN, set_config, the statement and COMMIT go out as one simple-protocol
message (``one_message``), one round trip — one message, not a pipeline,
because a pipeline flushes statement by statement and a client stopped
between the locking statement and its COMMIT would keep the lock with no
timeout armed (see ``one_message``). The queue and lease calls go the
same way (their specs say ``-- ends: transaction``). The remaining gap of that kind: a client stopped
between a write of ``ops.save`` and its COMMIT (the fallback path, a run's
first save, saves with blobs) or of the maintenance operations. A failure in
a statement nobody waited for surfaces at the next wait (at the latest, the
commit's) and leaves the transaction aborted; leaving the connection's
context (``pool.connection()``) then rolls it back, as it does after an
operation's own error.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg import sql

from safepoint.errors import StoreError
from safepoint.store.query import UNSUPPORTED, Op, Query, Row
from safepoint.store.query_specs import DIALECTS, QuerySpec, load_dialect
from safepoint.store.sqlfiles import load_queries

T = TypeVar("T")
_PACKAGE = __package__ or "safepoint.store.postgres"
# Each query's SQL and spec (its header in queries.sql, save.sql): whether a
# driver waits for its rows (it returns some), whether it ends its
# transaction, and the named rows the operation gets back.
QUERIES = load_dialect(*DIALECTS["postgresql"])
# The optional queries (QuerySpec.optional) this dialect has: the drivers' capabilities.
CAPABILITIES = frozenset(name for name, query in QUERIES.items() if query.spec.optional)
# The driver's own statements (search_path, the DDL setup's): no operation's.
SETUP = load_queries(_PACKAGE, "setup.sql")

# A query whose spec returns no columns is never waited for. One whose spec
# ends its transaction (Statement.final: a save's one statement, and the
# queue and lease calls, each one UPDATE) is the whole of a write, sent with
# BEGIN and its COMMIT as one message (``one_message``): one round trip, and
# no moment where the row it locked waits on a stopped client. Its rows are
# read after the commit, which does not change them; what an operation asks
# next (a lost lease's state, a declined save's fallback) runs in a new
# transaction.

# How a transaction starts, by ``write``. Always explicit rather than left
# to the server's default_transaction_isolation, which a DBA may have changed.
# Writes: READ COMMITTED, serialized per run by the FOR UPDATE lock on the run
# row; a writer that waited for that lock re-reads the row as committed and
# fails its step check with Conflict, where REPEATABLE READ would abort with a
# serialization failure. Reads: one snapshot for the two queries of a load,
# and READ ONLY can never fail to serialize.
BEGIN = {
    True: b"BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE",
    False: b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
}
COMMIT = b"COMMIT"
SET_SEARCH_PATH = "set_search_path"


def one_message(mogrify: Callable[[Any, Any], str], write: bool, statements: list[Statement]) -> str:
    """BEGIN, ``statements`` and COMMIT as the text of one simple-protocol message.

    Why: in a pipeline psycopg flushes each statement as it is executed. A
    client stopped (SIGSTOP, a long GC pause) after the flush of a statement
    that locks a row but before the flush of the COMMIT leaves the server
    waiting mid-pipeline with the lock held — and the server arms
    idle_in_transaction_session_timeout only when it reports ReadyForQuery,
    after a Sync, so nothing would ever end that transaction while the
    client sleeps. One message reaches the server whole before any of it
    runs, and its COMMIT runs with it. ``mogrify`` renders parameters
    client-side (psycopg's ``ClientCursor.mogrify``). Each statement's
    result comes back in order: BEGIN's first, then one per statement.
    """
    parts = [BEGIN[write].decode()]
    for statement in statements:
        # A statement may end with a comment line or its own semicolon: the
        # separator goes on a line of its own.
        parts.append(mogrify(statement.sql, statement.params).rstrip().rstrip(";"))
    parts.append(COMMIT.decode())
    return "\n;\n".join(parts)


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement for a driver to execute; ``many`` runs it once per dict (executemany).

    ``fetch`` says whether to wait for and return its rows; when False the
    driver returns ``[]`` at once (in a pipeline, without waiting).

    ``final``: the transaction commits with this statement, in the same
    round trip (COMMIT follows it in the pipeline), and its rows come back
    only after the commit. Should the operation go on, what it asks next runs
    in a new transaction (``op_steps`` sets search_path again first).
    """

    name: str
    sql: str | sql.Composed
    params: dict[str, Any] | None = None
    many: list[dict[str, Any]] | None = None
    fetch: bool = True
    # Whole DDL files go through the simple query protocol (several
    # statements in one string); they must never be prepared.
    prepare: bool | None = None
    final: bool = False
    # The named query's spec: the operation gets its rows as the spec's named rows.
    spec: QuerySpec | None = None


Steps = Generator[Statement, list[Row], T]


@dataclass(frozen=True, slots=True)
class Opening:
    """How a driver starts an operation's next transaction (``opening``).

    Either ``message``: BEGIN, these statements and COMMIT as one message
    (``one_message``), whose last statement's rows go back to the steps; or
    a pipeline that sends ``first`` (statements already answered, having no
    rows) and then drives on from ``statement``.
    """

    message: list[Statement]
    first: list[Statement]
    statement: Statement | None


def opening(steps: Steps[Any], statement: Statement, *, write: bool, pipeline: bool) -> Opening:
    """Look one statement past search_path: a write that is only a final statement is one message.

    Raises ``StopIteration`` (the operation's result) when nothing follows.
    """
    if not (pipeline and write and statement.name == SET_SEARCH_PATH):
        return Opening([], [], statement)
    following = steps.send([])  # what the driver would have answered: it has no rows
    if following.final:
        return Opening([statement, following], [], None)
    return Opening([], [statement], following)


def search_path_statement(search_path: str) -> Statement:
    """Point the transaction's search_path at the store's schema (set_config, local to it)."""
    return Statement(SET_SEARCH_PATH, SETUP["set_search_path"], {"search_path": search_path}, fetch=False)


def op_steps(op: Op[T], search_path: str, capabilities: frozenset[str] = CAPABILITIES) -> Steps[T]:
    """The statements of one operation's transaction: search_path, then its queries as SQL.

    After a final statement the operation's next query opens a new
    transaction, which gets its own search_path first. An optional query
    outside ``capabilities`` is answered ``UNSUPPORTED`` without a statement.
    """
    try:
        yield search_path_statement(search_path)
        query = next(op)
        while True:
            if query.optional and query.name not in capabilities:
                query = op.send(UNSUPPORTED)
                continue
            statement = _statement(query)
            rows = yield statement
            query = op.send(statement.spec.rows(rows) if statement.spec is not None else rows)
            if statement.final:
                yield search_path_statement(search_path)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        op.close()  # a driver that stops early (an error) leaves the op nothing to resume


def _statement(query: Query) -> Statement:
    named = QUERIES.get(query.name)
    if named is None:
        raise StoreError(f"the postgresql dialect has no query named {query.name!r}")
    spec = named.spec
    fetch = bool(spec.returns)
    return Statement(
        query.name, named.sql, query.params, query.many, fetch=fetch, final=spec.ends_transaction, spec=spec
    )


def raw_steps(text: str, params: dict[str, Any] | None, search_path: str) -> Steps[list[Row]]:
    """One row-returning statement outside the named queries, in the store's schema (tests, tools)."""
    yield search_path_statement(search_path)
    return (yield Statement("raw statement", text, params))


READ_ONLY_WRITE = "this store was opened with read_only=True: it writes nothing"
