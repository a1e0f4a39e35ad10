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

import time

import pg_server
from contenders import raw_postgres

import safepoint

from . import concurrency_runs

RAW_COMMITS = 1000


def threads(url: str, concurrency: int, steps: int, rounds: int) -> float:
    with pg_server.scratch_schema(url, "conc") as schema, safepoint.open_store(url, schema=schema) as store:
        return concurrency_runs.threads_on(store, concurrency, steps, rounds)


async def tasks(url: str, concurrency: int, steps: int, rounds: int) -> float:
    with pg_server.scratch_schema(url, "conc") as schema:
        store = await safepoint.open_async_store(url, schema=schema)
        try:
            return await concurrency_runs.tasks_on(store, concurrency, steps, rounds)
        finally:
            await store.close()


async def async_postgres_saver(url: str, concurrency: int, steps: int, rounds: int) -> float:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: PLC0415

    with pg_server.scratch_schema(url, "conclg", create=True) as schema:
        async with AsyncPostgresSaver.from_conn_string(pg_server.with_search_path(url, schema)) as saver:
            await saver.setup()
            return await concurrency_runs.aputs_on(saver, concurrency, steps, rounds)


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
