"""Where a store's offloaded values go, and how they come back on load.

Two kinds of target, one interface for the operations in ``ops.py``:

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
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from safepoint.blobs.base import BlobRef, BlobStore, decode_stored, encode_stored
from safepoint.errors import BlobCorrupt, BlobNotFound
from safepoint.messagelist import MessageList, freeze
from safepoint.model import Checkpoint

from .offload import find_refs, inline


class ExternalBlobs:
    """Offloaded values in a ``BlobStore`` of their own."""

    in_database = False

    def __init__(self, store: BlobStore) -> None:
        self.store = store

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

    def fetch(self, digests: list[str]) -> dict[str, bytes]:
        return {digest: self.store.get(digest) for digest in digests}

    def close(self) -> None:
        self.store.close()


class DatabaseBlobs:
    """Offloaded values in the store's own ``safepoint_blobs`` table."""

    in_database = True

    def __init__(self, *, compress: bool = False) -> None:
        self.compress = compress

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        from .query import Query  # noqa: PLC0415  (ops imports this module)

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

    @staticmethod
    def decode(stored: Mapping[str, bytes]) -> dict[str, bytes]:
        """Verified original bytes of ``select_blobs`` rows (``BlobCorrupt`` on mismatch)."""
        return {digest: decode_stored(digest, data) for digest, data in stored.items()}

    def close(self) -> None:
        pass


BlobTarget = ExternalBlobs | DatabaseBlobs


def inline_blobs(
    cp: Checkpoint,
    target: BlobTarget,
    *,
    fetched: Mapping[str, bytes],
    message_indexes: list[int] | None,
) -> Checkpoint:
    """``cp`` with its blob references replaced by their values (in place).

    ``message_indexes`` are the messages known to hold references (None: look
    at every message, e.g. after a migration). ``fetched`` holds stored blobs
    the database target read in the load's transaction (verified here); the
    rest come from the blob store. A missing or altered blob raises
    ``BlobNotFound``/``BlobCorrupt`` naming run, step and digest.
    """
    messages = cp.messages
    assert isinstance(messages, MessageList)
    indexes = range(len(messages)) if message_indexes is None else message_indexes
    refs: list[BlobRef] = []
    for name in ("pending_action", "cursors", "state"):
        find_refs(getattr(cp, name), refs)
    for index in indexes:
        find_refs(messages[index], refs)
    if not refs:
        return cp
    try:
        values = DatabaseBlobs.decode(fetched)
        missing = sorted({ref.digest for ref in refs} - set(values))
        if missing:
            if isinstance(target, DatabaseBlobs):
                raise BlobNotFound(missing[0], "not in the store's blob table")
            values.update(target.fetch(missing))
    except BlobCorrupt as exc:
        raise BlobCorrupt(exc.digest, exc.detail, cp.run_id, cp.step) from exc
    except BlobNotFound as exc:
        raise BlobNotFound(
            exc.digest, f"referenced by run {cp.run_id!r} step {cp.step}, but missing"
        ) from exc
    restored = MessageList(messages, messages.stored)
    restored.clean_prefix = messages.clean_prefix
    for index in indexes:
        restored_message = inline(messages[index], values)
        list.__setitem__(restored, index, freeze(restored_message))
    cp.messages = restored
    cp.pending_action = inline(cp.pending_action, values)
    cp.cursors = inline(cp.cursors, values)
    cp.state = inline(cp.state, values)
    return cp
