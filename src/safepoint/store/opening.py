"""Opening a store: ``open_store`` and ``open_async_store``, from a URL and keyword options.

The URL names the backend (``urls.scheme_of``), whose row in the backend
table (``backends.py``) both openers read; the options are read here — the
store-wide ones (``read_only``, ``observer``, ``encryption``, the scrubber's
and the settings's, through ``StoreSettings.from_options``) — and by the
backend's opener, each refused by name (``InvalidURL``) when unknown or out
of range, before any file or connection is opened where that can be helped.
Opening is written once, as a flow (``safepoint.twins``) that ``open_store``
blocks on and ``open_async_store`` awaits.
"""

from __future__ import annotations

from typing import Any

from safepoint.errors import InvalidURL
from safepoint.observe import NO_OBSERVER, Observer, query_hook
from safepoint.records import now_micros
from safepoint.twins import Flow, Invoke, awaiting, blocking

from .asyncstore import AsyncStore
from .backends import BACKENDS
from .encryption import keyring_option, open_encryption
from .facade import Store
from .settings import StoreSettings
from .tenants import tenant_option
from .urls import scheme_of

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

    ``tenant`` (every backend; default: the implicit tenant, ``"default"``)
    is whose runs the handle sees: it reads, writes, lists, claims, forks,
    collects, redacts, backs up and verifies only that tenant's runs, blobs
    and journal. ``store.tenant`` names it; ``store.url`` stays the URL
    given, so the two open the same handle again. A name is 1 to 63
    lowercase letters, digits, ``-`` or ``_``, starting with a letter or
    digit (anything else raises ``InvalidURL``). Without it — or with
    ``tenant="default"``, the same thing — a handle is the store as it was
    before tenants: an existing store opens unchanged. Run ids are unique
    per tenant, and blob names are namespaced per tenant: one tenant cannot
    tell whether another holds a run id or a blob.

    - SQLite: a file per tenant, ``<file>.tenants/<tenant>.db`` beside the
      store's file (the implicit tenant's is the file itself), with its blob
      folder beside it. One SQLite file has no roles to enforce isolation
      with, so the file is the boundary: nothing is shared, and the
      operating system's permissions can keep one tenant's file from
      another's process. A read-write open makes the ``.tenants`` folder; a
      read-only open of a tenant that has no file raises ``StoreNotFound``.
    - PostgreSQL: the tenants share the schema, kept apart by row-level
      security (docs/tenants.md).
    - ``memory://`` takes the option (each memory store is private anyway).

    With ``blobs=`` naming a blob store, a named tenant's blobs go under
    ``tenants/<tenant>/`` in it (the blob store's ``for_tenant``, which the
    bundled ones have; a ``BlobStore`` of your own without it is refused with
    ``InvalidArgument``); the implicit tenant's stay where they always were.

    Unknown schemes or options raise ``InvalidURL``; a near miss
    (``sqlite:/x.db``, ``postgres:/db``, a bare ``file.db``) says the right form.
    """
    store: Store = blocking(_opening(url, options, Store))
    return store


def _opening(url: object, given: dict[str, Any], face: Any) -> Flow[Any]:
    """Open the store at ``url`` as ``face`` (``Store`` or ``AsyncStore``), written once for
    both: a flow whose I/O steps are ``Invoke`` requests, which ``open_store`` blocks on and
    ``open_async_store`` awaits (docs/architecture.md, "One way to be both sync and async")."""
    backend = BACKENDS[scheme_of(url)]
    assert isinstance(url, str)  # scheme_of refused anything else
    options = dict(given)
    tenant = tenant_option(options)
    read_only = _read_only(options)
    observer = _observer(options)
    keyring = keyring_option(options)
    settings = StoreSettings.from_options(options, backend.default_blobs(url, tenant), tenant=tenant)
    options["tenant"] = tenant  # checked: the opener takes it out (the module docstring)
    opener = backend.open if face is Store else backend.open_async  # the backend's own, by flavour
    driver, shown = yield Invoke(opener, (url, options, read_only))
    driver.on_query = query_hook(observer)  # the drivers' statement-level tracing, if it has one
    if keyring is not None or backend.scheme != "memory":  # a memory:// store is new: nothing to refuse
        try:
            # Before anything is written: a keyless open of an encrypted store is refused here
            # (one read of safepoint_meta), and a keyring's keys are checked against the store's.
            setup = open_encryption(keyring, writable=not read_only, now=now_micros())
            sealer = yield Invoke(driver.run, (setup,), {"write": not read_only and keyring is not None})
            if sealer is not None:
                settings = settings.encrypted(sealer)
        except BaseException:
            yield Invoke(driver.close)
            raise
    store = face(driver, url=shown, settings=settings, tenant=tenant)
    store.observer = observer
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
    store: AsyncStore = await awaiting(_opening(url, options, AsyncStore))
    return store
