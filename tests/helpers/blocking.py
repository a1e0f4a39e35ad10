"""Run an ``AsyncStore``'s driver from blocking code — so that the one
conformance suite also covers every async driver (our tests' tool: it reaches
into the store's internals, so it is not shipped).

``blocking_store(async_store)`` returns a ``Store`` whose driver hands each
transaction to the async driver on an event loop in a background thread.
``Store`` and ``AsyncStore`` share every ``Call`` (``store/calls.py``), so the
suite then exercises exactly the async driver's behaviour.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from safepoint.observe import QueryHook
from safepoint.store import AsyncStore, Store
from safepoint.store.query import AsyncDriver, Op

T = TypeVar("T")


class BlockingDriver:
    """A sync ``Driver`` over an ``AsyncDriver`` (tests only)."""

    def __init__(self, inner: AsyncDriver) -> None:
        self.inner = inner
        self.dialect = inner.dialect
        self.capabilities = inner.capabilities
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="safepoint-blocking", daemon=True)
        self._thread.start()

    @property
    def on_query(self) -> QueryHook | None:
        return self.inner.on_query  # the async driver runs the statements

    @on_query.setter
    def on_query(self, hook: QueryHook | None) -> None:
        self.inner.on_query = hook

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def run(self, op: Op[T], *, write: bool) -> T:
        return self._wait(self.inner.run(op, write=write))

    def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        return self._wait(self.inner.run_joined(op, rebuild, weight=weight))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._wait(self.inner.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


def blocking_store(store: AsyncStore) -> Store:
    """A ``Store`` that runs every transaction through ``store``'s async driver."""
    return Store(BlockingDriver(store.driver), url=store.url)
