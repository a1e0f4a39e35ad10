"""Workers claiming queued runs: ``pg_writer`` contenders for the claims benchmark.

- ``QueueFiller`` makes runs to claim: each operation saves a new run's
  step 0 (one user message) and ``store.enqueue``s it (untimed set-up).
- ``ClaimWorker`` loops ``lease = store.claim(worker_id, lease=30)`` then
  ``store.release(lease)`` until a claim comes back empty; one operation is
  one claim and its release.
- ``ClaimSaveWorker`` does what a ``safepoint.Worker`` does for one step of a
  run: claim, ``store.load(run_id)``, append the agent's two messages of
  step 1 and update counters/cursor/state, ``store.save(cp, lease=lease)``,
  ``store.release(lease, status="done")``; one operation is that whole
  sequence.
"""

from __future__ import annotations

import time
from typing import Any

from workloads import agent as agent_workload

import safepoint

LEASE_SECONDS = 30


def run_id(prefix: str, writer: int, number: int) -> str:
    return f"{prefix}-{writer}-{number}"


class QueueFiller:
    def __init__(self, spec: dict[str, Any]) -> None:
        self._store = safepoint.open_store(spec["url"], schema=spec["schema"])
        self._prefix = spec["prefix"]
        self._index = spec["index"]
        self.made = 0

    def block(self, count: int) -> int:
        for _ in range(count):
            cp = safepoint.Checkpoint(run_id=run_id(self._prefix, self._index, self.made))
            cp.messages.append({"role": "user", "content": "process this queued run"})
            self._store.save(cp)
            self._store.enqueue(cp.run_id)
            self.made += 1
        return count

    def result(self) -> dict[str, Any]:
        return {"made": self.made}

    def close(self) -> None:
        self._store.close()


class ClaimWorker:
    def __init__(self, spec: dict[str, Any]) -> None:
        self._store = safepoint.open_store(spec["url"], schema=spec["schema"])
        self._worker_id = f"claimer-{spec['index']}"
        self.claim_seconds: list[float] = []
        self.release_seconds: list[float] = []

    def block(self, count: int) -> int:
        store, done = self._store, 0
        while done < count:
            start = time.perf_counter()
            lease = store.claim(self._worker_id, lease=LEASE_SECONDS)
            claimed = time.perf_counter()
            if lease is None:
                break
            store.release(lease)
            self.claim_seconds.append(claimed - start)
            self.release_seconds.append(time.perf_counter() - claimed)
            done += 1
        return done

    def result(self) -> dict[str, Any]:
        seconds = [c + r for c, r in zip(self.claim_seconds, self.release_seconds, strict=True)]
        return {"seconds": seconds, "claim": self.claim_seconds, "release": self.release_seconds}

    def close(self) -> None:
        self._store.close()


class ClaimSaveWorker:
    def __init__(self, spec: dict[str, Any]) -> None:
        self._store = safepoint.open_store(spec["url"], schema=spec["schema"])
        self._worker_id = f"worker-{spec['index']}"
        self._step = agent_workload.build(1).steps[0]
        self.seconds: list[float] = []

    def block(self, count: int) -> int:
        store, step, done = self._store, self._step, 0
        while done < count:
            start = time.perf_counter()
            lease = store.claim(self._worker_id, lease=LEASE_SECONDS)
            if lease is None:
                break
            cp = store.load(lease.run_id).next()
            step.apply(cp)
            store.save(cp, lease=lease)
            store.release(lease, status=safepoint.Status.DONE)
            self.seconds.append(time.perf_counter() - start)
            done += 1
        return done

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def close(self) -> None:
        self._store.close()
