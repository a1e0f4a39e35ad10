"""A real compiled LangGraph graph on SQLite: LangGraph's ``SqliteSaver`` or safepoint's ``SafepointSaver``
(or the floor, ``lg_floor.LatestOnlySaver``, which shows LangGraph's own per-turn work).

Each agent step is one ``graph.invoke`` on the same thread (``lg_graph``:
``add_messages``, one node calling an offline fake chat model). Nothing is
tuned. ``SqliteSaver`` gets a plain file connection
(``check_same_thread=False``, as LangGraph's docs show) and sets its own
pragmas; ``SafepointSaver`` gets ``safepoint.open_store("sqlite:///…")`` at its
defaults (scrubbing on, large values to files beside the database). Invoke
uses the default durability mode.

Besides the time per ``invoke`` (wall, and the CPU time of the thread that
called it), the savers' ``get_tuple``/``put``/``put_writes`` are timed, wall
and thread CPU (``lg_graph.Timed``), and after the steps in ``probes`` the bytes
stored so far are read from a separate read-only connection: the database
pages in use (page_count - freelist_count, times page_size, WAL content
included) plus the blob files. ``run`` runs one saver through every turn;
``run_alternating`` runs several through the same turns in alternating blocks,
so that SafepointSaver and the floor meet the same machine load.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import (
    DiskUsage,
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
from contenders.lg_floor import LatestOnlySaver
from contenders.lg_graph import Timed, build_graph
from contenders.raw_sqlite import RawWriter
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from workloads.agent import AgentStep

import safepoint
from safepoint.adapters.langgraph import SafepointSaver

THREAD_ID = "bench-thread"
KINDS = {"sqlite": "SqliteSaver", "safepoint": "SafepointSaver", "floor": "floor (LatestOnlySaver)"}
SAVER_CALLS = ("get_tuple", "put", "put_writes")
# Per turn: each saver method's wall time and thread CPU time (summed over its calls), and the
# CPU time of the thread that called invoke.
SERIES = (*SAVER_CALLS, *(f"{name} cpu" for name in SAVER_CALLS), "invoke cpu")
FLOOR = "floor "  # prefix of the floor's series in a SafepointSaver run's extra_seconds
# Turns each saver runs before the next one's turn, in run_alternating: one, so that the same turn
# of two savers runs moments apart and a change in the machine's load cannot fall on only one.
BLOCK = 1


class TimedSqliteSaver(Timed, SqliteSaver):
    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self._timing_setup()


class TimedSafepointSaver(Timed, SafepointSaver):
    def __init__(self, store: safepoint.Store) -> None:
        super().__init__(store)
        self._timing_setup()


class TimedFloor(Timed, LatestOnlySaver):
    def __init__(self) -> None:
        super().__init__()
        self._timing_setup()


class _Contender:
    """One saver on its own file, plus what the probes need (a way to count statements)."""

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self._closers: list[Callable[[], None]] = []
        self.counter = StatementCounter()
        self.db_path: Path | None = None
        self.blob_dir: Path | None = None
        if kind == "floor":
            self.saver: Any = TimedFloor()
        elif kind == "sqlite":
            self.db_path = directory / "checkpoints.sqlite"
            conn = sqlite3.connect(self.db_path, check_same_thread=False)
            self.saver = TimedSqliteSaver(conn)
            self._conn = conn
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
        if self.db_path is None:
            return 0  # the floor stores nothing
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
    """``workload.steps`` as one ``invoke`` each; loads and bytes probed after ``probes``.

    ``kind="safepoint"`` runs the floor through the same turns too, alternating
    blocks with it (``run_alternating``), and returns the floor's series with
    SafepointSaver's, under ``FLOOR`` + name in ``extra_seconds`` (``FLOOR +
    "invoke"``: its seconds per ``invoke``), so the report can set them side by side.
    """
    if kind == "safepoint":
        runs = run_alternating(workload, base, label, probes, ("safepoint", "floor"))
        ours, floor = runs["safepoint"], runs["floor"]
        ours.extra_seconds[FLOOR + "invoke"] = floor.step_seconds
        ours.extra_seconds.update({FLOOR + name: series for name, series in floor.extra_seconds.items()})
        return ours
    session = _Session(workload, base, label, probes, kind, load_probes=load_probes)
    for agent_step in workload.steps:
        session.turn(agent_step)
    return session.finish()


def run_alternating(
    workload: Any,
    base: Path,
    label: str,
    probes: tuple[int, ...],
    kinds: Sequence[str],
    *,
    block: int = BLOCK,
) -> dict[str, StoreRun]:
    """Several savers through the same turns, alternating blocks of ``block`` turns (the order
    flipped every block), so a change in the machine's load falls on all of them alike."""
    sessions = {kind: _Session(workload, base, label, probes, kind, load_probes=True) for kind in kinds}
    steps: Sequence[AgentStep] = workload.steps
    for number, start in enumerate(range(0, len(steps), block)):
        for kind in kinds if number % 2 == 0 else list(reversed(kinds)):
            for agent_step in steps[start : start + block]:
                sessions[kind].turn(agent_step)
    return {kind: session.finish() for kind, session in sessions.items()}


class _Session:
    """One saver's graph and thread, run turn by turn; ``finish`` closes it and gives its results."""

    def __init__(
        self, workload: Any, base: Path, label: str, probes: tuple[int, ...], kind: str, *, load_probes: bool
    ) -> None:
        self.directory = fresh_dir(base, f"langgraph-{kind}-{label}")
        self.contender = _Contender(kind, self.directory)
        self.probes = probes
        self.load_probes = load_probes and kind != "floor"
        self.raw = RawWriter(self.directory / "raw.db")
        self.steps = len(workload.steps)
        self.after_step = self.raw.interleave(self.steps)
        self.current: list[AgentStep] = []
        self.graph = build_graph(self.contender.saver, self.current)
        self.config: RunnableConfig = {"configurable": {"thread_id": THREAD_ID}}
        self.seconds: list[float] = []
        self.per_kind: dict[str, list[float]] = {name: [] for name in SERIES}
        self.puts = self.writes = self.late = 0
        self.shapes: set[tuple[int, int]] = set()  # (puts, put_writes) seen per step
        self.state_loads: list[LoadProbe] = []
        self.tuple_loads: list[LoadProbe] = []
        self.probe_bytes: dict[int, int] = {}

    def turn(self, agent_step: AgentStep) -> None:
        saver = self.contender.saver
        self.current.append(agent_step)
        start, cpu = time.perf_counter(), time.thread_time()
        self.graph.invoke({"messages": [agent_step.incoming]}, self.config)
        self.per_kind["invoke cpu"].append(time.thread_time() - cpu)
        self.seconds.append(time.perf_counter() - start)
        self.late += saver.in_flight > 0
        timings = saver.take()
        for name in SAVER_CALLS:
            self.per_kind[name].append(sum(t[1] for t in timings if t[0] == name))
            self.per_kind[f"{name} cpu"].append(sum(t[2] for t in timings if t[0] == name))
        step_puts = sum(t[0] == "put" for t in timings)
        step_writes = sum(t[0] == "put_writes" for t in timings)
        self.shapes.add((step_puts, step_writes))
        self.puts += step_puts
        self.writes += step_writes
        if agent_step.step in self.probes:
            self.probe_bytes[agent_step.step] = self.contender.stored_bytes()
            if self.load_probes:
                self.state_loads.append(
                    _probe_state(self.contender, self.graph, self.current, self.config, agent_step.step)
                )
                self.tuple_loads.append(_probe_tuple(self.contender, self.config, agent_step.step))
            saver.take()  # the probes' own get_tuple calls
        self.current.clear()
        self.after_step(agent_step.step)

    def finish(self) -> StoreRun:
        contender = self.contender
        steps = len(self.seconds)
        facts = _settings(contender)
        facts["checkpoint puts per step"] = f"{self.puts / steps:g}"
        facts["put_writes calls per step"] = f"{self.writes / steps:g}"
        facts["(puts, put_writes) per step, all distinct values"] = ", ".join(map(str, sorted(self.shapes)))
        facts["steps with a write still running when invoke returned"] = str(self.late)
        contender.close()
        raw_seconds = self.raw.close()
        disk = disk_usage(contender.db_path, contender.blob_dir) if contender.db_path else DiskUsage(0, 0, 0)
        shutil.rmtree(self.directory)
        loads = {}
        if self.load_probes and self.probes:
            loads = {"graph.get_state(config)": self.state_loads, "saver.get_tuple(config)": self.tuple_loads}
        return StoreRun(
            name=KINDS[contender.kind],
            step_seconds=self.seconds,
            loads=loads,
            disk=disk,
            raw_commit_seconds=raw_seconds,
            extra_seconds=self.per_kind,
            facts=facts,
            probe_bytes=self.probe_bytes,
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
    if contender.db_path is None:
        where = "bench/contenders/lg_floor.py"
        return {"stores": f"the latest checkpoint of each thread, as objects in memory ({where})"}
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
