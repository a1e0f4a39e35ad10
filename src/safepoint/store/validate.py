"""Whether a checkpoint's values can be stored, and what they may hold.

Every save runs ``validate_fields`` before anything is scrubbed or written, so
a bad value is refused with its path (``state.items[3]: set is not
JSON-compatible``) and never reaches a backend. Messages are checked one by
one as the delta encodes them (``encode_message``, ``check_message``): only
the new ones. Ids and steps have bounds every backend can store and look up.
Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument, InvalidCheckpoint, NotJSONCompatible
from safepoint.long_text import LONG_STRING
from safepoint.model import VALUE_TYPES, Checkpoint, ParentRef, Status

MAX_RUN_ID_LENGTH = 255
# Steps and schema versions are keys and columns (PostgreSQL's schema_version
# is an ``integer``); bounding both by the 32-bit range keeps every backend
# and every arithmetic on them (``step + 1``) far from an overflow, and no
# run takes two billion steps.
MAX_STEP = 2**31 - 1
MAX_SCHEMA_VERSION = 2**31 - 1


def check_id(value: Any, what: str = "run_id") -> str:
    """Refuse a run or worker id that no backend can store or look up (a plain
    ``str``, 1 to 255 characters, without NUL or lone surrogates); the error
    names ``what``, never the value."""
    if type(value) is not str or not value or len(value) > MAX_RUN_ID_LENGTH:
        raise InvalidArgument(f"{what} must be a non-empty str of at most {MAX_RUN_ID_LENGTH} characters")
    if "\x00" in value or not codec.is_plain_json(value):
        raise InvalidArgument(f"{what} must not contain NUL characters or lone surrogates")
    return value


def check_step(step: Any, what: str = "step") -> int | None:
    """Refuse a step that is not None or an int from 0 to ``MAX_STEP``."""
    if step is not None and not _is_int_in(step, 0, MAX_STEP):
        raise InvalidArgument(f"{what} must be None or an int from 0 to {MAX_STEP}")
    return step  # type: ignore[no-any-return]


def _is_int_in(value: Any, low: int, high: int) -> bool:
    # Exact int: bool and IntEnum members are not steps (and would be stored as plain ints).
    return type(value) is int and low <= value <= high


def validate_fields(cp: Checkpoint, *, allow_bytes: bool = False) -> bool:
    """Refuse a checkpoint whose non-message fields can't be stored, naming the field.

    ``allow_bytes``: ``bytes`` values are accepted in the value fields
    (``model.VALUE_TYPES``; the store offloads them to its blob store).
    True when the fields are plain JSON with no string long_text splices
    (``codec.is_short_plain_json``): the quick pass proved it, so the save
    encodes its header with orjson without walking it again for one.
    """
    try:
        check_id(cp.run_id)
    except InvalidArgument as exc:
        raise InvalidCheckpoint(str(exc)) from None
    if not _is_int_in(cp.step, 0, MAX_STEP):
        raise InvalidCheckpoint(f"step must be an int from 0 to {MAX_STEP}")
    if not _is_int_in(cp.schema_version, 1, MAX_SCHEMA_VERSION):
        raise InvalidCheckpoint(f"schema_version must be an int from 1 to {MAX_SCHEMA_VERSION}")
    if type(cp.status) is not Status:
        raise InvalidCheckpoint(f"status must be a Status, not {type(cp.status).__name__}")
    parent = cp.parent
    if parent is not None and (
        type(parent) is not ParentRef
        or type(parent.run_id) is not str
        or not parent.run_id
        or len(parent.run_id) > MAX_RUN_ID_LENGTH
        or not _is_int_in(parent.step, 0, MAX_STEP)
    ):
        raise InvalidCheckpoint("parent must be None or a ParentRef with a run id and a step")
    # Every save runs this: one quick pass over exact built-in types first; only
    # if it finds anything unusual does the detailed pass name the bad path.
    if _plainly_valid(cp):
        return True
    _explain_invalid(cp, allow_bytes)
    return False


def _plainly_valid(cp: Checkpoint) -> bool:
    counters, labels = cp.counters, cp.labels
    if type(counters) is not dict or type(labels) is not dict:
        return False
    # Counters and labels are flat: these loops check all the walk below would (exact types,
    # no lone surrogate, an int within JSON's 64 bits, a finite float, a label's length), and
    # the NUL their columns refuse, so the walk leaves them out (a Python frame each, every save).
    for key, number in counters.items():
        if type(key) is not str or "\x00" in key or not (key.isascii() or codec.is_valid_unicode(key)):
            return False
        kind = type(number)
        if kind is int:
            if not _INT_MIN <= number <= _INT_MAX:
                return False
        elif kind is not float or not math.isfinite(number):
            return False
    for key, label in labels.items():
        if type(key) is not str or type(label) is not str or "\x00" in key or "\x00" in label:
            return False
        if len(label) > LONG_STRING or not (key.isascii() or codec.is_valid_unicode(key)):
            return False
        if not (label.isascii() or codec.is_valid_unicode(label)):
            return False
    values: list[Any] = []
    for name, kinds in VALUE_TYPES.items():
        value = getattr(cp, name)
        if type(value) not in kinds:
            return False
        if value is not None:
            values.append(value)
    # One walk over them all: the list is one level above each value, so one more level of room.
    # A very long string sends a valid header to the detailed pass too (rare: over a million
    # characters), so that True here also says the header holds none.
    return codec.is_short_plain_json(values, max_depth=codec.MAX_DEPTH + 1)


_NUMBER_TYPES = (int, float)
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # codec's quick walk's bounds (what orjson encodes)


def _explain_invalid(cp: Checkpoint, allow_bytes: bool) -> None:
    """The detailed pass: raise naming the first bad field (or accept the store's own types)."""
    codec.check_json(cp.run_id, "run_id")
    # check_json first: it refuses subclasses (an IntEnum counter, a StrEnum
    # label), so what the loops below see is of a plain type.
    _check_mapping(cp.counters, "counters")
    for position, (key, number) in enumerate(cp.counters.items()):
        if type(number) not in _NUMBER_TYPES:
            path = "counters" + codec.key_segment(key, position)
            raise NotJSONCompatible(path, f"{type(number).__name__} is not a number")
    _check_mapping(cp.labels, "labels")
    for position, (key, label) in enumerate(cp.labels.items()):
        if not isinstance(label, str):
            path = "labels" + codec.key_segment(key, position)
            raise NotJSONCompatible(path, f"{type(label).__name__} is not a str")
    # Labels and counters are queryable columns (JSONB on PostgreSQL, which
    # cannot hold NUL); refuse NUL there on every backend so a run can move
    # between backends. Messages and state may hold NUL: they are stored as bytes.
    for path, text in _queryable_texts(cp):
        if "\x00" in text:
            raise NotJSONCompatible(path, "NUL characters are not allowed in labels and counter names")
    for name, kinds in VALUE_TYPES.items():
        value = getattr(cp, name)
        if not isinstance(value, kinds):
            accepted = " or ".join("None" if kind is type(None) else kind.__name__ for kind in kinds)
            raise NotJSONCompatible(name, f"{type(value).__name__} is not a {accepted}")
        codec.check_json(value, name, allow_bytes=allow_bytes)


def _queryable_texts(cp: Checkpoint) -> list[tuple[str, str]]:
    # Paths name keys the way codec does: escaped, and by position when long.
    def path(root: str, key: str, position: int) -> str:
        return root + codec.key_segment(key, position, dotted=False)

    texts = [(path("labels", k, i), k) for i, k in enumerate(cp.labels)]
    texts += [(path("labels", k, i), v) for i, (k, v) in enumerate(cp.labels.items())]
    texts += [(path("counters", k, i), k) for i, k in enumerate(cp.counters)]
    return texts


def _check_mapping(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise NotJSONCompatible(path, f"{type(value).__name__} is not a dict")
    codec.check_json(value, path)


def encode_message(message: Any, index: int) -> bytes:
    """Canonical bytes of one message, refusing anything that isn't a JSON dict."""
    path = f"messages[{index}]"
    if not isinstance(message, dict):
        raise NotJSONCompatible(path, f"{type(message).__name__} is not a message (messages are dicts)")
    codec.check_json(message, path)
    return codec.encode(message)


def check_message(message: Any, index: int, *, allow_bytes: bool) -> None:
    """Refuse a message that isn't a JSON dict (``bytes`` inside allowed with ``allow_bytes``)."""
    path = f"messages[{index}]"
    if not isinstance(message, dict):
        raise NotJSONCompatible(path, f"{type(message).__name__} is not a message (messages are dicts)")
    codec.check_json(message, path, allow_bytes=allow_bytes)
