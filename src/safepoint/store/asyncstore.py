"""``AsyncStore``: the async twin of ``Store``, with the same method names.

Its methods are the call table's (``methods.py``), as ``Store``'s are, each
awaiting the same shared ``Call`` that ``Store`` blocks on (``twins.Awaiting``),
so the two cannot drift apart: signatures, docstrings, validation, encoding,
the transaction's logic, the post-commit bookkeeping and the spans and
metrics around them (``traced.py``) exist once.

SQLite has no async driver of its own; ``SQLiteAsyncDriver`` runs the sync
driver's transaction in a worker thread (``asyncio.to_thread``), which keeps
the event loop free while SQLite waits for its fsync.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from safepoint.observe import NO_OBSERVER, Observer, QueryHook

from .calls import Call
from .methods import StoreMethods
from .pipeline import Pipeline
from .query import AsyncDriver, Op
from .spans import backend_of
from .sqlite.driver import SQLiteDriver
from .twins import Awaiting

T = TypeVar("T")


class SQLiteAsyncDriver:
    """Serves an async store from a sync SQLite driver, one transaction per thread hop."""

    def __init__(self, driver: SQLiteDriver) -> None:
        self.sync_driver = driver
        self.dialect = driver.dialect
        self.capabilities = driver.capabilities

    @property
    def on_query(self) -> QueryHook | None:
        return self.sync_driver.on_query  # the sync driver runs the statements

    @on_query.setter
    def on_query(self, hook: QueryHook | None) -> None:
        self.sync_driver.on_query = hook

    async def run(self, op: Op[T], *, write: bool) -> T:
        return await asyncio.to_thread(self.sync_driver.run, op, write=write)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync_driver.close)


class AsyncStore(StoreMethods, Awaiting):
    """A checkpoint store for asyncio code. Open one with ``await safepoint.open_async_store(url)``.

    Every method is the ``Store`` method of the same name, awaited; see
    ``Store`` for the contracts (errors, ordering, durability).
    """

    _driver: AsyncDriver

    def __init__(self, driver: AsyncDriver, *, url: str, pipeline: Pipeline | None = None) -> None:
        self._driver = driver
        self.url = url
        self.pipeline = pipeline if pipeline is not None else Pipeline()
        # Spans and metrics (``safepoint.observe``); ``open_async_store(observer=…)`` sets it.
        self.observer: Observer = NO_OBSERVER
        self._backend = backend_of(url)

    @property
    def driver(self) -> AsyncDriver:
        """The backend driver (for tests and tools; not needed to use the store)."""
        return self._driver

    async def _transact(self, call: Call[T, Any]) -> T:
        if call.before is not None:  # blob uploads: blocking I/O, off the event loop, before the transaction
            await asyncio.to_thread(call.before)
        return await self._driver.run(call.op, write=call.write)

    async def close(self) -> None:
        """Release the connection(s). Using the store afterwards raises ``StoreClosed``."""
        await self._driver.close()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<safepoint.AsyncStore {self.url}>"
