"""Keyed digests under the index key: for digests that could reveal content, and the labels' blind index.

A plain SHA-256 of a low-entropy value ("yes", a customer id) is a lookup
away from the value; under the index key (``Keyring.index_key``) it tells
nothing to whoever lacks the key. The blind index of a label lets
``runs(labels=...)`` match equal values on an encrypted store; it reveals
which runs share a label value, and nothing else. Each use has its own
purpose prefix, so a digest made for one use never matches one made for
another.
"""

from __future__ import annotations

import hashlib
import hmac
import struct


def keyed_digest(index_key: bytes, purpose: bytes, data: bytes) -> bytes:
    """HMAC-SHA-256 of ``data`` for ``purpose`` (a short constant naming the use)."""
    return hmac.new(index_key, struct.pack(">I", len(purpose)) + purpose + data, hashlib.sha256).digest()


def label_index(index_key: bytes, name: str, value: str) -> str:
    """The blind index of one label (name and value), as hex text for an indexed column."""
    encoded_name = name.encode("utf-8", "surrogatepass")
    body = struct.pack(">I", len(encoded_name)) + encoded_name + value.encode("utf-8", "surrogatepass")
    return keyed_digest(index_key, b"label", body).hex()
