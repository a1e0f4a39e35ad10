"""What every blob store shares: the protocol, blob references, digests and framing.

A blob is an immutable byte string addressed by the SHA-256 of its bytes. A
checkpoint never holds a large value itself, only a ``BlobRef`` (digest, size,
media type) written as ``{"$blob": {...}}`` in its JSON.

Stored framing (a zstd frame or the bytes as they are): see ``framing``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from safepoint.errors import InvalidArgument, StoreClosed

# Re-exported (``__all__``): the stores and the store layer import the framing from here.
from .framing import MAX_FRAME_CONTENT, ZSTD_MAGIC, blob_digest, decode_stored, encode_stored

BLOB_KEY = "$blob"
_DIGEST_RE = re.compile(r"[0-9a-f]{64}")
_MAX_MEDIA_TYPE = 255
_REF_FIELDS = frozenset({"sha256", "size", "media_type"})
# A tenant's namespace in a shared blob store (``for_tenant``): the names a store's tenants
# may have (``safepoint.store.tenants``), which are safe as a path segment and an object key.
TENANTS = "tenants"
_TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def check_digest(digest: object) -> str:
    """Return ``digest`` if it is 64 lowercase hex characters, else raise ``InvalidArgument``.

    Every store calls this before any I/O: a digest becomes a file name or an
    object key, so anything else (``../../etc/passwd``) must never reach one.
    """
    if not isinstance(digest, str):
        raise InvalidArgument(f"blob digest must be a str, got {type(digest).__name__}")
    if _DIGEST_RE.fullmatch(digest) is None:
        raise InvalidArgument(
            f"blob digest must be 64 lowercase hex characters (SHA-256), got {len(digest)} others"
        )
    return digest


def check_tenant_name(tenant: object) -> str:
    """``tenant`` if it can name a tenant's namespace (``for_tenant``), else ``InvalidArgument``.

    The store checks its tenant first; this keeps a blob store's own ``for_tenant``
    from ever making ``..`` or a slash part of a path or key, whoever calls it.
    """
    if not isinstance(tenant, str) or _TENANT_RE.fullmatch(tenant) is None:
        raise InvalidArgument(
            "a tenant's blob namespace is named by 1 to 63 lowercase letters, digits, '-' or '_',"
            " starting with a letter or digit"
        )
    return tenant


def check_data(data: object) -> bytes:
    """Return ``data`` as ``bytes`` if it is bytes-like, else raise ``InvalidArgument``."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidArgument(f"blob data must be bytes, got {type(data).__name__}")


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """One stored object as ``scan`` sees it.

    ``stored_size`` is what the object takes in the store (after compression);
    ``created_at`` (timezone-aware, UTC) is when it was written, which garbage
    collection compares with its grace period.
    """

    digest: str
    stored_size: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class BlobRef:
    """What a checkpoint keeps instead of a large value.

    ``digest`` is the lowercase hex SHA-256 of the original (uncompressed)
    bytes, ``size`` their length, ``media_type`` how to read them, e.g.
    ``"text/plain; charset=utf-8"`` or ``"application/octet-stream"``.
    """

    digest: str
    size: int
    media_type: str = "application/octet-stream"

    def __post_init__(self) -> None:
        check_digest(self.digest)
        if type(self.size) is not int or self.size < 0:
            raise InvalidArgument("blob size must be a non-negative int")
        _check_media_type(self.media_type)

    @classmethod
    def of(cls, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """The reference for ``data`` (its digest and size) with the given media type."""
        data = check_data(data)
        return cls(blob_digest(data), len(data), media_type)

    def to_json(self) -> dict[str, Any]:
        """``{"$blob": {"sha256": ..., "size": ..., "media_type": ...}}``, ready for a checkpoint."""
        return {BLOB_KEY: {"sha256": self.digest, "size": self.size, "media_type": self.media_type}}

    @classmethod
    def from_json(cls, obj: object) -> BlobRef | None:
        """Parse ``{"$blob": {...}}``; ``None`` when ``obj`` is not a blob reference at all.

        A dict with a ``"$blob"`` key is a blob reference; if anything about it
        is wrong (other keys beside it, a missing or unknown field, a bad
        digest, size or media type) this raises ``InvalidArgument``.
        """
        if not isinstance(obj, dict) or BLOB_KEY not in obj:
            return None
        if len(obj) != 1:
            others = sorted(str(key) for key in obj if key != BLOB_KEY)
            raise InvalidArgument(f"blob reference has keys beside {BLOB_KEY!r}: {others}")
        body = obj[BLOB_KEY]
        if not isinstance(body, dict):
            raise InvalidArgument(
                f"blob reference {BLOB_KEY!r} must hold an object, not {type(body).__name__}"
            )
        keys = set(body)
        if keys != _REF_FIELDS:
            missing, unknown = sorted(_REF_FIELDS - keys), sorted(str(key) for key in keys - _REF_FIELDS)
            raise InvalidArgument(f"blob reference fields are wrong: missing {missing}, unknown {unknown}")
        return cls(body["sha256"], body["size"], body["media_type"])


def is_blob_ref(obj: object) -> bool:
    """True when ``obj`` is a well-formed ``{"$blob": {...}}`` reference (never raises)."""
    try:
        return BlobRef.from_json(obj) is not None
    except InvalidArgument:
        return False


def _check_media_type(media_type: object) -> None:
    if not isinstance(media_type, str) or not media_type:
        raise InvalidArgument("blob media type must be a non-empty str")
    if len(media_type) > _MAX_MEDIA_TYPE or not media_type.isascii() or not media_type.isprintable():
        raise InvalidArgument(
            f"blob media type must be printable ASCII of at most {_MAX_MEDIA_TYPE} characters"
        )


@runtime_checkable
class BlobStore(Protocol):
    """Where large values live, content-addressed by SHA-256 of their original bytes.

    Every method validates its digest first: anything but 64 lowercase hex
    characters raises ``InvalidArgument`` before any I/O. Backend failures
    (disk, permissions, network) raise ``BlobError`` with the backend's
    exception as ``__cause__``. Calls after ``close()`` raise ``StoreClosed``.
    A store is safe to use from several threads, and several processes may
    share one location.
    """

    def put(self, data: bytes) -> str:
        """Store ``data`` and return its digest (lowercase hex SHA-256).

        Idempotent: when the content is already stored this is a cheap no-op
        that does not rewrite it (nor refresh its ``created_at``). Durable
        when it returns, so a checkpoint may reference the digest right after.
        Concurrent puts of the same content, from any number of processes,
        all succeed and leave one intact object.
        """
        ...

    def get(self, digest: str) -> bytes:
        """Return the original bytes stored under ``digest``, verified.

        Raises ``BlobNotFound`` when there is no such blob, and ``BlobCorrupt``
        (naming the digest) when the stored bytes do not hash to it.
        """
        ...

    def exists(self, digest: str) -> bool:
        """True when a blob is stored under ``digest`` (its bytes are not read or verified)."""
        ...

    def delete(self, digest: str) -> bool:
        """Remove the blob; True if it existed. Idempotent: deleting a missing blob returns False."""
        ...

    def scan(self) -> Iterator[BlobInfo]:
        """Yield every complete stored blob once, in ascending digest order.

        Objects still being written (or left half-written by a crash) are
        never listed. Blobs put or deleted while a scan runs may or may not
        be seen. Meant for garbage collection: mark what checkpoints
        reference, then delete unreferenced blobs older than a grace period.
        """
        ...

    def close(self) -> None:
        """Release the store's resources; idempotent. Later calls raise ``StoreClosed``."""
        ...


@runtime_checkable
class SealedBlobStore(BlobStore, Protocol):
    """A blob store an encrypted store can use: it also keeps bytes under a name it is given.

    An encrypted store names each blob by a keyed digest of its content (a
    plain SHA-256 of a short value would reveal it) and stores it sealed, so
    the store, not the blob store, verifies what it reads back. The blob
    stores safepoint ships (filesystem, S3, memory) are all of this kind.
    """

    def put_sealed(self, digest: str, sealed: bytes, *, replace: bool = False) -> None:
        """Store ``sealed`` under ``digest`` unless something is stored there (idempotent, durable);
        with ``replace``, in place of what is there (rekey: the same content under a new key)."""
        ...

    def get_sealed(self, digest: str) -> bytes:
        """The bytes stored under ``digest``, unverified; ``BlobNotFound`` when there are none."""
        ...


class BundledStore:
    """What the bundled stores share: the closed flag, the context-manager protocol, and the four
    byte methods written once over the two a store provides.

    ``put``/``get`` frame and verify (``framing``); ``put_sealed``/``get_sealed``
    keep the bytes as given. A store provides ``_read`` (the object stored under
    a digest, checked open; ``BlobNotFound`` when there is none) and ``_write``
    (store what ``make`` returns under a digest unless something is there, or
    in its place with ``replace``; ``make`` is called only when it writes, so
    a put of content already stored compresses nothing).
    """

    _closed: bool = False
    _name: str = "blob store"
    compress: bool = False

    def _read(self, digest: str) -> bytes:
        raise NotImplementedError

    def _write(self, digest: str, make: Callable[[], bytes], *, replace: bool) -> None:
        raise NotImplementedError

    def put(self, data: bytes) -> str:
        """Store ``data``; see ``BlobStore.put``."""
        data = check_data(data)
        self._check_open()
        digest = blob_digest(data)
        self._write(digest, lambda: encode_stored(data, compress=self.compress), replace=False)
        return digest

    def get(self, digest: str) -> bytes:
        """Return the verified bytes of ``digest``; see ``BlobStore.get``."""
        return decode_stored(digest, self._read(digest))

    def put_sealed(self, digest: str, sealed: bytes, *, replace: bool = False) -> None:
        """Store an encrypted store's sealed blob under ``digest``, its keyed digest (``SealedBlobStore``)."""
        check_digest(digest)
        sealed = check_data(sealed)
        self._check_open()
        self._write(digest, lambda: sealed, replace=replace)

    def get_sealed(self, digest: str) -> bytes:
        """The sealed bytes stored under ``digest``, unverified (the store opens and checks them)."""
        return self._read(digest)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"{self._name} is closed")

    def close(self) -> None:
        """Mark the store closed; idempotent."""
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


__all__ = [
    "BLOB_KEY",
    "MAX_FRAME_CONTENT",
    "TENANTS",
    "ZSTD_MAGIC",
    "BlobInfo",
    "BlobRef",
    "BlobStore",
    "BundledStore",
    "SealedBlobStore",
    "blob_digest",
    "check_data",
    "check_digest",
    "check_tenant_name",
    "decode_stored",
    "encode_stored",
    "is_blob_ref",
]
