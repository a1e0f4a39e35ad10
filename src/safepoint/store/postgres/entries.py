"""The PostgreSQL driver's methods, written once for both flavours: entries (``safepoint.twins``).

``PostgresDriver`` (``driver.py``) makes each entry a method that blocks on
a psycopg ``ConnectionPool``, ``PostgresAsyncDriver`` (``async_driver.py``)
a coroutine method on an ``AsyncConnectionPool``. Each builds its flow from
the transaction's (``transaction.py``); the flavours hold only their
psycopg classes and how each finds its pool again in a forked child.

Everything but waiting on the server lives in ``statements.py`` (the SQL, the
DDL setup, error translation) and ``config.py`` (options). Durability
(DESIGN invariant 1): a save returns after COMMIT, and nothing here touches
synchronous_commit, so under the server's default (on) the commit record is
flushed to the WAL before COMMIT returns.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, TypeVar

import psycopg

from safepoint.errors import StoreReadOnly
from safepoint.observe import QueryHook
from safepoint.observe.queries import traced
from safepoint.store import forking
from safepoint.store.query import UNSUPPORTED, Op, Row
from safepoint.twins import Flow, Invoke, Within, class_entry, entry

from .config import PostgresConfig
from .errors import Transaction
from .statements import (
    CAPABILITIES,
    READ_ONLY_WRITE,
    Statements,
    op_statements,
    qualified_sql,
    raw_statements,
    transaction_settings,
)
from .transaction import connect, set_up, transact

T = TypeVar("T")


class PostgresEntries:
    """Runs store operations on a pool of PostgreSQL connections, one transaction per operation."""

    dialect = "postgresql"
    # The optional queries this dialect has: save_next, the one-statement save
    # that ops.save asks for first when the writer knows its run's head.
    capabilities = CAPABILITIES
    # The flavour's psycopg classes: its connection, client cursor and pool.
    connection: ClassVar[Any]
    client_cursor: ClassVar[Any]
    pool_class: ClassVar[Any]

    def __init__(
        self, config: PostgresConfig, pool: Any, search_path: str, qualified: dict[str, str]
    ) -> None:
        self.config = config
        self.pool = pool  # for tests and tools; a store never needs it
        self.search_path = search_path
        # What every transaction sets first: the schema and the tenant (statements.settings_statement).
        self.settings = transaction_settings(search_path, config.tenant)
        self.qualified = qualified  # the final statements' SQL in this store's schema (qualified_sql)
        self.applied: list[int] = []  # DDL revisions this driver applied when it opened
        self.shared = False  # a tenant's view of another driver's pool (``scoped``)
        # The observer's query hook (safepoint.observe.QueryObserver); open_store sets it.
        self.on_query: QueryHook | None = None
        # Fork safety (see store/forking.py): the process whose pool this is.
        self._pid = os.getpid()
        self._reopen = False  # a forked child's new pool still needs opening (by awaiting it)

    @class_entry
    def open(cls: type[PostgresEntries], config: PostgresConfig) -> Flow[PostgresEntries]:
        """Bring the schema up to date on a connection of its own, then start the pool.

        That first connection is made directly, not by the pool (which would
        keep retrying in the background until ``timeout``), so an unreachable
        server fails at once, with libpq's reason.
        """
        conn = yield from connect(cls.connection, config)
        path, qualified, applied = yield Within(conn, partial(set_up, config, cls.client_cursor))
        pool = cls.pool_class(**config.pool_kwargs())
        yield Invoke(pool.open)
        driver = cls(config, pool, path, qualified)
        driver.applied = applied
        return driver

    def scoped(self, tenant: str) -> PostgresEntries:
        """This driver for ``tenant``: the same pool, every transaction setting that tenant.

        A view for a worker serving many tenants (``Store.for_tenant``): its
        connections are this driver's, so closing the view closes nothing;
        close this driver when done with all of them.
        """
        view = copy.copy(self)
        view.config = dataclasses.replace(self.config, tenant=tenant)
        view.settings = transaction_settings(self.search_path, tenant)
        view.qualified = qualified_sql(self.config.schema, tenant, None)
        view.shared = True
        return view

    @entry
    def run(self, op: Op[T], *, write: bool) -> Flow[T]:
        """Drive ``op`` in one transaction; commit on return, roll back on error."""
        return self._running(self._steps(op), write=write)

    @entry
    def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> Flow[T]:
        """A save, alone in its transaction: each writer holds a pooled connection of its own,
        so concurrent saves already commit side by side (grouping them into one round trip is
        not done yet)."""
        return self._running(self._steps(op), write=True)

    @entry
    def execute_raw(self, sql: str, params: dict[str, Any] | None = None) -> Flow[list[Row]]:
        """One row-returning statement outside the named queries, in the store's schema (tests, tools)."""
        return self._running(raw_statements(sql, params, self.settings), write=True)

    @entry
    def close(self) -> Flow[None]:
        """Close every connection; later operations raise ``StoreClosed``. A tenant's view
        (``scoped``) closes nothing: the connections are its parent's."""
        if self.shared:
            return
        if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours to close
            self._discard_inherited(reopen=False)
        yield Invoke(self.pool.close)

    def _steps(self, op: Op[T]) -> Statements[T]:
        steps = op_statements(op, self.settings, self.qualified, self.capabilities)
        if self.on_query is not None:  # each statement reported once the driver has its rows
            steps = traced(steps, self.on_query, self.dialect, UNSUPPORTED)
        return steps

    def _running(self, steps: Statements[T], *, write: bool) -> Flow[T]:
        if write and self.config.read_only:
            raise StoreReadOnly(READ_ONLY_WRITE)
        tx = Transaction(steps)
        try:
            forked = self._pid != os.getpid() or self._reopen
            pool = (yield Invoke(self._own_pool)) if forked else self.pool
            body = partial(transact, tx=tx, write=write, client=self.client_cursor)
            result: T = yield Within(pool.connection(), body)
            return result
        except (psycopg.Error, UnicodeEncodeError) as exc:
            raise tx.error(exc) from exc

    # -- fork safety (store/forking.py): the flavour's own ------------------------------

    def _own_pool(self) -> Any:
        """This process's pool: in a forked child, a new one (the parent's is discarded, never closed);
        the pool itself, or an awaitable of it."""
        raise NotImplementedError

    def _discard_inherited(self, *, reopen: bool) -> None:
        # The inherited pool holds the parent's sockets: using one would
        # interleave with the parent's queries, and closing it (pool.close(),
        # connection.close()) sends libpq's Terminate and ends the parent's
        # session. So it is kept, unclosed, for good (forking.inherit).
        forking.inherit(self.pool)
        self.pool = self.pool_class(**self.config.pool_kwargs())  # a never-opened pool raises PoolClosed:
        self._pid = os.getpid()  # StoreClosed, as in the parent
        self._reopened(reopen)

    def _reopened(self, reopen: bool) -> None:
        """The new pool of a forked child is to be opened (``reopen``) or left closed."""
        raise NotImplementedError
