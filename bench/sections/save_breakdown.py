"""Where a save's time goes on SQLite, phase by phase, beside two raw floors.

No target rests on this section: it explains the saves/s ratio. The default
store (scrubbing and blob offload on) runs the simulated agent once more, and
each save is cut into the phases ``SQLiteDriver.run`` goes through:

* ``pipeline`` — everything before the transaction: validation, scrubbing,
  encoding, the message delta (``calls.save``);
* ``BEGIN IMMEDIATE``, the operation's ``statements`` (the head lookup, the
  row insert, and the generator that drives them), ``COMMIT`` (the WAL write
  and its ``fsync``);
* ``after`` — recording in the checkpoint what was stored (``call.finish``).

The driver's own ``run`` does exactly these steps under its lock; this module
repeats them by hand (through the driver's private ``_connection`` and
``_drive``) only so that it can put a clock between them.

Two raw floors are interleaved with the saves, each on its own file with the
same durability settings (WAL, ``synchronous=FULL``): the benchmark's usual
1 KB single-row commit, and a single-row commit of *the step's own new
content* (its two messages' JSON) — the least a store must write durably for
that step.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from common import fresh_dir
from contenders.raw_sqlite import BLOCK, RawWriter
from workloads.agent import Workload

import safepoint
from safepoint.store import calls

PHASES = ("pipeline", "BEGIN IMMEDIATE", "statements", "COMMIT", "after")


@dataclass(frozen=True, slots=True)
class Breakdown:
    phases: dict[str, list[float]]  # phase -> seconds, one per save
    raw_1kb: list[float]  # seconds per raw 1 KB commit
    raw_payload: list[float]  # seconds per raw commit of the step's own content
    payload_bytes: float  # mean size of that content

    @property
    def saves(self) -> list[float]:
        return [sum(parts) for parts in zip(*self.phases.values(), strict=True)]

    def mean(self, phase: str) -> float:
        return statistics.fmean(self.phases[phase])

    def median(self, phase: str) -> float:
        return statistics.median(self.phases[phase])


def run(workload: Workload, base: Path, options: dict[str, object] | None = None) -> Breakdown:
    directory = fresh_dir(base, "save-breakdown")
    store = safepoint.open_store(f"sqlite:///{directory / 'state.db'}", **(options or {}))
    driver = store.driver
    raw = RawWriter(directory / "raw.db")
    raw_payload = RawWriter(directory / "raw-payload.db")
    payloads = [
        b"\n".join(json.dumps(m, separators=(",", ":")).encode() for m in step.messages)
        for step in workload.steps
    ]
    phases: dict[str, list[float]] = {phase: [] for phase in PHASES}
    cp = safepoint.Checkpoint(run_id="breakdown")
    store.save(cp)
    for agent_step in workload.steps:
        cp.step += 1
        agent_step.apply(cp)
        for phase, seconds in _timed_save(driver, store, cp).items():
            phases[phase].append(seconds)
        if agent_step.step % BLOCK == 0 or agent_step.step == len(workload.steps):
            first = agent_step.step - (agent_step.step - 1) % BLOCK  # this block's first step
            raw.burst(agent_step.step - first + 1)
            for body in payloads[first - 1 : agent_step.step]:
                raw_payload.commit(body)
    store.close()
    breakdown = Breakdown(
        phases=phases,
        raw_1kb=raw.close(),
        raw_payload=raw_payload.close(),
        payload_bytes=statistics.fmean(map(len, payloads)),
    )
    shutil.rmtree(directory)
    return breakdown


def _timed_save(driver: object, store: safepoint.Store, cp: safepoint.Checkpoint) -> dict[str, float]:
    """One ``store.save(cp)``, as ``SQLiteDriver.run`` does it, with a clock between phases."""
    clock = time.perf_counter
    t0 = clock()
    call = calls.save(cp, None, store.pipeline)
    t1 = clock()
    with driver._lock:  # type: ignore[attr-defined]
        conn = driver._connection()  # type: ignore[attr-defined]
        conn.execute("BEGIN IMMEDIATE")
        t2 = clock()
        try:
            result = driver._drive(conn, call.op)  # type: ignore[attr-defined]
            t3 = clock()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        t4 = clock()
    call.finish(result)
    t5 = clock()
    return dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True))
