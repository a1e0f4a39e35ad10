"""A whole LangGraph turn with and without the call journal, on SQLite (issue 32).

The graph is the smallest agent with tools: ``agent`` (a scripted offline
chat model, LangChain's ``GenericFakeChatModel``) → ``tools`` (a
``ToolNode`` running two tools in parallel) → ``agent`` again, which
answers. Each turn is one ``graph.invoke`` with a ~200-byte user message on
one thread, at LangGraph's default durability: two model calls (a ~500-byte
reply carrying two tool calls, then a ~4 KB answer) and two tool calls
(each returning ~2 KB): ``lookup``, idempotent, and ``charge``, marked
``non_idempotent`` (an intent before its effect). Two graphs take turns,
one turn each, on files of their own, so a change in the machine's load
falls on both: the same graph on ``SafepointSaver(store)`` (no journal),
and on ``SafepointSaver(store, journal=True)`` with
``ToolNode(tools, **journal_tools())`` — the lines a user changes to turn
the journal on.

The journal is offered by ``safepoint.adapters.langgraph`` once a
``SafepointSaver`` takes ``journal=``; until then ``run`` returns why it
cannot measure, and the report says so.
"""

from __future__ import annotations

import inspect
import itertools
import random
import shutil
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from workloads.agent import random_text, random_word

import safepoint
from safepoint.adapters.langgraph import SafepointSaver
from safepoint.harness.actions import Reconcile

TURNS = 100
EARLY, LATE = slice(0, 10), slice(-10, None)  # the first and the last ten counted turns
WARM_TURNS = 5  # not counted: the first turns open files and fill caches
USER_BYTES, FIRST_REPLY_BYTES, ANSWER_BYTES, TOOL_BYTES = 200, 500, 4096, 2048


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]


@dataclass(slots=True)
class TurnResult:
    """Per-turn wall and CPU seconds of each graph, or why the journal's row is missing."""

    turns: int = 0
    wall: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    entries_per_turn: float = 0.0  # journal entries a turn recorded (rows of safepoint_calls)
    tools: str = ""  # which ToolNode the journaled graph used
    skipped: str | None = None

    def median_ms(self, name: str, kind: str = "wall", part: slice = slice(None)) -> float:
        """The median of ``name``'s turns (``part`` of them: ``EARLY``, ``LATE``), in ms."""
        return statistics.median((self.wall if kind == "wall" else self.cpu)[name][part]) * 1e3


def journal_support() -> tuple[Callable[[Any], Any], Callable[[list[Any]], Any], str] | str:
    """How to build the journaled saver and ToolNode on this tree, or why it cannot be done."""
    from safepoint.adapters import langgraph as adapter  # noqa: PLC0415 - read when asked

    if "journal" not in inspect.signature(adapter.SafepointSaver).parameters:
        return (
            "this tree's safepoint.adapters.langgraph has no journal yet (SafepointSaver takes no "
            "`journal=`): the row is measured once the LangGraph journal is merged"
        )
    on: dict[str, Any] = {"journal": True}  # a keyword this tree's SafepointSaver may not declare yet
    saver = lambda store: adapter.SafepointSaver(store, **on)  # noqa: E731
    wrappers = getattr(adapter, "journal_tools", None)
    if wrappers is not None:
        return saver, lambda tools: ToolNode(tools, **wrappers()), "`ToolNode(tools, **journal_tools())`"
    return (
        saver,
        ToolNode,
        "LangGraph's own `ToolNode` (this tree has no `journal_tools`: tools not recorded)",
    )


def _mark(tool_: Any) -> Any:
    """``charge`` as a non-idempotent tool (an intent before its effect) where the adapter can say so;
    the mark does nothing on a graph whose saver does not journal."""
    from safepoint.adapters import langgraph as adapter  # noqa: PLC0415

    mark = getattr(adapter, "non_idempotent", None)
    return tool_ if mark is None else mark(tool_, reconcile=Reconcile.rerun())


def _texts() -> dict[str, str]:
    rng = random.Random(3232)
    words = [random_word(rng) for _ in range(2048)]
    sizes = {"user": USER_BYTES, "first": FIRST_REPLY_BYTES, "answer": ANSWER_BYTES, "tool": TOOL_BYTES}
    return {name: random_text(rng, words, size) for name, size in sizes.items()}


def _graph(checkpointer: Any, tool_node: Callable[[list[Any]], Any], texts: dict[str, str]) -> Any:
    def replies() -> Iterator[AIMessage]:
        for turn in itertools.count():
            calls = [
                {"name": "lookup", "args": {"query": f"order {turn}"}, "id": f"call_{turn}_a"},
                {"name": "charge", "args": {"amount": turn}, "id": f"call_{turn}_b"},
            ]
            yield AIMessage(content=texts["first"], tool_calls=calls)
            yield AIMessage(content=texts["answer"])

    model = GenericFakeChatModel(messages=replies())

    @tool
    def lookup(query: str) -> str:
        """Look an order up."""
        return texts["tool"]

    @tool
    def charge(amount: int) -> str:
        """Charge the customer's card."""
        return texts["tool"]

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: State) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tool_node([lookup, _mark(charge)]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def run(workdir: Path, turns: int = TURNS) -> TurnResult:
    """``turns`` turns of each graph, alternating; per-turn wall and CPU (``time.process_time``:
    every thread, so the saver's background writes count)."""
    support = journal_support()
    if isinstance(support, str):
        return TurnResult(skipped=support)
    journaled_saver, journaled_tools, tools_note = support
    folder = workdir / "journal-turn"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    texts = _texts()
    stores = {name: safepoint.open_store(f"sqlite:///{folder / name}.db") for name in ("without", "with")}
    graphs = {
        "without": _graph(SafepointSaver(stores["without"]), ToolNode, texts),
        "with": _graph(journaled_saver(stores["with"]), journaled_tools, texts),
    }
    result = TurnResult(turns=turns, tools=tools_note)
    result.wall = {name: [] for name in graphs}
    result.cpu = {name: [] for name in graphs}
    config = {"configurable": {"thread_id": "bench-journal"}}
    try:
        for turn in range(WARM_TURNS + turns):
            order = list(graphs) if turn % 2 == 0 else list(reversed(graphs))
            for name in order:
                message = {"role": "user", "content": f"{turn}: {texts['user']}"}
                start, cpu = time.perf_counter(), time.process_time()
                graphs[name].invoke({"messages": [message]}, config)
                wall, used = time.perf_counter() - start, time.process_time() - cpu
                if turn >= WARM_TURNS:
                    result.wall[name].append(wall)
                    result.cpu[name].append(used)
    finally:
        for store in stores.values():
            store.close()
    with sqlite3.connect(folder / "with.db") as conn:
        (entries,) = conn.execute("SELECT count(*) FROM safepoint_calls").fetchone()
    result.entries_per_turn = entries / (WARM_TURNS + turns)
    shutil.rmtree(folder, ignore_errors=True)
    return result
