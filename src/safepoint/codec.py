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
import sys
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, TypeVar

import orjson

from . import long_text
from .errors import NotJSONCompatible
from .refs import BlobLink, ScrubbedText, SecretRef
from .visible import visible

# orjson (like most JSON codecs) refuses integers outside 64 bits; say so by path.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
EMPTY_CHAIN = bytes(32)

# How deep a value may nest: at most this many dicts and lists inside one
# another, the field's own dict (or the message) counting as one. orjson
# refuses to encode past 254 levels, and the header wraps every field in one
# more dict, a scrubbed text in one more and a blob reference in two; the
# scrubber and freeze/thaw recurse too. 200 leaves that headroom and is far
# deeper than any agent's data, so only a hostile value meets it.
MAX_DEPTH = 200
# A dict key in an error path is shown escaped and only when short: a key can
# hold a secret, megabytes of text or terminal escapes. A longer one is named
# by its position (``state[<key #3>]``); a long path keeps its two ends.
MAX_KEY_CHARS = 40
MAX_PATH_CHARS = 200


def check_json(value: Any, path: str, *, allow_bytes: bool = False, max_depth: int = MAX_DEPTH) -> None:
    """Raise ``NotJSONCompatible`` naming the first value under ``path`` that
    is not plain JSON data (dict with str keys, list, str, int, float, bool, None).

    Exact types only: a subclass (``IntEnum``/``StrEnum`` members, numpy
    scalars, ``OrderedDict``, ``defaultdict`` …) would load back as the plain
    type — a silent change — so it is refused, except for the store's own
    types (``FrozenDict``/``FrozenList``/``MessageList``, ``SecretRef``,
    ``BlobLink``, ``ScrubbedText``). Tuples are refused on purpose: they
    would come back as lists, and a checkpoint must load exactly as it was
    saved. ``bytes`` are accepted with ``allow_bytes`` (a store with a blob
    store keeps them there). Nesting deeper than ``max_depth`` dicts and lists
    (``MAX_DEPTH``, 200, by default) is refused.
    """
    # Every save validates what it writes, so the common case (exact built-in
    # types, no errors) takes a quick pass that builds no path strings; only
    # when it finds something unusual does the walk below name the path.
    if not is_plain_json(value, max_depth=max_depth):
        _walk(value, path, allow_bytes, max_depth)


def is_plain_json(value: Any, *, max_depth: int = MAX_DEPTH) -> bool:
    """True when ``value`` is JSON made only of exact built-in types, nested at
    most ``max_depth`` deep (no paths, fast)."""
    try:
        return _plain_json(value, max_depth)
    except RecursionError:  # only when called already deep in the stack: let the walk decide
        return False


def is_short_plain_json(value: Any, *, max_depth: int = MAX_DEPTH) -> bool:
    """``is_plain_json``, and no string in ``value`` longer than ``long_text.LONG_STRING``:
    then ``orjson.dumps(value, option=orjson.OPT_SORT_KEYS)`` is its canonical bytes
    (``encode``) with no second walk to look for a long string. False says only that
    one of the two does not hold."""
    try:
        return _short_plain_json(value, max_depth)
    except RecursionError:
        return False


def _plain_json_check(longest: int) -> Callable[[Any, int], bool]:
    """The quick plain-JSON walk, refusing strings longer than ``longest`` characters too.

    Built twice, once without a real limit (``is_plain_json``) and once with
    long_text's (``is_short_plain_json``): one walk answers both questions where a
    save needs both, and the limit is a closure constant, not one more argument on
    every recursive call."""

    def plain(value: Any, room: int) -> bool:
        """True when ``value`` is JSON made only of exact built-in types, with at
        most ``room`` dicts and lists nested in it (so it can never recurse into
        a RecursionError)."""
        kind = type(value)
        if kind is str:
            return len(value) <= longest and (value.isascii() or is_valid_unicode(value))
        # Strings, the commonest children, are checked in the loops themselves:
        # no call per string, which more than pays for the depth bookkeeping
        # (timeit, a 6 KB tool-call message: 15.7 -> 14.7 us; a flat one 0.46 -> 0.42 us).
        if kind is dict:
            if not room:
                return False
            room -= 1
            for key, child in value.items():
                if type(key) is not str or not (key.isascii() or is_valid_unicode(key)):
                    return False
                kind = type(child)
                if kind is str:
                    if len(child) > longest or not (child.isascii() or is_valid_unicode(child)):
                        return False
                elif kind is int:  # counters, steps, ids: no call for them either
                    if not _INT_MIN <= child <= _INT_MAX:
                        return False
                elif not plain(child, room):
                    return False
            return True
        if kind is list:
            if not room:
                return False
            room -= 1
            for child in value:
                kind = type(child)
                if kind is str:
                    if len(child) > longest or not (child.isascii() or is_valid_unicode(child)):
                        return False
                elif kind is int:
                    if not _INT_MIN <= child <= _INT_MAX:
                        return False
                elif not plain(child, room):
                    return False
            return True
        if kind is int:
            return _INT_MIN <= value <= _INT_MAX  # type: ignore[no-any-return]
        if kind is float:
            return math.isfinite(value)
        return value is None or kind is bool

    return plain


# Dict keys are not limited: long_text leaves a long key to orjson as well.
_plain_json = _plain_json_check(sys.maxsize)
_short_plain_json = _plain_json_check(long_text.LONG_STRING)


# Where a value sits, as a linked list built only as tuples while walking:
# ``(None, root)``, ``(parent, index)`` in a list, ``(parent, key, position)``
# in a dict. The path string is formatted only for an error, so a wide value
# under a deep path costs no string building.
_Where = tuple[Any, ...]


# The dict and list types a value may hold, each as the plain type it extends:
# the plain ones, the store's references, and the store's own containers
# (frozen messages, the message list), which live above this module and so
# declare themselves with ``json_container`` where they are defined — a type
# is in this table before any instance of it can exist.
_CONTAINERS: dict[type, type] = {dict: dict, list: list, SecretRef: dict, BlobLink: dict}
_Container = TypeVar("_Container", bound=type)


def json_container(base: type[dict[Any, Any]] | type[list[Any]]) -> Callable[[_Container], _Container]:
    """Class decorator: ``check_json`` accepts the class's instances as ``base`` (dict or list).

    For the store's own subclasses only: any other would load back as the plain type.
    """

    def declare(cls: _Container) -> _Container:
        _CONTAINERS[cls] = base
        return cls

    return declare


def _walk(value: Any, path: str, allow_bytes: bool, max_depth: int) -> None:
    # An explicit stack, not recursion: deeply nested tool outputs must not hit
    # the interpreter's recursion limit before the depth check names them.
    containers = _CONTAINERS
    stack: list[tuple[Any, _Where, int]] = [(value, (None, path), 0)]
    while stack:
        item, where, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is ScrubbedText:
            if not is_valid_unicode(item):
                raise NotJSONCompatible(format_path(where), "str contains a lone surrogate (not valid UTF-8)")
            continue
        if kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                raise NotJSONCompatible(format_path(where), "int does not fit in 64 bits")
            continue
        if kind is float:
            if not math.isfinite(item):  # nan or inf: a kind of float, not a stored value
                raise NotJSONCompatible(format_path(where), f"float {item!r} is not JSON-compatible")
            continue
        if item is None or kind is bool or (allow_bytes and kind is bytes):
            continue
        base = containers.get(kind)
        if base is None:
            raise NotJSONCompatible(format_path(where), _refusal(item))
        if depth >= max_depth:
            raise NotJSONCompatible(format_path(where), f"nested deeper than {max_depth} levels")
        depth += 1
        if base is list:
            stack.extend((child, (where, i), depth) for i, child in enumerate(item))
            continue
        for position, (key, child) in enumerate(item.items()):
            if type(key) is not str and type(key) is not ScrubbedText:
                raise NotJSONCompatible(
                    format_path((where, key, position)),
                    f"dict key of type {_type_name(key)} is not JSON-compatible (keys must be str)",
                )
            if not is_valid_unicode(key):
                raise NotJSONCompatible(
                    format_path((where, key, position)),
                    "dict key contains a lone surrogate (not valid UTF-8)",
                )
            stack.append((child, (where, key, position), depth))


def _refusal(item: Any) -> str:
    """Why ``item`` (not a plain JSON type) is refused, naming its type, never its value."""
    name = _type_name(item)
    if isinstance(item, Enum):
        return f"{name} (an enum member) is not JSON-compatible: store its plain value"
    if isinstance(item, tuple):
        return f"{name} is not JSON-compatible (use a list)"
    for plain in (str, int, float, dict, list, bytes):
        if isinstance(item, plain) and type(item) is not plain:
            # It would come back as the plain type: refuse rather than change it silently.
            base = plain.__name__
            return f"{name} (a subclass of {base}) is not JSON-compatible: store a plain {base}"
    return f"{name} is not JSON-compatible"


def _type_name(value: Any) -> str:
    return visible(type(value).__name__, max_len=MAX_KEY_CHARS)


def key_segment(key: Any, position: int, *, dotted: bool = True) -> str:
    """How the dict key at ``position`` appears in an error path: ``.name``
    (unless not ``dotted``), ``['text']`` (control and format characters
    escaped, as ``repr`` does), or ``[<key #N>]`` when the key is long (it
    may hold a secret or megabytes)."""
    if type(key) is str and len(key) <= MAX_KEY_CHARS:
        if dotted and key.isidentifier() and key.isprintable():
            return f".{key}"
        shown: str | None = repr(key)  # repr escapes every non-printable character (Cc, Cf, …)
    elif isinstance(key, str):
        shown = None  # long text, or a str subclass whose repr is its own
    else:
        try:
            shown = visible(repr(key), max_len=MAX_KEY_CHARS + 3)
        except Exception:  # a hostile __repr__ must not replace the real error
            shown = None
        if shown is not None and len(shown) > MAX_KEY_CHARS + 2:
            shown = None
    if shown is None or len(shown) > 2 * MAX_KEY_CHARS:
        return f"[<key #{position}>]"
    return f"[{shown}]"


def format_path(where: _Where) -> str:
    """The error path of a walk position; long paths keep their two ends."""
    segments: list[str] = []
    while where[0] is not None:
        if len(where) == 2:
            segments.append(f"[{where[1]}]")
        else:
            segments.append(key_segment(where[1], where[2]))
        where = where[0]
    segments.append(where[1])
    segments.reverse()
    return join_path(segments)


def join_path(segments: list[str]) -> str:
    """``segments`` joined, with the middle replaced by ``…`` past ``MAX_PATH_CHARS``."""
    if sum(map(len, segments)) <= MAX_PATH_CHARS:
        return "".join(segments)
    half = MAX_PATH_CHARS // 2
    head: list[str] = []
    for segment in segments:
        if head and sum(map(len, head)) + len(segment) > half:
            break
        head.append(segment)
    tail: list[str] = []
    for segment in reversed(segments[len(head) :]):
        if sum(map(len, tail)) + len(segment) > half:
            break
        tail.append(segment)
    return "".join(head) + "…" + "".join(reversed(tail))


def is_valid_unicode(text: str) -> bool:
    """True unless ``text`` holds a lone surrogate, which UTF-8 (and so JSON on disk) cannot hold."""
    # Fast path: most text is ASCII, which cannot hold a surrogate.
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Canonical bytes of an already-validated JSON value: keys sorted, orjson's
# encoding, very long strings spliced in without orjson's worst-case
# reservation. Written in long_text, which alone knows when that applies, so
# the hot path is one call, not two.
encode = long_text.encode


def decode(data: bytes | str) -> Any:
    """Parse canonical bytes; raises ``orjson.JSONDecodeError`` (a ``ValueError``)."""
    return orjson.loads(data)


def digest(data: bytes) -> bytes:
    """SHA-256 of ``data``."""
    return hashlib.sha256(data).digest()


def extend_chain(chain: bytes, bodies: Iterable[bytes | memoryview]) -> list[bytes]:
    """Chain values after each of ``bodies``, starting from ``chain``."""
    out: list[bytes] = []
    for body in bodies:
        h = hashlib.sha256(chain)
        h.update(body)
        chain = h.digest()
        out.append(chain)
    return out
