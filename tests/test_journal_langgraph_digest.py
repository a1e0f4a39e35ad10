"""The LangGraph journal's request digest (``adapters/langgraph/digests.py``): remembered per
message, so a call serializes only the messages it has not seen, and still different for every
change the provider would read — a part reassigned, a list or dict inside it changed in place,
the model's parameters, its bound tools — and the same in every process.

Each change is made to a message the digests have already remembered, and the remembered
answer is checked against a fresh one (nothing remembered) as well as against the digest before
the change.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from helpers import langgraph_journal_app as app
from helpers.langgraph_journal_app import ScriptedChat, State
from safepoint import open_store
from safepoint.adapters.langgraph import SafepointSaver, digests
from safepoint.adapters.langgraph.calls import request_digest
from safepoint.adapters.langgraph.digests import MessageDigests

ROOT = Path(__file__).resolve().parent.parent
MODEL = ScriptedChat()


def conversation() -> list[BaseMessage]:
    """Every kind of part the digest reads: text and block content, names, tool calls with
    nested arguments, tool-call ids; ids that must not count."""
    call = {
        "name": "charge",
        "args": {"order": "o-1", "amount": 10, "rate": 0.0, "tags": ["a", 1]},
        "id": "c1",
    }
    return [
        HumanMessage("pay order o-1", id="h1", name="ann"),
        AIMessage(content="", tool_calls=[call, {"name": "lookup", "args": {"q": "x"}, "id": "c2"}], id="a1"),
        ToolMessage("charged 10", tool_call_id="c1", name="charge", id="t1"),
        ToolMessage("found x", tool_call_id="c2", id="t2"),
        HumanMessage(content=[{"type": "text", "text": "and the receipt?"}, "as text"], id="h2"),
        AIMessage("here it is", id="a2"),
    ]


def digest_of(messages: list[BaseMessage], remembered: MessageDigests | None = None, **kwargs: Any) -> str:
    return request_digest(MODEL, messages, kwargs.pop("stop", None), kwargs, remembered)


def remembered(messages: list[BaseMessage]) -> MessageDigests:
    """Digests that have seen ``messages`` (twice: the second time answered from memory)."""
    found = MessageDigests()
    digest_of(messages, found)
    digest_of(messages, found)
    return found


def test_the_same_request_has_the_same_digest_in_every_process() -> None:
    """No id() leaks into a digest: another process (another hash seed, other addresses), a
    fresh memory and a warm one all give the same value for the same request."""
    messages = conversation()
    warm = remembered(messages)
    here = digest_of(messages, warm)
    script = (
        "from test_journal_langgraph_digest import conversation, digest_of\n"
        "junk = [object() for _ in range(1000)]\n"  # other addresses for the same messages
        "print(digest_of(conversation()))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}", "PYTHONHASHSEED": "4321"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == here == digest_of(messages) == digest_of(conversation())
    assert len(here) == 64


def _set(index: int, name: str, value: Any) -> Callable[[list[BaseMessage]], Any]:
    return lambda messages: setattr(messages[index], name, value)


def _call(index: int) -> Callable[[list[BaseMessage]], dict[str, Any]]:
    return lambda messages: messages[1].tool_calls[index]  # type: ignore[attr-defined]


def _args(messages: list[BaseMessage]) -> dict[str, Any]:
    args: dict[str, Any] = messages[1].tool_calls[0]["args"]  # type: ignore[attr-defined]
    return args


CHANGES: dict[str, Callable[[list[BaseMessage]], Any]] = {
    "content reassigned": _set(0, "content", "pay order o-2"),
    "content reassigned, a character longer": _set(5, "content", "here it is!"),
    "block content changed in place": lambda m: m[4].content[0].update(text="and the bill?"),  # type: ignore[union-attr]
    "block content appended to": lambda m: m[4].content.append("more"),  # type: ignore[union-attr]
    "block content reassigned": _set(4, "content", [{"type": "text", "text": "and the receipt?"}]),
    "name reassigned": _set(0, "name", "bob"),
    "name added": _set(3, "name", "lookup"),
    "name removed": _set(2, "name", None),
    "tool-call id reassigned": _set(2, "tool_call_id", "c9"),
    "tool calls reassigned": _set(1, "tool_calls", []),
    "tool call appended": lambda m: m[1].tool_calls.append({"name": "x", "args": {}, "id": "c3"}),  # type: ignore[attr-defined]
    "tool call removed": lambda m: m[1].tool_calls.pop(),  # type: ignore[attr-defined]
    "tool calls reordered": lambda m: m[1].tool_calls.reverse(),  # type: ignore[attr-defined]
    "tool call renamed in place": lambda m: _call(0)(m).update(name="refund"),
    "tool call id changed in place": lambda m: _call(1)(m).update(id="c7"),
    "tool call args replaced in place": lambda m: _call(1)(m).update(args={"q": "y"}),
    "argument changed in place": lambda m: _args(m).update(amount=11),
    "argument int to bool in place": lambda m: _args(m).update(amount=True),
    "argument 0.0 to -0.0 in place": lambda m: _args(m).update(rate=-0.0),
    "argument added in place": lambda m: _args(m).update(note="n"),
    "nested list changed in place": lambda m: _args(m)["tags"].__setitem__(1, "1"),
    "nested list appended to": lambda m: _args(m)["tags"].append(None),
    "an extra attribute the digest reads": _set(0, "tool_calls", [{"name": "x", "args": {}, "id": "c0"}]),
    "a message removed": lambda m: m.pop(3),
    "a message added": lambda m: m.append(HumanMessage("thanks")),
    "messages reordered": lambda m: m.reverse(),
    "a message's role": lambda m: m.__setitem__(5, HumanMessage("here it is", id="a2")),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_every_change_the_provider_reads_changes_the_digest(change: str) -> None:
    """Made to messages already remembered (reassigned, or changed in place deep inside),
    each change gives a new digest — the one a fresh memory gives."""
    messages = conversation()
    memory = remembered(messages)
    before = digest_of(messages, memory)
    CHANGES[change](messages)
    after = digest_of(messages, memory)
    assert after != before
    assert after == digest_of(messages) == digest_of(messages, memory)


def test_the_model_its_parameters_stop_words_and_bound_tools_count() -> None:
    """The llm string is part of the digest: another model, parameter (a fake model's
    responses), stop list or tool set gives another digest for the same messages."""
    messages = conversation()
    memory = remembered(messages)
    base = digest_of(messages, memory)
    others = {
        request_digest(FakeListChatModel(responses=["a"]), messages, None, {}, memory),
        request_digest(FakeListChatModel(responses=["b"]), messages, None, {}, memory),
        digest_of(messages, memory, stop=["\n"]),
        digest_of(messages, memory, tools=["charge"]),
        digest_of(messages, memory, tools=["charge", "lookup"]),
        digest_of(messages, memory, temperature=0.3),
    }
    assert base not in others
    assert len(others) == 6


def test_message_ids_and_chunking_do_not_count() -> None:
    """LangGraph renews a message's id when it runs a step again, and a streamed answer is a
    chunk: neither changes the digest, remembered or not."""
    messages = conversation()
    memory = remembered(messages)
    before = digest_of(messages, memory)
    for message in messages:
        message.id = "renewed-" + str(message.id)
    assert digest_of(messages, memory) == before
    assert digest_of(conversation(), memory) == before  # new objects, other ids
    call = {"name": "lookup", "args": {"q": "x"}, "id": "c1"}
    chunk = AIMessageChunk(content="", tool_call_chunks=[{**call, "args": '{"q": "x"}', "index": 0}], id="s")
    merged = AIMessage(content="", tool_calls=[call], id="m")
    assert digest_of([chunk], memory) == digest_of([merged], memory) == digest_of([merged])


def test_a_call_serializes_only_the_messages_it_has_not_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost is flat in the conversation's length: as it grows, each request serializes its
    new messages and the ones changed, never the rest again."""
    serialized: list[Any] = []
    real = digests._digest
    monkeypatch.setattr(digests, "_digest", lambda parts, odd: serialized.append(parts) or real(parts, odd))
    memory = MessageDigests()
    messages: list[BaseMessage] = []
    for _ in range(30):
        messages = [*messages, *conversation()]  # LangGraph's reducer: a new list, the same messages
        serialized.clear()
        digest_of(messages, memory)
        assert len(serialized) == 6
        serialized.clear()
        digest_of(messages, memory)
        assert serialized == []
    messages[3].content = "changed"
    messages[1].tool_calls[0]["args"]["amount"] = 12  # type: ignore[attr-defined]
    digest_of(messages, memory)
    assert len(serialized) == 2
    assert len(memory) == len(messages)


def test_an_entry_goes_with_its_message() -> None:
    """The memory holds its messages weakly: a conversation dropped leaves nothing behind, so
    no id() of a dead message can be mistaken for a new one's."""
    memory = MessageDigests()
    messages = conversation()
    digest_of(messages, memory)
    assert len(memory) == len(messages)
    del messages
    gc.collect()
    assert len(memory) == 0
    for _ in range(50):  # new messages, very likely at the addresses of the old ones
        fresh = [HumanMessage(f"{i}") for i in range(6)]
        assert digest_of(fresh, memory) == digest_of(fresh)


class Custom:
    """A value JSON takes as its ``str``, which may change in place."""

    def __init__(self) -> None:
        self.text = "one"

    def __str__(self) -> str:
        return self.text


def test_a_part_holding_another_type_is_digested_afresh_each_time() -> None:
    """What cannot be walked (an object serialized by ``str``, a ``str`` subclass) is not
    remembered: its in-place changes still change the digest."""
    value = Custom()
    message = AIMessage(content="", tool_calls=[{"name": "x", "args": {"v": value}, "id": "c"}])
    memory = MessageDigests()
    before = digest_of([message], memory)
    assert len(memory) == 0
    value.text = "two"
    assert digest_of([message], memory) != before


LEAF = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.sampled_from("ab")
JSONISH = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
    max_leaves=8,
)


def _containers(value: Any) -> list[Any]:
    found = [value] if isinstance(value, list | dict) else []
    for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        found += _containers(item)
    return found


@settings(max_examples=200, deadline=None)
@given(args=JSONISH, edits=st.lists(st.tuples(st.integers(0, 20), LEAF | JSONISH), max_size=6))
def test_a_remembered_digest_is_always_a_fresh_one(args: Any, edits: list[tuple[int, Any]]) -> None:
    """Whatever in-place edits are made to a tool call's arguments between requests, the
    remembered digest equals the one made afresh."""
    message = AIMessage(content="", tool_calls=[{"name": "t", "args": {"a": args}, "id": "c"}])
    memory = MessageDigests()
    for at, value in edits:
        assert digest_of([message], memory) == digest_of([message])
        containers = _containers(message.tool_calls[0]["args"])
        target = containers[at % len(containers)]
        if isinstance(target, dict):
            target[sorted(target)[at % len(target)] if target and at % 2 else "w"] = value
        elif target and at % 2:
            target[at % len(target)] = value
        else:
            target.append(value)
        assert digest_of([message], memory) == digest_of([message])


# -- in the journal ------------------------------------------------------------------------


def _asking(saver: Any, before: Callable[[list[Any]], None]) -> Any:
    """START → agent → END: the agent calls the model on the conversation (``before`` may change
    it first), then raises ``app.Crash`` on its first run."""
    left = [1]
    chat = ScriptedChat()

    def agent(state: State) -> dict[str, Any]:
        before(state["messages"])
        answer = chat.invoke(state["messages"])
        if left[0]:
            left[0] -= 1
            raise app.Crash
        return {"messages": [answer]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=saver)


def test_a_message_changed_in_place_before_a_resumed_call_is_a_divergence(tmp_path: Path) -> None:
    """The journal's memory is the one its model calls use: a message it remembered, changed in
    place before the step runs again, makes the request diverge — called again, not replayed."""
    app.PROVIDER.clear()
    runs = [0]

    def before(messages: list[Any]) -> None:
        runs[0] += 1
        if runs[0] == 2:
            messages[0].content[0]["text"] = "turn 1, reworded"  # in place, deep inside

    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        saver = SafepointSaver(store, journal=True)
        graph = _asking(saver, before)
        config = {"configurable": {"thread_id": "t"}}
        with pytest.raises(app.Crash):
            graph.invoke({"messages": [HumanMessage([{"type": "text", "text": "turn 1"}])]}, config)
        graph.invoke(None, config)
        assert len(app.PROVIDER) == 2
        assert saver.journal.seen.divergences == 1


def test_a_journaled_turn_serializes_only_its_new_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across turns on one saver, a model call serializes only what the journal has not seen:
    the turn's user message and the previous answer. The earlier messages are the same objects
    (the saver's memo), remembered by the journal's digests."""
    serialized: list[Any] = []
    real = digests._digest
    monkeypatch.setattr(digests, "_digest", lambda parts, odd: serialized.append(parts) or real(parts, odd))
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        saver = SafepointSaver(store, journal=True)
        graph = _asking(saver, lambda messages: None)
        config = {"configurable": {"thread_id": "t"}}
        with pytest.raises(app.Crash):
            graph.invoke({"messages": [HumanMessage("turn 0")]}, config)
        graph.invoke(None, config)  # replayed: the request digested again, from memory
        assert len(serialized) == 1
        assert saver.journal.seen.replayed == 1
        for turn in range(1, 6):
            serialized.clear()
            graph.invoke({"messages": [HumanMessage(f"turn {turn}")]}, config)
            assert [(parts[0], parts[1]) for parts in serialized][1:] == [("human", f"turn {turn}")]
            assert [parts[0] for parts in serialized] == ["ai", "human"]  # the answer, the new turn
