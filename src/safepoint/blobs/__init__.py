"""Blob stores: where values too large for a checkpoint live, addressed by SHA-256.

>>> from safepoint.blobs import open_blob_store, BlobRef
>>> blobs = open_blob_store("memory://")
>>> digest = blobs.put(b"a large tool output")
>>> blobs.get(digest)
b'a large tool output'
>>> BlobRef.of(b"a large tool output", "text/plain; charset=utf-8").to_json()["$blob"]["size"]
19

``open_blob_store`` URLs:

* ``file:///abs/path`` or a plain path — ``FileSystemBlobStore``
* ``s3://bucket/prefix?endpoint_url=http://host:9000&region=eu-west-1`` — ``S3BlobStore``
* ``memory://`` — ``MemoryBlobStore``

Each also takes ``compress=true`` in the query, or ``compress=True`` as a
keyword; keywords win over the query.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from safepoint.blobs.base import BlobInfo, BlobRef, BlobStore, blob_digest, is_blob_ref
from safepoint.blobs.filesystem import FileSystemBlobStore
from safepoint.blobs.memory import MemoryBlobStore
from safepoint.blobs.s3 import S3BlobStore
from safepoint.errors import InvalidURL

__all__ = [
    "BlobInfo",
    "BlobRef",
    "BlobStore",
    "FileSystemBlobStore",
    "MemoryBlobStore",
    "S3BlobStore",
    "blob_digest",
    "is_blob_ref",
    "open_blob_store",
]

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_QUERY_OPTIONS = {
    "file": frozenset({"compress"}),
    "memory": frozenset({"compress"}),
    "s3": frozenset({"compress", "endpoint_url", "region"}),
}
_KEYWORD_OPTIONS = {"file": frozenset({"compress", "temp_file_grace"}), "memory": frozenset({"compress"})}
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def open_blob_store(url: str, **options: Any) -> BlobStore:
    """Open the blob store a URL names; ``options`` go to its constructor.

    ``file:///abs/path`` (or a plain path) opens a ``FileSystemBlobStore``,
    ``s3://bucket/prefix`` an ``S3BlobStore`` (a non-empty prefix gets a
    trailing ``/``; ``endpoint_url`` and ``region`` may be given in the
    query), and ``memory://`` a ``MemoryBlobStore``. Raises ``InvalidURL``
    for any other scheme, a malformed URL or an unknown query option.
    """
    if not isinstance(url, str) or not url:
        raise InvalidURL("blob store URL must be a non-empty str")
    if _SCHEME_RE.match(url) is None:
        return FileSystemBlobStore(url, **_checked_keywords("file", options))
    scheme = url.split(":", 1)[0].lower()
    if scheme not in _QUERY_OPTIONS:
        raise InvalidURL(f"unknown blob store URL scheme {scheme!r}: use file://, s3:// or memory://")
    try:
        parts = urlsplit(url)
        has_port = parts.port is not None
        query = _query_options(scheme, parts.query)
    except InvalidURL:
        raise
    except ValueError:
        # urllib's message quotes the query field or port it could not read,
        # which may be a value meant to stay private: name only where it failed.
        raise InvalidURL("malformed blob store URL: its query or its port cannot be read") from None
    merged = query | _checked_keywords(scheme, options)
    if scheme == "memory":
        if parts.netloc or parts.path:
            raise InvalidURL("a memory blob store URL is just memory://")
        return MemoryBlobStore(**merged)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidURL(f"file blob store URL must name a local path, not host {parts.netloc!r}")
        if not parts.path.startswith("/"):
            raise InvalidURL("file blob store URL must hold an absolute path: file:///abs/path")
        return FileSystemBlobStore(unquote(parts.path), **merged)
    if not parts.hostname or parts.username or parts.password or has_port:
        raise InvalidURL("S3 blob store URL must be s3://bucket/prefix (no credentials or port)")
    prefix = unquote(parts.path.lstrip("/"))
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return S3BlobStore(parts.netloc, prefix=prefix, **merged)


def _checked_keywords(scheme: str, options: dict[str, Any]) -> dict[str, Any]:
    # The S3 store passes unknown keywords on to boto3; the others take only their own.
    allowed = _KEYWORD_OPTIONS.get(scheme)
    unknown = sorted(set(options) - allowed) if allowed is not None else []
    if unknown:
        raise InvalidURL(f"unknown {scheme} blob store options {unknown}; known: {sorted(allowed or ())}")
    return options


def _query_options(scheme: str, query: str) -> dict[str, Any]:
    allowed = _QUERY_OPTIONS[scheme]
    found: dict[str, Any] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if name not in allowed:
            raise InvalidURL(f"unknown {scheme}:// blob store option {name!r}; known: {sorted(allowed)}")
        found[name] = _parse_bool(name, value) if name == "compress" else value
    return found


def _parse_bool(name: str, value: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise InvalidURL(f"blob store option {name!r} must be true or false")
