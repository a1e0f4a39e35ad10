"""The floor of a safepoint save on PostgreSQL: the same two rows, written by one bare statement.

A ``pg_writer`` contender. Each step of the benchmark agent is written as
a save writes it: the run row's head moved (step, digest, counters, next
seq, updated_at) and the checkpoint row inserted (header, digest, ranges,
the step's message bodies newline-joined), same tables and same bytes, in
one autocommit statement, prepared after psycopg's 5 runs as safepoint's
are. No checks beyond the step's, no scrubbing, no digests computed, no
safepoint client code: what any design on these tables costs the server
at least. ``make bench`` sets it against the store's saves (issue 17's
server CPU target) and ``bench/sections/profile_postgres.py`` against its
variants.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pg_server
import psycopg
from workloads import agent as agent_workload

import safepoint


class FloorWriter:
    """A ``pg_writer`` contender: the save's two rows in one autocommit statement, no checks."""

    SQL = """
WITH run AS (
    UPDATE safepoint_runs
    SET head_step = %(step)s::bigint, head_digest = %(digest)s, counters = %(counters)s::jsonb,
        next_seq = next_seq + 2, updated_at = now()
    WHERE id = %(run_ref)s::bigint AND head_step = %(step)s::bigint - 1
    RETURNING id, next_seq - 2 AS first_seq)
INSERT INTO safepoint_checkpoints (
    run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest,
    first_seq, added, messages)
SELECT id, %(step)s::bigint, 1, 'running', now(), %(count)s::bigint, %(ranges)s::jsonb, %(header)s,
       %(digest)s, first_seq, 2, %(messages)s
FROM run
"""

    def __init__(self, spec: dict[str, Any]) -> None:
        store = safepoint.open_store(spec["url"], schema=spec["schema"])
        run_id = f"floor-{spec['index']}"
        store.save(safepoint.Checkpoint(run_id=run_id))
        store.close()
        self._conn = psycopg.connect(pg_server.with_search_path(spec["url"], spec["schema"]), autocommit=True)
        row = self._conn.execute("SELECT id FROM safepoint_runs WHERE run_id = %s", (run_id,)).fetchone()
        self._run_ref = row[0] if row else None
        self._steps = agent_workload.build(spec["steps"]).steps
        self.seconds: list[float] = []

    def block(self, count: int) -> int:
        done = 0
        while done < count and len(self.seconds) < len(self._steps):
            agent_step = self._steps[len(self.seconds)]
            step = agent_step.step
            start = time.perf_counter()
            bodies = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in agent_step.messages]
            params = {
                "run_ref": self._run_ref,
                "step": step,
                "digest": bytes(32),
                "counters": orjson.dumps(agent_step.counters).decode(),
                "count": 2 * step,
                "ranges": f"[[0, {2 * step}]]",
                "header": orjson.dumps({"state": agent_step.state, "cursor": agent_step.cursor}) + bytes(200),
                "messages": b"\n".join(bodies),
            }
            self._conn.execute(self.SQL.encode(), params)
            self.seconds.append(time.perf_counter() - start)
            done += 1
        return done

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def close(self) -> None:
        self._conn.close()
