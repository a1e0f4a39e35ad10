"""Hypothesis: every save of arbitrary nested values either round-trips as plain JSON or raises a typed error.

Values mix what JSON has with what it lacks: control characters and non-BMP
text, lone surrogates, huge ints, NaN and infinities, bytes, tuples, sets,
subclasses of plain types (IntEnum, StrEnum, a numpy-like float, OrderedDict,
defaultdict, a list subclass) and nesting up to 300 deep — in state, cursors,
the pending action and messages. Saved on ``memory://``, each checkpoint
either raises a ``SafepointError`` (and nothing is stored) or loads back equal,
with every value of a plain JSON type (or ``bytes``, or one of the store's own
types) — never silently converted.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, NotFound, SafepointError, Store
from safepoint.messagelist import FrozenDict, FrozenList
from safepoint.refs import BlobLink, ScrubbedText, SecretRef


class Level(IntEnum):
    LOW = 1
    HIGH = 2**40


class Colour(StrEnum):
    RED = "red"
    ODD = "\x1b[2J\u202e"


class Float64(float):
    """A numpy-like float subclass."""


class Items(list[Any]):
    pass


def _wrap(value: Any, levels: int, as_dict: bool) -> Any:
    for _ in range(levels):
        value = {"k": value} if as_dict else [value]
    return value


texts = st.text(max_size=20) | st.text(st.characters(codec="utf-8"), max_size=20)
# What JSON holds: control characters and non-BMP text included; bytes too (the blob store keeps them).
plain_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
    st.sampled_from(["\x00\x1b\u200b\U0001f600", "[SECRET:API_KEY]", "\u202eevil"]),
    st.binary(max_size=20),
)
plain_keys = texts | st.sampled_from(["$secret", "$blob", "$$text", "\x1b]0;t\x07", "x" * 50])
plain = st.recursive(
    plain_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(plain_keys, children, max_size=4),
    max_leaves=12,
)
# Deep values: the limit is 200 dicts and lists per field, the field's own included.
deep = st.builds(_wrap, plain, st.integers(190, 210) | st.integers(150, 300), st.booleans())
# What it does not hold, or holds only as another type.
hostile_leaves = st.one_of(
    st.sampled_from([2**64, -(2**63) - 1, 10**30, float("nan"), float("inf"), -float("inf")]),
    st.sampled_from(["\ud800", "a\udfffb"]),
    st.sampled_from([Level.LOW, Level.HIGH, Colour.RED, Colour.ODD]),
    st.floats(allow_nan=False).map(Float64),
    st.builds(object),
)
hostile = st.recursive(
    hostile_leaves | plain_leaves,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(tuple),
        st.sets(st.integers(0, 5) | st.text(max_size=3), min_size=1, max_size=3),
        st.frozensets(st.integers(0, 5), max_size=2),
        st.dictionaries(texts, children, max_size=3).map(OrderedDict),
        st.dictionaries(texts, children, max_size=3).map(lambda d: defaultdict(list, d)),
        st.lists(children, max_size=3).map(Items),
        st.dictionaries(st.integers(0, 3) | st.tuples(st.integers()), children, min_size=1, max_size=2),
        st.lists(children, min_size=1, max_size=3),
    ),
    max_leaves=6,
).filter(lambda v: not _is_plain(v))
fields = st.dictionaries(plain_keys, plain, max_size=4)
messages = st.lists(st.dictionaries(plain_keys, plain, max_size=3), max_size=3)
FIELDS = ("state", "cursors", "pending_action", "messages")


def _is_plain(value: Any) -> bool:
    try:
        _shape(value)
    except AssertionError:
        return False
    return True


def _plant(draw: st.DrawFn, parts: dict[str, Any], value: Any) -> None:
    """Put ``value`` somewhere in ``parts``: under a field, deep inside one, or as a message."""
    field = draw(st.sampled_from(FIELDS))
    if field == "messages":
        message = value if draw(st.booleans()) else {"content": value}
        parts["messages"] = [*parts["messages"], message]
    elif field == "pending_action" and parts[field] is None:
        parts[field] = {"h": value}
    else:
        parts[field] = {**parts[field], "h": value}
        if draw(st.booleans()):  # the field itself of a subclass
            parts[field] = OrderedDict(parts[field]) if draw(st.booleans()) else {"h": value}


@st.composite
def checkpoints(draw: st.DrawFn) -> dict[str, Any]:
    """A checkpoint's four fields: plain JSON, maybe with one deep or one hostile value planted."""
    parts = {
        "state": draw(fields),
        "cursors": draw(fields),
        "pending_action": draw(st.none() | fields),
        "messages": draw(messages),
    }
    mode = draw(st.sampled_from(["plain", "plain", "deep", "hostile"]))
    if mode != "plain":
        value = draw(deep) if mode == "deep" else draw(hostile)
        if mode == "hostile" and draw(st.booleans()):  # not only at the top: somewhere inside
            value = _wrap(value, draw(st.integers(1, 40)), draw(st.booleans()))
        _plant(draw, parts, value)
    event(f"mode: {mode}")
    return parts


def _shape(value: Any) -> Any:
    """The value with each node's plain JSON type named; anything else is a failure."""
    kind = type(value)
    if kind in (dict, FrozenDict, SecretRef, BlobLink):
        assert all(type(k) is str for k in value), [type(k) for k in value]
        return ("dict", {k: _shape(v) for k, v in value.items()})
    if kind in (list, FrozenList):
        return ("list", [_shape(v) for v in value])
    if kind is ScrubbedText:
        return ("str", str(value))
    assert kind in (str, int, float, bool, type(None), bytes), kind
    return (kind.__name__, value)


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    opened = safepoint.open_store("memory://")
    yield opened
    opened.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(parts=checkpoints())
def test_every_save_round_trips_as_plain_json_or_raises_typed(store: Store, parts: dict[str, Any]) -> None:
    """Any nested value: saved, it loads back equal and plain; else a SafepointError, nothing stored."""
    run_id = f"prop-{uuid.uuid4().hex}"
    given_values = [parts[name] for name in FIELDS]
    try:
        info = store.save(Checkpoint(run_id=run_id, **parts))
    except SafepointError as exc:
        event(f"refused: {type(exc).__name__}")
        with pytest.raises(NotFound):
            store.load(run_id)
        return
    event("saved")
    loaded = store.load(run_id)
    got = [loaded.state, loaded.cursors, loaded.pending_action, list(loaded.messages)]
    shapes = _shape(got)  # every stored value is of a plain type, whatever was given
    if info.scrub_report:
        event("scrubbed")
        return  # the scrubber rewrote some text (a token-shaped string): equality is not expected
    assert shapes == _shape(given_values)
    assert got == given_values
