"""The async PostgreSQL driver: a ``psycopg_pool.AsyncConnectionPool``, one transaction per operation.

The twin of ``driver.py`` with every wait awaited. The SQL, the DDL setup,
the options and the error translation are the shared ones (``steps.py``,
``config.py``, ``errors.py``); only the loops below differ, by ``await``.
Open one with ``await open_postgres_async_driver(url, **options)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import closing, nullcontext
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

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
    fits_alone,
    one_message,
    op_steps,
    qualified_sql,
)

T = TypeVar("T")


async def open_postgres_async_driver(url: str, **options: Any) -> PostgresAsyncDriver:
    """Open the PostgreSQL store at ``url`` for asyncio; same options as ``open_store``.

    Raises ``InvalidURL`` for a bad URL or option and ``StoreError`` when the
    server cannot be reached or the schema cannot be set up.
    """
    return await PostgresAsyncDriver.open(PostgresConfig.from_options(url, options))


class PostgresAsyncDriver:
    """Runs store operations on an asyncio pool of PostgreSQL connections."""

    dialect = "postgresql"
    # The optional queries this dialect has: save_next, the one-statement save
    # that ops.save asks for first when the writer knows its run's head.
    capabilities = CAPABILITIES

    def __init__(
        self, config: PostgresConfig, pool: AsyncConnectionPool, search_path: str, qualified: dict[str, str]
    ) -> None:
        self.config = config
        self.pool = pool  # for tests and tools; a store never needs it
        self.search_path = search_path
        self.qualified = qualified  # as PostgresDriver.qualified
        self.applied: list[int] = []  # DDL revisions this driver applied when it opened
        self.on_query: QueryHook | None = None  # as PostgresDriver.on_query
        # Fork safety (see store/forking.py and driver.py): the process whose
        # pool this is, and whether a forked child's new pool still needs opening.
        self._pid = os.getpid()
        self._reopen = False

    @classmethod
    async def open(cls, config: PostgresConfig) -> PostgresAsyncDriver:
        """Bring the schema up to date on a connection of its own, then start the pool."""
        async with await _connect(config) as conn:
            path = search_path(config.schema, conn)
            qualified = qualified_sql(config.schema, conn)
            if config.read_only:  # look, never create: no lock, no DDL
                look = Transaction(existing_steps(config.schema, path))
                try:
                    found = await _transact(conn, look, write=False, pipeline=False)
                except psycopg.Error as exc:
                    raise look.error(exc) from exc
                check_existing(config, found)
                applied: list[int] = []
            else:
                tx = Transaction(setup_steps(config.schema, path))
                try:
                    applied = await _transact(conn, tx, write=True, pipeline=False)
                except psycopg.Error as exc:
                    raise tx.error(exc) from exc
        pool: AsyncConnectionPool = AsyncConnectionPool(**config.pool_kwargs())
        await pool.open()
        driver = cls(config, pool, path, qualified)
        driver.applied = applied
        return driver

    async def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        """A save, alone in its transaction: each writer holds a pooled connection of its own,
        so concurrent saves already commit side by side (grouping them into one round trip is
        not done yet)."""
        return await self.run(op, write=True)

    async def run(self, op: Op[T], *, write: bool) -> T:
        """Drive ``op`` in one transaction; commit on return, roll back on error."""
        if write and self.config.read_only:
            raise StoreError(READ_ONLY_WRITE)
        steps = op_steps(op, self.search_path, self.qualified, self.capabilities)
        if self.on_query is not None:  # as in driver.py
            steps = traced(steps, self.on_query, self.dialect, UNSUPPORTED)
        tx = Transaction(steps)
        try:
            pool = await self._own_pool()
            async with pool.connection() as conn:
                return await _transact(conn, tx, write=write)
        except (psycopg.Error, UnicodeEncodeError) as exc:
            raise tx.error(exc) from exc

    async def close(self) -> None:
        """Close every connection; later operations raise ``StoreClosed``."""
        if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours to close
            self._discard_inherited()
            self._reopen = False
        await self.pool.close()

    async def _own_pool(self) -> AsyncConnectionPool:
        """This process's pool: in a forked child, a new one (the parent's is discarded, never closed)."""
        if self._pid != os.getpid():
            # No await between the check and the swap: concurrent first calls
            # in the child's event loop make one pool.
            self._reopen = not self.pool.closed
            self._discard_inherited()
        if self._reopen:
            await self.pool.open()  # idempotent: concurrent callers wait on the pool's own lock
            self._reopen = False
        return self.pool

    def _discard_inherited(self) -> None:
        # As in driver.py: the parent's pool is kept, never closed (closing
        # would send libpq's Terminate on the parent's sockets).
        forking.inherit(self.pool)
        self.pool = AsyncConnectionPool(**self.config.pool_kwargs())
        self._pid = os.getpid()


async def _connect(config: PostgresConfig) -> psycopg.AsyncConnection[Any]:
    """A connection of its own; ``StoreError`` without libpq's text when it fails (see driver.py)."""
    try:
        return await psycopg.AsyncConnection.connect(config.url, **config.connect_kwargs())
    except psycopg.Error as exc:
        failure = config.connect_error(exc)
    raise failure


async def _transact(
    conn: psycopg.AsyncConnection[Any],
    tx: Transaction[T],
    *,
    write: bool,
    pipeline: bool = True,
) -> T:
    # As in driver.py: a write that opens with a final statement sends it
    # alone, otherwise BEGIN and COMMIT in the pipeline, a final statement
    # committed with its COMMIT, and the connection's context rolls back
    # whatever an error leaves open.
    with closing(tx.steps()) as steps:
        try:
            statement = next(steps)
            while write and pipeline and statement.final:
                statement = steps.send(await _alone(conn, statement))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        while True:
            async with conn.pipeline() if pipeline else nullcontext() as line:
                await conn.execute(BEGIN[write], prepare=False)
                try:
                    while not statement.final:
                        statement = steps.send(await _execute(conn, line if write else None, statement))
                except StopIteration as stop:
                    await conn.execute(COMMIT, prepare=False)
                    return stop.value  # type: ignore[no-any-return]
                final = await _send(conn, statement)
                await conn.execute(COMMIT, prepare=False)
            try:  # committed: the operation goes on in a new transaction
                statement = steps.send(await final.fetchall())
                while statement.final:
                    statement = steps.send(await _alone(conn, statement))
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]


async def _alone(conn: psycopg.AsyncConnection[Any], statement: Statement) -> list[Row]:
    """Run a final statement as its own transaction (see driver.py)."""
    if fits_alone(statement):
        try:
            return await (await _send(conn, statement)).fetchall()
        except DEFAULTS_REFUSED:
            pass  # rolled back, nothing written: the server's default transaction is not ours
    return await _one_message(conn, True, [statement])


async def _one_message(
    conn: psycopg.AsyncConnection[Any], write: bool, statements: list[Statement]
) -> list[Row]:
    """Run ``statements`` in one transaction sent as one message; the last one's rows (see driver.py)."""
    cursor: psycopg.AsyncClientCursor[Row] = psycopg.AsyncClientCursor(conn)
    await cursor.execute(one_message(cursor.mogrify, write, statements))
    for _ in statements:  # past BEGIN's result to the last statement's
        cursor.nextset()
    return await cursor.fetchall()


async def _send(conn: psycopg.AsyncConnection[Any], statement: Statement) -> psycopg.AsyncCursor[Row]:
    return await conn.execute(statement.sql, statement.params, prepare=statement.prepare)


async def _execute(
    conn: psycopg.AsyncConnection[Any], line: psycopg.AsyncPipeline | None, statement: Statement
) -> list[Row]:
    # No cursor context manager: in a pipeline, a cursor must outlive the
    # call that sent its statement, until its result arrives.
    if statement.many is not None:
        await conn.cursor().executemany(statement.sql, statement.many)
        return []
    cursor = await _send(conn, statement)
    if not statement.fetch:
        return []
    rows = await cursor.fetchall()
    if line is not None:  # then a Sync: see driver.py
        await line.sync()
    return rows
