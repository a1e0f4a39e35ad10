"""A fresh checkpoint every step (the seed's own pattern): saved in O(new), stored exactly.

Tried as a new user would: ``Checkpoint(run_id, step, messages=list(conversation))``
each step, or a deep copy, or messages rebuilt from JSON. The store must
recognise the messages it holds already without reading their bodies or
scrubbing them again (store/remembered.py), and must store exactly what it
is given when anything in the history changed — never a silent reuse of the
stored prefix.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from helpers.recording import StatementLog
from safepoint import Checkpoint, Scrubber, codec
from safepoint.store.remembered import RunMemory

# The statements that read stored message bodies: none may run in a fresh checkpoint's save.
BODY_READS = {
    "view_messages",
    "view_carriers",
    "view_span",
    "head_messages",
    "carried_messages",
    "checkpoint_latest",
}
# What a save the store's memory covers does not need either: the head's chain values.
HEAD_READS = {"checkpoint_at", "view_chains"}

COPIES: dict[str, Callable[[list[Any]], list[Any]]] = {
    "list": list,
    "deepcopy": copy.deepcopy,
    "json": lambda messages: json.loads(json.dumps(messages)),
}


class Seen:
    """A scrubber step that records every string it is shown (and replaces nothing)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str, found: Any) -> str:
        self.texts.append(text)
        return text


def message(step: int, role: str) -> dict[str, Any]:
    return {"role": role, "content": f"{role} turn {step}: " + "lorem ipsum dolor sit amet " * 4}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


@pytest.mark.parametrize("copies", sorted(COPIES))
def test_a_fresh_checkpoint_reads_no_body_and_scrubs_only_its_new_messages(url: str, copies: str) -> None:
    queries, seen = StatementLog(), Seen()
    store = safepoint.open_store(url, observer=queries, scrubber=Scrubber(steps=[seen]))
    try:
        conversation: list[dict[str, Any]] = []
        for step in range(12):
            new = [message(step, "user"), message(step, "assistant")]
            conversation.extend(new)
            queries.take()
            seen.texts.clear()
            store.save(Checkpoint(run_id="fresh", step=step, messages=COPIES[copies](conversation)))
            ran = queries.take()
            assert not (BODY_READS | HEAD_READS) & set(ran), (step, ran)
            contents = {m["content"] for m in conversation}
            shown = [text for text in seen.texts if text in contents]
            assert sorted(shown) == sorted(m["content"] for m in new), step
        loaded = store.load("fresh")
        assert codec.encode(list(loaded.messages)) == codec.encode(conversation)
    finally:
        store.close()


@pytest.mark.parametrize("copies", ["list", "json"])
def test_the_first_save_in_a_cold_process_reads_chain_values_not_bodies(url: str, copies: str) -> None:
    """A store that never saw the run (a chat server behind a load balancer, a
    new worker): its first fresh save compares with the head's stored chain
    values, scrubs only the new messages, and stores exactly what it is given."""
    conversation: list[dict[str, Any]] = []
    with safepoint.open_store(url) as first:
        for step in range(8):
            conversation += [message(step, "user"), message(step, "assistant")]
            first.save(Checkpoint(run_id="cold", step=step, messages=list(conversation)))
    queries, seen = StatementLog(), Seen()
    with safepoint.open_store(url, observer=queries, scrubber=Scrubber(steps=[seen])) as cold:
        new = [message(8, "user"), message(8, "assistant")]
        conversation += new
        cold.save(Checkpoint(run_id="cold", step=8, messages=COPIES[copies](conversation)))
        ran = set(queries.take())
        assert not BODY_READS & ran, ran
        assert ran >= HEAD_READS
        contents = {m["content"] for m in conversation}
        assert sorted(t for t in seen.texts if t in contents) == sorted(m["content"] for m in new)
        assert codec.encode(list(cold.load("cold").messages)) == codec.encode(conversation)


def test_a_cold_save_over_rows_without_chain_values_reads_the_head(tmp_path: Path) -> None:
    """Rows written before the chains column: the save loads the head's bodies once, and is exact."""
    path = tmp_path / "state.db"
    conversation: list[dict[str, Any]] = []
    with safepoint.open_store(f"sqlite:///{path}") as first:
        for step in range(4):
            conversation += [message(step, "user"), message(step, "assistant")]
            first.save(Checkpoint(run_id="old", step=step, messages=list(conversation)))
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE safepoint_checkpoints SET chains = NULL")
    queries = StatementLog()
    with safepoint.open_store(f"sqlite:///{path}", observer=queries) as cold:
        conversation[3] = {"role": "user", "content": "edited in the middle"}
        cold.save(Checkpoint(run_id="old", step=4, messages=list(conversation)))
        assert {"view_carriers", "view_span"} & set(queries.take())
        assert codec.encode(list(cold.load("old").messages)) == codec.encode(conversation)
        assert codec.encode(list(cold.load("old", 3).messages)) != codec.encode(conversation)


def test_an_async_store_saves_fresh_checkpoints_without_reading_bodies(tmp_path: Path) -> None:
    queries = StatementLog()

    async def go() -> None:
        store = await safepoint.open_async_store(f"sqlite:///{tmp_path / 'state.db'}", observer=queries)
        try:
            conversation: list[dict[str, Any]] = []
            for step in range(6):
                conversation += [message(step, "user"), message(step, "assistant")]
                queries.take()
                await store.save(Checkpoint(run_id="fresh", step=step, messages=copy.deepcopy(conversation)))
                assert not BODY_READS & set(queries.take()), step
            loaded = await store.load("fresh")
            assert codec.encode(list(loaded.messages)) == codec.encode(conversation)
        finally:
            await store.close()

    asyncio.run(go())


def test_a_run_the_memory_has_let_go_of_is_compared_against_the_store(tmp_path: Path) -> None:
    """Bounded: past its budget the memory forgets the least recently saved run,
    whose next fresh save then reads the head's chain values (and stores the same thing)."""
    queries = StatementLog()
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}", observer=queries)
    store.settings = store.settings.replace(memory=RunMemory(max_messages=10, max_runs=8))
    try:
        conversations: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        for step in range(3):
            for run_id, conversation in conversations.items():
                conversation += [message(step, "user"), message(step, "assistant")]
                store.save(Checkpoint(run_id=run_id, step=step, messages=list(conversation)))
        # 6 messages each: "a", saved first, no longer fits beside "b".
        queries.take()
        conversations["a"].append(message(3, "user"))
        store.save(Checkpoint(run_id="a", step=3, messages=list(conversations["a"])))
        assert set(queries.take()) >= HEAD_READS
        assert codec.encode(list(store.load("a").messages)) == codec.encode(conversations["a"])
    finally:
        store.close()


def test_a_run_past_the_memorys_byte_budget_is_compared_against_the_store(tmp_path: Path) -> None:
    """The memory keeps the messages themselves (as given, frozen): bounded by their stored bytes too."""
    queries = StatementLog()
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}", observer=queries)
    store.settings = store.settings.replace(memory=RunMemory(max_bytes=1_000))
    try:
        conversation: list[dict[str, Any]] = []
        for step in range(5):  # some 140 bytes a message: past 1,000 bytes after the fourth step
            conversation += [message(step, "user"), message(step, "assistant")]
            queries.take()
            store.save(Checkpoint(run_id="big", step=step, messages=list(conversation)))
            ran = set(queries.take())
            assert (ran >= HEAD_READS) == (step == 4), (step, ran)
        assert codec.encode(list(store.load("big").messages)) == codec.encode(conversation)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("text", "text, edited"),
        (1, 1.0),
        (True, 1),
        (0, False),
        (0.0, -0.0),
        ([1, "a"], [1.0, "a"]),
        ({"n": 2}, {"n": 2.0}),
        (None, "None"),
    ],
)
def test_an_old_message_edited_in_place_is_stored_as_edited(tmp_path: Path, old: Any, new: Any) -> None:
    """The caller's own dict, saved steps ago, changed in place (to a value Python may
    call equal to the old one): the next fresh checkpoint stores the change."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        conversation: list[dict[str, Any]] = [{"role": "tool", "content": "x", "value": copy.deepcopy(old)}]
        for step in range(5):
            conversation += [message(step, "user"), message(step, "assistant")]
            store.save(Checkpoint(run_id="edited", step=step, messages=list(conversation)))
        conversation[0]["value"] = new
        conversation.append(message(5, "user"))
        store.save(Checkpoint(run_id="edited", step=5, messages=list(conversation)))
        loaded = store.load("edited").messages
        assert codec.encode(list(loaded)) == codec.encode(conversation)
        assert repr(loaded[0]["value"]) == repr(new)


# -- edits anywhere in the history are stored, and load back exactly -----------------

_values = st.one_of(
    st.integers(-3, 3), st.booleans(), st.sampled_from([0.0, 1.0, -0.0, 2.5]), st.text(max_size=6), st.none()
)
_messages = st.dictionaries(
    st.sampled_from(["role", "content", "n", "z", "a"]), _values, min_size=1, max_size=4
)
_edits = st.one_of(
    st.tuples(st.just("append"), st.lists(_messages, min_size=1, max_size=3)),
    st.tuples(st.just("replace"), st.integers(0, 10_000), _messages),
    st.tuples(st.just("reorder_keys"), st.integers(0, 10_000)),
    st.tuples(st.just("retype"), st.integers(0, 10_000)),
    st.tuples(st.just("delete"), st.integers(0, 10_000)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), _messages),
    st.tuples(st.just("edit_in_place"), st.integers(0, 10_000), _values),
    st.tuples(st.just("other_writer"), st.integers(0, 10_000)),
    st.tuples(st.just("other_recreates"), st.integers(0, 10_000)),
)


def _retyped(value: Any) -> Any:
    """A value JSON tells apart from ``value`` though Python may call them equal."""
    if value is True:
        return 1
    if type(value) is int:
        return float(value)
    if type(value) is float:
        return int(value) if value != 0.5 else True
    return 0 if value is None else None


def _apply(edit: tuple[Any, ...], conversation: list[dict[str, Any]]) -> None:
    kind = edit[0]
    if kind == "append":
        conversation.extend(copy.deepcopy(edit[1]))
        return
    if not conversation:
        conversation.append({"role": "first"})
        return
    at = edit[1] % len(conversation)
    target = conversation[at]
    if kind == "replace":
        conversation[at] = copy.deepcopy(edit[2])
    elif kind == "reorder_keys":
        conversation[at] = dict(reversed(list(target.items())))
    elif kind == "retype":
        key = sorted(target)[0]
        target[key] = _retyped(target[key])
    elif kind == "delete":
        del conversation[at]
    elif kind == "insert":
        conversation.insert(at, copy.deepcopy(edit[2]))
    elif kind == "edit_in_place":
        target[sorted(target)[-1]] = edit[2]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # Up to 30 edits: enough rewrites for the ranges to be compacted (store/delta.py).
    edits=st.lists(_edits, min_size=1, max_size=30),
    copies=st.lists(st.sampled_from(sorted(COPIES)), min_size=30, max_size=30),
)
def test_every_edit_of_a_fresh_checkpoints_history_is_stored_exactly(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[Any, ...]], copies: list[str]
) -> None:
    path = tmp_path_factory.mktemp("edits") / "state.db"
    writer = safepoint.open_store(f"sqlite:///{path}")
    other = safepoint.open_store(f"sqlite:///{path}")
    try:
        conversation: list[dict[str, Any]] = [{"role": "system", "content": "start"}]
        writer.save(Checkpoint(run_id="edited", step=0, messages=list(conversation)))
        step = 0
        for edit, copied in zip(edits, copies, strict=False):
            if edit[0] == "other_writer":
                # Another store moves the head: this store's memory of the run is stale.
                head = other.load("edited")
                theirs = head.next()
                theirs.messages.append({"role": "other", "n": edit[1]})
                other.save(theirs)
                step += 1
                continue
            if edit[0] == "other_recreates":
                # The run deleted and written again up to the same step: the head this
                # store remembers is at the right step, with another digest.
                other.delete_run("edited")
                for again in range(step + 1):
                    other.save(Checkpoint(run_id="edited", step=again, messages=[{"again": again}]))
                continue
            _apply(edit, conversation)
            step += 1
            writer.save(Checkpoint(run_id="edited", step=step, messages=COPIES[copied](conversation)))
            loaded = writer.load("edited")
            assert codec.encode(list(loaded.messages)) == codec.encode(conversation)
            assert [type(v) for m in loaded.messages for v in m.values()] == [
                type(v) for m in conversation for v in dict(sorted(m.items())).values()
            ]
    finally:
        writer.close()
        other.close()
