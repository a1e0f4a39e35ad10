"""Blobs in a dict: for tests and the ``memory://`` store. Nothing survives the process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

from safepoint.blobs.base import (
    BlobInfo,
    StoreLifecycle,
    blob_digest,
    check_data,
    check_digest,
    decode_stored,
    encode_stored,
)
from safepoint.errors import BlobNotFound


class MemoryBlobStore(StoreLifecycle):
    """A ``BlobStore`` held in memory, keeping the same contract as the durable ones.

    It stores what a durable store would (zstd frames with ``compress=True``)
    and verifies on read, so tests of corruption and compression behave as
    they do on disk. ``raw`` and ``tamper`` let such tests see and alter a stored object.
    """

    def __init__(self, *, compress: bool = False) -> None:
        self.compress = compress
        self._objects: dict[str, tuple[bytes, datetime]] = {}
        self._lock = threading.Lock()
        self._name = "memory blob store"

    def __repr__(self) -> str:
        return f"MemoryBlobStore(compress={self.compress}, blobs={len(self._objects)})"

    def put(self, data: bytes) -> str:
        """Store ``data``; see ``BlobStore.put``."""
        data = check_data(data)
        self._check_open()
        digest = blob_digest(data)
        if self.exists(digest):
            return digest
        stored = encode_stored(data, compress=self.compress)  # outside the lock: it can take a while
        with self._lock:
            self._objects.setdefault(digest, (stored, datetime.now(UTC)))
        return digest

    def get(self, digest: str) -> bytes:
        """Return the verified bytes of ``digest``; see ``BlobStore.get``."""
        check_digest(digest)
        self._check_open()
        with self._lock:
            found = self._objects.get(digest)
        if found is None:
            raise BlobNotFound(digest)
        return decode_stored(digest, found[0])

    def put_sealed(self, digest: str, sealed: bytes, *, replace: bool = False) -> None:
        """Store an encrypted store's sealed blob under ``digest``, its keyed digest (``SealedBlobStore``)."""
        check_digest(digest)
        sealed = check_data(sealed)
        self._check_open()
        with self._lock:
            if replace:
                self._objects[digest] = (sealed, datetime.now(UTC))
            else:
                self._objects.setdefault(digest, (sealed, datetime.now(UTC)))

    def get_sealed(self, digest: str) -> bytes:
        """The sealed bytes stored under ``digest``, unverified (the store opens and checks them)."""
        return self.raw(digest)

    def exists(self, digest: str) -> bool:
        """True when ``digest`` is stored; see ``BlobStore.exists``."""
        check_digest(digest)
        self._check_open()
        with self._lock:
            return digest in self._objects

    def delete(self, digest: str) -> bool:
        """Remove ``digest``; see ``BlobStore.delete``."""
        check_digest(digest)
        self._check_open()
        with self._lock:
            return self._objects.pop(digest, None) is not None

    def scan(self) -> Iterator[BlobInfo]:
        """Yield every blob in digest order; see ``BlobStore.scan``."""
        self._check_open()
        with self._lock:
            snapshot = sorted(self._objects.items())
        for digest, (stored, created_at) in snapshot:
            yield BlobInfo(digest, len(stored), created_at)

    def raw(self, digest: str) -> bytes:
        """For tests: the object stored for ``digest`` as held (a zstd frame when compressed)."""
        check_digest(digest)
        with self._lock:
            found = self._objects.get(digest)
        if found is None:
            raise BlobNotFound(digest)
        return found[0]

    def tamper(self, digest: str, stored: bytes) -> None:
        """For tests: replace the stored object of ``digest`` with ``stored`` (unverified)."""
        check_digest(digest)
        with self._lock:
            if digest not in self._objects:
                raise BlobNotFound(digest)
            self._objects[digest] = (bytes(stored), self._objects[digest][1])
