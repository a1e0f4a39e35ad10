"""JSON encoding of values that hold a very long string, without orjson's worst-case reservation.

orjson sizes its output buffer for the worst case before it writes (each
character escaped), and the bytes it returns keep that allocation: encoding a
10 MB string held 133 MB until the bytes were freed (tracemalloc, orjson
3.13), a 100 MB tool output 1.3 GB, which a host with strict overcommit
refuses outright. So ``dumps`` lets orjson encode the value with each string
longer than ``LONG_STRING`` swapped for a placeholder, and splices in those
strings encoded by the standard library's JSON string escaper, which sizes
its output exactly. The bytes are the same as orjson's own (same escapes:
``"``, ``\\``, the short forms of ``\\b \\f \\n \\r \\t``, other control
characters as lowercase ``\\u00XX``, everything else as UTF-8); a test holds
the two encoders to that. Only values in ``dict`` values and list items are
swapped; a long dict key is left to orjson.
"""

from __future__ import annotations

import re
import secrets
from json.encoder import encode_basestring
from typing import Any

import orjson

# Below this many characters orjson's reservation is a few MB at most, and
# the walk that finds long strings would cost more than it saves.
LONG_STRING = 1 << 20
# How many characters of a long string are escaped and encoded at a time.
CHUNK = 1 << 18
# What a JSON string must escape: the quote, the backslash, control characters.
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def encode(value: Any) -> bytes:
    """Canonical bytes of an already-validated JSON value (``safepoint.codec.encode``): keys sorted."""
    if not has_long_string(value):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return b"".join(pieces(value, orjson.OPT_SORT_KEYS))


def dumps(value: Any, option: int) -> bytes:
    """``orjson.dumps(value, option=option)``, the same bytes, without a reservation of ~12x a long string."""
    parts = pieces(value, option)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def pieces(value: Any, option: int) -> list[bytes]:
    """``dumps(value, option)`` in pieces whose concatenation it is: for hashing with no joined copy.

    One piece, orjson's own bytes, unless ``value`` holds a string longer than
    ``LONG_STRING``; then each such string is a piece of its own.
    """
    if not has_long_string(value):
        return [orjson.dumps(value, option=option)]
    longs: list[str] = []
    # A placeholder no stored text can hold by chance: a private-use
    # character and 128 random bits, new for every call.
    token = "\ue000" + secrets.token_hex(16) + ":"
    skeleton = _swapped(value, token, longs)
    encoded = orjson.dumps(skeleton, option=option)
    del skeleton
    opening = orjson.dumps(token)[:-1]  # the placeholder's opening quote and token, as encoded
    split = encoded.split(opening)
    del encoded
    out = [split[0]]
    for piece in split[1:]:
        end = piece.index(b'"')
        out += _string_pieces(longs[int(piece[:end])])
        out.append(piece[end + 1 :])
    return out


def _string_pieces(text: str) -> list[bytes]:
    """A JSON string as orjson writes it, in pieces of at most ``CHUNK`` characters each.

    JSON escapes one character at a time, so escaping chunk by chunk gives
    the same bytes, and no escaped copy of the whole text is ever made; a
    chunk with nothing to escape (the common case) is just its UTF-8.
    """
    out = [b'"']
    for start in range(0, len(text), CHUNK):
        chunk = text[start : start + CHUNK]
        if _NEEDS_ESCAPE.search(chunk) is None:
            out.append(chunk.encode("utf-8"))
        else:
            out.append(encode_basestring(chunk)[1:-1].encode("utf-8"))
    out.append(b'"')
    return out


def has_long_string(value: Any) -> bool:
    # Called for every value the store encodes, so the exact built-in types
    # (all but a caller's subclasses) are checked first, without isinstance.
    kind = type(value)
    if kind is str:
        return len(value) > LONG_STRING
    if kind is dict:
        children: Any = value.values()
    elif kind is list or kind is tuple:
        children = value
    elif isinstance(value, str):
        return len(value) > LONG_STRING
    elif isinstance(value, dict):
        children = value.values()
    elif isinstance(value, list | tuple):
        children = value
    else:
        return False
    for child in children:
        kind = type(child)
        if kind is str:
            if len(child) > LONG_STRING:
                return True
        elif kind is not int and kind is not float and child is not None and has_long_string(child):
            return True
    return False


def _swapped(value: Any, token: str, longs: list[str]) -> Any:
    """``value`` with each long string swapped for ``token`` and its index in ``longs`` (copied)."""
    if isinstance(value, str):
        if len(value) <= LONG_STRING:
            return value
        longs.append(value)
        return f"{token}{len(longs) - 1}"
    if isinstance(value, dict):
        return {key: _swapped(child, token, longs) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_swapped(child, token, longs) for child in value]
    return value
