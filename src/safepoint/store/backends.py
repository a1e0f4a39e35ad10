"""The backend table: for each URL scheme, how a store of that kind is opened.

``open_store`` and ``open_async_store`` (``opening.py``) both read this one
table: a ``Backend`` says where a store's large values go by default and how
to open its driver, blocking or for asyncio, from the URL and the options
left once the store-wide ones are taken out. The tenant (``tenants.py``)
reaches both: ``default_blobs`` takes it as an argument, and the opener finds
it, checked, in its options as ``tenant`` and takes it out — a SQLite file per
tenant (``tenants.tenant_path``; ``memory://`` is private anyway), a
PostgreSQL configuration that names it in every transaction. Everything else
about opening — the store-wide options, the encryption check, the observer —
is the same for every backend and stays in ``opening.py``.

Adding a backend is one row here, a driver package beside ``sqlite/`` and
``postgres/`` (its ``queries.sql`` answering every query spec that is not
``optional``), and a ``scheme_of`` case in ``urls.py`` (docs/architecture.md,
"Add a backend").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from safepoint.blobs.filesystem import FileSystemBlobStore
from safepoint.errors import InvalidURL, StoreNotFound
from safepoint.visible import visible

from .asyncstore import SQLiteAsyncDriver
from .blob_targets import BlobTarget, DatabaseBlobs, ExternalBlobs
from .query import AsyncDriver, Driver
from .sqlite.driver import SQLiteDriver
from .tenants import IMPLICIT, tenant_path
from .urls import sqlite_path

# What opening a driver gives: the driver, and the URL the store shows (a password masked).
Opened = tuple[Driver, str]
AsyncOpened = tuple[AsyncDriver, str]


@dataclass(frozen=True, slots=True)
class Backend:
    """One scheme's backend.

    ``default_blobs(url, tenant)``: where the tenant's large values go when
    ``blobs=`` is not given. ``open(url, options, read_only)``: the blocking
    driver of the tenant ``options["tenant"]`` names (it takes it out), and
    the URL the store shows, refusing an unknown or out-of-range option by
    name (``InvalidURL``) before any file or connection is opened.
    ``open_async``: the same for asyncio.
    """

    scheme: str
    default_blobs: Callable[[str, str], BlobTarget]
    open: Callable[[str, dict[str, Any], bool], Opened]
    open_async: Callable[[str, dict[str, Any], bool], Awaitable[AsyncOpened]]


def _file_blobs(url: str, tenant: str) -> BlobTarget:
    # Large values go to files beside the tenant's database (the folder is made by the
    # first large value, never on open): a tenant's file and its blobs go together.
    return ExternalBlobs(FileSystemBlobStore(tenant_path(sqlite_path(url), tenant) + ".blobs"))


def _in_database(url: str, tenant: str) -> BlobTarget:
    return DatabaseBlobs()  # the database keeps the tenants' rows apart (its tenant column, its file)


_SQLITE_OPTIONS = {"busy_timeout", "trace", "wal_autocheckpoint", "group_commit"}
_MAX_BUSY_TIMEOUT = 86_400  # a day; SQLite takes milliseconds as a 32-bit int


def _sqlite_driver(path: str | None, options: dict[str, Any], read_only: bool) -> SQLiteDriver:
    unknown = set(options) - _SQLITE_OPTIONS
    if unknown:
        names = ", ".join(sorted(visible(str(name), max_len=40) for name in unknown))
        raise InvalidURL(f"unknown option(s) for a SQLite store: {names}")
    # Checked here, so that a bad value is an InvalidURL naming the option,
    # not an OverflowError or a PRAGMA error from inside the driver.
    timeout = options.get("busy_timeout", 30)
    if type(timeout) not in (int, float) or not 0 <= timeout <= _MAX_BUSY_TIMEOUT:
        raise InvalidURL(f"busy_timeout must be a number of seconds from 0 to {_MAX_BUSY_TIMEOUT}")
    pages = options.get("wal_autocheckpoint", 256)
    if type(pages) is not int or not 0 <= pages <= 2**31 - 1:
        raise InvalidURL("wal_autocheckpoint must be an int from 0 to 2147483647 (pages)")
    if type(options.get("group_commit", True)) is not bool:
        raise InvalidURL("group_commit must be True or False")
    trace = options.get("trace")
    if trace is not None and not callable(trace):
        raise InvalidURL("trace must be a callable or None")
    return SQLiteDriver(path, read_only=read_only, **options)


def _open_sqlite(url: str, options: dict[str, Any], read_only: bool) -> Opened:
    # A file per tenant: the implicit tenant's is the URL's own file, another's beside it
    # (``tenant_path``), its folder made by a read-write open only (the driver's mkdir). The
    # store still shows the URL it was opened with: ``store.url`` and ``store.tenant`` open it again.
    options = dict(options)
    tenant = options.pop("tenant", IMPLICIT)
    return _sqlite_driver(tenant_path(sqlite_path(url), tenant), options, read_only), url


def _open_memory(url: str, options: dict[str, Any], read_only: bool) -> Opened:
    options = dict(options)
    options.pop("tenant", None)  # every memory:// store is private: nothing to keep apart
    if read_only:
        raise StoreNotFound("memory://", "a memory:// store is new and empty on every open")
    return _sqlite_driver(None, options, read_only), url


def _in_a_thread(
    open_sync: Callable[[str, dict[str, Any], bool], Opened],
) -> Callable[..., Awaitable[AsyncOpened]]:
    """An async opener for a file backend: the blocking open in a worker thread, the driver
    served to the event loop one transaction per thread hop (``SQLiteAsyncDriver``)."""

    async def open_async(url: str, options: dict[str, Any], read_only: bool) -> AsyncOpened:
        driver, shown = await asyncio.to_thread(open_sync, url, options, read_only)
        assert isinstance(driver, SQLiteDriver)
        return SQLiteAsyncDriver(driver), shown

    return open_async


def _open_postgres(url: str, options: dict[str, Any], read_only: bool) -> Opened:
    # Imported here so that SQLite users never load psycopg.
    from .postgres.config import PostgresConfig  # noqa: PLC0415
    from .postgres.driver import PostgresDriver  # noqa: PLC0415

    # ``options`` holds ``tenant``: the configuration names it in every transaction.
    config = PostgresConfig.from_options(url, {**options, "read_only": read_only})
    # display_url masks the password: Store.url shows up in reprs and logs.
    return PostgresDriver.open(config), config.display_url


async def _open_postgres_async(url: str, options: dict[str, Any], read_only: bool) -> AsyncOpened:
    # Native async: psycopg's AsyncConnectionPool, bound to the running loop.
    from .postgres.async_driver import PostgresAsyncDriver  # noqa: PLC0415
    from .postgres.config import PostgresConfig  # noqa: PLC0415

    config = PostgresConfig.from_options(url, {**options, "read_only": read_only})
    return await PostgresAsyncDriver.open(config), config.display_url


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend("sqlite", _file_blobs, _open_sqlite, _in_a_thread(_open_sqlite)),
    "memory": Backend("memory", _in_database, _open_memory, _in_a_thread(_open_memory)),
    "postgresql": Backend("postgresql", _in_database, _open_postgres, _open_postgres_async),
}
