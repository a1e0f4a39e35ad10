"""One PostgreSQL transaction on one connection, written once for both drivers.

What a driver sends for an operation (``statements.py``: BEGIN, the statements,
COMMIT, a final statement alone or in one message) and how it waits for the
answers is one flow of requests (``safepoint.twins``): each call of the
connection, a cursor or the pipeline is an ``Invoke``, and the pipeline a
``Within``. ``PostgresDriver`` runs it blocking on a ``psycopg.Connection``,
``PostgresAsyncDriver`` awaiting an ``AsyncConnection``: the same method
names answer either way, a result or an awaitable. What differs by flavour
comes in as data (the client cursor class).

The transaction: a write that opens with a final statement (a save, a lease
call) sends it alone (``steps.fits_alone``). Otherwise, on an autocommit
connection, BEGIN and COMMIT are statements of the pipeline (see
``statements.py``); a final statement after others goes out with its COMMIT and
its rows are read after the pipeline's Sync, so that no wait splits them. An
error leaves the transaction open or aborted; the connection's context
(``pool.connection()``, a connection's own ``with``) rolls it back.
"""

from __future__ import annotations

from contextlib import closing, nullcontext
from functools import partial
from typing import Any, TypeVar

import psycopg

from safepoint.store.query import Row
from safepoint.twins import Flow, Invoke, Within

from .config import PostgresConfig, search_path
from .errors import Transaction
from .schema import check_existing, existing_statements, setup_statements
from .statements import BEGIN, COMMIT, DEFAULTS_REFUSED, Statement, fits_alone, one_message, qualified_sql

T = TypeVar("T")
Connection = Any  # a psycopg.Connection or an AsyncConnection: the same calls, awaited or not
Client = Any  # psycopg.ClientCursor or AsyncClientCursor: the class a one-message transaction uses


def transact(
    conn: Connection, tx: Transaction[T], *, write: bool, client: Client, pipeline: bool = True
) -> Flow[T]:
    """The operation ``tx`` drives, in its transaction(s) on ``conn`` (see the module's docstring).

    On an error it notes on ``tx`` whether the server is a hot standby (``in_hot_standby``), which
    decides what the error becomes (``errors.translate``)."""
    try:
        with closing(tx.steps()) as steps:
            try:
                statement = next(steps)
                while write and pipeline and statement.final:
                    statement = steps.send((yield from _alone(conn, statement, client)))
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            while True:
                line = conn.pipeline() if pipeline else nullcontext()
                done, answer = yield Within(line, partial(_pipelined, conn, steps, statement, write))
                if done:
                    return answer  # type: ignore[no-any-return]
                try:  # committed: the operation goes on in a new transaction
                    statement = steps.send((yield Invoke(answer.fetchall)))
                    while statement.final:
                        statement = steps.send((yield from _alone(conn, statement, client)))
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
    except psycopg.Error:
        tx.standby = in_hot_standby(conn)
        raise


def in_hot_standby(conn: Connection) -> bool:
    """Whether ``conn``'s server said it is a hot standby: ``in_hot_standby``, which PostgreSQL 14
    and later report at connect and again when a promotion ends recovery. No round trip; False
    for an older server or a connection that is gone."""
    try:
        return bool(conn.info.parameter_status("in_hot_standby") == "on")
    except psycopg.Error:
        return False


def _pipelined(
    conn: Connection, steps: Any, statement: Statement, write: bool, line: Any
) -> Flow[tuple[bool, Any]]:
    """One transaction inside the pipeline ``line`` (None without one): ``(True, result)`` when
    the operation ended in it, else ``(False, cursor)`` of the final statement it committed with."""
    yield Invoke(conn.execute, (BEGIN[write],), {"prepare": False})
    try:
        while not statement.final:
            statement = steps.send((yield from _execute(conn, line if write else None, statement)))
    except StopIteration as stop:
        yield Invoke(conn.execute, (COMMIT,), {"prepare": False})
        return True, stop.value
    final = yield from _send(conn, statement)
    yield Invoke(conn.execute, (COMMIT,), {"prepare": False})
    return False, final


def _alone(conn: Connection, statement: Statement, client: Client) -> Flow[list[Row]]:
    """Run a final statement as its own transaction: alone if it fits (steps.fits_alone), else one message."""
    if fits_alone(statement):
        try:
            cursor = yield from _send(conn, statement)
            rows: list[Row] = yield Invoke(cursor.fetchall)
            return rows
        except DEFAULTS_REFUSED:
            pass  # rolled back, nothing written: the server's default transaction is not ours
    return (yield from _one_message(conn, True, [statement], client))


def _one_message(
    conn: Connection, write: bool, statements: list[Statement], client: Client
) -> Flow[list[Row]]:
    """Run ``statements`` in one transaction sent as one message; the last one's rows."""
    cursor = client(conn)
    yield Invoke(cursor.execute, (one_message(cursor.mogrify, write, statements),))
    for _ in statements:  # past BEGIN's result to the last statement's
        cursor.nextset()
    rows: list[Row] = yield Invoke(cursor.fetchall)
    return rows


def _send(conn: Connection, statement: Statement) -> Flow[Any]:
    options: dict[str, Any] = {"prepare": statement.prepare}
    if statement.binary:  # bytea as it is, not hex: half the bytes of a step's messages
        options["binary"] = True
    return (yield Invoke(conn.execute, (statement.sql, statement.params), options))


def _execute(conn: Connection, line: Any, statement: Statement) -> Flow[list[Row]]:
    # No cursor context manager: in a pipeline, a cursor must outlive the
    # call that sent its statement, until its result arrives.
    if statement.many is not None:
        yield Invoke(conn.cursor().executemany, (statement.sql, statement.many))
        return []
    cursor = yield from _send(conn, statement)
    if not statement.fetch:
        return []
    rows: list[Row] = yield Invoke(cursor.fetchall)
    if line is not None:
        # Then a Sync: the server answers ReadyForQuery, which arms
        # idle_in_transaction_session_timeout while the operation works on
        # these rows, so a client stopped now does not keep its locks. Only
        # after the rows: fetchall() sends everything queued, however large,
        # where Pipeline.sync() may leave part of a large statement unsent
        # and wait for an answer the server cannot give yet.
        yield Invoke(line.sync)
    return rows


# -- opening: a connection of its own, and the schema brought up to date on it --------------


def connect(connection: Any, config: PostgresConfig) -> Flow[Connection]:
    """A connection of its own (``connection`` is psycopg's class of the flavour); ``StoreError``
    without libpq's text when it fails (see ``PostgresConfig.connect_error``)."""
    try:
        return (yield Invoke(connection.connect, (config.url,), config.connect_kwargs()))
    except psycopg.Error as exc:
        failure = config.connect_error(exc)
    raise failure  # outside the except block: psycopg's error is not even the __context__


def set_up(
    config: PostgresConfig, client: Client, conn: Connection
) -> Flow[tuple[str, dict[str, str], list[int]]]:
    """On ``conn``: the store's search_path and final statements' SQL, and the DDL revisions
    applied now — none on a read-only open, which only looks (no lock, no DDL)."""
    path = search_path(config.schema, conn)
    qualified = qualified_sql(config.schema, config.tenant, conn)
    if config.read_only:
        look = Transaction(existing_statements(config.schema, path))
        try:
            found = yield from transact(conn, look, write=False, client=client, pipeline=False)
        except psycopg.Error as exc:
            raise look.error(exc) from exc
        check_existing(config, found)
        return path, qualified, []
    tx = Transaction(setup_statements(config.schema, path))
    try:
        applied = yield from transact(conn, tx, write=True, client=client, pipeline=False)
    except psycopg.Error as exc:
        raise tx.error(exc) from exc
    return path, qualified, applied
