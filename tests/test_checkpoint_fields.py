"""A checkpoint's fields, defined once: the field groups, ``evolve``, ``next`` and ``from_dict``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint import (
    Checkpoint,
    InvalidArgument,
    InvalidCheckpoint,
    MigrationChain,
    MigrationError,
    NotJSONCompatible,
    ParentRef,
    Status,
    open_store,
)
from safepoint.messagelist import FrozenDict, MessageList
from safepoint.model import (
    CONTENT_FIELDS,
    FIELDS,
    IDENTITY_FIELDS,
    MIGRATED_FIELDS,
    STORE_FIELDS,
    VALUE_FIELDS,
)
from safepoint.refs import BlobLink, ScrubbedText, SecretRef

texts = st.text(max_size=12)
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False), texts
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
json_dicts = st.dictionaries(texts, json_values, max_size=4)
# The store's own references ride in values as they are (to_dict and from_dict keep them).
references = st.sampled_from(
    [
        SecretRef("API_KEY"),
        ScrubbedText("a [REDACTED:email] b", ((2, 19),)),
        BlobLink("ab" * 32, 7, "text/plain"),
    ]
)
checkpoints = st.builds(
    Checkpoint,
    run_id=texts,
    step=st.integers(0, 2**31 - 1),
    schema_version=st.integers(1, 2**31 - 1),
    messages=st.lists(st.dictionaries(texts, json_values | references, max_size=3), max_size=4),
    counters=st.dictionaries(texts, st.integers() | st.floats(allow_nan=False), max_size=3),
    pending_action=st.none() | json_dicts,
    cursors=json_dicts,
    state=st.dictionaries(texts, json_values | references, max_size=4),
    status=st.sampled_from(list(Status)),
    labels=st.dictionaries(texts, texts, max_size=3),
    parent=st.none() | st.builds(ParentRef, texts, st.integers(0, 2**31 - 1)),
    created_at=st.none() | st.datetimes(timezones=st.just(UTC)),
    digest=st.none() | st.text("0123456789abcdef", min_size=64, max_size=64),
)


def fields(cp: Checkpoint) -> dict[str, Any]:
    """Every field of ``cp`` (messages as a plain list: their stored view is not a field)."""
    values = {name: getattr(cp, name) for name in FIELDS}
    values["messages"] = list(values["messages"])
    return values


def test_field_groups_are_the_dataclass_fields_in_order() -> None:
    """The groups cover every Checkpoint field once, in the dataclass's order."""
    assert tuple(f.name for f in dataclasses.fields(Checkpoint)) == FIELDS
    assert (*IDENTITY_FIELDS, *CONTENT_FIELDS, *STORE_FIELDS) == FIELDS
    assert set(VALUE_FIELDS) <= set(MIGRATED_FIELDS) <= set(CONTENT_FIELDS)
    assert len(set(FIELDS)) == len(FIELDS)


@settings(max_examples=200, deadline=None)
@given(checkpoints)
def test_from_dict_is_the_inverse_of_to_dict(cp: Checkpoint) -> None:
    """from_dict(to_dict(c)) has every field of c, and to_dict of it is the same dict."""
    data = cp.to_dict()
    back = Checkpoint.from_dict(data)
    assert fields(back) == fields(cp)
    assert back.to_dict() == data
    assert back.stored_view is None


@settings(max_examples=100, deadline=None)
@given(checkpoints)
def test_from_dict_shares_nothing_with_the_dict(cp: Checkpoint) -> None:
    """Changing the checkpoint from_dict built leaves the dict it came from unchanged."""
    data = cp.to_dict()
    expected = cp.to_dict()
    back = Checkpoint.from_dict(data)
    back.state["new"] = 1
    back.cursors["new"] = 1
    back.counters["new"] = 1
    back.labels["new"] = "x"
    back.messages.append({"role": "user"})
    for message in back.messages:
        message["new"] = 1
    assert data == expected


@settings(max_examples=100, deadline=None)
@given(checkpoints)
def test_next_copies_every_content_field_and_drops_the_store_fields(cp: Checkpoint) -> None:
    """next() is the same run one step on: content copied, created_at/digest/scrub report cleared."""
    following = cp.next()
    expected = fields(cp) | {"step": cp.step + 1, "created_at": None, "digest": None}
    expected["scrub_report"] = type(cp.scrub_report)()
    assert fields(following) == expected
    for name in ("counters", "labels", "cursors", "state"):
        assert getattr(following, name) is not getattr(cp, name)


def test_from_dict_names_a_missing_or_unknown_field() -> None:
    """A dict missing a field, or holding one a checkpoint lacks, is refused naming it."""
    data = Checkpoint(run_id="r").to_dict()
    with pytest.raises(InvalidCheckpoint, match="'state'"):
        Checkpoint.from_dict({k: v for k, v in data.items() if k != "state"})
    with pytest.raises(InvalidCheckpoint, match="sate"):
        Checkpoint.from_dict({**data, "sate": {}})
    with pytest.raises(InvalidCheckpoint, match="parent"):
        Checkpoint.from_dict({**data, "parent": ["r", 1]})
    with pytest.raises(InvalidCheckpoint, match="created_at"):
        Checkpoint.from_dict({**data, "created_at": "yesterday"})
    with pytest.raises(InvalidCheckpoint, match="status"):
        Checkpoint.from_dict({**data, "status": "sleeping"})
    # The store's own fields may be missing: a checkpoint never saved has none.
    bare = {k: v for k, v in data.items() if k not in ("created_at", "digest")}
    assert Checkpoint.from_dict(bare).created_at is None


def test_evolve_changes_what_it_is_given_and_copies_the_rest() -> None:
    """evolve keeps every other field (store fields too) and shares nothing mutable."""
    moment = datetime(2026, 1, 2, tzinfo=UTC)
    cp = Checkpoint(run_id="r", step=3, state={"a": [1]}, labels={"k": "v"}, created_at=moment, digest="d")
    other = cp.evolve(run_id="s", parent=ParentRef("r", 3))
    assert (other.run_id, other.step, other.parent) == ("s", 3, ParentRef("r", 3))
    assert (other.created_at, other.digest, other.state, other.labels) == (
        moment,
        "d",
        {"a": [1]},
        {"k": "v"},
    )
    other.state["a"].append(2)
    other.labels["k"] = "w"
    assert cp.state == {"a": [1]}
    assert cp.labels == {"k": "v"}
    with pytest.raises(InvalidArgument, match="'stat'"):
        cp.evolve(stat={})
    with pytest.raises(InvalidCheckpoint, match="messages must be a list"):
        cp.evolve(messages="not a list")


def test_evolve_keeps_the_message_list_rules() -> None:
    """Stored messages stay shared and frozen; a new list keeps the view but trusts none of it."""
    store = open_store("memory://")
    try:
        cp = Checkpoint(run_id="r", messages=[{"role": "user", "content": "hi"}])
        store.save(cp)
        loaded = store.load("r")
        same = loaded.evolve(step=1)
        assert isinstance(same.messages, MessageList)
        assert same.stored_view is loaded.stored_view
        assert same.messages.clean_prefix == loaded.messages.clean_prefix == 1
        assert same.messages[0] is loaded.messages[0]
        assert isinstance(same.messages[0], FrozenDict)
        with pytest.raises(TypeError):
            same.messages[0]["content"] = "changed"
        rewritten = loaded.evolve(step=1, messages=[{"role": "user", "content": "summary"}])
        assert rewritten.stored_view is loaded.stored_view
        assert rewritten.messages.clean_prefix == 0
        kept = MessageList([], None)
        assert loaded.evolve(messages=kept).messages is kept
        store.save(rewritten)
        assert [m["content"] for m in store.load("r").messages] == ["summary"]
    finally:
        store.close()


@pytest.mark.parametrize("field", [f for f in MIGRATED_FIELDS if f != "schema_version"])
def test_every_field_a_migration_may_change_must_stay(field: str) -> None:
    """Each field the store takes from a migrated dict (MIGRATED_FIELDS) may not be dropped by a migration."""

    def drop(cp: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in cp.items() if k != field}

    chain = MigrationChain(current=2, migrations={1: drop})
    with pytest.raises(MigrationError, match=f"removed the field {field!r}"):
        chain.migrate(Checkpoint(run_id="r").to_dict())


@pytest.mark.parametrize(
    ("counters", "labels"),
    [
        ({"\ud800": 1}, {}),  # a lone surrogate in a counter name
        ({"a": 2**64}, {}),  # past JSON's 64 bits
        ({"a": -(2**63) - 1}, {}),
        ({"a": True}, {}),  # a bool is not a counter
        ({"a": float("inf")}, {}),
        ({"\x00": 1}, {}),  # NUL in a queryable column
        ({}, {"\udc00": "x"}),
        ({}, {"a": "\ud800"}),
        ({}, {"a": "\x00"}),
    ],
)
def test_a_bad_counter_or_label_is_refused_after_good_saves(
    tmp_path: Any, counters: dict[str, Any], labels: dict[str, str]
) -> None:
    """Counters and labels are checked by the quick pass's own loops, not the walk: each bad one
    is still refused (naming its field) by a store that saved the run's good header before."""
    store = open_store(f"sqlite:///{tmp_path / 'fields.db'}", scrubber=False)
    cp = Checkpoint(run_id="r", counters={"a": 1}, labels={"k": "v"})
    store.save(cp)
    cp = cp.next()
    store.save(cp)
    bad = cp.next()
    bad.counters.update(counters)
    bad.labels.update(labels)
    with pytest.raises(NotJSONCompatible) as caught:
        store.save(bad)
    assert caught.value.path.startswith(("counters", "labels"))
    assert store.load("r").step == 1
