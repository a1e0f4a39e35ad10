"""How a blob's bytes are stored: a zstd frame, or the bytes as they are.

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

import zstandard

from safepoint.errors import BlobCorrupt

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Below this size a zstd frame's own header costs more than compression saves.
_MIN_COMPRESS_SIZE = 64
_ZSTD_LEVEL = 3
# The most a stored zstd frame may decompress to: 1 GiB. SQLite (SQLITE_MAX_LENGTH,
# 10**9 bytes) and PostgreSQL (1 GB a field) hold no larger value in a row, so no
# value a database-target store holds uncompressed exceeds it; a larger blob is
# stored raw, never framed (``encode_stored``), so every frame any store writes
# stays under it, and a frame that decodes past it is not one a store wrote.
MAX_FRAME_CONTENT = 2**30
_FEED_BYTES = 1024  # compressed bytes per decompress call (see _decompress_whole_frame)


def blob_digest(data: bytes) -> str:
    """The lowercase hex SHA-256 of ``data``: the address a blob store files it under."""
    return hashlib.sha256(data).hexdigest()


def encode_stored(data: bytes, *, compress: bool) -> bytes:
    """The bytes to store for ``data``: a zstd frame when asked and smaller, else ``data``.

    Past ``MAX_FRAME_CONTENT`` the bytes are stored as they are, so that no
    frame a store writes holds more than a reader accepts.
    """
    if not compress or len(data) < _MIN_COMPRESS_SIZE or len(data) > MAX_FRAME_CONTENT:
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
    # A store writes every frame with its content size, at most MAX_FRAME_CONTENT:
    # a frame without one, or claiming more, is not one it wrote (a bomb: a few
    # KB that decompress to gigabytes), refused before a byte is decompressed.
    try:
        declared = zstandard.get_frame_parameters(stored).content_size
    except zstandard.ZstdError:
        return None
    if declared > MAX_FRAME_CONTENT:  # CONTENTSIZE_UNKNOWN and _ERROR are both larger
        return None
    # The frame is fed a slice at a time, so a header that understates its
    # content is caught one slice's worth of output (at most ~32 MiB: zstd's
    # densest block turns 4 bytes into 128 KiB) past what it declared.
    decoder = zstandard.ZstdDecompressor().decompressobj()
    parts: list[bytes] = []
    produced = 0
    view = memoryview(stored)
    try:
        for start in range(0, len(stored), _FEED_BYTES):
            part = decoder.decompress(view[start : start + _FEED_BYTES])
            produced += len(part)
            if produced > declared:
                return None
            parts.append(part)
            if decoder.eof:
                break
    except zstandard.ZstdError:
        return None
    if not decoder.eof or decoder.unused_data or start + _FEED_BYTES < len(stored) or produced != declared:
        return None
    return b"".join(parts)


__all__ = ["MAX_FRAME_CONTENT", "ZSTD_MAGIC", "blob_digest", "decode_stored", "encode_stored"]
