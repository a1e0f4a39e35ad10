"""Opening a store: ``open_store`` and ``open_async_store``, from a URL and keyword options.

The URL names the backend (``urls.scheme_of``); the options are read here —
the store-wide ones (``read_only``, ``observer``, the scrubber's and the
pipeline's, through ``Pipeline.from_options``) and each backend's own, each
refused by name (``InvalidURL``) when unknown or out of range, before any
file or connection is opened where that can be helped.
"""

from __future__ import annotations

import asyncio
from typing import Any

from safepoint.blobs.filesystem import FileSystemBlobStore
from safepoint.errors import InvalidURL, StoreNotFound
from safepoint.observe import NO_OBSERVER, Observer, query_hook
from safepoint.visible import visible

from .asyncstore import AsyncStore, SQLiteAsyncDriver
from .blob_targets import BlobTarget, DatabaseBlobs, ExternalBlobs
from .calls import now_micros
from .encryption import keyring_option, open_encryption
from .facade import Store
from .pipeline import Pipeline
from .sqlite.driver import SQLiteDriver
from .urls import scheme_of
from .urls import sqlite_path as _sqlite_path

DEFAULT_URL = "sqlite:///.safepoint/state.db"


def open_store(url: str = DEFAULT_URL, **options: Any) -> Store:
    """Open the store at ``url``.

    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` — one
      SQLite file (created with its folder if missing). Options:
      ``busy_timeout`` (seconds a writer waits for the lock, default 30),
      ``trace`` (a callable that sees every SQL statement, with its values
      filled in — stored data included, so don't log it where checkpoints
      may not go), ``wal_autocheckpoint`` (WAL pages between checkpoints,
      default 256), ``group_commit`` (default True: saves of different runs
      made at the same moment by threads or tasks sharing the store commit
      in one transaction and one fsync, each keeping its own outcome; a save
      made alone commits alone, as with False).
    * ``memory://`` — a private in-memory database, for tests.
    * ``postgresql://user:password@host:port/dbname`` (or ``postgres://``; any
      libpq URL, query parameters such as ``?sslmode=require`` included) —
      PostgreSQL, shared by any number of processes and machines. The tables
      are created, or upgraded, on open (safe when many processes open at
      once). Options:

      - ``schema`` (default ``"safepoint"``): the PostgreSQL schema holding
        the tables, created if missing. ``?schema=NAME`` in the URL does the
        same (the option wins when both are given); it is taken out of the
        URL before libpq sees it. It is set per transaction
        (``set_config('search_path', …, true)``), never on the session, so
        the store works behind PgBouncer in transaction mode.
      - ``min_size`` (default 1) and ``max_size`` (default 10): connections
        the pool keeps open, and at most opens. Each concurrent operation
        holds one connection for its transaction.
      - ``timeout`` (seconds, default 30): how long an operation waits for a
        free connection before raising ``StoreError``.
      - ``connect_timeout`` (seconds, default 10): how long opening one
        connection may take (libpq counts whole seconds, at least 2).
      - ``prepare_threshold`` (default 5): after this many runs of a query on
        a connection, psycopg prepares it on the server. Pass ``None`` to
        never prepare, e.g. behind PgBouncer in transaction mode before
        version 1.21 (which cannot route prepared statements); 0 prepares
        every query at once.

      An unreachable server raises ``StoreError`` at once, with libpq's reason.

    ``read_only=True`` (every backend) opens an *existing* store to look at
    it and never changes anything: no file, folder, schema or table is
    created, no DDL revision applied, and every write (``save``, ``fork``,
    leases, pruning …) raises ``StoreError``. Nothing there raises
    ``StoreNotFound`` (a ``NotFound``): no file, no database or schema, or a
    SQLite file or PostgreSQL schema without safepoint's tables. It works
    with read access only: a SQLite file the process cannot write (SQLite
    may create the ``-wal`` and ``-shm`` files beside it, nothing else; in a
    folder the process cannot write, it reads the file as an immutable
    snapshot — changes still in the ``-wal`` file are not seen — and warns
    with a ``SnapshotWarning``), a PostgreSQL role with ``USAGE`` on the
    schema and ``SELECT`` on its tables. A store at an older DDL revision
    must be opened read-write once to be upgraded.

    ``schema_version`` (default 1) is the version of the application's
    checkpoint shape that this code knows; with ``migrations=`` it is the
    chain's ``current`` (give one or the other, or both equal). A migrating
    ``load`` of a checkpoint newer than that raises ``SchemaTooNew``, and so
    does a ``save`` of one; ``load(..., migrate=False)`` reads any version.
    Without a chain, older checkpoints load as stored.

    Every backend also takes the scrubber's options (see docs/secrets.md):
    ``secrets`` (a ``safepoint.Secrets`` registry: values that become
    references), ``secret_policy`` (``"reference"`` default, ``"redact"`` or
    ``"raise"``), ``pii`` (kinds to redact: ``"email"``, ``"phone"``,
    ``"card"``, ``"iban"``, ``"ssn"``, or ``True`` for all), or a ready
    ``scrubber=Scrubber(...)``. The token rules are always on unless
    ``scrubber=False`` (no scrubbing at all — for benchmarks).

    ``encryption`` (a ``safepoint.Keyring``, the ``encryption`` extra) encrypts
    everything the store holds that could hold content, bound to its place,
    under data keys wrapped by the keyring's keys (docs/encryption.md). The
    first read-write open with a keyring makes the store encrypted; after
    that it must always be opened with one: without, the open itself raises
    ``EncryptedStore`` (read-only or not, before anything is written). A key
    that is not the store's (a key-encryption key that does not open its
    data key, another index key) raises ``InvalidKey`` at open.
    ``open_store`` never reads the environment: build the keyring with
    ``Keyring.from_env(NAME)``, ``from_file`` or ``from_callable``.

    Unknown schemes or options raise ``InvalidURL``; a near miss
    (``sqlite:/x.db``, ``postgres:/db``, a bare ``file.db``) says the right form.
    """
    scheme = scheme_of(url)
    options = dict(options)
    read_only = _read_only(options)
    observer = _observer(options)
    keyring = keyring_option(options)
    if scheme == "sqlite":
        # Large values go to files beside the database unless told otherwise
        # (the folder is made by the first large value, never on open).
        default_blobs: BlobTarget = ExternalBlobs(FileSystemBlobStore(_sqlite_path(url) + ".blobs"))
    else:
        default_blobs = DatabaseBlobs()
    pipeline = Pipeline.from_options(options, default_blobs)
    if scheme == "sqlite":
        store = _open_sqlite(url, _sqlite_path(url), options, read_only)
    elif scheme == "memory":
        if read_only:
            raise StoreNotFound("memory://", "a memory:// store is new and empty on every open")
        store = _open_sqlite(url, None, options, read_only)
    else:
        store = _open_postgres(url, options, read_only)
    store.pipeline = pipeline
    store.observer = observer
    store.driver.on_query = query_hook(observer)  # the drivers' statement-level tracing, if it has one
    if keyring is not None or scheme != "memory":  # a memory:// store is new: nothing to refuse
        try:
            # Before anything is written: a keyless open of an encrypted store is refused here
            # (one read of safepoint_meta), and a keyring's keys are checked against the store's.
            setup = open_encryption(keyring, writable=not read_only, now=now_micros())
            sealer = store.driver.run(setup, write=not read_only and keyring is not None)
            if sealer is not None:
                pipeline.encrypt(sealer)
        except BaseException:
            store.close()
            raise
    return store


def _read_only(options: dict[str, Any]) -> bool:
    """The ``read_only=`` option, taken out of ``options``."""
    value = options.pop("read_only", False)
    if type(value) is not bool:
        raise InvalidURL(f"read_only must be True or False, not {type(value).__name__}")
    return value


def _observer(options: dict[str, Any]) -> Observer:
    """The ``observer=`` option (``safepoint.observe``), taken out of ``options``."""
    observer = options.pop("observer", None)
    if observer is None:
        return NO_OBSERVER
    if not all(callable(getattr(observer, name, None)) for name in ("span", "add", "record")):
        raise InvalidURL("observer must have span, add and record methods (see safepoint.observe)")
    return observer  # type: ignore[no-any-return]


async def open_async_store(url: str = DEFAULT_URL, **options: Any) -> AsyncStore:
    """Open the store at ``url`` for asyncio code: ``store = await open_async_store(url)``.

    Same URLs and options as ``open_store``; the methods are the same names,
    awaited. SQLite work runs in a worker thread so the event loop never
    blocks on a commit.
    """
    scheme = scheme_of(url)
    if scheme in ("sqlite", "memory"):
        sync_store = await asyncio.to_thread(open_store, url, **options)
        driver = sync_store.driver
        assert isinstance(driver, SQLiteDriver)
        store = AsyncStore(SQLiteAsyncDriver(driver), url=url, pipeline=sync_store.pipeline)
        store.observer = sync_store.observer
        return store
    if scheme == "postgresql":
        # Native async: psycopg's AsyncConnectionPool, bound to the running loop.
        from .postgres.async_driver import open_postgres_async_driver  # noqa: PLC0415
        from .postgres.config import PostgresConfig  # noqa: PLC0415

        options = dict(options)
        observer = _observer(options)
        keyring = keyring_option(options)
        pipeline = Pipeline.from_options(options, DatabaseBlobs())
        display_url = PostgresConfig.from_options(url, dict(options)).display_url
        async_driver = await open_postgres_async_driver(url, **options)
        async_driver.on_query = query_hook(observer)
        writable = not options.get("read_only", False)
        try:
            setup = open_encryption(keyring, writable=writable, now=now_micros())
            sealer = await async_driver.run(setup, write=writable and keyring is not None)
            if sealer is not None:
                pipeline.encrypt(sealer)
        except BaseException:
            await async_driver.close()
            raise
        opened = AsyncStore(async_driver, url=display_url, pipeline=pipeline)
        opened.observer = observer
        return opened
    raise AssertionError(f"scheme_of returned {scheme!r}")  # pragma: no cover


def _open_sqlite(url: str, path: str | None, options: dict[str, Any], read_only: bool) -> Store:
    allowed = {"busy_timeout", "trace", "wal_autocheckpoint", "group_commit"}
    unknown = set(options) - allowed
    if unknown:
        names = ", ".join(sorted(visible(str(name), max_len=40) for name in unknown))
        raise InvalidURL(f"unknown option(s) for a SQLite store: {names}")
    _check_sqlite_options(options)
    return Store(SQLiteDriver(path, read_only=read_only, **options), url=url)


def _check_sqlite_options(options: dict[str, Any]) -> None:
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


_MAX_BUSY_TIMEOUT = 86_400  # a day; SQLite takes milliseconds as a 32-bit int


def _open_postgres(url: str, options: dict[str, Any], read_only: bool) -> Store:
    # Imported here so that SQLite users never load psycopg.
    from .postgres.config import PostgresConfig  # noqa: PLC0415
    from .postgres.driver import PostgresDriver  # noqa: PLC0415

    config = PostgresConfig.from_options(url, {**options, "read_only": read_only})
    # display_url masks the password: Store.url shows up in reprs and logs.
    return Store(PostgresDriver.open(config), url=config.display_url)
