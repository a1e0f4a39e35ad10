"""SafepointSaver under real compiled LangGraph graphs, fully offline.

Most scenarios run twice — once with LangGraph's reference ``InMemorySaver``,
once with ``SafepointSaver`` — and must observe exactly the same states,
histories and interrupts. The rest prove what only safepoint promises:
resuming in a fresh saver and a fresh process, incremental storage (bytes
grow linearly with the turns), a crash between the two saves of a step, and a
serializer that refuses to revive types nobody allowed.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import itertools
import operator
import os
import pickle
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Interrupt, interrupt
from typing_extensions import TypedDict

import safepoint
from adapter_checks import run_example
from conftest_postgres import fresh_schema, require_postgres
from safepoint import CorruptCheckpoint, NotJSONCompatible, Status
from safepoint.adapters.langgraph import SafepointSaver
from safepoint.adapters.langgraph import steps as langgraph_steps

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str
    notes: Annotated[list[str], operator.add]


def fake_model(prefix: str = "reply") -> GenericFakeChatModel:
    """An offline chat model answering "<prefix> 0", "<prefix> 1", … in order."""
    return GenericFakeChatModel(messages=(AIMessage(content=f"{prefix} {i}") for i in itertools.count()))


def build_chat_graph(
    checkpointer: BaseCheckpointSaver[Any], *, review: bool = False, fan_out: bool = False
) -> Any:
    """chat -> (review: interrupt for approval) -> end; ``fan_out`` adds two parallel note-takers."""
    model = fake_model()

    def chat(state: ChatState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def approve(state: ChatState) -> dict[str, Any]:
        return {"approved": interrupt({"question": "approve?", "seen": len(state["messages"])})}

    builder = StateGraph(ChatState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    last = "chat"
    if fan_out:
        builder.add_node("left", lambda s: {"notes": [f"left saw {len(s['messages'])}"]})
        builder.add_node("right", lambda s: {"notes": [f"right saw {len(s['messages'])}"]})
        builder.add_edge("chat", "left")
        builder.add_edge("chat", "right")
        builder.add_node("join", lambda s: {"notes": ["joined"]})
        builder.add_edge(["left", "right"], "join")
        last = "join"
    if review:
        builder.add_node("review", approve)
        builder.add_edge(last, "review")
        last = "review"
    builder.add_edge(last, END)
    return builder.compile(checkpointer=checkpointer)


def build_parent_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """A graph whose middle node is a subgraph that interrupts (a child checkpoint namespace)."""
    inner = StateGraph(ChatState)
    inner.add_node("ask", lambda s: {"approved": interrupt("inner approval?")})
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    outer = StateGraph(ChatState)
    model = fake_model("outer")
    outer.add_node("chat", lambda s: {"messages": [model.invoke(s["messages"])]})
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "chat")
    outer.add_edge("chat", "sub")
    outer.add_edge("sub", END)
    return outer.compile(checkpointer=checkpointer)


def plain(value: Any) -> Any:
    """Values with messages reduced to (type, content) and interrupts to their value (ids differ per run)."""
    if isinstance(value, BaseMessage):
        return (value.type, value.content)
    if isinstance(value, Interrupt):
        return ("interrupt", plain(value.value))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def snapshot_view(snapshot: Any) -> dict[str, Any]:
    """What a user sees of a StateSnapshot, without ids and timestamps."""
    return {
        "values": plain(snapshot.values),
        "next": snapshot.next,
        "step": snapshot.metadata["step"] if snapshot.metadata else None,
        "source": snapshot.metadata["source"] if snapshot.metadata else None,
        "has_parent": snapshot.parent_config is not None,
        "tasks": [
            (
                t.name,
                [plain(i.value) for i in t.interrupts],
                _task_state(t.state),
            )
            for t in snapshot.tasks
        ],
    }


def _task_state(state: Any) -> Any:
    """A subgraph task's state: its snapshot (subgraphs=True), or the namespace its config points to."""
    if state is None:
        return None
    if isinstance(state, dict):
        return state["configurable"]["checkpoint_ns"].split(":")[0]
    return snapshot_view(state)


def chat_scenario(graph: Any, thread: str, durability: str = "async") -> list[Any]:
    """Turns, interrupts and resumes, update_state, and time travel; returns everything observed."""
    cfg: RunnableConfig = {"configurable": {"thread_id": thread}}
    seen: list[Any] = []

    def invoke(value: Any, config: RunnableConfig) -> Any:
        return graph.invoke(value, config, durability=durability)

    seen.append(plain(invoke({"messages": [("user", "hi")]}, cfg)))
    seen.append(snapshot_view(graph.get_state(cfg)))
    seen.append(plain(invoke(Command(resume="yes"), cfg)))
    seen.append(plain(invoke({"messages": [("user", "again")]}, cfg)))
    seen.append(plain(invoke(Command(resume="ok"), cfg)))
    graph.update_state(cfg, {"messages": [AIMessage(content="edited by a human")]}, as_node="chat")
    seen.append(snapshot_view(graph.get_state(cfg)))
    history = list(graph.get_state_history(cfg))
    seen.append([snapshot_view(h) for h in history])
    # Time travel: resume the first interrupt differently, and branch from the first input.
    first_review = [h for h in history if h.next == ("review",)][-1]
    seen.append(plain(invoke(Command(resume="forked"), first_review.config)))
    first_input = [h for h in history if h.metadata["source"] == "input"][-1]
    seen.append(plain(invoke({"messages": [("user", "branch")]}, first_input.config)))
    seen.append(plain(invoke(Command(resume="branched"), cfg)))
    seen.append([snapshot_view(h) for h in graph.get_state_history(cfg)])
    seen.append([snapshot_view(h) for h in graph.get_state_history(cfg, limit=3, filter={"source": "loop"})])
    return seen


async def achat_scenario(graph: Any, thread: str, durability: str = "async") -> list[Any]:
    """The async twin of ``chat_scenario`` (ainvoke, aget_state, aget_state_history)."""
    cfg: RunnableConfig = {"configurable": {"thread_id": thread}}
    seen: list[Any] = []

    async def ainvoke(value: Any, config: RunnableConfig) -> Any:
        return await graph.ainvoke(value, config, durability=durability)

    seen.append(plain(await ainvoke({"messages": [("user", "hi")]}, cfg)))
    seen.append(snapshot_view(await graph.aget_state(cfg)))
    seen.append(plain(await ainvoke(Command(resume="yes"), cfg)))
    seen.append(plain(await ainvoke({"messages": [("user", "again")]}, cfg)))
    await graph.aupdate_state(cfg, {"messages": [AIMessage(content="edited")]}, as_node="chat")
    history = [h async for h in graph.aget_state_history(cfg)]
    seen.append([snapshot_view(h) for h in history])
    first_review = [h for h in history if h.next == ("review",)][-1]
    seen.append(plain(await ainvoke(Command(resume="forked"), first_review.config)))
    seen.append([snapshot_view(h) async for h in graph.aget_state_history(cfg)])
    return seen


def subgraph_scenario(graph: Any, thread: str) -> list[Any]:
    """An interrupt inside a subgraph (a child namespace), inspected with subgraphs=True, then resumed."""
    cfg: RunnableConfig = {"configurable": {"thread_id": thread}}
    seen: list[Any] = [plain(graph.invoke({"messages": [("user", "hi")]}, cfg))]
    seen.append(snapshot_view(graph.get_state(cfg, subgraphs=True)))
    seen.append(plain(graph.invoke(Command(resume="inner yes"), cfg)))
    seen.append([snapshot_view(h) for h in graph.get_state_history(cfg)])
    return seen


# --- fixtures


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'graphs.db'}"


@pytest.fixture
def store(db_url: str) -> Iterator[safepoint.Store]:
    opened = safepoint.open_store(db_url)
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, db_url: str) -> Iterator[safepoint.Store]:
    """A sync store on SQLite, then on PostgreSQL (a schema of its own)."""
    if request.param == "sqlite":
        opened = safepoint.open_store(db_url)
        yield opened
        opened.close()
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        opened = safepoint.open_store(dsn, schema=schema, max_size=2)
        yield opened
        opened.close()


# --- the same observations as LangGraph's reference saver


def test_chat_scenario_matches_reference_saver(any_store: safepoint.Store) -> None:
    """Turns, interrupts, update_state and time travel look exactly as with InMemorySaver."""
    expected = chat_scenario(build_chat_graph(InMemorySaver(), review=True), "t")
    assert chat_scenario(build_chat_graph(SafepointSaver(any_store), review=True), "t") == expected


def test_parallel_branches_match_reference_saver(store: safepoint.Store) -> None:
    """Parallel tasks writing at once (concurrent put_writes) give the reference saver's states.

    With durability="sync": under "async", LangGraph hands a save the live set
    of a join barrier and keeps filling it while earlier saves finish, so any
    saver slower than an in-memory dict (SqliteSaver too) may store it late.
    """
    expected = chat_scenario(build_chat_graph(InMemorySaver(), review=True, fan_out=True), "t", "sync")
    got = chat_scenario(build_chat_graph(SafepointSaver(store), review=True, fan_out=True), "t", "sync")
    assert got == expected


def test_subgraph_namespaces_match_reference_saver(store: safepoint.Store) -> None:
    """A subgraph's checkpoints (a child namespace) and its interrupt behave as with InMemorySaver."""
    expected = subgraph_scenario(build_parent_graph(InMemorySaver()), "t")
    assert subgraph_scenario(build_parent_graph(SafepointSaver(store)), "t") == expected
    namespaces = {
        run.labels["langgraph.checkpoint_ns"] for run in store.runs(labels={"langgraph.thread_id": "t"})
    }
    assert "" in namespaces
    assert any(ns.startswith("sub:") for ns in namespaces)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_async_graph_matches_reference_saver(backend: str, db_url: str) -> None:
    """ainvoke over an AsyncStore (SQLite, PostgreSQL) sees what InMemorySaver sees."""
    expected = asyncio.run(achat_scenario(build_chat_graph(InMemorySaver(), review=True), "t"))

    async def with_safepoint(url: str, **options: Any) -> list[Any]:
        async with SafepointSaver.afrom_url(url, **options) as saver:
            return await achat_scenario(build_chat_graph(saver, review=True), "t")

    if backend == "sqlite":
        assert asyncio.run(with_safepoint(db_url)) == expected
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        assert asyncio.run(with_safepoint(dsn, schema=schema, max_size=2)) == expected


def test_async_parallel_branches_match_reference_saver(db_url: str) -> None:
    """Parallel tasks under ainvoke over an AsyncStore give the reference saver's states."""

    def graph(saver: BaseCheckpointSaver[Any]) -> Any:
        return build_chat_graph(saver, review=True, fan_out=True)

    expected = asyncio.run(achat_scenario(graph(InMemorySaver()), "t", "sync"))

    async def with_safepoint() -> list[Any]:
        async with SafepointSaver.afrom_url(db_url) as saver:
            return await achat_scenario(graph(saver), "t", "sync")

    assert asyncio.run(with_safepoint()) == expected


def test_sync_calls_on_an_async_store(db_url: str) -> None:
    """Over an AsyncStore, sync methods work from other threads and are refused on the loop's own."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}

    async def scenario() -> None:
        async with SafepointSaver.afrom_url(db_url) as saver:
            graph = build_chat_graph(saver)
            await graph.ainvoke({"messages": [("user", "hi")]}, cfg)
            state = await asyncio.to_thread(graph.get_state, cfg)  # a sync call from a worker thread
            assert plain(state.values["messages"]) == [("human", "hi"), ("ai", "reply 0")]
            with pytest.raises(safepoint.InvalidArgument, match="async methods"):
                saver.get_tuple(cfg)

    asyncio.run(scenario())


# --- resuming elsewhere


def test_resume_in_a_new_saver_instance(db_url: str) -> None:
    """A thread started by one saver continues in a new saver on a freshly opened store."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with SafepointSaver.from_url(db_url) as saver:
        graph = build_chat_graph(saver, review=True)
        graph.invoke({"messages": [("user", "hi")]}, cfg)
    with SafepointSaver.from_url(db_url) as saver:
        graph = build_chat_graph(saver, review=True)
        assert graph.get_state(cfg).next == ("review",)
        done = graph.invoke(Command(resume="approved later"), cfg)
        assert done["approved"] == "approved later"
        result = graph.invoke({"messages": [("user", "more")]}, cfg)
    assert plain(result["messages"]) == [
        ("human", "hi"),
        ("ai", "reply 0"),
        ("human", "more"),
        ("ai", "reply 0"),
    ]


CHILD = """
import sys
sys.path[:0] = [{tests!r}, {src!r}]
from langgraph.types import Command
from safepoint.adapters.langgraph import SafepointSaver
from test_adapter_langgraph import build_chat_graph

with SafepointSaver.from_url({url!r}) as saver:
    graph = build_chat_graph(saver, review=True)
    cfg = {{"configurable": {{"thread_id": "t"}}}}
    assert graph.get_state(cfg).next == ("review",), graph.get_state(cfg).next
    out = graph.invoke(Command(resume="from the child"), cfg)
    print(out["approved"], len(out["messages"]))
"""


def test_resume_in_a_new_process(db_url: str, store: safepoint.Store) -> None:
    """An interrupted thread is resumed by another process; the run goes from waiting to done
    (the graph ran to its end)."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    build_chat_graph(SafepointSaver(store), review=True).invoke({"messages": [("user", "hi")]}, cfg)
    assert store.run("langgraph/t").status is Status.WAITING  # safepoint runs --status waiting lists it
    script = CHILD.format(tests=str(TESTS), src=str(SRC), url=db_url)
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["from", "the", "child", "2"]
    state = build_chat_graph(SafepointSaver(store), review=True).get_state(cfg)
    assert state.values["approved"] == "from the child"
    assert state.next == ()
    assert store.run("langgraph/t").status is Status.DONE


# --- storage


def payload_bytes(path: Path) -> int:
    """Bytes held in every column of every table of a SQLite file (indexes and free pages aside)."""
    with sqlite3.connect(path) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        total = 0
        for table in tables:
            columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
            for column in columns:
                (size,) = conn.execute(
                    f'SELECT coalesce(sum(length("{column}")), 0) FROM "{table}"'
                ).fetchone()
                total += size
    return total


def grow(graph: Any, turns: range, path: Path) -> dict[int, int]:
    """Run chat turns on one thread; the payload bytes after every tenth turn."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "long"}}
    sizes = {}
    for turn in turns:
        graph.invoke({"messages": [("user", f"question {turn:04d} " + "q" * 200)]}, cfg)
        if turn % 10 == 0:
            sizes[turn] = payload_bytes(path)
    return sizes


def test_storage_grows_linearly_with_turns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each turn stores about the same number of bytes (only its new messages), turn 10 or turn 60."""
    path = tmp_path / "safepoint.db"
    with SafepointSaver.from_url(f"sqlite:///{path}") as saver:
        graph = build_chat_graph(saver)
        sizes = grow(graph, range(1, 61), path)
        messages = graph.get_state({"configurable": {"thread_id": "long"}}).values["messages"]
    assert len(messages) == 120
    early = (sizes[20] - sizes[10]) / 10
    late = (sizes[60] - sizes[50]) / 10
    assert late < early * 1.15, (early, late)

    reference = tmp_path / "langgraph-sqlite.db"
    conn = sqlite3.connect(reference, check_same_thread=False)
    theirs = grow(build_chat_graph(SqliteSaver(conn)), range(1, 61), reference)
    conn.close()
    with capsys.disabled():
        print(f"\n  bytes stored after N turns    {'N':>4} {'safepoint':>12} {'SqliteSaver':>12}")
        for turn in (10, 20, 30, 40, 50, 60):
            print(f"  {'':28} {turn:>4} {sizes[turn]:>12,} {theirs[turn]:>12,}")
        print(
            f"  bytes per turn, turns 51-60: safepoint {late:,.0f}, "
            f"SqliteSaver {(theirs[60] - theirs[50]) / 10:,.0f}"
        )


def test_messages_are_stored_once(store: safepoint.Store) -> None:
    """The message log grows by the turn's messages; no step re-sends the conversation."""
    graph = build_chat_graph(SafepointSaver(store))
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    for turn in range(5):
        graph.invoke({"messages": [("user", f"turn {turn}")]}, cfg)
    counts = [info.message_count for info in store.history("langgraph/t")]
    assert counts == sorted(counts)  # a linear conversation never rewrites its log
    assert counts[-1] == 10
    stored = store.load("langgraph/t").messages
    assert [(m["role"], m["type"]) for m in stored] == [("user", "human"), ("assistant", "ai")] * 5
    assert stored[0]["content"] == "turn 0"  # readable: safepoint show lists role and content


def test_every_langchain_message_type_round_trips(store: safepoint.Store) -> None:
    """Each core LangChain message type goes into the log as a dict and comes back equal."""
    messages = [
        SystemMessage("be brief", id="s"),
        HumanMessage("hi", id="h", name="ada"),
        AIMessage(
            "calling",
            id="a",
            tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "c1"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            response_metadata={"model": "fake", "when": "now"},
        ),
        ToolMessage("42", tool_call_id="c1", id="t", artifact={"rows": [1, 2]}),
        ChatMessage("hmm", role="critic", id="c"),
        FunctionMessage("f", name="fn", id="f"),
        AIMessageChunk("partial", id="ac"),
        HumanMessageChunk("partial", id="hc"),
        HumanMessage([{"type": "text", "text": "parts"}, {"type": "image_url", "image_url": {"url": "x"}}]),
    ]
    saver = SafepointSaver(store)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": messages}
    config = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint, {}, {})
    found = saver.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["messages"] == messages
    assert [type(m) for m in found.checkpoint["channel_values"]["messages"]] == [type(m) for m in messages]
    assert len(store.load("langgraph/t").messages) == 9  # the log, not a typed blob


# --- crash between the two saves of a step, concurrent writers, early writes


def test_crash_before_the_index_save_loses_nothing(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints whose index entries were never flushed are still listed and found by id."""

    def crash(*_args: Any, **_kwargs: Any) -> Any:
        raise SystemExit("killed between the thread save and the index save")
        yield

    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with SafepointSaver.from_url(db_url) as saver:
        graph = build_chat_graph(saver)
        graph.invoke({"messages": [("user", "one")]}, cfg)
        monkeypatch.setattr(langgraph_steps, "flush_index", crash)
        with pytest.raises(SystemExit):
            graph.invoke({"messages": [("user", "two")]}, cfg)
    monkeypatch.undo()
    with SafepointSaver.from_url(db_url) as saver:
        graph = build_chat_graph(saver)
        history = list(graph.get_state_history(cfg))
        for snapshot in history:
            assert graph.get_state(snapshot.config).values == snapshot.values
        graph.invoke({"messages": [("user", "three")]}, cfg)
        assert len(list(graph.get_state_history(cfg))) > len(history)


def test_two_savers_writing_one_thread(db_url: str) -> None:
    """A saver whose cached head is stale rebuilds its step on the real head (Conflict, retry)."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with SafepointSaver.from_url(db_url) as first, SafepointSaver.from_url(db_url) as second:
        ids = []
        parent = cfg
        for saver in (first, second, first, second, first):
            checkpoint = empty_checkpoint()
            parent = saver.put(parent, checkpoint, {"source": "loop", "step": len(ids)}, {})
            ids.append(checkpoint["id"])
            saver.put_writes(parent, [("ch", len(ids))], task_id="task")
        for saver in (first, second):
            listed = list(saver.list(cfg))
            assert [t.checkpoint["id"] for t in listed] == ids[::-1]
            assert [t.pending_writes for t in listed] == [[("task", "ch", n)] for n in range(5, 0, -1)]


def test_writes_that_arrive_before_their_checkpoint(store: safepoint.Store) -> None:
    """put_writes for a checkpoint not stored yet are kept and attached when it arrives."""
    saver = SafepointSaver(store)
    base: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    early = {"configurable": {**base["configurable"], "checkpoint_id": checkpoint["id"]}}
    saver.put_writes(early, [("a", 1), ("b", 2)], task_id="t1")
    assert saver.get_tuple(base) is None
    saver.put(base, checkpoint, {"source": "loop", "step": 0}, {})
    saver.put_writes(early, [("c", 3)], task_id="t2")
    found = saver.get_tuple(early)
    assert found is not None
    assert found.pending_writes == [("t1", "a", 1), ("t1", "b", 2), ("t2", "c", 3)]
    listed = list(saver.list(base, filter={"source": "loop"}))  # its metadata is indexed too
    assert [t.checkpoint["id"] for t in listed] == [checkpoint["id"]]


def test_list_across_namespaces_and_threads(store: safepoint.Store) -> None:
    """list() without a namespace covers all of a thread's; list(None) covers every thread."""
    graph = build_parent_graph(SafepointSaver(store))
    for thread in ("a", "b"):
        graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": thread}})
    saver = SafepointSaver(store)
    root = list(saver.list({"configurable": {"thread_id": "a", "checkpoint_ns": ""}}))
    every_ns = list(saver.list({"configurable": {"thread_id": "a"}}))
    everything = list(saver.list(None))
    assert len(root) < len(every_ns) < len(everything)
    assert {t.config["configurable"]["thread_id"] for t in everything} == {"a", "b"}
    ids = [t.checkpoint["id"] for t in everything]
    assert ids == sorted(ids, reverse=True)
    saver.delete_thread("a")
    assert store.runs(labels={"langgraph.thread_id": "a"}).items == []
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"b"}


# --- what may be stored, and what may be revived


@dataclasses.dataclass
class Ticket:
    """A user type in graph state: storable only once allowed."""

    number: int
    title: str


REVIVED: list[str] = []


class Boom:
    """A type whose construction a tampered checkpoint must never trigger."""

    def __init__(self, *args: Any) -> None:
        REVIVED.append("Boom")

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch revived-by-pickle",))


def put_value(saver: SafepointSaver, value: Any) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"ticket": value}
    checkpoint["channel_versions"] = {"ticket": 1}
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    return saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"ticket": 1})


def test_a_type_nobody_allowed_is_refused_before_any_write(store: safepoint.Store) -> None:
    """A value of a type outside the allow-list is refused at put, naming the type; nothing is stored."""
    with pytest.raises(NotJSONCompatible, match=r"test_adapter_langgraph\.Ticket.*allowed_types"):
        put_value(SafepointSaver(store), Ticket(7, "printer on fire"))
    assert store.runs(labels={"langgraph.thread_id": "t"}).items == []


def test_allowed_types_round_trip(store: safepoint.Store) -> None:
    """A type named in allowed_types is stored and comes back equal (as do LangGraph's safe types)."""
    saver = SafepointSaver(store, allowed_types=[Ticket])
    config = put_value(saver, {"ticket": Ticket(7, "printer on fire"), "tags": {"urgent"}})
    found = saver.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["ticket"] == {
        "ticket": Ticket(7, "printer on fire"),
        "tags": {"urgent"},
    }


def tamper(store: safepoint.Store, payload: dict[str, Any]) -> None:
    """Save, through the store (a valid digest), a step whose channel value is ``payload``."""
    head = store.load("langgraph/t")
    forged = head.next()
    forged.state["values"]["ticket"] = payload
    forged.state["latest"] = [forged.state["id"], forged.step]
    store.save(forged)


def typed(kind: str, data: bytes) -> dict[str, Any]:
    return {"$typed": [kind, base64.b64encode(data).decode()]}


@pytest.mark.parametrize(
    "payload",
    [
        # msgpack ext 0 (construct with one argument) naming a class nobody allowed
        {"$typed": ["msgpack", {"$ext": [0, ["test_adapter_langgraph", "Boom", 1]]}]},
        # ... or a function that runs a command, deep inside a harmless-looking value
        {"$typed": ["msgpack", {"rows": [1, {"$ext": [1, ["os", "system", ["touch revived"]]]}]}]},
        # ext 5 (a pydantic model) naming the same class
        {"$typed": ["msgpack", {"$ext": [5, ["test_adapter_langgraph", "Boom", {}, "x"]]}]},
        typed("pickle", pickle.dumps(Boom())),
        typed("json", b'{"lc": 2, "type": "constructor", "id": ["test_adapter_langgraph", "Boom"]}'),
        {"$typed": ["msgpack", {"$ext": ["not a code", []]}]},  # malformed
    ],
    ids=["msgpack-class", "msgpack-os-system", "msgpack-pydantic", "pickle", "json-constructor", "malformed"],
)
def test_a_stored_payload_naming_an_arbitrary_type_is_refused(
    store: safepoint.Store, payload: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A payload naming a module and class fails to load (CorruptCheckpoint); nothing is imported or run."""
    workdir = tmp_path / "cwd"  # where an executed "touch" would leave a file
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    REVIVED.clear()
    saver = SafepointSaver(store)
    put_value(saver, "harmless")
    tamper(store, payload)
    with pytest.raises(CorruptCheckpoint, match="refused to load") as refused:
        saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert "harmless" not in str(refused.value)
    assert REVIVED == []
    assert list(workdir.iterdir()) == []


def test_secrets_inside_typed_values_are_scrubbed(db_url: str, tmp_path: Path) -> None:
    """A token in a value LangGraph serializes (the graph input's tuples) is redacted like any other."""
    token = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with SafepointSaver.from_url(db_url) as saver:
        graph = build_chat_graph(saver)
        graph.invoke({"messages": [("user", f"my key is {token}")]}, cfg)
        first_input = list(graph.get_state_history(cfg))[-1]
        assert first_input.values == {"messages": [], "notes": []}
        tuple_ = saver.get_tuple(first_input.config)
        assert tuple_ is not None
        assert tuple_.checkpoint["channel_values"]["__start__"] == {
            "messages": [["user", "my key is [REDACTED:openai-api-key]"]]
        }
        assert graph.get_state(cfg).values["messages"][0].content == "my key is [REDACTED:openai-api-key]"
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("graphs.db"))
    assert token.encode() not in stored


# --- packaging


def test_importing_safepoint_imports_no_framework() -> None:
    """import safepoint (and safepoint.adapters) loads neither LangGraph nor the Agents SDK."""
    code = (
        "import sys, safepoint, safepoint.adapters\n"
        "loaded = [m for m in ('langgraph', 'langchain_core', 'agents', 'openai') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=60, env={**os.environ, "PYTHONPATH": str(SRC)}
    )


def test_a_config_without_thread_id_is_refused(store: safepoint.Store) -> None:
    """A config lacking thread_id is an InvalidArgument (a ValueError), not a KeyError."""
    with pytest.raises(safepoint.InvalidArgument, match="thread_id"):
        SafepointSaver(store).get_tuple({"configurable": {}})


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/langgraph_example.py (the code docs/adapters.md shows) runs offline as documented."""
    lines = run_example("langgraph", tmp_path)
    assert lines[:3] == ["waiting for: ('review',)", "run status: waiting", "approved: True | messages: 2"]
    assert lines[3] == "branch: ['Is it under warranty?', 'Draft reply #3.']"


def test_the_docs_quote_the_examples_verbatim() -> None:
    """Each code block of docs/adapters.md marked "# from examples/…" is a verbatim excerpt of that file."""
    docs = (TESTS.parent / "docs" / "adapters.md").read_text()
    blocks = [b.split("```", 1)[0] for b in docs.split("```python\n")[1:]]
    quoted = [b for b in blocks if b.startswith("# from examples/")]
    frameworks = ("langgraph", "openai_agents", "pydantic_ai", "google_adk", "agent_framework")
    # Every framework's section quotes its example (each run by the suite), and nothing else.
    shown = {b.split("\n", 1)[0] for b in quoted}
    assert shown == {f"# from examples/{name}_example.py" for name in frameworks}
    for block in quoted:
        source, body = block.split("\n", 1)
        assert body in (TESTS.parent / source.removeprefix("# from ")).read_text(), source
