"""Blobs in a dict: for tests and the ``memory://`` store. Nothing survives the process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from safepoint.blobs.base import TENANTS, BlobInfo, BundledStore, check_digest, check_tenant_name
from safepoint.errors import BlobNotFound


class MemoryBlobStore(BundledStore):
    """A ``BlobStore`` held in memory, keeping the same contract as the durable ones.

    It stores what a durable store would (zstd frames with ``compress=True``)
    and verifies on read, so tests of corruption and compression behave as
    they do on disk. ``raw`` and ``tamper`` let such tests see and alter a stored object.
    """

    def __init__(self, *, compress: bool = False) -> None:
        self.compress = compress
        # Every namespace of this store and its views (``for_tenant``): "" is its own,
        # "tenants/<tenant>/" a tenant's; the views share the dict and the lock.
        self._spaces: dict[str, dict[str, tuple[bytes, datetime]]] = {"": {}}
        self._space = ""
        self._objects = self._spaces[""]
        self._lock = threading.Lock()
        self._name = "memory blob store"

    def for_tenant(self, tenant: str) -> MemoryBlobStore:
        """A store over ``tenants/<tenant>/`` in this one: a tenant's blobs, named apart from
        every other tenant's and from this store's own. Every view of one tenant sees the
        same objects; closing a view closes only it."""
        name = check_tenant_name(tenant)
        view = MemoryBlobStore(compress=self.compress)
        view._spaces, view._lock = self._spaces, self._lock
        view._space = f"{self._space}{TENANTS}/{name}/"
        with self._lock:
            view._objects = self._spaces.setdefault(view._space, {})
        view._name = f"memory blob store {view._space}"
        return view

    def __repr__(self) -> str:
        return f"MemoryBlobStore(compress={self.compress}, blobs={len(self._objects)})"

    def _read(self, digest: str) -> bytes:
        check_digest(digest)
        self._check_open()
        return self.raw(digest)

    def _write(self, digest: str, make: Callable[[], bytes], *, replace: bool) -> None:
        if not replace and self.exists(digest):
            return
        stored = make()  # outside the lock: compressing can take a while
        with self._lock:
            if replace:
                self._objects[digest] = (stored, datetime.now(UTC))
            else:
                self._objects.setdefault(digest, (stored, datetime.now(UTC)))

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
