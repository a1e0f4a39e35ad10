"""safepoint on PostgreSQL: one writer's run of the simulated agent, one save per step.

Each writer owns one run (``writer-<index>``) in a store opened at its
defaults, in the benchmark's schema. Step 0 (no messages) is saved when the
writer opens, untimed. Then every operation is one agent step, exactly as in
the SQLite section: ``cp.step += 1``, the step's two messages appended (a
~500-byte user message, or every 10th step a 50 KB tool output, and a
~500-byte assistant reply), counters, the cursor and the state updated, and
``store.save(cp)`` — the only thing timed. With ``"workload": "blobs"`` in
the spec, the steps are ``workloads.blobs``'s (1 MB tool outputs).
"""

from __future__ import annotations

import time
from typing import Any

from workloads.agent import build_workload

import safepoint


class SafepointWriter:
    """A ``pg_writer`` contender: the agent's steps, saved one by one."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._store = safepoint.open_store(spec["url"], schema=spec["schema"])
        self._steps = build_workload(spec).steps
        self._cp = safepoint.Checkpoint(run_id=f"writer-{spec['index']}")
        self._store.save(self._cp)
        self.seconds: list[float] = []  # index i = agent step i + 1
        self.cpu: list[float] = []  # CPU time (user + system) of this thread per save

    def block(self, count: int) -> int:
        cp, store = self._cp, self._store
        done = 0
        while done < count and cp.step < len(self._steps):
            agent_step = self._steps[cp.step]
            cp.step += 1
            agent_step.apply(cp)
            start, cpu = time.perf_counter(), time.thread_time()
            store.save(cp)
            self.seconds.append(time.perf_counter() - start)
            self.cpu.append(time.thread_time() - cpu)
            done += 1
        return done

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "cpu": self.cpu}

    def close(self) -> None:
        self._store.close()
