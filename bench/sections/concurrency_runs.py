"""The many-runs-at-once workload, whatever holds the runs: C runs saving together, saves per second.

``concurrency`` (SQLite) and ``concurrency_pg`` (PostgreSQL) open the store
or LangGraph saver; these functions drive it. Each run saves ``steps``
steps of two ~500 B messages (``fresh.step_messages``); ``rounds`` rounds
of ``concurrency`` runs, all started together in each round; the rate is
every save over the time the rounds took.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import safepoint
from safepoint import Checkpoint

from .fresh import step_messages


def threads_on(
    store: safepoint.Store,
    concurrency: int,
    steps: int,
    rounds: int,
    apply: Callable[[Checkpoint, int], None] | None = None,
) -> float:
    """C threads sharing ``store``, each keeping its checkpoint and changing it in place
    (``apply(cp, step)``: what a step does to it; by default, the two messages above)."""
    elapsed = 0.0
    for round_ in range(rounds):
        start = threading.Barrier(concurrency + 1)
        workers = [
            threading.Thread(target=_saving, args=(store, f"r{round_}-{i}", steps, start, apply))
            for i in range(concurrency)
        ]
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        for worker in workers:
            worker.join()
        elapsed += time.perf_counter() - began
    return rounds * concurrency * steps / elapsed


def _saving(
    store: safepoint.Store,
    run_id: str,
    steps: int,
    start: threading.Barrier,
    apply: Callable[[Checkpoint, int], None] | None,
) -> None:
    cp = Checkpoint(run_id=run_id)
    start.wait()
    for step in range(steps):
        if step:
            cp = cp.next()
        if apply is None:
            cp.messages.extend(step_messages(step, False))
        else:
            apply(cp, step)
        store.save(cp)


async def tasks_on(store: safepoint.AsyncStore, concurrency: int, steps: int, rounds: int) -> float:
    """C asyncio tasks sharing ``store``, each building a new ``Checkpoint`` every step (the seed's way)."""

    async def run(run_id: str) -> None:
        conversation: list[dict[str, Any]] = []
        for step in range(steps):
            conversation.extend(step_messages(step, False))
            await store.save(Checkpoint(run_id=run_id, step=step, messages=list(conversation)))

    return await _gathered(run, concurrency, steps, rounds)


async def aputs_on(saver: Any, concurrency: int, steps: int, rounds: int) -> float:
    """C asyncio tasks sharing a LangGraph async saver: an ``aput`` a step of the conversation so far."""
    from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415

    async def run(thread_id: str) -> None:
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        conversation: list[dict[str, Any]] = []
        for step in range(steps):
            conversation.extend(step_messages(step, False))
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": list(conversation)}
            checkpoint["channel_versions"] = {"messages": step + 1}
            config = await saver.aput(config, checkpoint, {"step": step}, {"messages": step + 1})

    return await _gathered(run, concurrency, steps, rounds)


async def _gathered(run: Any, concurrency: int, steps: int, rounds: int) -> float:
    began = time.perf_counter()
    for round_ in range(rounds):
        await asyncio.gather(*(run(f"r{round_}-{i}") for i in range(concurrency)))
    return rounds * concurrency * steps / (time.perf_counter() - began)
