"""A node retried by LangGraph's ``RetryPolicy`` under the journal: each attempt asks again, and a
resumed step replays the attempts' responses in the order they came.

A real ``StateGraph`` whose ``agent`` node asks the scripted model, then fails
on its first attempt (a transient error its ``RetryPolicy`` retries); the
second attempt's call is a new call under its own key. The process then
"dies" (a ``BaseException`` after the second attempt's call): a fresh saver
and graph resume the step, and both attempts' responses replay — nothing
reaches the provider again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from helpers import langgraph_journal_app as app
from helpers.langgraph_journal_app import ScriptedChat, State
from safepoint import open_store

THREAD = {"configurable": {"thread_id": "retry"}}


class Transient(Exception):
    """What the node's RetryPolicy retries."""


class Crash(BaseException):
    """The process dies here."""


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    app.PROVIDER.clear()
    app.LEDGER.clear()


def graph_on(store: Any, *, crash: bool) -> Any:
    chat = ScriptedChat().bind_tools(app.TOOLS)
    attempts = [0]

    def agent(state: State) -> dict[str, Any]:
        attempts[0] += 1
        reply = chat.invoke(state["messages"])
        if attempts[0] == 1:
            raise Transient  # the first attempt fails after its call
        if crash:
            raise Crash  # the second attempt's call is recorded, then the process dies
        return {"messages": [reply]}

    graph = StateGraph(State)
    retry = RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False)
    graph.add_node("agent", agent, retry_policy=retry)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=app.saver_for(store, journal=True))


def test_a_retry_asks_again_and_a_resume_replays_every_attempt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store, pytest.raises(Crash):
        graph_on(store, crash=True).invoke({"messages": [HumanMessage("hello")]}, THREAD)
    assert len(app.PROVIDER) == 2  # each attempt asked the provider
    with open_store(url) as store:
        graph = graph_on(store, crash=False)
        graph.invoke(None, THREAD)
        keys = [entry.key for entry in store.recorded_calls("langgraph/retry")]
        seen = graph.checkpointer.journal.seen
    assert len(app.PROVIDER) == 2  # the resumed step asked nothing: both attempts replayed
    assert [key.rsplit("/", 1)[1] for key in keys] == ["model#0", "model#1"]
    assert seen.replayed == 2
    assert seen.called == 0
