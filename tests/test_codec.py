"""Canonical bytes, JSON validation and the message list's change tracking."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint import NotJSONCompatible, codec
from safepoint.messagelist import FrozenDict, MessageList, StoredView, freeze
from safepoint.store.large_values import shows_dollar_mark

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@given(json_values)
def test_valid_json_round_trips_exactly(value: Any) -> None:
    """Anything check_json accepts decodes back equal, and encodes to the same bytes again."""
    codec.check_json(value, "state")
    data = codec.encode(value)
    assert codec.decode(data) == value
    assert codec.encode(codec.decode(data)) == data


@given(st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=8))
def test_encoding_ignores_dict_order(mapping: dict[str, int]) -> None:
    """Canonical bytes do not depend on the order keys were inserted in."""
    reversed_mapping = dict(reversed(list(mapping.items())))
    assert codec.encode(mapping) == codec.encode(reversed_mapping)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": {1, 2}}, "state.a: set is not JSON-compatible"),
        ({"a": [0, (1,)]}, "state.a[1]: tuple is not JSON-compatible (use a list)"),
        ({"a": b"bytes"}, "state.a: bytes is not JSON-compatible"),
        ({"a": float("inf")}, "state.a: float inf is not JSON-compatible"),
        ({"a": 2**64}, "state.a: int does not fit in 64 bits"),
        ({"weird key": [None, object()]}, "state['weird key'][1]: object is not JSON-compatible"),
        ({("t",): 1}, "state[('t',)]: dict key of type tuple is not JSON-compatible (keys must be str)"),
    ],
)
def test_refusals_name_the_path(value: Any, message: str) -> None:
    """check_json names the exact path and type of the first bad value."""
    with pytest.raises(NotJSONCompatible) as caught:
        codec.check_json(value, "state")
    assert str(caught.value) == message


def test_deep_nesting_does_not_hit_the_recursion_limit() -> None:
    """A 5,000-deep structure is refused with a typed error naming the limit, not a RecursionError."""
    value: Any = "leaf"
    for _ in range(5000):
        value = [value]
    with pytest.raises(NotJSONCompatible, match="nested deeper than 200"):
        codec.check_json(value, "state")


def test_chain_extends_incrementally() -> None:
    """Extending a chain in two parts equals extending it in one."""
    bodies = [b"a", b"bb", b"ccc"]
    whole = codec.extend_chain(codec.EMPTY_CHAIN, bodies)
    first = codec.extend_chain(codec.EMPTY_CHAIN, bodies[:1])
    assert first + codec.extend_chain(first[-1], bodies[1:]) == whole


def _tracked(n: int) -> MessageList:
    view = StoredView("r", 0, b"", n, [b""] * n, ((0, n),))
    return MessageList([{"i": i} for i in range(n)], view)


@pytest.mark.parametrize(
    ("edit", "clean"),
    [
        (lambda m: m.append({"i": 9}), 5),
        (lambda m: m.extend([{"i": 9}]), 5),
        (lambda m: m.__iadd__([{"i": 9}]), 5),
        (lambda m: m.__setitem__(3, {}), 3),
        (lambda m: m.__setitem__(-1, {}), 4),
        (lambda m: m.__setitem__(slice(1, 3), [{}]), 1),
        (lambda m: m.__delitem__(2), 2),
        (lambda m: m.__delitem__(slice(-2, None)), 3),
        (lambda m: m.insert(1, {}), 1),
        (lambda m: m.insert(99, {}), 5),
        (lambda m: m.pop(), 4),
        (lambda m: m.pop(0), 0),
        (lambda m: m.remove({"i": 2}), 2),
        (lambda m: m.clear(), 0),
        (lambda m: m.sort(key=lambda x: -x["i"]), 0),
        (lambda m: m.reverse(), 0),
    ],
)
def test_message_list_tracks_the_lowest_changed_index(edit: Any, clean: int) -> None:
    """Every list mutation lowers clean_prefix to the first index it may have changed."""
    messages = _tracked(5)
    edit(messages)
    assert messages.clean_prefix == clean


def test_frozen_messages_refuse_mutation_but_copy_freely() -> None:
    """Frozen messages raise on mutation; copies and pickles are ordinary mutable values."""
    message = freeze({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    assert isinstance(message, FrozenDict)
    assert message == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    for mutate in (
        lambda: message.__setitem__("role", "x"),
        lambda: message.update(role="x"),
        lambda: message.pop("role"),
        lambda: message["content"].append({}),
        lambda: message["content"][0].__setitem__("text", "x"),
    ):
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    for clone in (copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert type(clone) is dict
        clone["content"].append({"type": "text", "text": "more"})
    assert codec.encode(message) == codec.encode(dict(message))


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(st.sampled_from([b'"', b"$", b"a", b"blob", b'"$', b'$blob"', b"\\"]), max_size=24).map(
        b"".join
    ),
    mark=st.sampled_from([b'"$', b'"$blob"']),
)
def test_shows_dollar_mark_is_in(data: bytes, mark: bytes) -> None:
    """The ``$``-first scan says what ``in`` says, however many ``$`` come before the mark."""
    assert shows_dollar_mark(data, mark) == (mark in data)
