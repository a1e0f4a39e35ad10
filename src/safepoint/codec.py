"""Canonical bytes, JSON validation and digests — the bottom layer, no I/O.

Canonical form: orjson with sorted keys. Floats are written shortest-round-trip
by orjson, so the same value always yields the same bytes, whichever process
encodes it; digests over these bytes are therefore stable across machines.

Message digests are *chained*: ``chain[i] = sha256(chain[i-1] + body[i])``.
A checkpoint's digest covers its header and the chain value at its last
message, so verifying a load needs only the rows it reads, and a save extends
the chain by the new messages alone — never re-hashing the whole history.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

import orjson

from .errors import NotJSONCompatible

_ENCODE_OPTIONS = orjson.OPT_SORT_KEYS
# orjson (like most JSON codecs) refuses integers outside 64 bits; say so by path.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
EMPTY_CHAIN = bytes(32)


def check_json(value: Any, path: str, *, allow_bytes: bool = False) -> None:
    """Raise ``NotJSONCompatible`` naming the first value under ``path`` that
    is not plain JSON data (dict with str keys, list, str, int, float, bool, None).

    Tuples are refused on purpose: they would come back as lists, and a
    checkpoint must load exactly as it was saved. ``bytes`` are accepted with
    ``allow_bytes`` (a store with a blob store keeps them there).
    """
    # Every save validates what it writes, so the common case (exact built-in
    # types, no errors) takes a quick pass that builds no path strings; only
    # when it finds something unusual does the walk below name the path.
    if not is_plain_json(value):
        _walk(value, path, allow_bytes)


def is_plain_json(value: Any) -> bool:
    """True when ``value`` is JSON made only of exact built-in types (no paths, fast)."""
    try:
        return _plain_json(value)
    except RecursionError:
        return False


def _plain_json(value: Any) -> bool:
    """True when ``value`` is JSON made only of exact built-in types."""
    kind = type(value)
    if kind is str:
        return value.isascii() or _is_valid_unicode(value)
    if kind is dict:
        for key, child in value.items():
            if type(key) is not str or not (key.isascii() or _is_valid_unicode(key)):
                return False
            if not _plain_json(child):
                return False
        return True
    if kind is list:
        for child in value:  # noqa: SIM110  # a plain loop: all() with a generator is slower on this hot path
            if not _plain_json(child):
                return False
        return True
    if kind is int:
        return _INT_MIN <= value <= _INT_MAX  # type: ignore[no-any-return]
    if kind is float:
        return math.isfinite(value)
    return value is None or kind is bool


def _walk(value: Any, path: str, allow_bytes: bool = False) -> None:
    # An explicit stack, not recursion: deeply nested tool outputs must not hit
    # the interpreter's recursion limit.
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, bool) or (allow_bytes and isinstance(item, bytes)):
            continue
        if isinstance(item, str):
            if not _is_valid_unicode(item):
                raise NotJSONCompatible(where, "str contains a lone surrogate (not valid UTF-8)")
            continue
        if isinstance(item, int):
            if not _INT_MIN <= item <= _INT_MAX:
                raise NotJSONCompatible(where, "int does not fit in 64 bits")
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise NotJSONCompatible(where, f"float {item!r} is not JSON-compatible")
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise NotJSONCompatible(
                        f"{where}[{key!r}]",
                        f"dict key of type {type(key).__name__} is not JSON-compatible (keys must be str)",
                    )
                if not _is_valid_unicode(key):
                    raise NotJSONCompatible(
                        f"{where}[{key!r}]", "dict key contains a lone surrogate (not valid UTF-8)"
                    )
                stack.append((child, f"{where}.{key}" if key.isidentifier() else f"{where}[{key!r}]"))
            continue
        if isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
            continue
        hint = " (use a list)" if isinstance(item, tuple) else ""
        raise NotJSONCompatible(where, f"{type(item).__name__} is not JSON-compatible{hint}")


def _is_valid_unicode(text: str) -> bool:
    # Fast path: most text is ASCII, which cannot hold a surrogate.
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode(value: Any) -> bytes:
    """Canonical bytes of an already-validated JSON value."""
    return orjson.dumps(value, option=_ENCODE_OPTIONS)


def decode(data: bytes | str) -> Any:
    """Parse canonical bytes; raises ``orjson.JSONDecodeError`` (a ``ValueError``)."""
    return orjson.loads(data)


def digest(data: bytes) -> bytes:
    """SHA-256 of ``data``."""
    return hashlib.sha256(data).digest()


def extend_chain(chain: bytes, bodies: Iterable[bytes]) -> list[bytes]:
    """Chain values after each of ``bodies``, starting from ``chain``."""
    out: list[bytes] = []
    for body in bodies:
        h = hashlib.sha256(chain)
        h.update(body)
        chain = h.digest()
        out.append(chain)
    return out
