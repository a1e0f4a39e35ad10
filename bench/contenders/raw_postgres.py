"""The floor on PostgreSQL: single-row INSERT commits through psycopg, at the server's durability.

Each raw writer is one autocommit psycopg connection (psycopg's defaults
otherwise, so the INSERT is prepared after 5 runs, as safepoint's queries
are) inserting one row of ``ROW_BYTES`` random bytes into a plain table with
a ``bigint`` identity primary key, in a schema of its own; every INSERT is a
transaction, durable when it returns under ``synchronous_commit = on``.
With several writers they share the table, as a store's writers share its
tables.
"""

from __future__ import annotations

import random
import time
from typing import Any

import psycopg
from psycopg import sql

ROW_BYTES = 1024
TABLE = "raw_rows"


def create_table(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body bytea NOT NULL)"
            ).format(sql.Identifier(schema, TABLE))
        )


class RawWriter:
    """A ``pg_writer`` contender: one autocommit INSERT of one row per operation."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._conn = psycopg.connect(spec["url"], autocommit=True)
        self._insert = sql.SQL("INSERT INTO {} (body) VALUES (%s)").format(
            sql.Identifier(spec["schema"], TABLE)
        )
        rng = random.Random(ROW_BYTES + spec["index"])
        self._bodies = [rng.randbytes(ROW_BYTES) for _ in range(64)]
        self.seconds: list[float] = []

    def block(self, count: int) -> int:
        conn, insert, bodies, seconds = self._conn, self._insert, self._bodies, self.seconds
        for _ in range(count):
            body = bodies[len(seconds) % len(bodies)]
            start = time.perf_counter()
            conn.execute(insert, (body,))
            seconds.append(time.perf_counter() - start)
        return count

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def close(self) -> None:
        self._conn.close()
