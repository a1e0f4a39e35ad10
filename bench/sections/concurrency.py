"""Many runs saving at once in one process (issue 17, part 2: group commit), on SQLite and PostgreSQL.

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

The same on PostgreSQL, when a server is given: ``concurrency_pg``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pg_server
from contenders.raw_sqlite import RawWriter

import safepoint

from . import concurrency_pg, concurrency_runs

STEPS = 25
TOTAL = 800
CONCURRENCY = (1, 8, 64)
RAW_COMMITS = 1000

# way -> (backend, what it is)
WAYS: dict[str, tuple[str, str]] = {
    "threads, group commit on": ("sqlite", "C threads sharing one Store (the default: group commit on)"),
    "threads, group commit off": ("sqlite", "the same, open_store(..., group_commit=False)"),
    "tasks, group commit on": ("sqlite", "C asyncio tasks sharing one AsyncStore, a new Checkpoint a step"),
    "tasks, group commit off": ("sqlite", "the same, group_commit=False"),
    "AsyncSqliteSaver": ("sqlite", "C asyncio tasks sharing LangGraph's AsyncSqliteSaver, an aput a step"),
    "PostgreSQL threads": ("postgresql", "C threads sharing one PostgreSQL Store (pool: 1-10 connections)"),
    "PostgreSQL tasks": ("postgresql", "C asyncio tasks sharing one PostgreSQL AsyncStore, as on SQLite"),
    "AsyncPostgresSaver": (
        "postgresql",
        "C asyncio tasks sharing LangGraph's AsyncPostgresSaver from from_conn_string (one connection)",
    ),
}
LANGGRAPH_WAYS = {"AsyncSqliteSaver", "AsyncPostgresSaver"}


@dataclass
class ConcurrencyResult:
    """Saves per second by way and concurrency, pooled over repetitions: way -> C -> [rate]."""

    reps: int
    rates: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    raw: dict[str, list[float]] = field(default_factory=dict)  # backend -> single-row durable commits/s
    postgres_skipped: str | None = None  # why there are no PostgreSQL ways

    def rate(self, way: str, concurrency: int) -> float:
        samples = sorted(self.rates[way][concurrency])
        return samples[len(samples) // 2]

    def raw_rate(self, backend: str = "sqlite") -> float:
        samples = sorted(self.raw[backend])
        return samples[len(samples) // 2]

    def way_raw_rate(self, way: str) -> float:
        return self.raw_rate(WAYS[way][0])


def _rounds(concurrency: int) -> int:
    return max(1, -(-TOTAL // (concurrency * STEPS)))


def _threads(path: Path, concurrency: int, group_commit: bool) -> float:
    with safepoint.open_store(f"sqlite:///{path}", group_commit=group_commit) as store:
        return concurrency_runs.threads_on(store, concurrency, STEPS, _rounds(concurrency))


async def _tasks(path: Path, concurrency: int, group_commit: bool) -> float:
    store = await safepoint.open_async_store(f"sqlite:///{path}", group_commit=group_commit)
    try:
        return await concurrency_runs.tasks_on(store, concurrency, STEPS, _rounds(concurrency))
    finally:
        await store.close()


async def _async_sqlite_saver(path: Path, concurrency: int) -> float:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: PLC0415

    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        return await concurrency_runs.aputs_on(saver, concurrency, STEPS, _rounds(concurrency))


def _raw(path: Path) -> float:
    writer = RawWriter(path)
    began = time.perf_counter()
    writer.burst(RAW_COMMITS)
    elapsed = time.perf_counter() - began
    writer.close()
    return RAW_COMMITS / elapsed


def run(
    workdir: Path, *, reps: int, langgraph: bool = True, pg_url: str | None = None, log: Any = print
) -> ConcurrencyResult:
    result = ConcurrencyResult(reps=reps)
    if pg_url is not None and (reason := pg_server.unreachable(pg_url)) is not None:
        result.postgres_skipped = f"PostgreSQL at {pg_url} unreachable: {reason}"
        pg_url = None
    elif pg_url is None:
        result.postgres_skipped = "no PostgreSQL server given"
    ways = [
        w
        for w, (backend, _how) in WAYS.items()
        if (langgraph or w not in LANGGRAPH_WAYS) and (backend == "sqlite" or pg_url is not None)
    ]
    for way in ways:
        result.rates[way] = {c: [] for c in CONCURRENCY}
    counter = 0
    for rep in range(reps):
        result.raw.setdefault("sqlite", []).append(_raw(workdir / f"concurrency-raw-{rep}.db"))
        if pg_url is not None:
            result.raw.setdefault("postgresql", []).append(concurrency_pg.raw(pg_url))
        for concurrency in CONCURRENCY:
            # Rotate the order so no way always runs first (or on a warmer disk).
            shift = (rep + concurrency) % len(ways)
            for way in ways[shift:] + ways[:shift]:
                counter += 1
                rate = _measure(way, workdir / f"concurrency-{counter}.db", pg_url, concurrency)
                result.rates[way][concurrency].append(rate)
                log(f"concurrency rep {rep + 1}: {way}, {concurrency} runs: {rate:,.0f} saves/s")
    return result


def _measure(way: str, path: Path, pg_url: str | None, concurrency: int) -> float:
    rounds = _rounds(concurrency)
    if WAYS[way][0] == "postgresql":
        assert pg_url is not None
        if way == "PostgreSQL threads":
            return concurrency_pg.threads(pg_url, concurrency, STEPS, rounds)
        if way == "PostgreSQL tasks":
            return asyncio.run(concurrency_pg.tasks(pg_url, concurrency, STEPS, rounds))
        return asyncio.run(concurrency_pg.async_postgres_saver(pg_url, concurrency, STEPS, rounds))
    if way.startswith("threads"):
        return _threads(path, concurrency, group_commit=way.endswith("on"))
    if way.startswith("tasks"):
        return asyncio.run(_tasks(path, concurrency, group_commit=way.endswith("on")))
    return asyncio.run(_async_sqlite_saver(path, concurrency))
