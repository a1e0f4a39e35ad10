"""Keyed digests under the index key: for digests that could reveal content, and the labels' blind index.

A plain SHA-256 of a low-entropy value ("yes", a customer id) is a lookup
away from the value; under the index key (``Keyring.index_key``) it tells
nothing to whoever lacks the key. The blind index of a label lets
``runs(labels=...)`` match equal values on an encrypted store; it reveals
which runs share a label value, and nothing else. Each use has its own
purpose prefix, so a digest made for one use never matches one made for
another.

Two constructions, each a standard keyed hash, chosen by size: short values
(a checkpoint's digest, a label) take keyed BLAKE2b, which costs a third of
an HMAC when the save around it has left the CPU's caches cold (OpenSSL's
HMAC sets up a context per call; BLAKE2b is Python's own); a blob's content
takes HMAC-SHA-256, which runs at the SHA extensions' speed over 50 KB
(BLAKE2b in software is half as fast there).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable

CHECKPOINT_DIGEST = b"checkpoint digest"  # the purpose of a checkpoint's keyed digest
INDEX_CHECK = b"index key check"  # the purpose of the store's check value of its index key


def keyed_digest(index_key: bytes, purpose: bytes, data: bytes) -> bytes:
    """Keyed BLAKE2b-256 of a short ``data`` for ``purpose`` (a short constant naming the use)."""
    return hashlib.blake2b(_framed(purpose, data), key=index_key, digest_size=32).digest()


def keyed_hasher(index_key: bytes, purpose: bytes) -> Callable[[bytes], bytes]:
    """``keyed_digest(index_key, purpose, data)`` as a function of ``data`` alone, the same bytes:
    the keyed BLAKE2b state after the framed purpose is made once and copied for each digest,
    so the key is not set up again on every call (a save keys its checkpoint's digest)."""
    base = hashlib.blake2b(_framed(purpose, b""), key=index_key, digest_size=32)

    def digest(data: bytes) -> bytes:
        state = base.copy()
        state.update(data)
        return state.digest()

    return digest


def keyed_content_digest(index_key: bytes, purpose: bytes, data: bytes) -> bytes:
    """HMAC-SHA-256 of a large ``data`` (a blob) for ``purpose``."""
    return hmac.digest(index_key, _framed(purpose, data), "sha256")


def _framed(purpose: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(purpose)) + purpose + data


def label_index(index_key: bytes, name: str, value: str) -> str:
    """The blind index of one label (name and value), as hex text for an indexed column."""
    encoded_name = name.encode("utf-8", "surrogatepass")
    body = struct.pack(">I", len(encoded_name)) + encoded_name + value.encode("utf-8", "surrogatepass")
    return keyed_digest(index_key, b"label", body).hex()
