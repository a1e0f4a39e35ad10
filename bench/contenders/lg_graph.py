"""The LangGraph graph every LangGraph benchmark runs, whatever the checkpointer.

One compiled ``StateGraph`` with ``messages: Annotated[list, add_messages]``
plus ``counters``, ``cursor`` and ``state``, and one node, ``agent``: it calls
an offline fake chat model (LangChain's ``GenericFakeChatModel``) with the
conversation so far and returns its reply with the step's counters, cursor
and state. The model answers with the workload's assistant message for the
step being run (same text, same ``id``), so every checkpointer sees exactly
the same state. Each agent step is one ``graph.invoke`` carrying the step's
user or tool message, on one ``thread_id``, at LangGraph's default durability.

``Timed`` is a mixin for any ``BaseCheckpointSaver``: it records how long
``get_tuple``, ``put`` and ``put_writes`` take, the part of a turn that is the
checkpointer's, both as wall time and as the CPU time of the calling thread
(``time.thread_time``). ``put``/``put_writes`` run on LangGraph's background
thread, overlapping with the rest of ``invoke``: their wall time includes
waiting for the GIL while the graph's own thread works, their CPU time does
not.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from workloads.agent import AgentStep


class AgentState(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    counters: dict[str, Any]
    cursor: dict[str, Any]
    state: dict[str, Any]


def fake_model(current: list[AgentStep]) -> GenericFakeChatModel:
    """A chat model that answers each call with the reply of the step in ``current[-1]``."""

    def replies() -> Iterator[AIMessage]:
        for _ in itertools.count():
            reply = current[-1].reply
            yield AIMessage(content=reply["content"], id=reply["id"])

    return GenericFakeChatModel(messages=replies())


def build_graph(checkpointer: BaseCheckpointSaver[Any], current: list[AgentStep]) -> Any:
    """The compiled graph; put the step being run in ``current`` before each ``invoke``."""
    model = fake_model(current)

    def agent(state: AgentState) -> dict[str, Any]:
        step = current[-1]
        return {
            "messages": [model.invoke(state["messages"])],
            "counters": step.counters,
            "cursor": step.cursor,
            "state": step.state,
        }

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=checkpointer)


class Timed:
    """Mixin (put it before the saver class): ``get_tuple``, ``put`` and ``put_writes`` timed."""

    def _timing_setup(self) -> None:
        self.timings: list[tuple[str, float, float]] = []  # (kind, wall seconds, thread CPU seconds)
        self.in_flight = 0  # writes started and not yet returned
        self._timing_lock = threading.Lock()

    def _start(self) -> tuple[float, float]:
        with self._timing_lock:
            self.in_flight += 1
        return time.perf_counter(), time.thread_time()

    def _record(self, kind: str, start: tuple[float, float]) -> None:
        cpu = time.thread_time() - start[1]
        seconds = time.perf_counter() - start[0]
        with self._timing_lock:
            self.in_flight -= 1
            self.timings.append((kind, seconds, cpu))

    def get_tuple(self, config: RunnableConfig) -> Any:
        start = self._start()
        try:
            return super().get_tuple(config)  # type: ignore[misc]
        finally:
            self._record("get_tuple", start)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        start = self._start()
        try:
            return super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc,no-any-return]
        finally:
            self._record("put", start)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        start = self._start()
        try:
            super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        finally:
            self._record("put_writes", start)

    def take(self) -> list[tuple[str, float, float]]:
        with self._timing_lock:
            out, self.timings = self.timings, []
        return out
