"""The async PostgreSQL driver: the entries of ``entries.py`` awaiting a ``psycopg_pool.AsyncConnectionPool``.

Open one with ``await open_postgres_async_driver(url, **options)``. What it
holds of its own is how a forked child finds a pool of its own: in one
event loop, without a lock, and opened by awaiting.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from safepoint.twins import Awaiting

from .config import PostgresConfig
from .entries import PostgresEntries


async def open_postgres_async_driver(url: str, **options: Any) -> PostgresAsyncDriver:
    """Open the PostgreSQL store at ``url`` for asyncio; same options as ``open_store``.

    Raises ``InvalidURL`` for a bad URL or option and ``StoreError`` when the
    server cannot be reached or the schema cannot be set up.
    """
    return await PostgresAsyncDriver.open(PostgresConfig.from_options(url, options))


class PostgresAsyncDriver(PostgresEntries, Awaiting):
    """Runs store operations on an asyncio pool of PostgreSQL connections."""

    connection = psycopg.AsyncConnection
    client_cursor = psycopg.AsyncClientCursor
    pool_class = AsyncConnectionPool
    pool: AsyncConnectionPool

    async def _own_pool(self) -> AsyncConnectionPool:
        if self._pid != os.getpid():
            # No await between the check and the swap: concurrent first calls
            # in the child's event loop make one pool.
            self._discard_inherited(reopen=not self.pool.closed)
        if self._reopen:
            await self.pool.open()  # idempotent: concurrent callers wait on the pool's own lock
            self._reopen = False
        return self.pool

    def _reopened(self, reopen: bool) -> None:
        self._reopen = reopen  # opened by the next call's _own_pool, which can await
