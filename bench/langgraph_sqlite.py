"""A real compiled LangGraph graph on SQLite: LangGraph's ``SqliteSaver`` or safepoint's ``SafepointSaver``.

Each agent step is one ``graph.invoke`` on the same thread (``lg_graph``:
``add_messages``, one node calling an offline fake chat model). Nothing is
tuned. ``SqliteSaver`` gets a plain file connection
(``check_same_thread=False``, as LangGraph's docs show) and sets its own
pragmas; ``SafepointSaver`` gets ``safepoint.open_store("sqlite:///…")`` at its
defaults (scrubbing on, large values to files beside the database). Invoke
uses the default durability mode.

Besides the time per ``invoke``, the savers' ``get_tuple``/``put``/``put_writes``
are timed (``lg_graph.Timed``), and after the steps in ``probes`` the bytes
stored so far are read from a separate read-only connection: the database
pages in use (page_count - freelist_count, times page_size, WAL content
included) plus the blob files.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_workload import AgentStep
from common import (
    LoadProbe,
    StatementCounter,
    StoreRun,
    dir_bytes,
    disk_usage,
    fresh_dir,
    is_select,
    pages_in_use,
    time_calls,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from lg_graph import Timed, build_graph
from raw_sqlite import RawWriter

import safepoint
from safepoint.adapters.langgraph import SafepointSaver

THREAD_ID = "bench-thread"
KINDS = {"sqlite": "SqliteSaver", "safepoint": "SafepointSaver"}


class TimedSqliteSaver(Timed, SqliteSaver):
    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self._timing_setup()


class TimedSafepointSaver(Timed, SafepointSaver):
    def __init__(self, store: safepoint.Store) -> None:
        super().__init__(store)
        self._timing_setup()


class _Contender:
    """One saver on its own file, plus what the probes need (a way to count statements)."""

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self._closers: list[Callable[[], None]] = []
        self.counter = StatementCounter()
        if kind == "sqlite":
            self.db_path = directory / "checkpoints.sqlite"
            conn = sqlite3.connect(self.db_path, check_same_thread=False)
            self.saver: Any = TimedSqliteSaver(conn)
            self._conn = conn
            self.blob_dir: Path | None = None
            self._closers.append(conn.close)
        else:
            self.db_path = directory / "state.db"
            store = safepoint.open_store(f"sqlite:///{self.db_path}")
            self.saver = TimedSafepointSaver(store)
            self.blob_dir = self.db_path.with_name(self.db_path.name + ".blobs")
            # SQLite's trace callback expands each statement with its values (a
            # 50 KB message becomes 100 KB of hex), so the timed store has none; a
            # second store on the same file, traced, counts the probes' statements.
            probe_store = safepoint.open_store(f"sqlite:///{self.db_path}", trace=self.counter)
            self._probe_saver = SafepointSaver(probe_store)
            self._closers += [probe_store.close, store.close]

    def counting(self, action: Callable[[Any], None]) -> list[str]:
        """Run ``action(saver)`` once on a saver whose statements are counted."""
        if self.kind == "sqlite":
            self._conn.set_trace_callback(self.counter)
            try:
                return self.counter.count(lambda: action(self.saver))
            finally:
                self._conn.set_trace_callback(None)
        return self.counter.count(lambda: action(self._probe_saver))

    def stored_bytes(self) -> int:
        return pages_in_use(self.db_path) + (dir_bytes(self.blob_dir) if self.blob_dir else 0)

    def close(self) -> None:
        for close in self._closers:
            close()


def run(
    workload: Any,
    base: Path,
    label: str,
    probes: tuple[int, ...],
    kind: str = "sqlite",
    *,
    load_probes: bool = True,
) -> StoreRun:
    """``workload.steps`` as one ``invoke`` each; loads and bytes probed after ``probes``."""
    directory = fresh_dir(base, f"langgraph-{kind}-{label}")
    contender = _Contender(kind, directory)
    saver = contender.saver
    raw = RawWriter(directory / "raw.db")
    steps: Sequence[AgentStep] = workload.steps
    after_step = raw.interleave(len(steps))
    current: list[AgentStep] = []
    graph = build_graph(saver, current)
    config: RunnableConfig = {"configurable": {"thread_id": THREAD_ID}}

    seconds: list[float] = []
    per_kind: dict[str, list[float]] = {"put": [], "put_writes": [], "get_tuple": []}
    puts = writes = late = 0
    shapes: set[tuple[int, int]] = set()  # (puts, put_writes) seen per step
    state_loads: list[LoadProbe] = []
    tuple_loads: list[LoadProbe] = []
    probe_bytes: dict[int, int] = {}
    for agent_step in steps:
        current.append(agent_step)
        start = time.perf_counter()
        graph.invoke({"messages": [agent_step.incoming]}, config)
        seconds.append(time.perf_counter() - start)
        late += saver.in_flight > 0
        timings = saver.take()
        for name, series in per_kind.items():
            series.append(sum(t[1] for t in timings if t[0] == name))
        step_puts = sum(t[0] == "put" for t in timings)
        step_writes = sum(t[0] == "put_writes" for t in timings)
        shapes.add((step_puts, step_writes))
        puts += step_puts
        writes += step_writes
        if agent_step.step in probes:
            probe_bytes[agent_step.step] = contender.stored_bytes()
            if load_probes:
                state_loads.append(_probe_state(contender, graph, current, config, agent_step.step))
                tuple_loads.append(_probe_tuple(contender, config, agent_step.step))
            saver.take()  # the probes' own get_tuple calls
        current.clear()
        after_step(agent_step.step)

    facts = _settings(contender)
    facts["checkpoint puts per step"] = f"{puts / len(steps):g}"
    facts["put_writes calls per step"] = f"{writes / len(steps):g}"
    facts["(puts, put_writes) per step, all distinct values"] = ", ".join(map(str, sorted(shapes)))
    facts["steps with a write still running when invoke returned"] = str(late)
    contender.close()
    raw_seconds = raw.close()
    disk = disk_usage(contender.db_path, contender.blob_dir)
    shutil.rmtree(directory)
    loads = {}
    if load_probes and probes:
        loads = {"graph.get_state(config)": state_loads, "saver.get_tuple(config)": tuple_loads}
    return StoreRun(
        name=KINDS[kind],
        step_seconds=seconds,
        loads=loads,
        disk=disk,
        raw_commit_seconds=raw_seconds,
        extra_seconds=per_kind,
        facts=facts,
        probe_bytes=probe_bytes,
    )


def _probe_state(
    contender: _Contender, graph: Any, current: list[AgentStep], config: RunnableConfig, step: int
) -> LoadProbe:
    def load(on: Any) -> None:
        snapshot = on.get_state(config)
        if len(snapshot.values["messages"]) != 2 * step:
            raise AssertionError(f"get_state after step {step} is not step {step}")

    def counted(saver: BaseCheckpointSaver[Any]) -> None:
        load(graph if saver is contender.saver else build_graph(saver, current))

    return _probe(contender, lambda: load(graph), counted, step)


def _probe_tuple(contender: _Contender, config: RunnableConfig, step: int) -> LoadProbe:
    def load(saver: BaseCheckpointSaver[Any]) -> None:
        found = saver.get_tuple(config)
        if found is None:
            raise AssertionError(f"get_tuple after step {step} found nothing")

    return _probe(contender, lambda: load(contender.saver), load, step)


def _probe(
    contender: _Contender,
    timed: Callable[[], None],
    counted: Callable[[BaseCheckpointSaver[Any]], None],
    step: int,
) -> LoadProbe:
    statements = contender.counting(counted)
    return LoadProbe(
        step=step,
        seconds=time_calls(timed),
        statements=len(statements),
        selects=sum(is_select(sql) for sql in statements),
    )


def _settings(contender: _Contender) -> dict[str, str]:
    names = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}
    with contextlib.closing(sqlite3.connect(f"file:{contender.db_path}?mode=ro", uri=True)) as conn:
        journal = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        page_size = str(conn.execute("PRAGMA page_size").fetchone()[0])
    if contender.kind == "sqlite":
        sync = str(contender.saver.conn.execute("PRAGMA synchronous").fetchone()[0])
        synchronous = names.get(sync, sync) + " (not set by SqliteSaver: SQLite's default)"
        serializer = type(contender.saver.serde).__name__
    else:
        execute = contender.saver.store.driver.execute_raw
        sync = str(execute("PRAGMA synchronous")[0][0])
        synchronous = names.get(sync, sync)
        serializer = f"{type(contender.saver.serde).__name__} (locked down by SafepointSaver)"
    return {
        "journal_mode": journal,
        "synchronous": synchronous,
        "page_size": page_size,
        "durability": "invoke default ('async')",
        "serializer": serializer,
    }
