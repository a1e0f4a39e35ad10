"""Where a store's offloaded values go, and how they come back on load.

Two kinds of target, one interface for the operations in ``ops.py``:

* ``ExternalBlobs`` — any ``BlobStore`` (filesystem, S3, memory). The save
  operation puts the new values *inside* its transaction, after the run's
  checks and before the checkpoint row, so the blob is durable before the row
  commits.
* ``DatabaseBlobs`` — a table of the store itself; the values are inserted
  by the save's own transaction and read by the load's.

Both take the blob guard first (``blob_guard_shared``): garbage collection
takes it exclusively, so it never decides a blob is unreferenced while a save
that references it is between its put and its commit. (SQLite's single writer
gives that for free; PostgreSQL uses a transaction-level advisory lock.)
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

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        del now
        for data in pending.values():
            self.store.put(data)  # idempotent; durable when it returns
        return
        yield  # a generator like DatabaseBlobs.write

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
        from .ops import Query  # noqa: PLC0415  (ops imports this module)

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
