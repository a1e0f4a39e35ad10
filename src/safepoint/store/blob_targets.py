"""Where a store's offloaded values go, and how they come back on load.

Two kinds of target behind one protocol, ``BlobTarget``, so the save, the
load and ``fetch_blob`` never ask which one they have:

* ``ExternalBlobs`` — any ``BlobStore`` (filesystem, S3, memory). A save
  uploads its new values *before* its transaction begins (``put_all``, run
  by the store as the call's ``before`` step), so no upload, however slow,
  runs while the save holds a row lock or an open transaction: PostgreSQL's
  idle-in-transaction timeout (5 s, ``postgres/setup.sql``) would end the
  session of a save that uploaded inside it, and the retry would fail the
  same way. The blobs are content-addressed and idempotent, so a save that
  dies after its uploads leaves only orphans, which garbage collection removes.
* ``DatabaseBlobs`` — a table of the store itself; the values are inserted
  by the save's own transaction and read by the load's.

Garbage collection and the blob guard. GC holds the guard exclusively
(``blob_guard_exclusive``) while it marks and deletes; a save that references
blobs takes it shared (``blob_guard_shared``) inside its transaction and
holds it to commit. With the uploads before the transaction, a GC can run
between a save's upload and its transaction and delete what it just put (or
an old orphan that the upload found already there and did not rewrite). So
under the shared guard ``ExternalBlobs.write`` *re-checks* each new blob
(``BlobStore.exists``: a stat on the filesystem, one HEAD on S3) and puts it
again if it is gone. After that check no GC can run until the save commits,
and once it commits the row's ``blobs`` column marks them. A grace period
would not do: ``put`` of content already stored does not refresh its
``created_at``, so an old orphan reused by a new save would look old enough
to collect, and ``collect_garbage(grace=0)`` is a documented call. The re-put
happens only when a GC struck in that window (or when a runner skipped
``before``); it is the one upload that can run inside the transaction.
(SQLite's single writer makes the guard its write lock; PostgreSQL uses a
transaction-level advisory lock.)

Tenants. A blob's name is its digest, so two tenants sharing one blob store
would share names: one could learn whether another holds a value (its put
finds it there) and reach another's blob by digest. So a named tenant's
external blobs live in a namespace of their own, ``tenants/<tenant>/`` under
the blob store's root or prefix (``BlobStore.for_tenant``, which the blob
stores safepoint ships have), and every read, write, scan and delete of the
tenant's store goes there. The implicit tenant keeps the names it always had
(the root itself; a scan there skips the ``tenants/`` namespace, which is no
digest). A SQLite store's default blob folder is already the tenant's own
(beside the tenant's file), and the database target keeps blobs in the
tenant's rows.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from typing import Any, Protocol

from safepoint.blobs.base import BlobStore, blob_digest, decode_stored, encode_stored
from safepoint.errors import BlobNotFound, InvalidArgument

from .query import Query
from .tenants import IMPLICIT


class BlobTarget(Protocol):
    """Where a store's blobs live. A save calls ``put_all`` before its
    transaction and ``write`` inside it, under the shared blob guard, before
    its row; a load reads them with ``fetch``."""

    #: True: blobs are rows of the store itself, written by the save's
    #: transaction and read by the load's (``select_blobs``); False: they are
    #: uploaded before the save's transaction and fetched from the blob store.
    in_database: bool

    def digest_of(self, data: bytes) -> str:
        """The name a blob of ``data`` is stored under: its SHA-256 (keyed on an encrypted store)."""

    def put_all(self, pending: Mapping[str, bytes]) -> None:
        """Before the save's transaction: make ``pending`` durable if this target
        is written outside it (idempotent; nothing for the database target)."""

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        """Inside the save's transaction, before its row: an operation that leaves
        every blob of ``pending`` durable when the transaction commits."""

    def fetch(self, digests: Iterable[str], stored: Mapping[str, bytes]) -> dict[str, bytes]:
        """The verified original bytes of each of ``digests``; ``stored`` holds the
        rows the load's transaction read (``select_blobs``, still framed).
        ``BlobNotFound``/``BlobCorrupt`` naming the digest when one is missing or altered."""

    def close(self) -> None:
        """Release what the target holds (a blob store's connections)."""


class ExternalBlobs:
    """Offloaded values in a ``BlobStore`` of their own."""

    in_database = False

    def __init__(self, store: BlobStore, *, parent: BlobStore | None = None) -> None:
        self.store = store
        # The blob store ``store`` is a tenant's view of, when this target opened it (from a
        # URL) and so closes it too; a blob store the caller gave stays the caller's.
        self.parent = parent

    digest_of = staticmethod(blob_digest)

    def put_all(self, pending: Mapping[str, bytes]) -> None:
        """Upload ``pending`` before the save's transaction (idempotent; durable when it returns)."""
        for data in pending.values():
            self.store.put(data)

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        """Inside the transaction, under the shared blob guard: make sure each blob is still there.

        ``put_all`` uploaded them before the transaction; a GC in between may
        have deleted them, so each missing one is put again (see the module
        docstring). No queries: a generator like ``DatabaseBlobs.write``.
        """
        del now
        for digest, data in pending.items():
            if not self.store.exists(digest):
                self.store.put(data)
        return
        yield

    def fetch(self, digests: Iterable[str], stored: Mapping[str, bytes]) -> dict[str, bytes]:
        """From the blob store, which verifies what it returns (a load read nothing for it)."""
        del stored
        return {digest: self.store.get(digest) for digest in digests}

    def close(self) -> None:
        self.store.close()
        if self.parent is not None:
            self.parent.close()


class DatabaseBlobs:
    """Offloaded values in the store's own ``safepoint_blobs`` table."""

    in_database = True

    def __init__(self, *, compress: bool = False) -> None:
        self.compress = compress

    digest_of = staticmethod(blob_digest)

    def put_all(self, pending: Mapping[str, bytes]) -> None:
        """Nothing: the save's own transaction inserts them (``write``)."""
        del pending

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:

        rows = [
            {
                "digest": digest,
                "size": len(data),
                "now": now,
                "data": encode_stored(data, compress=self.compress),
            }
            for digest, data in pending.items()
        ]
        yield Query("insert_blobs", many=rows)

    def fetch(self, digests: Iterable[str], stored: Mapping[str, bytes]) -> dict[str, bytes]:
        """From the rows the load's transaction read, verified (a digest it did not find is missing)."""
        values = {digest: decode_stored(digest, data) for digest, data in stored.items()}
        missing = sorted(set(digests) - set(values))
        if missing:
            raise BlobNotFound(missing[0], "not in the store's blob table")
        return values

    def close(self) -> None:
        pass


def blob_target(
    option: Any, default: BlobTarget | None, compress: bool, *, tenant: str = IMPLICIT
) -> BlobTarget | None:
    """The blob target ``open_store(..., blobs=…)`` asks for, for ``tenant``.

    ``None``: the backend's default (the backend made it for the tenant);
    ``False``: never offload; ``"database"``: the store's own table; a
    ``BlobStore``; or a blob store URL (``file:///…``, ``s3://bucket/prefix?…``,
    ``memory://``). A blob store, given or opened from a URL, is seen through
    a named tenant's namespace in it (the module docstring): one without
    ``for_tenant`` is refused (``InvalidArgument``), since its names would be
    shared with every other tenant's.
    """
    if option is None:
        return default
    if option is False:
        return None
    if option == "database":
        return DatabaseBlobs(compress=compress)
    if isinstance(option, str):
        from safepoint.blobs import open_blob_store  # noqa: PLC0415

        opened = open_blob_store(option, compress=compress) if compress else open_blob_store(option)
        if tenant == IMPLICIT:
            return ExternalBlobs(opened)
        return ExternalBlobs(_tenant_view(opened, tenant), parent=opened)
    if isinstance(option, BlobStore):
        return ExternalBlobs(option if tenant == IMPLICIT else _tenant_view(option, tenant))
    raise InvalidArgument(
        f"blobs must be a BlobStore, a blob store URL, 'database' or False, not {type(option).__name__}"
    )


def _tenant_view(store: BlobStore, tenant: str) -> BlobStore:
    """``store`` as ``tenant`` sees it: its ``for_tenant`` namespace, or ``InvalidArgument``."""
    for_tenant = getattr(store, "for_tenant", None)
    if not callable(for_tenant):
        raise InvalidArgument(
            f"blobs is a {type(store).__name__} without for_tenant(name): a named tenant's blobs need"
            " a namespace of their own in a shared blob store (give it a for_tenant method that"
            " returns one, as the bundled blob stores have)"
        )
    view = for_tenant(tenant)
    if not isinstance(view, BlobStore):
        raise InvalidArgument(f"{type(store).__name__}.for_tenant() must return a BlobStore")
    return view
