"""The stores the call journal's tests run on: every backend, sync and ``AsyncStore``.

``Backend.open(**options)`` opens a store on the test's data (a fresh
``memory://``, a SQLite file, a fresh PostgreSQL schema) as the variant says:
a ``Store``, or an ``AsyncStore`` seen through ``SyncView`` — each method
awaited on one event loop of its own, so a test body is written once and
runs against the async store's public methods too. ``raw`` reads and edits
the rows underneath, as a hand edit or a bad disk would. Imported by the
journal's test modules (not a pytest conftest).
"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
from collections.abc import Coroutine, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import safepoint
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import AsyncStore, Checkpoint

T = TypeVar("T")

VARIANTS = ("memory", "memory-async", "sqlite", "sqlite-async", "postgres", "postgres-async")
SYNC_VARIANTS = ("memory", "sqlite", "postgres")


class SyncView:
    """An ``AsyncStore``'s public methods, each awaited on this view's own event loop."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="journal-async", daemon=True)
        self._thread.start()
        self.inner: AsyncStore = self.wait(safepoint.open_async_store(url, **options))

    def wait(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            return self.wait(result) if inspect.isawaitable(result) else result

        return call

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self.wait(self.inner.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


class Backend:
    """One variant's data and the handles opened on it (closed at the end of the test)."""

    def __init__(self, variant: str, tmp_path: Path, schema: str | None, dsn: str | None) -> None:
        self.variant = variant
        self.kind = variant.split("-", maxsplit=1)[0]
        self.is_async = variant.endswith("-async")
        self.dialect = "postgresql" if self.kind == "postgres" else "sqlite"
        self.folder = tmp_path
        self.schema, self.dsn = schema, dsn
        self.path = tmp_path / "journal.db"
        self.opened: list[Any] = []

    @property
    def url(self) -> str:
        if self.kind == "memory":
            return "memory://"
        if self.kind == "sqlite":
            return f"sqlite:///{self.path}"
        assert self.dsn is not None
        return self.dsn

    def open(self, **options: Any) -> Any:
        """A handle on this test's data (``memory://``: the first one again, whatever the options)."""
        if self.kind == "memory" and self.opened:
            return self.opened[0]
        if self.kind == "postgres":
            options = {"schema": self.schema, "min_size": 0, "max_size": 4, **options}
        store: Any = (
            SyncView(self.url, options) if self.is_async else safepoint.open_store(self.url, **options)
        )
        self.opened.append(store)
        return store

    def raw(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Any]:
        """One statement on the data underneath, committed (SQLite: ``?``; PostgreSQL: ``%(name)s``)."""
        if self.kind == "postgres":
            assert self.dsn is not None
            assert self.schema is not None
            return raw(self.dsn, self.schema, sql, params if isinstance(params, dict) else None)
        if self.kind == "sqlite":
            with closing(sqlite3.connect(self.path)) as conn:
                rows = conn.execute(sql, params).fetchall()
                conn.commit()
                return rows
        first = self.opened[0]
        driver = first.inner.driver.sync_driver if self.is_async else first.driver
        return list(driver.execute_raw(sql, params))

    def close(self) -> None:
        for store in reversed(self.opened):
            store.close()


@contextmanager
def opened(variant: str, tmp_path: Path) -> Iterator[Backend]:
    """``variant`` (one of ``VARIANTS``) on fresh data, its handles closed afterwards."""
    yield from backends(variant, tmp_path)


def backends(variant: str, tmp_path: Path) -> Iterator[Backend]:
    """A ``backend`` fixture's body: ``variant`` is one of ``VARIANTS``."""
    if not variant.startswith("postgres"):
        backend = Backend(variant, tmp_path, None, None)
        try:
            yield backend
        finally:
            backend.close()
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        backend = Backend(variant, tmp_path, schema, dsn)
        try:
            yield backend
        finally:
            backend.close()


def started(store: Any, run_id: str, steps: int = 1) -> Checkpoint:
    """A run with ``steps`` checkpoints (0 .. steps-1): its head is ``steps - 1``."""
    cp = Checkpoint(run_id=run_id)
    for step in range(steps):
        cp.step = step
        cp.messages.append({"role": "user", "content": f"step {step}"})
        store.save(cp)
    return cp


def quoted(error: BaseException, values: list[str]) -> list[str]:
    """The values (of 4 characters or more) an error's message quotes: none is allowed."""
    text = str(error)
    return [value for value in values if len(value) >= 4 and value in text]
