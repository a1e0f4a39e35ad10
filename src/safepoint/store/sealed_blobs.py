"""An encrypted store's blob target: blobs named by a keyed digest, stored sealed.

``SealedBlobs`` wraps the store's target (``blob_targets.py``). A blob's
name is the keyed digest of its content (``Sealer.blob_digest``), so equal
content is stored once and the name reveals nothing; its bytes are sealed
with a nonce derived from name and content, bound to that name, so a blob
put in another's place does not open (``BlobCorrupt``). Sealed bytes do not
compress: an encrypted store's blobs are never compressed.

Both targets are sealed here: the database target's rows (``sealed_ops``
leaves a ``data`` column alone) and an external blob store (filesystem,
S3), which must be a ``SealedBlobStore``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from typing import Any

from safepoint.blobs.base import SealedBlobStore
from safepoint.errors import BlobNotFound, InvalidArgument

from .blob_targets import BlobTarget, ExternalBlobs
from .query import Query
from .sealer import Sealer


class SealedBlobs:
    """``inner``'s blobs, sealed."""

    def __init__(self, inner: BlobTarget, sealer: Sealer) -> None:
        self.inner = inner
        self.sealer = sealer
        self.in_database = inner.in_database
        self.external: SealedBlobStore | None = None
        if isinstance(inner, ExternalBlobs):
            if not isinstance(inner.store, SealedBlobStore):
                raise InvalidArgument(
                    f"an encrypted store needs a blob store with put_sealed and get_sealed; "
                    f"{type(inner.store).__name__} has not"
                )
            self.external = inner.store

    @property
    def store(self) -> SealedBlobStore | None:
        """The external blob store (garbage collection scans it); None for the database table."""
        return self.external

    def digest_of(self, data: bytes) -> str:
        return self.sealer.blob_digest(data)

    def put_all(self, pending: Mapping[str, bytes]) -> None:
        if self.external is not None:
            for digest, data in pending.items():
                self.external.put_sealed(digest, self.sealer.seal_blob(digest, data))

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        if self.external is None:
            seal = self.sealer.seal_blob
            rows = [
                {"digest": digest, "size": len(data), "now": now, "data": seal(digest, data)}
                for digest, data in pending.items()
            ]
            yield Query("insert_blobs", many=rows)
            return
        for digest, data in pending.items():  # put again if a GC removed one since put_all
            if not self.external.exists(digest):
                self.external.put_sealed(digest, self.sealer.seal_blob(digest, data))

    def fetch(self, digests: Iterable[str], stored: Mapping[str, bytes]) -> dict[str, bytes]:
        if self.external is not None:
            store = self.external
            return {digest: self.sealer.open_blob(digest, store.get_sealed(digest)) for digest in digests}
        # The rows the load's transaction read, still sealed.
        values = {digest: self.sealer.open_blob(digest, bytes(data)) for digest, data in stored.items()}
        missing = sorted(set(digests) - set(values))
        if missing:
            raise BlobNotFound(missing[0], "not in the store's blob table")
        return values

    def close(self) -> None:
        self.inner.close()
