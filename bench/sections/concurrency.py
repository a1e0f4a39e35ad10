"""Many runs saving at once in one process (issue 17, part 2: group commit), on SQLite.

C runs (C = 1, 8, 64) each save ``STEPS`` steps, two ~500 B messages a
step, all started together; at C = 1 and 8 the runs are repeated in rounds
so that every figure counts at least ``TOTAL`` saves. Saves per second
(wall clock, all saves over the whole time) for:

* **threads**: C threads sharing one ``Store``, each keeping its checkpoint
  and changing it in place (``next()`` and an append);
* **tasks**: C asyncio tasks sharing one ``AsyncStore``, each building a new
  ``Checkpoint`` every step (the seed's pattern);
* both with group commit on (the default) and off (``group_commit=False``);
* LangGraph's ``AsyncSqliteSaver``: C tasks, each ``aput`` of its thread's
  checkpoint whose one channel value is the conversation so far;
* **raw**: one plain sqlite3 connection (WAL, ``synchronous=FULL``, the
  store's durability) committing one 1 KB row per transaction, as fast as
  it can: the rate of single-row durable commits on this disk.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contenders.raw_sqlite import RawWriter

import safepoint
from safepoint import Checkpoint

from .fresh import step_messages

STEPS = 25
TOTAL = 800
CONCURRENCY = (1, 8, 64)
RAW_COMMITS = 1000

WAYS: dict[str, str] = {
    "threads, group commit on": "C threads sharing one Store (the default: group commit on)",
    "threads, group commit off": "the same, open_store(..., group_commit=False)",
    "tasks, group commit on": "C asyncio tasks sharing one AsyncStore, a new Checkpoint each step",
    "tasks, group commit off": "the same, group_commit=False",
    "AsyncSqliteSaver": "C asyncio tasks sharing LangGraph's AsyncSqliteSaver, one aput per step",
}


@dataclass
class ConcurrencyResult:
    """Saves per second by way and concurrency, pooled over repetitions: way -> C -> [rate]."""

    reps: int
    rates: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    raw: list[float] = field(default_factory=list)  # single-row durable commits/s

    def rate(self, way: str, concurrency: int) -> float:
        samples = sorted(self.rates[way][concurrency])
        return samples[len(samples) // 2]

    def raw_rate(self) -> float:
        samples = sorted(self.raw)
        return samples[len(samples) // 2]


def _rounds(concurrency: int) -> int:
    return max(1, -(-TOTAL // (concurrency * STEPS)))


def _saving(store: safepoint.Store, run_id: str, start: threading.Barrier) -> None:
    """One thread's run: its checkpoint kept and changed in place, ``STEPS`` saves."""
    cp = Checkpoint(run_id=run_id)
    start.wait()
    for step in range(STEPS):
        if step:
            cp = cp.next()
        cp.messages.extend(step_messages(step, False))
        store.save(cp)


def _threads(path: Path, concurrency: int, group_commit: bool) -> float:
    with safepoint.open_store(f"sqlite:///{path}", group_commit=group_commit) as store:
        rounds = _rounds(concurrency)
        elapsed = 0.0
        for round_ in range(rounds):
            start = threading.Barrier(concurrency + 1)
            threads = [
                threading.Thread(target=_saving, args=(store, f"r{round_}-{i}", start))
                for i in range(concurrency)
            ]
            for thread in threads:
                thread.start()
            start.wait()
            began = time.perf_counter()
            for thread in threads:
                thread.join()
            elapsed += time.perf_counter() - began
    return rounds * concurrency * STEPS / elapsed


async def _tasks(path: Path, concurrency: int, group_commit: bool) -> float:
    store = await safepoint.open_async_store(f"sqlite:///{path}", group_commit=group_commit)
    try:

        async def run(run_id: str) -> None:
            conversation: list[dict[str, Any]] = []
            for step in range(STEPS):
                conversation.extend(step_messages(step, False))
                await store.save(Checkpoint(run_id=run_id, step=step, messages=list(conversation)))

        rounds = _rounds(concurrency)
        began = time.perf_counter()
        for round_ in range(rounds):
            await asyncio.gather(*(run(f"r{round_}-{i}") for i in range(concurrency)))
        return rounds * concurrency * STEPS / (time.perf_counter() - began)
    finally:
        await store.close()


async def _async_sqlite_saver(path: Path, concurrency: int) -> float:
    from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: PLC0415

    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()

        async def run(thread_id: str) -> None:
            config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            conversation: list[dict[str, Any]] = []
            for step in range(STEPS):
                conversation.extend(step_messages(step, False))
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"messages": list(conversation)}
                checkpoint["channel_versions"] = {"messages": step + 1}
                config = await saver.aput(config, checkpoint, {"step": step}, {"messages": step + 1})

        rounds = _rounds(concurrency)
        began = time.perf_counter()
        for round_ in range(rounds):
            await asyncio.gather(*(run(f"r{round_}-{i}") for i in range(concurrency)))
        return rounds * concurrency * STEPS / (time.perf_counter() - began)


def _raw(path: Path) -> float:
    writer = RawWriter(path)
    began = time.perf_counter()
    writer.burst(RAW_COMMITS)
    elapsed = time.perf_counter() - began
    writer.close()
    return RAW_COMMITS / elapsed


def run(workdir: Path, *, reps: int, langgraph: bool = True, log: Any = print) -> ConcurrencyResult:
    result = ConcurrencyResult(reps=reps)
    ways = [w for w in WAYS if langgraph or w != "AsyncSqliteSaver"]
    for way in ways:
        result.rates[way] = {c: [] for c in CONCURRENCY}
    counter = 0
    for rep in range(reps):
        raw_path = workdir / f"concurrency-raw-{rep}.db"
        result.raw.append(_raw(raw_path))
        for concurrency in CONCURRENCY:
            # Rotate the order so no way always runs first (or on a warmer disk).
            shift = (rep + concurrency) % len(ways)
            for way in ways[shift:] + ways[:shift]:
                counter += 1
                path = workdir / f"concurrency-{counter}.db"
                if way.startswith("threads"):
                    rate = _threads(path, concurrency, group_commit=way.endswith("on"))
                elif way.startswith("tasks"):
                    rate = asyncio.run(_tasks(path, concurrency, group_commit=way.endswith("on")))
                else:
                    rate = asyncio.run(_async_sqlite_saver(path, concurrency))
                result.rates[way][concurrency].append(rate)
                log(f"concurrency rep {rep + 1}: {way}, {concurrency} runs: {rate:,.0f} saves/s")
    return result
