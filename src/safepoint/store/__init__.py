"""Checkpoint stores: the ``Store`` facade, ``open_store`` and the backends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from safepoint.errors import InvalidURL

from .asyncstore import AsyncStore, SQLiteAsyncDriver
from .facade import Store
from .sqlite.driver import SQLiteDriver

DEFAULT_URL = "sqlite:///.safepoint/state.db"


def open_store(url: str = DEFAULT_URL, **options: Any) -> Store:
    """Open the store at ``url``.

    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` — one
      SQLite file (created with its folder if missing). Options:
      ``busy_timeout`` (seconds a writer waits for the lock, default 30),
      ``trace`` (a callable that sees every SQL statement).
    * ``memory://`` — a private in-memory database, for tests.

    Unknown schemes or options raise ``InvalidURL``.
    """
    if not isinstance(url, str):
        raise InvalidURL(f"store URL must be a str, not {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        return _open_sqlite(url, _sqlite_path(url), options)
    if scheme == "memory":
        return _open_sqlite(url, None, options)
    raise InvalidURL(f"unsupported store URL {url!r}: expected sqlite:///path.db or memory://")


async def open_async_store(url: str = DEFAULT_URL, **options: Any) -> AsyncStore:
    """Open the store at ``url`` for asyncio code: ``store = await open_async_store(url)``.

    Same URLs and options as ``open_store``; the methods are the same names,
    awaited. SQLite work runs in a worker thread so the event loop never
    blocks on a commit.
    """
    if not isinstance(url, str):
        raise InvalidURL(f"store URL must be a str, not {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("sqlite", "memory"):
        sync_store = await asyncio.to_thread(open_store, url, **options)
        driver = sync_store.driver
        assert isinstance(driver, SQLiteDriver)
        return AsyncStore(SQLiteAsyncDriver(driver), url=url)
    raise InvalidURL(f"unsupported store URL {url!r}: expected sqlite:///path.db or memory://")


def _sqlite_path(url: str) -> str:
    parts = urlsplit(url)
    if parts.netloc or not parts.path.startswith("/") or parts.path == "/":
        raise InvalidURL(f"SQLite URL {url!r} must look like sqlite:///relative.db or sqlite:////absolute.db")
    path = unquote(parts.path[1:])  # sqlite:///x.db -> x.db, sqlite:////tmp/x.db -> /tmp/x.db
    if path.endswith("/") or Path(path).is_dir():
        raise InvalidURL(f"SQLite URL {url!r} names a folder, not a database file")
    return path


def _open_sqlite(url: str, path: str | None, options: dict[str, Any]) -> Store:
    allowed = {"busy_timeout", "trace"}
    unknown = set(options) - allowed
    if unknown:
        raise InvalidURL(f"unknown option(s) for {url!r}: {', '.join(sorted(unknown))}")
    return Store(SQLiteDriver(path, **options), url=url)


__all__ = ["DEFAULT_URL", "AsyncStore", "Store", "open_async_store", "open_store"]
