"""LangGraph's SqliteSaver under a real compiled StateGraph, at LangGraph's defaults.

Each agent step is one ``graph.invoke`` on the same thread: the input carries
the user/tool message, the single node ``agent`` returns the assistant reply
plus the counters, cursor and state. Nothing is tuned: the saver gets a plain
file connection (``check_same_thread=False``, as LangGraph's docs show) and
sets its own pragmas; invoke uses the default durability mode.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from agent_workload import AgentStep, Workload
from common import LoadProbe, StatementCounter, StoreRun, disk_usage, fresh_dir, is_select, time_calls
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from raw_sqlite import RawWriter

THREAD_ID = "bench-thread"


class AgentState(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    counters: dict[str, Any]
    cursor: dict[str, Any]
    state: dict[str, Any]


class TimedSqliteSaver(SqliteSaver):
    """SqliteSaver whose ``put`` and ``put_writes`` record how long they take."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.timings: list[tuple[str, float]] = []  # (kind, seconds)
        self.in_flight = 0  # writes started and not yet returned
        self._timing_lock = threading.Lock()

    def _start(self) -> float:
        with self._timing_lock:
            self.in_flight += 1
        return time.perf_counter()

    def _record(self, kind: str, start: float) -> None:
        seconds = time.perf_counter() - start
        with self._timing_lock:
            self.in_flight -= 1
            self.timings.append((kind, seconds))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        start = self._start()
        try:
            return super().put(config, checkpoint, metadata, new_versions)
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
            super().put_writes(config, writes, task_id, task_path)
        finally:
            self._record("put_writes", start)

    def take(self) -> list[tuple[str, float]]:
        with self._timing_lock:
            out, self.timings = self.timings, []
        return out


def run(workload: Workload, base: Path, label: str, probes: tuple[int, ...]) -> StoreRun:
    directory = fresh_dir(base, f"langgraph-{label}")
    db_path = directory / "checkpoints.sqlite"
    conn = sqlite3.connect(db_path, check_same_thread=False)
    saver = TimedSqliteSaver(conn)
    raw = RawWriter(directory / "raw.db")
    after_step = raw.interleave(len(workload.steps))
    current: list[AgentStep] = []

    def agent(state: AgentState) -> dict[str, Any]:
        step = current[-1]
        return {
            "messages": [step.reply],
            "counters": step.counters,
            "cursor": step.cursor,
            "state": step.state,
        }

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": THREAD_ID}}

    seconds: list[float] = []
    put_seconds: list[float] = []
    writes_seconds: list[float] = []
    puts = writes = late = 0
    shapes: set[tuple[int, int]] = set()  # (puts, put_writes) seen per step
    state_loads: list[LoadProbe] = []
    tuple_loads: list[LoadProbe] = []
    for agent_step in workload.steps:
        current.append(agent_step)
        start = time.perf_counter()
        graph.invoke({"messages": [agent_step.incoming]}, config)
        seconds.append(time.perf_counter() - start)
        late += saver.in_flight > 0
        timings = saver.take()
        put_seconds.append(sum(t[1] for t in timings if t[0] == "put"))
        writes_seconds.append(sum(t[1] for t in timings if t[0] == "put_writes"))
        step_puts = sum(t[0] == "put" for t in timings)
        step_writes = len(timings) - step_puts
        shapes.add((step_puts, step_writes))
        puts += step_puts
        writes += step_writes
        if agent_step.step in probes:
            state_loads.append(_probe_state(graph, config, conn, agent_step.step))
            tuple_loads.append(_probe_tuple(saver, config, conn, agent_step.step))
        current.clear()
        after_step(agent_step.step)

    facts = _settings(saver)
    steps = len(workload.steps)
    facts["checkpoint puts per step"] = f"{puts / steps:g}"
    facts["put_writes calls per step"] = f"{writes / steps:g}"
    facts["(puts, put_writes) per step, all distinct values"] = ", ".join(map(str, sorted(shapes)))
    facts["steps with a write still running when invoke returned"] = str(late)
    conn.close()
    raw_seconds = raw.close()
    disk = disk_usage(db_path)
    shutil.rmtree(directory)
    return StoreRun(
        name="langgraph",
        step_seconds=seconds,
        loads={"graph.get_state(config)": state_loads, "saver.get_tuple(config)": tuple_loads},
        disk=disk,
        raw_commit_seconds=raw_seconds,
        extra_seconds={"put": put_seconds, "put_writes": writes_seconds},
        facts=facts,
    )


def _probe_state(graph: Any, config: RunnableConfig, conn: sqlite3.Connection, step: int) -> LoadProbe:
    def load() -> None:
        snapshot = graph.get_state(config)
        if len(snapshot.values["messages"]) != 2 * step:
            raise AssertionError(f"get_state after step {step} is not step {step}")

    return _probe(load, conn, step)


def _probe_tuple(
    saver: SqliteSaver, config: RunnableConfig, conn: sqlite3.Connection, step: int
) -> LoadProbe:
    def load() -> None:
        found = saver.get_tuple(config)
        if found is None or len(found.checkpoint["channel_values"]["messages"]) != 2 * step:
            raise AssertionError(f"get_tuple after step {step} is not step {step}")

    return _probe(load, conn, step)


def _probe(load: Callable[[], None], conn: sqlite3.Connection, step: int) -> LoadProbe:
    # Trace only while counting: SQLite's trace callback expands each
    # statement with its parameters, which would slow the timed writes.
    counter = StatementCounter()
    conn.set_trace_callback(counter)
    try:
        statements = counter.count(load)
    finally:
        conn.set_trace_callback(None)
    return LoadProbe(
        step=step,
        seconds=time_calls(load),
        statements=len(statements),
        selects=sum(is_select(sql) for sql in statements),
    )


def _settings(saver: SqliteSaver) -> dict[str, str]:
    conn = saver.conn
    names = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}
    sync = str(conn.execute("PRAGMA synchronous").fetchone()[0])
    return {
        "journal_mode": str(conn.execute("PRAGMA journal_mode").fetchone()[0]),
        "synchronous": names.get(sync, sync) + " (not set by SqliteSaver: SQLite's default)",
        "page_size": str(conn.execute("PRAGMA page_size").fetchone()[0]),
        "durability": "invoke default ('async')",
        "serializer": type(saver.serde).__name__,
    }
