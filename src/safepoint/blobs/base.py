"""What every blob store shares: the protocol, blob references, digests and framing.

A blob is an immutable byte string addressed by the SHA-256 of its bytes. A
checkpoint never holds a large value itself, only a ``BlobRef`` (digest, size,
media type) written as ``{"$blob": {...}}`` in its JSON.

Stored framing. A store that compresses writes a plain zstd frame (it starts
with the zstd magic number) and only when that frame is smaller than the
bytes; otherwise it writes the bytes as they are. A reader therefore needs no
setting to know what it holds: bytes that start with the zstd magic are
decompressed, and the digest decides — if the decompressed bytes hash to the
digest the object was compressed, if the stored bytes themselves do it was a
raw value that happened to start with the magic, and if neither does the blob
is corrupt. The digest always addresses the uncompressed bytes, so a
compressing and a plain store can share one location.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import zstandard

from safepoint.errors import BlobCorrupt, InvalidArgument, StoreClosed

BLOB_KEY = "$blob"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Below this size a zstd frame's own header costs more than compression saves.
_MIN_COMPRESS_SIZE = 64
_ZSTD_LEVEL = 3
_DIGEST_RE = re.compile(r"[0-9a-f]{64}")
_MAX_MEDIA_TYPE = 255
_REF_FIELDS = frozenset({"sha256", "size", "media_type"})


def blob_digest(data: bytes) -> str:
    """The lowercase hex SHA-256 of ``data``: the address a blob store files it under."""
    return hashlib.sha256(data).hexdigest()


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


def check_data(data: object) -> bytes:
    """Return ``data`` as ``bytes`` if it is bytes-like, else raise ``InvalidArgument``."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidArgument(f"blob data must be bytes, got {type(data).__name__}")


def encode_stored(data: bytes, *, compress: bool) -> bytes:
    """The bytes to store for ``data``: a zstd frame when asked and smaller, else ``data``."""
    if not compress or len(data) < _MIN_COMPRESS_SIZE:
        return data
    # A fresh compressor per call: zstandard contexts must not be shared between threads.
    frame = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_content_size=True).compress(data)
    return frame if len(frame) < len(data) else data


def decode_stored(digest: str, stored: bytes) -> bytes:
    """The original bytes of a stored object, verified against ``digest``.

    Raises ``BlobCorrupt`` naming the digest when neither the decompressed nor
    the stored bytes hash to it (altered, truncated or torn).
    """
    detail = "its bytes do not hash to its digest"
    if stored[:4] == ZSTD_MAGIC:
        data = _decompress_whole_frame(stored)
        if data is None:
            detail = "it is neither one whole zstd frame nor raw bytes matching its digest"
        elif blob_digest(data) == digest:
            return data
    if blob_digest(stored) == digest:
        return stored
    raise BlobCorrupt(digest, detail)


def _decompress_whole_frame(stored: bytes) -> bytes | None:
    """The content of ``stored`` if it is exactly one complete zstd frame, else None.

    A truncated frame or bytes after its end mean the object is not what a
    store wrote, even if the part that decodes happens to be intact.
    """
    # decompressobj grows with the real output, so a damaged header that claims
    # a huge content size cannot make us allocate it up front.
    decoder = zstandard.ZstdDecompressor().decompressobj()
    try:
        data = decoder.decompress(stored)
    except zstandard.ZstdError:
        return None
    return data if decoder.eof and not decoder.unused_data else None


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


class StoreLifecycle:
    """Shared by the bundled stores: the closed flag and the context-manager protocol."""

    _closed: bool = False
    _name: str = "blob store"

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
