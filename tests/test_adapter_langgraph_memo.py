"""SafepointSaver's memory of the threads it wrote: a turn costs what it adds, and the store stays the truth.

A saver remembers the last steps it saved or loaded (``safepoint.adapters.langgraph.memo``), so
``put`` converts only a turn's new messages and ``get_tuple`` answers without
a load. These tests prove the work per turn does not grow with the thread
(by counting conversions and loads, never by timing), that what comes from
memory is exactly what the store would give, and that the memory gives way
as soon as someone else moves the thread: another saver, another process, a
thread deleted and written again, the scrubber.
"""

from __future__ import annotations

import asyncio
import operator
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from typing_extensions import TypedDict

import safepoint
from safepoint.adapters.langgraph import SafepointSaver
from safepoint.adapters.langgraph.codec import ValueCodec
from test_adapter_langgraph import SRC, TESTS, build_chat_graph

CFG: RunnableConfig = {"configurable": {"thread_id": "t"}}
ROOT: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


class EditState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turn: int


def build_editing_graph(saver: SafepointSaver) -> Any:
    """Replies to each turn; turn 3 also rewrites the first reply (same id) and removes the first question."""

    def reply(state: EditState) -> dict[str, Any]:
        turn = state.get("turn", 0) + 1
        out: list[AnyMessage] = [AIMessage(f"reply {turn}", id=f"a{turn}")]
        if turn == 3:
            out += [AIMessage("reply 1, edited", id="a1"), RemoveMessage(id="h1")]
        return {"messages": out, "turn": turn}

    builder = StateGraph(EditState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def ask(graph: Any, turn: int, durability: str = "async") -> Any:
    return graph.invoke(
        {"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, CFG, durability=durability
    )


def from_store(url: str, config: RunnableConfig = ROOT) -> CheckpointTuple | None:
    """What a saver that remembers nothing reads: the store's truth."""
    with SafepointSaver.from_url(url) as fresh:
        return fresh.get_tuple(config)


def same_tuple(a: CheckpointTuple | None, b: CheckpointTuple | None) -> bool:
    return a is not None and b is not None and tuple(a) == tuple(b)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'memo.db'}"


@pytest.fixture
def store(db_url: str) -> Iterator[safepoint.Store]:
    opened = safepoint.open_store(db_url)
    yield opened
    opened.close()


class Calls:
    """Counts calls of a few store methods (wrapped on the instance)."""

    def __init__(self, store: safepoint.Store, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
        self.counts = dict.fromkeys(names, 0)
        for name in names:
            original = getattr(store, name)

            def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                self.counts[_name] += 1
                return _original(*args, **kwargs)

            monkeypatch.setattr(store, name, counted)

    def take(self) -> dict[str, int]:
        out, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        return out


# --- the work per turn does not grow with the thread


def test_a_turn_converts_only_its_new_messages(
    store: safepoint.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every put converts the messages the turn added, never the conversation before them."""
    converted: list[Any] = []
    original = ValueCodec._message_entry

    def counting(self: ValueCodec, message: Any, path: str) -> Any:
        converted.append(message)
        return original(self, message, path)

    monkeypatch.setattr(ValueCodec, "_message_entry", counting)
    graph = build_chat_graph(SafepointSaver(store))
    per_turn = []
    for turn in range(8):
        graph.invoke({"messages": [("user", f"turn {turn}")]}, CFG)
        per_turn.append(len(converted))
        converted.clear()
    assert per_turn == [2] * 8  # the question and the reply, at turn 1 as at turn 8
    assert len(graph.get_state(CFG).values["messages"]) == 16


def test_a_turn_loads_nothing(store: safepoint.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a saver knows the thread, a turn is one small head query and saves: no load of the history."""
    graph = build_chat_graph(SafepointSaver(store))
    graph.invoke({"messages": [("user", "first")]}, CFG)
    calls = Calls(store, monkeypatch, "load", "run", "save")
    for turn in range(5):
        graph.invoke({"messages": [("user", f"turn {turn}")]}, CFG)
        counts = calls.take()
        assert counts["load"] == 0, turn
        assert counts["run"] == 1  # get_tuple's check that the head has not moved
        assert counts["save"] >= 5  # the thread's steps, and the index


def test_get_tuple_from_memory_is_what_the_store_holds(db_url: str, store: safepoint.Store) -> None:
    """After every turn (late writes included), the remembered tuple equals a fresh saver's load."""
    saver = SafepointSaver(store)
    graph = build_chat_graph(saver, review=True, fan_out=True)
    for turn in range(4):
        for value in ({"messages": [("user", f"turn {turn}")]}, Command(resume=f"ok {turn}")):
            graph.invoke(value, CFG)
            assert same_tuple(saver.get_tuple(ROOT), from_store(db_url))
            for older in list(saver.list(ROOT))[:6]:  # recent checkpoints by id, too
                assert same_tuple(saver.get_tuple(older.config), from_store(db_url, older.config))
    assert graph.get_state(CFG).values["approved"] == "ok 3"


def test_what_get_tuple_returns_is_the_callers_to_change(store: safepoint.Store) -> None:
    """LangGraph changes the checkpoint it gets (versions, metadata, values): the next one is untouched."""
    saver = SafepointSaver(store)
    graph = build_chat_graph(saver, fan_out=True)
    graph.invoke({"messages": [("user", "hi")]}, CFG)
    first = saver.get_tuple(ROOT)
    assert first is not None
    expected = saver.get_tuple(ROOT)
    checkpoint: Any = first.checkpoint
    checkpoint["channel_versions"]["messages"] = "changed"
    checkpoint["versions_seen"].clear()
    checkpoint["channel_values"]["messages"].append(HumanMessage("injected"))
    checkpoint["channel_values"]["notes"].append("injected")
    first.metadata["step"] = 99  # type: ignore[typeddict-item]
    first.pending_writes.append(("x", "y", "z"))  # type: ignore[union-attr]
    assert same_tuple(saver.get_tuple(ROOT), expected)


def test_messages_edited_and_removed_by_id_are_stored(db_url: str, store: safepoint.Store) -> None:
    """add_messages replacing an old message (same id) and RemoveMessage: the log follows, as stored."""
    saver = SafepointSaver(store)
    graph = build_editing_graph(saver)
    for turn in range(1, 5):
        ask(graph, turn)
        assert same_tuple(saver.get_tuple(ROOT), from_store(db_url))
    found = from_store(db_url)
    assert found is not None
    assert [(m.id, m.content) for m in found.checkpoint["channel_values"]["messages"]] == [
        ("a1", "reply 1, edited"),
        ("h2", "question 2"),
        ("a2", "reply 2"),
        ("h3", "question 3"),
        ("a3", "reply 3"),
        ("h4", "question 4"),
        ("a4", "reply 4"),
    ]
    counts = [info.message_count for info in store.history("langgraph/t")]
    assert counts[-1] == 7


class DictState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def test_plain_dict_messages_are_remembered_too(db_url: str, store: safepoint.Store) -> None:
    """A channel of plain JSON dicts is appended to, turn after turn, and read back as stored."""
    builder = StateGraph(DictState)
    builder.add_node(
        "echo", lambda s: {"messages": [{"role": "assistant", "content": f"seen {len(s['messages'])}"}]}
    )
    builder.add_edge(START, "echo")
    saver = SafepointSaver(store)
    graph = builder.compile(checkpointer=saver)
    for turn in range(4):
        graph.invoke({"messages": [{"role": "user", "content": f"turn {turn}"}]}, CFG)
        assert same_tuple(saver.get_tuple(ROOT), from_store(db_url))
    counts = [info.message_count for info in store.history("langgraph/t")]
    assert counts == sorted(counts)  # appended, never rewritten
    assert store.load("langgraph/t").messages[-1] == {"role": "assistant", "content": "seen 7"}


# --- the store stays the truth


def test_a_second_saver_moving_the_head_is_seen(db_url: str) -> None:
    """Two savers take turns on one thread: each sees the other's turns, and the conversation is whole."""
    with SafepointSaver.from_url(db_url) as first, SafepointSaver.from_url(db_url) as second:
        graphs = [build_editing_graph(first), build_editing_graph(second)]
        ask(graphs[0], 1)
        assert first.get_tuple(ROOT) is not None  # the first saver now remembers the thread
        ask(graphs[1], 2)
        seen = first.get_tuple(ROOT)
        assert same_tuple(seen, from_store(db_url))
        assert seen is not None
        assert [m.content for m in seen.checkpoint["channel_values"]["messages"]][-2:] == [
            "question 2",
            "reply 2",
        ]
        ask(graphs[0], 3)  # built on the second saver's head, not on what the first remembered
        ask(graphs[1], 4)
        for saver in (first, second):
            assert same_tuple(saver.get_tuple(ROOT), from_store(db_url))
        final = from_store(db_url)
        assert final is not None
        assert [m.id for m in final.checkpoint["channel_values"]["messages"]] == [
            "a1", "h2", "a2", "h3", "a3", "h4", "a4"
        ]  # fmt: skip


CHILD = """
import sys
sys.path[:0] = [{tests!r}, {src!r}]
from langchain_core.messages import HumanMessage
from safepoint.adapters.langgraph import SafepointSaver
from test_adapter_langgraph_memo import CFG, build_editing_graph

with SafepointSaver.from_url({url!r}) as saver:
    build_editing_graph(saver).invoke({{"messages": [HumanMessage("from the child", id="child")]}}, CFG)
"""


def test_a_saver_in_another_process_moving_the_head_is_seen(db_url: str, store: safepoint.Store) -> None:
    """Another process adds a turn: this saver's next get_tuple and turn build on it."""
    saver = SafepointSaver(store)
    graph = build_editing_graph(saver)
    ask(graph, 1)
    assert saver.get_tuple(ROOT) is not None
    script = CHILD.format(tests=str(TESTS), src=str(SRC), url=db_url)
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr
    seen = saver.get_tuple(ROOT)
    assert seen is not None
    assert seen.checkpoint["channel_values"]["messages"][-2].content == "from the child"
    assert same_tuple(seen, from_store(db_url))
    result = ask(graph, 3)  # turn 3 of the thread: it edits a1 and removes h1, which the child never saw
    assert [m.id for m in result["messages"]] == ["a1", "child", "a2", "h3", "a3"]
    assert same_tuple(saver.get_tuple(ROOT), from_store(db_url))


def test_a_thread_deleted_and_written_again_to_the_same_step_is_seen(db_url: str) -> None:
    """Same head step, another thread: the head's commit time tells them apart; nothing stale is served."""
    with SafepointSaver.from_url(db_url) as first, SafepointSaver.from_url(db_url) as second:
        ask(build_editing_graph(first), 1, durability="sync")
        remembered = first.get_tuple(ROOT)
        steps = first.store.run("langgraph/t").head_step  # type: ignore[union-attr]
        second.delete_thread("t")
        second_graph = build_editing_graph(second)
        second_graph.invoke({"messages": [HumanMessage("someone else", id="x1")]}, CFG, durability="sync")
        assert second.store.run("langgraph/t").head_step == steps  # type: ignore[union-attr]
        seen = first.get_tuple(ROOT)
        assert seen is not None
        assert remembered is not None
        assert seen.checkpoint["id"] != remembered.checkpoint["id"]
        assert seen.checkpoint["channel_values"]["messages"][0].content == "someone else"
        assert same_tuple(seen, from_store(db_url))


def test_what_the_scrubber_redacted_is_what_get_tuple_returns(db_url: str, store: safepoint.Store) -> None:
    """A turn whose messages held a token: the same saver hands back the redacted text, as a load would."""
    token = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    saver = SafepointSaver(store)
    graph = build_chat_graph(saver)
    graph.invoke({"messages": [("user", f"my key is {token}")]}, CFG)
    for _ in range(2):  # and still after a clean turn: the redacted message is in every later log
        seen = saver.get_tuple(ROOT)
        assert seen is not None
        assert (
            seen.checkpoint["channel_values"]["messages"][0].content == "my key is [REDACTED:openai-api-key]"
        )
        assert same_tuple(seen, from_store(db_url))
        graph.invoke({"messages": [("user", "nothing secret")]}, CFG)
    assert len(graph.get_state(CFG).values["messages"]) == 6


def test_async_savers_see_each_other(tmp_path: Path) -> None:
    """Over an AsyncStore, the head check runs awaited: a saver sees another's turn and builds on it."""
    url = f"sqlite:///{tmp_path / 'async.db'}"

    async def scenario() -> list[str]:
        async with SafepointSaver.afrom_url(url) as first, SafepointSaver.afrom_url(url) as second:
            graphs = [build_editing_graph(first), build_editing_graph(second)]
            for turn in range(1, 5):
                graph = graphs[turn % 2]
                await graph.ainvoke({"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, CFG)
            seen = await first.aget_tuple(ROOT)
            assert seen is not None
            other = await second.aget_tuple(ROOT)
            assert other is not None
            assert tuple(seen) == tuple(other)
            return [m.id for m in seen.checkpoint["channel_values"]["messages"]]

    assert asyncio.run(scenario()) == ["a1", "h2", "a2", "h3", "a3", "h4", "a4"]
