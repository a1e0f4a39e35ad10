"""Where a save's time goes on SQLite, phase by phase, beside two raw floors.

No target rests on this section: it explains the saves/s ratio. The default
store (scrubbing and blob offload on) runs the simulated agent once more, and
each save is cut into the phases the SQLite driver goes through:

* ``pipeline`` — everything before the transaction: validation, scrubbing,
  encoding, the message delta, and the store's own bookkeeping around them;
* ``BEGIN IMMEDIATE``, the operation's ``statements`` (the head lookup, the
  row insert, and the generator that drives them), ``COMMIT`` (the WAL write
  and its ``fsync``);
* ``after`` — recording in the checkpoint what was stored.

The clock between the phases is the public trace hook: the store is opened
with an observer whose ``query`` method (``safepoint.observe.QueryObserver``)
the driver calls after each statement, ``BEGIN IMMEDIATE`` and ``COMMIT``
included, with how long it took; the save itself is timed around
``store.save``. The observer costs the save a little (a no-op span and the
hook's calls), which lands in ``pipeline`` and ``after``.

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
from safepoint.observe import Attributes, NoObserver

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
    timeline = Timeline()
    store = safepoint.open_store(f"sqlite:///{directory / 'state.db'}", observer=timeline, **(options or {}))
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
        for phase, seconds in _timed_save(timeline, store, cp).items():
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


class Timeline(NoObserver):
    """An observer that keeps when each statement of the store's driver ended, and how long it took."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, float, float]] = []  # (name, start, end)

    def query(self, name: str, seconds: float, attributes: Attributes) -> None:
        end = time.perf_counter()
        self.statements.append((name, end - seconds, end))


def _timed_save(timeline: Timeline, store: safepoint.Store, cp: safepoint.Checkpoint) -> dict[str, float]:
    """One ``store.save(cp)``, cut at the transaction's BEGIN and COMMIT the trace hook reports."""
    timeline.statements.clear()
    t0 = time.perf_counter()
    store.save(cp)
    t5 = time.perf_counter()
    (begin, t1, t2), (commit, t3, t4) = timeline.statements[0], timeline.statements[-1]
    assert (begin, commit) == ("BEGIN IMMEDIATE", "COMMIT"), timeline.statements
    return dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True))
