"""The many-runs-at-once section on PostgreSQL (issue 17): the same C runs, on one server.

Each way runs in a schema of its own, made for it and dropped after:

* **PostgreSQL threads**: C threads sharing one ``Store`` (its pool: 1-10
  connections, the default), each keeping its checkpoint and changing it in
  place;
* **PostgreSQL tasks**: C asyncio tasks sharing one ``AsyncStore``, a new
  ``Checkpoint`` each step;
* **AsyncPostgresSaver**: C tasks sharing LangGraph's ``AsyncPostgresSaver``
  as its documentation opens it (``from_conn_string``: one connection), one
  ``aput`` per step of its thread's conversation so far;
* **raw**: one psycopg connection committing one 1 KB row per transaction
  (``contenders/raw_postgres.py``), the server's default durability.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pg_server
from contenders import raw_postgres

import safepoint
from safepoint import Checkpoint

from .fresh import step_messages

RAW_COMMITS = 1000


def threads(url: str, concurrency: int, steps: int, rounds: int) -> float:
    with pg_server.scratch_schema(url, "conc") as schema, safepoint.open_store(url, schema=schema) as store:
        elapsed = 0.0
        for round_ in range(rounds):
            start = threading.Barrier(concurrency + 1)
            workers = [
                threading.Thread(target=_saving, args=(store, f"r{round_}-{i}", steps, start))
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


def _saving(store: safepoint.Store, run_id: str, steps: int, start: threading.Barrier) -> None:
    cp = Checkpoint(run_id=run_id)
    start.wait()
    for step in range(steps):
        if step:
            cp = cp.next()
        cp.messages.extend(step_messages(step, False))
        store.save(cp)


async def tasks(url: str, concurrency: int, steps: int, rounds: int) -> float:
    with pg_server.scratch_schema(url, "conc") as schema:
        store = await safepoint.open_async_store(url, schema=schema)
        try:

            async def run(run_id: str) -> None:
                conversation: list[dict[str, Any]] = []
                for step in range(steps):
                    conversation.extend(step_messages(step, False))
                    await store.save(Checkpoint(run_id=run_id, step=step, messages=list(conversation)))

            began = time.perf_counter()
            for round_ in range(rounds):
                await asyncio.gather(*(run(f"r{round_}-{i}") for i in range(concurrency)))
            return rounds * concurrency * steps / (time.perf_counter() - began)
        finally:
            await store.close()


async def async_postgres_saver(url: str, concurrency: int, steps: int, rounds: int) -> float:
    from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: PLC0415

    with pg_server.scratch_schema(url, "conclg", create=True) as schema:
        async with AsyncPostgresSaver.from_conn_string(pg_server.with_search_path(url, schema)) as saver:
            await saver.setup()

            async def run(thread_id: str) -> None:
                config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                conversation: list[dict[str, Any]] = []
                for step in range(steps):
                    conversation.extend(step_messages(step, False))
                    checkpoint = empty_checkpoint()
                    checkpoint["channel_values"] = {"messages": list(conversation)}
                    checkpoint["channel_versions"] = {"messages": step + 1}
                    config = await saver.aput(config, checkpoint, {"step": step}, {"messages": step + 1})

            began = time.perf_counter()
            for round_ in range(rounds):
                await asyncio.gather(*(run(f"r{round_}-{i}") for i in range(concurrency)))
            return rounds * concurrency * steps / (time.perf_counter() - began)


def raw(url: str) -> float:
    with pg_server.scratch_schema(url, "concraw", create=True) as schema:
        raw_postgres.create_table(url, schema)
        writer = raw_postgres.RawWriter({"url": url, "schema": schema, "index": 0})
        writer.block(50)  # prepared, warm
        began = time.perf_counter()
        writer.block(RAW_COMMITS)
        elapsed = time.perf_counter() - began
        writer.close()
    return RAW_COMMITS / elapsed
