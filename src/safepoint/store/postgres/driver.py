"""The sync PostgreSQL driver: a ``psycopg_pool.ConnectionPool``, one transaction per operation.

Everything but blocking on the server lives in ``steps.py`` (the SQL, the
DDL setup, error translation) and ``config.py`` (options), shared with the
async driver. Durability (DESIGN invariant 1): a save returns after COMMIT,
and nothing here touches synchronous_commit, so under the server's default
(on) the commit record is flushed to the WAL before COMMIT returns.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import closing, nullcontext
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from safepoint.errors import StoreError
from safepoint.observe import QueryHook
from safepoint.observe.queries import traced
from safepoint.store import forking
from safepoint.store.query import UNSUPPORTED, Op, Row

from .config import PostgresConfig, search_path
from .errors import Transaction
from .schema import check_existing, existing_steps, setup_steps
from .steps import (
    BEGIN,
    CAPABILITIES,
    COMMIT,
    DEFAULTS_REFUSED,
    READ_ONLY_WRITE,
    Statement,
    Steps,
    fits_alone,
    one_message,
    op_steps,
    qualified_sql,
    raw_steps,
)

T = TypeVar("T")


class PostgresDriver:
    """Runs store operations on a pool of PostgreSQL connections; thread-safe."""

    dialect = "postgresql"
    # The optional queries this dialect has: save_next, the one-statement save
    # that ops.save asks for first when the writer knows its run's head.
    capabilities = CAPABILITIES

    def __init__(
        self, config: PostgresConfig, pool: ConnectionPool, search_path: str, qualified: dict[str, str]
    ) -> None:
        self.config = config
        self.pool = pool  # for tests and tools; a store never needs it
        self.search_path = search_path
        self.qualified = qualified  # the final statements' SQL in this store's schema (steps.qualified_sql)
        self.applied: list[int] = []  # DDL revisions this driver applied when it opened
        # The observer's query hook (safepoint.observe.QueryObserver); open_store sets it.
        self.on_query: QueryHook | None = None
        # Fork safety (see store/forking.py): the process whose pool this is.
        self._pid = os.getpid()
        self._fork_lock = threading.Lock()
        forking.register(self)

    @classmethod
    def open(cls, config: PostgresConfig) -> PostgresDriver:
        """Bring the schema up to date on a connection of its own, then start the pool.

        That first connection is made directly, not by the pool (which would
        keep retrying in the background until ``timeout``), so an unreachable
        server fails at once, with libpq's reason.
        """
        with _connect(config) as conn:
            path = search_path(config.schema, conn)
            qualified = qualified_sql(config.schema, conn)
            if config.read_only:  # look, never create: no lock, no DDL
                look = Transaction(existing_steps(config.schema, path))
                try:
                    found = _transact(conn, look, write=False, pipeline=False)
                except psycopg.Error as exc:
                    raise look.error(exc) from exc
                check_existing(config, found)
                applied: list[int] = []
            else:
                tx = Transaction(setup_steps(config.schema, path))
                try:
                    applied = _transact(conn, tx, write=True, pipeline=False)
                except psycopg.Error as exc:
                    raise tx.error(exc) from exc
        pool: ConnectionPool = ConnectionPool(**config.pool_kwargs())
        pool.open()
        driver = cls(config, pool, path, qualified)
        driver.applied = applied
        return driver

    def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        """A save, alone in its transaction: each writer holds a pooled connection of its own,
        so concurrent saves already commit side by side (grouping them into one round trip is
        not done yet)."""
        return self.run(op, write=True)

    def run(self, op: Op[T], *, write: bool) -> T:
        """Drive ``op`` in one transaction; commit on return, roll back on error."""
        steps = op_steps(op, self.search_path, self.qualified, self.capabilities)
        if self.on_query is not None:  # each statement reported once the driver has its rows
            steps = traced(steps, self.on_query, self.dialect, UNSUPPORTED)
        return self._run(steps, write=write)

    def execute_raw(self, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
        """One row-returning statement outside the named queries, in the store's schema (tests, tools)."""
        return self._run(raw_steps(sql, params, self.search_path), write=True)

    def _run(self, steps: Steps[T], *, write: bool) -> T:
        if write and self.config.read_only:
            raise StoreError(READ_ONLY_WRITE)
        tx = Transaction(steps)
        try:
            with self._own_pool().connection() as conn:
                return _transact(conn, tx, write=write)
        except (psycopg.Error, UnicodeEncodeError) as exc:
            raise tx.error(exc) from exc

    def close(self) -> None:
        """Close every connection; later operations raise ``StoreClosed``."""
        if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours to close
            self._discard_inherited(reopen=False)
        self.pool.close()

    # -- fork safety (store/forking.py) ----------------------------------------

    def _own_pool(self) -> ConnectionPool:
        """This process's pool: in a forked child, a new one (the parent's is discarded, never closed)."""
        if self._pid != os.getpid():
            with self._fork_lock:
                if self._pid != os.getpid():
                    self._discard_inherited(reopen=not self.pool.closed)
        return self.pool

    def _discard_inherited(self, *, reopen: bool) -> None:
        # The inherited pool holds the parent's sockets: using one would
        # interleave with the parent's queries, and closing it (pool.close(),
        # connection.close()) sends libpq's Terminate and ends the parent's
        # session. So it is kept, unclosed, for good (forking.inherit).
        forking.inherit(self.pool)
        pool: ConnectionPool = ConnectionPool(**self.config.pool_kwargs())
        if reopen:
            pool.open()
        self.pool = pool  # a never-opened pool raises PoolClosed: StoreClosed, as in the parent
        self._pid = os.getpid()

    def before_fork(self) -> None:
        pass  # nothing to quiesce: the child never touches the parent's pool

    def after_fork_in_parent(self) -> None:
        pass

    def after_fork_in_child(self) -> None:
        self._fork_lock = threading.Lock()  # another thread may have held it at the fork


def _connect(config: PostgresConfig) -> psycopg.Connection[Any]:
    """A connection of its own; ``StoreError`` without libpq's text when it fails (see ``connect_error``)."""
    try:
        return psycopg.connect(config.url, **config.connect_kwargs())
    except psycopg.Error as exc:
        failure = config.connect_error(exc)
    raise failure  # outside the except block: psycopg's error is not even the __context__


def _transact(conn: psycopg.Connection[Any], tx: Transaction[T], *, write: bool, pipeline: bool = True) -> T:
    # A write that opens with a final statement (a save, a lease call) sends
    # it alone (steps.fits_alone). Otherwise, on an autocommit connection,
    # BEGIN and COMMIT are statements of the pipeline (see steps.py); a final
    # statement after others goes out with its COMMIT and its rows are read
    # after the pipeline's Sync, so that no wait splits them. An error leaves
    # the transaction open or aborted; the connection's context (``with
    # conn``, ``pool.connection()``) rolls it back.
    with closing(tx.steps()) as steps:
        try:
            statement = next(steps)
            while write and pipeline and statement.final:
                statement = steps.send(_alone(conn, statement))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        while True:
            with conn.pipeline() if pipeline else nullcontext() as line:
                conn.execute(BEGIN[write], prepare=False)
                try:
                    while not statement.final:
                        statement = steps.send(_execute(conn, line if write else None, statement))
                except StopIteration as stop:
                    conn.execute(COMMIT, prepare=False)
                    return stop.value  # type: ignore[no-any-return]
                final = _send(conn, statement)
                conn.execute(COMMIT, prepare=False)
            try:  # committed: the operation goes on in a new transaction
                statement = steps.send(final.fetchall())
                while statement.final:
                    statement = steps.send(_alone(conn, statement))
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]


def _alone(conn: psycopg.Connection[Any], statement: Statement) -> list[Row]:
    """Run a final statement as its own transaction: alone if it fits (steps.fits_alone), else one message."""
    if fits_alone(statement):
        try:
            return _send(conn, statement).fetchall()
        except DEFAULTS_REFUSED:
            pass  # rolled back, nothing written: the server's default transaction is not ours
    return _one_message(conn, True, [statement])


def _one_message(conn: psycopg.Connection[Any], write: bool, statements: list[Statement]) -> list[Row]:
    """Run ``statements`` in one transaction sent as one message; the last one's rows."""
    cursor: psycopg.ClientCursor[Row] = psycopg.ClientCursor(conn)
    cursor.execute(one_message(cursor.mogrify, write, statements))
    for _ in statements:  # past BEGIN's result to the last statement's
        cursor.nextset()
    return cursor.fetchall()


def _send(conn: psycopg.Connection[Any], statement: Statement) -> psycopg.Cursor[Row]:
    return conn.execute(statement.sql, statement.params, prepare=statement.prepare)


def _execute(conn: psycopg.Connection[Any], line: psycopg.Pipeline | None, statement: Statement) -> list[Row]:
    # No cursor context manager: in a pipeline, a cursor must outlive the
    # call that sent its statement, until its result arrives.
    if statement.many is not None:
        conn.cursor().executemany(statement.sql, statement.many)
        return []
    cursor = _send(conn, statement)
    if not statement.fetch:
        return []
    rows = cursor.fetchall()
    if line is not None:
        # Then a Sync: the server answers ReadyForQuery, which arms
        # idle_in_transaction_session_timeout while the operation works on
        # these rows, so a client stopped now does not keep its locks. Only
        # after the rows: fetchall() sends everything queued, however large,
        # where Pipeline.sync() may leave part of a large statement unsent
        # and wait for an answer the server cannot give yet.
        line.sync()
    return rows
