"""Fresh checkpoints, rewritten histories and loads (issue 17), on SQLite.

Saves: the seed's own pattern — a new ``Checkpoint`` every step holding the
whole conversation, as ``list(conversation)`` (shallow) and as a deep copy
(what ``dataclasses.asdict`` hands over) — against the in-place pattern (one
checkpoint, ``next()`` and an append), with two ~500 B messages a step, and
again with a 30 KB tool output every 10th step. LangGraph's ``SqliteSaver``
is given the same conversation as its checkpoint's channel value each step
(``put`` straight, no graph). Per-step save time (wall and CPU) is the median
of the 11 steps around each probe, pooled over the repetitions.

The first save in a cold process: a new store object on the file (an empty
memory), saving the next fresh checkpoint of a 1,000-step run.

Loads: the latest checkpoint of an appending run and of a run that rewrites
its last message every step (and appends one every other step), at 1,000 and
10,000 steps, against decoding the same message bytes with the codec alone;
peak memory (``tracemalloc``, above what the caller holds) against those
bytes. And one save of a 100 MB message: its peak memory against its size.
"""

from __future__ import annotations

import copy
import gc
import sqlite3
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import safepoint
from safepoint import Checkpoint, codec

WINDOW = 5  # steps either side of a probe
MESSAGE = 500  # bytes of content per message, about
TOOL_OUTPUT = 30_000
TOOL_EVERY = 10

PATTERNS: dict[str, str] = {
    "in place": "one checkpoint: next() and append the step's messages",
    "fresh, list(conversation)": "a new Checkpoint each step, messages=list(conversation)",
    "fresh, deep copy": "a new Checkpoint each step, messages=copy.deepcopy(conversation)",
}


def _text(seed: int, size: int) -> str:
    words = ("agent", "tool", "result", "plan", "step", "value", "query", "answer", "check", "note")
    out, i = [], seed
    while sum(map(len, out)) + len(out) < size:
        i = (i * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(words[i % len(words)] + str(i % 97))
    return " ".join(out)


def step_messages(step: int, tool_outputs: bool) -> list[dict[str, Any]]:
    """The messages step ``step`` adds: a user turn and an answer (and a tool output every 10th step)."""
    added = [
        {"role": "user", "content": _text(2 * step, MESSAGE)},
        {"role": "assistant", "content": _text(2 * step + 1, MESSAGE)},
    ]
    if tool_outputs and step % TOOL_EVERY == 0:
        added.append({"role": "tool", "tool_call_id": f"call-{step}", "content": _text(-step, TOOL_OUTPUT)})
    return added


@dataclass
class SaveSeries:
    """Per-step save times of one pattern, pooled over repetitions: probe -> samples (seconds)."""

    pattern: str
    tool_outputs: bool
    wall: dict[int, list[float]] = field(default_factory=dict)
    cpu: dict[int, list[float]] = field(default_factory=dict)

    def time(self, probe: int | None, call: Callable[[], Any]) -> Any:
        """``call()``, its wall and CPU time kept under ``probe`` (not kept when None)."""
        wall, cpu = time.perf_counter(), time.process_time()
        result = call()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if probe is not None:
            self.wall.setdefault(probe, []).append(wall)
            self.cpu.setdefault(probe, []).append(cpu)
        return result

    def median(self, probe: int, *, cpu: bool = False) -> float:
        return statistics.median((self.cpu if cpu else self.wall)[probe])

    def growth(self, probes: tuple[int, ...], *, cpu: bool = False) -> float:
        return self.median(probes[-1], cpu=cpu) / self.median(probes[0], cpu=cpu)


@dataclass
class LoadRow:
    kind: str  # "appending" or "rewriting"
    steps: int
    messages: int
    message_bytes: int
    load: float  # seconds, median
    decode: float  # the codec's decode of the same bytes, median
    peak: int  # tracemalloc peak above the baseline, bytes

    @property
    def ratio(self) -> float:
        return self.load / self.decode

    @property
    def memory(self) -> float:
        return self.peak / self.message_bytes


@dataclass
class FreshResult:
    steps: int
    probes: tuple[int, ...]
    reps: int
    series: list[SaveSeries]
    langgraph: SaveSeries | None
    langgraph_steps: int
    cold: list[float]  # first save in a cold process, seconds
    warm: list[float]  # the save after it, same process
    loads: list[LoadRow]
    big_size: int
    big_peak: int

    def find(self, pattern: str, tool_outputs: bool) -> SaveSeries:
        return next(s for s in self.series if s.pattern == pattern and s.tool_outputs == tool_outputs)


def _probe_of(step: int, probes: tuple[int, ...]) -> int | None:
    for probe in probes:
        if abs(step - probe) <= WINDOW:
            return probe
    return None


def _save_run(path: Path, steps: int, probes: tuple[int, ...], into: SaveSeries) -> None:
    pattern, tool_outputs = into.pattern, into.tool_outputs
    store = safepoint.open_store(f"sqlite:///{path}")
    try:
        conversation: list[dict[str, Any]] = []
        cp: Checkpoint | None = None
        for step in range(steps + WINDOW + 1):
            added = step_messages(step, tool_outputs)
            conversation.extend(added)
            if pattern == "in place":
                cp = Checkpoint(run_id="r", messages=list(added)) if cp is None else cp.next()
                if step:
                    cp.messages.extend(added)
            elif pattern == "fresh, list(conversation)":
                cp = Checkpoint(run_id="r", step=step, messages=list(conversation), counters={"steps": step})
            else:
                copied = copy.deepcopy(conversation)
                cp = Checkpoint(run_id="r", step=step, messages=copied, counters={"steps": step})
            into.time(_probe_of(step, probes), partial(store.save, cp))
    finally:
        store.close()


def _langgraph_run(path: Path, steps: int, probes: tuple[int, ...], into: SaveSeries) -> None:
    """``SqliteSaver.put`` of the conversation as its checkpoint's one channel value, each step."""
    from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415
    from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        conversation: list[dict[str, Any]] = []
        for step in range(steps + WINDOW + 1):
            conversation.extend(step_messages(step, into.tool_outputs))
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": list(conversation)}
            checkpoint["channel_versions"] = {"messages": step + 1}
            versions = {"messages": step + 1}
            config = into.time(
                _probe_of(step, probes), partial(saver.put, config, checkpoint, {"step": step}, versions)
            )
    finally:
        conn.close()


def _cold(path: Path, steps: int, reps: int) -> tuple[list[float], list[float]]:
    """A fresh 1,000-step run, then per rep: a new store object's first save, and its next."""
    conversation: list[dict[str, Any]] = []
    with safepoint.open_store(f"sqlite:///{path}") as store:
        for step in range(steps):
            conversation.extend(step_messages(step, False))
            store.save(Checkpoint(run_id="cold", step=step, messages=list(conversation)))
    cold, warm = [], []
    step = steps
    for _ in range(reps):
        with safepoint.open_store(f"sqlite:///{path}") as store:
            for into in (cold, warm):
                conversation.extend(step_messages(step, False))
                cp = Checkpoint(run_id="cold", step=step, messages=copy.deepcopy(conversation))
                started = time.perf_counter()
                store.save(cp)
                into.append(time.perf_counter() - started)
                step += 1
    return cold, warm


def _rewrite_message(index: int, version: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"[{index}.{version}] " + _text(index * 7 + version, MESSAGE)}


def _fill(store: safepoint.Store, kind: str, steps: int) -> None:
    cp = Checkpoint(run_id=kind, messages=[_rewrite_message(0, 0)])
    store.save(cp)
    for step in range(1, steps + 1):
        cp = cp.next()
        if kind == "rewriting":
            cp.messages[-1] = _rewrite_message(len(cp.messages) - 1, step)  # the streamed answer, again
            if step % 2 == 0:
                cp.messages.append(_rewrite_message(len(cp.messages), step))
        else:
            cp.messages.append(_rewrite_message(len(cp.messages), step))
        store.save(cp)


def _timed(func: Callable[[], Any], reps: int) -> float:
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        func()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _peak(func: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = func()
        peak = tracemalloc.get_traced_memory()[1] - base
        del result
    finally:
        tracemalloc.stop()
    return peak


def _loads(workdir: Path, sizes: tuple[int, ...], reps: int) -> list[LoadRow]:
    rows = []
    for steps in sizes:
        path = workdir / f"loads-{steps}.db"
        path.unlink(missing_ok=True)
        with safepoint.open_store(f"sqlite:///{path}") as store:
            _fill(store, "rewriting", steps)
            messages = len(store.load("rewriting").messages)
            _fill(store, "appending", messages - 1)  # as many messages, one per step
            for kind in ("appending", "rewriting"):
                loaded = store.load(kind)
                bodies = [codec.encode(m) for m in loaded.messages]
                rows.append(
                    LoadRow(
                        kind=kind,
                        steps=loaded.step,
                        messages=len(bodies),
                        message_bytes=sum(map(len, bodies)),
                        load=_timed(lambda kind=kind: store.load(kind), reps),  # type: ignore[misc]
                        decode=_timed(lambda bodies=bodies: [codec.decode(b) for b in bodies], reps),  # type: ignore[misc]
                        peak=_peak(lambda kind=kind: store.load(kind)),  # type: ignore[misc]
                    )
                )
    return rows


def _big_save(workdir: Path, size: int) -> int:
    path = workdir / "big.db"
    path.unlink(missing_ok=True)
    with safepoint.open_store(f"sqlite:///{path}") as store:
        text = "x" * size
        cp = Checkpoint(run_id="big", messages=[{"role": "tool", "content": text}])
        return _peak(lambda: store.save(cp))


def run(
    workdir: Path,
    *,
    steps: int = 1000,
    reps: int = 3,
    langgraph_steps: int = 1000,
    load_sizes: tuple[int, ...] = (1000, 10_000),
    big: int = 100_000_000,
    langgraph: bool = True,
) -> FreshResult:
    probes = tuple(p for p in (10, 100, steps) if p <= steps)
    series = [SaveSeries(pattern, tools) for tools in (False, True) for pattern in PATTERNS]
    for rep in range(reps):
        for one in series[rep % len(series) :] + series[: rep % len(series)]:
            path = workdir / "fresh.db"
            path.unlink(missing_ok=True)
            _save_run(path, steps, probes, one)
    lg = None
    lg_probes = tuple(p for p in probes if p <= langgraph_steps)
    if langgraph:
        lg = SaveSeries("SqliteSaver.put", False)
        path = workdir / "lg-fresh.db"
        path.unlink(missing_ok=True)
        _langgraph_run(path, langgraph_steps, lg_probes, lg)
    cold_path = workdir / "cold.db"
    cold_path.unlink(missing_ok=True)
    cold, warm = _cold(cold_path, steps, reps=5)
    return FreshResult(
        steps=steps,
        probes=probes,
        reps=reps,
        series=series,
        langgraph=lg,
        langgraph_steps=langgraph_steps,
        cold=cold,
        warm=warm,
        loads=_loads(workdir, load_sizes, reps=5),
        big_size=big,
        big_peak=_big_save(workdir, big),
    )
